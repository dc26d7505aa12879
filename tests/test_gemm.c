/*
 * test_gemm.c — suite "gemm": the limited-precision accumulator model
 * (fp8_gemm.h) on hand-worked sums, against float32 where it must equal it,
 * and against an independent fixed-point implementation of the same rule
 * (integers and shifts instead of doubles and ldexp) on random FP8 dots.
 */
#include <math.h>
#include <stdlib.h>

#include "fp8.h"
#include "fp8_gemm.h"
#include "tests.h"

static double dot(int bits, int promote, int round, const float *a, const float *b, size_t K)
{
    fp8_acc_model m = {bits, promote, round};
    return fp8_dot_emulate(&m, a, b, K);
}

static void test_hand_worked(void)
{
    const float one[4] = {1, 1, 1, 1};
    /* 4 bits: 16 = 10000b keeps multiples of 2; 1.5 truncates to 0, rounds to 2 */
    const float a[2] = {16, 1.5f};
    CU_ASSERT_EQUAL(dot(4, 0, 0, a, one, 2), 16.0);
    CU_ASSERT_EQUAL(dot(4, 0, 1, a, one, 2), 18.0);
    /* 5 bits: multiples of 1; 1.5 -> 1 truncated, 2 rounded (tie to even) */
    CU_ASSERT_EQUAL(dot(5, 0, 0, a, one, 2), 17.0);
    CU_ASSERT_EQUAL(dot(5, 0, 1, a, one, 2), 18.0);
    /* 3 bits, a carry into the next binade drops one more bit: 7 + 2 = 9 -> 8 */
    const float c1[2] = {7, 2}, c2[2] = {7, 3}, c3[2] = {7, 1};
    CU_ASSERT_EQUAL(dot(3, 0, 0, c1, one, 2), 8.0);
    CU_ASSERT_EQUAL(dot(3, 0, 0, c2, one, 2), 10.0);
    CU_ASSERT_EQUAL(dot(3, 0, 0, c3, one, 2), 8.0);
    /* the larger operand sets the grid: a small sum is truncated when a large product arrives */
    const float d[3] = {1.25f, 0.125f, 64};
    CU_ASSERT_EQUAL(dot(4, 0, 0, d, one, 3), 64.0); /* 1.375 on the grid of 64 (multiples of 8): 0 */
    CU_ASSERT_EQUAL(dot(24, 0, 0, d, one, 3), 65.375);
    /* promotion every 2: the first two products reach FP32 before 64 arrives */
    CU_ASSERT_EQUAL(dot(4, 2, 0, d, one, 3), 65.375);
    /* signs: truncation is toward zero */
    const float e[2] = {-16, -1.5f};
    CU_ASSERT_EQUAL(dot(4, 0, 0, e, one, 2), -16.0);
    fp8_acc_model bad = {1, 0, 0};
    float C;
    CU_ASSERT_NOT_EQUAL(fp8_gemm_emulate(&bad, a, a, 1, 1, 1, 1.0f, &C), FP8_OK);
}

/* FP8 (e4m3) values of a random tensor */
static void fp8_values(float *x, size_t n, uint64_t *s)
{
    const fp8_format *f = fp8_format_find("e4m3", NULL);
    for (size_t i = 0; i < n; i++) {
        uint32_t code = (uint32_t)(test_rand(s) & 0xFF);
        if ((code & 0x7F) == 0x7F)
            code = 0x10; /* not NaN */
        x[i] = fp8_format_decode(f, code);
    }
}

static void test_float32_cases(void)
{
    uint64_t s = 77;
    float a[512], b[512];
    fp8_values(a, 512, &s), fp8_values(b, 512, &s);
    float ref = 0;
    for (int k = 0; k < 512; k++)
        ref += a[k] * b[k];
    CU_ASSERT_EQUAL(dot(0, 0, 0, a, b, 512), (double)ref);   /* float32, sequential */
    /* promoting every product (each exact in 24 bits) is float32 accumulation */
    CU_ASSERT_EQUAL(dot(24, 1, 0, a, b, 512), (double)ref);
}

/* The same rule in fixed point: every e4m3 product is a multiple of 2^-18
 * below 2^18 in magnitude, so sums of up to 2^20 of them are exact in an
 * int64 of units 2^-18; the grid is a power-of-two number of those units. */
static int64_t grid_fx(int64_t v, int q, int round) /* v on the grid 2^q units (q may be <= 0: exact) */
{
    if (q <= 0)
        return v;
    int64_t u = (int64_t)1 << q, m = v / u, r = v % u; /* C truncates toward zero */
    if (round) {
        int64_t twice = 2 * (r < 0 ? -r : r);
        if (twice > u || (twice == u && (m & 1)))
            m += v < 0 ? -1 : 1;
    }
    return m * u;
}

static int top_bit(int64_t v)
{
    uint64_t a = (uint64_t)(v < 0 ? -v : v);
    int e = 0;
    while (a) {
        a >>= 1;
        e++;
    }
    return e; /* a in [2^(e-1), 2^e) */
}

static double dot_fixed(int bits, int promote, int round, const float *a, const float *b, size_t K)
{
    float c = 0;
    int64_t s = 0;
    size_t n = 0;
    for (size_t k = 0; k < K; k++) {
        int64_t p = (int64_t)llround(ldexp((double)a[k] * (double)b[k], 18));
        if (p != 0) {
            int64_t big = llabs(s) > llabs(p) ? llabs(s) : llabs(p);
            int e = top_bit(big), q = e - bits;
            int64_t r = grid_fx(s, q, round) + grid_fx(p, q, round);
            int er = top_bit(r);
            if (r != 0 && er > e)
                r = grid_fx(r, er - bits, round);
            s = r;
        }
        if (promote > 0 && ++n == (size_t)promote) {
            c += (float)ldexp((double)s, -18);
            s = 0, n = 0;
        }
    }
    return (double)(c + (float)ldexp((double)s, -18));
}

static void test_against_fixed_point(void)
{
    uint64_t s = 2024;
    float a[64], b[64];
    int bad = 0;
    for (int t = 0; t < 20000; t++) {
        fp8_values(a, 64, &s), fp8_values(b, 64, &s);
        int bits = 3 + (int)(test_rand(&s) % 20), prom = (int)(test_rand(&s) % 3) * 16, round = (int)(test_rand(&s) & 1);
        double x = dot(bits, prom, round, a, b, 64), y = dot_fixed(bits, prom, round, a, b, 64);
        if (x != y && bad++ < 3)
            fprintf(stderr, "\n  bits %d promote %d round %d: %.17g vs fixed point %.17g\n", bits, prom, round, x, y);
    }
    CU_ASSERT_EQUAL(bad, 0);
}

/* The model's signature: without promotion the error grows with K, with
 * promotion every 128 it does not; a 14-bit truncating accumulator at
 * K = 4096 errs by about 1e-3 (Frobenius), float32 by about 1e-7. */
static void test_growth(void)
{
    uint64_t s = 5;
    size_t M = 8, N = 8;
    double err[2][2];
    const size_t ks[2] = {128, 4096};
    for (int ki = 0; ki < 2; ki++) {
        size_t K = ks[ki];
        float *A = malloc(M * K * sizeof *A), *B = malloc(N * K * sizeof *B), *C = malloc(M * N * sizeof *C);
        CU_ASSERT_FATAL(A && B && C);
        fp8_values(A, M * K, &s), fp8_values(B, N * K, &s);
        for (int pi = 0; pi < 2; pi++) {
            fp8_acc_model m = {14, pi ? 128 : 0, 0};
            CU_ASSERT_EQUAL(fp8_gemm_emulate(&m, A, B, M, N, K, 1.0f, C), FP8_OK);
            double se = 0, ss = 0;
            for (size_t i = 0; i < M; i++)
                for (size_t j = 0; j < N; j++) {
                    double r = 0;
                    for (size_t k = 0; k < K; k++)
                        r += (double)A[i * K + k] * B[j * K + k];
                    se += (C[i * N + j] - r) * (C[i * N + j] - r), ss += r * r;
                }
            err[ki][pi] = sqrt(se / ss);
        }
        free(A), free(B), free(C);
    }
    CU_ASSERT(err[1][0] > 3 * err[0][0]);  /* grows with K */
    CU_ASSERT(err[1][1] < 2 * err[0][1]);  /* not with promotion */
    CU_ASSERT(err[1][0] > 2e-4 && err[1][0] < 1e-2);
}

void register_gemm_tests(void)
{
    static CU_TestInfo tests[] = {
        {"hand-worked sums: grid, rounding, carry, promotion, sign", test_hand_worked},
        {"float32 where the model must equal it", test_float32_cases},
        {"equal to a fixed-point implementation on 20,000 random dots", test_against_fixed_point},
        {"error grows with K without promotion, not with it", test_growth},
        CU_TEST_INFO_NULL,
    };
    add_suite("gemm", tests);
}
