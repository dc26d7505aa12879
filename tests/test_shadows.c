/*
 * test_shadows.c — suite "shadows": the counterfactual recipes the
 * questions need, against hand-worked cases and plain references.
 * Per-block delayed scaling (block=RxC:delayed): each block position keeps
 * its own amax history, casts with the scale of the previous step's end,
 * starts at scale 1; Smooth SwiGLU as a recipe option (smooth: s^-1 Q(s x)
 * with s_j = 1 / max_i |x_ij|; smooth=fold: the scale moved into the weight,
 * s from a linked input probe), whose errors are measured in x's units.
 */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fp8_probe.h"
#include "fp8_store.h"
#include "ref_stats.h"
#include "tests.h"
#include "kernels.h"
#include "recipe_state.h"

/* e4m3 nearest-even saturating cast of v * scale, dequantized: the plain
 * single-value path (test_cast checks it against the OCP tables) */
static float qdq(float v, float scale)
{
    const fp8_format *f = fp8_format_find("e4m3", NULL);
    float q;
    fp8_format_qdq_array(f, NULL, scale, &v, 1, &q, NULL);
    return q;
}

/* ... with a dequantization multiplier of its own (DeepSeek's scale_inv =
 * amax / 448 is not 1 / scale to the last bit) */
static float qdq2(float v, float scale, float scale_inv)
{
    const fp8_format *f = fp8_format_find("e4m3", NULL);
    uint8_t code;
    fp8_format_encode_array(f, NULL, scale, &v, 1, &code, NULL);
    return fp8_format_decode(f, code) * scale_inv;
}

static void test_parse_block_delayed(void)
{
    fp8_recipe r;
    CU_ASSERT_EQUAL_FATAL(fp8_recipe_parse("e4m3:block=1x4:delayed:history=2,margin=1,eps=0", &r), FP8_OK);
    CU_ASSERT_STRING_EQUAL(r.spec, "e4m3:block=1x4:eps=0,fp32,delayed,history=2,algo=max,margin=1");
    CU_ASSERT(r.block_delayed && r.history_len == 2 && r.margin == 1);
    CU_ASSERT_EQUAL(fp8_recipe_parse("e4m3:block=1x128:delayed", &r), FP8_OK);
    CU_ASSERT_EQUAL(r.history_len, 1024); /* TE's default, as per tensor */
    EXPECT_ERROR(fp8_recipe_parse("e4m3:block=1x128:history=16", &r), "need `delayed`");
    EXPECT_ERROR(fp8_recipe_parse("e4m3:current:delayed", &r), "unknown option 'delayed'");
    CU_ASSERT_EQUAL(fp8_recipe_parse("hybrid:delayed:smooth", &r), FP8_OK);
    CU_ASSERT_STRING_EQUAL(r.spec, "hybrid:delayed:history=1024,algo=max,margin=0,smooth");
    CU_ASSERT_EQUAL(fp8_recipe_parse("e4m3:current:smooth=fold", &r), FP8_OK);
    CU_ASSERT_EQUAL(r.smooth, 2);
    EXPECT_ERROR(fp8_recipe_parse("e4m3:current:smooth=twice", &r), "smooth 'twice'");
}

/* blocks of 1x4 on a 2x8 tensor (4 blocks), history 2, fp32 scales:
 * scale_g(t+1) = 448 / max(amax_g(t-1), amax_g(t)), / 2^margin */
static void test_block_delayed_hand(void)
{
    fp8_recipe_state *st = fp8_recipe_state_new("e4m3:block=1x4:delayed,history=2,eps=0", "activation");
    CU_ASSERT_PTR_NOT_NULL_FATAL(st);
    /* step amaxes per block */
    const float am[3][4] = {{1, 2, 0.5f, 4}, {2, 1, 0.25f, 4}, {0.5f, 0.5f, 1, 1}};
    float x[16], q[16];
    float want_scale[4] = {1, 1, 1, 1}; /* step 0: TE's initial scale */
    for (int t = 0; t < 3; t++) {
        for (int g = 0; g < 4; g++)
            for (int k = 0; k < 4; k++) /* block g holds amax, -amax/2, amax/4, amax/8 */
                x[g * 4 + k] = am[t][g] * (k == 0 ? 1.0f : k == 1 ? -0.5f : k == 2 ? 0.25f : 0.125f);
        fp8_stats s;
        CU_ASSERT_EQUAL_FATAL(fp8_quantize(st, x, 2, 8, q, &s), FP8_OK);
        for (int i = 0; i < 16; i++) {
            float w = qdq(x[i], want_scale[i / 4]);
            if (q[i] != w)
                fprintf(stderr, "\n  step %d element %d: %g, want %g (scale %g)\n", t, i, q[i], w, want_scale[i / 4]);
            CU_ASSERT_EQUAL(q[i], w);
        }
        /* overflow: the block's amax x stale scale past 448 */
        int ov = 0;
        for (int g = 0; g < 4; g++)
            ov += am[t][g] * want_scale[g] > 464.0f;
        CU_ASSERT_EQUAL((int)s.blocks_with_overflow, ov);
        fp8_recipe_state_step(st);
        for (int g = 0; g < 4; g++) {
            float h = am[t][g];
            if (t > 0 && am[t - 1][g] > h)
                h = am[t - 1][g];
            want_scale[g] = 448.0f / h;
            CU_ASSERT_EQUAL(st->bscale[g], want_scale[g]);
            CU_ASSERT_EQUAL(st->bscale_inv[g], h / 448.0f); /* DeepSeek's scale_inv = amax / 448 */
        }
    }
    /* step 1 cast block 0 (amax 2) with step 0's 448: saturated */
    fp8_recipe_state_free(st);
    /* most_recent and margin */
    st = fp8_recipe_state_new("e4m3:block=1x4:delayed,history=4,algo=most_recent,margin=2,eps=0", "activation");
    for (int t = 0; t < 2; t++) {
        for (int i = 0; i < 16; i++)
            x[i] = (i % 4 == 0) ? am[t][i / 4] : 0.0f;
        CU_ASSERT_EQUAL(fp8_quantize(st, x, 2, 8, NULL, NULL), FP8_OK); /* the cast-free path notes the amaxes too */
        fp8_recipe_state_step(st);
    }
    for (int g = 0; g < 4; g++)
        CU_ASSERT_EQUAL(st->bscale[g], 448.0f / am[1][g] / 4.0f);
    /* a block whose history holds only zeros keeps its scale; a new shape starts again at 1 */
    float z[16] = {0};
    CU_ASSERT_EQUAL(fp8_quantize(st, z, 2, 8, NULL, NULL), FP8_OK);
    fp8_recipe_state_step(st);
    CU_ASSERT_EQUAL(st->bscale[0], 448.0f / am[1][0] / 4.0f);
    float y[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    CU_ASSERT_EQUAL(fp8_quantize(st, y, 1, 8, NULL, NULL), FP8_OK);
    CU_ASSERT_EQUAL(st->bgroups, 2);
    CU_ASSERT_EQUAL(st->bscale[0], 1.0f);
    fp8_recipe_state_free(st);
}

/* The fast path against a plain reference model on random tensors: every
 * step's x_hat equals a per-block qdq with scales from a slow history
 * kept here (weights 128x128 on a weight tensor, 1x128 on an activation,
 * partial edge blocks, a transposed recipe), and one deliberately wrong
 * reference (history one step shorter) must disagree. */
static int run_vs_model(const char *spec, const char *role, size_t R, size_t C, int broken)
{
    fp8_recipe_state *st = fp8_recipe_state_new(spec, role);
    if (!st)
        return -1;
    const fp8_recipe *r = &st->recipe;
    int trans = r->transposed;
    size_t br = (size_t)r->block_rows, bc = (size_t)r->block_cols;
    size_t RR = trans ? C : R, CC = trans ? R : C; /* the tiled data */
    size_t nbr = (RR + br - 1) / br, nbc = (CC + bc - 1) / bc, ng = nbr * nbc, L = (size_t)r->history_len;
    size_t Lm = broken ? L - 1 : L;
    float *hist = calloc(ng * L, sizeof *hist), *scale = malloc(2 * ng * sizeof *scale), *sinv = scale + ng;
    float *x = malloc(R * C * sizeof *x), *q = malloc(R * C * sizeof *q);
    for (size_t g = 0; g < ng; g++)
        scale[g] = sinv[g] = 1.0f;
    uint64_t seed = 77;
    int mismatches = 0;
    for (int t = 0; t < 12; t++) {
        for (size_t i = 0; i < R * C; i++) /* amaxes that wander per block and step */
            x[i] = (float)((double)(test_rand(&seed) >> 11) / 9007199254740992.0 - 0.5) *
                   (float)(1 + (test_rand(&seed) % 9)) * (i % 7 == 0 ? 3.0f : 1.0f);
        if (fp8_quantize(st, x, R, C, q, NULL) != FP8_OK)
            return -1;
        double amax[4096] = {0};
        for (size_t i = 0; i < R; i++)
            for (size_t j = 0; j < C; j++) {
                size_t ii = trans ? j : i, jj = trans ? i : j, g = (ii / br) * nbc + jj / bc;
                float w = qdq2(x[i * C + j], scale[g], sinv[g]);
                mismatches += q[i * C + j] != w;
                if (fabsf(x[i * C + j]) > amax[g])
                    amax[g] = fabsf(x[i * C + j]);
            }
        fp8_recipe_state_step(st);
        for (size_t g = 0; g < ng; g++) { /* slot t % L is this step's; max over the last Lm */
            hist[(size_t)(t % (int)L) * ng + g] = (float)amax[g];
            float h = 0;
            for (size_t k = 0; k < Lm && k <= (size_t)t; k++)
                h = fmaxf(h, hist[(size_t)((t - (int)k) % (int)L) * ng + g]);
            if (h > 0)
                fp8_scale_block(448.0f, h, r, &scale[g], &sinv[g]);
        }
    }
    fp8_recipe_state_free(st);
    free(hist), free(scale), free(x), free(q);
    return mismatches;
}

static void test_block_delayed_vs_model(void)
{
    CU_ASSERT_EQUAL(run_vs_model("e4m3:block=1x128:delayed,history=3,eps=0", "activation", 8, 300, 0), 0);
    CU_ASSERT_EQUAL(run_vs_model("e4m3:block=1x128:delayed,history=3,weights=128x128", "weight", 130, 260, 0), 0);
    CU_ASSERT_EQUAL(run_vs_model("e4m3:block=1x128:delayed,history=2,ue8m0,eps=0,transposed", "gradient", 130, 20, 0),
                    0);
    /* the model's own check: a history one step short must disagree */
    CU_ASSERT(run_vs_model("e4m3:block=1x128:delayed,history=3,eps=0", "activation", 8, 300, 1) > 0);
}

/* Smooth as a recipe option equals the trainer's arithmetic: y = x * s,
 * x_hat = Q(y) / s with the plain recipe's Q, and errors of x */
static void test_smooth_published(void)
{
    const size_t R = 16, C = 24;
    float x[R * C], y[R * C], qy[R * C], xh[R * C], s[C];
    uint64_t seed = 5;
    for (size_t i = 0; i < R * C; i++)
        x[i] = (float)((double)(test_rand(&seed) >> 11) / 9007199254740992.0 - 0.5) * (float)(1 + i % C);
    test_column_scales(x, R, C, s);
    for (size_t i = 0; i < R * C; i++)
        y[i] = x[i] * s[i % C];
    fp8_recipe_state *plain = fp8_recipe_state_new("e4m3:current", "activation");
    fp8_recipe_state *sm = fp8_recipe_state_new("e4m3:current:smooth", "activation");
    CU_ASSERT_PTR_NOT_NULL_FATAL(sm);
    fp8_stats sp, ss;
    CU_ASSERT_EQUAL(fp8_quantize(plain, y, R, C, qy, &sp), FP8_OK);
    CU_ASSERT_EQUAL(fp8_quantize(sm, x, R, C, xh, &ss), FP8_OK);
    double e2 = 0, x2 = 0;
    for (size_t i = 0; i < R * C; i++) {
        float w = qy[i] / s[i % C];
        CU_ASSERT_EQUAL(xh[i], w);
        e2 += ((double)x[i] - w) * ((double)x[i] - w), x2 += (double)x[i] * x[i];
    }
    CU_ASSERT_DOUBLE_EQUAL(ss.sqnr_db, 10 * log10(x2 / e2), 1e-9);
    CU_ASSERT_EQUAL(ss.overflows, sp.overflows);   /* the cast's counts: of y */
    CU_ASSERT_EQUAL(ss.scale, sp.scale);
    CU_ASSERT_DOUBLE_EQUAL(ss.l2, sqrt(x2), 1e-6 * sqrt(x2)); /* x's own statistics: of x */
    /* delayed + smooth: the history notes y's amax (1 up to rounding), not x's */
    fp8_recipe_state *sd = fp8_recipe_state_new("e4m3:delayed:smooth", "activation");
    CU_ASSERT_EQUAL(fp8_quantize(sd, x, R, C, NULL, NULL), FP8_OK);
    CU_ASSERT(sd->history[0] > 0.999f && sd->history[0] < 1.001f);
    fp8_recipe_state_free(plain), fp8_recipe_state_free(sm), fp8_recipe_state_free(sd);
}

/* Smooth's error statistics against a plain reference (the plain recipe's
 * cast of y = x s made here, x_hat = Q(y) / s, sums in double element by
 * element), for shapes whose tensor spans several of the engine's bands
 * (24 columns: rows in pairs; 23: sixteen rows at a time; 4099: sixteen
 * rows a band, too wide for a band buffer) with Inf and NaN in x; the
 * sums' bits those of the engine's error sums over x in one stretch (the
 * bands' lanes run on), and the same bits
 * whichever way the caller asks: x_hat into another array, into x itself
 * (the probe's active recipe in place), or not at all; x's statistics
 * given or not.  (In place, the sums once compared x_hat with itself:
 * sqnr +inf, mse 0.) */
static void test_smooth_bands_in_place(void)
{
    static const size_t shapes[][2] = {{1500, 24}, {2000, 23}, {40, 4099}, {3, 5}};
    for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++) {
        const size_t R = shapes[k][0], C = shapes[k][1], n = R * C;
        float *x = malloc(n * sizeof *x), *y = malloc(n * sizeof *y), *qy = malloc(n * sizeof *qy);
        float *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b), *s = malloc(C * sizeof *s);
        CU_ASSERT_FATAL(x && y && qy && a && b && s);
        uint64_t seed = 11 + k;
        for (size_t i = 0; i < n; i++)
            x[i] = (float)((double)(test_rand(&seed) >> 11) / 9007199254740992.0 - 0.5) * (float)(1 + i % 7);
        x[n / 3] = INFINITY, x[n / 2] = NAN; /* left out of the error sums, counted in y's cast */
        float m0 = 0;
        for (size_t i = 0; i < n; i++) /* column maxima over finite values (test_column_scales takes them all) */
            m0 = isfinite(x[i]) && fabsf(x[i]) > m0 ? fabsf(x[i]) : m0;
        for (size_t j = 0; j < C; j++) {
            float m = 0;
            for (size_t i = 0; i < R; i++)
                m = isfinite(x[i * C + j]) && fabsf(x[i * C + j]) > m ? fabsf(x[i * C + j]) : m;
            s[j] = m > 0 ? 1.0f / m : 1.0f;
        }
        for (size_t i = 0; i < n; i++)
            y[i] = x[i] * s[i % C];
        fp8_recipe_state *plain = fp8_recipe_state_new("e4m3:current", "activation");
        fp8_stats sp;
        CU_ASSERT_EQUAL(fp8_quantize(plain, y, R, C, qy, &sp), FP8_OK);
        double e2 = 0, x2 = 0, q2 = 0, xq = 0;
        float me = 0;
        uint64_t bad = 0;
        for (size_t i = 0; i < n; i++) {
            float w = qy[i] / s[i % C];
            qy[i] = w; /* the reference x_hat */
            if (!isfinite(x[i]))
                continue;
            x2 += (double)x[i] * x[i];
            if (!isfinite(w)) {
                bad++;
                continue;
            }
            e2 += ((double)x[i] - w) * ((double)x[i] - w), q2 += (double)w * w, xq += (double)x[i] * w;
            me = fmaxf(me, fabsf(x[i] - w));
        }
        /* the engine's sums of one stretch of x and this x_hat: the bands'
         * lanes run on, so the bits are these */
        fp8__err_acc acc;
        double one[4];
        float one_me;
        uint64_t one_bad;
        memset(&acc, 0, sizeof acc);
        fp8__kernels_pick();
        fp8__k.err_double(x, qy, n, &acc);
        fp8__err_acc_totals(&acc, one, &one_me, &one_bad);
        fp8_stats got[6], xs;
        CU_ASSERT_EQUAL(fp8_tensor_stats(x, n, &xs, 0), FP8_OK);
        for (int way = 0; way < 6; way++) { /* out: apart, x itself, none; x's statistics computed, given */
            fp8_recipe_state *sm = fp8_recipe_state_new("e4m3:current:smooth", "activation");
            memcpy(b, x, n * sizeof *b);
            float *out = way % 3 == 0 ? a : way % 3 == 1 ? b : NULL;
            got[way] = xs;
            CU_ASSERT_EQUAL(fp8_quantize_ex(sm, b, R, C, out, &got[way], way >= 3 ? FP8_STATS_X_GIVEN : 0), FP8_OK);
            if (out) {
                size_t differ = 0;
                for (size_t i = 0; i < n; i++)
                    differ += memcmp(&out[i], &qy[i], sizeof *out) != 0 && !(isnan(out[i]) && isnan(qy[i]));
                CU_ASSERT_EQUAL(differ, 0);
            }
            fp8_stats *g = &got[way];
            CU_ASSERT_EQUAL(g->err_excluded, bad);
            CU_ASSERT_EQUAL(g->max_abs_err, me);
            CU_ASSERT_DOUBLE_EQUAL(g->sq_err, e2, 1e-12 * e2);
            CU_ASSERT_DOUBLE_EQUAL(g->mse, e2 / (double)(n - 2 - bad), 1e-12 * e2 / (double)n);
            CU_ASSERT_DOUBLE_EQUAL(g->cosine, xq / sqrt(x2 * q2), 1e-12);
            CU_ASSERT_DOUBLE_EQUAL(g->sqnr_db, 10 * log10(x2 / e2), 1e-9);
            CU_ASSERT_EQUAL(memcmp(&g->classes, &sp.classes, sizeof sp.classes), 0); /* the cast's counts: of y */
            CU_ASSERT_EQUAL(g->scale, sp.scale);
            CU_ASSERT_EQUAL(g->amax, m0); /* x's own statistics: of x */
            CU_ASSERT_EQUAL(g->inf_count, 1);
            CU_ASSERT_EQUAL(g->nan_count, 1);
            CU_ASSERT_EQUAL(memcmp(&g->sq_err, &one[1], sizeof g->sq_err), 0);
            CU_ASSERT_EQUAL(memcmp(&g->cosine, &got[0].cosine, sizeof g->cosine), 0);
            fp8_recipe_state_free(sm);
        }
        /* a probe's unrecorded step in place: x's amax information, not x_hat's */
        fp8_recipe_state *sm = fp8_recipe_state_new("e4m3:current:smooth", "activation");
        fp8_amax_info ai;
        memcpy(b, x, n * sizeof *b);
        CU_ASSERT_EQUAL(fp8_quantize_amax(sm, b, R, C, b, &ai), FP8_OK);
        CU_ASSERT_EQUAL(ai.amax, m0);
        CU_ASSERT_EQUAL(ai.inf_count, 1);
        CU_ASSERT_EQUAL(ai.nan_count, 1);
        fp8_recipe_state_free(sm), fp8_recipe_state_free(plain);
        free(x), free(y), free(qy), free(a), free(b), free(s);
    }
}

/* smooth=fold through the probes: the weight's scales come from the
 * linked input probe's record of the same step; W / s is cast and x_hat
 * = Q(W / s) * s; a step whose input was not recorded skips the recipe */
static void test_smooth_fold_probes(void)
{
    fp8_probe_options o = fp8_probe_defaults();
    fp8_probe_run *run = fp8_probe_open(test_path("fold.h5"), &o, NULL, 0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(run);
    const char *sin[] = {"e4m3:current:smooth"}, *sw[] = {"e4m3:current:smooth=fold"};
    fp8_probe *ph = fp8_probe_declare(run, "h", FP8_ROLE_ACTIVATION, 0, "e4m3:current", sin, 1);
    fp8_probe *pw = fp8_probe_declare(run, "w", FP8_ROLE_WEIGHT, 0, "e4m3:current", sw, 1);
    CU_ASSERT_PTR_NOT_NULL_FATAL(pw);
    CU_ASSERT_EQUAL(fp8_probe_smooth_from(pw, ph), FP8_OK);
    EXPECT_ERROR(fp8_probe_smooth_from(ph, ph), "another probe");
    const size_t N = 8, H = 32, Cout = 4;
    float h[N * H], w[Cout * H], wh[Cout * H], ref[Cout * H], s[H], ws[Cout * H];
    uint64_t seed = 9;
    for (size_t i = 0; i < N * H; i++)
        h[i] = (float)((double)(test_rand(&seed) >> 11) / 9007199254740992.0 - 0.5) * (float)(1 + i % 5);
    for (size_t i = 0; i < Cout * H; i++)
        w[i] = (float)((double)(test_rand(&seed) >> 11) / 9007199254740992.0 - 0.5) * 0.1f;
    CU_ASSERT_EQUAL(fp8_probe_record(pw, 0, w, Cout, H), FP8_OK); /* before its input: fold skipped */
    CU_ASSERT_EQUAL(fp8_probe_record(ph, 1, h, N, H), FP8_OK);
    CU_ASSERT_EQUAL(fp8_probe_record(pw, 1, w, Cout, H), FP8_OK);
    CU_ASSERT_EQUAL(fp8_probe_cast_recipe(pw, "e4m3:current:smooth=fold", w, Cout, H, wh), FP8_OK);
    test_column_scales(h, N, H, s);
    for (size_t i = 0; i < Cout * H; i++)
        ws[i] = w[i] / s[i % H];
    fp8_recipe_state *plain = fp8_recipe_state_new("e4m3:current", "weight");
    fp8_quantize(plain, ws, Cout, H, ref, NULL);
    for (size_t i = 0; i < Cout * H; i++)
        CU_ASSERT_EQUAL(wh[i], ref[i] * s[i % H]);
    fp8_recipe_state_free(plain);
    CU_ASSERT_EQUAL(fp8_probe_step_end(run, 1), FP8_OK);
    CU_ASSERT_EQUAL(fp8_probe_close(run), FP8_OK);
    fp8_run *r = fp8_run_load(test_path("fold.h5"));
    CU_ASSERT_PTR_NOT_NULL_FATAL(r);
    int fold_recs = 0, step0 = 0;
    for (size_t i = 0; i < r->nrecords; i++)
        if (strstr(r->recipe_spec[r->records[i].recipe], "smooth=fold"))
            fold_recs++, step0 += r->records[i].step == 0;
    CU_ASSERT_EQUAL(fold_recs, 1); /* step 1 only */
    CU_ASSERT_EQUAL(step0, 0);
    fp8_run_free(r);
}

void register_shadows_tests(void)
{
    static CU_TestInfo tests[] = {
        {"block=RxC:delayed and smooth parse; canonical names", test_parse_block_delayed},
        {"per-block delayed scaling by hand: lag, overflow, history, margin, reset", test_block_delayed_hand},
        {"per-block delayed against a plain history model (a broken model disagrees)", test_block_delayed_vs_model},
        {"smooth: s^-1 Q(s x) as the trainer computes it, errors of x", test_smooth_published},
        {"smooth: error sums against a plain reference over bands; x_hat apart, in place, none",
         test_smooth_bands_in_place},
        {"smooth=fold: the weight's scales from its linked input, same step", test_smooth_fold_probes},
        CU_TEST_INFO_NULL,
    };
    add_suite("shadows", tests);
}
