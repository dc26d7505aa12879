/*
 * moments_vec.c — the statistics' double-lane path (stats_vec.h): every
 * float exact in double, NaN and Inf counted and skipped, x_hat's non-finite
 * values counted; taken where the float32 sums of stats_vec.c cannot be
 * (magnitudes out of their range, non-finite values, a spread too small for
 * float32 fourth powers).  Compiled three times with FP8_ISA = avx512,
 * avx2, base.
 */
#include <math.h>
#include <string.h>

#include "stats_vec.h"
#include "vec_isa.h"

/* Masked path: 8 elements per step, all in double lanes (every float is
 * exact there); handles NaN/Inf inputs and non-finite x_hat. */
static void moments_masked(FP8_MOMENTS_ARGS)
{
    double ksum = 0, kn = 0;
    for (size_t k = 0; k < n; k++)
        if (isfinite(x[k]))
            ksum += x[k], kn++;
    const double K = kn ? (double)(float)(ksum / kn) : 0.0; /* the piece's mean, rounded */
    vd8 s1 = {0}, s2 = {0}, s3 = {0}, s4 = {0}, l1 = {0}, e2 = {0}, q2 = {0}, xqs = {0}, xx = {0};
    vd8 mn, mx, me, mz;
    for (int l = 0; l < 8; l++) {
        mn[l] = fmin(m->mn[l], m->mn[l + 8]);
        mx[l] = fmax(m->mx[l], m->mx[l + 8]);
        me[l] = fmax(m->maxerr[l], m->maxerr[l + 8]);
        mz[l] = fmin(m->mnz[l], m->mnz[l + 8]);
    }
    vl8 cnan = {0}, cinf = {0}, czero = {0}, cqbad = {0};
    const vl8 absmask = (vl8){0} + 0x7FFFFFFFFFFFFFFFll, infb = (vl8){0} + 0x7FF0000000000000ll;
    const vd8 pinf = (vd8){0} + INFINITY, ninf = (vd8){0} - INFINITY;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        vf8 xf, qf;
        memcpy(&xf, x + i, 32);
        if (xq)
            memcpy(&qf, xq + i, 32);
        else
            qf = xf;
        vd8 xd = __builtin_convertvector(xf, vd8);
        vd8 qd = __builtin_convertvector(qf, vd8);
        vl8 a = (vl8)xd & absmask, qa = (vl8)qd & absmask;
        vl8 fin = a < infb;
        vl8 qfin = (qa < infb) & fin;
        cnan -= a > infb;
        cinf -= a == infb;
        vl8 isz = a == 0;
        czero -= isz;
        cqbad -= fin & ~qfin;
        vd8 xz = (vd8)((vl8)xd & fin);                    /* non-finite -> 0 */
        xx += xz * xz;
        vd8 d = (vd8)((vl8)(xz - K) & fin);
        vd8 d2 = d * d;
        s1 += d;
        s2 += d2;
        s3 += d2 * d;
        s4 += d2 * d2;
        vd8 ax = (vd8)(a & fin);
        l1 += ax;
        vd8 qz = (vd8)((vl8)qd & qfin), xe = (vd8)((vl8)xz & qfin);
        vd8 e = xe - qz;
        e2 += e * e;
        xqs += xe * qz;
        q2 += qz * qz;
        vd8 xmn = (vd8)(((vl8)xd & fin) | ((vl8)pinf & ~fin));
        vd8 xmx = (vd8)(((vl8)xd & fin) | ((vl8)ninf & ~fin));
        mn = (vd8)(((vl8)mn & (mn <= xmn)) | ((vl8)xmn & ~(mn <= xmn)));
        mx = (vd8)(((vl8)mx & (mx >= xmx)) | ((vl8)xmx & ~(mx >= xmx)));
        vl8 nzf = fin & ~isz;
        vd8 az = (vd8)((a & nzf) | ((vl8)pinf & ~nzf));
        mz = (vd8)(((vl8)mz & (mz <= az)) | ((vl8)az & ~(mz <= az)));
        /* |x - x_hat| as float32 arithmetic does it (the oracle's fabsf) */
        vf8 ef = xf - qf;
        vd8 ed = (vd8)((vl8)__builtin_convertvector(ef, vd8) & absmask & qfin);
        me = (vd8)(((vl8)me & (me >= ed)) | ((vl8)ed & ~(me >= ed)));
    }
    double T1 = 0, T2 = 0, T3 = 0, T4 = 0;
    for (int l = 0; l < FP8_ML; l++) {
        T1 += s1[l], T2 += s2[l], T3 += s3[l], T4 += s4[l];
        m->l1[l] += l1[l];
        m->xx[l] += xx[l];
        m->e2[l] += e2[l];
        m->q2[l] += q2[l];
        m->xq[l] += xqs[l];
        m->mn[l] = (float)mn[l], m->mx[l] = (float)mx[l], m->maxerr[l] = (float)me[l], m->mnz[l] = (float)mz[l];
        m->mn[l + 8] = INFINITY, m->mx[l + 8] = -INFINITY, m->maxerr[l + 8] = 0, m->mnz[l + 8] = INFINITY;
        m->nan += (uint64_t)cnan[l];
        m->inf += (uint64_t)cinf[l];
        m->zero += (uint64_t)czero[l];
        m->qbad += (uint64_t)cqbad[l];
    }
    for (; i < n; i++) { /* tail: same arithmetic, lane 0 */
        float xv = x[i], qv = xq ? xq[i] : x[i];
        if (isnan(xv)) {
            m->nan++;
            continue;
        }
        if (isinf(xv)) {
            m->inf++;
            continue;
        }
        if (xv == 0.0f)
            m->zero++;
        else if (fabsf(xv) < m->mnz[0])
            m->mnz[0] = fabsf(xv);
        double xd = xv, d = xd - K, d2 = d * d;
        T1 += d, T2 += d2, T3 += d2 * d, T4 += d2 * d2;
        m->l1[0] += fabs(xd);
        m->xx[0] += xd * xd;
        if (xv < m->mn[0])
            m->mn[0] = xv;
        if (xv > m->mx[0])
            m->mx[0] = xv;
        if (!isfinite(qv)) {
            m->qbad++;
            continue;
        }
        double qd = qv, e = xd - qd;
        m->e2[0] += e * e;
        m->xq[0] += xd * qd;
        m->q2[0] += qd * qd;
        float ef = fabsf(xv - qv);
        if (ef > m->maxerr[0])
            m->maxerr[0] = ef;
    }
    fp8__moments_add_shifted(m, kn, K, T1, T2, T3, T4);
}

/* x's statistics of x[0..n) in double lanes (moments_masked on a scratch
 * copy; its error sums are discarded) */
void FN(fp8__x_masked_)(fp8__moments *m, const float *x, size_t n)
{
    fp8__moments t = *m;
    moments_masked(&t, x, NULL, n);
    m->cn = t.cn, m->cmean = t.cmean, m->cM2 = t.cM2, m->cM3 = t.cM3, m->cM4 = t.cM4;
    memcpy(m->l1, t.l1, sizeof m->l1);
    memcpy(m->xx, t.xx, sizeof m->xx);
    memcpy(m->mn, t.mn, sizeof m->mn);
    memcpy(m->mx, t.mx, sizeof m->mx);
    memcpy(m->mnz, t.mnz, sizeof m->mnz);
    m->nan = t.nan, m->inf = t.inf, m->zero = t.zero;
}

/* the error sums of x[0..n) against xq in double lanes, added to m's */
void FN(fp8__err_masked_)(fp8__moments *m, const float *x, const float *xq, size_t n)
{
    fp8__moments t;
    fp8__moments_init(&t);
    moments_masked(&t, x, xq, n);
    for (int l = 0; l < FP8_ML; l++)
        m->e2[l] += t.e2[l], m->q2[l] += t.q2[l], m->xq[l] += t.xq[l];
    for (int l = 0; l < 16; l++)
        m->maxerr[l] = t.maxerr[l] > m->maxerr[l] ? t.maxerr[l] : m->maxerr[l];
    m->qbad += t.qbad;
}
