/*
 * test_sweeps.c — suite "sweeps": grouped casts and probe sweeps on random
 * cases against the scalar oracle (tests/ref/ref_stats.c).  The engine
 * chooses per cast whether group ranges come from an amax pass, from a finer
 * recipe's ranges before the sweep, or piece by piece inside it (late
 * casts), which cast of a sweep goes first on each piece, and when a piece
 * goes group by group (a zero NVFP4 block scale); the fixed-shape tests
 * cover each choice once, these draw shapes (widths whole in groups or not,
 * one piece or several), data (Inf and NaN, zero stretches, an outlier that
 * flushes NVFP4 blocks), recipe mixes and their order, the cast in place,
 * x's statistics given or not, and one or two threads.  Each cast must give
 * the oracle's x_hat bit for bit and every statistic as stats_compare.c
 * checks it (counts, extremes, scales and histograms exactly, sums within
 * docs/statistics.md's tolerances).
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fp8.h"
#include "quantize_many.h"
#include "ref_stats.h"
#include "stats_compare.h"
#include "tests.h"

/* grouped recipes the oracle models (per-block delayed is not: its
 * histories are tested against one-by-one casts in suite stats), and
 * per-tensor ones beside them in sweeps */
static const char *grouped[] = {"mxfp8", "mxfp4", "e4m3:block=1x128", "e4m3:block=1x64:pow2", "nvfp4",
                                "e5m2:mx:even", "e4m3:block=1x32:ue8m0", "mxfp8:rceil"};
static const char *others[] = {"e4m3:current", "e4m3:delayed:history=4", "e4m3:block=128x128", "e4m3:rowwise"};
#define NG (sizeof grouped / sizeof grouped[0])
#define NO (sizeof others / sizeof others[0])

/* a random x of rows x cols: values over `binades` binades, some Inf and
 * NaN (kind 1), stretches of zeros (kind 2), now and then an outlier far
 * above the rest (it flushes NVFP4 blocks) */
static float *random_x(uint64_t *s, size_t rows, size_t cols, int kind, int binades)
{
    size_t n = rows * cols;
    float *x = malloc(n * sizeof *x);
    for (size_t i = 0; x && i < n; i++) {
        double u = (double)(test_rand(s) >> 11) * 0x1p-53 - 0.5;
        x[i] = (float)(u * ldexp(1.0, (int)(test_rand(s) % (uint64_t)binades) - binades / 2));
        if (kind == 1 && test_rand(s) % 97 == 0)
            x[i] = test_rand(s) % 2 ? INFINITY : NAN;
        if (kind == 2 && (i / 16) % 7 == 3)
            x[i] = 0.0f;
    }
    if (x && test_rand(s) % 3 == 0)
        x[test_rand(s) % n] = 3e6f;
    return x;
}

/* 1 when a cast's x_hat equals the oracle's bit for bit and every field of
 * its statistics passes stats_compare (which fails the test on each other
 * field, named by what) */
static int same_as_oracle(const char *what, const float *got, const float *want, size_t n, const fp8_stats *a,
                          const fp8_stats *b)
{
    int same = stats_compare(what, a, b, 0) == 0;
    return memcmp(got, want, n * sizeof *got) == 0 && same;
}

/* one grouped recipe, x's statistics given or not, two steps */
static void test_single_casts(void)
{
    uint64_t s = 12345;
    int compared = 0, differ = 0;
    for (int it = 0; it < 150; it++) {
        size_t cols = 16 * (1 + test_rand(&s) % 96) * (test_rand(&s) % 4 ? 1 : 2), rows = 1 + test_rand(&s) % 70;
        if (test_rand(&s) % 5 == 0)
            cols += test_rand(&s) % 16; /* not whole groups */
        size_t n = rows * cols;
        int kind = (int)(test_rand(&s) % 3);
        float *x = random_x(&s, rows, cols, kind, test_rand(&s) % 4 ? 8 : 40), *a = malloc(n * 4), *b = malloc(n * 4);
        CU_ASSERT_FATAL(x && a && b);
        const char *spec = grouped[test_rand(&s) % NG];
        fp8_recipe_state *sa = fp8_recipe_state_new(spec, "activation"), *sb = fp8_recipe_state_new(spec, "activation");
        CU_ASSERT_FATAL(sa && sb);
        for (int step = 0; step < 2; step++) {
            fp8_stats ga, gb;
            int given = (int)(test_rand(&s) % 2), rc;
            if (given) {
                CU_ASSERT_EQUAL(fp8_tensor_stats(x, n, &ga, 0), FP8_OK);
                rc = fp8_quantize_ex(sa, x, rows, cols, a, &ga, FP8_STATS_X_GIVEN);
            } else {
                rc = fp8_quantize(sa, x, rows, cols, a, &ga);
            }
            CU_ASSERT_EQUAL(rc, FP8_OK);
            CU_ASSERT_EQUAL(ref_quantize(sb, x, rows, cols, b, &gb), FP8_OK);
            compared++;
            char what[160];
            snprintf(what, sizeof what, "%s %zux%zu kind %d given %d step %d", spec, rows, cols, kind, given, step);
            if (!same_as_oracle(what, a, b, n, &ga, &gb)) {
                differ++;
                fprintf(stderr, "\n  %s: not the oracle's", what);
            }
            fp8_recipe_state_step(sa), fp8_recipe_state_step(sb);
        }
        fp8_recipe_state_free(sa), fp8_recipe_state_free(sb);
        free(x), free(a), free(b);
    }
    CU_ASSERT_EQUAL(compared, 300);
    CU_ASSERT_EQUAL(differ, 0);
}

/* Casts large enough that x_hat goes to the caller's out with
 * non-temporal stores (2^22 elements, kernel_vec.h's FP8_NT_MIN): x_hat and
 * the statistics are the oracle's, out aligned to a line or as malloc
 * gives it, one thread or two (each part's stores fenced before the caller
 * reads out); a delayed recipe's second step casts with its history's
 * scale. */
static void test_large_out(void)
{
    const size_t rows = 2048, cols = 2048, n = rows * cols;
    const char *specs[] = {"e4m3:delayed", "e4m3:current", "mxfp8", "nvfp4", "e4m3:block=1x128"};
    uint64_t s = 99;
    float *x = random_x(&s, rows, cols, 0, 8), *line = aligned_alloc(64, n * 4), *plain = malloc(n * 4 + 16),
          *want = malloc(n * 4);
    CU_ASSERT_FATAL(x && line && plain && want);
    int compared = 0, differ = 0;
    for (size_t k = 0; k < sizeof specs / sizeof specs[0]; k++) {
        fp8_recipe_state *sa = fp8_recipe_state_new(specs[k], "activation"),
                         *sb = fp8_recipe_state_new(specs[k], "activation");
        CU_ASSERT_FATAL(sa && sb);
        fp8_recipe_state_set_threads(sa, 1 + (int)(k % 2));
        for (int step = 0; step < 2; step++) {
            /* (malloc's address and 4 bytes past it: 16-byte and 4-byte aligned) */
            float *out = step == 0 ? line : (k % 2 ? plain + 1 : plain);
            fp8_stats ga, gb;
            CU_ASSERT_EQUAL(fp8_quantize(sa, x, rows, cols, out, &ga), FP8_OK);
            CU_ASSERT_EQUAL(ref_quantize(sb, x, rows, cols, want, &gb), FP8_OK);
            compared++;
            char what[160];
            snprintf(what, sizeof what, "%s %zux%zu into out at %zu mod 64, %d thread(s), step %d", specs[k], rows,
                     cols, (size_t)((uintptr_t)out % 64), 1 + (int)(k % 2), step);
            if (!same_as_oracle(what, out, want, n, &ga, &gb)) {
                differ++;
                fprintf(stderr, "\n  %s: not the oracle's", what);
            }
            fp8_recipe_state_step(sa), fp8_recipe_state_step(sb);
        }
        fp8_recipe_state_free(sa), fp8_recipe_state_free(sb);
    }
    CU_ASSERT_EQUAL(compared, 10);
    CU_ASSERT_EQUAL(differ, 0);
    free(x), free(line), free(plain), free(want);
}

/* two to five recipes in one sweep (fp8__quantize_many), in any order, one
 * of them perhaps in place, on one or two threads */
static void test_random_sweeps(void)
{
    uint64_t s = 777;
    int compared = 0, differ = 0, in_place = 0;
    for (int it = 0; it < 150; it++) {
        size_t cols = 32 * (1 + test_rand(&s) % 64), rows = 1 + test_rand(&s) % 90;
        if (test_rand(&s) % 6 == 0)
            cols += test_rand(&s) % 16;
        size_t n = rows * cols;
        float *x = random_x(&s, rows, cols, (int)(test_rand(&s) % 3), 10), *xin = malloc(n * 4);
        CU_ASSERT_FATAL(x && xin);
        memcpy(xin, x, n * 4);
        int m = 2 + (int)(test_rand(&s) % 4), ip = test_rand(&s) % 2 ? (int)(test_rand(&s) % (uint64_t)m) : -1;
        fp8_recipe_state *sa[5], *sb[5];
        const char *spec[5];
        float *out[5], *want[5];
        fp8_stats st[5], rs, xs;
        fp8__cast_req q[5];
        for (int k = 0; k < m; k++) {
            spec[k] = test_rand(&s) % 4 ? grouped[test_rand(&s) % NG] : others[test_rand(&s) % NO];
            sa[k] = fp8_recipe_state_new(spec[k], "activation"), sb[k] = fp8_recipe_state_new(spec[k], "activation");
            out[k] = malloc(n * 4), want[k] = malloc(n * 4);
            CU_ASSERT_FATAL(sa[k] && sb[k] && out[k] && want[k]);
            q[k] = (fp8__cast_req){.st = sa[k], .out = k == ip ? xin : out[k], .stats = &st[k]};
        }
        in_place += ip >= 0;
        int threads = 1 + (int)(test_rand(&s) % 2);
        /* x's statistics summed in the sweep, or given (as a probe's
         * record: fp8_tensor_stats_ex first, with or without its amax) */
        const int given = it % 3;
        fp8_amax_info ai;
        unsigned fl = 0;
        if (given) {
            CU_ASSERT_EQUAL(fp8_tensor_stats_ex(xin, n, &xs, 0, threads), FP8_OK);
            CU_ASSERT_EQUAL(fp8_tensor_amax(xin, n, &ai), FP8_OK);
            fl = FP8_STATS_X_GIVEN;
            if (it == 1) { /* statistics of another shape: refused, nothing cast */
                xs.numel++;
                CU_ASSERT_EQUAL(fp8__quantize_many(xin, rows, cols, fl, threads, &xs, NULL, q, m), FP8_EINVAL);
                CU_ASSERT_EQUAL(memcmp(xin, x, n * 4), 0);
                xs.numel--;
            }
        }
        CU_ASSERT_EQUAL(fp8__quantize_many(xin, rows, cols, fl, threads, &xs, given == 2 ? &ai : NULL, q, m), FP8_OK);
        for (int k = 0; k < m; k++) {
            CU_ASSERT_EQUAL(q[k].status, FP8_OK);
            CU_ASSERT_EQUAL(ref_quantize(sb[k], x, rows, cols, want[k], &rs), FP8_OK);
            compared++;
            char what[160];
            snprintf(what, sizeof what, "sweep of %d, %s (%d, in place %d) %zux%zu threads %d, x given %d", m, spec[k],
                     k, ip, rows, cols, threads, given);
            if (!same_as_oracle(what, k == ip ? xin : out[k], want[k], n, &st[k], &rs)) {
                differ++;
                fprintf(stderr, "\n  %s: not the oracle's", what);
            }
        }
        for (int k = 0; k < m; k++)
            fp8_recipe_state_free(sa[k]), fp8_recipe_state_free(sb[k]), free(out[k]), free(want[k]);
        free(x), free(xin);
    }
    CU_ASSERT(compared > 300);
    CU_ASSERT(in_place > 50);
    CU_ASSERT_EQUAL(differ, 0);
}

/* A tensor of one or two pieces (20 to 48 rows of 1024) on more threads
 * than it has parts: from 25 rows on the sweep hands its casts out side by
 * side (each cast a job, the ones whose group ranges come from the first
 * cast's piece with it; 20 rows, below quantize_many.c's GROUPS_MIN, and
 * 48 rows on two threads go as before).  Each cast's x_hat and statistics
 * are the oracle's, and the same bits as the sweep on one thread; twenty
 * rounds a case, so that a job order that depends on the other thread's
 * timing gets its chances. */
static void test_side_by_side(void)
{
    static const char *sets[3][5] = {{"mxfp8", "e4m3:block=1x128", "e4m3:current", "e4m3:delayed:history=4", "nvfp4"},
                                     {"e4m3:block=1x32:ue8m0", "mxfp8:rceil", "e4m3:block=1x64:pow2", NULL, NULL},
                                     {"e4m3:current", "e4m3:rowwise", "mxfp4", "e4m3:block=128x128", NULL}};
    static const size_t rows_of[4] = {20, 25, 32, 48};
    uint64_t s = 4242;
    int compared = 0, differ = 0;
    for (int ci = 0; ci < 12; ci++) {
        const char *const *set = sets[ci % 3];
        const size_t rows = rows_of[ci / 3], cols = 1024, n = rows * cols;
        const int threads = 2 + ci % 2, given = ci % 4 < 2;
        int m = 0;
        while (m < 5 && set[m])
            m++;
        float *x = random_x(&s, rows, cols, ci % 3, 10), *out[2][5], *want[5];
        fp8_recipe_state *st[2][5], *ref[5];
        for (int k = 0; k < m; k++) {
            for (int t = 0; t < 2; t++) {
                st[t][k] = fp8_recipe_state_new(set[k], "activation");
                out[t][k] = malloc(n * 4);
                CU_ASSERT_FATAL(st[t][k] && out[t][k]);
            }
            ref[k] = fp8_recipe_state_new(set[k], "activation");
            want[k] = malloc(n * 4);
            CU_ASSERT_FATAL(ref[k] && want[k]);
        }
        for (int round = 0; round < 20; round++) {
            fp8_stats got[2][5], rs, xs[2];
            for (int t = 0; t < 2; t++) {
                fp8__cast_req q[5];
                for (int k = 0; k < m; k++)
                    q[k] = (fp8__cast_req){.st = st[t][k], .out = out[t][k], .stats = &got[t][k]};
                unsigned fl = 0;
                if (given) {
                    CU_ASSERT_EQUAL(fp8_tensor_stats_ex(x, n, &xs[t], 0, t ? threads : 1), FP8_OK);
                    fl = FP8_STATS_X_GIVEN;
                }
                CU_ASSERT_EQUAL(fp8__quantize_many(x, rows, cols, fl, t ? threads : 1, &xs[t], NULL, q, m), FP8_OK);
                for (int k = 0; k < m; k++)
                    CU_ASSERT_EQUAL(q[k].status, FP8_OK);
            }
            for (int k = 0; k < m; k++) {
                CU_ASSERT_EQUAL(ref_quantize(ref[k], x, rows, cols, want[k], &rs), FP8_OK);
                char what[160];
                snprintf(what, sizeof what, "%s of %zux%zu beside %d others, %d threads, x given %d, round %d",
                         set[k], rows, cols, m - 1, threads, given, round);
                got[1][k].format = got[0][k].format; /* (each state holds its own copy) */
                int same = same_as_oracle(what, out[1][k], want[k], n, &got[1][k], &rs) &&
                           memcmp(out[0][k], out[1][k], n * 4) == 0 &&
                           memcmp(&got[0][k], &got[1][k], sizeof got[0][k]) == 0;
                compared++;
                if (!same) {
                    differ++;
                    fprintf(stderr, "\n  %s: not the oracle's or not one thread's", what);
                }
                for (int t = 0; t < 2; t++)
                    fp8_recipe_state_step(st[t][k]);
                fp8_recipe_state_step(ref[k]);
            }
        }
        for (int k = 0; k < m; k++) {
            for (int t = 0; t < 2; t++)
                fp8_recipe_state_free(st[t][k]), free(out[t][k]);
            fp8_recipe_state_free(ref[k]), free(want[k]);
        }
        free(x);
    }
    CU_ASSERT_EQUAL(compared, 20 * (4 * 5 + 4 * 3 + 4 * 4));
    CU_ASSERT_EQUAL(differ, 0);
}

void register_sweeps_tests(void)
{
    static CU_TestInfo tests[] = {
        {"grouped casts on random shapes and data, x's statistics given or not: the oracle's", test_single_casts},
        {"random sweeps of 2-5 recipes in any order, one in place, 1-2 threads, x's statistics given or not: the "
         "oracle's",
         test_random_sweeps},
        {"casts of 2^22 elements into out (non-temporal stores), aligned or not, 1-2 threads: the oracle's",
         test_large_out},
        {"casts side by side on a tensor of one or two pieces, 2-3 threads: the oracle's, one thread's bits",
         test_side_by_side},
        CU_TEST_INFO_NULL,
    };
    add_suite("sweeps", tests);
}
