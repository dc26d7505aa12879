/*
 * kernels.c — the pick of the statistics engine's vector loops: AVX-512,
 * AVX2 or portable, once per process, by what this CPU supports
 * (kernels.h).
 */
#include <pthread.h>

#include "kernels.h"

static pthread_once_t pick_once = PTHREAD_ONCE_INIT;
fp8__kernel_table fp8__k;

static void pick(void)
{
    fp8__k.isa = "base";
    fp8__k.err_add = fp8__err_add_base;
    fp8__k.xmoments_add = fp8__xmoments_add_base;
    fp8__k.both_add = fp8__both_add_base;
    fp8__k.range_pass = fp8__range_base;
    fp8__k.range_groups = fp8__range_groups_base;
    fp8__k.hist_vec = fp8__hist_add_base;
    fp8__k.amax_scan = fp8__amax_scan_base;
    fp8__k.best_ratio = fp8__best_ratio_base;
#if defined(__x86_64__)
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f")) {
        fp8__k.isa = "avx512";
        fp8__k.err_add = fp8__err_add_avx512;
        fp8__k.xmoments_add = fp8__xmoments_add_avx512;
        fp8__k.both_add = fp8__both_add_avx512;
        fp8__k.range_pass = fp8__range_avx512;
        fp8__k.range_groups = fp8__range_groups_avx512;
        fp8__k.hist_vec = fp8__hist_add_avx512;
        fp8__k.amax_scan = fp8__amax_scan_avx512;
        fp8__k.best_ratio = fp8__best_ratio_avx512;
    } else if (__builtin_cpu_supports("avx2")) {
        fp8__k.isa = "avx2";
        fp8__k.err_add = fp8__err_add_avx2;
        fp8__k.xmoments_add = fp8__xmoments_add_avx2;
        fp8__k.both_add = fp8__both_add_avx2;
        fp8__k.range_pass = fp8__range_avx2;
        fp8__k.range_groups = fp8__range_groups_avx2;
        fp8__k.hist_vec = fp8__hist_add_avx2;
        fp8__k.amax_scan = fp8__amax_scan_avx2;
        fp8__k.best_ratio = fp8__best_ratio_avx2;
    }
#endif
}

size_t fp8__best_ratio(const uint32_t *amax, const uint32_t *minnz, size_t ng)
{
    pthread_once(&pick_once, pick);
    return fp8__k.best_ratio(amax, minnz, ng);
}

void fp8__kernels_pick(void)
{
    pthread_once(&pick_once, pick);
}
