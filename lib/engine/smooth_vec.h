/*
 * smooth_vec.h — internal: the element-wise loops of the recipes that cast
 * another tensor than x (smooth_vec.c, built once per instruction set and
 * picked at run time with the statistics engine's, kernels.h).
 */
#ifndef FP8_SMOOTH_VEC_H
#define FP8_SMOOTH_VEC_H
#include <stddef.h>
#include <stdint.h>

/* mx[j] = max over the rows of finite |x_ij| (0 for a column with none):
 * x rows x cols, row-major */
#define FP8_COLMAX_ARGS const float *x, size_t rows, size_t cols, float *mx
void fp8__colmax_avx512(FP8_COLMAX_ARGS);
void fp8__colmax_avx2(FP8_COLMAX_ARGS);
void fp8__colmax_base(FP8_COLMAX_ARGS);
/* y_ij = x_ij / s_j (divide) or x_ij * s_j, each one float32 operation;
 * y may be x */
#define FP8_COLSCALE_ARGS const float *x, size_t rows, size_t cols, const float *s, int divide, float *y
void fp8__colscale_avx512(FP8_COLSCALE_ARGS);
void fp8__colscale_avx2(FP8_COLSCALE_ARGS);
void fp8__colscale_base(FP8_COLSCALE_ARGS);
/* x[0..n) against its x_hat xh, in double: sums[0] = sum x^2 over finite
 * x; over finite x with finite x_hat, sums[1] = sum (x - x_hat)^2, sums[2]
 * = sum x_hat^2, sums[3] = sum x x_hat, *maxerr = max |x - x_hat| (the
 * difference in float32); *nbad = finite x whose x_hat is not finite.  Lane
 * l (of 16) sums elements 16k + l, the last n % 16 the lanes from 0 on; the
 * lanes are added in order. */
#define FP8_ERR_DOUBLE_ARGS const float *x, const float *xh, size_t n, double sums[4], float *maxerr, uint64_t *nbad
void fp8__err_double_avx512(FP8_ERR_DOUBLE_ARGS);
void fp8__err_double_avx2(FP8_ERR_DOUBLE_ARGS);
void fp8__err_double_base(FP8_ERR_DOUBLE_ARGS);
/* NVFP4's random Hadamard transform (rht.h) of x into y (y may be x):
 * every whole group of 16 along each row, y = H (d . x) / 4, or inverse,
 * y = d . (H x / 4); a row's last partial group copied as it is */
#define FP8_RHT_ARGS const float *x, float *y, size_t rows, size_t cols, const float d[16], int inverse
void fp8__rht_avx512(FP8_RHT_ARGS);
void fp8__rht_avx2(FP8_RHT_ARGS);
void fp8__rht_base(FP8_RHT_ARGS);

#endif
