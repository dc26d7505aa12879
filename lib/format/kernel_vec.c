/*
 * kernel_vec.c — the vector cast kernel (see kernel_vec.h).  The Makefile
 * builds it three times (AVX-512, AVX2, baseline), defining FP8_ISA and
 * the instruction-set flags; GCC vector extensions keep one source for all.
 *
 * Hot path: when every lane's |x*scale| lies in [min_normal, max], or just
 * past max where it rounds down to max (the usual case; range_bits, set in
 * bulk.c), the result is a normal of the format and rounding is the classic
 * add-and-mask on the float32 bits: r = a + (2^(s-1) - 1 + lsb) for nearest
 * even (0 for toward zero), cleared below bit s = 23 - mbits.  r is then the
 * float32 of the rounded value, and its exponent field rebiased is the code.
 * Classes there are only exact or rounded.  Any other vector takes the
 * general body, the lane-wise form of cast_impl.h.
 */
#include <string.h>
#if defined(__AVX512F__) || defined(__AVX2__)
#include <immintrin.h>
#endif

#include "f32bits.h"
#include "kernel_vec.h"
#include "vec_isa.h"
#include "vec_sums.h"

#include "kernel_lanes.h"

/* What a lane-wise path makes of a vector: its codes and x_hat bits (as
 * asked), the lanes of each class (-1 / 0; exact: none of them), the
 * group's flags (bit 0 overflowed or saturated, bit 1 flushed).  Returned
 * by value: the caller's counters stay in registers. */
typedef struct {
    vu16 code, bits;
    vi16 flush, sub, round, sat, ovf, nan;
    unsigned gflags;
} kvec;

#define ALWAYS_INLINE static inline __attribute__((always_inline))

/* A normal lane's rounding: the float32 bits a of |y| to the format's grid
 * by add-and-mask (the file's head), the vparams fields read through F
 * (KU in the lane-wise paths, KV in kernel_body) and the shift rs */
#define ROUND_BITS(a, F, rs) (((a) + (F(round_add) + (((a) >> (rs)) & F(round_lsb)))) & F(keep_mask))

/* kernel_body's wide path: taken from the vector on which WIDE_MIN
 * vectors of one block of WIDE_BLOCK elements (a power of two) have left
 * the hot path for subnormal or flushed lanes, where the hot path's branch
 * would be a coin toss, and kept while each block has as many such
 * vectors (the count and the block noted only off the hot path, which
 * itself tests one flag) */
#define WIDE_BLOCK 256
#define WIDE_MIN 3u
/* Which casts have the path (kernel_body's WIDE): not the baseline build,
 * whose sixteen 128-bit registers hold the hot path's vectors only (the
 * wide path made its plain encode 10% slower); the AVX2 build where the
 * error sums are made (ERR: the statistics' casts), and in a plain cast,
 * per tensor or per group, whose x's first blocks look wide (wide_look:
 * the loop with the path in it ran a quantize-dequantize of uniform x 7 %
 * slower, 4.63-4.72 -> 4.32-4.37 Gelem/s, and of a Gaussian beside 1 in
 * 4096 at 1000 2-2.7x faster, 0.53-0.64 -> 1.22-1.72; 1x128 blocks of
 * log-uniform |x| 4x faster) */
#define WIDE_FOR(ERR) (FP8_NPIECE == 1 || (FP8_NPIECE == 2 && (ERR)))

/* vparams' fields that the lane-wise paths combine with vectors, as
 * vectors.  GCC builds a scalar's broadcast lane by lane in memory where no
 * register holds 16 lanes (vec_isa.h), so the builds without AVX-512 make
 * them once a kernel call (vk_init) and read them there; with AVX-512 a
 * broadcast is one instruction, folded into its use, and vk is not made.
 * KU(f) is field f (a vu16, or with AVX-512 the scalar), KM(f) a mask field
 * as a vi16, KUV(f) f as a vu16 always, KU2(f, s) field f[s], KF(f) a float
 * field; KV(f) the same in kernel_body. */
#define VK_FIELDS(X)                                                                                       \
    X(round_add) X(round_lsb) X(keep_mask) X(rebias) X(lo_bits) X(range_bits) X(max_bits) X(lowsub)       \
    X(ovf_sat) X(inf_sat) X(negzero_keep) X(nearest) X(max_mag) X(emin) X(bias) X(mbits) X(top_bits)      \
    X(sub_add)
#define VK_PAIRS(X) X(ovf_val) X(ovf_code) X(inf_val) X(inf_code) X(nan_val) X(nan_code)
typedef struct {
#define VK_DECL(f) vu16 f;
#define VK_DECL2(f) vu16 f##0, f##1;
    VK_FIELDS(VK_DECL)
    VK_PAIRS(VK_DECL2)
    vf16 inv_q, q;
#undef VK_DECL
#undef VK_DECL2
} vk;
#if FP8_NPIECE == 1
#define KU(f) (P->f) /* (a scalar: the operators broadcast it, as one instruction) */
#define KM(f) (P->f)
#define KUV(f) ((vu16){0} + (uint32_t)P->f)
#define KU2(f, s) ((vu16){0} + (uint32_t)P->f[s])
#define KF(f) (P->f)
#define KV(f) (P.f) /* (kernel_body's own copy of the parameters) */
#else
#define KU(f) (K->f)
#define KM(f) ((vi16)K->f)
#define KUV(f) (K->f)
#define KU2(f, s) (K->f##s)
#define KF(f) (K->f)
#define KV(f) (K->f)
static void vk_init(vk *K, const vparams *P)
{
#define VK_SET(f) K->f = VSPLAT(vu16, (uint32_t)P->f);
#define VK_SET2(f) K->f##0 = VSPLAT(vu16, P->f[0]), K->f##1 = VSPLAT(vu16, P->f[1]);
    VK_FIELDS(VK_SET)
    VK_PAIRS(VK_SET2)
#undef VK_SET
#undef VK_SET2
    K->inv_q = VSPLAT(vf16, P->inv_q);
    K->q = VSPLAT(vf16, P->q);
}
#endif

/* A vector whose lanes are all finite (P->medium_ok): normals rounded as in
 * the hot path (a result above max is an overflow: decided after rounding),
 * subnormals and zeros as k = round(|y| / q) in float, exact.  Its codes
 * when CODES, x_hat's bits when XHAT, the group's flags when FLAGS. */
ALWAYS_INLINE kvec medium_vec(const vparams *P, const vk *K, vu16 a, vu16 neg, vi16 azero, const int FLAGS,
                              const int CODES, const int XHAT)
{
    (void)K;
    const vi16 zero = {0};
    kvec v = {.nan = zero};
    vi16 sub = VLT(a, KU(lo_bits));
    vu16 r = ROUND_BITS(a, KU, P->rshift);
    vi16 ovf = ~sub & VGT(r, KU(max_bits));
    vf16 t = (vf16)a * KF(inv_q);
    vf16 kf = P->nearest ? (t + 0x1p23f) - 0x1p23f : t;
    vu16 ks = (vu16)__builtin_convertvector(kf, vi16);
    vi16 magzero = sub & VEQ(ks, 0);
    vi16 low = VLT(ks, KUV(lowsub));
    vi16 flushed = magzero & ~azero;
    v.flush = flushed;
    v.sub = sub & ~magzero & low;
    v.round = ((sub & ~low) | (~sub & VNE(a & ~KU(keep_mask), 0))) & ~ovf;
    v.sat = ovf & KM(ovf_sat);
    v.ovf = ovf & ~KM(ovf_sat);
    if (FLAGS) /* no branch: whether a vector flushes is a coin toss on FP4 data */
        v.gflags = 2u * (unsigned)!all_lanes(~flushed) + (unsigned)!all_lanes(~ovf);
    vu16 keep_sign = ~(vu16)magzero | KU(negzero_keep);
    vi16 negm = -(vi16)neg;
    if (CODES) {
        vu16 c = SEL((vu16)sub, ks, (r >> P->rshift) - KU(rebias)) | ((neg << P->sign_shift) & keep_sign);
        v.code = SEL((vu16)ovf, SEL((vu16)negm, KU2(ovf_code, 1), KU2(ovf_code, 0)), c);
    }
    if (XHAT) {
        vu16 mb = SEL((vu16)sub, (vu16)(__builtin_convertvector((vi16)ks, vf16) * KF(q)), r);
        mb |= (neg << 31) & keep_sign;
        v.bits = SEL((vu16)ovf, SEL((vu16)negm, KU2(ovf_val, 1), KU2(ovf_val, 0)), mb);
    }
    return v;
}

/* Any vector: the lane-wise form of cast_impl.h (NaN, Inf, overflow,
 * subnormals, flushes); as medium_vec. */
ALWAYS_INLINE kvec general_vec(const vparams *P, const vk *K, vu16 a, vu16 neg, const int FLAGS, const int CODES,
                               const int XHAT)
{
    (void)K;
    kvec v = {.gflags = 0};
    const vi16 zero = {0}, ones = zero + 1;
    const vu16 mbits = KUV(mbits);
    vi16 negm = -(vi16)neg;
    vi16 is_nan = VGT(a, FP8_F32_INF);
    vi16 is_inf = VEQ(a, FP8_F32_INF);
    vi16 is_zero = VEQ(a, 0);
    vi16 ef = (vi16)(a >> 23);
    vi16 e = (ef + (ones & VEQ(ef, 0))) - 127; /* subnormal: -126 */
    vu16 sig = (a & 0x7FFFFFu) | ((vu16)VNE(ef, 0) & 0x800000u);
    vi16 d = KM(emin) - e;
    d &= VGT(d, 0);
    vi16 s = ((vi16){0} + 23 - KM(mbits)) + d;
    s = SEL(VGT(s, 31), zero + 31, s);
    vu16 su = (vu16)s;
    vu16 kk = sig >> su;
    vu16 rem = sig & (((vu16)ones << su) - 1);
    vu16 half = (vu16)ones << (su - 1);
    vi16 up = VGT(rem, half) | (VEQ(rem, half) & -(vi16)(kk & 1));
    kk -= (vu16)(up & KM(nearest));
    vi16 biased = e + KM(bias);
    biased = SEL(VLT(biased, 1), ones, biased);
    vu16 mag = ((vu16)(biased - 1) << mbits) + kk;
    vi16 special = is_nan | is_inf;
    vi16 ovf = VGT(mag, KU(max_mag)) & ~special;
    vi16 normal = ~(special | ovf);
    vi16 magzero = VEQ(mag, 0);
    vi16 flushed = magzero & ~is_zero & normal;
    vi16 sub = ~magzero & VLT(mag, KUV(lowsub)) & normal;
    vi16 rounded = VNE(rem, 0) & ~magzero & VGE(mag, KUV(lowsub)) & normal;

    v.flush = flushed, v.sub = sub, v.round = rounded, v.nan = is_nan;
    v.sat = (is_inf & KM(inf_sat)) | (ovf & KM(ovf_sat));
    v.ovf = (is_inf & ~KM(inf_sat)) | (ovf & ~KM(ovf_sat));
    v.gflags = FLAGS ? (unsigned)!all_lanes(~(is_inf | ovf)) + 2u * (unsigned)!all_lanes(~flushed) : 0;

    if (CODES) {
        vu16 sgn = neg << P->sign_shift;
        sgn &= ~(vu16)magzero | KU(negzero_keep);
        vu16 c = sgn | mag;
        c = SEL((vu16)ovf, SEL((vu16)negm, KU2(ovf_code, 1), KU2(ovf_code, 0)), c);
        c = SEL((vu16)is_inf, SEL((vu16)negm, KU2(inf_code, 1), KU2(inf_code, 0)), c);
        v.code = SEL((vu16)is_nan, SEL((vu16)negm, KU2(nan_code, 1), KU2(nan_code, 0)), c);
    }
    if (XHAT) {
        /* value = kk * 2^qe, qe = max(e, emin) - mbits >= -136 */
        vi16 qe = e + d - KM(mbits);
        vu16 p2 = SEL((vu16)VGE(qe, -126), (vu16)(qe + 127) << 23, (vu16)ones << (vu16)(qe + 149));
        p2 = SEL((vu16)VGE(qe, -126), p2, SEL((vu16)VGE(qe, -149), p2, (vu16)zero));
        vf16 mv = __builtin_convertvector((vi16)kk, vf16) * (vf16)p2;
        vu16 b = (vu16)mv;
        b |= (neg << 31) & (~(vu16)magzero | KU(negzero_keep));
        b = SEL((vu16)ovf, SEL((vu16)negm, KU2(ovf_val, 1), KU2(ovf_val, 0)), b);
        b = SEL((vu16)is_inf, SEL((vu16)negm, KU2(inf_val, 1), KU2(inf_val, 0)), b);
        v.bits = SEL((vu16)is_nan, SEL((vu16)negm, KU2(nan_val, 1), KU2(nan_val, 0)), b);
    }
    return v;
}

/* An e8m0 vector (y's bits u, |y|'s a; rnd: 32 random bits a lane for
 * stochastic rounding, else unused): positive normals below 2^127 are the
 * exponent field, + 1 when rounding goes up, exact when the fraction is 0;
 * zeros and negatives (-Inf among them) are outside e8m0: code 0 (2^-127,
 * saturated) or NaN (overflow), as cast_impl.h.  0 when a lane is neither
 * (the caller casts the vector by its scalar fallback); else *v holds the
 * codes, x_hat's bits and the rounded, saturated and overflow lanes. */
ALWAYS_INLINE int e8m0_vec(const vparams *P, const vk *K, vu16 u, vu16 a, vu16 rnd, kvec *v)
{
    (void)K;
    const vu16 uz = {0};
    vi16 hot = VLE(u - 0x800000u, 0x7F000000u - 1 - 0x800000u);
    vi16 outside = (VGE(u, 0x80000000u) | VEQ(a, 0)) & VLE(a, FP8_F32_INF);
    if (!all_lanes(hot | outside))
        return 0;
    vu16 frac = u & 0x7FFFFFu, up;
    if (P->stochastic)
        up = (vu16)VLT((frac << 9) + rnd, frac << 9);
    else if (P->nearest)
        up = (vu16)VGE(frac, 0x400000u);
    else
        up = uz;
    *v = (kvec){.code = (u >> 23) - up}; /* up is -1 or 0 */
    v->bits = v->code << 23;
    v->round = hot & VNE(frac, 0);
    if (!all_lanes(hot)) {
        vu16 sat = (vu16)(outside & KM(inf_sat));
        v->sat = (vi16)sat;
        v->ovf = outside & ~(vi16)sat;
        v->code = SEL((vu16)outside, SEL(sat, uz, uz + 0xFFu), v->code);
        v->bits = SEL((vu16)outside, SEL(sat, uz + 0x400000u, KU2(nan_val, 0)), v->bits);
    }
    return 1;
}

/* The kernel's body, built for the cases the loop can be specialised on:
 * GS whether scales come per group, SPECIAL whether the rounding may be
 * stochastic or the format e8m0 (read from P; 0: neither), CODES and OUT
 * whether codes and x_hat are written, ERR whether the error sums are made
 * (es; only with SPECIAL 0), NT how x_hat is stored (nt_mode).  Constants
 * at each call below, so that the compiler drops the branches and keeps the
 * parameters in registers. */
static inline __attribute__((always_inline)) void kernel_body(FP8_VEC_KERNEL_ARGS, const int GS,
                                                              const int SPECIAL, const int CODES,
                                                              const int OUT, const int ERR, const int NT,
                                                              const int WIDE)
{
    /* the error sums (fp8__err_add's): float32 partials of 16 vectors
     * added into double lanes, the lane maxima of |x - x_hat| and of the
     * |x| and |x_hat| bits */
    ad8 E2 = {0}, Q2 = {0}, XQ = {0}; /* (accumulators: vec_isa.h) */
    af16 e2 = {0}, q2 = {0}, xq2 = {0}, me = {0};
    au16 bmax = {0};
    int eblk = 0;
    float sinv_hi = 0.0f; /* the largest scale_inv used (a bound on the hot path's |x_hat|) */
#if FP8_NPIECE == 1
#define vscale scale
#define vsinv scale_inv
#else
    vf16 vscale = VSPLAT(vf16, scale), vsinv = VSPLAT(vf16, scale_inv); /* (per group where GS) */
#endif
    if (ERR) {
        vf16 me0;
        memcpy(&me0, es->me, 64);
        me = VA_MAKE(af16, me0);
    }
/* x_hat o of the vector at i: stored where wanted, its error terms summed where wanted */
#define EMIT(o_, HOT)                                                                                      \
    do {                                                                                                   \
        if (OUT)                                                                                           \
            STORE_OUT(out + i, o_);                                                                        \
        if (ERR)                                                                                           \
            ERR_ADD(xv, o_, HOT);                                                                          \
    } while (0)
/* x_hat of a vector on the hot or the wide path from its magnitude's bits
 * m_ (in y's units) and x's sign; without OUT the error terms are made from
 * |x| and |x_hat| (the same bits: x and x_hat share their sign) */
#define EMIT_MAG(m_)                                                                                       \
    do {                                                                                                   \
        if (OUT) {                                                                                         \
            vf16 o_ = (vf16)((m_) | (u & 0x80000000u)) * vsinv;                                           \
            EMIT(o_, 1);                                                                                   \
        } else if (ERR) {                                                                                  \
            vf16 xa_ = (vf16)((vu16)xv & FP8_F32_ABS);                                                     \
            ERR_ADD(xa_, (vf16)(m_) * vsinv, 1);                                                           \
        }                                                                                                  \
    } while (0)
/* codes and x_hat of a vector whose magnitudes r_ (y's units, zero lanes
 * included) lie on the format's grid, at most max: the hot path's and the
 * saturating path's */
#define EMIT_GRID(r_)                                                                                      \
    do {                                                                                                   \
        if (CODES) {                                                                                       \
            vu16 code_ = ((((r_) >> P.rshift) - KV(rebias)) & (vu16)VNE(a, 0)) | (u >> 31 << P.sign_shift); \
            store_codes(codes, code_bytes, i, code_);                                                      \
        }                                                                                                  \
        EMIT_MAG(r_);                                                                                      \
    } while (0)
/* (HOT: a hot-path vector, whose |x_hat| is at most max * scale_inv:
 * es->hotbound covers it, only |x| enters bmax) */
#define ERR_ADD(xv_, o_, HOT)                                                                              \
    do {                                                                                                   \
        vf16 qv_ = (o_);                                                                                   \
        ERR_STEP(xv_, qv_);                                                                                \
        if (HOT)                                                                                           \
            VA_FN(bmax, fp8_pmaxu, (vu16)(xv_) & FP8_F32_ABS);                                             \
        else                                                                                               \
            VA_FN(bmax, fp8_pmaxu, umax16((vu16)(xv_) & FP8_F32_ABS, (vu16)qv_ & FP8_F32_ABS));            \
        if (++eblk == 16) {                                                                                \
            ACC(E2, e2);                                                                                   \
            ACC(Q2, q2);                                                                                   \
            ACC(XQ, xq2);                                                                                  \
            e2 = q2 = xq2 = (af16){0};                                                                     \
            eblk = 0;                                                                                      \
        }                                                                                                  \
    } while (0)
    /* a local copy: the stores through out and codes could alias *p as far
     * as the compiler knows, which would reload every parameter every step */
    const vparams P = *p;
#if FP8_NPIECE == 1
    const vk *K = NULL;
#else
    vk Kv;
    vk_init(&Kv, &P);
    const vk *K = &Kv;
#endif
    /* x_hat's stores: ordinary, or past the caches (NT, nt_mode) */
#if defined(__AVX512F__) || defined(__AVX2__)
#if defined(__AVX512F__)
    /* (NT 2, out 16-byte aligned: x_hat's lines joined across vectors, nt_carry) */
    const unsigned ntdl = NT == 2 ? (unsigned)((uintptr_t)out & 63) / 4 : 0;
    const __m512i ntidx = NT == 2 ? nt_carry_idx(ntdl) : _mm512_setzero_si512();
    __m512 ntc = _mm512_setzero_ps();
#define NT_STORE16(d_, o_) nt_carry(out, i, (o_), &ntc, ntdl, ntidx)
#else
#define NT_STORE16(d_, o_) nt_quarters((d_), (o_))
#endif
#define STORE_OUT(d_, o_)                                                                                  \
    do {                                                                                                   \
        if (NT == 1)                                                                                       \
            nt_whole((d_), (o_));                                                                          \
        else if (NT == 2)                                                                                  \
            NT_STORE16((d_), (o_));                                                                        \
        else                                                                                               \
            VSTORE((d_), (o_));                                                                            \
    } while (0)
#else
#define STORE_OUT(d_, o_) VSTORE((d_), (o_))
    (void)NT; /* (nt_mode: always 0 here) */
#endif
    const vi16 zero = {0};
    au16 c_flush = {0}, c_sub = {0}, c_round = {0}, c_sat = {0}, c_ovf = {0}, c_nan = {0};
    /* the rounded lanes of the specialised hot path and of the wide path,
     * the wide path's flushed and subnormal ones (c_round's, c_flush's, c_sub's) */
    uint64_t n_round = 0, n_flush = 0, n_sub = 0;
    const vu16 uz = {0};
    size_t g = 0, gleft = glen;
    /* the wide path's state: nothot vectors of the block ending before
     * element blk_end would take it */
    int wide = 0;
    unsigned nothot = 0;
    size_t blk_end = 0;
#define WIDE_BLOCK_AT()                                                                                    \
    do {                                                                                                   \
        if (i >= blk_end) {                                                                                \
            wide = wide && nothot >= WIDE_MIN;                                                             \
            nothot = 0;                                                                                    \
            blk_end = (i | (WIDE_BLOCK - 1)) + 1;                                                          \
        }                                                                                                  \
    } while (0)
    /* stochastic rounding's keyed counters (random16) */
    const vq lane = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
    const uint64_t kmul = 0x9E3779B97F4A7C15ull;
    const vq radd = vq_fill(P.seed * 0x94D049BB133111EBull), rstep = vq_fill((uint64_t)VL * kmul);
    vq rz = (lane + vq_fill(P.index0)) * kmul + vq_fill(P.seed ^ 0xD1B54A32D192ED03ull);
    size_t rz_at = 0; /* the element rz is keyed for: advanced only where used (a 1024-bit vector lives on the stack) */
#define RZ_SYNC()                                                                                          \
    do {                                                                                                   \
        for (; rz_at < i; rz_at += VL)                                                                     \
            rz += rstep;                                                                                   \
    } while (0)
    /* With AVX-512 a statistics cast with stream stores loads x a vector
     * ahead (xnext), before the stores of the vector in hand: where out
     * lies 64-127 bytes past x within a 4 KiB page, the next load otherwise
     * waited on those stores (4K aliasing: the same low address bits),
     * 0.72-0.87 Gelem/s against 1.35-1.43 for an all-statistics cast of
     * 4096^2 on C, and 1.36-1.44 with it; other places of out unchanged.
     * The plain casts keep their loads in place (loaded ahead, `make bench
     * BENCH=formats`'s qdq ran 10-15 % slower), and so does the AVX2 build
     * (its statistics casts ran 25 % slower: two more of its sixteen
     * registers; it showed no such cliff, bound by its arithmetic). */
    const int ahead = NT && ERR && FP8_NPIECE == 1;
    vf16 xnext = {0};
    if (ahead && n)
        memcpy(&xnext, x, sizeof xnext);
    for (size_t i = 0; i < n; i += VL) {
        vf16 xv;
        if (P.prefetch) /* (a step reads VL = 16 floats: one 64-byte line) */
            __builtin_prefetch((const char *)(x + i) + P.prefetch, 0, 1);
        if (ahead) {
            xv = xnext;
            memcpy(&xnext, x + (i + VL < n ? i + VL : i), sizeof xnext);
        } else {
            memcpy(&xv, x + i, sizeof xv);
        }
        if (GS) {
            if (gleft == 0)
                g++, gleft = glen;
            gleft -= VL;
            scale = gscale[g];
            scale_inv = ginv[g];
#if FP8_NPIECE > 1
            vscale = VSPLAT(vf16, scale), vsinv = VSPLAT(vf16, scale_inv);
#endif
        }
        vf16 y = xv * vscale;
        vu16 u = (vu16)y;
        vu16 a = u & FP8_F32_ABS;
        if (SPECIAL && P.e8m0) {
            vu16 rnd = uz;
            if (P.stochastic) {
                RZ_SYNC();
                rnd = random16(rz, radd);
            }
            kvec v;
            if (!e8m0_vec(&P, K, u, a, rnd, &v)) {
                P.sr_fallback(P.sr_ctx, i, VL);
                continue;
            }
            VA_OP(c_round, -, (vu16)v.round);
            VA_OP(c_sat, -, (vu16)v.sat);
            VA_OP(c_ovf, -, (vu16)v.ovf);
            if (CODES)
                store_codes(codes, code_bytes, i, v.code);
            if (OUT) {
                vf16 o = (vf16)v.bits * vsinv;
                STORE_OUT(out + i, o);
            }
            continue;
        }
        if (WIDE && !SPECIAL && wide && all_lanes(VLE(a, KV(top_bits)))) {
            /* the wide path: every lane finite and none past max; normals
             * as on the hot path, subnormal lanes rounded to the step q by
             * one float32 add of sub_add (nearest even: its ulp is q), k =
             * the sum's bits - sub_add's (2^mbits: rounded up to
             * min_normal, whose code that is); classes as medium_vec's */
            const vu16 cb = (vu16){0} + KV(sub_add);
            vf16 t = (vf16)a + (vf16)cb;
            vu16 k = (vu16)t - cb;
            vu16 r = ROUND_BITS(a, KV, P.rshift);
            /* (the classes as lane bits, counted by popcount: wide_classes) */
#if defined(__AVX512F__)
            wide_lanes w = wide_classes(a, k, KV(lo_bits), KV(lowsub), ~KV(keep_mask));
#define WIDE_SEL(x_, y_) sel_bits(w.sub, (x_), (y_))
#else
            vi16 sub = VLT(a, KV(lo_bits));
            wide_lanes w = wide_classes(sub, a, k, KV(lowsub), ~KV(keep_mask));
#define WIDE_SEL(x_, y_) SEL((vu16)sub, (x_), (y_))
#endif
            n_flush += (unsigned)__builtin_popcount(w.flush);
            n_sub += (unsigned)__builtin_popcount(w.subres);
            n_round += (unsigned)__builtin_popcount(w.round);
            WIDE_BLOCK_AT();
            nothot += w.subnz != 0;
            if (GS && gflags)
                gflags[g] |= (unsigned char)(2u * (w.flush != 0));
            if (CODES) {
                vu16 code = WIDE_SEL(k, (r >> P.rshift) - KV(rebias)) | (u >> 31 << P.sign_shift);
                store_codes(codes, code_bytes, i, code);
            }
            EMIT_MAG(WIDE_SEL((vu16)(t - (vf16)cb), r));
#undef WIDE_SEL
            continue;
        }
        int hot = all_in_range(a, KV(lo_bits), KV(range_bits));
        if (!SPECIAL && hot) {
            /* the usual vector, nearest or toward zero on a format with -0
             * (the callers' condition for SPECIAL = 0): the same arithmetic
             * as below with keep_sign all ones and every lane in range
             * (the sign and zero lanes made here only where used) */
            vu16 r = ROUND_BITS(a, KV, P.rshift);
            n_round += count_nonzero(a, (vu16){0} + ~KV(keep_mask));
            EMIT_GRID(r);
            continue;
        }
        if (!SPECIAL && P.ovf_sat && all_in_range(a, KV(lo_bits), FP8_F32_INF - 1u - KV(lo_bits))) {
            /* a saturating vector: every lane finite, normal or zero, some
             * past top_bits (they round past max): those saturate to max,
             * as medium_vec (ovf_code and ovf_val are max's where ovf_sat),
             * class saturated, not rounded; the others as on the hot path.
             * An MX block whose amax has a significand above 1.8125 (E4M3)
             * always holds one: most vectors of uniform data, about one in
             * eight of a Gaussian's, 2.6x the hot path's time in medium_vec */
            vi16 sat = VGT(a, KV(top_bits));
            vu16 r = umin16(ROUND_BITS(a, KV, P.rshift), (vu16){0} + KV(max_bits));
            n_round += count_nonzero(a & ~(vu16)sat, (vu16){0} + ~KV(keep_mask));
            VA_OP(c_sat, -, (vu16)sat);
            if (GS && gflags) /* (a lane saturated: the hot path's test failed on these lanes) */
                gflags[g] |= 1u;
            EMIT_GRID(r);
            continue;
        }
        vu16 neg = u >> 31;
        vi16 azero = VEQ(a, 0);
        vi16 inrange = ~zero;
        /* stochastic rounding: the lanes below the format's normal range
         * (a normal float32 |y|) are rounded here too (sr_sub), and so are
         * finite ones past max where the format saturates; the others
         * outside the hot path (float32 subnormals, overflowing, NaN) are
         * cast one by one by the scalar fallback after the vector's store
         * overwrote them with its hot-path guess */
        int partial = SPECIAL && P.stochastic && !hot;
        if (partial)
            inrange = VLE(a - KV(lo_bits), KV(range_bits)) | azero;
        if (partial || hot) {
            vu16 r, code = uz;
            vi16 sub = zero, flushed = zero, over = zero;
            if (SPECIAL && P.stochastic) {
                /* up with probability rem / 2^rshift: the fraction rem, moved
                 * to the top of 32 bits, plus 32 random bits carries out */
                vu16 frac = (a & ~KV(keep_mask)) << (32 - P.rshift);
                RZ_SYNC();
                vu16 rnd = random16(rz, radd);
                vu16 carry = (vu16)VLT(frac + rnd, frac);
                r = (a & KV(keep_mask)) + (carry & (1u << P.rshift));
                if (partial) {
                    sub = VGE(a, 0x00800000u) & VLT(a, KV(lo_bits));
                    if (!all_lanes(~sub)) {
                        vu16 mag = sr_sub(&P, a, rnd) & (vu16)sub;
                        flushed = sub & VEQ(mag, 0);
                        VA_OP(c_flush, -, (vu16)flushed);
                        VA_OP(c_sub, -, (vu16)(sub & ~flushed & VLT(mag, (uint32_t)P.lowsub)));
                        VA_OP(c_round, -, (vu16)(sub & VEQ(mag, (uint32_t)P.lowsub)));
                        vu16 rs = (vu16)(__builtin_convertvector(mag, vf16) * VSPLAT(vf16, P.q));
                        r = (r & ~(vu16)sub) | (rs & (vu16)sub);
                        code = mag;
                        if (GS && gflags && !all_lanes(~flushed))
                            gflags[g] |= 2u;
                    }
                    /* a finite lane past max where the format saturates:
                     * rounded on max's grid, past max it saturates (class
                     * saturated), else it came down to max (rounded); as
                     * NVFP4's block maxima often lie, their E4M3 scales
                     * rounded down */
                    if (P.ovf_sat) {
                        over = VGT(a, KV(lo_bits) + KV(range_bits)) & VLT(a, FP8_F32_INF);
                        if (!all_lanes(~over)) {
                            vi16 sat = over & VGT(r, KV(max_bits));
                            r = umin16(r, (vu16){0} + KV(max_bits));
                            VA_OP(c_sat, -, (vu16)sat);
                            VA_OP(c_round, -, (vu16)(over & ~sat));
                            if (GS && gflags && !all_lanes(~sat))
                                gflags[g] |= 1u;
                        }
                    }
                }
            } else {
                r = ROUND_BITS(a, KV, P.rshift);
            }
            vu16 keep_sign = ~(vu16)(azero | flushed) | KV(negzero_keep); /* fnuz: no -0 */
            VA_OP(c_round, -, (vu16)(inrange & VNE(a & ~KV(keep_mask), 0)));
            if (CODES) {
                code |= (((r >> P.rshift) - KV(rebias)) & ~(vu16)(azero | sub)) | ((neg << P.sign_shift) & keep_sign);
                store_codes(codes, code_bytes, i, code);
            }
            if (OUT) {
                vf16 o = (vf16)(r | ((neg << 31) & keep_sign)) * vsinv;
                STORE_OUT(out + i, o);
            }
            if (SPECIAL && partial) /* rare: the mask is read lane by lane only here */
                for (unsigned miss = ~lane_bits(inrange | sub | over) & 0xFFFFu; miss; miss &= miss - 1)
                    P.sr_fallback(P.sr_ctx, i + (size_t)__builtin_ctz(miss), 1);
            continue;
        }
        /* (counted where the wide path would have taken it: a lane past
         * max, as MX blocks' saturating maxima, gains nothing there) */
        if (WIDE && !SPECIAL) {
            WIDE_BLOCK_AT();
            nothot += (unsigned)all_lanes(VLE(a, KV(top_bits)));
            if (nothot >= WIDE_MIN)
                wide = P.wide_ok;
        }
        /* every lane finite: medium_vec; any other vector: general_vec */
        kvec v = P.medium_ok && all_lanes(VLT(a, FP8_F32_INF))
                     ? medium_vec(&P, K, a, neg, azero, gflags != NULL, CODES, OUT || ERR)
                     : general_vec(&P, K, a, neg, gflags != NULL, CODES, OUT || ERR);
        VA_OP(c_flush, -, (vu16)v.flush);
        VA_OP(c_sub, -, (vu16)v.sub);
        VA_OP(c_round, -, (vu16)v.round);
        VA_OP(c_sat, -, (vu16)v.sat);
        VA_OP(c_ovf, -, (vu16)v.ovf);
        VA_OP(c_nan, -, (vu16)v.nan);
        if (gflags)
            gflags[g] |= (unsigned char)v.gflags;
        if (CODES)
            store_codes(codes, code_bytes, i, v.code);
        if (OUT || ERR) {
            vf16 o = (vf16)v.bits * vsinv;
            EMIT(o, 0);
        }
    }
#undef EMIT
#undef EMIT_MAG
#undef EMIT_GRID
#undef ERR_ADD
#undef WIDE_BLOCK_AT
#undef vscale
#undef vsinv
#undef STORE_OUT
#if defined(__AVX512F__)
    if (NT == 2)
        nt_carry_end(out, n, ntc, ntdl);
#endif
#undef NT_STORE16
#if defined(__AVX512F__) || defined(__AVX2__)
    if (NT) /* (the stores are weakly ordered: done before another thread reads out) */
        _mm_sfence();
#endif
    if (ERR) {
        if (eblk) {
            ACC(E2, e2);
            ACC(Q2, q2);
            ACC(XQ, xq2);
        }
        vd8 e2d = VA_GET(vd8, E2), q2d = VA_GET(vd8, Q2), xqd = VA_GET(vd8, XQ);
        for (int l = 0; l < 8; l++)
            es->e2[l] += e2d[l], es->q2[l] += q2d[l], es->xq[l] += xqd[l];
        vf16 mev = VA_GET(vf16, me);
        memcpy(es->me, &mev, 64);
        vu16 bm = VA_GET(vu16, bmax);
        for (int l = 0; l < VL; l++)
            es->maxbits = bm[l] > es->maxbits ? bm[l] : es->maxbits;
        /* the largest scale_inv used: groups 0 .. g (after the loop, not
         * in it: a running maximum there was a chain through the stack, a
         * store and a load every vector, 20 % of a group-scaled cast) */
        if (GS && n)
            sinv_hi = largest(ginv, g + 1);
        /* the hot path's r is at most max, so its |x_hat| at most max * scale_inv */
        uint32_t hb = fp8__float_to_bits(fp8__bits_to_float(P.max_bits) * (GS ? sinv_hi : scale_inv));
        es->hotbound = hb > es->hotbound ? hb : es->hotbound;
    }
    vu16 cs[6] = {VA_GET(vu16, c_flush), VA_GET(vu16, c_sub), VA_GET(vu16, c_round),
                  VA_GET(vu16, c_sat),   VA_GET(vu16, c_ovf), VA_GET(vu16, c_nan)};
    for (int c = 0; c < 6; c++)
        for (int l = 0; l < VL; l++)
            acc[c] += cs[c][l];
    acc[0] += n_flush, acc[1] += n_sub, acc[2] += n_round;
}

#define KERNEL_BODY_W(GS, SPECIAL, CODES, OUT, ERR, NT, W)                                                \
    kernel_body(p, code_bytes, scale, scale_inv, x, n, codes, out, acc, gscale, ginv, glen, gflags, es, GS,  \
                SPECIAL, CODES, OUT, ERR, NT, W)
#define KERNEL_CALL(GS, SPECIAL, CODES, OUT, ERR) KERNEL_BODY_W(GS, SPECIAL, CODES, OUT, ERR, 0, WIDE_FOR(ERR))
/* the plain cases that write x_hat: built for each way of storing it */
#define KERNEL_CALL_NT_W(GS, ERR, W)                                                                       \
    do {                                                                                                   \
        if (nt == 1)                                                                                       \
            KERNEL_BODY_W(GS, 0, 0, 1, ERR, 1, W);                                                         \
        else if (nt == 2)                                                                                  \
            KERNEL_BODY_W(GS, 0, 0, 1, ERR, 2, W);                                                         \
        else                                                                                               \
            KERNEL_BODY_W(GS, 0, 0, 1, ERR, 0, W);                                                         \
    } while (0)
#define KERNEL_CALL_NT(GS, ERR) KERNEL_CALL_NT_W(GS, ERR, WIDE_FOR(ERR))

/* 1 when a plain cast (no error sums) goes to the loops specialised below
 * SPECIAL: nearest or toward zero, not e8m0, a format with -0, codes or
 * x_hat wanted.  (A macro: as a static function it changed the register
 * allocation of the whole entry, whose loops are sensitive to placement.) */
#define PLAIN_SPECIALISED(p, codes, out) (!((p)->e8m0 || (p)->stochastic || !(p)->negzero_keep || !((codes) || (out))))

/* How x_hat goes to out (vparams.nt asks for non-temporal stores): 1 a
 * whole vector a store where out is aligned to it, 2 where it is 16-byte
 * aligned (as malloc gives): with AVX-512 whole lines joined across
 * vectors (nt_carry), with AVX2 four 16-byte stores; else 0, ordinary
 * stores; always 0 without AVX2 */
static int nt_mode(const vparams *p, const float *out)
{
#if defined(__AVX512F__) || defined(__AVX2__)
    if (!p->nt || !out)
        return 0;
    return ((uintptr_t)out & (NT_WHOLE - 1)) == 0 ? 1 : ((uintptr_t)out & 15) == 0 ? 2 : 0;
#else
    (void)p, (void)out;
    return 0;
#endif
}

#if FP8_NPIECE == 2
static __attribute__((noinline)) void kernel_all(FP8_VEC_KERNEL_ARGS) /* (the entry below) */
#else
void FN(fp8__vec_kernel_)(FP8_VEC_KERNEL_ARGS)
#endif
{
    const int nt = nt_mode(p, out);
    if (es) { /* the caller's condition: the plain case, no codes */
        switch ((gscale ? 2 : 0) | (out ? 1 : 0)) {
        case 0: KERNEL_CALL(0, 0, 0, 0, 1); break;
        case 1: KERNEL_CALL_NT(0, 1); break;
        case 2: KERNEL_CALL(1, 0, 0, 0, 1); break;
        default: KERNEL_CALL_NT(1, 1); break;
        }
        return;
    }
    if (!PLAIN_SPECIALISED(p, codes, out)) { /* not specialised further */
        KERNEL_CALL(gscale != NULL, 1, codes != NULL, out != NULL, 0);
        return;
    }
    switch ((gscale ? 4 : 0) | (codes ? 2 : 0) | (out ? 1 : 0)) {
    case 1: KERNEL_CALL_NT(0, 0); break;
    case 2: KERNEL_CALL(0, 0, 1, 0, 0); break;
    case 3: KERNEL_CALL(0, 0, 1, 1, 0); break;
    case 5: KERNEL_CALL_NT(1, 0); break;
    case 6: KERNEL_CALL(1, 0, 1, 0, 0); break;
    default: KERNEL_CALL(1, 0, 1, 1, 0); break;
    }
}

#if FP8_NPIECE == 2
/* 1 when a plain cast looks like one that keeps the wide path on: in x's
 * first WIDE_LOOK blocks (or fewer, x being shorter) half kernel_body's
 * rate of vectors neither on the hot path nor past top_bits or more
 * (WIDE_MIN a block turns the path on; a single block of a Gaussian beside
 * outliers, 36 % of whose vectors have a subnormal lane, held 2).  Each
 * vector scaled as the kernel scales it: by scale, or where gscale by its
 * group's (glen elements a group, a multiple of the vector) */
#define WIDE_LOOK 4
static int wide_look(const vparams *p, const float *x, size_t n, float scale, const float *gscale, size_t glen)
{
    if (!p->wide_ok)
        return 0;
    const vu16 lo = VSPLAT(vu16, p->lo_bits), range = VSPLAT(vu16, p->range_bits);
    const vu16 top = VSPLAT(vu16, p->top_bits);
    unsigned nothot = 0, nv = 0;
    size_t g = 0, gleft = glen; /* (the group, as the kernel steps it: no division) */
    for (size_t i = 0; i + VL <= n && i < WIDE_LOOK * WIDE_BLOCK; i += VL, nv++) {
        if (gscale) {
            if (gleft == 0)
                g++, gleft = glen;
            gleft -= VL;
            scale = gscale[g];
        }
        vf16 xv;
        memcpy(&xv, x + i, sizeof xv);
        vu16 a = (vu16)(xv * VSPLAT(vf16, scale)) & FP8_F32_ABS;
        nothot += (unsigned)(!all_in_range(a, lo, range) && all_lanes(VLE(a, top)));
    }
    return nv && 2 * nothot * (WIDE_BLOCK / VL) >= WIDE_MIN * nv;
}

/* a plain cast with the wide path (WIDE_FOR) */
static __attribute__((noinline)) void wide_plain(FP8_VEC_KERNEL_ARGS)
{
    const int nt = nt_mode(p, out);
    switch ((gscale ? 4 : 0) | (codes ? 2 : 0) | (out ? 1 : 0)) {
    case 1: KERNEL_CALL_NT_W(0, 0, 1); break;
    case 2: KERNEL_BODY_W(0, 0, 1, 0, 0, 0, 1); break;
    case 3: KERNEL_BODY_W(0, 0, 1, 1, 0, 0, 1); break;
    case 5: KERNEL_CALL_NT_W(1, 0, 1); break;
    case 6: KERNEL_BODY_W(1, 0, 1, 0, 0, 0, 1); break;
    default: KERNEL_BODY_W(1, 0, 1, 1, 0, 0, 1); break;
    }
}

/* The AVX2 build's entry: a plain cast (PLAIN_SPECIALISED), per tensor or
 * per group, whose x's first blocks look wide goes to wide_plain, any
 * other cast to kernel_all, whose loops stay as they were.  (Chosen inside
 * kernel_all, the choice made its plain loops 4-15 % slower: the code's
 * placement.) */
void FN(fp8__vec_kernel_)(FP8_VEC_KERNEL_ARGS)
{
    if (!es && PLAIN_SPECIALISED(p, codes, out) && wide_look(p, x, n, scale, gscale, glen))
        wide_plain(p, code_bytes, scale, scale_inv, x, n, codes, out, acc, gscale, ginv, glen, gflags, es);
    else
        kernel_all(p, code_bytes, scale, scale_inv, x, n, codes, out, acc, gscale, ginv, glen, gflags, es);
}
#endif
