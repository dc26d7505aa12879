/*
 * smooth_vec.c — the element-wise loops of the recipes that cast another
 * tensor than x (Smooth SwiGLU's shadow, NVFP4's Hadamard transform,
 * quantize_api.c; the column-wise and transposed recipes): the column
 * maxima, the column scaling, x's error sums against x_hat in double, the
 * 16-point Hadamard transform, and the transpose.
 * Built once per instruction set like stats_vec.c (see stats_vec.h); each
 * lane's arithmetic is fixed (no fused multiply-add: the build has
 * -ffp-contract=off), so every build gives the same bits.
 */
#include <string.h>
#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "f32bits.h"
#include "smooth_vec.h"
#include "vec_isa.h"


/* finite |x|'s bits, 0 for Inf and NaN */
static inline uint32_t finite_abs(float v)
{
    uint32_t b;
    memcpy(&b, &v, 4);
    b &= FP8_F32_ABS;
    return b < FP8_F32_INF ? b : 0;
}

static inline int finite(float v)
{
    uint32_t b;
    memcpy(&b, &v, 4);
    return (b & FP8_F32_ABS) < FP8_F32_INF;
}

void FN(fp8__colmax_)(FP8_COLMAX_ARGS)
{
    /* the bits of non-negative floats order as the floats do */
    uint32_t *m = (uint32_t *)mx;
    memset(m, 0, cols * sizeof *m);
    for (size_t i = 0; i < rows; i++) {
        const float *r = x + i * cols;
        size_t j = 0;
        for (; j + 16 <= cols; j += 16) {
            vu16 a, o;
            memcpy(&a, r + j, 64);
            memcpy(&o, m + j, 64);
            a &= FP8_F32_ABS;
            a = (vu16)(VLT(a, FP8_F32_INF) & (vi16)a); /* (VLT .. VGT: vec_isa.h) */
            o = (vu16)((VGT(a, o) & (vi16)a) | (~VGT(a, o) & (vi16)o));
            memcpy(m + j, &o, 64);
        }
        for (; j < cols; j++) {
            uint32_t a = finite_abs(r[j]);
            m[j] = a > m[j] ? a : m[j];
        }
    }
}

void FN(fp8__colscale_)(FP8_COLSCALE_ARGS)
{
    for (size_t i = 0; i < rows; i++) {
        const float *r = x + i * cols;
        float *o = y + i * cols;
        size_t j = 0;
        for (; j + 16 <= cols; j += 16) {
            vf16 v, w;
            memcpy(&v, r + j, 64);
            memcpy(&w, s + j, 64);
            v = divide ? v / w : v * w;
            memcpy(o + j, &v, 64);
        }
        for (; j < cols; j++)
            o[j] = divide ? r[j] / s[j] : r[j] * s[j];
    }
}

/* The accumulator's sixteen lanes as two sets of eight doubles (so that
 * two additions to each sum are in flight), kept in registers while a
 * stretch is summed. */
typedef struct {
    vd8 x2, e2, q2, xq, me;
    vl8 bad;
} err_lanes;

static inline __attribute__((always_inline)) void err8(err_lanes *L, const float *x, const float *xh)
{
    const vl8 absm = (vl8){0} + 0x7FFFFFFFFFFFFFFFll, infb = (vl8){0} + 0x7FF0000000000000ll;
    vf8 xf, qf;
    memcpy(&xf, x, 32);
    memcpy(&qf, xh, 32);
    vd8 xd = __builtin_convertvector(xf, vd8), qd = __builtin_convertvector(qf, vd8);
    vd8 ad = __builtin_convertvector(xf - qf, vd8); /* |x - x_hat| in float, as the scalar rule */
    vl8 fin = VLT((vl8)xd & absm, infb), qfin = fin & VLT((vl8)qd & absm, infb);
    vd8 xz = (vd8)((vl8)xd & fin), xq = (vd8)((vl8)xd & qfin), qz = (vd8)((vl8)qd & qfin);
    L->x2 += xz * xz;
    vd8 e = xq - qz;
    L->e2 += e * e;
    L->q2 += qz * qz;
    L->xq += xq * qz;
    ad = (vd8)((vl8)ad & absm & qfin);
    vl8 up = (vl8)VGT(ad, L->me);
    L->me = (vd8)((up & (vl8)ad) | (~up & (vl8)L->me));
    L->bad -= fin & ~qfin;
}

void FN(fp8__err_double_)(FP8_ERR_DOUBLE_ARGS)
{
    err_lanes L[2];
    for (int h = 0; h < 2; h++) {
        memcpy(&L[h].x2, acc->x2 + 8 * h, 64), memcpy(&L[h].e2, acc->e2 + 8 * h, 64);
        memcpy(&L[h].q2, acc->q2 + 8 * h, 64), memcpy(&L[h].xq, acc->xq + 8 * h, 64);
        memcpy(&L[h].me, acc->me + 8 * h, 64), memcpy(&L[h].bad, acc->bad + 8 * h, 64);
    }
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        err8(&L[0], x + i, xh + i);
        err8(&L[1], x + i + 8, xh + i + 8);
    }
    for (int l = 0; i < n; i++, l++) {
        err_lanes *A = &L[l / 8];
        int k = l % 8;
        double xd = x[i], qd = xh[i];
        if (!finite(x[i]))
            continue;
        A->x2[k] += xd * xd;
        if (!finite(xh[i])) {
            A->bad[k]++;
            continue;
        }
        double e = xd - qd;
        A->e2[k] += e * e;
        A->q2[k] += qd * qd;
        A->xq[k] += xd * qd;
        float ae = x[i] - xh[i];
        double a = ae < 0 ? -(double)ae : (double)ae;
        A->me[k] = a > A->me[k] ? a : A->me[k];
    }
    for (int h = 0; h < 2; h++) {
        memcpy(acc->x2 + 8 * h, &L[h].x2, 64), memcpy(acc->e2 + 8 * h, &L[h].e2, 64);
        memcpy(acc->q2 + 8 * h, &L[h].q2, 64), memcpy(acc->xq + 8 * h, &L[h].xq, 64);
        memcpy(acc->me + 8 * h, &L[h].me, 64), memcpy(acc->bad + 8 * h, &L[h].bad, 64);
    }
}

/* NVFP4's Hadamard transform (rht.c's reference, a butterfly at a time),
 * a group of 16 in two vectors of 8 lanes: the butterfly stages of span 1,
 * 2 and 4 pair lanes within a half (lane p takes v[p & ~len] + s v[p | len],
 * s = -1 where p has bit len: a - b, the reference's own operation), the
 * stage of span 8 the halves (lo + hi, lo - hi).  The sign multiplies and
 * the / 4 are exact where the reference's are: the same bits in every
 * build (tested).  (Scalar, it took 80 % of an NVFP4 gradient cast with
 * rht; as one vector of 16 lanes, the AVX2 build's shuffles across its two
 * halves went through memory.) */
static inline vf8 wht8(vf8 v)
{
    const vf8 s1 = {1, -1, 1, -1, 1, -1, 1, -1}, s2 = {1, 1, -1, -1, 1, 1, -1, -1}, s4 = {1, 1, 1, 1, -1, -1, -1, -1};
    vf8 a = __builtin_shufflevector(v, v, 0, 0, 2, 2, 4, 4, 6, 6), b = __builtin_shufflevector(v, v, 1, 1, 3, 3, 5, 5, 7, 7);
    v = a + b * s1;
    a = __builtin_shufflevector(v, v, 0, 1, 0, 1, 4, 5, 4, 5), b = __builtin_shufflevector(v, v, 2, 3, 2, 3, 6, 7, 6, 7);
    v = a + b * s2;
    a = __builtin_shufflevector(v, v, 0, 1, 2, 3, 0, 1, 2, 3), b = __builtin_shufflevector(v, v, 4, 5, 6, 7, 4, 5, 6, 7);
    return a + b * s4;
}

void FN(fp8__rht_)(FP8_RHT_ARGS)
{
    vf8 d0, d1;
    memcpy(&d0, d, sizeof d0);
    memcpy(&d1, d + 8, sizeof d1);
    for (size_t i = 0; i < rows; i++) {
        size_t j = 0;
        for (; j + 16 <= cols; j += 16) {
            vf8 lo, hi;
            memcpy(&lo, x + i * cols + j, sizeof lo);
            memcpy(&hi, x + i * cols + j + 8, sizeof hi);
            if (!inverse)
                lo *= d0, hi *= d1;
            lo = wht8(lo), hi = wht8(hi);
            vf8 a = (lo + hi) * 0.25f, b = (lo - hi) * 0.25f;
            if (inverse)
                a *= d0, b *= d1;
            memcpy(y + i * cols + j, &a, sizeof a);
            memcpy(y + i * cols + j + 8, &b, sizeof b);
        }
        if (j < cols && x != y) /* the row's partial group, as it is */
            memcpy(y + i * cols + j, x + i * cols + j, (cols - j) * sizeof *y);
    }
}

/* 8 rows of 8 floats at s (rows ss apart) transposed into o[0..8) (o[k]:
 * column k): pairs of rows interleaved, then pairs of pairs, then the
 * halves of the fours (the three stages of an 8 x 8 transpose in
 * registers) */
static inline __attribute__((always_inline)) void tr8(const float *s, size_t ss, vf8 o[8])
{
    vf8 r[8], t[8], u[8];
    for (int i = 0; i < 8; i++)
        memcpy(&r[i], s + (size_t)i * ss, sizeof r[i]);
    for (int i = 0; i < 8; i += 2) { /* t: (r_i, r_i+1) columns 0,1,4,5 and 2,3,6,7 */
        t[i] = __builtin_shufflevector(r[i], r[i + 1], 0, 8, 1, 9, 4, 12, 5, 13);
        t[i + 1] = __builtin_shufflevector(r[i], r[i + 1], 2, 10, 3, 11, 6, 14, 7, 15);
    }
    for (int h = 0; h < 8; h += 4) { /* u[h + k]: four rows' columns k and k + 4 */
        u[h] = __builtin_shufflevector(t[h], t[h + 2], 0, 1, 8, 9, 4, 5, 12, 13);
        u[h + 1] = __builtin_shufflevector(t[h], t[h + 2], 2, 3, 10, 11, 6, 7, 14, 15);
        u[h + 2] = __builtin_shufflevector(t[h + 1], t[h + 3], 0, 1, 8, 9, 4, 5, 12, 13);
        u[h + 3] = __builtin_shufflevector(t[h + 1], t[h + 3], 2, 3, 10, 11, 6, 7, 14, 15);
    }
    for (int k = 0; k < 4; k++) {
        o[k] = __builtin_shufflevector(u[k], u[k + 4], 0, 1, 2, 3, 8, 9, 10, 11);
        o[k + 4] = __builtin_shufflevector(u[k], u[k + 4], 4, 5, 6, 7, 12, 13, 14, 15);
    }
}

/* src's 8 x 8 block at (i0, j0) transposed into dst (8 rows) */
static inline __attribute__((always_inline)) void block8(const float *src, size_t rows, size_t cols, float *dst,
                                                         size_t i0, size_t j0)
{
    vf8 a[8];
    tr8(src + i0 * cols + j0, cols, a);
    for (int k = 0; k < 8; k++)
        memcpy(dst + (j0 + (size_t)k) * rows + i0, &a[k], sizeof a[k]);
}

/* v into o (32-byte aligned) past the caches: a store that needs not read
 * the line first, and leaves the caches to what is read next */
static inline __attribute__((always_inline)) void stream8(float *o, vf8 v)
{
#if defined(__AVX__)
    __m256 w;
    memcpy(&w, &v, sizeof w);
    _mm256_stream_ps(o, w);
#elif defined(__x86_64__)
    __m128 lo, hi;
    memcpy(&lo, &v, sizeof lo);
    memcpy(&hi, (const char *)&v + 16, sizeof hi);
    _mm_stream_ps(o, lo);
    _mm_stream_ps(o + 4, hi);
#else
    memcpy(o, &v, sizeof v);
#endif
}

/* src's rows i0 .. i1, columns j0 .. j1 into dst element by element (the
 * edges the blocks leave) */
static void tr_plain(const float *src, size_t rows, size_t cols, float *dst, size_t i0, size_t i1, size_t j0,
                     size_t j1)
{
    for (size_t j = j0; j < j1; j++)
        for (size_t i = i0; i < i1; i++)
            dst[j * rows + i] = src[i * cols + j];
}

/* streamed stores from 32 MB of dst on (below, the cast that reads dst
 * next finds it in the last-level cache: 2048^2 ran as fast either way,
 * 4096^2 16.6 against 19.1 ms for a transposed 1x128 cast) */
#define TR_NT_MIN ((size_t)1 << 23)
#define TR_STRIP 512
void FN(fp8__transpose_)(FP8_TRANSPOSE_ARGS)
{
    /* h: src's first rows, done one by one, that bring each of dst's rows
     * to a cache line's start (a caller's dst is seldom line-aligned; dst's
     * rows all share its alignment when their length is a multiple of 16) */
    size_t h = 0;
    if (rows * cols >= TR_NT_MIN && rows % 16 == 0 && (uintptr_t)dst % 4 == 0)
        h = (64 - (uintptr_t)dst % 64) % 64 / 4;
    const int nt = rows * cols >= TR_NT_MIN && rows % 16 == 0 && (uintptr_t)(dst + h) % 64 == 0;
    const size_t r16 = h + (rows - h) / 16 * 16, r8 = r16 + (rows - r16) / 8 * 8;
    const size_t c16 = cols - cols % 16, c8 = cols - cols % 8;
    tr_plain(src, rows, cols, dst, 0, h, 0, cols); /* the head */
    for (size_t s0 = 0; s0 < c16; s0 += TR_STRIP) {
        const size_t s1 = s0 + TR_STRIP < c16 ? s0 + TR_STRIP : c16;
        for (size_t i0 = h; i0 < r16; i0 += 16)
            for (size_t j0 = s0; j0 < s1; j0 += 16) {
                vf8 a[8], b[8], c[8], d[8];
                tr8(src + i0 * cols + j0, cols, a);
                tr8(src + (i0 + 8) * cols + j0, cols, b);
                tr8(src + i0 * cols + j0 + 8, cols, c);
                tr8(src + (i0 + 8) * cols + j0 + 8, cols, d);
                for (int k = 0; k < 8; k++) {
                    float *o = dst + (j0 + (size_t)k) * rows + i0, *p = o + 8 * rows;
                    if (nt) {
                        stream8(o, a[k]), stream8(o + 8, b[k]), stream8(p, c[k]), stream8(p + 8, d[k]);
                    } else {
                        memcpy(o, &a[k], sizeof a[k]), memcpy(o + 8, &b[k], sizeof b[k]);
                        memcpy(p, &c[k], sizeof c[k]), memcpy(p + 8, &d[k], sizeof d[k]);
                    }
                }
            }
    }
    /* the columns c16 .. c8 of the bands' rows, and all columns of rows
     * r16 .. r8, in 8 x 8 blocks */
    for (size_t i0 = h; i0 < r16; i0 += 8)
        for (size_t j0 = c16; j0 < c8; j0 += 8)
            block8(src, rows, cols, dst, i0, j0);
    for (size_t i0 = r16; i0 < r8; i0 += 8)
        for (size_t j0 = 0; j0 < c8; j0 += 8)
            block8(src, rows, cols, dst, i0, j0);
    tr_plain(src, rows, cols, dst, h, r8, c8, cols); /* the last columns of the rows blocks took */
    tr_plain(src, rows, cols, dst, r8, rows, 0, cols); /* the last rows */
#if defined(__x86_64__)
    if (nt)
        _mm_sfence(); /* the streamed stores before any later one */
#endif
}
