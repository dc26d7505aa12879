/*
 * test_background.c — suite "background": the probe option background
 * (records made by the run's own thread from a copy of the tensor).  The
 * same training-loop-shaped calls are made with and without it, the caller
 * overwriting its tensors as soon as each call returns, and every dataset
 * of the two run files must hold the same bytes; with a bound on the copies
 * so small that records wait for room and one tensor does not fit at all.
 * An error met on the background thread comes back from the next step end;
 * bad option values are refused by name.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <hdf5.h>

#include "fp8_probe.h"
#include "fp8_store.h"
#include "tests.h"

/* Dataset ds of files a and b: the same shape, type and bytes (read in the
 * file's own type: no conversion).  1 when equal. */
static int same_dataset(const char *a, const char *b, const char *ds)
{
    hid_t f[2] = {H5Fopen(a, H5F_ACC_RDONLY, H5P_DEFAULT), H5Fopen(b, H5F_ACC_RDONLY, H5P_DEFAULT)};
    hid_t d[2] = {-1, -1}, t[2] = {-1, -1}, sp[2] = {-1, -1};
    void *buf[2] = {NULL, NULL};
    size_t bytes[2] = {0, 0};
    int ok = f[0] >= 0 && f[1] >= 0;
    for (int k = 0; ok && k < 2; k++) {
        hsize_t dims[4] = {0, 0, 0, 0};
        ok = (d[k] = H5Dopen2(f[k], ds, H5P_DEFAULT)) >= 0 && (t[k] = H5Dget_type(d[k])) >= 0 &&
             (sp[k] = H5Dget_space(d[k])) >= 0 && H5Sget_simple_extent_ndims(sp[k]) <= 4 &&
             H5Sget_simple_extent_dims(sp[k], dims, NULL) >= 0;
        hssize_t n = ok ? H5Sget_simple_extent_npoints(sp[k]) : -1;
        bytes[k] = n >= 0 ? (size_t)n * H5Tget_size(t[k]) : 0;
        ok = ok && n >= 0 && (buf[k] = calloc(1, bytes[k] + 1)) != NULL &&
             (n == 0 || H5Dread(d[k], t[k], H5S_ALL, H5S_ALL, H5P_DEFAULT, buf[k]) >= 0);
    }
    ok = ok && H5Tequal(t[0], t[1]) > 0 && H5Sextent_equal(sp[0], sp[1]) > 0 && bytes[0] == bytes[1] &&
         memcmp(buf[0], buf[1], bytes[0]) == 0;
    for (int k = 0; k < 2; k++) {
        free(buf[k]);
        if (sp[k] >= 0)
            H5Sclose(sp[k]);
        if (t[k] >= 0)
            H5Tclose(t[k]);
        if (d[k] >= 0)
            H5Dclose(d[k]);
        if (f[k] >= 0)
            H5Fclose(f[k]);
    }
    return ok;
}

static void fill(float *x, size_t n, uint64_t seed, float amp)
{
    uint64_t s = seed | 1;
    for (size_t i = 0; i < n; i++)
        x[i] = (float)((double)(int64_t)test_rand(&s) * 0x1p-63) * amp;
}

static uint16_t bf16_of(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return (uint16_t)(u >> 16);
}

/* One run of the loop into path: 24 steps, four probes (an activation
 * with three shadows and a snapshot, a per-block delayed weight that needs
 * its tensor every step, a gradient given as bf16, and a 600x512 tensor of
 * 1.2 MB, more than a 1 MB bound), a scalar a step; each tensor written
 * over right after its call.  Returns the number of failed calls. */
static int loop(const char *path, int background, int64_t mb, float *scale13)
{
    static const char *sh[] = {"e4m3:current", "e4m3:block=1x128", "mxfp8"};
    fp8_probe_options o = fp8_probe_defaults();
    o.every = 3, o.flush_steps = 4, o.snapshot_pattern = "act", o.snapshot_every = 5, o.block_amax_every = 7;
    o.background = background, o.background_mb = mb;
    fp8_probe_run *run = fp8_probe_open(path, &o, NULL, 0);
    if (!run)
        return 1000;
    fp8_probe *act = fp8_probe_declare(run, "act", FP8_ROLE_ACTIVATION, 0, "hybrid:delayed:history=4", sh, 3);
    fp8_probe *w = fp8_probe_declare(run, "w", FP8_ROLE_WEIGHT, 0, "e4m3:block=1x128:delayed,history=8", sh, 1);
    fp8_probe *g = fp8_probe_declare(run, "g", FP8_ROLE_GRADIENT, 0, "hybrid:delayed", sh, 2);
    fp8_probe *big = fp8_probe_declare(run, "big", FP8_ROLE_OUTPUT, 1, "e4m3:current", NULL, 0);
    if (!act || !w || !g || !big)
        return 1000;
    const size_t nx = 256 * 512, nw = 96 * 256, ng = 64 * 100, nb = 600 * 512;
    float *x = malloc(nx * 4), *wt = malloc(nw * 4), *gr = malloc(ng * 4), *b = malloc(nb * 4);
    uint16_t *gb = malloc(ng * 2);
    int bad = 0;
    for (int s = 0; s < 24; s++) {
        fill(x, nx, (uint64_t)s + 1, 1.0f + (float)(s % 4));
        if (s == 10)
            x[17] = INFINITY, x[99] = NAN; /* a step with non-finite values */
        fill(wt, nw, 100 + (uint64_t)s, 0.05f);
        fill(gr, ng, 200 + (uint64_t)s, s == 15 ? 3e4f : 1e-3f); /* an outlier step */
        for (size_t i = 0; i < ng; i++)
            gb[i] = bf16_of(gr[i]);
        fill(b, nb, 300 + (uint64_t)s, 8.0f);
        bad += fp8_probe_record(act, s, x, 256, 512) != FP8_OK;
        memset(x, 0x7f, nx * 4); /* the caller's buffer reused at once */
        if (s == 13) { /* a question when only a noted amax waits (13: no record, snapshot or block amaxes) */
            float si;
            bad += fp8_probe_active_scale(act, scale13, &si) != FP8_OK;
        }
        bad += fp8_probe_record(w, s, wt, 96, 256) != FP8_OK;
        memset(wt, 0, nw * 4);
        bad += fp8_probe_record_bits(g, s, gb, FP8_DTYPE_BF16, 64, 100) != FP8_OK;
        memset(gb, 0xff, ng * 2);
        bad += fp8_probe_record(big, s, b, 600, 512) != FP8_OK;
        memset(b, 0, nb * 4);
        bad += fp8_probe_scalar(run, "loss", s, 3.0 - 0.1 * s) != FP8_OK;
        if (s == 12) { /* a question in the middle: the answer after everything before it */
            int64_t at = -1;
            fp8_stats st;
            bad += fp8_probe_last_stats(act, 1, &at, &st) != FP8_OK || at != 12;
        }
        bad += fp8_probe_step_end(run, s) != FP8_OK;
    }
    bad += fp8_probe_close(run) != FP8_OK;
    free(x), free(wt), free(gr), free(b), free(gb);
    return bad;
}

static void test_same_records(void)
{
    char a[512], b[512], c[512];
    snprintf(a, sizeof a, "%s", test_path("bg_off.h5"));
    snprintf(b, sizeof b, "%s", test_path("bg_on.h5"));
    snprintf(c, sizeof c, "%s", test_path("bg_tight.h5"));
    float sc[3] = {0, 0, 0};
    alarm(120); /* a wait that never ends (a note the thread is never woken for) kills the suite, loudly */
    CU_ASSERT_EQUAL(loop(a, 0, 256, &sc[0]), 0);
    CU_ASSERT_EQUAL(loop(b, 1, 256, &sc[1]), 0);
    CU_ASSERT_EQUAL(loop(c, 1, 1, &sc[2]), 0); /* 1 MB: records wait for room; "big" is recorded on the caller's thread */
    alarm(0);
    CU_ASSERT(sc[0] > 0 && sc[0] != 1.0f); /* (a delayed scale moved by the steps before) */
    CU_ASSERT_EQUAL(sc[1], sc[0]);
    CU_ASSERT_EQUAL(sc[2], sc[0]);
    static const char *ds[] = {"records", "exp_hist", "scale_hist", "steps", "scalars", "scalar_names", "tensors",
                               "recipes", "snapshot_data", "snapshot_index", "block_amax", "block_amax_index"};
    for (size_t i = 0; i < sizeof ds / sizeof ds[0]; i++)
        for (int k = 0; k < 2; k++) {
            int same = same_dataset(a, k ? c : b, ds[i]);
            if (!same)
                fprintf(stderr, "\n  background: /%s differs (%s)", ds[i], k ? "1 MB bound" : "256 MB bound");
            CU_ASSERT(same);
        }
    /* not two empty files: 8 recorded steps of 4 + 2 + 3 + 1 recipes */
    fp8_run *r = fp8_run_load(b);
    CU_ASSERT_EQUAL(r ? r->nrecords : 0, 8 * 10);
    fp8_run_free(r);
}

/* A cast that fails on the background thread (a per-block delayed history
 * of 65 blocks x 2^20 slots, over the limit): the record returns at once,
 * the step end returns the error, named */
static void test_error_comes_back(void)
{
    fp8_probe_options o = fp8_probe_defaults();
    o.background = 1;
    fp8_probe_run *run = fp8_probe_open(test_path("bg_err.h5"), &o, NULL, 0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(run);
    fp8_probe *p = fp8_probe_declare(run, "huge", FP8_ROLE_WEIGHT, 0, "e4m3:block=1x128:delayed,history=1048576",
                                     NULL, 0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    const size_t n = 65 * 128;
    float *x = calloc(n, sizeof *x);
    CU_ASSERT_EQUAL(fp8_probe_record(p, 0, x, 1, n), FP8_OK);
    int st = fp8_probe_step_end(run, 0);
    if (st == FP8_OK) /* (the thread may not have reached the record yet: the flush waits for it) */
        st = fp8_probe_flush(run);
    CU_ASSERT_NOT_EQUAL(st, FP8_OK);
    CU_ASSERT_PTR_NOT_NULL(strstr(fp8_error_message(), "background"));
    CU_ASSERT_PTR_NOT_NULL(strstr(fp8_error_message(), "shorter history"));
    CU_ASSERT_EQUAL(fp8_probe_flush(run), FP8_OK); /* told once */
    CU_ASSERT_EQUAL(fp8_probe_close(run), FP8_OK);
    free(x);
}

/* A child forked while the run's thread has work queued holds the queue
 * but not the thread, and maybe a lock the thread held: its calls on the
 * run are refused at once, named (before, the first that waited for the
 * thread or for such a lock waited forever); the parent's run is
 * untouched and closes with every record. */
static void test_forked_child(void)
{
    fp8_probe_options o = fp8_probe_defaults();
    o.background = 1, o.every = 2;
    fp8_probe_run *run = fp8_probe_open(test_path("bg_fork.h5"), &o, NULL, 0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(run);
    fp8_probe *p = fp8_probe_declare(run, "x", FP8_ROLE_ACTIVATION, 0, "hybrid:delayed", NULL, 0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    const size_t n = 64 * 1024;
    float *x = malloc(n * sizeof *x);
    fill(x, n, 9, 2.0f);
    for (int s = 0; s < 4; s++) {
        CU_ASSERT_EQUAL(fp8_probe_record(p, s, x, 64, 1024), FP8_OK);
        CU_ASSERT_EQUAL(fp8_probe_step_end(run, s), FP8_OK);
    }
    CU_ASSERT_EQUAL(fp8_probe_record(p, 4, x, 64, 1024), FP8_OK); /* a record queued or running at the fork */
    pid_t pid = fork();
    if (pid == 0) {
        alarm(20); /* a wait for the missing thread: killed, seen below */
        int ok = fp8_probe_record(p, 5, x, 64, 1024) == FP8_EINVAL && strstr(fp8_error_message(), "fork");
        float sc, si;
        ok &= fp8_probe_active_scale(p, &sc, &si) == FP8_EINVAL;
        ok &= fp8_probe_step_end(run, 5) == FP8_EINVAL && fp8_probe_flush(run) == FP8_EINVAL;
        ok &= fp8_probe_close(run) == FP8_EINVAL; /* (the file is the parent's) */
        _exit(ok ? 0 : 3);
    }
    CU_ASSERT_FATAL(pid > 0);
    int status = 0;
    CU_ASSERT_EQUAL(waitpid(pid, &status, 0), pid);
    CU_ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    CU_ASSERT_EQUAL(fp8_probe_step_end(run, 4), FP8_OK);
    CU_ASSERT_EQUAL(fp8_probe_record(p, 5, x, 64, 1024), FP8_OK);
    CU_ASSERT_EQUAL(fp8_probe_step_end(run, 5), FP8_OK);
    CU_ASSERT_EQUAL(fp8_probe_close(run), FP8_OK);
    fp8_run *r = fp8_run_load(test_path("bg_fork.h5"));
    CU_ASSERT_PTR_NOT_NULL_FATAL(r);
    CU_ASSERT_EQUAL(r->nrecords, 3); /* steps 0, 2, 4 */
    fp8_run_free(r);
    free(x);
}

static void test_bad_options(void)
{
    fp8_probe_options o = fp8_probe_defaults();
    CU_ASSERT_EQUAL(o.background, 0);
    CU_ASSERT_EQUAL(o.background_mb, 256);
    o.background = 2;
    CU_ASSERT_PTR_NULL(fp8_probe_open(test_path("bg_bad.h5"), &o, NULL, 0));
    CU_ASSERT_PTR_NOT_NULL(strstr(fp8_error_message(), "background 0 or 1"));
    o.background = 1, o.background_mb = 0;
    CU_ASSERT_PTR_NULL(fp8_probe_open(test_path("bg_bad.h5"), &o, NULL, 0));
    CU_ASSERT_PTR_NOT_NULL(strstr(fp8_error_message(), "background_mb"));
    fp8_probe_options k = fp8_probe_defaults();
    CU_ASSERT_EQUAL(fp8_probe_option_set(&k, "background", "1"), FP8_OK);
    CU_ASSERT_EQUAL(fp8_probe_option_set(&k, "background_mb", "64"), FP8_OK);
    CU_ASSERT_EQUAL(k.background, 1);
    CU_ASSERT_EQUAL(k.background_mb, 64);
}

void register_background_tests(void)
{
    static CU_TestInfo tests[] = {
        {"records made in the background equal the calling thread's, also under a tight bound", test_same_records},
        {"an error on the background thread comes back from the step end, named", test_error_comes_back},
        {"a forked child's calls on a background run are refused at once, named; the parent's run whole",
         test_forked_child},
        {"bad background options are refused by name", test_bad_options},
        CU_TEST_INFO_NULL,
    };
    add_suite("background", tests);
}
