/*
 * test_stats.c — suite "stats": fp8_quantize() against the scalar two-pass
 * oracle (ref_stats.c) for every recipe, on random and adversarial tensors,
 * in the default and in an FTZ/DAZ floating-point environment (a cast's
 * parts on threads and a step's sweep, against one cast at a time:
 * test_stats_parts.c).
 * Counts, extremes, scales and x_hat must be identical; sums agree within a
 * relative 1e-6 (kurtosis 1e-5; the mean within 1e-6 of the std; cosine within
 * 2e-6): the engine sums blocks of 16 float32 terms per lane into double and
 * merges pieces pairwise, the oracle sums in order in double
 * (docs/statistics.md).
 */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#if defined(__x86_64__)
#include <xmmintrin.h>
#endif

#include "fp8.h"
#include "ref_stats.h"
#include "stats_compare.h"
#include "stats_cases.h"
#include "tests.h"
#include "recipe_state.h"
#include "quantize_many.h"
#include "quantize_tiles.h"

static int failures; /* the first 10 differences are printed */

typedef struct {
    const char *name;
    size_t rows, cols;
} shape;

static void run_case(const char *spec, int kind, size_t rows, size_t cols, int steps)
{
    size_t n = rows * cols;
    float *x = malloc(n * 4), *qa = malloc(n * 4), *qb = malloc(n * 4);
    fp8_recipe r;
    CU_ASSERT_EQUAL_FATAL(fp8_recipe_parse(spec, &r), FP8_OK);
    fp8_recipe_state *sa = fp8_recipe_state_alloc(&r, FP8_ROLE_GRADIENT);
    fp8_recipe_state *sb = fp8_recipe_state_alloc(&r, FP8_ROLE_GRADIENT);
    for (int t = 0; t < steps; t++) {
        fill(kind, x, n, 1000u * (uint64_t)kind + (uint64_t)t + rows);
        if (kind == 0)
            for (size_t i = 0; i < n; i++)
                x[i] *= (float)(1 << (t % 4)); /* moving amax for the delayed recipes */
        fp8_stats a, b;
        CU_ASSERT_EQUAL(fp8_quantize(sa, x, rows, cols, qa, &a), FP8_OK);
        CU_ASSERT_EQUAL(ref_quantize(sb, x, rows, cols, qb, &b), FP8_OK);
        char what[200];
        snprintf(what, sizeof what, "%s kind %d %zux%zu step %d", spec, kind, rows, cols, t);
        stats_compare(what, &a, &b, 0);
        if (memcmp(qa, qb, n * 4) != 0) {
            size_t i = 0;
            while (i < n && !memcmp(qa + i, qb + i, 4))
                i++;
            if (failures++ < 10)
                fprintf(stderr, "\n  %s: x_hat[%zu] engine %a oracle %a (x %a)", what, i, (double)qa[i],
                        (double)qb[i], (double)x[i]);
            CU_FAIL("x_hat differs");
        }
        fp8_recipe_state_step(sa);
        fp8_recipe_state_step(sb);
        CU_ASSERT_EQUAL(sa->scale, sb->scale);
    }
    fp8_recipe_state_free(sa);
    fp8_recipe_state_free(sb);
    free(x), free(qa), free(qb);
}

static void all_cases(void)
{
    const shape shapes[] = {{"1x1", 1, 1}, {"1x1000", 1, 1000}, {"130x260", 130, 260}, {"64x512", 64, 512},
                            {"7x33", 7, 33}, {"300x300 (several pieces)", 300, 300}};
    for (size_t ri = 0; ri < NRECIPES; ri++)
        for (int kind = 0; kind < 15; kind++) /* 9, 10: means that move from piece to piece; 11, 12: zeros; 13, 14: tiny */
            for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++)
                run_case(recipes[ri], kind, shapes[si].rows, shapes[si].cols, kind == 0 ? 3 : 1);
    /* more pieces than parts (eight): a part sums several pieces, each about
     * the running mean unless the piece's own lies far from it (kind 9 jumps
     * between the two pieces of one part here: 11 pieces, part 2 = pieces
     * 2 and 3) */
    static const int big_kinds[] = {0, 8, 9, 10, 11, 12, 13, 14};
    for (size_t ri = 0; ri < NRECIPES; ri++)
        for (size_t k = 0; k < sizeof big_kinds / sizeof big_kinds[0]; k++)
            run_case(recipes[ri], big_kinds[k], 600, 600, 1);
}

static void test_vs_oracle(void) { all_cases(); }

/* The comparison can fail: the oracle run on a recipe one margin step
 * away (a broken oracle: scales twice too small) disagrees with the engine
 * in its scale and error statistics on the same tensor. */
static void test_broken_oracle_disagrees(void)
{
    const size_t rows = 64, cols = 256, n = rows * cols;
    float *x = malloc(n * 4), *q = malloc(n * 4);
    CU_ASSERT_FATAL(x && q);
    fill(1, x, n, 5);
    fp8_recipe good, broken;
    CU_ASSERT_EQUAL_FATAL(fp8_recipe_parse("e4m3:current", &good), FP8_OK);
    CU_ASSERT_EQUAL_FATAL(fp8_recipe_parse("e4m3:current", &broken), FP8_OK);
    fp8_recipe_state *se = fp8_recipe_state_alloc(&good, FP8_ROLE_ACTIVATION);
    fp8_recipe_state *so = fp8_recipe_state_alloc(&broken, FP8_ROLE_ACTIVATION);
    fp8_stats a, b;
    CU_ASSERT_EQUAL(fp8_quantize(se, x, rows, cols, q, &a), FP8_OK);
    so->recipe.eps = 1e30; /* the broken oracle: an amax floor that binds */
    CU_ASSERT_EQUAL(ref_quantize(so, x, rows, cols, q, &b), FP8_OK);
    CU_ASSERT(stats_compare("broken oracle", &a, &b, 1) >= 3); /* scale, scale_inv and the error sums at least */
    fp8_recipe_state_free(se);
    fp8_recipe_state_free(so);
    free(x), free(q);
}

static void test_vs_oracle_ftz(void)
{
#if defined(__x86_64__)
    unsigned saved = _mm_getcsr();
    _mm_setcsr(saved | 0x8040); /* FTZ | DAZ, as -ffast-math leaves them */
    /* the oracle's own float arithmetic would change under DAZ; compare the
     * engine under FTZ/DAZ with the engine in the default environment */
    const size_t rows = 130, cols = 260, n = rows * cols;
    float *x = malloc(n * 4), *q1 = malloc(n * 4), *q2 = malloc(n * 4);
    for (size_t ri = 0; ri < NRECIPES; ri++)
        for (int kind = 0; kind < 9; kind++) {
            _mm_setcsr(saved);
            fill(kind, x, n, 77u + (uint64_t)kind);
            fp8_recipe r;
            CU_ASSERT_EQUAL(fp8_recipe_parse(recipes[ri], &r), FP8_OK);
            fp8_recipe_state *s1 = fp8_recipe_state_alloc(&r, FP8_ROLE_ACTIVATION);
            fp8_recipe_state *s2 = fp8_recipe_state_alloc(&r, FP8_ROLE_ACTIVATION);
            fp8_stats a, b;
            fp8_quantize(s1, x, rows, cols, q1, &a);
            _mm_setcsr(saved | 0x8040);
            fp8_quantize(s2, x, rows, cols, q2, &b);
            _mm_setcsr(saved);
            char what[160];
            snprintf(what, sizeof what, "FTZ/DAZ %s kind %d", recipes[ri], kind);
            stats_compare(what, &b, &a, 0);
            CU_ASSERT_EQUAL(memcmp(q1, q2, n * 4), 0);
            fp8_recipe_state_free(s1);
            fp8_recipe_state_free(s2);
        }
    _mm_setcsr(saved);
    free(x), free(q1), free(q2);
#else
    test_skip("engine under FTZ/DAZ: the MXCSR flags are x86's");
#endif
}

static void test_known_values(void)
{
    /* hand-worked: x = {1, -2, 3, 0} under e4m3:none (all exact) */
    fp8_recipe r;
    CU_ASSERT_EQUAL(fp8_recipe_parse("e4m3:none", &r), FP8_OK);
    fp8_recipe_state *st = fp8_recipe_state_alloc(&r, FP8_ROLE_OTHER);
    float x[4] = {1, -2, 3, 0};
    fp8_stats s;
    fp8_quantize(st, x, 2, 2, NULL, &s);
    CU_ASSERT_EQUAL(s.mean, 0.5);
    CU_ASSERT_DOUBLE_EQUAL(s.std, sqrt(13.0 / 4.0), 1e-15); /* deviations .5 2.5 2.5 .5 */
    CU_ASSERT_EQUAL(s.l1, 6.0);
    CU_ASSERT_DOUBLE_EQUAL(s.l2, sqrt(14.0), 1e-15);
    CU_ASSERT_EQUAL(s.amax, 3.0);
    CU_ASSERT_EQUAL(s.zero_count, 1);
    CU_ASSERT_DOUBLE_EQUAL(s.dynamic_range, log2(3.0), 1e-15);
    /* kurtosis: m2 = 13/4, m4 = (2*.0625 + 2*39.0625)/4 = 19.5625 */
    CU_ASSERT_DOUBLE_EQUAL(s.kurtosis, 19.5625 / (3.25 * 3.25), 1e-12);
    CU_ASSERT_EQUAL(s.sq_err, 0.0);
    CU_ASSERT(isinf(s.sqnr_db));
    CU_ASSERT_EQUAL(s.cosine, 1.0);
    CU_ASSERT_EQUAL(s.exp_hist[0], 1);           /* the zero   */
    CU_ASSERT_EQUAL(s.exp_hist[127 + 1], 1);     /* 1 = 2^0    */
    CU_ASSERT_EQUAL(s.exp_hist[128 + 1], 2);     /* 2, 3 in [2,4) */
    /* 0.3 in e4m3 (no scale): 0.3 -> 0.3125, error 0.0125 */
    float y[1] = {0.3f};
    fp8_quantize(st, y, 1, 1, NULL, &s);
    CU_ASSERT_DOUBLE_EQUAL(s.max_abs_err, 0.3125 - 0.3, 1e-7);
    CU_ASSERT_DOUBLE_EQUAL(s.sqnr_db, 20 * log10(0.3 / 0.0125), 1e-4);
    CU_ASSERT_EQUAL(s.classes.n[FP8_CLASS_ROUNDED], 1);
    fp8_recipe_state_free(st);
    /* bad input */
    CU_ASSERT_EQUAL(fp8_recipe_parse("e4m3:current", &r), FP8_OK);
    st = fp8_recipe_state_alloc(&r, FP8_ROLE_OTHER);
    CU_ASSERT_EQUAL(fp8_quantize(st, x, 0, 4, NULL, &s), FP8_EINVAL);
    CU_ASSERT_EQUAL(fp8_quantize(st, NULL, 1, 4, NULL, &s), FP8_EINVAL);
    CU_ASSERT_EQUAL(fp8_quantize(NULL, x, 1, 4, NULL, &s), FP8_EINVAL);
    fp8_recipe_state_free(st);
}

/* x's moments in small pieces far from the running mean: NVFP4 casts a
 * block whose scale rounds to zero (its amax far below the tensor's) in
 * segments of 16 elements, each merged into the running moments.  One block
 * of 1e11 first, then 4080 values of order 1 whose blocks all have zero
 * scales: each segment's shift (the running mean, ~1e11 / k) once made
 * float32 fourth powers of ~1e44 (an infinite kurtosis).  The engine's
 * statistics must be the oracle's and fp8_tensor_stats's. */
static void test_moments_far_shift(void)
{
    const size_t n = 4096;
    float *x = malloc(n * sizeof *x);
    CU_ASSERT_FATAL(x != NULL);
    uint64_t s = 77;
    for (size_t i = 0; i < n; i++)
        x[i] = i < 16 ? 1e11f : (float)((double)(test_rand(&s) >> 11) * 0x1p-53 * 6.0 - 3.0);
    fp8_recipe r;
    CU_ASSERT_EQUAL_FATAL(fp8_recipe_parse("nvfp4", &r), FP8_OK);
    fp8_recipe_state *sa = fp8_recipe_state_alloc(&r, FP8_ROLE_ACTIVATION), *sb = fp8_recipe_state_alloc(&r, FP8_ROLE_ACTIVATION);
    fp8_stats a, b, t;
    CU_ASSERT_EQUAL(fp8_quantize(sa, x, 1, n, NULL, &a), FP8_OK);
    CU_ASSERT_EQUAL(ref_quantize(sb, x, 1, n, NULL, &b), FP8_OK);
    CU_ASSERT_EQUAL(fp8_tensor_stats(x, n, &t, 0), FP8_OK);
    CU_ASSERT(isfinite(a.kurtosis) && a.kurtosis > 100.0); /* (one block of outliers: 4096 / 16 = 256) */
    CU_ASSERT_EQUAL(stats_compare("nvfp4, moments far from the shift", &a, &b, 0), 0);
    CU_ASSERT(fabs(t.kurtosis - b.kurtosis) <= 1e-5 * b.kurtosis);
    fp8_recipe_state_free(sa), fp8_recipe_state_free(sb);
    free(x);
}

/* x's moments where a part's first piece samples far from its own mean:
 * each piece of 32768 elements (three, each its own part) holds 256 values
 * 1e4 / 3, 16 at the start of every 2048 (where stats_vec.c samples a
 * part's first piece for its shift), and 1s elsewhere, so the shift lies
 * 11 standard deviations from the piece's mean, and every float32 power
 * about it rounds the same way.  Its sums must be
 * taken again about that mean (without that the standard deviation was
 * off by 1.6e-5 and the kurtosis by 1.8e-5): the statistics of
 * fp8_tensor_stats and of casts on one thread and two equal the
 * oracle's; and so do pieces that begin near their means (every value in
 * 1e4 + (-1, 1): no second pass). */
static void test_moments_first_piece(void)
{
    const size_t rows = 96, cols = 1024, n = rows * cols;
    float *x = malloc(n * sizeof *x);
    CU_ASSERT_FATAL(x != NULL);
    for (int v = 0; v < 2; v++) {
        uint64_t s = 91 + (uint64_t)v;
        for (size_t i = 0; i < n; i++) {
            float u = (float)((double)(test_rand(&s) >> 11) * 0x1p-53 * 2.0 - 1.0);
            x[i] = v ? 1e4f + u : i % 2048 < 16 ? 1e4f / 3.0f : 1.0f;
        }
        fp8_stats t;
        CU_ASSERT_EQUAL(fp8_tensor_stats(x, n, &t, 0), FP8_OK);
        /* (current: x's statistics in the amax pass; delayed: in the cast's) */
        for (int k = 0; k < 2; k++) {
            fp8_recipe r;
            CU_ASSERT_EQUAL_FATAL(fp8_recipe_parse(k ? "e4m3:delayed" : "e4m3:current", &r), FP8_OK);
            fp8_recipe_state *ref = fp8_recipe_state_alloc(&r, FP8_ROLE_ACTIVATION);
            CU_ASSERT_FATAL(ref != NULL);
            fp8_stats want;
            CU_ASSERT_EQUAL(ref_quantize(ref, x, rows, cols, NULL, &want), FP8_OK);
            /* (the data are what we say: a mean of 1 + p (A - 1) and a
             * standard deviation of sqrt(p (1 - p)) (A - 1), p = 1 / 128,
             * A = 1e4 / 3; std's denominator is n) */
            const double A = (double)(1e4f / 3.0f), p = 1.0 / 128;
            CU_ASSERT(v || fabs(want.mean - (1 + p * (A - 1))) < 1e-9 * A);
            CU_ASSERT(v || fabs(want.std - sqrt(p * (1 - p)) * (A - 1)) < 1e-9 * A);
            CU_ASSERT(fabs(t.std - want.std) <= 1e-6 * want.std);
            CU_ASSERT(fabs(t.kurtosis - want.kurtosis) <= 1e-5 * want.kurtosis);
            for (int th = 1; th <= 2; th++) {
                fp8_recipe_state *st = fp8_recipe_state_alloc(&r, FP8_ROLE_ACTIVATION);
                CU_ASSERT_FATAL(st != NULL);
                fp8_recipe_state_set_threads(st, th);
                fp8_stats got;
                CU_ASSERT_EQUAL(fp8_quantize(st, x, rows, cols, NULL, &got), FP8_OK);
                CU_ASSERT_EQUAL(stats_compare(v ? "first pieces near their means" : "first pieces far from their means",
                                              &got, &want, 0),
                                0);
                fp8_recipe_state_free(st);
            }
            fp8_recipe_state_free(ref);
        }
    }
    free(x);
}

/* the apply-only path (no statistics) and the no-histogram option give the
 * same x_hat and the same delayed-scaling state; the option only zeroes
 * exp_hist */
static void test_options(void)
{
    const size_t rows = 64, cols = 512, n = rows * cols;
    float *x = malloc(n * 4), *q1 = malloc(n * 4), *q2 = malloc(n * 4), *q3 = malloc(n * 4);
    for (size_t ri = 0; ri < NRECIPES; ri++) {
        fp8_recipe r;
        CU_ASSERT_EQUAL(fp8_recipe_parse(recipes[ri], &r), FP8_OK);
        fp8_recipe_state *a = fp8_recipe_state_alloc(&r, FP8_ROLE_GRADIENT);
        fp8_recipe_state *b = fp8_recipe_state_alloc(&r, FP8_ROLE_GRADIENT);
        fp8_recipe_state *c = fp8_recipe_state_alloc(&r, FP8_ROLE_GRADIENT);
        for (int t = 0; t < 3; t++) {
            fill(t == 2 ? 3 : 0, x, n, 31u + (uint64_t)t);
            fp8_stats sa, sc;
            fp8_quantize(a, x, rows, cols, q1, &sa);
            fp8_quantize(b, x, rows, cols, q2, NULL);
            fp8_quantize_ex(c, x, rows, cols, q3, &sc, FP8_STATS_NO_EXP_HIST);
            CU_ASSERT_EQUAL(memcmp(q1, q2, n * 4), 0);
            CU_ASSERT_EQUAL(memcmp(q1, q3, n * 4), 0);
            for (int k = 0; k < FP8_EXP_BINS; k++)
                CU_ASSERT_EQUAL(sc.exp_hist[k], 0);
            CU_ASSERT_EQUAL(sc.zero_count, sa.zero_count);
            CU_ASSERT_EQUAL(sc.overflows, sa.overflows);
            CU_ASSERT_EQUAL(sc.sq_err, sa.sq_err);
            fp8_recipe_state_step(a);
            fp8_recipe_state_step(b);
            fp8_recipe_state_step(c);
            CU_ASSERT_EQUAL(a->scale, b->scale);
            CU_ASSERT_EQUAL(a->scale, c->scale);
        }
        fp8_recipe_state_free(a);
        fp8_recipe_state_free(b);
        fp8_recipe_state_free(c);
    }
    free(x), free(q1), free(q2), free(q3);
}

/* how many elements of x_hat q its codes and group scales gsi do not
 * reproduce bit for bit (decode(code) * the element's group's scale_inv;
 * NaN for NaN) */
static size_t codes_off(const fp8_recipe_state *st, const fp8_recipe *r, size_t rows, size_t cols,
                        const uint16_t *codes, const float *gsi, const float *q)
{
    size_t bad = 0;
    for (size_t i = 0; i < rows; i++)
        for (size_t j = 0; j < cols; j++) {
            size_t k = i * cols + j;
            uint32_t code = st->format->code_bytes == 1 ? ((const uint8_t *)codes)[k] : codes[k];
            float v = fp8_format_decode(st->format, code) * gsi[fp8_quantize_group_of(r, rows, cols, i, j)];
            bad += bits_of(v) != bits_of(q[k]) && !(isnan(v) && isnan(q[k]));
        }
    return bad;
}

/* codes and group scales reproduce x_hat exactly: decode(code) * scale_inv
 * of the element's group, for every recipe and shape */
static void test_codes(void)
{
    const size_t shapes[][2] = {{64, 512}, {130, 260}, {7, 33}};
    for (size_t si = 0; si < 3; si++) {
        size_t rows = shapes[si][0], cols = shapes[si][1], n = rows * cols;
        float *x = malloc(n * 4), *q = malloc(n * 4);
        uint16_t *codes = malloc(n * 2);
        for (size_t ri = 0; ri < NRECIPES; ri++) {
            fp8_recipe r;
            CU_ASSERT_EQUAL(fp8_recipe_parse(recipes[ri], &r), FP8_OK);
            size_t ng = fp8_quantize_ngroups(&r, rows, cols);
            float *gsi = malloc(ng * sizeof *gsi);
            fp8_recipe_state *st = fp8_recipe_state_alloc(&r, FP8_ROLE_ACTIVATION);
            fill(si == 2 ? 3 : 2, x, n, 55 + ri);
            fp8_stats s;
            CU_ASSERT_EQUAL_FATAL(fp8_quantize_codes(st, x, rows, cols, codes, gsi, q, &s, 0), FP8_OK);
            CU_ASSERT_EQUAL(s.nscales, ng);
            size_t bad = codes_off(st, &r, rows, cols, codes, gsi, q);
            if (bad)
                fprintf(stderr, "\n  codes %s %zux%zu: %zu mismatches", recipes[ri], rows, cols, bad);
            CU_ASSERT_EQUAL(bad, 0);
            fp8_recipe_state_free(st);
            free(gsi);
        }
        free(x), free(q), free(codes);
    }
}

/* Codes with statistics (the plain cast, then the statistics of its
 * x_hat) of data wider than the format: |x| log-uniform over 2^-30 ..
 * 2^5, random signs, where most vectors of every recipe hold subnormal or
 * flushed lanes (the kernel's wide path, per tensor and per group).  The
 * statistics (the groups' flush and overflow flags among them), x_hat and
 * the codes against the oracle, for every recipe. */
static void test_codes_wide(void)
{
    const size_t shapes[][2] = {{64, 512}, {130, 260}};
    for (size_t si = 0; si < 2; si++) {
        size_t rows = shapes[si][0], cols = shapes[si][1], n = rows * cols;
        float *x = malloc(n * 4), *q = malloc(n * 4), *qb = malloc(n * 4);
        uint16_t *codes = malloc(n * 2);
        CU_ASSERT_FATAL(x && q && qb && codes);
        uint64_t rs = 4242 + si;
        for (size_t i = 0; i < n; i++) {
            uint64_t u = test_rand(&rs);
            double m = ldexp(1.0 + (double)(u >> 40) * 0x1p-24, (int)((u >> 8) % 35) - 30);
            x[i] = (float)(u & 1 ? -m : m);
        }
        for (size_t ri = 0; ri < NRECIPES; ri++) {
            fp8_recipe r;
            CU_ASSERT_EQUAL_FATAL(fp8_recipe_parse(recipes[ri], &r), FP8_OK);
            size_t ng = fp8_quantize_ngroups(&r, rows, cols);
            float *gsi = malloc(ng * sizeof *gsi);
            fp8_recipe_state *st = fp8_recipe_state_alloc(&r, FP8_ROLE_GRADIENT);
            fp8_recipe_state *so = fp8_recipe_state_alloc(&r, FP8_ROLE_GRADIENT);
            CU_ASSERT_FATAL(gsi && st && so);
            fp8_stats a, b;
            CU_ASSERT_EQUAL_FATAL(fp8_quantize_codes(st, x, rows, cols, codes, gsi, q, &a, 0), FP8_OK);
            CU_ASSERT_EQUAL_FATAL(ref_quantize(so, x, rows, cols, qb, &b), FP8_OK);
            char what[160];
            snprintf(what, sizeof what, "codes, wide data: %s %zux%zu", recipes[ri], rows, cols);
            stats_compare(what, &a, &b, 0);
            size_t bad = codes_off(st, &r, rows, cols, codes, gsi, q), badq = 0;
            for (size_t k = 0; k < n; k++)
                badq += bits_of(q[k]) != bits_of(qb[k]);
            if (bad || badq)
                fprintf(stderr, "\n  %s: %zu codes off x_hat, %zu x_hat off the oracle's", what, bad, badq);
            CU_ASSERT_EQUAL(bad, 0);
            CU_ASSERT_EQUAL(badq, 0);
            /* the data is wide: the statistics say so (a test of the test) */
            CU_ASSERT(a.underflows + a.subnormals > n / 10);
            fp8_recipe_state_free(st);
            fp8_recipe_state_free(so);
            free(gsi);
        }
        free(x), free(q), free(qb), free(codes);
    }
}

/* fp8_tensor_amax (vector pass) against a plain loop: lengths around the
 * lane width, Inf and NaN of both signs, subnormals, a zero tensor. */
static void test_tensor_amax(void)
{
    uint64_t seed = 0x243F6A8885A308D3ull;
    float x[300];
    for (int trial = 0; trial < 400; trial++) {
        size_t n = (size_t)(test_rand(&seed) % 300);
        for (size_t i = 0; i < n; i++) {
            uint64_t r = test_rand(&seed);
            float v = f_from_bits((uint32_t)r);                /* any bit pattern */
            if (r >> 60 == 0)
                v = (r & 1) ? INFINITY : -INFINITY;
            else if (r >> 60 == 1)
                v = 0.0f;
            x[i] = v;
        }
        float want = 0;
        uint64_t inf = 0, nan = 0;
        for (size_t i = 0; i < n; i++) {
            if (isnan(x[i]))
                nan++;
            else if (isinf(x[i]))
                inf++;
            else if (fabsf(x[i]) > want)
                want = fabsf(x[i]);
        }
        fp8_amax_info a;
        CU_ASSERT_EQUAL_FATAL(fp8_tensor_amax(x, n, &a), FP8_OK);
        CU_ASSERT_EQUAL(bits_of(a.amax), bits_of(want));
        CU_ASSERT_EQUAL(a.inf_count, inf);
        CU_ASSERT_EQUAL(a.nan_count, nan);
    }
    fp8_amax_info a;
    CU_ASSERT_EQUAL(fp8_tensor_amax(NULL, 0, &a), FP8_OK);
    CU_ASSERT_EQUAL(a.amax, 0.0f);
    CU_ASSERT_EQUAL(fp8_tensor_amax(NULL, 3, &a), FP8_EINVAL);
}

/* two states that cast the same tensors end the step with the same scale */
static void step_pair(fp8_recipe_state *a, fp8_recipe_state *b)
{
    fp8_recipe_state_step(a);
    fp8_recipe_state_step(b);
    CU_ASSERT_EQUAL(a->scale, b->scale);
}

/* x's statistics computed once (fp8_tensor_stats) and given to a recipe
 * (FP8_STATS_X_GIVEN) equal the engine's own: x_hat, counts and error sums
 * bit for bit, everything else as the oracle comparison allows (a grouped
 * recipe sums x in other pieces); per-tensor recipes take x in the same
 * pieces, so there every field is the same bits.  A recipe state advanced
 * by both routes stays equal (delayed scaling notes the given amax). */
static void test_x_given(void)
{
    const size_t rows = 300, cols = 300, n = rows * cols; /* three pieces: three parts */
    float *x = malloc(n * 4), *q1 = malloc(n * 4), *q2 = malloc(n * 4);
    for (size_t ri = 0; ri < NRECIPES; ri++) {
        fp8_recipe r;
        CU_ASSERT_EQUAL(fp8_recipe_parse(recipes[ri], &r), FP8_OK);
        fp8_recipe_state *a = fp8_recipe_state_alloc(&r, FP8_ROLE_GRADIENT);
        fp8_recipe_state *b = fp8_recipe_state_alloc(&r, FP8_ROLE_GRADIENT);
        const int per_tensor = r.kind == FP8_RECIPE_NONE || r.kind == FP8_RECIPE_DELAYED ||
                               r.kind == FP8_RECIPE_CURRENT;
        for (int kind = 0; kind < 9; kind++) {
            fill(kind, x, n, 500u + (uint64_t)kind);
            fp8_stats sa, sb;
            CU_ASSERT_EQUAL_FATAL(fp8_quantize(a, x, rows, cols, q1, &sa), FP8_OK);
            CU_ASSERT_EQUAL_FATAL(fp8_tensor_stats(x, n, &sb, 0), FP8_OK);
            CU_ASSERT_EQUAL_FATAL(fp8_quantize_ex(b, x, rows, cols, q2, &sb, FP8_STATS_X_GIVEN), FP8_OK);
            char what[96];
            snprintf(what, sizeof what, "x given: %s kind %d", recipes[ri], kind);
            stats_compare(what, &sb, &sa, 0);
            CU_ASSERT_EQUAL(memcmp(q1, q2, n * 4), 0);
            CU_ASSERT_EQUAL(memcmp(&sa.classes, &sb.classes, sizeof sa.classes), 0);
            CU_ASSERT_EQUAL(sa.sq_err, sb.sq_err);
            CU_ASSERT_EQUAL(sa.max_abs_err, sb.max_abs_err);
            CU_ASSERT_EQUAL(sa.err_excluded, sb.err_excluded);
            CU_ASSERT_STRING_EQUAL(sa.format->name, sb.format->name);
            sb.format = sa.format; /* each state holds its own copy of the format */
            if (per_tensor)
                CU_ASSERT_EQUAL(memcmp(&sa, &sb, sizeof sa), 0);
            step_pair(a, b);
        }
        fp8_recipe_state_free(a);
        fp8_recipe_state_free(b);
    }
    /* statistics of another tensor's size are refused, stats untouched */
    fp8_recipe r;
    CU_ASSERT_EQUAL(fp8_recipe_parse("e4m3:current", &r), FP8_OK);
    fp8_recipe_state *st = fp8_recipe_state_alloc(&r, FP8_ROLE_GRADIENT);
    fp8_stats s;
    fill(0, x, n, 3);
    fp8_tensor_stats(x, n - 1, &s, 0);
    double mean = s.mean;
    CU_ASSERT_EQUAL(fp8_quantize_ex(st, x, rows, cols, q1, &s, FP8_STATS_X_GIVEN), FP8_EINVAL);
    CU_ASSERT_EQUAL(s.numel, n - 1);
    CU_ASSERT_EQUAL(s.mean, mean);
    CU_ASSERT_EQUAL(fp8_tensor_stats(NULL, 3, &s, 0), FP8_EINVAL);
    fp8_recipe_state_free(st);
    free(x), free(q1), free(q2);
}

/* max_block_dynamic_range picks by the exact ratio where the float32 bits'
 * difference (the vector pre-pass's estimate) points elsewhere: group A
 * {1.5, 1} has log2 ratio 0.585 and bits difference 0.5 binade, group B
 * {2, 1.4} 0.515 and 0.6.  Hand-worked; then a group whose minimum is a
 * float32 subnormal (bits not logarithmic) with the largest ratio, and
 * 80 groups (the vector loop and its tail). */
static void test_block_range(void)
{
    fp8_recipe r;
    CU_ASSERT_EQUAL(fp8_recipe_parse("mxfp8", &r), FP8_OK); /* groups of 32 along a row */
    enum { G = 80 };
    float x[G * 32];
    for (int trial = 0; trial < 3; trial++) {
        for (int k = 0; k < G * 32; k++)
            x[k] = 1.0f; /* ratio 1 everywhere */
        int ga = trial == 2 ? 77 : 5, gb = trial == 2 ? 3 : 40;
        x[ga * 32 + 7] = 1.5f;
        x[gb * 32 + 2] = 2.0f;
        for (int k = 0; k < 32; k++)
            if (k != 2)
                x[gb * 32 + k] = 1.4f;
        double want = log2(1.5);
        if (trial == 1) { /* 2^-140 (subnormal) among ones: ratio 2^140 */
            x[60 * 32 + 9] = 0x1p-140f;
            want = 140;
        }
        fp8_recipe_state *st = fp8_recipe_state_alloc(&r, FP8_ROLE_ACTIVATION);
        fp8_stats s;
        CU_ASSERT_EQUAL_FATAL(fp8_quantize(st, x, 1, G * 32, NULL, &s), FP8_OK);
        CU_ASSERT_DOUBLE_EQUAL(s.max_block_dynamic_range, want, 1e-12);
        fp8_recipe_state_free(st);
    }
}

/* fp8_quantize_amax: the same x_hat and recipe state as fp8_quantize, and
 * the amax, Inf and NaN counts of fp8_tensor_amax, in place and not, for
 * every recipe (transposed, Hadamard-transformed, several pieces) and the
 * tensors with NaN, Inf, zeros and subnormals */
static void test_quantize_amax(void)
{
    const size_t rows = 300, cols = 300, n = rows * cols;
    float *x = malloc(n * 4), *q1 = malloc(n * 4), *q2 = malloc(n * 4);
    const char *more[] = {"nvfp4:rht"};
    for (size_t ri = 0; ri <= NRECIPES; ri++) {
        const char *spec = ri < NRECIPES ? recipes[ri] : more[0];
        fp8_recipe r;
        CU_ASSERT_EQUAL(fp8_recipe_parse(spec, &r), FP8_OK);
        fp8_recipe_state *a = fp8_recipe_state_alloc(&r, FP8_ROLE_GRADIENT);
        fp8_recipe_state *b = fp8_recipe_state_alloc(&r, FP8_ROLE_GRADIENT);
        for (int kind = 0; kind < 9; kind++) {
            fill(kind, x, n, 900u + (uint64_t)kind);
            fp8_amax_info want, got;
            fp8_tensor_amax(x, n, &want);
            CU_ASSERT_EQUAL_FATAL(fp8_quantize(a, x, rows, cols, q1, NULL), FP8_OK);
            if (kind % 2) { /* in place */
                memcpy(q2, x, n * 4);
                CU_ASSERT_EQUAL_FATAL(fp8_quantize_amax(b, q2, rows, cols, q2, &got), FP8_OK);
            } else {
                CU_ASSERT_EQUAL_FATAL(fp8_quantize_amax(b, x, rows, cols, q2, &got), FP8_OK);
            }
            CU_ASSERT_EQUAL(memcmp(q1, q2, n * 4), 0);
            CU_ASSERT_EQUAL(bits_of(got.amax), bits_of(want.amax));
            CU_ASSERT_EQUAL(got.inf_count, want.inf_count);
            CU_ASSERT_EQUAL(got.nan_count, want.nan_count);
            step_pair(a, b);
        }
        fp8_recipe_state_free(a);
        fp8_recipe_state_free(b);
    }
    fp8_recipe r;
    CU_ASSERT_EQUAL(fp8_recipe_parse("e4m3:delayed", &r), FP8_OK);
    fp8_recipe_state *st = fp8_recipe_state_alloc(&r, FP8_ROLE_GRADIENT);
    CU_ASSERT_EQUAL(fp8_quantize_amax(st, x, rows, cols, q1, NULL), FP8_EINVAL);
    fp8_recipe_state_free(st);
    free(x), free(q1), free(q2);
}

/* fp8__transpose (tiles through a buffer) against the plain double loop,
 * on shapes of one element, one row, one column, partial tiles on both
 * sides, whole tiles, and a power-of-two row length (1024 x 256, where an
 * element-at-a-time transpose thrashed one cache set) */
static void test_transpose(void)
{
    const size_t shapes[][2] = {{1, 1}, {1, 37}, {37, 1}, {17, 33}, {16, 16}, {1024, 256}, {100, 1000}};
    int wrong = 0;
    for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++) {
        size_t rows = shapes[k][0], cols = shapes[k][1], n = rows * cols;
        float *x = malloc(n * 4), *t = malloc(n * 4);
        for (size_t i = 0; i < n; i++)
            x[i] = (float)i;
        fp8__transpose(x, rows, cols, t);
        for (size_t i = 0; i < rows; i++)
            for (size_t j = 0; j < cols; j++)
                wrong += t[j * rows + i] != x[i * cols + j];
        free(x), free(t);
    }
    CU_ASSERT_EQUAL(wrong, 0);
}

/* TE's overflow count of a cast in place is of x, not of the x_hat written
 * over it.  x = 100 (i - 32), i = 0..63, under a first delayed scale of 1:
 * the largest e4m3 value is 448, so |x| >= 500 overflows: 28 negative
 * values (k = 5..32) and 27 positive ones (k = 5..31), 55 (hand count) */
static void test_te_overflows_in_place(void)
{
    float x[64], y[64];
    for (int i = 0; i < 64; i++)
        x[i] = (float)(i - 32) * 100.0f, y[i] = x[i];
    fp8_recipe r;
    CU_ASSERT_EQUAL_FATAL(fp8_recipe_parse("e4m3:delayed", &r), FP8_OK);
    fp8_recipe_state *a = fp8_recipe_state_alloc(&r, FP8_ROLE_ACTIVATION), *b = fp8_recipe_state_alloc(&r, FP8_ROLE_ACTIVATION);
    fp8_stats sa, sb;
    CU_ASSERT_EQUAL(fp8_quantize(a, x, 1, 64, NULL, &sa), FP8_OK);
    CU_ASSERT_EQUAL(fp8_quantize(b, y, 1, 64, y, &sb), FP8_OK);
    int over = 0;
    for (int i = 0; i < 64; i++)
        over += fabsf(x[i]) > 448.0f;
    CU_ASSERT_EQUAL(over, 55);
    CU_ASSERT_EQUAL(sa.te_overflows, (uint64_t)over);
    CU_ASSERT_EQUAL(sb.te_overflows, (uint64_t)over);
    fp8_recipe_state_free(a), fp8_recipe_state_free(b);
}

/* TE's overflow count over several pieces of x, where only a few pieces
 * hold values above fp8_max * scale_inv (448 under a first delayed scale
 * of 1): 4 x 32771 elements in steps of 100 below 448, with 448 itself
 * twice (not counted: TE's comparison is strict), 448's float32 successor
 * twice (counted: it rounds to 448, no overflow class), -Inf once
 * (counted), a NaN (not counted) and 1000 in the last 12 elements (a piece
 * no kernel takes whole): 4 by hand.  Cast alone, into another array, in
 * place, with x's statistics given, on two threads, and in one sweep
 * beside a cast in place of a copy: every time 4. */
static void test_te_overflows_pieces(void)
{
    const size_t R = 4, C = 32771, n = R * C;
    float *x = malloc(n * sizeof *x), *y = malloc(n * sizeof *y), *o = malloc(n * sizeof *o);
    CU_ASSERT_FATAL(x && y && o);
    for (size_t i = 0; i < n; i++)
        x[i] = (float)((int)(i % 7) - 3) * 100.0f;
    const float above = nextafterf(448.0f, INFINITY);
    x[5] = 448.0f, x[100000] = -448.0f;
    x[40000] = above, x[70000] = -above;
    x[50000] = -INFINITY, x[50001] = NAN;
    x[n - 3] = 1000.0f;
    uint64_t loop = 0;
    for (size_t i = 0; i < n; i++)
        loop += fabsf(x[i]) > 448.0f; /* (NaN compares false) */
    CU_ASSERT_EQUAL(loop, 4);
    fp8_recipe r;
    CU_ASSERT_EQUAL_FATAL(fp8_recipe_parse("e4m3:delayed", &r), FP8_OK);
    for (int v = 0; v < 6; v++) {
        fp8_recipe_state *a = fp8_recipe_state_alloc(&r, FP8_ROLE_ACTIVATION);
        fp8_stats s;
        memcpy(y, x, n * sizeof *x);
        if (v == 4)
            fp8_recipe_state_set_threads(a, 2);
        if (v == 0 || v == 4)
            CU_ASSERT_EQUAL(fp8_quantize(a, y, R, C, NULL, &s), FP8_OK);
        if (v == 1)
            CU_ASSERT_EQUAL(fp8_quantize(a, y, R, C, o, &s), FP8_OK);
        if (v == 2)
            CU_ASSERT_EQUAL(fp8_quantize(a, y, R, C, y, &s), FP8_OK);
        if (v == 3) {
            CU_ASSERT_EQUAL(fp8_tensor_stats(y, n, &s, 0), FP8_OK);
            CU_ASSERT_EQUAL(fp8_quantize_ex(a, y, R, C, o, &s, FP8_STATS_X_GIVEN), FP8_OK);
        }
        if (v == 5) { /* x in place under a second delayed recipe, last on each piece */
            fp8_recipe_state *b = fp8_recipe_state_alloc(&r, FP8_ROLE_ACTIVATION);
            fp8_stats xs, sb;
            fp8__cast_req q[2] = {{.st = b, .out = y, .stats = &sb}, {.st = a, .out = NULL, .stats = &s}};
            CU_ASSERT_EQUAL(fp8__quantize_many(y, R, C, 0, 1, &xs, NULL, q, 2), FP8_OK);
            CU_ASSERT_EQUAL(q[0].status, FP8_OK);
            CU_ASSERT_EQUAL(q[1].status, FP8_OK);
            CU_ASSERT_EQUAL(sb.te_overflows, 4);
            fp8_recipe_state_free(b);
        }
        if (s.te_overflows != 4)
            printf("\n  variant %d: te_overflows %llu, not 4", v, (unsigned long long)s.te_overflows);
        CU_ASSERT_EQUAL(s.te_overflows, 4);
        CU_ASSERT_EQUAL(s.inf_count, 1);
        fp8_recipe_state_free(a);
    }
    free(x), free(y), free(o);
}

void register_stats_tests(void)
{
    static CU_TestInfo tests[] = {
        {"hand-worked statistics", test_known_values},
        {"engine vs scalar oracle, 26 recipes x 15 tensors", test_vs_oracle},
        {"a broken oracle disagrees (the comparison can fail)", test_broken_oracle_disagrees},
        {"engine under FTZ/DAZ equals the default environment", test_vs_oracle_ftz},
        {"apply-only and no-histogram paths agree", test_options},
        {"codes and group scales reproduce x_hat", test_codes},
        {"codes with statistics of data wider than the format vs the oracle", test_codes_wide},
        {"tensor amax, Inf and NaN counts vs a plain loop", test_tensor_amax},
        {"x's statistics given once equal the engine's own", test_x_given},
        {"largest group ratio: exact where the bits mislead, subnormal minimum", test_block_range},
        {"fp8_quantize_amax: fp8_quantize's x_hat and state, fp8_tensor_amax's amax", test_quantize_amax},
        {"transpose (16 x 16 tiles) equals the plain loop, partial tiles included", test_transpose},
        {"x's moments in small pieces far from the running mean (NVFP4 zero-scale blocks)", test_moments_far_shift},
        {"x's moments of parts whose sampled shift lies far from their mean", test_moments_first_piece},
        {"TE's overflow count of a cast in place is of x", test_te_overflows_in_place},
        {"TE's overflow count over pieces, in place, given, threads, in a sweep", test_te_overflows_pieces},
        CU_TEST_INFO_NULL,
    };
    add_suite("stats", tests);
}
