/*
 * test_probe.c — suite "probe": a training-loop-shaped use of the probe
 * API, read back from the file; recording windows; bf16/fp16 input;
 * snapshots; several threads at once; a full disk (RLIMIT_FSIZE) stops
 * recording cleanly while the casts go on.
 */
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fp8_probe.h"
#include "fp8_store.h"
#include "tests.h"
#include "recipe_state.h"

static void fill(float *x, size_t n, uint64_t seed, float amp)
{
    uint64_t s = seed | 1;
    for (size_t i = 0; i < n; i++)
        x[i] = (float)((double)(int64_t)test_rand(&s) * 0x1p-63) * amp;
}

static const char *shadows[] = {"e4m3:current", "e4m3:block=1x128", "mxfp8"};

static void test_loop(void)
{
    const char *meta[] = {"model", "unit-test", "seed", "7"};
    fp8_probe_options o = fp8_probe_defaults();
    o.snapshot_pattern = "*.w2.input";
    o.snapshot_every = 5;
    fp8_probe_run *run = fp8_probe_open("build/t_probe.h5", &o, meta, 2);
    CU_ASSERT_PTR_NOT_NULL_FATAL(run);
    fp8_probe *a = fp8_probe_declare(run, "layers.0.mlp.w1.input", FP8_ROLE_ACTIVATION, 0, "hybrid:delayed:history=4",
                                     shadows, 3);
    fp8_probe *g = fp8_probe_declare(run, "layers.0.mlp.w1.grad_output", FP8_ROLE_GRADIENT, 0, "hybrid:delayed:history=4",
                                     NULL, 0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(a);
    CU_ASSERT_PTR_NOT_NULL_FATAL(g);
    CU_ASSERT_PTR_NULL(fp8_probe_declare(run, "bad", FP8_ROLE_OTHER, 0, "e4m3:delyed", NULL, 0));
    /* a shadow repeating the active recipe is dropped: one record per step, not two */
    const char *dup[] = {"hybrid:delayed:history=4,algo=max,margin=0"};
    fp8_probe *d = fp8_probe_declare(run, "dup", FP8_ROLE_OTHER, 0, "hybrid:delayed:history=4", dup, 1);
    CU_ASSERT_PTR_NOT_NULL_FATAL(d);
    CU_ASSERT_PTR_NOT_NULL(strstr(fp8_error_message(), "delyed"));
    /* an independent state to check the active recipe's numbers */
    fp8_recipe r;
    CU_ASSERT_EQUAL(fp8_recipe_parse("hybrid:delayed:history=4", &r), FP8_OK);
    fp8_recipe_state *ref = fp8_recipe_state_alloc(&r, FP8_ROLE_ACTIVATION);
    const size_t R = 8, C = 256, n = R * C;
    float *x = malloc(n * 4), *y = malloc(n * 4), *want = malloc(n * 4), *orig = malloc(n * 4);
    fp8_probe *late = NULL;
    for (int step = 0; step < 30; step++) {
        fill(x, n, (uint64_t)step + 1, (float)(1 + step % 5));
        memcpy(orig, x, n * 4);
        fp8_quantize(ref, x, R, C, want, NULL);
        memcpy(y, x, n * 4);
        CU_ASSERT_EQUAL(fp8_probe_apply(a, step, y, R, C, y), FP8_OK); /* in place */
        CU_ASSERT_EQUAL(memcmp(y, want, n * 4), 0);
        CU_ASSERT_EQUAL(fp8_probe_record(g, step, x, R, C), FP8_OK);
        if (step == 10) /* discovered late */
            late = fp8_probe_declare(run, "layers.1.mlp.w2.input", FP8_ROLE_ACTIVATION, 1, "e4m3:current", NULL, 0);
        if (late)
            CU_ASSERT_EQUAL(fp8_probe_apply(late, step, orig, R, C, y), FP8_OK);
        CU_ASSERT_EQUAL(fp8_probe_scalar(run, "loss", step, 3.0 / (step + 1)), FP8_OK);
        CU_ASSERT_EQUAL(fp8_probe_step_end(run, step), FP8_OK);
        fp8_recipe_state_step(ref);
    }
    CU_ASSERT_EQUAL(fp8_probe_dropped(run), 0);
    CU_ASSERT_EQUAL(fp8_probe_close(run), FP8_OK);

    fp8_run *f = fp8_run_load("build/t_probe.h5");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    CU_ASSERT_EQUAL(f->ntensors, 4); /* the "dup" probe is declared, never recorded */
    CU_ASSERT_EQUAL(f->nrecipes, 4); /* hybrid delayed and the 3 shadows; the late probe's e4m3:current is one */
    CU_ASSERT_EQUAL(f->nrecords, 30 * 4 + 30 + 20);
    CU_ASSERT_EQUAL(f->nscalars, 30);
    /* the active record's scale is the reference state's scale at that step */
    fp8_recipe_state *ref2 = fp8_recipe_state_alloc(&r, FP8_ROLE_ACTIVATION);
    size_t checked = 0;
    for (int step = 0; step < 30; step++) {
        fill(x, n, (uint64_t)step + 1, (float)(1 + step % 5));
        fp8_stats s;
        fp8_quantize(ref2, x, R, C, NULL, &s);
        for (size_t i = 0; i < f->nrecords; i++) {
            const fp8_record *rec = &f->records[i];
            if (rec->tensor == 0 && rec->step == step && rec->active) {
                CU_ASSERT_EQUAL(rec->stats.scale, s.scale);
                CU_ASSERT_EQUAL(rec->stats.overflows, s.overflows);
                CU_ASSERT_DOUBLE_EQUAL(rec->stats.sq_err, s.sq_err, 1e-12 * s.sq_err);
                checked++;
            }
        }
        fp8_recipe_state_step(ref2);
    }
    CU_ASSERT_EQUAL(checked, 30);
    /* the gradient probe of a hybrid recipe is cast to e5m2 */
    for (size_t i = 0; i < f->nrecords; i++)
        if (f->records[i].tensor == 1)
            CU_ASSERT_STRING_EQUAL(f->records[i].stats.format->name, "e5m2");
    /* snapshots: the late w2 input at steps 10, 15, 20, 25, equal to the input */
    CU_ASSERT_EQUAL(f->nsnapshots, 4);
    if (f->nsnapshots == 4) {
        CU_ASSERT_EQUAL(f->snapshots[1].step, 15);
        float *snap = malloc(n * 4);
        CU_ASSERT_EQUAL(fp8_run_snapshot_read(f, 1, snap), FP8_OK);
        fill(x, n, 16, (float)(1 + 15 % 5));
        CU_ASSERT_EQUAL(memcmp(snap, x, n * 4), 0);
        free(snap);
    }
    fp8_run_free(f);
    fp8_recipe_state_free(ref);
    fp8_recipe_state_free(ref2);
    free(x), free(y), free(want), free(orig);
}

static void test_window_and_bits(void)
{
    fp8_probe_options o = fp8_probe_defaults();
    o.every = 5;
    o.start = 10;
    o.end = 20;
    o.exp_hist = 0;
    fp8_probe_run *run = fp8_probe_open("build/t_window.h5", &o, NULL, 0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(run);
    fp8_probe *p = fp8_probe_declare(run, "w", FP8_ROLE_WEIGHT, -1, "e4m3:delayed:history=2", NULL, 0);
    fp8_probe *b = fp8_probe_declare(run, "b", FP8_ROLE_WEIGHT, -1, "e4m3:current", NULL, 0);
    float x[64];
    uint16_t bf[64], hf[64];
    const fp8_format *fp16 = fp8_format_find("fp16", NULL);
    for (int i = 0; i < 64; i++) {
        x[i] = (float)(i - 20) * 0.25f; /* exact in bf16 and fp16 */
        uint32_t u = bits_of(x[i]);
        bf[i] = (uint16_t)(u >> 16);
        hf[i] = (uint16_t)fp8_format_encode(fp16, NULL, x[i], 0, NULL);
    }
    for (int step = 0; step < 30; step++) {
        CU_ASSERT_EQUAL(fp8_probe_record(p, step, x, 1, 64), FP8_OK);
        CU_ASSERT_EQUAL(fp8_probe_record_bits(b, step, step % 2 ? bf : hf, step % 2 ? FP8_DTYPE_BF16 : FP8_DTYPE_F16,
                                              8, 8), FP8_OK);
        CU_ASSERT_EQUAL(fp8_probe_step_end(run, step), FP8_OK);
    }
    CU_ASSERT_EQUAL(fp8_probe_record_bits(b, 0, bf, FP8_DTYPE_F32, 8, 8), FP8_EINVAL);
    CU_ASSERT_EQUAL(fp8_probe_close(run), FP8_OK);
    fp8_run *f = fp8_run_load("build/t_window.h5");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    CU_ASSERT_EQUAL(f->nrecords, 6); /* steps 10, 15, 20 for two probes */
    for (size_t i = 0; i < f->nrecords; i++) {
        CU_ASSERT(f->records[i].step == 10 || f->records[i].step == 15 || f->records[i].step == 20);
        CU_ASSERT_EQUAL(f->records[i].stats.exp_hist[127 + 1 + 2], 0); /* histograms off */
        CU_ASSERT_EQUAL(f->records[i].stats.amax, 10.75);
        CU_ASSERT_EQUAL(f->records[i].stats.numel, 64);
    }
    /* delayed state advanced on every step, not just recorded ones: at step
     * 10 the scale already reflects amax 10.75 */
    CU_ASSERT_EQUAL(f->records[0].stats.scale, 448.0f / 10.75f);
    fp8_run_free(f);
}

/* snapshots as codes + scales decode to exactly what apply produced */
static void test_code_snapshots(void)
{
    const char *specs[] = {"e4m3:block=1x128", "mxfp8", "nvfp4", "hybrid:delayed:history=4",
                           "e4m3:block=1x128:transposed"};
    enum { R = 6, C = 256, N = R * C };
    static float x[N], scratch[N], want[3][N], got[N];
    for (size_t k = 0; k < sizeof specs / sizeof specs[0]; k++) {
        fp8_probe_options o = fp8_probe_defaults();
        o.snapshot_pattern = "*";
        o.snapshot_every = 3;
        o.snapshot_codes = 1;
        fp8_probe_run *run = fp8_probe_open("build/t_codes.h5", &o, NULL, 0);
        CU_ASSERT_PTR_NOT_NULL_FATAL(run);
        fp8_probe *p = fp8_probe_declare(run, "g", FP8_ROLE_GRADIENT, 0, specs[k], NULL, 0);
        CU_ASSERT_PTR_NOT_NULL_FATAL(p);
        for (int step = 0; step < 9; step++) {
            fill(x, N, (uint64_t)step + 100, (float)(1 + step));
            float *dst = step % 3 == 0 ? want[step / 3] : scratch;
            CU_ASSERT_EQUAL(fp8_probe_apply(p, step, x, R, C, dst), FP8_OK);
            CU_ASSERT_EQUAL(fp8_probe_step_end(run, step), FP8_OK);
        }
        CU_ASSERT_EQUAL(fp8_probe_close(run), FP8_OK);
        fp8_run *f = fp8_run_load("build/t_codes.h5");
        CU_ASSERT_PTR_NOT_NULL_FATAL(f);
        CU_ASSERT_EQUAL(f->nsnapshots, 3);
        for (size_t i = 0; i < f->nsnapshots && i < 3; i++) {
            CU_ASSERT_EQUAL(f->snapshots[i].recipe, 0);
            CU_ASSERT_EQUAL(fp8_run_snapshot_read(f, i, got), FP8_OK);
            size_t bad = 0;
            for (size_t e = 0; e < N; e++)
                bad += bits_of(got[e]) != bits_of(want[i][e]);
            if (bad)
                fprintf(stderr, "\n  %s snapshot %zu: %zu values differ", specs[k], i, bad);
            CU_ASSERT_EQUAL(bad, 0);
        }
        fp8_run_free(f);
    }
}

/* on steps that record nothing, a delayed shadow still takes each step's
 * amax (a stateless shadow is skipped): its recorded scale equals that of a
 * state that saw every step */
static void test_shadow_history(void)
{
    fp8_probe_options o = fp8_probe_defaults();
    o.every = 5;
    fp8_probe_run *run = fp8_probe_open("build/t_shadow.h5", &o, NULL, 0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(run);
    const char *sh[] = {"e4m3:delayed:history=3"};
    fp8_probe *p = fp8_probe_declare(run, "x", FP8_ROLE_ACTIVATION, 0, "e4m3:current", sh, 1);
    fp8_recipe r;
    CU_ASSERT_EQUAL(fp8_recipe_parse("e4m3:delayed:history=3", &r), FP8_OK);
    fp8_recipe_state *ref = fp8_recipe_state_alloc(&r, FP8_ROLE_ACTIVATION);
    float x[256], y[256], want[4];
    int k = 0;
    for (int step = 0; step < 16; step++) {
        fill(x, 256, (uint64_t)step + 3, (float)(1 + (step * 7) % 11));
        fp8_stats s;
        fp8_quantize(ref, x, 2, 128, NULL, &s);
        if (step % 5 == 0)
            want[k++] = (float)s.scale;
        fp8_recipe_state_step(ref);
        CU_ASSERT_EQUAL(fp8_probe_apply(p, step, x, 2, 128, y), FP8_OK);
        CU_ASSERT_EQUAL(fp8_probe_step_end(run, step), FP8_OK);
    }
    CU_ASSERT_EQUAL(fp8_probe_close(run), FP8_OK);
    fp8_run *f = fp8_run_load("build/t_shadow.h5");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    int seen = 0;
    for (size_t i = 0; i < f->nrecords; i++)
        if (!f->records[i].active) {
            CU_ASSERT_EQUAL((float)f->records[i].stats.scale, want[f->records[i].step / 5]);
            seen++;
        }
    CU_ASSERT_EQUAL(seen, 4);
    fp8_run_free(f);
    fp8_recipe_state_free(ref);
}

typedef struct {
    fp8_probe *p;
    int id;
    int fails;
} worker_arg;

static void *worker(void *arg)
{
    worker_arg *w = arg;
    float x[512], y[512];
    for (int step = 0; step < 100; step++) {
        fill(x, 512, (uint64_t)(w->id * 1000 + step), 3.0f);
        if (fp8_probe_apply(w->p, step, x, 4, 128, y) != FP8_OK)
            w->fails++;
    }
    return NULL;
}

static void test_threads(void)
{
    fp8_probe_run *run = fp8_probe_open("build/t_threads.h5", NULL, NULL, 0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(run);
    pthread_t th[4];
    worker_arg args[4];
    for (int t = 0; t < 4; t++) {
        char name[64];
        snprintf(name, sizeof name, "layers.%d.attn.qkv.input", t);
        args[t].p = fp8_probe_declare(run, name, FP8_ROLE_ACTIVATION, t, "e4m3:current", shadows, 2);
        args[t].id = t;
        args[t].fails = 0;
        CU_ASSERT_PTR_NOT_NULL_FATAL(args[t].p);
    }
    for (int t = 0; t < 4; t++)
        pthread_create(&th[t], NULL, worker, &args[t]);
    for (int k = 0; k < 20; k++) { /* steps end and flushes happen meanwhile */
        CU_ASSERT_EQUAL(fp8_probe_step_end(run, k), FP8_OK);
        fp8_probe_scalar(run, "lr", k, 1e-3);
    }
    for (int t = 0; t < 4; t++) {
        pthread_join(th[t], NULL);
        CU_ASSERT_EQUAL(args[t].fails, 0);
    }
    CU_ASSERT_EQUAL(fp8_probe_close(run), FP8_OK);
    fp8_run *f = fp8_run_load("build/t_threads.h5");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    CU_ASSERT_EQUAL(f->nrecords, 4 * 100 * 2); /* e4m3:current as shadow repeats the active: dropped */
    CU_ASSERT_EQUAL(f->nscalars, 20);
    fp8_run_free(f);
}

/* A small file-size limit: flushing fails with EFBIG; recording stops with
 * an error, casts go on, and the file holds what was flushed before. */
static void test_disk_full(void)
{
    int fd[2];
    pid_t pid = fork_piped(fd);
    CU_ASSERT_FATAL(pid >= 0);
    if (pid == 0) {
        /* SIGXFSZ keeps its default action (the process dies): the probes must not raise it */
        struct rlimit rl = {400 * 1024, 400 * 1024};
        setrlimit(RLIMIT_FSIZE, &rl);
        fp8_probe_options o = fp8_probe_defaults();
        o.flush_steps = 1;
        fp8_probe_run *run = fp8_probe_open("build/t_full.h5", &o, NULL, 0);
        if (!run)
            _exit(10);
        fp8_probe *p = fp8_probe_declare(run, "x", FP8_ROLE_ACTIVATION, 0, "e4m3:current", shadows, 3);
        fp8_recipe r;
        CU_ASSERT_EQUAL(fp8_recipe_parse("e4m3:current", &r), FP8_OK);
        fp8_recipe_state *ref = fp8_recipe_state_alloc(&r, FP8_ROLE_ACTIVATION);
        float x[1024], y[1024], w[1024];
        uint64_t flushed = 0;
        int failed_at = -1;
        for (int step = 0; step < 400; step++) {
            fill(x, 1024, (uint64_t)step + 5, 2.0f);
            if (fp8_probe_apply(p, step, x, 8, 128, y) != FP8_OK)
                _exit(11); /* a cast must never fail because of the disk */
            fp8_quantize(ref, x, 8, 128, w, NULL);
            if (memcmp(y, w, sizeof y) != 0)
                _exit(12);
            int st = fp8_probe_step_end(run, step);
            if (st == FP8_OK && failed_at < 0)
                flushed = (uint64_t)(step + 1) * 3; /* active + block + mxfp8 (the current shadow repeats) */
            else if (st != FP8_OK && failed_at < 0)
                failed_at = step;
        }
        if (failed_at < 0)
            _exit(13); /* the limit was never hit */
        if (fp8_probe_dropped(run) == 0)
            _exit(14);
        if (fp8_probe_close(run) == FP8_OK)
            _exit(15); /* close reports the earlier failure */
        if (write(fd[1], &flushed, sizeof flushed) != sizeof flushed)
            _exit(16);
        _exit(0);
    }
    int status;
    waitpid(pid, &status, 0);
    uint64_t flushed = 0;
    CU_ASSERT_EQUAL(read(fd[0], &flushed, sizeof flushed), (ssize_t)sizeof flushed);
    close(fd[0]);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        fprintf(stderr, "\n  disk-full child: status %d\n", WIFEXITED(status) ? WEXITSTATUS(status) : -1);
    CU_ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    fp8_run *f = fp8_run_load("build/t_full.h5");
    if (!f)
        fprintf(stderr, "\n  disk-full file: %s\n", fp8_error_message());
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    CU_ASSERT(flushed > 0);
    CU_ASSERT(f->nrecords >= flushed);
    fp8_run_free(f);
    /* it kept what fitted: the file ends under the limit, most of the way to it */
    struct stat sb;
    CU_ASSERT(stat("build/t_full.h5", &sb) == 0);
    if (sb.st_size > 400 * 1024 || sb.st_size < 250 * 1024)
        fprintf(stderr, "\n  disk-full file size %lld\n", (long long)sb.st_size);
    CU_ASSERT(sb.st_size <= 400 * 1024 && sb.st_size >= 250 * 1024);
}

/* The every-step series: with statistics every 5 steps, /steps still has
 * one row per tensor x recipe x step, whose amax is the max over the
 * step's casts and whose scale is what each recipe cast with (checked
 * against independent recipe states); an Inf marks the step and enters the
 * delayed history as TE's does.  Block-amax summaries at steps kK, kK+1
 * equal a plain loop. */
static void test_series_and_block_amax(void)
{
    fp8_probe_options o = fp8_probe_defaults();
    o.every = 5;
    o.block_amax_every = 10;
    o.flush_steps = 3;
    fp8_probe_run *run = fp8_probe_open("build/t_series.h5", &o, NULL, 0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(run);
    const char *sh[] = {"e4m3:current", "e5m2:delayed:history=3", "e4m3:block=1x128"};
    fp8_probe *p = fp8_probe_declare(run, "t.input", FP8_ROLE_ACTIVATION, 0, "e4m3:delayed:history=4", sh, 3);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    fp8_recipe ra, rs;
    CU_ASSERT_EQUAL(fp8_recipe_parse("e4m3:delayed:history=4", &ra), FP8_OK);
    CU_ASSERT_EQUAL(fp8_recipe_parse("e5m2:delayed:history=3", &rs), FP8_OK);
    fp8_recipe_state *A = fp8_recipe_state_alloc(&ra, FP8_ROLE_ACTIVATION), *S = fp8_recipe_state_alloc(&rs, FP8_ROLE_ACTIVATION);
    const size_t R = 3, C = 300, n = R * C; /* 3 blocks per row, the last one 44 wide */
    float *x = malloc(n * 4), *x2 = malloc(n * 4), *out = malloc(n * 4);
    float want_amax[23], want_sa[23], want_ss[23];
    float bam[23][9];
    for (int step = 0; step < 23; step++) {
        fill(x, n, (uint64_t)step + 11, (float)(1 + step % 7));
        fill(x2, n, (uint64_t)step + 101, 0.5f);
        if (step == 8)
            x[5] = INFINITY; /* TE: the Inf enters the delayed histories */
        want_sa[step] = A->scale, want_ss[step] = S->scale;
        /* the tensor is cast twice this step (e.g. two micro-batches) */
        CU_ASSERT_EQUAL(fp8_probe_apply(p, step, x, R, C, out), FP8_OK);
        CU_ASSERT_EQUAL(fp8_probe_apply(p, step, x2, R, C, out), FP8_OK);
        float am = 0;
        for (size_t i = 0; i < n; i++) {
            if (isfinite(x[i]))
                am = fmaxf(am, fabsf(x[i]));
            am = fmaxf(am, fabsf(x2[i]));
        }
        want_amax[step] = am;
        for (size_t i = 0; i < R; i++)
            for (size_t b = 0; b < 3; b++) {
                float m = 0;
                for (size_t j = b * 128; j < C && j < b * 128 + 128; j++) {
                    if (isfinite(x[i * C + j]))
                        m = fmaxf(m, fabsf(x[i * C + j]));
                    m = fmaxf(m, fabsf(x2[i * C + j]));
                }
                bam[step][i * 3 + b] = m;
            }
        fp8_quantize(A, x, R, C, NULL, NULL), fp8_quantize(A, x2, R, C, NULL, NULL);
        fp8_quantize(S, x, R, C, NULL, NULL), fp8_quantize(S, x2, R, C, NULL, NULL);
        fp8_recipe_state_step(A), fp8_recipe_state_step(S);
        CU_ASSERT_EQUAL(fp8_probe_step_end(run, step), FP8_OK);
    }
    /* the reference state saw the Inf too: TE keeps the scale while an Inf
     * is in the window (steps 9..12), then scales from the window's max
     * again (steps 19..22 at the end: 448 / their amax) */
    CU_ASSERT_EQUAL(want_sa[9], want_sa[8]);
    CU_ASSERT_EQUAL(want_sa[12], want_sa[8]);
    double last = fmax(fmax(want_amax[19], want_amax[20]), fmax(want_amax[21], want_amax[22]));
    CU_ASSERT_DOUBLE_EQUAL(A->scale, 448.0 / last, 1e-6 * 448.0 / last);
    CU_ASSERT_EQUAL(fp8_probe_close(run), FP8_OK);
    fp8_run *f = fp8_run_load("build/t_series.h5");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    CU_ASSERT_EQUAL(f->nsteps, 23 * 4);
    int rid[4] = {-1, -1, -1, -1};
    const char *specs[4] = {"e4m3:delayed:history=4,algo=max,margin=0", "e4m3:current:eps=0", "e5m2:delayed:history=3,algo=max,margin=0",
                            "e4m3:block=1x128:eps=0.0001,fp32"};
    for (int k = 0; k < 4; k++)
        for (int r = 0; r < f->nrecipes; r++)
            if (strcmp(f->recipe_spec[r], specs[k]) == 0)
                rid[k] = r;
    CU_ASSERT_FATAL(rid[0] >= 0 && rid[1] >= 0 && rid[2] >= 0 && rid[3] >= 0);
    size_t seen = 0;
    for (size_t i = 0; i < f->nsteps; i++) {
        const fp8_step_row *w = &f->steps[i];
        int s = (int)w->step;
        CU_ASSERT_FATAL(s >= 0 && s < 23);
        CU_ASSERT_EQUAL(w->amax, want_amax[s]);
        CU_ASSERT_EQUAL(w->nonfinite, s == 8 ? 1u : 0u);
        CU_ASSERT_EQUAL(w->active, (int)w->recipe == rid[0]);
        if ((int)w->recipe == rid[0])
            CU_ASSERT_EQUAL(w->scale, want_sa[s]);
        if ((int)w->recipe == rid[2])
            CU_ASSERT_EQUAL(w->scale, want_ss[s]);
        if ((int)w->recipe == rid[1])
            CU_ASSERT_EQUAL(w->scale, fp8_scale_current(448.0f, want_amax[s], 0, 0, 0));
        if ((int)w->recipe == rid[3])
            CU_ASSERT(isnan(w->scale));
        seen++;
    }
    CU_ASSERT_EQUAL(seen, 92);
    /* statistics only every 5 steps (0, 5, .., 20) */
    CU_ASSERT_EQUAL(f->nrecords, 5 * 2 * 4); /* two casts a step, one record each */
    /* block amax at 0, 1, 10, 11, 20, 21 */
    CU_ASSERT_EQUAL(f->nblock_amax, 6);
    for (size_t k = 0; k < f->nblock_amax; k++) {
        const fp8_block_amax *b = &f->block_amax[k];
        CU_ASSERT(b->step % 10 <= 1);
        CU_ASSERT_EQUAL(b->rows, R);
        CU_ASSERT_EQUAL(b->cols, C);
        CU_ASSERT_EQUAL(b->block, 128);
        CU_ASSERT_EQUAL_FATAL(b->count, 9);
        float got[9];
        CU_ASSERT_EQUAL(fp8_run_block_amax_read(f, k, got), FP8_OK);
        CU_ASSERT_EQUAL(memcmp(got, bam[b->step], sizeof got), 0);
    }
    fp8_run_free(f);
    fp8_recipe_state_free(A), fp8_recipe_state_free(S);
    free(x), free(x2), free(out);
}

static void test_api_misuse(void)
{
    fp8_probe_run *run = fp8_probe_open("build/t_misuse.h5", NULL, NULL, 0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(run);
    fp8_probe *p = fp8_probe_declare(run, "layers.0.w1.input", FP8_ROLE_ACTIVATION, 0, "e4m3:current", NULL, 0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    /* the same name again: another role, another layer, or the same */
    CU_ASSERT_PTR_NULL(fp8_probe_declare(run, "layers.0.w1.input", FP8_ROLE_GRADIENT, 0, "e5m2:current", NULL, 0));
    EXPECT_ERROR(FP8_EINVAL, "already declared as role activation, layer 0; declaring it again as role gradient, layer 0");
    CU_ASSERT_PTR_NULL(fp8_probe_declare(run, "layers.0.w1.input", FP8_ROLE_ACTIVATION, 3, "e4m3:current", NULL, 0));
    EXPECT_ERROR(FP8_EINVAL, "layer 3 would merge two tensors");
    CU_ASSERT_PTR_NULL(fp8_probe_declare(run, "layers.0.w1.input", FP8_ROLE_ACTIVATION, 0, "e4m3:current", NULL, 0));
    EXPECT_ERROR(FP8_EINVAL, "already declared in this run");
    /* one message per cause */
    CU_ASSERT_PTR_NULL(fp8_probe_declare(run, "x", (fp8_role)99, 0, "e4m3:current", NULL, 0));
    EXPECT_ERROR(FP8_EINVAL, "role 99 is not one of");
    const char *sh[16] = {0};
    CU_ASSERT_PTR_NULL(fp8_probe_declare(run, "x", FP8_ROLE_ACTIVATION, 0, "e4m3:current", sh, 16));
    EXPECT_ERROR(FP8_EINVAL, "16 shadow recipes; 0 to 15 are allowed");
    char longname[200];
    memset(longname, 'n', sizeof longname - 1);
    longname[sizeof longname - 1] = 0;
    CU_ASSERT_PTR_NULL(fp8_probe_declare(run, longname, FP8_ROLE_ACTIVATION, 0, "e4m3:current", NULL, 0));
    EXPECT_ERROR(FP8_EINVAL, "the name is longer than 127 bytes");
    CU_ASSERT_PTR_NULL(fp8_probe_declare(run, "x", FP8_ROLE_ACTIVATION, 0, "e4m3:curent", NULL, 0));
    EXPECT_ERROR(FP8_EINVAL, "probe 'x': ");
    float x[4] = {1, 2, 3, 4}, y[4];
    CU_ASSERT_EQUAL(fp8_probe_apply(p, 0, x, 1, 4, y), FP8_OK);
    CU_ASSERT_EQUAL(fp8_probe_step_end(run, 0), FP8_OK);
    CU_ASSERT_EQUAL(fp8_probe_close(run), FP8_OK);
    /* handles used after close are refused, not dereferenced (ASan would
     * report a use after free otherwise) */
    EXPECT_ERROR(fp8_probe_apply(p, 1, x, 1, 4, y), "fp8_probe_apply: the probe is not live: its run was closed");
    EXPECT_ERROR(fp8_probe_record(p, 1, x, 1, 4), "fp8_probe_record: the probe is not live");
    EXPECT_ERROR(fp8_probe_cast(p, x, 1, 4, y), "fp8_probe_cast: the probe is not live");
    EXPECT_ERROR(fp8_probe_step_end(run, 1), "fp8_probe_step_end: the run is closed");
    EXPECT_ERROR(fp8_probe_scalar(run, "loss", 1, 1.0), "fp8_probe_scalar: the run is closed");
    EXPECT_ERROR(fp8_probe_close(run), "fp8_probe_close: the run is closed");
    CU_ASSERT_PTR_NULL(fp8_probe_declare(run, "y", FP8_ROLE_ACTIVATION, 0, "e4m3:current", NULL, 0));
    EXPECT_ERROR(FP8_EINVAL, "the run is closed");
    CU_ASSERT_EQUAL(fp8_probe_dropped(run), 0);
    /* what was recorded before stays: one tensor, one record */
    fp8_run *r = fp8_run_load("build/t_misuse.h5");
    CU_ASSERT_PTR_NOT_NULL_FATAL(r);
    CU_ASSERT_EQUAL(r->ntensors, 1);
    CU_ASSERT_EQUAL(r->nrecords, 1);
    fp8_run_free(r);
}

static void test_eval_and_options(void)
{
    /* options by name, as bindings set them */
    fp8_probe_options o;
    CU_ASSERT_EQUAL(fp8_probe_options_size(), sizeof o);
    fp8_probe_defaults_into(&o);
    CU_ASSERT_EQUAL(fp8_probe_option_set(&o, "every", "3"), FP8_OK);
    CU_ASSERT_EQUAL(o.every, 3);
    CU_ASSERT_EQUAL(fp8_probe_option_set(&o, "flush_seconds", "0.5"), FP8_OK);
    CU_ASSERT(o.flush_seconds == 0.5);
    CU_ASSERT_EQUAL(fp8_probe_option_set(&o, "exp_hist", "0"), FP8_OK);
    CU_ASSERT_EQUAL(o.exp_hist, 0);
    EXPECT_ERROR(fp8_probe_option_set(&o, "evry", "3"), "unknown key 'evry'");
    EXPECT_ERROR(fp8_probe_option_set(&o, "every", "three"), "'three' is not a number");
    EXPECT_ERROR(fp8_probe_option_set(&o, "every", "2.5"), "not an integer");
    o.every = 1;
    /* evaluation passes between training steps change nothing: the same
     * records and casts as a run without them */
    fp8_probe_run *ra = fp8_probe_open("build/t_eval_a.h5", &o, NULL, 0);
    fp8_probe_run *rb = fp8_probe_open("build/t_eval_b.h5", &o, NULL, 0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(ra);
    CU_ASSERT_PTR_NOT_NULL_FATAL(rb);
    fp8_probe *pa = fp8_probe_declare(ra, "x", FP8_ROLE_ACTIVATION, 0, "e4m3:delayed:history=4", NULL, 0);
    fp8_probe *pb = fp8_probe_declare(rb, "x", FP8_ROLE_ACTIVATION, 0, "e4m3:delayed:history=4", NULL, 0);
    float x[256], ya[256], yb[256], big[256], yc[256];
    int same = 1, cast_ok = 1;
    for (int64_t s = 0; s < 12; s++) {
        fill(x, 256, (uint64_t)s + 1, 1.0f + (float)s);
        CU_ASSERT_EQUAL(fp8_probe_apply(pa, s, x, 1, 256, ya), FP8_OK);
        CU_ASSERT_EQUAL(fp8_probe_apply(pb, s, x, 1, 256, yb), FP8_OK);
        same &= memcmp(ya, yb, sizeof ya) == 0;
        CU_ASSERT_EQUAL(fp8_probe_step_end(ra, s), FP8_OK);
        /* run b evaluates a tensor 100x larger: no record, no history entry */
        fill(big, 256, 99, 100.0f);
        fp8_probe_set_training(rb, 0);
        CU_ASSERT_EQUAL(fp8_probe_apply(pb, s, big, 1, 256, yb), FP8_OK);
        CU_ASSERT_EQUAL(fp8_probe_cast(pb, big, 1, 256, yc), FP8_OK);
        cast_ok &= memcmp(yb, yc, sizeof yb) == 0;
        CU_ASSERT_EQUAL(fp8_probe_record(pb, s, big, 1, 256), FP8_OK);
        fp8_probe_set_training(rb, 1);
        CU_ASSERT_EQUAL(fp8_probe_step_end(rb, s), FP8_OK);
    }
    CU_ASSERT(same);    /* the large evaluation tensors never reached the history */
    CU_ASSERT(cast_ok); /* apply in evaluation is the cast with the current state */
    CU_ASSERT_EQUAL(fp8_probe_close(ra), FP8_OK);
    CU_ASSERT_EQUAL(fp8_probe_close(rb), FP8_OK);
    fp8_run *a = fp8_run_load("build/t_eval_a.h5"), *b = fp8_run_load("build/t_eval_b.h5");
    CU_ASSERT_FATAL(a && b);
    CU_ASSERT_EQUAL(a->nrecords, 12);
    CU_ASSERT_EQUAL(b->nrecords, 12); /* no record from the evaluation passes */
    fp8_run_free(a), fp8_run_free(b);
}

/* The option threads=2 casts a record's recipes side by side: the same bits
 * as one thread, for apply in place (out aliases x: the active recipe then
 * casts last, on its own) and out of place, every statistic of
 * every record equal; small tensors and unrecorded steps stay serial. */
static void test_parallel_recipes(void)
{
    const char *paths[2] = {"build/t_par1.h5", "build/t_par2.h5"};
    const size_t rows = 256, cols = 512, n = rows * cols;
    float *x = malloc(n * sizeof *x), *y[2] = {malloc(n * sizeof(float)), malloc(n * sizeof(float))},
          *inplace[2] = {malloc(n * sizeof(float)), malloc(n * sizeof(float))};
    CU_ASSERT_FATAL(x && y[0] && y[1] && inplace[0] && inplace[1]);
    int same_out = 1, same_inplace = 1;
    for (int k = 0; k < 2; k++) {
        fp8_probe_options o = fp8_probe_defaults();
        CU_ASSERT_EQUAL(fp8_probe_option_set(&o, "threads", k ? "2" : "1"), FP8_OK);
        o.every = 2; /* odd steps record nothing: a serial pass moving the delayed state only */
        fp8_probe_run *run = fp8_probe_open(paths[k], &o, NULL, 0);
        CU_ASSERT_PTR_NOT_NULL_FATAL(run);
        fp8_probe *p = fp8_probe_declare(run, "t", FP8_ROLE_ACTIVATION, 0, "e4m3:delayed:history=4", shadows, 3);
        fp8_probe *q = fp8_probe_declare(run, "u", FP8_ROLE_GRADIENT, 0, "hybrid:delayed", shadows, 3);
        /* NVFP4 with the Hadamard transform casts a transformed gradient; the
         * histogram stays the input's */
        const char *rht_sh[] = {"nvfp4:rht"};
        fp8_probe *v = fp8_probe_declare(run, "v", FP8_ROLE_GRADIENT, 0, "e4m3:current", rht_sh, 1);
        CU_ASSERT_FATAL(p && q && v);
        for (int64_t s = 0; s < 5; s++) {
            fill(x, n, (uint64_t)s + 11, 1.0f + 3.0f * (float)s);
            CU_ASSERT_EQUAL(fp8_probe_apply(p, s, x, rows, cols, y[k]), FP8_OK);
            memcpy(inplace[k], x, n * sizeof *x);
            CU_ASSERT_EQUAL(fp8_probe_apply(q, s, inplace[k], rows, cols, inplace[k]), FP8_OK);
            CU_ASSERT_EQUAL(fp8_probe_record(v, s, x, rows, cols), FP8_OK);
            CU_ASSERT_EQUAL(fp8_probe_step_end(run, s), FP8_OK);
        }
        CU_ASSERT_EQUAL(fp8_probe_close(run), FP8_OK);
    }
    same_out = memcmp(y[0], y[1], n * sizeof(float)) == 0;
    same_inplace = memcmp(inplace[0], inplace[1], n * sizeof(float)) == 0;
    CU_ASSERT(same_out);
    CU_ASSERT(same_inplace);
    fp8_run *a = fp8_run_load(paths[0]), *b = fp8_run_load(paths[1]);
    CU_ASSERT_FATAL(a && b);
    CU_ASSERT_EQUAL(a->nrecords, 3 * (2 * 4 + 2)); /* steps 0, 2, 4 x (2 tensors x 4 recipes + 1 x 2) */
    CU_ASSERT_EQUAL(b->nrecords, a->nrecords);
    int same_stats = 1;
    for (size_t i = 0; i < a->nrecords && i < b->nrecords; i++)
        same_stats &= a->records[i].tensor == b->records[i].tensor && a->records[i].recipe == b->records[i].recipe &&
                      memcmp(&a->records[i].stats.classes, &b->records[i].stats.classes,
                             sizeof a->records[i].stats.classes) == 0 &&
                      a->records[i].stats.sqnr_db == b->records[i].stats.sqnr_db &&
                      a->records[i].stats.amax == b->records[i].stats.amax &&
                      memcmp(a->records[i].stats.exp_hist, b->records[i].stats.exp_hist,
                             sizeof a->records[i].stats.exp_hist) == 0;
    CU_ASSERT(same_stats);
    /* every record's histogram against a count by the definition (bin =
     * exponent field + 1 for nonzero |x|) of that step's input */
    size_t checked = 0, wrong = 0;
    for (size_t i = 0; i < b->nrecords; i++) {
        const fp8_record *r = &b->records[i];
        fill(x, n, (uint64_t)r->step + 11, 1.0f + 3.0f * (float)r->step);
        uint64_t want[FP8_EXP_BINS] = {0};
        for (size_t e = 0; e < n; e++) {
            uint32_t u = bits_of(x[e]) & 0x7FFFFFFFu;
            want[(u >> 23) + (u != 0)]++;
        }
        wrong += memcmp(want, r->stats.exp_hist, sizeof want) != 0;
        checked++;
    }
    CU_ASSERT_EQUAL(checked, 30);
    CU_ASSERT_EQUAL(wrong, 0);
    fp8_run_free(a), fp8_run_free(b);
    fp8_probe_options o = fp8_probe_defaults();
    o.threads = 17;
    CU_ASSERT_PTR_NULL(fp8_probe_open("build/t_par3.h5", &o, NULL, 0));
    free(x), free(y[0]), free(y[1]), free(inplace[0]), free(inplace[1]);
}

void register_probe_tests(void)
{
    static CU_TestInfo tests[] = {
        {"a training loop: apply in place, shadows, late tensors, snapshots", test_loop},
        {"recording window, bf16/fp16 input, histograms off", test_window_and_bits},
        {"four threads recording at once", test_threads},
        {"disk full: recording stops, casts go on", test_disk_full},
        {"snapshots as FP8 codes + group scales decode exactly", test_code_snapshots},
        {"a delayed shadow keeps its history on unrecorded steps", test_shadow_history},
        {"every-step series and block amaxes, whatever the statistics cadence", test_series_and_block_amax},
        {"misuse: a name declared twice, handles after close, one message per cause", test_api_misuse},
        {"evaluation passes change nothing; options by name", test_eval_and_options},
        {"threads=2: a record's recipes side by side, the same bits", test_parallel_recipes},
        CU_TEST_INFO_NULL,
    };
    add_suite("probe", tests);
}
