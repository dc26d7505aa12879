/*
 * train.c — the training loop (train.h).  Data: Debian's fortunes text by
 * default (else /usr/share/common-licenses), bytes as tokens; the first 90%
 * trains, the last 10% validates.  Batches are random windows drawn with
 * GSL's RNG from the seed.  AdamW (0.9, 0.95), linear warm-up then cosine
 * decay to 10% of the peak.  Deterministic for its two seeds (one OpenBLAS
 * thread): `seed` draws the initial weights, `data_seed` the batches, so a
 * replicate can change one without the other.
 *
 * Data parallel (o->mpi, under mpirun): every rank draws the same global
 * batch from the seed and trains on its contiguous share of the sequences;
 * gradients are summed over the ranks and divided by their number before
 * the update (so every rank keeps the same weights), losses averaged.  One
 * rank computes exactly what a plain run computes; N ranks what one process
 * computes with the whole batch, up to the order of float additions.  Each
 * rank records its own file (fp8_probe_open_mpi), communicator "dp" = world.
 */
#include <mpi.h>
#include <dirent.h>
#include <gsl/gsl_rng.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "fp8_probe_mpi.h"
#include "train.h"

static volatile sig_atomic_t interrupted;
static void on_sigint(int sig)
{
    (void)sig;
    interrupted = 1;
}

train_options train_defaults(void)
{
    train_options o;
    memset(&o, 0, sizeof o);
    o.model = (model_config){4, 96, 4, 0, 128, 8, MODEL_VOCAB};
    o.steps = 300;
    o.lr = 3e-3f;
    o.warmup = 30;
    o.weight_decay = 0.0f;
    o.seed = 1;
    o.data_seed = 1;
    o.recipe = "hybrid:delayed";
    /* shadows that change one factor at a time (docs/analyses.md), for
     * every role: format (E4M3 / E5M2) x timing (delayed / current) at
     * tensor granularity; granularity (tensor -> 1x128 blocks, fp32 scales,
     * no amax floor) in both formats; the scale encoding (fp32 -> UE8M0);
     * and delayed scaling per block (the claim test: per-tensor vs per-block
     * delayed).  make demo adds rows, 128x128 tiles, pow2 and MX
     * (datasets/demo.sh). */
    static const char *factorial[] = {"e4m3:delayed", "e5m2:delayed", "e4m3:current", "e5m2:current",
                                      "e4m3:block=1x128:eps=0", "e5m2:block=1x128:eps=0",
                                      "e4m3:block=1x128:ue8m0,eps=0", "e4m3:block=1x128:delayed,eps=0"};
    o.nshadow = (int)(sizeof factorial / sizeof factorial[0]);
    for (int k = 0; k < o.nshadow; k++)
        o.shadows[k] = factorial[k];
    o.val_every = 50;
    o.record_every = 10;
    o.gemm_every = -1;
    o.snapshot_every = 50;
    o.block_amax_every = 10;
    return o;
}

typedef struct {
    unsigned char *bytes;
    size_t n;
} corpus;

static int append_file(corpus *c, const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return -1;
    unsigned char buf[65536];
    size_t got;
    while ((got = fread(buf, 1, sizeof buf, f)) > 0) {
        unsigned char *g = realloc(c->bytes, c->n + got);
        if (!g) {
            fclose(f);
            return -1;
        }
        c->bytes = g;
        memcpy(c->bytes + c->n, buf, got);
        c->n += got;
    }
    fclose(f);
    return 0;
}

static int cmp_names(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* every regular text file of a directory, in name order (fortunes: not
 * the .dat indexes, not the .u8 duplicates) */
static void append_dir(corpus *c, const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return;
    char *names[1024];
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) && n < 1024) {
        size_t L = strlen(e->d_name);
        if (e->d_name[0] == '.' || (L > 4 && (!strcmp(e->d_name + L - 4, ".dat") || !strcmp(e->d_name + L - 3, ".u8"))))
            continue;
        names[n++] = strdup(e->d_name);
    }
    closedir(d);
    qsort(names, (size_t)n, sizeof *names, cmp_names);
    for (int i = 0; i < n; i++) {
        char path[1200];
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        append_file(c, path);
        free(names[i]);
    }
}

static double unigram_entropy(const unsigned char *b, size_t n) /* nats per byte */
{
    double cnt[MODEL_VOCAB] = {0}, h = 0;
    for (size_t i = 0; i < n; i++)
        cnt[b[i]]++;
    for (int k = 0; k < MODEL_VOCAB; k++)
        if (cnt[k] > 0)
            h -= cnt[k] / (double)n * log(cnt[k] / (double)n);
    return h;
}

static void draw(gsl_rng *rng, const unsigned char *b, size_t n, int *x, int *y, size_t B, size_t T)
{
    for (size_t i = 0; i < B; i++) {
        size_t off = (size_t)gsl_rng_uniform_int(rng, (unsigned long)(n - T - 1));
        for (size_t t = 0; t < T; t++) {
            x[i * T + t] = b[off + t];
            y[i * T + t] = b[off + t + 1];
        }
    }
}

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

int train_run(const train_options *o)
{
    corpus c = {NULL, 0};
    const char *source;
    if (o->ndata > 0) {
        for (int i = 0; i < o->ndata; i++)
            if (append_file(&c, o->data[i]) != 0) {
                fprintf(stderr, "fp8prof: train: cannot read %s\n", o->data[i]);
                free(c.bytes);
                return 1;
            }
        source = "--data files";
    } else {
        append_dir(&c, "/usr/share/games/fortunes");
        source = "fortunes";
        if (c.n < 100000) {
            append_dir(&c, "/usr/share/common-licenses");
            source = "common-licenses";
        }
    }
    int rank = 0, world = 1;
    if (o->mpi) {
        MPI_Comm_rank(MPI_COMM_WORLD, &rank);
        MPI_Comm_size(MPI_COMM_WORLD, &world);
    }
    if (o->model.batch % world) {
        if (rank == 0)
            fprintf(stderr, "fp8prof: train: --batch %d does not split over %d ranks\n", o->model.batch, world);
        free(c.bytes);
        return 2;
    }
    /* B: the global batch every rank draws; b of it are this rank's */
    size_t T = (size_t)o->model.ctx, B = (size_t)o->model.batch, b = B / (size_t)world, N = b * T;
    model_config cfg = o->model;
    cfg.batch = (int)b;
    if (c.n < 20 * (T + 2)) {
        fprintf(stderr, "fp8prof: train: only %zu bytes of text (install Debian's fortunes or pass --data)\n", c.n);
        free(c.bytes);
        return 1;
    }
    size_t ntrain = c.n / 10 * 9, nval = c.n - ntrain;
    double h = unigram_entropy(c.bytes, ntrain);
    model_precision prec = !strcmp(o->recipe, "fp32") ? PREC_FP32 : !strcmp(o->recipe, "bf16") ? PREC_BF16 : PREC_FP8;
    char seedtxt[32], dseedtxt[32], warmtxt[32], shape[128], stepstxt[32], acctxt[160];
    int acc_on = o->acc.acc_bits || o->acc.promote;
    if (!acc_on)
        snprintf(acctxt, sizeof acctxt, "fp32 (cblas_sgemm)");
    else if (o->acc.acc_bits)
        snprintf(acctxt, sizeof acctxt, "emulated: %d-bit %s accumulator, %s%.0d%s", o->acc.acc_bits,
                 o->acc.round ? "nearest-even" : "truncating", o->acc.promote ? "promoted to fp32 every " : "never promoted",
                 o->acc.promote, o->acc.promote ? " products" : "");
    else
        snprintf(acctxt, sizeof acctxt, "emulated: fp32 accumulator, sequential, promoted every %d products",
                 o->acc.promote);
    if (acc_on && prec != PREC_FP8) {
        fprintf(stderr, "fp8prof: train: --acc-bits/--promote model FP8 GEMMs; recipe %s has none\n", o->recipe);
        free(c.bytes);
        return 2;
    }
    snprintf(seedtxt, sizeof seedtxt, "%lu", o->seed);
    snprintf(dseedtxt, sizeof dseedtxt, "%lu", o->data_seed);
    snprintf(warmtxt, sizeof warmtxt, "%ld", o->warmup);
    snprintf(stepstxt, sizeof stepstxt, "%ld", o->steps);
    int hidden = o->model.hidden > 0 ? o->model.hidden : ((8 * o->model.dim / 3) + 15) / 16 * 16; /* model.c's rule */
    snprintf(shape, sizeof shape, "layers %d dim %d hidden %d heads %d ctx %d batch %d", o->model.layers, o->model.dim,
             hidden, o->model.heads, o->model.ctx, o->model.batch);
    char worldtxt[16];
    snprintf(worldtxt, sizeof worldtxt, "%d", world);
    /* the keys the analyses read (docs/schema.md); parallel_dp/tp only under mpirun */
    const char *kv[] = {"source", "fp8prof train", "recipe", o->recipe, "applied", prec == PREC_FP8 ? "yes" : "no",
                        "model", shape, "seed", seedtxt, "data_seed", dseedtxt, "lr_warmup", warmtxt,
                        "steps", stepstxt, "data", source, "smooth_swiglu",
                        o->smooth_swiglu == SMOOTH_FOLD        ? "fold"
                        : o->smooth_swiglu == SMOOTH_PUBLISHED ? "published"
                                                               : "no",
                        "accumulation", acctxt, "parallel_dp", worldtxt, "parallel_tp", "1"};
    const int nkv = (int)(sizeof kv / sizeof kv[0] / 2);
    fp8_probe_options po = fp8_probe_defaults();
    po.snapshot_pattern = "*.mlp.w2.input";
    po.snapshot_every = o->snapshot_every;
    po.snapshot_pairs = 1; /* step-to-step (lag 1) changes of rows and blocks */
    po.every = o->record_every; /* recipe states still advance on every step */
    po.block_amax_every = o->block_amax_every;
    fp8_probe_run *run;
    if (o->mpi) {
        const char *gname[] = {"dp"};
        MPI_Comm gcomm[] = {MPI_COMM_WORLD};
        run = fp8_probe_open_mpi(o->out, &po, kv, nkv, MPI_COMM_WORLD, gname, gcomm, 1);
    } else
        run = fp8_probe_open(o->out, &po, kv, nkv - 2);
    if (!run) {
        fprintf(stderr, "fp8prof: train: %s\n", fp8_error_message());
        free(c.bytes);
        return 1;
    }
    model *m = model_create(&cfg, o->seed, prec, prec == PREC_FP8 ? o->recipe : NULL, o->shadows, o->nshadow,
                            run, o->smooth_swiglu, o->fp8_head);
    if (m)
        model_set_gemm_error(m, o->gemm_every < 0 ? o->record_every : o->gemm_every);
    if (m && acc_on && model_set_accumulator(m, &o->acc) != FP8_OK) {
        model_free(m);
        m = NULL;
    }
    /* every rank must have its model before the first collective */
    int ok = m != NULL;
    if (o->mpi)
        MPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (!ok) {
        fprintf(stderr, "fp8prof: train: %s\n", m ? "another rank failed to build its model" : fp8_error_message());
        model_free(m);
        fp8_probe_close(run);
        free(c.bytes);
        return 1;
    }
    int quiet = o->quiet || rank != 0;
    if (!quiet)
        printf("data: %s, %zu bytes (train %zu, validation %zu); unigram entropy %.3f nats/byte\n"
               "model: %s, hidden %d, %zu parameters; recipe %s%s\n",
               source, c.n, ntrain, nval, h, shape, model_cfg(m)->hidden, model_num_params(m), o->recipe,
               o->smooth_swiglu == SMOOTH_FOLD        ? " + Smooth SwiGLU (folded into w2)"
               : o->smooth_swiglu == SMOOTH_PUBLISHED ? " + Smooth SwiGLU (as published)"
                                                      : "");
    gsl_rng *rng = gsl_rng_alloc(gsl_rng_mt19937), *vrng = gsl_rng_alloc(gsl_rng_mt19937);
    gsl_rng_set(rng, o->data_seed); /* the batches; o->seed drew the weights */
    int *x = malloc(B * T * sizeof *x), *y = malloc(B * T * sizeof *y);
    int *xr = x + (size_t)rank * N, *yr = y + (size_t)rank * N; /* this rank's sequences */
    interrupted = 0;
    void (*old)(int) = signal(SIGINT, on_sigint);
    int tty = isatty(STDOUT_FILENO);
    double t0 = now(), last_val = NAN;
    int stopped = 0;
    float loss = 0;
    long step;
    for (step = 0; step < o->steps && !interrupted; step++) {
        double ts = now();
        float lr = o->lr * (step < o->warmup ? (float)(step + 1) / (float)o->warmup
                                             : 0.1f + 0.9f * 0.5f * (1.0f + cosf((float)M_PI * (float)(step - o->warmup) /
                                                                                  (float)(o->steps - o->warmup))));
        draw(rng, c.bytes, ntrain, x, y, B, T);
        loss = model_forward(m, xr, yr, step, 1);
        if (step % o->record_every == 0)
            model_record_swiglu(m, step); /* (this step's SwiGLU output and weights) */
        model_backward(m, step);
        if (o->mpi) {
            /* sum over ranks, then the mean: one rank's gradient passes unchanged */
            float *g = model_grads(m);
            size_t np = model_num_params(m);
            MPI_Allreduce(MPI_IN_PLACE, g, (int)np, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
            if (world > 1)
                for (size_t i = 0; i < np; i++)
                    g[i] /= (float)world;
            float ls = loss;
            MPI_Allreduce(MPI_IN_PLACE, &ls, 1, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
            loss = world > 1 ? ls / (float)world : ls;
        }
        float gn = model_grad_norm(m);
        model_adamw(m, lr, 0.9f, 0.95f, 1e-8f, o->weight_decay, step + 1);
        double dt = now() - ts;
        fp8_probe_scalar(run, "loss", step, loss);
        fp8_probe_scalar(run, "lr", step, lr);
        fp8_probe_scalar(run, "grad_norm", step, gn);
        fp8_probe_scalar(run, "tokens_per_s", step, (double)N / dt);
        if ((step + 1) % o->val_every == 0 || step + 1 == o->steps) {
            gsl_rng_set(vrng, 12345); /* the same validation batches every time */
            double vl = 0;
            for (int k = 0; k < 8; k++) {
                draw(vrng, c.bytes + ntrain, nval, x, y, B, T);
                vl += model_forward(m, xr, yr, step, 0);
            }
            if (o->mpi) {
                MPI_Allreduce(MPI_IN_PLACE, &vl, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
                vl = world > 1 ? vl / world : vl;
            }
            last_val = vl / 8;
            fp8_probe_scalar(run, "val_loss", step, last_val);
        }
        if (fp8_probe_step_end(run, step) != FP8_OK && !stopped) { /* said once; training goes on */
            stopped = 1;
            fprintf(stderr, "fp8prof: train: recording stopped at step %ld: %s\n", step, fp8_error_message());
        }
        if (o->mpi) { /* Ctrl-C on any rank stops every rank at the same step */
            int stop = interrupted;
            MPI_Allreduce(MPI_IN_PLACE, &stop, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
            interrupted = stop;
        }
        if (!quiet) {
            double el = now() - t0, eta = el / (double)(step + 1) * (double)(o->steps - step - 1);
            char val[32] = ""; /* (nothing before the first validation) */
            if (!isnan(last_val))
                snprintf(val, sizeof val, " val %.4f", last_val);
            if (tty)
                printf("\rstep %ld/%ld  loss %.4f %s  %.0f tok/s  ETA %.0fs   ", step + 1, o->steps, loss, val,
                       (double)N / dt, eta);
            else if ((step + 1) % o->val_every == 0 || step + 1 == o->steps)
                printf("step %ld/%ld loss %.4f%s %.0f tok/s\n", step + 1, o->steps, loss, val, (double)N / dt);
            fflush(stdout);
        }
    }
    signal(SIGINT, old);
    int rc = fp8_probe_close(run) == FP8_OK ? 0 : 1;
    if (!quiet) {
        double el = now() - t0;
        char took[32], val[48] = "";
        if (el < 10)
            snprintf(took, sizeof took, "%.0f ms", el * 1e3); /* short runs: a clock that resolves them */
        else
            snprintf(took, sizeof took, "%.1f s", el);
        if (!isnan(last_val))
            snprintf(val, sizeof val, ", validation %.4f", last_val);
        printf("%s%s after %ld steps in %s: loss %.4f%s nats/byte (unigram entropy %.3f); run %s\n", tty ? "\n" : "",
               interrupted ? "interrupted" : "done", step, took, loss, val, h, o->out);
    }
    gsl_rng_free(rng), gsl_rng_free(vrng);
    free(x), free(y), free(c.bytes);
    model_free(m);
    return interrupted ? 130 : rc;
}
