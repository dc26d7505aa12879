/*
 * quantize_internal.h — internal: the engine's cast in steps
 * (quantize_cast.c), for the files above it (quantize_api.c,
 * quantize_many.c).  The parts below it have headers of their own:
 * quantize_pass.h is the fused pass (quantize.c: the group ranges a cast
 * hands the next, x's own statistics in steps, the piece buffer),
 * quantize_tiles.h places the groups,
 * quantize_scales.h sets their scales, quantize_finish.h turns the sums
 * into fp8_stats, rht.h is NVFP4's random Hadamard transform; moments.c
 * joins sums (stats_vec.h).
 */
#ifndef FP8_QUANTIZE_INTERNAL_H
#define FP8_QUANTIZE_INTERNAL_H
#include <stdint.h>
#include <string.h>

#include "f32bits.h"
#include "fp8_recipe.h"
#include "fp8_stats.h"
#include "quantize_finish.h"
#include "quantize_pass.h"
#include "quantize_scales.h"
#include "quantize_tiles.h"
#include "rht.h"
#include "stats_vec.h"

/* The engine's core cast (fp8_quantize_codes's arguments, codes and
 * group_scale_inv may be NULL) of x itself: no smoothing, no transform. */
int fp8__quantize_core(fp8_recipe_state *st, const float *x, size_t rows, size_t cols, float *out, fp8_stats *stats,
                       unsigned options, void *codes, float *group_scale_inv, fp8_amax_info *ai);

/* The same cast in steps, so that several casts of one x can run their
 * fused passes piece by piece side by side (quantize_many.c):
 * fp8__cast_begin checks, makes the scratch, runs the amax pass (or
 * takes the group amaxes from `fine`, below; or leaves them and the scales
 * to the fused pass, piece by piece: a late cast, quantize_cast.c) and the
 * scales and sets up the fused pass (*c NULL when the cast is done already:
 * it had nothing to produce, or failed: the status says).  known: x's finite
 * amax and Inf/NaN counts when the caller has them (a per-tensor recipe then
 * makes no amax pass).  Option FP8__STATS_X_LATER: as
 * FP8_STATS_X_GIVEN, with x's statistics put into *stats only before
 * fp8__cast_end.  fp8__cast_joins: 1 when the fused pass goes over x itself
 * in pieces of the same PIECE elements (then *U pieces in *P parts, as
 * fp8_tensor_stats splits them); fp8__cast_units casts pieces [u0, u1) of
 * part p (buf: a thread's fp8__piece_buf); fp8__cast_run the whole pass;
 * fp8__cast_prefetch: part p's kernel fetches x `bytes` ahead of where it
 * reads (0: nothing); fp8__cast_leans: 1 when c's pieces take their
 * group ranges from the sweep's first cast of the same piece (a late cast
 * whose groups nest in that one's: it must follow that cast piece by
 * piece, on the same thread);
 * fp8__cast_end the statistics and the state's step, and frees c. */
#define FP8__STATS_X_LATER 0x100u
typedef struct fp8__cast fp8__cast;
int fp8__cast_begin(fp8__cast **c, fp8_recipe_state *st, const float *x, size_t rows, size_t cols, float *out,
                    fp8_stats *stats, unsigned options, void *codes, float *group_scale_inv, fp8_amax_info *ai,
                    const fp8_amax_info *known, const fp8__ranges *fine);
/* fp8__cast_ranges: a begun cast's group ranges (fp8__ranges, quantize_pass.h)
 * when they are of x's rows (1; else 0); valid until the cast ends (made
 * in the sweep, piece by piece, when out->in_sweep) */
int fp8__cast_ranges(const fp8__cast *c, fp8__ranges *out);
int fp8__cast_joins(const fp8__cast *c, size_t *U, int *P);
void fp8__cast_units(fp8__cast *c, int p, size_t u0, size_t u1, float *buf);
void fp8__cast_run(fp8__cast *c);
void fp8__cast_prefetch(fp8__cast *c, int p, uint32_t bytes);
int fp8__cast_leans(const fp8__cast *c);
int fp8__cast_end(fp8__cast *c);

#endif
