/*
 * layers.c — the model's layers (layers.h).  Plain loops beside cblas_sgemm;
 * every backward was checked against central finite differences
 * (tests/test_layers.c).
 */
#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "layers.h"

#define RMS_EPS 1e-5f

void embedding_forward(float *out, const int *tokens, const float *wte, size_t N, size_t C)
{
    for (size_t n = 0; n < N; n++)
        memcpy(out + n * C, wte + (size_t)tokens[n] * C, C * sizeof *out);
}

void embedding_backward(float *dwte, const float *dout, const int *tokens, size_t N, size_t C)
{
    for (size_t n = 0; n < N; n++)
        for (size_t c = 0; c < C; c++)
            dwte[(size_t)tokens[n] * C + c] += dout[n * C + c];
}

void rmsnorm_forward(float *out, float *rstd, const float *inp, const float *w, size_t N, size_t C)
{
    for (size_t n = 0; n < N; n++) {
        const float *x = inp + n * C;
        double ss = 0;
        for (size_t c = 0; c < C; c++)
            ss += (double)x[c] * x[c];
        float r = 1.0f / sqrtf((float)(ss / (double)C) + RMS_EPS);
        rstd[n] = r;
        for (size_t c = 0; c < C; c++)
            out[n * C + c] = x[c] * r * w[c];
    }
}

void rmsnorm_backward(float *dinp, float *dw, const float *dout, const float *inp, const float *w, const float *rstd,
                      size_t N, size_t C)
{
    /* y_c = x_c r w_c, r = (mean x^2 + eps)^-1/2, dr/dx_c = -r^3 x_c / C */
    for (size_t n = 0; n < N; n++) {
        const float *x = inp + n * C, *dy = dout + n * C;
        float r = rstd[n];
        double dot = 0; /* sum_c dy_c w_c x_c */
        for (size_t c = 0; c < C; c++) {
            dot += (double)dy[c] * w[c] * x[c];
            dw[c] += dy[c] * x[c] * r;
        }
        float k = (float)(dot * (double)r * r * r / (double)C);
        for (size_t c = 0; c < C; c++)
            dinp[n * C + c] += dy[c] * w[c] * r - x[c] * k;
    }
}

void linear_forward(float *out, const float *inp, const float *w, size_t N, size_t C, size_t OC)
{
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)N, (int)OC, (int)C, 1.0f, inp, (int)C, w, (int)C, 0.0f,
                out, (int)OC);
}

void linear_backward(float *dinp, float *dw, const float *dout, const float *inp, const float *w, size_t N, size_t C,
                     size_t OC)
{
    /* dinp[N,C] += dout[N,OC] . w[OC,C];  dw[OC,C] += dout^T[OC,N] . inp[N,C] */
    if (dinp)
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)N, (int)C, (int)OC, 1.0f, dout, (int)OC, w, (int)C,
                    1.0f, dinp, (int)C);
    if (dw)
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)OC, (int)C, (int)N, 1.0f, dout, (int)OC, inp, (int)C,
                    1.0f, dw, (int)C);
}

/* cos and sin of theta(t, i) = 10000^(-2i/hs) t, computed once per (T, hs)
 * with the same expression as before: the same floats, without a pow, a
 * cos and a sin per element and call */
static float *rope_table(size_t T, size_t hs)
{
    static float *tab;
    static size_t tT, ths;
    if (tab && tT == T && ths == hs)
        return tab;
    float *n = malloc(T * hs * sizeof *n); /* [t][i]: cos at 2i, sin at 2i+1 */
    if (!n)
        return NULL;
    for (size_t t = 0; t < T; t++)
        for (size_t i = 0; i < hs / 2; i++) {
            double theta = pow(10000.0, -2.0 * (double)i / (double)hs) * (double)t;
            n[t * hs + 2 * i] = (float)cos(theta), n[t * hs + 2 * i + 1] = (float)sin(theta);
        }
    free(tab);
    tab = n, tT = T, ths = hs;
    return tab;
}

static void rope_apply(float *x, size_t B, size_t T, size_t NH, size_t hs, float sign)
{
    const float *tab = rope_table(T, hs);
    for (size_t b = 0; b < B; b++)
        for (size_t t = 0; t < T; t++)
            for (size_t h = 0; h < NH; h++) {
                float *v = x + ((b * T + t) * NH + h) * hs;
                for (size_t i = 0; i < hs / 2; i++) {
                    float c, sn;
                    if (tab) {
                        c = tab[t * hs + 2 * i], sn = sign * tab[t * hs + 2 * i + 1];
                    } else {
                        double theta = pow(10000.0, -2.0 * (double)i / (double)hs) * (double)t;
                        c = (float)cos(theta), sn = sign * (float)sin(theta);
                    }
                    float a = v[2 * i], bb = v[2 * i + 1];
                    v[2 * i] = a * c - bb * sn;
                    v[2 * i + 1] = a * sn + bb * c;
                }
            }
}

void rope_forward(float *x, size_t B, size_t T, size_t NH, size_t hs) { rope_apply(x, B, T, NH, hs, 1.0f); }

/* a rotation's transpose is the rotation by the opposite angle */
void rope_backward(float *dx, size_t B, size_t T, size_t NH, size_t hs) { rope_apply(dx, B, T, NH, hs, -1.0f); }

void attention_forward_ref(float *out, float *att, const float *q, const float *k, const float *v, size_t B,
                           size_t T, size_t C, size_t NH)
{
    size_t hs = C / NH;
    float scale = 1.0f / sqrtf((float)hs);
    for (size_t b = 0; b < B; b++)
        for (size_t h = 0; h < NH; h++)
            for (size_t t = 0; t < T; t++) {
                const float *qt = q + (b * T + t) * C + h * hs;
                float *a = att + ((b * NH + h) * T + t) * T;
                float mx = -INFINITY;
                for (size_t u = 0; u <= t; u++) {
                    const float *ku = k + (b * T + u) * C + h * hs;
                    float s = 0;
                    for (size_t i = 0; i < hs; i++)
                        s += qt[i] * ku[i];
                    a[u] = s * scale;
                    mx = a[u] > mx ? a[u] : mx; /* fmaxf without the call: NaN leaves mx too */
                }
                float sum = 0;
                for (size_t u = 0; u <= t; u++) {
                    a[u] = expf(a[u] - mx);
                    sum += a[u];
                }
                for (size_t u = 0; u < T; u++)
                    a[u] = u <= t ? a[u] / sum : 0.0f;
                float *o = out + (b * T + t) * C + h * hs;
                for (size_t i = 0; i < hs; i++)
                    o[i] = 0;
                for (size_t u = 0; u <= t; u++) {
                    const float *vu = v + (b * T + u) * C + h * hs;
                    for (size_t i = 0; i < hs; i++)
                        o[i] += a[u] * vu[i];
                }
            }
}

void attention_backward_ref(float *dq, float *dk, float *dv, const float *dout, const float *att, const float *q,
                            const float *k, const float *v, size_t B, size_t T, size_t C, size_t NH)
{
    size_t hs = C / NH;
    float scale = 1.0f / sqrtf((float)hs);
    float datt[4096]; /* T <= 4096 */
    for (size_t b = 0; b < B; b++)
        for (size_t h = 0; h < NH; h++)
            for (size_t t = 0; t < T; t++) {
                const float *a = att + ((b * NH + h) * T + t) * T;
                const float *dot = dout + (b * T + t) * C + h * hs;
                /* out_t = sum_u a_u v_u */
                float sum_ad = 0;
                for (size_t u = 0; u <= t; u++) {
                    const float *vu = v + (b * T + u) * C + h * hs;
                    float *dvu = dv + (b * T + u) * C + h * hs;
                    float d = 0;
                    for (size_t i = 0; i < hs; i++) {
                        d += dot[i] * vu[i];
                        dvu[i] += a[u] * dot[i];
                    }
                    datt[u] = d;
                    sum_ad += a[u] * d;
                }
                /* softmax backward, then the scaled dot products */
                const float *qt = q + (b * T + t) * C + h * hs;
                float *dqt = dq + (b * T + t) * C + h * hs;
                for (size_t u = 0; u <= t; u++) {
                    float ds = a[u] * (datt[u] - sum_ad) * scale;
                    const float *ku = k + (b * T + u) * C + h * hs;
                    float *dku = dk + (b * T + u) * C + h * hs;
                    for (size_t i = 0; i < hs; i++) {
                        dqt[i] += ds * ku[i];
                        dku[i] += ds * qt[i];
                    }
                }
            }
}

/* The same attention on sgemm, one (batch, head) at a time: S = scale Q K^T
 * (the full T x T; the masked half is ignored), the causal softmax in place,
 * O = A V; backward dV += A^T dO, dA = dO V^T, dS = A (dA - rowsum(A dA))
 * scale, dQ += dS K, dK += dS^T Q.  Operands are strided views of the
 * [B,T,C] tensors (leading dimension C). */
void attention_forward(float *out, float *att, const float *q, const float *k, const float *v, size_t B, size_t T,
                       size_t C, size_t NH)
{
    size_t hs = C / NH;
    float scale = 1.0f / sqrtf((float)hs);
    for (size_t b = 0; b < B; b++)
        for (size_t h = 0; h < NH; h++) {
            const size_t off = b * T * C + h * hs;
            float *A = att + (b * NH + h) * T * T;
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)T, (int)T, (int)hs, scale, q + off, (int)C,
                        k + off, (int)C, 0.0f, A, (int)T);
            for (size_t t = 0; t < T; t++) {
                float *a = A + t * T, mx = -INFINITY, sum = 0;
                for (size_t u = 0; u <= t; u++)
                    mx = a[u] > mx ? a[u] : mx; /* fmaxf without the call: NaN leaves mx too */
                for (size_t u = 0; u <= t; u++) {
                    a[u] = expf(a[u] - mx);
                    sum += a[u];
                }
                for (size_t u = 0; u < T; u++)
                    a[u] = u <= t ? a[u] / sum : 0.0f;
            }
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)T, (int)hs, (int)T, 1.0f, A, (int)T, v + off,
                        (int)C, 0.0f, out + off, (int)C);
        }
}

void attention_backward(float *dq, float *dk, float *dv, const float *dout, const float *att, const float *q,
                        const float *k, const float *v, size_t B, size_t T, size_t C, size_t NH)
{
    size_t hs = C / NH;
    float scale = 1.0f / sqrtf((float)hs);
    float *dA = malloc(T * T * sizeof *dA);
    if (!dA) { /* no memory for the scratch: the loops need none */
        attention_backward_ref(dq, dk, dv, dout, att, q, k, v, B, T, C, NH);
        return;
    }
    for (size_t b = 0; b < B; b++)
        for (size_t h = 0; h < NH; h++) {
            const size_t off = b * T * C + h * hs;
            const float *A = att + (b * NH + h) * T * T;
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)T, (int)hs, (int)T, 1.0f, A, (int)T, dout + off,
                        (int)C, 1.0f, dv + off, (int)C);
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)T, (int)T, (int)hs, 1.0f, dout + off, (int)C,
                        v + off, (int)C, 0.0f, dA, (int)T);
            for (size_t t = 0; t < T; t++) {
                const float *a = A + t * T;
                float *d = dA + t * T, sum_ad = 0;
                for (size_t u = 0; u <= t; u++)
                    sum_ad += a[u] * d[u];
                for (size_t u = 0; u < T; u++)
                    d[u] = u <= t ? a[u] * (d[u] - sum_ad) * scale : 0.0f;
            }
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)T, (int)hs, (int)T, 1.0f, dA, (int)T, k + off,
                        (int)C, 1.0f, dq + off, (int)C);
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)T, (int)hs, (int)T, 1.0f, dA, (int)T, q + off,
                        (int)C, 1.0f, dk + off, (int)C);
        }
    free(dA);
}

void swiglu_forward(float *out, const float *g, const float *u, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        float sg = 1.0f / (1.0f + expf(-g[i]));
        out[i] = g[i] * sg * u[i];
    }
}

void swiglu_backward(float *dg, float *du, const float *dout, const float *g, const float *u, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        float sg = 1.0f / (1.0f + expf(-g[i]));
        float silu = g[i] * sg;
        dg[i] += dout[i] * u[i] * sg * (1.0f + g[i] * (1.0f - sg)); /* silu' = s (1 + g (1 - s)) */
        du[i] += dout[i] * silu;
    }
}

float crossentropy_forward(float *probs, const float *logits, const int *targets, size_t N, size_t V)
{
    double loss = 0;
    for (size_t n = 0; n < N; n++) {
        const float *l = logits + n * V;
        float *p = probs + n * V;
        float mx = -INFINITY;
        for (size_t j = 0; j < V; j++)
            mx = l[j] > mx ? l[j] : mx;
        double sum = 0;
        for (size_t j = 0; j < V; j++) {
            p[j] = expf(l[j] - mx);
            sum += p[j];
        }
        for (size_t j = 0; j < V; j++)
            p[j] = (float)(p[j] / sum);
        loss -= log((double)p[targets[n]] + 1e-30);
    }
    return (float)(loss / (double)N);
}

void crossentropy_backward(float *dlogits, const float *probs, const int *targets, size_t N, size_t V)
{
    float inv = 1.0f / (float)N;
    for (size_t n = 0; n < N; n++)
        for (size_t j = 0; j < V; j++)
            dlogits[n * V + j] += (probs[n * V + j] - ((int)j == targets[n] ? 1.0f : 0.0f)) * inv;
}
