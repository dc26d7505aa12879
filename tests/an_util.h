/* an_util.h — what the analysis suites share: writing a synthetic run
 * through the probes, and opening runs for an analysis quietly. */
#ifndef FP8_TESTS_AN_UTIL_H
#define FP8_TESTS_AN_UTIL_H
#include <gsl/gsl_rng.h>
#include <stdint.h>

#include "analysis.h"
#include "fp8_probe.h"

/* the values of tensor `tensor` at `step`, rows x cols, into x */
typedef void (*test_gen_fn)(gsl_rng *r, int64_t step, int tensor, float *x, size_t rows, size_t cols);

typedef struct {
    const char *name;
    fp8_role role;
    size_t rows, cols;
    const char *active; /* NULL: record-only */
    const char *const *shadows;
    int nshadow;
} test_tensor;

/* what a run may have beyond its tensors (every field may be 0/NULL) */
typedef struct {
    const fp8_probe_options *opt;
    const char *const *kv; /* /meta pairs */
    int nkv;
    double (*loss)(int64_t step, const void *arg); /* the scalar "loss" at every step */
    const void *loss_arg;
} test_run_extra;

/* A run of `steps` steps over nt (<= 8) tensors, values from gen with a
 * mt19937 generator seeded with seed; CUnit assertions on every call. */
void test_write_run(const char *path, const test_tensor *ts, int nt, int64_t steps, test_gen_fn gen, unsigned long seed,
                    const test_run_extra *extra);

/* The runs opened for an analysis into outdir, Markdown to /dev/null,
 * quiet, boot bootstrap resamples (0: the default); fatal on failure. */
an_ctx test_an_open(const char *const *paths, int n, const char *outdir, int boot);
void test_an_close(an_ctx *c);
#endif
