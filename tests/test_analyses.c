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
#include "compare.h"
#include "fp8_probe.h"
#include "outliers.h"
#include "plots.h"
#include "replay.h"
#include "report.h"
#include "tests.h"

static an_ctx open_one(const char *path, const char *outdir)
{
    an_ctx c;
    an_defaults(&c);
    c.outdir = outdir;
    c.md = fopen("/dev/null", "w");
    c.quiet = 1;
    const char *p[1] = {path};
    CU_ASSERT_EQUAL_FATAL(an_open(&c, p, 1), 0);
    return c;
}

static void close_ctx(an_ctx *c)
{
    if (c->md && c->md != stdout)
        fclose(c->md);
    an_close(c);
}

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
        fp8_probe_step_end(run, s);
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
    CU_ASSERT_EQUAL(sd.records, 1000);
    /* history 16, max: the stale scale of step 500 sees 8x its range once */
    CU_ASSERT_EQUAL(sd.events, 1);
    CU_ASSERT_EQUAL(sc.events, 0);
    size_t n;
    const size_t *ix = an_series(a, 0, d16, &n);
    for (size_t i = 0; i < n; i++)
        if (an_rec(a, ix[i])->overflows)
            CU_ASSERT_EQUAL(an_rec(a, ix[i])->step, 500);
    /* the verdict: delayed overflowed, current did not -> needs JIT */
    an_sstats st[8];
    int D, C, B;
    for (int r = 0; r < a->run->nrecipes; r++)
        an_series_stats(a, 0, r, &st[r]);
    CU_ASSERT_EQUAL(an_tensor_verdict(&c, a, 0, st, &D, &C, &B), AN_VERDICT_JIT);
    CU_ASSERT_EQUAL(D, d16);
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
        fp8_probe_step_end(run, s);
    }
    gsl_rng_free(rng);
    CU_ASSERT_EQUAL(fp8_probe_close(run), FP8_OK);
    /* schema 2 stores one exponent histogram per tensor and step, shared by its 5 recipes */
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
        /* run recipe tensor steps match ovt ove ovl ovh unt une unl unh outside maxerr; recipe has spaces */
        char *tab[16];
        int k = 0;
        for (char *q = strtok(line, "\t\n"); q && k < 16; q = strtok(NULL, "\t\n"))
            tab[k++] = q;
        CU_ASSERT_EQUAL_FATAL(k, 15);
        long steps = atol(tab[3]), match = atol(tab[4]), outside = atol(tab[13]);
        CU_ASSERT_EQUAL(steps, 300);
        CU_ASSERT_EQUAL(match, steps); /* the replayed scale is the recorded one, at every step */
        CU_ASSERT_EQUAL(outside, 0);   /* the truth lies inside the stated bounds, always */
        double lo = atof(tab[7]), hi = atof(tab[8]), t = atof(tab[5]);
        CU_ASSERT(t >= lo && t <= hi);
        ovt += t, ove += atof(tab[6]), unt += atof(tab[9]), une += atof(tab[10]);
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
        fp8_probe_step_end(run, s);
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
        fp8_probe_step_end(run, s);
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
    p = fp8_probe_declare(run, "w", FP8_ROLE_WEIGHT, -1, "e4m3:current", NULL, 0);
    for (int64_t s = 0; s < 5; s++) {
        fp8_probe_record(p, s, x + 1, 1, 100);
        fp8_probe_step_end(run, s);
    }
    CU_ASSERT_EQUAL(fp8_probe_close(run), FP8_OK);
    CU_ASSERT_EQUAL(report_on("build/t_an/one.h5", "build/t_an/rep_one"), 0);
    CU_ASSERT(stat("build/t_an/rep_one/index.html", &st) == 0);
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

void register_analyses_tests(void)
{
    static const char *const names[] = {"8x amax jump: delayed history 16 overflows once, current never",
                                        "replay reproduces the shadow recipes' scales; truth within bounds",
                                        "histogram bounds, hand-worked",
                                        "Student-t(10) kurtosis is 4",
                                        "plots render (gnuplot exit 0, PNG 1000x560), errors reported",
                                        "report on NaN bursts, zeros, one tensor",
                                        "bad input: missing file, not HDF5, empty run, no loss"};
    static void (*const fns[])(void) = {test_jump_events, test_replay_truth, test_hist_bounds, test_student_t_kurtosis,
                                        test_plots_render, test_report_nan_and_single, test_bad_input};
    add_suite("analyses", names, fns, 7);
}
