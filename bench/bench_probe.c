/*
 * bench_probe.c — the whole record path (statistics + HDF5 append), issue 4.
 * Tiny tensors (16 elements, one recipe): records/s and microseconds per
 * record, next to the engine alone on the same tensors (the difference is
 * the storage overhead).  Larger tensors (2^16 .. 2^22 elements, 1 active + 3
 * shadow recipes): Gelem/s end to end next to the engine alone (x's
 * statistics once, each recipe's own: the probe's work without storage; a
 * run of 2^20 with threads=2 next to two threads of plain vector work).  And bytes
 * of file per record.  The records are those of a running file (its
 * periodic flushes included); opening and closing it, once per run, are
 * printed on their own.  Targets: storage overhead <= 20 us per record;
 * >= 0.3 Gelem/s end to end with 1 + 3 recipes, one thread.
 */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "bench.h"
#include "fp8_probe.h"

static const char *shadows[] = {"e4m3:current", "e4m3:block=1x128", "mxfp8"};

static void *spin(void *arg)
{
    volatile unsigned long z = 1;
    for (long i = 0; i < 100000000; i++)
        z = z * 3 + 1;
    return arg;
}

/* Vector work like the engine's: independent 16-lane float FMA chains on
 * data in L1, in the widest instruction set the machine has.  Two threads
 * of it show what the second CPU adds to vector code (two hardware threads
 * of one core share its vector units; an integer chain barely uses them). */
typedef float vf16b __attribute__((vector_size(64)));
#define SPIN_VEC_BODY                                                                                      \
    static vf16b buf[2][64];                                                                               \
    vf16b *b = buf[arg != NULL];                                                                           \
    vf16b s0 = {0}, s1 = {0}, s2 = {0}, s3 = {0}, s4 = {0}, s5 = {0}, s6 = {0}, s7 = {0};                  \
    for (long r = 0; r < 1000000; r++)                                                                     \
        for (int i = 0; i < 64; i += 8) { /* eight independent chains: throughput, not latency */         \
            s0 += b[i] * b[i], s1 += b[i + 1] * b[i + 1], s2 += b[i + 2] * b[i + 2];                       \
            s3 += b[i + 3] * b[i + 3], s4 += b[i + 4] * b[i + 4], s5 += b[i + 5] * b[i + 5];               \
            s6 += b[i + 6] * b[i + 6], s7 += b[i + 7] * b[i + 7];                                          \
        }                                                                                                  \
    b[0] = s0 + s1 + s2 + s3 + s4 + s5 + s6 + s7;                                                          \
    return arg;
#if defined(__x86_64__)
__attribute__((target("avx512f"))) static void *spin_vec512(void *arg) { SPIN_VEC_BODY }
__attribute__((target("avx2,fma"))) static void *spin_vec256(void *arg) { SPIN_VEC_BODY }
#endif
static void *spin_vec_plain(void *arg) { SPIN_VEC_BODY }

/* what two threads give on this machine for perfectly parallel work, of
 * the integer kind (vec = 0) or the vector kind (vec = 1) */
static double ref_speedup(int vec)
{
    void *(*fn)(void *) = spin;
    if (vec) {
        fn = spin_vec_plain;
#if defined(__x86_64__)
        __builtin_cpu_init();
        if (__builtin_cpu_supports("avx512f"))
            fn = spin_vec512;
        else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
            fn = spin_vec256;
#endif
    }
    double one = 1e30, two = 1e30;
    for (int rep = 0; rep < 3; rep++) { /* best of three each */
        double t0 = bench_now();
        fn(NULL);
        double t = bench_now() - t0;
        one = t < one ? t : one;
        pthread_t th;
        t0 = bench_now();
        static int second; /* a non-NULL argument: the other buffer */
        if (pthread_create(&th, NULL, fn, &second) != 0)
            return 1.0;
        fn(NULL);
        pthread_join(th, NULL);
        t = bench_now() - t0;
        two = t < two ? t : two;
    }
    return 2 * one / two;
}

int bench_probe(void)
{
    printf("fp8prof bench: probe record path (statistics + HDF5 append, flush every 10 steps)\n");
    /* tiny tensors */
    const int N = 20000;
    float x[16];
    for (int i = 0; i < 16; i++)
        x[i] = (float)(i - 7) * 0.37f;
    fp8_probe_run *run = fp8_probe_open("build/bench_tiny.h5", NULL, NULL, 0);
    if (!run) {
        fprintf(stderr, "bench: %s\n", fp8_error_message());
        return 1;
    }
    fp8_probe *p[10];
    for (int t = 0; t < 10; t++) {
        char name[32];
        snprintf(name, sizeof name, "t%d", t);
        p[t] = fp8_probe_declare(run, name, FP8_ROLE_ACTIVATION, t, "e4m3:current", NULL, 0);
    }
    double t0 = bench_now();
    for (int k = 0; k < N; k++) {
        fp8_probe_record(p[k % 10], k / 10, x, 1, 16);
        if (k % 10 == 9)
            fp8_probe_step_end(run, k / 10);
    }
    fp8_probe_close(run);
    double probe_s = bench_now() - t0;
    fp8_recipe r;
    fp8_recipe_parse("e4m3:current", &r);
    fp8_recipe_state *st = fp8_recipe_state_alloc(&r, FP8_ROLE_ACTIVATION);
    fp8_stats s;
    t0 = bench_now();
    for (int k = 0; k < N; k++)
        fp8_quantize(st, x, 1, 16, NULL, &s);
    double engine_s = bench_now() - t0;
    fp8_recipe_state_free(st);
    struct stat sb;
    stat("build/bench_tiny.h5", &sb);
    double over_us = (probe_s - engine_s) / N * 1e6;
    printf("tiny (1x16, 1 recipe):   %9.0f records/s  %6.2f us/record  (engine alone %5.2f us; storage %5.2f us, "
           "target <= 20: %s)  %6.0f bytes/record\n",
           N / probe_s, probe_s / N * 1e6, engine_s / N * 1e6, over_us, over_us <= 20 ? "met" : "MISSED",
           (double)sb.st_size / N);
    /* large tensors, 1 + 3 recipes */
    int ok = over_us <= 20;
    for (int lg = 16; lg <= 22; lg += 2) {
        size_t n = (size_t)1 << lg, cols = 1024, rows = n / cols;
        float *big = malloc(n * sizeof *big);
        uint64_t z = 12345;
        for (size_t i = 0; i < n; i++) {
            z ^= z << 13, z ^= z >> 7, z ^= z << 17;
            big[i] = (float)(((double)(z >> 11) * 0x1p-53 - 0.5) * 3.0);
        }
        /* records in a running file: one untimed step first (the file's and
         * the threads' first touches), then whole flush periods (the
         * default flushes every 10 steps); opening and closing the file are
         * once per run, timed on their own */
        int steps = lg == 16 ? 200 : lg == 18 ? 50 : lg == 20 ? 30 : 10;
        double e2e = 0, e2e2 = 0, open_ms = 1e30, close_ms = 1e30;
        /* at 2^20, one and two threads, best of three each (this machine's
         * second core is shared: single runs scatter) */
        for (int rep = 0; rep < (lg == 20 ? 6 : 1); rep++) {
            int th = 1 + rep % 2;
            fp8_probe_options po = fp8_probe_defaults();
            po.threads = th;
            t0 = bench_now();
            run = fp8_probe_open("build/bench_big.h5", &po, NULL, 0);
            fp8_probe *q =
                fp8_probe_declare(run, "layers.0.mlp.w1.input", FP8_ROLE_ACTIVATION, 0, "e4m3:delayed", shadows, 3);
            double t_open = bench_now() - t0;
            fp8_probe_apply(q, 0, big, rows, cols, big);
            fp8_probe_step_end(run, 0);
            t0 = bench_now();
            for (int k = 1; k <= steps; k++) {
                fp8_probe_apply(q, k, big, rows, cols, big);
                fp8_probe_step_end(run, k);
            }
            double rate = (double)n * steps / (bench_now() - t0) / 1e9, *best = th == 1 ? &e2e : &e2e2;
            t0 = bench_now();
            fp8_probe_close(run);
            double t_close = bench_now() - t0;
            *best = rate > *best ? rate : *best;
            open_ms = t_open * 1e3 < open_ms ? t_open * 1e3 : open_ms;
            close_ms = t_close * 1e3 < close_ms ? t_close * 1e3 : close_ms;
        }
        stat("build/bench_big.h5", &sb);
        /* the engine alone: the same four recipes, no storage */
        const char *specs[4] = {"e4m3:delayed", shadows[0], shadows[1], shadows[2]};
        fp8_recipe_state *sts[4];
        for (int i = 0; i < 4; i++) {
            fp8_recipe_parse(specs[i], &r);
            sts[i] = fp8_recipe_state_alloc(&r, FP8_ROLE_ACTIVATION);
        }
        /* as the probe does it: x's own statistics once, given to each recipe */
        fp8_stats xs;
        t0 = bench_now();
        for (int k = 0; k < steps; k++) {
            fp8_tensor_stats(big, n, &xs, 0);
            for (int i = 3; i >= 0; i--) {
                s = xs;
                fp8_quantize_ex(sts[i], big, rows, cols, i == 0 ? big : NULL, &s, FP8_STATS_X_GIVEN);
            }
        }
        double eng = (double)n * steps / (bench_now() - t0) / 1e9;
        for (int i = 0; i < 4; i++)
            fp8_recipe_state_free(sts[i]);
        int met = e2e >= 0.3;
        if (lg == 20) {
            met = bench_target("record_1plus3_2^20", e2e, "Gelem/s", 0.3, 0, NULL);
            printf("2^20 elements, 1+3 recipes, threads=2: %6.3f Gelem/s end to end\n", e2e2);
            ok &= bench_target("record_threads2_speedup", e2e2 / e2e, "x", 1.7, 0, NULL);
            double ri = ref_speedup(0), rv = ref_speedup(1);
            printf("  (reference, 2 threads vs 1, best of 3, on this machine: two independent integer loops %.2fx; "
                   "two independent vector multiply-add loops %.2fx — the ceiling for the engine's vector code; the "
                   "record's speedup is %.0f%% of it%s)\n",
                   ri, rv, 100 * (e2e2 / e2e) / rv,
                   rv < 1.6 && ri > 1.8 ? "; integer code scales and vector code does not: the two virtual CPUs "
                                          "share one core's vector units (hyper-threads) in this run"
                                        : "");
        }
        ok &= met;
        printf("2^%d elements, 1+3 recipes: %6.3f Gelem/s end to end (engine alone %6.3f; target >= 0.3: %s)  %6.0f "
               "bytes/record; once per run: open+declare %.1f ms, close %.1f ms\n",
               lg, e2e, eng, met ? "met" : "MISSED", (double)sb.st_size / ((steps + 1) * 4), open_ms, close_ms);
        free(big);
    }
    printf("\n%s\n", ok ? "all probe targets met" : "some probe targets missed");
    return 0;
}
