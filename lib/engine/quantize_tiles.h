/*
 * quantize_tiles.h — internal: where a recipe's scale groups lie in a
 * tensor (quantize_tiles.c), the transposes column-wise recipes cast, and
 * TransformerEngine's overflow count under the groups' scales.
 */
#ifndef FP8_QUANTIZE_TILES_H
#define FP8_QUANTIZE_TILES_H
#include <stddef.h>
#include <stdint.h>

#include "fp8_recipe.h"

/* A tensor's scale groups: one per tensor (none, delayed, current), per row
 * (rowwise), per tile, or per `group` elements along a row. */
typedef struct {
    size_t R, C;        /* shape of the (possibly transposed) data          */
    size_t seg;         /* segment length along a row (C for per-row groups) */
    size_t nbc;         /* segments per row                                 */
    size_t br;          /* rows per group (1, block_rows, or R)             */
    size_t ngroups;
    int per_tensor;     /* one group: the whole tensor is one segment       */
} layout;

void fp8__make_layout(const fp8_recipe *r, size_t R, size_t C, layout *L);
/* column-wise recipes (and transposed blocks) cast the transpose */
int fp8__needs_transpose(const fp8_recipe *r);
void fp8__transpose(const float *src, size_t rows, size_t cols, float *dst); /* dst: cols x rows */
void fp8__transpose_ref(const float *src, size_t rows, size_t cols, float *dst); /* the plain tiles */
void fp8__transpose_codes(const void *src, size_t rows, size_t cols, size_t cb, void *dst);
/* TE's overflow count (fp8_stats.te_overflows) of X under the groups' scale_inv */
uint64_t fp8__te_overflow_count(const float *X, const layout *L, const float *scale_inv, const uint32_t *gamax,
                                float amax, float fmax, int any_inf);

#endif
