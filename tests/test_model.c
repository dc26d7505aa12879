/*
 * test_model.c — suite "model": the whole model's gradient against finite
 * differences, its loss falling, bit-for-bit determinism, Smooth SwiGLU
 * leaving the function unchanged, and an FP8 run tracking the bf16 one.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fp8_store.h"
#include "model.h"
#include "tests.h"

static const model_config tiny = {2, 16, 2, 0, 8, 2, 256};

static void batch(int *x, int *y, size_t n, int offset)
{
    static const char text[] = "the quick brown fox jumps over the lazy dog. the quick brown fox jumps again. ";
    size_t L = sizeof text - 1;
    for (size_t i = 0; i < n; i++) {
        x[i] = (unsigned char)text[(offset + i) % L];
        y[i] = (unsigned char)text[(offset + i + 1) % L];
    }
}

static void test_gradient(void)
{
    model *m = model_create(&tiny, 3, PREC_FP32, NULL, NULL, 0, NULL, 0, 0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(m);
    int x[16], y[16];
    batch(x, y, 16, 5);
    model_forward(m, x, y, 0, 1);
    model_backward(m, 0);
    float *p = model_params(m), *g = model_grads(m);
    size_t np = model_num_params(m);
    uint64_t s = 17;
    double worst = 0, gmax = 1e-12;
    size_t idx[48];
    for (int k = 0; k < 48; k++) {
        /* half of the probes on parameters the batch touches strongly: not the unused embedding rows */
        idx[k] = (size_t)(test_rand(&s) % np);
        if (idx[k] < 256 * 16)
            idx[k] = 256 * 16 + idx[k] % (np - 256 * 16);
        gmax = fmax(gmax, fabs(g[idx[k]]));
    }
    for (int k = 0; k < 48; k++) {
        float keep = p[idx[k]];
        float h = 1e-2f;
        p[idx[k]] = keep + h;
        double up = model_forward(m, x, y, 0, 1);
        p[idx[k]] = keep - h;
        double dn = model_forward(m, x, y, 0, 1);
        p[idx[k]] = keep;
        double fd = (up - dn) / (2 * h);
        worst = fmax(worst, fabs(fd - g[idx[k]]) / gmax);
    }
    if (worst > 5e-2)
        fprintf(stderr, "\n  model gradient: worst relative FD error %.3g (max |g| %.3g)", worst, gmax);
    CU_ASSERT(worst <= 5e-2);
    model_free(m);
}

static float train(model *m, int steps, float lr, float *first)
{
    int x[16], y[16];
    float loss = 0;
    for (int t = 0; t < steps; t++) {
        batch(x, y, 16, t * 7);
        loss = model_forward(m, x, y, t, 1);
        if (t == 0 && first)
            *first = loss;
        model_backward(m, t);
        model_adamw(m, lr, 0.9f, 0.95f, 1e-8f, 0.0f, t + 1);
    }
    return loss;
}

static void test_loss_falls_and_determinism(void)
{
    model *a = model_create(&tiny, 11, PREC_FP32, NULL, NULL, 0, NULL, 0, 0);
    model *b = model_create(&tiny, 11, PREC_FP32, NULL, NULL, 0, NULL, 0, 0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(a);
    CU_ASSERT_PTR_NOT_NULL_FATAL(b);
    float first = 0;
    float la = train(a, 50, 1e-2f, &first), lb = train(b, 50, 1e-2f, NULL);
    CU_ASSERT(fabsf(first - logf(256.0f)) < 0.1f); /* starts near uniform */
    CU_ASSERT(la < 0.6f * first);                  /* and learns the text  */
    CU_ASSERT_EQUAL(bits_of(la), bits_of(lb));     /* same seed, same bits */
    model_free(a);
    model_free(b);
}

static void test_smooth_swiglu_invariant(void)
{
    for (int mode = SMOOTH_FOLD; mode <= SMOOTH_PUBLISHED; mode++) {
        model *a = model_create(&tiny, 5, PREC_FP32, NULL, NULL, 0, NULL, SMOOTH_OFF, 0);
        model *b = model_create(&tiny, 5, PREC_FP32, NULL, NULL, 0, NULL, mode, 0);
        int x[16], y[16];
        batch(x, y, 16, 3);
        float la = model_forward(a, x, y, 0, 1), lb = model_forward(b, x, y, 0, 1);
        CU_ASSERT(fabsf(la - lb) <= 1e-5f * fabsf(la));
        model_backward(a, 0);
        model_backward(b, 0);
        CU_ASSERT(fabsf(model_grad_norm(a) - model_grad_norm(b)) <= 1e-4f * model_grad_norm(a));
        model_free(a);
        model_free(b);
    }
}

/* What each Smooth SwiGLU variant casts, from the records of step 0: the
 * down projection's input is h * s with s = 1 / channel amax, so its amax is
 * 1 under both; the weight cast is W2 itself when published (the amax of
 * the unsmoothed model's weight, bit for bit) and W2 / s when folded
 * (max over c, i of |W2[c, i]| * amax_i of h, computed here from the
 * parameters and the SwiGLU output). */
static double step0_amax(const char *path, const char *tensor)
{
    fp8_run *r = fp8_run_load(path);
    double v = NAN;
    if (!r)
        return v;
    for (size_t i = 0; i < r->nrecords; i++)
        if (r->records[i].step == 0 && r->records[i].active && strcmp(r->tensor_name[r->records[i].tensor], tensor) == 0)
            v = r->records[i].stats.amax;
    fp8_run_free(r);
    return v;
}

static void test_smooth_swiglu_variants(void)
{
    const char *paths[3] = {"build/t_smooth0.h5", "build/t_smooth1.h5", "build/t_smooth2.h5"};
    double in[3], w[3], fold_expect = 0;
    for (int mode = SMOOTH_OFF; mode <= SMOOTH_PUBLISHED; mode++) {
        fp8_probe_run *run = fp8_probe_open(paths[mode], NULL, NULL, 0);
        CU_ASSERT_PTR_NOT_NULL_FATAL(run);
        model *m = model_create(&tiny, 5, PREC_FP8, "e4m3:current", NULL, 0, run, mode, 0);
        CU_ASSERT_PTR_NOT_NULL_FATAL(m);
        int x[16], y[16];
        batch(x, y, 16, 3);
        model_forward(m, x, y, 0, 1);
        model_backward(m, 0);
        if (mode == SMOOTH_FOLD) {
            const size_t C = 16, H = (size_t)model_cfg(m)->hidden, V = 256, N = 16;
            const float *w2 = model_params(m) + V * C + C + V * C + C + 3 * C * C + C * C + C + 2 * H * C;
            const float *h = model_swiglu_out(m, 0);
            for (size_t i = 0; i < H; i++) {
                double hmax = 0;
                for (size_t n = 0; n < N; n++)
                    hmax = fmax(hmax, fabs(h[n * H + i]));
                for (size_t c = 0; c < C; c++)
                    fold_expect = fmax(fold_expect, fabs(w2[c * H + i]) * hmax);
            }
        }
        CU_ASSERT_EQUAL(fp8_probe_step_end(run, 0), FP8_OK);
        model_free(m);
        CU_ASSERT_EQUAL(fp8_probe_close(run), FP8_OK);
        in[mode] = step0_amax(paths[mode], "layers.0.mlp.w2.input");
        w[mode] = step0_amax(paths[mode], "layers.0.mlp.w2.weight");
    }
    CU_ASSERT(in[SMOOTH_OFF] < 0.5); /* unsmoothed: small activations at initialization */
    CU_ASSERT_DOUBLE_EQUAL(in[SMOOTH_FOLD], 1.0, 1e-6);
    CU_ASSERT_DOUBLE_EQUAL(in[SMOOTH_PUBLISHED], 1.0, 1e-6);
    CU_ASSERT_EQUAL(w[SMOOTH_PUBLISHED], w[SMOOTH_OFF]);
    CU_ASSERT_DOUBLE_EQUAL(w[SMOOTH_FOLD], fold_expect, 1e-5 * fold_expect);
    CU_ASSERT(w[SMOOTH_FOLD] <= in[SMOOTH_OFF] * w[SMOOTH_OFF] * (1 + 1e-6)); /* max|W2| max h bounds it */
    CU_ASSERT(w[SMOOTH_FOLD] != w[SMOOTH_OFF]);
}

static void test_fp8_tracks_bf16(void)
{
    const char *shadows[] = {"e4m3:current"};
    fp8_probe_run *run = fp8_probe_open("build/t_model.h5", NULL, NULL, 0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(run);
    model *f = model_create(&tiny, 9, PREC_FP8, "hybrid:delayed:history=16", shadows, 1, run, 0, 0);
    model *h = model_create(&tiny, 9, PREC_BF16, NULL, NULL, 0, NULL, 0, 0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    CU_ASSERT_PTR_NOT_NULL_FATAL(h);
    int x[16], y[16];
    double worst = 0;
    for (int t = 0; t < 20; t++) {
        batch(x, y, 16, t * 7);
        float lf = model_forward(f, x, y, t, 1), lh = model_forward(h, x, y, t, 1);
        worst = fmax(worst, fabs((double)lf - lh) / lh);
        model_backward(f, t);
        model_backward(h, t);
        model_adamw(f, 3e-3f, 0.9f, 0.95f, 1e-8f, 0.0f, t + 1);
        model_adamw(h, 3e-3f, 0.9f, 0.95f, 1e-8f, 0.0f, t + 1);
        CU_ASSERT_EQUAL(fp8_probe_step_end(run, t), FP8_OK);
    }
    if (worst > 0.05)
        fprintf(stderr, "\n  fp8 vs bf16: worst relative loss difference %.4f", worst);
    CU_ASSERT(worst <= 0.05); /* stated tolerance: 5% over the first 20 steps */
    CU_ASSERT_EQUAL(fp8_probe_close(run), FP8_OK);
    fp8_run *r = fp8_run_load("build/t_model.h5");
    CU_ASSERT_PTR_NOT_NULL_FATAL(r);
    CU_ASSERT_EQUAL(r->ntensors, 2 * 5 * 3);         /* layers x linears x {input, weight, grad_output} */
    /* every step, active + 1 shadow; the down projection's input and weight of
     * each layer also record Smooth SwiGLU's shadow (smooth, smooth=fold) */
    CU_ASSERT_EQUAL(r->nrecords, 20 * (30 * 2 + 2 * 2));
    CU_ASSERT_STRING_EQUAL(r->tensor_name[14], "layers.0.mlp.w2.grad_output");
    fp8_run_free(r);
    model_free(f);
    model_free(h);
}

/* The GEMM output error: one scalar per linear, GEMM and step; its size
 * follows the element format's mantissa (about 6 dB a bit): E4M3 (3 bits)
 * near 30 dB, E5M10 (10 bits) some 40 dB above. */
static double gemm_median(const char *path, const char *gemm, int *count)
{
    fp8_run *r = fp8_run_load(path);
    CU_ASSERT_PTR_NOT_NULL_FATAL(r);
    double v[256];
    int n = 0;
    *count = 0;
    for (size_t i = 0; i < r->nscalars; i++) {
        const char *name = r->scalar_name[r->scalar_id[i]];
        if (strncmp(name, "gemm_sqnr_db/", 13) != 0)
            continue;
        (*count)++;
        if (strcmp(strrchr(name, '/') + 1, gemm) == 0 && n < 256)
            v[n++] = r->scalar_value[i];
    }
    fp8_run_free(r);
    for (int i = 1; i < n; i++) /* insertion sort for the median */
        for (int j = i; j > 0 && v[j - 1] > v[j]; j--) {
            double t = v[j];
            v[j] = v[j - 1], v[j - 1] = t;
        }
    return n ? v[n / 2] : NAN;
}

/* nsteps training steps of f recording into run; the last step's loss and
 * gradient norm into *loss and *gn (either may be NULL) */
static void train_steps(model *f, fp8_probe_run *run, int nsteps, float *loss, float *gn)
{
    int x[16], y[16];
    for (int t = 0; t < nsteps; t++) {
        batch(x, y, 16, t * 5);
        float l = model_forward(f, x, y, t, 1);
        model_backward(f, t);
        if (loss)
            *loss = l;
        if (gn)
            *gn = model_grad_norm(f);
        model_adamw(f, 3e-3f, 0.9f, 0.95f, 1e-8f, 0.0f, t + 1);
        CU_ASSERT_EQUAL(fp8_probe_step_end(run, t), FP8_OK);
    }
}

static void test_gemm_error(void)
{
    const char *specs[2] = {"e4m3:current", "e5m10:current"}, *paths[2] = {"build/t_gemm_e4.h5", "build/t_gemm_e10.h5"};
    double fprop[2], dgrad[2];
    for (int k = 0; k < 2; k++) {
        fp8_probe_run *run = fp8_probe_open(paths[k], NULL, NULL, 0);
        CU_ASSERT_PTR_NOT_NULL_FATAL(run);
        model *f = model_create(&tiny, 9, PREC_FP8, specs[k], NULL, 0, run, 0, 0);
        CU_ASSERT_PTR_NOT_NULL_FATAL(f);
        model_set_gemm_error(f, 1);
        train_steps(f, run, 3, NULL, NULL);
        model_free(f);
        CU_ASSERT_EQUAL(fp8_probe_close(run), FP8_OK);
        int count;
        fprop[k] = gemm_median(paths[k], "fprop", &count);
        CU_ASSERT_EQUAL(count, 3 * 2 * 5 * 3); /* steps x layers x linears x {fprop, dgrad, wgrad} */
        dgrad[k] = gemm_median(paths[k], "dgrad", &count);
    }
    CU_ASSERT(fprop[0] > 18 && fprop[0] < 45);
    CU_ASSERT(fprop[1] - fprop[0] > 30); /* seven more mantissa bits */
    CU_ASSERT(dgrad[1] - dgrad[0] > 30);
}

/* Training on the emulated accumulator: with a float32 accumulator (acc_bits
 * 0, promoted every 4 products) the three GEMMs (their transposes included)
 * give sgemm's loss and gradient to float rounding; with 4 bits they lose
 * accuracy the GEMM error shows (K = 16 here: ~4 bits of headroom lost). */
static void test_accumulator_training(void)
{
    const fp8_acc_model accs[3] = {{0, 0, 0}, {0, 4, 0}, {4, 0, 0}};
    const char *paths[3] = {"build/t_acc0.h5", "build/t_acc1.h5", "build/t_acc2.h5"};
    float loss[3], gn[3];
    double fprop[3];
    for (int k = 0; k < 3; k++) {
        fp8_probe_run *run = fp8_probe_open(paths[k], NULL, NULL, 0);
        CU_ASSERT_PTR_NOT_NULL_FATAL(run);
        model *f = model_create(&tiny, 9, PREC_FP8, "e4m3:current", NULL, 0, run, 0, 0);
        CU_ASSERT_PTR_NOT_NULL_FATAL(f);
        CU_ASSERT_EQUAL(model_set_accumulator(f, &accs[k]), FP8_OK);
        model_set_gemm_error(f, 1);
        train_steps(f, run, 2, &loss[k], &gn[k]);
        model_free(f);
        CU_ASSERT_EQUAL(fp8_probe_close(run), FP8_OK);
        int count;
        fprop[k] = gemm_median(paths[k], "fprop", &count);
    }
    CU_ASSERT(fabsf(loss[1] - loss[0]) <= 1e-5f * loss[0]);
    CU_ASSERT(fabsf(gn[1] - gn[0]) <= 1e-4f * gn[0]);
    CU_ASSERT(fabs(fprop[1] - fprop[0]) < 0.5);
    CU_ASSERT(fprop[2] < fprop[0] - 6);
    CU_ASSERT(fabsf(gn[2] - gn[0]) > 1e-3f * gn[0]);
    /* refused: a bad model, and an accumulator without FP8 GEMMs */
    model *b = model_create(&tiny, 9, PREC_BF16, NULL, NULL, 0, NULL, 0, 0);
    const fp8_acc_model bad = {1, 0, 0}, ok = {14, 128, 0};
    CU_ASSERT_EQUAL(model_set_accumulator(b, &ok), FP8_EINVAL);
    CU_ASSERT_EQUAL(model_set_accumulator(b, &bad), FP8_EINVAL);
    model_free(b);
}

/* Measuring the GEMM-output error leaves the run alone: the same seed with
 * the error measured at every step and not at all gives the same losses and
 * gradient norms, bit for bit (dgrad and wgrad are read from the buffers a
 * fresh GEMM wrote, or computed again aside; nothing the step uses moves). */
static void test_gemm_error_leaves_run(void)
{
    float loss[2], gn[2];
    for (int k = 0; k < 2; k++) {
        fp8_probe_run *run = fp8_probe_open(k ? "build/t_gemm_on.h5" : "build/t_gemm_off.h5", NULL, NULL, 0);
        CU_ASSERT_PTR_NOT_NULL_FATAL(run);
        model *f = model_create(&tiny, 9, PREC_FP8, "hybrid:delayed", NULL, 0, run, 0, 0);
        CU_ASSERT_PTR_NOT_NULL_FATAL(f);
        model_set_gemm_error(f, k); /* 1: every step; 0: never */
        train_steps(f, run, 4, &loss[k], &gn[k]);
        model_free(f);
        CU_ASSERT_EQUAL(fp8_probe_close(run), FP8_OK);
    }
    CU_ASSERT(memcmp(&loss[0], &loss[1], sizeof loss[0]) == 0);
    CU_ASSERT(memcmp(&gn[0], &gn[1], sizeof gn[0]) == 0);
    int count;
    double wgrad = gemm_median("build/t_gemm_on.h5", "wgrad", &count);
    CU_ASSERT_EQUAL(count, 4 * 2 * 5 * 3);
    CU_ASSERT(wgrad > 15 && wgrad < 60); /* E4M3 operands: some 30 dB */
}

void register_model_tests(void)
{
    static CU_TestInfo tests[] = {
        {"whole-model gradient vs finite differences", test_gradient},
        {"loss falls over 50 steps; same seed, same bits", test_loss_falls_and_determinism},
        {"Smooth SwiGLU (folded, published) leaves the function unchanged (fp32)", test_smooth_swiglu_invariant},
        {"Smooth SwiGLU: what the folded and the published variant cast", test_smooth_swiglu_variants},
        {"FP8 (hybrid delayed) tracks bf16 within 5% over 20 steps", test_fp8_tracks_bf16},
        {"GEMM output error: per linear, GEMM and step; ~6 dB a mantissa bit", test_gemm_error},
        {"training on the emulated accumulator: fp32 = sgemm, 4 bits lose accuracy", test_accumulator_training},
        {"measuring the GEMM output error leaves the run's bits alone", test_gemm_error_leaves_run},
        CU_TEST_INFO_NULL,
    };
    add_suite("model", tests);
}
