/*
 * stats_cases.h — internal to the stats suites (test_stats.c,
 * test_stats_parts.c): the recipes they run (every kind the oracle,
 * tests/ref/ref_stats.c, models) and the kinds of tensor they feed them.
 */
#ifndef FP8_TESTS_STATS_CASES_H
#define FP8_TESTS_STATS_CASES_H
#include <math.h>
#include <stdint.h>
#include <stddef.h>

#include "tests.h"

static const char *recipes[] __attribute__((unused)) = {
    "e4m3:none", "e5m2:none", "e4m3:delayed:history=4", "hybrid:delayed:history=16,margin=1",
    "e4m3:delayed:history=8,pow2", "e4m3:current", "e4m3:current:pow2", "e4m3:current:torchao",
    "e5m2:current:nosat", "e4m3:rowwise", "e4m3:colwise", "e4m3:block=1x128", "e4m3:block=1x128:ue8m0",
    "e4m3:block=128x128:pow2,eps=0", "e4m3:block=1x128:transposed", "mxfp8:floor", "mxfp8:rceil",
    "e5m2:mx:even", "mxfp6:ceil", "mxfp4:floor", "nvfp4", "e4m3:current:round=stochastic,seed=9",
    "e4m3:current:round=zero", "e4m3fnuz:current", "e2m1:none", "e4m3:delayed:history=4,finite_amax",
};
#define NRECIPES (sizeof recipes / sizeof recipes[0])

/* kinds of tensor: the adversarial cases of issue 3 plus random ones */
static inline void fill(int kind, float *x, size_t n, uint64_t seed)
{
    uint64_t s = seed | 1;
    for (size_t i = 0; i < n; i++) {
        double u = (double)(test_rand(&s) >> 11) * 0x1p-53, v = (double)(test_rand(&s) >> 11) * 0x1p-53;
        double g = sqrt(-2 * log(u + 1e-300)) * cos(6.283185307179586 * v); /* Gaussian */
        switch (kind) {
        case 0: x[i] = (float)(g * 2.385); break;                            /* Gaussian */
        case 1: x[i] = 0.0f; break;                                          /* all zeros */
        case 2: x[i] = (float)(g * 0.01); break;                             /* + one huge outlier */
        case 3: x[i] = (i % 17 == 3) ? NAN : (i % 29 == 5) ? ((i & 1) ? INFINITY : -INFINITY) : (float)g; break;
        case 4: x[i] = (float)(g * 1e-39); break;                            /* float32 subnormals */
        case 5: x[i] = (i & 1) ? -0.0f : 0.0f; if (i % 5 == 0) x[i] = (float)g; break; /* +-0 mostly */
        case 6: x[i] = 3.25f; break;                                         /* constant */
        case 7: x[i] = (float)(g * exp(8 * (u - 0.5))); break;               /* wide dynamic range */
        case 9: x[i] = (float)((i < 3 * 32768 ? 0.0 : 1e4) + g); break;      /* the mean jumps at the 4th piece */
        case 10: x[i] = (float)(1e-3 * (double)i + g); break;                /* the mean drifts */
        case 11: /* padding: a band of zeros, and every 7th aligned 32 all +-0 */
            x[i] = (i >= n / 4 && i < n / 2) || i % 224 < 32 ? ((i / 32) % 3 ? 0.0f : -0.0f) : (float)(g * 2.385);
            break;
        case 13: x[i] = (float)(g * 1e-9); break;                            /* tiny: max below 2^-24 */
        case 14: x[i] = (float)(i < n / 2 ? g * 3e-12 : g); break;           /* tiny, then ordinary */
        case 12: /* zeros with NaN and Inf in some of their groups, and some groups of values */
            x[i] = i % 997 == 13 ? NAN : i % 1499 == 7 ? ((i & 1) ? INFINITY : -INFINITY) : i % 160 >= 64 && i % 160 < 96 ? (float)g : 0.0f;
            break;
        default: x[i] = (float)(1e6 + g); break;                             /* large mean, small std */
        }
    }
    if (kind == 2 && n > 7)
        x[n / 3] = 3.0e4f;
}

#endif
