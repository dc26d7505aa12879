/*
 * bulk.c — array casts with a per-tensor scale: encode, decode, and
 * quantize-dequantize, returning per-class counts.
 *
 * Two kernels compute the same bits: the portable one runs the scalar cast
 * of cast_impl.h element by element; the vector one (GCC vector extensions,
 * cloned for AVX-512, AVX2 and baseline x86-64, picked at load time) runs the
 * same integer method 16 lanes at a time for nearest and toward-zero
 * rounding.  Stochastic rounding, e8m0, and generic formats whose normal
 * range reaches below float32's are always portable.  The tests and
 * `make check-exhaustive` compare the two on every float32.
 */
#include <string.h>

#include "cast_impl.h"
#include "fpenv.h"

static int force_portable;

void fp8_format_force_portable(int on) { force_portable = on; }

const char *fp8_format_kernel_name(void)
{
    if (force_portable)
        return "portable";
#if defined(__x86_64__)
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f"))
        return "avx512";
    if (__builtin_cpu_supports("avx2"))
        return "avx2";
    return "sse2";
#else
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

typedef uint32_t vu __attribute__((vector_size(64)));
typedef int32_t vi __attribute__((vector_size(64)));
typedef float vf __attribute__((vector_size(64)));
typedef uint8_t vb __attribute__((vector_size(16)));
typedef uint16_t vh __attribute__((vector_size(32)));

#define VL 16
#define SEL(m, a, b) (((a) & (m)) | ((b) & ~(m))) /* m ? a : b, lane-wise */

typedef struct {
    int32_t mbits, emin, bias, lowsub;  /* lowsub = 1 << mbits             */
    uint32_t max_mag, sign_shift, negzero_keep;
    uint32_t inf_code[2], ovf_code[2], nan_code[2]; /* [sign]           */
    uint32_t inf_val[2], ovf_val[2], nan_val[2];    /* decoded bits      */
    int32_t inf_sat, ovf_sat, nearest;              /* -1 or 0 masks     */
} vparams;

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
}

/* Processes n (a multiple of VL) elements.  acc: flushed, subnormal,
 * rounded, saturated, overflow, nan (exact = n - the rest). */
__attribute__((noinline, target_clones("avx512f", "avx2", "default"))) static void
vector_kernel(const vparams *p, int code_bytes, float scale, float scale_inv,
              const float *x, size_t n, void *codes, float *out, uint64_t acc[6])
{
    const vi zero = {0};
    vu c_flush = {0}, c_sub = {0}, c_round = {0}, c_sat = {0}, c_ovf = {0}, c_nan = {0};
    const vi ones = zero + 1;
    const vu uz = {0};
    const vu mbits = (vu)(zero + p->mbits);
    for (size_t i = 0; i < n; i += VL) {
        vf xv;
        memcpy(&xv, x + i, sizeof xv);
        vf y = xv * scale;
        vu u = (vu)y;
        vu a = u & 0x7FFFFFFFu;
        vu neg = u >> 31;
        vi negm = -(vi)neg;
        vi is_nan = (vi)(a > 0x7F800000u);
        vi is_inf = (vi)(a == 0x7F800000u);
        vi is_zero = (vi)(a == 0);
        vi ef = (vi)(a >> 23);
        vi e = (ef + (ones & (ef == 0))) - 127;          /* subnormal: -126 */
        vu sig = (a & 0x7FFFFFu) | ((vu)(ef != 0) & 0x800000u);
        vi d = p->emin - e;
        d &= (d > 0);
        vi s = (23 - p->mbits) + d;
        s = SEL(s > 31, zero + 31, s);
        vu su = (vu)s;
        vu k = sig >> su;
        vu rem = sig & (((vu)ones << su) - 1);
        vu half = (vu)ones << (su - 1);
        vi up = (vi)(rem > half) | ((vi)(rem == half) & -(vi)(k & 1));
        k -= (vu)(up & p->nearest);
        vi biased = e + p->bias;
        biased = SEL(biased < 1, ones, biased);
        vu mag = ((vu)(biased - 1) << mbits) + k;
        vi special = is_nan | is_inf;
        vi ovf = (vi)(mag > p->max_mag) & ~special;
        vi normal = ~(special | ovf);
        vi magzero = (vi)(mag == 0);
        vi flushed = magzero & ~is_zero & normal;
        vi sub = ~magzero & (vi)(mag < (vu)(zero + p->lowsub)) & normal;
        vi rounded = (vi)(rem != 0) & ~magzero & (vi)(mag >= (vu)(zero + p->lowsub)) & normal;

        c_flush -= (vu)flushed;
        c_sub -= (vu)sub;
        c_round -= (vu)rounded;
        c_nan -= (vu)is_nan;
        c_sat -= (vu)((is_inf & p->inf_sat) | (ovf & p->ovf_sat));
        c_ovf -= (vu)((is_inf & ~p->inf_sat) | (ovf & ~p->ovf_sat));

        if (codes) {
            vu sgn = neg << p->sign_shift;
            sgn &= ~(vu)magzero | p->negzero_keep;
            vu code = sgn | mag;
            code = SEL((vu)ovf, SEL((vu)negm, uz + p->ovf_code[1], uz + p->ovf_code[0]), code);
            code = SEL((vu)is_inf, SEL((vu)negm, uz + p->inf_code[1], uz + p->inf_code[0]), code);
            code = SEL((vu)is_nan, SEL((vu)negm, uz + p->nan_code[1], uz + p->nan_code[0]), code);
            if (code_bytes == 1) {
                vb cb = __builtin_convertvector(code, vb);
                memcpy((uint8_t *)codes + i, &cb, sizeof cb);
            } else {
                vh ch = __builtin_convertvector(code, vh);
                memcpy((uint16_t *)codes + i, &ch, sizeof ch);
            }
        }
        if (out) {
            /* value = k * 2^qe, qe = max(e, emin) - mbits >= -136 */
            vi qe = e + d - p->mbits;
            vu p2 = SEL((vu)(qe >= -126), (vu)(qe + 127) << 23, (vu)ones << (vu)(qe + 149));
            p2 = SEL((vu)(qe >= -126), p2, SEL((vu)(qe >= -149), p2, (vu)zero));
            vf mv = __builtin_convertvector((vi)k, vf) * (vf)p2;
            vu bits = (vu)mv;
            bits |= (neg << 31) & (~(vu)magzero | p->negzero_keep);
            bits = SEL((vu)ovf, SEL((vu)negm, uz + p->ovf_val[1], uz + p->ovf_val[0]), bits);
            bits = SEL((vu)is_inf, SEL((vu)negm, uz + p->inf_val[1], uz + p->inf_val[0]), bits);
            bits = SEL((vu)is_nan, SEL((vu)negm, uz + p->nan_val[1], uz + p->nan_val[0]), bits);
            vf o = (vf)bits * scale_inv;
            memcpy(out + i, &o, sizeof o);
        }
    }
    vu cs[6] = {c_flush, c_sub, c_round, c_sat, c_ovf, c_nan};
    for (int c = 0; c < 6; c++)
        for (int l = 0; l < VL; l++)
            acc[c] += cs[c][l];
}

static int vector_ok(const fp8_format *f, const fp8_cast_mode *mode)
{
    return !force_portable && mode->round != FP8_ROUND_STOCHASTIC && f->kind != FP8_KIND_E8M0 &&
           f->emin >= -126 && f->code_bytes <= 2;
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
    return FP8_OK;
}

static void run(const fp8_format *f, const fp8_cast_mode *mode, float scale,
                const float *x, size_t n, void *codes, float *out, fp8_counts *counts)
{
    static const fp8_cast_mode dflt;
    uint64_t cnt[FP8_NCLASS] = {0};
    fp8__fenv env;
    if (!mode)
        mode = &dflt;
    fp8__fenv_enter(&env);
    float scale_inv = 1.0f / scale;
    size_t done = 0;
    if (vector_ok(f, mode)) {
        vparams p;
        uint64_t acc[6] = {0};
        vparams_init(&p, f, mode);
        const size_t chunk = (size_t)1 << 20; /* keeps 32-bit lane counters safe */
        size_t nv = n - n % VL;
        for (size_t i = 0; i < nv; i += chunk) {
            size_t m = nv - i < chunk ? nv - i : chunk;
            vector_kernel(&p, f->code_bytes, scale, scale_inv, x + i, m,
                          codes ? (char *)codes + i * (size_t)f->code_bytes : NULL, out ? out + i : NULL, acc);
        }
        cnt[FP8_CLASS_FLUSHED] = acc[0];
        cnt[FP8_CLASS_SUBNORMAL] = acc[1];
        cnt[FP8_CLASS_ROUNDED] = acc[2];
        cnt[FP8_CLASS_SATURATED] = acc[3];
        cnt[FP8_CLASS_OVERFLOW] = acc[4];
        cnt[FP8_CLASS_NAN] = acc[5];
        cnt[FP8_CLASS_EXACT] = nv - acc[0] - acc[1] - acc[2] - acc[3] - acc[4] - acc[5];
        done = nv;
    }
    if (done < n) {
        fp8_cast_mode m = *mode;
        m.offset += done;
        portable_kernel(f, &m, scale, scale_inv, x + done, n - done,
                        codes ? (char *)codes + done * (size_t)f->code_bytes : NULL, out ? out + done : NULL, cnt);
    }
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
