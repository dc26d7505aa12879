/*
 * stats_vec.c — lane-wise moment sums and the amax / min-nonzero pass (see
 * stats_vec.h).  Compiled three times with FP8_ISA = avx512, avx2, base.
 * The scalar tail runs the same arithmetic in lane 0.
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


typedef uint64_t vq8 __attribute__((vector_size(64)));

/* Bit l set when lane l of a equals v. */
static inline unsigned eq_bits16(vu16 a, uint32_t v)
{
#if defined(__AVX512F__)
    __m512i w;
    memcpy(&w, &a, sizeof w);
    return _mm512_cmpeq_epi32_mask(w, _mm512_set1_epi32((int)v));
#elif defined(__AVX2__)
    __m256i lo, hi, t = _mm256_set1_epi32((int)v);
    memcpy(&lo, &a, 32);
    memcpy(&hi, (char *)&a + 32, 32);
    return (unsigned)_mm256_movemask_ps(_mm256_castsi256_ps(_mm256_cmpeq_epi32(lo, t))) |
           (unsigned)_mm256_movemask_ps(_mm256_castsi256_ps(_mm256_cmpeq_epi32(hi, t))) << 8;
#else
    unsigned b = 0;
    for (int l = 0; l < 16; l++)
        b |= (unsigned)(a[l] == v) << l;
    return b;
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

/* the mean of x[0..n) (n a multiple of 16), as float: a shift */
static float piece_mean(const float *x, size_t n)
{
    vf16 ks = {0};
    for (size_t k = 0; k < n; k += 16) {
        vf16 v;
        memcpy(&v, x + k, 64);
        ks += v;
    }
    double ksum = 0;
    for (int l = 0; l < 16; l++)
        ksum += ks[l];
    return n ? (float)(ksum / (double)n) : 0.0f;
}

/* The exponent histogram's window (bins top - 14 .. top; code c = top -
 * bin, 15 outside) counted in registers.  Each element adds 1 << 4c to a
 * 64-bit word (even lanes' elements to a, odd lanes' to b): sixteen 4-bit
 * counters a word, which take at most 8 vectors before they are spilled
 * into 8-bit counters (even codes in lo, odd in hi; at most 16 a spill, so
 * at most 15 spills); nib_flush sums those across lanes into the window's
 * bins of sub[0].  Locals of xm_core, so that they stay in registers. */
#define NIB_ADD(c)                                                                                         \
    do {                                                                                                   \
        vq8 t_ = (vq8)((c) << 2);                                                                          \
        nib_a += one64 << (t_ & 0xFFFFFFFFu);                                                              \
        nib_b += one64 << (t_ >> 32);                                                                      \
    } while (0)
#define NIB_SPILL()                                                                                        \
    do {                                                                                                   \
        nib_lo += (nib_a & m4) + (nib_b & m4);                                                             \
        nib_hi += (nib_a >> 4 & m4) + (nib_b >> 4 & m4);                                                   \
        nib_a = nib_b = (vq8){0};                                                                          \
        if (++nib_spills == 15)                                                                            \
            NIB_FLUSH();                                                                                   \
    } while (0)
#define NIB_FLUSH()                                                                                        \
    do {                                                                                                   \
        nib_flush(hist, nib_lo, nib_hi);                                                                   \
        nib_lo = nib_hi = (vq8){0};                                                                        \
        nib_spills = 0;                                                                                    \
    } while (0)

static inline __attribute__((always_inline)) void nib_flush(fp8__hist_state *hist, vq8 lo, vq8 hi)
{
    const uint64_t m16 = 0x00FF00FF00FF00FFull;
    uint64_t w[4] = {0, 0, 0, 0}; /* 16-bit sums: codes 0,4,8,12 / 2,6,10,14 / 1,5,9,13 / 3,7,11,15 */
    for (int l = 0; l < 8; l++) {
        w[0] += lo[l] & m16, w[1] += lo[l] >> 8 & m16;
        w[2] += hi[l] & m16, w[3] += hi[l] >> 8 & m16;
    }
    for (int k = 0; k < 4; k++)
        for (int j = 0; j < 4; j++) {
            uint32_t c = (uint32_t)(4 * j + 2 * (k & 1) + (k >> 1)), cnt = (uint32_t)(w[k] >> 16 * j & 0xFFFF);
            if (c != 15 && cnt) {
                hist->sub[0][hist->top - c] += cnt;
                fp8__hist_touch(hist, hist->top - c, hist->top - c);
            }
        }
}

/* The lean paths: 16 float32 lanes; every power and product is a float32
 * term, summed into float32 partials over 16 steps (256 elements) and then
 * into double.  A partial holds 16 terms, so it is within 16 * 2^-24 (1e-6)
 * of the exact sum of its terms; the range condition keeps terms away from
 * overflow, and a piece whose spread is too small for its fourth powers
 * (variance below 2^-60) is redone in double.  sum x^2 (the denominator of
 * the error ratios) is summed in double lanes, where each square is exact.
 *
 * x's statistics with the exponent bins of the piece (when hist) computed
 * from the same |x| bits and counted into eight sub-histograms, and with xq
 * the error sums too, in one loop.  x's part is lean when every x is finite
 * and max |x| lies in [2^-24, 2^28] (checked on the way: the bits' maximum),
 * the error part when the larger of x's and x_hat's maxima does (NaN and
 * Inf bits lie above); otherwise that part is
 * redone by the masked path.  The bins need no condition.  xq is a
 * constant NULL or not at each call: the compiler builds both loops. */
static inline __attribute__((always_inline)) void xm_core(fp8__moments *m, const float *x, const float *xq,
                                                          size_t n, fp8__hist_state *hist)
{
    size_t nl = n - n % 16;
    /* the shift: the running mean of the sums so far, else this piece's own
     * (a pass of its own).  A piece far from the running mean loses digits
     * in its own central sums in proportion to its offset^p, but Pebay's
     * merge adds a between-piece term of the same order, so the merged
     * moments keep their accuracy (tested against the oracle on means that
     * jump and drift between the pieces of one part) */
    const float K = m->cn > 0 ? (float)m->cmean : piece_mean(x, nl);
    vd8 S1 = {0}, S2 = {0}, S3 = {0}, S4 = {0}, L1 = {0}, XA = {0}, XB = {0}, E2 = {0}, Q2 = {0}, XQ = {0};
    vf16 mn, mx, mz, me;
    memcpy(&me, m->maxerr, 64);
    vu16 qmax = {0};
    memcpy(&mn, m->mn, 64);
    memcpy(&mx, m->mx, 64);
    memcpy(&mz, m->mnz, 64);
    const vf16 pinf = (vf16){0} + INFINITY;
    vu16 czero = {0}, bmax = {0};
    uint16_t om[16]; /* a block's vectors: lanes outside the window */
    uint32_t top = hist ? hist->top : 0;
    vq8 nib_a = {0}, nib_b = {0}, nib_lo = {0}, nib_hi = {0};
    unsigned nib_spills = 0;
    const vq8 one64 = (vq8){0} + 1, m4 = (vq8){0} + 0x0F0F0F0F0F0F0F0Full;
    size_t i = 0;
    while (i < nl) {
        vf16 s1 = {0}, s2 = {0}, s3 = {0}, s4 = {0}, l1 = {0}, e2 = {0}, q2 = {0}, xq2 = {0};
        size_t stop = nl - i >= 256 ? i + 256 : nl, k0 = i;
        for (; i < stop; i += 16) {
            vf16 xv;
            memcpy(&xv, x + i, 64);
            vf16 d = xv - K, d2 = d * d;
            s1 += d;
            s2 += d2;
            FMA16(s3, d2, d);
            FMA16(s4, d2, d2);
            vd8 xlo, xhi; /* x^2 exact in double, summed there */
            HALVES(xv, xlo, xhi);
            FMA8(XA, xlo, xlo);
            FMA8(XB, xhi, xhi);
            vu16 au = (vu16)xv & FP8_F32_ABS;
            vf16 ax = (vf16)au;
            l1 += ax;
            bmax = umax16(bmax, au);
            mn = VMIN16(mn, xv);
            mx = VMAX16(mx, xv);
            vi16 z = (vi16)(au == 0);
            czero -= (vu16)z;
            mz = VMIN16(mz, (vf16)(((vi16)ax & ~z) | ((vi16)pinf & z)));
            if (xq) {
                vf16 qv;
                memcpy(&qv, xq + i, 64);
                ERR_STEP(xv, qv);
                qmax = umax16(qmax, (vu16)qv & FP8_F32_ABS);
            }
            if (hist) {
                vu16 c = ((vu16){0} + top) - ((au >> 23) + 1 + (vu16)z); /* bin: 0 for zeros */
                c = umin16(c, (vu16){0} + 15u);                           /* above top wraps: 15 too */
                om[(i - k0) / 16] = (uint16_t)eq_bits16(c, 15u);
                NIB_ADD(c);
                if (((i - k0) / 16 & 7) == 7)
                    NIB_SPILL();
            }
        }
        if (hist) {
            if (((stop - k0) / 16 & 7) != 0)
                NIB_SPILL();
            for (size_t v = 0; v < (stop - k0) / 16; v++) /* outside the window: one by one */
                for (unsigned b = om[v]; b; b &= b - 1) {
                    int l = __builtin_ctz(b);
                    uint32_t u;
                    memcpy(&u, x + k0 + v * 16 + (size_t)l, 4);
                    u &= FP8_F32_ABS;
                    uint32_t bin = (u >> 23) + (u != 0);
                    hist->sub[l & 7][bin]++;
                    fp8__hist_touch(hist, bin, bin);
                }
            /* the window follows the largest bin so far */
            uint32_t mb = 0;
            for (int l = 0; l < 16; l++)
                mb = bmax[l] > mb ? bmax[l] : mb;
            uint32_t want = (mb >> 23) + (mb != 0);
            if (want > top) {
                NIB_FLUSH();
                hist->top = top = want;
            }
        }
        ACC(S1, s1);
        ACC(S2, s2);
        ACC(S3, s3);
        ACC(S4, s4);
        ACC(L1, l1);
        if (xq) {
            ACC(E2, e2);
            ACC(Q2, q2);
            ACC(XQ, xq2);
        }
    }
    if (hist)
        NIB_FLUSH();
    if (hist)
        for (size_t k = nl; k < n; k++) {
            uint32_t u;
            memcpy(&u, x + k, 4);
            u &= FP8_F32_ABS;
            uint32_t bin = (u >> 23) + (u != 0);
            hist->sub[k % FP8_HIST_SUBS][bin]++;
            fp8__hist_touch(hist, bin, bin);
        }
    double T1 = 0, T2 = 0, T3 = 0, T4 = 0;
    uint32_t am = 0;
    for (int l = 0; l < FP8_ML; l++)
        T1 += S1[l], T2 += S2[l], T3 += S3[l], T4 += S4[l];
    for (int l = 0; l < 16; l++)
        am = bmax[l] > am ? bmax[l] : am;
    int lean = nl && am >= FP8_LEAN_LO && am <= FP8_LEAN_HI && T2 >= (double)nl * 0x1p-60;
    if (!lean) { /* redo the lean part in double lanes */
        x_masked(m, x, nl);
    } else {
        for (int l = 0; l < FP8_ML; l++)
            m->l1[l] += L1[l], m->xx[l] += XA[l] + XB[l];
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
    err_commit(m, x, xq, n, nl, qm, &E2, &Q2, &XQ, &me);
}

void FN(fp8__xmoments_add_)(FP8_XMOMENTS_ARGS) { xm_core(m, x, NULL, n, hist); }

void FN(fp8__both_add_)(FP8_BOTH_ARGS) { xm_core(m, x, xq, n, hist); }

/* The error sums alone (x's statistics given).  Lean (float32 partials of
 * 16 terms) when every x and x_hat is finite and both maxima lie in
 * [2^-24, 2^28] (checked on the way); otherwise the masked path. */
void FN(fp8__err_add_)(FP8_MOMENTS_ARGS)
{
    size_t nl = xq ? n - n % 16 : 0, i = 0;
    vd8 E2 = {0}, Q2 = {0}, XQ = {0};
    vf16 me;
    memcpy(&me, m->maxerr, 64);
    vu16 bmax = {0};
    while (i < nl) {
        vf16 e2 = {0}, q2 = {0}, xq2 = {0};
        size_t stop = nl - i >= 256 ? i + 256 : nl;
        for (; i < stop; i += 16) {
            vf16 xv, qv;
            memcpy(&xv, x + i, 64);
            memcpy(&qv, xq + i, 64);
            ERR_STEP(xv, qv);
            bmax = umax16(bmax, umax16((vu16)xv & FP8_F32_ABS, (vu16)qv & FP8_F32_ABS));
        }
        ACC(E2, e2);
        ACC(Q2, q2);
        ACC(XQ, xq2);
    }
    uint32_t am = 0;
    for (int l = 0; l < 16; l++)
        am = bmax[l] > am ? bmax[l] : am;
    err_commit(m, x, xq, n, nl, am, &E2, &Q2, &XQ, &me);
}

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
    vu16 amax = {0}, ninf = {0}, nnan = {0};
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        vu16 a;
        memcpy(&a, x + i, 64);
        a &= FP8_F32_ABS;
        vu16 fin = (vu16)(a < FP8_F32_INF);
        vu16 af = a & fin;
        amax = umax16(amax, af);
        ninf -= (vu16)(a == FP8_F32_INF);
        nnan -= (vu16)(a > FP8_F32_INF);
    }
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
    vu16 m0 = {0}, m1 = {0}, m2 = {0}, m3 = {0};
    size_t i = 0;
    for (; i + 64 <= n; i += 64) {
        vu16 a[4];
        memcpy(a, x + i, sizeof a);
        m0 = umax16(m0, a[0] & FP8_F32_ABS);
        m1 = umax16(m1, a[1] & FP8_F32_ABS);
        m2 = umax16(m2, a[2] & FP8_F32_ABS);
        m3 = umax16(m3, a[3] & FP8_F32_ABS);
    }
    for (; i + 16 <= n; i += 16) {
        vu16 a;
        memcpy(&a, x + i, 64);
        m0 = umax16(m0, a & FP8_F32_ABS);
    }
    m0 = umax16(umax16(m0, m1), umax16(m2, m3));
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
        vu16 c = {0};
        for (; i < stop; i += 16) {
            vu16 a;
            memcpy(&a, x + i, 64);
            a &= FP8_F32_ABS;
            c -= (vu16)((vi16)(a > t) & (vi16)(a <= inf)); /* NaN lies above Inf: not counted */
        }
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
    vu16 am = {0}, mn = big;
    for (size_t k = 0; k < glen; k += 16) {
        vu16 a;
        memcpy(&a, x + k, 64);
        a &= FP8_F32_ABS;
        vu16 af = a & (vu16)(a < FP8_F32_INF);
        am = umax16(am, af);
        vu16 nz = (vu16)(vi16)(af != 0);
        mn = umin16(mn, (af & nz) | (big & ~nz));
    }
    *amax = am, *minnz = mn;
}

/* 16 groups at once: their 16-lane vectors folded pairwise (blocks of 16, 8,
 * 4, 2 lanes halve at each level) into one vector whose lane L holds group
 * bitreverse4(L); a last shuffle puts group g in lane g.  15 folds of two
 * shuffles each for 16 groups, where a reduction per group took 8. */
#define FOLD(A, B, P, Q, OP) OP(__builtin_shuffle(A, B, P), __builtin_shuffle(A, B, Q))
static inline vu16 fold16(vu16 *v, vu16 (*op)(vu16, vu16))
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
    vu16 w[8], y[4], z[2];
    for (int j = 0; j < 8; j++)
        w[j] = FOLD(v[2 * j], v[2 * j + 1], p1, q1, op);
    for (int j = 0; j < 4; j++)
        y[j] = FOLD(w[2 * j], w[2 * j + 1], p2, q2, op);
    for (int j = 0; j < 2; j++)
        z[j] = FOLD(y[2 * j], y[2 * j + 1], p3, q3, op);
    vu16 r = FOLD(z[0], z[1], p4, q4, op);
    return __builtin_shuffle(r, rev);
}
#undef FOLD

void FN(fp8__range_groups_)(FP8_RANGE_GROUPS_ARGS)
{
    size_t ng = n / glen, g = 0;
    for (; g + 16 <= ng; g += 16) {
        vu16 am[16], mn[16];
        for (int k = 0; k < 16; k++)
            group_lanes(x + (g + (size_t)k) * glen, glen, &am[k], &mn[k]);
        vu16 ra = fold16(am, umax16), rm = fold16(mn, umin16);
        memcpy(amax_bits + g, &ra, sizeof ra);
        memcpy(minnz_bits + g, &rm, sizeof rm);
    }
    for (; g < ng; g++) {
        vu16 am, mn;
        group_lanes(x + g * glen, glen, &am, &mn);
        uint32_t a = 0, m = FP8_F32_INF;
        for (int l = 0; l < 16; l++) {
            a = am[l] > a ? am[l] : a;
            m = mn[l] < m ? mn[l] : m;
        }
        amax_bits[g] = a;
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
    __m256i lo, hi;
    memcpy(&lo, &c, 32);
    memcpy(&hi, (char *)&c + 32, 32);
    __m256i o = _mm256_or_si256(lo, hi);
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

/* Two passes.  The float32 bits of a positive normal v, as a number, are
 * 2^23 (log2 v + 127 - c(v)) with 0 <= c(v) < 0.0861, so the difference of
 * bits a - m is 2^23 log2(a/m) within 0.0861 * 2^23 either way: the first
 * pass takes the largest difference over groups whose minimum is normal;
 * the true maximum lies within 2^22 of it, and only groups that close (and
 * those with a subnormal minimum, whose bits are not logarithmic) are
 * compared exactly, in order, by the second. */
size_t FN(fp8__best_ratio_)(FP8_BEST_RATIO_ARGS)
{
    vu16 mxd = {0}, anysub = {0};
    size_t g = 0;
    for (; g + 16 <= ng; g += 16) {
        vu16 a, m;
        memcpy(&a, amax + g, 64);
        memcpy(&m, minnz + g, 64);
        vu16 valid = (vu16)(vi16)(m < FP8_F32_INF) & (vu16)(vi16)(a != 0);
        vu16 normal = valid & (vu16)(vi16)(m >= 0x00800000u);
        anysub |= valid & ~normal;
        mxd = umax16(mxd, (a - m) & normal);
    }
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
    const uint32_t thr = dmax > (1u << 22) ? dmax - (1u << 22) : 0;
    double ba = 0, bm = 1;
    size_t best = SIZE_MAX;
    for (g = 0; g + 16 <= ng; g += 16) {
        vu16 a, m;
        memcpy(&a, amax + g, 64);
        memcpy(&m, minnz + g, 64);
        vu16 valid = (vu16)(vi16)(m < FP8_F32_INF) & (vu16)(vi16)(a != 0);
        vu16 cand = valid & ((vu16)(vi16)(a - m >= thr) | (vu16)(vi16)(m < 0x00800000u));
        if (!any16(cand))
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
