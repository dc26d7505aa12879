/*
 * fp8_stats.h — the quantization engine: one tensor, one recipe, every
 * statistic in one pass (after one amax pass where the recipe needs it).
 *
 * Definitions, formulas and denominators: docs/statistics.md.  NaN and Inf
 * inputs are counted (nan_count, inf_count) and kept out of every numeric
 * statistic and of every amax and scale.
 */
#ifndef FP8_STATS_H
#define FP8_STATS_H

#include <stddef.h>
#include <stdint.h>

#include "fp8_format.h"
#include "fp8_recipe.h"

/* |x| exponent histogram: bin 0 zero, bin 1 float32 subnormal, bin k in
 * 2..255 the binade [2^(k-128), 2^(k-127)) (= exponent field + 1), bin 256
 * Inf and NaN. */
#define FP8_EXP_BINS 257
/* scale_inv exponent histogram: bin = float32 exponent field of scale_inv
 * (bin k holds [2^(k-127), 2^(k-126)); bin 0 subnormal). */
#define FP8_SCALE_BINS 256

typedef struct {
    /* ---- high-precision side ------------------------------------------- */
    uint64_t numel;        /* rows * cols                                  */
    uint64_t nan_count, inf_count;
    uint64_t finite;       /* numel - nan - inf: the denominator below     */
    uint64_t zero_count;   /* +-0 inputs                                   */
    double amax;           /* max |x| over finite x (0 if none)            */
    double min, max;       /* over finite x (0 if none)                    */
    double mean, std;      /* population std (denominator: finite)         */
    double l1, l2;         /* sum |x|, sqrt(sum x^2)                       */
    double min_nonzero;    /* min |x| over finite nonzero x (0 if none)    */
    double dynamic_range;  /* log2(amax) - log2(min_nonzero), bits; 0 if none */
    double kurtosis;       /* m4 / m2^2 (Pearson; Gaussian 3); 0 if m2 = 0 */
    uint64_t exp_hist[FP8_EXP_BINS];

    /* ---- quantized side ------------------------------------------------ */
    fp8_counts classes;    /* element casts per class                      */
    uint64_t overflows;    /* saturated + overflow classes                 */
    uint64_t te_overflows; /* TE's definition: |x| > fp8_max * scale_inv (in
                              float32, before rounding; Inf included), for
                              delayed and none; UINT64_MAX (not defined) for
                              current and grouped recipes               */
    uint64_t underflows;   /* TE: nonzero input whose code is +-0 (flushed) */
    uint64_t subnormals;   /* nonzero subnormal results                    */
    uint64_t err_excluded; /* finite x whose x_hat is Inf/NaN (no-saturate) */
    double sq_err;         /* sum (x - x_hat)^2                            */
    double mse;            /* sq_err / (finite - err_excluded)             */
    double rel_err;        /* ||x - x_hat|| / ||x||                        */
    double sqnr_db;        /* 20 log10(||x|| / ||x - x_hat||); +inf if exact */
    double cosine;         /* <x, x_hat> / (||x|| ||x_hat||)              */
    double max_abs_err;    /* max |x - x_hat|                              */

    /* ---- scales (scale_inv = the dequantization multiplier) ------------ */
    const fp8_format *format; /* element format used                     */
    uint64_t nscales;      /* 1 for per-tensor recipes                     */
    double scale, scale_inv;  /* per-tensor recipes: the one used; others: of the first group */
    double global_scale_inv;  /* nvfp4: s_global; others 1               */
    double scale_inv_min, scale_inv_max, scale_inv_mean, scale_inv_std;
    uint64_t scale_hist[FP8_SCALE_BINS];
    uint64_t nblocks;      /* scale groups (1 for per-tensor recipes)      */
    uint64_t blocks_with_overflow, blocks_with_underflow;
    double max_block_dynamic_range; /* max over groups of log2(amax/min nonzero) */
} fp8_stats;

/* Quantize a rows x cols row-major tensor (1-D: rows = 1) under st's recipe.
 * out (may be NULL, may equal x; overlapping x otherwise: FP8_EINVAL)
 * receives x_hat; stats (may be NULL) the statistics.  Delayed scaling
 * casts with the state's scale
 * (fp8_recipe_state_scale) and notes the tensor's amax in the history; call
 * fp8_recipe_state_step() at the end of the step.
 * Returns FP8_OK, FP8_EINVAL or FP8_ENOMEM (then out and stats are
 * untouched). */
int fp8_quantize(fp8_recipe_state *st, const float *x, size_t rows, size_t cols, float *out,
                 fp8_stats *stats);

/* fp8_quantize with options: FP8_STATS_NO_EXP_HIST leaves exp_hist zero
 * (the one statistic counted element by element in memory: about 0.2 ns an
 * element here, a fifth of the whole).  With stats == NULL only the cast runs: no moments; with
 * out, stats (and codes) all NULL nothing is cast and only the recipe state
 * moves (delayed scaling notes the tensor's amax). */
#define FP8_STATS_NO_EXP_HIST 1u
/* FP8_STATS_X_GIVEN: stats arrives holding fp8_tensor_stats() of this very
 * x (the high-precision side, exp_hist included); they are kept and only the
 * recipe's own statistics are computed: several recipes on one tensor pay
 * for x's moments and histogram once.  Counts, sq_err, mse and max_abs_err
 * come out the same bits either way, and for per-tensor recipes every
 * statistic does (a grouped recipe's own pass sums x in other pieces).
 * The given amax is x's for every scale taken from it (per-tensor current
 * scaling, NVFP4's tensor-level scale): given statistics of another
 * tensor give other scales.
 * A recipe that casts a Hadamard-transformed tensor (nvfp4 rht) computes
 * that tensor's statistics afresh and keeps only the given exponent
 * histogram (the histogram always describes the input). */
#define FP8_STATS_X_GIVEN 2u
int fp8_quantize_ex(fp8_recipe_state *st, const float *x, size_t rows, size_t cols, float *out,
                    fp8_stats *stats, unsigned flags);

/* The same, also giving the element codes (f->code_bytes each, row-major
 * like x) and every group's dequantization multiplier (scale_inv; NVFP4:
 * s_block * s_global), so x_hat[i][j] = decode(codes[i][j]) *
 * group_scale_inv[fp8_quantize_group_of(...)].  group_scale_inv holds
 * fp8_quantize_ngroups() floats. */
int fp8_quantize_codes(fp8_recipe_state *st, const float *x, size_t rows, size_t cols, void *codes,
                       float *group_scale_inv, float *out, fp8_stats *stats, unsigned options);
size_t fp8_quantize_ngroups(const fp8_recipe *r, size_t rows, size_t cols);

size_t fp8_quantize_group_of(const fp8_recipe *r, size_t rows, size_t cols, size_t i, size_t j);

/* One pass over n floats: the finite amax (max |x| over finite x, 0 if
 * none) and the numbers of +-Inf and NaN inputs.  TransformerEngine's amax
 * (fmaxf over |x|: NaN ignored) is Inf when inf_count > 0, else amax. */
typedef struct {
    float amax;
    uint64_t inf_count, nan_count;
} fp8_amax_info;
int fp8_tensor_amax(const float *x, size_t n, fp8_amax_info *out);

/* fp8_quantize without statistics that also measures x's amax information
 * (as fp8_tensor_amax) on the cast's own pass, piece by piece while the
 * piece is in cache, instead of a pass of its own over x (out may equal x:
 * the amax is of the input).  What a probe's unrecorded step needs. */
int fp8_quantize_amax(fp8_recipe_state *st, const float *x, size_t rows, size_t cols, float *out, fp8_amax_info *ai);

/* The exponent histogram of x[0..n) (bins as fp8_stats.exp_hist), written
 * into hist: what fp8_quantize_ex computes unless FP8_STATS_NO_EXP_HIST, on
 * its own (the probes run it beside the casts on another thread). */
int fp8_tensor_exp_hist(const float *x, size_t n, uint64_t hist[FP8_EXP_BINS]);

/* The high-precision side of fp8_stats (numel to kurtosis, and exp_hist
 * unless FP8_STATS_NO_EXP_HIST in flags) of x[0..n) in one pass; every
 * other field zero.  What FP8_STATS_X_GIVEN expects. */
int fp8_tensor_stats(const float *x, size_t n, fp8_stats *stats, unsigned flags);
/* The same on up to `threads` threads (the same bits whatever the number). */
int fp8_tensor_stats_ex(const float *x, size_t n, fp8_stats *stats, unsigned flags, int threads);

#endif
