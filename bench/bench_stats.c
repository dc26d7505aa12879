/*
 * bench_stats.c — the quantization engine (issue 3): Gelem/s for one
 * 4096 x 4096 (2^24) tensor with every statistic, single thread, next to the
 * scalar two-pass oracle (tests/ref/ref_stats.c) on the same data in the same
 * run; also checks the two agree.  Also shown: without the exponent
 * histogram, and the cast alone (no statistics: what a training loop's
 * fake-quant costs).  Targets (all statistics), shares of the memcpy
 * element rate of the same 2^24 floats, timed between the recipe's own
 * repetitions (bench_memcpy_once; best of 5 each: the machine's speed
 * drifts within a run, and a reference measured once before all rows
 * flipped targets by itself): >= 50% for per-tensor recipes, >= 35% 1x128
 * blocks, >= 30% MXFP8, >= 25% NVFP4.  The run's memcpy of 2^26
 * (bench_memcpy_rate) is printed for comparison with other sections.
 * Each recipe state takes one step before it is timed: a delayed recipe
 * casts with its history's scale, as in training after the first step.
 * Then, without targets, data wider than the format (bench_stats_wide).
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "fp8.h"
#include "ref_stats.h"

#define ROWS 4096
#define COLS 4096

/* the rate in Gelem/s of one fp8_quantize_ex of a ROWS x COLS tensor */
static double cast_rate(fp8_recipe_state *st, const float *x, float *out, fp8_stats *stats, unsigned flags)
{
    double t0 = bench_now();
    fp8_quantize_ex(st, x, ROWS, COLS, out, stats, flags);
    return (double)ROWS * COLS / (bench_now() - t0) / 1e9;
}

/* All statistics of x with x_hat into out at three places (no target): q
 * (malloc'd, as the table above), a line-aligned buffer, and one whose
 * address lies 64 bytes past x's within a 4 KiB page, where a store to out
 * and the next load of x look alike to the core's first address check
 * (4K aliasing: before the cast kernel began loading x a vector ahead on
 * such casts, 0.72-0.87 Gelem/s there against 1.35-1.43 on C).  Best of 3,
 * interleaved. */
static void out_rows(const float *x, float *q, size_t n)
{
    char *raw = malloc(n * sizeof(float) + 8192);
    if (!raw)
        return;
    uintptr_t base = ((uintptr_t)raw + 4095) & ~(uintptr_t)4095;
    float *line = (float *)base, *alias = (float *)(base + (((uintptr_t)x + 64) & 4095));
    static const char *specs[] = {"e4m3:delayed", "mxfp8"};
    printf("\nx_hat into out (all statistics, best of 3; no target):\n");
    for (int k = 0; k < 2; k++) {
        fp8_recipe_state *a = fp8_recipe_state_new(specs[k], "activation");
        fp8_quantize(a, x, ROWS, COLS, NULL, NULL);
        fp8_recipe_state_step(a);
        double r[3] = {0, 0, 0};
        float *outs[3] = {q, line, alias};
        for (int rep = 0; rep < 3; rep++)
            for (int j = 0; j < 3; j++) {
                fp8_stats st;
                r[j] = fmax(r[j], cast_rate(a, x, outs[j], &st, 0));
            }
        printf("%-18s malloc'd out %7.3f G/s; line-aligned %7.3f G/s; 64 bytes past x's page offset %7.3f G/s\n",
               specs[k], r[0], r[1], r[2]);
        fp8_recipe_state_free(a);
    }
    free(raw);
}

/* all statistics of w (ROWS x COLS) under spec for a tensor of role, best
 * of 3, next to the same recipe on x, interleaved */
static void role_row(const char *spec, const char *role, const char *what, const float *x, const float *w)
{
    fp8_recipe_state *a = fp8_recipe_state_new(spec, role), *b = fp8_recipe_state_new(spec, role);
    fp8_quantize(a, w, ROWS, COLS, NULL, NULL);
    fp8_recipe_state_step(a);
    fp8_quantize(b, x, ROWS, COLS, NULL, NULL);
    fp8_recipe_state_step(b);
    double rw = 0, rx = 0;
    for (int rep = 0; rep < 3; rep++) {
        fp8_stats sw;
        rw = fmax(rw, cast_rate(a, w, NULL, &sw, 0));
        rx = fmax(rx, cast_rate(b, x, NULL, &sw, 0));
    }
    printf("%-18s %-30s %7.3f G/s; on x %7.3f G/s (%.2fx its time)\n", spec, what, rw, rx, rx / rw);
    fp8_recipe_state_free(a);
    fp8_recipe_state_free(b);
}

static void wide_row(const char *spec, const char *what, const float *x, const float *w)
{
    role_row(spec, "activation", what, x, w);
}

/* Data wider than the format's range, where many vectors hold lanes below
 * min_normal once scaled (the cast kernel's wide path) or outside the
 * exponent histogram's register window: a Gaussian beside rare outliers
 * 1000x its sigma (the spikes that break recipes late in long runs), and
 * magnitudes log-uniform over 35 binades (as gradients spread).  And
 * uniform x in [-4, 4), whose MX blocks' amaxes lie near the top of their
 * binade, past E4M3's 1.75 x 2^8 once scaled by the block's power of two:
 * most vectors hold a lane that saturates; and the same with one NVFP4
 * block of 16 in 1024 all zero, whose scale is 0 (such a block's unit
 * goes by segments).  No targets: the rows show what such data cost next
 * to the section's own x. */
static void bench_stats_wide(const float *x, float *w, size_t n)
{
    printf("\ndata wider than the format (all statistics, best of 3, interleaved with the section's x):\n");
    uint64_t s = bench_fill_spiky(w, n, 0x9E3779B97F4A7C15ull);
    wide_row("e4m3:current", "Gaussian, 1 in 4096 at 1000", x, w);
    wide_row("e4m3:block=1x128", "Gaussian, 1 in 4096 at 1000", x, w);
    wide_row("mxfp8", "Gaussian, 1 in 4096 at 1000", x, w);
    bench_fill_logu(w, n, s);
    wide_row("e4m3:current", "log-uniform |x|, 2^-30 .. 2^5", x, w);
    wide_row("e4m3:block=1x128", "log-uniform |x|, 2^-30 .. 2^5", x, w);
    wide_row("mxfp8", "log-uniform |x|, 2^-30 .. 2^5", x, w);
    wide_row("nvfp4", "log-uniform |x|, 2^-30 .. 2^5", x, w);
    bench_fill_uniform(w, n, 4.0, s);
    wide_row("mxfp8", "uniform -4 .. 4 (saturating)", x, w);
    for (size_t i = 0; i < n; i += 16 * 1024) /* one block of 16 in 1024 all zero (padding, a dead row) */
        memset(w + i, 0, 16 * sizeof *w);
    wide_row("nvfp4", "uniform, 1 block in 1024 zero", x, w);
}

/* Zeros in blocks: x with its last 128 rows zero (padding at the end of a
 * batch's sequences), and a tensor all zero (a bias at its start, a
 * gradient that did not reach); and x times 1e-9, whose largest magnitude
 * lies below 2^-24 (a small gradient).  An all-zero piece once summed its
 * statistics in double, an all-zero MX block cast with a subnormal scale
 * and an NVFP4 one group by group (with 2D tiles, the whole tensor): 1.2x
 * to 20x the time of x; a tiny piece summed in double took 8x. */
static void bench_stats_zeros(const float *x, float *w, size_t n)
{
    printf("\nzeros and tiny magnitudes (all statistics, best of 3, interleaved with the section's x):\n");
    memcpy(w, x, n * sizeof *w);
    memset(w + n - 128 * (size_t)COLS, 0, 128 * (size_t)COLS * sizeof *w);
    static const char *specs[] = {"e4m3:current", "e4m3:block=1x128", "mxfp8", "nvfp4"};
    for (int k = 0; k < 4; k++)
        wide_row(specs[k], "last 128 of 4096 rows zero", x, w);
    /* (a weight's 16x16 tiles: one row of zero tiles went group by group, on one thread) */
    role_row("nvfp4:weights=16x16", "weight", "weight, last 128 rows zero", x, w);
    memset(w, 0, n * sizeof *w);
    for (int k = 0; k < 4; k++)
        wide_row(specs[k], "all zero", x, w);
    for (size_t i = 0; i < n; i++)
        w[i] = x[i] * 1e-9f;
    for (int k = 0; k < 4; k++)
        wide_row(specs[k], "x times 1e-9", x, w);
}

int bench_stats(void)
{
    const size_t n = (size_t)ROWS * COLS;
    float *x = malloc(n * 4), *q = malloc(n * 4);
    if (!x || !q)
        return 1;
    uint64_t s = 0x2545F4914F6CDD1Dull;
    for (size_t i = 0; i < n; i++) { /* Gaussian-ish activations, rare outliers */
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        double u = (double)(s >> 11) * 0x1p-53;
        double g = (u - 0.5) * 3.4 + ((s & 0xFF) == 0 ? 40.0 : 0.0);
        x[i] = (float)g;
    }
    struct { const char *spec; double target; } rows[] = {
        {"e4m3:delayed", 0.50}, {"e4m3:current", 0.50}, {"e4m3:block=1x128", 0.35}, {"mxfp8", 0.30}, {"nvfp4", 0.25},
    };
    printf("fp8prof bench: statistics engine (single thread, %dx%d tensor, all statistics, x_hat written)\n",
           ROWS, COLS);
    double mc = bench_memcpy_rate();
    printf("memcpy of 2^26 float32 at the start: %.3f Gelem/s; each recipe's reference: memcpy of its 2^24 floats "
           "between its repetitions\n",
           mc);
    printf("%-18s %11s %11s %11s %9s %11s %7s  %s\n", "recipe", "all stats", "no exp_hist", "apply only", "oracle",
           "memcpy", "share", "agree");
    int ok = 1;
    for (size_t k = 0; k < sizeof rows / sizeof rows[0]; k++) {
        fp8_recipe r;
        fp8_recipe_parse(rows[k].spec, &r);
        fp8_recipe_state *a = fp8_recipe_state_alloc(&r, FP8_ROLE_ACTIVATION);
        fp8_recipe_state *b = fp8_recipe_state_alloc(&r, FP8_ROLE_ACTIVATION);
        /* one step first, as in training: a delayed recipe then casts with
         * its history's scale (448 / amax) instead of the empty history's 1 */
        for (fp8_recipe_state **p = (fp8_recipe_state *[]){a, b, NULL}; *p; p++) {
            fp8_quantize(*p, x, ROWS, COLS, NULL, NULL);
            fp8_recipe_state_step(*p);
        }
        fp8_stats sa, sb;
        double best = 0, nohist = 0, apply = 0, ref = 0;
        fp8_stats tmp;
        for (int rep = 0; rep < 5; rep++) {
            ref = fmax(ref, bench_memcpy_once(q, x, n));
            best = fmax(best, cast_rate(a, x, q, &sa, 0));
            nohist = fmax(nohist, cast_rate(a, x, q, &tmp, FP8_STATS_NO_EXP_HIST));
            apply = fmax(apply, cast_rate(a, x, q, NULL, 0));
        }
        double t0 = bench_now();
        ref_quantize(b, x, ROWS, COLS, NULL, &sb);
        double oracle = (double)n / (bench_now() - t0) / 1e9;
        /* counts and extremes exactly, sums within docs/statistics.md's 1e-6 */
        int agree = memcmp(&sa.classes, &sb.classes, sizeof sa.classes) == 0 && sa.amax == sb.amax &&
                    memcmp(sa.exp_hist, sb.exp_hist, sizeof sa.exp_hist) == 0 && sa.nscales == sb.nscales &&
                    fabs(sa.sq_err - sb.sq_err) <= 1e-6 * sb.sq_err && fabs(sa.std - sb.std) <= 1e-6 * sb.std &&
                    sa.scale_inv_max == sb.scale_inv_max && sa.max_abs_err == sb.max_abs_err;
        char tname[64];
        snprintf(tname, sizeof tname, "stats_all_%s", rows[k].spec);
        printf("%-18s %7.3f G/s %7.3f G/s %7.3f G/s %5.3f G/s %7.3f G/s %6.1f%%  %s\n", rows[k].spec, best, nohist,
               apply, oracle, ref, 100 * best / ref, agree ? "yes" : "NO");
        int met = bench_target(tname, best, "Gelem/s", ref, "memcpy beside it", rows[k].target, 0);
        ok &= met && agree;
        if (!agree) { /* (a check, in the summary only when it fails) */
            snprintf(tname, sizeof tname, "stats_oracle_%s", rows[k].spec);
            bench_tally(tname, "disagrees", "agrees", 0);
        }
        fp8_recipe_state_free(a);
        fp8_recipe_state_free(b);
    }
    /* the same casts with the recipe state's threads = 2 (the tensor's parts
     * side by side; the same bits, checked) */
    printf("\nwith threads = 2 (all statistics; best of 3):\n");
    for (size_t k = 0; k < sizeof rows / sizeof rows[0]; k++) {
        fp8_recipe r;
        fp8_recipe_parse(rows[k].spec, &r);
        fp8_recipe_state *a = fp8_recipe_state_alloc(&r, FP8_ROLE_ACTIVATION);
        fp8_recipe_state *b = fp8_recipe_state_alloc(&r, FP8_ROLE_ACTIVATION);
        fp8_recipe_state_set_threads(b, 2);
        fp8_stats sa, sb;
        double one = 0, two = 0;
        for (int rep = 0; rep < 3; rep++) {
            one = fmax(one, cast_rate(a, x, q, &sa, 0));
            two = fmax(two, cast_rate(b, x, q, &sb, 0));
        }
        sb.format = sa.format;
        int same = memcmp(&sa, &sb, sizeof sa) == 0;
        printf("%-18s %7.3f G/s on 1 thread, %7.3f G/s on 2 (%.2fx)  same bits: %s\n", rows[k].spec, one, two,
               two / one, same ? "yes" : "NO");
        if (!same) {
            char tname[64];
            snprintf(tname, sizeof tname, "stats_threads2_%s", rows[k].spec);
            bench_tally(tname, "other bits", "the same bits", 0);
            ok = 0;
        }
        fp8_recipe_state_free(a);
        fp8_recipe_state_free(b);
    }
    /* the recipes that cast another tensor than x (Smooth SwiGLU's y = x s,
     * x's transpose, NVFP4's Hadamard transform of a gradient) or round it
     * stochastically, as a probe runs them: x's statistics given; each
     * beside the plain recipe's cast of x */
    printf("\nrecipes that cast another tensor than x or round stochastically, beside the plain recipe, x's statistics "
           "given (as a probe casts them; best of 3):\n");
    static const char *pairs[][4] = {
        {"e4m3:current:smooth", "e4m3:current", "column maxima, y = x s, its cast, x_hat = Q(y) / s, x's error sums",
         "activation"},
        {"e4m3:colwise", "e4m3:rowwise", "the transpose, its cast", "activation"},
        {"e4m3:block=1x128:transposed", "e4m3:block=1x128", "the transpose, its cast", "activation"},
        {"nvfp4:rht", "nvfp4", "a gradient: its Hadamard transform, its cast", "gradient"},
        {"nvfp4:sr_grad", "nvfp4", "a gradient: stochastic rounding", "gradient"},
        {"nvfp4:weights=16x16,sr_grad,rht", "nvfp4", "a gradient, the 2025 recipe: the transform, stochastic rounding",
         "gradient"},
    };
    fp8_stats xs;
    fp8_tensor_stats(x, n, &xs, 0);
    for (size_t k = 0; k < sizeof pairs / sizeof pairs[0]; k++) {
        fp8_recipe_state *a = fp8_recipe_state_new(pairs[k][1], pairs[k][3]);
        fp8_recipe_state *b = fp8_recipe_state_new(pairs[k][0], pairs[k][3]);
        double plain = 0, other = 0;
        for (int rep = 0; rep < 3; rep++) {
            fp8_stats sa = xs, sb = xs;
            plain = fmax(plain, cast_rate(a, x, NULL, &sa, FP8_STATS_X_GIVEN));
            other = fmax(other, cast_rate(b, x, NULL, &sb, FP8_STATS_X_GIVEN));
        }
        printf("%-32s %7.3f G/s; %s %7.3f G/s (%.2fx its time): %s\n", pairs[k][0], other, pairs[k][1], plain,
               plain / other, pairs[k][2]);
        fp8_recipe_state_free(a);
        fp8_recipe_state_free(b);
    }
    out_rows(x, q, n);
    /* the same tensor with its negative half set to zero, as after a ReLU:
     * zeros are common in activations and gradients, and the exponent
     * histogram must not treat them as the exception (half the elements) */
    printf("\nx with its negatives set to 0 (half zeros, as after a ReLU; all statistics, best of 3):\n");
    for (size_t i = 0; i < n; i++)
        q[i] = x[i] < 0 ? 0.0f : x[i];
    wide_row("e4m3:delayed", "x after a ReLU", x, q);
    bench_stats_wide(x, q, n);
    bench_stats_zeros(x, q, n);
    printf("\n%s\n", ok ? "all statistics targets met, engine agrees with the oracle"
                         : "some statistics targets missed or disagreed");
    free(x);
    free(q);
    return 0;
}
