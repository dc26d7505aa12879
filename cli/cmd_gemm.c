/*
 * cmd_gemm.c — `fp8prof gemm-error`: the relative error of an FP8 GEMM whose
 * accumulator keeps a limited number of bits (fp8_gemm.h), against the exact
 * product of the same FP8 operands; with --sweep, over K with and without
 * promotion to FP32, as a table, a data file and a figure.
 */
#include <gsl/gsl_randist.h>
#include <gsl/gsl_rng.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "fp8.h"
#include "fp8_gemm.h"
#include "plots.h"

/* rows x K Gaussian values cast to fmt with a per-tensor current scale:
 * q holds the FP8 values themselves (what the tensor core multiplies),
 * *scale_inv the factor that restores tensor units */
static int operand(gsl_rng *r, const fp8_format *f, size_t rows, size_t K, float *q, double *scale_inv)
{
    size_t n = rows * K;
    float *x = malloc(n * sizeof *x);
    void *codes = malloc(n * (size_t)f->code_bytes);
    if (!x || !codes) {
        free(x), free(codes);
        return -1;
    }
    double amax = 0;
    for (size_t i = 0; i < n; i++) {
        x[i] = (float)gsl_ran_gaussian(r, 1.0);
        amax = fmax(amax, fabs(x[i]));
    }
    float scale = (float)(f->max / amax);
    fp8_cast_mode mode = {FP8_ROUND_NEAREST, FP8_SATURATE, 0, 0};
    fp8_format_encode_array(f, &mode, scale, x, n, codes, NULL);
    fp8_format_decode_array(f, 1.0f, codes, n, q);
    *scale_inv = 1.0 / scale;
    free(x), free(codes);
    return 0;
}

typedef struct {
    double frob, maxrel; /* ||C - C_ref||_F / ||C_ref||_F; max |C - C_ref| / |C_ref| over |C_ref| >= rms / 10 */
} gemm_err;

static int measure(const fp8_acc_model *m, const char *fmt, size_t M, size_t N, size_t K, unsigned long seed,
                   gemm_err *e)
{
    const fp8_format *f = fp8_format_find(fmt, NULL);
    if (!f || f->code_bytes != 1)
        return cli_usage_error("gemm-error: --format '%s' is not an 8-bit format (e4m3, e5m2, ...)", fmt);
    gsl_rng *r = gsl_rng_alloc(gsl_rng_mt19937);
    gsl_rng_set(r, seed);
    float *A = malloc(M * K * sizeof *A), *B = malloc(N * K * sizeof *B), *C = malloc(M * N * sizeof *C);
    double sa, sb;
    int rc = !A || !B || !C || !r || operand(r, f, M, K, A, &sa) || operand(r, f, N, K, B, &sb);
    if (!rc)
        rc = fp8_gemm_emulate(m, A, B, M, N, K, 1.0f, C) != FP8_OK;
    if (!rc) {
        /* the exact product of the FP8 values: exact products, a double sum */
        double *ref = malloc(M * N * sizeof *ref), ss = 0, se = 0, rms;
        rc = !ref;
        for (size_t i = 0; !rc && i < M; i++)
            for (size_t j = 0; j < N; j++) {
                double s = 0;
                for (size_t k = 0; k < K; k++)
                    s += (double)A[i * K + k] * (double)B[j * K + k];
                ref[i * N + j] = s;
                ss += s * s, se += (C[i * N + j] - s) * (C[i * N + j] - s);
            }
        if (!rc) {
            rms = sqrt(ss / (double)(M * N));
            e->frob = ss > 0 ? sqrt(se / ss) : 0;
            e->maxrel = 0;
            for (size_t i = 0; i < M * N; i++)
                if (fabs(ref[i]) >= rms / 10)
                    e->maxrel = fmax(e->maxrel, fabs(C[i] - ref[i]) / fabs(ref[i]));
        }
        free(ref);
    }
    (void)sa, (void)sb; /* the scale factors multiply both sides alike: the errors are relative */
    free(A), free(B), free(C);
    if (r)
        gsl_rng_free(r);
    if (rc)
        fprintf(stderr, "fp8prof: gemm-error: %s\n", fp8_error_message()[0] ? fp8_error_message() : "out of memory");
    return rc ? 1 : 0;
}

int cmd_gemm_error(int argc, char **argv)
{
    const char *fmt = "e4m3", *out = NULL;
    double K = 4096, bits = 14, prom = 0, M = 64, N = 64, seed = 1;
    int json = 0, sweep = 0, round = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int rc = 0;
        if ((a[0] == '-' && a[1] == '-' && strcmp(a, "--json") && strcmp(a, "--sweep") && strcmp(a, "--round")) &&
            i + 1 >= argc)
            return cli_usage_error("gemm-error: %s needs a value", a);
        if (!strcmp(a, "--format"))
            fmt = argv[++i];
        else if (!strcmp(a, "--k"))
            rc = cli_number("gemm-error", a, argv[++i], 1, 1 << 24, 1, &K);
        else if (!strcmp(a, "--acc-bits"))
            rc = cli_number("gemm-error", a, argv[++i], 0, 53, 1, &bits);
        else if (!strcmp(a, "--promote"))
            rc = cli_number("gemm-error", a, argv[++i], 0, 1 << 24, 1, &prom);
        else if (!strcmp(a, "--m"))
            rc = cli_number("gemm-error", a, argv[++i], 1, 4096, 1, &M);
        else if (!strcmp(a, "--n"))
            rc = cli_number("gemm-error", a, argv[++i], 1, 4096, 1, &N);
        else if (!strcmp(a, "--seed"))
            rc = cli_number("gemm-error", a, argv[++i], 0, 4294967295.0, 1, &seed);
        else if (!strcmp(a, "-o"))
            out = argv[++i];
        else if (!strcmp(a, "--json"))
            json = 1;
        else if (!strcmp(a, "--sweep"))
            sweep = 1;
        else if (!strcmp(a, "--round"))
            round = 1;
        else
            return cli_usage_error("gemm-error: unknown argument '%s'", a);
        if (rc)
            return rc;
    }
    if (bits == 1)
        return cli_usage_error("gemm-error: --acc-bits must be 0 (float32) or 2..53");
    if (sweep && !out)
        return cli_usage_error("gemm-error: --sweep needs -o DIR (the data file and figure)");
    if (!sweep) {
        fp8_acc_model m = {(int)bits, (int)prom, round}, f32 = {0, 0, 0};
        gemm_err e, e32;
        int rc = measure(&m, fmt, (size_t)M, (size_t)N, (size_t)K, (unsigned long)seed, &e);
        if (!rc)
            rc = measure(&f32, fmt, (size_t)M, (size_t)N, (size_t)K, (unsigned long)seed, &e32);
        if (rc)
            return rc;
        if (json)
            printf("{\"format\": \"%s\", \"k\": %.0f, \"m\": %.0f, \"n\": %.0f, \"acc_bits\": %.0f, \"promote\": %.0f, "
                   "\"rounding\": \"%s\", \"rel_error_frobenius\": %.9g, \"rel_error_max\": %.9g, "
                   "\"fp32_rel_error_frobenius\": %.9g, \"fp32_rel_error_max\": %.9g}\n",
                   fmt, K, M, N, bits, prom, round ? "nearest" : "truncate", e.frob, e.maxrel, e32.frob, e32.maxrel);
        else
            printf("%s GEMM, %.0fx%.0f outputs, K = %.0f, accumulator %.0f bits (%s), promotion %s:\n"
                   "  relative error %.3g (Frobenius), %.3g (largest, outputs >= rms/10)\n"
                   "  float32 accumulation: %.3g, %.3g\n",
                   fmt, M, N, K, bits, round ? "round to nearest" : "truncating", prom > 0 ? "every" : "none",
                   e.frob, e.maxrel, e32.frob, e32.maxrel);
        if (!json && prom > 0)
            printf("  (promoted to FP32 every %.0f products)\n", prom);
        return 0;
    }
    /* sweep K for: no promotion, promotion every 128, float32 */
    char path[4096];
    snprintf(path, sizeof path, "mkdir -p '%s'", out);
    if (system(path) != 0)
        return cli_usage_error("gemm-error: cannot create %s", out);
    snprintf(path, sizeof path, "%s/gemm_error.tsv", out);
    FILE *f = fopen(path, "w");
    if (!f)
        return cli_usage_error("gemm-error: cannot write %s", path);
    fprintf(f, "k\tmodel\tfrobenius\tmax\n");
    printf("%s GEMM, %.0fx%.0f outputs, accumulator %.0f bits (%s): relative error (Frobenius / largest)\n"
           "%8s %22s %22s %22s\n", fmt, M, N, bits, round ? "nearest" : "truncating", "K", "no promotion",
           "promotion every 128", "float32");
    static const size_t ks[] = {128, 256, 512, 1024, 2048, 4096, 8192, 16384};
    enum { NK = sizeof ks / sizeof ks[0] };
    static const char *names[3] = {"no promotion", "promote every 128", "float32"};
    gemm_err e[NK][3];
    for (size_t i = 0; i < NK; i++) {
        fp8_acc_model ms[3] = {{(int)bits, 0, round}, {(int)bits, 128, round}, {0, 0, 0}};
        for (int k = 0; k < 3; k++) {
            int rc = measure(&ms[k], fmt, (size_t)M, (size_t)N, ks[i], (unsigned long)seed, &e[i][k]);
            if (rc) {
                fclose(f);
                return rc;
            }
        }
        printf("%8zu %10.3g / %9.3g %10.3g / %9.3g %10.3g / %9.3g\n", ks[i], e[i][0].frob, e[i][0].maxrel,
               e[i][1].frob, e[i][1].maxrel, e[i][2].frob, e[i][2].maxrel);
    }
    for (int k = 0; k < 3; k++) /* one block per model, for the figure's lines */
        for (size_t i = 0; i < NK; i++)
            fprintf(f, "%zu\t%s\t%.9g\t%.9g\n", ks[i], names[k], e[i][k].frob, e[i][k].maxrel);
    fclose(f);
    char vars[1024], ttl[256], q[300], msg[1024];
    snprintf(ttl, sizeof ttl, "%s GEMM, %.0f-bit accumulator: relative error against K", fmt, bits);
    snprintf(vars, sizeof vars, "data = 'gemm_error.tsv'\nttl = %s\n", plot_quote(ttl, q, sizeof q));
    if (plot_render(out, "gemm", "fig_gemm_error", vars, msg, (int)sizeof msg) != 0) {
        fprintf(stderr, "fp8prof: gemm-error: figure: %s\n", msg);
        return 1;
    }
    printf("data %s/gemm_error.tsv, figure %s/fig_gemm_error.png\n", out, out);
    return 0;
}
