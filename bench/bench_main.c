/*
 * bench_main.c — `make bench`: every section prints its numbers next to a
 * reference measured in the same run.  Optional argument: a section name
 * (formats, stats, probe, loop, train, report, import, readers, gemm, ranks, isa).
 * Every target is a ratio to a reference measured in the same run (this
 * machine's speed moves 30-60% between hours): bench_target.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench.h"

double bench_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

uint64_t bench_fill_spiky(float *x, size_t n, uint64_t s)
{
    for (size_t i = 0; i < n; i++) {
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        double u1 = ((double)(s >> 11) + 0.5) * 0x1p-53;
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        double u2 = (double)(s >> 11) * 0x1p-53;
        x[i] = i % 4096 == 7 ? 1000.0f : (float)(sqrt(-2 * log(u1)) * cos(6.283185307179586 * u2));
    }
    return s;
}

uint64_t bench_fill_logu(float *x, size_t n, uint64_t s)
{
    for (size_t i = 0; i < n; i++) {
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        double u = (double)(s >> 11) * 0x1p-53;
        x[i] = (float)((s & 1 ? -1 : 1) * exp2(-30 + 35 * u));
    }
    return s;
}

uint64_t bench_fill_uniform(float *x, size_t n, double h, uint64_t s)
{
    for (size_t i = 0; i < n; i++) {
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        x[i] = (float)(((double)(s >> 11) * 0x1p-53 - 0.5) * 2.0 * h);
    }
    return s;
}

double bench_memcpy_rate(void)
{
    double rate = 0;
    const size_t n = (size_t)1 << 26;
    float *x = malloc(n * sizeof *x), *y = malloc(n * sizeof *y);
    if (!x || !y) {
        free(x), free(y);
        return NAN;
    }
    memset(x, 1, n * sizeof *x); /* first touches, outside the timing */
    memset(y, 0, n * sizeof *y);
    for (int r = 0; r < 5; r++) {
        double t0 = bench_now();
        memcpy(y, x, n * sizeof *x);
        double g = (double)n / (bench_now() - t0) / 1e9;
        rate = g > rate ? g : rate;
    }
    free(x), free(y);
    return rate;
}

double bench_memcpy_once(float *dst, const float *src, size_t n)
{
    double t0 = bench_now();
    memcpy(dst, src, n * sizeof *src);
    return (double)n / (bench_now() - t0) / 1e9;
}

/* the run's targets, in the order they were measured */
#define TALLY_MAX 96
static struct {
    char name[48], got[16], goal[16];
    int met;
} tally[TALLY_MAX];
static int ntally, tally_lost;

void bench_tally(const char *name, const char *got, const char *goal, int met)
{
    if (ntally == TALLY_MAX) {
        tally_lost++;
        return;
    }
    snprintf(tally[ntally].name, sizeof tally[ntally].name, "%s", name);
    snprintf(tally[ntally].got, sizeof tally[ntally].got, "%s", got);
    snprintf(tally[ntally].goal, sizeof tally[ntally].goal, "%s", goal);
    tally[ntally++].met = met;
}

/* The end of the run: how many targets were met, and each one missed with
 * what it measured (the lines above give their references and spreads) */
static void tally_print(void)
{
    int met = 0;
    for (int i = 0; i < ntally; i++)
        met += tally[i].met;
    printf("\nsummary: %d of %d targets met%s\n", met, ntally, met < ntally ? "; missed:" : "");
    for (int i = 0; i < ntally; i++)
        if (!tally[i].met)
            printf("  %-36s %-10s goal %s\n", tally[i].name, tally[i].got, tally[i].goal);
    if (tally_lost)
        printf("  (%d more targets not kept for this summary: see their lines above)\n", tally_lost);
}

int bench_target(const char *name, double value, const char *unit, double ref, const char *ref_name, double goal,
                 int at_most)
{
    double ratio = value / ref;
    int met = ratio == ratio && (at_most ? ratio <= goal : ratio >= goal);
    char r[32], g[32];
    if (at_most)
        snprintf(r, sizeof r, "%.2fx", ratio), snprintf(g, sizeof g, "<= %.2fx", goal);
    else
        snprintf(r, sizeof r, "%.1f%%", 100 * ratio), snprintf(g, sizeof g, ">= %.0f%%", 100 * goal);
    if (ratio == ratio)
        printf("target %s: %.3g %s = %s of %s (%.3g %s, same run) (goal %s) %s\n", name, value, unit, r, ref_name, ref,
               unit, g, met ? "met" : "MISSED");
    else
        printf("target %s: not measured (goal %s of %s) MISSED\n", name, g, ref_name);
    bench_tally(name, ratio == ratio ? r : "not measured", g, met);
    return met;
}

int main(int argc, char **argv)
{
    static const struct {
        const char *name;
        int (*run)(void);
        int hidden; /* run only when named: isa-one is bench_isa's child, under its FP8PROF_ISA */
    } sections[] = {{"formats", bench_formats, 0}, {"stats", bench_stats, 0},   {"probe", bench_probe, 0},
                    {"loop", bench_loop, 0},       {"train", bench_train, 0},   {"report", bench_report, 0},
                    {"import", bench_import, 0},   {"readers", bench_readers, 0}, {"gemm", bench_gemm, 0},
                    {"ranks", bench_ranks, 0},     {"isa", bench_isa, 0},       {"isa-one", bench_isa_one, 1}};
    const char *only = argc > 1 ? argv[1] : NULL;
    int rc = 0, ran = 0;
    for (size_t i = 0; i < sizeof sections / sizeof sections[0]; i++)
        if (only ? strcmp(only, sections[i].name) == 0 : !sections[i].hidden) {
            if (ran++)
                printf("\n");
            rc |= sections[i].run();
        }
    if (ntally)
        tally_print();
    if (!ran) {
        fprintf(stderr, "bench: no section '%s' (formats, stats, probe, loop, train, report, import, readers, gemm, ranks, isa)\n", only);
        return 2;
    }
    return rc;
}
