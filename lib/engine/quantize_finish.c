/*
 * quantize_finish.c — the engine's sums turned into fp8_stats: x's own
 * statistics, the recipe's error and count statistics, and the per-group
 * summary (scale_inv's range and histogram, groups that overflowed or
 * flushed, the largest group dynamic range).  Definitions:
 * docs/statistics.md.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "parallel.h"
#include "kernels.h"
#include "f32bits.h"
#include "quantize_finish.h"

/* The per-group part of the statistics: scale_inv's range, mean, std and
 * exponent histogram, the groups that overflowed or flushed, the largest
 * amax / min-nonzero ratio.  Millions of groups for 1x16 recipes: ranges of
 * RANGE groups (fixed, so the sums are the same bits on any thread count)
 * on the recipe's threads, each with partial sums and sub-histograms four
 * wide (a single running sum or counter is a chain of dependent adds), no
 * libm calls, its largest ratio found by a vector pass (range_vec.c); the
 * ranges' results merged in range order. */
#define RANGE 4096

typedef double v2d __attribute__((vector_size(16)));

/* four floats: loaded, widened to doubles two at a time, lane-wise v < m ?
 * v : m and v > m ? v : m (SSE2's minps / maxps; GCC's generic vectors
 * made these through the stack there) */
#if defined(__SSE2__)
typedef __m128 f4;
static inline f4 f4_load(const float *p) { return _mm_loadu_ps(p); }
static inline f4 f4_fill(float v) { return _mm_set1_ps(v); }
static inline v2d f4_lo(f4 v) { return (v2d)_mm_cvtps_pd(v); }
static inline v2d f4_hi(f4 v) { return (v2d)_mm_cvtps_pd(_mm_movehl_ps(v, v)); }
static inline f4 f4_min(f4 v, f4 m) { return _mm_min_ps(v, m); }
static inline f4 f4_max(f4 v, f4 m) { return _mm_max_ps(v, m); }
#else
typedef float f4 __attribute__((vector_size(16)));
typedef int32_t i4 __attribute__((vector_size(16)));
static inline f4 f4_load(const float *p)
{
    f4 v;
    memcpy(&v, p, sizeof v);
    return v;
}
static inline f4 f4_fill(float v) { return (f4){v, v, v, v}; }
static inline v2d f4_lo(f4 v) { return (v2d){v[0], v[1]}; }
static inline v2d f4_hi(f4 v) { return (v2d){v[2], v[3]}; }
static inline f4 f4_min(f4 v, f4 m) { return (f4)(((i4)v & (v < m)) | ((i4)m & ~(v < m))); }
static inline f4 f4_max(f4 v, f4 m) { return (f4)(((i4)v & (v > m)) | ((i4)m & ~(v > m))); }
#endif

/* the sum of the four bytes of w */
static inline uint64_t byte_sum(uint32_t w) { return (w & 0xFF) + (w >> 8 & 0xFF) + (w >> 16 & 0xFF) + (w >> 24); }

/* The exponent bins of n scale_inv values (their float32 bits) added into
 * hist, shared by the ranges (integers: any order).  Four interleaved
 * 32-bit sub-histograms (a range's groups fit) for long ranges; a short
 * one (a tensor of a few groups) adds straight in, without clearing and
 * merging 4 x 256 counters for it. */
static void scale_bins(uint64_t *hist, const uint32_t *b, size_t n)
{
    if (n < 256) {
        for (size_t i = 0; i < n; i++)
            __atomic_fetch_add(&hist[(b[i] >> 23) & 0xFF], 1, __ATOMIC_RELAXED);
        return;
    }
    uint32_t sub[4][FP8_SCALE_BINS];
    memset(sub, 0, sizeof sub);
    size_t i = 0;
    for (; i + 4 <= n; i += 4) {
        sub[0][(b[i] >> 23) & 0xFF]++;
        sub[1][(b[i + 1] >> 23) & 0xFF]++;
        sub[2][(b[i + 2] >> 23) & 0xFF]++;
        sub[3][(b[i + 3] >> 23) & 0xFF]++;
    }
    for (; i < n; i++)
        sub[0][(b[i] >> 23) & 0xFF]++;
    for (int k = 0; k < FP8_SCALE_BINS; k++) {
        uint64_t v = (uint64_t)sub[0][k] + sub[1][k] + sub[2][k] + sub[3][k];
        if (v)
            __atomic_fetch_add(&hist[k], v, __ATOMIC_RELAXED);
    }
}

typedef struct {
    double sum[4], m2[4];
    float mn[4], mx[4];
    uint64_t fo, fu;
    size_t best;
} gsum;

typedef struct {
    size_t ng;
    const float *scale_inv;
    const unsigned char *flags;
    const uint32_t *gamax, *gminnz;
    gsum *r;
    uint64_t *scale_hist; /* the statistics' histogram: ranges add into it atomically (integers: any order) */
    double mean;
    int pass; /* 0: sums, histogram, counts, best ratio; 1: squared deviations from mean */
} gsum_work;

/* range p of the groups into r (sums in locals: the flags are bytes, which
 * may alias anything, so sums kept in *r would be stored at every group) */
static void gsum_range(const gsum_work *W, int p, gsum *r)
{
    const float *si = W->scale_inv;
    const unsigned char *fl = W->flags;
    size_t g0 = (size_t)p * RANGE, g1 = W->ng - g0 < RANGE ? W->ng : g0 + RANGE, g = g0;
    if (W->pass == 1) {
        const double mean = W->mean;
        v2d m01 = {0, 0}, m23 = {0, 0}; /* lane k: groups k mod 4, as pass 0 */
        for (; g + 4 <= g1; g += 4) {
            f4 v = f4_load(si + g);
            v2d d01 = f4_lo(v) - mean, d23 = f4_hi(v) - mean;
            m01 += d01 * d01, m23 += d23 * d23;
        }
        double m2[4] = {m01[0], m01[1], m23[0], m23[1]};
        for (; g < g1; g++) {
            double d = (double)si[g] - mean;
            m2[0] += d * d;
        }
        memcpy(r->m2, m2, sizeof m2);
        return;
    }
    /* four lanes, lane k taking the range's groups k mod 4 (a single
     * running sum is a chain of dependent adds), as vectors (sums in
     * doubles); the flag bits counted in the bytes of two words */
    v2d s01 = {0, 0}, s23 = {0, 0};
    f4 vn = f4_fill(INFINITY), vx = f4_fill(-INFINITY);
    uint64_t fo = 0, fu = 0;
    uint32_t fwo = 0, fwu = 0; /* flag bits of each byte position, summed in bytes */
    unsigned fspill = 0;
    for (; g + 4 <= g1; g += 4) {
        f4 v = f4_load(si + g);
        s01 += f4_lo(v), s23 += f4_hi(v);
        vn = f4_min(v, vn), vx = f4_max(v, vx);
        uint32_t w;
        memcpy(&w, fl + g, 4);
        fwo += w & 0x01010101u, fwu += w >> 1 & 0x01010101u;
        if (++fspill == 255) { /* before a byte can carry */
            fo += byte_sum(fwo), fu += byte_sum(fwu);
            fwo = fwu = 0, fspill = 0;
        }
    }
    fo += byte_sum(fwo), fu += byte_sum(fwu);
    /* the rest into lane 0, in scalars (an array indexed here would hold
     * the vectors above on the stack) */
    double s0 = s01[0];
    float n0 = vn[0], x0 = vx[0];
    for (; g < g1; g++) {
        float v = si[g];
        s0 += v;
        n0 = v < n0 ? v : n0;
        x0 = v > x0 ? v : x0;
        fo += fl[g] & 1;
        fu += (fl[g] >> 1) & 1;
    }
    double sum[4] = {s0, s01[1], s23[0], s23[1]};
    float mnl[4] = {n0, vn[1], vn[2], vn[3]}, mxl[4] = {x0, vx[1], vx[2], vx[3]};
    scale_bins(W->scale_hist, (const uint32_t *)(const void *)(si + g0), g1 - g0);
    memcpy(r->sum, sum, sizeof sum), memcpy(r->mn, mnl, sizeof mnl), memcpy(r->mx, mxl, sizeof mxl);
    r->fo = fo, r->fu = fu, r->best = SIZE_MAX;
    if (W->gamax) {
        size_t b = fp8__best_ratio(W->gamax + g0, W->gminnz + g0, g1 - g0);
        r->best = b == SIZE_MAX ? SIZE_MAX : g0 + b;
    }
}

static void gsum_job(void *ctx, int p)
{
    gsum_work *W = ctx;
    gsum_range(W, p, &W->r[p]);
}

/* range r's results into the totals t, ranges in order: the same bits
 * however the ranges ran */
static void gsum_merge(gsum *t, const gsum *r, const uint32_t *gamax, const uint32_t *gminnz, double *ba, double *bm)
{
    for (int k = 0; k < 4; k++) {
        t->sum[k] += r->sum[k];
        t->mn[k] = r->mn[k] < t->mn[k] ? r->mn[k] : t->mn[k];
        t->mx[k] = r->mx[k] > t->mx[k] ? r->mx[k] : t->mx[k];
    }
    t->fo += r->fo, t->fu += r->fu;
    if (gamax && r->best != SIZE_MAX) {
        /* the largest ratio, the first of equals (as one pass would): the
         * products of two floats are exact in double */
        double a = fp8__bits_to_float(gamax[r->best]), m = fp8__bits_to_float(gminnz[r->best]);
        if (a * *bm > *ba * m)
            *ba = a, *bm = m, t->best = r->best;
    }
}

static void group_summary(fp8_stats *s, size_t ng, const float *scale_inv, const unsigned char *flags,
                          const uint32_t *gamax_bits, const uint32_t *gminnz_bits, int threads)
{
    int nr = (int)((ng + RANGE - 1) / RANGE);
    gsum *r = calloc((size_t)nr, sizeof *r), one, tot;
    gsum_work W = {ng, scale_inv, flags, gamax_bits, gminnz_bits, r, s->scale_hist, 0.0, 0};
    memset(&tot, 0, sizeof tot);
    for (int k = 0; k < 4; k++)
        tot.mn[k] = INFINITY, tot.mx[k] = -INFINITY;
    tot.best = SIZE_MAX;
    double ba = 0, bm = 1;
    for (W.pass = 0; W.pass < 2; W.pass++) { /* the sums, then the squared deviations from their mean */
        if (r)
            fp8__parallel_for(nr, threads, gsum_job, &W);
        for (int p = 0; p < nr; p++) {
            gsum *q = r ? &r[p] : &one;
            if (!r) /* no memory for the ranges: one after another here */
                gsum_range(&W, p, &one);
            if (W.pass == 0)
                gsum_merge(&tot, q, gamax_bits, gminnz_bits, &ba, &bm);
            else
                for (int k = 0; k < 4; k++)
                    tot.m2[k] += q->m2[k];
        }
        if (W.pass == 0)
            W.mean = (tot.sum[0] + tot.sum[1] + tot.sum[2] + tot.sum[3]) / (double)ng;
    }
    free(r);
    s->blocks_with_overflow = tot.fo;
    s->blocks_with_underflow = tot.fu;
    s->scale_inv_min = fminf(fminf(tot.mn[0], tot.mn[1]), fminf(tot.mn[2], tot.mn[3]));
    s->scale_inv_max = fmaxf(fmaxf(tot.mx[0], tot.mx[1]), fmaxf(tot.mx[2], tot.mx[3]));
    s->scale_inv_mean = W.mean;
    s->scale_inv_std = sqrt((tot.m2[0] + tot.m2[1] + tot.m2[2] + tot.m2[3]) / (double)ng);
    if (!gamax_bits)
        return;
    s->max_block_dynamic_range = tot.best == SIZE_MAX ? 0.0
                                                      : log2(fp8__bits_to_float(gamax_bits[tot.best])) -
                                                            log2(fp8__bits_to_float(gminnz_bits[tot.best]));
}

/* x's own statistics, from src to dst (the rest of dst untouched) */
void fp8__keep_x_fields(fp8_stats *dst, const fp8_stats *src)
{
    dst->numel = src->numel, dst->finite = src->finite;
    dst->nan_count = src->nan_count, dst->inf_count = src->inf_count, dst->zero_count = src->zero_count;
    dst->mean = src->mean, dst->std = src->std, dst->kurtosis = src->kurtosis;
    dst->min = src->min, dst->max = src->max, dst->amax = src->amax;
    dst->l1 = src->l1, dst->l2 = src->l2, dst->min_nonzero = src->min_nonzero;
    dst->dynamic_range = src->dynamic_range;
    memcpy(dst->exp_hist, src->exp_hist, sizeof dst->exp_hist);
}

/* The statistics of x alone from its sums (x2: sum x^2 over finite x). */
void fp8__finish_x(fp8_stats *s, const fp8__moments *m, uint64_t numel)
{
    double l1 = 0, x2 = 0; /* x2: sum x^2 over finite x */
    for (int l = 0; l < FP8_ML; l++)
        l1 += m->l1[l], x2 += m->xx[l];
    float mn = INFINITY, mx = -INFINITY, mz = INFINITY;
    for (int l = 0; l < 16; l++) {
        mn = fminf(mn, m->mn[l]);
        mx = fmaxf(mx, m->mx[l]);
        mz = fminf(mz, m->mnz[l]);
    }
    s->numel = numel;
    s->nan_count = m->nan;
    s->inf_count = m->inf;
    s->finite = s->numel - m->nan - m->inf;
    s->zero_count = m->zero;
    double n = (double)s->finite;
    if (s->finite) {
        double M2 = m->cM2, M4 = m->cM4;
        s->mean = m->cmean;
        s->std = sqrt(M2 / n);
        s->kurtosis = M2 > 0 ? n * M4 / (M2 * M2) : 0.0;
        s->min = mn, s->max = mx;
        s->amax = fmax(fabs((double)mn), fabs((double)mx));
    }
    s->l1 = l1;
    s->l2 = sqrt(x2);
    s->min_nonzero = isinf(mz) ? 0.0 : mz;
    s->dynamic_range = (s->min_nonzero > 0) ? log2(s->amax) - log2(s->min_nonzero) : 0.0;
}

/* The recipe's statistics; s already holds x's (finish_x, or the caller's
 * fp8_tensor_stats).  The error sums' denominator sum x^2 is l2^2 either
 * way, so both routes give the same bits. */
void fp8__finish_stats(fp8_stats *s, const uint64_t cnt[FP8_NCLASS], const fp8__moments *err, const layout *L,
                       const uint32_t *gamax_bits, const uint32_t *gminnz_bits, const float *scale,
                       const float *scale_inv, const unsigned char *flags, float s_global, const fp8_format *f,
                       int threads)
{
    const fp8__moments *m = err;
    double e2 = 0, q2 = 0, xq = 0;
    for (int l = 0; l < FP8_ML; l++)
        e2 += m->e2[l], q2 += m->q2[l], xq += m->xq[l];
    float me = 0;
    for (int l = 0; l < 16; l++)
        me = fmaxf(me, m->maxerr[l]);
    double x2 = s->l2 * s->l2;
    memcpy(s->classes.n, cnt, sizeof s->classes.n);
    s->overflows = cnt[FP8_CLASS_SATURATED] + cnt[FP8_CLASS_OVERFLOW];
    s->underflows = cnt[FP8_CLASS_FLUSHED];
    s->subnormals = cnt[FP8_CLASS_SUBNORMAL];
    s->err_excluded = m->qbad;
    s->sq_err = e2;
    uint64_t nerr = s->finite - m->qbad;
    s->mse = nerr ? e2 / (double)nerr : 0.0;
    s->rel_err = x2 > 0 ? sqrt(e2 / x2) : (e2 > 0 ? INFINITY : 0.0);
    s->sqnr_db = e2 > 0 ? 10.0 * log10(x2 / e2) : INFINITY;
    s->cosine = (x2 > 0 && q2 > 0) ? xq / sqrt(x2 * q2) : (x2 == q2 ? 1.0 : 0.0);
    s->max_abs_err = me;

    s->format = f;
    s->nscales = L->ngroups;
    s->nblocks = L->ngroups;
    s->scale = scale[0];
    s->scale_inv = scale_inv[0];
    s->global_scale_inv = s_global;
    group_summary(s, L->ngroups, scale_inv, flags, gamax_bits, gminnz_bits, threads);
    if (!gamax_bits)
        s->max_block_dynamic_range = s->dynamic_range;
}

