/*
 * test_store.c — suite "store": run files written and read back field by
 * field; tensors registered lazily; reading while the writer runs (SWMR);
 * a writer killed with SIGKILL leaves every flushed record; bad files get
 * clear errors.
 */
#include <hdf5.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fp8.h"
#include "fp8_store.h"
#include "chunkread.h"
#include "bigmem.h"
#include "chunkwrite.h"
#include "datasets.h" /* fp8__store_set_threads */
#include "tests.h"

/* deterministic, distinct statistics for record k */
static void fake_stats(fp8_stats *s, uint64_t k)
{
    memset(s, 0, sizeof *s);
    uint64_t r = k * 2654435761u + 7;
    s->numel = 1000 + k;
    s->finite = 990 + k;
    s->nan_count = k % 3;
    s->amax = 2.385 * (double)(k + 1);
    s->mean = -0.125 * (double)k;
    s->std = 1.0 / (double)(k + 1);
    s->kurtosis = 3.0 + (double)(r % 1000) / 1000.0;
    s->sqnr_db = k % 5 == 0 ? INFINITY : 30.0 + (double)k;
    s->overflows = r % 17;
    s->underflows = r % 13;
    s->subnormals = r % 11;
    s->cosine = 0.999;
    s->scale_inv_max = 1.0 / 448.0;
    s->max_block_dynamic_range = 12.5;
    for (int c = 0; c < FP8_NCLASS; c++)
        s->classes.n[c] = k * 10 + (uint64_t)c;
    for (int b = 0; b < FP8_EXP_BINS; b++)
        s->exp_hist[b] = (uint64_t)b * k;
    for (int b = 0; b < FP8_SCALE_BINS; b++)
        s->scale_hist[b] = (uint64_t)(b % 7) + k;
    s->format = fp8_format_find(k % 2 ? "e4m3" : "e5m2", NULL);
}

static void test_round_trip(void)
{
    const char *kv[] = {"model", "llama-tiny", "seed", "42"};
    fp8_store *s = fp8_store_create("build/t_run.h5", kv, 2);
    CU_ASSERT_PTR_NOT_NULL_FATAL(s);
    int r0 = fp8_store_recipe(s, "e4m3:delayed:history=1024,algo=max,margin=0");
    int r1 = fp8_store_recipe(s, "e4m3:block=1x128:eps=0.0001,fp32");
    int loss = fp8_store_scalar_name(s, "loss");
    CU_ASSERT(r0 == 0 && r1 == 1 && loss == 0);
    CU_ASSERT_EQUAL(fp8_store_recipe(s, "e4m3:delayed:history=1024,algo=max,margin=0"), 0); /* same id */
    uint64_t k = 0;
    int ta = fp8_store_tensor(s, "layers.0.mlp.w1.input", FP8_ROLE_ACTIVATION, 0);
    for (int step = 0; step < 100; step++) {
        fp8_stats st;
        fake_stats(&st, k++);
        CU_ASSERT_EQUAL(fp8_store_add_record(s, ta, r0, step, 1, 4, 256, &st), FP8_OK);
        fake_stats(&st, k++);
        CU_ASSERT_EQUAL(fp8_store_add_record(s, ta, r1, step, 0, 4, 256, &st), FP8_OK);
        if (step >= 50) { /* a tensor discovered late */
            int tb = fp8_store_tensor(s, "layers.0.mlp.w2.grad_output", FP8_ROLE_GRADIENT, 0);
            CU_ASSERT_EQUAL(tb, 1);
            fake_stats(&st, k++);
            CU_ASSERT_EQUAL(fp8_store_add_record(s, tb, r0, step, 1, 8, 128, &st), FP8_OK);
        }
        CU_ASSERT_EQUAL(fp8_store_add_scalar(s, loss, step, 5.0 - 0.01 * step), FP8_OK);
        if (step % 10 == 9)
            CU_ASSERT_EQUAL(fp8_store_flush(s), FP8_OK);
    }
    CU_ASSERT_EQUAL(fp8_store_add_record(s, 7, r0, 0, 1, 1, 1, &(fp8_stats){0}), FP8_EINVAL);
    CU_ASSERT_EQUAL(fp8_store_close(s), FP8_OK);

    fp8_run *run = fp8_run_load("build/t_run.h5");
    CU_ASSERT_PTR_NOT_NULL_FATAL(run);
    CU_ASSERT_EQUAL(run->schema, FP8_STORE_SCHEMA);
    CU_ASSERT_EQUAL(run->nmeta, 2);
    CU_ASSERT_EQUAL(run->ntensors, 2);
    CU_ASSERT_STRING_EQUAL(run->tensor_name[1], "layers.0.mlp.w2.grad_output");
    CU_ASSERT_EQUAL(run->tensor_role[1], FP8_ROLE_GRADIENT);
    CU_ASSERT_EQUAL(run->nrecipes, 2);
    CU_ASSERT_STRING_EQUAL(run->recipe_spec[1], "e4m3:block=1x128:eps=0.0001,fp32");
    CU_ASSERT_EQUAL(run->nrecords, 250);
    CU_ASSERT_EQUAL(run->nscalars, 100);
    CU_ASSERT_EQUAL(run->scalar_value[99], 5.0 - 0.99);
    int found = 0;
    for (int i = 0; i < run->nmeta; i++)
        if (strcmp(run->meta_key[i], "model") == 0 && strcmp(run->meta_value[i], "llama-tiny") == 0)
            found = 1;
    CU_ASSERT(found);
    /* every field of every record equals what was written */
    for (size_t i = 0; i < run->nrecords; i++) {
        fp8_stats want;
        fake_stats(&want, i);
        const fp8_stats *got = &run->records[i].stats;
        CU_ASSERT_EQUAL(got->numel, want.numel);
        CU_ASSERT_EQUAL(got->nan_count, want.nan_count);
        CU_ASSERT_EQUAL(got->amax, want.amax);
        CU_ASSERT_EQUAL(got->mean, want.mean);
        CU_ASSERT_EQUAL(got->std, want.std);
        CU_ASSERT_EQUAL(got->kurtosis, want.kurtosis);
        CU_ASSERT_EQUAL(got->sqnr_db, want.sqnr_db);
        CU_ASSERT_EQUAL(got->overflows, want.overflows);
        CU_ASSERT_EQUAL(got->underflows, want.underflows);
        CU_ASSERT_EQUAL(got->subnormals, want.subnormals);
        CU_ASSERT_EQUAL(got->max_block_dynamic_range, want.max_block_dynamic_range);
        CU_ASSERT_EQUAL(memcmp(got->classes.n, want.classes.n, sizeof want.classes.n), 0);
        CU_ASSERT_EQUAL(memcmp(got->exp_hist, want.exp_hist, sizeof want.exp_hist), 0);
        CU_ASSERT_EQUAL(memcmp(got->scale_hist, want.scale_hist, sizeof want.scale_hist), 0);
        CU_ASSERT_PTR_EQUAL(got->format, want.format);
    }
    CU_ASSERT_EQUAL(run->records[249].tensor, 1);
    /* a selection: the late tensor, steps 60..69 */
    fp8_run *sel = fp8_run_load_filtered("build/t_run.h5", "*.w2.*", 60, 69);
    CU_ASSERT_PTR_NOT_NULL_FATAL(sel);
    CU_ASSERT_EQUAL(sel->nrecords, 10);
    for (size_t i = 0; i < sel->nrecords; i++)
        CU_ASSERT(sel->records[i].tensor == 1 && sel->records[i].step >= 60 && sel->records[i].step <= 69);
    CU_ASSERT_EQUAL(sel->ntensors, 2);
    fp8_run_free(sel);
    CU_ASSERT_EQUAL(run->records[249].step, 99);
    CU_ASSERT_EQUAL(run->records[1].active, 0);
    CU_ASSERT_EQUAL(run->records[1].cols, 256);
    fp8_run_free(run);
}

static void expect_load_error(const char *path, const char *words)
{
    fp8_run *r = fp8_run_load(path);
    CU_ASSERT_PTR_NULL(r);
    if (!strstr(fp8_error_message(), words))
        fprintf(stderr, "\n  %s: '%s' lacks '%s'\n", path, fp8_error_message(), words);
    CU_ASSERT_PTR_NOT_NULL(strstr(fp8_error_message(), words));
    fp8_run_free(r);
}

static void test_bad_files(void)
{
    FILE *f = fopen("build/t_text.h5", "w");
    fputs("this is not HDF5\n", f);
    fclose(f);
    expect_load_error("build/t_text.h5", "not an HDF5 file");
    expect_load_error("build/t_missing.h5", "cannot open");
    /* someone else's HDF5 */
    hid_t h = H5Fcreate("build/t_other.h5", H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    H5Gclose(H5Gcreate2(h, "weights", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
    H5Fclose(h);
    expect_load_error("build/t_other.h5", "not an fp8prof run");
    /* a newer schema */
    fp8_store *s = fp8_store_create("build/t_new.h5", NULL, 0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(s);
    CU_ASSERT_EQUAL(fp8_store_close(s), FP8_OK);
    h = H5Fopen("build/t_new.h5", H5F_ACC_RDWR, H5P_DEFAULT);
    H5Adelete(h, "fp8prof_schema");
    hid_t t = H5Tcopy(H5T_C_S1);
    H5Tset_size(t, 3);
    hid_t sp = H5Screate(H5S_SCALAR);
    hid_t a = H5Acreate2(h, "fp8prof_schema", t, sp, H5P_DEFAULT, H5P_DEFAULT);
    H5Awrite(a, t, "99");
    H5Aclose(a), H5Sclose(sp), H5Tclose(t), H5Fclose(h);
    expect_load_error("build/t_new.h5", "schema version 99");
    /* truncated: the first 4 KB of a good file (the superblock, not the data) */
    f = fopen("build/t_run.h5", "rb");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    rewind(f);
    char *b = malloc((size_t)n);
    CU_ASSERT_EQUAL(fread(b, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    f = fopen("build/t_trunc.h5", "wb");
    fwrite(b, 1, 4096, f);
    fclose(f);
    free(b);
    fp8_run *r = fp8_run_load("build/t_trunc.h5");
    CU_ASSERT_PTR_NULL(r); /* a clear error, not a crash */
    fp8_run_free(r);
}

/* The writer the kill tests kill (in a forked child): records of 37
 * lazily discovered tensors, a flush every 7 records, each flush's total
 * written to fd once it completed.  Never returns: runs until killed. */
static void kill_writer(const char *path, int fd)
{
    fp8_store *s = fp8_store_create(path, NULL, 0);
    if (!s)
        _exit(3);
    int rc = fp8_store_recipe(s, "e4m3:current:eps=0");
    uint64_t total = 0;
    for (int step = 0;; step++) {
        char name[64];
        snprintf(name, sizeof name, "layers.%d.x", step % 37);
        int tn = fp8_store_tensor(s, name, FP8_ROLE_ACTIVATION, step % 37);
        fp8_stats st;
        fake_stats(&st, total);
        fp8_store_add_record(s, tn, rc, step, 1, 1, 1, &st);
        total++;
        if (step % 7 == 6 && (fp8_store_flush(s) != FP8_OK || write(fd, &total, sizeof total) != sizeof total))
            _exit(4);
    }
}

/* After the killed writer of kill_writer: the last total it reported (read
 * from fd, then closed), and 1 when path does not hold every one of those
 * records with its values (said on stderr with label and trial), else 0. */
static int flushed_lost(const char *path, int fd, const char *label, long trial)
{
    uint64_t flushed = 0, v;
    while (read(fd, &v, sizeof v) == sizeof v)
        flushed = v;
    close(fd);
    fp8_run *r = fp8_run_load(path);
    int lost = 0;
    if (flushed && (!r || r->nrecords < flushed)) { /* (killed before its first flush: nothing was promised) */
        fprintf(stderr, "\n  %s %ld: %llu records flushed, %s\n", label, trial, (unsigned long long)flushed,
                r ? "fewer loaded" : fp8_error_message());
        lost = 1;
    }
    for (size_t i = 0; r && !lost && i < r->nrecords; i++) {
        fp8_stats want;
        fake_stats(&want, i);
        lost = r->records[i].stats.amax != want.amax || r->records[i].tensor >= (uint32_t)r->ntensors;
    }
    fp8_run_free(r);
    return lost;
}

/* A child writes records and reports each flush over a pipe; the parent
 * kills it with SIGKILL at a random moment and loads the file: every record
 * up to the last reported flush must be there. */
static void test_sigkill(void)
{
    uint64_t seed = 99;
    int lost_trials = 0;
    for (int t = 0; t < 20; t++) {
        int fd[2];
        pid_t pid = fork_piped(fd);
        CU_ASSERT_FATAL(pid >= 0);
        if (pid == 0)
            kill_writer("build/t_kill.h5", fd[1]);
        usleep((useconds_t)(20000 + test_rand(&seed) % 200000));
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
        lost_trials += flushed_lost("build/t_kill.h5", fd[0], "trial", t);
    }
    CU_ASSERT_EQUAL(lost_trials, 0);
}

/* The writer of test_sigkill, killed in each trial right after a write
 * torn at a page boundary (as a SIGKILL can leave a write that spans
 * pages): its 1st, 2nd, ... 300th write.  Every record flushed before must
 * load.  (With HDF5's default file space a torn chunk-index block made the
 * whole file's records unreadable at 15 of the first 800 write points;
 * paged file space keeps each small metadata block inside one page.) */
static void test_torn_writes(void)
{
    int lost = 0, killed = 0;
    for (long n = 1; n <= 300; n++) {
        int fd[2];
        pid_t pid = fork_piped(fd);
        CU_ASSERT_FATAL(pid >= 0);
        if (pid == 0) {
            test_tear_at(n);
            kill_writer("build/t_torn.h5", fd[1]);
        }
        int status;
        waitpid(pid, &status, 0);
        killed += WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL;
        lost += flushed_lost("build/t_torn.h5", fd[0], "torn write", n);
    }
    CU_ASSERT_EQUAL(killed, 300); /* (every trial reached its torn write) */
    CU_ASSERT_EQUAL(lost, 0);
}

/* A damaged stretch of /records (here: chunk k's stored bytes overwritten,
 * as a torn write of a long run's chunk index leaves the chunks it names
 * unreadable): the records before it load, the rest are counted as
 * unreadable; a file whose first chunk is damaged is refused. */
static void damage_chunk_of(const char *path, const char *dataset, hsize_t row)
{
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT), d = H5Dopen2(f, dataset, H5P_DEFAULT);
    hsize_t off[1] = {row};
    unsigned mask;
    haddr_t addr = 0;
    hsize_t size = 0;
    CU_ASSERT_FATAL(H5Dget_chunk_info_by_coord(d, off, &mask, &addr, &size) >= 0 && size > 16);
    H5Dclose(d), H5Fclose(f);
    FILE *fp = fopen(path, "r+b");
    CU_ASSERT_FATAL(fp != NULL);
    fseek(fp, (long)(addr + size / 2), SEEK_SET);
    for (int b = 0; b < 8; b++)
        fputc(0x5A, fp);
    fclose(fp);
}

static void damage_chunk(const char *path, hsize_t row) { damage_chunk_of(path, "records", row); }

static void test_damaged_records(void)
{
    const size_t n = 3000, chunk = 64; /* /records chunks of 64 rows (datasets.c) */
    for (int pass = 0; pass < 3; pass++) {
        fp8_store *s = fp8_store_create("build/t_dmg.h5", NULL, 0);
        CU_ASSERT_PTR_NOT_NULL_FATAL(s);
        int rc = fp8_store_recipe(s, "e4m3:current:eps=0"), tn = fp8_store_tensor(s, "x", FP8_ROLE_ACTIVATION, 0);
        for (size_t k = 0; k < n; k++) {
            fp8_stats st;
            fake_stats(&st, k);
            CU_ASSERT_EQUAL(fp8_store_add_record(s, tn, rc, (int64_t)k, 1, 1, 1, &st), FP8_OK);
        }
        CU_ASSERT_EQUAL(fp8_store_close(s), FP8_OK);
        /* the 40th chunk (rows 2496..2559: in the first slab read's second half
         * and not at its start), the 2nd, and the first */
        size_t bad = pass == 0 ? 39 * chunk : pass == 1 ? chunk : 0;
        damage_chunk("build/t_dmg.h5", bad);
        fp8_run *r = fp8_run_load("build/t_dmg.h5");
        if (pass == 2) {
            CU_ASSERT_PTR_NULL(r);
            EXPECT_ERROR(FP8_EIO, "cannot read records");
            fp8_run_free(r);
            continue;
        }
        CU_ASSERT_PTR_NOT_NULL_FATAL(r);
        CU_ASSERT_EQUAL(r->nrecords, bad);
        CU_ASSERT_EQUAL(r->unreadable_records, n - bad);
        int same = 1;
        for (size_t i = 0; i < r->nrecords; i++) {
            fp8_stats want;
            fake_stats(&want, i);
            same &= r->records[i].stats.amax == want.amax && r->records[i].step == (int64_t)i &&
                    r->records[i].stats.scale_hist[3] == want.scale_hist[3];
        }
        CU_ASSERT(same);
        fp8_run_free(r);
        fp8_run *q = fp8_run_load_summary("build/t_dmg.h5", NULL); /* the lean reader (4x larger slabs) */
        CU_ASSERT_PTR_NOT_NULL_FATAL(q);
        CU_ASSERT_EQUAL(q->nrecords, bad);
        CU_ASSERT_EQUAL(q->unreadable_records, n - bad);
        fp8_run_free(q);
    }
}

/* A damaged stretch of the every-step series and of an index: /steps
 * (chunks of 1024 rows) damaged in its 3rd chunk, /scalars (chunks of 256)
 * in its 2nd, /block_amax_index (256) in its 1st.  The rows before each
 * damage load with their values, the rest are counted (2,952 + 2,744 +
 * 300 = 5,996 rows), and the records load whole (a damaged /steps refused
 * the whole file before). */
static void test_damaged_series(void)
{
    const size_t nsteps = 5000, nscal = 3000, nbam = 300, nrec = 100;
    fp8_store *s = fp8_store_create("build/t_dmgs.h5", NULL, 0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(s);
    int rc = fp8_store_recipe(s, "e4m3:current:eps=0"), tn = fp8_store_tensor(s, "x", FP8_ROLE_ACTIVATION, 0);
    int sn = fp8_store_scalar_name(s, "loss");
    for (size_t k = 0; k < nsteps; k++)
        CU_ASSERT_EQUAL(fp8_store_add_step(s, tn, rc, (int64_t)k, 1, (float)k + 0.5f, 2.0f, 0), FP8_OK);
    for (size_t k = 0; k < nscal; k++)
        CU_ASSERT_EQUAL(fp8_store_add_scalar(s, sn, (int64_t)k, 1.0 / ((double)k + 1)), FP8_OK);
    const float bam[4] = {1, 2, 3, 4};
    for (size_t k = 0; k < nbam; k++)
        CU_ASSERT_EQUAL(fp8_store_add_block_amax(s, tn, (int64_t)k, 2, 256, 128, bam), FP8_OK);
    for (size_t k = 0; k < nrec; k++) {
        fp8_stats st;
        fake_stats(&st, k);
        CU_ASSERT_EQUAL(fp8_store_add_record(s, tn, rc, (int64_t)k, 1, 1, 1, &st), FP8_OK);
    }
    CU_ASSERT_EQUAL(fp8_store_close(s), FP8_OK);
    damage_chunk_of("build/t_dmgs.h5", "steps", 2048);
    damage_chunk_of("build/t_dmgs.h5", "scalars", 256);
    damage_chunk_of("build/t_dmgs.h5", "block_amax_index", 0);
    fp8_run *r = fp8_run_load("build/t_dmgs.h5");
    CU_ASSERT_PTR_NOT_NULL_FATAL(r);
    CU_ASSERT_EQUAL(r->nrecords, nrec);
    CU_ASSERT_EQUAL(r->unreadable_records, 0);
    CU_ASSERT_EQUAL(r->nsteps, 2048);
    CU_ASSERT_EQUAL(r->nscalars, 256);
    CU_ASSERT_EQUAL(r->nblock_amax, 0);
    CU_ASSERT_EQUAL(r->unreadable_rows, (nsteps - 2048) + (nscal - 256) + nbam);
    int same = 1;
    for (size_t i = 0; i < r->nsteps; i++)
        same &= r->steps[i].step == (int64_t)i && r->steps[i].amax == (float)i + 0.5f;
    for (size_t i = 0; i < r->nscalars; i++)
        same &= r->scalar_step[i] == (int64_t)i && r->scalar_value[i] == 1.0 / ((double)i + 1);
    CU_ASSERT(same);
    fp8_run_free(r);
}

/* A reader follows a writer in another process (SWMR): every load while it
 * writes succeeds and sees at least as many records as the previous one. */
static void test_live_read(void)
{
    int fd[2];
    pid_t pid = fork_piped(fd);
    CU_ASSERT_FATAL(pid >= 0);
    if (pid == 0) {
        fp8_store *s = fp8_store_create("build/t_live.h5", NULL, 0);
        if (!s)
            _exit(3);
        int rc = fp8_store_recipe(s, "e4m3:current:eps=0");
        int tn = fp8_store_tensor(s, "x", FP8_ROLE_ACTIVATION, 0);
        char go = 1;
        if (write(fd[1], &go, 1) != 1) /* the file exists: the reader may start */
            _exit(4);
        for (int step = 0; step < 3000; step++) {
            fp8_stats st;
            fake_stats(&st, (uint64_t)step);
            fp8_store_add_record(s, tn, rc, step, 1, 1, 1, &st);
            if (step % 50 == 49 && fp8_store_flush(s) != FP8_OK)
                _exit(5);
            if (step % 50 == 49)
                usleep(2000);
        }
        CU_ASSERT_EQUAL(fp8_store_close(s), FP8_OK);
        _exit(0);
    }
    char go;
    CU_ASSERT_EQUAL(read(fd[0], &go, 1), 1);
    close(fd[0]);
    size_t last = 0;
    int loads = 0, failures = 0, decreases = 0;
    for (int k = 0; k < 40; k++) {
        fp8_run *r = fp8_run_load("build/t_live.h5");
        if (!r) {
            failures++;
            fprintf(stderr, "\n  live read %d: %s\n", k, fp8_error_message());
        } else {
            loads++;
            if (r->nrecords < last)
                decreases++;
            last = r->nrecords;
            for (size_t i = 0; i < r->nrecords; i++) {
                fp8_stats want;
                fake_stats(&want, i);
                if (r->records[i].stats.amax != want.amax) {
                    failures++;
                    break;
                }
            }
            fp8_run_free(r);
        }
        usleep(5000);
    }
    int status;
    waitpid(pid, &status, 0);
    CU_ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    CU_ASSERT_EQUAL(failures, 0);
    CU_ASSERT_EQUAL(decreases, 0);
    CU_ASSERT(loads == 40);
    fp8_run *r = fp8_run_load("build/t_live.h5");
    CU_ASSERT_PTR_NOT_NULL_FATAL(r);
    CU_ASSERT_EQUAL(r->nrecords, 3000);
    fp8_run_free(r);
}

/* The two-thread chunk reader gives the bytes H5Dread gives. */
static void test_parallel_chunks(void)
{
    /* 2 tensors x 700 steps x 3 recipes, statistics of varied bits */
    fp8_store *st = fp8_store_create("build/t_chunks.h5", NULL, 0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(st);
    int t0 = fp8_store_tensor(st, "a", FP8_ROLE_ACTIVATION, 0), t1 = fp8_store_tensor(st, "b", FP8_ROLE_GRADIENT, 1);
    int r[3] = {fp8_store_recipe(st, "e4m3:current"), fp8_store_recipe(st, "mxfp8"), fp8_store_recipe(st, "e5m2:current")};
    fp8_stats x;
    uint64_t seed = 77;
    for (int step = 0; step < 700; step++)
        for (int t = 0; t < 2; t++) {
            memset(&x, 0, sizeof x);
            for (int k = 0; k < FP8_EXP_BINS; k++)
                x.exp_hist[k] = test_rand(&seed) % 5 == 0 ? test_rand(&seed) % 100000 : 0;
            x.amax = (double)(test_rand(&seed) >> 11) * 0x1p-40;
            x.numel = test_rand(&seed) % 1000;
            for (int q = 0; q < 3; q++) {
                x.sqnr_db = 20 + (double)(test_rand(&seed) % 1000) / 100;
                x.scale_hist[test_rand(&seed) % FP8_SCALE_BINS] = 1 + (uint64_t)q;
                CU_ASSERT_EQUAL(fp8_store_add_record(st, t ? t1 : t0, r[q], step, q == 0, 4, 8, &x), FP8_OK);
            }
            if (step % 50 == 0)
                fp8_store_flush(st);
        }
    CU_ASSERT_EQUAL(fp8_store_close(st), FP8_OK);
    hid_t f = H5Fopen("build/t_chunks.h5", H5F_ACC_RDONLY, H5P_DEFAULT);
    CU_ASSERT_FATAL(f >= 0);
    const char *names[3] = {"records", "exp_hist", "scale_hist"};
    for (int k = 0; k < 3; k++) {
        hid_t d = H5Dopen2(f, names[k], H5P_DEFAULT), ft = H5Dget_type(d), sp = H5Dget_space(d);
        hsize_t dims[2] = {0, 0};
        int rank = H5Sget_simple_extent_ndims(sp);
        H5Sget_simple_extent_dims(sp, dims, NULL);
        CU_ASSERT_EQUAL_FATAL(dims[0], k == 1 ? 1400 : 4200); /* one exponent histogram per tensor and step */
        size_t row = H5Tget_size(ft) * (rank == 2 ? (size_t)dims[1] : 1);
        hsize_t start[2] = {7, 0}, cnt[2] = {dims[0] - 20, dims[1]};
        unsigned char *a = calloc((size_t)cnt[0], row), *b = calloc((size_t)cnt[0], row);
        CU_ASSERT_EQUAL(fp8__read_rows_parallel(d, ft, start[0], cnt[0], rank == 2 ? dims[1] : 0, a), 0);
        hid_t ms = H5Screate_simple(rank, cnt, NULL);
        H5Sselect_hyperslab(sp, H5S_SELECT_SET, start, NULL, cnt, NULL);
        CU_ASSERT(H5Dread(d, ft, ms, sp, H5P_DEFAULT, b) >= 0);
        CU_ASSERT(memcmp(a, b, (size_t)cnt[0] * row) == 0);
        /* a memory type unlike the file's: it declines (the caller falls back) */
        CU_ASSERT_EQUAL(fp8__read_rows_parallel(d, H5T_NATIVE_CHAR, 0, 1, 0, a), -1);
        free(a), free(b);
        H5Sclose(ms), H5Sclose(sp), H5Tclose(ft), H5Dclose(d);
    }
    H5Fclose(f);
}

/* Every chunk of dataset `name` in file a holds the bytes HDF5's own filter
 * pipeline writes for the same rows: the rows read back, written through
 * H5Dwrite into a dataset of the same creation properties in file ref, and
 * the two files' chunks compared byte for byte (the last one partly filled);
 * expect: the rows the writer was given, when the test knows them. */
static void same_chunks_as_hdf5(hid_t a, hid_t ref, const char *name, const void *expect)
{
    hid_t d = H5Dopen2(a, name, H5P_DEFAULT), ft = H5Dget_type(d), sp = H5Dget_space(d), dcpl = H5Dget_create_plist(d);
    CU_ASSERT_FATAL(d >= 0 && dcpl >= 0);
    hsize_t dims[2] = {0, 0}, chunk[2] = {0, 0};
    int rank = H5Sget_simple_extent_ndims(sp);
    H5Sget_simple_extent_dims(sp, dims, NULL);
    H5Pget_chunk(dcpl, 2, chunk);
    CU_ASSERT_FATAL(dims[0] > chunk[0]); /* several chunks, the last one partly filled */
    size_t row = H5Tget_size(ft) * (rank == 2 ? (size_t)dims[1] : 1);
    unsigned char *all = malloc((size_t)dims[0] * row);
    CU_ASSERT_FATAL(all != NULL);
    CU_ASSERT_FATAL(H5Dread(d, ft, H5S_ALL, H5S_ALL, H5P_DEFAULT, all) >= 0);
    if (expect) /* the rows given to the writer, read back through HDF5's pipeline */
        CU_ASSERT(memcmp(all, expect, (size_t)dims[0] * row) == 0);
    hid_t r = H5Dcreate2(ref, name, ft, sp, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    CU_ASSERT_FATAL(r >= 0);
    CU_ASSERT_FATAL(H5Dwrite(r, ft, H5S_ALL, H5S_ALL, H5P_DEFAULT, all) >= 0);
    H5Dflush(r);
    int nchunks = 0, same = 0;
    for (hsize_t c = 0; c < dims[0]; c += chunk[0], nchunks++) {
        hsize_t off[2] = {c, 0}, na = 0, nr = 0;
        H5Dget_chunk_storage_size(d, off, &na);
        H5Dget_chunk_storage_size(r, off, &nr);
        unsigned char *ba = malloc(na + 1), *br = malloc(nr + 1);
        uint32_t ma = 99, mr = 99;
        int ok = na && na == nr && H5Dread_chunk(d, H5P_DEFAULT, off, &ma, ba) >= 0 &&
                 H5Dread_chunk(r, H5P_DEFAULT, off, &mr, br) >= 0 && ma == 0 && mr == 0 && memcmp(ba, br, na) == 0;
        same += ok;
        free(ba), free(br);
    }
    CU_ASSERT_EQUAL(same, nchunks);
    if (same != nchunks)
        fprintf(stderr, "\n  /%s: %d of %d chunks differ from HDF5's own encoding\n", name, nchunks - same, nchunks);
    free(all);
    H5Dclose(r), H5Pclose(dcpl), H5Sclose(sp), H5Tclose(ft), H5Dclose(d);
}

static void test_chunks_as_hdf5(void)
{
    for (int threads = 1; threads <= 3; threads += 2) {
        /* flushes at irregular steps: the last chunk is rewritten partly filled
         * many times, and one flush spans several chunks */
        fp8_store *st = fp8_store_create("build/t_enc.h5", NULL, 0);
        CU_ASSERT_PTR_NOT_NULL_FATAL(st);
        fp8__store_set_threads(st, threads);
        int t = fp8_store_tensor(st, "a", FP8_ROLE_ACTIVATION, 0);
        int r[2] = {fp8_store_recipe(st, "e4m3:current"), fp8_store_recipe(st, "mxfp8")};
        fp8_stats x;
        uint64_t seed = 5, (*hist)[FP8_EXP_BINS] = malloc(300 * sizeof *hist);
        float *snap = malloc(5 * 30000 * sizeof *snap);
        CU_ASSERT_FATAL(hist && snap);
        for (int k = 0; k < 5 * 30000; k++)
            snap[k] = (float)((double)(test_rand(&seed) >> 11) * 0x1p-53 - 0.5) * (float)(1 + k % 7);
        for (int step = 0; step < 300; step++) {
            fake_stats(&x, (uint64_t)step);
            for (int k = 0; k < FP8_EXP_BINS; k++)
                x.exp_hist[k] = hist[step][k] = test_rand(&seed) % 3 == 0 ? test_rand(&seed) % 1000 : 0;
            for (int q = 0; q < 2; q++)
                CU_ASSERT_EQUAL(fp8_store_add_record(st, t, r[q], step, q == 0, 4, 8, &x), FP8_OK);
            CU_ASSERT_EQUAL(fp8_store_add_step(st, t, r[0], step, 1, (float)x.amax, 0.5f, 0), FP8_OK);
            if (step % 60 == 5) /* float data, deflated run-length-wise, in the same flushes and streams */
                CU_ASSERT_EQUAL(fp8_store_add_snapshot(st, t, step, snap + (size_t)(step / 60) * 30000, 100, 300), FP8_OK);
            if (step % 7 == 3 || (step > 40 && step < 200 && step % 97 == 0))
                CU_ASSERT_EQUAL(fp8_store_flush(st), FP8_OK);
        }
        CU_ASSERT_EQUAL(fp8_store_close(st), FP8_OK);
        hid_t a = H5Fopen("build/t_enc.h5", H5F_ACC_RDONLY, H5P_DEFAULT);
        hid_t ref = H5Fcreate("build/t_enc_ref.h5", H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
        CU_ASSERT_FATAL(a >= 0 && ref >= 0);
        same_chunks_as_hdf5(a, ref, "records", NULL); /* a compound, shuffled (its fields: the round trip) */
        same_chunks_as_hdf5(a, ref, "exp_hist", hist); /* 2-D, 64-row chunks, one row per step */
        same_chunks_as_hdf5(a, ref, "scale_hist", NULL);
        /* the snapshots, read back through HDF5's pipeline, are the floats given */
        hid_t d = H5Dopen2(a, "snapshot_data", H5P_DEFAULT);
        float *back = malloc(5 * 30000 * sizeof *back);
        CU_ASSERT_FATAL(d >= 0 && back);
        CU_ASSERT(H5Dread(d, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, back) >= 0);
        CU_ASSERT(memcmp(back, snap, 5 * 30000 * sizeof *back) == 0);
        H5Dclose(d);
        free(back), free(snap);
        H5Fclose(ref), H5Fclose(a);
        free(hist);
    }
    /* HDF5's shuffle by hand on a 3-element, 4-byte case, one element present */
    unsigned char src[4] = {1, 2, 3, 4}, dst[12];
    fp8__shuffle(dst, src, 4, 12, 4);
    const unsigned char want[12] = {1, 0, 0, 2, 0, 0, 3, 0, 0, 4, 0, 0};
    CU_ASSERT(memcmp(dst, want, 12) == 0);
    /* against the plain rule (byte b of element e to b * nelem + e, zeros
     * after the present elements), element sizes whole in 8-byte blocks or
     * not, present counts whole in blocks of 8 elements or not, elements
     * mostly zero or not */
    static const size_t elems[] = {1, 2, 4, 8, 12, 13, 20, 32, 56, 432};
    uint64_t seed2 = 11;
    for (size_t k = 0; k < sizeof elems / sizeof elems[0]; k++)
        for (size_t nelem = 1; nelem <= 70; nelem += 23) {
            size_t elem = elems[k], bytes = nelem * elem;
            unsigned char *in = malloc(bytes), *got = malloc(bytes), *ref = malloc(bytes);
            CU_ASSERT_FATAL(in && got && ref);
            for (size_t have = 0; have <= nelem; have += 1 + nelem / 3) {
                for (size_t i = 0; i < have * elem; i++)
                    in[i] = test_rand(&seed2) % 3 ? 0 : (unsigned char)(1 + test_rand(&seed2) % 255);
                memset(ref, 0, bytes), memset(got, 0xA5, bytes);
                for (size_t e = 0; e < have; e++)
                    for (size_t b = 0; b < elem; b++)
                        ref[b * nelem + e] = in[e * elem + b];
                fp8__shuffle(got, in, have * elem, bytes, elem);
                CU_ASSERT(memcmp(got, ref, bytes) == 0);
            }
            free(in), free(got), free(ref);
        }
}

/* The loader's big arrays: zeroed, usable to the end, freed by free(); an
 * overflowing size refused. */
static void test_calloc_big(void)
{
    size_t n = 5 * (1u << 20); /* 40 MB of uint64 */
    uint64_t *a = fp8__calloc_big(n, sizeof *a);
    CU_ASSERT_PTR_NOT_NULL_FATAL(a);
    size_t nonzero = 0;
    for (size_t i = 0; i < n; i++)
        nonzero += a[i] != 0;
    CU_ASSERT_EQUAL(nonzero, 0);
    a[n - 1] = 7; /* the whole of it is ours */
    free(a);
    char *b = fp8__calloc_big(3, 5); /* small: plain calloc */
    CU_ASSERT(b && !b[0] && !b[14]);
    free(b);
    CU_ASSERT_PTR_NULL(fp8__calloc_big(SIZE_MAX / 4, 8));
    unsigned char *m = fp8__malloc_big(33u << 20);
    CU_ASSERT_PTR_NOT_NULL_FATAL(m);
    m[0] = 1, m[(33u << 20) - 1] = 2;
    free(m);
}

void register_store_tests(void)
{
    static CU_TestInfo tests[] = {
        {"write and read back every field, lazy tensors", test_round_trip},
        {"bad files: text, missing, foreign HDF5, newer schema, truncated", test_bad_files},
        {"SIGKILL at random moments: 20 trials, nothing flushed is lost", test_sigkill},
        {"a write torn by a kill at each of the writer's first 300 writes: nothing flushed is lost", test_torn_writes},
        {"a damaged stretch of /records: the records before it load, the rest are counted", test_damaged_records},
        {"a damaged stretch of /steps, /scalars, an index: the rows before it load, the rest are counted",
         test_damaged_series},
        {"a reader follows a writer in another process (SWMR)", test_live_read},
        {"chunks inflated on two threads = H5Dread's bytes", test_parallel_chunks},
        {"chunks the writer encodes = HDF5's filter pipeline's bytes, 1 and 3 threads; floats read back", test_chunks_as_hdf5},
        {"big arrays (huge pages advised): zeroed, usable to the end, overflow refused", test_calloc_big},
        CU_TEST_INFO_NULL,
    };
    add_suite("store", tests);
}
