/*
 * quantize_finish.c — the engine's sums turned into fp8_stats: x's own
 * statistics, the recipe's error and count statistics, and the per-group
 * summary (scale_inv's range and histogram, groups that overflowed or
 * flushed, the largest group dynamic range).  Definitions:
 * docs/statistics.md.
 */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "quantize_internal.h"

/* The per-group part of the statistics: scale_inv's range, mean, std and
 * exponent histogram, the groups that overflowed or flushed, the largest
 * amax / min-nonzero ratio.  Millions of groups for 1x16 recipes: partial
 * sums and sub-histograms four wide (a single running sum or counter is a
 * chain of dependent adds), no libm calls, the largest ratio found by a
 * vector pass (stats_vec.c). */
static void group_summary(fp8_stats *s, size_t ng, const float *scale_inv, const unsigned char *flags,
                          const uint32_t *gamax_bits, const uint32_t *gminnz_bits)
{
    double sum[4] = {0, 0, 0, 0};
    float mn[4] = {INFINITY, INFINITY, INFINITY, INFINITY}, mx[4] = {-INFINITY, -INFINITY, -INFINITY, -INFINITY};
    uint64_t shist[4][FP8_SCALE_BINS];
    memset(shist, 0, sizeof shist);
    uint64_t fo = 0, fu = 0;
    size_t g = 0;
    for (; g + 4 <= ng; g += 4)
        for (int k = 0; k < 4; k++) {
            float v = scale_inv[g + (size_t)k];
            uint32_t b;
            memcpy(&b, &v, 4);
            sum[k] += v;
            mn[k] = v < mn[k] ? v : mn[k];
            mx[k] = v > mx[k] ? v : mx[k];
            shist[k][(b >> 23) & 0xFF]++;
            fo += flags[g + (size_t)k] & 1;
            fu += (flags[g + (size_t)k] >> 1) & 1;
        }
    for (; g < ng; g++) {
        float v = scale_inv[g];
        uint32_t b;
        memcpy(&b, &v, 4);
        sum[0] += v;
        mn[0] = v < mn[0] ? v : mn[0];
        mx[0] = v > mx[0] ? v : mx[0];
        shist[0][(b >> 23) & 0xFF]++;
        fo += flags[g] & 1;
        fu += (flags[g] >> 1) & 1;
    }
    for (int k = 0; k < FP8_SCALE_BINS; k++)
        s->scale_hist[k] += shist[0][k] + shist[1][k] + shist[2][k] + shist[3][k];
    s->blocks_with_overflow = fo;
    s->blocks_with_underflow = fu;
    const double mean = (sum[0] + sum[1] + sum[2] + sum[3]) / (double)ng;
    double m2[4] = {0, 0, 0, 0};
    for (g = 0; g + 4 <= ng; g += 4)
        for (int k = 0; k < 4; k++) {
            double d = (double)scale_inv[g + (size_t)k] - mean;
            m2[k] += d * d;
        }
    for (; g < ng; g++) {
        double d = (double)scale_inv[g] - mean;
        m2[0] += d * d;
    }
    s->scale_inv_min = fminf(fminf(mn[0], mn[1]), fminf(mn[2], mn[3]));
    s->scale_inv_max = fmaxf(fmaxf(mx[0], mx[1]), fmaxf(mx[2], mx[3]));
    s->scale_inv_mean = mean;
    s->scale_inv_std = sqrt((m2[0] + m2[1] + m2[2] + m2[3]) / (double)ng);
    if (!gamax_bits)
        return;
    size_t best = fp8__best_ratio(gamax_bits, gminnz_bits, ng);
    s->max_block_dynamic_range =
        best == SIZE_MAX ? 0.0 : log2(fp8__bits_to_float(gamax_bits[best])) - log2(fp8__bits_to_float(gminnz_bits[best]));
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
                       const float *scale_inv, const unsigned char *flags, float s_global, const fp8_format *f)
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
    group_summary(s, L->ngroups, scale_inv, flags, gamax_bits, gminnz_bits);
    if (!gamax_bits)
        s->max_block_dynamic_range = s->dynamic_range;
}

