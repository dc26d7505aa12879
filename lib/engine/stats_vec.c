/*
 * stats_vec.c — lane-wise moment sums, error sums and exponent histograms
 * (see stats_vec.h; the histogram's register window: stats_hist.h; the
 * double-lane path for what float32 sums cannot hold: moments_vec.c; the
 * amax and range passes are range_vec.c's).
 * Compiled three times with FP8_ISA = avx512, avx2, base.  The scalar
 * tail runs the same arithmetic in lane 0.
 */
#include <math.h>
#include <string.h>

#include "f32bits.h"
#include "kernel_vec.h"
#include "stats_hist.h"
#include "stats_vec.h"
#include "vec_isa.h"
#include "vec_sums.h"
#if defined(__AVX512F__) || defined(__AVX2__)
#include <immintrin.h>
#endif


#if !defined(__AVX512F__) && !defined(__AVX2__) && FP8_NPIECE == 4
/* Bit l set where lane l of the mask m (all ones or zero) is set: each
 * lane's own bit kept where set, the four pieces ORed, then the piece's
 * four lanes (lane by lane, sixteen compares and shifts, it was a quarter
 * of x's statistics in the SSE2 build) */
static inline unsigned lane_bits16(vi16 m)
{
    const vu16 w = {1u, 2u, 4u, 8u, 16u, 32u, 64u, 128u, 256u, 512u, 1024u, 2048u, 4096u, 8192u, 16384u, 32768u};
    vu16 b = (vu16)m & w;
    fp8_pu p = FP8_P32(b, 0) | FP8_P32(b, 1) | FP8_P32(b, 2) | FP8_P32(b, 3);
    return p[0] | p[1] | p[2] | p[3];
}
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
#elif FP8_NPIECE == 4
    return lane_bits16(VGE(a, v));
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
#elif defined(__AVX2__)
    /* piece by piece (the accumulators' own pieces): written on the 64-byte
     * vector, GCC moved the zero lanes' subtract through general registers
     * a lane at a time */
    unsigned zb = 0;
#define ZM_PIECE(k)                                                                                        \
    do {                                                                                                   \
        __m256i a_ = (__m256i)FP8_P32(au, k), isz_ = _mm256_cmpeq_epi32(a_, _mm256_setzero_si256());      \
        cz->p[k] = (fp8_pu)_mm256_sub_epi32((__m256i)cz->p[k], isz_);                                      \
        zm->p[k] = fp8_pminu(zm->p[k], (fp8_pu)_mm256_or_si256(a_, isz_));                                 \
        zb |= (unsigned)_mm256_movemask_ps(_mm256_castsi256_ps(isz_)) << (8 * (k));                        \
    } while (0)
    ZM_PIECE(0);
    ZM_PIECE(1);
#undef ZM_PIECE
    return ~zb & 0xFFFFu; /* (the nonzero lanes) */
#else
    vi16 isz = VEQ(au, 0);
    VA_OP(*cz, -, (vu16)isz);
    VA_FN(*zm, fp8_pminu, au | (vu16)isz); /* zeros: all ones, above every |x| */
#if FP8_NPIECE == 4
    return lane_bits16(~isz); /* (the nonzero lanes) */
#else
    return ge_bits16(au, 1u);
#endif
#endif
}

/* Tiny pieces: the largest magnitude (float32 bits maxbits) above 0 and
 * below 2^-24, as small gradients hold.  Their float32 powers would
 * underflow, so the lean sums refuse them, and in double lanes such a
 * piece took 8x the time.  Scaled by 2^k (k >= 1: exact, nothing
 * overflows, a subnormal becomes normal) its largest magnitude lies in
 * [2^-23, 2); the lean sums are taken of the scaled values, a chunk at a
 * time, and scaled back by powers of two (exact).  Extremes, counts and
 * |x - x_hat| scale back exactly too.  (The exponent bins are the first
 * pass's, of x itself.) */
#define TINY_CHUNK 1024
/* 2^k for maxbits (fp8__tiny_bits), *u = 2^-k */
static float tiny_scale(uint32_t maxbits, double *u)
{
    uint32_t e = maxbits >> 23; /* (a subnormal maximum: 2^126, its scaled maximum >= 2^-23) */
    int k = e ? 127 - (int)e : 126;
    *u = ldexp(1.0, -k);
    return fp8__bits_to_float((uint32_t)(127 + k) << 23);
}

/* t's sums and extremes of scaled values scaled back by u = 2^-k */
static void tiny_unscale(fp8__moments *t, double u)
{
    const double u2 = u * u;
    const float uf = (float)u;
    t->cmean *= u, t->cM2 *= u2, t->cM3 *= u2 * u, t->cM4 *= u2 * u2;
    for (int l = 0; l < FP8_ML; l++)
        t->l1[l] *= u, t->xx[l] *= u2, t->e2[l] *= u2, t->q2[l] *= u2, t->xq[l] *= u2;
    for (int l = 0; l < 16; l++)
        t->mn[l] *= uf, t->mx[l] *= uf, t->mnz[l] *= uf, t->maxerr[l] *= uf;
}

static void xm_plain(fp8__moments *m, const float *x, size_t n);

/* x's statistics of x[0..n) (n a multiple of 16, maximum maxbits) scaled */
static void x_tiny(fp8__moments *m, const float *x, size_t n, uint32_t maxbits)
{
    double u;
    const float S = tiny_scale(maxbits, &u);
    float b[TINY_CHUNK];
    for (size_t i = 0; i < n; i += TINY_CHUNK) {
        size_t c = n - i < TINY_CHUNK ? n - i : TINY_CHUNK;
        for (size_t j = 0; j < c; j++)
            b[j] = x[i + j] * S;
        fp8__moments t;
        fp8__moments_init(&t);
        xm_plain(&t, b, c);
        tiny_unscale(&t, u);
        /* (x's fields only: t's error fields are empty) */
        fp8__moments_merge(m, &t);
    }
}

/* the error sums of x[0..n) against xq (n a multiple of 16, the larger
 * maximum maxbits) scaled */
static void err_tiny(fp8__moments *m, const float *x, const float *xq, size_t n, uint32_t maxbits)
{
    double u;
    const float S = tiny_scale(maxbits, &u);
    float b[TINY_CHUNK], bq[TINY_CHUNK];
    for (size_t i = 0; i < n; i += TINY_CHUNK) {
        size_t c = n - i < TINY_CHUNK ? n - i : TINY_CHUNK;
        for (size_t j = 0; j < c; j++)
            b[j] = x[i + j] * S, bq[j] = xq[i + j] * S;
        fp8__moments t;
        fp8__moments_init(&t);
        FN(fp8__err_add_)(&t, b, bq, c);
        tiny_unscale(&t, u);
        for (int l = 0; l < FP8_ML; l++)
            m->e2[l] += t.e2[l], m->q2[l] += t.q2[l], m->xq[l] += t.xq[l];
        for (int l = 0; l < 16; l++)
            m->maxerr[l] = t.maxerr[l] > m->maxerr[l] ? t.maxerr[l] : m->maxerr[l];
    }
}

/* The lean error sums of x[0..nl) (E2, Q2, XQ, me) enter m when the larger
 * of x's and x_hat's maxima (float32 bits; NaN and Inf lie above) is in
 * [2^-24, 2^28] or 0; when it is tiny (fp8__tiny_bits), they are taken again of
 * the scaled values; whatever they did not cover is summed in double. */
static void err_commit(fp8__moments *m, const float *x, const float *xq, size_t n, size_t nl, uint32_t maxbits,
                       const vd8 *E2, const vd8 *Q2, const vd8 *XQ, const vf16 *me)
{
    size_t from = 0;
    if (nl && fp8__lean_bits(maxbits)) {
        for (int l = 0; l < FP8_ML; l++)
            m->e2[l] += (*E2)[l], m->q2[l] += (*Q2)[l], m->xq[l] += (*XQ)[l];
        memcpy(m->maxerr, me, 64);
        from = nl;
    } else if (nl && xq && fp8__tiny_bits(maxbits)) {
        err_tiny(m, x, xq, nl, maxbits);
        m->tiny = 1;
        from = nl;
    }
    if (from < n)
        FN(fp8__err_masked_)(m, x + from, xq ? xq + from : NULL, n - from);
}

/* the mean of x[0..n) (n a multiple of 16), as float: a shift.  Four
 * partial sums, so that the adds do not wait for each other (one chain of
 * adds made this loop latency-bound: 2 % of a small record) */
/* acc += the 16 floats at src, an af16 accumulator: where it is pieces,
 * each piece loaded as a piece (a piece taken from a 64-byte vector, GCC 12
 * loaded a lane at a time) */
#if FP8_NPIECE == 1
#define VA_ADD_AT(acc, src)                                                                                \
    do {                                                                                                   \
        vf16 v_;                                                                                           \
        memcpy(&v_, (src), 64);                                                                            \
        (acc) += v_;                                                                                       \
    } while (0)
#else
#define VA_ADD_AT(acc, src)                                                                                \
    do {                                                                                                   \
        for (int k_ = 0; k_ < FP8_NPIECE; k_++) {                                                          \
            fp8_pf v_;                                                                                     \
            memcpy(&v_, (src) + k_ * (16 / FP8_NPIECE), sizeof v_);                                        \
            (acc).p[k_] += v_;                                                                             \
        }                                                                                                  \
    } while (0)
#endif
static float piece_mean(const float *x, size_t n)
{
    /* (accumulators: vec_isa.h; as 64-byte vectors the AVX2 build kept
     * them on the stack, moved 8 bytes at a time) */
    af16 a0 = {0}, a1 = {0}, a2 = {0}, a3 = {0};
    size_t k = 0;
    for (; k + 64 <= n; k += 64) {
        VA_ADD_AT(a0, x + k);
        VA_ADD_AT(a1, x + k + 16);
        VA_ADD_AT(a2, x + k + 32);
        VA_ADD_AT(a3, x + k + 48);
    }
    for (; k < n; k += 16)
        VA_ADD_AT(a0, x + k);
    vf16 s = (VA_GET(vf16, a0) + VA_GET(vf16, a1)) + (VA_GET(vf16, a2) + VA_GET(vf16, a3));
    double ksum = 0;
    for (int l = 0; l < 16; l++)
        ksum += s[l];
    return n ? (float)(ksum / (double)n) : 0.0f;
}

/* The mean of 16 vectors spread evenly over x[0..nl) (nl a multiple of
 * 16, at least 256): a part's first piece's shift (xm_core) */
static float sample_mean(const float *x, size_t nl)
{
    const size_t stride = nl / 16 - nl / 16 % 16;
    vf16 a = {0}, v;
    for (size_t k = 0; k < 16; k++) {
        memcpy(&v, x + k * stride, 64);
        a += v;
    }
    double ksum = 0;
    for (int l = 0; l < 16; l++)
        ksum += a[l];
    return (float)(ksum / 256.0);
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
static void xm_again(fp8__moments *m, const float *x, const float *xq, size_t n, const float *K);

/* a part's first piece of at least this many elements takes its shift from
 * a sample (sample_mean; below: from all of them) */
#define SHIFT_SAMPLED 1024

static inline __attribute__((always_inline)) void xm_core(fp8__moments *m, const float *x, const float *xq,
                                                          size_t n, fp8__hist_state *hist, const int WIDE,
                                                          uint32_t pf, const float *Kgiven)
{
    size_t nl = n - n % 16;
    /* the shift: Kgiven, else the running mean of the sums so far, else
     * this piece's own.  A piece far from the running mean loses digits
     * in its own central sums in proportion to its offset^p, but Pebay's
     * merge adds a between-piece term of the same order, so the merged
     * moments keep their accuracy (tested against the oracle on means that
     * jump and drift between the pieces of one part).  A part's first
     * piece has no such term: its shift must lie near its mean.  A pass of
     * its own to take that mean was a ninth of the engine's time on the
     * small tensors of a training step (a profile on the loop bench's 68);
     * the mean of 256 of its values, 16 vectors spread evenly over it, is
     * taken instead, and where the piece's sums show that to lie far from
     * its mean (over a quarter of its standard deviation), the piece's sums
     * are taken again about that mean (xm_again: its bins not counted
     * twice) */
    const int sampled = !Kgiven && m->cn <= 0 && nl >= SHIFT_SAMPLED;
    const float K = Kgiven ? *Kgiven : m->cn > 0 ? (float)m->cmean : sampled ? sample_mean(x, nl) : piece_mean(x, nl);
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
        if (pf) /* (x's own pass over a tensor larger than the caches: the block pf bytes ahead) */
            for (size_t k = 0; k < 256 * sizeof(float); k += 64)
                __builtin_prefetch((const char *)(x + i) + pf + k, 0, 1);
        unsigned om_any = 0; /* the block's lanes outside the window, any vector */
        /* runs of 8 vectors (fewer at a part's end), the 4-bit counters
         * spilled after each (NIB_SPILL: at most 8 adds between spills),
         * so that no vector tests where it lies in its run */
        while (i < stop) {
            const size_t stop8 = stop - i > 128 ? i + 128 : stop;
#pragma GCC unroll 8
            for (; i < stop8; i += 16) {
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
                }
            }
            if (hist)
                NIB_SPILL();
        }
        if (hist) {
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
    /* (T2 == 0: every x - K was 0 — with max |x| in range no other float
     * square is 0 — so every sum is an exact 0; am == 0: every x is +-0, as
     * in padding or a bias at its start, whose double sums the float ones
     * equal while K's powers stay in range: 8x slower in double) */
    int lean = nl && fp8__lean_bits(am) && fabsf(K) <= 0x1p28f && (T2 >= (double)nl * 0x1p-60 || T2 == 0);
    if (lean && sampled && 15.0 * T1 * T1 > (double)nl * (T2 - T1 * T1 / (double)nl)) {
        /* (d = T1 / nl, the piece's mean less K, and d^2 > var / 15, var
         * = T2 / nl - d^2: the sums again about the piece's mean; its
         * bins counted above, the tail and the error sums left to them) */
        const float Kp = (float)((double)K + T1 / (double)nl);
        xm_again(m, x, xq, n, &Kp);
        return;
    }
    m->tiny = !lean && fp8__tiny_bits(am);
    if (m->tiny) { /* (every x finite) */
        x_tiny(m, x, nl, am);
    } else if (!lean) { /* redo the lean part in double lanes */
        FN(fp8__x_masked_)(m, x, nl);
    } else {
        for (int l = 0; l < FP8_ML; l++)
            m->l1[l] += L1[l], m->xx[l] += X2[l];
        memcpy(m->mn, &mn, 64);
        memcpy(m->mx, &mx, 64);
        memcpy(m->mnz, &mz, 64);
        for (int l = 0; l < 16; l++)
            m->zero += czero[l];
        fp8__moments_add_shifted(m, (double)nl, (double)K, T1, T2, T3, T4);
    }
    if (nl < n)
        FN(fp8__x_masked_)(m, x + nl, n - nl);
    if (!xq)
        return;
    /* the error sums: lean on fp8__err_add's condition (the larger of the
     * two maxima in [2^-24, 2^28]), so both routes give the same bits */
    uint32_t qm = am;
    for (int l = 0; l < 16; l++)
        qm = qmax[l] > qm ? qmax[l] : qm;
    err_commit(m, x, xq, n, nl, qm, &E2, &Q2, &XQ, &mev);
}

/* x's statistics alone, no bins (x_tiny's scaled chunks: their maximum
 * is not tiny, so this does not come back to x_tiny) */
static __attribute__((noinline)) void xm_plain(fp8__moments *m, const float *x, size_t n)
{
    xm_core(m, x, NULL, n, NULL, 0, 0, NULL);
}

/* x's statistics (with xq: and the error sums) of a piece again, shifted by
 * *K, no bins (see xm_core) */
static __attribute__((noinline)) void xm_again(fp8__moments *m, const float *x, const float *xq, size_t n,
                                               const float *K)
{
    if (xq)
        xm_core(m, x, xq, n, NULL, 0, 0, K);
    else
        xm_core(m, x, NULL, n, NULL, 0, 0, K);
}

/* the wide window's copies of the loop (hist->wide, top >= 32: see above),
 * functions of their own so that the narrow loop's registers are its own */
#if XM_WIDE
static __attribute__((noinline)) void xm_wide(fp8__moments *m, const float *x, const float *xq, size_t n,
                                              fp8__hist_state *hist, uint32_t pf)
{
    if (xq)
        xm_core(m, x, xq, n, hist, 1, 0, NULL);
    else
        xm_core(m, x, NULL, n, hist, 1, pf, NULL);
}
#define WIDE_HERE(hist) ((hist) && (hist)->wide) /* (set only with top >= 32; top only grows) */

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
#define xm_wide(m, x, xq, n, hist, pf) ((void)0)
#define WIDE_HERE(hist) 0
#define wide_first(x, n, hist) ((void)0)
#endif

/* the largest |x| bits of x[0..nl) (*qmax: of x and xq, xq not NULL)
 * when both are tiny (fp8__tiny_bits: every value finite); else 0 */
static uint32_t tiny_maxima(const float *x, const float *xq, size_t nl, uint32_t *qmax)
{
    uint32_t a = 0, qa = 0;
    uint64_t ci = 0, cn = 0, qi = 0, qn = 0;
    FN(fp8__amax_scan_)(x, nl, &a, &ci, &cn);
    if (xq)
        FN(fp8__amax_scan_)(xq, nl, &qa, &qi, &qn);
    *qmax = a > qa ? a : qa;
    return nl && !(ci || cn || qi || qn) && fp8__tiny_bits(a) && fp8__tiny_bits(*qmax) ? a : 0;
}

/* After a tiny piece (m->tiny), the next one's maxima first (in cache, a
 * fraction of the lean pass that would find it tiny again): when tiny, x's
 * statistics and the error sums scaled at once, its bins counted as
 * fp8__hist_add does, and 1; otherwise 0 and m->tiny cleared.  The same
 * sums as the lean pass followed by x_tiny / err_tiny. */
static int tiny_first(fp8__moments *m, const float *x, const float *xq, size_t n, fp8__hist_state *hist)
{
    size_t nl = n - n % 16;
    uint32_t qm, a = tiny_maxima(x, xq, nl, &qm);
    if (!a) {
        m->tiny = 0;
        return 0;
    }
    x_tiny(m, x, nl, a);
    if (nl < n)
        FN(fp8__x_masked_)(m, x + nl, n - nl);
    if (hist) {
        FN(fp8__hist_add_)(hist->sub, x, n);
        fp8__hist_touch(hist, 0, 256); /* (every bin: NaN and Inf may lie in the tail) */
    }
    if (xq) {
        err_tiny(m, x, xq, nl, qm);
        if (nl < n)
            FN(fp8__err_masked_)(m, x + nl, xq + nl, n - nl);
    }
    return 1;
}

/* x's statistics (with xq: and the error sums) in the narrow or the wide
 * window's loop (xq a constant NULL or not at each call, as xm_core's) */
static inline __attribute__((always_inline)) void xm_any(fp8__moments *m, const float *x, const float *xq,
                                                         size_t n, fp8__hist_state *hist, uint32_t pf)
{
    if (m->tiny && tiny_first(m, x, xq, n, hist))
        return;
    if (XM_WIDE && hist && hist->top == 0)
        wide_first(x, n, hist);
    if (WIDE_HERE(hist))
        xm_wide(m, x, xq, n, hist, pf);
    else if (hist) /* (two loops: hist a constant in each) */
        xm_core(m, x, xq, n, hist, 0, pf, NULL);
    else
        xm_core(m, x, xq, n, NULL, 0, pf, NULL);
}

void FN(fp8__xmoments_add_)(FP8_XMOMENTS_ARGS) { xm_any(m, x, NULL, n, hist, prefetch); }

void FN(fp8__both_add_)(FP8_BOTH_ARGS) { xm_any(m, x, xq, n, hist, 0); }

/* The error sums alone (x's statistics given).  Lean (float32 partials of
 * 16 terms) when every x and x_hat is finite and both maxima lie in
 * [2^-24, 2^28] (checked on the way); otherwise the masked path. */
void FN(fp8__err_add_)(FP8_MOMENTS_ARGS)
{
    size_t nl = xq ? n - n % 16 : 0, i = 0;
    if (m->tiny && nl) { /* (as tiny_first) */
        uint32_t qm;
        if (tiny_maxima(x, xq, nl, &qm)) {
            err_tiny(m, x, xq, nl, qm);
            if (nl < n)
                FN(fp8__err_masked_)(m, x + nl, xq + nl, n - nl);
            return;
        }
        m->tiny = 0;
    }
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
