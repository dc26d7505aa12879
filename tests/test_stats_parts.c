/*
 * test_stats_parts.c — suite "stats_parts": a cast split into parts on
 * threads, and a recorded step's recipes in one sweep over x (in place,
 * nested groups taking the finest recipe's amaxes, a caller's known amax
 * instead of a pass), each against the same casts made one at a time on
 * one thread: the same x_hat, codes, statistics and state, bit for bit.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fp8.h"
#include "quantize_many.h"
#include "recipe_state.h"
#include "stats_cases.h"
#include "stats_compare.h"
#include "tests.h"

/* A recipe state's `threads` casts a tensor's parts side by side: the same
 * x_hat, codes, statistics and state as one thread, bit for bit, for every
 * recipe and kind of tensor, in place and not, on shapes of one part, of
 * several parts with a short last one, and of more pieces than parts */
static void test_threads_same_bits(void)
{
    const size_t shapes[3][2] = {{64, 100}, {300, 300}, {520, 1100}};
    for (int si = 0; si < 3; si++) {
        const size_t rows = shapes[si][0], cols = shapes[si][1], n = rows * cols;
        float *x = malloc(n * 4), *q[3] = {malloc(n * 4), malloc(n * 4), malloc(n * 4)};
        uint8_t *codes[3] = {malloc(n * 2), malloc(n * 2), malloc(n * 2)};
        float *gsi[3] = {malloc(n * 4), malloc(n * 4), malloc(n * 4)};
        const char *more[] = {"nvfp4:rht"};
        int differ = 0;
        for (size_t ri = 0; ri <= NRECIPES; ri++) {
            const char *spec = ri < NRECIPES ? recipes[ri] : more[0];
            fp8_recipe r;
            CU_ASSERT_EQUAL(fp8_recipe_parse(spec, &r), FP8_OK);
            fp8_recipe_state *st[3];
            const int th[3] = {1, 2, 3};
            for (int k = 0; k < 3; k++) {
                st[k] = fp8_recipe_state_alloc(&r, FP8_ROLE_GRADIENT);
                st[k]->threads = th[k];
            }
            for (int kind = 0; kind < 15; kind += (si == 2 ? 4 : 1)) {
                if (kind == 9 || kind == 10)
                    continue; /* (moving means: the single-part suite) */
                fp8_stats s[3];
                for (int k = 0; k < 3; k++) {
                    fill(kind, x, n, 700u + (uint64_t)kind);
                    if (kind % 2) { /* in place */
                        memcpy(q[k], x, n * 4);
                        CU_ASSERT_EQUAL_FATAL(fp8_quantize(st[k], q[k], rows, cols, q[k], &s[k]), FP8_OK);
                    } else {
                        CU_ASSERT_EQUAL_FATAL(
                            fp8_quantize_codes(st[k], x, rows, cols, codes[k], gsi[k], q[k], &s[k], 0), FP8_OK);
                    }
                    s[k].format = s[0].format; /* each state holds its own copy */
                    fp8_recipe_state_step(st[k]);
                }
                for (int k = 1; k < 3; k++) {
                    differ += memcmp(q[0], q[k], n * 4) != 0;
                    differ += memcmp(&s[0], &s[k], sizeof s[0]) != 0;
                    differ += st[0]->scale != st[k]->scale;
                    if (!(kind % 2))
                        differ += memcmp(codes[0], codes[k], n * (size_t)st[0]->format->code_bytes) != 0;
                }
                if (differ && differ < 4)
                    fprintf(stderr, "\n  threads: %s kind %d %zux%zu differs", spec, kind, rows, cols);
            }
            for (int k = 0; k < 3; k++)
                fp8_recipe_state_free(st[k]);
        }
        CU_ASSERT_EQUAL(differ, 0);
        /* x's own statistics likewise */
        fill(7, x, n, 5);
        fp8_stats a, b;
        fp8_tensor_stats_ex(x, n, &a, 0, 1);
        fp8_tensor_stats_ex(x, n, &b, 0, 3);
        CU_ASSERT_EQUAL(memcmp(&a, &b, sizeof a), 0);
        free(x);
        for (int k = 0; k < 3; k++)
            free(q[k]), free(codes[k]), free(gsi[k]);
    }
}

/* All recipes of the oracle test in one sweep (fp8__quantize_many), the
 * last of each group of four cast in place, against the same casts one
 * after the other with x's statistics given: the same bits, x_hat and
 * statistics, and the same state afterwards (a second step's casts agree). */
static void test_sweep_same_bits(void)
{
    const size_t rows = 96, cols = 1024, n = rows * cols; /* three pieces */
    float *x = malloc(n * 4), *xa = malloc(n * 4), *xb = malloc(n * 4), *qa = malloc(n * 4), *qb = malloc(n * 4);
    for (size_t r0 = 0; r0 < NRECIPES; r0 += 4) {
        int m = NRECIPES - r0 < 4 ? (int)(NRECIPES - r0) : 4;
        fp8_recipe_state *a[4], *b[4];
        for (int k = 0; k < m; k++) {
            fp8_recipe r;
            CU_ASSERT_EQUAL_FATAL(fp8_recipe_parse(recipes[r0 + k], &r), FP8_OK);
            a[k] = fp8_recipe_state_alloc(&r, FP8_ROLE_ACTIVATION);
            b[k] = fp8_recipe_state_alloc(&r, FP8_ROLE_ACTIVATION);
        }
        for (int step = 0; step < 2; step++) {
            fill(step ? 3 : 1, x, n, 900u + (uint64_t)r0);
            if (step) /* an overflow under the delayed scale the first step left */
                x[77] *= 4096.0f, x[n - 5] = -x[77];
            memcpy(xa, x, n * 4), memcpy(xb, x, n * 4);
            fp8_stats xs, sa[4], sb[4];
            fp8__cast_req q[4];
            for (int k = 0; k < m; k++)
                q[k] = (fp8__cast_req){.st = a[k], .out = k == m - 1 ? xa : (k == 0 ? qa : NULL), .stats = &sa[k]};
            CU_ASSERT_EQUAL_FATAL(fp8__quantize_many(xa, rows, cols, 0, 1, &xs, NULL, q, m), FP8_OK);
            fp8_stats xb_stats;
            CU_ASSERT_EQUAL_FATAL(fp8_tensor_stats(xb, n, &xb_stats, 0), FP8_OK);
            for (int k = 0; k < m; k++) {
                sb[k] = xb_stats;
                CU_ASSERT_EQUAL(q[k].status, FP8_OK);
                CU_ASSERT_EQUAL_FATAL(fp8_quantize_ex(b[k], xb, rows, cols, k == m - 1 ? xb : (k == 0 ? qb : NULL),
                                                      &sb[k], FP8_STATS_X_GIVEN), FP8_OK);
                sb[k].format = sa[k].format;
                char what[96];
                snprintf(what, sizeof what, "sweep: %s step %d", recipes[r0 + k], step);
                if (memcmp(&sa[k], &sb[k], sizeof sa[k]) != 0)
                    CU_FAIL(what);
            }
            CU_ASSERT_EQUAL(memcmp(&xs, &xb_stats, sizeof xs), 0);
            CU_ASSERT_EQUAL(memcmp(xa, xb, n * 4), 0); /* the one in place */
            if (m > 1)
                CU_ASSERT_EQUAL(memcmp(qa, qb, n * 4), 0);
            for (int k = 0; k < m; k++)
                fp8_recipe_state_step(a[k]), fp8_recipe_state_step(b[k]);
        }
        for (int k = 0; k < m; k++)
            fp8_recipe_state_free(a[k]), fp8_recipe_state_free(b[k]);
    }
    free(x), free(xa), free(xb), free(qa), free(qb);
}

/* Recipes whose groups nest take their amaxes from the finest one's
 * (fp8__ranges): per set, fp8__quantize_many against the same casts one by
 * one (x's statistics given), the same x_hat, codes, group scales,
 * statistics and, at a second step, the same per-block delayed scales.
 * Shapes with partial groups along the rows (1000 columns: MX's last group
 * 8 wide, 1x128's 104) and a partial tile row (130 rows of 128x128 tiles);
 * the finest cast in place in one set, a coarse one in place in another,
 * the finest last and not in place in a fourth (where the finest makes its
 * ranges in the sweep), groups that do not nest (1x48 in 1x32) beside
 * them; the second shape's sweep on two threads (its amax jobs and parts
 * side by side). */
static void test_sweep_nested_groups(void)
{
    static const char *sets[][5] = {
        {"mxfp8:floor", "e4m3:block=1x128", "e4m3:rowwise", "e4m3:block=128x128:pow2,eps=0", "e4m3:block=1x48"},
        {"e4m3:block=1x128:delayed,history=4", "e5m2:mx:even", "e4m3:block=1x64", "mxfp4:floor", "e4m3:current"},
        {"e4m3:block=1x128", "e4m3:block=128x128", "e4m3:rowwise", "e4m3:block=1x128:ue8m0", "mxfp8:rceil"},
        {"e4m3:block=1x128", "e4m3:block=1x64:pow2", "e4m3:rowwise", "e4m3:current", "mxfp8"},
    };
    /* in place: the fine one (MX), a coarse one, the finest last; a
     * per-tensor one, the finest last but not in place (with 1024 columns
     * its ranges are made in the sweep, piece by piece, and the casts
     * before it in the list take theirs from it) */
    static const int in_place[4] = {0, 1, 4, 3};
    const size_t shapes[2][2] = {{64, 1000}, {130, 1024}};
    int compared = 0;
    for (int si = 0; si < 2; si++) {
        const size_t rows = shapes[si][0], cols = shapes[si][1], n = rows * cols;
        float *x = malloc(n * 4), *xa = malloc(n * 4), *xb = malloc(n * 4);
        for (int set = 0; set < 4; set++) {
            fp8_recipe_state *a[5], *b[5];
            float *qa[5], *qb[5], *ga[5], *gb[5];
            uint16_t *ca[5], *cb[5];
            for (int k = 0; k < 5; k++) {
                fp8_recipe r;
                CU_ASSERT_EQUAL_FATAL(fp8_recipe_parse(sets[set][k], &r), FP8_OK);
                a[k] = fp8_recipe_state_alloc(&r, FP8_ROLE_ACTIVATION);
                a[k]->threads = si + 1;
                b[k] = fp8_recipe_state_alloc(&r, FP8_ROLE_ACTIVATION);
                size_t ng = fp8_quantize_ngroups(&r, rows, cols);
                qa[k] = malloc(n * 4), qb[k] = malloc(n * 4), ga[k] = malloc(ng * 4), gb[k] = malloc(ng * 4);
                ca[k] = malloc(n * 2), cb[k] = malloc(n * 2);
            }
            for (int step = 0; step < 2; step++) {
                fill(step ? 7 : 0, x, n, 1300u + (uint64_t)(10 * set + si));
                if (step) /* a block's amax far above its delayed history */
                    x[cols + 5] = 9.0e3f, x[n - 3] = -2.0e-30f;
                memcpy(xa, x, n * 4), memcpy(xb, x, n * 4);
                fp8_stats xs, xbs, sa[5], sb[5];
                fp8__cast_req q[5];
                for (int k = 0; k < 5; k++) {
                    int ip = k == in_place[set];
                    q[k] = (fp8__cast_req){.st = a[k], .out = ip ? xa : qa[k], .codes = ip ? NULL : ca[k],
                                           .group_scale_inv = ip ? NULL : ga[k], .stats = &sa[k]};
                }
                CU_ASSERT_EQUAL_FATAL(fp8__quantize_many(xa, rows, cols, 0, si + 1, &xs, NULL, q, 5), FP8_OK);
                CU_ASSERT_EQUAL_FATAL(fp8_tensor_stats(xb, n, &xbs, 0), FP8_OK);
                CU_ASSERT_EQUAL(memcmp(&xs, &xbs, sizeof xs), 0);
                /* one by one: the one in place last, as the sweep orders it */
                for (int j = 0; j < 5; j++) {
                    int k = j < 4 ? (j < in_place[set] ? j : j + 1) : in_place[set];
                    int ip = k == in_place[set];
                    sb[k] = xbs;
                    CU_ASSERT_EQUAL(q[k].status, FP8_OK);
                    int rc = ip ? fp8_quantize_ex(b[k], xb, rows, cols, xb, &sb[k], FP8_STATS_X_GIVEN)
                                : fp8_quantize_codes(b[k], xb, rows, cols, cb[k], gb[k], qb[k], &sb[k],
                                                     FP8_STATS_X_GIVEN);
                    CU_ASSERT_EQUAL_FATAL(rc, FP8_OK);
                    sb[k].format = sa[k].format;
                    size_t ng = fp8_quantize_ngroups(&a[k]->recipe, rows, cols);
                    int same = memcmp(&sa[k], &sb[k], sizeof sa[k]) == 0 &&
                               (ip ? memcmp(xa, xb, n * 4) == 0
                                   : memcmp(qa[k], qb[k], n * 4) == 0 && memcmp(ga[k], gb[k], ng * 4) == 0 &&
                                         memcmp(ca[k], cb[k], n * (size_t)a[k]->format->code_bytes) == 0);
                    if (!same) {
                        char what[128];
                        snprintf(what, sizeof what, "nested sweep: %s, %zux%zu, step %d", sets[set][k], rows, cols,
                                 step);
                        CU_FAIL(what);
                    }
                    compared++;
                }
                for (int k = 0; k < 5; k++)
                    fp8_recipe_state_step(a[k]), fp8_recipe_state_step(b[k]);
            }
            for (int k = 0; k < 5; k++) {
                fp8_recipe_state_free(a[k]), fp8_recipe_state_free(b[k]);
                free(qa[k]), free(qb[k]), free(ga[k]), free(gb[k]), free(ca[k]), free(cb[k]);
            }
        }
        free(x), free(xa), free(xb);
    }
    CU_ASSERT_EQUAL(compared, 2 * 4 * 2 * 5);
}

/* A delayed recipe that casts nothing (a shadow, or a record-only active
 * recipe, on a step without statistics) notes the amax its caller measured
 * (known_amax, known_inf: the probes' one pass) and reads no x: x's amax is
 * 1, the caller's 5 with an Inf, and the history takes the caller's (TE's
 * note: +Inf).  Without a known amax the cast measures x's own (1). */
static void test_known_amax_no_pass(void)
{
    float x[64];
    for (int i = 0; i < 64; i++)
        x[i] = (float)(i % 9) / 8.0f; /* amax 1 */
    fp8_recipe r;
    CU_ASSERT_EQUAL_FATAL(fp8_recipe_parse("e4m3:delayed:history=4", &r), FP8_OK);
    fp8_recipe_state *a = fp8_recipe_state_alloc(&r, FP8_ROLE_ACTIVATION);
    fp8_recipe_state *b = fp8_recipe_state_alloc(&r, FP8_ROLE_ACTIVATION);
    a->known_amax = 5.0f, a->known_inf = 0;
    CU_ASSERT_EQUAL(fp8_quantize(a, x, 4, 16, NULL, NULL), FP8_OK);
    CU_ASSERT_EQUAL(a->history[0], 5.0f);
    a->known_amax = NAN;
    fp8_recipe_state_step(a);
    a->known_amax = 5.0f, a->known_inf = 1;
    CU_ASSERT_EQUAL(fp8_quantize(a, x, 4, 16, NULL, NULL), FP8_OK);
    CU_ASSERT(isinf(a->history[0]));
    CU_ASSERT_EQUAL(fp8_quantize(b, x, 4, 16, NULL, NULL), FP8_OK);
    CU_ASSERT_EQUAL(b->history[0], 1.0f);
    fp8_recipe_state_free(a), fp8_recipe_state_free(b);
}

void register_stats_parts_tests(void)
{
    static CU_TestInfo tests[] = {
        {"threads: a tensor's parts side by side, the same bits as one thread", test_threads_same_bits},
        {"every recipe in one sweep, one in place: the same bits as one by one", test_sweep_same_bits},
        {"nested groups take the finest recipe's amaxes in a sweep: the same bits", test_sweep_nested_groups},
        {"a delayed recipe that casts nothing notes its caller's amax, no pass over x", test_known_amax_no_pass},
        CU_TEST_INFO_NULL,
    };
    add_suite("stats_parts", tests);
}
