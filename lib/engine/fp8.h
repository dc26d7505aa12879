/* fp8.h — the fp8prof library: include this one header. */
#ifndef FP8_H
#define FP8_H
#include "fp8_error.h"
#include "fp8_format.h"
#include "fp8_recipe.h"
#include "fp8_stats.h"
#endif
