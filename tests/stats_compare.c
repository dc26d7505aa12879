/*
 * stats_compare.c — the engine's statistics against the oracle's, field by
 * field: counts, extremes, scales and histograms exactly; sums within the
 * tolerances docs/statistics.md states (relative 1e-6; kurtosis 1e-5; the
 * mean within 1e-6 of the std; cosine within 2e-6).
 */
#include <math.h>
#include <stdio.h>

#include "stats_compare.h"
#include "tests.h"

static int printed; /* differences printed so far (the first 10) */

static double floor_; /* values below this compare absolutely (dB near 0) */

static int close_enough(double a, double b, double rel)
{
    if (isnan(a) || isnan(b))
        return isnan(a) && isnan(b);
    if (isinf(a) || isinf(b))
        return a == b;
    return fabs(a - b) <= rel * fmax(fmax(fabs(a), fabs(b)), floor_) + 1e-300;
}

/* one field that differs (element k of an array; -1: not an array):
 * unless count_only a failure, the first 10 printed */
static void differs(const char *what, const char *field, int k, double va, double vb, int count_only)
{
    if (count_only)
        return;
    if (printed++ < 10) {
        if (k < 0)
            fprintf(stderr, "\n  %s: %s engine %.17g oracle %.17g", what, field, va, vb);
        else
            fprintf(stderr, "\n  %s: %s[%d] engine %.17g oracle %.17g", what, field, k, va, vb);
    }
    CU_assertImplementation(CU_FALSE, __LINE__, field, __FILE__, "", CU_FALSE);
}
#define DIFFERS_AT(field, k, va, vb) (mismatches++, differs(what, #field, k, va, vb, count_only))
#define DIFFERS(field, va, vb) DIFFERS_AT(field, -1, va, vb)
#define CHECK_EQ(field)                                                                                    \
    do {                                                                                                   \
        if (a->field != b->field)                                                                          \
            DIFFERS(field, (double)a->field, (double)b->field);                                            \
    } while (0)
#define CHECK_NEAR(field, rel)                                                                             \
    do {                                                                                                   \
        if (!close_enough(a->field, b->field, rel))                                                        \
            DIFFERS(field, a->field, b->field);                                                            \
    } while (0)

int stats_compare(const char *what, const fp8_stats *a, const fp8_stats *b, int count_only)
{
    int mismatches = 0;
    CHECK_EQ(numel);
    CHECK_EQ(nan_count);
    CHECK_EQ(inf_count);
    CHECK_EQ(finite);
    CHECK_EQ(zero_count);
    CHECK_EQ(amax);
    CHECK_EQ(min);
    CHECK_EQ(max);
    CHECK_EQ(min_nonzero);
    floor_ = b->std; /* the mean is compared on the scale of the spread */
    CHECK_NEAR(mean, 1e-6);
    floor_ = 0.0;
    CHECK_NEAR(std, 1e-6);
    CHECK_NEAR(l1, 1e-6);
    CHECK_NEAR(l2, 1e-6);
    CHECK_NEAR(dynamic_range, 1e-12);
    CHECK_NEAR(kurtosis, 1e-5);
    for (int c = 0; c < FP8_NCLASS; c++)
        if (a->classes.n[c] != b->classes.n[c])
            DIFFERS_AT(classes.n, c, (double)a->classes.n[c], (double)b->classes.n[c]);
    CHECK_EQ(overflows);
    CHECK_EQ(te_overflows);
    CHECK_EQ(underflows);
    CHECK_EQ(subnormals);
    CHECK_EQ(err_excluded);
    CHECK_NEAR(sq_err, 1e-6);
    CHECK_NEAR(mse, 1e-6);
    CHECK_NEAR(rel_err, 1e-6);
    floor_ = 1.0; /* (dB and cosines near 0 compare absolutely) */
    CHECK_NEAR(sqnr_db, 1e-6);
    CHECK_NEAR(cosine, 2e-6);
    floor_ = 0.0;
    CHECK_EQ(max_abs_err);
    CHECK_EQ(nscales);
    CHECK_EQ(nblocks);
    CHECK_EQ(scale);
    CHECK_EQ(scale_inv);
    CHECK_EQ(global_scale_inv);
    CHECK_EQ(scale_inv_min);
    CHECK_EQ(scale_inv_max);
    CHECK_NEAR(scale_inv_mean, 1e-12);
    CHECK_NEAR(scale_inv_std, 1e-6);
    CHECK_EQ(blocks_with_overflow);
    CHECK_EQ(blocks_with_underflow);
    CHECK_NEAR(max_block_dynamic_range, 1e-12);
    for (int k = 0; k < FP8_EXP_BINS; k++)
        if (a->exp_hist[k] != b->exp_hist[k])
            DIFFERS_AT(exp_hist, k, (double)a->exp_hist[k], (double)b->exp_hist[k]);
    for (int k = 0; k < FP8_SCALE_BINS; k++)
        if (a->scale_hist[k] != b->scale_hist[k])
            DIFFERS_AT(scale_hist, k, (double)a->scale_hist[k], (double)b->scale_hist[k]);
    return mismatches;
}
