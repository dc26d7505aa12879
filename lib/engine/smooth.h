/*
 * smooth.h — internal: Smooth SwiGLU's column scales (quantize_api.c), for
 * the engine's smoothed casts and the probes that hand them to a folded
 * weight.
 */
#ifndef FP8_SMOOTH_H
#define FP8_SMOOTH_H
#include <stddef.h>

/* s_j = 1 / max_i |x_ij| over the finite x of column j, 1 for a column
 * with none (x rows x cols, row-major) */
void fp8__column_scales(const float *x, size_t rows, size_t cols, float *s);

#endif
