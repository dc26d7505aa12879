/*
 * test_recipe.c — suite "recipe": spec parsing (and its errors) and each
 * recipe's scales on hand-worked cases derived from docs/recipes.md.
 */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fp8.h"
#include "fp8_nvdlfw.h"
#include "fp8_probe.h"
#include "tests.h"
#include "recipe_state.h"
#include "quantize_scales.h"

static void test_parse(void)
{
    fp8_recipe r;
    CU_ASSERT_EQUAL_FATAL(fp8_recipe_parse("e4m3:delayed", &r), FP8_OK);
    CU_ASSERT_EQUAL(r.kind, FP8_RECIPE_DELAYED);
    CU_ASSERT_EQUAL(r.history_len, 1024); /* TE defaults */
    CU_ASSERT_EQUAL(r.margin, 0);
    CU_ASSERT_EQUAL(r.algo_most_recent, 0);
    CU_ASSERT_STRING_EQUAL(r.spec, "e4m3:delayed:history=1024,algo=max,margin=0");
    CU_ASSERT_EQUAL(fp8_recipe_parse("hybrid:delayed:history=16,algo=most_recent,margin=2", &r), FP8_OK);
    CU_ASSERT(r.hybrid);
    CU_ASSERT_EQUAL(fp8_recipe_format(&r, FP8_ROLE_GRADIENT)->max, 57344.0);
    CU_ASSERT_EQUAL(fp8_recipe_format(&r, FP8_ROLE_ACTIVATION)->max, 448.0);
    CU_ASSERT_EQUAL(fp8_recipe_format(&r, FP8_ROLE_WEIGHT)->max, 448.0);
    CU_ASSERT_STRING_EQUAL(r.spec, "hybrid:delayed:history=16,algo=most_recent,margin=2");
    CU_ASSERT_EQUAL(fp8_recipe_parse("e4m3:current:pow2", &r), FP8_OK);
    CU_ASSERT(r.pow2);
    CU_ASSERT_STRING_EQUAL(r.spec, "e4m3:current:eps=0,pow2");
    CU_ASSERT_EQUAL(fp8_recipe_parse("e4m3:block=1x128:ue8m0", &r), FP8_OK);
    CU_ASSERT_EQUAL(r.block_rows, 1);
    CU_ASSERT_EQUAL(r.block_cols, 128);
    CU_ASSERT(r.ue8m0);
    CU_ASSERT_EQUAL(r.eps, 1e-4);
    CU_ASSERT_STRING_EQUAL(r.spec, "e4m3:block=1x128:eps=0.0001,ue8m0");
    CU_ASSERT_EQUAL(fp8_recipe_parse("e4m3:block=128x128:pow2,eps=0,transposed", &r), FP8_OK);
    CU_ASSERT(r.transposed && r.pow2 && r.eps == 0);
    CU_ASSERT_EQUAL(fp8_recipe_parse("mxfp8:floor", &r), FP8_OK);
    CU_ASSERT_EQUAL(r.kind, FP8_RECIPE_MX);
    CU_ASSERT_EQUAL(r.group, 32);
    CU_ASSERT_STRING_EQUAL(r.fwd.name, "e4m3");
    CU_ASSERT_STRING_EQUAL(r.spec, "e4m3:mx:floor,group=32");
    CU_ASSERT_EQUAL(fp8_recipe_parse("mxfp4:rceil", &r), FP8_OK);
    CU_ASSERT_STRING_EQUAL(r.fwd.name, "e2m1");
    CU_ASSERT_EQUAL(fp8_recipe_parse("mxfp6:elem=e3m2", &r), FP8_OK);
    CU_ASSERT_STRING_EQUAL(r.fwd.name, "e3m2");
    CU_ASSERT_EQUAL(fp8_recipe_parse("nvfp4", &r), FP8_OK);
    CU_ASSERT_EQUAL(r.group, 16);
    CU_ASSERT_EQUAL(fp8_recipe_parse("e5m2:none", &r), FP8_OK);
    CU_ASSERT_EQUAL(fp8_recipe_parse("e4m3:rowwise:torchao", &r), FP8_OK);
    CU_ASSERT_EQUAL(fp8_recipe_parse("e4m3:current:nosat,round=stochastic,seed=3", &r), FP8_OK);
    CU_ASSERT_EQUAL(r.cast.overflow, FP8_NO_SATURATE);
    CU_ASSERT_EQUAL(r.cast.round, FP8_ROUND_STOCHASTIC);
    /* canonical specs parse back to the same recipe */
    const char *all[] = {"e4m3:delayed:pow2", "hybrid:current", "e4m3:colwise", "e4m3:block=128x128", "mxfp8:even",
                         "nvfp4", "e5m2:none", "e4m3:current:round=zero"};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
        fp8_recipe a, b;
        CU_ASSERT_EQUAL_FATAL(fp8_recipe_parse(all[i], &a), FP8_OK);
        CU_ASSERT_EQUAL_FATAL(fp8_recipe_parse(a.spec, &b), FP8_OK);
        CU_ASSERT_STRING_EQUAL(a.spec, b.spec);
    }
}

static void expect_error(const char *spec, const char *names)
{
    fp8_recipe r;
    CU_ASSERT_EQUAL(fp8_recipe_parse(spec, &r), FP8_EINVAL);
    if (!strstr(fp8_error_message(), names))
        fprintf(stderr, "\n  '%s' -> '%s' (wanted '%s')\n", spec, fp8_error_message(), names);
    CU_ASSERT_PTR_NOT_NULL(strstr(fp8_error_message(), names));
}

static void test_parse_errors(void)
{
    expect_error("e4m3:delyed", "'delyed'");
    expect_error("e9m3:delayed", "'e9m3'");
    expect_error("e4m3", "missing kind");
    expect_error("e4m3:delayed:history=0", "history '0'");
    expect_error("e4m3:delayed:algo=mean", "algo 'mean'");
    expect_error("e4m3:delayed:bogus", "'bogus'");
    expect_error("e4m3:current:history=3", "'history'");
    expect_error("e4m3:block=1by128", "1by128");
    expect_error("mxfp8:sideways", "'sideways'");
    expect_error("e4m3:current:eps=-1", "eps '-1'");
    expect_error("", "empty");
    expect_error("e4m3::current", "empty part");
    expect_error("fp16:mx", "'fp16'");
}

/* delayed scaling, worked by hand from TE's rules: history 3 over 5 steps */
static void test_delayed(void)
{
    const float amax[5] = {1, 4, 2, 0, 0.5f};
    const struct { const char *spec; float want[5]; } cases[] = {
        /* scale used at step t+1 (after step t) */
        {"e4m3:delayed:history=3", {448, 112, 112, 112, 224}},
        {"e4m3:delayed:history=3,algo=most_recent", {448, 112, 224, 224, 896}},
        {"e4m3:delayed:history=3,margin=2", {112, 28, 28, 28, 56}},
        {"e4m3:delayed:history=1", {448, 112, 224, 224, 896}},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        fp8_recipe r;
        CU_ASSERT_EQUAL_FATAL(fp8_recipe_parse(cases[c].spec, &r), FP8_OK);
        fp8_recipe_state *st = fp8_recipe_state_alloc(&r, FP8_ROLE_ACTIVATION);
        CU_ASSERT_PTR_NOT_NULL_FATAL(st);
        CU_ASSERT_EQUAL(st->scale, 1.0f); /* TE's initial scale */
        for (int t = 0; t < 5; t++) {
            float x[4] = {amax[t], -amax[t] / 2, 0, amax[t] / 4};
            float used = st->scale;
            fp8_stats s;
            CU_ASSERT_EQUAL(fp8_quantize(st, x, 1, 4, NULL, &s), FP8_OK);
            CU_ASSERT_EQUAL(s.scale, used); /* this step casts with last step's scale */
            fp8_recipe_state_step(st);
            if (st->scale != cases[c].want[t])
                fprintf(stderr, "\n  %s step %d: scale %g want %g\n", cases[c].spec, t, st->scale, cases[c].want[t]);
            CU_ASSERT_EQUAL(st->scale, cases[c].want[t]);
            CU_ASSERT_EQUAL(st->scale_inv, 1.0f / cases[c].want[t]);
        }
        fp8_recipe_state_free(st);
    }
    /* the history after 5 steps of history=3 (TE roll: slot 0 staging) */
    fp8_recipe r;
    CU_ASSERT_EQUAL(fp8_recipe_parse("e4m3:delayed:history=3", &r), FP8_OK);
    fp8_recipe_state *st = fp8_recipe_state_alloc(&r, FP8_ROLE_ACTIVATION);
    for (int t = 0; t < 5; t++) {
        fp8_recipe_state_observe(st, amax[t]);
        fp8_recipe_state_step(st);
    }
    CU_ASSERT_EQUAL(st->history[0], 0.0f);
    CU_ASSERT_EQUAL(st->history[1], 0.0f);
    CU_ASSERT_EQUAL(st->history[2], 0.5f);
    fp8_recipe_state_free(st);

    /* the lag: a jump is cast with the stale scale and overflows */
    CU_ASSERT_EQUAL(fp8_recipe_parse("e4m3:delayed:history=4", &r), FP8_OK);
    st = fp8_recipe_state_alloc(&r, FP8_ROLE_ACTIVATION);
    float small[2] = {1.0f, 0.5f}, big[2] = {8.0f, 0.5f};
    fp8_stats s;
    fp8_quantize(st, small, 1, 2, NULL, &s);
    fp8_recipe_state_step(st); /* scale 448 */
    fp8_quantize(st, big, 1, 2, NULL, &s);
    CU_ASSERT_EQUAL(s.overflows, 1); /* 8 * 448 = 3584 > 448 */
    CU_ASSERT_EQUAL(s.classes.n[FP8_CLASS_SATURATED], 1);
    fp8_recipe_state_step(st); /* now 56 */
    CU_ASSERT_EQUAL(st->scale, 56.0f);
    fp8_recipe_state_free(st);

    /* rules: zero/NaN/Inf amax keep the scale; overflow -> FLT_MAX; pow2 */
    CU_ASSERT_EQUAL(fp8_scale_delayed(448, 0, 0, 0, 7.0f), 7.0f);
    CU_ASSERT_EQUAL(fp8_scale_delayed(448, NAN, 0, 0, 7.0f), 7.0f);
    CU_ASSERT_EQUAL(fp8_scale_delayed(448, INFINITY, 0, 0, 7.0f), 7.0f);
    CU_ASSERT_EQUAL(fp8_scale_delayed(448, 1e-40f, 0, 0, 7.0f), FLT_MAX);
    CU_ASSERT_EQUAL(fp8_scale_delayed(448, 3, 0, 1, 1.0f), 128.0f); /* 149.3 -> 2^7 */
    CU_ASSERT_EQUAL(fp8_scale_delayed(448, 3, 1, 1, 1.0f), 64.0f);
    CU_ASSERT_EQUAL(fp8_scale_delayed(57344, 3.5f, 0, 0, 1.0f), 57344.0f / 3.5f);
    /* hybrid: the gradient's state uses e5m2's max */
    CU_ASSERT_EQUAL(fp8_recipe_parse("hybrid:delayed:history=2", &r), FP8_OK);
    st = fp8_recipe_state_alloc(&r, FP8_ROLE_GRADIENT);
    fp8_recipe_state_observe(st, 2.0f);
    fp8_recipe_state_step(st);
    CU_ASSERT_EQUAL(st->scale, 28672.0f);
    fp8_recipe_state_free(st);
}

/* TransformerEngine where names overlap: an Inf in a tensor enters the
 * delayed history (TE's amax kernel drops NaN with fmaxf, keeps Inf) and
 * freezes the scale while it is in the window; overflows% counts |x| >
 * fp8_max * scale_inv before rounding. */
static void test_te_exactness(void)
{
    /* steps: amax 2, an Inf (finite amax 4), then 1, 1, 1, 1 */
    const struct { const char *spec; float want[6]; } cases[] = {
        /* scale after step t.  history 3, max: the Inf sits in the window
         * for three updates (steps 1..3), the scale stays 224 = 448/2 */
        {"e4m3:delayed:history=3", {224, 224, 224, 224, 448, 448}},
        /* most_recent: only the update of step 1 is frozen */
        {"e4m3:delayed:history=3,algo=most_recent", {224, 224, 448, 448, 448, 448}},
        /* finite_amax: the finite amax 4 of step 1 enters instead */
        {"e4m3:delayed:history=3,finite_amax", {224, 112, 112, 112, 448, 448}},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        fp8_recipe r;
        CU_ASSERT_EQUAL_FATAL(fp8_recipe_parse(cases[c].spec, &r), FP8_OK);
        fp8_recipe_state *st = fp8_recipe_state_alloc(&r, FP8_ROLE_ACTIVATION);
        for (int t = 0; t < 6; t++) {
            float x[4] = {t == 0 ? 2.0f : 1.0f, 0.5f, t == 1 ? INFINITY : 0.25f, t == 1 ? 4.0f : -1.0f};
            fp8_stats s;
            CU_ASSERT_EQUAL(fp8_quantize(st, x, 1, 4, NULL, &s), FP8_OK);
            fp8_recipe_state_step(st);
            if (st->scale != cases[c].want[t])
                fprintf(stderr, "\n  %s step %d: scale %g want %g\n", cases[c].spec, t, st->scale, cases[c].want[t]);
            CU_ASSERT_EQUAL(st->scale, cases[c].want[t]);
        }
        fp8_recipe_state_free(st);
    }
    /* the same through the no-statistics path (the probes' unrecorded steps) */
    fp8_recipe r;
    CU_ASSERT_EQUAL(fp8_recipe_parse("e4m3:delayed:history=2", &r), FP8_OK);
    fp8_recipe_state *st = fp8_recipe_state_alloc(&r, FP8_ROLE_ACTIVATION);
    float a[2] = {2.0f, 1.0f}, b[2] = {NAN, -INFINITY};
    fp8_quantize_ex(st, a, 1, 2, NULL, NULL, 0);
    fp8_recipe_state_step(st);
    CU_ASSERT_EQUAL(st->scale, 224.0f);
    fp8_quantize_ex(st, b, 1, 2, NULL, NULL, 0);
    CU_ASSERT_EQUAL(st->history[0], INFINITY); /* NaN dropped, -Inf as |x| */
    fp8_recipe_state_step(st);
    CU_ASSERT_EQUAL(st->scale, 224.0f);
    fp8_recipe_state_free(st);

    /* overflows% both ways, E4M3 at scale 1: 448.5 rounds to 448 (ours: no
     * overflow; TE: > 448, one); 464 ties to 448 (even); 465 overflows in
     * both; Inf in both */
    CU_ASSERT_EQUAL(fp8_recipe_parse("e4m3:none", &r), FP8_OK);
    st = fp8_recipe_state_alloc(&r, FP8_ROLE_ACTIVATION);
    float x[6] = {448.0f, 448.5f, 464.0f, -465.0f, INFINITY, 1.0f};
    fp8_stats s;
    CU_ASSERT_EQUAL(fp8_quantize(st, x, 1, 6, NULL, &s), FP8_OK);
    CU_ASSERT_EQUAL(s.overflows, 2);
    CU_ASSERT_EQUAL(s.te_overflows, 4);
    fp8_recipe_state_free(st);
    /* E5M2: 61440 (the midpoint past 57344) ties to the next binade: overflow */
    CU_ASSERT_EQUAL(fp8_recipe_parse("e5m2:none", &r), FP8_OK);
    st = fp8_recipe_state_alloc(&r, FP8_ROLE_GRADIENT);
    float y[3] = {61440.0f, 61439.0f, 57345.0f};
    CU_ASSERT_EQUAL(fp8_quantize(st, y, 1, 3, NULL, &s), FP8_OK);
    CU_ASSERT_EQUAL(s.overflows, 1);
    CU_ASSERT_EQUAL(s.te_overflows, 3);
    fp8_recipe_state_free(st);
    /* the nvdlfw export logs TE's overflows%: 448.5 counts (1 of 4 = 25%) */
    fp8_probe_run *run = fp8_probe_open("build/t_te_ovf.h5", NULL, NULL, 0);
    fp8_probe *p = fp8_probe_declare(run, "a.b.input", FP8_ROLE_ACTIVATION, 0, "e4m3:none", NULL, 0);
    float w[4] = {448.5f, 1, 2, 3};
    CU_ASSERT_EQUAL(fp8_probe_record(p, 0, w, 1, 4), FP8_OK);
    CU_ASSERT_EQUAL(fp8_probe_step_end(run, 0), FP8_OK);
    CU_ASSERT_EQUAL(fp8_probe_close(run), FP8_OK);
    fp8_run *fr = fp8_run_load("build/t_te_ovf.h5");
    CU_ASSERT_PTR_NOT_NULL_FATAL(fr);
    CU_ASSERT_EQUAL(fr->records[0].stats.overflows, 0);
    CU_ASSERT_EQUAL(fr->records[0].stats.te_overflows, 1);
    CU_ASSERT_EQUAL(fp8_nvdlfw_export(fr, "build/t_te_ovf", NULL), FP8_OK);
    fp8_run_free(fr);
    FILE *lf = fopen("build/t_te_ovf/nvdlfw_inspect_statistics_logs/nvdlfw_inspect_globalrank-0.log", "r");
    CU_ASSERT_PTR_NOT_NULL_FATAL(lf);
    char line[256];
    int found = 0;
    while (fgets(line, sizeof line, lf))
        found |= strstr(line, "a.b_activation_overflows% iteration=000000 value=25.0000") != NULL;
    fclose(lf);
    CU_ASSERT(found);

    /* current and grouped scaling: TE does not define it (UINT64_MAX) */
    CU_ASSERT_EQUAL(fp8_recipe_parse("e4m3:block=1x4:eps=0", &r), FP8_OK);
    st = fp8_recipe_state_alloc(&r, FP8_ROLE_ACTIVATION);
    float z[8] = {448, 1, 2, 3, 1, 1, 1, INFINITY};
    CU_ASSERT_EQUAL(fp8_quantize(st, z, 1, 8, NULL, &s), FP8_OK);
    CU_ASSERT_EQUAL(s.te_overflows, UINT64_MAX);
    fp8_recipe_state_free(st);
}

static void test_current(void)
{
    CU_ASSERT_EQUAL(fp8_scale_current(448, 0, 0, 0, 0), 1.0f);           /* bad amax -> 1 */
    CU_ASSERT_EQUAL(fp8_scale_current(448, NAN, 0, 0, 0), 1.0f);
    CU_ASSERT_EQUAL(fp8_scale_current(448, 0.5f, 1.0, 0, 0), 448.0f);    /* eps floor */
    CU_ASSERT_EQUAL(fp8_scale_current(448, 0, 2.0, 0, 0), 224.0f);
    CU_ASSERT_EQUAL(fp8_scale_current(448, 3, 0, 1, 0), 128.0f);         /* pow2 rounds down */
    CU_ASSERT_EQUAL(fp8_scale_current(448, 3, 0, 0, 0), 448.0f / 3.0f);
    CU_ASSERT_EQUAL(fp8_scale_current(448, 1e-40f, 0, 0, 0), FLT_MAX);   /* Inf -> FLT_MAX */
    CU_ASSERT_EQUAL(fp8_scale_current(448, 0, 0, 0, 1), (float)(448.0 / 1e-12)); /* torchao clamp */
    CU_ASSERT_EQUAL(fp8_scale_current(448, 3, 0, 0, 1), (float)(448.0 / 3.0));   /* float64 division */
    CU_ASSERT_EQUAL(fp8_scale_current(448, 3, 0, 1, 1), 128.0f);
    /* the engine: amax of this tensor, scale, cast; 448/amax maps amax to 448 */
    fp8_recipe r;
    CU_ASSERT_EQUAL(fp8_recipe_parse("e4m3:current", &r), FP8_OK);
    fp8_recipe_state *st = fp8_recipe_state_alloc(&r, FP8_ROLE_ACTIVATION);
    float x[5] = {2.385f, -7.0f, 0.001f, NAN, INFINITY}, q[5];
    fp8_stats s;
    CU_ASSERT_EQUAL(fp8_quantize(st, x, 1, 5, q, &s), FP8_OK);
    CU_ASSERT_EQUAL(s.scale, 64.0f);               /* amax 7 (NaN/Inf excluded) */
    CU_ASSERT_EQUAL(q[1], -7.0f);
    CU_ASSERT_EQUAL(s.overflows, 1);               /* the Inf input saturates  */
    CU_ASSERT_EQUAL(s.nan_count, 1);
    CU_ASSERT_EQUAL(s.inf_count, 1);
    CU_ASSERT_EQUAL(s.finite, 3);
    CU_ASSERT(isnan(q[3]));
    fp8_recipe_state_free(st);
}

static void test_block(void)
{
    /* DeepSeek: scale_inv = amax/448, ue8m0 rounds it up, amax floor 1e-4 */
    fp8_recipe r;
    float sc, si;
    CU_ASSERT_EQUAL(fp8_recipe_parse("e4m3:block=1x128", &r), FP8_OK);
    fp8_scale_block(448, 896, &r, &sc, &si);
    CU_ASSERT_EQUAL(si, 2.0f);
    CU_ASSERT_EQUAL(sc, 0.5f);
    fp8_scale_block(448, 0, &r, &sc, &si);
    CU_ASSERT_EQUAL(si, 1e-4f / 448.0f);
    CU_ASSERT_EQUAL(fp8_recipe_parse("e4m3:block=1x128:ue8m0", &r), FP8_OK);
    fp8_scale_block(448, 500, &r, &sc, &si);
    CU_ASSERT_EQUAL(si, 2.0f); /* 500/448 = 1.12 -> 2 */
    CU_ASSERT_EQUAL(sc, 0.5f);
    fp8_scale_block(448, 448, &r, &sc, &si);
    CU_ASSERT_EQUAL(si, 1.0f);
    CU_ASSERT_EQUAL(fp8_recipe_parse("e4m3:block=1x128:pow2,eps=0", &r), FP8_OK);
    fp8_scale_block(448, 500, &r, &sc, &si);
    CU_ASSERT_EQUAL(sc, 0.5f); /* 0.896 -> 2^-1 */

    /* 130 x 260 with 1x128 tiles: 3 tiles per row, the last has 4 columns */
    const size_t R = 130, C = 260;
    float *x = malloc(R * C * sizeof *x), *q = malloc(R * C * sizeof *q);
    uint64_t s64 = 5;
    for (size_t i = 0; i < R * C; i++)
        x[i] = (float)((double)(int64_t)test_rand(&s64) * 0x1p-63);
    x[0 * C + 259] = 1000.0f; /* only the partial tile (row 0, cols 256..259) sees it */
    CU_ASSERT_EQUAL(fp8_recipe_parse("e4m3:block=1x128", &r), FP8_OK);
    fp8_recipe_state *st = fp8_recipe_state_alloc(&r, FP8_ROLE_ACTIVATION);
    fp8_stats s;
    CU_ASSERT_EQUAL(fp8_quantize(st, x, R, C, q, &s), FP8_OK);
    CU_ASSERT_EQUAL(s.nscales, R * 3);
    CU_ASSERT_EQUAL(s.scale_inv_max, 1000.0f / 448.0f);
    CU_ASSERT_EQUAL(q[259], 1000.0f * 0 + fp8_format_decode(st->format, fp8_format_encode(st->format, NULL,
                                                                 1000.0f * (448.0f / 1000.0f), 0, NULL)) *
                                             (1000.0f / 448.0f));
    /* 128x128 blocks: 2 x 3 = 6, the edge ones partial */
    fp8_recipe_state_free(st);
    CU_ASSERT_EQUAL(fp8_recipe_parse("e4m3:block=128x128", &r), FP8_OK);
    st = fp8_recipe_state_alloc(&r, FP8_ROLE_WEIGHT);
    CU_ASSERT_EQUAL(fp8_quantize(st, x, R, C, q, &s), FP8_OK);
    CU_ASSERT_EQUAL(s.nscales, 6);
    CU_ASSERT_EQUAL(s.scale_inv_max, 1000.0f / 448.0f);
    fp8_recipe_state_free(st);
    /* DeepSeek-V3: 1x128 tiles for activations, 128x128 for weights, one spec */
    CU_ASSERT_EQUAL(fp8_recipe_parse("e4m3:block=1x128:weights=128x128", &r), FP8_OK);
    CU_ASSERT_STRING_EQUAL(r.spec, "e4m3:block=1x128:eps=0.0001,fp32,weights=128x128");
    st = fp8_recipe_state_alloc(&r, FP8_ROLE_WEIGHT);
    CU_ASSERT_EQUAL(fp8_quantize(st, x, R, C, q, &s), FP8_OK);
    CU_ASSERT_EQUAL(s.nscales, 6);
    fp8_recipe_state_free(st);
    st = fp8_recipe_state_alloc(&r, FP8_ROLE_ACTIVATION);
    CU_ASSERT_EQUAL(fp8_quantize(st, x, R, C, q, &s), FP8_OK);
    CU_ASSERT_EQUAL(s.nscales, R * 3);
    fp8_recipe_state_free(st);
    /* transposed 1x128 = 128x1 tiles of the original: 260 columns x 2 */
    CU_ASSERT_EQUAL(fp8_recipe_parse("e4m3:block=1x128:transposed", &r), FP8_OK);
    st = fp8_recipe_state_alloc(&r, FP8_ROLE_ACTIVATION);
    CU_ASSERT_EQUAL(fp8_quantize(st, x, R, C, q, &s), FP8_OK);
    CU_ASSERT_EQUAL(s.nscales, 260 * 2);
    fp8_recipe_state_free(st);
    free(x);
    free(q);
}

/* The engine's MX scales (fp8__group_scales, the mode's rule hoisted out of
 * the group loop) against fp8_scale_mx group by group: every element format
 * and rounding mode, on amaxes of zero, subnormals, every binade with
 * mantissas at the edges of rounding, and pseudo-random bits */
static void test_mx_group_scales(void)
{
    static const char *fmts[] = {"e4m3", "e5m2", "e2m3", "e3m2", "e2m1"};
    static const char *modes[] = {"floor", "ceil", "rceil", "even"};
    enum { NG = 256 * 8 + 64 };
    uint32_t amax[NG];
    size_t ng = 0;
    amax[ng++] = 0;
    for (uint32_t e = 0; e < 255; e++) {
        const uint32_t m[8] = {0, 1, 0x0FFFFF, 0x100000, 0x3FFFFF, 0x400000, 0x7FFFFE, 0x7FFFFF};
        for (int k = 0; k < 8; k++)
            if (e || m[k])
                amax[ng++] = e << 23 | m[k];
    }
    uint64_t z = 77;
    while (ng < NG) {
        z ^= z << 13, z ^= z >> 7, z ^= z << 17;
        amax[ng++] = (uint32_t)(z % 0x7F800000u);
    }
    float scale[NG], sinv[NG], sg;
    int wrong = 0, tried = 0;
    for (size_t f = 0; f < sizeof fmts / sizeof fmts[0]; f++)
        for (size_t m = 0; m < sizeof modes / sizeof modes[0]; m++) {
            char spec[64];
            snprintf(spec, sizeof spec, "%s:mx:%s", fmts[f], modes[m]);
            fp8_recipe r;
            CU_ASSERT_EQUAL_FATAL(fp8_recipe_parse(spec, &r), FP8_OK);
            fp8_recipe_state *st = fp8_recipe_state_alloc(&r, FP8_ROLE_ACTIVATION);
            fp8__group_scales(st, 0, amax, ng, 1.0f, scale, sinv, &sg);
            for (size_t g = 0; g < ng; g++) {
                float a;
                memcpy(&a, &amax[g], 4);
                uint32_t code = fp8_scale_mx(st->format, a, r.mx_round);
                int E = code == 0xFF ? 0 : (int)code - 127;
                wrong += sinv[g] != ldexpf(1.0f, E) || scale[g] != ldexpf(1.0f, -E);
                tried++;
            }
            fp8_recipe_state_free(st);
        }
    CU_ASSERT_EQUAL(tried, 5 * 4 * NG);
    CU_ASSERT_EQUAL(wrong, 0);
}

static void test_mx(void)
{
    const fp8_format *e4m3 = fp8_format_find("e4m3", NULL);
    /* block max 500: floor -> X = 2^(8-8) = 1, 500 clips to 448; ceil/rceil -> X = 2 */
    CU_ASSERT_EQUAL(fp8_scale_mx(e4m3, 500, FP8_MX_FLOOR), 127u);
    CU_ASSERT_EQUAL(fp8_scale_mx(e4m3, 500, FP8_MX_CEIL), 128u);
    CU_ASSERT_EQUAL(fp8_scale_mx(e4m3, 500, FP8_MX_RCEIL), 128u);
    CU_ASSERT_EQUAL(fp8_scale_mx(e4m3, 448, FP8_MX_RCEIL), 127u); /* exactly max: X = 1 */
    CU_ASSERT_EQUAL(fp8_scale_mx(e4m3, 448, FP8_MX_CEIL), 128u);  /* ceil(log2 448) = 9 */
    CU_ASSERT_EQUAL(fp8_scale_mx(e4m3, 0, FP8_MX_FLOOR), 0u);     /* all zero: smallest */
    CU_ASSERT_EQUAL(fp8_scale_mx(e4m3, 0x1p-140f, FP8_MX_FLOOR), 0u); /* E < -127 clamps */
    /* even: 510 rounds (3 mantissa bits) to 512 -> exponent 9 -> X = 2 */
    CU_ASSERT_EQUAL(fp8_scale_mx(e4m3, 510, FP8_MX_EVEN), 128u);
    CU_ASSERT_EQUAL(fp8_scale_mx(e4m3, 470, FP8_MX_EVEN), 127u);
    const fp8_format *e2m1 = fp8_format_find("e2m1", NULL);
    CU_ASSERT_EQUAL(fp8_scale_mx(e2m1, 6, FP8_MX_FLOOR), 127u);   /* emax 2 */
    CU_ASSERT_EQUAL(fp8_scale_mx(e2m1, 7, FP8_MX_RCEIL), 128u);

    float x[64], q[64];
    for (int i = 0; i < 64; i++)
        x[i] = (float)(i % 7) * 0.37f;
    x[5] = 500.0f;
    fp8_recipe r;
    fp8_stats s;
    CU_ASSERT_EQUAL(fp8_recipe_parse("mxfp8:floor", &r), FP8_OK);
    fp8_recipe_state *st = fp8_recipe_state_alloc(&r, FP8_ROLE_ACTIVATION);
    CU_ASSERT_EQUAL(fp8_quantize(st, x, 1, 64, q, &s), FP8_OK);
    CU_ASSERT_EQUAL(s.nscales, 2);
    CU_ASSERT_EQUAL(q[5], 448.0f);   /* clipped */
    CU_ASSERT_EQUAL(s.overflows, 1);
    CU_ASSERT_EQUAL(s.blocks_with_overflow, 1);
    fp8_recipe_state_free(st);
    CU_ASSERT_EQUAL(fp8_recipe_parse("mxfp8:ceil", &r), FP8_OK);
    st = fp8_recipe_state_alloc(&r, FP8_ROLE_ACTIVATION);
    CU_ASSERT_EQUAL(fp8_quantize(st, x, 1, 64, q, &s), FP8_OK);
    CU_ASSERT_EQUAL(q[5], 512.0f);   /* 250 -> 256, times X = 2 */
    CU_ASSERT_EQUAL(s.overflows, 0);
    CU_ASSERT_EQUAL(s.scale_inv, 2.0f);
    fp8_recipe_state_free(st);
}

static void test_nvfp4(void)
{
    /* block 0: amax 6 -> S_enc = 2688/6 = 448, block scale 6/6*448 = 448 (e4m3 exact);
     * block 1: amax 0.75 -> 0.75/6*448 = 56 (exact); s_global = 1/448 */
    float x[32], q[32];
    for (int i = 0; i < 16; i++) {
        x[i] = (float)(i % 4) * 1.5f;          /* 0 1.5 3 4.5 */
        x[16 + i] = (float)(i % 4) * 0.1875f;  /* 0 .. 0.5625 */
    }
    x[3] = 6.0f;
    x[19] = 0.75f;
    fp8_recipe r;
    CU_ASSERT_EQUAL(fp8_recipe_parse("nvfp4", &r), FP8_OK);
    fp8_recipe_state *st = fp8_recipe_state_alloc(&r, FP8_ROLE_ACTIVATION);
    fp8_stats s;
    CU_ASSERT_EQUAL(fp8_quantize(st, x, 1, 32, q, &s), FP8_OK);
    float sg = 1.0f / 448.0f;
    CU_ASSERT_EQUAL(s.global_scale_inv, sg);
    CU_ASSERT_EQUAL(s.nscales, 2);
    CU_ASSERT_EQUAL(s.scale_inv, 448.0f * sg);
    CU_ASSERT_EQUAL(s.scale_inv_min, 56.0f * sg);
    /* 0.5625 * (448/56 = 8) = 4.5 -> e2m1 tie 4 / 6 -> 4; x_hat = 4 * 56 * sg */
    CU_ASSERT_EQUAL(q[16 + 7], 4.0f * (56.0f * sg));
    CU_ASSERT_EQUAL(q[19], 6.0f * (56.0f * sg));
    CU_ASSERT_EQUAL(q[3], 6.0f * (448.0f * sg));
    fp8_recipe_state_free(st);
}

/* The history's maximum at a step equals the plain loop's (m = h[0], then
 * h[i] wherever h[i] > m) over histories of 16, 17, 37 and 1024 slots
 * holding NaN (also in slot 0), +Inf, zeros of both signs and values that
 * rise or fall along the window: the scale after the step is TE's rule of
 * that maximum, bit for bit. */
static void test_history_max(void)
{
    const int lens[] = {16, 17, 37, 1024};
    uint64_t z = 0x51EDu;
    int cases = 0, same = 0;
    for (size_t li = 0; li < sizeof lens / sizeof lens[0]; li++) {
        char spec[64];
        snprintf(spec, sizeof spec, "e4m3:delayed:history=%d", lens[li]);
        fp8_recipe r;
        CU_ASSERT_EQUAL_FATAL(fp8_recipe_parse(spec, &r), FP8_OK);
        fp8_recipe_state *st = fp8_recipe_state_alloc(&r, FP8_ROLE_ACTIVATION);
        CU_ASSERT_PTR_NOT_NULL_FATAL(st);
        for (int trial = 0; trial < 60; trial++) {
            int L = lens[li];
            for (int i = 0; i < L; i++) {
                z ^= z << 13, z ^= z >> 7, z ^= z << 17;
                float v = (float)(z >> 40) * 0x1p-20f;
                st->history[i] = trial % 3 == 0 ? v * (float)(i + 1) : trial % 3 == 1 ? v / (float)(i + 1) : v;
                if (z % 29 == 0)
                    st->history[i] = NAN;
                if (z % 31 == 0)
                    st->history[i] = (z & 1) ? 0.0f : -0.0f;
            }
            if (trial % 7 == 0)
                st->history[0] = NAN;
            if (trial % 11 == 0)
                st->history[(z >> 3) % (uint64_t)L] = INFINITY;
            float m = st->history[0];
            for (int i = 1; i < L; i++)
                if (st->history[i] > m)
                    m = st->history[i];
            float before = st->scale, want = fp8_scale_delayed(448.0f, m, 0, 0, before);
            fp8_recipe_state_step(st);
            cases++;
            same += memcmp(&st->scale, &want, 4) == 0;
        }
        fp8_recipe_state_free(st);
    }
    CU_ASSERT_EQUAL(same, cases);
}

/* The state's public face: what its accessors say after hand-worked steps
 * of e4m3:delayed:history=2 (amax 2 then 4: scale 448/2, then 448/4). */
static void test_state_accessors(void)
{
    fp8_recipe_state *st = fp8_recipe_state_new("e4m3:delayed:history=2", "activation");
    CU_ASSERT_PTR_NOT_NULL_FATAL(st);
    CU_ASSERT_EQUAL(fp8_recipe_state_recipe(st)->kind, FP8_RECIPE_DELAYED);
    CU_ASSERT_STRING_EQUAL(fp8_recipe_state_format(st)->name, "e4m3");
    float si = 0;
    CU_ASSERT_EQUAL(fp8_recipe_state_scale(st, &si), 1.0f); /* TE starts at 1 */
    CU_ASSERT_EQUAL(si, 1.0f);
    fp8_recipe_state_observe(st, 2.0f);
    fp8_recipe_state_step(st);
    CU_ASSERT_EQUAL(fp8_recipe_state_scale(st, &si), 224.0f);
    CU_ASSERT_EQUAL(si, 1.0f / 224.0f);
    fp8_recipe_state_observe(st, 4.0f);
    fp8_recipe_state_step(st);
    CU_ASSERT_EQUAL(fp8_recipe_state_scale(st, NULL), 112.0f);
    CU_ASSERT_EQUAL(fp8_recipe_state_steps(st), 2);
    fp8_recipe_state_set_threads(st, 99);
    CU_ASSERT_EQUAL(st->threads, 16);
    fp8_recipe_state_free(st);
    CU_ASSERT_PTR_NULL(fp8_recipe_state_recipe(NULL));
    CU_ASSERT_EQUAL(fp8_recipe_state_steps(NULL), -1);
}

void register_recipe_tests(void)
{
    static CU_TestInfo tests[] = {
        {"spec parsing and canonical form", test_parse},
        {"spec errors name the bad part", test_parse_errors},
        {"delayed: history, algo, margin, lag, rules", test_delayed},
        {"current: eps, pow2, torchao", test_current},
        {"block: DeepSeek/TE scales, 130x260 partial tiles", test_block},
        {"mx: floor clips 500, ceil does not", test_mx},
        {"mx: the engine's group scales equal fp8_scale_mx, every format and mode", test_mx_group_scales},
        {"nvfp4: two-level scales", test_nvfp4},
        {"TE exactness: Inf in the delayed history, overflows% before rounding", test_te_exactness},
        {"the state's accessors after hand-worked steps", test_state_accessors},
        {"delayed: the history's maximum equals the plain loop's (NaN, Inf, +-0)", test_history_max},
        CU_TEST_INFO_NULL,
    };
    add_suite("recipe", tests);
}
