/*
 * stats_vec.c — lane-wise moment sums and the amax / min-nonzero pass (see
 * stats_vec.h).  Compiled three times with FP8_ISA = avx512, avx2, base.
 * The scalar tail runs the same arithmetic in lane 0.
 */
#include <math.h>
#include <string.h>

#include "stats_vec.h"

#ifndef FP8_ISA
#define FP8_ISA base
#endif
#define FP8_CAT2(a, b) a##b
#define FP8_CAT(a, b) FP8_CAT2(a, b)
#define FN(name) FP8_CAT(name, FP8_ISA)

typedef float vf16 __attribute__((vector_size(64)));
typedef float vf8 __attribute__((vector_size(32)));
typedef double vd8 __attribute__((vector_size(64)));
typedef int32_t vi16 __attribute__((vector_size(64)));
typedef uint32_t vu16 __attribute__((vector_size(64)));
typedef int64_t vl8 __attribute__((vector_size(64)));

static inline void acc_half(vd8 *s1, vd8 *s2, vd8 *s3, vd8 *s4, vd8 *l1, vd8 *x2, vd8 *e2, vd8 *xq, vd8 *q2,
                            vf8 xv, vf8 qv, vl8 ok, vl8 qok, double K)
{
    vd8 xd = __builtin_convertvector(xv, vd8);
    xd = (vd8)((vl8)xd & ok);               /* NaN/Inf lanes -> 0          */
    vd8 d = (vd8)((vl8)(xd - K) & ok);
    vd8 d2 = d * d;
    *s1 += d;
    *s2 += d2;
    *s3 += d2 * d;
    *s4 += d2 * d2;
    vd8 ax = (vd8)((vl8)xd & 0x7FFFFFFFFFFFFFFFll);
    *l1 += ax;
    *x2 += xd * xd;
    vd8 qd = __builtin_convertvector(qv, vd8);
    qd = (vd8)((vl8)qd & qok);
    vd8 xe = (vd8)((vl8)xd & qok);
    vd8 e = xe - qd;
    *e2 += e * e;
    *xq += xe * qd;
    *q2 += qd * qd;
}

void FN(fp8__moments_add_)(FP8_MOMENTS_ARGS)
{
    const double K = m->shift;
    vd8 s1a = {0}, s2a = {0}, s3a = {0}, s4a = {0}, l1a = {0}, x2a = {0}, e2a = {0}, xqa = {0}, q2a = {0};
    vd8 s1b = {0}, s2b = {0}, s3b = {0}, s4b = {0}, l1b = {0}, x2b = {0}, e2b = {0}, xqb = {0}, q2b = {0};
    vf16 mn, mx, me, mz;
    memcpy(&mz, m->mnz, 64);
    memcpy(&mn, m->mn, 64);
    memcpy(&mx, m->mx, 64);
    memcpy(&me, m->maxerr, 64);
    vu16 cnan = {0}, cinf = {0}, czero = {0}, cqbad = {0};
    const vi16 posinf = (vi16){0} + (int32_t)0x7F800000, neginf = (vi16){0} + (int32_t)0xFF800000u;
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        vf16 xv, qv;
        memcpy(&xv, x + i, 64);
        if (xq)
            memcpy(&qv, xq + i, 64);
        else
            qv = xv;
        vu16 a = (vu16)xv & 0x7FFFFFFFu;
        vi16 fin = (vi16)(a < 0x7F800000u);
        vu16 qa = (vu16)qv & 0x7FFFFFFFu;
        vi16 qfin = (vi16)(qa < 0x7F800000u) & fin;
        cnan -= (vu16)(vi16)(a > 0x7F800000u);
        cinf -= (vu16)(vi16)(a == 0x7F800000u);
        czero -= (vu16)(vi16)(a == 0);
        cqbad -= (vu16)(fin & ~qfin);
        /* min/max over finite lanes: non-finite lanes replaced by neutral */
        vf16 xmn = (vf16)(((vi16)xv & fin) | (posinf & ~fin));
        vf16 xmx = (vf16)(((vi16)xv & fin) | (neginf & ~fin));
        mn = (vf16)(((vi16)mn & (vi16)(mn <= xmn)) | ((vi16)xmn & ~(vi16)(mn <= xmn)));
        mx = (vf16)(((vi16)mx & (vi16)(mx >= xmx)) | ((vi16)xmx & ~(vi16)(mx >= xmx)));
        vi16 nzf = fin & (vi16)(a != 0);
        vf16 az = (vf16)(((vi16)a & nzf) | (posinf & ~nzf)); /* zero/non-finite -> +inf */
        mz = (vf16)(((vi16)mz & (vi16)(mz <= az)) | ((vi16)az & ~(vi16)(mz <= az)));
        vf16 ev = (vf16)((vi16)(xv - qv) & 0x7FFFFFFF & qfin);
        me = (vf16)(((vi16)me & (vi16)(me >= ev)) | ((vi16)ev & ~(vi16)(me >= ev)));
        /* widen the masks to 64-bit lanes for each half */
        vf8 xlo = {xv[0], xv[1], xv[2], xv[3], xv[4], xv[5], xv[6], xv[7]};
        vf8 xhi = {xv[8], xv[9], xv[10], xv[11], xv[12], xv[13], xv[14], xv[15]};
        vf8 qlo = {qv[0], qv[1], qv[2], qv[3], qv[4], qv[5], qv[6], qv[7]};
        vf8 qhi = {qv[8], qv[9], qv[10], qv[11], qv[12], qv[13], qv[14], qv[15]};
        vl8 oklo = {fin[0], fin[1], fin[2], fin[3], fin[4], fin[5], fin[6], fin[7]};
        vl8 okhi = {fin[8], fin[9], fin[10], fin[11], fin[12], fin[13], fin[14], fin[15]};
        vl8 qoklo = {qfin[0], qfin[1], qfin[2], qfin[3], qfin[4], qfin[5], qfin[6], qfin[7]};
        vl8 qokhi = {qfin[8], qfin[9], qfin[10], qfin[11], qfin[12], qfin[13], qfin[14], qfin[15]};
        acc_half(&s1a, &s2a, &s3a, &s4a, &l1a, &x2a, &e2a, &xqa, &q2a, xlo, qlo, oklo, qoklo, K);
        acc_half(&s1b, &s2b, &s3b, &s4b, &l1b, &x2b, &e2b, &xqb, &q2b, xhi, qhi, okhi, qokhi, K);
    }
    for (int l = 0; l < FP8_ML; l++) {
        m->s1[l] += s1a[l] + s1b[l];
        m->s2[l] += s2a[l] + s2b[l];
        m->s3[l] += s3a[l] + s3b[l];
        m->s4[l] += s4a[l] + s4b[l];
        m->l1[l] += l1a[l] + l1b[l];
        m->x2[l] += x2a[l] + x2b[l];
        m->e2[l] += e2a[l] + e2b[l];
        m->xq[l] += xqa[l] + xqb[l];
        m->q2[l] += q2a[l] + q2b[l];
    }
    memcpy(m->mn, &mn, 64);
    memcpy(m->mx, &mx, 64);
    memcpy(m->maxerr, &me, 64);
    memcpy(m->mnz, &mz, 64);
    for (int l = 0; l < 16; l++) {
        m->nan += cnan[l];
        m->inf += cinf[l];
        m->zero += czero[l];
        m->qbad += cqbad[l];
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
        m->s1[0] += d;
        m->s2[0] += d2;
        m->s3[0] += d2 * d;
        m->s4[0] += d2 * d2;
        m->l1[0] += fabs(xd);
        m->x2[0] += xd * xd;
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
}

void FN(fp8__range_)(FP8_RANGE_ARGS)
{
    vu16 amax = {0}, minnz = (vu16){0} + 0x7F800000u;
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        vu16 a;
        memcpy(&a, x + i, 64);
        a &= 0x7FFFFFFFu;
        vu16 fin = (vu16)(a < 0x7F800000u);
        vu16 af = a & fin;                                /* non-finite -> 0 */
        amax = (vu16)((vi16)(amax >= af) & (vi16)amax) | (vu16)(~(vi16)(amax >= af) & (vi16)af);
        vu16 nz = (vu16)(vi16)(af != 0);
        vu16 cand = (af & nz) | (((vu16){0} + 0x7F800000u) & ~nz);
        minnz = (vu16)((vi16)(minnz <= cand) & (vi16)minnz) | (vu16)(~(vi16)(minnz <= cand) & (vi16)cand);
    }
    uint32_t am = *amax_bits, mz = *minnz_bits;
    for (int l = 0; l < 16; l++) {
        if (amax[l] > am)
            am = amax[l];
        if (minnz[l] < mz)
            mz = minnz[l];
    }
    for (; i < n; i++) {
        uint32_t a;
        memcpy(&a, x + i, 4);
        a &= 0x7FFFFFFFu;
        if (a >= 0x7F800000u)
            continue;
        if (a > am)
            am = a;
        if (a && a < mz)
            mz = a;
    }
    *amax_bits = am;
    *minnz_bits = mz;
}
