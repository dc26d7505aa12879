/*
 * advise.h — what the cheapest-format analysis (advise.c) lends others.
 */
#ifndef FP8_AN_ADVISE_H
#define FP8_AN_ADVISE_H

#include <stdint.h>

#include "fp8_format.h"
#include "fp8_recipe.h"

/* Element bits + scale bits per element of recipe p on a
 * rows x cols tensor of the given role whose elements are in format f. */
double an_bits_per_element(const fp8_recipe *p, const fp8_format *f, fp8_role role, uint64_t rows, uint64_t cols);

#endif
