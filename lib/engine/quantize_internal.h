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

/* The engine's core cast (fp8_quantize_codes's arguments, codes and
 * group_scale_inv may be NULL) of x itself: no smoothing, no transform. */
int fp8__quantize_core(fp8_recipe_state *st, const float *x, size_t rows, size_t cols, float *out, fp8_stats *stats,
                       unsigned options, void *codes, float *group_scale_inv, fp8_amax_info *ai);

/* The same cast in steps, so that several casts of one x can run their
 * fused passes piece by piece side by side (quantize_many.c):
 * fp8__cast_begin checks, makes the scratch, runs the amax pass and the
 * scales and sets up the fused pass (*c NULL when the cast is done already:
 * it had nothing to produce, or failed: the status says).  known: x's finite
 * amax and Inf/NaN counts when the caller has them (a per-tensor recipe then
 * makes no amax pass); x_changes: x will be written over before the cast
 * ends (a cast in place beside it).  Option FP8__STATS_X_LATER: as
 * FP8_STATS_X_GIVEN, with x's statistics put into *stats only before
 * fp8__cast_end.  fp8__cast_joins: 1 when the fused pass goes over x itself
 * in pieces of the same PIECE elements (then *U pieces in *P parts, as
 * fp8_tensor_stats splits them); fp8__cast_units casts pieces [u0, u1) of
 * part p (buf: a thread's fp8__piece_buf); fp8__cast_run the whole pass;
 * fp8__cast_end the statistics and the state's step, and frees c. */
#define FP8__STATS_X_LATER 0x100u
typedef struct fp8__cast fp8__cast;
int fp8__cast_begin(fp8__cast **c, fp8_recipe_state *st, const float *x, size_t rows, size_t cols, float *out,
                    fp8_stats *stats, unsigned options, void *codes, float *group_scale_inv, fp8_amax_info *ai,
                    const fp8_amax_info *known, int x_changes);
int fp8__cast_joins(const fp8__cast *c, size_t *U, int *P);
void fp8__cast_units(fp8__cast *c, int p, size_t u0, size_t u1, float *buf);
void fp8__cast_run(fp8__cast *c);
int fp8__cast_end(fp8__cast *c);
float *fp8__piece_buf(void);
/* x's own statistics (fp8_tensor_stats) in the same steps: begun (NULL:
 * out of memory), pieces [u0, u1) of part p summed, ended into *stats
 * (NULL: dropped) and freed.  fp8__xpass_shape: its pieces and parts. */
typedef struct fp8__xpass fp8__xpass;
fp8__xpass *fp8__xpass_begin(const float *x, size_t n, unsigned flags);
void fp8__xpass_shape(const fp8__xpass *W, size_t *U, int *P);
void fp8__xpass_units(fp8__xpass *W, int p, size_t u0, size_t u1);
void fp8__xpass_end(fp8__xpass *W, fp8_stats *stats);

/* NVFP4's random Hadamard transform: the 16 signs of a seed, and the
 * transform (or its inverse) of every whole group of 16 along each row. */
void fp8__rht_signs(uint64_t seed, float d[16]);
void fp8__rht_apply(float *x, size_t rows, size_t cols, const float d[16], int inverse);

#endif
