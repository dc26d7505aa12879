/*
 * quantize_internal.h — internal: what the engine's files share (quantize.c
 * runs the passes; quantize_tiles.c places the groups; quantize_scales.c
 * sets their scales; quantize_finish.c turns the sums into fp8_stats;
 * moments.c joins sums; rht.c is NVFP4's random Hadamard transform).
 */
#ifndef FP8_QUANTIZE_INTERNAL_H
#define FP8_QUANTIZE_INTERNAL_H
#include <stdint.h>
#include <string.h>

#include "fp8_recipe.h"
#include "fp8_stats.h"
#include "stats_vec.h"

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
void fp8__transpose_codes(const void *src, size_t rows, size_t cols, size_t cb, void *dst);
/* TE's overflow count (fp8_stats.te_overflows) of X under the groups' scale_inv */
uint64_t fp8__te_overflow_count(const float *X, const layout *L, const float *scale_inv, const uint32_t *gamax,
                                float amax, float fmax, int any_inf);

static inline float fp8__bits_to_float(uint32_t b)
{
    float f;
    memcpy(&f, &b, 4);
    return f;
}

/* The scale and scale_inv of each of ng groups (groups g0 .. g0 + ng - 1
 * of the tensor) from their amaxes (float32 bits; gamax the tensor's), by
 * the recipe's rule; per-block delayed scaling takes the scales its
 * histories gave; s_global: NVFP4's. */
void fp8__group_scales(fp8_recipe_state *st, size_t g0, const uint32_t *amax, size_t ng, float gamax, float *scale,
                       float *scale_inv, float *s_global);

/* Per-block delayed scaling: the state's histories and scales for ng
 * blocks of a rows x cols tensor, made (zero histories, scale 1) when it
 * has none or they were made for another shape.  FP8_OK or FP8_ENOMEM. */
int fp8__block_state(fp8_recipe_state *st, size_t ng, size_t rows, size_t cols);
/* ... and this step's block amaxes (float32 bits) into the histories. */
void fp8__block_observe(fp8_recipe_state *st, const uint32_t *gamax, size_t ng);


/* x's statistics (the high-precision side of fp8_stats) from its sums */
void fp8__finish_x(fp8_stats *s, const fp8__moments *m, uint64_t numel);
/* x's statistics from src to dst, the rest of dst untouched */
void fp8__keep_x_fields(fp8_stats *dst, const fp8_stats *src);
/* The recipe's statistics; s already holds x's.  cnt: the cast's classes,
 * err: the error sums; gamax/gminnz NULL for per-tensor recipes.  The
 * per-group summary runs on up to `threads` threads (the same bits). */
void fp8__finish_stats(fp8_stats *s, const uint64_t cnt[FP8_NCLASS], const fp8__moments *err, const layout *L,
                       const uint32_t *gamax_bits, const uint32_t *gminnz_bits, const float *scale,
                       const float *scale_inv, const unsigned char *flags, float s_global, const fp8_format *f,
                       int threads);

/* NVFP4's random Hadamard transform: the 16 signs of a seed, and the
 * transform (or its inverse) of every whole group of 16 along each row. */
void fp8__rht_signs(uint64_t seed, float d[16]);
void fp8__rht_apply(float *x, size_t rows, size_t cols, const float d[16], int inverse);

#endif
