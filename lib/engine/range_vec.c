/*
 * range_vec.c — the passes over x that find maxima (see stats_vec.h): the
 * tensor's amax and min nonzero, with Inf and NaN counts, per group, TE's
 * overflow count, and the group with the largest amax / min-nonzero
 * ratio.  Compiled three times with FP8_ISA = avx512, avx2, base, like
 * stats_vec.c.
 */
#include <math.h>
#include <string.h>

#include "f32bits.h"
#include "stats_vec.h"
#include "vec_isa.h"
#include "vec_sums.h"
#if defined(__AVX2__)
#include <immintrin.h>
#endif

static inline void group_lanes(const float *x, size_t glen, vu16 *amax, vu16 *minnz);

void FN(fp8__range_)(FP8_RANGE_ARGS)
{
    vu16 amax, minnz;
    size_t i = n - n % 16;
    group_lanes(x, i, &amax, &minnz); /* the whole tensor as one group, then the tail */
    uint32_t am = *amax_bits, mz = *minnz_bits;
    for (int l = 0; l < 16; l++) {
        if (amax[l] > am)
            am = amax[l];
        if (minnz[l] < mz)
            mz = minnz[l];
    }
    for (; i < n; i++) {
        uint32_t a;
        memcpy(&a, x + i, 4);
        a &= FP8_F32_ABS;
        if (a >= FP8_F32_INF)
            continue;
        if (a > am)
            am = a;
        if (a && a < mz)
            mz = a;
    }
    *amax_bits = am;
    *minnz_bits = mz;
}

/* The tensor amax as TransformerEngine's amax kernel sees it needs to know
 * about Inf (it enters TE's amax; NaN does not), so this pass also counts
 * non-finite inputs: finite amax bits, +-Inf count, NaN count. */
/* The scan with the Inf / NaN counts, for inputs that hold some */
static void amax_scan_counting(FP8_AMAX_SCAN_ARGS)
{
    au16 amaxa = {0}, ninfa = {0}, nnana = {0}; /* (accumulators: vec_isa.h) */
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        vu16 a;
        memcpy(&a, x + i, 64);
        a &= FP8_F32_ABS;
        vu16 fin = (vu16)VLT(a, FP8_F32_INF);
        vu16 af = a & fin;
        VA_FN(amaxa, fp8_pmaxu, af);
        VA_OP(ninfa, -, (vu16)VEQ(a, FP8_F32_INF));
        VA_OP(nnana, -, (vu16)VGT(a, FP8_F32_INF));
    }
    vu16 amax = VA_GET(vu16, amaxa), ninf = VA_GET(vu16, ninfa), nnan = VA_GET(vu16, nnana);
    uint32_t am = 0;
    uint64_t ci = 0, cn = 0;
    for (int l = 0; l < 16; l++) {
        if (amax[l] > am)
            am = amax[l];
        ci += ninf[l], cn += nnan[l];
    }
    for (; i < n; i++) {
        uint32_t a;
        memcpy(&a, x + i, 4);
        a &= FP8_F32_ABS;
        if (a > FP8_F32_INF)
            cn++;
        else if (a == FP8_F32_INF)
            ci++;
        else if (a > am)
            am = a;
    }
    *amax_bits = am;
    *inf_count = ci;
    *nan_count = cn;
}

/* The largest |x| bits of all elements, Inf and NaN included (NaN bits lie
 * above Inf's): when that is below Inf the input is finite, its amax is
 * this and the counts are 0; otherwise the counting scan runs (the rare
 * tensor with Inf or NaN pays a second read).  Four accumulators: one
 * would chain every max on the last. */
void FN(fp8__amax_scan_)(FP8_AMAX_SCAN_ARGS)
{
    au16 m0a = {0}, m1a = {0}, m2a = {0}, m3a = {0}; /* (accumulators: vec_isa.h) */
    size_t i = 0;
    for (; i + 64 <= n; i += 64) {
        vu16 a0, a1, a2, a3; /* (a load each: copied as one array of 256 bytes, the AVX2 build's went
                                through the stack in 16-byte pieces that its 32-byte loads then waited on) */
        memcpy(&a0, x + i, 64);
        memcpy(&a1, x + i + 16, 64);
        memcpy(&a2, x + i + 32, 64);
        memcpy(&a3, x + i + 48, 64);
        VA_FN(m0a, fp8_pmaxu, a0 & FP8_F32_ABS);
        VA_FN(m1a, fp8_pmaxu, a1 & FP8_F32_ABS);
        VA_FN(m2a, fp8_pmaxu, a2 & FP8_F32_ABS);
        VA_FN(m3a, fp8_pmaxu, a3 & FP8_F32_ABS);
    }
    for (; i + 16 <= n; i += 16) {
        vu16 a;
        memcpy(&a, x + i, 64);
        VA_FN(m0a, fp8_pmaxu, a & FP8_F32_ABS);
    }
    vu16 m0 = umax16(umax16(VA_GET(vu16, m0a), VA_GET(vu16, m1a)), umax16(VA_GET(vu16, m2a), VA_GET(vu16, m3a)));
    uint32_t am = 0;
    for (int l = 0; l < 16; l++)
        am = m0[l] > am ? m0[l] : am;
    for (; i < n; i++) {
        uint32_t a;
        memcpy(&a, x + i, 4);
        a &= FP8_F32_ABS;
        am = a > am ? a : am;
    }
    if (am >= FP8_F32_INF) {
        amax_scan_counting(x, n, amax_bits, inf_count, nan_count);
        return;
    }
    *amax_bits = am;
    *inf_count = 0;
    *nan_count = 0;
}

uint64_t FN(fp8__count_above_)(FP8_COUNT_ABOVE_ARGS)
{
    uint32_t tb;
    memcpy(&tb, &thr, 4);
    tb &= FP8_F32_ABS; /* (thr >= 0: the bits order as the values) */
    const vu16 t = (vu16){0} + tb, inf = (vu16){0} + FP8_F32_INF;
    uint64_t k = 0;
    size_t i = 0;
    while (i + 16 <= n) { /* lane counters of 32 bits: blocks of 2^24 vectors */
        size_t stop = n - i >= ((size_t)16 << 24) ? i + ((size_t)16 << 24) : n - (n - i) % 16;
        au16 ca = {0}; /* (an accumulator: vec_isa.h) */
        for (; i < stop; i += 16) {
            vu16 a;
            memcpy(&a, x + i, 64);
            a &= FP8_F32_ABS;
            VA_OP(ca, -, (vu16)(VGT(a, t) & VLE(a, inf))); /* NaN lies above Inf: not counted */
        }
        vu16 c = VA_GET(vu16, ca);
        for (int l = 0; l < 16; l++)
            k += c[l];
    }
    for (; i < n; i++) {
        uint32_t a;
        memcpy(&a, x + i, 4);
        a &= FP8_F32_ABS;
        k += a > tb && a <= FP8_F32_INF;
    }
    return k;
}

/* One group's lanes: its finite |x| bits folded to 16 lanes (amax) and its
 * nonzero finite |x| bits (minnz; 0x7F800000 for none). */
static inline void group_lanes(const float *x, size_t glen, vu16 *amax, vu16 *minnz)
{
    const vu16 big = (vu16){0} + FP8_F32_INF;
    au16 am = {0}, mn = VA_MAKE(au16, big); /* (accumulators: vec_isa.h) */
    for (size_t k = 0; k < glen; k += 16) {
        vu16 a;
        memcpy(&a, x + k, 64);
        a &= FP8_F32_ABS;
        vu16 af = a & (vu16)VLT(a, FP8_F32_INF);
        VA_FN(am, fp8_pmaxu, af);
        vu16 nz = (vu16)VNE(af, 0);
        VA_FN(mn, fp8_pminu, (af & nz) | (big & ~nz));
    }
    *amax = VA_GET(vu16, am), *minnz = VA_GET(vu16, mn);
}

/* 16 groups at once: their 16-lane vectors folded pairwise (blocks of 16, 8,
 * 4, 2 lanes halve at each level) into one vector whose lane L holds group
 * bitreverse4(L); a last shuffle puts group g in lane g.  15 folds of two
 * shuffles each for 16 groups, where a reduction per group took 8.  The
 * vectors are folded as they come (fold_push with k = 0, 1, .. 15, k a
 * constant: the caller's loop unrolled), each level's first vector of a
 * pair held until its second: at most four vectors wait, where the sixteen
 * of a block held before the fold went through the stack (its stores and
 * loads 14 % of the pass's profile on NVFP4's groups; the pass 1.4-1.5x
 * faster on them without).  fold_result: group g in lane g.  The four
 * levels are spelled out (LEVEL): as a loop over them, their patterns
 * taken from arrays, the pass ran 0.7x as fast (GCC 12).
 * Maxima and minima are the same whatever the order of the folds. */
#if FP8_NPIECE > 1
static inline fp8_pu fold_pieces(fp8_pu a, fp8_pu b, int max) { return max ? fp8_pmaxu(a, b) : fp8_pminu(a, b); }
#endif
#if FP8_NPIECE == 2 && defined(__AVX2__)
/* (AVX2: the same folds on 8-lane pieces, a group's two pieces folded
 * first, then three levels of pairs of groups (by their 128-bit halves,
 * 64-bit pairs, odd and even lanes), h[0] .. h[2] each level's held first
 * of a pair; eight groups end in one piece, in lanes 0 2 4 6 1 3 5 7,
 * which a last permute orders.  Reduced group by group, lane by lane, as
 * the SSE2 build below does, and through 64-byte vectors that GCC 12 moved
 * a lane at a time, NVFP4's all statistics ran 1.2-1.3x as long.) */
typedef struct {
    fp8_pu h[3];
    vu16 r; /* groups 0-7, then 8-15 */
} fold16;
/* group k's 8 lanes p (its pieces folded) */
static inline __attribute__((always_inline)) void fold_piece(fold16 *f, int k, fp8_pu p, int max)
{
    if (!(k & 1)) {
        f->h[0] = p;
        return;
    }
    __m256i a = (__m256i)f->h[0], b = (__m256i)p;
    p = fold_pieces((fp8_pu)_mm256_permute2x128_si256(a, b, 0x20), (fp8_pu)_mm256_permute2x128_si256(a, b, 0x31), max);
    if (!(k >> 1 & 1)) {
        f->h[1] = p;
        return;
    }
    a = (__m256i)f->h[1], b = (__m256i)p;
    p = fold_pieces((fp8_pu)_mm256_unpacklo_epi64(a, b), (fp8_pu)_mm256_unpackhi_epi64(a, b), max);
    if (!(k >> 2 & 1)) {
        f->h[2] = p;
        return;
    }
    __m256 af = (__m256)f->h[2], bf = (__m256)p;
    p = fold_pieces((fp8_pu)_mm256_shuffle_ps(af, bf, 0x88), (fp8_pu)_mm256_shuffle_ps(af, bf, 0xDD), max);
    p = (fp8_pu)_mm256_permutevar8x32_epi32((__m256i)p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
    memcpy((char *)&f->r + (k >> 3) * 32, &p, 32);
}
static inline __attribute__((always_inline)) void fold_push(fold16 *f, int k, vu16 v, vu16 (*op)(vu16, vu16))
{
    const int max = op == umax16;
    fold_piece(f, k, fold_pieces(FP8_P32(v, 0), FP8_P32(v, 1), max), max);
}
static inline vu16 fold_result(const fold16 *f) { return f->r; }
/* lean_lanes (below) on the pieces, each group's folded to its 8 lanes
 * (through a 64-byte vector the pieces went through memory a lane at a
 * time) */
static inline void lean_pieces(const float *x, size_t glen, fp8_pu *am, fp8_pu *mn)
{
    fp8_pu m0 = {0}, m1 = {0}, z0 = (fp8_pu){0} - 1u, z1 = z0;
    for (size_t k = 0; k < glen; k += 16) {
        fp8_pu a0, a1;
        memcpy(&a0, x + k, sizeof a0);
        memcpy(&a1, x + k + 8, sizeof a1);
        a0 &= FP8_F32_ABS, a1 &= FP8_F32_ABS;
        m0 = fp8_pmaxu(m0, a0), m1 = fp8_pmaxu(m1, a1);
        if (mn)
            z0 = fp8_pminu(z0, a0 - 1u), z1 = fp8_pminu(z1, a1 - 1u);
    }
    *am = fp8_pmaxu(m0, m1);
    if (mn)
        *mn = fp8_pminu(z0, z1);
}
#elif FP8_NPIECE > 1
typedef struct {
    uint32_t r[16]; /* group k's result in r[k] */
} fold16;
/* (without AVX2 the 64-byte shuffles below go lane by lane through
 * memory: each group's vector is reduced on its own, its native pieces
 * first) */
static inline void fold_push(fold16 *f, int k, vu16 v, vu16 (*op)(vu16, vu16))
{
    const int max = op == umax16;
#if FP8_NPIECE == 4
    fp8_pu p = fold_pieces(fold_pieces(FP8_P32(v, 0), FP8_P32(v, 2), max),
                           fold_pieces(FP8_P32(v, 1), FP8_P32(v, 3), max), max);
#else
    fp8_pu p = fold_pieces(FP8_P32(v, 0), FP8_P32(v, 1), max);
#endif
    uint32_t m = p[0];
    for (int l = 1; l < FP8_VPIECE / 4; l++)
        m = max ? (p[l] > m ? p[l] : m) : (p[l] < m ? p[l] : m);
    f->r[k] = m;
}
static inline vu16 fold_result(const fold16 *f)
{
    vu16 v;
    memcpy(&v, f->r, sizeof v);
    return v;
}
#else
typedef struct {
    vu16 s[4];
} fold16;
#define FOLD(A, B, P, Q, OP) OP(__builtin_shuffle(A, B, P), __builtin_shuffle(A, B, Q))
static inline __attribute__((always_inline)) void fold_push(fold16 *f, int k, vu16 v, vu16 (*op)(vu16, vu16))
{
    static const vi16 p1 = {0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23},
                      q1 = {8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31},
                      p2 = {0, 1, 2, 3, 16, 17, 18, 19, 8, 9, 10, 11, 24, 25, 26, 27},
                      q2 = {4, 5, 6, 7, 20, 21, 22, 23, 12, 13, 14, 15, 28, 29, 30, 31},
                      p3 = {0, 1, 16, 17, 4, 5, 20, 21, 8, 9, 24, 25, 12, 13, 28, 29},
                      q3 = {2, 3, 18, 19, 6, 7, 22, 23, 10, 11, 26, 27, 14, 15, 30, 31},
                      p4 = {0, 16, 2, 18, 4, 20, 6, 22, 8, 24, 10, 26, 12, 28, 14, 30},
                      q4 = {1, 17, 3, 19, 5, 21, 7, 23, 9, 25, 11, 27, 13, 29, 15, 31},
                      rev = {0, 8, 4, 12, 2, 10, 6, 14, 1, 9, 5, 13, 3, 11, 7, 15};
/* level L: v the first of a pair (bit L of k clear), held; else folded
 * with the held one by the patterns P, Q */
#define LEVEL(L, P, Q)                                                                                     \
    do {                                                                                                   \
        if (!(k >> (L) & 1)) {                                                                             \
            f->s[L] = v;                                                                                   \
            return;                                                                                        \
        }                                                                                                  \
        v = FOLD(f->s[L], v, P, Q, op);                                                                    \
    } while (0)
    LEVEL(0, p1, q1);
    LEVEL(1, p2, q2);
    LEVEL(2, p3, q3);
    LEVEL(3, p4, q4);
    f->s[3] = __builtin_shuffle(v, rev); /* (k = 15: the sixteen folded) */
#undef LEVEL
}
#undef FOLD
static inline vu16 fold_result(const fold16 *f) { return f->s[3]; }
#endif

/* A group's lanes, lean: the maxima of all |x| bits (Inf and NaN among
 * them: the caller checks the folded maxima and redoes a block that holds
 * one) and, when mn, the minima of |x| bits - 1 (a zero wraps to the
 * largest value and drops out; lean_minnz turns them back).  Two
 * operations a vector each, where group_lanes' masks take nine. */
static inline void lean_lanes(const float *x, size_t glen, vu16 *am, vu16 *mn)
{
    au16 m = {0}, z = VA_MAKE(au16, (vu16){0} - 1u); /* (accumulators: vec_isa.h) */
    for (size_t k = 0; k < glen; k += 16) {
        vu16 a;
        memcpy(&a, x + k, 64);
        a &= FP8_F32_ABS;
        VA_FN(m, fp8_pmaxu, a);
        if (mn)
            VA_FN(z, fp8_pminu, a - 1);
    }
    *am = VA_GET(vu16, m);
    if (mn)
        *mn = VA_GET(vu16, z);
}

/* folded lean minima back to min nonzero bits (0x7F800000: none, as for a
 * group of zeros; the block holds no Inf or NaN) */
static inline vu16 lean_minnz(vu16 z) { return umin16(z, (vu16){0} + (FP8_F32_INF - 1)) + 1; }

/* whether some lane of folded maxima holds Inf or NaN bits */
static inline int any_nonfinite(vu16 ra)
{
    uint32_t m = 0;
    for (int l = 0; l < 16; l++)
        m = ra[l] > m ? ra[l] : m;
    return m >= FP8_F32_INF;
}

/* 16 groups from x on, Inf and NaN masked out (group_lanes) */
static inline void masked_block(const float *x, size_t glen, uint32_t *amax_bits, uint32_t *minnz_bits)
{
    fold16 fa = {0}, fm = {0};
#pragma GCC unroll 16
    for (int k = 0; k < 16; k++) {
        vu16 am, mn;
        group_lanes(x + (size_t)k * glen, glen, &am, &mn);
        fold_push(&fa, k, am, umax16);
        fold_push(&fm, k, mn, umin16);
    }
    vu16 ra = fold_result(&fa), rm = fold_result(&fm);
    memcpy(amax_bits, &ra, sizeof ra);
    if (minnz_bits)
        memcpy(minnz_bits, &rm, sizeof rm);
}

/* runs of 16 groups (fp8__range_groups): inlined where glen and whether
 * minima are wanted are constants (MX's 32 and NVFP4's 16, with minima),
 * so that the group loop unrolls and the minima's test leaves it (NVFP4's
 * 16 ran 5 % slower that way while the fold went through the stack, 1.5x
 * faster since, in cache) */
static inline __attribute__((always_inline)) size_t range_runs(const float *x, size_t ng, size_t glen,
                                                                uint32_t *amax_bits, uint32_t *minnz_bits)
{
    size_t g = 0;
    for (; g + 16 <= ng; g += 16) {
        const float *xg = x + g * glen;
        fold16 fa = {0}, fm = {0}; /* (every lane written before it is read) */
#pragma GCC unroll 16
        for (int k = 0; k < 16; k++) {
#if FP8_NPIECE == 2 && defined(__AVX2__)
            fp8_pu am, mn = {0};
            lean_pieces(xg + (size_t)k * glen, glen, &am, minnz_bits ? &mn : NULL);
            fold_piece(&fa, k, am, 1);
            if (minnz_bits)
                fold_piece(&fm, k, mn, 0);
#else
            vu16 am, mn = {0};
            lean_lanes(xg + (size_t)k * glen, glen, &am, minnz_bits ? &mn : NULL);
            fold_push(&fa, k, am, umax16);
            if (minnz_bits)
                fold_push(&fm, k, mn, umin16);
#endif
        }
        vu16 ra = fold_result(&fa);
        if (any_nonfinite(ra)) { /* (rare) these 16 groups again, masked */
            masked_block(xg, glen, amax_bits + g, minnz_bits ? minnz_bits + g : NULL);
            continue;
        }
        memcpy(amax_bits + g, &ra, sizeof ra);
        if (minnz_bits) {
            vu16 rm = lean_minnz(fold_result(&fm));
            memcpy(minnz_bits + g, &rm, sizeof rm);
        }
    }
    return g;
}

void FN(fp8__range_groups_)(FP8_RANGE_GROUPS_ARGS)
{
    size_t ng = n / glen, g;
    if (glen == 32 && minnz_bits)
        g = range_runs(x, ng, 32, amax_bits, minnz_bits);
    else if (glen == 16 && minnz_bits)
        g = range_runs(x, ng, 16, amax_bits, minnz_bits);
    else
        g = range_runs(x, ng, glen, amax_bits, minnz_bits);
    for (; g < ng; g++) {
        vu16 am, mn;
        group_lanes(x + g * glen, glen, &am, &mn);
        uint32_t a = 0, m = FP8_F32_INF;
        for (int l = 0; l < 16; l++) {
            a = am[l] > a ? am[l] : a;
            m = mn[l] < m ? mn[l] : m;
        }
        amax_bits[g] = a;
        if (minnz_bits)
            minnz_bits[g] = m;
    }
}

/* 1 when some lane of c is nonzero */
static inline int any16(vu16 c)
{
#if defined(__AVX512F__)
    __m512i v;
    memcpy(&v, &c, 64);
    return _mm512_test_epi32_mask(v, v) != 0;
#elif defined(__AVX2__)
    __m256i o = _mm256_or_si256((__m256i)FP8_P32(c, 0), (__m256i)FP8_P32(c, 1));
    return !_mm256_testz_si256(o, o);
#else
    uint32_t o = 0;
    for (int l = 0; l < 16; l++)
        o |= c[l];
    return o != 0;
#endif
}

/* Exact comparison of a/m with the best so far by cross products (both
 * factors float32: exact in double); strict, so the first maximum stays. */
static inline void ratio_try(const uint32_t *amax, const uint32_t *minnz, size_t g, double *ba, double *bm,
                             size_t *best)
{
    float af, mf;
    memcpy(&af, amax + g, 4);
    memcpy(&mf, minnz + g, 4);
    double a = af, m = mf;
    if (a * *bm > *ba * m)
        *ba = a, *bm = m, *best = g;
}

/* Whether any lane of (a, m) (float32 bits) beats the best so far by
 * ratio_try's comparison (the same exact products): a filter before the
 * lanes are tried one by one, in order (data on a coarse grid, x_hat cast
 * back into x, holds many groups tied at the largest ratio) */
static inline int any_beats(vu16 a, vu16 m, double ba, double bm)
{
    vf16 af = (vf16)a, mf = (vf16)m;
    vd8 alo, ahi, mlo, mhi;
    HALVES(af, alo, ahi);
    HALVES(mf, mlo, mhi);
    vl8 w = VGT(alo * bm, mlo * ba) | VGT(ahi * bm, mhi * ba);
    int any = 0;
    for (int l = 0; l < 8; l++)
        any |= w[l] != 0;
    return any;
}

/* Two passes.  The float32 bits of a positive normal v = 2^e (1 + f), as a
 * number, are 2^23 (log2 v + 127 - c(v)) with c(v) = log2(1 + f) - f in
 * [0, 0.086072] (largest at f = 1/ln 2 - 1), so the difference of bits a - m
 * is 2^23 log2(a/m) within 0.086072 * 2^23 either way: the first pass takes
 * the largest difference over groups whose minimum is normal; the true
 * maximum's difference lies within 2 * 0.086072 * 2^23 < 1,444,038 of it
 * (bound used: 3 * 2^19 = 1,572,864), and only groups that close (and those
 * with a subnormal minimum, whose bits are not logarithmic) are compared
 * exactly, in order, by the second. */
size_t FN(fp8__best_ratio_)(FP8_BEST_RATIO_ARGS)
{
    au16 mxda = {0}, anysuba = {0}; /* (accumulators: vec_isa.h) */
    size_t g = 0;
    for (; g + 16 <= ng; g += 16) {
        vu16 a, m;
        memcpy(&a, amax + g, 64);
        memcpy(&m, minnz + g, 64);
        vu16 valid = (vu16)VLT(m, FP8_F32_INF) & (vu16)VNE(a, 0);
        vu16 normal = valid & (vu16)VGE(m, 0x00800000u);
        VA_OP(anysuba, |, valid & ~normal);
        VA_FN(mxda, fp8_pmaxu, (a - m) & normal);
    }
    vu16 mxd = VA_GET(vu16, mxda), anysub = VA_GET(vu16, anysuba);
    uint32_t dmax = 0, sub = 0;
    for (int l = 0; l < 16; l++)
        dmax = mxd[l] > dmax ? mxd[l] : dmax, sub |= anysub[l];
    for (size_t k = g; k < ng; k++) {
        uint32_t a = amax[k], m = minnz[k];
        if (m >= FP8_F32_INF || !a)
            continue;
        if (m < 0x00800000u)
            sub = 1;
        else if (a - m > dmax)
            dmax = a - m;
    }
    const uint32_t bound = 3u << 19, thr = dmax > bound ? dmax - bound : 0;
    double ba = 0, bm = 1;
    size_t best = SIZE_MAX;
    for (g = 0; g + 16 <= ng; g += 16) {
        vu16 a, m;
        memcpy(&a, amax + g, 64);
        memcpy(&m, minnz + g, 64);
        vu16 valid = (vu16)VLT(m, FP8_F32_INF) & (vu16)VNE(a, 0);
        vu16 cand = valid & ((vu16)VGE(a - m, thr) | (vu16)VLT(m, 0x00800000u));
        if (!any16(cand) || !any_beats(a, m, ba, bm))
            continue;
        for (int l = 0; l < 16; l++)
            if (cand[l])
                ratio_try(amax, minnz, g + (size_t)l, &ba, &bm, &best);
    }
    for (; g < ng; g++)
        if (minnz[g] < FP8_F32_INF && amax[g])
            ratio_try(amax, minnz, g, &ba, &bm, &best);
    return best;
}

/* NVFP4's block scales, sixteen blocks at a time, the rest left to the
 * caller (quantize_scales.c: the rule, and its scalar form): the decode
 * scale (amax / 6) * S_enc cast to e4m3 by fp8__encode_bits' rules
 * (nearest-even on the float32 bits for normals, an exact float rounding
 * for subnormals, saturating at 448); scale S_enc / decode (Inf: FLT_MAX),
 * scale_inv decode * sg, both 0 where the decode scale is 0.  Integer
 * compares are signed: the bits are of values >= 0.  The blocks done. */
size_t FN(fp8__nvfp4_scales_)(FP8_NVFP4_SCALES_ARGS)
{
    size_t g = 0;
    for (; g + 16 <= ng; g += 16) {
        vu16 ab;
        memcpy(&ab, amax + g, 64);
        vf16 dec = ((vf16)ab / 6.0f) * S_enc;
        vu16 db = (vu16)dec;
        vu16 rn = (db + (0x7FFFFu + ((db >> 20) & 1u))) & 0xFFF00000u; /* normal: 3 mantissa bits */
        vi16 over = VGT((vi16)rn, 0x43E00000);
        rn = (vu16)((over & 0x43E00000) | (~over & (vi16)rn)); /* saturate at 448 */
        vf16 ksub = ((dec * 512.0f) + 0x1p23f) - 0x1p23f;     /* subnormal: step 2^-9 */
        vu16 rs = (vu16)(ksub * (1.0f / 512.0f));
        vi16 sub = VLT((vi16)db, 0x3C800000); /* below 2^-6 */
        vf16 sb = (vf16)(((vu16)sub & rs) | (~(vu16)sub & rn));
        vi16 pos = VGT(sb, 0.0f);
        vf16 sc = S_enc / sb;
        vi16 fin = VLE(sc, 3.4028235e38f);
        sc = (vf16)(((vi16)sc & fin) | ((int32_t)0x7F7FFFFF & ~fin)); /* Inf -> FLT_MAX */
        sc = (vf16)((vi16)sc & pos);
        vf16 si = (vf16)((vi16)(sb * sg) & pos);
        VSTORE(scale + g, sc);
        VSTORE(scale_inv + g, si);
    }
    return g;
}
