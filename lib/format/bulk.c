/*
 * bulk.c — array casts with a per-tensor scale: encode, decode, and
 * quantize-dequantize, returning per-class counts.
 *
 * Two kernels compute the same bits: the portable one runs the scalar cast
 * of cast_impl.h element by element; the vector one  runs the
 * same integer method 16 lanes at a time for nearest and toward-zero
 * rounding (kernel_vec.c, built per instruction set, picked at run time).  Stochastic rounding, e8m0, and generic formats whose normal
 * range reaches below float32's are always portable.  The tests and
 * `make check-exhaustive` compare the two on every float32.
 */
#include <math.h>
#include <string.h>

#include "arrays.h"
#include "cast_impl.h"
#include "fpenv.h"
#include "isa.h"

static int force_portable;

void fp8_format_force_portable(int on) { force_portable = on; }

const char *fp8_format_kernel_name(void)
{
    if (force_portable)
        return "portable";
    int isa = fp8__isa_pick();
#if defined(__x86_64__)
    return isa == FP8_ISA_AVX512 ? "avx512" : isa == FP8_ISA_AVX2 ? "avx2" : "sse2";
#else
    (void)isa;
    return "vector";
#endif
}

/* ---- portable kernel ------------------------------------------------------ */

static void store_code(void *codes, int bytes, size_t i, uint32_t c)
{
    if (bytes == 1)
        ((uint8_t *)codes)[i] = (uint8_t)c;
    else if (bytes == 2)
        ((uint16_t *)codes)[i] = (uint16_t)c;
    else
        ((uint32_t *)codes)[i] = c;
}

static uint32_t load_code(const void *codes, int bytes, size_t i)
{
    if (bytes == 1)
        return ((const uint8_t *)codes)[i];
    if (bytes == 2)
        return ((const uint16_t *)codes)[i];
    return ((const uint32_t *)codes)[i];
}

/* codes or out (or both) may be NULL. */
__attribute__((noinline)) static void
portable_kernel(const fp8_format *f, const fp8_cast_mode *mode, float scale,
                float scale_inv, const float *x, size_t n, void *codes,
                float *out, uint64_t cnt[FP8_NCLASS])
{
    const int sat = mode->overflow == FP8_SATURATE;
    const int round = mode->round;
    for (size_t i = 0; i < n; i++) {
        float y = x[i] * scale;
        uint32_t u;
        memcpy(&u, &y, 4);
        uint32_t rnd = round == FP8_ROUND_STOCHASTIC ? fp8__random32(mode->seed, mode->offset + i) : 0;
        fp8_class c;
        uint32_t code = fp8__encode_bits(f, round, sat, u, rnd, &c);
        cnt[c]++;
        if (codes)
            store_code(codes, f->code_bytes, i, code);
        if (out) {
            uint32_t b = fp8__decode_bits(f, code);
            float v;
            memcpy(&v, &b, 4);
            out[i] = v * scale_inv;
        }
    }
}

/* ---- vector kernel -------------------------------------------------------- */

#include "cast_internal.h"

static void sr_fallback(void *ctx, size_t i, size_t k);

static void vparams_init(vparams *p, const fp8_format *f, const fp8_cast_mode *mode)
{
    const int clamps = mode->overflow == FP8_SATURATE || f->kind == FP8_KIND_FINITE;
    memset(p, 0, sizeof *p);
    p->mbits = f->mbits;
    p->emin = f->emin;
    p->bias = f->bias;
    p->lowsub = 1 << f->mbits;
    p->max_mag = f->max_mag;
    p->sign_shift = (uint32_t)(f->bits - 1);
    p->negzero_keep = f->has_negzero ? 0xFFFFFFFFu : 0;
    for (int s = 0; s < 2; s++) {
        uint32_t sgn = s ? f->sign_mask : 0;
        uint32_t hard = f->has_inf ? (sgn | f->inf_code) : fp8__nan_code(f, sgn);
        p->inf_code[s] = clamps ? (sgn | f->max_mag) : hard;
        p->ovf_code[s] = (clamps || mode->round == FP8_ROUND_ZERO) ? (sgn | f->max_mag) : hard;
        p->nan_code[s] = fp8__nan_code(f, sgn);
        p->inf_val[s] = fp8__decode_bits(f, p->inf_code[s]);
        p->ovf_val[s] = fp8__decode_bits(f, p->ovf_code[s]);
        p->nan_val[s] = fp8__decode_bits(f, p->nan_code[s]);
    }
    p->inf_sat = clamps ? -1 : 0;
    p->ovf_sat = (clamps || mode->round == FP8_ROUND_ZERO) ? -1 : 0;
    p->nearest = mode->round == FP8_ROUND_NEAREST ? -1 : 0;
    p->stochastic = mode->round == FP8_ROUND_STOCHASTIC;
    p->e8m0 = f->kind == FP8_KIND_E8M0;
    p->seed = mode->seed;
    p->sr_fallback = sr_fallback;
    float lo = (float)f->min_normal, hi = (float)f->max;
    memcpy(&p->lo_bits, &lo, 4);
    uint32_t hi_bits;
    memcpy(&hi_bits, &hi, 4);
    p->rshift = (uint32_t)(23 - f->mbits);
    p->round_add = mode->round == FP8_ROUND_NEAREST ? (1u << (p->rshift - 1)) - 1 : 0;
    p->round_lsb = mode->round == FP8_ROUND_NEAREST ? 1 : 0;
    p->keep_mask = ~((1u << p->rshift) - 1);
    /* hot path range: float32 bits of min_normal up to the largest |y| that
     * the hot path's add-and-mask rounds to max, not above it (E4M3 nearest:
     * 464, the tie, rounds down to 448's even code; E5M2: below the tie
     * 61440; toward zero: below max plus one step of the grid).  Such a lane is
     * class rounded, as in medium_vec; data cast once before (an in-place
     * active cast) and scaled again puts many lanes there, one float32
     * rounding above max.  Stochastic rounding may round them past max:
     * its range ends at max. */
    uint32_t max_lsb = (hi_bits >> p->rshift) & 1;
    uint32_t past_max = p->stochastic ? 0 : (1u << p->rshift) - 1 - p->round_add - p->round_lsb * max_lsb;
    p->range_bits = hi_bits + past_max - p->lo_bits;
    p->rebias = (uint32_t)(127 - f->bias) << f->mbits;
    p->max_bits = hi_bits;
    p->medium_ok = f->mbits - f->emin <= 127 && f->emin - f->mbits >= -126;
    if (p->medium_ok) {
        p->inv_q = ldexpf(1.0f, f->mbits - f->emin);
        p->q = ldexpf(1.0f, f->emin - f->mbits);
    }
    p->top_bits = p->lo_bits + p->range_bits;
    p->wide_ok = p->medium_ok && mode->round == FP8_ROUND_NEAREST && f->emin - f->mbits + 23 <= 127;
    if (p->wide_ok) {
        float c = ldexpf(1.0f, f->emin - f->mbits + 23);
        memcpy(&p->sub_add, &c, 4);
    }
}

static vec_kernel_fn pick_kernel(void)
{
    int isa = fp8__isa_pick();
    return isa == FP8_ISA_AVX512 ? fp8__vec_kernel_avx512
           : isa == FP8_ISA_AVX2 ? fp8__vec_kernel_avx2
                                 : fp8__vec_kernel_base;
}

int fp8__caster_vec_ok(const fp8_format *f)
{
    return !force_portable && (f->kind == FP8_KIND_E8M0 || f->emin >= -126) && f->code_bytes <= 2;
}

/* ---- public entry points -------------------------------------------------- */

static int check_args(const fp8_format *f, float scale, const void *x, size_t n, const void *o)
{
    if (!f)
        return FP8_ERROR(FP8_EINVAL, "no format given");
    if (n && (!x || !o))
        return FP8_ERROR(FP8_EINVAL, "NULL array for %zu elements", n);
    if (!(scale > 0.0f) || scale > 3.4028235e38f)
        return FP8_ERROR(FP8_EINVAL, "scale %g is not a positive finite number", (double)scale);
    if (!(1.0f / scale <= 3.4028235e38f)) /* below 2^-128: scale_inv = 1/scale is Inf, 0 * Inf NaN */
        return FP8_ERROR(FP8_EINVAL, "scale %g is too small: its inverse scale_inv = 1/scale overflows float32 "
                                     "(the smallest scale is 2^-128 = %g)", (double)scale, 0x1p-128);
    return FP8_OK;
}

/* The vector kernel's six counters (kernel_vec.h order) added to the class
 * counts; exact is what is left of n. */
static void add_counts(uint64_t cnt[FP8_NCLASS], const uint64_t acc[6], size_t n)
{
    static const fp8_class order[6] = {FP8_CLASS_FLUSHED, FP8_CLASS_SUBNORMAL, FP8_CLASS_ROUNDED,
                                       FP8_CLASS_SATURATED, FP8_CLASS_OVERFLOW, FP8_CLASS_NAN};
    uint64_t rest = n;
    for (int k = 0; k < 6; k++) {
        cnt[order[k]] += acc[k];
        rest -= acc[k];
    }
    cnt[FP8_CLASS_EXACT] += rest;
}

void fp8__caster_init(fp8__caster *c, const fp8_format *f, const fp8_cast_mode *mode)
{
    static const fp8_cast_mode dflt;
    c->f = f;
    c->mode = mode ? *mode : dflt;
    c->vec = fp8__caster_vec_ok(f);
    c->fn = c->vec ? pick_kernel() : NULL;
    if (c->vec)
        vparams_init(&c->p, f, &c->mode);
}

/* group g's flags from the class counts before its cast (bit 0 an
 * overflow or saturation, bit 1 a flush), as fp8__caster_run_groups gives
 * them */
static void note_group_flags(unsigned char *gflags, size_t g, const uint64_t cnt[FP8_NCLASS], uint64_t ovf_before,
                             uint64_t flush_before)
{
    if (cnt[FP8_CLASS_SATURATED] + cnt[FP8_CLASS_OVERFLOW] > ovf_before)
        gflags[g] |= 1;
    if (cnt[FP8_CLASS_FLUSHED] > flush_before)
        gflags[g] |= 2;
}

/* Stochastic rounding and e8m0: the vector kernel's scalar fallback for
 * lanes outside its paths (kernel_vec.h): elements i..i+k-1, within one
 * group where the cast is in groups (gscale: then its flags are noted as
 * fp8__caster_run_groups notes them). */
typedef struct {
    const fp8_format *f;
    const fp8_cast_mode *mode;
    float scale, scale_inv;
    const float *x;
    void *codes;
    float *out;
    uint64_t *cnt, index0;
    size_t nfb; /* elements the fallback cast */
    const float *gscale, *ginv;
    size_t glen;
    unsigned char *gflags;
} sr_ctx;

static void sr_fallback(void *ctx, size_t i, size_t k)
{
    sr_ctx *s = ctx;
    fp8_cast_mode m = *s->mode;
    m.offset = s->index0 + i;
    float scale = s->scale, scale_inv = s->scale_inv;
    size_t g = s->gscale ? i / s->glen : 0;
    uint64_t *cnt = s->cnt, o = cnt[FP8_CLASS_SATURATED] + cnt[FP8_CLASS_OVERFLOW], u = cnt[FP8_CLASS_FLUSHED];
    if (s->gscale)
        scale = s->gscale[g], scale_inv = s->ginv[g];
    portable_kernel(s->f, &m, scale, scale_inv, s->x + i, k,
                    s->codes ? (char *)s->codes + i * (size_t)s->f->code_bytes : NULL, s->out ? s->out + i : NULL,
                    cnt);
    if (s->gscale && s->gflags)
        note_group_flags(s->gflags, g, cnt, o, u);
    s->nfb += k;
}

void fp8__caster_run(const fp8__caster *c, float scale, float scale_inv, const float *x, size_t n,
                     void *codes, float *out, uint64_t cnt[FP8_NCLASS], uint64_t offset)
{
    const fp8_format *f = c->f;
    size_t done = 0;
    if (c->vec) {
        uint64_t acc[6] = {0};
        const size_t chunk = (size_t)1 << 20; /* keeps 32-bit lane counters safe */
        size_t nv = n - n % VL;
        vparams p = c->p;
        if (fp8__nt_wanted(f, x, out, n))
            p.nt = 1;
        sr_ctx sc = {f, &c->mode, scale, scale_inv, NULL, NULL, NULL, cnt, 0, 0, NULL, NULL, 0, NULL};
        for (size_t i = 0; i < nv; i += chunk) {
            size_t m = nv - i < chunk ? nv - i : chunk;
            char *cd = codes ? (char *)codes + i * (size_t)f->code_bytes : NULL;
            float *o = out ? out + i : NULL;
            if (p.stochastic || p.e8m0) {
                p.index0 = offset + i;
                p.sr_ctx = &sc;
                sc.x = x + i, sc.codes = cd, sc.out = o, sc.index0 = offset + i;
            }
            c->fn(&p, f->code_bytes, scale, scale_inv, x + i, m, cd, o, acc, NULL, NULL, 0, NULL, NULL);
        }
        add_counts(cnt, acc, nv - sc.nfb);
        done = nv;
    }
    if (done < n) {
        fp8_cast_mode m = c->mode;
        m.offset = offset + done;
        portable_kernel(f, &m, scale, scale_inv, x + done, n - done,
                        codes ? (char *)codes + done * (size_t)f->code_bytes : NULL, out ? out + done : NULL, cnt);
    }
}

void fp8__caster_run_groups(const fp8__caster *c, const float *x, size_t n, size_t glen, const float *gscale,
                            const float *ginv, float *out, void *codes, uint64_t cnt[FP8_NCLASS],
                            unsigned char *gflags, uint64_t offset)
{
    if (c->vec && !c->p.e8m0 && glen % VL == 0 && n % glen == 0) {
        uint64_t acc[6] = {0};
        vparams p = c->p;
        sr_ctx sc = {c->f, &c->mode, 1.0f, 1.0f, x, codes, out, cnt, offset, 0, gscale, ginv, glen, gflags};
        if (p.stochastic) /* (its fallback lanes one by one, with their group's scale) */
            p.index0 = offset, p.sr_ctx = &sc;
        c->fn(&p, c->f->code_bytes, 1.0f, 1.0f, x, n, codes, out, acc, gscale, ginv, glen, gflags, NULL);
        add_counts(cnt, acc, n - sc.nfb);
        return;
    }
    for (size_t g = 0, i = 0; i < n; g++, i += glen) {
        size_t m = n - i < glen ? n - i : glen;
        uint64_t o = cnt[FP8_CLASS_SATURATED] + cnt[FP8_CLASS_OVERFLOW], u = cnt[FP8_CLASS_FLUSHED];
        fp8__caster_run(c, gscale[g], ginv[g], x + i, m, codes ? (char *)codes + i * (size_t)c->f->code_bytes : NULL,
                        out ? out + i : NULL, cnt, offset + i);
        note_group_flags(gflags, g, cnt, o, u);
    }
}

int fp8__caster_run_err(const fp8__caster *c, float scale, float scale_inv, const float *x, size_t n,
                        size_t glen, const float *gscale, const float *ginv, unsigned char *gflags, float *out,
                        uint64_t cnt[FP8_NCLASS], fp8__errsums *es)
{
    if (!c->vec || c->p.stochastic || c->p.e8m0 || !c->p.negzero_keep || n % VL || n > ((size_t)1 << 20) ||
        (gscale && (glen % VL || n % glen)))
        return 0;
    uint64_t acc[6] = {0};
    c->fn(&c->p, c->f->code_bytes, scale, scale_inv, x, n, NULL, out, acc, gscale, ginv, glen, gflags, es);
    add_counts(cnt, acc, n);
    return 1;
}

static void run(const fp8_format *f, const fp8_cast_mode *mode, float scale,
                const float *x, size_t n, void *codes, float *out, fp8_counts *counts)
{
    uint64_t cnt[FP8_NCLASS] = {0};
    fp8__fenv env;
    fp8__caster c;
    fp8__caster_init(&c, f, mode);
    fp8__fenv_enter(&env);
    float scale_inv = 1.0f / scale;
    fp8__caster_run(&c, scale, scale_inv, x, n, codes, out, cnt, c.mode.offset);
    fp8__fenv_leave(&env);
    if (counts)
        memcpy(counts->n, cnt, sizeof cnt);
}

int fp8_format_encode_array(const fp8_format *f, const fp8_cast_mode *mode, float scale,
                            const float *x, size_t n, void *codes, fp8_counts *counts)
{
    int st = check_args(f, scale, x, n, codes);
    if (st)
        return st;
    run(f, mode, scale, x, n, codes, NULL, counts);
    return FP8_OK;
}

int fp8_format_qdq_array(const fp8_format *f, const fp8_cast_mode *mode, float scale,
                         const float *x, size_t n, float *out, fp8_counts *counts)
{
    int st = check_args(f, scale, x, n, out);
    if (!st)
        st = fp8__check_out("fp8_format_qdq_array", x, out, n);
    if (st)
        return st;
    run(f, mode, scale, x, n, NULL, out, counts);
    return FP8_OK;
}

__attribute__((noinline)) static void decode_kernel(const fp8_format *f, float scale_inv,
                                                    const void *codes, size_t n, float *out)
{
    if (f->code_bytes == 1) {
        float table[256];
        for (uint32_t c = 0; c < 256; c++) {
            uint32_t b = fp8__decode_bits(f, c);
            memcpy(&table[c], &b, 4);
        }
        const uint8_t *cb = codes;
        for (size_t i = 0; i < n; i++)
            out[i] = table[cb[i]] * scale_inv;
        return;
    }
    for (size_t i = 0; i < n; i++) {
        uint32_t b = fp8__decode_bits(f, load_code(codes, f->code_bytes, i));
        float v;
        memcpy(&v, &b, 4);
        out[i] = v * scale_inv;
    }
}

int fp8_format_decode_array(const fp8_format *f, float scale_inv, const void *codes,
                            size_t n, float *out)
{
    if (!f)
        return FP8_ERROR(FP8_EINVAL, "no format given");
    if (n && (!codes || !out))
        return FP8_ERROR(FP8_EINVAL, "NULL array for %zu elements", n);
    if (!(scale_inv > 0.0f) || scale_inv > 3.4028235e38f)
        return FP8_ERROR(FP8_EINVAL, "scale_inv %g is not a positive finite number", (double)scale_inv);
    fp8__fenv env;
    fp8__fenv_enter(&env);
    decode_kernel(f, scale_inv, codes, n, out);
    fp8__fenv_leave(&env);
    return FP8_OK;
}
