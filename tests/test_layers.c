/*
 * test_layers.c — suite "layers": every backward of train/layers.c
 * against central finite differences of its forward.  The scalar checked is
 * L = sum(out * r) for a fixed random r, accumulated in double; the forward
 * runs in float, so the step h is chosen well above float noise and the
 * tolerance is relative (2e-2 of the gradient's largest entry).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "layers.h"
#include "tests.h"

static uint64_t seed = 2718281828;

static float frand(void) { return (float)((double)(int64_t)test_rand(&seed) * 0x1p-63); }

static float *rvec(size_t n, float amp)
{
    float *v = malloc(n * sizeof *v);
    for (size_t i = 0; i < n; i++)
        v[i] = frand() * amp;
    return v;
}

static double dotd(const float *a, const float *b, size_t n)
{
    double s = 0;
    for (size_t i = 0; i < n; i++)
        s += (double)a[i] * b[i];
    return s;
}

/* compare analytic gradient g (n entries) with FD of the function f(x) at x */
typedef double (*scalar_fn)(void *ctx);
static void check_grad(const char *what, float *x, const float *g, size_t n, scalar_fn f, void *ctx, float h)
{
    double gmax = 1e-12, worst = 0;
    for (size_t i = 0; i < n; i++)
        gmax = fmax(gmax, fabs(g[i]));
    size_t step = n > 64 ? n / 64 : 1; /* 64 coordinates spread over x */
    for (size_t i = 0; i < n; i += step) {
        float keep = x[i];
        x[i] = keep + h;
        double up = f(ctx);
        x[i] = keep - h;
        double dn = f(ctx);
        x[i] = keep;
        double fd = (up - dn) / (2.0 * (double)h);
        worst = fmax(worst, fabs(fd - g[i]) / gmax);
    }
    if (worst > 2e-2)
        fprintf(stderr, "\n  %s: worst relative FD error %.3g", what, worst);
    CU_ASSERT(worst <= 2e-2);
}

/* ---- rmsnorm ---- */
typedef struct { float *out, *rstd, *inp, *w, *r; size_t N, C; } rms_ctx;
static double rms_f(void *p)
{
    rms_ctx *c = p;
    rmsnorm_forward(c->out, c->rstd, c->inp, c->w, c->N, c->C);
    return dotd(c->out, c->r, c->N * c->C);
}
static void test_rmsnorm(void)
{
    size_t N = 5, C = 24;
    rms_ctx c = {rvec(N * C, 1), rvec(N, 1), rvec(N * C, 2), rvec(C, 1), rvec(N * C, 1), N, C};
    float *dinp = calloc(N * C, 4), *dw = calloc(C, 4);
    rms_f(&c);
    rmsnorm_backward(dinp, dw, c.r, c.inp, c.w, c.rstd, N, C);
    check_grad("rmsnorm dinp", c.inp, dinp, N * C, rms_f, &c, 1e-2f);
    check_grad("rmsnorm dw", c.w, dw, C, rms_f, &c, 1e-2f);
    free(c.out), free(c.rstd), free(c.inp), free(c.w), free(c.r), free(dinp), free(dw);
}

/* ---- linear ---- */
typedef struct { float *out, *inp, *w, *r; size_t N, C, OC; } lin_ctx;
static double lin_f(void *p)
{
    lin_ctx *c = p;
    linear_forward(c->out, c->inp, c->w, c->N, c->C, c->OC);
    return dotd(c->out, c->r, c->N * c->OC);
}
static void test_linear(void)
{
    size_t N = 6, C = 16, OC = 12;
    lin_ctx c = {rvec(N * OC, 1), rvec(N * C, 1), rvec(OC * C, 1), rvec(N * OC, 1), N, C, OC};
    float *dinp = calloc(N * C, 4), *dw = calloc(OC * C, 4);
    lin_f(&c);
    linear_backward(dinp, dw, c.r, c.inp, c.w, N, C, OC);
    check_grad("linear dinp", c.inp, dinp, N * C, lin_f, &c, 1e-2f);
    check_grad("linear dw", c.w, dw, OC * C, lin_f, &c, 1e-2f);
    free(c.out), free(c.inp), free(c.w), free(c.r), free(dinp), free(dw);
}

/* ---- rope ---- */
typedef struct { float *x, *tmp, *r; size_t B, T, NH, hs; } rope_ctx;
static double rope_f(void *p)
{
    rope_ctx *c = p;
    size_t n = c->B * c->T * c->NH * c->hs;
    memcpy(c->tmp, c->x, n * 4);
    rope_forward(c->tmp, c->B, c->T, c->NH, c->hs);
    return dotd(c->tmp, c->r, n);
}
static void test_rope(void)
{
    size_t B = 2, T = 5, NH = 2, hs = 8, n = B * T * NH * hs;
    rope_ctx c = {rvec(n, 1), rvec(n, 1), rvec(n, 1), B, T, NH, hs};
    float *dx = malloc(n * 4);
    memcpy(dx, c.r, n * 4);
    rope_backward(dx, B, T, NH, hs);
    check_grad("rope", c.x, dx, n, rope_f, &c, 1e-2f);
    free(c.x), free(c.tmp), free(c.r), free(dx);
}

/* ---- attention ---- */
typedef struct { float *out, *att, *q, *k, *v, *r; size_t B, T, C, NH; } att_ctx;
static double att_f(void *p)
{
    att_ctx *c = p;
    attention_forward(c->out, c->att, c->q, c->k, c->v, c->B, c->T, c->C, c->NH);
    return dotd(c->out, c->r, c->B * c->T * c->C);
}
static void test_attention(void)
{
    size_t B = 2, T = 6, C = 16, NH = 2, n = B * T * C;
    att_ctx c = {rvec(n, 1), rvec(B * NH * T * T, 1), rvec(n, 1), rvec(n, 1), rvec(n, 1), rvec(n, 1), B, T, C, NH};
    float *dq = calloc(n, 4), *dk = calloc(n, 4), *dv = calloc(n, 4);
    att_f(&c);
    attention_backward(dq, dk, dv, c.r, c.att, c.q, c.k, c.v, B, T, C, NH);
    check_grad("attention dq", c.q, dq, n, att_f, &c, 1e-2f);
    check_grad("attention dk", c.k, dk, n, att_f, &c, 1e-2f);
    check_grad("attention dv", c.v, dv, n, att_f, &c, 1e-2f);
    /* causal: row t of att has zeros beyond t and sums to 1 */
    for (size_t t = 0; t < T; t++) {
        double s = 0;
        for (size_t u = 0; u < T; u++) {
            s += c.att[t * T + u];
            if (u > t)
                CU_ASSERT_EQUAL(c.att[t * T + u], 0.0f);
        }
        CU_ASSERT_DOUBLE_EQUAL(s, 1.0, 1e-6);
    }
    free(c.out), free(c.att), free(c.q), free(c.k), free(c.v), free(c.r), free(dq), free(dk), free(dv);
}

/* the sgemm attention against the plain loops it replaced, at the trainer's
 * shape (head size 24, T 128): equal within float rounding */
static double max_rel(const float *a, const float *b, size_t n)
{
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++)
        num = fmax(num, fabs((double)a[i] - b[i])), den = fmax(den, fabs((double)b[i]));
    return den > 0 ? num / den : num;
}

static void test_attention_vs_loops(void)
{
    size_t B = 2, T = 128, C = 96, NH = 4, n = B * T * C, na = B * NH * T * T;
    float *q = rvec(n, 3), *k = rvec(n, 3), *v = rvec(n, 1), *dout = rvec(n, 1);
    float *o1 = calloc(n, 4), *o2 = calloc(n, 4), *a1 = calloc(na, 4), *a2 = calloc(na, 4);
    float *g1[3], *g2[3];
    for (int i = 0; i < 3; i++)
        g1[i] = rvec(n, 1), g2[i] = calloc(n, 4), memcpy(g2[i], g1[i], n * 4); /* both accumulate onto the same */
    attention_forward(o1, a1, q, k, v, B, T, C, NH);
    attention_forward_ref(o2, a2, q, k, v, B, T, C, NH);
    CU_ASSERT(max_rel(o1, o2, n) < 1e-5);
    CU_ASSERT(max_rel(a1, a2, na) < 1e-5);
    for (size_t i = 0; i < na; i++) /* the masked half is exactly zero in both */
        if (a2[i] == 0.0f && a1[i] != 0.0f) {
            CU_FAIL("masked probability not zero");
            break;
        }
    attention_backward(g1[0], g1[1], g1[2], dout, a1, q, k, v, B, T, C, NH);
    attention_backward_ref(g2[0], g2[1], g2[2], dout, a2, q, k, v, B, T, C, NH);
    for (int i = 0; i < 3; i++)
        CU_ASSERT(max_rel(g1[i], g2[i], n) < 1e-5);
    free(q), free(k), free(v), free(dout), free(o1), free(o2), free(a1), free(a2);
    for (int i = 0; i < 3; i++)
        free(g1[i]), free(g2[i]);
}

/* ---- swiglu ---- */
typedef struct { float *out, *g, *u, *r; size_t n; } sw_ctx;
static double sw_f(void *p)
{
    sw_ctx *c = p;
    swiglu_forward(c->out, c->g, c->u, c->n);
    return dotd(c->out, c->r, c->n);
}
static void test_swiglu(void)
{
    size_t n = 50;
    sw_ctx c = {rvec(n, 1), rvec(n, 3), rvec(n, 2), rvec(n, 1), n};
    float *dg = calloc(n, 4), *du = calloc(n, 4);
    swiglu_backward(dg, du, c.r, c.g, c.u, n);
    check_grad("swiglu dg", c.g, dg, n, sw_f, &c, 1e-2f);
    check_grad("swiglu du", c.u, du, n, sw_f, &c, 1e-2f);
    free(c.out), free(c.g), free(c.u), free(c.r), free(dg), free(du);
}

/* ---- cross-entropy ---- */
typedef struct { float *probs, *logits; int *targets; size_t N, V; } ce_ctx;
static double ce_f(void *p)
{
    ce_ctx *c = p;
    return crossentropy_forward(c->probs, c->logits, c->targets, c->N, c->V);
}
static void test_crossentropy(void)
{
    size_t N = 4, V = 11;
    int targets[4] = {3, 0, 10, 7};
    ce_ctx c = {rvec(N * V, 1), rvec(N * V, 3), targets, N, V};
    float *dl = calloc(N * V, 4);
    float loss = ce_f(&c);
    CU_ASSERT(loss > 0);
    crossentropy_backward(dl, c.probs, targets, N, V);
    check_grad("crossentropy", c.logits, dl, N * V, ce_f, &c, 1e-2f);
    /* uniform logits: loss = log V exactly */
    for (size_t i = 0; i < N * V; i++)
        c.logits[i] = 0.5f;
    CU_ASSERT_DOUBLE_EQUAL(ce_f(&c), log((double)V), 1e-6);
    free(c.probs), free(c.logits), free(dl);
}

/* ---- embedding ---- */
static void test_embedding(void)
{
    const size_t V = 7, C = 3, N = 4;
    float *wte = rvec(V * C, 1), out[12], dw[21] = {0}, dout[12];
    int tok[4] = {2, 6, 2, 0};
    embedding_forward(out, tok, wte, N, C);
    CU_ASSERT_EQUAL(memcmp(out + 3, wte + 18, 12), 0);
    for (int i = 0; i < 12; i++)
        dout[i] = (float)i;
    embedding_backward(dw, dout, tok, N, C);
    CU_ASSERT_EQUAL(dw[6], 0.0f + 6.0f);  /* token 2 at rows 0 and 2: 0 + 6 */
    CU_ASSERT_EQUAL(dw[18], 3.0f);        /* token 6 at row 1 */
    CU_ASSERT_EQUAL(dw[3], 0.0f);         /* token 1 unused */
    free(wte);
}

void register_layers_tests(void)
{
    static CU_TestInfo tests[] = {
        {"rmsnorm", test_rmsnorm},
        {"linear (cblas_sgemm)", test_linear},
        {"rope", test_rope},
        {"causal attention", test_attention},
        {"attention on sgemm = the plain loops", test_attention_vs_loops},
        {"swiglu", test_swiglu},
        {"cross-entropy", test_crossentropy},
        {"embedding", test_embedding},
        CU_TEST_INFO_NULL,
    };
    add_suite("layers", tests);
}
