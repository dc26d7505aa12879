/*
 * cmd_synth.c — `fp8prof synth`: a synthetic run through the probe API, for
 * tests, benchmarks and a first look at the analyses.  Tensor kinds (cycled
 * over the tensors): Gaussian, heavy-tailed Student-t (nu = 4), Gaussian
 * with outlier channels, a slowly drifting scale, a sudden 8x jump at
 * mid-run, and NaN bursts.  Random numbers: GSL's mt19937, seeded.
 */
#include <gsl/gsl_randist.h>
#include <gsl/gsl_rng.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "fp8_probe.h"
#include "fp8_store.h"

static const char *kinds[] = {"gauss", "student_t", "outlier_channels", "drift", "jump", "nan_burst"};
#define NKINDS 6

static int parse_long(const char *opt, const char *v, long lo, long hi, long *out)
{
    double d;
    int rc = cli_number("synth", opt, v, (double)lo, (double)hi, 1, &d);
    if (!rc)
        *out = (long)d;
    return rc;
}

static void gen(gsl_rng *rng, int kind, long step, long steps, long rows, long cols, float *x)
{
    double amp = 1.0;
    if (kind == 3)
        amp = exp(2.0 * (double)step / (double)steps); /* drift: e^2 over the run */
    if (kind == 4 && step >= steps / 2)
        amp = 8.0; /* jump */
    for (long i = 0; i < rows * cols; i++) {
        double v;
        switch (kind) {
        case 1: v = gsl_ran_tdist(rng, 4.0) * 0.5; break;
        case 2: v = gsl_ran_gaussian(rng, 0.5) * ((i % cols) % 61 == 7 ? 40.0 : 1.0); break;
        default: v = gsl_ran_gaussian(rng, 0.5); break;
        }
        x[i] = (float)(v * amp);
    }
    if (kind == 5 && step % 50 == 25) /* a NaN burst */
        for (long i = 0; i < rows * cols; i += 7)
            x[i] = NAN;
}

int cmd_synth(int argc, char **argv)
{
    long steps = 300, tensors = 12, rows = 32, cols = 256, seed = 1;
    const char *out = NULL, *active = "hybrid:delayed:history=16";
    const char *shadow_default[] = {"e4m3:current", "e4m3:block=1x128", "mxfp8"};
    const char *shadows[8];
    int nsh = 0, user_shadows = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int rc = 0;
        if (i + 1 >= argc && (strcmp(a, "-o") == 0 || strncmp(a, "--", 2) == 0))
            return cli_usage_error("synth: %s needs a value", a);
        if (strcmp(a, "-o") == 0)
            out = argv[++i];
        else if (strcmp(a, "--steps") == 0)
            rc = parse_long(a, argv[++i], 1, 10000000, &steps);
        else if (strcmp(a, "--tensors") == 0)
            rc = parse_long(a, argv[++i], 1, 100000, &tensors);
        else if (strcmp(a, "--rows") == 0)
            rc = parse_long(a, argv[++i], 1, 1 << 20, &rows);
        else if (strcmp(a, "--cols") == 0)
            rc = parse_long(a, argv[++i], 1, 1 << 20, &cols);
        else if (strcmp(a, "--seed") == 0)
            rc = parse_long(a, argv[++i], 0, 0x7FFFFFFF, &seed);
        else if (strcmp(a, "--recipe") == 0)
            active = argv[++i];
        else if (strcmp(a, "--shadow") == 0) {
            if (nsh == 8)
                return cli_usage_error("synth: at most 8 --shadow recipes");
            shadows[nsh++] = argv[++i];
            user_shadows = 1;
        } else
            return cli_usage_error("synth: unknown option '%s'", a);
        if (rc)
            return rc;
    }
    if (!out)
        return cli_usage_error("synth needs -o RUN.h5");
    if (!user_shadows)
        for (nsh = 0; nsh < 3; nsh++)
            shadows[nsh] = shadow_default[nsh];
    char seedtxt[32], shape[64];
    snprintf(seedtxt, sizeof seedtxt, "%ld", seed);
    snprintf(shape, sizeof shape, "%ldx%ld", rows, cols);
    const char *kv[] = {"source", "fp8prof synth", "seed", seedtxt, "shape", shape};
    fp8_probe_run *run = fp8_probe_open(out, NULL, kv, 3);
    if (!run) {
        fprintf(stderr, "fp8prof: synth: %s\n", fp8_error_message());
        return 1;
    }
    fp8_probe **p = calloc((size_t)tensors, sizeof *p);
    float *x = malloc((size_t)(rows * cols) * sizeof *x);
    gsl_rng *rng = gsl_rng_alloc(gsl_rng_mt19937);
    int rc = 0;
    if (!p || !x || !rng) {
        fprintf(stderr, "fp8prof: synth: out of memory\n");
        rc = 1;
        goto done;
    }
    gsl_rng_set(rng, (unsigned long)seed);
    for (long t = 0; t < tensors && !rc; t++) {
        char name[FP8_NAME_MAX];
        snprintf(name, sizeof name, "layers.%ld.%s.%s", t / 3, kinds[t % NKINDS], t % 3 == 2 ? "grad_output" : "input");
        p[t] = fp8_probe_declare(run, name, t % 3 == 2 ? FP8_ROLE_GRADIENT : FP8_ROLE_ACTIVATION, (int)(t / 3), active,
                                 shadows, nsh);
        if (!p[t]) {
            fprintf(stderr, "fp8prof: synth: %s\n", fp8_error_message());
            rc = 2;
        }
    }
    for (long step = 0; step < steps && !rc; step++) {
        for (long t = 0; t < tensors; t++) {
            gen(rng, (int)(t % NKINDS), step, steps, rows, cols, x);
            fp8_probe_apply(p[t], step, x, (size_t)rows, (size_t)cols, x);
        }
        fp8_probe_scalar(run, "loss", step, 5.0 * exp(-(double)step / (double)steps) + 0.05 * gsl_rng_uniform(rng));
        fp8_probe_scalar(run, "lr", step, 3e-4);
        if (fp8_probe_step_end(run, step) != FP8_OK) {
            fprintf(stderr, "fp8prof: synth: %s\n", fp8_error_message());
            rc = 1;
        }
    }
done:
    if (fp8_probe_close(run) != FP8_OK && !rc) {
        fprintf(stderr, "fp8prof: synth: %s\n", fp8_error_message());
        rc = 1;
    }
    if (!rc)
        printf("wrote %s: %ld steps x %ld tensors (%ldx%ld), 1 + %d recipes\n", out, steps, tensors, rows, cols, nsh);
    gsl_rng_free(rng);
    free(p);
    free(x);
    return rc;
}
