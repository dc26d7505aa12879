/*
 * test_exp_hist.c — suite "exp_hist": x's exponent histogram (docs/
 * statistics.md; counted in register windows by stats_vec.c) against a count
 * by its definition, where the windows cannot reach, where the data are
 * wider than them, and where their counters fill, by fp8_tensor_stats and by
 * casts on one thread and two.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fp8.h"
#include "tests.h"

/* x's exponent histogram by its definition (docs/statistics.md): bin 0
 * zeros, bin 1 float32 subnormals, bin e + 1 a normal of exponent field e */
static void bins_by_definition(const float *x, size_t n, uint64_t want[FP8_EXP_BINS])
{
    memset(want, 0, FP8_EXP_BINS * sizeof want[0]);
    for (size_t i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, &x[i], 4);
        u &= 0x7FFFFFFFu;
        want[(u >> 23) + (u != 0)]++;
    }
}

/* The exponent histogram where its register window cannot reach (docs:
 * bin 0 zeros, bin 1 subnormals, bin e + 1 a normal of exponent field e):
 * half zeros (as after a ReLU), subnormals, and normals no larger than
 * 1.5 * 2^-113 (bin 15, so the window's top would lie below 16), then the
 * same with one 1.0 (bin 128) and 3.0 (bin 129) at the end; every bin equal
 * to a count by the definition, by fp8_tensor_stats and by a cast */
static void test_exp_hist_bottom(void)
{
    const size_t n = 4096 + 3;
    float *x = malloc(n * sizeof *x);
    CU_ASSERT_FATAL(x != NULL);
    for (int v = 0; v < 2; v++) {
        for (size_t i = 0; i < n; i++)
            x[i] = i % 2 == 0 ? 0.0f
                   : i % 6 == 1 ? ldexpf(1.0f, -140)
                   : i % 6 == 3 ? -ldexpf(1.0f, -126)
                                : 1.5f * ldexpf(1.0f, -113);
        x[7] = ldexpf(1.0f, -120);
        if (v == 1)
            x[n - 2] = 1.0f, x[n - 1] = 3.0f;
        uint64_t want[FP8_EXP_BINS];
        bins_by_definition(x, n, want);
        /* by hand: 2050 even i (one fewer with 3.0 at i = 4098); i = 1 mod 6
         * up to 4093 but 7: 682; i = 3 mod 6: 683; i = 5 mod 6 up to 4097:
         * 683 (one fewer with 1.0 at i = 4097) */
        CU_ASSERT_EQUAL(want[0], v ? 2049 : 2050);
        CU_ASSERT_EQUAL(want[1], 682);
        CU_ASSERT_EQUAL(want[2], 683);
        CU_ASSERT_EQUAL(want[8], 1);
        CU_ASSERT_EQUAL(want[15], v ? 682 : 683);
        CU_ASSERT_EQUAL(want[128], v);
        CU_ASSERT_EQUAL(want[129], v);
        fp8_stats a, b;
        fp8_recipe r;
        CU_ASSERT_EQUAL_FATAL(fp8_recipe_parse("e4m3:none", &r), FP8_OK);
        fp8_recipe_state *st = fp8_recipe_state_alloc(&r, FP8_ROLE_OTHER);
        CU_ASSERT_EQUAL(fp8_tensor_stats(x, n, &a, 0), FP8_OK);
        CU_ASSERT_EQUAL(fp8_quantize(st, x, 1, n, NULL, &b), FP8_OK);
        int wrong = 0;
        for (int k = 0; k < FP8_EXP_BINS; k++)
            wrong += a.exp_hist[k] != want[k] || b.exp_hist[k] != want[k];
        CU_ASSERT_EQUAL(wrong, 0);
        CU_ASSERT_EQUAL(a.zero_count, want[0]);
        CU_ASSERT_EQUAL(a.min_nonzero, (double)ldexpf(1.0f, -140));
        fp8_recipe_state_free(st);
    }
    free(x);
}

/* a recipe state of spec for role "other" on threads threads (the test
 * stops where it cannot be made) */
static fp8_recipe_state *state_on(const char *spec, int threads)
{
    fp8_recipe rc;
    CU_ASSERT_EQUAL_FATAL(fp8_recipe_parse(spec, &rc), FP8_OK);
    fp8_recipe_state *st = fp8_recipe_state_alloc(&rc, FP8_ROLE_OTHER);
    CU_ASSERT_FATAL(st != NULL);
    fp8_recipe_state_set_threads(st, threads);
    return st;
}

/* The exponent histogram of data wider than its register window, over
 * 24 pieces of 32768, 3 in each of a tensor's 8 parts, and over one piece
 * and a bit, and 3000 elements (stats_vec.c: a part's pieces switch to a
 * wide window of 31 bins after a block with many values outside the
 * narrow one of 15, its first piece from its first block; the broken wide
 * window's flush, or its reach one code too far, fail this test): magnitudes
 * log-uniform over 2^-45 .. 2^5 (50 binades,
 * some below even the wide window), zeros and subnormals among them, and a
 * piece whose largest value moves the window up mid-tensor (2^12 in the
 * third piece) or not (v = 0); every bin equal to a count by the
 * definition, by fp8_tensor_stats and by casts (per tensor, 1x128 blocks),
 * on one thread and two.  Pieces whose values span 25 binades only stay
 * within the wide window; values from 2^-149 to 2^-99 (the window's top
 * below 32) stay narrow, or zeros and subnormals would enter it. */
static void test_exp_hist_wide(void)
{
    const size_t sizes[3] = {24 * 32768 + 77, 32768 + 77, 3000};
    float *x = malloc(sizes[0] * sizeof *x);
    CU_ASSERT_FATAL(x != NULL);
    for (int v = 0; v < 12; v++) {
        const size_t n = sizes[v / 4];
        uint64_t z = 0x9E3779B97F4A7C15ull + (uint64_t)v;
        for (size_t i = 0; i < n; i++) {
            z ^= z << 13, z ^= z >> 7, z ^= z << 17;
            double u = (double)(z >> 11) * 0x1p-53;
            float m = v % 4 == 2   ? ldexpf(1.0f, -20) * exp2f((float)(25.0 * u))
                      : v % 4 == 3 ? (float)exp2(-149.0 + 50.0 * u) /* (float32 subnormals up to 2^-99: top < 32) */
                                   : exp2f((float)(-45.0 + 50.0 * u));
            x[i] = (z & 1 ? -1.0f : 1.0f) * m;
            if (i % 97 == 5)
                x[i] = 0.0f;
            if (i % 211 == 9)
                x[i] = ldexpf(1.0f, -130); /* a float32 subnormal */
        }
        if (v % 4 == 1) /* (the second piece of part 3; the small tensors' second half) */
            x[n > 10 * 32768 ? 10 * 32768 + 1000 : n / 2 + 300] = 4096.0f;
        uint64_t want[FP8_EXP_BINS];
        bins_by_definition(x, n, want);
        const char *specs[] = {"e4m3:none", "e4m3:current", "e4m3:block=1x128"};
        fp8_stats a;
        CU_ASSERT_EQUAL(fp8_tensor_stats(x, n, &a, 0), FP8_OK);
        int wrong = 0;
        for (int k = 0; k < FP8_EXP_BINS; k++)
            wrong += a.exp_hist[k] != want[k];
        for (int r = 0; r < 3; r++)
            for (int th = 1; th <= 2; th++) {
                fp8_recipe_state *st = state_on(specs[r], th);
                fp8_stats b;
                CU_ASSERT_EQUAL(fp8_quantize(st, x, n / 128, 128, NULL, &b), FP8_OK); /* (the rows before the tail) */
                uint64_t w2[FP8_EXP_BINS];
                bins_by_definition(x, n / 128 * 128, w2);
                for (int k = 0; k < FP8_EXP_BINS; k++)
                    wrong += b.exp_hist[k] != w2[k];
                CU_ASSERT_EQUAL(b.zero_count, w2[0]);
                fp8_recipe_state_free(st);
            }
        CU_ASSERT_EQUAL(wrong, 0);
        CU_ASSERT_EQUAL(a.zero_count, want[0]);
        CU_ASSERT(want[1] > n / 400); /* (the data are what the test says) */
        CU_ASSERT(v % 4 >= 2 || want[127 - 40] > n / 100);
    }
    free(x);
}

/* The exponent histogram at its register counters' capacity: data whose
 * every element has one exponent (each lane's counter takes an add every
 * vector), two binades alternating (a lane keeps its bin), and each lane a
 * bin of its own across the window, over several pieces and a tail; every
 * bin equal to a count by the definition, by fp8_tensor_stats and by casts
 * (delayed and current, one thread and two).  Counters spilled too late
 * (runs of 16 vectors instead of 8) fail it. */
static void test_exp_hist_full_counters(void)
{
    const size_t n = 3 * 32768 + 77;
    float *x = malloc(n * sizeof *x);
    CU_ASSERT_FATAL(x != NULL);
    for (int v = 0; v < 3; v++) {
        for (size_t i = 0; i < n; i++)
            x[i] = v == 0   ? 1.5f
                   : v == 1 ? (i % 2 ? -3.0f : 1.25f)
                            : ldexpf(1.0f + (float)(i % 7) / 8.0f, (int)(i % 16) - 12);
        uint64_t want[FP8_EXP_BINS];
        bins_by_definition(x, n, want);
        CU_ASSERT_EQUAL(want[128], v == 0 ? n : v == 1 ? (n + 1) / 2 : want[128]); /* (the data are what we say) */
        fp8_stats a;
        CU_ASSERT_EQUAL(fp8_tensor_stats(x, n, &a, 0), FP8_OK);
        int wrong = 0;
        for (int k = 0; k < FP8_EXP_BINS; k++)
            wrong += a.exp_hist[k] != want[k];
        const char *specs[] = {"e4m3:delayed", "e4m3:current"};
        for (int r = 0; r < 2; r++)
            for (int th = 1; th <= 2; th++) {
                fp8_recipe_state *st = state_on(specs[r], th);
                fp8_stats b;
                CU_ASSERT_EQUAL(fp8_quantize(st, x, 1, n, NULL, &b), FP8_OK);
                for (int k = 0; k < FP8_EXP_BINS; k++)
                    wrong += b.exp_hist[k] != want[k];
                fp8_recipe_state_free(st);
            }
        CU_ASSERT_EQUAL(wrong, 0);
    }
    free(x);
}

void register_exp_hist_tests(void)
{
    static CU_TestInfo tests[] = {
        {"exponent histogram: zeros, subnormals, a window below bin 16", test_exp_hist_bottom},
        {"exponent histogram: data wider than the window, over pieces, threads", test_exp_hist_wide},
        {"exponent histogram: one binade, two alternating, a bin a lane (the counters full)",
         test_exp_hist_full_counters},
        CU_TEST_INFO_NULL,
    };
    add_suite("exp_hist", tests);
}
