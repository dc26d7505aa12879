/*
 * stats_vec.c — lane-wise moment sums, error sums and exponent histograms
 * (see stats_vec.h; the amax and range passes are range_vec.c's).
 * Compiled three times with FP8_ISA = avx512, avx2, base.  The scalar
 * tail runs the same arithmetic in lane 0.
 */
#include <math.h>
#include <string.h>

#include "f32bits.h"
#include "kernel_vec.h"
#include "stats_vec.h"
#include "vec_isa.h"
#include "vec_sums.h"
#if defined(__AVX512F__) || defined(__AVX2__)
#include <immintrin.h>
#endif


/* Bit l set when lane l of a is v or more (unsigned). */
static inline unsigned ge_bits16(vu16 a, uint32_t v)
{
#if defined(__AVX512F__)
    __m512i w;
    memcpy(&w, &a, sizeof w);
    return _mm512_cmpge_epu32_mask(w, _mm512_set1_epi32((int)v));
#elif defined(__AVX2__)
    /* a >= v exactly where max(a, v) == a */
    __m256i t = _mm256_set1_epi32((int)v), a0 = (__m256i)FP8_P32(a, 0), a1 = (__m256i)FP8_P32(a, 1);
    __m256i lo = _mm256_cmpeq_epi32(_mm256_max_epu32(a0, t), a0);
    __m256i hi = _mm256_cmpeq_epi32(_mm256_max_epu32(a1, t), a1);
    return (unsigned)_mm256_movemask_ps(_mm256_castsi256_ps(lo)) |
           (unsigned)_mm256_movemask_ps(_mm256_castsi256_ps(hi)) << 8;
#else
    unsigned b = 0;
    for (int l = 0; l < 16; l++)
        b |= (unsigned)(a[l] >= v) << l;
    return b;
#endif
}

/* The zero lanes of au (|x| bits) counted into *cz, the nonzero ones into
 * the lane minima *zm; returns the nonzero lanes' bits (lane l: bit l).
 * With AVX-512 one test into a mask, a masked subtract and a masked
 * minimum. */
static inline unsigned zeros_and_min(vu16 au, au16 *cz, au16 *zm)
{
#if defined(__AVX512F__)
    __m512i a, c, z;
    memcpy(&a, &au, 64);
    memcpy(&c, cz, 64);
    memcpy(&z, zm, 64);
    __mmask16 nz = _mm512_test_epi32_mask(a, a);
    c = _mm512_mask_sub_epi32(c, (__mmask16)~nz, c, _mm512_set1_epi32(-1));
    z = _mm512_mask_min_epu32(z, nz, z, a);
    memcpy(cz, &c, 64);
    memcpy(zm, &z, 64);
    return nz;
#else
    vi16 isz = VEQ(au, 0);
    VA_OP(*cz, -, (vu16)isz);
    VA_FN(*zm, fp8_pminu, au | (vu16)isz); /* zeros: all ones, above every |x| */
    return ge_bits16(au, 1u); /* (the nonzero lanes) */
#endif
}

/* Merge a piece's shifted sums (n, K, S1..S4 about K) into the running
 * moments (Pebay 2008, the pairwise form of Welford's update). */
static void merge_piece(fp8__moments *m, double n, double K, double S1, double S2, double S3, double S4)
{
    if (n == 0)
        return;
    double d = S1 / n;                                   /* piece mean - K */
    double mb = K + d;
    double M2b = S2 - S1 * d;
    double M3b = S3 - 3 * d * S2 + 2 * n * d * d * d;
    double M4b = S4 - 4 * d * S3 + 6 * d * d * S2 - 3 * n * d * d * d * d;
    if (M2b < 0)
        M2b = 0;
    fp8__moments_combine(m, n, mb, M2b, M3b, M4b);
}

/* Masked path: 8 elements per step, all in double lanes (every float is
 * exact there); handles NaN/Inf inputs and non-finite x_hat. */
static void moments_masked(FP8_MOMENTS_ARGS)
{
    double ksum = 0, kn = 0;
    for (size_t k = 0; k < n; k++)
        if (isfinite(x[k]))
            ksum += x[k], kn++;
    const double K = kn ? (double)(float)(ksum / kn) : 0.0; /* the piece's mean, rounded */
    vd8 s1 = {0}, s2 = {0}, s3 = {0}, s4 = {0}, l1 = {0}, e2 = {0}, q2 = {0}, xqs = {0}, xx = {0};
    vd8 mn, mx, me, mz;
    for (int l = 0; l < 8; l++) {
        mn[l] = fmin(m->mn[l], m->mn[l + 8]);
        mx[l] = fmax(m->mx[l], m->mx[l + 8]);
        me[l] = fmax(m->maxerr[l], m->maxerr[l + 8]);
        mz[l] = fmin(m->mnz[l], m->mnz[l + 8]);
    }
    vl8 cnan = {0}, cinf = {0}, czero = {0}, cqbad = {0};
    const vl8 absmask = (vl8){0} + 0x7FFFFFFFFFFFFFFFll, infb = (vl8){0} + 0x7FF0000000000000ll;
    const vd8 pinf = (vd8){0} + INFINITY, ninf = (vd8){0} - INFINITY;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        vf8 xf, qf;
        memcpy(&xf, x + i, 32);
        if (xq)
            memcpy(&qf, xq + i, 32);
        else
            qf = xf;
        vd8 xd = __builtin_convertvector(xf, vd8);
        vd8 qd = __builtin_convertvector(qf, vd8);
        vl8 a = (vl8)xd & absmask, qa = (vl8)qd & absmask;
        vl8 fin = a < infb;
        vl8 qfin = (qa < infb) & fin;
        cnan -= a > infb;
        cinf -= a == infb;
        vl8 isz = a == 0;
        czero -= isz;
        cqbad -= fin & ~qfin;
        vd8 xz = (vd8)((vl8)xd & fin);                    /* non-finite -> 0 */
        xx += xz * xz;
        vd8 d = (vd8)((vl8)(xz - K) & fin);
        vd8 d2 = d * d;
        s1 += d;
        s2 += d2;
        s3 += d2 * d;
        s4 += d2 * d2;
        vd8 ax = (vd8)(a & fin);
        l1 += ax;
        vd8 qz = (vd8)((vl8)qd & qfin), xe = (vd8)((vl8)xz & qfin);
        vd8 e = xe - qz;
        e2 += e * e;
        xqs += xe * qz;
        q2 += qz * qz;
        vd8 xmn = (vd8)(((vl8)xd & fin) | ((vl8)pinf & ~fin));
        vd8 xmx = (vd8)(((vl8)xd & fin) | ((vl8)ninf & ~fin));
        mn = (vd8)(((vl8)mn & (mn <= xmn)) | ((vl8)xmn & ~(mn <= xmn)));
        mx = (vd8)(((vl8)mx & (mx >= xmx)) | ((vl8)xmx & ~(mx >= xmx)));
        vl8 nzf = fin & ~isz;
        vd8 az = (vd8)((a & nzf) | ((vl8)pinf & ~nzf));
        mz = (vd8)(((vl8)mz & (mz <= az)) | ((vl8)az & ~(mz <= az)));
        /* |x - x_hat| as float32 arithmetic does it (the oracle's fabsf) */
        vf8 ef = xf - qf;
        vd8 ed = (vd8)((vl8)__builtin_convertvector(ef, vd8) & absmask & qfin);
        me = (vd8)(((vl8)me & (me >= ed)) | ((vl8)ed & ~(me >= ed)));
    }
    double T1 = 0, T2 = 0, T3 = 0, T4 = 0;
    for (int l = 0; l < FP8_ML; l++) {
        T1 += s1[l], T2 += s2[l], T3 += s3[l], T4 += s4[l];
        m->l1[l] += l1[l];
        m->xx[l] += xx[l];
        m->e2[l] += e2[l];
        m->q2[l] += q2[l];
        m->xq[l] += xqs[l];
        m->mn[l] = (float)mn[l], m->mx[l] = (float)mx[l], m->maxerr[l] = (float)me[l], m->mnz[l] = (float)mz[l];
        m->mn[l + 8] = INFINITY, m->mx[l + 8] = -INFINITY, m->maxerr[l + 8] = 0, m->mnz[l + 8] = INFINITY;
        m->nan += (uint64_t)cnan[l];
        m->inf += (uint64_t)cinf[l];
        m->zero += (uint64_t)czero[l];
        m->qbad += (uint64_t)cqbad[l];
    }
    for (; i < n; i++) { /* tail: same arithmetic, lane 0 */
        float xv = x[i], qv = xq ? xq[i] : x[i];
        if (isnan(xv)) {
            m->nan++;
            continue;
        }
        if (isinf(xv)) {
            m->inf++;
            continue;
        }
        if (xv == 0.0f)
            m->zero++;
        else if (fabsf(xv) < m->mnz[0])
            m->mnz[0] = fabsf(xv);
        double xd = xv, d = xd - K, d2 = d * d;
        T1 += d, T2 += d2, T3 += d2 * d, T4 += d2 * d2;
        m->l1[0] += fabs(xd);
        m->xx[0] += xd * xd;
        if (xv < m->mn[0])
            m->mn[0] = xv;
        if (xv > m->mx[0])
            m->mx[0] = xv;
        if (!isfinite(qv)) {
            m->qbad++;
            continue;
        }
        double qd = qv, e = xd - qd;
        m->e2[0] += e * e;
        m->xq[0] += xd * qd;
        m->q2[0] += qd * qd;
        float ef = fabsf(xv - qv);
        if (ef > m->maxerr[0])
            m->maxerr[0] = ef;
    }
    merge_piece(m, kn, K, T1, T2, T3, T4);
}


/* x's statistics of x[0..n) in double lanes (moments_masked on a scratch
 * copy; its error sums are discarded) */
static void x_masked(fp8__moments *m, const float *x, size_t n)
{
    fp8__moments t = *m;
    moments_masked(&t, x, NULL, n);
    m->cn = t.cn, m->cmean = t.cmean, m->cM2 = t.cM2, m->cM3 = t.cM3, m->cM4 = t.cM4;
    memcpy(m->l1, t.l1, sizeof m->l1);
    memcpy(m->xx, t.xx, sizeof m->xx);
    memcpy(m->mn, t.mn, sizeof m->mn);
    memcpy(m->mx, t.mx, sizeof m->mx);
    memcpy(m->mnz, t.mnz, sizeof m->mnz);
    m->nan = t.nan, m->inf = t.inf, m->zero = t.zero;
}

/* the error sums of x[0..n) against xq in double lanes, added to m's */
static void err_masked(fp8__moments *m, const float *x, const float *xq, size_t n)
{
    fp8__moments t;
    fp8__moments_init(&t);
    moments_masked(&t, x, xq, n);
    for (int l = 0; l < FP8_ML; l++)
        m->e2[l] += t.e2[l], m->q2[l] += t.q2[l], m->xq[l] += t.xq[l];
    for (int l = 0; l < 16; l++)
        m->maxerr[l] = t.maxerr[l] > m->maxerr[l] ? t.maxerr[l] : m->maxerr[l];
    m->qbad += t.qbad;
}

/* The lean error sums of x[0..nl) (E2, Q2, XQ, me) enter m when the larger
 * of x's and x_hat's maxima (float32 bits; NaN and Inf lie above) is in
 * [2^-24, 2^28]; whatever they did not cover is summed in double. */
static void err_commit(fp8__moments *m, const float *x, const float *xq, size_t n, size_t nl, uint32_t maxbits,
                       const vd8 *E2, const vd8 *Q2, const vd8 *XQ, const vf16 *me)
{
    size_t from = 0;
    if (nl && maxbits >= FP8_LEAN_LO && maxbits <= FP8_LEAN_HI) {
        for (int l = 0; l < FP8_ML; l++)
            m->e2[l] += (*E2)[l], m->q2[l] += (*Q2)[l], m->xq[l] += (*XQ)[l];
        memcpy(m->maxerr, me, 64);
        from = nl;
    }
    if (from < n)
        err_masked(m, x + from, xq ? xq + from : NULL, n - from);
}

/* the mean of x[0..n) (n a multiple of 16), as float: a shift.  Four
 * partial sums, so that the adds do not wait for each other (one chain of
 * adds made this loop latency-bound: 2 % of a small record) */
static float piece_mean(const float *x, size_t n)
{
    vf16 a0 = {0}, a1 = {0}, a2 = {0}, a3 = {0}, v0, v1, v2, v3;
    size_t k = 0;
    for (; k + 64 <= n; k += 64) {
        memcpy(&v0, x + k, 64);
        memcpy(&v1, x + k + 16, 64);
        memcpy(&v2, x + k + 32, 64);
        memcpy(&v3, x + k + 48, 64);
        a0 += v0, a1 += v1, a2 += v2, a3 += v3;
    }
    for (; k < n; k += 16) {
        memcpy(&v0, x + k, 64);
        a0 += v0;
    }
    a0 = (a0 + a1) + (a2 + a3);
    double ksum = 0;
    for (int l = 0; l < 16; l++)
        ksum += a0[l];
    return n ? (float)(ksum / (double)n) : 0.0f;
}

/* 1 << s lane-wise, 0 where s >= 32 (the vector shifts' own rule; the
 * scalar form spells it out, C's shift being undefined there) */
static inline vu16 one_shl(vu16 s)
{
#if defined(__AVX512F__)
    __m512i v;
    memcpy(&v, &s, 64);
    v = _mm512_sllv_epi32(_mm512_set1_epi32(1), v);
    memcpy(&s, &v, 64);
    return s;
#else
    /* (masked: C's shift is undefined there; arithmetic that GCC keeps in
     * the registers, vec_isa.h) */
    return (((vu16){0} + 1u) << (s & 31u)) & (vu16)FP8_LTU(s, (vu16){0} + 32u);
#endif
}

/* The exponent histogram's window (bins top - 14 .. top, top >= 16; code
 * c = top - bin) counted in registers.  An element of code c adds 1 << 4c
 * to its lane's 32-bit word: codes 0-7 into nib_a (shift 4c), codes 8-15
 * into nib_b (shift 4c - 32); any other c (bins below the window, zeros and
 * subnormals, or above it: c wraps) shifts by 32 or more and adds nothing,
 * so the shift s = 4c needs no clamp (c = 15, outside the window too, lands
 * in nib_b's top nibble, never read).  Eight 4-bit counters a word take at
 * most 8 vectors before they are spilled into 8-bit counters (codes
 * 0,2,4,6 / 1,3,5,7 / 8,10,12,14 / 9,11,13,15 in nib_0 .. nib_3; at most 8 a
 * spill, so at most 31 spills); nib_flush sums those across lanes into the
 * window's bins of sub[0].  Locals of xm_core, so that they stay in
 * registers.
 *
 * Data wider than the window (gradients over many binades: half the values
 * of a log-uniform spread over 35 binades fell below it and were counted
 * one by one, x's statistics at a third of plain data's rate) switch the
 * later pieces of a tensor's part to a wide window (hist->wide; the
 * AVX-512 and AVX2 builds): bins top - 30 .. top, codes 16-31 in two more
 * words (nib_c: shift 4c - 64, nib_d: 4c - 96; c = 15 counted, c = 31 the
 * unread one), spilled into nib_4 .. nib_7.  It needs top >= 32 (a largest
 * |x| of 2^-96 or more), so that its lowest bin is a normal one: zeros and
 * subnormals stay outside.  Two more shifts and adds a vector, in a copy
 * of the loop of its own (xm_wide), so that the narrow loop's registers
 * are as they were (switching within a piece, both loops in one function,
 * cost plain data 2 %); a piece turns the next ones wide after a block
 * with WIDE_AFTER or more lanes outside the window (3 %: never on the
 * bench's uniform x, 0.3 a block on average; a Gaussian beside outliers
 * 1000x larger 13 a block, 35 binades 146); a part's first piece from its
 * first block (wide_first). */
#define WIDE_AFTER 8
#if FP8_NPIECE == 1
#define XM_WIDE 1
#define NIB_ADD_HI(s)                                                                                      \
    do {                                                                                                   \
        nib_c += one_shl((s) - 64u);                                                                       \
        nib_d += one_shl((s) - 96u);                                                                       \
    } while (0)
#elif defined(__AVX2__) /* (the accumulators piece by piece: vec_isa.h) */
#define XM_WIDE 1
#define NIB_ADD_HI(s)                                                                                      \
    do {                                                                                                   \
        vu16 c_ = (s) - 64u, d_ = (s) - 96u;                                                               \
        FP8_EACH(NIB_SHL_K, nib_c, c_, )                                                                   \
        FP8_EACH(NIB_SHL_K, nib_d, d_, )                                                                   \
    } while (0)
#else
/* (the baseline: 16 registers of 4 lanes, a vector in four; the wide loop
 * measured 0.29 -> 0.26 Gelem/s on 35 binades there) */
#define XM_WIDE 0
#define NIB_ADD_HI(s) ((void)0)
#endif
#if XM_WIDE
#define NIB_SPILL_HI()                                                                                     \
    do {                                                                                                   \
        NIB_SPILL_PAIR(nib_c, nib_d, nib_4, nib_5, nib_6, nib_7);                                          \
        nib_c = nib_d = (au16){0};                                                                         \
    } while (0)
#else
#define NIB_SPILL_HI() ((void)0)
#endif
#if FP8_NPIECE == 1
#define NIB_ADD(s)                                                                                         \
    do {                                                                                                   \
        nib_a += one_shl(s);                                                                               \
        nib_b += one_shl((s) - 32u);                                                                       \
    } while (0)
/* words a and b's 4-bit counters into the 8-bit ones n0 .. n3 */
#define NIB_SPILL_PAIR(a, b, n0, n1, n2, n3)                                                               \
    do {                                                                                                   \
        n0 += (a) & m4, n1 += (a) >> 4 & m4;                                                               \
        n2 += (b) & m4, n3 += (b) >> 4 & m4;                                                               \
    } while (0)
#else
/* (the accumulators piece by piece: vec_isa.h) */
#if defined(__AVX2__)
#define NIB_SHL_K(k, acc, s, unused)                                                                       \
    (acc).p[k] += (fp8_pu)_mm256_sllv_epi32(_mm256_set1_epi32(1), (__m256i)FP8_P32(s, k));
#define NIB_ADD(s)                                                                                         \
    do {                                                                                                   \
        vu16 s_ = (s), t_ = s_ - 32u;                                                                      \
        FP8_EACH(NIB_SHL_K, nib_a, s_, )                                                                   \
        FP8_EACH(NIB_SHL_K, nib_b, t_, )                                                                   \
    } while (0)
#else
#define NIB_ADD(s)                                                                                         \
    do {                                                                                                   \
        VA_OP(nib_a, +, one_shl(s));                                                                       \
        VA_OP(nib_b, +, one_shl((s) - 32u));                                                               \
    } while (0)
#endif
#define NIB_SPILL_PAIR(a, b, n0, n1, n2, n3)                                                               \
    do {                                                                                                   \
        const fp8_pu m4p_ = FP8_P32(m4, 0);                                                                \
        for (int k_ = 0; k_ < FP8_NPIECE; k_++) {                                                          \
            (n0).p[k_] += (a).p[k_] & m4p_, (n1).p[k_] += (a).p[k_] >> 4 & m4p_;                           \
            (n2).p[k_] += (b).p[k_] & m4p_, (n3).p[k_] += (b).p[k_] >> 4 & m4p_;                           \
        }                                                                                                  \
    } while (0)
#endif
#define NIB_SPILL_PIECES() NIB_SPILL_PAIR(nib_a, nib_b, nib_0, nib_1, nib_2, nib_3)
#define NIB_SPILL()                                                                                        \
    do {                                                                                                   \
        NIB_SPILL_PIECES();                                                                                \
        nib_a = nib_b = (au16){0};                                                                         \
        if (WIDE)                                                                                          \
            NIB_SPILL_HI();                                                                                \
        if (++nib_spills == 31)                                                                            \
            NIB_FLUSH();                                                                                   \
    } while (0)
#define NIB_FLUSH()                                                                                        \
    do {                                                                                                   \
        nib_flush(hist, VA_GET(vu16, nib_0), VA_GET(vu16, nib_1), VA_GET(vu16, nib_2), VA_GET(vu16, nib_3), 0, \
                  WIDE ? 32u : 15u);                                                                       \
        nib_0 = nib_1 = nib_2 = nib_3 = (au16){0};                                                         \
        if (WIDE) {                                                                                        \
            nib_flush(hist, VA_GET(vu16, nib_4), VA_GET(vu16, nib_5), VA_GET(vu16, nib_6),                 \
                      VA_GET(vu16, nib_7), 16u, 31u);                                                      \
            nib_4 = nib_5 = nib_6 = nib_7 = (au16){0};                                                     \
        }                                                                                                  \
        nib_spills = 0;                                                                                    \
    } while (0)

/* (codes base + ...; the code skip, a word's unread top nibble, left out) */
static inline __attribute__((always_inline)) void nib_flush(fp8__hist_state *hist, vu16 n0, vu16 n1, vu16 n2,
                                                            vu16 n3, uint32_t base, uint32_t skip)
{
    /* byte j of n0 / n1 / n2 / n3: codes 2j / 2j + 1 / 8 + 2j / 9 + 2j past base */
    const vu16 acc[4] = {n0, n1, n2, n3};
    for (int k = 0; k < 4; k++) {
        uint32_t w[2] = {0, 0}; /* 16-bit sums: bytes 0, 2 / 1, 3 */
        for (int l = 0; l < 16; l++)
            w[0] += acc[k][l] & 0x00FF00FFu, w[1] += acc[k][l] >> 8 & 0x00FF00FFu;
        for (uint32_t j = 0; j < 4; j++) {
            uint32_t c = base + 8 * (uint32_t)(k >> 1) + 2 * j + (uint32_t)(k & 1);
            uint32_t cnt = w[j & 1] >> 16 * (j >> 1) & 0xFFFF;
            if (c != skip && cnt) {
                hist->sub[0][hist->top - c] += cnt;
                fp8__hist_touch(hist, hist->top - c, hist->top - c);
            }
        }
    }
}

/* Bit v set when om[v] (v < nv <= 16) has a lane: made at once, without a
 * branch per vector (such a branch mispredicts on most blocks that have
 * any: x's statistics of the bench's x, a few lanes a block below the
 * window, 5.9 -> 6.15 Gelem/s) */
static inline unsigned vectors_with(const uint16_t *om, size_t nv)
{
#if defined(__AVX512F__)
    __m256i o = _mm256_loadu_si256((const void *)om);
    return (unsigned)_mm256_cmpneq_epi16_mask(o, _mm256_setzero_si256()) & ((1u << nv) - 1u);
#else
    unsigned vs = 0;
    for (size_t v = 0; v < nv; v++)
        vs |= (unsigned)(om[v] != 0) << v;
    return vs;
#endif
}

/* The nonzero elements outside the register window of a block of nv
 * vectors at x (om[v]: vector v's lanes; zeros: bin 0's count is x's zero
 * count) counted into the sub-histograms, the bins touched noted once.
 * Few lanes outside (om_any, the block's lanes outside in any vector, has
 * at most two: ordinary data, a value or two a block below the window) are
 * taken one by one from the vectors that have some.  Many (data wider than
 * the window, such as a Gaussian beside outliers 1000x larger): with
 * AVX-512 every vector's bins are made at once and packed (a compress in
 * registers), without a branch on its om (a coin toss there: x's
 * statistics 2.6 -> 4.0 Gelem/s), then counted in a tight loop. */
static unsigned outside_bins(fp8__hist_state *hist, const float *x, const uint16_t *om, size_t nv, unsigned om_any)
{
    unsigned counted = 0;
    uint32_t blo = UINT32_MAX, bhi = 0;
#if defined(__AVX512F__)
    if (__builtin_popcount(om_any) > 2) {
        uint32_t bins[256 + 16]; /* (each store writes 16, the first popcount of them kept) */
        size_t nb = 0;
        __m512i lo = _mm512_set1_epi32(-1), hi = _mm512_setzero_si512();
        for (size_t v = 0; v < nv; v++) {
            __m512i a = _mm512_loadu_si512((const void *)(x + 16 * v));
            __m512i bin = _mm512_add_epi32(_mm512_srli_epi32(_mm512_and_si512(a, _mm512_set1_epi32(FP8_F32_ABS)), 23),
                                           _mm512_set1_epi32(1));
            lo = _mm512_mask_min_epu32(lo, om[v], lo, bin);
            hi = _mm512_mask_max_epu32(hi, om[v], hi, bin);
            _mm512_storeu_si512((void *)(bins + nb), _mm512_maskz_compress_epi32(om[v], bin));
            nb += (size_t)__builtin_popcount(om[v]);
        }
        for (size_t j = 0; j < nb; j++)
            hist->sub[j & 7][bins[j]]++;
        fp8__hist_touch(hist, (uint32_t)_mm512_reduce_min_epu32(lo), (uint32_t)_mm512_reduce_max_epu32(hi));
        return (unsigned)nb;
    }
#else
    (void)om_any;
#endif
    for (unsigned vs = vectors_with(om, nv); vs; vs &= vs - 1) {
        size_t v = (size_t)__builtin_ctz(vs);
        for (unsigned b = om[v]; b; b &= b - 1) {
            int l = __builtin_ctz(b);
            uint32_t u;
            memcpy(&u, x + v * 16 + (size_t)l, 4);
            uint32_t bin = ((u & FP8_F32_ABS) >> 23) + 1;
            hist->sub[l & 7][bin]++;
            blo = bin < blo ? bin : blo, bhi = bin > bhi ? bin : bhi;
            counted++;
        }
    }
    if (bhi)
        fp8__hist_touch(hist, blo, bhi);
    return counted;
}

/* The lean paths: 16 float32 lanes; every power and product is a float32
 * term, summed into float32 partials over 16 steps (256 elements) and then
 * into double.  A partial holds 16 terms, so it is within 16 * 2^-24 (1e-6)
 * of the exact sum of its terms; the range condition keeps terms away from
 * overflow, and a piece whose spread is too small for its fourth powers
 * (variance below 2^-60) is redone in double.  sum x^2 (the denominator of
 * the error ratios, and l2) is such a sum too, of the squares themselves
 * (not about the shift: a piece far from the running mean would cancel
 * there); summed exactly in double lanes it cost 5-7 % of a cast with all
 * statistics, for no tolerance the error ratios could use (their other
 * sums are float32 partials).
 *
 * x's statistics with the exponent bins of the piece (when hist) computed
 * from the same |x| bits and counted into eight sub-histograms, and with xq
 * the error sums too, in one loop.  x's part is lean when every x is finite
 * and max |x| lies in [2^-24, 2^28] (checked on the way: the bits' maximum),
 * and so does the shift |K| (then |x - K| <= 2^29, its fourth power and a
 * partial of 16 of them below 2^121), the error part when the larger of
 * x's and x_hat's maxima does (NaN and
 * Inf bits lie above); otherwise that part is
 * redone by the masked path.  The bins need no condition.  xq is a
 * constant NULL or not at each call: the compiler builds both loops. */
static inline __attribute__((always_inline)) void xm_core(fp8__moments *m, const float *x, const float *xq,
                                                          size_t n, fp8__hist_state *hist, const int WIDE)
{
    size_t nl = n - n % 16;
    /* the shift: the running mean of the sums so far, else this piece's own
     * (a pass of its own).  A piece far from the running mean loses digits
     * in its own central sums in proportion to its offset^p, but Pebay's
     * merge adds a between-piece term of the same order, so the merged
     * moments keep their accuracy (tested against the oracle on means that
     * jump and drift between the pieces of one part) */
    const float K = m->cn > 0 ? (float)m->cmean : piece_mean(x, nl);
    /* (loop-carried vectors as accumulators: vec_isa.h) */
    ad8 S1a = {0}, S2a = {0}, S3a = {0}, S4a = {0}, L1a = {0}, X2a = {0}, E2a = {0}, Q2a = {0}, XQa = {0};
    vf16 mn0, mx0, mz, me0;
    memcpy(&me0, m->maxerr, 64);
    memcpy(&mn0, m->mn, 64);
    memcpy(&mx0, m->mx, 64);
    memcpy(&mz, m->mnz, 64);
    af16 mna = VA_MAKE(af16, mn0), mxa = VA_MAKE(af16, mx0), me = VA_MAKE(af16, me0);
    /* zmin: the lane minima of nonzero |x| bits (none: all ones) */
    au16 qmaxa = {0}, czeroa = {0}, bmaxa = {0}, zmina = VA_MAKE(au16, (vu16){0} - 1u);
    uint32_t top = hist ? hist->top : 0;
    uint16_t om[16]; /* a block's vectors: nonzero lanes outside the window */
    au16 nib_a = {0}, nib_b = {0}, nib_0 = {0}, nib_1 = {0}, nib_2 = {0}, nib_3 = {0};
    au16 nib_c = {0}, nib_d = {0}, nib_4 = {0}, nib_5 = {0}, nib_6 = {0}, nib_7 = {0}; /* (WIDE) */
    (void)nib_c, (void)nib_d; /* (the builds without XM_WIDE) */
    unsigned nib_spills = 0;
    const vu16 m4 = (vu16){0} + 0x0F0F0F0Fu;
    size_t i = 0;
    while (i < nl) {
        af16 s1 = {0}, s2 = {0}, s3 = {0}, s4 = {0}, l1 = {0}, x2 = {0}, e2 = {0}, q2 = {0}, xq2 = {0};
        size_t stop = nl - i >= 256 ? i + 256 : nl, k0 = i;
        unsigned om_any = 0; /* the block's lanes outside the window, any vector */
        for (; i < stop; i += 16) {
            vf16 xv;
            memcpy(&xv, x + i, 64);
            vf16 d = xv - K, d2 = d * d;
            VA_OP(s1, +, d);
            VA_OP(s2, +, d2);
            VA_FMA(s3, d2, d);
            VA_FMA(s4, d2, d2);
            VA_FMA(x2, xv, xv);
            vu16 au = (vu16)xv & FP8_F32_ABS;
            vf16 ax = (vf16)au;
            VA_OP(l1, +, ax);
            VA_FN(bmaxa, fp8_pmaxu, au);
            VA_FN(mna, fp8_pfmin, xv);
            VA_FN(mxa, fp8_pfmax, xv);
            unsigned nzb = zeros_and_min(au, &czeroa, &zmina);
            if (xq) {
                vf16 qv;
                memcpy(&qv, xq + i, 64);
                ERR_STEP(xv, qv);
                VA_FN(qmaxa, fp8_pmaxu, (vu16)qv & FP8_F32_ABS);
            }
            if (hist) {
                /* bin e + 1 for normal |x| of exponent field e, code
                 * c = top - 1 - e, as the shift s = 4c; zeros and
                 * subnormals (e = 0) fall outside the window (top >= 16;
                 * wide: top >= 32), as does a bin above top (c wraps):
                 * s >= 60 (wide: 124) */
                vu16 s = ((vu16){0} + 4 * (top - 1)) - (au >> 21 & 0x3FCu);
                unsigned o = ge_bits16(s, WIDE ? 124u : 60u) & nzb;
                om[(i - k0) / 16] = (uint16_t)o;
                om_any |= o;
                NIB_ADD(s);
                if (WIDE)
                    NIB_ADD_HI(s);
                if (((i - k0) / 16 & 7) == 7)
                    NIB_SPILL();
            }
        }
        if (hist) {
            if (((stop - k0) / 16 & 7) != 0)
                NIB_SPILL();
            unsigned nout = 0; /* the lanes outside the window */
            if (om_any) /* (most blocks of ordinary data have none: no pass over om) */
                nout = outside_bins(hist, x + k0, om, (stop - k0) / 16, om_any);
            /* the window follows the largest bin so far */
            uint32_t mb = 0;
            vu16 bm = VA_GET(vu16, bmaxa);
            for (int l = 0; l < 16; l++)
                mb = bm[l] > mb ? bm[l] : mb;
            uint32_t want = (mb >> 23) + (mb != 0);
            if (want > top) {
                NIB_FLUSH();
                hist->top = top = want < 16 ? 16 : want;
            } else if (XM_WIDE && !WIDE && nout >= WIDE_AFTER && top >= 32) {
                hist->wide = 1; /* (from the next piece on; not after a block that moved the window,
                                   whose lanes were placed against the old one) */
            }
        }
        ACC(S1a, s1);
        ACC(S2a, s2);
        ACC(S3a, s3);
        ACC(S4a, s4);
        ACC(L1a, l1);
        ACC(X2a, x2);
        if (xq) {
            ACC(E2a, e2);
            ACC(Q2a, q2);
            ACC(XQa, xq2);
        }
    }
    vd8 S1 = VA_GET(vd8, S1a), S2 = VA_GET(vd8, S2a), S3 = VA_GET(vd8, S3a), S4 = VA_GET(vd8, S4a);
    vd8 L1 = VA_GET(vd8, L1a), X2 = VA_GET(vd8, X2a);
    vd8 E2 = VA_GET(vd8, E2a), Q2 = VA_GET(vd8, Q2a), XQ = VA_GET(vd8, XQa);
    vf16 mn = VA_GET(vf16, mna), mx = VA_GET(vf16, mxa), mev = VA_GET(vf16, me);
    vu16 qmax = VA_GET(vu16, qmaxa), czero = VA_GET(vu16, czeroa), bmax = VA_GET(vu16, bmaxa);
    vu16 zmin = VA_GET(vu16, zmina);
    if (hist) {
        NIB_FLUSH();
        uint32_t nz = 0;
        for (int l = 0; l < 16; l++)
            nz += czero[l];
        if (nz) {
            hist->sub[0][0] += nz;
            fp8__hist_touch(hist, 0, 0);
        }
        for (size_t k = nl; k < n; k++) {
            uint32_t u;
            memcpy(&u, x + k, 4);
            u &= FP8_F32_ABS;
            uint32_t bin = (u >> 23) + (u != 0);
            hist->sub[k % FP8_HIST_SUBS][bin]++;
            fp8__hist_touch(hist, bin, bin);
        }
    }
    for (int l = 0; l < 16; l++) { /* the lane minima of nonzero |x| (none: +inf) */
        uint32_t b = zmin[l] == UINT32_MAX ? FP8_F32_INF : zmin[l];
        mz[l] = fp8__bits_to_float(b) < mz[l] ? fp8__bits_to_float(b) : mz[l];
    }
    double T1 = 0, T2 = 0, T3 = 0, T4 = 0;
    uint32_t am = 0;
    for (int l = 0; l < FP8_ML; l++)
        T1 += S1[l], T2 += S2[l], T3 += S3[l], T4 += S4[l];
    for (int l = 0; l < 16; l++)
        am = bmax[l] > am ? bmax[l] : am;
    /* (the shift too: x - K is what is raised to the fourth power, and a
     * running mean far above the piece's own values, after a few pieces of
     * huge values, overflowed the float32 partials to an infinite kurtosis) */
    int lean = nl && am >= FP8_LEAN_LO && am <= FP8_LEAN_HI && fabsf(K) <= 0x1p28f && T2 >= (double)nl * 0x1p-60;
    if (!lean) { /* redo the lean part in double lanes */
        x_masked(m, x, nl);
    } else {
        for (int l = 0; l < FP8_ML; l++)
            m->l1[l] += L1[l], m->xx[l] += X2[l];
        memcpy(m->mn, &mn, 64);
        memcpy(m->mx, &mx, 64);
        memcpy(m->mnz, &mz, 64);
        for (int l = 0; l < 16; l++)
            m->zero += czero[l];
        merge_piece(m, (double)nl, (double)K, T1, T2, T3, T4);
    }
    if (nl < n)
        x_masked(m, x + nl, n - nl);
    if (!xq)
        return;
    /* the error sums: lean on fp8__err_add's condition (the larger of the
     * two maxima in [2^-24, 2^28]), so both routes give the same bits */
    uint32_t qm = am;
    for (int l = 0; l < 16; l++)
        qm = qmax[l] > qm ? qmax[l] : qm;
    err_commit(m, x, xq, n, nl, qm, &E2, &Q2, &XQ, &mev);
}

/* the wide window's copies of the loop (hist->wide, top >= 32: see above),
 * functions of their own so that the narrow loop's registers are its own */
#if XM_WIDE
static __attribute__((noinline)) void xm_wide(fp8__moments *m, const float *x, const float *xq, size_t n,
                                              fp8__hist_state *hist)
{
    if (xq)
        xm_core(m, x, xq, n, hist, 1);
    else
        xm_core(m, x, NULL, n, hist, 1);
}
#define WIDE_HERE(hist) ((hist) && (hist)->wide && (hist)->top >= 32)

/* A part's first piece (the window not placed yet: top 0) decides from its
 * first block alone: wide where that block's largest |x| puts the window's
 * top at 32 or more and WIDE_AFTER of its values lie below the narrow
 * window (or are subnormal), as a narrow block's outside lanes would; the
 * window then starts at that top.  Without it a part's first piece was
 * narrow, and a tensor of 8 pieces or fewer (one a part) never wide. */
static void wide_first(const float *x, size_t n, fp8__hist_state *hist)
{
    if (n < 256)
        return;
    vu16 mb = {0}, v;
    for (size_t i = 0; i < 256; i += 16) {
        memcpy(&v, x + i, 64);
        mb = umax16(mb, v & FP8_F32_ABS);
    }
    uint32_t m = 0;
    for (int l = 0; l < 16; l++)
        m = mb[l] > m ? mb[l] : m;
    uint32_t top = (m >> 23) + 1;
    if (m >= FP8_F32_INF || top < 32)
        return;
    const uint32_t below = (top - 15) << 23; /* |x| bits under the narrow window's lowest bin, top - 14 */
    unsigned count = 0;
    for (size_t i = 0; i < 256; i += 16) {
        memcpy(&v, x + i, 64);
        vu16 a = v & FP8_F32_ABS;
        count += (unsigned)__builtin_popcount(ge_bits16(a, 1u) & ~ge_bits16(a, below) & 0xFFFFu);
    }
    if (count >= WIDE_AFTER)
        hist->wide = 1, hist->top = top;
}
#else
#define xm_wide(m, x, xq, n, hist) ((void)0)
#define WIDE_HERE(hist) 0
#define wide_first(x, n, hist) ((void)0)
#endif

/* x's statistics (with xq: and the error sums) in the narrow or the wide
 * window's loop (xq a constant NULL or not at each call, as xm_core's) */
static inline __attribute__((always_inline)) void xm_any(fp8__moments *m, const float *x, const float *xq,
                                                         size_t n, fp8__hist_state *hist)
{
    if (XM_WIDE && hist && hist->top == 0)
        wide_first(x, n, hist);
    if (WIDE_HERE(hist))
        xm_wide(m, x, xq, n, hist);
    else
        xm_core(m, x, xq, n, hist, 0);
}

void FN(fp8__xmoments_add_)(FP8_XMOMENTS_ARGS) { xm_any(m, x, NULL, n, hist); }

void FN(fp8__both_add_)(FP8_BOTH_ARGS) { xm_any(m, x, xq, n, hist); }

/* The error sums alone (x's statistics given).  Lean (float32 partials of
 * 16 terms) when every x and x_hat is finite and both maxima lie in
 * [2^-24, 2^28] (checked on the way); otherwise the masked path. */
void FN(fp8__err_add_)(FP8_MOMENTS_ARGS)
{
    size_t nl = xq ? n - n % 16 : 0, i = 0;
    ad8 E2a = {0}, Q2a = {0}, XQa = {0}; /* (accumulators: vec_isa.h) */
    vf16 me0;
    memcpy(&me0, m->maxerr, 64);
    af16 me = VA_MAKE(af16, me0);
    au16 bmaxa = {0};
    while (i < nl) {
        af16 e2 = {0}, q2 = {0}, xq2 = {0};
        size_t stop = nl - i >= 256 ? i + 256 : nl;
        for (; i < stop; i += 16) {
            vf16 xv, qv;
            memcpy(&xv, x + i, 64);
            memcpy(&qv, xq + i, 64);
            ERR_STEP(xv, qv);
            VA_FN(bmaxa, fp8_pmaxu, umax16((vu16)xv & FP8_F32_ABS, (vu16)qv & FP8_F32_ABS));
        }
        ACC(E2a, e2);
        ACC(Q2a, q2);
        ACC(XQa, xq2);
    }
    vd8 E2 = VA_GET(vd8, E2a), Q2 = VA_GET(vd8, Q2a), XQ = VA_GET(vd8, XQa);
    vf16 mev = VA_GET(vf16, me);
    vu16 bmax = VA_GET(vu16, bmaxa);
    uint32_t am = 0;
    for (int l = 0; l < 16; l++)
        am = bmax[l] > am ? bmax[l] : am;
    err_commit(m, x, xq, n, nl, am, &E2, &Q2, &XQ, &mev);
}

void FN(fp8__hist_add_)(FP8_HIST_ARGS)
{
    const uint32_t *u = (const uint32_t *)(const void *)x;
    size_t i = 0;
#define BIN(v) ((((v) & FP8_F32_ABS) >> 23) + (((v) & FP8_F32_ABS) != 0))
    uint16_t b[256] __attribute__((aligned(64)));
    for (; i + 256 <= n; i += 256) {
        for (int k = 0; k < 256; k += 16) {
            vu16 v;
            memcpy(&v, u + i + k, sizeof v);
            vu16 a = v & FP8_F32_ABS;
            vu16 bin = (a >> 23) - (vu16)(a != 0); /* + 1 for nonzero */
            vh16 h = __builtin_convertvector(bin, vh16);
            memcpy(b + k, &h, sizeof h);
        }
        for (int k = 0; k < 256; k += 8) {
            sub[0][b[k]]++;
            sub[1][b[k + 1]]++;
            sub[2][b[k + 2]]++;
            sub[3][b[k + 3]]++;
            sub[4][b[k + 4]]++;
            sub[5][b[k + 5]]++;
            sub[6][b[k + 6]]++;
            sub[7][b[k + 7]]++;
        }
    }
    for (; i < n; i++)
        sub[i % FP8_HIST_SUBS][BIN(u[i])]++;
#undef BIN
}
