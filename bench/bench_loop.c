/*
 * bench_loop.c — `make bench BENCH=loop`: what probing costs a training
 * loop, as a user would see it.  The step is the GEMMs of a training step
 * of a small GPT-2 (4 layers, 128 channels, context 64, batch 4 = 256
 * tokens, the built-in trainer's 256-symbol vocabulary): 17 linear layers
 * (per layer the attention's qkv and projection and the MLP's two, then the
 * head), each with its three GEMMs on OpenBLAS (docs/probes.md "roles"):
 * fprop Y = X W^T, dgrad dX = dY W, wgrad dW = dY^T X — 51 sgemm calls, the
 * backward in reverse layer order.  Attention's own products, the
 * element-wise layers and the optimizer are left out: the plain step is
 * the GEMMs alone, the strictest reference (a whole step only dilutes the
 * probes' share).
 *
 * Probed, each linear's GEMM operands and fprop result are recorded, roles
 * as in docs/probes.md: input (activation), weight (weight), grad_output
 * (gradient), output (output) — 68 probes, each with 1 active recipe + 3
 * shadows (the probe bench's).  Plain and probed steps run interleaved,
 * each probed kind in its own run file; the figure is the mean step of
 * each kind (steps WARM.. of a round), the median of ROUNDS rounds; beside
 * each target the range of the rounds' own ratios (probed over plain in
 * the same round), and a note where the goal lies within it.
 *
 * Targets, ratios to the plain step measured in the same run: every=10
 * within 2%, every=1 within 15%, with one thread and with two (OpenBLAS's
 * threads and the probe option threads alike).  Printed beside them, the
 * floors no probe of this step goes below on one thread: four element
 * casts of each tensor, and each tensor's amax; and, for the two-thread
 * rows, what reading a tensor costs when the other core wrote it last.
 * Last, what the shadows cost: the one-thread rows again with the active
 * recipe alone and with one and two shadows, and which of those recipe
 * sets the goals admit.
 */
#include <cblas.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "fp8.h"
#include "fp8_format.h"
#include "fp8_probe.h"

#define LAYERS 4
#define CH 128
#define TOKENS 256
#define VOCAB 256
#define NLIN (4 * LAYERS + 1) /* linear layers; 3 GEMMs each */
#define NPROBE 4              /* probes per linear: input, weight, grad_output, output */
#define WARM 10
#define STEPS 70
#define ROUNDS 3
#define GOAL_EVERY10 1.02 /* the targets: multiples of the plain step */
#define GOAL_EVERY1 1.15

#define NSHADOW 3
#define NRECIPE (1 + NSHADOW) /* a probe's recipes: the active one and the shadows */
static const char *shadows[NSHADOW] = {"e4m3:current", "e4m3:block=1x128", "mxfp8"};
static const char *active = "hybrid:delayed";
/* the probes of a linear: its input, weight, the gradient at its output, its output */
static const fp8_role probe_role[NPROBE] = {FP8_ROLE_ACTIVATION, FP8_ROLE_WEIGHT, FP8_ROLE_GRADIENT,
                                            FP8_ROLE_OUTPUT};

/* One linear layer, Y = X W^T; every buffer row-major */
typedef struct {
    size_t in, out;
    float *x;        /* TOKENS x in: input (the previous linear's y where wired) */
    float *w, *dw;   /* out x in: weight, its gradient */
    float *y, *dy;   /* TOKENS x out: output, gradient arriving at it */
    float *dx;       /* TOKENS x in: gradient leaving through the input */
    fp8_probe *p[NPROBE]; /* NULL: the plain step */
} linear;

typedef struct {
    linear l[NLIN];
    float *buf;
} net;

static float *take(float **at, size_t n)
{
    float *p = *at;
    *at += n;
    return p;
}

/* the 17 linears, wired as in the model: the MLP's second linear reads the
 * first's output (and its dx is the first's dy), the head the last layer's
 * output */
static int net_init(net *m)
{
    size_t total = 0;
    const size_t shape[4][2] = {{CH, 3 * CH}, {CH, CH}, {CH, 4 * CH}, {4 * CH, CH}};
    for (int l = 0; l < LAYERS; l++)
        for (int k = 0; k < 4; k++)
            m->l[4 * l + k].in = shape[k][0], m->l[4 * l + k].out = shape[k][1];
    m->l[NLIN - 1].in = CH, m->l[NLIN - 1].out = VOCAB;
    for (int i = 0; i < NLIN; i++)
        total += 2 * TOKENS * m->l[i].in + 2 * m->l[i].out * m->l[i].in + 2 * TOKENS * m->l[i].out;
    float *at = m->buf = malloc(total * sizeof *at);
    if (!at)
        return -1;
    uint64_t z = 99;
    for (size_t i = 0; i < total; i++) { /* uniform(-0.35, 0.35); outputs and gradients written over */
        z ^= z << 13, z ^= z >> 7, z ^= z << 17;
        at[i] = (float)(((double)(z >> 11) * 0x1p-53 - 0.5) * 0.7);
    }
    for (int i = 0; i < NLIN; i++) {
        linear *g = &m->l[i];
        g->w = take(&at, g->out * g->in), g->dw = take(&at, g->out * g->in);
        g->y = take(&at, TOKENS * g->out), g->dy = take(&at, TOKENS * g->out);
        g->x = take(&at, TOKENS * g->in), g->dx = take(&at, TOKENS * g->in);
        for (int k = 0; k < NPROBE; k++)
            g->p[k] = NULL;
    }
    for (int i = 0; i < NLIN; i++)
        if ((i % 4 == 3 && i < NLIN - 1) || i == NLIN - 1) {
            m->l[i].x = m->l[i - 1].y;   /* fc -> fcproj, last layer -> head */
            m->l[i - 1].dy = m->l[i].dx; /* and the gradient back */
        }
    return 0;
}

/* each probe with the active recipe and the first nsh shadows */
static int net_declare(net *m, fp8_probe_run *run, int nsh)
{
    static const char *what[4] = {"attn.qkv", "attn.proj", "mlp.fc", "mlp.proj"};
    static const char *suffix[NPROBE] = {"input", "weight", "grad_output", "output"};
    for (int i = 0; i < NLIN; i++)
        for (int k = 0; k < NPROBE; k++) {
            char name[64];
            int layer = i < NLIN - 1 ? i / 4 : LAYERS;
            if (i < NLIN - 1)
                snprintf(name, sizeof name, "layers.%d.%s.%s", layer, what[i % 4], suffix[k]);
            else
                snprintf(name, sizeof name, "lm_head.%s", suffix[k]);
            m->l[i].p[k] = fp8_probe_declare(run, name, probe_role[k], layer, active, shadows, nsh);
            if (!m->l[i].p[k])
                return -1;
        }
    return 0;
}

/* one step: the forward GEMMs in layer order, then the backward ones in
 * reverse, each operand recorded before its first GEMM and the output
 * after fprop when probed (run not NULL); the time its records took added
 * to part[0], its end's (a flush every tenth) to part[1] */
static double step(net *m, fp8_probe_run *run, int64_t s, double part[2])
{
    double t0 = bench_now();
#define RECORD(p, x, r, c)                                                                                         \
    do {                                                                                                           \
        double a = bench_now();                                                                                    \
        fp8_probe_record(p, s, x, r, c);                                                                           \
        part[0] += bench_now() - a;                                                                                \
    } while (0)
    for (int i = 0; i < NLIN; i++) {
        linear *g = &m->l[i];
        int in = (int)g->in, out = (int)g->out;
        if (run) {
            RECORD(g->p[0], g->x, TOKENS, g->in);
            RECORD(g->p[1], g->w, g->out, g->in);
        }
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, TOKENS, out, in, 1.0f, g->x, in, g->w, in, 0.0f, g->y,
                    out);
        if (run)
            RECORD(g->p[3], g->y, TOKENS, g->out);
    }
    for (int i = NLIN - 1; i >= 0; i--) {
        linear *g = &m->l[i];
        int in = (int)g->in, out = (int)g->out;
        if (run)
            RECORD(g->p[2], g->dy, TOKENS, g->out);
        /* dX (TOKENS x in) = dY (TOKENS x out) . W (out x in) */
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, TOKENS, in, out, 1.0f, g->dy, out, g->w, in, 0.0f,
                    g->dx, in);
        /* dW (out x in) = dY^T . X */
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, out, in, TOKENS, 1.0f, g->dy, out, g->x, in, 0.0f, g->dw,
                    in);
    }
#undef RECORD
    if (run) {
        double a = bench_now();
        fp8_probe_step_end(run, s);
        part[1] += bench_now() - a;
    }
    return bench_now() - t0;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* the median over ROUNDS of each kind's mean step (plain, every=10,
 * every=1 and, on the step's thread, every=10^9: each tensor's amax alone
 * at every step, what nine steps in ten of every=10 do), each probe with
 * the active recipe and nsh shadows, the probes on probe_threads
 * (OpenBLAS's are set by the caller), or made by the run's background
 * thread (background = 1).  In the background the kinds take turns a block
 * of BLOCK steps at a time (the first block of each warm-up), each probed
 * block timed until the thread has made all of the block's records
 * (fp8_probe_dropped waits for it): the records cannot hide in the next
 * plain block's time.  That wait is the run's flush of the last ten steps
 * (flush_steps = 10: a block's last step is a tenth step end), which the
 * thread makes after the loop has moved on and a run waits for only at its
 * close: 10-11 ms with every=1 on A, 1.7 ms with every=10; with flushes
 * off (flush_steps 10^9, tried) 0.1 ms both ways, so the thread keeps up
 * with the records themselves.  Blocks of 10 steps charged each step a
 * tenth of that (1.16x against 1.08x with blocks of 30, the same build);
 * blocks of 30 still charge a thirtieth.  tail[k]: the mean wait a block,
 * printed beside the figure. */
#define BLOCK 30
#define BG_BLOCKS 3 /* the first one warm-up */
#define KINDS 4
static int measure(int probe_threads, int background, int nsh, double out[KINDS], double tail[KINDS],
                   double lo[KINDS], double hi[KINDS], double rec[KINDS], double end[KINDS])
{
    double mean[KINDS][ROUNDS], tails[KINDS][ROUNDS], recs[KINDS][ROUNDS], ends[KINDS][ROUNDS];
    /* (in the background no every=10^9; nor with fewer shadows: an amax
     * step is the same whatever a probe's shadows) */
    const int nk = background || nsh != NSHADOW ? 3 : KINDS;
    for (int r = 0; r < ROUNDS; r++) {
        net m[KINDS];
        fp8_probe_run *run[KINDS] = {NULL, NULL, NULL, NULL};
        const int every[KINDS] = {0, 10, 1, 1000000000};
        int bad = 0;
        for (int k = 0; k < nk; k++) {
            if (net_init(&m[k]) != 0)
                return -1;
            if (k == 0)
                continue;
            fp8_probe_options po = fp8_probe_defaults();
            po.every = every[k];
            po.threads = probe_threads;
            po.background = background;
            char path[64];
            snprintf(path, sizeof path, "build/bench_loop_every%d.h5", every[k]);
            run[k] = fp8_probe_open(path, &po, NULL, 0);
            if (!run[k] || net_declare(&m[k], run[k], nsh) != 0)
                bad = 1;
        }
        double sum[KINDS] = {0, 0, 0, 0}, wait[KINDS] = {0, 0, 0, 0}, in[KINDS][2] = {{0, 0}};
        for (int s = 0; !bad && !background && s < STEPS; s++)
            for (int k = 0; k < nk; k++) { /* interleaved: the machine's drift falls on all kinds alike */
                double e[2] = {0, 0}, t = step(&m[k], run[k], s, e);
                if (s >= WARM)
                    sum[k] += t, in[k][0] += e[0], in[k][1] += e[1];
            }
        for (int b = 0; !bad && background && b < BG_BLOCKS; b++)
            for (int k = 0; k < 3; k++) {
                double t0 = bench_now();
                double e[2] = {0, 0}; /* (the records' own: not taken apart in the background) */
                for (int s = b * BLOCK; s < (b + 1) * BLOCK; s++)
                    step(&m[k], run[k], s, e);
                double t1 = bench_now();
                if (run[k])
                    (void)fp8_probe_dropped(run[k]); /* (waits for the thread) */
                double t2 = bench_now();
                if (b > 0)
                    sum[k] += t2 - t0, wait[k] += t2 - t1;
            }
        const double measured = background ? (double)(BG_BLOCKS - 1) * BLOCK : (double)(STEPS - WARM);
        for (int k = 0; k < nk; k++) {
            if (run[k] && fp8_probe_close(run[k]) != FP8_OK)
                bad = 1;
            free(m[k].buf);
            mean[k][r] = sum[k] / measured;
            tails[k][r] = wait[k] / (BG_BLOCKS - 1);
            recs[k][r] = in[k][0] / measured;
            ends[k][r] = in[k][1] / measured;
        }
        if (bad) {
            fprintf(stderr, "bench: %s\n", fp8_error_message());
            return -1;
        }
    }
    for (int k = nk; k < KINDS; k++) /* (not measured) */
        for (int r = 0; r < ROUNDS; r++)
            mean[k][r] = NAN, tails[k][r] = 0, recs[k][r] = 0, ends[k][r] = 0;
    /* each round's ratio to its own plain step: their range, the run's noise */
    for (int k = 0; k < KINDS; k++) {
        lo[k] = INFINITY, hi[k] = -INFINITY;
        for (int r = 0; r < ROUNDS; r++) {
            double q = mean[k][r] / mean[0][r];
            lo[k] = fmin(lo[k], q), hi[k] = fmax(hi[k], q);
        }
    }
    for (int k = 0; k < KINDS; k++) {
        qsort(mean[k], ROUNDS, sizeof mean[k][0], cmp_double);
        qsort(tails[k], ROUNDS, sizeof tails[k][0], cmp_double);
        qsort(recs[k], ROUNDS, sizeof recs[k][0], cmp_double);
        qsort(ends[k], ROUNDS, sizeof ends[k][0], cmp_double);
        out[k] = mean[k][ROUNDS / 2];
        tail[k] = tails[k][ROUNDS / 2];
        rec[k] = recs[k][ROUNDS / 2];
        end[k] = ends[k][ROUNDS / 2];
    }
    return 0;
}

/* A loop target (bench_target) with the range of its rounds' ratios
 * beside it, and whether the goal lies inside that range: a verdict this
 * run's noise could turn */
static int loop_target(const char *name, double t, double plain, double lo, double hi, double goal)
{
    int met = bench_target(name, t * 1e3, "ms", plain * 1e3, "the plain step", goal, 1);
    printf("  (the %d rounds' ratios %.3f-%.3fx%s)\n", ROUNDS, lo, hi,
           lo <= goal && goal <= hi ? ": the goal lies within them, a verdict this run's noise could turn" : "");
    return met;
}

/* A tensor written by another CPU than the reader's: its lines lie in that
 * core's cache, and each read fetches them from there.  With OpenBLAS on
 * two threads each GEMM's result is written partly by the other thread,
 * so the probe's amax read of that part is such a read (measured: about
 * 5x the time of a read of the reader's own result): a cost the
 * two-thread rows' amax steps carry and the one-thread rows' do not (on
 * the step's 4.26 M elements, at most about 0.5 ms if every read were
 * such; the two-thread amax steps measured 0.7-1.3 ms over the plain
 * step, so it explains part of that, not all). */
typedef struct {
    float *x;
    size_t n;
    int cpu;
    uint64_t seed;
} writer;

static void *write_elsewhere(void *arg)
{
    writer *w = arg;
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(w->cpu, &set);
    pthread_setaffinity_np(pthread_self(), sizeof set, &set);
    bench_fill_uniform(w->x, w->n, 1.0, w->seed);
    return NULL;
}

/* The amax read of the step's largest activation (TOKENS x 4 CH floats)
 * after this thread wrote it and after a thread on another CPU did, best of
 * 50 each, interleaved; the reader kept on its CPU meanwhile (its affinity
 * restored after).  Nothing printed on one CPU. */
static void cross_core(void)
{
    const size_t n = (size_t)TOKENS * 4 * CH;
    cpu_set_t old, one;
    int me = sched_getcpu(), other = -1;
    if (me < 0 || pthread_getaffinity_np(pthread_self(), sizeof old, &old) != 0)
        return;
    for (int c = 0; c < CPU_SETSIZE && other < 0; c++)
        if (c != me && CPU_ISSET(c, &old))
            other = c;
    float *x = malloc(n * sizeof *x);
    if (other < 0 || !x) {
        free(x);
        return;
    }
    CPU_ZERO(&one);
    CPU_SET(me, &one);
    pthread_setaffinity_np(pthread_self(), sizeof one, &one);
    double own = INFINITY, far = INFINITY;
    int bad = 0;
    for (int rep = 0; rep < 50 && !bad; rep++) {
        fp8_amax_info ai;
        bench_fill_uniform(x, n, 1.0, 2 * (uint64_t)rep + 1);
        double t0 = bench_now();
        bad |= fp8_tensor_amax(x, n, &ai) != FP8_OK;
        own = fmin(own, bench_now() - t0);
        writer w = {x, n, other, 2 * (uint64_t)rep + 2};
        pthread_t th;
        if (pthread_create(&th, NULL, write_elsewhere, &w) != 0) {
            bad = 1;
            break;
        }
        pthread_join(th, NULL);
        t0 = bench_now();
        bad |= fp8_tensor_amax(x, n, &ai) != FP8_OK;
        far = fmin(far, bench_now() - t0);
    }
    pthread_setaffinity_np(pthread_self(), sizeof old, &old);
    free(x);
    if (!bad)
        printf("an amax read of %zu KB (the step's largest activation): %.1f us after this thread wrote it, %.1f us "
               "(%.1fx) after a thread on another CPU did (OpenBLAS's second thread writes part of each GEMM's "
               "result: a part of the two-thread rows' amax-step cost)\n",
               n * sizeof(float) / 1024, own * 1e6, far * 1e6, far / own);
}

/* The step's probed tensors of linear i: their data, rows, columns */
static void probed(const linear *g, const float *t[NPROBE], size_t rows[NPROBE], size_t cols[NPROBE])
{
    t[0] = g->x, t[1] = g->w, t[2] = g->dy, t[3] = g->y;
    rows[0] = TOKENS, rows[1] = g->out, rows[2] = TOKENS, rows[3] = TOKENS;
    cols[0] = g->in, cols[1] = g->in, cols[2] = g->out, cols[3] = g->out;
}

/* One pass over the step's 68 tensors of what a floor measures (seconds):
 * 0 four element casts of each (the kernel alone), 1 its amax alone, 2
 * the engine alone as the probes drive it (its 1 + 3 recipes, the probes'
 * specs and roles, with all statistics, one sweep, nothing stored; st:
 * each tensor's states).  *bad set on an error. */
static double floor_pass(const net *m, int what, fp8_recipe_state *st[NLIN][NPROBE][NRECIPE], float *out, int *bad)
{
    static const fp8_cast_mode mode = {0}; /* nearest, saturating */
    const fp8_format *e4m3 = fp8_format_find("e4m3", NULL);
    double t0 = bench_now();
    for (int i = 0; i < NLIN; i++) {
        const float *t[NPROBE];
        size_t rows[NPROBE], cols[NPROBE];
        probed(&m->l[i], t, rows, cols);
        for (int k = 0; k < NPROBE; k++) {
            fp8_amax_info ai;
            if (what == 0)
                for (int j = 0; j < NRECIPE; j++)
                    *bad |= !e4m3 || fp8_format_qdq_array(e4m3, &mode, 64.0f, t[k], rows[k] * cols[k], out, NULL) !=
                                         FP8_OK;
            else if (what == 1)
                *bad |= fp8_tensor_amax(t[k], rows[k] * cols[k], &ai) != FP8_OK;
            else
                *bad |= bench_engine_record(st[i][k], NRECIPE, t[k], rows[k], cols[k], NULL) != 0;
        }
    }
    return bench_now() - t0;
}

/* The floors under any probe of this step on one thread, on the step's own
 * 68 tensors: four element casts of each (the kernel alone, its scale
 * known, no amax, no statistic: what a recorded step cannot go below with
 * 1 + 3 recipes), each tensor's amax alone (what every unrecorded step
 * reads for the delayed histories), and the engine alone as the probes
 * drive it.  Each a share of a plain step timed beside it (the passes and
 * a plain step take turns, 16 rounds, the first a warm-up: the machine's
 * speed moves between minutes, and a floor timed apart from its step once
 * read 10 % in one run and 26 % in the next); the median share.  Then
 * every=1's excess over the plain step (every1, one thread, a multiple of
 * the plain step) taken apart as measured in its steps (part: the time in
 * the records' calls, in the step ends, shares of the plain step): the
 * records, and in them the engine alone (the casts alone, the statistics
 * beside them) and the rest (the probe's own work, the tensors' cache
 * state in the step); the step ends (the flushes); and the GEMMs' own
 * change (the rest of the step: the probes' reads may leave the GEMMs'
 * operands in cache, or push them out). */
#define FLOOR_ROUNDS 16
static void floors(double every1, const double part[2])
{
    net m;
    if (net_init(&m) != 0)
        return;
    size_t most = 0; /* the largest tensor's elements: x_hat's scratch */
    for (int i = 0; i < NLIN; i++) {
        const float *t[NPROBE];
        size_t rows[NPROBE], cols[NPROBE];
        probed(&m.l[i], t, rows, cols);
        for (int k = 0; k < NPROBE; k++)
            most = rows[k] * cols[k] > most ? rows[k] * cols[k] : most;
    }
    float *out = malloc(most * sizeof *out);
    fp8_recipe_state *st[NLIN][NPROBE][NRECIPE] = {{{NULL}}};
    int bad = !out;
    for (int i = 0; i < NLIN; i++)
        for (int k = 0; k < NPROBE; k++)
            for (int j = 0; j < NRECIPE; j++) {
                fp8_recipe r;
                bad |= fp8_recipe_parse(j ? shadows[j - 1] : active, &r) != FP8_OK;
                if (!bad && !(st[i][k][j] = fp8_recipe_state_alloc(&r, probe_role[k])))
                    bad = 1;
            }
    double share[3][FLOOR_ROUNDS - 1];
    for (int r = 0; !bad && r < FLOOR_ROUNDS; r++) {
        double unused[2] = {0, 0}, plain = step(&m, NULL, r, unused);
        for (int w = 0; w < 3; w++) {
            double t = floor_pass(&m, w, st, out, &bad);
            if (r > 0)
                share[w][r - 1] = t / plain;
        }
    }
    for (int i = 0; i < NLIN; i++)
        for (int k = 0; k < NPROBE; k++)
            for (int j = 0; j < NRECIPE; j++)
                fp8_recipe_state_free(st[i][k][j]);
    free(out);
    free(m.buf);
    if (bad)
        return;
    for (int w = 0; w < 3; w++)
        qsort(share[w], FLOOR_ROUNDS - 1, sizeof share[w][0], cmp_double);
    const double cast = share[0][FLOOR_ROUNDS / 2], amax = share[1][FLOOR_ROUNDS / 2],
                 eng = share[2][FLOOR_ROUNDS / 2];
    printf("floors on one thread, the step's %d tensors, shares of a plain step timed beside each (median of %d "
           "rounds): %d element casts of each (the kernel alone, scales known, no statistic) %.1f%% (rounds "
           "%.1f-%.1f%%; under every=1 with 1 + %d recipes); each tensor's amax alone %.1f%% (under every unrecorded "
           "step)\n",
           NPROBE * NLIN, FLOOR_ROUNDS - 1, NRECIPE, 100 * cast, 100 * share[0][0], 100 * share[0][FLOOR_ROUNDS - 2], NSHADOW,
           100 * amax);
    /* the one-thread goals beside what the casts alone cost: a recorded
     * step is at least the plain step plus its casts, and at every=10 one
     * step in ten is recorded (the amax reads of the other nine left out:
     * right after the GEMMs made them the tensors are in cache, and those
     * steps measured as fast as the plain ones) */
    const double f1 = 1 + cast, f10 = 1 + cast / 10;
    char below[96];
    const char *room = "room left for the statistics";
    snprintf(below, sizeof below, "the goal lies below it: unreachable on the step's thread with 1 + %d recipes",
             NSHADOW);
    printf("the one-thread goals against the casts alone: every=1 <= %.2fx, floor %.3fx (%s); every=10 <= "
           "%.2fx, floor %.3fx (%s)\n",
           GOAL_EVERY1, f1, f1 > GOAL_EVERY1 ? below : room, GOAL_EVERY10, f10, f10 > GOAL_EVERY10 ? below : room);
    printf("every=1's excess on one thread, %.1f%% of the plain step, taken apart as measured in its steps: the "
           "records %.1f%% (the engine alone on the same tensors out of the step, 1 + %d recipes with all statistics, "
           "nothing stored, %.1f%%: the casts alone %.1f%% + the rest of the engine (x's statistics, the casts' "
           "statistics, the block scales) %.1f%%; the rest of the records %.1f%%: the probe's own work, the tensors' "
           "cache state), the step ends %.1f%% (the records' flushes), the GEMMs' own change %+.1f%%\n",
           100 * (every1 - 1), 100 * part[0], NSHADOW, 100 * eng, 100 * cast, 100 * (eng - cast), 100 * (part[0] - eng),
           100 * part[1], 100 * (every1 - 1 - part[0] - part[1]));
}
#undef FLOOR_ROUNDS

/* What the shadows cost on one thread: the probed steps measured again
 * with the active recipe alone and with the first one and two shadows
 * (each beside its own plain step, as measure() does), next to the first
 * row's figures with all three (r3: every=10's and every=1's ratios, the
 * ranges of their rounds); and, per goal, the most shadows with which
 * every round met it.  The goals are set for probes of 1 + 3 recipes;
 * these rows show which recipe sets they admit on the step's own thread
 * (no target). */
/* every=10's and every=1's ratio to the plain step, and the range of
 * their rounds, from measure()'s figures */
static void ratios(const double t[KINDS], const double lo[KINDS], const double hi[KINDS], double r[2][3])
{
    for (int e = 0; e < 2; e++)
        r[e][0] = t[1 + e] / t[0], r[e][1] = lo[1 + e], r[e][2] = hi[1 + e];
}

static int prices(double r3[2][3])
{
    double r[NSHADOW + 1][2][3]; /* [shadows][every=10, every=1][ratio, lo, hi] */
    memcpy(r[NSHADOW], r3, sizeof r[NSHADOW]);
    for (int nsh = 0; nsh < NSHADOW; nsh++) {
        double t[KINDS], tail[KINDS], lo[KINDS], hi[KINDS], rec[KINDS], end[KINDS];
        if (measure(1, 0, nsh, t, tail, lo, hi, rec, end) != 0)
            return -1;
        ratios(t, lo, hi, r[nsh]);
    }
    printf("what the shadows cost, OpenBLAS and the probes on one thread (1 active %s + the first k of ", active);
    for (int k = 0; k < NSHADOW; k++)
        printf("%s%s", k ? ", " : "", shadows[k]);
    printf("; each k beside its own plain step, median of %d rounds, the rounds' range):\n", ROUNDS);
    int most[2] = {-1, -1}; /* per goal, the most shadows every round met it with */
    const double goal[2] = {GOAL_EVERY10, GOAL_EVERY1};
    for (int k = 0; k <= NSHADOW; k++) {
        printf("  k = %d: every=10 %.3fx (%.3f-%.3f), every=1 %.3fx (%.3f-%.3f)%s\n", k, r[k][0][0], r[k][0][1],
               r[k][0][2], r[k][1][0], r[k][1][1], r[k][1][2], k == NSHADOW ? " (the first row's)" : "");
        for (int e = 0; e < 2; e++)
            if (r[k][e][2] <= goal[e] && most[e] == k - 1)
                most[e] = k;
    }
    for (int e = 0; e < 2; e++) {
        printf("  every=%d <= %.2fx on the step's thread: ", e ? 1 : 10, goal[e]);
        if (most[e] < 0)
            printf("met in every round by no recipe set, not even the active recipe alone\n");
        else
            printf("met in every round with the active recipe and up to %d shadow%s\n", most[e],
                   most[e] == 1 ? "" : "s");
    }
    return 0;
}

int bench_loop(void)
{
    double flop = 0, elems = 0;
    net shape;
    if (net_init(&shape) != 0)
        return 1;
    for (int i = 0; i < NLIN; i++) {
        double in = (double)shape.l[i].in, out = (double)shape.l[i].out;
        flop += 3 * 2.0 * TOKENS * in * out;
        elems += TOKENS * in + out * in + 2 * TOKENS * out; /* input, weight, grad_output, output */
    }
    free(shape.buf);
    printf("fp8prof bench: a training loop's GEMMs (small GPT-2: %d layers, %d channels, %d tokens, vocabulary %d; "
           "%d linears x 3 GEMMs, %.0f MFLOP and %.2f M probed elements a step; 1 active %s + %d shadows "
           "on each of %d probes; mean of %d steps, median of %d rounds, interleaved)\n",
           LAYERS, CH, TOKENS, VOCAB, NLIN, flop / 1e6, elems / 1e6, active, NSHADOW, NPROBE * NLIN, STEPS - WARM, ROUNDS);
    int ok = 1;
    /* OpenBLAS and the probes on one thread, on two, OpenBLAS on two with
     * the probes on one (no target: it shows what the probes' second
     * thread costs beside OpenBLAS's, whose idle threads spin) and on one
     * with the probes on two (no target: a core left to the probes, as a
     * GPU loop's host leaves them); then OpenBLAS on one with the records
     * made by the run's background thread (option background: the step's
     * thread copies the tensors and reads the amaxes; the records take the
     * other core) */
    const int conf[5][3] = {{1, 1, 0}, {2, 2, 0}, {2, 1, 0}, {1, 2, 0}, {1, 1, 1}};
    double every1 = 0, every1_part[2] = {0, 0}; /* (multiples, shares of the one-thread plain step) */
    double r3[2][3] = {{0}};                     /* (the one-thread row's ratios and rounds: prices()) */
    for (int c = 0; c < 5; c++) {
        int threads = conf[c][0], pt = conf[c][1], bg = conf[c][2];
        openblas_set_num_threads(threads);
        double t[KINDS], tail[KINDS], lo[KINDS], hi[KINDS], rec[KINDS], end[KINDS];
        if (measure(pt, bg, NSHADOW, t, tail, lo, hi, rec, end) != 0)
            return 1;
        if (bg)
            printf("OpenBLAS threads %d, records in the background (blocks of %d steps, each until its records are made; "
                   "the wait at a block's end, the thread's flush of its last ten steps, included: every=10 %.2f ms, every=1 %.2f ms): "
                   "plain step %.2f ms; probed every=10 %.2f ms (%.3fx), every=1 %.2f ms (%.3fx)\n",
                   threads, BLOCK, tail[1] * 1e3, tail[2] * 1e3, t[0] * 1e3, t[1] * 1e3, t[1] / t[0], t[2] * 1e3,
                   t[2] / t[0]);
        else
            printf("OpenBLAS threads %d, probe threads %d: plain step %.2f ms (sgemm %.1f GFLOP/s); probed every=10 "
                   "%.2f ms (%.3fx), every=1 %.2f ms (%.3fx; the probes %.2f Gelem/s); the amax steps alone "
                   "(every=10^9) %.2f ms (%.3fx, rounds %.3f-%.3fx)\n",
                   threads, pt, t[0] * 1e3, flop / t[0] / 1e9, t[1] * 1e3, t[1] / t[0], t[2] * 1e3, t[2] / t[0],
                   elems / (t[2] - t[0]) / 1e9, t[3] * 1e3, t[3] / t[0], lo[3], hi[3]);
        if (c == 0) {
            every1 = t[2] / t[0], every1_part[0] = rec[2] / t[0], every1_part[1] = end[2] / t[0];
            ratios(t, lo, hi, r3);
        }
        if (threads != pt)
            continue;
        char name[64];
        char how[16];
        snprintf(how, sizeof how, bg ? "background" : "threads%d", threads);
        snprintf(name, sizeof name, "loop_every10_%s", how);
        ok &= loop_target(name, t[1], t[0], lo[1], hi[1], GOAL_EVERY10);
        /* nine steps in ten of every=10 are amax steps, the tenth more */
        if (!bg && lo[3] > GOAL_EVERY10)
            printf("  (below the amax steps alone, %.3f-%.3fx in every round: unreachable with these threads)\n",
                   lo[3], hi[3]);
        snprintf(name, sizeof name, "loop_every1_%s", how);
        ok &= loop_target(name, t[2], t[0], lo[2], hi[2], GOAL_EVERY1);
    }
    openblas_set_num_threads(1);
    cross_core();
    floors(every1, every1_part);
    if (prices(r3) != 0)
        return 1;
    printf("\n%s\n", ok ? "all loop targets met" : "some loop targets missed");
    return 0;
}
