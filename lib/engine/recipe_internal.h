/*
 * recipe_internal.h — internal: the scale rules without the floating-point
 * guard, for callers that already hold it (quantize.c).  The public
 * fp8_scale_* functions are these inside fp8__fenv_enter/leave.
 */
#ifndef FP8_RECIPE_INTERNAL_H
#define FP8_RECIPE_INTERNAL_H
#include "fp8_recipe.h"

float fp8__scale_delayed(float fp8_max, float amax, int margin, int pow2, float old_scale);
float fp8__scale_current(float fp8_max, float amax, double eps, int pow2, int torchao);
void fp8__scale_block(float fp8_max, float amax, const fp8_recipe *r, float *scale, float *scale_inv);
uint32_t fp8__scale_mx(const fp8_format *elem, float block_amax, fp8_mx_round mode);

#endif
