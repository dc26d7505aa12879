/*
 * bench_main.c — `make bench`: every section prints its numbers next to a
 * reference measured in the same run.  Optional argument: a section name
 * (formats, stats, probe, train, report, import, readers, gemm, ranks).
 */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "bench.h"

double bench_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

int bench_target(const char *name, double value, const char *unit, double goal, int at_most, const char *why)
{
    int met = value == value && (at_most ? value <= goal : value >= goal);
    if (value == value)
        printf("target %s: %.3g %s (goal %s%.3g) %s\n", name, value, unit, at_most ? "<= " : ">= ", goal,
               met ? "met" : "MISSED");
    else
        printf("target %s: n/a %s (goal %s%.3g) MISSED (%s)\n", name, unit, at_most ? "<= " : ">= ", goal,
               why ? why : "not measured");
    return met;
}

int main(int argc, char **argv)
{
    static const struct {
        const char *name;
        int (*run)(void);
    } sections[] = {{"formats", bench_formats}, {"stats", bench_stats}, {"probe", bench_probe},
                    {"train", bench_train},     {"report", bench_report},   {"import", bench_import},
                    {"readers", bench_readers}, {"gemm", bench_gemm},     {"ranks", bench_ranks}};
    const char *only = argc > 1 ? argv[1] : NULL;
    int rc = 0, ran = 0;
    for (size_t i = 0; i < sizeof sections / sizeof sections[0]; i++)
        if (!only || strcmp(only, sections[i].name) == 0) {
            if (ran++)
                printf("\n");
            rc |= sections[i].run();
        }
    if (!ran) {
        fprintf(stderr, "bench: no section '%s' (formats, stats, probe, train, report, import, readers, gemm, ranks)\n", only);
        return 2;
    }
    return rc;
}
