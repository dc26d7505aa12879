/*
 * bench_readers.c — readers on wide runs: `fp8prof info` against the number
 * of tensors, `fp8prof advise` against the number of recipes, each at three
 * sizes (time per record should stay flat: linear), next to the time to
 * load the same file's summaries (the reference: what any reader pays).
 */
#include <stdio.h>
#include <stdlib.h>

#include "bench.h"
#include "fp8_probe.h"
#include "fp8_store.h"

/* tensors x steps records; own = 1: each tensor has 16 recipes of its own
 * (distinct eps), else one recipe shared by all */
static int write_run(const char *path, int tensors, int steps, int own)
{
    fp8_probe_options o = fp8_probe_defaults();
    o.exp_hist = 0;
    fp8_probe_run *run = fp8_probe_open(path, &o, NULL, 0);
    fp8_probe **p = malloc((size_t)tensors * sizeof *p);
    if (!run || !p)
        return -1;
    char name[64], act[64], sp[15][64];
    const char *sh[15];
    for (int t = 0; t < tensors; t++) {
        snprintf(name, sizeof name, "layers.%d.t%d.input", t / 10, t);
        snprintf(act, sizeof act, "e4m3:delayed:history=%d", own ? 1 + t % 1000 : 16);
        for (int i = 0; i < 15; i++) {
            snprintf(sp[i], sizeof sp[i], "%s:%s:eps=%g", i % 2 ? "e4m3" : "e5m2", i < 8 ? "current" : "block=1x32",
                     1e-9 * (t * 16 + i + 1));
            sh[i] = sp[i];
        }
        if (!(p[t] = fp8_probe_declare(run, name, FP8_ROLE_ACTIVATION, t / 10, act, sh, own ? 15 : 0)))
            return -1;
    }
    float x[64];
    for (int s = 0; s < steps; s++) {
        for (int t = 0; t < tensors; t++) {
            for (int i = 0; i < 64; i++)
                x[i] = (float)((i * 7 + t + s) % 13) - 6;
            fp8_probe_record(p[t], s, x, 1, 64);
        }
        fp8_probe_step_end(run, s);
    }
    free(p);
    return fp8_probe_close(run);
}

static int one(const char *what, const char *cmd_fmt, int tensors, int steps, int own, double *per)
{
    char path[128], cmd[512];
    snprintf(path, sizeof path, "build/bench_readers_%s_%d.h5", what, tensors);
    if (write_run(path, tensors, steps, own) != 0) {
        fprintf(stderr, "bench: cannot write %s\n", path);
        return 1;
    }
    double t0 = bench_now();
    fp8_run *r = fp8_run_load_summary(path, NULL);
    double tload = bench_now() - t0;
    if (!r)
        return 1;
    size_t nrec = r->nrecords;
    int nrecipes = r->nrecipes;
    fp8_run_free(r);
    snprintf(cmd, sizeof cmd, cmd_fmt, path);
    t0 = bench_now();
    int rc = system(cmd);
    double t = bench_now() - t0;
    *per = t / (double)nrec;
    printf("  %-7s %6d tensors %6d recipes %8zu records: %6.2f s (%.2f us/record; loading the summaries %.2f s)%s\n",
           what, tensors, nrecipes, nrec, t, 1e6 * *per, tload, rc ? "  FAILED" : "");
    remove(path);
    return rc != 0;
}

int bench_readers(void)
{
    printf("readers on wide runs (time per record flat = linear)\n");
    double pi[3], pa[3];
    int rc = 0;
    const int ti[3] = {2500, 5000, 10000}, ta[3] = {1562, 3125, 6250};
    for (int i = 0; i < 3; i++)
        rc |= one("info", "build/fp8prof info %s > /dev/null", ti[i], 30, 0, &pi[i]);
    printf("  info: time per record, 10,000 against 2,500 tensors: %.2fx (1 = linear; was O(tensors x records))\n",
           pi[2] / pi[0]);
    for (int i = 0; i < 3; i++)
        rc |= one("advise", "build/fp8prof advise %s -o build/bench_readers_advise > /dev/null 2>&1", ta[i], 8, 1,
                  &pa[i]);
    printf("  advise: time per record, 100,000 against 25,000 recipes: %.2fx (1 = linear; was quadratic)\n",
           pa[2] / pa[0]);
    return rc;
}
