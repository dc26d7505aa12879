/*
 * quantize_many.h — internal: one tensor under several recipes in one sweep
 * over it (quantize_many.c), for the probes of this library.
 */
#ifndef FP8_QUANTIZE_MANY_H
#define FP8_QUANTIZE_MANY_H
#include <stddef.h>

#include "fp8_recipe.h"
#include "fp8_stats.h"

/* One recipe's cast of the shared tensor: its state, its x_hat (NULL: not
 * wanted; x itself: in place), its codes and group scales (both NULL, or
 * both given: fp8_quantize_codes), its statistics (required), and the
 * status it ended with. */
typedef struct {
    fp8_recipe_state *st;
    float *out;
    void *codes;
    float *group_scale_inv;
    fp8_stats *stats;
    int status;
} fp8__cast_req;

/* x's own statistics into *xs (fp8_tensor_stats_ex(x, rows * cols, xs,
 * flags, threads)) and each of the n (at most 64) requests' cast with them
 * given (fp8_quantize_ex / fp8_quantize_codes with FP8_STATS_X_GIVEN, one
 * after the other, shadows before a cast in place): the same bits, in one
 * sweep over x for the recipes whose pass allows it.  flags:
 * FP8_STATS_NO_EXP_HIST or 0, and FP8_STATS_X_GIVEN when *xs holds x's
 * statistics already (fp8_tensor_stats_ex with the same flags: not summed
 * again); amax: x's (fp8_tensor_amax) when the caller has it, else NULL
 * (taken from *xs when given, else one more pass over x).  Returns FP8_OK when every request was tried
 * (each one's own status in req[i].status), else an error and nothing
 * cast. */
int fp8__quantize_many(const float *x, size_t rows, size_t cols, unsigned flags, int threads, fp8_stats *xs,
                       const fp8_amax_info *amax, fp8__cast_req *req, int n);

/* Before x's statistics, for a sweep to come of n requests over rows *
 * cols = numel elements on `threads`, one of them in place or not: wakes
 * the threads that the sweep will hand its casts to, when it will (a
 * tensor of a few pieces: its casts go side by side), so that their
 * wake-up passes during x's statistics.  (A wake-up that finds no work
 * costs the caller a few microseconds: not called otherwise.) */
void fp8__quantize_many_warm(size_t numel, int threads, int n, int in_place);

/* x's amax information (fp8_tensor_amax's) from its statistics, converted
 * in the default environment (a subnormal amax is not flushed); in
 * quantize.c, beside fp8_tensor_amax */
void fp8__stats_amax(const fp8_stats *xs, fp8_amax_info *out);

#endif
