/*
 * ref_stats.h — the statistics oracle: a straightforward scalar two-pass
 * implementation of fp8_quantize() (tests and `make bench` use it).
 * Scales come from the public scale rules (checked by hand cases in
 * test_recipe.c); element casts from the single-value fp8_format_encode
 * (checked against ref_cast.c); everything else is written out plainly.
 */
#ifndef REF_STATS_H
#define REF_STATS_H
#include "fp8.h"

/* Same contract as fp8_quantize (out may be NULL). */
int ref_quantize(fp8_recipe_state *st, const float *x, size_t rows, size_t cols, float *out, fp8_stats *s);

#endif
