/*
 * model.c — the built-in model (model.h): parameters, forward, backward,
 * AdamW, and the FP8 emulation of every linear layer's GEMM operands.
 *
 * FP8 emulation of y = x W^T (TransformerEngine's scheme): the forward casts
 * x (role activation) and W (weight) and keeps both casts; the backward casts
 * dy (gradient) once and computes dx = Q(dy) Q(W) and dW = Q(dy)^T Q(x) from
 * the kept casts.  Products accumulate in FP32.  Smooth SwiGLU (Fishman et
 * al.): h' = h * s per channel, s_i = 1 / max_n |h[n, i]| (a constant for
 * the gradient), cast as Q(h'); then either (SMOOTH_FOLD) W2' = W2 / s
 * column-wise and y = Q(h') Q(W2')^T, or (SMOOTH_PUBLISHED, the paper's
 * s^-1 Q(s h)) y = (Q(h') / s) Q(W2)^T: the scale undone on the dequantized
 * activation, W2 cast as it is.  Both equal h W2^T in exact arithmetic.
 */
#include <gsl/gsl_randist.h>
#include <gsl/gsl_rng.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fp8_gemm.h"
#include "fp8_store.h"
#include "layers.h"
#include "model.h"

/* OpenBLAS's thread control (its cblas.h clashes with GSL's headers) */
void openblas_set_num_threads(int num_threads);

enum { L_QKV, L_OUT, L_W1, L_W3, L_W2, NLIN };
static const char *lin_names[NLIN] = {"attn.qkv", "attn.out", "mlp.w1", "mlp.w3", "mlp.w2"};

typedef struct {
    float *attn_norm, *wqkv, *wo, *mlp_norm, *w1, *w3, *w2;
} layer_params;

/* a linear layer's unquantized operands of the last forward and its name,
 * for the GEMM output error (gemm_error) */
typedef struct {
    const float *x, *w;
    char name[48];
} lin_src;

typedef struct {
    float *x, *n1, *rstd1, *qkv, *q, *k, *v, *att, *ao, *xm, *n2, *rstd2, *g, *u, *h, *hs, *s;
    float *q_in[NLIN], *q_w[NLIN];       /* kept casts of each linear's input and weight */
    float *w2s;                          /* W2 / s (smooth SwiGLU)                       */
    fp8_probe *p_in[NLIN], *p_w[NLIN], *p_g[NLIN];
    lin_src src[NLIN];
    /* Smooth SwiGLU evaluated in a plain run (the down projection's extra
     * shadows; NULL when none) */
    const char *smooth_in, *smooth_w;
    char smooth_in_spec[FP8_SPEC_MAX + 16], smooth_w_spec[FP8_SPEC_MAX + 16];
} layer_acts;

struct model {
    model_config c;
    model_precision prec;
    int smooth, fp8_head;
    size_t nparams;
    float *params, *grads, *m1, *m2;
    float *wte, *norm_f, *head;
    layer_params *lp;
    layer_params *lg; /* gradients, same layout */
    float *dwte, *dnorm_f, *dhead;
    layer_acts *la;
    float *xf, *nf, *rstdf, *logits, *probs, *q_nf, *q_head;
    fp8_probe *p_head_in, *p_head_w, *p_head_g;
    lin_src head_src;
    fp8_probe_run *run;
    long gemm_every;           /* GEMM output error every N steps (0: off) */
    float *gemm_a, *gemm_b;    /* its scratch: the FP8 GEMM's output and the reference */
    fp8_acc_model acc;         /* the FP8 GEMMs' accumulator (model_set_accumulator) */
    int acc_on;                /* 0: cblas_sgemm, FP32 accumulation           */
    int *tokens, *targets;
    long step;
    int train;
    float loss;
    /* scratch for the backward */
    float *d_x, *d_tmp, *d_n, *d_ao, *d_qkv, *d_h, *d_g, *d_u, *d_q, *d_logits, *d_quant, *d_w2;
};

const model_config *model_cfg(const model *m) { return &m->c; }
size_t model_num_params(const model *m) { return m->nparams; }
const float *model_swiglu_out(const model *m, int l) { return m->la[l].h; }

static float *take(float **cursor, size_t n)
{
    float *p = *cursor;
    *cursor += n;
    return p;
}

static float *zalloc(size_t n) { return calloc(n ? n : 1, sizeof(float)); }

/* the operand cast of one GEMM: none (fp32), bf16 rounding, or the probe */
static void cast_operand(model *m, fp8_probe *p, const float *x, size_t rows, size_t cols, float *out)
{
    size_t n = rows * cols;
    if (m->prec == PREC_FP32 || m->prec == PREC_BF16 || !p) {
        /* baselines: the shadows still see the tensor (no active recipe) */
        if (p && m->train)
            fp8_probe_record(p, m->step, x, rows, cols);
        if (m->prec == PREC_BF16)
            fp8_format_qdq_array(fp8_format_find("bf16", NULL), NULL, 1.0f, x, n, out, NULL);
        else if (out != x)
            memcpy(out, x, n * sizeof *out);
    } else if (m->train) {
        fp8_probe_apply(p, m->step, x, rows, cols, out);
    } else {
        fp8_probe_cast(p, x, rows, cols, out);
    }
}

model *model_create(const model_config *cfg, unsigned long seed, model_precision prec, const char *recipe,
                    const char *const *shadows, int nshadow, fp8_probe_run *run, int smooth_swiglu, int fp8_head)
{
    model_config c = *cfg;
    c.vocab = MODEL_VOCAB;
    if (c.hidden <= 0)
        c.hidden = ((8 * c.dim / 3) + 15) / 16 * 16;
    if (c.layers < 1 || c.dim < 8 || c.heads < 1 || c.dim % c.heads || (c.dim / c.heads) % 2 || c.ctx < 2 ||
        c.ctx > 4096 || c.batch < 1) {
        FP8_ERROR(FP8_EINVAL, "model: bad shape (layers %d, dim %d, heads %d, ctx %d, batch %d): dim must split "
                              "into heads of even width, ctx in 2..4096",
                  c.layers, c.dim, c.heads, c.ctx, c.batch);
        return NULL;
    }
    if (prec == PREC_FP8 && (!recipe || !run)) {
        FP8_ERROR(FP8_EINVAL, "model: fp8 precision needs a recipe and a run");
        return NULL;
    }
    if (prec != PREC_FP8)
        recipe = NULL; /* baselines: probes carry only the shadows */
    model *m = calloc(1, sizeof *m);
    if (!m)
        return NULL;
    /* one OpenBLAS thread: sgemm's summation order, hence every bit of the
     * run, is then fixed for a seed */
    openblas_set_num_threads(1);
    m->c = c;
    m->prec = prec;
    m->smooth = smooth_swiglu;
    m->fp8_head = fp8_head;
    size_t L = (size_t)c.layers, C = (size_t)c.dim, H = (size_t)c.hidden, V = 256;
    size_t per_layer = C + 3 * C * C + C * C + C + 2 * H * C + C * H;
    m->nparams = V * C + C + V * C + L * per_layer;
    m->params = zalloc(m->nparams);
    m->grads = zalloc(m->nparams);
    m->m1 = zalloc(m->nparams);
    m->m2 = zalloc(m->nparams);
    m->lp = calloc(L, sizeof *m->lp);
    m->lg = calloc(L, sizeof *m->lg);
    m->la = calloc(L, sizeof *m->la);
    if (!m->params || !m->grads || !m->m1 || !m->m2 || !m->lp || !m->lg || !m->la) {
        model_free(m);
        FP8_ERROR(FP8_ENOMEM, "model: out of memory for %zu parameters", m ? m->nparams : 0);
        return NULL;
    }
    float *cp = m->params, *cg = m->grads;
    m->wte = take(&cp, V * C), m->dwte = take(&cg, V * C);
    m->norm_f = take(&cp, C), m->dnorm_f = take(&cg, C);
    m->head = take(&cp, V * C), m->dhead = take(&cg, V * C);
    for (size_t l = 0; l < L; l++) {
        layer_params *p = &m->lp[l], *g = &m->lg[l];
        p->attn_norm = take(&cp, C), g->attn_norm = take(&cg, C);
        p->wqkv = take(&cp, 3 * C * C), g->wqkv = take(&cg, 3 * C * C);
        p->wo = take(&cp, C * C), g->wo = take(&cg, C * C);
        p->mlp_norm = take(&cp, C), g->mlp_norm = take(&cg, C);
        p->w1 = take(&cp, H * C), g->w1 = take(&cg, H * C);
        p->w3 = take(&cp, H * C), g->w3 = take(&cg, H * C);
        p->w2 = take(&cp, C * H), g->w2 = take(&cg, C * H);
    }
    /* weights: N(0, 0.02), residual projections / sqrt(2 L); norms 1 */
    gsl_rng *rng = gsl_rng_alloc(gsl_rng_mt19937);
    gsl_rng_set(rng, seed);
    for (size_t i = 0; i < m->nparams; i++)
        m->params[i] = (float)gsl_ran_gaussian(rng, 0.02);
    gsl_rng_free(rng);
    for (size_t i = 0; i < C; i++)
        m->norm_f[i] = 1.0f;
    float resid = 1.0f / sqrtf(2.0f * (float)L);
    for (size_t l = 0; l < L; l++) {
        for (size_t i = 0; i < C; i++)
            m->lp[l].attn_norm[i] = m->lp[l].mlp_norm[i] = 1.0f;
        for (size_t i = 0; i < C * C; i++)
            m->lp[l].wo[i] *= resid;
        for (size_t i = 0; i < C * H; i++)
            m->lp[l].w2[i] *= resid;
    }
    /* activations */
    size_t B = (size_t)c.batch, T = (size_t)c.ctx, N = B * T, NH = (size_t)c.heads;
    const size_t in_cols[NLIN] = {C, C, C, C, H}, out_rows[NLIN] = {3 * C, C, H, H, C};
    int ok = 1;
    for (size_t l = 0; l < L && ok; l++) {
        layer_acts *a = &m->la[l];
        a->x = zalloc(N * C), a->n1 = zalloc(N * C), a->rstd1 = zalloc(N), a->qkv = zalloc(N * 3 * C);
        a->q = zalloc(N * C), a->k = zalloc(N * C), a->v = zalloc(N * C), a->att = zalloc(B * NH * T * T);
        a->ao = zalloc(N * C), a->xm = zalloc(N * C), a->n2 = zalloc(N * C), a->rstd2 = zalloc(N);
        a->g = zalloc(N * H), a->u = zalloc(N * H), a->h = zalloc(N * H), a->hs = zalloc(N * H), a->s = zalloc(H);
        a->w2s = zalloc(C * H);
        ok = a->x && a->n1 && a->rstd1 && a->qkv && a->q && a->k && a->v && a->att && a->ao && a->xm && a->n2 &&
             a->rstd2 && a->g && a->u && a->h && a->hs && a->s && a->w2s;
        for (int j = 0; j < NLIN && ok; j++) {
            a->q_in[j] = zalloc(N * in_cols[j]);
            a->q_w[j] = zalloc(out_rows[j] * in_cols[j]);
            ok = a->q_in[j] && a->q_w[j];
            snprintf(a->src[j].name, sizeof a->src[j].name, "layers.%zu.%s", l, lin_names[j]);
            if (ok && run && (prec == PREC_FP8 || nshadow > 0)) {
                char name[FP8_NAME_MAX];
                /* the down projection of a run without Smooth SwiGLU also
                 * evaluates it, on the same tensors: the plain recipe (the
                 * active one, else the first shadow) with smooth on the input
                 * and smooth=fold on the weight, whose scales come from it */
                const char *sin[16], *sw[16];
                char smooth_in[FP8_SPEC_MAX + 16], smooth_w[FP8_SPEC_MAX + 16];
                int nin = nshadow, nw = nshadow;
                const char *plain = prec == PREC_FP8 ? recipe : nshadow > 0 ? shadows[0] : NULL;
                for (int k = 0; k < nshadow; k++)
                    sin[k] = sw[k] = shadows[k];
                if (j == L_W2 && !smooth_swiglu && plain && nshadow < 15) {
                    snprintf(smooth_in, sizeof smooth_in, "%s:smooth", plain);
                    snprintf(smooth_w, sizeof smooth_w, "%s:smooth=fold", plain);
                    sin[nin++] = smooth_in, sw[nw++] = smooth_w;
                    a->smooth_in = a->smooth_in_spec, a->smooth_w = a->smooth_w_spec;
                    snprintf(a->smooth_in_spec, sizeof a->smooth_in_spec, "%s", smooth_in);
                    snprintf(a->smooth_w_spec, sizeof a->smooth_w_spec, "%s", smooth_w);
                }
                snprintf(name, sizeof name, "layers.%zu.%s.input", l, lin_names[j]);
                a->p_in[j] = fp8_probe_declare(run, name, FP8_ROLE_ACTIVATION, (int)l, recipe, sin, nin);
                snprintf(name, sizeof name, "layers.%zu.%s.weight", l, lin_names[j]);
                a->p_w[j] = fp8_probe_declare(run, name, FP8_ROLE_WEIGHT, (int)l, recipe, sw, nw);
                if (a->p_in[j] && a->p_w[j] && j == L_W2 && a->smooth_in)
                    ok = fp8_probe_smooth_from(a->p_w[j], a->p_in[j]) == FP8_OK;
                snprintf(name, sizeof name, "layers.%zu.%s.grad_output", l, lin_names[j]);
                a->p_g[j] = fp8_probe_declare(run, name, FP8_ROLE_GRADIENT, (int)l, recipe, shadows, nshadow);
                ok = a->p_in[j] && a->p_w[j] && a->p_g[j];
            }
        }
    }
    m->xf = zalloc(N * C), m->nf = zalloc(N * C), m->rstdf = zalloc(N), m->logits = zalloc(N * V);
    m->probs = zalloc(N * V), m->q_nf = zalloc(N * C), m->q_head = zalloc(V * C);
    m->tokens = calloc(N, sizeof(int)), m->targets = calloc(N, sizeof(int));
    size_t big = N * (H > 3 * C ? H : 3 * C);
    m->d_x = zalloc(N * C), m->d_tmp = zalloc(N * C), m->d_n = zalloc(N * C), m->d_ao = zalloc(N * C);
    m->d_qkv = zalloc(N * 3 * C), m->d_h = zalloc(N * H), m->d_g = zalloc(N * H), m->d_u = zalloc(N * H);
    m->d_q = zalloc(big), m->d_logits = zalloc(N * V), m->d_quant = zalloc(big > N * V ? big : N * V);
    m->d_w2 = zalloc(C * H);
    ok = ok && m->xf && m->nf && m->rstdf && m->logits && m->probs && m->q_nf && m->q_head && m->tokens &&
         m->targets && m->d_x && m->d_tmp && m->d_n && m->d_ao && m->d_qkv && m->d_h && m->d_g && m->d_u && m->d_q &&
         m->d_logits && m->d_quant && m->d_w2;
    snprintf(m->head_src.name, sizeof m->head_src.name, "head");
    m->run = run;
    if (ok && run && prec == PREC_FP8) { /* the GEMM output error's scratch */
        /* the largest GEMM output: fprop N x OC and dgrad N x IN for every
         * linear, wgrad OC x IN (3C x C, H x C, C x H, V x C), whichever of
         * tokens and features is larger */
        size_t wide = V > H ? V : H;
        wide = wide > 3 * C ? wide : 3 * C;
        size_t g = N * wide, w = 3 * C * C;
        w = w > H * C ? w : H * C;
        w = w > V * C ? w : V * C;
        g = g > w ? g : w;
        m->gemm_a = zalloc(g), m->gemm_b = zalloc(g);
        ok = m->gemm_a && m->gemm_b;
    }
    if (ok && run && (prec == PREC_FP8 || nshadow > 0) && fp8_head) {
        m->p_head_in = fp8_probe_declare(run, "head.input", FP8_ROLE_ACTIVATION, (int)L, recipe, shadows, nshadow);
        m->p_head_w = fp8_probe_declare(run, "head.weight", FP8_ROLE_WEIGHT, (int)L, recipe, shadows, nshadow);
        m->p_head_g = fp8_probe_declare(run, "head.grad_output", FP8_ROLE_GRADIENT, (int)L, recipe, shadows, nshadow);
        ok = m->p_head_in && m->p_head_w && m->p_head_g;
    }
    if (!ok) {
        model_free(m);
        return NULL;
    }
    return m;
}

void model_free(model *m)
{
    if (!m)
        return;
    for (int l = 0; m->la && l < m->c.layers; l++) {
        layer_acts *a = &m->la[l];
        float *bufs[] = {a->x, a->n1, a->rstd1, a->qkv, a->q, a->k, a->v, a->att, a->ao, a->xm, a->n2,
                         a->rstd2, a->g, a->u, a->h, a->hs, a->s, a->w2s};
        for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
            free(bufs[i]);
        for (int j = 0; j < NLIN; j++)
            free(a->q_in[j]), free(a->q_w[j]);
    }
    float *bufs[] = {m->params, m->grads, m->m1, m->m2, m->xf, m->nf, m->rstdf, m->logits, m->probs, m->q_nf,
                     m->q_head, m->d_x, m->d_tmp, m->d_n, m->d_ao, m->d_qkv, m->d_h, m->d_g, m->d_u, m->d_q,
                     m->d_logits, m->d_quant, m->d_w2};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        free(bufs[i]);
    free(m->tokens), free(m->targets), free(m->lp), free(m->lg), free(m->la), free(m->gemm_a), free(m->gemm_b);
    free(m);
}

/* 20 log10(||ref|| / ||y - ref||): the FP8 GEMM's output against the same
 * GEMM on the unquantized operands */
/* 10 log10(sum ref^2 / sum (y - ref)^2), summed in eight interleaved
 * double partials (one running sum is a chain of dependent adds) */
static double sqnr_db(const float *y, const float *ref, size_t n)
{
    double s[8] = {0}, e[8] = {0};
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int k = 0; k < 8; k++) {
            double r = ref[i + (size_t)k], d = (double)y[i + (size_t)k] - r;
            s[k] += r * r, e[k] += d * d;
        }
    for (; i < n; i++) {
        double r = ref[i], d = (double)y[i] - r;
        s[0] += r * r, e[0] += d * d;
    }
    double S = 0, E = 0;
    for (int k = 0; k < 8; k++)
        S += s[k], E += e[k];
    return E > 0 ? 10 * log10(S / E) : INFINITY;
}

static int gemm_due(const model *m)
{
    return m->prec == PREC_FP8 && m->train && m->run && m->gemm_every > 0 && m->gemm_a && m->step % m->gemm_every == 0;
}

static void gemm_record(model *m, const lin_src *s, const char *gemm, double db)
{
    char name[FP8_NAME_MAX];
    snprintf(name, sizeof name, "gemm_sqnr_db/%s/%s", s->name, gemm);
    fp8_probe_scalar(m->run, name, m->step, db);
}

int model_set_accumulator(model *m, const fp8_acc_model *acc)
{
    if (!acc || (acc->acc_bits == 0 && acc->promote == 0)) {
        m->acc_on = 0;
        return FP8_OK;
    }
    if (acc->acc_bits < 0 || acc->acc_bits == 1 || acc->acc_bits > 53 || acc->promote < 0 || acc->round < 0 ||
        acc->round > 1)
        return FP8_ERROR(FP8_EINVAL, "model: accumulator bits must be 0 (float32) or 2..53, promotion interval >= 0");
    if (m->prec != PREC_FP8)
        return FP8_ERROR(FP8_EINVAL, "model: an accumulator model needs FP8 GEMMs (a recipe, not fp32/bf16)");
    m->acc = *acc;
    m->acc_on = 1;
    return FP8_OK;
}

static float *transposed(const float *a, size_t rows, size_t cols)
{
    float *t = malloc(rows * cols * sizeof *t + 1);
    if (t)
        for (size_t i = 0; i < rows; i++)
            for (size_t j = 0; j < cols; j++)
                t[j * rows + i] = a[i * cols + j];
    return t;
}

/* y[M,N] (= or, accumulate, +=) A[M,K] . B[N,K]^T for an FP8 GEMM: cblas_sgemm
 * (FP32 accumulation) or, with an accumulator model, fp8_gemm_emulate (the
 * operands are the dequantized casts; alpha 1). */
static void fp8_gemm_nt(const model *m, float *y, const float *A, const float *B, size_t M, size_t N, size_t K,
                        int accumulate)
{
    float *tmp = m->acc_on ? malloc(M * N * sizeof *tmp + 1) : NULL;
    if (!tmp || fp8_gemm_emulate(&m->acc, A, B, M, N, K, 1.0f, tmp) != FP8_OK) {
        if (m->acc_on) { /* out of memory: this GEMM in FP32, said once */
            static int said;
            if (!said++)
                fprintf(stderr, "fp8prof: train: out of memory for the emulated accumulator; a GEMM ran in FP32\n");
        }
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)M, (int)N, (int)K, 1.0f, A, (int)K, B, (int)K,
                    accumulate ? 1.0f : 0.0f, y, (int)N);
        free(tmp);
        return;
    }
    for (size_t i = 0; i < M * N; i++)
        y[i] = accumulate ? y[i] + tmp[i] : tmp[i];
    free(tmp);
}

/* dgrad and wgrad of an FP8 linear: dx[N,C] (+)= dq[N,OC] qw[OC,C] (+= when
 * dx_acc) and dw[OC,C] = dq^T qx, under the accumulator model (sgemm
 * without one) */
static void fp8_gemm_backward(const model *m, float *dx, float *dw, const float *dq, const float *qx, const float *qw,
                              size_t N, size_t C, size_t OC, int dx_acc)
{
    if (!m->acc_on) {
        if (dx)
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)N, (int)C, (int)OC, 1.0f, dq, (int)OC, qw,
                        (int)C, dx_acc ? 1.0f : 0.0f, dx, (int)C);
        if (dw)
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)OC, (int)C, (int)N, 1.0f, dq, (int)OC, qx, (int)C,
                        0.0f, dw, (int)C);
        return;
    }
    float *qwT = dx ? transposed(qw, OC, C) : NULL, *dqT = dw ? transposed(dq, N, OC) : NULL,
          *qxT = dw ? transposed(qx, N, C) : NULL;
    if ((dx && !qwT) || (dw && (!dqT || !qxT))) { /* out of memory: FP32 */
        model plain = *m;
        plain.acc_on = 0;
        fp8_gemm_backward(&plain, dx, dw, dq, qx, qw, N, C, OC, dx_acc);
    } else {
        if (dx)
            fp8_gemm_nt(m, dx, dq, qwT, N, C, OC, dx_acc); /* K = OC */
        if (dw)
            fp8_gemm_nt(m, dw, dqT, qxT, OC, C, N, 0); /* K = N, the tokens */
    }
    free(qwT), free(dqT), free(qxT);
}

/* y[N,OC] = cast(x) cast(w)^T, keeping the casts for the backward.  With
 * sc (Smooth SwiGLU as published): qx = Q(x) / sc per column, x = h * sc
 * (so the cast is the smoothed tensor's and qx approximates h); the exact
 * reference is then h w^T. */
static void fp8_linear_forward_unsmooth(model *m, float *y, const float *x, const float *h, const float *sc,
                                        const float *w, float *qx, float *qw, fp8_probe *px, fp8_probe *pw, size_t N,
                                        size_t C, size_t OC, lin_src *s)
{
    cast_operand(m, px, x, N, C, qx);
    for (size_t n = 0; sc && n < N; n++)
        for (size_t i = 0; i < C; i++)
            qx[n * C + i] /= sc[i];
    cast_operand(m, pw, w, OC, C, qw);
    fp8_gemm_nt(m, y, qx, qw, N, OC, C, 0);
    s->x = h, s->w = w;
    if (gemm_due(m)) {
        linear_forward(m->gemm_b, h, w, N, C, OC);
        gemm_record(m, s, "fprop", sqnr_db(y, m->gemm_b, N * OC));
    }
}

static void fp8_linear_forward(model *m, float *y, const float *x, const float *w, float *qx, float *qw,
                               fp8_probe *px, fp8_probe *pw, size_t N, size_t C, size_t OC, lin_src *s)
{
    fp8_linear_forward_unsmooth(m, y, x, x, NULL, w, qx, qw, px, pw, N, C, OC, s);
}

/* dx (+)= cast(dy) qw (+= when dx_acc: dx holds another branch's gradient);
 * dw = cast(dy)^T qx (a weight's gradient is written once a step).  The
 * GEMM-output error compares each FP8 GEMM alone with the same GEMM on the
 * unquantized operands: a GEMM that wrote its buffer afresh (beta 0) left
 * exactly that output there; one that accumulated is computed again alone. */
static void fp8_linear_backward(model *m, float *dx, float *dw, const float *dy, const float *qx, const float *qw,
                                fp8_probe *pg, size_t N, size_t C, size_t OC, const lin_src *s, int dx_acc)
{
    cast_operand(m, pg, dy, N, OC, m->d_quant);
    fp8_gemm_backward(m, dx, dw, m->d_quant, qx, qw, N, C, OC, dx_acc);
    if (gemm_due(m) && s->x && s->w) {
        const float *gx = dx, *gw = dw;
        if (dx_acc || !dx) {
            fp8_gemm_backward(m, m->gemm_a, NULL, m->d_quant, qx, qw, N, C, OC, 0);
            gx = m->gemm_a;
        }
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)N, (int)C, (int)OC, 1.0f, dy, (int)OC, s->w,
                    (int)C, 0.0f, m->gemm_b, (int)C);
        gemm_record(m, s, "dgrad", sqnr_db(gx, m->gemm_b, N * C));
        if (!dw) {
            fp8_gemm_backward(m, NULL, m->gemm_a, m->d_quant, qx, qw, N, C, OC, 0);
            gw = m->gemm_a;
        }
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)OC, (int)C, (int)N, 1.0f, dy, (int)OC, s->x, (int)C,
                    0.0f, m->gemm_b, (int)C);
        gemm_record(m, s, "wgrad", sqnr_db(gw, m->gemm_b, OC * C));
    }
}

void model_set_gemm_error(model *m, long every) { m->gemm_every = every; }

/* Smooth SwiGLU on the tensors of this plain run's down projection, both
 * variants, against the same reference h W2^T (in m->gemm_b, computed by the
 * fprop's GEMM-output error): as published y = (Q(h s) / s) Q(W2)^T, folded
 * y = Q(h s) Q(W2 / s)^T = (Q(h s) / s) (Q(W2 / s) s)^T, each cast by the
 * run's recipe with the shadow's own state (its own delayed history of the
 * smoothed tensor).  Scalars smooth_sqnr_db/<linear>/published and /fold
 * beside gemm_sqnr_db/<linear>/fprop, the plain cast's. */
static void smooth_gemms(model *m, layer_acts *a, const float *w2, size_t N, size_t H, size_t C)
{
    float *qh = m->d_quant, *qw = m->d_w2, *y = m->gemm_a; /* (free in the forward) */
    if (fp8_probe_cast_recipe(a->p_in[L_W2], a->smooth_in, a->h, N, H, qh) != FP8_OK)
        return;
    fp8_gemm_nt(m, y, qh, a->q_w[L_W2], N, C, H, 0);
    char name[FP8_NAME_MAX];
    snprintf(name, sizeof name, "smooth_sqnr_db/%s/published", a->src[L_W2].name);
    fp8_probe_scalar(m->run, name, m->step, sqnr_db(y, m->gemm_b, N * C));
    if (fp8_probe_cast_recipe(a->p_w[L_W2], a->smooth_w, w2, C, H, qw) != FP8_OK)
        return;
    fp8_gemm_nt(m, y, qh, qw, N, C, H, 0);
    snprintf(name, sizeof name, "smooth_sqnr_db/%s/fold", a->src[L_W2].name);
    fp8_probe_scalar(m->run, name, m->step, sqnr_db(y, m->gemm_b, N * C));
}

/* The early warning of Smooth SwiGLU's paper: in each layer, how aligned
 * the gate and up projections of every hidden channel are (cosine of row i
 * of w1 and row i of w3) and how far the largest channel amax of the SwiGLU
 * output stands above the median channel.  Scalars swiglu/<layers.l.mlp>/
 * align_max, align_p99, align_mean, align_top (the cosine of the channel
 * with the largest amax), amax_ratio and top_channel. */
static int cmp_float(const void *x, const void *y)
{
    float a = *(const float *)x, b = *(const float *)y;
    return (a > b) - (a < b);
}

static void swiglu_alignment(model *m)
{
    const size_t C = (size_t)m->c.dim, H = (size_t)m->c.hidden, N = (size_t)m->c.batch * (size_t)m->c.ctx;
    float *cos_ = malloc(H * sizeof *cos_), *amx = malloc(H * sizeof *amx), *srt = malloc(H * sizeof *srt);
    for (int l = 0; cos_ && amx && srt && l < m->c.layers; l++) {
        const float *w1 = m->lp[l].w1, *w3 = m->lp[l].w3, *h = m->la[l].h;
        double sum = 0;
        size_t top = 0;
        for (size_t i = 0; i < H; i++) {
            double d = 0, a2 = 0, b2 = 0;
            for (size_t c = 0; c < C; c++)
                d += (double)w1[i * C + c] * w3[i * C + c], a2 += (double)w1[i * C + c] * w1[i * C + c],
                    b2 += (double)w3[i * C + c] * w3[i * C + c];
            cos_[i] = a2 > 0 && b2 > 0 ? (float)(d / sqrt(a2 * b2)) : 0.0f;
            sum += cos_[i];
            amx[i] = 0;
            for (size_t n = 0; n < N; n++)
                amx[i] = fmaxf(amx[i], fabsf(h[n * H + i]));
            if (amx[i] > amx[top])
                top = i;
        }
        memcpy(srt, cos_, H * sizeof *srt);
        qsort(srt, H, sizeof *srt, cmp_float);
        float amax_top = amx[top];
        qsort(amx, H, sizeof *amx, cmp_float);
        float med = amx[H / 2];
        struct { const char *k; double v; } st[] = {
            {"align_max", srt[H - 1]}, {"align_p99", srt[(size_t)((double)(H - 1) * 0.99)]},
            {"align_mean", sum / (double)H}, {"align_top", cos_[top]},
            {"amax_ratio", med > 0 ? amax_top / med : NAN}, {"top_channel", (double)top}};
        for (size_t k = 0; k < sizeof st / sizeof st[0]; k++) {
            char name[FP8_NAME_MAX];
            snprintf(name, sizeof name, "swiglu/layers.%d.mlp/%s", l, st[k].k);
            fp8_probe_scalar(m->run, name, m->step, st[k].v);
        }
    }
    free(cos_), free(amx), free(srt);
}

void model_record_swiglu(model *m, long step)
{
    if (m->run) {
        m->step = step;
        swiglu_alignment(m);
    }
}


float model_forward(model *m, const int *tokens, const int *targets, long step, int train)
{
    const size_t B = (size_t)m->c.batch, T = (size_t)m->c.ctx, N = B * T, C = (size_t)m->c.dim,
                 H = (size_t)m->c.hidden, NH = (size_t)m->c.heads, V = 256, L = (size_t)m->c.layers;
    m->step = step;
    m->train = train;
    memcpy(m->tokens, tokens, N * sizeof *tokens);
    memcpy(m->targets, targets, N * sizeof *targets);
    embedding_forward(m->la[0].x, tokens, m->wte, N, C);
    for (size_t l = 0; l < L; l++) {
        layer_acts *a = &m->la[l];
        layer_params *p = &m->lp[l];
        /* attention block */
        rmsnorm_forward(a->n1, a->rstd1, a->x, p->attn_norm, N, C);
        fp8_linear_forward(m, a->qkv, a->n1, p->wqkv, a->q_in[L_QKV], a->q_w[L_QKV], a->p_in[L_QKV], a->p_w[L_QKV], N,
                           C, 3 * C, &a->src[L_QKV]);
        for (size_t n = 0; n < N; n++) {
            memcpy(a->q + n * C, a->qkv + n * 3 * C, C * sizeof(float));
            memcpy(a->k + n * C, a->qkv + n * 3 * C + C, C * sizeof(float));
            memcpy(a->v + n * C, a->qkv + n * 3 * C + 2 * C, C * sizeof(float));
        }
        rope_forward(a->q, B, T, NH, C / NH);
        rope_forward(a->k, B, T, NH, C / NH);
        attention_forward(a->ao, a->att, a->q, a->k, a->v, B, T, C, NH);
        fp8_linear_forward(m, m->d_tmp, a->ao, p->wo, a->q_in[L_OUT], a->q_w[L_OUT], a->p_in[L_OUT], a->p_w[L_OUT], N,
                           C, C, &a->src[L_OUT]);
        for (size_t i = 0; i < N * C; i++)
            a->xm[i] = a->x[i] + m->d_tmp[i];
        /* feed-forward block */
        rmsnorm_forward(a->n2, a->rstd2, a->xm, p->mlp_norm, N, C);
        fp8_linear_forward(m, a->g, a->n2, p->w1, a->q_in[L_W1], a->q_w[L_W1], a->p_in[L_W1], a->p_w[L_W1], N, C, H, &a->src[L_W1]);
        fp8_linear_forward(m, a->u, a->n2, p->w3, a->q_in[L_W3], a->q_w[L_W3], a->p_in[L_W3], a->p_w[L_W3], N, C, H, &a->src[L_W3]);
        swiglu_forward(a->h, a->g, a->u, N * H);
        const float *hin = a->h, *w2 = p->w2;
        if (m->smooth) {
            for (size_t i = 0; i < H; i++)
                a->s[i] = 0;
            for (size_t n = 0; n < N; n++)
                for (size_t i = 0; i < H; i++)
                    a->s[i] = fmaxf(a->s[i], fabsf(a->h[n * H + i]));
            for (size_t i = 0; i < H; i++)
                a->s[i] = a->s[i] > 0 && isfinite(a->s[i]) ? 1.0f / a->s[i] : 1.0f;
            for (size_t n = 0; n < N; n++)
                for (size_t i = 0; i < H; i++)
                    a->hs[n * H + i] = a->h[n * H + i] * a->s[i];
            hin = a->hs;
            if (m->smooth == SMOOTH_FOLD) {
                for (size_t c = 0; c < C; c++)
                    for (size_t i = 0; i < H; i++)
                        a->w2s[c * H + i] = p->w2[c * H + i] / a->s[i];
                w2 = a->w2s;
            }
        }
        float *xnext = l + 1 < L ? m->la[l + 1].x : m->xf;
        if (m->smooth == SMOOTH_PUBLISHED)
            fp8_linear_forward_unsmooth(m, m->d_tmp, a->hs, a->h, a->s, p->w2, a->q_in[L_W2], a->q_w[L_W2],
                                        a->p_in[L_W2], a->p_w[L_W2], N, H, C, &a->src[L_W2]);
        else
            fp8_linear_forward(m, m->d_tmp, hin, w2, a->q_in[L_W2], a->q_w[L_W2], a->p_in[L_W2], a->p_w[L_W2], N, H,
                               C, &a->src[L_W2]);
        if (a->smooth_in && gemm_due(m))
            smooth_gemms(m, a, p->w2, N, H, C);
        for (size_t i = 0; i < N * C; i++)
            xnext[i] = a->xm[i] + m->d_tmp[i];
    }
    rmsnorm_forward(m->nf, m->rstdf, m->xf, m->norm_f, N, C);
    if (m->fp8_head && m->prec != PREC_FP32)
        fp8_linear_forward(m, m->logits, m->nf, m->head, m->q_nf, m->q_head, m->p_head_in, m->p_head_w, N, C, V,
                           &m->head_src);
    else
        linear_forward(m->logits, m->nf, m->head, N, C, V);
    m->loss = crossentropy_forward(m->probs, m->logits, targets, N, V);
    return m->loss;
}

void model_backward(model *m, long step)
{
    const size_t B = (size_t)m->c.batch, T = (size_t)m->c.ctx, N = B * T, C = (size_t)m->c.dim,
                 H = (size_t)m->c.hidden, NH = (size_t)m->c.heads, V = 256, L = (size_t)m->c.layers;
    m->step = step;
    m->train = 1;
    memset(m->grads, 0, m->nparams * sizeof(float));
    memset(m->d_logits, 0, N * V * sizeof(float));
    crossentropy_backward(m->d_logits, m->probs, m->targets, N, V);
    memset(m->d_n, 0, N * C * sizeof(float));
    if (m->fp8_head && m->prec != PREC_FP32)
        fp8_linear_backward(m, m->d_n, m->dhead, m->d_logits, m->q_nf, m->q_head, m->p_head_g, N, C, V, &m->head_src, 0);
    else
        linear_backward(m->d_n, m->dhead, m->d_logits, m->nf, m->head, N, C, V);
    memset(m->d_x, 0, N * C * sizeof(float));
    rmsnorm_backward(m->d_x, m->dnorm_f, m->d_n, m->xf, m->norm_f, m->rstdf, N, C);
    /* d_x: gradient of the residual stream after the current layer */
    for (size_t l = L; l-- > 0;) {
        layer_acts *a = &m->la[l];
        layer_params *p = &m->lp[l];
        layer_params *g = &m->lg[l];
        /* x_next = xm + h W2^T: d_xm = d_x + (FFN path) */
        memset(m->d_h, 0, N * H * sizeof(float));
        if (m->smooth == SMOOTH_FOLD) {
            /* y = h' W2'^T: dh' = dy W2', dh = dh' * s; dW2' = dy^T h', dW2 = dW2' / s */
            memset(m->d_w2, 0, C * H * sizeof(float));
            fp8_linear_backward(m, m->d_h, m->d_w2, m->d_x, a->q_in[L_W2], a->q_w[L_W2], a->p_g[L_W2], N, H, C, &a->src[L_W2], 0);
            for (size_t c = 0; c < C; c++)
                for (size_t i = 0; i < H; i++)
                    g->w2[c * H + i] += m->d_w2[c * H + i] / a->s[i]; /* W2' = W2 / s */
            for (size_t n = 0; n < N; n++)
                for (size_t i = 0; i < H; i++)
                    m->d_h[n * H + i] *= a->s[i];
        } else {
            /* plain, or published: y = (Q(h s) / s) Q(W2)^T with the kept
             * cast already unscaled, s a constant and the cast's gradient
             * passed straight through, so dh and dW2 are the plain ones */
            fp8_linear_backward(m, m->d_h, g->w2, m->d_x, a->q_in[L_W2], a->q_w[L_W2], a->p_g[L_W2], N, H, C, &a->src[L_W2], 0);
        }
        memset(m->d_g, 0, N * H * sizeof(float));
        memset(m->d_u, 0, N * H * sizeof(float));
        swiglu_backward(m->d_g, m->d_u, m->d_h, a->g, a->u, N * H);
        memset(m->d_n, 0, N * C * sizeof(float));
        fp8_linear_backward(m, m->d_n, g->w1, m->d_g, a->q_in[L_W1], a->q_w[L_W1], a->p_g[L_W1], N, C, H, &a->src[L_W1], 0);
        fp8_linear_backward(m, m->d_n, g->w3, m->d_u, a->q_in[L_W3], a->q_w[L_W3], a->p_g[L_W3], N, C, H, &a->src[L_W3],
                            1); /* onto w1's */
        /* d_xm = d_x + rmsnorm backward */
        rmsnorm_backward(m->d_x, g->mlp_norm, m->d_n, a->xm, p->mlp_norm, a->rstd2, N, C);
        /* attention block: xm = x + ao Wo^T */
        memset(m->d_ao, 0, N * C * sizeof(float));
        fp8_linear_backward(m, m->d_ao, g->wo, m->d_x, a->q_in[L_OUT], a->q_w[L_OUT], a->p_g[L_OUT], N, C, C, &a->src[L_OUT], 0);
        float *dq = m->d_q, *dk = m->d_q + N * C, *dv = m->d_q + 2 * N * C;
        memset(m->d_q, 0, 3 * N * C * sizeof(float));
        attention_backward(dq, dk, dv, m->d_ao, a->att, a->q, a->k, a->v, B, T, C, NH);
        rope_backward(dq, B, T, NH, C / NH);
        rope_backward(dk, B, T, NH, C / NH);
        for (size_t n = 0; n < N; n++) {
            memcpy(m->d_qkv + n * 3 * C, dq + n * C, C * sizeof(float));
            memcpy(m->d_qkv + n * 3 * C + C, dk + n * C, C * sizeof(float));
            memcpy(m->d_qkv + n * 3 * C + 2 * C, dv + n * C, C * sizeof(float));
        }
        memset(m->d_n, 0, N * C * sizeof(float));
        fp8_linear_backward(m, m->d_n, g->wqkv, m->d_qkv, a->q_in[L_QKV], a->q_w[L_QKV], a->p_g[L_QKV], N, C, 3 * C,
                            &a->src[L_QKV], 0);
        rmsnorm_backward(m->d_x, g->attn_norm, m->d_n, a->x, p->attn_norm, a->rstd1, N, C);
    }
    embedding_backward(m->dwte, m->d_x, m->tokens, N, C);
}

float model_grad_norm(const model *m)
{
    double s = 0;
    for (size_t i = 0; i < m->nparams; i++)
        s += (double)m->grads[i] * m->grads[i];
    return (float)sqrt(s);
}

void model_adamw(model *m, float lr, float beta1, float beta2, float eps, float weight_decay, long t)
{
    float c1 = 1.0f - powf(beta1, (float)t), c2 = 1.0f - powf(beta2, (float)t);
    for (size_t i = 0; i < m->nparams; i++) {
        float g = m->grads[i];
        m->m1[i] = beta1 * m->m1[i] + (1 - beta1) * g;
        m->m2[i] = beta2 * m->m2[i] + (1 - beta2) * g * g;
        float mh = m->m1[i] / c1, vh = m->m2[i] / c2;
        m->params[i] -= lr * (mh / (sqrtf(vh) + eps) + weight_decay * m->params[i]);
    }
}

float *model_grads(model *m) { return m->grads; }

/* for tests: the flat parameter array */
float *model_params(model *m) { return m->params; }
