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
/* x's error sums against its x_hat in double, in 16 lanes: lane l sums
 * the elements 16k + l of the stretch the accumulator has been given, the
 * last n % 16 of the last call to lanes 0, 1, ... in turn (every call but
 * the last takes a multiple of 16 elements, so that a tensor given in
 * stretches is summed as one).  Per lane: x2 = sum x^2 over finite x; over
 * finite x with finite x_hat, e2 = sum (x - x_hat)^2, q2 = sum x_hat^2, xq
 * = sum x x_hat, me = max |x - x_hat| (the difference in float32); bad =
 * finite x whose x_hat is not finite.  Zero it to begin. */
typedef struct {
    double x2[16], e2[16], q2[16], xq[16], me[16];
    int64_t bad[16];
} fp8__err_acc;
#define FP8_ERR_DOUBLE_ARGS const float *x, const float *xh, size_t n, fp8__err_acc *acc
void fp8__err_double_avx512(FP8_ERR_DOUBLE_ARGS);
void fp8__err_double_avx2(FP8_ERR_DOUBLE_ARGS);
void fp8__err_double_base(FP8_ERR_DOUBLE_ARGS);

/* the accumulator's totals, its lanes added in order: sums[0..3] = x2, e2,
 * q2, xq */
static inline void fp8__err_acc_totals(const fp8__err_acc *a, double sums[4], float *maxerr, uint64_t *nbad)
{
    double s[4] = {0, 0, 0, 0}, me = 0;
    uint64_t nb = 0;
    for (int l = 0; l < 16; l++) {
        s[0] += a->x2[l], s[1] += a->e2[l], s[2] += a->q2[l], s[3] += a->xq[l];
        me = a->me[l] > me ? a->me[l] : me;
        nb += (uint64_t)a->bad[l];
    }
    for (int k = 0; k < 4; k++)
        sums[k] = s[k];
    *maxerr = (float)me;
    *nbad = nb;
}
/* dst (cols x rows) = the transpose of src (rows x cols), row-major; the
 * column-wise and transposed recipes' copy of x and their x_hat's way
 * back (quantize_tiles.c keeps the plain loop, fp8__transpose_ref) */
#define FP8_TRANSPOSE_ARGS const float *src, size_t rows, size_t cols, float *dst
void fp8__transpose_avx512(FP8_TRANSPOSE_ARGS);
void fp8__transpose_avx2(FP8_TRANSPOSE_ARGS);
void fp8__transpose_base(FP8_TRANSPOSE_ARGS);
/* NVFP4's random Hadamard transform (rht.h) of x into y (y may be x):
 * every whole group of 16 along each row, y = H (d . x) / 4, or inverse,
 * y = d . (H x / 4); a row's last partial group copied as it is */
#define FP8_RHT_ARGS const float *x, float *y, size_t rows, size_t cols, const float d[16], int inverse
void fp8__rht_avx512(FP8_RHT_ARGS);
void fp8__rht_avx2(FP8_RHT_ARGS);
void fp8__rht_base(FP8_RHT_ARGS);

#endif
