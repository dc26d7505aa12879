/*
 * fuzz_run.c — libFuzzer target: any bytes as a run file.  Load it (full and
 * summaries), read every snapshot, block amax and histogram it indexes, and
 * when it loads, index it and run compare on it as the analyses do.
 */
#include <hdf5.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "analysis.h"
#include "fp8.h"
#include "fp8_store.h"
#include "fuzz.h"

static void read_all(const fp8_run *r)
{
    for (size_t i = 0; i < r->nsnapshots; i++) {
        uint64_t n = r->snapshots[i].rows * r->snapshots[i].cols;
        float *v = n < (1u << 24) ? malloc(n * sizeof *v + 1) : NULL;
        if (v)
            fp8_run_snapshot_read(r, i, v);
        free(v);
    }
    float *b = NULL;
    size_t nb = 0;
    if (fp8_run_block_amax_all(r, &b, &nb) == FP8_OK)
        free(b);
}

static void read_hists(const fp8_run *r)
{
    if (!r->nrecords)
        return;
    uint64_t a = r->summaries[0].hist_row, b = r->summaries[r->nrecords - 1].hist_row;
    uint64_t rows[2] = {a < b ? a : b, a < b ? b : a};
    static uint64_t h[2 * FP8_EXP_BINS];
    fp8_run_exp_hist(r, rows, 2, h);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *p = fuzz_path("run.h5");
    if (fuzz_write(p, data, size) != 0)
        return 0;
    fp8_run *r = fp8_run_load(p);
    if (!r) {
        fuzz_no_open_ids();
        return 0;
    }
    read_all(r);
    fp8_run_free(r);
    if ((r = fp8_run_load_summary(p, NULL)) != NULL) {
        read_hists(r);
        fp8_run_free(r);
    }
    an_ctx c;
    an_defaults(&c);
    c.outdir = fuzz_path("out");
    mkdir(c.outdir, 0755);
    c.md = fopen("/dev/null", "w");
    c.quiet = 1;
    c.boot = 50;
    const char *paths[1] = {p};
    if (c.md && an_open(&c, paths, 1) == 0)
        an_compare(&c);
    if (c.md)
        fclose(c.md);
    an_close(&c);
    fuzz_no_open_ids();
    return 0;
}
