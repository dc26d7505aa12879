/*
 * kernels_isas.h — internal to the kernels suites (test_kernels.c,
 * test_kernels_cast.c): the vector loops of every instruction set side by
 * side, which of them this CPU runs, and the inputs the suites feed them
 * (each file its own copy of the generator, reproducible).
 */
#ifndef FP8_TESTS_KERNELS_ISAS_H
#define FP8_TESTS_KERNELS_ISAS_H
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "f32bits.h"
#include "isa.h"
#include "kernel_vec.h"
#include "smooth_vec.h"
#include "stats_vec.h"
#include "tests.h"

typedef struct {
    const char *name;
    void (*amax_scan)(FP8_AMAX_SCAN_ARGS);
    void (*range)(FP8_RANGE_ARGS);
    void (*range_groups)(FP8_RANGE_GROUPS_ARGS);
    void (*hist)(FP8_HIST_ARGS);
    size_t (*best_ratio)(FP8_BEST_RATIO_ARGS);
    void (*xmoments)(FP8_XMOMENTS_ARGS);
    void (*err)(FP8_MOMENTS_ARGS);
    void (*both)(FP8_BOTH_ARGS);
    void (*colmax)(FP8_COLMAX_ARGS);
    void (*colscale)(FP8_COLSCALE_ARGS);
    void (*err_double)(FP8_ERR_DOUBLE_ARGS);
    uint64_t (*count_above)(FP8_COUNT_ABOVE_ARGS);
    size_t (*nvfp4_scales)(FP8_NVFP4_SCALES_ARGS);
    int runs_here;
    void (*rht)(FP8_RHT_ARGS);
    void (*transpose)(FP8_TRANSPOSE_ARGS);
} isa;

static isa isas[3] __attribute__((unused)) = {
    {"base", fp8__amax_scan_base, fp8__range_base, fp8__range_groups_base, fp8__hist_add_base,
     fp8__best_ratio_base, fp8__xmoments_add_base, fp8__err_add_base, fp8__both_add_base, fp8__colmax_base,
     fp8__colscale_base, fp8__err_double_base, fp8__count_above_base, fp8__nvfp4_scales_base, 1, fp8__rht_base, fp8__transpose_base},
    {"avx2", fp8__amax_scan_avx2, fp8__range_avx2, fp8__range_groups_avx2, fp8__hist_add_avx2,
     fp8__best_ratio_avx2, fp8__xmoments_add_avx2, fp8__err_add_avx2, fp8__both_add_avx2, fp8__colmax_avx2,
     fp8__colscale_avx2, fp8__err_double_avx2, fp8__count_above_avx2, fp8__nvfp4_scales_avx2, 0, fp8__rht_avx2, fp8__transpose_avx2},
    {"avx512", fp8__amax_scan_avx512, fp8__range_avx512, fp8__range_groups_avx512, fp8__hist_add_avx512,
     fp8__best_ratio_avx512, fp8__xmoments_add_avx512, fp8__err_add_avx512, fp8__both_add_avx512,
     fp8__colmax_avx512, fp8__colscale_avx512, fp8__err_double_avx512, fp8__count_above_avx512,
     fp8__nvfp4_scales_avx512, 0, fp8__rht_avx512, fp8__transpose_avx512},
};

static inline void find_isas(void)
{
    static int done;
    if (done)
        return;
    done = 1;
    isas[1].runs_here = fp8__isa_cpu() >= FP8_ISA_AVX2;
    isas[2].runs_here = fp8__isa_cpu() >= FP8_ISA_AVX512;
    for (int k = 1; k < 3; k++)
        if (!isas[k].runs_here) {
            char why[96];
            snprintf(why, sizeof why, "kernels: this CPU has no %s; its loops were not run", isas[k].name);
            test_skip(why);
        }
}

static inline uint32_t bits(float f) { return fp8__float_to_bits(f); }
static inline float from_bits(uint32_t b) { return fp8__bits_to_float(b); }

/* xorshift64: the tests' inputs, reproducible */
static uint64_t rng __attribute__((unused)) = 0x9D2C5680u;
static inline uint64_t next(void)
{
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return rng;
}

/* Kind k of input, n elements: 0 Gaussian-like of scale 2.385, 1 the same
 * with zeros, -0 and subnormals, 2 with +-Inf, 3 with NaN, 4 one outlier of
 * FLT_MAX, 5 every binade from subnormal to 2^127, 6 one binade only (+-1.5
 * and +-1.25: counters that fill fastest), 7 magnitudes rising a binade
 * every 100 elements (the largest bin moves on while counts are pending) */
#define NKINDS 8
static inline void fill(float *x, size_t n, int kind)
{
    for (size_t i = 0; i < n; i++) {
        double u = 0;
        for (int k = 0; k < 4; k++)
            u += (double)(next() >> 11) * 0x1p-53;
        x[i] = (float)((u - 2.0) * 2.385);
        if (kind == 5)
            x[i] = ldexpf(1.0f + (float)(next() % 1000) / 1000.0f, (int)(next() % 276) - 149) *
                   (next() & 1 ? 1.0f : -1.0f);
        if (kind == 6)
            x[i] = (next() & 1 ? 1.5f : 1.25f) * (next() & 1 ? 1.0f : -1.0f);
        if (kind == 7)
            x[i] = ldexpf(x[i], (int)(i / 100) - 20);
    }
    for (size_t i = 0; n && i < 1 + n / 37; i++) {
        size_t at = (size_t)(next() % n);
        switch (kind) {
        case 1:
            x[at] = i % 3 == 0 ? 0.0f : i % 3 == 1 ? -0.0f : from_bits(1u + (uint32_t)(next() % 0x7FFFFFu));
            break;
        case 2:
            x[at] = i % 2 ? INFINITY : -INFINITY;
            break;
        case 3:
            x[at] = from_bits(0x7FC00000u | (uint32_t)(next() % 0x3FFFFFu)) * (i % 2 ? 1.0f : -1.0f);
            break;
        case 4:
            if (i == 0)
                x[at] = -3.4028235e38f;
            break;
        default:
            break;
        }
    }
}

#endif
