/* stats_compare.h — the engine's statistics against the oracle's (stats_compare.c). */
#ifndef FP8_STATS_COMPARE_H
#define FP8_STATS_COMPARE_H
#include "fp8.h"

/* The fields of a (the engine's) that differ from b's (the oracle's) beyond
 * docs/statistics.md's tolerances, counted; unless count_only, each fails
 * the running test (the first 10 in all printed, named by what). */
int stats_compare(const char *what, const fp8_stats *a, const fp8_stats *b, int count_only);

#endif
