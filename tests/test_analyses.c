/*
 * test_analyses.c — the analyses on synthetic runs with known answers: an
 * 8x amax jump and the delayed-scaling overflow events it must cause (and
 * current scaling must not); the replay against the shadow recipes' ground
 * truth; Student-t(10) kurtosis; the histogram bounds by hand; plots render;
 * the report survives NaN bursts, a single tensor and bad input.
 */
#include <gsl/gsl_randist.h>
#include <hdf5.h>
#include <gsl/gsl_rng.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "analysis.h"
#include "advise.h"
#include "compare.h"
#include "fp8_probe.h"
#include "outliers.h"
#include "plots.h"
#include "replay.h"
#include "report.h"
#include "an_util.h"
#include "tests.h"

static an_ctx open_one(const char *path, const char *outdir)
{
    const char *p[1] = {path};
    return test_an_open(p, 1, outdir, 0);
}

static void close_ctx(an_ctx *c) { test_an_close(c); }

static int recipe_id(const an_run *a, const char *spec_prefix)
{
    for (int r = 0; r < a->run->nrecipes; r++)
        if (strncmp(a->run->recipe_spec[r], spec_prefix, strlen(spec_prefix)) == 0)
            return r;
    return -1;
}

/* ---- 8x jump at step 500 ---------------------------------------------------- */

/* Deterministic values with amax exactly amp: x_i = amp * u_i, u in (-1, 1),
 * one element exactly amp. */
static void jump_tensor(float *x, size_t n, int64_t step, uint64_t *seed)
{
    float amp = step >= 500 ? 8.0f : 1.0f;
    for (size_t i = 0; i < n; i++)
        x[i] = amp * (float)((double)(test_rand(seed) >> 11) / 9007199254740992.0 * 1.8 - 0.9);
    x[n / 2] = amp;
}

static void write_jump_run(const char *path, int64_t steps)
{
    const char *shadows[] = {"e4m3:current", "e4m3:delayed:history=1024", "e4m3:delayed:history=16,algo=most_recent"};
    fp8_probe_run *run = fp8_probe_open(path, NULL, NULL, 0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(run);
    fp8_probe *p = fp8_probe_declare(run, "layers.0.jump.input", FP8_ROLE_ACTIVATION, 0, "e4m3:delayed:history=16",
                                     shadows, 3);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    float x[1024];
    uint64_t seed = 0x9E3779B97F4A7C15ull;
    for (int64_t s = 0; s < steps; s++) {
        jump_tensor(x, 1024, s, &seed);
        fp8_probe_record(p, s, x, 4, 256);
        fp8_probe_scalar(run, "loss", s, 3.0 - 1e-3 * (double)s);
        CU_ASSERT_EQUAL(fp8_probe_step_end(run, s), FP8_OK);
    }
    CU_ASSERT_EQUAL(fp8_probe_close(run), FP8_OK);
}

static void test_jump_events(void)
{
    mkdir("build/t_an", 0777);
    write_jump_run("build/t_an/jump.h5", 1000);
    an_ctx c = open_one("build/t_an/jump.h5", "build/t_an/jump");
    const an_run *a = &c.runs[0];
    int d16 = recipe_id(a, "e4m3:delayed:history=16,algo=max"), cur = recipe_id(a, "e4m3:current");
    CU_ASSERT_FATAL(d16 >= 0 && cur >= 0);
    an_sstats sd, sc;
    CU_ASSERT_EQUAL(an_series_stats(a, 0, d16, &sd), 0);
    CU_ASSERT_EQUAL(an_series_stats(a, 0, cur, &sc), 0);
    CU_ASSERT_EQUAL(sd.records, 999); /* step 0 is the warm-up */
    CU_ASSERT_EQUAL(sd.warm_records, 1);
    /* history 16, max: the stale scale of step 500 sees 8x its range once */
    CU_ASSERT_EQUAL(sd.events, 1);
    CU_ASSERT_EQUAL(sc.events, 0);
    size_t n;
    const size_t *ix = an_series(a, 0, d16, &n);
    for (size_t i = 0; i < n; i++)
        if (an_rec(a, ix[i])->overflows)
            CU_ASSERT_EQUAL(an_rec(a, ix[i])->step, 500);
    /* the verdict: one overflow event in 999 steps is not evidence enough
     * (minimum 3 events); with the minimum at 1 it is needs JIT */
    an_vinfo vi;
    CU_ASSERT_EQUAL(an_tensor_verdict(&c, &c.runs[0], 0, &vi), AN_VERDICT_SAFE);
    CU_ASSERT_EQUAL(vi.D, d16);
    CU_ASSERT_EQUAL(vi.events_d, 1);
    CU_ASSERT_EQUAL(vi.steps_d, 999); /* every step after warm-up, from the every-step rows */
    c.min_events = 1;
    CU_ASSERT_EQUAL(an_tensor_verdict(&c, &c.runs[0], 0, &vi), AN_VERDICT_JIT);
    c.min_events = 3;
    /* the replay: margin 0, every history and algorithm: exactly one event */
    CU_ASSERT_EQUAL(an_replay(&c), 0);
    FILE *f = fopen("build/t_an/jump/replay_settings.tsv", "r");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    char line[1024];
    int rows = 0;
    CU_ASSERT_PTR_NOT_NULL(fgets(line, sizeof line, f));
    while (fgets(line, sizeof line, f)) {
        int h, m;
        char algo[32];
        unsigned long ev;
        CU_ASSERT_EQUAL_FATAL(sscanf(line, "%*s %d %31s %d %*d %*d %lu", &h, algo, &m, &ev), 4);
        if (m == 0)
            CU_ASSERT_EQUAL(ev, 1);
        rows++;
    }
    fclose(f);
    CU_ASSERT_EQUAL(rows, 48);
    close_ctx(&c);
}

/* ---- replay against ground truth ------------------------------------------- */

static void test_replay_truth(void)
{
    /* Gaussian tensors whose scale wanders (so the stale scales matter),
     * recorded at every step under four delayed recipes */
    const char *path = "build/t_an/truth.h5";
    const char *shadows[] = {"e4m3:delayed:history=1", "e4m3:delayed:history=4,algo=most_recent,margin=1",
                             "e5m2:delayed:history=64,margin=2", "e4m3:current"};
    fp8_probe_run *run = fp8_probe_open(path, NULL, NULL, 0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(run);
    fp8_probe *p[3];
    for (int t = 0; t < 3; t++) {
        char name[64];
        snprintf(name, sizeof name, "layers.%d.x.input", t);
        p[t] = fp8_probe_declare(run, name, FP8_ROLE_ACTIVATION, t, "e4m3:delayed:history=16", shadows, 4);
        CU_ASSERT_PTR_NOT_NULL_FATAL(p[t]);
    }
    gsl_rng *rng = gsl_rng_alloc(gsl_rng_mt19937);
    gsl_rng_set(rng, 7);
    float x[64 * 128];
    for (int64_t s = 0; s < 300; s++) {
        for (int t = 0; t < 3; t++) {
            double amp = exp(gsl_ran_gaussian(rng, 1.0)) * pow(10.0, -3 * t); /* down to 1e-6: underflows */
            for (int i = 0; i < 64 * 128; i++)
                x[i] = (float)(gsl_ran_gaussian(rng, amp) * (gsl_rng_uniform(rng) < 0.01 ? 30 : 1));
            fp8_probe_record(p[t], s, x, 64, 128);
        }
        CU_ASSERT_EQUAL(fp8_probe_step_end(run, s), FP8_OK);
    }
    gsl_rng_free(rng);
    CU_ASSERT_EQUAL(fp8_probe_close(run), FP8_OK);
    /* schema 2+ stores one exponent histogram per tensor and step, shared by its 5 recipes */
    hid_t h5 = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT), d = H5Dopen2(h5, "exp_hist", H5P_DEFAULT);
    hid_t sp = H5Dget_space(d);
    hsize_t dims[2] = {0, 0};
    H5Sget_simple_extent_dims(sp, dims, NULL);
    CU_ASSERT_EQUAL(dims[0], 3 * 300);
    H5Sclose(sp), H5Dclose(d), H5Fclose(h5);
    fp8_run *full = fp8_run_load(path);
    CU_ASSERT_PTR_NOT_NULL_FATAL(full);
    CU_ASSERT_EQUAL(full->nrecords, 3 * 300 * 5);
    for (size_t i = 1; i < full->nrecords; i++) { /* every record got its tensor's histogram back */
        const fp8_stats *rs = &full->records[i].stats;
        uint64_t tot = 0;
        for (int k = 0; k < FP8_EXP_BINS; k++)
            tot += rs->exp_hist[k];
        CU_ASSERT_EQUAL(tot, rs->numel);
        if (full->records[i].step == full->records[i - 1].step && full->records[i].tensor == full->records[i - 1].tensor)
            CU_ASSERT(memcmp(rs->exp_hist, full->records[i - 1].stats.exp_hist, sizeof rs->exp_hist) == 0);
    }
    fp8_run_free(full);
    an_ctx c = open_one(path, "build/t_an/truth");
    CU_ASSERT_EQUAL(an_replay(&c), 0);
    FILE *f = fopen("build/t_an/truth/replay_truth.tsv", "r");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    char line[2048];
    int rows = 0;
    double ovt = 0, ove = 0, unt = 0, une = 0;
    CU_ASSERT_PTR_NOT_NULL(fgets(line, sizeof line, f));
    while (fgets(line, sizeof line, f)) {
        /* run recipe tensor steps match records ovt ovl ovh ove unt unl unh une outside; recipe has spaces */
        char *tab[16];
        int k = 0;
        for (char *q = strtok(line, "\t\n"); q && k < 16; q = strtok(NULL, "\t\n"))
            tab[k++] = q;
        CU_ASSERT_EQUAL_FATAL(k, 15);
        long steps = atol(tab[3]), match = atol(tab[4]), recs = atol(tab[5]), outside = atol(tab[14]);
        CU_ASSERT_EQUAL(steps, 300);
        CU_ASSERT_EQUAL(recs, 300);
        CU_ASSERT_EQUAL(match, steps); /* the replayed scale is the recorded one, at every step */
        CU_ASSERT_EQUAL(outside, 0);   /* the truth lies inside the stated bounds, always */
        double lo = atof(tab[7]), hi = atof(tab[8]), t = atof(tab[6]);
        CU_ASSERT(t >= lo && t <= hi);
        ovt += t, ove += atof(tab[9]), unt += atof(tab[10]), une += atof(tab[13]);
        rows++;
    }
    fclose(f);
    CU_ASSERT_EQUAL(rows, 3 * 4); /* 3 tensors x 4 delayed recipes */
    CU_ASSERT(unt > 1000);        /* the small tensors do flush values */
    CU_ASSERT(ovt > 10);
    /* summed over the run the estimates come close */
    CU_ASSERT(fabs(une - unt) <= 0.1 * unt);
    CU_ASSERT(fabs(ove - ovt) <= 0.5 * ovt);
    close_ctx(&c);
}

static void test_hist_bounds(void)
{
    /* hand-worked: 10 values in [1,2), 6 in [2,4), 4 in [4,8) (bins 128, 129, 130),
     * amax 7, min nonzero 1.5 */
    uint64_t h[FP8_EXP_BINS] = {0};
    h[128] = 10, h[129] = 6, h[130] = 4;
    an_bounds ov, un;
    /* overflow threshold 3: bin 130 wholly above (4), bin 129 partial (6) */
    an_hist_bounds(h, 7.0, 1.5, 0, 3.0, 0.5, &ov, &un);
    CU_ASSERT_DOUBLE_EQUAL(ov.lo, 4, 0);
    CU_ASSERT_DOUBLE_EQUAL(ov.hi, 10, 0);
    CU_ASSERT(ov.est >= ov.lo && ov.est <= ov.hi);
    CU_ASSERT_DOUBLE_EQUAL(un.lo, 0, 0); /* nothing at or below 0.5 */
    CU_ASSERT_DOUBLE_EQUAL(un.hi, 0, 0);
    /* amax below the threshold inside its binade: exactly nothing overflows */
    an_hist_bounds(h, 7.0, 1.5, 2, 7.5, 1.25, &ov, &un);
    CU_ASSERT_DOUBLE_EQUAL(ov.lo, 2, 0); /* the two Inf */
    CU_ASSERT_DOUBLE_EQUAL(ov.hi, 2, 0);
    /* under 1.25 splits bin 128; min_nonzero 1.5 > 1.25: exactly none flushed */
    CU_ASSERT_DOUBLE_EQUAL(un.hi, 0, 0);
    /* under 1.75 >= min_nonzero: at least that one value, at most the bin */
    an_hist_bounds(h, 7.0, 1.5, 0, 100, 1.75, &ov, &un);
    CU_ASSERT_DOUBLE_EQUAL(un.lo, 1, 0);
    CU_ASSERT_DOUBLE_EQUAL(un.hi, 10, 0);
    CU_ASSERT_DOUBLE_EQUAL(ov.hi, 0, 0);
}

/* ---- kurtosis of Student-t(10) ---------------------------------------------- */

static void test_student_t_kurtosis(void)
{
    const char *path = "build/t_an/t10.h5";
    fp8_probe_run *run = fp8_probe_open(path, NULL, NULL, 0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(run);
    fp8_probe *p = fp8_probe_declare(run, "t10", FP8_ROLE_ACTIVATION, 0, "e4m3:current", NULL, 0);
    gsl_rng *rng = gsl_rng_alloc(gsl_rng_mt19937);
    gsl_rng_set(rng, 10);
    size_t n = 1 << 20;
    float *x = malloc(n * sizeof *x);
    CU_ASSERT_PTR_NOT_NULL_FATAL(x);
    for (int64_t s = 0; s < 9; s++) {
        for (size_t i = 0; i < n; i++)
            x[i] = (float)gsl_ran_tdist(rng, 10.0);
        fp8_probe_record(p, s, x, 1024, 1024);
        CU_ASSERT_EQUAL(fp8_probe_step_end(run, s), FP8_OK);
    }
    free(x);
    gsl_rng_free(rng);
    CU_ASSERT_EQUAL(fp8_probe_close(run), FP8_OK);
    an_ctx c = open_one(path, "build/t_an/t10");
    an_outl o;
    CU_ASSERT_EQUAL(an_tensor_outliers(&c.runs[0], 0, &o), 0);
    /* Pearson kurtosis of t(nu) = 3 + 6/(nu - 4) = 4; one 2^20 sample has
     * sd ~0.04 (mu8 of t10 ~2734), the median of 9 less: 0.15 is > 4 sd */
    CU_ASSERT(fabs(o.kurt_p50 - 4.0) < 0.15);
    CU_ASSERT_EQUAL(o.steps, 9);
    close_ctx(&c);
}

/* ---- plots ----------------------------------------------------------------- */

static void test_plots_render(void)
{
    mkdir("build/t_an/plots", 0777);
    FILE *f = fopen("build/t_an/plots/a.tsv", "w");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    fprintf(f, "step\tamax\tover\tunder\tevent\n");
    for (int s = 0; s < 50; s++)
        fprintf(f, "%d\t%g\t%g\t%g\t%d\n", s, 1.0 + 0.1 * s, 5.0, 1e-3, s == 40);
    fclose(f);
    char msg[512];
    CU_ASSERT_EQUAL(plot_render("build/t_an/plots", "amax", "amax_t", "data = 'a.tsv'\nttl = 'test'\n", msg, 512), 0);
    int w = 0, h = 0;
    CU_ASSERT(plot_png_size("build/t_an/plots/amax_t.png", &w, &h));
    CU_ASSERT_EQUAL(w, 1000);
    CU_ASSERT_EQUAL(h, 560);
    struct stat st;
    CU_ASSERT(stat("build/t_an/plots/amax_t.svg", &st) == 0 && st.st_size > 1000);
    /* a script error fails the call, with gnuplot's message */
    CU_ASSERT_EQUAL(plot_render("build/t_an/plots", "amax", "bad_t", "data = 'a.tsv'\nttl = 'x'\nplot sin(\n", msg, 512), 1);
    CU_ASSERT(strstr(msg, "gnuplot failed") != NULL);
    CU_ASSERT_EQUAL(plot_render("build/t_an/plots", "nosuch", "x", "", msg, 512), 1);
}

/* ---- the report on awkward runs ---------------------------------------------- */

static int report_on(const char *path, const char *dir)
{
    an_ctx c;
    an_defaults(&c);
    c.outdir = dir;
    c.quiet = 1;
    c.boot = 100;
    const char *p[1] = {path};
    if (an_open(&c, p, 1)) {
        an_close(&c);
        return -1;
    }
    int rc = an_report(&c, 0, 0);
    an_close(&c);
    return rc;
}

static void test_report_nan_and_single(void)
{
    /* NaN bursts and Inf values in a tensor, a second tensor all zeros */
    const char *shadows[] = {"e4m3:current", "e4m3:block=1x128", "mxfp8"};
    fp8_probe_options o = fp8_probe_defaults();
    o.snapshot_pattern = "*";
    o.snapshot_every = 20;
    fp8_probe_run *run = fp8_probe_open("build/t_an/nan.h5", &o, NULL, 0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(run);
    fp8_probe *p = fp8_probe_declare(run, "layers.0.nan.input", FP8_ROLE_ACTIVATION, 0, "hybrid:delayed", shadows, 3);
    fp8_probe *z = fp8_probe_declare(run, "layers.1.zero.grad", FP8_ROLE_GRADIENT, 1, "hybrid:delayed", shadows, 3);
    float x[8 * 256], zero[8 * 256] = {0};
    uint64_t seed = 5;
    for (int64_t s = 0; s < 120; s++) {
        for (int i = 0; i < 8 * 256; i++)
            x[i] = (float)((double)(test_rand(&seed) >> 11) / 9007199254740992.0 - 0.5);
        if (s % 25 == 5)
            for (int i = 0; i < 8 * 256; i += 3)
                x[i] = NAN;
        if (s == 60)
            x[7] = INFINITY;
        fp8_probe_record(p, s, x, 8, 256);
        fp8_probe_record(z, s, zero, 8, 256);
        fp8_probe_scalar(run, "loss", s, s % 25 == 5 ? NAN : 2.0);
        CU_ASSERT_EQUAL(fp8_probe_step_end(run, s), FP8_OK);
    }
    CU_ASSERT_EQUAL(fp8_probe_close(run), FP8_OK);
    CU_ASSERT_EQUAL(report_on("build/t_an/nan.h5", "build/t_an/rep_nan"), 0);
    struct stat st;
    CU_ASSERT(stat("build/t_an/rep_nan/index.html", &st) == 0 && st.st_size > 2000);
    CU_ASSERT(stat("build/t_an/rep_nan/report.md", &st) == 0);
    char buf[65536] = "";
    FILE *f = fopen("build/t_an/rep_nan/report.md", "r");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    size_t got = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[got] = 0;
    CU_ASSERT(strstr(buf, "## Summary") != NULL);
    CU_ASSERT(strstr(buf, "could not be drawn") == NULL); /* every figure rendered */
    CU_ASSERT(strstr(buf, "![") != NULL);
    /* one tensor, one recipe, no shadows, no loss */
    run = fp8_probe_open("build/t_an/one.h5", NULL, NULL, 0);
    p = fp8_probe_declare(run, "w", FP8_ROLE_WEIGHT, 0, "e4m3:current", NULL, 0);
    for (int64_t s = 0; s < 5; s++) {
        fp8_probe_record(p, s, x + 1, 1, 100);
        CU_ASSERT_EQUAL(fp8_probe_step_end(run, s), FP8_OK);
    }
    CU_ASSERT_EQUAL(fp8_probe_close(run), FP8_OK);
    CU_ASSERT_EQUAL(report_on("build/t_an/one.h5", "build/t_an/rep_one"), 0);
    CU_ASSERT(stat("build/t_an/rep_one/index.html", &st) == 0);
    f = fopen("build/t_an/rep_one/report.md", "r");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    got = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[got] = 0;
    CU_ASSERT(strstr(buf, "could not be drawn") == NULL);
    /* a heat map of zeros would be blank: one line says so instead */
    CU_ASSERT(strstr(buf, "fig_heat_overflow") == NULL);
    CU_ASSERT(strstr(buf, "Not drawn: `one`: no overflow under `e4m3 current` after warm-up at any recorded step") != NULL);
}

static void test_bad_input(void)
{
    an_ctx c;
    an_defaults(&c);
    c.outdir = "build/t_an/bad";
    const char *missing[1] = {"build/t_an/no-such-run.h5"};
    CU_ASSERT_EQUAL(an_open(&c, missing, 1), 1);
    an_close(&c);
    /* not HDF5 */
    FILE *f = fopen("build/t_an/text.h5", "w");
    fputs("hello\n", f);
    fclose(f);
    const char *text[1] = {"build/t_an/text.h5"};
    an_defaults(&c);
    CU_ASSERT_EQUAL(an_open(&c, text, 1), 1);
    an_close(&c);
    /* an empty run */
    fp8_probe_run *run = fp8_probe_open("build/t_an/empty.h5", NULL, NULL, 0);
    CU_ASSERT_EQUAL(fp8_probe_close(run), FP8_OK);
    const char *empty[1] = {"build/t_an/empty.h5"};
    an_defaults(&c);
    CU_ASSERT_EQUAL(an_open(&c, empty, 1), 1);
    an_close(&c);
    /* loss on a run without a loss series: "lacks what it needs", not a crash */
    an_ctx d = open_one("build/t_an/truth.h5", "build/t_an/bad");
    CU_ASSERT_EQUAL(an_loss(&d), 3);
    CU_ASSERT_EQUAL(an_compare(&d), 0);
    close_ctx(&d);
}

/* ---- bits per element, bootstrap, dynamics, channels ----- */

static void test_bits_per_element(void)
{
    fp8_recipe r;
    const fp8_format *e4m3 = fp8_format_find("e4m3", NULL);
    CU_ASSERT_EQUAL(fp8_recipe_parse("mxfp8", &r), FP8_OK);
    CU_ASSERT_DOUBLE_EQUAL(an_bits_per_element(&r, e4m3, FP8_ROLE_ACTIVATION, 64, 1024), 8.25, 1e-12); /* 8/32 */
    CU_ASSERT_EQUAL(fp8_recipe_parse("e4m3:block=1x128", &r), FP8_OK);
    CU_ASSERT_DOUBLE_EQUAL(an_bits_per_element(&r, e4m3, FP8_ROLE_ACTIVATION, 64, 1024), 8.25, 1e-12); /* 32/128 */
    CU_ASSERT_EQUAL(fp8_recipe_parse("e4m3:block=1x128:weights=128x128", &r), FP8_OK);
    CU_ASSERT_DOUBLE_EQUAL(an_bits_per_element(&r, e4m3, FP8_ROLE_WEIGHT, 256, 256), 8 + 32.0 / 16384, 1e-12);
    CU_ASSERT_EQUAL(fp8_recipe_parse("nvfp4", &r), FP8_OK);
    CU_ASSERT_DOUBLE_EQUAL(an_bits_per_element(&r, fp8_format_find("e2m1", NULL), FP8_ROLE_ACTIVATION, 16, 64),
                           4 + 0.5 + 32.0 / 1024, 1e-12);
    CU_ASSERT_EQUAL(fp8_recipe_parse("e4m3:current", &r), FP8_OK);
    CU_ASSERT_DOUBLE_EQUAL(an_bits_per_element(&r, e4m3, FP8_ROLE_ACTIVATION, 4, 8), 8 + 1.0, 1e-12);
}

/* E4M3 keeps one mantissa bit more than E5M2: on Gaussian data under current
 * scaling its SQNR is ~6 dB higher (20 log10 2 = 6.02 per bit).  The paired
 * bootstrap must find that, with an interval around it, and advise must
 * pick E4M3 on every tensor. */
static void test_bootstrap_and_advise(void)
{
    const char *shadows[] = {"e5m2:current"};
    fp8_probe_run *run = fp8_probe_open("build/t_an/fmt.h5", NULL, NULL, 0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(run);
    fp8_probe *p[2];
    p[0] = fp8_probe_declare(run, "layers.0.a.input", FP8_ROLE_ACTIVATION, 0, "e4m3:current", shadows, 1);
    p[1] = fp8_probe_declare(run, "layers.0.a.grad_output", FP8_ROLE_GRADIENT, 0, "e4m3:current", shadows, 1);
    gsl_rng *rng = gsl_rng_alloc(gsl_rng_mt19937);
    gsl_rng_set(rng, 3);
    float x[64 * 256];
    for (int64_t s = 0; s < 60; s++) {
        for (int t = 0; t < 2; t++) {
            for (int i = 0; i < 64 * 256; i++)
                x[i] = (float)gsl_ran_gaussian(rng, t ? 1e-3 : 2.0);
            fp8_probe_record(p[t], s, x, 64, 256);
        }
        CU_ASSERT_EQUAL(fp8_probe_step_end(run, s), FP8_OK);
    }
    gsl_rng_free(rng);
    CU_ASSERT_EQUAL(fp8_probe_close(run), FP8_OK);
    an_ctx c = open_one("build/t_an/fmt.h5", "build/t_an/fmt");
    CU_ASSERT_EQUAL(an_compare(&c), 0);
    CU_ASSERT_EQUAL(an_advise(&c), 0);
    /* compare_factors.tsv: the format comparison per role, E5M2 -> E4M3 */
    FILE *f = fopen("build/t_an/fmt/compare_factors.tsv", "r");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    char line[2048];
    int found = 0;
    while (fgets(line, sizeof line, f)) {
        char *tab[30];
        int k = 0;
        for (char *q = strtok(line, "\t\n"); q && k < 30; q = strtok(NULL, "\t\n"))
            tab[k++] = q;
        if (k != 26 || strcmp(tab[1], "format") != 0)
            continue;
        CU_ASSERT_STRING_EQUAL(tab[3], "e5m2 current");
        CU_ASSERT_STRING_EQUAL(tab[4], "e4m3 current");
        long steps = atol(tab[8]);
        double mean = atof(tab[10]), lo = atof(tab[11]), hi = atof(tab[12]);
        CU_ASSERT_EQUAL(steps, 60); /* no delayed recipe: no warm-up */
        CU_ASSERT(mean > 5.5 && mean < 6.5);
        CU_ASSERT(lo < mean && mean < hi && hi - lo < 0.5);
        CU_ASSERT_EQUAL(atoi(tab[14]), 1); /* the tensor is better under E4M3 */
        found++;
    }
    fclose(f);
    CU_ASSERT_EQUAL(found, 2); /* activation and gradient */
    f = fopen("build/t_an/fmt/advise_formats.tsv", "r");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    int e4 = 0, rows = 0;
    CU_ASSERT_PTR_NOT_NULL(fgets(line, sizeof line, f));
    while (fgets(line, sizeof line, f)) {
        char *tab[16];
        int k = 0;
        for (char *q = strtok(line, "\t\n"); q && k < 16; q = strtok(NULL, "\t\n"))
            tab[k++] = q;
        rows++, e4 += k == 13 && atoi(tab[4]) == 1;
    }
    fclose(f);
    CU_ASSERT_EQUAL(rows, 2);
    CU_ASSERT_EQUAL(e4, 2);
    close_ctx(&c);
}

/* A tensor whose 1x128 blocks trade their amax from step to step while the
 * tensor's amax stays put: dynamics must see the blocks move and the tensor
 * not, and outliers must find the outlier channel (column 7, 40x). */
static void test_dynamics_and_channels(void)
{
    fp8_probe_options o = fp8_probe_defaults();
    o.snapshot_pattern = "*";
    o.snapshot_every = 10;
    o.snapshot_pairs = 1;
    fp8_probe_run *run = fp8_probe_open("build/t_an/dyn.h5", &o, NULL, 0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(run);
    fp8_probe *p = fp8_probe_declare(run, "layers.0.x.input", FP8_ROLE_ACTIVATION, 0, "e4m3:current", NULL, 0);
    float x[8 * 256];
    uint64_t seed = 11;
    for (int64_t s = 0; s < 40; s++) {
        for (int i = 0; i < 8; i++)
            for (int j = 0; j < 256; j++) {
                double u = (double)(test_rand(&seed) >> 11) / 9007199254740992.0 * 0.5 + 0.25;
                /* even steps: the left block of each row large; odd steps: the right block */
                double amp = ((j < 128) == (s % 2 == 0)) ? 4.0 : 0.25;
                x[i * 256 + j] = (float)(u * amp * (j == 7 ? 40.0 : 1.0));
            }
        x[0] = 200.0f; /* the tensor's amax: the same every step */
        fp8_probe_record(p, s, x, 8, 256);
        CU_ASSERT_EQUAL(fp8_probe_step_end(run, s), FP8_OK);
    }
    CU_ASSERT_EQUAL(fp8_probe_close(run), FP8_OK);
    an_ctx c = open_one("build/t_an/dyn.h5", "build/t_an/dyn");
    char *md = NULL;
    size_t mdn = 0;
    fclose(c.md);
    c.md = open_memstream(&md, &mdn);
    CU_ASSERT_EQUAL(an_dynamics(&c), 0);
    CU_ASSERT_EQUAL(an_outliers(&c), 0);
    fclose(c.md);
    c.md = NULL;
    /* tensor: r = 0 at every step; 1x128 blocks: +-4 bits (amplitude 4 vs 0.25) */
    CU_ASSERT(strstr(md, "mean sd of r over 1 tensors = 0.000 bits") != NULL);
    const char *b = strstr(md, "| block 1x128 | ");
    CU_ASSERT_PTR_NOT_NULL_FATAL(b);
    /* 8 rows x 2 blocks x 4 pairs; most blocks swing 4 bits either way */
    CU_ASSERT_EQUAL(atoi(b + 16), 64);
    double sd = atof(strchr(b + 16, '|') + 1);
    CU_ASSERT(sd > 3.0 && sd < 4.5);
    /* a tensor amax that never moves: no volatility ratio (nothing to divide by) */
    CU_ASSERT(strstr(md, "over 0 tensors") != NULL);
    FILE *f = fopen("build/t_an/dyn/outliers_tensors.tsv", "r");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    char line[2048];
    CU_ASSERT_PTR_NOT_NULL(fgets(line, sizeof line, f));
    CU_ASSERT_PTR_NOT_NULL_FATAL(fgets(line, sizeof line, f));
    fclose(f);
    char *tab[20];
    int k = 0;
    for (char *q = strtok(line, "\t\n"); q && k < 20; q = strtok(NULL, "\t\n"))
        tab[k++] = q;
    CU_ASSERT_EQUAL_FATAL(k, 16);
    CU_ASSERT_EQUAL(atoi(tab[11]), 8);  /* snapshots: steps 0,1,10,11,20,21,30,31 */
    CU_ASSERT_EQUAL(atoi(tab[12]), 0);  /* the top channel at the last snapshot: column 0 holds the 200 */
    /* the runner-up is the 40x channel, well above the median channel in
     * every snapshot (on odd steps its half of the row is the small one:
     * 0.75*0.25*40 = 7.5 against a median near 0.75*4 = 3) */
    f = fopen("build/t_an/dyn/outliers_channels.tsv", "r");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    int seen7 = 0;
    while (fgets(line, sizeof line, f)) {
        k = 0;
        for (char *q = strtok(line, "\t\n"); q && k < 20; q = strtok(NULL, "\t\n"))
            tab[k++] = q;
        if (k == 7 && strcmp(tab[3], "1") == 0) {
            CU_ASSERT_EQUAL(atoi(tab[4]), 7);
            CU_ASSERT(atof(tab[6]) > 2);
            seen7++;
        }
    }
    fclose(f);
    CU_ASSERT_EQUAL(seen7, 8);
    free(md);
    close_ctx(&c);
}

/* Quantiles by selection equal GSL's from the sorted data, bit for bit:
 * random lengths (1 to 2000), many ties, every q of a grid and the ends. */
static void test_quantile_select(void)
{
    uint64_t seed = 99;
    int same = 0, total = 0;
    for (int trial = 0; trial < 200; trial++) {
        size_t n = 1 + test_rand(&seed) % (trial < 20 ? 4 : 2000);
        double *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b);
        for (size_t i = 0; i < n; i++)
            a[i] = trial % 3 ? (double)(test_rand(&seed) % 50) - 25.0 /* ties */
                             : ((double)(test_rand(&seed) >> 11) * 0x1p-53 - 0.5) * 1e3;
        for (int k = 0; k <= 20; k++) {
            double q = k == 20 ? 0.99 : k / 19.0 > 1 ? 1 : k / 19.0;
            memcpy(b, a, n * sizeof *b);
            double want = an_quantile(b, n, q);
            memcpy(b, a, n * sizeof *b);
            double got = an_quantile_select(b, n, q);
            same += memcmp(&want, &got, sizeof got) == 0, total++;
        }
        free(a), free(b);
    }
    CU_ASSERT_EQUAL(same, total);
    CU_ASSERT(isnan(an_quantile_select(NULL, 0, 0.5)));
    double h[5] = {5, 1, 4, 2, 3}; /* by hand: the 0.3 quantile of 1..5 is 1 + 0.3 * 4 = 2.2 */
    CU_ASSERT_DOUBLE_EQUAL(an_quantile_select(h, 5, 0.3), 2.2, 1e-15);
}

void register_analyses_tests(void)
{
    static CU_TestInfo tests[] = {
        {"8x amax jump: delayed history 16 overflows once (not evidence), current never", test_jump_events},
        {"replay reproduces the shadow recipes' scales; truth within bounds", test_replay_truth},
        {"histogram bounds, hand-worked", test_hist_bounds},
        {"Student-t(10) kurtosis is 4", test_student_t_kurtosis},
        {"plots render (gnuplot exit 0, PNG 1000x560), errors reported", test_plots_render},
        {"report on NaN bursts, zeros, one tensor", test_report_nan_and_single},
        {"bad input: missing file, not HDF5, empty run, no loss", test_bad_input},
        {"bits per element, hand-worked", test_bits_per_element},
        {"format comparison: E5M2 is 6 dB below E4M3 on Gaussians; advise counts it", test_bootstrap_and_advise},
        {"dynamics: blocks move, the tensor does not; outlier channel found", test_dynamics_and_channels},
        {"quantiles by selection = GSL's from sorted data, bit for bit", test_quantile_select},
        CU_TEST_INFO_NULL,
    };
    add_suite("analyses", tests);
}
