/*
 * test_hostile.c — suite "hostile": run files are untrusted input.  A
 * valid run is written, then one field of one row is overwritten in a copy
 * (an index past its registry, a code width past 4 bytes, a shape whose
 * product wraps, data past the end of a dataset); every reader must refuse
 * the copy with one message naming the dataset and the row, and never read
 * or write out of bounds (the suite runs under ASan in make asan).  Also a
 * damaged file must fail fast instead of retrying for hours, and random
 * byte mutations must neither crash nor hang the loader.
 */
#include <hdf5.h>
#include <stdio.h>
#include <unistd.h>
#include <sys/wait.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "analysis.h"
#include "fp8_probe.h"
#include "fp8_store.h"
#include "tests.h"

#define GOOD "build/t_hostile.h5"

static void write_good(void)
{
    fp8_probe_options o = fp8_probe_defaults();
    o.snapshot_pattern = "*";
    o.snapshot_every = 2;
    o.snapshot_codes = 0;
    o.block_amax_every = 2;
    fp8_probe_run *run = fp8_probe_open(GOOD, &o, NULL, 0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(run);
    const char *sh[] = {"e4m3:current", "mxfp8"};
    fp8_probe *p = fp8_probe_declare(run, "a.input", FP8_ROLE_ACTIVATION, 0, "e4m3:delayed", sh, 2);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    float x[4 * 256];
    uint64_t seed = 3;
    for (int64_t s = 0; s < 6; s++) {
        for (int i = 0; i < 4 * 256; i++)
            x[i] = (float)((double)(test_rand(&seed) >> 11) / 9007199254740992.0 - 0.5);
        fp8_probe_record(p, s, x, 4, 256);
        fp8_probe_scalar(run, "loss", s, 1.0 / (double)(s + 1));
        CU_ASSERT_EQUAL(fp8_probe_step_end(run, s), FP8_OK);
    }
    CU_ASSERT_EQUAL(fp8_probe_close(run), FP8_OK);
    /* a second file with FP8-code snapshots */
    o.snapshot_codes = 1;
    run = fp8_probe_open("build/t_hostile_codes.h5", &o, NULL, 0);
    p = fp8_probe_declare(run, "a.input", FP8_ROLE_ACTIVATION, 0, "e4m3:block=1x128", NULL, 0);
    for (int64_t s = 0; s < 4; s++) {
        fp8_probe_record(p, s, x, 4, 256);
        CU_ASSERT_EQUAL(fp8_probe_step_end(run, s), FP8_OK);
    }
    CU_ASSERT_EQUAL(fp8_probe_close(run), FP8_OK);
}

static int copy_file(const char *from, const char *to)
{
    FILE *a = fopen(from, "rb"), *b = fopen(to, "wb");
    if (!a || !b) {
        if (a)
            fclose(a);
        if (b)
            fclose(b);
        return -1;
    }
    char buf[65536];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, a)) > 0)
        fwrite(buf, 1, n, b);
    fclose(a);
    return fclose(b);
}

/* Overwrite one member of row `row` of compound dataset `dset` in a copy of
 * `from` (mtype: the member's memory type, v its value). */
static void poke(const char *from, const char *to, const char *dset, hsize_t row, const char *member, hid_t mtype,
                 const void *v)
{
    CU_ASSERT_EQUAL_FATAL(copy_file(from, to), 0);
    hid_t f = H5Fopen(to, H5F_ACC_RDWR, H5P_DEFAULT);
    CU_ASSERT_FATAL(f >= 0);
    hid_t d = H5Dopen2(f, dset, H5P_DEFAULT);
    CU_ASSERT_FATAL(d >= 0);
    size_t sz = H5Tget_size(mtype);
    hid_t t = H5Tcreate(H5T_COMPOUND, sz);
    H5Tinsert(t, member, 0, mtype);
    hid_t fs = H5Dget_space(d);
    hsize_t cnt = 1;
    H5Sselect_hyperslab(fs, H5S_SELECT_SET, &row, NULL, &cnt, NULL);
    hid_t ms = H5Screate_simple(1, &cnt, NULL);
    CU_ASSERT(H5Dwrite(d, t, ms, fs, H5P_DEFAULT, v) >= 0);
    H5Sclose(ms), H5Sclose(fs), H5Tclose(t), H5Dclose(d), H5Fclose(f);
}

/* The copy must be refused with a message holding `want`, by the full
 * loader, the summary loader and the analyses alike. */
static void refused(const char *path, const char *want)
{
    fp8_run *r = fp8_run_load(path);
    CU_ASSERT_PTR_NULL(r);
    if (r)
        fp8_run_free(r);
    const char *m = fp8_error_message();
    if (!strstr(m, want))
        fprintf(stderr, "\n  want '%s' in '%s'\n", want, m);
    CU_ASSERT_PTR_NOT_NULL(strstr(m, want));
    r = fp8_run_load_summary(path, NULL);
    CU_ASSERT_PTR_NULL(r);
    if (r)
        fp8_run_free(r);
    an_ctx c;
    an_defaults(&c);
    c.quiet = 1;
    const char *p[1] = {path};
    FILE *keep = stderr;
    stderr = fopen("/dev/null", "w");
    int rc = an_open(&c, p, 1);
    fclose(stderr);
    stderr = keep;
    CU_ASSERT_EQUAL(rc, 1);
    an_close(&c);
}

static void test_indices(void)
{
    write_good();
    fp8_run *r = fp8_run_load(GOOD);
    CU_ASSERT_PTR_NOT_NULL_FATAL(r);
    CU_ASSERT(r->nsnapshots >= 3 && r->nblock_amax >= 3 && r->nsteps > 0);
    fp8_run_free(r);
    uint32_t big = 999;
    poke(GOOD, "build/t_h1.h5", "records", 3, "recipe", H5T_NATIVE_UINT32, &big);
    refused("build/t_h1.h5", "/records row 3 names recipe 999");
    poke(GOOD, "build/t_h2.h5", "records", 0, "tensor", H5T_NATIVE_UINT32, &big);
    refused("build/t_h2.h5", "/records row 0 names tensor 999");
    poke(GOOD, "build/t_h3.h5", "scalars", 2, "id", H5T_NATIVE_UINT32, &big);
    refused("build/t_h3.h5", "/scalars row 2 names scalar 999");
    poke(GOOD, "build/t_h4.h5", "steps", 1, "recipe", H5T_NATIVE_UINT32, &big);
    refused("build/t_h4.h5", "/steps row 1 names tensor 0 and recipe 999");
    poke(GOOD, "build/t_h5.h5", "block_amax_index", 1, "tensor", H5T_NATIVE_UINT32, &big);
    refused("build/t_h5.h5", "/block_amax_index row 1 is inconsistent");
    /* the message names the file (it was empty for /steps and /block_amax_index) */
    refused("build/t_h4.h5", "build/t_h4.h5: /steps row 1");
    refused("build/t_h5.h5", "build/t_h5.h5: /block_amax_index row 1");
}

/* Steps outside 0..2^62 and layers outside -1..2^20 are refused by every
 * reader (the analyses subtract steps and index by layer: UBSan aborted,
 * the plain build skipped every row) */
static void test_steps_and_layers(void)
{
    int64_t huge = INT64_MAX, neg = -7;
    int32_t layer = 2147483647;
    poke(GOOD, "build/t_h12.h5", "records", 2, "step", H5T_NATIVE_INT64, &huge);
    refused("build/t_h12.h5", "build/t_h12.h5: /records row 2: step 9223372036854775807 is outside 0..2^62");
    poke(GOOD, "build/t_h13.h5", "steps", 4, "step", H5T_NATIVE_INT64, &neg);
    refused("build/t_h13.h5", "/steps row 4: step -7 is outside 0..2^62");
    poke(GOOD, "build/t_h14.h5", "scalars", 1, "step", H5T_NATIVE_INT64, &huge);
    refused("build/t_h14.h5", "/scalars row 1: step 9223372036854775807 is outside");
    poke(GOOD, "build/t_h15.h5", "tensors", 0, "layer", H5T_NATIVE_INT32, &layer);
    refused("build/t_h15.h5", "/tensors row 0: layer 2147483647 is outside -1..2^20");
    poke(GOOD, "build/t_h16.h5", "block_amax_index", 0, "step", H5T_NATIVE_INT64, &huge);
    refused("build/t_h16.h5", "/block_amax_index row 0 is inconsistent");
    poke(GOOD, "build/t_h17.h5", "snapshot_index", 0, "step", H5T_NATIVE_INT64, &neg);
    refused("build/t_h17.h5", "/snapshot_index row 0: step outside 0..2^62");
}

static void test_sizes(void)
{
    /* cols = 2^63 + 8: rows * cols wraps to a small number */
    uint64_t huge = (UINT64_C(1) << 63) + 8, past = UINT64_C(1) << 40;
    poke(GOOD, "build/t_h6.h5", "snapshot_index", 0, "cols", H5T_NATIVE_UINT64, &huge);
    refused("build/t_h6.h5", "/snapshot_index row 0: shape empty or too large");
    poke(GOOD, "build/t_h7.h5", "snapshot_index", 1, "offset", H5T_NATIVE_UINT64, &past);
    refused("build/t_h7.h5", "/snapshot_index row 1: float32 values past the end of /snapshot_data");
    poke(GOOD, "build/t_h8.h5", "block_amax_index", 0, "offset", H5T_NATIVE_UINT64, &past);
    refused("build/t_h8.h5", "/block_amax_index row 0 is inconsistent");
    /* a code width past the 4-byte variable the decoder reads into */
    int32_t cb = 64, bad_recipe = 77;
    poke("build/t_hostile_codes.h5", "build/t_h9.h5", "snapshot_index", 0, "code_bytes", H5T_NATIVE_INT32, &cb);
    refused("build/t_h9.h5", "/snapshot_index row 0: code_bytes is not its format's code width");
    poke("build/t_hostile_codes.h5", "build/t_h10.h5", "snapshot_index", 1, "recipe", H5T_NATIVE_INT32, &bad_recipe);
    refused("build/t_h10.h5", "/snapshot_index row 1: recipe index past /recipes");
    uint64_t ns = 3;
    poke("build/t_hostile_codes.h5", "build/t_h11.h5", "snapshot_index", 0, "nscales", H5T_NATIVE_UINT64, &ns);
    refused("build/t_h11.h5", "/snapshot_index row 0: nscales is not its recipe's number of groups");
    /* the untouched codes file reads and decodes */
    fp8_run *r = fp8_run_load("build/t_hostile_codes.h5");
    CU_ASSERT_PTR_NOT_NULL_FATAL(r);
    float v[4 * 256];
    CU_ASSERT_EQUAL(fp8_run_snapshot_read(r, 0, v), FP8_OK);
    fp8_run_free(r);
}

/* One flipped metadata byte used to make SWMR readers retry for hours. */
/* Forty damaged copies of a good run (1-16 random bytes each, in the
 * metadata-heavy start or anywhere): each load fails (or succeeds) in well
 * under a second, with a message, and leaves no HDF5 identifier open.  In a
 * child process: HDF5 1.10 keeps internal state (allocations, a file it
 * could not close) after some damaged files, which would otherwise show up
 * as leaks of this test process. */
typedef struct {
    double worst;
    int loaded, silent, open_ids;
} damaged_result;

static void damaged_child(int fd)
{
    damaged_result res = {0, 0, 0, 0};
    FILE *f = fopen(GOOD, "rb");
    if (!f)
        _exit(3);
    static unsigned char buf[1 << 22], m[1 << 22];
    size_t n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    uint64_t seed = 99;
    for (int k = 0; k < 40; k++) {
        memcpy(m, buf, n);
        int nb = 1 + (int)(test_rand(&seed) % 16);
        for (int j = 0; j < nb; j++) {
            size_t pos = (size_t)(test_rand(&seed) % (k % 2 ? n : (n < 8192 ? n : 8192)));
            m[pos] = (unsigned char)test_rand(&seed);
        }
        FILE *g = fopen("build/t_hmut.h5", "wb");
        if (!g)
            _exit(4);
        fwrite(m, 1, n, g);
        fclose(g);
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        fp8_run *r = fp8_run_load("build/t_hmut.h5");
        clock_gettime(CLOCK_MONOTONIC, &t1);
        double dt = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
        res.worst = dt > res.worst ? dt : res.worst;
        if (r) {
            res.loaded++;
            float *v = r->nsnapshots ? malloc(r->snapshots[0].rows * r->snapshots[0].cols * sizeof *v) : NULL;
            if (v)
                fp8_run_snapshot_read(r, 0, v);
            free(v);
            fp8_run_free(r);
        } else if (strlen(fp8_error_message()) == 0) {
            res.silent++;
        }
        /* objects still open in any file (H5Inmembers refuses the library's
         * own types in HDF5 1.10, so it counted nothing) */
        ssize_t open_now = H5Fget_obj_count(H5F_OBJ_ALL, H5F_OBJ_ALL);
        if (open_now > 0)
            res.open_ids += (int)open_now;
    }
    if (write(fd, &res, sizeof res) != (ssize_t)sizeof res)
        _exit(5);
    _exit(0); /* no exit handlers: HDF5's state dies with the child */
}

static void test_damaged_fast(void)
{
#if defined(__SANITIZE_THREAD__)
    /* (ThreadSanitizer cannot follow a forked child that starts threads, as
     * the run reader does in this one (chunkread.c reads chunks on a second
     * thread): the test runs under make test and make asan) */
    return;
#endif
    int fd[2];
    pid_t pid = fork_piped(fd);
    CU_ASSERT_FATAL(pid >= 0);
    if (pid == 0)
        damaged_child(fd[1]);
    damaged_result res;
    ssize_t got = read(fd[0], &res, sizeof res);
    close(fd[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    CU_ASSERT_FATAL(got == (ssize_t)sizeof res);
    CU_ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    CU_ASSERT(res.worst < 1.0); /* seconds, per load */
    CU_ASSERT(res.loaded < 40);
    CU_ASSERT_EQUAL(res.silent, 0);   /* every refusal has a message */
    CU_ASSERT_EQUAL(res.open_ids, 0); /* and leaves nothing open */
}

void register_hostile_tests(void)
{
    static CU_TestInfo tests[] = {
        {"indices past their registries are refused, naming dataset and row", test_indices},
        {"sizes that wrap or run past a dataset are refused", test_sizes},
        {"damaged files fail in well under a second, never crash", test_damaged_fast},
        {"steps outside 0..2^62, layers outside -1..2^20 are refused", test_steps_and_layers},
        CU_TEST_INFO_NULL,
    };
    add_suite("hostile", tests);
}
