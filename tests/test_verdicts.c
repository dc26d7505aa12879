/*
 * test_verdicts.c — suite "verdicts": synthetic runs whose right answer is
 * known by construction, one per question the report answers.  Each factor
 * on its own (a drifting tensor where only timing matters, per-block scales
 * where only granularity matters, a wide-range gradient where only the
 * format matters), a warm-up that is the only underflow, a replay from
 * statistics recorded every 10 steps that must still be exact, a run that
 * lacks the like-for-like recipe, blocks that move against a tensor that
 * does not, a loss difference inside and outside the noise floor, one
 * overflow that is not evidence, and summary.json / check.
 */
#include <gsl/gsl_randist.h>
#include <gsl/gsl_rng.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "an_util.h"
#include "analysis.h"
#include "compare.h"
#include "contrasts.h"
#include "factors.h"
#include "fp8_probe.h"
#include "keys.h"
#include "tests.h"

typedef test_gen_fn gen_fn;

typedef struct {
    const char *name;
    fp8_role role;
    size_t rows, cols;
} tspec;

/* A run of `steps` steps: every tensor under `active` with `shadows`. */
static void write_run(const char *path, const tspec *ts, int nt, const char *active, const char *const *shadows, int ns,
                      int64_t steps, gen_fn gen, const fp8_probe_options *opt, unsigned long seed)
{
    test_tensor t[8];
    for (int k = 0; k < nt && k < 8; k++)
        t[k] = (test_tensor){ts[k].name, ts[k].role, ts[k].rows, ts[k].cols, active, shadows, ns};
    const test_run_extra x = {opt, NULL, 0, NULL, NULL};
    test_write_run(path, t, nt, steps, gen, seed, &x);
}

static an_ctx open_runs(const char *const *paths, int n, const char *outdir) { return test_an_open(paths, n, outdir, 400); }
static void close_runs(an_ctx *c) { test_an_close(c); }

static int rid(const an_run *a, const char *spec)
{
    fp8_recipe r;
    if (fp8_recipe_parse(spec, &r) != FP8_OK)
        return -1;
    for (int k = 0; k < a->run->nrecipes; k++)
        if (strcmp(a->run->recipe_spec[k], r.spec) == 0)
            return k;
    return -1;
}

/* The contrast of tensor t between two specs, oriented a -> b (NULL: none). */
static const an_contrast *contrast(an_ctx *c, an_run *a, int t, const char *sa, const char *sb, int *flip)
{
    int x = rid(a, sa), y = rid(a, sb);
    if (x < 0 || y < 0)
        return NULL;
    return an_find_contrast(c, a, t, an_canon(a, t, x), an_canon(a, t, y), flip);
}

/* ---- timing only: a tensor whose amax grows 19% a step ------------------------ */

static void gen_drift(gsl_rng *r, int64_t s, int t, float *x, size_t rows, size_t cols)
{
    (void)t;
    double sd = pow(2.0, (double)s / 4.0);
    for (size_t i = 0; i < rows * cols; i++)
        x[i] = (float)gsl_ran_gaussian(r, sd);
}

static void test_timing_only(void)
{
    mkdir("build/t_vd", 0777);
    const tspec ts[] = {{"layers.0.drift.input", FP8_ROLE_ACTIVATION, 16, 256}};
    const char *sh[] = {"e4m3:current", "e4m3:block=1x128:eps=0"};
    write_run("build/t_vd/drift.h5", ts, 1, "e4m3:delayed:history=16", sh, 2, 60, gen_drift, NULL, 1);
    const char *p[] = {"build/t_vd/drift.h5"};
    an_ctx c = open_runs(p, 1, "build/t_vd/drift");
    an_run *a = &c.runs[0];
    an_vinfo vi;
    CU_ASSERT_EQUAL(an_tensor_verdict(&c, a, 0, &vi), AN_VERDICT_JIT);
    CU_ASSERT_EQUAL(vi.D, rid(a, "e4m3:delayed:history=16"));
    CU_ASSERT_EQUAL(vi.C, rid(a, "e4m3:current"));
    CU_ASSERT(vi.events_d >= 40 && vi.events_c == 0); /* the stale scale is behind at nearly every step */
    CU_ASSERT_EQUAL(vi.steps_d, 59);                  /* every step after the warm-up step 0 */
    int flip;
    const an_contrast *k = contrast(&c, a, 0, "e4m3:delayed:history=16", "e4m3:current", &flip);
    CU_ASSERT_PTR_NOT_NULL_FATAL(k);
    CU_ASSERT_EQUAL(k->factor, AN_F_TIMING);
    CU_ASSERT_EQUAL(flip, 0);
    CU_ASSERT_EQUAL(an_contrast_sign(k), 1); /* current is better: the clipped values cost SQNR */
    /* granularity is not the answer here: i.i.d. values, blocks gain under a dB */
    k = contrast(&c, a, 0, "e4m3:current", "e4m3:block=1x128:eps=0", &flip);
    CU_ASSERT_PTR_NOT_NULL_FATAL(k);
    CU_ASSERT(k->d.mean < 1.0);
    close_runs(&c);
}

/* ---- granularity only: fixed per-block scales over 24 binades ---------------- */

static float block_scale[32][4];

static void gen_blocks(gsl_rng *r, int64_t s, int t, float *x, size_t rows, size_t cols)
{
    (void)s, (void)t;
    for (size_t i = 0; i < rows; i++)
        for (size_t j = 0; j < cols; j++)
            x[i * cols + j] = (float)((gsl_rng_uniform(r) * 1.98 - 0.99) * block_scale[i][j / 128]);
    x[0] = 1.0f; /* the tensor's amax: the same at every step */
}

static void test_granularity_only(void)
{
    gsl_rng *r = gsl_rng_alloc(gsl_rng_mt19937);
    gsl_rng_set(r, 2);
    for (int i = 0; i < 32; i++)
        for (int j = 0; j < 4; j++)
            block_scale[i][j] = (float)pow(2.0, -24.0 * gsl_rng_uniform(r));
    block_scale[0][0] = 1.0f;
    gsl_rng_free(r);
    const tspec ts[] = {{"layers.0.blocks.input", FP8_ROLE_ACTIVATION, 32, 512}};
    const char *sh[] = {"e4m3:current", "e4m3:block=1x128:eps=0"};
    write_run("build/t_vd/blocks.h5", ts, 1, "e4m3:delayed", sh, 2, 30, gen_blocks, NULL, 3);
    const char *p[] = {"build/t_vd/blocks.h5"};
    an_ctx c = open_runs(p, 1, "build/t_vd/blocks");
    an_run *a = &c.runs[0];
    an_vinfo vi;
    CU_ASSERT_EQUAL(an_tensor_verdict(&c, a, 0, &vi), AN_VERDICT_BLOCK);
    CU_ASSERT_EQUAL(vi.B, rid(a, "e4m3:block=1x128:eps=0"));
    CU_ASSERT(vi.under_c > 0.1);   /* per-tensor scaling flushes the small blocks */
    CU_ASSERT(vi.under_b < 0.005); /* each 1x128 block scaled on its own does not */
    CU_ASSERT_EQUAL(vi.events_d, 0);
    /* timing changes nothing: the amax is constant, delayed == current bit for bit */
    int flip;
    const an_contrast *k = contrast(&c, a, 0, "e4m3:delayed", "e4m3:current", &flip);
    CU_ASSERT_PTR_NOT_NULL_FATAL(k);
    CU_ASSERT_EQUAL(k->d.mean, 0.0);
    CU_ASSERT_EQUAL(an_contrast_sign(k), 0);
    close_runs(&c);
}

/* ---- format only: a gradient spread log-uniformly over 30 binades ------------- */

static void gen_wide(gsl_rng *r, int64_t s, int t, float *x, size_t rows, size_t cols)
{
    (void)s, (void)t;
    for (size_t i = 0; i < rows * cols; i++)
        x[i] = (float)((gsl_rng_uniform(r) < 0.5 ? -1 : 1) * pow(2.0, -30.0 * gsl_rng_uniform(r)));
    x[0] = 1.0f;
}

static void test_format_only(void)
{
    const tspec ts[] = {{"layers.0.wide.grad_output", FP8_ROLE_GRADIENT, 16, 512}};
    const char *sh[] = {"e4m3:delayed", "e4m3:current", "e5m2:current"};
    write_run("build/t_vd/wide.h5", ts, 1, "e5m2:delayed", sh, 3, 30, gen_wide, NULL, 4);
    const char *p[] = {"build/t_vd/wide.h5"};
    an_ctx c = open_runs(p, 1, "build/t_vd/wide");
    an_run *a = &c.runs[0];
    int flip;
    /* E5M2 -> E4M3 under either timing: E4M3's extra mantissa bit wins ~6 dB of
     * SQNR (the energy sits in the top binades) ... */
    const char *pairs[2][2] = {{"e5m2:delayed", "e4m3:delayed"}, {"e5m2:current", "e4m3:current"}};
    for (int i = 0; i < 2; i++) {
        const an_contrast *k = contrast(&c, a, 0, pairs[i][0], pairs[i][1], &flip);
        CU_ASSERT_PTR_NOT_NULL_FATAL(k);
        CU_ASSERT_EQUAL(k->factor, AN_F_FORMAT);
        CU_ASSERT_EQUAL(flip, 0);
        CU_ASSERT_EQUAL(an_contrast_sign(k), 1);
        CU_ASSERT(k->d.mean > 5.0 && k->d.mean < 7.0);
    }
    /* ... and pays for it in flushed values: E4M3's window spans ~18 of the 30
     * binades below amax, E5M2's ~32 */
    const an_sstats *s4 = an_series_cached(a, 0, rid(a, "e4m3:current")), *s5 = an_series_cached(a, 0, rid(a, "e5m2:current"));
    CU_ASSERT(s4->underflow_rate > 0.35 && s4->underflow_rate < 0.45);
    CU_ASSERT(s5->underflow_rate < 0.001);
    /* timing: nothing (constant amax) */
    const an_contrast *k = contrast(&c, a, 0, "e5m2:delayed", "e5m2:current", &flip);
    CU_ASSERT_PTR_NOT_NULL_FATAL(k);
    CU_ASSERT_EQUAL(k->d.mean, 0.0);
    an_vinfo vi;
    CU_ASSERT_EQUAL(an_tensor_verdict(&c, a, 0, &vi), AN_VERDICT_SAFE);
    close_runs(&c);
}

/* ---- warm-up is the only underflow ----------------------------------------------- */

static void gen_tiny(gsl_rng *r, int64_t s, int t, float *x, size_t rows, size_t cols)
{
    (void)s, (void)t;
    for (size_t i = 0; i < rows * cols; i++)
        x[i] = (float)gsl_ran_gaussian(r, 1e-6);
    x[0] = 5e-6f; /* a constant amax */
}

static void test_warmup_only(void)
{
    const tspec ts[] = {{"layers.0.tiny.grad_output", FP8_ROLE_GRADIENT, 8, 256}};
    const char *sh[] = {"e4m3:current", "e4m3:block=1x128:eps=0"};
    write_run("build/t_vd/tiny.h5", ts, 1, "e4m3:delayed", sh, 2, 10, gen_tiny, NULL, 5);
    const char *p[] = {"build/t_vd/tiny.h5"};
    an_ctx c = open_runs(p, 1, "build/t_vd/tiny");
    an_run *a = &c.runs[0];
    CU_ASSERT_EQUAL(a->warm_end[0], 1); /* step 0 had the initial scale 1 */
    const an_sstats *d = an_series_cached(a, 0, rid(a, "e4m3:delayed")), *cu = an_series_cached(a, 0, rid(a, "e4m3:current"));
    /* at scale 1, values near 1e-6 all flush to zero: the warm-up's cost ... */
    CU_ASSERT_EQUAL(d->warm_records, 1);
    CU_ASSERT(d->warm_underflows > 0.99 * d->warm_numel);
    /* ... which is not behaviour: afterwards delayed casts exactly as current */
    CU_ASSERT_EQUAL(d->records, 9);
    CU_ASSERT_EQUAL(d->underflow_rate, cu->underflow_rate);
    CU_ASSERT(d->underflow_rate < 0.001);
    an_vinfo vi;
    CU_ASSERT_EQUAL(an_tensor_verdict(&c, a, 0, &vi), AN_VERDICT_SAFE);
    CU_ASSERT_EQUAL(an_compare(&c), 0);
    close_runs(&c);
}

/* ---- replay from statistics every 10 steps is still exact ----------------------- */

static void gen_walk(gsl_rng *r, int64_t s, int t, float *x, size_t rows, size_t cols)
{
    static double level;
    (void)t;
    if (s == 0)
        level = 0;
    level += 0.1 + gsl_ran_gaussian(r, 0.4); /* log2 amax: a random walk that drifts up */
    for (size_t i = 0; i < rows * cols; i++)
        x[i] = (float)(gsl_ran_gaussian(r, 1.0) * pow(2.0, level));
}

/* the number of TE-default delayed overflow events, from an independent
 * recipe state fed the same tensors at every step */
static size_t truth_events(int64_t steps, size_t rows, size_t cols, unsigned long seed)
{
    fp8_recipe rc;
    CU_ASSERT_EQUAL(fp8_recipe_parse("e4m3:delayed", &rc), FP8_OK);
    fp8_recipe_state *st = fp8_recipe_state_alloc(&rc, FP8_ROLE_ACTIVATION);
    float *x = malloc(rows * cols * sizeof *x);
    gsl_rng *r = gsl_rng_alloc(gsl_rng_mt19937);
    gsl_rng_set(r, seed);
    size_t ev = 0;
    for (int64_t s = 0; s < steps; s++) {
        gen_walk(r, s, 0, x, rows, cols);
        fp8_stats q;
        fp8_quantize(st, x, rows, cols, NULL, &q);
        ev += s > 0 && q.overflows > 0; /* step 0 is the warm-up */
        fp8_recipe_state_step(st);
    }
    fp8_recipe_state_free(st);
    gsl_rng_free(r);
    free(x);
    return ev;
}

static long tsv_field_long(const char *path, int row, int col)
{
    FILE *f = fopen(path, "r");
    char line[4096];
    long v = -1;
    for (int i = 0; f && fgets(line, sizeof line, f); i++) {
        if (i != row)
            continue;
        char *tab[40];
        int k = 0;
        for (char *q = strtok(line, "\t\n"); q && k < 40; q = strtok(NULL, "\t\n"))
            tab[k++] = q;
        if (col < k)
            v = atol(tab[col]);
    }
    if (f)
        fclose(f);
    return v;
}

static void test_replay_every_k(void)
{
    const tspec ts[] = {{"layers.0.walk.input", FP8_ROLE_ACTIVATION, 8, 256}};
    const char *sh[] = {"e4m3:current"};
    fp8_probe_options o = fp8_probe_defaults();
    o.every = 10;
    write_run("build/t_vd/walk10.h5", ts, 1, "e4m3:delayed", sh, 1, 400, gen_walk, &o, 6);
    o.series = 0; /* the old files: no every-step rows */
    write_run("build/t_vd/walk10_old.h5", ts, 1, "e4m3:delayed", sh, 1, 400, gen_walk, &o, 6);
    size_t truth = truth_events(400, 8, 256, 6);
    CU_ASSERT(truth > 20);
    const char *p[] = {"build/t_vd/walk10.h5"};
    an_ctx c = open_runs(p, 1, "build/t_vd/walk10");
    CU_ASSERT_EQUAL(an_replay(&c), 0);
    /* replay_settings.tsv row 1 + (1024, max, 0) = index 40: events (column 6) */
    CU_ASSERT_EQUAL(tsv_field_long("build/t_vd/walk10/replay_settings.tsv", 1 + 40, 1), 1024);
    CU_ASSERT_EQUAL(tsv_field_long("build/t_vd/walk10/replay_settings.tsv", 1 + 40, 6), (long)truth);
    /* the recorded delayed recipe's scales replayed at all 400 steps */
    CU_ASSERT_EQUAL(tsv_field_long("build/t_vd/walk10/replay_truth.tsv", 1, 3), 400);
    CU_ASSERT_EQUAL(tsv_field_long("build/t_vd/walk10/replay_truth.tsv", 1, 4), 400);
    /* compare counts the same events at every step */
    const an_sstats *s = an_series_cached(&c.runs[0], 0, rid(&c.runs[0], "e4m3:delayed"));
    CU_ASSERT_EQUAL(s->events, truth);
    CU_ASSERT_EQUAL(s->event_steps, 399);
    CU_ASSERT_EQUAL(s->every_step, 1);
    close_runs(&c);
    /* without the every-step rows the replay sees every 10th amax: its
     * scales miss the recorded ones and it says so */
    const char *q[] = {"build/t_vd/walk10_old.h5"};
    c = open_runs(q, 1, "build/t_vd/walk10_old");
    char *md = NULL;
    size_t mdn = 0;
    fclose(c.md);
    c.md = open_memstream(&md, &mdn);
    CU_ASSERT_EQUAL(an_replay(&c), 0);
    fclose(c.md);
    c.md = NULL;
    CU_ASSERT(strstr(md, "no every-step amax") != NULL);
    long match = tsv_field_long("build/t_vd/walk10_old/replay_truth.tsv", 1, 4);
    CU_ASSERT(match < 40); /* of its 40 recorded steps */
    free(md);
    close_runs(&c);
}

/* ---- a run without the like-for-like recipe ---------------------------------- */

static void test_confound_refused(void)
{
    /* the old report's confound: hybrid delayed on a gradient (E5M2), e5m2
     * current and E4M3 blocks; no E5M2 block recipe to compare with */
    const tspec ts[] = {{"layers.0.blocks.grad_output", FP8_ROLE_GRADIENT, 32, 512}};
    const char *sh[] = {"e4m3:current", "e5m2:current", "e4m3:block=1x128:eps=0"};
    write_run("build/t_vd/confound.h5", ts, 1, "hybrid:delayed", sh, 3, 20, gen_blocks, NULL, 7);
    const char *p[] = {"build/t_vd/confound.h5"};
    an_ctx c = open_runs(p, 1, "build/t_vd/confound");
    an_run *a = &c.runs[0];
    int flip;
    CU_ASSERT_PTR_NULL(contrast(&c, a, 0, "e5m2:current", "e4m3:block=1x128:eps=0", &flip));
    const an_contrast *k = contrast(&c, a, 0, "e4m3:current", "e4m3:block=1x128:eps=0", &flip);
    CU_ASSERT_PTR_NOT_NULL_FATAL(k);
    CU_ASSERT_EQUAL(k->factor, AN_F_GRANULARITY);
    an_vinfo vi;
    an_verdict v = an_tensor_verdict(&c, a, 0, &vi);
    CU_ASSERT_EQUAL(vi.C, rid(a, "e5m2:current"));
    CU_ASSERT_EQUAL(vi.B, -1); /* no E5M2 block recipe: blocks cannot be judged against E5M2 */
    CU_ASSERT(v != AN_VERDICT_BLOCK);
    close_runs(&c);
}

/* ---- blocks that move vs blocks that move with the tensor --------------------- */

static double common_level, block_level[8][2];

static void gen_dyn(gsl_rng *r, int64_t s, int t, float *x, size_t rows, size_t cols)
{
    (void)s;
    common_level = gsl_ran_gaussian(r, 0.3);
    for (size_t i = 0; i < rows; i++)
        for (size_t b = 0; b < 2; b++)
            block_level[i][b] = -6.0 * gsl_rng_uniform(r);
    for (size_t i = 0; i < rows; i++)
        for (size_t j = 0; j < cols; j++) {
            double u = gsl_rng_uniform(r) * 0.5 + 0.25;
            /* tensor 0: each block's scale redrawn every step; tensor 1: a fixed pattern times a common factor */
            double lv = t == 0 ? block_level[i][j / 128] : -3.0 * (double)((i + j / 128) % 3);
            x[i * cols + j] = (float)(u * pow(2.0, lv + (t == 1 ? common_level : 0)));
        }
    /* tensor 0's amax: 8 times a small random walk */
    if (t == 0)
        x[0] = (float)(8.0 * pow(2.0, 0.1 * common_level));
}

static void test_dynamics_claim(void)
{
    const tspec ts[] = {{"layers.0.moving.input", FP8_ROLE_ACTIVATION, 8, 256},
                        {"layers.0.together.input", FP8_ROLE_ACTIVATION, 8, 256}};
    fp8_probe_options o = fp8_probe_defaults();
    o.block_amax_every = 4;
    o.every = 4;
    write_run("build/t_vd/dyn.h5", ts, 2, "e4m3:current", NULL, 0, 200, gen_dyn, &o, 8);
    const char *p[] = {"build/t_vd/dyn.h5"};
    an_ctx c = open_runs(p, 1, "build/t_vd/dyn");
    CU_ASSERT_EQUAL(an_dynamics(&c), 0);
    FILE *f = fopen("build/t_vd/dyn/dynamics_volatility.tsv", "r");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    char line[2048];
    int seen = 0;
    CU_ASSERT_PTR_NOT_NULL(fgets(line, sizeof line, f));
    while (fgets(line, sizeof line, f)) {
        char *tab[16];
        int k = 0;
        for (char *q = strtok(line, "\t\n"); q && k < 16; q = strtok(NULL, "\t\n"))
            tab[k++] = q;
        CU_ASSERT_EQUAL_FATAL(k, 8);
        double ratio = atof(tab[5]), lo = atof(tab[6]), hi = atof(tab[7]);
        CU_ASSERT(lo <= ratio && ratio <= hi);
        if (!strcmp(tab[1], "layers.0.moving.input")) {
            CU_ASSERT(lo >= 2); /* the blocks move 8 times as much as the tensor */
        } else {
            CU_ASSERT(lo <= 1 && 1 <= hi); /* the blocks move as the tensor does */
        }
        seen++;
    }
    fclose(f);
    CU_ASSERT_EQUAL(seen, 2);
    close_runs(&c);
}

/* ---- one overflow is not evidence; E5M2's tie overflows ------------------------ */

static void test_minimum_evidence(void)
{
    const fp8_format *e5 = fp8_format_find("e5m2", NULL), *e4 = fp8_format_find("e4m3", NULL);
    const fp8_cast_mode m = {0};
    CU_ASSERT_EQUAL(an_overflows_at(e5, &m, 61440.0f, 1.0f, 0), 1); /* ties to 2^16: past max */
    CU_ASSERT_EQUAL(an_overflows_at(e5, &m, 61439.0f, 1.0f, 0), 0);
    CU_ASSERT_EQUAL(an_overflows_at(e4, &m, 464.0f, 1.0f, 0), 0); /* ties to 448 */
    CU_ASSERT_EQUAL(an_overflows_at(e4, &m, 465.0f, 1.0f, 0), 1);
    CU_ASSERT_EQUAL(an_overflows_at(e4, &m, 1.0f, 1.0f, 1), 1); /* an Inf input */
    /* the verdict's threshold itself: the jump test of suite "analyses" has one event */
}

/* ---- summary.json and check --------------------------------------------------- */

static int sh(const char *fmt, const char *arg, char *out, size_t cap) { return test_run_cli(fmt, arg, out, cap); }

static void test_summary_json_and_check(void)
{
    static char out[1 << 16];
    CU_ASSERT_EQUAL(sh("%s report build/t_vd/drift.h5 build/t_vd/wide.h5 --boot 100 -o build/t_vd/rep %s 2>/dev/null", "",
                       out, sizeof out), 0);
    FILE *f = fopen("build/t_vd/rep/summary.json", "r");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    size_t n = fread(out, 1, sizeof out - 1, f);
    out[n] = 0;
    fclose(f);
    CU_ASSERT(strstr(out, "\"comparisons\": [") != NULL);
    CU_ASSERT(strstr(out, "\"factor\": \"timing\"") != NULL);
    CU_ASSERT(strstr(out, "\"factor\": \"format\"") != NULL);
    CU_ASSERT(strstr(out, "\"a\": \"e5m2:current:eps=0\", \"b\": \"e4m3:current:eps=0\"") != NULL);
    CU_ASSERT(strstr(out, "\"scale_match_fraction\": 1,") != NULL);
    CU_ASSERT(strstr(out, "\"warmup\": [") != NULL && strstr(out, "\"steps_excluded\": 1") != NULL);
    CU_ASSERT(strstr(out, "\"loss\": []") != NULL); /* no loss series in these runs */
    /* check: the drift run breaks an overflow budget (exit 1), meets a loose one */
    CU_ASSERT_EQUAL(sh("%s check build/t_vd/drift.h5 --max-overflow-events 5 %s", "", out, sizeof out), 1);
    CU_ASSERT(strstr(out, "layers.0.drift.input under e4m3:delayed:history=16") != NULL);
    CU_ASSERT_EQUAL(sh("%s check build/t_vd/drift.h5 --max-overflow-events 100 %s", "", out, sizeof out), 0);
    CU_ASSERT_EQUAL(sh("%s check build/t_vd/wide.h5 --recipe e4m3:current --max-underflow-pct 1 --json %s", "", out,
                       sizeof out), 1);
    CU_ASSERT(strstr(out, "\"budget\": \"underflow %\"") != NULL && strstr(out, "\"pass\": false") != NULL);
    CU_ASSERT_EQUAL(sh("%s check build/t_vd/wide.h5 %s 2>&1", "", out, sizeof out), 2); /* no budget */
    CU_ASSERT(strstr(out, "no budget given") != NULL);
    CU_ASSERT_EQUAL(sh("%s check build/t_vd/wide.h5 --recipe e4m3:delyed --max-overflow-events 0 %s 2>&1", "", out,
                       sizeof out), 2);
}

/* ---- the report summary's lines follow the scenarios ------------------------ */

static void test_summary_lines(void)
{
    /* the scenario runs of the tests above (written there) */
    const char *pd[] = {"build/t_vd/drift.h5"}, *pw[] = {"build/t_vd/wide.h5"}, *pb[] = {"build/t_vd/blocks.h5"};
    an_ctx c = open_runs(pd, 1, "build/t_vd/drift");
    CU_ASSERT_EQUAL_FATAL(an_compare(&c), 0);
    /* one tensor, drifting: delayed overflows at nearly every step; current is better */
    CU_ASSERT_PTR_NOT_NULL_FATAL(c.key[AN_Q_WHERE]);
    CU_ASSERT(strstr(c.key[AN_Q_WHERE], "**Yes** — in the 1 run that cast with delayed scaling, 1 of 1 tensors "
                                        "overflowed at 3 or more steps after warm-up") != NULL);
    CU_ASSERT(strstr(c.key[AN_Q_WHERE], "most events: `layers.0.drift.input` (") != NULL);
    CU_ASSERT(strstr(c.key[AN_Q_WHERE], "per tensor and run: delayed is safe 0, needs JIT 1, needs blocks 0") != NULL);
    CU_ASSERT_STRING_EQUAL(c.key_anchor[AN_Q_WHERE],
                           "across-the-runs-where-delayed-scaling-overflows-and-the-verdict-per-tensor");
    CU_ASSERT_PTR_NOT_NULL_FATAL(c.key[AN_Q_JIT]);
    CU_ASSERT(strstr(c.key[AN_Q_JIT], "activations, e4m3 delayed h=16,max,m=0 → e4m3 current: the median step gains +") !=
              NULL);
    CU_ASSERT(strstr(c.key[AN_Q_JIT], "95% CI above 0 in the run") != NULL);
    CU_ASSERT_PTR_NULL(c.key[AN_Q_FORMAT]); /* no two recipes differ in the format alone */
    close_runs(&c);
    c = open_runs(pw, 1, "build/t_vd/wide");
    CU_ASSERT_EQUAL_FATAL(an_compare(&c), 0);
    /* the wide gradient: E4M3 ~+6 dB, flushing ~40% (E5M2 ~0) */
    CU_ASSERT_PTR_NOT_NULL_FATAL(c.key[AN_Q_FORMAT]);
    const char *g = strstr(c.key[AN_Q_FORMAT], "gradients +");
    CU_ASSERT_PTR_NOT_NULL_FATAL(g);
    double lo = atof(g + 10);
    CU_ASSERT(lo > 5.0 && lo < 7.0);
    const char *fl = strstr(c.key[AN_Q_FORMAT], "E4M3 flushes ");
    CU_ASSERT_PTR_NOT_NULL_FATAL(fl);
    double pct = atof(fl + 13);
    CU_ASSERT(pct > 35 && pct < 45);
    close_runs(&c);
    /* constant amax: the delayed and current rows are equal in every number,
     * so the table prints them once, joined */
    c = open_runs(pb, 1, "build/t_vd/blocks");
    fclose(c.md);
    char *md = NULL;
    size_t mdn = 0;
    c.md = open_memstream(&md, &mdn);
    CU_ASSERT_EQUAL_FATAL(an_compare(&c), 0);
    fflush(c.md);
    CU_ASSERT(strstr(md, "| activation | e4m3 delayed h=1024,max,m=0 (active) = e4m3 current |") != NULL);
    CU_ASSERT(strstr(md, "behave identically") != NULL);
    close_runs(&c);
    free(md);
}

void register_verdicts_tests(void)
{
    static CU_TestInfo tests[] = {
        {"timing only: a drifting tensor needs JIT", test_timing_only},
        {"granularity only: per-block scales need blocks", test_granularity_only},
        {"format only: E4M3 +6 dB, flushes 40% vs E5M2's ~0", test_format_only},
        {"warm-up is the only underflow: excluded, counted apart", test_warmup_only},
        {"replay from statistics every 10 steps is exact (every-step amax)", test_replay_every_k},
        {"a run lacking the like-for-like recipe is not judged on another format", test_confound_refused},
        {"dynamics: moving blocks are more volatile than their tensor, blocks moving with it are not", test_dynamics_claim},
        {"minimum evidence for needs JIT; E5M2's tie is an overflow", test_minimum_evidence},
        {"summary.json and check exit statuses", test_summary_json_and_check},
        {"the report summary's lines follow the scenarios; equal rows merge", test_summary_lines},
        CU_TEST_INFO_NULL,
    };
    add_suite("verdicts", tests);
}
