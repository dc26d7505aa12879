/*
 * test_format.c — suite "format": descriptors against the OCP OFP8 tables (docs/formats.md),
 * the registry and generic names, and every code point of every format
 * decoded against the textbook formula of ref_cast.c.
 */
#include <math.h>
#include <stdio.h>

#include "fp8_format.h"
#include "ref_cast.h"
#include "tests.h"

typedef struct {
    const char *name;
    int e, m, bias;
    double max, min_normal, min_sub;
    int inf, nan, negzero;
} table_row;

/* The OCP OFP8 tables (docs/formats.md), typed in by hand. */
static const table_row brief[] = {
    {"e4m3", 4, 3, 7, 448, 0x1p-6, 0x1p-9, 0, 1, 1},
    {"e5m2", 5, 2, 15, 57344, 0x1p-14, 0x1p-16, 1, 1, 1},
    {"e4m3fnuz", 4, 3, 8, 240, 0x1p-7, 0x1p-10, 0, 1, 0},
    {"e5m2fnuz", 5, 2, 16, 57344, 0x1p-15, 0x1p-17, 0, 1, 0},
    {"e8m0", 8, 0, 127, 0x1p127, 0x1p-127, 0x1p-127, 0, 1, 0},
    {"e2m1", 2, 1, 1, 6, 1, 0.5, 0, 0, 1},
    {"e2m3", 2, 3, 1, 7.5, 1, 0.125, 0, 0, 1},
    {"e3m2", 3, 2, 3, 28, 0.25, 0.0625, 0, 0, 1},
    {"fp16", 5, 10, 15, 65504, 0x1p-14, 0x1p-24, 1, 1, 1},
    {"bf16", 8, 7, 127, 0x1.fep127, 0x1p-126, 0x1p-133, 1, 1, 1},
};

static void test_brief_table(void)
{
    size_t n;
    fp8_format_list(&n);
    CU_ASSERT_EQUAL(n, sizeof brief / sizeof brief[0]);
    for (size_t i = 0; i < sizeof brief / sizeof brief[0]; i++) {
        const fp8_format *f = fp8_format_find(brief[i].name, NULL);
        CU_ASSERT_PTR_NOT_NULL_FATAL(f);
        CU_ASSERT_EQUAL(f->ebits, brief[i].e);
        CU_ASSERT_EQUAL(f->mbits, brief[i].m);
        CU_ASSERT_EQUAL(f->bias, brief[i].bias);
        CU_ASSERT_EQUAL(f->max, brief[i].max);
        CU_ASSERT_EQUAL(f->min_normal, brief[i].min_normal);
        CU_ASSERT_EQUAL(f->min_subnormal, brief[i].min_sub);
        CU_ASSERT_EQUAL(f->has_inf, brief[i].inf);
        CU_ASSERT_EQUAL(f->has_nan, brief[i].nan);
        CU_ASSERT_EQUAL(f->has_negzero, brief[i].negzero);
        /* the decoded max code is the table's max */
        CU_ASSERT_EQUAL((double)fp8_format_decode(f, f->max_mag), brief[i].max);
    }
}

static void test_registry(void)
{
    fp8_format scratch;
    CU_ASSERT_PTR_EQUAL(fp8_format_find("e4m3fn", NULL), fp8_format_find("e4m3", NULL));
    CU_ASSERT_PTR_EQUAL(fp8_format_find("ue8m0", NULL), fp8_format_find("e8m0", NULL));
    CU_ASSERT_PTR_EQUAL(fp8_format_find("bfloat16", NULL), fp8_format_find("bf16", NULL));
    CU_ASSERT_PTR_NULL(fp8_format_find("e4m4", NULL)); /* no scratch: built-ins only */
    CU_ASSERT_PTR_NULL(fp8_format_find("float9", &scratch));
    CU_ASSERT_PTR_NOT_NULL(strstr(fp8_error_message(), "float9"));
    CU_ASSERT_PTR_NULL(fp8_format_find("e9m2", &scratch));
    CU_ASSERT_PTR_NOT_NULL(strstr(fp8_error_message(), "e9m2"));
    CU_ASSERT_PTR_NULL(fp8_format_find("e4m0", &scratch)); /* IEEE needs a mantissa bit */
    CU_ASSERT_PTR_NULL(fp8_format_find("", &scratch));

    /* ml_dtypes' float8_e4m3 (IEEE-like, max 240) */
    const fp8_format *f = fp8_format_find("e4m3ieee", &scratch);
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    CU_ASSERT_EQUAL(f->max, 240.0);
    CU_ASSERT_EQUAL(f->inf_code, 0x78u);
    /* ml_dtypes' float8_e3m4: IEEE, max 15.5, min subnormal 2^-6 */
    f = fp8_format_find("e3m4", &scratch);
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    CU_ASSERT_EQUAL(f->max, 15.5);
    CU_ASSERT_EQUAL(f->min_subnormal, 0x1p-6);
    /* ml_dtypes' float8_e4m3b11fnuz: max 30, min subnormal 2^-13 */
    f = fp8_format_find("e4m3b11fnuz", &scratch);
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    CU_ASSERT_EQUAL(f->max, 30.0);
    CU_ASSERT_EQUAL(f->min_subnormal, 0x1p-13);
    /* a 19-bit format stores codes in 4 bytes */
    f = fp8_format_find("e8m10", &scratch);
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    CU_ASSERT_EQUAL(f->code_bytes, 4);
    CU_ASSERT_EQUAL(f->bits, 19);
}

/* every code of every built-in and some generic formats decodes to the
 * textbook value, with the right class */
static void check_code_points(const fp8_format *f)
{
    uint32_t ncode = 1u << f->bits;
    for (uint32_t c = 0; c < ncode; c++) {
        double want = ref_decode(f, c);
        float got = fp8_format_decode(f, c);
        const char *cls = fp8_format_code_class(f, c);
        if (isnan(want)) {
            CU_ASSERT(isnan(got));
            CU_ASSERT_STRING_EQUAL(cls, "nan");
        } else {
            CU_ASSERT_EQUAL((double)got, want);
            CU_ASSERT_EQUAL(signbit(got) != 0, signbit(want) != 0);
            const char *expect = isinf(want) ? "inf" : want == 0 ? "zero"
                               : fabs(want) < f->min_normal ? "subnormal" : "normal";
            CU_ASSERT_STRING_EQUAL(cls, expect);
        }
    }
}

static void test_code_points(void)
{
    size_t n;
    const fp8_format *const *list = fp8_format_list(&n);
    for (size_t i = 0; i < n; i++)
        check_code_points(list[i]);
    const char *generic[] = {"e3m4", "e4m3ieee", "e2m0fn", "e6m1fnuz", "e8m2f" /* too big: rejected */, "e5m0fn"};
    for (size_t i = 0; i < sizeof generic / sizeof generic[0]; i++) {
        fp8_format scratch;
        const fp8_format *f = fp8_format_find(generic[i], &scratch);
        if (strcmp(generic[i], "e8m2f") == 0) {
            CU_ASSERT_PTR_NULL(f); /* max would exceed float32 */
            continue;
        }
        CU_ASSERT_PTR_NOT_NULL_FATAL(f);
        check_code_points(f);
    }
}

/* spot values from the OCP OFP8 spec tables */
static void test_spec_values(void)
{
    const fp8_format *e4 = fp8_format_find("e4m3", NULL), *e5 = fp8_format_find("e5m2", NULL);
    CU_ASSERT_EQUAL(fp8_format_decode(e4, 0x7E), 448.0f);
    CU_ASSERT_EQUAL(fp8_format_decode(e4, 0x08), 0x1p-6f);
    CU_ASSERT_EQUAL(fp8_format_decode(e4, 0x07), 0x1.cp-7f); /* largest subnormal 7/8*2^-6 */
    CU_ASSERT_EQUAL(fp8_format_decode(e4, 0x01), 0x1p-9f);
    CU_ASSERT(isnan(fp8_format_decode(e4, 0x7F)) && isnan(fp8_format_decode(e4, 0xFF)));
    CU_ASSERT_EQUAL(fp8_format_decode(e4, 0xFE), -448.0f);
    CU_ASSERT(signbit(fp8_format_decode(e4, 0x80)));
    CU_ASSERT_EQUAL(fp8_format_decode(e5, 0x7B), 57344.0f);
    CU_ASSERT(isinf(fp8_format_decode(e5, 0x7C)));
    CU_ASSERT(isnan(fp8_format_decode(e5, 0x7D)));
    CU_ASSERT_EQUAL(fp8_format_decode(e5, 0x04), 0x1p-14f);
    const fp8_format *e8 = fp8_format_find("e8m0", NULL);
    CU_ASSERT_EQUAL(fp8_format_decode(e8, 0x7F), 1.0f);
    CU_ASSERT_EQUAL(fp8_format_decode(e8, 0x00), 0x1p-127f);
    CU_ASSERT_EQUAL(fp8_format_decode(e8, 0xFE), 0x1p127f);
    const fp8_format *e2 = fp8_format_find("e2m1", NULL);
    const float fp4[8] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6};
    for (int c = 0; c < 8; c++) {
        CU_ASSERT_EQUAL(fp8_format_decode(e2, (uint32_t)c), fp4[c]);
        CU_ASSERT_EQUAL(fp8_format_decode(e2, (uint32_t)c | 8), -fp4[c]);
    }
}

void register_format_tests(void)
{
    static CU_TestInfo tests[] = {
        {"descriptors match the OCP table", test_brief_table},
        {"registry and generic names", test_registry},
        {"every code point decodes to the textbook value", test_code_points},
        {"OCP spec spot values", test_spec_values},
        CU_TEST_INFO_NULL,
    };
    add_suite("format", tests);
}
