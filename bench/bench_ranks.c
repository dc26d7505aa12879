/*
 * bench_ranks.c — `fp8prof report` on multi-rank runs of 200 tensors x
 * 1,000 steps (1 + 1 recipes, statistics every 100 steps, every tensor's
 * amax and every recipe's scale at every step), at 16 and 64 ranks: the
 * target is linear growth, the 64-rank report within 5x the 16-rank one
 * (4x the ranks, 4x the series) measured in the same run.  The report reads rank 0's records and every rank's every-step
 * series (summaries, never every rank's records).  Reference in the same
 * run: reading the rank files' bytes.  The runs are written once by
 * `fp8prof synth --ranks N` and reused.
 */
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "analysis.h"
#include "bench.h"
#include "fp8_ranks.h"
#include "ranks.h"
#include "report.h"

static double read_bytes(const char *index, int n, double *gb)
{
    static char buf[1 << 20];
    size_t tot = 0;
    double t0 = bench_now();
    for (int r = 0; r < n; r++) {
        char p[600];
        fp8_rank_path(index, r, p, sizeof p);
        FILE *f = fopen(p, "rb");
        if (!f)
            return -1;
        size_t k;
        while ((k = fread(buf, 1, sizeof buf, f)) > 0)
            tot += k;
        fclose(f);
    }
    *gb = (double)tot / 1e9;
    return bench_now() - t0;
}

static int one(int ranks, double *t_report, double *t_ranks)
{
    char index[256], cmd[600];
    snprintf(index, sizeof index, "build/bench_ranks%d.h5", ranks);
    struct stat st;
    if (stat(index, &st) != 0) {
        printf("  writing %s with fp8prof synth --ranks %d (once) ...\n", index, ranks);
        fflush(stdout);
        double t0 = bench_now();
        snprintf(cmd, sizeof cmd,
                 "build/fp8prof synth --ranks %d --tp 8 --tensors 200 --steps 1000 --rows 1 --cols 128 "
                 "--record-every 100 --recipe e4m3:delayed:history=16 --shadow e4m3:current -o %s > /dev/null",
                 ranks, index);
        if (system(cmd) != 0) {
            fprintf(stderr, "bench: fp8prof synth failed (make builds build/fp8prof first)\n");
            return 1;
        }
        printf("  written in %.1f s\n", bench_now() - t0);
    }
    double gb = 0, io = read_bytes(index, ranks, &gb);
    double t0 = bench_now();
    an_ranks R;
    if (an_ranks_load(index, &R) != 0)
        return 1;
    *t_ranks = bench_now() - t0;
    an_ranks_free(&R);
    an_ctx c;
    an_defaults(&c);
    snprintf(cmd, sizeof cmd, "build/bench_ranks%d_report", ranks);
    c.outdir = cmd;
    c.quiet = 1;
    const char *p[1] = {index};
    t0 = bench_now();
    if (an_open(&c, p, 1)) {
        an_close(&c);
        return 1;
    }
    int rc = an_report(&c, 0, t0);
    *t_report = bench_now() - t0;
    an_close(&c);
    printf("  %2d ranks: fp8prof report %7.2f s; of it the ranks analysis alone %6.2f s; "
           "reference: reading the %d files' bytes %5.2f s (%.2f GB)\n",
           ranks, *t_report, *t_ranks, ranks, io, gb);
    return rc;
}

int bench_ranks(void)
{
    printf("ranks: fp8prof report on N ranks x 200 tensors x 1,000 steps (every-step series of every rank)\n");
    double r16 = 0, a16 = 0, r64 = 0, a64 = 0;
    if (one(16, &r16, &a16) || one(64, &r64, &a64))
        return 1;
    printf("  growth 16 -> 64 ranks: report x%.2f, ranks analysis x%.2f (4x the ranks)\n", r64 / r16, a64 / a16);
    /* 4x the ranks is 4x the series to read: linear growth, within 25% */
    bench_target("report_64_ranks", r64, "s", r16, "the 16-rank report", 5.0, 1);
    return 0;
}
