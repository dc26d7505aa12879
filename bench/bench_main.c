/*
 * bench_main.c — `make bench`: every section prints its numbers next to a
 * reference measured in the same run.  Optional argument: a section name
 * (formats, stats, probe, train, report).
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

int main(int argc, char **argv)
{
    const char *only = argc > 1 ? argv[1] : NULL;
    int rc = 0;
    if (!only || strcmp(only, "formats") == 0)
        rc |= bench_formats();
    if (!only || strcmp(only, "stats") == 0) {
        printf("\n");
        rc |= bench_stats();
    }
    if (!only || strcmp(only, "probe") == 0) {
        printf("\n");
        rc |= bench_probe();
    }
    if (!only || strcmp(only, "train") == 0) {
        printf("\n");
        rc |= bench_train();
    }
    if (!only || strcmp(only, "report") == 0) {
        printf("\n");
        rc |= bench_report();
    }
    return rc;
}
