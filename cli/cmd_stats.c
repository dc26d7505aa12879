/*
 * cmd_stats.c — `fp8prof stats`: every statistic of the engine for tensors
 * stored in .npy files (or raw float32 ones with --raw), one block (or JSON
 * object) per file.
 * A delayed recipe carries its state from file to file (each file is one
 * step), so a dumped tensor sequence replays delayed scaling.
 */
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "fp8.h"
#include "fp8_bindings.h"
#include "fp8_npy.h"

static void json_double(double v)
{
    if (isfinite(v))
        printf("%.9g", v);
    else
        printf("null"); /* JSON has no Inf/NaN */
}

static void print_json(const char *file, size_t rows, size_t cols, int step, const char *spec, const fp8_stats *s)
{
    printf("{\"file\": \"");
    for (const char *p = file; *p; p++)
        printf(*p == '"' || *p == '\\' ? "\\%c" : "%c", *p);
    printf("\", \"rows\": %zu, \"cols\": %zu, \"step\": %d, \"recipe\": \"%s\", \"format\": \"%s\"", rows, cols, step,
           spec, s->format->name);
    size_t nf;
    const fp8_field *fields = fp8_stats_fields(&nf); /* names: docs/statistics.md */
    for (size_t i = 0; i < nf; i++) {
        if (fields[i].count != 1)
            continue; /* classes and histograms below */
        const char *p = (const char *)s + fields[i].offset;
        printf(", \"%s\": ", fields[i].name);
        if (fields[i].type == FP8_FIELD_U64)
            printf("%llu", (unsigned long long)*(const uint64_t *)(const void *)p);
        else
            json_double(*(const double *)(const void *)p);
    }
    printf(", \"classes\": {");
    for (int c = 0; c < FP8_NCLASS; c++)
        printf("%s\"%s\": %llu", c ? ", " : "", fp8_class_name((fp8_class)c), (unsigned long long)s->classes.n[c]);
    printf("}, \"exp_hist\": [");
    for (int b = 0; b < FP8_EXP_BINS; b++)
        printf("%s%llu", b ? ", " : "", (unsigned long long)s->exp_hist[b]);
    printf("], \"scale_hist\": [");
    for (int b = 0; b < FP8_SCALE_BINS; b++)
        printf("%s%llu", b ? ", " : "", (unsigned long long)s->scale_hist[b]);
    printf("]}\n");
}

static void print_text(const char *file, size_t rows, size_t cols, int step, const char *spec, const fp8_stats *s)
{
    printf("%s  (%zux%zu, step %d, %s, elements %s)\n", file, rows, cols, step, spec, s->format->name);
    size_t nf;
    const fp8_field *fields = fp8_stats_fields(&nf);
    for (size_t i = 0; i < nf; i++) {
        if (fields[i].count != 1)
            continue;
        const char *p = (const char *)s + fields[i].offset;
        if (fields[i].type == FP8_FIELD_U64)
            printf("  %-24s %llu\n", fields[i].name, (unsigned long long)*(const uint64_t *)(const void *)p);
        else
            printf("  %-24s %.9g\n", fields[i].name, *(const double *)(const void *)p);
    }
    printf("  %-24s", "classes");
    for (int c = 0; c < FP8_NCLASS; c++)
        printf(" %s=%llu", fp8_class_name((fp8_class)c), (unsigned long long)s->classes.n[c]);
    printf("\n  %-24s", "exp_hist (|x| binades)");
    for (int b = 0; b < FP8_EXP_BINS; b++) {
        if (!s->exp_hist[b])
            continue;
        if (b == 0)
            printf(" zero=%llu", (unsigned long long)s->exp_hist[b]);
        else if (b == 1)
            printf(" subnormal=%llu", (unsigned long long)s->exp_hist[b]);
        else if (b == 256)
            printf(" nonfinite=%llu", (unsigned long long)s->exp_hist[b]);
        else
            printf(" 2^%d=%llu", b - 128, (unsigned long long)s->exp_hist[b]);
    }
    printf("\n\n");
}

static int parse_size(const char *opt, const char *v, size_t *out)
{
    double d;
    int rc = cli_number("stats", opt, v, 1, 1e15, 1, &d);
    if (!rc)
        *out = (size_t)d;
    return rc;
}

static int cmd_stats_files(const char *spec, size_t rows, size_t cols, int raw, int json, fp8_role role, char **files,
                           int nfiles);

int cmd_stats(int argc, char **argv)
{
    const char *spec = NULL;
    size_t rows = 0, cols = 0;
    int json = 0, raw = 0;
    fp8_role role = FP8_ROLE_ACTIVATION;
    int nfiles = 0;
    char **files = argv; /* compacted in place: files[k] for k < i are already read */
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--recipe") == 0) {
            if (++i >= argc)
                return cli_usage_error("stats: --recipe needs a spec (e.g. e4m3:delayed)");
            spec = argv[i];
        } else if (strcmp(a, "--rows") == 0 || strcmp(a, "--cols") == 0) {
            if (++i >= argc)
                return cli_usage_error("stats: %s needs a number", a);
            int rc = parse_size(a, argv[i], a[2] == 'r' ? &rows : &cols);
            if (rc)
                return rc;
        } else if (strcmp(a, "--role") == 0) {
            if (++i >= argc)
                return cli_usage_error("stats: --role needs activation, weight, gradient, output or other");
            if (fp8_role_parse(argv[i], &role) != FP8_OK)
                return cli_usage_error("stats: %s", fp8_error_message());
        } else if (strcmp(a, "--json") == 0) {
            json = 1;
        } else if (strcmp(a, "--raw") == 0) {
            raw = 1;
        } else if (a[0] == '-' && a[1] == '-') {
            return cli_usage_error("stats: unknown option '%s'", a);
        } else {
            files[nfiles++] = argv[i];
        }
    }
    return cmd_stats_files(spec, rows, cols, raw, json, role, files, nfiles);
}

static int cmd_stats_files(const char *spec, size_t rows, size_t cols, int raw, int json, fp8_role role, char **files,
                           int nfiles)
{
    if (!spec)
        return cli_usage_error("stats needs --recipe SPEC (see fp8prof stats --help)");
    if (!nfiles)
        return cli_usage_error("stats needs at least one FILE (.npy or raw float32)");
    fp8_recipe r;
    if (fp8_recipe_parse(spec, &r) != FP8_OK)
        return cli_usage_error("stats: %s", fp8_error_message());
    fp8_recipe_state *st = fp8_recipe_state_alloc(&r, role);
    if (!st)
        return cli_usage_error("stats: %s", fp8_error_message());
    int step = 0, rc = 0;
    for (int i = 0; i < nfiles && rc == 0; i++) {
        const char *a = files[i];
        float *x = NULL;
        size_t R, C;
        /* the magic decides, not the name; raw float32 only when asked for */
        int npy = fp8_npy_sniff(a), s = FP8_OK;
        if (npy < 0)
            s = FP8_EIO;
        else if (npy)
            s = fp8_npy_read(a, &x, &R, &C);
        else if (raw)
            s = fp8_raw_read(a, rows, cols, &x, &R, &C);
        else
            s = fp8_error_set(FP8_EINVAL,
                              "%s: not a .npy file (no \\x93NUMPY magic); pass --raw to read it as raw "
                              "little-endian float32",
                              a);
        if (s == FP8_OK && npy == 1 && (rows || cols)) {
            size_t wr = rows ? rows : R * C / cols, wc = cols ? cols : R * C / rows;
            if (wr * wc != R * C) {
                fp8_error_set(FP8_EINVAL, "%s: %zu elements do not fill --rows/--cols %zux%zu", a, R * C, wr, wc);
                s = FP8_EINVAL;
            } else {
                R = wr, C = wc;
            }
        }
        fp8_stats stats;
        if (s == FP8_OK)
            s = fp8_quantize(st, x, R, C, NULL, &stats);
        if (s != FP8_OK) {
            fprintf(stderr, "fp8prof: stats: %s\n", fp8_error_message());
            rc = 1;
        } else {
            if (json)
                print_json(a, R, C, step, r.spec, &stats);
            else
                print_text(a, R, C, step, r.spec, &stats);
            fp8_recipe_state_step(st);
            step++;
        }
        free(x);
    }
    fp8_recipe_state_free(st);
    return rc;
}
