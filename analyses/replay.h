/*
 * replay.h — pieces of the delayed-scaling replay that tests check alone.
 */
#ifndef FP8_AN_REPLAY_H
#define FP8_AN_REPLAY_H

#include <stddef.h>
#include <stdint.h>

/* A count known to lie in [lo, hi], with the estimate est. */
typedef struct {
    double lo, est, hi;
} an_bounds;

typedef struct {
    size_t events, steps;
    double numel;
    an_bounds ov, un; /* summed counts */
} an_setting_sum;

/* From one exponent histogram (FP8_EXP_BINS bins), the tensor's amax,
 * smallest nonzero |x| and Inf count: the values with |x| > over (Inf
 * included) and the nonzero values with |x| <= under, as bounds and
 * estimates (docs/analyses.md). */
void an_hist_bounds(const uint64_t *hist, double amax, double min_nonzero, uint64_t inf, double over, double under,
                    an_bounds *ov, an_bounds *un);

#endif
