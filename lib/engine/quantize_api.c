/*
 * quantize_api.c — the public casts (fp8_stats.h): fp8_quantize and its
 * variants, and the two recipes that cast another tensor than x — Smooth
 * SwiGLU's smoothed tensor and NVFP4's random Hadamard transform — around
 * the engine's core (quantize.c).
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "arrays.h"
#include "fp8_stats.h"
#include "fpenv.h"
#include "kernels.h"
#include "quantize_internal.h"
#include "quantize_many.h"
#include "recipe_state.h"
#include "scratch.h"
#include "smooth.h"

int fp8_quantize(fp8_recipe_state *st, const float *x, size_t rows, size_t cols, float *out, fp8_stats *stats)
{
    return fp8_quantize_ex(st, x, rows, cols, out, stats, 0);
}

static int quantize_impl(fp8_recipe_state *st, const float *x, size_t rows, size_t cols, float *out,
                         fp8_stats *stats, unsigned options, void *codes, float *group_scale_inv, fp8_amax_info *ai);

int fp8_quantize_ex(fp8_recipe_state *st, const float *x, size_t rows, size_t cols, float *out, fp8_stats *stats,
                    unsigned options)
{
    return quantize_impl(st, x, rows, cols, out, stats, options, NULL, NULL, NULL);
}

int fp8_quantize_amax(fp8_recipe_state *st, const float *x, size_t rows, size_t cols, float *out, fp8_amax_info *ai)
{
    if (!ai)
        return FP8_ERROR(FP8_EINVAL, "fp8_quantize_amax: ai is NULL");
    return quantize_impl(st, x, rows, cols, out, NULL, 0, NULL, NULL, ai);
}

int fp8_quantize_codes(fp8_recipe_state *st, const float *x, size_t rows, size_t cols, void *codes,
                       float *group_scale_inv, float *out, fp8_stats *stats, unsigned options)
{
    if (!codes || !group_scale_inv)
        return FP8_ERROR(FP8_EINVAL, "fp8_quantize_codes: codes and group_scale_inv are required");
    if (st && x && rows && cols && rows <= SIZE_MAX / cols / sizeof(float)) {
        /* the codes and the group scales: apart from x, out and each other */
        const size_t n = rows * cols, cb = (size_t)st->format->code_bytes;
        const size_t ng = fp8_quantize_ngroups(&st->recipe, rows, cols), xb = n * sizeof *x;
        const size_t ob = out && out != x ? xb : 0, gb = ng <= SIZE_MAX / sizeof(float) ? ng * sizeof(float) : 0;
        const char *fn = "fp8_quantize_codes";
        if (fp8__check_apart(fn, "codes", codes, n * cb, "x", x, xb) != FP8_OK ||
            fp8__check_apart(fn, "codes", codes, n * cb, "out", out, ob) != FP8_OK ||
            fp8__check_apart(fn, "group_scale_inv", group_scale_inv, gb, "x", x, xb) != FP8_OK ||
            fp8__check_apart(fn, "group_scale_inv", group_scale_inv, gb, "out", out, ob) != FP8_OK ||
            fp8__check_apart(fn, "group_scale_inv", group_scale_inv, gb, "codes", codes, n * cb) != FP8_OK)
            return FP8_EINVAL;
    }
    return quantize_impl(st, x, rows, cols, out, stats, options, codes, group_scale_inv, NULL);
}

static int quantize_rht(fp8_recipe_state *st, const float *x, size_t rows, size_t cols, float *out,
                        fp8_stats *stats, unsigned options, void *codes, float *group_scale_inv, fp8_amax_info *ai);

/* The rows of a band of a smoothed tensor: about BAND elements, in cache
 * between the two loops that run on it, and a multiple of the rows whose
 * elements make a multiple of 16 (so that the error sums' lanes run on
 * from band to band: the tensor is summed as one stretch, smooth_vec.h). */
enum { BAND = 16384 };
static size_t band_rows(size_t rows, size_t cols)
{
    size_t low = cols & (~cols + 1), r0 = low >= 16 ? 1 : 16 / low;
    size_t r = cols >= BAND ? r0 : (BAND / cols + r0 - 1) / r0 * r0;
    return r < rows ? r : rows;
}

/* y = x * s (or x / s: divide), band by band, and y's amax information
 * (as fp8_tensor_amax) of each band while it is in cache */
static void scale_amax(const float *x, size_t rows, size_t cols, const float *s, int divide, float *y,
                       fp8_amax_info *ya)
{
    const size_t br = band_rows(rows, cols);
    uint32_t amax = 0;
    ya->inf_count = ya->nan_count = 0;
    for (size_t i = 0; i < rows; i += br) {
        size_t nr = rows - i < br ? rows - i : br, off = i * cols;
        fp8__k.colscale(x + off, nr, cols, s, divide, y + off);
        uint32_t a;
        uint64_t ci, cn;
        fp8__amax_info(y + off, nr * cols, &a, &ci, &cn);
        amax = a > amax ? a : amax;
        ya->inf_count += ci, ya->nan_count += cn;
    }
    ya->amax = fp8__bits_to_float(amax);
}

/* x's error statistics against its x_hat (the definitions of
 * quantize_finish.c: over finite x; an x whose x_hat is not finite is
 * counted in err_excluded and left out), for a recipe that cast the
 * smoothed tensor into q: x_hat = q / s (divide) or q * s, made band by
 * band and summed while in cache — over q itself when q is out, else into
 * buf (one band; NULL: over q) and from there into out (NULL: none; may be
 * x, whose band is read first). */
static void smooth_error_stats(fp8_stats *st, const float *x, float *q, size_t rows, size_t cols, const float *s,
                               int divide, float *buf, float *out)
{
    const size_t br = band_rows(rows, cols);
    fp8__err_acc acc;
    memset(&acc, 0, sizeof acc);
    for (size_t i = 0; i < rows; i += br) {
        size_t nr = rows - i < br ? rows - i : br, off = i * cols;
        float *h = q == out || !buf ? q + off : buf;
        fp8__k.colscale(q + off, nr, cols, s, divide, h);
        fp8__k.err_double(x + off, h, nr * cols, &acc); /* in double (smooth_vec.h) */
        if (out && out + off != h)
            memcpy(out + off, h, nr * cols * sizeof *h);
    }
    double sums[4];
    float me;
    uint64_t bad;
    fp8__err_acc_totals(&acc, sums, &me, &bad);
    const double x2 = sums[0], e2 = sums[1], q2 = sums[2], xq = sums[3];
    st->err_excluded = bad;
    st->sq_err = e2;
    uint64_t nerr = st->finite - bad;
    st->mse = nerr ? e2 / (double)nerr : 0.0;
    st->rel_err = x2 > 0 ? sqrt(e2 / x2) : (e2 > 0 ? INFINITY : 0.0);
    st->sqnr_db = e2 > 0 ? 10.0 * log10(x2 / e2) : INFINITY;
    st->cosine = (x2 > 0 && q2 > 0) ? xq / sqrt(x2 * q2) : (x2 == q2 ? 1.0 : 0.0);
    st->max_abs_err = me;
}

void fp8__column_scales(const float *x, size_t rows, size_t cols, float *s)
{
    fp8__kernels_pick();
    fp8__fenv fe;
    fp8__fenv_enter(&fe);
    fp8__k.colmax(x, rows, cols, s);
    for (size_t j = 0; j < cols; j++)
        s[j] = s[j] > 0 ? 1.0f / s[j] : 1.0f;
    fp8__fenv_leave(&fe);
}

/* Smooth SwiGLU as a shadow (recipe option smooth): the column scales s
 * (published: s_j = 1 / max_i |x_ij|, 1 for a column of zeros; fold: the
 * linked input's s), the smoothed tensor y = x * s (published) or x / s
 * (fold: the scale moved into the weight) cast by the recipe, x_hat = Q(y)
 * / s (or * s) — the arithmetic of the trainer's --smooth-swiglu.  The
 * cast's counts and scales are of y (a delayed history notes y's amax);
 * x's own statistics and every error statistic are of x.
 *
 * Passes over tensor-sized arrays: the column maxima (x); y and its amax,
 * band by band (x, y); the cast (y, into y itself unless out takes it);
 * x_hat and the error sums, band by band (x and Q(y); x_hat written only
 * into out).  out may be x: x is read for the error sums band by band
 * before that band's x_hat is written over it, and x's amax information
 * (ai) is taken before the cast. */
static int quantize_smooth(fp8_recipe_state *st, const float *x, size_t rows, size_t cols, float *out,
                           fp8_stats *stats, unsigned options, void *codes, float *group_scale_inv, fp8_amax_info *ai)
{
    const int fold = st->recipe.smooth == 2;
    if (codes)
        return FP8_ERROR(FP8_EINVAL, "fp8_quantize_codes: recipe '%s' casts a smoothed tensor; its codes would not "
                                     "decode to x", st->recipe.spec);
    if (fold && (!st->smooth_src || st->smooth_src_n != cols))
        return FP8_ERROR(FP8_EINVAL, "recipe '%s': smooth=fold needs the %zu column scales of the input it is "
                                     "folded from (fp8_probe_smooth_from), %s",
                         st->recipe.spec, cols, st->smooth_src ? "of another width" : "none given");
    size_t n = rows * cols; /* (n * 4 bytes fit a size_t: quantize_impl) */
    /* y (kept for the next cast: scratch.h), s, and a band's x_hat when
     * only the statistics want it */
    const size_t br = band_rows(rows, cols), band = br * cols <= 4 * BAND ? br * cols : 0;
    float *y = fp8__scratch_take(FP8__SCRATCH_SMOOTH, n * sizeof *y);
    float *sc = malloc((cols + band) * sizeof *sc), *buf = band ? sc + cols : NULL;
    fp8_stats *xs = stats ? malloc(sizeof *xs) : NULL;
    if (!y || !sc || (stats && !xs)) {
        free(xs), free(sc);
        fp8__scratch_give(FP8__SCRATCH_SMOOTH, y);
        return FP8_ERROR(FP8_ENOMEM, "fp8_quantize: out of memory smoothing a %zux%zu tensor", rows, cols);
    }
    if (fold)
        memcpy(sc, st->smooth_src, cols * sizeof *sc);
    else
        fp8__column_scales(x, rows, cols, sc); /* (picks the kernels) */
    fp8__kernels_pick();
    int rc = FP8_OK;
    if (stats) { /* x's own statistics: the caller's, or a pass of their own */
        if (options & FP8_STATS_X_GIVEN)
            *xs = *stats;
        else
            rc = fp8_tensor_stats_ex(x, n, xs, options & FP8_STATS_NO_EXP_HIST, st->threads > 1 ? st->threads : 1);
    }
    if (rc == FP8_OK && ai) { /* of x, before out (which may be x) is written */
        if (xs)
            fp8__stats_amax(xs, ai);
        else
            rc = fp8_tensor_amax(x, n, ai);
    }
    /* y, and what the cast reads of y's own statistics (which would be
     * replaced by x's): its amax, Inf and NaN counts, and so the scale and
     * the delayed history's note of y's amax */
    fp8__fenv fe;
    fp8__fenv_enter(&fe);
    fp8_amax_info ya;
    if (stats)
        scale_amax(x, rows, cols, sc, fold, y, &ya); /* y = x / s (fold) or x * s */
    else
        fp8__k.colscale(x, rows, cols, sc, fold, y);
    fp8__fenv_leave(&fe);
    if (rc == FP8_OK && stats) {
        memset(stats, 0, sizeof *stats);
        stats->numel = n, stats->amax = ya.amax, stats->inf_count = ya.inf_count, stats->nan_count = ya.nan_count;
        stats->finite = n - ya.inf_count - ya.nan_count;
    }
    /* Q(y): into out, unless the error sums still need x there (out == x)
     * or there is no out: then over y */
    float *q = out && !(stats && out == x) ? out : stats ? y : NULL;
    if (rc == FP8_OK)
        rc = quantize_rht(st, y, rows, cols, q, stats, (options & ~FP8_STATS_X_GIVEN) | FP8_STATS_NO_EXP_HIST |
                                                           (stats ? FP8_STATS_X_GIVEN : 0),
                          NULL, group_scale_inv, NULL);
    if (rc == FP8_OK) {
        fp8__fenv_enter(&fe);
        if (stats) {
            fp8__keep_x_fields(stats, xs);
            smooth_error_stats(stats, x, q, rows, cols, sc, !fold, buf, out);
        } else if (out) {
            fp8__k.colscale(out, rows, cols, sc, !fold, out); /* x_hat = Q(y) * s (fold) or Q(y) / s */
        }
        fp8__fenv_leave(&fe);
    }
    free(xs), free(sc);
    fp8__scratch_give(FP8__SCRATCH_SMOOTH, y);
    return rc;
}

static int quantize_impl(fp8_recipe_state *st, const float *x, size_t rows, size_t cols, float *out,
                         fp8_stats *stats, unsigned options, void *codes, float *group_scale_inv, fp8_amax_info *ai)
{
    if (rows && cols && rows <= SIZE_MAX / cols && fp8__check_out("fp8_quantize", x, out, rows * cols) != FP8_OK)
        return FP8_EINVAL;
    if (st && x && st->recipe.smooth && rows && cols && rows <= SIZE_MAX / cols / sizeof(float))
        return quantize_smooth(st, x, rows, cols, out, stats, options, codes, group_scale_inv, ai);
    return quantize_rht(st, x, rows, cols, out, stats, options, codes, group_scale_inv, ai);
}

/* NVFP4 with rht on this role: the cast and every statistic are of the
 * transformed tensor (the transform is orthonormal: errors, SQNR and norms
 * are those of the original), x_hat is transformed back. */
static int quantize_rht(fp8_recipe_state *st, const float *x, size_t rows, size_t cols, float *out,
                        fp8_stats *stats, unsigned options, void *codes, float *group_scale_inv, fp8_amax_info *ai)
{
    if (!st || !x || !st->recipe.rht_active || rows == 0 || cols == 0 || rows > SIZE_MAX / cols / sizeof(float))
        return fp8__quantize_core(st, x, rows, cols, out, stats, options, codes, group_scale_inv, ai);
    if (ai) { /* of x, not of the transformed tensor */
        int rc = fp8_tensor_amax(x, rows * cols, ai);
        if (rc != FP8_OK)
            return rc;
    }
    /* given statistics of x are not those of the transformed tensor, which
     * the cast computes afresh, except the exponent histogram: that one
     * always describes the input */
    uint64_t xhist[FP8_EXP_BINS];
    const int keep_hist = stats && (options & FP8_STATS_X_GIVEN);
    if (keep_hist) {
        memcpy(xhist, stats->exp_hist, sizeof xhist);
        options = (options & ~FP8_STATS_X_GIVEN) | FP8_STATS_NO_EXP_HIST;
    }
    float *y = fp8__scratch_take(FP8__SCRATCH_RHT, rows * cols * sizeof *y), d[16]; /* kept for the next cast */
    if (!y)
        return FP8_ERROR(FP8_ENOMEM, "fp8_quantize: out of memory for the Hadamard transform of %zux%zu", rows, cols);
    fp8__rht_signs(st->recipe.rht_seed, d);
    fp8__fenv fe;
    fp8__fenv_enter(&fe);
    fp8__rht_apply(x, y, rows, cols, d, 0);
    fp8__fenv_leave(&fe);
    int rc = fp8__quantize_core(st, y, rows, cols, out, stats, options, codes, group_scale_inv, NULL);
    if (rc == FP8_OK && keep_hist)
        memcpy(stats->exp_hist, xhist, sizeof xhist);
    if (rc == FP8_OK && out) {
        fp8__fenv_enter(&fe);
        fp8__rht_apply(out, out, rows, cols, d, 1);
        fp8__fenv_leave(&fe);
    }
    fp8__scratch_give(FP8__SCRATCH_RHT, y);
    return rc;
}
