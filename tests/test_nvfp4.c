/*
 * test_nvfp4.c — suite "nvfp4": NVFP4 as trained in 2025 against a slow
 * reference written from the recipe's definition (TE NVFP4BlockScaling):
 * two-level scales (global S_enc = 448*6/amax, per-block E4M3 decode scale),
 * E2M1 elements by a table, 2D 16x16 weight tiles, a 16x16 random Hadamard
 * transform of gradients (an explicit matrix in double), and stochastic
 * rounding of gradients (unbiased, and only on gradients).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fp8.h"
#include "ref_stats.h"
#include "stats_compare.h"
#include "tests.h"

/* E2M1 magnitudes by code 0..7, and the nearest one (ties to the even code) */
static const float e2m1[8] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6};

static float e2m1_nearest(float v)
{
    float a = fabsf(v);
    if (a >= 6)
        return copysignf(6, v);
    int best = 0;
    for (int c = 1; c < 8; c++) {
        float dc = fabsf(a - e2m1[c]), db = fabsf(a - e2m1[best]);
        if (dc < db || (dc == db && (c % 2) == 0))
            best = c;
    }
    return copysignf(e2m1[best], v);
}

/* the reference: x_hat of x (rows x cols) with groups of gr x gc */
static void ref_nvfp4(const float *x, size_t rows, size_t cols, size_t gr, size_t gc, float *out)
{
    const fp8_format *e4m3 = fp8_format_find("e4m3", NULL);
    fp8_cast_mode mode = {FP8_ROUND_NEAREST, FP8_SATURATE, 0, 0};
    float gamax = 0;
    for (size_t i = 0; i < rows * cols; i++)
        gamax = fmaxf(gamax, fabsf(x[i]));
    float S_enc = gamax > 0 ? (448.0f * 6.0f) / gamax : 1.0f, sg = 1.0f / S_enc;
    for (size_t i0 = 0; i0 < rows; i0 += gr)
        for (size_t j0 = 0; j0 < cols; j0 += gc) {
            float bamax = 0;
            for (size_t i = i0; i < i0 + gr && i < rows; i++)
                for (size_t j = j0; j < j0 + gc && j < cols; j++)
                    bamax = fmaxf(bamax, fabsf(x[i * cols + j]));
            float dec = (bamax / 6.0f) * S_enc;
            float sb;
            fp8_format_qdq_array(e4m3, &mode, 1.0f, &dec, 1, &sb, NULL); /* the decode scale stored as E4M3 */
            for (size_t i = i0; i < i0 + gr && i < rows; i++)
                for (size_t j = j0; j < j0 + gc && j < cols; j++) {
                    size_t k = i * cols + j;
                    out[k] = sb > 0 ? e2m1_nearest(x[k] * (S_enc / sb)) * (sb * sg) : copysignf(0, x[k]);
                }
        }
}

static float *tensor(size_t n, uint64_t seed)
{
    float *x = malloc(n * sizeof *x);
    uint64_t s = seed;
    for (size_t i = 0; i < n; i++) {
        double u = (double)(test_rand(&s) >> 11) / 9007199254740992.0;
        x[i] = (float)((u - 0.5) * pow(2.0, (double)(test_rand(&s) % 12) - 6)); /* 12 binades */
    }
    x[5] = 40.0f; /* an outlier */
    return x;
}

static void quantize(const char *spec, const char *role, const float *x, size_t rows, size_t cols, float *out,
                     fp8_stats *st)
{
    fp8_recipe_state *s = fp8_recipe_state_new(spec, role);
    CU_ASSERT_PTR_NOT_NULL_FATAL(s);
    CU_ASSERT_EQUAL(fp8_quantize(s, x, rows, cols, out, st), FP8_OK);
    fp8_recipe_state_free(s);
}

static void test_two_level_and_2d(void)
{
    size_t R = 48, C = 80, n = R * C;
    float *x = tensor(n, 11), *a = malloc(n * 4), *b = malloc(n * 4);
    fp8_stats st;
    /* 1x16 blocks, any role */
    quantize("nvfp4", "activation", x, R, C, a, &st);
    ref_nvfp4(x, R, C, 1, 16, b);
    CU_ASSERT_EQUAL(memcmp(a, b, n * 4), 0);
    CU_ASSERT_EQUAL(st.nscales, R * 5);
    /* weights=16x16: 2D tiles for weights only */
    quantize("nvfp4:weights=16x16", "weight", x, R, C, a, &st);
    ref_nvfp4(x, R, C, 16, 16, b);
    CU_ASSERT_EQUAL(memcmp(a, b, n * 4), 0);
    CU_ASSERT_EQUAL(st.nscales, 3 * 5);
    quantize("nvfp4:weights=16x16", "gradient", x, R, C, a, &st);
    ref_nvfp4(x, R, C, 1, 16, b);
    CU_ASSERT_EQUAL(memcmp(a, b, n * 4), 0);
    /* tiles the grouped kernel does not take: a row of tiles all zero (a
     * padded vocabulary's rows), one zero tile, and one of values whose
     * decode scale rounds to 0 (flushed: its 256 values count as
     * underflows, its tile as one with an underflow); the rest by the
     * kernel, the whole against the reference and the oracle */
    memset(x + 16 * C, 0, 16 * C * sizeof *x);
    for (size_t i = 32; i < 48; i++)
        for (size_t j = 16; j < 32; j++)
            x[i * C + j] = (i + j) % 3 ? 0.0f : -0.0f;
    for (size_t i = 0; i < 16; i++)
        for (size_t j = 48; j < 64; j++)
            x[i * C + j] = (i + j) % 2 ? 1e-7f : -3e-7f;
    quantize("nvfp4:weights=16x16", "weight", x, R, C, a, &st);
    ref_nvfp4(x, R, C, 16, 16, b);
    CU_ASSERT_EQUAL(memcmp(a, b, n * 4), 0);
    fp8_recipe_state *o = fp8_recipe_state_new("nvfp4:weights=16x16", "weight");
    fp8_stats ost;
    CU_ASSERT_EQUAL(ref_quantize(o, x, R, C, b, &ost), FP8_OK);
    CU_ASSERT_EQUAL(memcmp(a, b, n * 4), 0);
    stats_compare("nvfp4 16x16 tiles with zeros", &st, &ost, 0);
    CU_ASSERT(st.underflows >= 256);
    CU_ASSERT_EQUAL(st.underflows, ost.underflows);
    CU_ASSERT_EQUAL(st.blocks_with_underflow, ost.blocks_with_underflow);
    fp8_recipe_state_free(o);
    free(x), free(a), free(b);
}

/* H16 diag(d) / 4 as an explicit matrix, in double */
static void rht_ref(const float *x, size_t rows, size_t cols, const float d[16], int inverse, float *y)
{
    for (size_t i = 0; i < rows; i++)
        for (size_t j0 = 0; j0 < cols; j0 += 16) {
            if (j0 + 16 > cols) {
                for (size_t j = j0; j < cols; j++)
                    y[i * cols + j] = x[i * cols + j];
                continue;
            }
            for (int r = 0; r < 16; r++) {
                double s = 0;
                for (int c = 0; c < 16; c++) {
                    double h = __builtin_popcount((unsigned)(r & c)) % 2 ? -1 : 1; /* Sylvester: (-1)^<r,c> */
                    s += inverse ? h * x[i * cols + j0 + c] : h * d[c] * x[i * cols + j0 + c];
                }
                y[i * cols + j0 + r] = (float)(inverse ? d[r] * s / 4 : s / 4);
            }
        }
}

static void test_hadamard(void)
{
    size_t R = 32, C = 72, n = R * C; /* 4 whole groups and a partial one per row */
    float *x = tensor(n, 5), *a = malloc(n * 4), *y = malloc(n * 4), *q = malloc(n * 4), *b = malloc(n * 4);
    /* the signs of seed 7 (splitmix64's first output, bit i of it) */
    uint64_t z = 7 + 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull, z = (z ^ (z >> 27)) * 0x94D049BB133111EBull, z ^= z >> 31;
    float d[16];
    for (int i = 0; i < 16; i++)
        d[i] = (z >> i) & 1 ? -1.0f : 1.0f;
    fp8_stats st, st0;
    quantize("nvfp4:rht=7", "gradient", x, R, C, a, &st);
    rht_ref(x, R, C, d, 0, y);
    ref_nvfp4(y, R, C, 1, 16, q);
    rht_ref(q, R, C, d, 1, b);
    /* the transform in float butterflies against the matrix in double: a
     * few elements may round the other way at an E2M1 tie */
    size_t differ = 0;
    double e = 0, s = 0;
    for (size_t i = 0; i < n; i++) {
        differ += fabsf(a[i] - b[i]) > 1e-5f * 40.0f;
        e += ((double)a[i] - x[i]) * ((double)a[i] - x[i]), s += (double)x[i] * x[i];
    }
    CU_ASSERT(differ <= n / 200);
    /* the statistics' SQNR is the original tensor's (the transform is orthonormal) */
    CU_ASSERT_DOUBLE_EQUAL(st.sqnr_db, 10 * log10(s / e), 0.01);
    /* other roles and other seeds: not this transform */
    quantize("nvfp4:rht=7", "activation", x, R, C, a, &st0);
    ref_nvfp4(x, R, C, 1, 16, b);
    CU_ASSERT_EQUAL(memcmp(a, b, n * 4), 0);
    /* the outlier spread by the transform: fewer values flushed within its block */
    quantize("nvfp4", "gradient", x, R, C, a, &st0);
    CU_ASSERT(st.underflows != st0.underflows);
    free(x), free(a), free(y), free(q), free(b);
}

static void test_stochastic_gradients(void)
{
    size_t n = 1 << 16;
    float *x = malloc(n * 4), *a = malloc(n * 4), *b = malloc(n * 4);
    /* every block of 16: a 6 (the block amax: scales 1, the global amax 6
     * too) and fifteen 1.3, between E2M1's 1 and 1.5 (nearest: 1.5) */
    for (size_t i = 0; i < n; i++)
        x[i] = i % 16 == 0 ? 6.0f : 1.3f;
    fp8_stats st;
    /* activations: nearest, exactly the plain recipe */
    quantize("nvfp4:sr_grad", "activation", x, 1, n, a, &st);
    quantize("nvfp4", "activation", x, 1, n, b, &st);
    CU_ASSERT_EQUAL(memcmp(a, b, n * 4), 0);
    CU_ASSERT_EQUAL(b[1], 1.5f);
    /* gradients: each value 1 or 1.5, 1.5 with probability 0.6: the mean 1.3 */
    quantize("nvfp4:sr_grad", "gradient", x, 1, n, a, &st);
    double sum = 0;
    size_t m = 0, ones = 0, bad = 0;
    for (size_t i = 0; i < n; i++) {
        if (i % 16 == 0)
            continue;
        sum += a[i], m++;
        ones += a[i] == 1.0f;
        bad += a[i] != 1.0f && a[i] != 1.5f;
    }
    CU_ASSERT_EQUAL(bad, 0);
    CU_ASSERT(ones > m / 4 && ones < m / 2); /* about 40 % */
    double mean = sum / (double)m, se = sqrt(0.24) * 0.5 / sqrt((double)m);
    CU_ASSERT(fabs(mean - 1.3) < 5 * se);
    free(x), free(a), free(b);
}

/* Blocks whose E4M3 decode scale rounds to zero (block amax below ~2^-10 /
 * 448 of the tensor's): their values flush to +-0.  Given x's statistics,
 * the cast makes each piece's block ranges and scales in its one pass
 * (x's amax being known); a piece holding such blocks goes block by
 * block.  The same x_hat as the reference and as the cast with an amax
 * pass of its own, the same counts and block summaries, error sums equal
 * within rounding (summed in other pieces). */
static void test_zero_block_scales(void)
{
    size_t R = 128, C = 1024, n = R * C; /* four pieces of 32768 */
    float *x = tensor(n, 23), *a = malloc(n * 4), *b = malloc(n * 4), *r = malloc(n * 4);
    for (size_t i = 0; i < n; i++)
        x[i] *= 1e4f;
    x[5] = 3e6f;                            /* the tensor's amax */
    for (size_t i = 0; i < n; i++)          /* in the 1st and 3rd pieces, every 5th block tiny */
        if ((i / 32768) % 2 == 0 && (i / 16) % 5 == 1)
            x[i] = (float)((int)(i % 7) - 3) * 0.25f;
    ref_nvfp4(x, R, C, 1, 16, r);
    fp8_stats own, given;
    quantize("nvfp4", "activation", x, R, C, a, &own);
    fp8_recipe_state *s = fp8_recipe_state_new("nvfp4", "activation");
    CU_ASSERT_EQUAL_FATAL(fp8_tensor_stats(x, n, &given, 0), FP8_OK);
    CU_ASSERT_EQUAL(fp8_quantize_ex(s, x, R, C, b, &given, FP8_STATS_X_GIVEN), FP8_OK);
    fp8_recipe_state_free(s);
    CU_ASSERT_EQUAL(memcmp(a, r, n * 4), 0);
    CU_ASSERT_EQUAL(memcmp(b, r, n * 4), 0);
    size_t zeroed = 0;
    for (size_t i = 0; i < n; i++)
        zeroed += (i / 32768) % 2 == 0 && (i / 16) % 5 == 1 && x[i] != 0 && b[i] == 0;
    CU_ASSERT(zeroed > n / 20); /* the tiny blocks did flush */
    CU_ASSERT_EQUAL(memcmp(&own.classes, &given.classes, sizeof own.classes), 0);
    CU_ASSERT_EQUAL(given.underflows, own.underflows);
    CU_ASSERT_EQUAL(given.blocks_with_underflow, own.blocks_with_underflow);
    CU_ASSERT(given.blocks_with_underflow >= R * 64 / 10);
    CU_ASSERT_EQUAL(given.blocks_with_overflow, own.blocks_with_overflow);
    CU_ASSERT_EQUAL(given.scale_inv_min, own.scale_inv_min);
    CU_ASSERT_EQUAL(given.scale_inv_max, own.scale_inv_max);
    CU_ASSERT_EQUAL(memcmp(given.scale_hist, own.scale_hist, sizeof own.scale_hist), 0);
    CU_ASSERT_EQUAL(given.max_block_dynamic_range, own.max_block_dynamic_range);
    /* the squared error both ways against the exact sum over the
     * reference's x_hat: the lean float32 partials (16 terms each) keep it
     * within 16 * 2^-24 (1e-6) of it relative (docs/statistics.md); the two
     * routes sum in different orders, and without fused multiply-adds (AVX2,
     * the baseline) they differed by 2.2e-9 relative */
    long double exact = 0;
    for (size_t i = 0; i < n; i++)
        exact += ((long double)x[i] - r[i]) * ((long double)x[i] - r[i]);
    CU_ASSERT_DOUBLE_EQUAL(own.sq_err, (double)exact, 1e-6 * (double)exact);
    CU_ASSERT_DOUBLE_EQUAL(given.sq_err, (double)exact, 1e-6 * (double)exact);
    CU_ASSERT_EQUAL(given.max_abs_err, own.max_abs_err);
    free(x), free(a), free(b), free(r);
}

static void test_specs(void)
{
    fp8_recipe r;
    CU_ASSERT_EQUAL(fp8_recipe_parse("nvfp4:rht,sr_grad,weights=16x16", &r), FP8_OK);
    CU_ASSERT_STRING_EQUAL(r.spec, "nvfp4:group=16,weights=16x16,sr_grad,rht=0");
    CU_ASSERT_EQUAL(fp8_recipe_parse("nvfp4:rht=-1", &r), FP8_EINVAL);
    EXPECT_ERROR(fp8_recipe_parse("nvfp4:sr_grad=1", &r), "takes no value");
    EXPECT_ERROR(fp8_recipe_parse("nvfp4:weights=16", &r), "not RxC");
    EXPECT_ERROR(fp8_recipe_parse("e4m3:current:rht", &r), "unknown option 'rht'");
}

void register_nvfp4_tests(void)
{
    static CU_TestInfo tests[] = {
        {"two-level scales and 2D weight tiles equal the reference", test_two_level_and_2d},
        {"random Hadamard transform of gradients: the matrix, inverted, orthonormal", test_hadamard},
        {"stochastic rounding of gradients only: neighbours, unbiased", test_stochastic_gradients},
        {"zero block scales, the ranges made in the cast's one pass: as the reference", test_zero_block_scales},
        {"specs: options, canonical names, errors", test_specs},
        CU_TEST_INFO_NULL,
    };
    add_suite("nvfp4", tests);
}
