/*
 * isa.c — fp8__isa_cpu and fp8__isa_pick (isa.h).
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "isa.h"

static pthread_once_t once = PTHREAD_ONCE_INIT;
static int level;

int fp8__isa_cpu(void)
{
    int cpu = FP8_ISA_BASE;
#if defined(__x86_64__)
    __builtin_cpu_init();
    /* (the AVX-512 objects are built with F, BW, VL and DQ: a CPU with
     * AVX-512F alone, such as Knights Landing, takes the AVX2 kernels) */
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq"))
        cpu = FP8_ISA_AVX512;
    else if (__builtin_cpu_supports("avx2"))
        cpu = FP8_ISA_AVX2;
#endif
    return cpu;
}

static void decide(void)
{
    int cpu = fp8__isa_cpu();
    level = cpu;
    const char *want = getenv("FP8PROF_ISA");
    if (!want || !*want)
        return;
    static const char *const names[] = {"base", "avx2", "avx512"};
    for (int i = 0; i <= FP8_ISA_AVX512; i++)
        if (strcmp(want, names[i]) == 0) {
            if (i <= cpu)
                level = i;
            else
                fprintf(stderr, "fp8prof: FP8PROF_ISA=%s: this CPU has no %s; using %s\n", want, names[i],
                        names[cpu]);
            return;
        }
    fprintf(stderr, "fp8prof: FP8PROF_ISA=%s is not one of avx512, avx2, base; using %s\n", want, names[cpu]);
}

int fp8__isa_pick(void)
{
    pthread_once(&once, decide);
    return level;
}
