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

/* A training session: the data, the run file, the model, the batches. */
typedef struct {
    const train_options *o;
    corpus c;
    const char *source;
    int rank, world, quiet;
    size_t T, B, N, ntrain, nval; /* context, global batch, this rank's tokens; the text's split */
    double h;                     /* unigram entropy of the training text */
    model_precision prec;
    char shape[128], acctxt[160];
    fp8_probe_run *run;
    model *m;
    gsl_rng *rng, *vrng;
    int *x, *y, *xr, *yr;         /* the global batch; this rank's sequences */
} session;

/* the text: --data files, else Debian's fortunes (else its licenses) */
static int load_text(session *S)
{
    const train_options *o = S->o;
    if (o->ndata > 0) {
        for (int i = 0; i < o->ndata; i++)
            if (append_file(&S->c, o->data[i]) != 0) {
                fprintf(stderr, "fp8prof: train: cannot read %s\n", o->data[i]);
                return 1;
            }
        S->source = "--data files";
        return 0;
    }
    append_dir(&S->c, "/usr/share/games/fortunes");
    S->source = "fortunes";
    if (S->c.n < 100000) {
        append_dir(&S->c, "/usr/share/common-licenses");
        S->source = "common-licenses";
    }
    return 0;
}

/* the accumulator's description for /meta; 2 when the recipe has no FP8 GEMM to emulate */
static int describe_accumulator(session *S)
{
    const train_options *o = S->o;
    int acc_on = o->acc.acc_bits || o->acc.promote;
    if (!acc_on)
        snprintf(S->acctxt, sizeof S->acctxt, "fp32 (cblas_sgemm)");
    else if (o->acc.acc_bits)
        snprintf(S->acctxt, sizeof S->acctxt, "emulated: %d-bit %s accumulator, %s%.0d%s", o->acc.acc_bits,
                 o->acc.round ? "nearest-even" : "truncating", o->acc.promote ? "promoted to fp32 every " : "never promoted",
                 o->acc.promote, o->acc.promote ? " products" : "");
    else
        snprintf(S->acctxt, sizeof S->acctxt, "emulated: fp32 accumulator, sequential, promoted every %d products",
                 o->acc.promote);
    if (acc_on && S->prec != PREC_FP8) {
        fprintf(stderr, "fp8prof: train: --acc-bits/--promote model FP8 GEMMs; recipe %s has none\n", o->recipe);
        return 2;
    }
    return 0;
}

/* the run file with the keys the analyses read (docs/schema.md);
 * parallel_dp/tp only under mpirun */
static int open_run(session *S)
{
    const train_options *o = S->o;
    char seedtxt[32], dseedtxt[32], warmtxt[32], stepstxt[32], worldtxt[16];
    snprintf(seedtxt, sizeof seedtxt, "%lu", o->seed);
    snprintf(dseedtxt, sizeof dseedtxt, "%lu", o->data_seed);
    snprintf(warmtxt, sizeof warmtxt, "%ld", o->warmup);
    snprintf(stepstxt, sizeof stepstxt, "%ld", o->steps);
    snprintf(worldtxt, sizeof worldtxt, "%d", S->world);
    int hidden = o->model.hidden > 0 ? o->model.hidden : ((8 * o->model.dim / 3) + 15) / 16 * 16; /* model.c's rule */
    snprintf(S->shape, sizeof S->shape, "layers %d dim %d hidden %d heads %d ctx %d batch %d", o->model.layers,
             o->model.dim, hidden, o->model.heads, o->model.ctx, o->model.batch);
    const char *kv[] = {"source", "fp8prof train", "recipe", o->recipe, "applied", S->prec == PREC_FP8 ? "yes" : "no",
                        "model", S->shape, "seed", seedtxt, "data_seed", dseedtxt, "lr_warmup", warmtxt,
                        "steps", stepstxt, "data", S->source, "smooth_swiglu",
                        o->smooth_swiglu == SMOOTH_FOLD        ? "fold"
                        : o->smooth_swiglu == SMOOTH_PUBLISHED ? "published"
                                                               : "no",
                        "accumulation", S->acctxt, "parallel_dp", worldtxt, "parallel_tp", "1"};
    const int nkv = (int)(sizeof kv / sizeof kv[0] / 2);
    fp8_probe_options po = fp8_probe_defaults();
    po.snapshot_pattern = "*.mlp.w2.input";
    po.snapshot_every = o->snapshot_every;
    po.snapshot_pairs = 1; /* step-to-step (lag 1) changes of rows and blocks */
    po.every = o->record_every; /* recipe states still advance on every step */
    po.block_amax_every = o->block_amax_every;
    if (o->mpi) {
        const char *gname[] = {"dp"};
        MPI_Comm gcomm[] = {MPI_COMM_WORLD};
        S->run = fp8_probe_open_mpi(o->out, &po, kv, nkv, MPI_COMM_WORLD, gname, gcomm, 1);
    } else
        S->run = fp8_probe_open(o->out, &po, kv, nkv - 2);
    if (!S->run) {
        fprintf(stderr, "fp8prof: train: %s\n", fp8_error_message());
        return 1;
    }
    return 0;
}

/* the model (every rank must have its model before the first collective) */
static int make_model(session *S, const model_config *cfg)
{
    const train_options *o = S->o;
    S->m = model_create(cfg, o->seed, S->prec, S->prec == PREC_FP8 ? o->recipe : NULL, o->shadows, o->nshadow, S->run,
                        o->smooth_swiglu, o->fp8_head);
    if (S->m)
        model_set_gemm_error(S->m, o->gemm_every < 0 ? o->record_every : o->gemm_every);
    if (S->m && (o->acc.acc_bits || o->acc.promote) && model_set_accumulator(S->m, &o->acc) != FP8_OK) {
        model_free(S->m);
        S->m = NULL;
    }
    int ok = S->m != NULL;
    if (o->mpi)
        MPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (!ok) {
        fprintf(stderr, "fp8prof: train: %s\n", S->m ? "another rank failed to build its model" : fp8_error_message());
        return 1;
    }
    return 0;
}

/* Everything before the first step: 0, or the exit status (message printed). */
static int session_begin(session *S)
{
    const train_options *o = S->o;
    if (load_text(S))
        return 1;
    if (o->mpi) {
        MPI_Comm_rank(MPI_COMM_WORLD, &S->rank);
        MPI_Comm_size(MPI_COMM_WORLD, &S->world);
    }
    if (o->model.batch % S->world) {
        if (S->rank == 0)
            fprintf(stderr, "fp8prof: train: --batch %d does not split over %d ranks\n", o->model.batch, S->world);
        return 2;
    }
    /* B: the global batch every rank draws; b of it are this rank's */
    size_t b = (size_t)o->model.batch / (size_t)S->world;
    S->T = (size_t)o->model.ctx, S->B = (size_t)o->model.batch, S->N = b * S->T;
    model_config cfg = o->model;
    cfg.batch = (int)b;
    if (S->c.n < 20 * (S->T + 2)) {
        fprintf(stderr, "fp8prof: train: only %zu bytes of text (install Debian's fortunes or pass --data)\n", S->c.n);
        return 1;
    }
    S->ntrain = S->c.n / 10 * 9, S->nval = S->c.n - S->ntrain;
    S->h = unigram_entropy(S->c.bytes, S->ntrain);
    S->prec = !strcmp(o->recipe, "fp32") ? PREC_FP32 : !strcmp(o->recipe, "bf16") ? PREC_BF16 : PREC_FP8;
    int rc = describe_accumulator(S);
    if (!rc)
        rc = open_run(S);
    if (!rc)
        rc = make_model(S, &cfg);
    if (rc)
        return rc;
    S->quiet = o->quiet || S->rank != 0;
    if (!S->quiet)
        printf("data: %s, %zu bytes (train %zu, validation %zu); unigram entropy %.3f nats/byte\n"
               "model: %s, hidden %d, %zu parameters; recipe %s%s\n",
               S->source, S->c.n, S->ntrain, S->nval, S->h, S->shape, model_cfg(S->m)->hidden,
               model_num_params(S->m), o->recipe,
               o->smooth_swiglu == SMOOTH_FOLD        ? " + Smooth SwiGLU (folded into w2)"
               : o->smooth_swiglu == SMOOTH_PUBLISHED ? " + Smooth SwiGLU (as published)"
                                                      : "");
    S->rng = gsl_rng_alloc(gsl_rng_mt19937), S->vrng = gsl_rng_alloc(gsl_rng_mt19937);
    gsl_rng_set(S->rng, o->data_seed); /* the batches; o->seed drew the weights */
    S->x = malloc(S->B * S->T * sizeof *S->x), S->y = malloc(S->B * S->T * sizeof *S->y);
    S->xr = S->x + (size_t)S->rank * S->N, S->yr = S->y + (size_t)S->rank * S->N;
    return 0;
}

static void session_end(session *S)
{
    if (S->rng)
        gsl_rng_free(S->rng);
    if (S->vrng)
        gsl_rng_free(S->vrng);
    free(S->x), free(S->y), free(S->c.bytes);
    model_free(S->m);
}

/* linear warm-up, then cosine decay to 10% of the peak */
static float lr_at(const train_options *o, long step)
{
    return o->lr * (step < o->warmup ? (float)(step + 1) / (float)o->warmup
                                     : 0.1f + 0.9f * 0.5f * (1.0f + cosf((float)M_PI * (float)(step - o->warmup) /
                                                                          (float)(o->steps - o->warmup))));
}

/* one optimisation step; the loss (the mean over ranks) and *gn the
 * gradient's norm */
static float train_step(session *S, long step, float lr, float *gn)
{
    const train_options *o = S->o;
    draw(S->rng, S->c.bytes, S->ntrain, S->x, S->y, S->B, S->T);
    float loss = model_forward(S->m, S->xr, S->yr, step, 1);
    if (step % o->record_every == 0)
        model_record_swiglu(S->m, step); /* (this step's SwiGLU output and weights) */
    model_backward(S->m, step);
    if (o->mpi) {
        /* sum over ranks, then the mean: one rank's gradient passes unchanged */
        float *g = model_grads(S->m);
        size_t np = model_num_params(S->m);
        MPI_Allreduce(MPI_IN_PLACE, g, (int)np, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        if (S->world > 1)
            for (size_t i = 0; i < np; i++)
                g[i] /= (float)S->world;
        float ls = loss;
        MPI_Allreduce(MPI_IN_PLACE, &ls, 1, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        loss = S->world > 1 ? ls / (float)S->world : ls;
    }
    *gn = model_grad_norm(S->m);
    model_adamw(S->m, lr, 0.9f, 0.95f, 1e-8f, o->weight_decay, step + 1);
    return loss;
}

/* the validation loss: the same 8 batches every time, the mean over ranks */
static double validate(session *S, long step)
{
    gsl_rng_set(S->vrng, 12345);
    double vl = 0;
    for (int k = 0; k < 8; k++) {
        draw(S->vrng, S->c.bytes + S->ntrain, S->nval, S->x, S->y, S->B, S->T);
        vl += model_forward(S->m, S->xr, S->yr, step, 0);
    }
    if (S->o->mpi) {
        MPI_Allreduce(MPI_IN_PLACE, &vl, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
        vl = S->world > 1 ? vl / S->world : vl;
    }
    return vl / 8;
}

/* the step's line: rewritten in place on a terminal, else at validations */
static void progress_line(const session *S, long step, float loss, double last_val, double dt, double t0, int tty)
{
    const train_options *o = S->o;
    double el = now() - t0, eta = el / (double)(step + 1) * (double)(o->steps - step - 1);
    char val[32] = ""; /* (nothing before the first validation) */
    if (!isnan(last_val))
        snprintf(val, sizeof val, " val %.4f", last_val);
    if (tty)
        printf("\rstep %ld/%ld  loss %.4f %s  %.0f tok/s  ETA %.0fs   ", step + 1, o->steps, loss, val,
               (double)S->N / dt, eta);
    else if ((step + 1) % o->val_every == 0 || step + 1 == o->steps)
        printf("step %ld/%ld loss %.4f%s %.0f tok/s\n", step + 1, o->steps, loss, val, (double)S->N / dt);
    fflush(stdout);
}

int train_run(const train_options *o)
{
    session S;
    memset(&S, 0, sizeof S);
    S.o = o, S.world = 1;
    int rc = session_begin(&S);
    if (rc) {
        if (S.run)
            fp8_probe_close(S.run);
        session_end(&S);
        return rc;
    }
    interrupted = 0;
    void (*old)(int) = signal(SIGINT, on_sigint);
    int tty = isatty(STDOUT_FILENO), stopped = 0;
    double t0 = now(), last_val = NAN;
    float loss = 0;
    long step;
    for (step = 0; step < o->steps && !interrupted; step++) {
        double ts = now();
        float lr = lr_at(o, step), gn;
        loss = train_step(&S, step, lr, &gn);
        double dt = now() - ts;
        fp8_probe_scalar(S.run, "loss", step, loss);
        fp8_probe_scalar(S.run, "lr", step, lr);
        fp8_probe_scalar(S.run, "grad_norm", step, gn);
        fp8_probe_scalar(S.run, "tokens_per_s", step, (double)S.N / dt);
        if ((step + 1) % o->val_every == 0 || step + 1 == o->steps) {
            last_val = validate(&S, step);
            fp8_probe_scalar(S.run, "val_loss", step, last_val);
        }
        if (fp8_probe_step_end(S.run, step) != FP8_OK && !stopped) { /* said once; training goes on */
            stopped = 1;
            fprintf(stderr, "fp8prof: train: recording stopped at step %ld: %s\n", step, fp8_error_message());
        }
        if (o->mpi) { /* Ctrl-C on any rank stops every rank at the same step */
            int stop = interrupted;
            MPI_Allreduce(MPI_IN_PLACE, &stop, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
            interrupted = stop;
        }
        if (!S.quiet)
            progress_line(&S, step, loss, last_val, dt, t0, tty);
    }
    signal(SIGINT, old);
    rc = fp8_probe_close(S.run) == FP8_OK ? 0 : 1;
    if (!S.quiet) {
        double el = now() - t0;
        char took[32], val[48] = "";
        if (el < 10)
            snprintf(took, sizeof took, "%.0f ms", el * 1e3); /* short runs: a clock that resolves them */
        else
            snprintf(took, sizeof took, "%.1f s", el);
        if (!isnan(last_val))
            snprintf(val, sizeof val, ", validation %.4f", last_val);
        printf("%s%s after %ld steps in %s: loss %.4f%s nats/byte (unigram entropy %.3f); run %s\n", tty ? "\n" : "",
               interrupted ? "interrupted" : "done", step, took, loss, val, S.h, o->out);
    }
    session_end(&S);
    return interrupted ? 130 : rc;
}
