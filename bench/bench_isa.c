/*
 * bench_isa.c — `make bench BENCH=isa`: the vector loops built for each
 * instruction set this CPU runs (AVX-512, AVX2, the baseline; FP8PROF_ISA
 * picks one, once a process, so each runs in a process of its own), each
 * kernel's rate next to a memcpy of the same floats timed between its
 * repetitions (best of 5 each).  The other sections measure the widest
 * build only, and their targets are its; a machine without AVX-512 (AMD's
 * processors before Zen 4, many Intel client parts) runs the AVX2 build,
 * shown here so that its numbers are seen.  No targets.
 *
 * Rows: the format layer's e4m3 quantize-dequantize and encode (2^24
 * floats), a tensor's amax read (what a step without statistics costs a
 * probe), and the engine's all-statistics casts of a 4096 x 4096 tensor
 * with x_hat written: e4m3 delayed and current, 1x128 blocks, MXFP8, NVFP4
 * (the statistics section's shape); then the same shape's casts without
 * statistics (a probe's apply at a step without them) by 1x128 blocks and
 * MXFP8, of x and of data wider than the format (|x| log-uniform over
 * 2^-30 .. 2^5, as gradients: most vectors hold subnormal or flushed
 * lanes, the kernel's wide path).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench.h"
#include "fp8.h"
#include "fp8_format.h"
#include "isa.h"

#define NQ ((size_t)1 << 24)
#define ROWS 4096
#define COLS 4096

typedef struct {
    const char *spec; /* a recipe, or NULL for the rows below */
    int kind;         /* 0 engine cast, 1 qdq, 2 encode, 3 amax, 4 engine cast without statistics, 5 the same of w */
    const char *name;
} row;

static double run_row(const row *r, const float *x, const float *w, float *y, uint8_t *codes, size_t n,
                      fp8_recipe_state *st)
{
    double t0 = bench_now();
    static const fp8_cast_mode mode = {FP8_ROUND_NEAREST, FP8_SATURATE, 0, 0};
    const fp8_format *f = fp8_format_find("e4m3", NULL);
    fp8_stats s;
    fp8_amax_info ai;
    switch (r->kind) {
    case 0: fp8_quantize(st, x, ROWS, COLS, y, &s); break;
    case 1: fp8_format_qdq_array(f, &mode, 2.385f, x, n, y, NULL); break;
    case 2: fp8_format_encode_array(f, &mode, 2.385f, x, n, codes, NULL); break;
    case 4: fp8_quantize(st, x, ROWS, COLS, y, NULL); break;
    case 5: fp8_quantize(st, w, ROWS, COLS, y, NULL); break;
    default: fp8_tensor_amax(x, n, &ai); break;
    }
    return (double)n / (bench_now() - t0) / 1e9;
}

/* this process's build: one line per row */
int bench_isa_one(void)
{
    float *x = malloc(NQ * 4), *y = malloc(NQ * 4), *w = malloc(NQ * 4);
    uint8_t *codes = malloc(NQ);
    if (!x || !y || !w || !codes) {
        free(x), free(y), free(w), free(codes);
        fprintf(stderr, "bench: out of memory\n");
        return 1;
    }
    uint64_t s = 0x2545F4914F6CDD1Dull;
    for (size_t i = 0; i < NQ; i++) { /* as the statistics section's: activations-like, rare outliers */
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        double u = (double)(s >> 11) * 0x1p-53;
        x[i] = (float)((u - 0.5) * 3.4 + ((s & 0xFF) == 0 ? 40.0 : 0.0));
        y[i] = 0, codes[i] = 0;
    }
    bench_fill_logu(w, NQ, s);
    static const row rows[] = {
        {NULL, 1, "e4m3 quantize-dequantize (format)"}, {NULL, 2, "e4m3 encode (format)"},
        {NULL, 3, "amax read (a step without statistics)"},
        {"e4m3:delayed", 0, "e4m3:delayed, all statistics"},       {"e4m3:current", 0, "e4m3:current, all statistics"},
        {"e4m3:block=1x128", 0, "e4m3:block=1x128, all statistics"}, {"mxfp8", 0, "mxfp8, all statistics"},
        {"nvfp4", 0, "nvfp4, all statistics"},
        {"e4m3:block=1x128", 4, "e4m3:block=1x128, no statistics"},
        {"e4m3:block=1x128", 5, "... of log-uniform |x|, 2^-30 .. 2^5"},
        {"mxfp8", 4, "mxfp8, no statistics"}, {"mxfp8", 5, "... of log-uniform |x|, 2^-30 .. 2^5"},
    };
    const char *isa = fp8_format_kernel_name();
    for (size_t k = 0; k < sizeof rows / sizeof rows[0]; k++) {
        const row *r = &rows[k];
        size_t n = NQ; /* (ROWS x COLS for the engine's casts) */
        fp8_recipe_state *st = NULL;
        if (r->spec) { /* one step first, as in training (bench_stats.c) */
            st = fp8_recipe_state_new(r->spec, "activation");
            if (!st)
                continue;
            fp8_quantize(st, r->kind == 5 ? w : x, ROWS, COLS, NULL, NULL);
            fp8_recipe_state_step(st);
        }
        double best = 0, ref = 0;
        for (int rep = 0; rep < 5; rep++) {
            ref = fmax(ref, bench_memcpy_once(y, x, n));
            best = fmax(best, run_row(r, x, w, y, codes, n, st));
        }
        printf("%-7s %-40s %7.3f Gelem/s %6.1f%% of memcpy beside it (%.3f)\n", isa, r->name, best, 100 * best / ref,
               ref);
        fp8_recipe_state_free(st);
    }
    free(x), free(y), free(w), free(codes);
    return 0;
}

/* Whether this core runs a 512-bit operation at twice the work of a 256-bit
 * one: the same multiply-adds (bench_fma_*) in 512-bit and in 256-bit
 * vectors, best of 5 each.  A core with a full 512-bit datapath gives
 * about 2x; one that executes each 512-bit operation as two 256-bit halves
 * about 1x, and there the statistics, bound by their vector operations
 * rather than by memory, reach a smaller share of memcpy than on the
 * former. */
static void vector_width(void)
{
#if defined(__x86_64__)
    __builtin_cpu_init();
    if (!__builtin_cpu_supports("avx512f") || !__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma"))
        return;
    double t512 = INFINITY, t256 = INFINITY;
    for (int rep = 0; rep < 5; rep++) { /* (interleaved: a busy neighbour slows both alike) */
        double t0 = bench_now();
        bench_fma_avx512(NULL);
        double t1 = bench_now();
        bench_fma_avx2(NULL);
        double t2 = bench_now();
        t512 = fmin(t512, t1 - t0), t256 = fmin(t256, t2 - t1);
    }
    const double fma = 1.024e9; /* multiply-adds of one call */
    printf("vector width: float multiply-adds in L1, 512-bit %.1f G/s, 256-bit %.1f G/s (%.2fx: %s)\n",
           fma / t512 / 1e9, fma / t256 / 1e9, t256 / t512,
           t256 / t512 > 1.5 ? "a full 512-bit datapath" : "512-bit operations at about the 256-bit rate");
#endif
}

int bench_isa(void)
{
    printf("fp8prof bench: the vector loops of each instruction set this CPU runs (FP8PROF_ISA, a process each; "
           "single thread, no targets)\n");
    vector_width();
    static const char *const isas[] = {"avx512", "avx2", "base"};
    int rc = 0;
    for (int k = 0; k < 3; k++) {
        if (fp8__isa_cpu() < FP8_ISA_AVX512 - k) /* (k: 0 avx512, 1 avx2, 2 base) */
            continue;
        fflush(stdout);
        pid_t pid = fork();
        if (pid == 0) {
            setenv("FP8PROF_ISA", isas[k], 1);
            execl("/proc/self/exe", "bench_fp8prof", "isa-one", (char *)NULL);
            _exit(127);
        }
        int status = 0;
        if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
            fprintf(stderr, "bench: the %s run failed\n", isas[k]);
            rc = 1;
        }
    }
    return rc;
}
