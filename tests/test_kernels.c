/*
 * test_kernels.c — suite kernels: the statistics engine's vector loops
 * (lib/engine/stats_vec.c, range_vec.c, smooth_vec.c; the cast kernel's in
 * test_kernels_cast.c) of every instruction set this CPU runs, each
 * against a plain scalar loop
 * written here, or, for the running sums whose last bits depend on fused
 * multiply-adds, against the portable build or the separate loop.
 *
 * The engine uses one set per process (kernels.c picks the widest), so the
 * other suites test only that one; here AVX-512, AVX2 and the portable
 * loops all run.  A set this CPU lacks is reported as a skip.  One test
 * feeds a deliberately broken amax loop through the same comparison and
 * requires it to be caught.
 */
#include <CUnit/CUnit.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <pthread.h>
#include <sched.h>

#include "f32bits.h"
#include "fp8_format.h"
#include "parallel.h"
#include "smooth_vec.h"
#include "stats_vec.h"
#include "tests.h"

#include "kernels_isas.h"
#include "quantize_tiles.h"
#include "rht.h"

static const size_t lengths[] = {0, 1, 15, 16, 17, 63, 64, 65, 255, 256, 257, 1000, 4099};
#define NLEN (sizeof lengths / sizeof lengths[0])

/* the plain loops the vector ones must equal */
static void ref_amax(const float *x, size_t n, uint32_t *amax, uint64_t *ninf, uint64_t *nnan)
{
    *amax = 0, *ninf = 0, *nnan = 0;
    for (size_t i = 0; i < n; i++) {
        if (isnan(x[i]))
            ++*nnan;
        else if (isinf(x[i]))
            ++*ninf;
        else if (bits(fabsf(x[i])) > *amax)
            *amax = bits(fabsf(x[i]));
    }
}

static void ref_range(const float *x, size_t n, uint32_t *amax, uint32_t *minnz)
{
    *amax = 0, *minnz = FP8_F32_INF;
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(x[i]))
            continue;
        uint32_t a = bits(fabsf(x[i]));
        *amax = a > *amax ? a : *amax;
        if (a && a < *minnz)
            *minnz = a;
    }
}

/* docs/statistics.md: bin 0 +-0, 1 subnormal, k = [2^(k-128), 2^(k-127)), 256 Inf and NaN */
static unsigned ref_bin(float v)
{
    uint32_t a = bits(v) & FP8_F32_ABS;
    if (!a)
        return 0;
    return (a >> 23) + 1;
}

/* 1 when the loop's amax and counts equal the plain loop's on every kind
 * and length (a failing case printed) */
static int amax_agrees(void (*scan)(FP8_AMAX_SCAN_ARGS), const char *name)
{
    float *x = malloc(4099 * sizeof *x);
    int ok = x != NULL;
    for (int kind = 0; ok && kind < NKINDS; kind++)
        for (size_t li = 0; ok && li < NLEN; li++) {
            size_t n = lengths[li];
            fill(x, n, kind);
            uint32_t a, ra;
            uint64_t ci, cn, rci, rcn;
            scan(x, n, &a, &ci, &cn);
            ref_amax(x, n, &ra, &rci, &rcn);
            if (a != ra || ci != rci || cn != rcn) {
                fprintf(stderr, "\n  %s amax_scan, kind %d, n %zu: %08x %llu %llu, plain loop %08x %llu %llu\n", name,
                        kind, n, a, (unsigned long long)ci, (unsigned long long)cn, ra, (unsigned long long)rci,
                        (unsigned long long)rcn);
                ok = 0;
            }
        }
    free(x);
    return ok;
}

static void test_amax_scan(void)
{
    find_isas();
    for (int k = 0; k < 3; k++)
        if (isas[k].runs_here)
            CU_ASSERT(amax_agrees(isas[k].amax_scan, isas[k].name));
}

/* an amax loop that misses the last element: the comparison must catch it */
static void broken_scan(FP8_AMAX_SCAN_ARGS) { fp8__amax_scan_base(x, n ? n - 1 : 0, amax_bits, inf_count, nan_count); }

static void test_broken_amax_is_caught(void)
{
    fprintf(stderr, "\n  (a deliberately broken amax loop follows; its disagreement is expected)");
    CU_ASSERT(!amax_agrees(broken_scan, "broken"));
}

/* check(I, x, n) for every ISA this CPU runs from isas[first] on, every
 * kind of input and every length (x: 4099 floats of scratch) */
typedef void (*case_fn)(const isa *I, float *x, size_t n);
static void every_case(int first, case_fn check)
{
    find_isas();
    float *x = malloc(4099 * sizeof *x);
    CU_ASSERT_FATAL(x != NULL);
    for (int k = first; k < 3; k++) {
        if (!isas[k].runs_here)
            continue;
        for (int kind = 0; kind < NKINDS; kind++)
            for (size_t li = 0; li < NLEN; li++) {
                fill(x, lengths[li], kind);
                check(&isas[k], x, lengths[li]);
            }
    }
    free(x);
}

static void range_case(const isa *I, float *x, size_t n)
{
    uint32_t a = 0, m = FP8_F32_INF, ra, rm; /* (the loop merges into what it is given) */
    I->range(x, n, &a, &m);
    ref_range(x, n, &ra, &rm);
    CU_ASSERT_EQUAL(a, ra);
    CU_ASSERT_EQUAL(m, rm);
}

static void test_range(void) { every_case(0, range_case); }

static void test_range_groups(void)
{
    find_isas();
    const size_t glens[] = {16, 32, 128};
    float *x = malloc(4096 * sizeof *x);
    uint32_t a[256], m[256];
    CU_ASSERT_FATAL(x != NULL);
    for (int k = 0; k < 3; k++) {
        if (!isas[k].runs_here)
            continue;
        for (int kind = 0; kind < NKINDS; kind++)
            for (int gi = 0; gi < 3; gi++) {
                size_t glen = glens[gi], n = 4096 - (kind % 2) * glen; /* whole groups */
                fill(x, n, kind);
                isas[k].range_groups(x, n, glen, a, m);
                uint32_t a2[256];
                memset(a2, 0xA5, sizeof a2);
                isas[k].range_groups(x, n, glen, a2, NULL); /* the maxima alone */
                for (size_t g = 0; g < n / glen; g++) {
                    uint32_t ra, rm;
                    ref_range(x + g * glen, glen, &ra, &rm);
                    CU_ASSERT_EQUAL(a[g], ra);
                    CU_ASSERT_EQUAL(m[g], rm);
                    CU_ASSERT_EQUAL(a2[g], ra);
                }
            }
        /* blocks of 16 groups, most finite, one holding an Inf or a NaN
         * (each block found with or without such values: the vector paths
         * differ), groups of zeros only, of the smallest subnormal, of the
         * largest finite value, of Inf and NaN only */
        for (int gi = 0; gi < 3; gi++) {
            size_t glen = glens[gi], n = 4096, ng = n / glen;
            fill(x, n, 0);
            for (size_t g = 0; g < ng; g++) {
                float *xg = x + g * glen;
                for (size_t i = 0; i < glen; i++) {
                    if (g % 7 == 1) /* zeros only */
                        xg[i] = i % 2 ? 0.0f : -0.0f;
                    else if (g % 7 == 2) /* zeros and the smallest subnormal */
                        xg[i] = i % 3 ? 0.0f : from_bits(1);
                    else if (g == 4) /* Inf and NaN only */
                        xg[i] = i % 2 ? INFINITY : NAN;
                }
                if (g % 7 == 3)
                    xg[glen / 2] = -3.4028235e38f;
                if (g % 7 == 5 && g > 16 * 3 && g < 16 * 4) /* in the fourth block of 16 only */
                    xg[glen - 1] = NAN;
            }
            isas[k].range_groups(x, n, glen, a, m);
            for (size_t g = 0; g < ng; g++) {
                uint32_t ra, rm;
                ref_range(x + g * glen, glen, &ra, &rm);
                CU_ASSERT_EQUAL(a[g], ra);
                CU_ASSERT_EQUAL(m[g], rm);
            }
        }
    }
    free(x);
}

/* 1 when the sub-histograms (summed) hold x[0..n)'s bins as ref_bin counts them */
static int bins_agree(uint32_t (*sub)[257], const float *x, size_t n)
{
    uint64_t ref[257] = {0};
    for (size_t i = 0; i < n; i++)
        ref[ref_bin(x[i])]++;
    int same = 1;
    for (int b = 0; b < 257; b++) {
        uint64_t got = 0;
        for (int s = 0; s < FP8_HIST_SUBS; s++)
            got += sub[s][b];
        same &= got == ref[b];
    }
    return same;
}

static void hist_case(const isa *I, float *x, size_t n)
{
    static uint32_t sub[FP8_HIST_SUBS][257];
    memset(sub, 0, sizeof sub);
    I->hist(sub, x, n);
    CU_ASSERT(bins_agree(sub, x, n));
}

static void test_hist(void) { every_case(0, hist_case); }

/* the exponent histogram as x's pass keeps it (its window counted in
 * registers, added to sub[0] before the pass returns); with and without
 * the pass's prefetch ahead of x (which reads nothing it counts) */
static void xmoments_hist_case(const isa *I, float *x, size_t n)
{
    static fp8__hist_state h;
    for (uint32_t pf = 0; pf <= 8192; pf += 8192) {
        memset(&h, 0, sizeof h);
        fp8__moments m;
        fp8__moments_init(&m);
        I->xmoments(&m, x, n, &h, pf);
        CU_ASSERT(bins_agree(h.sub, x, n));
    }
}

static void test_xmoments_hist(void) { every_case(0, xmoments_hist_case); }

/* The plain rule: the first group with the largest amax / minnz among
 * groups with amax nonzero and minnz finite; inputs with distinct ratios
 * (then the order of comparison cannot matter). */
static void test_best_ratio(void)
{
    find_isas();
    enum { NG = 203 };
    uint32_t a[NG], m[NG];
    for (int k = 0; k < 3; k++) {
        if (!isas[k].runs_here)
            continue;
        for (int trial = 0; trial < 40; trial++) {
            for (int g = 0; g < NG; g++) {
                float mz = ldexpf(1.0f + (float)g / 1024.0f, (int)(next() % 40) - 30 - (trial % 5 == 0 ? 120 : 0));
                float am = mz * (1.0f + (float)(next() % 100000));
                a[g] = bits(am), m[g] = bits(mz);
                if (next() % 9 == 0)
                    m[g] = FP8_F32_INF; /* no nonzero */
                if (next() % 11 == 0)
                    a[g] = 0; /* all zero */
            }
            size_t ref = SIZE_MAX;
            double best = -1;
            for (int g = 0; g < NG; g++) {
                if (!a[g] || m[g] >= FP8_F32_INF)
                    continue;
                double r = (double)from_bits(a[g]) / (double)from_bits(m[g]);
                if (r > best)
                    best = r, ref = (size_t)g;
            }
            CU_ASSERT_EQUAL(isas[k].best_ratio(a, m, NG), ref);
        }
        /* ratios within a fifth of a binade of each other, the mantissas
         * of a and m anywhere: the differences of the bits order them
         * otherwise than their values (the first pass's bound is then what
         * keeps the true maximum among the candidates) */
        for (int trial = 0; trial < 400; trial++) {
            size_t ref = SIZE_MAX;
            double best = -1;
            for (int g = 0; g < NG; g++) {
                double mz = ldexp(1.0 + (double)(next() % 1000000) / 1e6, (int)(next() % 20) - 10);
                double r = exp2(10.0 + 0.2 * (double)(next() % 1000000) / 1e6);
                a[g] = bits((float)(mz * r)), m[g] = bits((float)mz);
                double q = (double)from_bits(a[g]) / (double)from_bits(m[g]);
                if (q > best)
                    best = q, ref = (size_t)g;
            }
            CU_ASSERT_EQUAL(isas[k].best_ratio(a, m, NG), ref);
        }
    }
}

/* Ties: groups drawn from a few (amax, min nonzero) pairs, several with
 * the same ratio (as on data already cast to a grid), the largest held by
 * many groups: the first of them, by exact cross products. */
static void test_best_ratio_ties(void)
{
    find_isas();
    enum { NG = 517 };
    uint32_t a[NG], m[NG];
    const float pa[] = {448.0f, 224.0f, 6.0f, 3.0f, 448.0f, 1.5f, 0.75f}, pm[] = {2.0f, 1.0f, 0.5f, 0.25f, 4.0f, 1.0f, 0.5f};
    for (int k = 0; k < 3; k++) {
        if (!isas[k].runs_here)
            continue;
        for (int trial = 0; trial < 60; trial++) {
            for (int g = 0; g < NG; g++) {
                int j = (int)(next() % 7);
                a[g] = bits(pa[j]), m[g] = bits(pm[j]); /* 224, 224, 12, 12, 112, 1.5, 1.5 */
                if (trial % 3 == 0 && j == 0)
                    a[g] = bits(3.0f); /* (the largest ratio then rarer; amax >= min nonzero, as always) */
            }
            size_t ref = SIZE_MAX;
            double ba = 0, bm = 1;
            for (int g = 0; g < NG; g++) {
                double av = from_bits(a[g]), mv = from_bits(m[g]);
                if (av * bm > ba * mv)
                    ba = av, bm = mv, ref = (size_t)g;
            }
            CU_ASSERT_EQUAL(isas[k].best_ratio(a, m, NG), ref);
        }
    }
}

/* NVFP4's block scales of every ISA against the rule one block at a time
 * through the format's own scalar cast: decode = e4m3((amax / 6) * S_enc,
 * nearest, saturating), scale S_enc / decode (Inf: FLT_MAX), scale_inv
 * decode * s_global, both 0 where the decode scale is 0.  Amaxes from 0 and
 * subnormal decode scales to the global amax itself. */
static void test_nvfp4_scales(void)
{
    find_isas();
    enum { NG = 16 * 40 + 7 };
    const fp8_format *e4m3 = fp8_format_find("e4m3", NULL);
    const fp8_cast_mode mode = {FP8_ROUND_NEAREST, FP8_SATURATE, 0, 0};
    uint32_t a[NG];
    float sc[NG], si[NG];
    for (int k = 0; k < 3; k++) {
        if (!isas[k].runs_here)
            continue;
        for (int trial = 0; trial < 20; trial++) {
            /* (every fifth a subnormal global amax: S_enc then FLT_MAX, as
             * quantize_scales.c clamps it, and scales past it FLT_MAX) */
            float gamax = ldexpf(1.0f + (float)(next() % 1000) / 1000.0f,
                                 trial % 5 == 4 ? -135 : (int)(next() % 60) - 30);
            for (int g = 0; g < NG; g++) {
                /* the global amax's fraction down to 2^-24 of it (decode
                 * scales below e4m3's subnormals), zeros, the amax itself */
                float v = gamax * ldexpf((float)(next() % 1000000) / 1e6f, -(int)(next() % 25));
                a[g] = bits(g % 37 == 0 ? 0.0f : g % 41 == 0 ? gamax : v);
            }
            float S_enc = (448.0f * 6.0f) / gamax;
            S_enc = isinf(S_enc) ? 3.4028235e38f : S_enc;
            float sg = 1.0f / S_enc;
            int clamped = 0;
            size_t done = isas[k].nvfp4_scales(a, NG, S_enc, sg, sc, si);
            CU_ASSERT_EQUAL(done, (size_t)NG / 16 * 16);
            int bad = 0, subs = 0;
            for (size_t g = 0; g < done; g++) {
                float dec = (from_bits(a[g]) / 6.0f) * S_enc;
                float sb = fp8_format_decode(e4m3, fp8_format_encode(e4m3, &mode, dec, 0, NULL));
                float rs = 0.0f, ri = 0.0f;
                if (sb > 0.0f) {
                    rs = S_enc / sb, ri = sb * sg;
                    if (isinf(rs))
                        rs = 3.4028235e38f, clamped++;
                }
                subs += sb > 0.0f && sb < 0x1p-6f;
                bad += bits(sc[g]) != bits(rs) || bits(si[g]) != bits(ri);
            }
            CU_ASSERT_EQUAL(bad, 0);
            CU_ASSERT(subs > 0); /* (the subnormal decode scales were exercised) */
            if (trial % 5 == 4)
                CU_ASSERT(clamped > 0); /* (and the scales past FLT_MAX) */
        }
    }
}

static double rel(double a, double b)
{
    double d = fabs(a - b), s = fmax(fabs(a), fabs(b));
    return s > 0 ? d / s : d;
}

/* the running sums against the portable loops: counts and extremes equal,
 * sums within 1e-6 (fused multiply-adds change the float partials' last
 * bits), for x alone, the error sums and both in one pass */
static void moments_close(const fp8__moments *a, const fp8__moments *b)
{
    CU_ASSERT_EQUAL(a->nan, b->nan);
    CU_ASSERT_EQUAL(a->inf, b->inf);
    CU_ASSERT_EQUAL(a->zero, b->zero);
    CU_ASSERT_EQUAL(a->qbad, b->qbad);
    CU_ASSERT(rel(a->cn, b->cn) == 0);
    CU_ASSERT(rel(a->cmean, b->cmean) < 1e-6 || fabs(a->cmean - b->cmean) < 1e-9);
    CU_ASSERT(rel(a->cM2, b->cM2) < 1e-6);
    CU_ASSERT(rel(a->cM4, b->cM4) < 1e-6);
    float amn = INFINITY, bmn = INFINITY, amx = -INFINITY, bmx = -INFINITY, ame = 0, bme = 0, az = INFINITY,
          bz = INFINITY;
    double sa[5] = {0}, sb[5] = {0};
    for (int l = 0; l < 16; l++) {
        amn = fminf(amn, a->mn[l]), bmn = fminf(bmn, b->mn[l]);
        amx = fmaxf(amx, a->mx[l]), bmx = fmaxf(bmx, b->mx[l]);
        ame = fmaxf(ame, a->maxerr[l]), bme = fmaxf(bme, b->maxerr[l]);
        az = fminf(az, a->mnz[l]), bz = fminf(bz, b->mnz[l]);
    }
    for (int l = 0; l < FP8_ML; l++) {
        sa[0] += a->l1[l], sa[1] += a->e2[l], sa[2] += a->q2[l], sa[3] += a->xq[l], sa[4] += a->xx[l];
        sb[0] += b->l1[l], sb[1] += b->e2[l], sb[2] += b->q2[l], sb[3] += b->xq[l], sb[4] += b->xx[l];
    }
    CU_ASSERT(bits(amn) == bits(bmn) && bits(amx) == bits(bmx) && bits(ame) == bits(bme) && bits(az) == bits(bz));
    for (int k = 0; k < 5; k++)
        CU_ASSERT(rel(sa[k], sb[k]) < 1e-6);
}

static void moments_case(const isa *I, float *x, size_t n)
{
    static float q[4099];
    for (size_t i = 0; i < n; i++) /* an x_hat: x rounded to 4 significant bits, Inf past 2^100 */
        q[i] = fabsf(x[i]) > 0x1p100f ? INFINITY : from_bits(bits(x[i]) & 0xFFF80000u);
    fp8__moments v, r;
    fp8__moments_init(&v), fp8__moments_init(&r);
    I->xmoments(&v, x, n, NULL, 8192), isas[0].xmoments(&r, x, n, NULL, 0); /* (the prefetch changes nothing) */
    moments_close(&v, &r);
    fp8__moments_init(&v), fp8__moments_init(&r);
    I->err(&v, x, q, n), isas[0].err(&r, x, q, n);
    moments_close(&v, &r);
    fp8__moments_init(&v), fp8__moments_init(&r);
    I->both(&v, x, q, n, NULL), isas[0].both(&r, x, q, n, NULL);
    moments_close(&v, &r);
}

/* AVX2 and AVX-512 against the portable loops */
static void test_moments(void) { every_case(1, moments_case); }

/* Smooth SwiGLU's loops (smooth_vec.c) against plain loops: x's n elements
 * as rows x cols for several widths (a width below, at and past a vector;
 * the last rows*cols < n elements dropped).  Column maxima and the scaled
 * tensors bit for bit (both ways, into another array and in place). */
static void smooth_cols_case(const isa *I, float *x, size_t n)
{
    static const size_t widths[] = {1, 15, 16, 17, 40, 4099};
    static float mx[4099], rmx[4099], s[4099], y[4099], ry[4099];
    for (size_t w = 0; w < sizeof widths / sizeof widths[0]; w++) {
        size_t cols = widths[w], rows = cols <= n ? n / cols : 0;
        if (!rows)
            continue;
        for (size_t j = 0; j < cols; j++) {
            rmx[j] = 0.0f;
            for (size_t i = 0; i < rows; i++) {
                float a = fabsf(x[i * cols + j]);
                if (isfinite(a) && a > rmx[j])
                    rmx[j] = a;
            }
        }
        I->colmax(x, rows, cols, mx);
        CU_ASSERT_EQUAL(memcmp(mx, rmx, cols * sizeof *mx), 0);
        for (size_t j = 0; j < cols; j++) /* the column scales, some subnormal, some huge */
            s[j] = rmx[j] > 0 ? 1.0f / rmx[j] : j % 3 ? 0x1p-140f : 3.0f;
        for (int divide = 0; divide < 2; divide++) {
            for (size_t i = 0; i < rows * cols; i++)
                ry[i] = divide ? x[i] / s[i % cols] : x[i] * s[i % cols];
            I->colscale(x, rows, cols, s, divide, y);
            CU_ASSERT_EQUAL(memcmp(y, ry, rows * cols * sizeof *y), 0);
            I->colscale(y, rows, cols, s, !divide, y); /* in place: back */
            for (size_t i = 0; i < rows * cols; i++)
                ry[i] = divide ? ry[i] * s[i % cols] : ry[i] / s[i % cols];
            CU_ASSERT_EQUAL(memcmp(y, ry, rows * cols * sizeof *y), 0);
        }
    }
}

static void test_smooth_cols(void) { every_case(0, smooth_cols_case); }

/* the elements of a and b that differ: in their bits, unless both are NaN
 * (which NaN an operation on two of them gives is the compiler's choice of
 * operand order, in the reference too) */
static size_t nan_or_bits_differ(const float *a, const float *b, size_t n)
{
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        k += !(isnan(a[i]) && isnan(b[i])) && memcmp(a + i, b + i, sizeof *a) != 0;
    return k;
}

/* NVFP4's Hadamard transform (the vector form, smooth_vec.c) against the
 * reference a butterfly at a time (rht.c), bit for bit (NaN for NaN): both
 * ways, into another array (a row's partial group copied) and in place,
 * for widths with and without a partial group. */
static void rht_case(const isa *I, float *x, size_t n)
{
    static const size_t widths[] = {15, 16, 17, 40, 64, 4099};
    static float y[4099], r[4099];
    float d[16];
    fp8__rht_signs(n, d);
    for (size_t w = 0; w < sizeof widths / sizeof widths[0]; w++) {
        size_t cols = widths[w], rows = cols <= n ? n / cols : 0;
        for (int inverse = 0; rows && inverse < 2; inverse++) {
            memcpy(r, x, rows * cols * sizeof *r);
            fp8__rht_apply_ref(r, rows, cols, d, inverse);
            memset(y, 0xA5, sizeof y);
            I->rht(x, y, rows, cols, d, inverse);
            CU_ASSERT_EQUAL(nan_or_bits_differ(y, r, rows * cols), 0);
            memcpy(y, x, rows * cols * sizeof *y);
            I->rht(y, y, rows, cols, d, inverse);
            CU_ASSERT_EQUAL(nan_or_bits_differ(y, r, rows * cols), 0);
        }
    }
}

static void test_rht(void) { every_case(0, rht_case); }

/* The transpose of every ISA against the plain tiles (quantize_tiles.c),
 * element for element: shapes below, at and past the blocks of 8 and 16
 * and the strips of 512 columns, and one of 32 MB (stored past the caches)
 * into a line-aligned dst and into dst 4, 16 and 60 bytes past a line (its
 * rows' first elements up to a line boundary one by one). */
static void test_transpose(void)
{
    static const size_t shapes[][2] = {{1, 1},   {7, 9},     {8, 8},     {16, 16},  {17, 33},
                                       {40, 1030}, {1030, 40}, {24, 1100}, {4096, 2048}};
    find_isas();
    for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++) {
        const size_t R = shapes[k][0], C = shapes[k][1], n = R * C;
        float *src = malloc(n * sizeof *src), *want = malloc(n * sizeof *want);
        unsigned char *raw = malloc(n * sizeof(float) + 128);
        CU_ASSERT_FATAL(src && want && raw);
        for (size_t i = 0; i < n; i++)
            src[i] = (float)i - 0.5f * (float)(i % 3);
        fp8__transpose_ref(src, R, C, want);
        for (int i = 0; i < 3; i++) {
            if (!isas[i].runs_here)
                continue;
            for (size_t o = 0; o < 4; o++) {
                const size_t off = o == 0 ? 0 : o == 1 ? 4 : o == 2 ? 16 : 60;
                float *got = (float *)(((uintptr_t)raw + 63) / 64 * 64 + off);
                memset(got, 0xA5, n * sizeof *got);
                isas[i].transpose(src, R, C, got);
                size_t differ = 0;
                for (size_t e = 0; e < n; e++)
                    differ += memcmp(&got[e], &want[e], sizeof *got) != 0;
                CU_ASSERT_EQUAL(differ, 0);
                if (differ)
                    fprintf(stderr, "\n  %s transpose %zux%zu (dst +%zu): %zu elements differ\n", isas[i].name, R, C,
                            off, differ);
            }
        }
        free(src), free(want), free(raw);
    }
}

/* The error sums in double: counts and max |x - x_hat| equal to a plain
 * loop's, the sums within 1e-13 of its serial double sums (the order of
 * the additions differs), and bit for bit equal to the same sums taken in
 * the 16 lanes the loop documents, written plainly here */
static void err_double_case(const isa *I, float *x, size_t n)
{
    static float q[4099];
    for (size_t i = 0; i < n; i++) /* an x_hat: x rounded to 4 significant bits, Inf past 2^100, NaN at 2^-120 */
        q[i] = fabsf(x[i]) > 0x1p100f ? INFINITY : fabsf(x[i]) < 0x1p-120f && x[i] != 0 ? NAN
                                                                                   : from_bits(bits(x[i]) & 0xFFF80000u);
    double plain[4] = {0, 0, 0, 0}, lane[16][4];
    float pme = 0;
    uint64_t pbad = 0;
    memset(lane, 0, sizeof lane);
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(x[i]))
            continue;
        size_t l = i < n - n % 16 ? i % 16 : i - (n - n % 16);
        double xd = x[i], qd = q[i];
        plain[0] += xd * xd, lane[l][0] += xd * xd;
        if (!isfinite(q[i])) {
            pbad++;
            continue;
        }
        double e = xd - qd;
        plain[1] += e * e, plain[2] += qd * qd, plain[3] += xd * qd;
        lane[l][1] += e * e, lane[l][2] += qd * qd, lane[l][3] += xd * qd;
        pme = fmaxf(pme, fabsf(x[i] - q[i]));
    }
    double want[4] = {0, 0, 0, 0};
    for (int l = 0; l < 16; l++)
        for (int k = 0; k < 4; k++)
            want[k] += lane[l][k];
    /* in one call, and in stretches of 16k elements and the rest (as the
     * smoothed tensor's bands give them): the same bits */
    for (size_t cut = 0; cut <= n; cut += n / 16 * 16 / 2 + 16) {
        double got[4];
        float me;
        uint64_t bad;
        fp8__err_acc acc;
        memset(&acc, 0, sizeof acc);
        size_t at = 0;
        for (size_t len = cut ? cut / 16 * 16 : n; at < n; at += len, len = n - at > len ? len : n - at)
            I->err_double(x + at, q + at, len, &acc);
        fp8__err_acc_totals(&acc, got, &me, &bad);
        CU_ASSERT_EQUAL(bad, pbad);
        CU_ASSERT_EQUAL(bits(me), bits(pme));
        for (int k = 0; k < 4; k++) {
            CU_ASSERT(rel(got[k], plain[k]) < 1e-13 || fabs(got[k] - plain[k]) < 1e-300);
            CU_ASSERT(memcmp(&got[k], &want[k], sizeof got[k]) == 0);
        }
    }
}

static void test_err_double(void) { every_case(0, err_double_case); }

/* TE's overflow count (|x| > thr; Inf counts, NaN does not) against the
 * plain float comparison, for thresholds of zero, a subnormal, 1, 448,
 * the largest float and +Inf */
static void count_above_case(const isa *I, float *x, size_t n)
{
    static const float thr[] = {0.0f, 0x1p-140f, 1.0f, 448.0f, 3.4028235e38f, INFINITY};
    for (size_t t = 0; t < sizeof thr / sizeof thr[0]; t++) {
        uint64_t want = 0;
        for (size_t i = 0; i < n; i++)
            want += fabsf(x[i]) > thr[t];
        CU_ASSERT_EQUAL(I->count_above(x, n, thr[t]), want);
    }
}

static void test_count_above(void) { every_case(0, count_above_case); }

/* The worker pool (lib/util/parallel.c): every job of every call runs
 * exactly once and none after the call returns, also while other threads
 * spin on the cores with sched_yield as OpenBLAS's idle threads do (the
 * workers then come late, and the caller must neither wait for those that
 * have nothing left to do nor return while one still runs a job). */
typedef struct {
    int open, count[8];
    long spin0; /* job 0's length: some outlast the caller's wait before it sleeps (~50 us) */
} pool_call;

static int pool_stale;

static void pool_job(void *ctx, int i)
{
    pool_call *c = ctx;
    if (!__atomic_load_n(&c->open, __ATOMIC_ACQUIRE))
        __atomic_add_fetch(&pool_stale, 1, __ATOMIC_RELAXED);
    for (long k = 0; k < (i ? 50 * (i + 1) : c->spin0); k++) /* jobs of unequal length */
        __asm__ __volatile__("" ::: "memory");
    __atomic_add_fetch(&c->count[i], 1, __ATOMIC_RELAXED);
}

static int pool_hog_stop;

static void *pool_hog(void *arg)
{
    (void)arg;
    while (!__atomic_load_n(&pool_hog_stop, __ATOMIC_RELAXED))
        sched_yield();
    return NULL;
}

static void test_pool(void)
{
    int wrong = 0, calls = 0;
    pool_stale = 0;
    for (int hogs = 0; hogs <= 2; hogs += 2) {
        pthread_t h[2];
        int started = 0;
        pool_hog_stop = 0;
        for (; started < hogs; started++)
            if (pthread_create(&h[started], NULL, pool_hog, NULL) != 0)
                break;
        for (int r = 0; r < 20000; r++, calls++) {
            pool_call c;
            memset(&c, 0, sizeof c);
            int n = 1 + r % 8, threads = 2 + r % 3;
            c.spin0 = r % 64 == 1 ? 1000000 : 50;
            __atomic_store_n(&c.open, 1, __ATOMIC_RELEASE);
            fp8__parallel_for(n, threads, pool_job, &c);
            __atomic_store_n(&c.open, 0, __ATOMIC_RELEASE);
            for (int i = 0; i < 8; i++)
                wrong += __atomic_load_n(&c.count[i], __ATOMIC_RELAXED) != (i < n);
        }
        __atomic_store_n(&pool_hog_stop, 1, __ATOMIC_RELAXED);
        for (int k = 0; k < started; k++)
            pthread_join(h[k], NULL);
    }
    CU_ASSERT_EQUAL(calls, 40000);
    CU_ASSERT_EQUAL(wrong, 0);
    CU_ASSERT_EQUAL(__atomic_load_n(&pool_stale, __ATOMIC_RELAXED), 0);
    if (wrong || pool_stale)
        fprintf(stderr, "\n  pool: %d job counts wrong, %d jobs run after their call returned", wrong, pool_stale);
}

void register_kernels_tests(void)
{
    static CU_TestInfo tests[] = {
        {"amax scan of every ISA equals a plain loop (Inf, NaN, -0, subnormals)", test_amax_scan},
        {"a broken amax loop is caught by the same comparison", test_broken_amax_is_caught},
        {"amax and min nonzero of every ISA equal a plain loop", test_range},
        {"per-group amax and min nonzero of every ISA equal a plain loop (also the amax alone)", test_range_groups},
        {"exponent histogram of every ISA equals plain binning", test_hist},
        {"exponent histogram inside x's pass equals plain binning", test_xmoments_hist},
        {"largest group dynamic range of every ISA equals the plain rule", test_best_ratio},
        {"largest group dynamic range with many tied groups: the first of them, every ISA", test_best_ratio_ties},
        {"NVFP4's block scales of every ISA equal the rule through the format's scalar cast", test_nvfp4_scales},
        {"running sums of AVX2 and AVX-512 against the portable loops", test_moments},
        {"smooth: column maxima and column scaling of every ISA equal plain loops", test_smooth_cols},
        {"smooth: error sums in double of every ISA equal plain loops", test_err_double},
        {"NVFP4's Hadamard transform of every ISA equals the butterflies one at a time", test_rht},
        {"the transpose of every ISA equals the plain tiles (streamed stores too)", test_transpose},
        {"TE's overflow count of every ISA equals the plain comparison", test_count_above},
        {"the worker pool runs every job once, none after its call returns (also beside yielding threads)", test_pool},
        CU_TEST_INFO_NULL,
    };
    add_suite("kernels", tests);
}
