/*
 * cmd_format.c — the format commands: formats, table, cast, and the demo
 * (which for now shows the formats and a few casts).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_randist.h>
#include <gsl/gsl_rng.h>

#include "cli.h"
#include "fp8.h"

static const char *yn(int b) { return b ? "yes" : "no"; }

int cmd_formats(int argc, char **argv)
{
    (void)argv;
    if (argc > 1)
        return cli_usage_error("formats takes no arguments (got '%s')", argv[1]);
    size_t n;
    const fp8_format *const *list = fp8_format_list(&n);
    printf("%-9s %4s %4s %4s %5s %15s %15s %15s %4s %4s %3s  %s\n", "name", "bits", "exp", "man", "bias", "max",
           "min_normal", "min_subnormal", "inf", "nan", "-0", "description");
    for (size_t i = 0; i < n; i++) {
        const fp8_format *f = list[i];
        printf("%-9s %4d %4d %4d %5d %15.9g %15.9g %15.9g %4s %4s %3s  %s\n", f->name, f->bits, f->ebits, f->mbits,
               f->bias, f->max, f->min_normal, f->min_subnormal, yn(f->has_inf), yn(f->has_nan), yn(f->has_negzero),
               f->title);
    }
    return 0;
}

static int hex_width(const fp8_format *f) { return f->bits <= 8 ? 2 : f->bits <= 16 ? 4 : 5; }

int cmd_table(int argc, char **argv)
{
    if (argc != 2)
        return cli_usage_error(argc < 2 ? "table needs a FORMAT" : "table takes one FORMAT (extra '%s')",
                               argc > 2 ? argv[2] : "");
    fp8_format scratch;
    const fp8_format *f = fp8_format_find(argv[1], &scratch);
    if (!f)
        return cli_usage_error("%s", fp8_error_message());
    uint32_t n = 1u << f->bits;
    for (uint32_t c = 0; c < n; c++) {
        float v = fp8_format_decode(f, c);
        printf("0x%0*X %s %a %.9g\n", hex_width(f), c, fp8_format_code_class(f, c), (double)v, (double)v);
    }
    return 0;
}

/* Parse a whole token as a float32 (decimal or hex-float, inf, nan). */
static int parse_value(const char *s, float *out)
{
    char *end;
    errno = 0;
    float v = strtof(s, &end);
    if (end == s || *end != '\0')
        return -1;
    *out = v; /* ERANGE: overflow gives +-inf, underflow a subnormal or 0 */
    return 0;
}

typedef struct {
    const fp8_format *f;
    fp8_cast_mode mode;
    float scale;
    uint64_t index;
} cast_ctx;

static int cast_one(cast_ctx *c, const char *token)
{
    float x, q;
    if (parse_value(token, &x) != 0)
        return cli_usage_error("cast: '%s' is not a number", token);
    uint32_t code = 0;
    fp8_counts cnt;
    fp8_cast_mode m = c->mode;
    m.offset = c->index++;
    char codes[4];
    if (fp8_format_encode_array(c->f, &m, c->scale, &x, 1, codes, &cnt) != FP8_OK ||
        fp8_format_qdq_array(c->f, &m, c->scale, &x, 1, &q, NULL) != FP8_OK)
        return cli_usage_error("cast: %s", fp8_error_message());
    memcpy(&code, codes, (size_t)c->f->code_bytes); /* little-endian host */
    int cls = 0;
    for (int k = 0; k < FP8_NCLASS; k++)
        if (cnt.n[k])
            cls = k;
    printf("%s 0x%0*X %.9g %s\n", token, hex_width(c->f), code, (double)q, fp8_class_name((fp8_class)cls));
    return 0;
}

int cmd_cast(int argc, char **argv)
{
    cast_ctx c;
    memset(&c, 0, sizeof c);
    c.scale = 1.0f;
    const char *fmt = NULL;
    int nvalues = 0;
    char **values = calloc((size_t)argc, sizeof *values);
    if (!values)
        return cli_usage_error("cast: out of memory");
    int rc = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--round") == 0) {
            if (++i >= argc)
                { free(values); return cli_usage_error("cast: --round needs nearest, zero or stochastic"); }
            if (strcmp(argv[i], "nearest") == 0)
                c.mode.round = FP8_ROUND_NEAREST;
            else if (strcmp(argv[i], "zero") == 0)
                c.mode.round = FP8_ROUND_ZERO;
            else if (strcmp(argv[i], "stochastic") == 0)
                c.mode.round = FP8_ROUND_STOCHASTIC;
            else
                { free(values); return cli_usage_error("cast: unknown rounding '%s' (nearest, zero, stochastic)", argv[i]); }
        } else if (strcmp(a, "--seed") == 0) {
            char *end;
            if (++i >= argc)
                { free(values); return cli_usage_error("cast: --seed needs a number"); }
            errno = 0;
            c.mode.seed = strtoull(argv[i], &end, 0);
            if (*argv[i] == '\0' || *end != '\0' || errno || argv[i][0] == '-')
                { free(values); return cli_usage_error("cast: --seed '%s' is not an unsigned integer", argv[i]); }
        } else if (strcmp(a, "--saturate") == 0) {
            c.mode.overflow = FP8_SATURATE;
        } else if (strcmp(a, "--no-saturate") == 0) {
            c.mode.overflow = FP8_NO_SATURATE;
        } else if (strcmp(a, "--scale") == 0) {
            if (++i >= argc)
                { free(values); return cli_usage_error("cast: --scale needs a number"); }
            if (parse_value(argv[i], &c.scale) != 0 || !(c.scale > 0.0f) || c.scale > 3.4028235e38f)
                { free(values); return cli_usage_error("cast: --scale '%s' is not a positive finite number", argv[i]); }
            if (!(1.0f / c.scale <= 3.4028235e38f))
                { free(values); return cli_usage_error("cast: --scale '%s' is below 2^-128 (%g): its inverse, the "
                                                       "dequantization multiplier, overflows float32", argv[i], 0x1p-128); }
        } else if (a[0] == '-' && a[1] == '-') {
            { free(values); return cli_usage_error("cast: unknown option '%s'", a); }
        } else if (!fmt) {
            fmt = a;
        } else {
            values[nvalues++] = argv[i];
        }
    }
    if (!fmt) {
        free(values);
        return cli_usage_error("cast needs a FORMAT (see fp8prof cast --help)");
    }
    fp8_format scratch;
    c.f = fp8_format_find(fmt, &scratch);
    if (!c.f) {
        free(values);
        return cli_usage_error("%s", fp8_error_message());
    }
    if (nvalues > 0) {
        for (int i = 0; i < nvalues && rc == 0; i++)
            rc = cast_one(&c, values[i]);
        free(values);
        return rc;
    }
    free(values);
    char tok[256];
    while ((rc = scanf("%255s", tok)) == 1) {
        if (strlen(tok) == 255)
            return cli_usage_error("cast: a value on stdin is longer than 254 characters");
        if ((rc = cast_one(&c, tok)) != 0)
            return rc;
    }
    return 0;
}

/* One synthetic activation (Gaussian with a few outlier channels, GSL's
 * RNG) under each recipe, statistics side by side. */
static void demo_recipes(void)
{
    const size_t R = 256, C = 1024;
    float *x = malloc(R * C * sizeof *x);
    gsl_rng *rng = gsl_rng_alloc(gsl_rng_mt19937);
    if (!x || !rng) {
        free(x);
        gsl_rng_free(rng);
        return;
    }
    gsl_rng_set(rng, 2024);
    for (size_t i = 0; i < R; i++)
        for (size_t j = 0; j < C; j++) {
            double v = gsl_ran_gaussian(rng, 0.5);
            if (j % 97 == 3) /* outlier channels, as SwiGLU outputs grow them */
                v *= 60.0;
            x[i * C + j] = (float)v;
        }
    const char *specs[] = {"e4m3:none", "e4m3:delayed:history=16", "e4m3:current", "e4m3:rowwise",
                           "e4m3:block=1x128", "e4m3:block=1x128:ue8m0", "mxfp8:floor", "mxfp8:rceil",
                           "e5m2:current", "nvfp4"};
    printf("\na %zux%zu activation (Gaussian, sigma 0.5, every 97th channel x60) under each recipe:\n", R, C);
    printf("%-42s %8s %9s %9s %9s %8s %8s\n", "recipe", "scales", "overflow%", "underflw%", "subnorm%", "SQNR dB",
           "cosine");
    for (size_t k = 0; k < sizeof specs / sizeof specs[0]; k++) {
        fp8_recipe r;
        if (fp8_recipe_parse(specs[k], &r) != FP8_OK)
            continue;
        fp8_recipe_state *st = fp8_recipe_state_alloc(&r, FP8_ROLE_ACTIVATION);
        fp8_stats s;
        if (r.kind == FP8_RECIPE_DELAYED) { /* a few steps of history on smaller tensors first */
            for (int t = 0; t < 3; t++) {
                fp8_quantize(st, x, R / 2, C, NULL, NULL);
                fp8_recipe_state_step(st);
            }
        }
        fp8_quantize(st, x, R, C, NULL, &s);
        double n = (double)s.numel;
        printf("%-42s %8llu %9.4f %9.4f %9.4f %8.2f %8.6f\n", r.spec, (unsigned long long)s.nscales,
               100.0 * (double)s.overflows / n, 100.0 * (double)s.underflows / n, 100.0 * (double)s.subnormals / n,
               s.sqnr_db, s.cosine);
        fp8_recipe_state_free(st);
    }
    gsl_rng_free(rng);
    free(x);
}

int cmd_tour(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    printf("fp8prof tour — number formats and scaling recipes (the full demo, training runs and their report: "
           "make demo)\n\n");
    char *fa[] = {"formats", NULL};
    cmd_formats(1, fa);
    const char *fmts[] = {"e4m3", "e5m2", "e2m1"};
    const char *vals[] = {"0.1", "1.0625", "300", "464", "500", "1e-3", "-0x1p-10", "inf", "nan"};
    for (size_t i = 0; i < 3; i++) {
        printf("\ncasting to %s (nearest-even, saturating; then without saturation):\n", fmts[i]);
        cast_ctx c;
        memset(&c, 0, sizeof c);
        c.scale = 1.0f;
        c.f = fp8_format_find(fmts[i], NULL);
        for (size_t k = 0; k < sizeof vals / sizeof vals[0]; k++)
            cast_one(&c, vals[k]);
        c.mode.overflow = FP8_NO_SATURATE;
        printf("  no-saturate: ");
        fflush(stdout);
        cast_one(&c, "500");
    }
    demo_recipes();
    printf("\nkernel: %s\n", fp8_format_kernel_name());
    return 0;
}
