/*
 * bench_vec.c — vector work like the engine's, for the references of other
 * sections (bench.h): eight independent chains of float multiply-adds (a
 * throughput, not a latency) over 4 KB in L1, 1,000,000 passes, each
 * function in one vector width.  Each width is written in its own vector
 * type: GCC lowers a vector wider than the ISA's registers through memory
 * (docs/performance.md, the builds without AVX-512), which would time
 * loads and stores instead of multiply-adds.
 */
#include <stddef.h>

#include "bench.h"

/* arg non-NULL: the second buffer (a second thread's) */
#define FMA_BODY(V, NV)                                                                                    \
    static V buf[2][NV];                                                                                   \
    V *b = buf[arg != NULL];                                                                               \
    V s0 = {0}, s1 = {0}, s2 = {0}, s3 = {0}, s4 = {0}, s5 = {0}, s6 = {0}, s7 = {0};                      \
    for (long r = 0; r < 1000000; r++)                                                                     \
        for (int i = 0; i < (NV); i += 8) {                                                                \
            s0 += b[i] * b[i], s1 += b[i + 1] * b[i + 1], s2 += b[i + 2] * b[i + 2];                       \
            s3 += b[i + 3] * b[i + 3], s4 += b[i + 4] * b[i + 4], s5 += b[i + 5] * b[i + 5];               \
            s6 += b[i + 6] * b[i + 6], s7 += b[i + 7] * b[i + 7];                                          \
        }                                                                                                  \
    b[0] = s0 + s1 + s2 + s3 + s4 + s5 + s6 + s7;                                                          \
    return arg;

typedef float vf4 __attribute__((vector_size(16)));
void *bench_fma_base(void *arg) { FMA_BODY(vf4, 256) }
#if defined(__x86_64__)
typedef float vf8 __attribute__((vector_size(32)));
typedef float vf16 __attribute__((vector_size(64)));
__attribute__((target("avx2,fma"))) void *bench_fma_avx2(void *arg) { FMA_BODY(vf8, 128) }
__attribute__((target("avx512f"))) void *bench_fma_avx512(void *arg) { FMA_BODY(vf16, 64) }
#endif
