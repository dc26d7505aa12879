/*
 * gemm.c — the limited-precision accumulator of FP8 tensor cores, emulated
 * (fp8_gemm.h).  Scalar on purpose: the model, not speed, is the point;
 * `make bench` prints its speed next to sgemm.
 */
#include <math.h>

#include "fp8_error.h"
#include "fp8_gemm.h"

/* x on the grid 2^q: truncated toward zero or rounded to nearest even */
static double to_grid(double x, int q, int round)
{
    double u = ldexp(x, -q);
    u = round ? nearbyint(u) : trunc(u);
    return ldexp(u, q);
}

/* S + p in an accumulator of `bits` significant bits */
static double acc_add(double s, double p, int bits, int round)
{
    if (p == 0)
        return s;
    double big = fabs(s) > fabs(p) ? fabs(s) : fabs(p);
    int e;
    frexp(big, &e); /* big in [2^(e-1), 2^e) */
    int q = e - bits;   /* the grid: the last kept bit of the larger operand */
    double r = to_grid(s, q, round) + to_grid(p, q, round);
    if (r != 0) {
        int er;
        frexp(r, &er);
        if (er > e) /* a carry into the next binade keeps bits, drops one more */
            r = to_grid(r, er - bits, round);
    }
    return r;
}

double fp8_dot_emulate(const fp8_acc_model *m, const float *a, const float *b, size_t K)
{
    if (m->acc_bits == 0) {
        float s = 0; /* float32, sequential: the products are exact */
        for (size_t k = 0; k < K; k++)
            s += a[k] * b[k];
        return s;
    }
    float c = 0;   /* the FP32 accumulator */
    double s = 0;  /* the limited one */
    size_t n = 0;
    for (size_t k = 0; k < K; k++) {
        double p = (double)a[k] * (double)b[k];
        s = acc_add(s, p, m->acc_bits, m->round);
        if (m->promote > 0 && ++n == (size_t)m->promote) {
            c += (float)s;
            s = 0, n = 0;
        }
    }
    return (double)(c + (float)s);
}

int fp8_gemm_emulate(const fp8_acc_model *m, const float *A, const float *B, size_t M, size_t N, size_t K,
                     float alpha, float *C)
{
    if (!m || m->acc_bits < 0 || m->acc_bits == 1 || m->acc_bits > 53 || m->promote < 0)
        return FP8_ERROR(FP8_EINVAL, "gemm: accumulator bits must be 0 (float32) or 2..53, promotion interval >= 0");
    for (size_t i = 0; i < M; i++)
        for (size_t j = 0; j < N; j++)
            C[i * N + j] = alpha * (float)fp8_dot_emulate(m, A + i * K, B + j * K, K);
    return FP8_OK;
}
