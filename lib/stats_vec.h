/*
 * stats_vec.h — internal: vector loops of the statistics engine, built once
 * per instruction set like kernel_vec.c and picked at run time.
 *
 * Moments are accumulated lane-wise in double around a shift K (the first
 * finite value of the tensor): S_p = sum (x - K)^p, p = 1..4, which keeps
 * the cancellation in the central moments small when K is near the data.
 */
#ifndef FP8_STATS_VEC_H
#define FP8_STATS_VEC_H
#include <stddef.h>
#include <stdint.h>

#define FP8_ML 8 /* double lanes */

typedef struct {
    double shift;                                   /* K                     */
    double s1[FP8_ML], s2[FP8_ML], s3[FP8_ML], s4[FP8_ML];
    double l1[FP8_ML];                              /* sum |x|               */
    double e2[FP8_ML];                              /* sum (x - x_hat)^2     */
    double xq[FP8_ML];                              /* sum x * x_hat         */
    double q2[FP8_ML];                              /* sum x_hat^2           */
    double x2[FP8_ML];                              /* sum x^2 (for ||x||)   */
    float mn[16], mx[16], maxerr[16], mnz[16];      /* lane min, max, max|e|, min nonzero |x| */
    uint64_t nan, inf, zero, qbad;                  /* counts                */
} fp8__moments;

void fp8__moments_init(fp8__moments *m, double shift);

/* Add elements x[0..n) with their dequantized values xq (NULL: no error
 * sums).  NaN/Inf x are counted and skipped; x_hat Inf/NaN counts in qbad. */
#define FP8_MOMENTS_ARGS fp8__moments *m, const float *x, const float *xq, size_t n
/* Finite amax and min nonzero |x| as float32 bits (min: 0x7F800000 if none). */
#define FP8_RANGE_ARGS const float *x, size_t n, uint32_t *amax_bits, uint32_t *minnz_bits

void fp8__moments_add_avx512(FP8_MOMENTS_ARGS);
void fp8__moments_add_avx2(FP8_MOMENTS_ARGS);
void fp8__moments_add_base(FP8_MOMENTS_ARGS);
void fp8__range_avx512(FP8_RANGE_ARGS);
void fp8__range_avx2(FP8_RANGE_ARGS);
void fp8__range_base(FP8_RANGE_ARGS);

#endif
