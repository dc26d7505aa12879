/*
 * test_cast.c — suite "cast": hand-worked boundaries (docs/formats.md), sampled
 * inputs against the reference in every mode, the bulk kernels against the
 * single-value path and each other, stochastic rounding, bad arguments.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "fp8_format.h"
#include "cast_impl.h" /* fp8__random32 only: the generator is part of the definition */
#include "ref_cast.h"
#include "tests.h"

static const fp8_cast_mode NEAR_NOSAT = {FP8_ROUND_NEAREST, FP8_NO_SATURATE, 0, 0};
static const fp8_cast_mode NEAR_SAT = {FP8_ROUND_NEAREST, FP8_SATURATE, 0, 0};
static const fp8_cast_mode ZERO_NOSAT = {FP8_ROUND_ZERO, FP8_NO_SATURATE, 0, 0};

typedef struct {
    const char *fmt;
    const fp8_cast_mode *mode;
    float x;
    uint32_t code;
    fp8_class cls;
} hand_case;

/* Worked by hand from docs/formats.md and the OCP tables. */
static const hand_case hand[] = {
    /* e4m3: the grid past 448 would continue at 480; 464 is the midpoint */
    {"e4m3", &NEAR_NOSAT, 448.0f, 0x7E, FP8_CLASS_EXACT},
    {"e4m3", &NEAR_NOSAT, 464.0f, 0x7E, FP8_CLASS_ROUNDED},        /* tie -> even 448 */
    {"e4m3", &NEAR_NOSAT, 0x1.d00002p+8f, 0x7F, FP8_CLASS_OVERFLOW}, /* just above 464 -> NaN */
    {"e4m3", &NEAR_SAT, 0x1.d00002p+8f, 0x7E, FP8_CLASS_SATURATED},
    {"e4m3", &NEAR_NOSAT, -500.0f, 0xFF, FP8_CLASS_OVERFLOW},
    {"e4m3", &NEAR_SAT, -INFINITY, 0xFE, FP8_CLASS_SATURATED},
    {"e4m3", &NEAR_NOSAT, INFINITY, 0x7F, FP8_CLASS_OVERFLOW},
    {"e4m3", &NEAR_NOSAT, 0x1p-6f, 0x08, FP8_CLASS_EXACT},
    {"e4m3", &NEAR_NOSAT, 0x1p-9f, 0x01, FP8_CLASS_SUBNORMAL},
    {"e4m3", &NEAR_NOSAT, 0x1p-10f, 0x00, FP8_CLASS_FLUSHED},      /* half min subnormal: tie -> 0 */
    {"e4m3", &NEAR_NOSAT, 0x1.000002p-10f, 0x01, FP8_CLASS_SUBNORMAL},
    {"e4m3", &NEAR_NOSAT, -0x1p-10f, 0x80, FP8_CLASS_FLUSHED},     /* keeps -0 */
    {"e4m3", &NEAR_NOSAT, 0x1.8p-9f, 0x02, FP8_CLASS_SUBNORMAL},   /* 1.5 units: tie -> 2 */
    {"e4m3", &NEAR_NOSAT, 0x1.ep-7f, 0x08, FP8_CLASS_ROUNDED},     /* 7.5/8 * 2^-6 -> min normal */
    {"e4m3", &NEAR_NOSAT, 1.0625f, 0x38, FP8_CLASS_ROUNDED},       /* tie 1 / 1.125 -> 1 */
    {"e4m3", &NEAR_NOSAT, 1.1875f, 0x3A, FP8_CLASS_ROUNDED},       /* tie 1.125 / 1.25 -> 1.25 */
    {"e4m3", &NEAR_NOSAT, NAN, 0x7F, FP8_CLASS_NAN},
    {"e4m3", &NEAR_NOSAT, -NAN, 0xFF, FP8_CLASS_NAN},
    {"e4m3", &NEAR_NOSAT, -0.0f, 0x80, FP8_CLASS_EXACT},
    {"e4m3", &ZERO_NOSAT, 479.0f, 0x7E, FP8_CLASS_ROUNDED},        /* truncates to 448 */
    {"e4m3", &ZERO_NOSAT, 1e6f, 0x7E, FP8_CLASS_SATURATED},        /* IEEE: RTZ overflow -> max */
    {"e4m3", &ZERO_NOSAT, INFINITY, 0x7F, FP8_CLASS_OVERFLOW},
    {"e4m3", &ZERO_NOSAT, 1.2f, 0x39, FP8_CLASS_ROUNDED},
    /* e5m2: max 57344 has an odd mantissa, so the midpoint 61440 overflows */
    {"e5m2", &NEAR_NOSAT, 57344.0f, 0x7B, FP8_CLASS_EXACT},
    {"e5m2", &NEAR_NOSAT, 61440.0f, 0x7C, FP8_CLASS_OVERFLOW},
    {"e5m2", &NEAR_NOSAT, 0x1.dffffep+15f, 0x7B, FP8_CLASS_ROUNDED},
    {"e5m2", &NEAR_SAT, 61440.0f, 0x7B, FP8_CLASS_SATURATED},
    {"e5m2", &NEAR_NOSAT, -INFINITY, 0xFC, FP8_CLASS_OVERFLOW},
    {"e5m2", &NEAR_NOSAT, NAN, 0x7E, FP8_CLASS_NAN},
    {"e5m2", &NEAR_NOSAT, 0x1p-16f, 0x01, FP8_CLASS_SUBNORMAL},
    {"e5m2", &NEAR_NOSAT, 0x1p-17f, 0x00, FP8_CLASS_FLUSHED},
    {"e5m2", &NEAR_NOSAT, 0x1p-14f, 0x04, FP8_CLASS_EXACT},
    {"e5m2", &ZERO_NOSAT, 1e9f, 0x7B, FP8_CLASS_SATURATED},
    /* fnuz: NaN is 0x80, no -0, max mantissa odd */
    {"e4m3fnuz", &NEAR_NOSAT, 240.0f, 0x7F, FP8_CLASS_EXACT},
    {"e4m3fnuz", &NEAR_NOSAT, 248.0f, 0x80, FP8_CLASS_OVERFLOW},   /* tie -> 256 -> NaN */
    {"e4m3fnuz", &NEAR_SAT, 248.0f, 0x7F, FP8_CLASS_SATURATED},
    {"e4m3fnuz", &NEAR_NOSAT, -0.0f, 0x00, FP8_CLASS_EXACT},
    {"e4m3fnuz", &NEAR_NOSAT, -0x1p-12f, 0x00, FP8_CLASS_FLUSHED},
    {"e4m3fnuz", &NEAR_NOSAT, -NAN, 0x80, FP8_CLASS_NAN},
    {"e4m3fnuz", &NEAR_NOSAT, 0x1p-10f, 0x01, FP8_CLASS_SUBNORMAL},
    {"e4m3fnuz", &NEAR_NOSAT, -1.0f, 0xC0, FP8_CLASS_EXACT},
    {"e5m2fnuz", &NEAR_NOSAT, 57344.0f, 0x7F, FP8_CLASS_EXACT},
    {"e5m2fnuz", &NEAR_NOSAT, 0x1p-17f, 0x01, FP8_CLASS_SUBNORMAL},
    {"e5m2fnuz", &NEAR_NOSAT, -INFINITY, 0x80, FP8_CLASS_OVERFLOW},
    /* FP4/FP6: no Inf or NaN; overflow clamps in both modes */
    {"e2m1", &NEAR_NOSAT, 6.0f, 0x7, FP8_CLASS_EXACT},
    {"e2m1", &NEAR_NOSAT, 5.0f, 0x6, FP8_CLASS_ROUNDED},           /* tie 4 / 6 -> 4 */
    {"e2m1", &NEAR_NOSAT, 7.0f, 0x7, FP8_CLASS_SATURATED},         /* tie 6 / 8 -> 8 -> clamp */
    {"e2m1", &NEAR_NOSAT, 6.5f, 0x7, FP8_CLASS_ROUNDED},
    {"e2m1", &NEAR_NOSAT, 0.25f, 0x0, FP8_CLASS_FLUSHED},
    {"e2m1", &NEAR_NOSAT, 0.75f, 0x2, FP8_CLASS_ROUNDED},          /* tie 0.5 / 1 -> 1 */
    {"e2m1", &NEAR_NOSAT, -100.0f, 0xF, FP8_CLASS_SATURATED},
    {"e2m1", &NEAR_NOSAT, INFINITY, 0x7, FP8_CLASS_SATURATED},
    {"e2m1", &NEAR_NOSAT, NAN, 0x8, FP8_CLASS_NAN},
    {"e2m1", &NEAR_NOSAT, -NAN, 0x0, FP8_CLASS_NAN},
    {"e2m3", &NEAR_NOSAT, 7.5f, 0x1F, FP8_CLASS_EXACT},
    {"e2m3", &NEAR_NOSAT, 0.0625f, 0x00, FP8_CLASS_FLUSHED},
    {"e3m2", &NEAR_NOSAT, 28.0f, 0x1F, FP8_CLASS_EXACT},
    {"e3m2", &NEAR_NOSAT, 30.0f, 0x1F, FP8_CLASS_SATURATED},
    {"e3m2", &NEAR_NOSAT, 0.0625f, 0x01, FP8_CLASS_SUBNORMAL},
    /* e8m0: ties (1.5 * 2^e) up; zero/negatives NaN or the smallest value */
    {"e8m0", &NEAR_NOSAT, 1.0f, 0x7F, FP8_CLASS_EXACT},
    {"e8m0", &NEAR_NOSAT, 1.5f, 0x80, FP8_CLASS_ROUNDED},
    {"e8m0", &NEAR_NOSAT, 1.4999999f, 0x7F, FP8_CLASS_ROUNDED},
    {"e8m0", &NEAR_NOSAT, 0.0f, 0xFF, FP8_CLASS_OVERFLOW},
    {"e8m0", &NEAR_SAT, 0.0f, 0x00, FP8_CLASS_SATURATED},
    {"e8m0", &NEAR_NOSAT, -2.0f, 0xFF, FP8_CLASS_OVERFLOW},
    {"e8m0", &NEAR_NOSAT, 0x1p-127f, 0x00, FP8_CLASS_EXACT},
    {"e8m0", &NEAR_NOSAT, 0x1p-130f, 0x00, FP8_CLASS_ROUNDED},
    {"e8m0", &NEAR_NOSAT, 0x1.4p-127f, 0x01, FP8_CLASS_ROUNDED},
    {"e8m0", &NEAR_NOSAT, 0x1p127f, 0xFE, FP8_CLASS_EXACT},
    {"e8m0", &NEAR_NOSAT, 0x1.8p127f, 0xFF, FP8_CLASS_OVERFLOW},
    {"e8m0", &NEAR_SAT, 0x1.8p127f, 0xFE, FP8_CLASS_SATURATED},
    {"e8m0", &NEAR_NOSAT, NAN, 0xFF, FP8_CLASS_NAN},
    /* fp16 / bf16 */
    {"fp16", &NEAR_NOSAT, 65504.0f, 0x7BFF, FP8_CLASS_EXACT},
    {"fp16", &NEAR_NOSAT, 65520.0f, 0x7C00, FP8_CLASS_OVERFLOW},
    {"fp16", &NEAR_NOSAT, 0x1p-24f, 0x0001, FP8_CLASS_SUBNORMAL},
    {"bf16", &NEAR_NOSAT, 1.0f, 0x3F80, FP8_CLASS_EXACT},
    {"bf16", &NEAR_NOSAT, 0x1.01p0f, 0x3F80, FP8_CLASS_ROUNDED},   /* tie -> even */
    {"bf16", &NEAR_NOSAT, 0x1.03p0f, 0x3F82, FP8_CLASS_ROUNDED},
    {"bf16", &NEAR_NOSAT, 0x1p-133f, 0x0001, FP8_CLASS_SUBNORMAL},
    {"bf16", &NEAR_NOSAT, 0x1p-149f, 0x0000, FP8_CLASS_FLUSHED},
};

static void test_hand_cases(void)
{
    for (size_t i = 0; i < sizeof hand / sizeof hand[0]; i++) {
        const hand_case *h = &hand[i];
        const fp8_format *f = fp8_format_find(h->fmt, NULL);
        CU_ASSERT_PTR_NOT_NULL_FATAL(f);
        fp8_class c;
        uint32_t code = fp8_format_encode(f, h->mode, h->x, 0, &c);
        if (code != h->code || c != h->cls)
            fprintf(stderr, "\n  case %zu %s %a: got 0x%X %s want 0x%X %s\n", i, h->fmt, (double)h->x, code,
                    fp8_class_name(c), h->code, fp8_class_name(h->cls));
        CU_ASSERT_EQUAL(code, h->code);
        CU_ASSERT_EQUAL(c, h->cls);
        /* the reference agrees with the hand-worked answer too */
        ref_format r;
        CU_ASSERT_FATAL(ref_init(&r, f) == 0);
        fp8_class rc;
        uint32_t rcode = ref_encode(&r, h->mode->round, h->mode->overflow == FP8_SATURATE, h->x, 0, &rc);
        CU_ASSERT_EQUAL(rcode, h->code);
        CU_ASSERT_EQUAL(rc, h->cls);
        ref_free(&r);
    }
}

/* Inputs that stress a format: random bit patterns, plus values near every
 * grid point and midpoint (and half the smallest subnormal). */
static size_t make_inputs(const fp8_format *f, const ref_format *r, float *x, size_t n, uint64_t seed)
{
    size_t k = 0;
    uint64_t s = seed | 1;
    int top = r->n;
    for (int c = 0; c <= top && k + 12 < n; c++) {
        double v = r->val[c];
        double nv = c < top ? r->val[c + 1] : v * 2;
        double mid = (v + nv) / 2;
        float pts[6] = {(float)v, (float)mid, nextafterf((float)mid, 0), nextafterf((float)mid, INFINITY),
                        nextafterf((float)v, 0), nextafterf((float)v, INFINITY)};
        for (int j = 0; j < 6; j++) {
            x[k++] = pts[j];
            x[k++] = -pts[j];
        }
    }
    float specials[] = {0.0f, -0.0f, INFINITY, -INFINITY, NAN, -NAN, (float)(f->min_subnormal / 2),
                        0x1p-149f, 0x1p-126f, 3.4028235e38f};
    for (size_t j = 0; j < sizeof specials / sizeof specials[0] && k < n; j++)
        x[k++] = specials[j];
    while (k < n) {
        uint64_t u = test_rand(&s);
        if (u & (1ull << 40)) /* half: magnitudes inside the format's range */
            x[k++] = (float)ldexp((double)(u >> 41) / (double)(1ull << 23) + 1.0,
                                  (int)((u >> 8) % (unsigned)(f->ebits <= 3 ? 12 : 40)) - (f->ebits <= 3 ? 6 : 20)) *
                     ((u & 1) ? -1.0f : 1.0f);
        else
            x[k++] = f_from_bits((uint32_t)u);
    }
    return k;
}

static const fp8_cast_mode *modes[] = {&NEAR_NOSAT, &NEAR_SAT, &ZERO_NOSAT};

/* A few million inputs per format, all three deterministic modes: the
 * single-value path, the bulk encode (dispatched kernel) and qdq against
 * the reference, classes and counts included. */
static void test_sampled_vs_reference(void)
{
    size_t nf;
    const fp8_format *const *list = fp8_format_list(&nf);
    const size_t N = 1 << 20;
    float *x = malloc(N * sizeof *x), *q = malloc(N * sizeof *q);
    uint32_t *codes = malloc(N * sizeof *codes);
    CU_ASSERT_FATAL(x && q && codes);
    for (size_t fi = 0; fi < nf; fi++) {
        const fp8_format *f = list[fi];
        ref_format r;
        CU_ASSERT_FATAL(ref_init(&r, f) == 0);
        size_t n = make_inputs(f, &r, x, N, 0x9E3779B97F4A7C15ull + fi);
        for (int mi = 0; mi < 3; mi++) {
            const fp8_cast_mode *m = modes[mi];
            fp8_counts cnt, want = {{0}};
            CU_ASSERT_EQUAL(fp8_format_encode_array(f, m, 1.0f, x, n, codes, &cnt), FP8_OK);
            CU_ASSERT_EQUAL(fp8_format_qdq_array(f, m, 1.0f, x, n, q, NULL), FP8_OK);
            size_t bad = 0;
            for (size_t i = 0; i < n; i++) {
                fp8_class rc, sc;
                uint32_t rcode = ref_encode(&r, m->round, m->overflow == FP8_SATURATE, x[i], 0, &rc);
                uint32_t scode = fp8_format_encode(f, m, x[i], 0, &sc);
                uint32_t bcode = f->code_bytes == 1 ? ((uint8_t *)codes)[i] : ((uint16_t *)codes)[i];
                want.n[rc]++;
                uint32_t qbits = bits_of(q[i]), dbits = bits_of(fp8_format_decode(f, rcode));
                if (scode != rcode || sc != rc || bcode != rcode || qbits != dbits) {
                    if (bad++ < 5)
                        fprintf(stderr, "\n  %s mode %d x=%a: ref 0x%X %s single 0x%X %s bulk 0x%X qdq %08X/%08X\n",
                                f->name, mi, (double)x[i], rcode, fp8_class_name(rc), scode, fp8_class_name(sc),
                                bcode, qbits, dbits);
                }
            }
            CU_ASSERT_EQUAL(bad, 0);
            for (int c = 0; c < FP8_NCLASS; c++)
                CU_ASSERT_EQUAL(cnt.n[c], want.n[c]);
        }
        ref_free(&r);
    }
    free(x);
    free(q);
    free(codes);
}

/* The comparison above can fail: a cast that rounds toward zero where the
 * reference rounds to nearest (a broken kernel), and a reference that
 * ignores saturation (a broken oracle), both disagree on the same inputs. */
static void test_broken_oracle_disagrees(void)
{
    const fp8_format *f = fp8_format_find("e4m3", NULL);
    ref_format r;
    CU_ASSERT_FATAL(f && ref_init(&r, f) == 0);
    const size_t N = 1 << 16;
    float *x = malloc(N * sizeof *x);
    CU_ASSERT_FATAL(x != NULL);
    size_t n = make_inputs(f, &r, x, N, 12345);
    size_t bad_kernel = 0, bad_oracle = 0;
    for (size_t i = 0; i < n; i++) {
        fp8_class rc, sc;
        uint32_t ref = ref_encode(&r, FP8_ROUND_NEAREST, 1, x[i], 0, &rc);
        bad_kernel += fp8_format_encode(f, &ZERO_NOSAT, x[i], 0, &sc) != ref;
        bad_oracle += ref_encode(&r, FP8_ROUND_NEAREST, 0, x[i], 0, &rc) != fp8_format_encode(f, &NEAR_SAT, x[i], 0, &sc);
    }
    CU_ASSERT(bad_kernel > n / 10); /* about half the inputs round up */
    CU_ASSERT(bad_oracle > 0);      /* the inputs past the largest finite value */
    ref_free(&r);
    free(x);
}

/* Bulk encode and qdq of x[0..n) at scale sc against the reference lane by
 * lane (stochastic rounding fed fp8__random32(seed, i)), class counts
 * included; the first disagreements on stderr under label */
static void bulk_vs_ref(const fp8_format *f, const ref_format *r, const fp8_cast_mode *m, float sc, const float *x,
                        size_t n, uint32_t *codes, float *q, const char *label)
{
    fp8_counts cnt, want = {{0}};
    CU_ASSERT_EQUAL(fp8_format_encode_array(f, m, sc, x, n, codes, &cnt), FP8_OK);
    CU_ASSERT_EQUAL(fp8_format_qdq_array(f, m, sc, x, n, q, NULL), FP8_OK);
    size_t bad = 0;
    for (size_t i = 0; i < n; i++) {
        fp8_class rc;
        uint32_t rnd = m->round == FP8_ROUND_STOCHASTIC ? fp8__random32(m->seed, i) : 0;
        uint32_t rcode = ref_encode(r, m->round, m->overflow == FP8_SATURATE, x[i] * sc, rnd, &rc);
        uint32_t bcode = f->code_bytes == 1 ? ((uint8_t *)codes)[i] : ((uint16_t *)codes)[i];
        float want_q = (float)fp8_format_decode(f, rcode) * (1.0f / sc);
        want.n[rc]++;
        if ((bcode != rcode || (bits_of(q[i]) != bits_of(want_q) && !(isnan(q[i]) && isnan(want_q)))) && bad++ < 3)
            fprintf(stderr, "\n  %s %s scale %g x=%a: ref 0x%X %s bulk 0x%X qdq %a want %a\n", label, f->name,
                    (double)sc, (double)x[i], rcode, fp8_class_name(rc), bcode, (double)q[i], (double)want_q);
    }
    CU_ASSERT_EQUAL(bad, 0);
    for (int c = 0; c < FP8_NCLASS; c++)
        CU_ASSERT_EQUAL(cnt.n[c], want.n[c]);
}

/* The band just past the largest finite value, where the vector kernel's
 * hot path ends (kernel_vec.h): whole vectors of float32 bit patterns from
 * a little below max to past the next binade step (every pattern near the
 * tie and the step, a sampled stride between), both signs, every format,
 * the three deterministic modes and stochastic rounding with and without
 * saturation, bulk encode and qdq against the reference lane by lane. */
static void test_band_past_max(void)
{
    size_t nf;
    const fp8_format *const *list = fp8_format_list(&nf);
    const fp8_cast_mode STOCH_SAT = {FP8_ROUND_STOCHASTIC, FP8_SATURATE, 7, 0};
    const fp8_cast_mode STOCH_NOSAT = {FP8_ROUND_STOCHASTIC, FP8_NO_SATURATE, 7, 0};
    const fp8_cast_mode *bm[] = {&NEAR_NOSAT, &NEAR_SAT, &ZERO_NOSAT, &STOCH_SAT, &STOCH_NOSAT};
    const size_t N = 1 << 15;
    float *x = malloc(N * sizeof *x), *q = malloc(N * sizeof *q);
    uint32_t *codes = malloc(N * sizeof *codes);
    CU_ASSERT_FATAL(x && q && codes);
    for (size_t fi = 0; fi < nf; fi++) {
        const fp8_format *f = list[fi];
        if (f->kind == FP8_KIND_E8M0 || f->mbits > 22)
            continue;
        ref_format r;
        CU_ASSERT_FATAL(ref_init(&r, f) == 0);
        uint32_t mb = bits_of((float)f->max), step = 1u << (23 - f->mbits), half = step / 2;
        uint32_t stride = step / 1024 ? step / 1024 : 1;
        size_t k = 0;
        for (uint32_t b = mb - 48; b < mb + step + 48 && k < N / 2; b += stride)
            x[k++] = f_from_bits(b);
        k -= k % 16;
        /* near the tie and the step, each pattern alone in a vector of max:
         * the vector's other lanes never take it off the hot path */
        for (int w = 0; w < 2; w++)
            for (uint32_t b = mb + (w ? step : half) - 48; b < mb + (w ? step : half) + 48 && k + 16 <= N / 2; b++)
                for (uint32_t l = 0; l < 16; l++)
                    x[k++] = l == b % 16 ? f_from_bits(b) : (float)f->max;
        for (size_t i = 0; i < k; i++)
            x[k + i] = -x[i];
        size_t n = 2 * k;
        for (int mi = 0; mi < 5; mi++)
            bulk_vs_ref(f, &r, bm[mi], 1.0f, x, n, codes, q, "band past max");
        ref_free(&r);
    }
    free(x);
    free(q);
    free(codes);
}

/* Data wider than the format, where most vectors hold a lane below
 * min_normal (a Gaussian beside outliers, gradients): the vector kernel
 * then takes its wide path (kernel_vec.c) block after block.  Lanes a
 * quarter in the subnormal range (multiples of the step, ties, a float32
 * ulp either side, values that round up to min_normal or flush, zeros,
 * -0), the rest normal; one block in four with a lane past max, NaN or
 * Inf now and then (taken off the wide path); every format, every mode,
 * scales 1 and 0.75, bulk encode and qdq against the reference. */
static void test_wide_data(void)
{
    size_t nf;
    const fp8_format *const *list = fp8_format_list(&nf);
    const size_t N = 1 << 14;
    float *x = malloc(N * sizeof *x), *q = malloc(N * sizeof *q);
    uint32_t *codes = malloc(N * sizeof *codes);
    CU_ASSERT_FATAL(x && q && codes);
    const float scales[] = {1.0f, 0.75f};
    for (size_t fi = 0; fi < nf; fi++) {
        const fp8_format *f = list[fi];
        if (f->kind == FP8_KIND_E8M0)
            continue;
        ref_format r;
        CU_ASSERT_FATAL(ref_init(&r, f) == 0);
        uint64_t st = 777 + fi;
        double step = ldexp(1.0, f->emin - f->mbits);
        for (size_t i = 0; i < N; i++) {
            uint64_t u = test_rand(&st);
            double v;
            if ((u & 3) == 0) { /* the subnormal range */
                double k = (double)((u >> 8) % ((1u << f->mbits) + 1)), fr[4] = {0.0, 0.5, 0.25, 0.999};
                v = (k + fr[(u >> 4) & 3]) * step;
                float fv = (float)v;
                v = (u >> 6 & 3) == 1 ? nextafterf(fv, 0.0f) : (u >> 6 & 3) == 2 ? nextafterf(fv, INFINITY) : fv;
            } else {
                int e = (int)((u >> 20) % (unsigned)(ilogb(f->max) - f->emin + 1)) + f->emin;
                v = ldexp(1.0 + (double)(u >> 40) * 0x1p-24, e);
                v = v > f->max ? f->max : v;
            }
            if ((i / 256) % 4 == 3 && (u >> 32) % 64 == 0) {
                const double odd[] = {f->max * 1.5, INFINITY, NAN, f->max * 1.0625};
                v = odd[(u >> 12) & 3];
            }
            x[i] = (float)(u & 4 ? -v : v);
        }
        for (int mi = 0; mi < 3; mi++)
            for (int si = 0; si < 2; si++)
                bulk_vs_ref(f, &r, modes[mi], scales[si], x, N, codes, q, "wide data");
        ref_free(&r);
    }
    free(x);
    free(q);
    free(codes);
}

/* The vector kernel against the portable one, with a non-trivial scale,
 * on random bit patterns and odd lengths. */
static void test_vector_vs_portable(void)
{
    const char *names[] = {"e4m3", "e5m2", "e4m3fnuz", "e5m2fnuz", "e2m1", "e2m3", "e3m2", "fp16", "bf16", "e3m4", "e8m0"};
    const size_t N = 300001;
    float *x = malloc(N * 4), *q1 = malloc(N * 4), *q2 = malloc(N * 4);
    uint16_t *c1 = malloc(N * 2), *c2 = malloc(N * 2);
    CU_ASSERT_FATAL(x && q1 && q2 && c1 && c2);
    uint64_t s = 12345;
    for (size_t i = 0; i < N; i++)
        x[i] = (i % 3) ? (float)((double)(int64_t)test_rand(&s) * 0x1p-66) : f_from_bits((uint32_t)test_rand(&s));
    const float scales[] = {1.0f, 2.385f, 0x1p-20f, 3.0e10f};
    for (int pass = 0; pass < 3; pass++) {
    if (pass == 2) /* positive, nonzero: e8m0's hot path (its range has no sign and no zero) */
        for (size_t i = 0; i < N; i++)
            x[i] = x[i] == 0 ? 1.5f : fabsf(x[i]);
    if (pass == 1) /* in-range data (the kernel's hot path), with zeros and -0 */
        for (size_t i = 0; i < N; i++) {
            uint64_t r = test_rand(&s);
            x[i] = (r % 20 == 0) ? ((r & 64) ? -0.0f : 0.0f)
                                 : (float)((double)((r >> 20) % 400000 + 1000) * 1e-3 * ((r & 1) ? -1 : 1));
        }
    for (size_t fi = 0; fi < sizeof names / sizeof names[0]; fi++) {
        fp8_format scratch;
        const fp8_format *f = fp8_format_find(names[fi], &scratch);
        CU_ASSERT_PTR_NOT_NULL_FATAL(f);
        /* the three deterministic modes and stochastic rounding (its hot
         * path vectorized, the rest through the scalar fallback; a nonzero
         * offset so that indices are checked too) */
        static const fp8_cast_mode sr_sat = {FP8_ROUND_STOCHASTIC, FP8_SATURATE, 5, 1000003},
                                   sr_nosat = {FP8_ROUND_STOCHASTIC, FP8_NO_SATURATE, 6, 0};
        const fp8_cast_mode *all[5] = {modes[0], modes[1], modes[2], &sr_sat, &sr_nosat};
        for (int mi = 0; mi < 5; mi++)
            for (size_t si = 0; si < 4; si++) {
                fp8_counts a, b;
                fp8_format_force_portable(0);
                fp8_format_encode_array(f, all[mi], scales[si], x, N, c1, &a);
                fp8_format_qdq_array(f, all[mi], scales[si], x, N, q1, NULL);
                fp8_format_force_portable(1);
                fp8_format_encode_array(f, all[mi], scales[si], x, N, c2, &b);
                fp8_format_qdq_array(f, all[mi], scales[si], x, N, q2, NULL);
                fp8_format_force_portable(0);
                CU_ASSERT_EQUAL(memcmp(c1, c2, N * (size_t)f->code_bytes), 0);
                CU_ASSERT_EQUAL(memcmp(q1, q2, N * 4), 0);
                CU_ASSERT_EQUAL(memcmp(&a, &b, sizeof a), 0);
            }
    }
    }
    free(x);
    free(q1);
    free(q2);
    free(c1);
    free(c2);
}

/* A qdq of 2^22 elements into an out of its own (kernel_vec.h's
 * FP8_NT_MIN: non-temporal stores) equals the portable kernel's, out
 * aligned to a line or as malloc gives it, nearest and stochastic
 * rounding, 8- and 16-bit formats; the counts too. */
static void test_large_qdq(void)
{
    const size_t N = (size_t)1 << 22;
    float *x = malloc(N * 4), *want = malloc(N * 4), *line = aligned_alloc(64, N * 4), *plain = malloc(N * 4);
    CU_ASSERT_FATAL(x && want && line && plain);
    uint64_t s = 777;
    for (size_t i = 0; i < N; i++)
        x[i] = (i % 5) ? (float)((double)(int64_t)test_rand(&s) * 0x1p-62) : f_from_bits((uint32_t)test_rand(&s));
    static const fp8_cast_mode sr = {FP8_ROUND_STOCHASTIC, FP8_SATURATE, 9, 0};
    const fp8_cast_mode *all[2] = {modes[0], &sr};
    const char *names[] = {"e4m3", "e5m2", "bf16"};
    int differ = 0;
    for (size_t fi = 0; fi < 3; fi++)
        for (int mi = 0; mi < 2; mi++) {
            const fp8_format *f = fp8_format_find(names[fi], NULL);
            CU_ASSERT_PTR_NOT_NULL_FATAL(f);
            fp8_counts cw, cl, cp;
            fp8_format_force_portable(1);
            fp8_format_qdq_array(f, all[mi], 2.385f, x, N, want, &cw);
            fp8_format_force_portable(0);
            CU_ASSERT_EQUAL(fp8_format_qdq_array(f, all[mi], 2.385f, x, N, line, &cl), FP8_OK);
            CU_ASSERT_EQUAL(fp8_format_qdq_array(f, all[mi], 2.385f, x, N, plain, &cp), FP8_OK);
            differ += memcmp(want, line, N * 4) != 0 || memcmp(&cw, &cl, sizeof cw) != 0;
            differ += memcmp(want, plain, N * 4) != 0 || memcmp(&cw, &cp, sizeof cw) != 0;
        }
    CU_ASSERT_EQUAL(differ, 0);
    free(x), free(want), free(line), free(plain);
}

/* decode_array inverts encode for every code; qdq equals decode(encode). */
static void test_decode_array(void)
{
    const fp8_format *f = fp8_format_find("e5m2", NULL);
    uint8_t codes[256];
    float out[256];
    for (int c = 0; c < 256; c++)
        codes[c] = (uint8_t)c;
    CU_ASSERT_EQUAL(fp8_format_decode_array(f, 0.5f, codes, 256, out), FP8_OK);
    for (int c = 0; c < 256; c++) {
        float want = fp8_format_decode(f, (uint32_t)c) * 0.5f;
        CU_ASSERT(bits_of(out[c]) == bits_of(want) || (isnan(want) && isnan(out[c])));
    }
}

/* Stochastic rounding: unbiased within a bound from the sample size, and
 * reproducible from the seed whatever the chunking. */
static void test_stochastic(void)
{
    const fp8_format *f = fp8_format_find("e4m3", NULL);
    const size_t N = 1 << 20;
    float *x = malloc(N * 4), *q = malloc(N * 4), *q2 = malloc(N * 4);
    CU_ASSERT_FATAL(x && q && q2);
    const float vals[] = {1.3f, 0x1.9p-8f /* between subnormals */, -2.385f, 430.0f, 0x1p-12f};
    fp8_cast_mode m = {FP8_ROUND_STOCHASTIC, FP8_SATURATE, 42, 0};
    for (size_t vi = 0; vi < sizeof vals / sizeof vals[0]; vi++) {
        float v = vals[vi];
        for (size_t i = 0; i < N; i++)
            x[i] = v;
        fp8_format_qdq_array(f, &m, 1.0f, x, N, q, NULL);
        /* neighbours lo < v < hi: each draw is lo or hi, mean -> v */
        double lo = INFINITY, hi = -INFINITY, sum = 0;
        for (size_t i = 0; i < N; i++) {
            sum += q[i];
            lo = fmin(lo, q[i]);
            hi = fmax(hi, q[i]);
        }
        double mean = sum / (double)N;
        double p = (v - lo) / (hi - lo);
        double sd = (hi - lo) * sqrt(p * (1 - p) / (double)N);
        CU_ASSERT(hi > lo);
        CU_ASSERT(fabs(mean - v) <= 5 * sd + 1e-12); /* 5 sigma: fails ~1 in 1.7 million runs */
        /* chunked calls with offsets reproduce the single call */
        for (size_t off = 0; off < N; off += 77777) {
            fp8_cast_mode mc = m;
            mc.offset = off;
            size_t len = N - off < 77777 ? N - off : 77777;
            fp8_format_qdq_array(f, &mc, 1.0f, x + off, len, q2 + off, NULL);
        }
        CU_ASSERT_EQUAL(memcmp(q, q2, N * 4), 0);
        /* another seed gives other bits */
        fp8_cast_mode m2 = m;
        m2.seed = 43;
        fp8_format_qdq_array(f, &m2, 1.0f, x, N, q2, NULL);
        CU_ASSERT_NOT_EQUAL(memcmp(q, q2, N * 4), 0);
    }
    /* stochastic results agree bit for bit with the reference fed the same
     * random word (the generator is the documented fp8__random32) */
    size_t nf;
    const fp8_format *const *list = fp8_format_list(&nf);
    ref_format r;
    for (size_t fi = 0; fi < nf; fi++) {
        ref_init(&r, list[fi]);
        uint64_t s = 99 + fi;
        size_t bad = 0;
        for (uint64_t i = 0; i < 100000; i++) {
            float v = (i & 1) ? (float)((double)(int64_t)test_rand(&s) * 0x1p-60)
                              : f_from_bits((uint32_t)test_rand(&s));
            fp8_cast_mode mm = {FP8_ROUND_STOCHASTIC, (i & 2) ? FP8_SATURATE : FP8_NO_SATURATE, 7, 0};
            fp8_class c1, c2;
            uint32_t a = ref_encode(&r, FP8_ROUND_STOCHASTIC, mm.overflow == FP8_SATURATE, v,
                                    fp8__random32(7, i), &c1);
            uint32_t b = fp8_format_encode(list[fi], &mm, v, i, &c2);
            if ((a != b || c1 != c2) && bad++ < 3)
                fprintf(stderr, "\n  stochastic %s %a: ref 0x%X %s lib 0x%X %s\n", list[fi]->name, (double)v, a,
                        fp8_class_name(c1), b, fp8_class_name(c2));
        }
        CU_ASSERT_EQUAL(bad, 0);
        ref_free(&r);
    }
    free(x);
    free(q);
    free(q2);
}

static void test_bad_args(void)
{
    const fp8_format *f = fp8_format_find("e4m3", NULL);
    float x[4] = {1, 2, 3, 4};
    uint8_t c[4];
    CU_ASSERT_EQUAL(fp8_format_encode_array(f, NULL, 0.0f, x, 4, c, NULL), FP8_EINVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(fp8_error_message(), "scale"));
    CU_ASSERT_EQUAL(fp8_format_encode_array(f, NULL, NAN, x, 4, c, NULL), FP8_EINVAL);
    CU_ASSERT_EQUAL(fp8_format_encode_array(f, NULL, -1.0f, x, 4, c, NULL), FP8_EINVAL);
    CU_ASSERT_EQUAL(fp8_format_encode_array(f, NULL, INFINITY, x, 4, c, NULL), FP8_EINVAL);
    CU_ASSERT_EQUAL(fp8_format_encode_array(NULL, NULL, 1.0f, x, 4, c, NULL), FP8_EINVAL);
    CU_ASSERT_EQUAL(fp8_format_qdq_array(f, NULL, 1.0f, NULL, 4, x, NULL), FP8_EINVAL);
    CU_ASSERT_EQUAL(fp8_format_encode_array(f, NULL, 1.0f, NULL, 0, NULL, NULL), FP8_OK);
    /* scale applies before the cast: 100 * 8 = 800 saturates in e4m3 */
    fp8_counts cnt;
    CU_ASSERT_EQUAL(fp8_format_encode_array(f, NULL, 8.0f, (float[]){100, 1, 0, -60}, 4, c, &cnt), FP8_OK);
    CU_ASSERT_EQUAL(c[0], 0x7E);
    CU_ASSERT_EQUAL(c[1], 0x50); /* 8.0 = 2^3: exponent field 10 */
    CU_ASSERT_EQUAL(c[3], 0xFE); /* -480 -> -448 */
    CU_ASSERT_EQUAL(cnt.n[FP8_CLASS_SATURATED], 2);
    CU_ASSERT_EQUAL(cnt.n[FP8_CLASS_EXACT], 2);
}

void register_cast_tests(void)
{
    static CU_TestInfo tests[] = {
        {"hand-worked boundaries", test_hand_cases},
        {"sampled inputs vs reference, 3 modes", test_sampled_vs_reference},
        {"a broken kernel and a broken reference disagree (the comparison can fail)", test_broken_oracle_disagrees},
        {"the band past max, where the hot path ends: bulk vs reference, 5 modes", test_band_past_max},
        {"data wider than the format (the kernel's wide path): bulk vs reference, 3 modes, 2 scales", test_wide_data},
        {"vector kernel vs portable kernel", test_vector_vs_portable},
        {"a qdq of 2^22 elements into its own out (non-temporal stores) equals the portable kernel's", test_large_qdq},
        {"decode_array", test_decode_array},
        {"stochastic rounding: unbiased, reproducible", test_stochastic},
        {"bad arguments", test_bad_args},
        CU_TEST_INFO_NULL,
    };
    add_suite("cast", tests);
}
