/*
 * quantize_scales.h — internal: the groups' scales by the recipe's rule
 * (quantize_scales.c), per-block delayed scaling's histories.
 */
#ifndef FP8_QUANTIZE_SCALES_H
#define FP8_QUANTIZE_SCALES_H
#include <stddef.h>
#include <stdint.h>

#include "fp8_recipe.h"

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

#endif
