/*
 * test_fenv.c — suite "fenv": codes, values and counts do not depend on the
 * host's floating-point environment (FTZ/DAZ as -ffast-math sets them, and
 * every rounding mode), and the caller's environment is restored.
 */
#include <fenv.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#if defined(__x86_64__)
#include <xmmintrin.h>
#endif

#include "fp8.h"
#include "fp8_format.h"
#include "fp8_recipe.h"
#include "quantize_many.h"
#include "stats_compare.h"
#include "tests.h"

#define N 100003

static void run_all(const fp8_format *f, const fp8_cast_mode *m, float scale, const float *x,
                    uint8_t *codes, float *q, fp8_counts *cnt, uint32_t *dec)
{
    fp8_format_encode_array(f, m, scale, x, N, codes, cnt);
    fp8_format_qdq_array(f, m, scale, x, N, q, NULL);
    for (uint32_t c = 0; c < 256; c++)
        dec[c] = bits_of(fp8_format_decode(f, c));
}

static void test_environments(void)
{
    const char *names[] = {"e4m3", "e5m2", "e8m0", "e2m1", "e4m3fnuz"};
    const int rmodes[] = {FE_TONEAREST, FE_UPWARD, FE_DOWNWARD, FE_TOWARDZERO};
    float *x = malloc(N * 4), *q0 = malloc(N * 4), *q1 = malloc(N * 4);
    uint8_t *c0 = malloc(N), *c1 = malloc(N);
    uint32_t d0[256], d1[256];
    CU_ASSERT_FATAL(x && q0 && q1 && c0 && c1);
    uint64_t s = 777;
    for (size_t i = 0; i < N; i++) {
        uint32_t u = (uint32_t)test_rand(&s);
        if (i % 4 == 0)
            u &= 0x807FFFFFu; /* float32 subnormals */
        else if (i % 4 == 1)
            u = (u & 0x83FFFFFFu) | 0x3C000000u; /* around 2^-7 .. 2^1 */
        x[i] = f_from_bits(u);
    }
    const fp8_cast_mode modes[] = {{FP8_ROUND_NEAREST, FP8_SATURATE, 0, 0},
                                   {FP8_ROUND_ZERO, FP8_NO_SATURATE, 0, 0},
                                   {FP8_ROUND_STOCHASTIC, FP8_SATURATE, 5, 0}};
    const float scales[] = {1.0f, 0x1.3p-120f /* products become float32 subnormals */, 2.385f};
    for (size_t fi = 0; fi < sizeof names / sizeof names[0]; fi++) {
        const fp8_format *f = fp8_format_find(names[fi], NULL);
        for (size_t mi = 0; mi < 3; mi++)
            for (size_t si = 0; si < 3; si++) {
                fp8_counts k0, k1;
                run_all(f, &modes[mi], scales[si], x, c0, q0, &k0, d0);
                for (int ftz = 0; ftz < 2; ftz++)
                    for (size_t ri = 0; ri < 4; ri++) {
#if defined(__x86_64__)
                        unsigned saved = _mm_getcsr();
                        if (ftz)
                            _mm_setcsr(saved | 0x8040); /* FTZ | DAZ */
#endif
                        fesetround(rmodes[ri]);
#if defined(__x86_64__)
                        unsigned before = _mm_getcsr();
#endif
                        run_all(f, &modes[mi], scales[si], x, c1, q1, &k1, d1);
#if defined(__x86_64__)
                        CU_ASSERT_EQUAL(_mm_getcsr() & ~0x3Fu, before & ~0x3Fu); /* restored */
                        _mm_setcsr(saved);
#endif
                        fesetround(FE_TONEAREST);
                        CU_ASSERT_EQUAL(memcmp(c0, c1, N), 0);
                        CU_ASSERT_EQUAL(memcmp(q0, q1, N * 4), 0);
                        CU_ASSERT_EQUAL(memcmp(&k0, &k1, sizeof k0), 0);
                        CU_ASSERT_EQUAL(memcmp(d0, d1, sizeof d0), 0);
                    }
            }
    }
    free(x);
    free(q0);
    free(q1);
    free(c0);
    free(c1);
}

static void test_spec_names(void)
{
    /* a recipe's canonical name is its identity in run files: the host's
     * rounding mode must change neither the numbers read nor the text */
    const char *specs[] = {"e4m3:current:eps=1e-4", "e4m3:block=1x128:eps=3e-7", "e5m2:rowwise:eps=0.1",
                           "hybrid:delayed:history=16,margin=1"};
    const int rmodes[] = {FE_UPWARD, FE_DOWNWARD, FE_TOWARDZERO};
    for (size_t i = 0; i < sizeof specs / sizeof specs[0]; i++) {
        fp8_recipe a, b;
        CU_ASSERT_EQUAL_FATAL(fp8_recipe_parse(specs[i], &a), FP8_OK);
        for (size_t m = 0; m < 3; m++) {
            fesetround(rmodes[m]);
            int st = fp8_recipe_parse(specs[i], &b);
            int mode = fegetround();
            fesetround(FE_TONEAREST);
            CU_ASSERT_EQUAL(st, FP8_OK);
            CU_ASSERT_EQUAL(mode, rmodes[m]); /* the host's mode is given back */
            CU_ASSERT_STRING_EQUAL(a.spec, b.spec);
            CU_ASSERT(a.eps == b.eps);
        }
    }
    fp8_recipe r;
    CU_ASSERT_EQUAL(fp8_recipe_parse("e4m3:current:eps=1e-4", &r), FP8_OK);
    CU_ASSERT_STRING_EQUAL(r.spec, "e4m3:current:eps=0.0001");
}

/* x's statistics of a tensor of several pieces (N > 3 x 32768), every
 * element a float32 subnormal, under FTZ/DAZ: the same as in the default
 * environment and as worked by hand.  The parts' sums used to be merged in
 * the caller's environment, where DAZ read the subnormal lane minima and
 * maxima as zeros: min, max and amax came out 0. */
static void test_stats_subnormal(void)
{
#if defined(__x86_64__)
    float *x = malloc(N * 4);
    CU_ASSERT_FATAL(x != NULL);
    for (size_t i = 0; i < N; i++) /* +-k 2^-140, k = 1..97: min -97, max 97 (both signs reach k = 97) */
        x[i] = ldexpf((float)(i % 97 + 1), -140) * (i % 2 ? -1.0f : 1.0f);
    const double top = ldexp(97, -140), low = ldexp(1, -140);
    for (int threads = 1; threads <= 2; threads++)
        for (int way = 0; way < 2; way++) {
            fp8_stats a, b;
            unsigned saved = _mm_getcsr();
            int ra, rb;
            if (way == 0) { /* fp8_tensor_stats_ex */
                ra = fp8_tensor_stats_ex(x, N, &a, 0, threads);
                _mm_setcsr(saved | 0x8040);
                rb = fp8_tensor_stats_ex(x, N, &b, 0, threads);
            } else { /* a sweep's own statistics of x (no recipe) */
                ra = fp8__quantize_many(x, 1, N, 0, threads, &a, NULL, NULL, 0);
                _mm_setcsr(saved | 0x8040);
                rb = fp8__quantize_many(x, 1, N, 0, threads, &b, NULL, NULL, 0);
            }
            _mm_setcsr(saved);
            CU_ASSERT_EQUAL(ra, FP8_OK);
            CU_ASSERT_EQUAL(rb, FP8_OK);
            char what[80];
            snprintf(what, sizeof what, "FTZ/DAZ x's statistics, way %d, %d threads", way, threads);
            stats_compare(what, &b, &a, 0);
            CU_ASSERT_EQUAL(b.amax, top);
            CU_ASSERT_EQUAL(b.max, top);
            CU_ASSERT_EQUAL(b.min, -top);
            CU_ASSERT_EQUAL(b.min_nonzero, low);
            CU_ASSERT_EQUAL(b.zero_count, 0);
            CU_ASSERT_EQUAL(b.exp_hist[1], (uint64_t)N); /* all subnormal: bin 1 */
        }
    free(x);
#else
    test_skip("x's statistics under FTZ/DAZ: the MXCSR flags are x86's");
#endif
}

/* Casts with x's statistics given (as a probe's shadows get them) of a
 * tensor whose amax is a float32 subnormal, under FTZ/DAZ: the default
 * environment's x_hat and statistics.  The given amax used to be converted
 * to float in the caller's environment, where FTZ flushed it to 0: current
 * scaling then took scale 1 instead of FLT_MAX, NVFP4 scale 0. */
static void test_given_subnormal_amax(void)
{
#if defined(__x86_64__)
    enum { R = 64, C = 64 };
    static const char *specs[] = {"e4m3:current", "nvfp4", "e4m3:block=1x128", "e4m3:delayed"};
    float *x = malloc(R * C * 4), *q0 = malloc(R * C * 4), *q1 = malloc(R * C * 4);
    CU_ASSERT_FATAL(x && q0 && q1);
    for (size_t i = 0; i < R * C; i++) /* +-k 2^-140, k = 1..97 */
        x[i] = ldexpf((float)(i % 97 + 1), -140) * (i % 2 ? -1.0f : 1.0f);
    fp8_stats xs;
    CU_ASSERT_EQUAL_FATAL(fp8_tensor_stats(x, R * C, &xs, 0), FP8_OK);
    CU_ASSERT_EQUAL(xs.amax, ldexp(97, -140));
    for (size_t k = 0; k < sizeof specs / sizeof specs[0]; k++) {
        fp8_recipe_state *s0 = fp8_recipe_state_new(specs[k], "activation");
        fp8_recipe_state *s1 = fp8_recipe_state_new(specs[k], "activation");
        CU_ASSERT_FATAL(s0 && s1);
        fp8_stats a = xs, b = xs;
        CU_ASSERT_EQUAL(fp8_quantize_ex(s0, x, R, C, q0, &a, FP8_STATS_X_GIVEN), FP8_OK);
        unsigned saved = _mm_getcsr();
        _mm_setcsr(saved | 0x8040);
        int rc = fp8_quantize_ex(s1, x, R, C, q1, &b, FP8_STATS_X_GIVEN);
        _mm_setcsr(saved);
        CU_ASSERT_EQUAL(rc, FP8_OK);
        char what[80];
        snprintf(what, sizeof what, "FTZ/DAZ, x's statistics given, %s", specs[k]);
        stats_compare(what, &b, &a, 0);
        CU_ASSERT_EQUAL(memcmp(q0, q1, R * C * 4), 0);
        fp8_recipe_state_free(s0);
        fp8_recipe_state_free(s1);
    }
    free(x), free(q0), free(q1);
#else
    test_skip("casts under FTZ/DAZ: the MXCSR flags are x86's");
#endif
}

void register_fenv_tests(void)
{
    static CU_TestInfo tests[] = {
        {"FTZ/DAZ and all rounding modes give the same bits", test_environments},
        {"recipe names do not depend on the rounding mode", test_spec_names},
        {"x's statistics of subnormals under FTZ/DAZ", test_stats_subnormal},
        {"casts with x's statistics given, a subnormal amax, under FTZ/DAZ", test_given_subnormal_amax},
        CU_TEST_INFO_NULL,
    };
    add_suite("fenv", tests);
}
