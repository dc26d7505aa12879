/*
 * ref_cast.c — reference casts; see ref_cast.h for the method.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ref_cast.h"

double ref_decode(const fp8_format *f, uint32_t code)
{
    if (f->kind == FP8_KIND_E8M0)
        return code == 0xFF ? NAN : ldexp(1.0, (int)code - 127);
    int m = f->mbits, e = f->ebits;
    uint32_t sign = (code >> (e + m)) & 1;
    uint32_t E = (code >> m) & ((1u << e) - 1);
    uint32_t M = code & ((1u << m) - 1);
    double s = sign ? -1.0 : 1.0;
    switch (f->kind) {
    case FP8_KIND_IEEE: /* IEEE 754: top exponent is Inf or NaN */
        if (E == (1u << e) - 1)
            return M == 0 ? s * INFINITY : NAN;
        break;
    case FP8_KIND_FN: /* OFP8 E4M3: only S.1111.111 is NaN */
        if (E == (1u << e) - 1 && M == (1u << m) - 1)
            return NAN;
        break;
    case FP8_KIND_FNUZ: /* the negative-zero pattern is the NaN */
        if (sign && E == 0 && M == 0)
            return NAN;
        break;
    default:
        break;
    }
    if (E == 0)
        return s * ldexp((double)M, 1 - f->bias - m);
    return s * ldexp(1.0 + (double)M / (double)(1u << m), (int)E - f->bias);
}

int ref_init(ref_format *r, const fp8_format *f)
{
    r->f = f;
    if (f->kind == FP8_KIND_E8M0) {
        r->n = 255;
        r->val = malloc(256 * sizeof(double));
        if (!r->val)
            return -1;
        for (int c = 0; c < 255; c++)
            r->val[c] = ldexp(1.0, c - 127);
        r->val[255] = ldexp(1.0, 128);
        return 0;
    }
    /* magnitudes 0 .. max: every code below the sign bit that is finite */
    int total = 1 << (f->ebits + f->mbits);
    r->val = malloc((size_t)(total + 1) * sizeof(double));
    if (!r->val)
        return -1;
    int n = 0;
    for (int c = 0; c < total; c++) {
        double v = ref_decode(f, (uint32_t)c);
        if (isnan(v) || isinf(v))
            break; /* specials only sit at the top */
        r->val[n++] = v;
    }
    r->n = n;
    /* the grid continued past max: max plus the step of max's binade */
    double max = r->val[n - 1];
    int ex;
    frexp(max, &ex); /* max = f * 2^ex, f in [0.5,1) */
    r->val[n] = max + ldexp(1.0, ex - 1 - f->mbits);
    return 0;
}

void ref_free(ref_format *r)
{
    free(r->val);
    r->val = NULL;
}

/* The integer significand of grid value v in the step of binade 'at'. */
static int even_at(const ref_format *r, double v, double at)
{
    const fp8_format *f = r->f;
    int ex;
    double step;
    if (at < ldexp(1.0, f->emin))
        step = ldexp(1.0, f->emin - f->mbits);
    else {
        frexp(at, &ex);
        step = ldexp(1.0, ex - 1 - f->mbits);
    }
    double k = v / step;
    return fmod(k, 2.0) == 0.0;
}

static uint32_t nan_code(const fp8_format *f, int neg)
{
    uint32_t sbit = f->sign_mask;
    switch (f->kind) {
    case FP8_KIND_IEEE: /* quiet NaN: top exponent, top mantissa bit; keep sign */
        return (neg ? sbit : 0) | (((1u << f->ebits) - 1) << f->mbits) | (1u << (f->mbits - 1));
    case FP8_KIND_FN:
        return (neg ? sbit : 0) | ((1u << (f->ebits + f->mbits)) - 1);
    case FP8_KIND_FNUZ:
        return sbit;
    case FP8_KIND_FINITE: /* ml_dtypes: the -0 pattern, negated for -NaN */
        return neg ? 0 : sbit;
    default:
        return 0xFF;
    }
}

static uint32_t e8m0_ref(const ref_format *r, int round, int sat, float x, uint32_t rnd, fp8_class *cls)
{
    if (isnan(x)) {
        *cls = FP8_CLASS_NAN;
        return 0xFF;
    }
    if (x <= 0.0f) { /* zero and negatives: not representable */
        *cls = sat ? FP8_CLASS_SATURATED : FP8_CLASS_OVERFLOW;
        return sat ? 0x00 : 0xFF;
    }
    if (isinf(x)) {
        *cls = sat ? FP8_CLASS_SATURATED : FP8_CLASS_OVERFLOW;
        return sat ? 0xFE : 0xFF;
    }
    double v = x;
    int c = 0, top = 256;
    while (top - c > 1) { /* val[c] <= v < val[top], or v below val[0] */
        int mid = (c + top) / 2;
        if (r->val[mid] <= v)
            c = mid;
        else
            top = mid;
    }
    /* val[c] <= v < val[c+1] (or v below 2^-127: c = 0) */
    double lo = r->val[c], hi = r->val[c + 1];
    uint32_t code = (uint32_t)c;
    if (v < lo) { /* below 2^-127 */
        *cls = FP8_CLASS_ROUNDED;
        return 0;
    }
    if (v > lo) {
        int up;
        if (c == 0) /* ml_dtypes: (2^-127, 2^-126) goes up */
            up = round == FP8_ROUND_NEAREST;
        else
            up = round == FP8_ROUND_NEAREST && v >= (lo + hi) / 2; /* ties up */
        if (round == FP8_ROUND_STOCHASTIC) {
            double frac = (v - lo) / (hi - lo);
            up = floor(ldexp(frac, 32)) + (double)rnd >= ldexp(1.0, 32);
        }
        code += (uint32_t)up;
    }
    if (code > 0xFE) {
        int s = sat || round == FP8_ROUND_ZERO;
        *cls = s ? FP8_CLASS_SATURATED : FP8_CLASS_OVERFLOW;
        return s ? 0xFE : 0xFF;
    }
    *cls = v == lo ? FP8_CLASS_EXACT : FP8_CLASS_ROUNDED;
    return code;
}

uint32_t ref_encode(const ref_format *r, int round, int sat, float x, uint32_t rnd, fp8_class *cls)
{
    const fp8_format *f = r->f;
    if (f->kind == FP8_KIND_E8M0)
        return e8m0_ref(r, round, sat, x, rnd, cls);
    int neg = signbit(x) != 0;
    uint32_t sbit = neg ? f->sign_mask : 0;
    int clamps = sat || f->kind == FP8_KIND_FINITE;
    uint32_t maxc = (uint32_t)r->n - 1;
    if (isnan(x)) {
        *cls = FP8_CLASS_NAN;
        return nan_code(f, neg);
    }
    if (isinf(x)) {
        *cls = clamps ? FP8_CLASS_SATURATED : FP8_CLASS_OVERFLOW;
        if (clamps)
            return sbit | maxc;
        return f->has_inf ? (sbit | (maxc + 1)) : nan_code(f, neg);
    }
    double v = fabs((double)x);
    if (v == 0.0) {
        *cls = FP8_CLASS_EXACT;
        return f->has_negzero ? sbit : 0;
    }
    /* binary search: lo = largest index with val[lo] <= v, over val[0..n] */
    int lo = 0, hi = r->n + 1;
    while (hi - lo > 1) {
        int mid = (lo + hi) / 2;
        if (r->val[mid] <= v)
            lo = mid;
        else
            hi = mid;
    }
    int res = lo;
    if (lo < r->n && r->val[lo] != v) {
        double a = r->val[lo], b = r->val[lo + 1];
        if (round == FP8_ROUND_NEAREST) {
            double midv = (a + b) / 2;
            if (v > midv || (v == midv && !even_at(r, a, a)))
                res = lo + 1;
        } else if (round == FP8_ROUND_STOCHASTIC) {
            double frac = (v - a) / (b - a);
            if (floor(ldexp(frac, 32)) + (double)rnd >= ldexp(1.0, 32))
                res = lo + 1;
        }
    }
    if (res >= r->n) { /* past max */
        if (clamps || round == FP8_ROUND_ZERO) {
            *cls = FP8_CLASS_SATURATED;
            return sbit | maxc;
        }
        *cls = FP8_CLASS_OVERFLOW;
        return f->has_inf ? (sbit | (maxc + 1)) : nan_code(f, neg);
    }
    double got = r->val[res];
    if (got == 0.0) {
        *cls = FP8_CLASS_FLUSHED;
        return f->has_negzero ? sbit : 0;
    }
    if (got < ldexp(1.0, f->emin))
        *cls = FP8_CLASS_SUBNORMAL;
    else
        *cls = got == v ? FP8_CLASS_EXACT : FP8_CLASS_ROUNDED;
    return sbit | (uint32_t)res;
}
