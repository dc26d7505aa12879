/*
 * test_npy.c — suite "npy": the .npy / raw readers on good files (float32,
 * float16, big-endian, Fortran order, 3-D) and bad ones (not .npy, float64,
 * truncated, empty, shape mismatch), each error naming the file.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fp8.h"
#include "fp8_npy.h"
#include "tests.h"

static void write_npy(const char *path, const char *descr, int fortran, const char *shape, const void *data,
                      size_t bytes)
{
    char dict[200];
    int len = snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': %s, 'shape': %s, }", descr,
                       fortran ? "True" : "False", shape);
    int pad = (64 - (10 + len + 1) % 64) % 64;
    FILE *f = fopen(path, "wb");
    unsigned short hl = (unsigned short)(len + pad + 1);
    fwrite("\x93NUMPY\x01\x00", 1, 8, f);
    fputc(hl & 0xFF, f);
    fputc(hl >> 8, f);
    fwrite(dict, 1, (size_t)len, f);
    for (int i = 0; i < pad; i++)
        fputc(' ', f);
    fputc('\n', f);
    fwrite(data, 1, bytes, f);
    fclose(f);
}

static void test_good(void)
{
    const float v[6] = {1.5f, -2.0f, 0.25f, 448.0f, -0.0f, 3.0f};
    float *x;
    size_t r, c;
    write_npy("build/t_f4.npy", "<f4", 0, "(2, 3)", v, sizeof v);
    CU_ASSERT_EQUAL_FATAL(fp8_npy_read("build/t_f4.npy", &x, &r, &c), FP8_OK);
    CU_ASSERT(r == 2 && c == 3 && memcmp(x, v, sizeof v) == 0);
    free(x);
    /* float16: 1.5 = 0x3E00, -2 = 0xC000, 0.25 = 0x3400, 448 = 0x5F00, -0 = 0x8000, 3 = 0x4200 */
    const uint16_t h[6] = {0x3E00, 0xC000, 0x3400, 0x5F00, 0x8000, 0x4200};
    write_npy("build/t_f2.npy", "<f2", 0, "(6,)", h, sizeof h);
    CU_ASSERT_EQUAL_FATAL(fp8_npy_read("build/t_f2.npy", &x, &r, &c), FP8_OK);
    CU_ASSERT(r == 1 && c == 6 && memcmp(x, v, sizeof v) == 0);
    free(x);
    /* big-endian float32 */
    uint8_t be[24];
    for (int i = 0; i < 6; i++) {
        uint32_t u = bits_of(v[i]);
        be[4 * i] = (uint8_t)(u >> 24), be[4 * i + 1] = (uint8_t)(u >> 16), be[4 * i + 2] = (uint8_t)(u >> 8),
        be[4 * i + 3] = (uint8_t)u;
    }
    write_npy("build/t_be.npy", ">f4", 0, "(3, 2)", be, sizeof be);
    CU_ASSERT_EQUAL_FATAL(fp8_npy_read("build/t_be.npy", &x, &r, &c), FP8_OK);
    CU_ASSERT(r == 3 && c == 2 && memcmp(x, v, sizeof v) == 0);
    free(x);
    /* Fortran order: the file holds columns */
    const float colmajor[6] = {1.5f, 448.0f, -2.0f, -0.0f, 0.25f, 3.0f}; /* 2x3 by columns */
    write_npy("build/t_fo.npy", "<f4", 1, "(2, 3)", colmajor, sizeof colmajor);
    CU_ASSERT_EQUAL_FATAL(fp8_npy_read("build/t_fo.npy", &x, &r, &c), FP8_OK);
    CU_ASSERT(r == 2 && c == 3 && memcmp(x, v, sizeof v) == 0);
    free(x);
    /* 3-D: leading axes multiply into rows */
    write_npy("build/t_3d.npy", "<f4", 0, "(1, 2, 3)", v, sizeof v);
    CU_ASSERT_EQUAL_FATAL(fp8_npy_read("build/t_3d.npy", &x, &r, &c), FP8_OK);
    CU_ASSERT(r == 2 && c == 3);
    free(x);
    /* our writer round-trips */
    CU_ASSERT_EQUAL(fp8_npy_write("build/t_w.npy", v, 2, 3), FP8_OK);
    CU_ASSERT_EQUAL_FATAL(fp8_npy_read("build/t_w.npy", &x, &r, &c), FP8_OK);
    CU_ASSERT(r == 2 && c == 3 && memcmp(x, v, sizeof v) == 0);
    free(x);
    /* raw float32 with a shape */
    FILE *f = fopen("build/t.f32", "wb");
    fwrite(v, 4, 6, f);
    fclose(f);
    CU_ASSERT_EQUAL_FATAL(fp8_raw_read("build/t.f32", 0, 3, &x, &r, &c), FP8_OK);
    CU_ASSERT(r == 2 && c == 3 && memcmp(x, v, sizeof v) == 0);
    free(x);
}

static void test_bad(void)
{
    float *x = NULL;
    size_t r, c;
    const double d[2] = {1, 2};
    write_npy("build/t_f8.npy", "<f8", 0, "(2,)", d, sizeof d);
    EXPECT_ERROR(fp8_npy_read("build/t_f8.npy", &x, &r, &c), "'<f8' is not float32");
    const float v[2] = {1, 2};
    write_npy("build/t_short.npy", "<f4", 0, "(4,)", v, sizeof v);
    EXPECT_ERROR(fp8_npy_read("build/t_short.npy", &x, &r, &c), "truncated");
    write_npy("build/t_empty.npy", "<f4", 0, "(0,)", v, 0);
    EXPECT_ERROR(fp8_npy_read("build/t_empty.npy", &x, &r, &c), "empty");
    FILE *f = fopen("build/t_not.npy", "wb");
    fputs("hello, world", f);
    fclose(f);
    EXPECT_ERROR(fp8_npy_read("build/t_not.npy", &x, &r, &c), "t_not.npy: not a .npy file");
    EXPECT_ERROR(fp8_npy_read("build/does-not-exist.npy", &x, &r, &c), "does-not-exist.npy: cannot open");
    f = fopen("build/t7.f32", "wb");
    fwrite("1234567", 1, 7, f);
    fclose(f);
    EXPECT_ERROR(fp8_raw_read("build/t7.f32", 0, 0, &x, &r, &c), "not a positive multiple of 4");
    f = fopen("build/t6.f32", "wb");
    fwrite(v, 4, 2, f);
    fwrite(v, 4, 1, f);
    fclose(f);
    EXPECT_ERROR(fp8_raw_read("build/t6.f32", 0, 2, &x, &r, &c), "do not fill");
    CU_ASSERT_PTR_NULL(x);
}

/* a .npy file whose header dict is given verbatim */
static void write_dict(const char *path, const char *dict, const void *data, size_t bytes)
{
    size_t len = strlen(dict);
    FILE *f = fopen(path, "wb");
    fwrite("\x93NUMPY\x01\x00", 1, 8, f);
    fputc((int)(len & 0xFF), f);
    fputc((int)(len >> 8), f);
    fwrite(dict, 1, len, f);
    fwrite(data, 1, bytes, f);
    fclose(f);
}

static void test_header(void)
{
    const float v[2] = {1.5f, -3.0f};
    float *x = NULL;
    size_t r, c;
    /* any key order and either quote is a valid dict; no padding either */
    write_dict("build/t_h1.npy", "{\"shape\": (2,), \"fortran_order\": False, \"descr\": \"<f4\"}", v, sizeof v);
    CU_ASSERT_EQUAL_FATAL(fp8_npy_read("build/t_h1.npy", &x, &r, &c), FP8_OK);
    CU_ASSERT(r == 1 && c == 2 && x[0] == 1.5f && x[1] == -3.0f);
    free(x);
    x = NULL;
    /* 'descr' last and cut short: the reader must stay inside the header */
    write_dict("build/t_h2.npy", "{'fortran_order': False, 'shape': (2,), 'descr': '<", v, sizeof v);
    EXPECT_ERROR(fp8_npy_read("build/t_h2.npy", &x, &r, &c), "t_h2.npy: bad .npy header");
    write_dict("build/t_h3.npy", "{'fortran_order': False, 'shape': (2,), 'descr': '", v, sizeof v);
    EXPECT_ERROR(fp8_npy_read("build/t_h3.npy", &x, &r, &c), "bad .npy header");
    /* a 'shape' inside another value is not the shape */
    write_dict("build/t_h4.npy", "{'descr': '<f4', 'fortran_order': False, 'note': \"'shape': (1,)\", 'shape': (2,)}", v,
               sizeof v);
    EXPECT_ERROR(fp8_npy_read("build/t_h4.npy", &x, &r, &c), "unexpected key 'note'");
    write_dict("build/t_h5.npy", "{'descr': \"'shape': (1,)\", 'fortran_order': False, 'shape': (2,)}", v, sizeof v);
    EXPECT_ERROR(fp8_npy_read("build/t_h5.npy", &x, &r, &c), "is not float32");
    write_dict("build/t_h6.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'shape': (1,)}", v, sizeof v);
    EXPECT_ERROR(fp8_npy_read("build/t_h6.npy", &x, &r, &c), "'shape' appears twice");
    /* negative and absurd dimensions */
    write_dict("build/t_h7.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': (-2, 1)}", v, sizeof v);
    EXPECT_ERROR(fp8_npy_read("build/t_h7.npy", &x, &r, &c), "negative dimension");
    write_dict("build/t_h8.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': (1099511627776,)}", v, sizeof v);
    EXPECT_ERROR(fp8_npy_read("build/t_h8.npy", &x, &r, &c), "truncated: the header promises 1099511627776 elements");
    write_dict("build/t_h9.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999999,)}", v,
               sizeof v);
    EXPECT_ERROR(fp8_npy_read("build/t_h9.npy", &x, &r, &c), "too large");
    write_dict("build/t_h10.npy", "{'descr': '<f4', 'fortran_order': False}", v, sizeof v);
    EXPECT_ERROR(fp8_npy_read("build/t_h10.npy", &x, &r, &c), "lacks 'shape'");
    write_dict("build/t_h11.npy", "{'descr': '<f4', 'fortran_order': Maybe, 'shape': (2,)}", v, sizeof v);
    EXPECT_ERROR(fp8_npy_read("build/t_h11.npy", &x, &r, &c), "neither True nor False");
    write_dict("build/t_h12.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': (2,)} junk", v, sizeof v);
    EXPECT_ERROR(fp8_npy_read("build/t_h12.npy", &x, &r, &c), "after the header dict");
    CU_ASSERT_PTR_NULL(x);
}

void register_npy_tests(void)
{
    static CU_TestInfo tests[] = {
        {"good .npy and raw files", test_good},
        {"bad files name the file and the fault", test_bad},
        {"the header is parsed as a dict, inside its bytes", test_header},
        CU_TEST_INFO_NULL,
    };
    add_suite("npy", tests);
}
