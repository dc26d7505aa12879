/*
 * stats_vec.h — internal: vector loops of the statistics engine, built once
 * per instruction set like kernel_vec.c and picked at run time
 * (stats_vec.c: sums and histograms; moments_vec.c: the sums' double-lane
 * path; range_vec.c: maxima).
 *
 * Each call (a piece of at most a few thousand elements) sums (x - K)^p,
 * p = 1..4, about K = the piece's own mean, then merges the piece's central
 * moments into the running ones with Pebay's pairwise update: stable for any
 * offset of the data.  sum x^2 is summed on its own (not about K).  Two
 * entry points: x's own statistics (once per tensor, however many recipes
 * cast it) and a recipe's error sums against its x_hat.
 */
#ifndef FP8_STATS_VEC_H
#define FP8_STATS_VEC_H
#include <stddef.h>
#include <stdint.h>

#include "moments.h"

/* Elements x[0..n) with their dequantized values xq.  NaN/Inf x are
 * counted and skipped; x_hat Inf/NaN counts in qbad. */
#define FP8_MOMENTS_ARGS fp8__moments *m, const float *x, const float *xq, size_t n
/* Finite amax and min nonzero |x| as float32 bits (min: 0x7F800000 if none). */
#define FP8_RANGE_ARGS const float *x, size_t n, uint32_t *amax_bits, uint32_t *minnz_bits

/* fp8__xmoments_add: the statistics of x alone
 * (moments, |x| sum, min, max, min nonzero, zeros, NaN, Inf) and, when
 * hist is not NULL, its exponent-histogram bins (as fp8__hist_add) in the
 * same pass; fp8__err_add the error sums of x against x_hat (e2, q2, xq,
 * maxerr, qbad).  Each leaves the other's fields alone. */
/* (prefetch: bytes ahead of x to fetch, 0 none: x's own pass over a
 * tensor larger than the caches, quantize.c) */
#define FP8_XMOMENTS_ARGS fp8__moments *m, const float *x, size_t n, fp8__hist_state *hist, uint32_t prefetch
void fp8__xmoments_add_avx512(FP8_XMOMENTS_ARGS);
void fp8__xmoments_add_avx2(FP8_XMOMENTS_ARGS);
void fp8__xmoments_add_base(FP8_XMOMENTS_ARGS);
/* fp8__both_add: both in one pass (x's statistics, bins when hist, and the
 * error sums against xq) */
#define FP8_BOTH_ARGS fp8__moments *m, const float *x, const float *xq, size_t n, fp8__hist_state *hist
void fp8__both_add_avx512(FP8_BOTH_ARGS);
void fp8__both_add_avx2(FP8_BOTH_ARGS);
void fp8__both_add_base(FP8_BOTH_ARGS);
void fp8__err_add_avx512(FP8_MOMENTS_ARGS);
void fp8__err_add_avx2(FP8_MOMENTS_ARGS);
void fp8__err_add_base(FP8_MOMENTS_ARGS);
/* The double-lane path (moments_vec.c): fp8__x_masked x's statistics of
 * x[0..n) (its bins aside), fp8__err_masked the error sums against xq,
 * each added to m's and leaving the other's fields alone */
void fp8__x_masked_avx512(fp8__moments *m, const float *x, size_t n);
void fp8__x_masked_avx2(fp8__moments *m, const float *x, size_t n);
void fp8__x_masked_base(fp8__moments *m, const float *x, size_t n);
void fp8__err_masked_avx512(FP8_MOMENTS_ARGS);
void fp8__err_masked_avx2(FP8_MOMENTS_ARGS);
void fp8__err_masked_base(FP8_MOMENTS_ARGS);
/* Per group of glen (a multiple of 16) along x[0..n): amax_bits[g] and
 * minnz_bits[g] are set (not merged); minnz_bits NULL: the maxima alone. */
#define FP8_RANGE_GROUPS_ARGS const float *x, size_t n, size_t glen, uint32_t *amax_bits, uint32_t *minnz_bits
void fp8__range_groups_avx512(FP8_RANGE_GROUPS_ARGS);
void fp8__range_groups_avx2(FP8_RANGE_GROUPS_ARGS);
void fp8__range_groups_base(FP8_RANGE_GROUPS_ARGS);
/* Exponent-histogram bins (docs/statistics.md) of x[0..n) added to eight
 * interleaved 32-bit sub-histograms of 257 bins: consecutive elements mostly
 * share a bin, and one counter would serialise on its own store.  The bins
 * are computed 16 lanes at a time into a small buffer first. */
#define FP8_HIST_SUBS 8
#define FP8_HIST_ARGS uint32_t sub[FP8_HIST_SUBS][257], const float *x, size_t n
void fp8__hist_add_avx512(FP8_HIST_ARGS);
void fp8__hist_add_avx2(FP8_HIST_ARGS);
void fp8__hist_add_base(FP8_HIST_ARGS);
/* Finite amax (float32 bits) and the counts of +-Inf and NaN inputs; the
 * per-lane counters hold 2^32 - 1 elements per call (callers chunk). */
#define FP8_AMAX_SCAN_ARGS const float *x, size_t n, uint32_t *amax_bits, uint64_t *inf_count, uint64_t *nan_count
void fp8__amax_scan_avx512(FP8_AMAX_SCAN_ARGS);
void fp8__amax_scan_avx2(FP8_AMAX_SCAN_ARGS);
void fp8__amax_scan_base(FP8_AMAX_SCAN_ARGS);
/* The elements of x[0..n) with |x| > thr (thr >= 0; Inf counts, NaN does
 * not): TransformerEngine's overflow test, fp8_stats.te_overflows */
#define FP8_COUNT_ABOVE_ARGS const float *x, size_t n, float thr
uint64_t fp8__count_above_avx512(FP8_COUNT_ABOVE_ARGS);
uint64_t fp8__count_above_avx2(FP8_COUNT_ABOVE_ARGS);
uint64_t fp8__count_above_base(FP8_COUNT_ABOVE_ARGS);
/* The first group g with the largest amax[g] / minnz[g] over groups with
 * amax nonzero and minnz finite (float32 bits, as fp8__range_groups sets
 * them); SIZE_MAX when there is none. */
#define FP8_BEST_RATIO_ARGS const uint32_t *amax, const uint32_t *minnz, size_t ng
size_t fp8__best_ratio_avx512(FP8_BEST_RATIO_ARGS);
size_t fp8__best_ratio_avx2(FP8_BEST_RATIO_ARGS);
size_t fp8__best_ratio_base(FP8_BEST_RATIO_ARGS);
/* NVFP4's block scales of amax[0 .. ng) (float32 bits), sixteen at a
 * time: the blocks done (a multiple of 16); quantize_scales.c does the rest */
#define FP8_NVFP4_SCALES_ARGS const uint32_t *amax, size_t ng, float S_enc, float sg, float *scale, float *scale_inv
size_t fp8__nvfp4_scales_avx512(FP8_NVFP4_SCALES_ARGS);
size_t fp8__nvfp4_scales_avx2(FP8_NVFP4_SCALES_ARGS);
size_t fp8__nvfp4_scales_base(FP8_NVFP4_SCALES_ARGS);
void fp8__range_avx512(FP8_RANGE_ARGS);
void fp8__range_avx2(FP8_RANGE_ARGS);
void fp8__range_base(FP8_RANGE_ARGS);

#endif
