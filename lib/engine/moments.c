/*
 * moments.c — the engine's running sums joined: Pebay's pairwise update of
 * central moments (pieces into a part, parts into the tensor).
 */
#include <math.h>
#include <string.h>

#include "moments.h"

void fp8__moments_combine(fp8__moments *m, double nb, double mb, double M2b, double M3b, double M4b)
{
    if (nb == 0)
        return;
    double na = m->cn, N = na + nb;
    if (na == 0) {
        m->cn = nb, m->cmean = mb, m->cM2 = M2b, m->cM3 = M3b, m->cM4 = M4b;
        return;
    }
    double delta = mb - m->cmean, d2 = delta * delta;
    double M2a = m->cM2, M3a = m->cM3, M4a = m->cM4;
    m->cmean += delta * nb / N;
    m->cM4 = M4a + M4b + d2 * d2 * na * nb * (na * na - na * nb + nb * nb) / (N * N * N) +
             6 * d2 * (na * na * M2b + nb * nb * M2a) / (N * N) + 4 * delta * (na * M3b - nb * M3a) / N;
    m->cM3 = M3a + M3b + d2 * delta * na * nb * (na - nb) / (N * N) + 3 * delta * (na * M2b - nb * M2a) / N;
    m->cM2 = M2a + M2b + d2 * na * nb / N;
    m->cn = N;
}

void fp8__moments_merge(fp8__moments *a, const fp8__moments *b)
{
    fp8__moments_combine(a, b->cn, b->cmean, b->cM2, b->cM3, b->cM4);
    for (int l = 0; l < FP8_ML; l++) {
        a->l1[l] += b->l1[l], a->e2[l] += b->e2[l], a->q2[l] += b->q2[l];
        a->xq[l] += b->xq[l], a->xx[l] += b->xx[l];
    }
    for (int l = 0; l < 16; l++) {
        a->mn[l] = b->mn[l] < a->mn[l] ? b->mn[l] : a->mn[l];
        a->mx[l] = b->mx[l] > a->mx[l] ? b->mx[l] : a->mx[l];
        a->maxerr[l] = b->maxerr[l] > a->maxerr[l] ? b->maxerr[l] : a->maxerr[l];
        a->mnz[l] = b->mnz[l] < a->mnz[l] ? b->mnz[l] : a->mnz[l];
    }
    a->nan += b->nan, a->inf += b->inf, a->zero += b->zero, a->qbad += b->qbad;
}

void fp8__moments_init(fp8__moments *m)
{
    memset(m, 0, sizeof *m);
    for (int l = 0; l < 16; l++) {
        m->mn[l] = INFINITY;
        m->mx[l] = -INFINITY;
        m->mnz[l] = INFINITY;
        m->maxerr[l] = 0.0f;
    }
}

void fp8__moments_add_shifted(fp8__moments *m, double n, double K, double S1, double S2, double S3, double S4)
{
    if (n == 0)
        return;
    double d = S1 / n;                                   /* piece mean - K */
    double mb = K + d;
    double M2b = S2 - S1 * d;
    double M3b = S3 - 3 * d * S2 + 2 * n * d * d * d;
    double M4b = S4 - 4 * d * S3 + 6 * d * d * S2 - 3 * n * d * d * d * d;
    if (M2b < 0)
        M2b = 0;
    fp8__moments_combine(m, n, mb, M2b, M3b, M4b);
}
