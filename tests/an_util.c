/* an_util.c — see an_util.h. */
#include <stdio.h>
#include <stdlib.h>

#include "an_util.h"
#include "tests.h"

void test_write_run(const char *path, const test_tensor *ts, int nt, int64_t steps, test_gen_fn gen, unsigned long seed,
                    const test_run_extra *extra)
{
    static const test_run_extra none = {0};
    const test_run_extra *x = extra ? extra : &none;
    fp8_probe_options o = x->opt ? *x->opt : fp8_probe_defaults();
    fp8_probe_run *run = fp8_probe_open(path, &o, x->kv, x->nkv);
    CU_ASSERT_PTR_NOT_NULL_FATAL(run);
    CU_ASSERT_FATAL(nt >= 1 && nt <= 8);
    fp8_probe *p[8];
    size_t maxn = 1;
    for (int t = 0; t < nt; t++) {
        p[t] = fp8_probe_declare(run, ts[t].name, ts[t].role, 0, ts[t].active, ts[t].shadows, ts[t].nshadow);
        CU_ASSERT_PTR_NOT_NULL_FATAL(p[t]);
        if (ts[t].rows * ts[t].cols > maxn)
            maxn = ts[t].rows * ts[t].cols;
    }
    float *v = malloc(maxn * sizeof *v);
    gsl_rng *r = gsl_rng_alloc(gsl_rng_mt19937);
    CU_ASSERT_FATAL(v != NULL && r != NULL);
    gsl_rng_set(r, seed);
    for (int64_t s = 0; s < steps; s++) {
        for (int t = 0; t < nt; t++) {
            gen(r, s, t, v, ts[t].rows, ts[t].cols);
            CU_ASSERT_EQUAL(fp8_probe_record(p[t], s, v, ts[t].rows, ts[t].cols), FP8_OK);
        }
        if (x->loss)
            CU_ASSERT_EQUAL(fp8_probe_scalar(run, "loss", s, x->loss(s, x->loss_arg)), FP8_OK);
        CU_ASSERT_EQUAL(fp8_probe_step_end(run, s), FP8_OK);
    }
    gsl_rng_free(r);
    free(v);
    CU_ASSERT_EQUAL(fp8_probe_close(run), FP8_OK);
}

an_ctx test_an_open(const char *const *paths, int n, const char *outdir, int boot)
{
    an_ctx c;
    an_defaults(&c);
    c.outdir = outdir;
    c.md = fopen("/dev/null", "w");
    c.quiet = 1;
    if (boot > 0)
        c.boot = boot;
    CU_ASSERT_EQUAL_FATAL(an_open(&c, paths, n), 0);
    return c;
}

void test_an_close(an_ctx *c)
{
    if (c->md && c->md != stdout)
        fclose(c->md);
    an_close(c);
}
