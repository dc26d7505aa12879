/*
 * kernels.c — the pick of the statistics engine's vector loops: AVX-512,
 * AVX2 or portable, once per process, by what this CPU supports (or
 * FP8PROF_ISA allows: isa.h; kernels.h).
 */
#include <pthread.h>

#include "isa.h"
#include "kernels.h"

static pthread_once_t pick_once = PTHREAD_ONCE_INIT;
fp8__kernel_table fp8__k;

/* every loop of one instruction set */
#define USE(ISA)                                         \
    do {                                                 \
        fp8__k.isa = #ISA;                               \
        fp8__k.err_add = fp8__err_add_##ISA;             \
        fp8__k.xmoments_add = fp8__xmoments_add_##ISA;   \
        fp8__k.both_add = fp8__both_add_##ISA;           \
        fp8__k.range_pass = fp8__range_##ISA;            \
        fp8__k.range_groups = fp8__range_groups_##ISA;   \
        fp8__k.hist_vec = fp8__hist_add_##ISA;           \
        fp8__k.amax_scan = fp8__amax_scan_##ISA;         \
        fp8__k.count_above = fp8__count_above_##ISA;     \
        fp8__k.best_ratio = fp8__best_ratio_##ISA;       \
        fp8__k.nvfp4_scales = fp8__nvfp4_scales_##ISA;   \
        fp8__k.colmax = fp8__colmax_##ISA;               \
        fp8__k.colscale = fp8__colscale_##ISA;           \
        fp8__k.err_double = fp8__err_double_##ISA;       \
        fp8__k.rht = fp8__rht_##ISA;                     \
        fp8__k.transpose = fp8__transpose_##ISA;         \
        fp8__k.cast_kernel = fp8__vec_kernel_##ISA;      \
    } while (0)

static void pick(void)
{
    USE(base);
#if defined(__x86_64__)
    int isa = fp8__isa_pick();
    if (isa == FP8_ISA_AVX512)
        USE(avx512);
    else if (isa == FP8_ISA_AVX2)
        USE(avx2);
#endif
}

void fp8__kernels_pick(void)
{
    pthread_once(&pick_once, pick);
}

size_t fp8__best_ratio(const uint32_t *amax, const uint32_t *minnz, size_t ng)
{
    fp8__kernels_pick();
    return fp8__k.best_ratio(amax, minnz, ng);
}
