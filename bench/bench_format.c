/*
 * bench_format.c — `make bench`: speed of the format kernels, each printed
 * next to a reference measured in the same run.
 *
 * Single thread, 2^26 float32 elements, per-tensor scale, nearest-even,
 * saturating.  Reference: memcpy of the same 2^26 float32
 * (bench_memcpy_once), timed between the kernel's own repetitions: each
 * kernel's rate and its reference are the best of 5, paired in time (the
 * machine's speed drifts within a run).
 * Targets, shares of the memcpy element rate: encode and
 * quantize-dequantize >= 95%, stochastic rounding and e8m0 >= 25%.  Without
 * a target: a quantize-dequantize of data wider than the format.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fp8.h"
#include "bench.h"

#define N ((size_t)1 << 26)
#define REPS 5

typedef void (*bench_fn)(void *ctx);

typedef struct {
    double rate, ref; /* the kernel's best, memcpy's best between its repetitions */
} paired;

static paired best_rate(bench_fn fn, void *ctx, float *dst, const float *src)
{
    double best = 0, ref = 0;
    for (int r = 0; r < REPS; r++) {
        double m = bench_memcpy_once(dst, src, N);
        ref = m > ref ? m : ref;
        double t0 = bench_now();
        fn(ctx);
        double dt = bench_now() - t0;
        double rate = (double)N / dt / 1e9;
        if (rate > best)
            best = rate;
    }
    return (paired){best, ref};
}

typedef struct {
    const fp8_format *f;
    fp8_cast_mode mode;
    float scale;
    float *x, *y;
    uint8_t *codes;
} ctx_t;

static void do_encode(void *c)
{
    ctx_t *k = c;
    fp8_format_encode_array(k->f, &k->mode, k->scale, k->x, N, k->codes, NULL);
}
static void do_qdq(void *c)
{
    ctx_t *k = c;
    fp8_format_qdq_array(k->f, &k->mode, k->scale, k->x, N, k->y, NULL);
}

int bench_formats(void)
{
    ctx_t k;
    memset(&k, 0, sizeof k);
    k.scale = 2.385f;
    k.x = malloc(N * 4);
    k.y = malloc(N * 4);
    k.codes = malloc(N);
    if (!k.x || !k.y || !k.codes) {
        fprintf(stderr, "bench: out of memory\n");
        return 1;
    }
    /* activations-like data: Gaussian-ish with a few outliers */
    uint64_t s = 88172645463325252ull;
    for (size_t i = 0; i < N; i++) {
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        double u = (double)(s >> 11) * 0x1p-53, v = (double)((s >> 3) & 0xFF) / 256.0;
        k.x[i] = (float)((u - 0.5) * 8.0 * (v > 0.999 ? 100.0 : 1.0));
        k.y[i] = 0;
        k.codes[i] = 0;
    }
    printf("fp8prof bench: formats (single thread, %zu elements, nearest-even, saturating, scale 2.385)\n", N);
    printf("kernel: %s\n\n", fp8_format_kernel_name());
    printf("%-34s %8.3f Gelem/s  (memcpy float32 at the start; each kernel's reference: memcpy timed between its "
           "repetitions)\n",
           "memcpy float32", bench_memcpy_rate());
    const char *fmts[] = {"e4m3", "e5m2"};
    paired rate[2][2][2]; /* [portable][format][encode, qdq] */
    for (int portable = 0; portable < 2; portable++) {
        fp8_format_force_portable(portable);
        for (int i = 0; i < 2; i++) {
            k.f = fp8_format_find(fmts[i], NULL);
            paired e = rate[portable][i][0] = best_rate(do_encode, &k, k.y, k.x);
            paired q = rate[portable][i][1] = best_rate(do_qdq, &k, k.y, k.x);
            char label[64];
            snprintf(label, sizeof label, "%s encode%s", fmts[i], portable ? " (portable)" : "");
            printf("%-34s %8.3f Gelem/s  %5.1f%% of memcpy (%.3f)\n", label, e.rate, 100 * e.rate / e.ref, e.ref);
            snprintf(label, sizeof label, "%s quantize-dequantize%s", fmts[i], portable ? " (portable)" : "");
            printf("%-34s %8.3f Gelem/s  %5.1f%% of memcpy (%.3f)\n", label, q.rate, 100 * q.rate / q.ref, q.ref);
        }
    }
    fp8_format_force_portable(0);
    /* issue 15: stochastic rounding and e8m0 in the bulk kernel */
    k.f = fp8_format_find("e4m3", NULL);
    k.mode.round = FP8_ROUND_STOCHASTIC;
    k.mode.seed = 7;
    paired sr = best_rate(do_qdq, &k, k.y, k.x);
    k.mode.round = FP8_ROUND_NEAREST;
    k.f = fp8_format_find("e8m0", NULL);
    paired e8 = best_rate(do_encode, &k, k.y, k.x);
    printf("%-34s %8.3f Gelem/s  %5.1f%% of memcpy (%.3f)\n", "e4m3 qdq, stochastic rounding", sr.rate,
           100 * sr.rate / sr.ref, sr.ref);
    printf("%-34s %8.3f Gelem/s  %5.1f%% of memcpy (%.3f)\n", "e8m0 encode", e8.rate, 100 * e8.rate / e8.ref,
           e8.ref);
    /* data wider than the format (no target): a Gaussian beside 1 in 4096
     * at 1000, scaled as current scaling would (max / 1000), a third of
     * whose vectors hold a lane below e4m3's min normal: the kernel's wide
     * path (the AVX2 build's where x's first blocks look so).  Last: x is
     * written over */
    k.f = fp8_format_find("e4m3", NULL);
    k.scale = (float)(k.f->max / 1000.0); /* (the outliers' 1000 to the format's max) */
    bench_fill_spiky(k.x, N, 88172645463325252ull);
    paired wq = best_rate(do_qdq, &k, k.y, k.x);
    printf("%-34s %8.3f Gelem/s  %5.1f%% of memcpy (%.3f); 1 in 4096 at 1000, scale %.3f: %.2fx the time of "
           "e4m3 qdq above (no target)\n\n",
           "e4m3 qdq, Gaussian beside outliers", wq.rate, 100 * wq.rate / wq.ref, wq.ref, k.scale,
           rate[0][0][1].rate / wq.rate);
    /* the vector kernels at (nearly) memory speed: a cast reads 4 bytes and
     * writes 1 (encode) or 4 (qdq) per element, memcpy 4 and 4 */
    int ok = 1;
    for (int i = 0; i < 2; i++) {
        char name[64];
        snprintf(name, sizeof name, "%s_encode", fmts[i]);
        ok &= bench_target(name, rate[0][i][0].rate, "Gelem/s", rate[0][i][0].ref, "memcpy beside it", 0.95, 0);
        snprintf(name, sizeof name, "%s_quantize_dequantize", fmts[i]);
        ok &= bench_target(name, rate[0][i][1].rate, "Gelem/s", rate[0][i][1].ref, "memcpy beside it", 0.95, 0);
    }
    /* stochastic rounding draws a random number per element, e8m0 takes a
     * log2 per element: 25% of memcpy (they were first set at 1 Gelem/s, on
     * a machine whose memcpy moved 4.0 Gelem/s) */
    ok &= bench_target("stochastic_rounding_e4m3", sr.rate, "Gelem/s", sr.ref, "memcpy beside it", 0.25, 0);
    ok &= bench_target("e8m0_encode", e8.rate, "Gelem/s", e8.ref, "memcpy beside it", 0.25, 0);
    printf("\n%s\n", ok ? "all format targets met" : "some format targets missed");
    free(k.x);
    free(k.y);
    free(k.codes);
    return 0;
}
