/*
 * test_answers.c — suite "answers": synthetic runs whose answer to the
 * questions the report exists for is known by construction.
 *
 *  - the claim "per-tensor amax suits delayed scaling, per-block amax suits
 *    just-in-time scaling": blocks whose per-block delayed scale overflows
 *    while the per-tensor one does not (supported), blocks that move with
 *    their tensor (not supported: the same scales, so the same costs),
 *    too few steps (cannot tell);
 *  - Smooth SwiGLU on identical tensors: its gain re-derived by hand, in
 *    two runs that drift apart elsewhere (the placebo measures how far);
 *  - loss replicates of known spread: equivalent, different, cannot tell,
 *    and no replicates at all;
 *  - a mean carried by one spike: the median beside it, the step named;
 *  - a granularity pair that differs only in an eps no amax reached is
 *    paired; where eps binds, the report says why and advises nothing the
 *    run already records;
 *  - a record-only run is named so, and the baseline follows a stated rule
 *    rather than the order of the files;
 *  - overflow events by phase of the learning-rate schedule.
 */
#include <gsl/gsl_randist.h>
#include <gsl/gsl_rng.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "an_util.h"
#include "fp8_format.h"
#include "tests.h"

/* ---- writing and reading runs --------------------------------------------- */

typedef test_gen_fn gen_fn;
typedef test_tensor tdecl;

/* A run with metadata kv (nkv pairs) and, when loss is given, the scalar
 * "loss" at every step. */
static void write_run(const char *path, const tdecl *ts, int nt, int64_t steps, gen_fn gen, unsigned long seed,
                      const char *const *kv, int nkv, double (*loss)(int64_t step, const void *arg),
                      const void *loss_arg)
{
    const test_run_extra x = {NULL, kv, nkv, loss, loss_arg};
    test_write_run(path, ts, nt, steps, gen, seed, &x);
}

static an_ctx open_runs(const char *const *paths, int n, const char *outdir) { return test_an_open(paths, n, outdir, 400); }
static void close_runs(an_ctx *c) { test_an_close(c); }

/* A whole file into a NUL-terminated buffer (NULL when unreadable). */
static char *slurp(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = malloc((size_t)n + 1);
    if (b && fread(b, 1, (size_t)n, f) != (size_t)n) {
        free(b);
        b = NULL;
    }
    if (b)
        b[n] = 0;
    fclose(f);
    return b;
}

/* The fields of the first row of a TSV whose column k0 is v0 and column k1
 * is v1 (k1 < 0: no second key), empty fields kept; the field count, 0
 * when no row matches.  The fields point into *buf (free it). */
#define MAXF 40
static int tsv_row(const char *path, int k0, const char *v0, int k1, const char *v1, char **buf, char *f[MAXF])
{
    *buf = slurp(path);
    for (char *line = *buf; line && *line;) {
        char *next = strchr(line, '\n');
        if (next)
            *next++ = 0;
        int n = 0;
        for (char *q = line; q && n < MAXF;)
            f[n++] = strsep(&q, "\t");
        if (n > k0 && !strcmp(f[k0], v0) && (k1 < 0 || (n > k1 && !strcmp(f[k1], v1))))
            return n;
        line = next ? next : line + strlen(line);
    }
    return 0;
}

/* ---- the claim: delayed scaling at tensor and block granularity ----------- */

#define CLAIM_H 16
static const char *const claim_recipes[] = {"e4m3:delayed:history=16", "e4m3:current",
                                            "e4m3:block=1x128:delayed,history=16,eps=0", "e4m3:block=1x128:eps=0"};

/* Supported by construction: the tensor's amax is one fixed value (x[0] =
 * 64, larger than anything else), so per-tensor delayed and current scales
 * are equal and the tensor cost is exactly 0; every other 1x128 block has
 * a level drawn afresh each step, so a block position's history is stale
 * and its delayed scale overflows whenever the block reaches a new high. */
static void gen_blocks_move(gsl_rng *r, int64_t s, int t, float *x, size_t rows, size_t cols)
{
    (void)s, (void)t;
    for (size_t i = 0; i < rows; i++)
        for (size_t b = 0; b < cols / 128; b++) {
            double level = pow(2.0, -4.0 * gsl_rng_uniform(r));
            for (size_t j = b * 128; j < (b + 1) * 128; j++) {
                double v = gsl_ran_gaussian(r, 1.0);
                v = v > 4 ? 4 : v < -4 ? -4 : v;
                x[i * cols + j] = (float)(level * v);
            }
        }
    x[0] = 64.0f;
}

/* Not supported by construction: every block's amax is 3 g exactly (its
 * first element; the rest are clipped below it), g drawn afresh each step,
 * so every block's delayed and current scales equal the tensor's: the two
 * costs are equal at every step.  (The strict reverse of the supported
 * case, a tensor whose delayed scale overflows while its blocks' do not,
 * cannot happen with algo=max and one history length: the tensor's history
 * max is the max of its blocks'.) */
static void gen_blocks_with_tensor(gsl_rng *r, int64_t s, int t, float *x, size_t rows, size_t cols)
{
    (void)s, (void)t;
    float g = (float)pow(2.0, -4.0 * gsl_rng_uniform(r));
    for (size_t i = 0; i < rows * cols; i++) {
        double v = gsl_ran_gaussian(r, 1.0);
        v = v > 2.9 ? 2.9 : v < -2.9 ? -2.9 : v;
        x[i] = (float)(g * v);
    }
    for (size_t i = 0; i < rows; i++)
        for (size_t b = 0; b < cols / 128; b++)
            x[i * cols + b * 128] = 3.0f * g;
}

/* Overflow events of per-block delayed scaling, by hand: at step s >= 1 a
 * block position's scale is 448 / (the max of its amaxes over steps
 * s-16..s-1); an event when some block's amax times it encodes past 448
 * (E4M3 rounds 464 to 448, anything larger past it).  Steps from 1 on
 * (step 0 is the warm-up). */
static size_t hand_block_events(gen_fn gen, unsigned long seed, int64_t steps, size_t rows, size_t cols)
{
    size_t nb = rows * (cols / 128), events = 0;
    float *x = malloc(rows * cols * sizeof *x), *hist = calloc(nb * (size_t)steps, sizeof *hist);
    gsl_rng *r = gsl_rng_alloc(gsl_rng_mt19937);
    gsl_rng_set(r, seed);
    for (int64_t s = 0; s < steps; s++) {
        gen(r, s, 0, x, rows, cols);
        int ev = 0;
        for (size_t b = 0; b < nb; b++) {
            size_t i = b / (cols / 128), j0 = (b % (cols / 128)) * 128;
            float a = 0;
            for (size_t j = j0; j < j0 + 128; j++)
                a = fmaxf(a, fabsf(x[i * cols + j]));
            hist[(size_t)s * nb + b] = a;
            if (s == 0)
                continue;
            float h = 0;
            for (int64_t k = s - CLAIM_H < 0 ? 0 : s - CLAIM_H; k < s; k++)
                h = fmaxf(h, hist[(size_t)k * nb + b]);
            float scale = 448.0f / h;
            ev |= a * scale > 464.0f;
        }
        events += (size_t)ev;
    }
    gsl_rng_free(r);
    free(x), free(hist);
    return events;
}

static double fld(char *const f[], int k) { return atof(f[k]); }

static void test_claim(void)
{
    const char *dir = test_path("claim");
    char p_sup[512], p_not[512], p_few[512], out[512];
    snprintf(p_sup, sizeof p_sup, "%s/blocks_move.h5", test_scratch_dir());
    snprintf(p_not, sizeof p_not, "%s/blocks_with_tensor.h5", test_scratch_dir());
    snprintf(p_few, sizeof p_few, "%s/few_steps.h5", test_scratch_dir());
    snprintf(out, sizeof out, "%s", dir);
    const tdecl t[] = {{"layers.0.attn.qkv.input", FP8_ROLE_ACTIVATION, 8, 256, claim_recipes[0], claim_recipes + 1, 3}};
    const int64_t steps = 120;
    write_run(p_sup, t, 1, steps, gen_blocks_move, 7, NULL, 0, NULL, NULL);
    write_run(p_not, t, 1, steps, gen_blocks_with_tensor, 7, NULL, 0, NULL, NULL);
    write_run(p_few, t, 1, 6, gen_blocks_move, 7, NULL, 0, NULL, NULL);
    const char *paths[] = {p_sup, p_not, p_few};
    an_ctx c = open_runs(paths, 3, out);
    CU_ASSERT_EQUAL_FATAL(an_claim(&c), 0);
    CU_ASSERT_EQUAL(an_json_write(&c), 0);
    close_runs(&c);

    char tsv[600], *buf, *f[MAXF];
    snprintf(tsv, sizeof tsv, "%s/claim_roles.tsv", out);
    /* supported: the tensor cost is exactly 0, the blocks' is not; the
     * block-delayed overflow events are the hand count's */
    int n = tsv_row(tsv, 0, "blocks_move", 1, "activation", &buf, f);
    CU_ASSERT_EQUAL_FATAL(n, 24);
    CU_ASSERT_EQUAL(atoi(f[5]), steps - 1); /* every step after the warm-up (step 0) */
    CU_ASSERT_EQUAL(fld(f, 6), 0.0);       /* tensor cost */
    CU_ASSERT(fld(f, 10) > 0.1);           /* block cost's interval above the margin */
    CU_ASSERT(fld(f, 13) > 0.1);           /* the difference's */
    CU_ASSERT_EQUAL(atoi(f[18]), 0);       /* per-tensor delayed: no overflow event */
    CU_ASSERT_EQUAL(atoi(f[19]), 0);
    CU_ASSERT_EQUAL((size_t)atoi(f[20]), hand_block_events(gen_blocks_move, 7, steps, 8, 256));
    CU_ASSERT(atoi(f[20]) >= 10);
    CU_ASSERT_EQUAL(atoi(f[21]), 0); /* per-block current never overflows */
    CU_ASSERT_STRING_EQUAL(f[23], "supported");
    free(buf);
    /* not supported: equal scales, equal costs at every step */
    n = tsv_row(tsv, 0, "blocks_with_tensor", 1, "activation", &buf, f);
    CU_ASSERT_EQUAL_FATAL(n, 24);
    CU_ASSERT(fld(f, 6) > 0.1);             /* delayed scaling costs, at tensor granularity */
    /* the same at block granularity: equal scales (block scales decode
     * with their own scale_inv, which may differ from 1 / scale in the last
     * bit, hence not bit for bit) */
    CU_ASSERT_DOUBLE_EQUAL(fld(f, 6), fld(f, 9), 1e-5);
    CU_ASSERT_DOUBLE_EQUAL(fld(f, 12), 0.0, 1e-5);
    CU_ASSERT(fld(f, 14) < 1e-5); /* the interval of the difference: [0, 0] but for those bits */
    CU_ASSERT(atoi(f[18]) > 0);
    CU_ASSERT_EQUAL(atoi(f[18]), atoi(f[20])); /* the tensor overflows exactly when its blocks do */
    CU_ASSERT_EQUAL((size_t)atoi(f[20]), hand_block_events(gen_blocks_with_tensor, 7, steps, 8, 256));
    CU_ASSERT_STRING_EQUAL(f[23], "not supported");
    free(buf);
    /* cannot tell: 5 steps after the warm-up */
    n = tsv_row(tsv, 0, "few_steps", 1, "activation", &buf, f);
    CU_ASSERT_EQUAL_FATAL(n, 24);
    CU_ASSERT_EQUAL(atoi(f[5]), 5);
    CU_ASSERT_STRING_EQUAL(f[23], "cannot tell");
    free(buf);
    /* summary.json carries the fixed names */
    snprintf(tsv, sizeof tsv, "%s/summary.json", out);
    char *js = slurp(tsv);
    CU_ASSERT_PTR_NOT_NULL_FATAL(js);
    CU_ASSERT(strstr(js, "{\"claim\": \"per_tensor_delayed_per_block_jit\", \"run\": \"blocks_move\", \"role\": "
                         "\"activation\", \"verdict\": \"supported\"") != NULL);
    CU_ASSERT(strstr(js, "\"run\": \"blocks_with_tensor\", \"role\": \"activation\", \"verdict\": \"not supported\"") !=
              NULL);
    CU_ASSERT(strstr(js, "\"run\": \"few_steps\", \"role\": \"activation\", \"verdict\": \"cannot tell\"") != NULL);
    CU_ASSERT(strstr(js, "\"tensor_cost\": {\"delta_sqnr_db\": 0, ") != NULL);
    CU_ASSERT(strstr(js, "\"block_cost\": {") != NULL && strstr(js, "\"ci95\": [") != NULL);
    free(js);
}

/* ---- Smooth SwiGLU on identical tensors, beside the placebo -------------- */

#define SW_ROWS 64
#define SW_COLS 256
#define SW_A 65536.0f

/* The down projection's input: N(0,1) with one outlier channel (7) of
 * +-2^16 at two tokens — under a per-tensor scale the rest of the tensor
 * falls to E4M3's subnormals, smoothed it does not.  The gate's input
 * (tensor 1) differs between the two runs (run seed 2: an outlier of 2^13
 * in it), the drift a cross-run comparison would mistake for smoothing. */
static int sw_drift_run;
static void gen_swiglu(gsl_rng *r, int64_t s, int t, float *x, size_t rows, size_t cols)
{
    (void)s;
    for (size_t i = 0; i < rows * cols; i++)
        x[i] = (float)gsl_ran_gaussian(r, 1.0);
    if (t == 0) {
        x[0 * cols + 7] = SW_A;
        x[1 * cols + 7] = -SW_A;
    } else if (sw_drift_run) {
        x[5] = 8192.0f;
    }
}

/* SQNR in dB of xh against x (double sums) */
static double sqnr(const float *x, const float *xh, size_t n)
{
    double s = 0, e = 0;
    for (size_t i = 0; i < n; i++)
        s += (double)x[i] * x[i], e += ((double)x[i] - xh[i]) * ((double)x[i] - xh[i]);
    return 10 * log10(s / e);
}

/* The published Smooth SwiGLU against the plain current-scaled cast, by
 * hand: s_j = 1 / max_i |x_ij|, y = x s, x_hat = Q(y) / s with Q the E4M3
 * cast at scale 448 / amax(y); the plain cast at 448 / amax(x).  The mean
 * over the steps of SQNR(smoothed) - SQNR(plain). */
static double hand_smooth_gain(unsigned long seed, int64_t steps)
{
    const fp8_format *e4 = fp8_format_find("e4m3", NULL);
    const fp8_cast_mode m = {0};
    size_t n = SW_ROWS * SW_COLS;
    float *x = malloc(n * sizeof *x), *y = malloc(n * sizeof *y), *q = malloc(n * sizeof *q), s[SW_COLS];
    gsl_rng *r = gsl_rng_alloc(gsl_rng_mt19937);
    gsl_rng_set(r, seed);
    float *other = malloc(n * sizeof *other);
    double sum = 0;
    for (int64_t st = 0; st < steps; st++) {
        gen_swiglu(r, st, 0, x, SW_ROWS, SW_COLS);
        gen_swiglu(r, st, 1, other, SW_ROWS, SW_COLS); /* the run's other tensor, to keep the stream in step */
        float ax = 0, ay = 0;
        for (size_t i = 0; i < n; i++)
            ax = fmaxf(ax, fabsf(x[i]));
        CU_ASSERT_EQUAL(fp8_format_qdq_array(e4, &m, 448.0f / ax, x, n, q, NULL), FP8_OK);
        double plain = sqnr(x, q, n);
        test_column_scales(x, SW_ROWS, SW_COLS, s);
        for (size_t i = 0; i < n; i++)
            y[i] = x[i] * s[i % SW_COLS], ay = fmaxf(ay, fabsf(y[i]));
        CU_ASSERT_EQUAL(fp8_format_qdq_array(e4, &m, 448.0f / ay, y, n, q, NULL), FP8_OK);
        for (size_t i = 0; i < n; i++)
            q[i] /= s[i % SW_COLS];
        sum += sqnr(x, q, n) - plain;
    }
    gsl_rng_free(r);
    free(x), free(y), free(q), free(other);
    return sum / (double)steps;
}

static void test_smooth_paired(void)
{
    const char *sh[] = {"e4m3:current:smooth"};
    const tdecl t[] = {{"layers.0.mlp.w2.input", FP8_ROLE_ACTIVATION, SW_ROWS, SW_COLS, "e4m3:current", sh, 1},
                       {"layers.0.mlp.w1.input", FP8_ROLE_ACTIVATION, SW_ROWS, SW_COLS, "e4m3:current", NULL, 0}};
    char pa[512], pb[512], out[512];
    snprintf(pa, sizeof pa, "%s/sw_seed1.h5", test_scratch_dir());
    snprintf(pb, sizeof pb, "%s/sw_seed2.h5", test_scratch_dir());
    snprintf(out, sizeof out, "%s", test_path("swiglu"));
    const char *kv1[] = {"recipe", "e4m3:current", "seed", "1", "data_seed", "1"};
    const char *kv2[] = {"recipe", "e4m3:current", "seed", "2", "data_seed", "1"};
    const int64_t steps = 40;
    sw_drift_run = 0;
    write_run(pa, t, 2, steps, gen_swiglu, 11, kv1, 3, NULL, NULL);
    sw_drift_run = 1;
    write_run(pb, t, 2, steps, gen_swiglu, 11, kv2, 3, NULL, NULL);
    const char *paths[] = {pa, pb};
    an_ctx c = open_runs(paths, 2, out);
    CU_ASSERT_EQUAL_FATAL(an_swiglu(&c), 0);
    CU_ASSERT_EQUAL(an_json_write(&c), 0);
    close_runs(&c);
    sw_drift_run = 0;
    double want = hand_smooth_gain(11, steps);
    CU_ASSERT(want > 10); /* the bulk leaves the subnormals: tens of dB */
    char tsv[600], *buf, *f[MAXF];
    snprintf(tsv, sizeof tsv, "%s/swiglu_paired.tsv", out);
    const char *runs[] = {"sw_seed1", "sw_seed2"};
    for (int k = 0; k < 2; k++) {
        /* identical down-projection inputs in both runs: the same gain, by hand */
        int n = tsv_row(tsv, 0, runs[k], 3, "published", &buf, f);
        CU_ASSERT_EQUAL_FATAL(n, 12);
        CU_ASSERT_STRING_EQUAL(f[1], "layers.0.mlp.w2.input");
        CU_ASSERT_EQUAL(atoi(f[5]), steps);
        CU_ASSERT_DOUBLE_EQUAL(fld(f, 6), want, 1e-3);
        CU_ASSERT(fld(f, 7) > 10 && fld(f, 7) <= fld(f, 6) && fld(f, 6) <= fld(f, 8));
        CU_ASSERT_EQUAL(atoi(f[10]), 0);
        CU_ASSERT_EQUAL(atoi(f[11]), 0);
        free(buf);
    }
    /* the placebo: the two runs differ in the seed alone, and the gate's
     * input moved by its median SQNR's difference */
    snprintf(tsv, sizeof tsv, "%s/swiglu_drift.tsv", out);
    int n = tsv_row(tsv, 0, "placebo", 3, "layers.0.mlp.w1.input", &buf, f);
    CU_ASSERT_EQUAL_FATAL(n, 7);
    CU_ASSERT_STRING_EQUAL(f[1], "sw_seed1");
    CU_ASSERT_DOUBLE_EQUAL(fld(f, 6), fld(f, 5) - fld(f, 4), 1e-6);
    CU_ASSERT(fabs(fld(f, 6)) > 1); /* drift of more than 1 dB that no smoothing caused */
    free(buf);
    n = tsv_row(tsv, 0, "placebo", 3, "layers.0.mlp.w2.input", &buf, f);
    CU_ASSERT_EQUAL_FATAL(n, 7);
    CU_ASSERT_EQUAL(fld(f, 6), 0.0); /* identical inputs do not drift */
    free(buf);
    snprintf(tsv, sizeof tsv, "%s/summary.json", out);
    char *js = slurp(tsv);
    CU_ASSERT_PTR_NOT_NULL_FATAL(js);
    CU_ASSERT(strstr(js, "\"smooth_swiglu\": [") != NULL);
    CU_ASSERT(strstr(js, "{\"run\": \"sw_seed1\", \"tensor\": \"layers.0.mlp.w2.input\", \"variant\": \"published\", "
                         "\"plain_recipe\": \"e4m3:current:eps=0\", \"plain_scales\": \"per-tensor\", \"paired\": true") !=
              NULL);
    CU_ASSERT(strstr(js, "\"events_plain\": 0, \"events_smooth\": 0") != NULL);
    free(js);
}

/* ---- loss equivalence with a measured floor ------------------------------ */

typedef struct {
    double tail;
    int64_t nan_from; /* > 0: the loss is NaN from this step on (a run that diverged) */
} loss_arg;

/* 2 + tail offset, the same decay for every run: the tail (last 10% of
 * 100 steps) of a run is its offset plus a known constant */
static double loss_curve(int64_t s, const void *arg)
{
    const loss_arg *a = arg;
    if (a->nan_from > 0 && s >= a->nan_from)
        return NAN;
    return a->tail + 0.5 * exp(-(double)s / 10.0);
}

static void gen_tiny(gsl_rng *r, int64_t s, int t, float *x, size_t rows, size_t cols)
{
    (void)s, (void)t;
    for (size_t i = 0; i < rows * cols; i++)
        x[i] = (float)gsl_ran_gaussian(r, 1.0);
}

static void write_loss_run_nan(const char *name, const char *recipe, int seed, double tail, int64_t nan_from)
{
    char path[600], sd[16];
    snprintf(path, sizeof path, "%s/%s.h5", test_scratch_dir(), name);
    snprintf(sd, sizeof sd, "%d", seed);
    const char *kv[] = {"recipe", recipe, "seed", sd, "data_seed", "1", "steps", "100"};
    const tdecl t[] = {{"layers.0.x.input", FP8_ROLE_ACTIVATION, 4, 32, "e4m3:current", NULL, 0}};
    loss_arg a = {tail, nan_from};
    write_run(path, t, 1, 100, gen_tiny, (unsigned long)seed, kv, 4, loss_curve, &a);
}

static void write_loss_run(const char *name, const char *recipe, int seed, double tail)
{
    write_loss_run_nan(name, recipe, seed, tail, 0);
}

static void test_loss_equivalence(void)
{
    /* arms of three replicates each, tails offset by -0.01, 0, +0.01 from
     * the arm's mean (sd 0.01 in every arm, 0.5% of the baseline's 2):
     * pooled sd 0.5%, df 8, SE 0.5 sqrt(2/3) = 0.408%.
     *   e4m3  +0.1%: 90% CI +-1.860 SE = [-0.66, +0.86] inside +-1%: equivalent
     *   e5m2  +3%:   outside, |3| > 2.306 SE = 0.94: different
     *   mx    +0.9%: CI [+0.14, +1.66] not inside; 0.9 < 0.94: cannot tell */
    static const struct {
        const char *name, *recipe;
        double mean;
    } arm[] = {{"bf16", "bf16", 2.0}, {"e4m3", "e4m3:current", 2.002}, {"e5m2", "e5m2:current", 2.06},
               {"mx", "mxfp8", 2.018}};
    const char *paths[12];
    char store[12][600];
    int n = 0;
    for (int k = 0; k < 4; k++)
        for (int s = 1; s <= 3; s++) {
            char name[64];
            snprintf(name, sizeof name, "%s-seed%d", arm[k].name, s);
            write_loss_run(name, arm[k].recipe, s, arm[k].mean + 0.01 * (s - 2));
            snprintf(store[n], sizeof store[n], "%s/%s.h5", test_scratch_dir(), name);
            paths[n] = store[n];
            n++;
        }
    /* the FP8 arms first: the baseline must not be the first file */
    const char *order[12];
    for (int i = 0; i < 12; i++)
        order[i] = paths[(i + 3) % 12];
    char out[512];
    snprintf(out, sizeof out, "%s", test_path("loss"));
    an_ctx c = open_runs(order, 12, out);
    CU_ASSERT_EQUAL_FATAL(an_loss(&c), 0);
    CU_ASSERT_EQUAL(an_json_write(&c), 0);
    close_runs(&c);
    /* the hand-worked numbers: the tail's decay term is the same constant
     * in every run, so the pooled sd is 0.01 / (2 + that constant) */
    double dec = 0;
    for (int s = 90; s < 100; s++)
        dec += 0.5 * exp(-s / 10.0) / 10;
    double base = 2.0 + dec, sd = 100 * 0.01 / base, se = sd * sqrt(2.0 / 3);
    char tsv[600], *buf, *f[MAXF];
    snprintf(tsv, sizeof tsv, "%s/loss_summary.tsv", out);
    static const char *verdict[] = {"baseline", "equivalent", "different", "cannot tell"};
    for (int k = 0; k < 4; k++) {
        char first[64];
        snprintf(first, sizeof first, "%s-seed1", arm[k].name);
        int m = tsv_row(tsv, 0, first, -1, NULL, &buf, f);
        CU_ASSERT_EQUAL_FATAL(m, 15);
        CU_ASSERT_EQUAL(atoi(f[2]), 3);
        CU_ASSERT_STRING_EQUAL(f[3], "bf16-seed1");
        CU_ASSERT_DOUBLE_EQUAL(fld(f, 9), sd, 1e-9);
        CU_ASSERT_EQUAL(atoi(f[10]), 8);
        CU_ASSERT_STRING_EQUAL(f[13], verdict[k]);
        if (k) {
            double d = 100 * (arm[k].mean - 2.0) / base;
            CU_ASSERT_DOUBLE_EQUAL(fld(f, 6), d, 1e-9);
            CU_ASSERT_DOUBLE_EQUAL(fld(f, 7), d - 1.859548 * se, 1e-5); /* t(0.95, 8) */
            CU_ASSERT_DOUBLE_EQUAL(fld(f, 8), d + 1.859548 * se, 1e-5);
            CU_ASSERT_DOUBLE_EQUAL(fld(f, 11), (2.306004 + 0.888889) * se, 1e-4); /* t(0.975, 8) + t(0.80, 8) */
        }
        free(buf);
    }
    snprintf(tsv, sizeof tsv, "%s/summary.json", out);
    char *js = slurp(tsv);
    CU_ASSERT_PTR_NOT_NULL_FATAL(js);
    CU_ASSERT(strstr(js, "\"replicates\": 3") != NULL);
    CU_ASSERT(strstr(js, "\"noise_sd_pct\": ") != NULL && strstr(js, "\"min_detectable_pct\": ") != NULL);
    CU_ASSERT(strstr(js, "\"equivalence_margin_pct\": 1") != NULL);
    CU_ASSERT(strstr(js, "\"verdict\": \"equivalent\"") != NULL);
    CU_ASSERT(strstr(js, "\"verdict\": \"different\"") != NULL);
    CU_ASSERT(strstr(js, "\"verdict\": \"cannot tell\"") != NULL);
    free(js);

    /* no replicates: no noise, so no verdict but cannot tell, even at +3% */
    const char *two[] = {store[6], store[0]}; /* e5m2-seed1, bf16-seed1 */
    an_ctx d = open_runs(two, 2, out);
    CU_ASSERT_EQUAL_FATAL(an_loss(&d), 0);
    close_runs(&d);
    int m = tsv_row(tsv, 0, "", -1, NULL, &buf, f); /* (reset) */
    free(buf);
    snprintf(tsv, sizeof tsv, "%s/loss_summary.tsv", out);
    m = tsv_row(tsv, 0, "e5m2-seed1", -1, NULL, &buf, f);
    CU_ASSERT_EQUAL_FATAL(m, 15);
    CU_ASSERT_STRING_EQUAL(f[3], "bf16-seed1");
    CU_ASSERT_STRING_EQUAL(f[13], "cannot tell");
    CU_ASSERT(isnan(fld(f, 9)));
    free(buf);
}

/* An arm diverged where any of its replicates did: the second of three
 * replicates turns NaN at step 60 (the first and third do not), and the
 * arm's line says so at step 60. */
static void test_loss_divergence_of_a_replicate(void)
{
    const char *names[5] = {"dv-bf16-seed1", "dv-bf16-seed2", "dv-e4m3-seed1", "dv-e4m3-seed2", "dv-e4m3-seed3"};
    const char *recipes[5] = {"bf16", "bf16", "e4m3:current", "e4m3:current", "e4m3:current"};
    const int seeds[5] = {1, 2, 1, 2, 3};
    char store[5][600];
    const char *paths[5];
    for (int k = 0; k < 5; k++) {
        write_loss_run_nan(names[k], recipes[k], seeds[k], 2.0 + 0.01 * k, k == 3 ? 60 : 0);
        snprintf(store[k], sizeof store[k], "%s/%s.h5", test_scratch_dir(), names[k]);
        paths[k] = store[k];
    }
    char out[512], tsv[600], *buf, *f[MAXF];
    snprintf(out, sizeof out, "%s", test_path("loss_div"));
    an_ctx c = open_runs(paths, 5, out);
    CU_ASSERT_EQUAL_FATAL(an_loss(&c), 0);
    close_runs(&c);
    snprintf(tsv, sizeof tsv, "%s/loss_summary.tsv", out);
    int m = tsv_row(tsv, 0, "dv-e4m3-seed1", -1, NULL, &buf, f);
    CU_ASSERT_EQUAL_FATAL(m, 15);
    CU_ASSERT_EQUAL(atoi(f[14]), 60);
    free(buf);
    m = tsv_row(tsv, 0, "dv-bf16-seed1", -1, NULL, &buf, f);
    CU_ASSERT_EQUAL_FATAL(m, 15);
    CU_ASSERT_EQUAL(atoi(f[14]), -1);
    free(buf);
}

/* ---- a mean carried by one spike ---------------------------------------- */

/* A gradient whose amax is the same at every step (N(0, 1e-3), clipped
 * below one element of 4e-3) except at step 20, 2^12
 * times larger: delayed scaling with a history of 2 overflows there and
 * underflows at steps 21 and 22, whose history holds the spike; current
 * scaling never.  Three steps carry the mean. */
static void gen_spike(gsl_rng *r, int64_t s, int t, float *x, size_t rows, size_t cols)
{
    (void)t;
    for (size_t i = 0; i < rows * cols; i++) { /* amax 4e-3 at every step: delayed = current scales */
        double v = gsl_ran_gaussian(r, 1e-3);
        x[i] = (float)(v > 3.5e-3 ? 3.5e-3 : v < -3.5e-3 ? -3.5e-3 : v);
    }
    x[0] = 4e-3f;
    if (s == 20)
        for (size_t i = 0; i < rows * cols; i++)
            x[i] *= 4096.0f;
}

static void test_spike_dominates(void)
{
    const char *sh[] = {"e4m3:current"};
    const tdecl t[] = {{"layers.0.mlp.w2.grad_output", FP8_ROLE_GRADIENT, 16, 256, "e4m3:delayed:history=2", sh, 1}};
    char p[512], out[512];
    snprintf(p, sizeof p, "%s/spike.h5", test_scratch_dir());
    snprintf(out, sizeof out, "%s", test_path("spike"));
    write_run(p, t, 1, 100, gen_spike, 3, NULL, 0, NULL, NULL);
    const char *paths[] = {p};
    an_ctx c = open_runs(paths, 1, out);
    CU_ASSERT_EQUAL_FATAL(an_compare(&c), 0);
    CU_ASSERT_EQUAL(an_json_write(&c), 0);
    close_runs(&c);
    char js_path[600];
    snprintf(js_path, sizeof js_path, "%s/summary.json", out);
    char *js = slurp(js_path);
    CU_ASSERT_PTR_NOT_NULL_FATAL(js);
    const char *g = strstr(js, "\"factor\": \"timing\"");
    CU_ASSERT_PTR_NOT_NULL_FATAL(g);
    const char *mean = strstr(g, "\"delta_sqnr_db\": "), *med = strstr(g, "\"median_step_db\": "),
               *dom = strstr(g, "\"dominated_by_steps\": [");
    CU_ASSERT_PTR_NOT_NULL_FATAL(mean);
    CU_ASSERT_PTR_NOT_NULL_FATAL(med);
    CU_ASSERT_PTR_NOT_NULL_FATAL(dom);
    double dm = atof(mean + strlen("\"delta_sqnr_db\": ")), dmed = atof(med + strlen("\"median_step_db\": "));
    CU_ASSERT(dm > 0.2); /* the mean: a gain from current scaling, of three steps (~11 dB each over 99) */
    CU_ASSERT(fabs(dmed) < 1e-6); /* the median step: none (the same scale, but for the last bit) */
    long st[3];
    CU_ASSERT_EQUAL_FATAL(sscanf(dom + strlen("\"dominated_by_steps\": ["), "%ld, %ld, %ld", &st[0], &st[1], &st[2]), 3);
    int seen = 0;
    for (int k = 0; k < 3; k++)
        seen |= (st[k] >= 20 && st[k] <= 22) << (st[k] - 20);
    CU_ASSERT_EQUAL(seen, 7); /* steps 20, 21 and 22 named */
    free(js);
}

/* ---- an eps that changed nothing pairs; one that bound is said ---------- */

/* tensor 0: amaxes ~1 everywhere (eps=1e-4 binds no block); tensor 1: a
 * row of zeros (its blocks' amax 0 < eps: the floor binds) */
static void gen_eps(gsl_rng *r, int64_t s, int t, float *x, size_t rows, size_t cols)
{
    (void)s;
    for (size_t i = 0; i < rows * cols; i++)
        x[i] = (float)gsl_ran_gaussian(r, 1.0);
    if (t == 1)
        for (size_t j = 0; j < cols; j++)
            x[j] = 0;
}

static void test_eps_pairing(void)
{
    /* shadows as a user writes them: the block recipe's default eps is 1e-4,
     * current scaling's 0 */
    const char *sh[] = {"e4m3:block=1x128", "mxfp8"};
    const tdecl t[] = {{"layers.0.attn.qkv.input", FP8_ROLE_ACTIVATION, 8, 256, "e4m3:current", sh, 2}};
    const tdecl tz[] = {{"layers.0.attn.qkv.input", FP8_ROLE_ACTIVATION, 8, 256, "e4m3:current", sh, 2},
                        {"layers.0.mlp.w1.input", FP8_ROLE_ACTIVATION, 8, 256, "e4m3:current", sh, 2}};
    char p1[512], p2[512];
    snprintf(p1, sizeof p1, "%s/eps_inert.h5", test_scratch_dir());
    snprintf(p2, sizeof p2, "%s/eps_binds.h5", test_scratch_dir());
    write_run(p1, t, 1, 30, gen_eps, 5, NULL, 0, NULL, NULL);
    write_run(p2, tz, 2, 30, gen_eps, 5, NULL, 0, NULL, NULL);
    char out[8192];
    /* inert: the granularity pair is compared, and marked */
    CU_ASSERT_EQUAL(test_run_cli("%1$s compare %2$s -o %2$s_out > %2$s_out.md 2> %2$s_out.err && cat %2$s_out/compare_factors.tsv",
                                 p1, out, sizeof out), 0);
    CU_ASSERT(strstr(out, "granularity\tactivation") != NULL);
    CU_ASSERT(strstr(out, "e4m3:block=1x128:eps=0.0001") != NULL);
    char mdp[600];
    snprintf(mdp, sizeof mdp, "%s_out.md", p1);
    char *md = slurp(mdp);
    CU_ASSERT_PTR_NOT_NULL_FATAL(md);
    CU_ASSERT(strstr(md, " ‡ |") != NULL);
    CU_ASSERT(strstr(md, "‡ the two recipes also differ in the amax floor (eps), which bound no group") != NULL);
    free(md);
    /* binds (a row of zeros in one tensor): that tensor's pair is not
     * compared, the other's still is; the report says why, and advises
     * recording nothing the run already records */
    CU_ASSERT_EQUAL(test_run_cli("%1$s report %2$s -o %2$s_rep > /dev/null 2> %2$s_rep.err && cat %2$s_rep/report.md", p2, out,
                                 sizeof out), 0);
    CU_ASSERT(strstr(out, "Not paired on 1 tensor (e.g. `layers.0.mlp.w1.input`): `e4m3 current` and `e4m3 block 1x128 "
                          "eps=0.0001` differ in granularity and in the amax floor (eps)") != NULL);
    CU_ASSERT(strstr(out, "record `e4m3:current`") == NULL && strstr(out, "`e4m3:current` and `e4m3:block=1x128`") == NULL);
    char tsvp[600], *buf, *f[MAXF];
    snprintf(tsvp, sizeof tsvp, "%s_rep/compare_contrasts.tsv", p2);
    CU_ASSERT_EQUAL(tsv_row(tsvp, 1, "layers.0.attn.qkv.input", 3, "granularity", &buf, f) > 0, 1);
    free(buf);
    CU_ASSERT_EQUAL(tsv_row(tsvp, 1, "layers.0.mlp.w1.input", 3, "granularity", &buf, f), 0);
    free(buf);
}

/* ---- record-only runs and the baseline rule ------------------------------ */

static double flat_loss(int64_t s, const void *arg)
{
    (void)s;
    return *(const double *)arg;
}

static void test_record_only(void)
{
    const char *sh[] = {"hybrid:delayed", "e4m3:current"};
    const char *sh2[] = {"e4m3:current"};
    const tdecl rec[] = {{"layers.0.attn.qkv.input", FP8_ROLE_ACTIVATION, 8, 256, NULL, sh, 2}};
    const tdecl app[] = {{"layers.0.attn.qkv.input", FP8_ROLE_ACTIVATION, 8, 256, "hybrid:delayed", sh2, 1}};
    const char *kv_rec[] = {"recipe", "bf16", "applied", "no", "recorded_recipe", "hybrid:delayed", "seed", "1"};
    const char *kv_app[] = {"recipe", "hybrid:delayed", "applied", "yes", "seed", "1"};
    char pr[512], pa[512];
    snprintf(pr, sizeof pr, "%s/torch_rec.h5", test_scratch_dir());
    snprintf(pa, sizeof pa, "%s/torch_apply.h5", test_scratch_dir());
    double l1 = 2.0, l2 = 2.01;
    write_run(pr, rec, 1, 30, gen_tiny, 1, kv_rec, 4, flat_loss, &l1);
    write_run(pa, app, 1, 30, gen_tiny, 1, kv_app, 3, flat_loss, &l2);
    /* the apply run first: file order must not make it the baseline */
    char out[65536];
    CU_ASSERT_EQUAL(test_run_cli("%1$s report %2$s/torch_apply.h5 %2$s/torch_rec.h5 -o %2$s/ro > /dev/null 2> %2$s/ro.err && cat "
                                 "%2$s/ro/report.md",
                                 test_scratch_dir(), out, sizeof out), 0);
    CU_ASSERT(strstr(out, "| torch_rec_record-only (baseline) | bf16, record-only; hybrid:delayed as shadow (no FP8 "
                          "applied)") != NULL);
    CU_ASSERT(strstr(out, "Baseline: `torch_rec_record-only`") != NULL);
    CU_ASSERT(strstr(out, "the arm of runs without FP8") != NULL);
    /* nowhere is the record-only run called by its shadow's name alone */
    CU_ASSERT(strstr(out, "| torch_rec |") == NULL);
    char js[600];
    snprintf(js, sizeof js, "%s/ro/summary.json", test_scratch_dir());
    char *j = slurp(js);
    CU_ASSERT_PTR_NOT_NULL_FATAL(j);
    CU_ASSERT(strstr(j, "\"run\": \"torch_rec_record-only\"") != NULL);
    free(j);
}

/* ---- phases of the learning-rate schedule -------------------------------- */

/* overflow events at steps 5, 25 and 60 under a delayed history of 16
 * (each spike 16 times the steps before it, none inside another's
 * history): one in each phase of a 100-step run with a 20-step LR warm-up
 * (0..19; early 20..39; steady 40..) */
static void gen_phase(gsl_rng *r, int64_t s, int t, float *x, size_t rows, size_t cols)
{
    (void)t;
    float k = (s == 5 || s == 25 || s == 60) ? 16.0f : 1.0f;
    for (size_t i = 0; i < rows * cols; i++) { /* amax 3.5 k exactly */
        double v = gsl_ran_gaussian(r, 1.0);
        x[i] = k * (float)(v > 3 ? 3 : v < -3 ? -3 : v);
    }
    x[0] = 3.5f * k;
}

static void test_phases(void)
{
    const char *sh[] = {"e4m3:delayed:history=1024"};
    const tdecl t[] = {{"layers.0.attn.qkv.input", FP8_ROLE_ACTIVATION, 8, 256, "e4m3:delayed:history=16", sh, 1}};
    const char *kv[] = {"recipe", "e4m3:delayed:history=16", "lr_warmup", "20", "steps", "100"};
    char p[512], out[512];
    snprintf(p, sizeof p, "%s/phases.h5", test_scratch_dir());
    snprintf(out, sizeof out, "%s", test_path("phases"));
    write_run(p, t, 1, 100, gen_phase, 9, kv, 3, NULL, NULL);
    const char *paths[] = {p};
    an_ctx c = open_runs(paths, 1, out);
    char *md = NULL;
    size_t mdn = 0;
    fclose(c.md);
    c.md = open_memstream(&md, &mdn);
    CU_ASSERT_EQUAL_FATAL(an_compare(&c), 0);
    CU_ASSERT_EQUAL(an_json_write(&c), 0);
    close_runs(&c);
    /* the shadow's history 1024 >= 100 steps: a running max, flagged */
    CU_ASSERT(md && strstr(md, "has a history of 1024 steps, not shorter than the run's 100") != NULL);
    free(md);
    char js[600];
    snprintf(js, sizeof js, "%s/summary.json", out);
    char *j = slurp(js);
    CU_ASSERT_PTR_NOT_NULL_FATAL(j);
    /* after the warm-up (step 0), the active recipe's events and tensor-steps per phase */
    CU_ASSERT(strstr(j, "{\"run\": \"phases\", \"phase\": \"lr_warmup\", \"steps\": \"0..19\", \"overflow_events\": 1, "
                        "\"tensor_steps\": 19") != NULL);
    CU_ASSERT(strstr(j, "{\"run\": \"phases\", \"phase\": \"early\", \"steps\": \"20..39\", \"overflow_events\": 1, "
                        "\"tensor_steps\": 20") != NULL);
    CU_ASSERT(strstr(j, "{\"run\": \"phases\", \"phase\": \"steady\", \"steps\": \"40..\", \"overflow_events\": 1, "
                        "\"tensor_steps\": 60") != NULL);
    free(j);
}

/* ---- the coverage table of docs/analyses.md ------------------------------ */

static void test_coverage_command(void)
{
    char out[4096];
    CU_ASSERT_EQUAL(test_run_cli("%1$s coverage --n 49 --rho 0.8 --sims 600 --boot 0", "", out, sizeof out), 0);
    const char *row = strstr(out, "| 49 | 0.8 | ");
    CU_ASSERT_PTR_NOT_NULL_FATAL(row);
    double cal = 0, nw = 0;
    CU_ASSERT_EQUAL_FATAL(sscanf(row, "| 49 | 0.8 | %lf%% | %lf%% |", &cal, &nw), 2);
    /* the bar: at least 90% real coverage at n = 49, rho = 0.8 (600
     * series: a binomial sd of 1 point); the plain Newey-West t interval far
     * below it */
    CU_ASSERT(cal >= 90);
    CU_ASSERT(nw < 85);
    CU_ASSERT(strstr(row, "—") != NULL); /* --boot 0: no bootstrap column */
    CU_ASSERT_EQUAL(test_run_cli("%1$s coverage --rho 0.5,1.5 2>&1", "", out, sizeof out), 2);
    CU_ASSERT(strstr(out, "--rho") != NULL && strstr(out, "1.5") != NULL);
    CU_ASSERT_EQUAL(test_run_cli("%1$s coverage --n 2 2>&1", "", out, sizeof out), 2);
    CU_ASSERT_EQUAL(test_run_cli("%1$s coverage --sims 2>&1", "", out, sizeof out), 2);
}

void register_answers_tests(void)
{
    static CU_TestInfo tests[] = {
        {"claim: blocks overflow where the tensor does not (supported), move with it (not), 5 steps (cannot tell)", test_claim},
        {"Smooth SwiGLU paired on identical tensors: the hand-worked gain in both runs, the placebo's drift apart", test_smooth_paired},
        {"loss: replicates of known spread are equivalent, different, cannot tell; no replicates cannot tell", test_loss_equivalence},
        {"loss: an arm diverged where any of its replicates did", test_loss_divergence_of_a_replicate},
        {"one spike carries a mean: the median step is 0, the step is named", test_spike_dominates},
        {"an eps no amax reached pairs (and is marked); one that binds is explained, nothing recorded is advised", test_eps_pairing},
        {"a record-only run is named so everywhere; the baseline follows the rule, not the file order", test_record_only},
        {"overflow events by LR phase; a history as long as the run is flagged", test_phases},
        {"fp8prof coverage: calibrated >= 90% at n = 49, rho = 0.8, Newey-West t below 85%; bad lists refused", test_coverage_command},
        CU_TEST_INFO_NULL,
    };
    add_suite("answers", tests);
}
