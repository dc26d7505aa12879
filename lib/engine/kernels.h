/*
 * kernels.h — internal: the statistics engine's vector loops (stats_vec.c, range_vec.c,
 * smooth_vec.c, built once per instruction set) picked once at run time for this CPU.
 */
#ifndef FP8_KERNELS_H
#define FP8_KERNELS_H

#include "kernel_vec.h"
#include "smooth_vec.h"
#include "stats_vec.h"

typedef struct {
    void (*err_add)(FP8_MOMENTS_ARGS);
    void (*xmoments_add)(FP8_XMOMENTS_ARGS);
    void (*both_add)(FP8_BOTH_ARGS);
    void (*range_pass)(FP8_RANGE_ARGS);
    void (*range_groups)(FP8_RANGE_GROUPS_ARGS);
    void (*hist_vec)(FP8_HIST_ARGS);
    void (*amax_scan)(FP8_AMAX_SCAN_ARGS);
    uint64_t (*count_above)(FP8_COUNT_ABOVE_ARGS);
    size_t (*best_ratio)(FP8_BEST_RATIO_ARGS);
    size_t (*nvfp4_scales)(FP8_NVFP4_SCALES_ARGS);
    void (*colmax)(FP8_COLMAX_ARGS);
    void (*colscale)(FP8_COLSCALE_ARGS);
    void (*err_double)(FP8_ERR_DOUBLE_ARGS);
    void (*rht)(FP8_RHT_ARGS);
    void (*transpose)(FP8_TRANSPOSE_ARGS);
    /* the cast kernel of the same instruction set: the one whose error
     * sums on the way equal err_add's bit for bit */
    void (*cast_kernel)(FP8_VEC_KERNEL_ARGS);
    const char *isa; /* "avx512", "avx2" or "base" */
} fp8__kernel_table;

/* The table, filled by fp8__kernels_pick (call it first; thread-safe,
 * the work is done once). */
extern fp8__kernel_table fp8__k;
void fp8__kernels_pick(void);

/* The first group with the largest amax / min-nonzero ratio (the vector
 * pass for this machine; picks the kernels first); SIZE_MAX if none. */
size_t fp8__best_ratio(const uint32_t *amax, const uint32_t *minnz, size_t ng);

#endif
