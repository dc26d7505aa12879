/*
 * cmd_synth.c — `fp8prof synth`: a synthetic run through the probe API, for
 * tests, benchmarks and a first look at the analyses.  Tensor kinds (cycled
 * over the tensors): Gaussian, heavy-tailed Student-t (nu = 4), Gaussian
 * with outlier channels, a slowly drifting scale, a sudden 8x jump at
 * mid-run, and NaN bursts.  Random numbers: GSL's mt19937, seeded.
 *
 * Multi-rank runs: --ranks N writes N rank files and their index from one
 * process (no amax reduction: rank r's tensors are drawn from seed S and r,
 * so ranks differ as data-parallel shards do); under mpirun each rank
 * writes its own through fp8_probe_open_mpi with groups "tp" (consecutive
 * blocks of --tp ranks, Megatron's order) and "dp" (stride --tp), so that
 * reduce=tp / reduce=dp recipes reduce for real.  --wrong-group registers
 * the dp communicator under the name "tp": the bug the ranks analysis must
 * catch.
 */
#include <gsl/gsl_randist.h>
#include <gsl/gsl_rng.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "fp8_file.h"
#include "fp8_probe.h"
#include "fp8_probe_mpi.h"
#include "fp8_ranks.h"
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


typedef struct {
    long steps, tensors, rows, cols, seed, ranks, tp, every;
    const char *active;
    const char *shadows[8];
    int nsh, wrong_group;
} synth_opts;

/* The values synth_meta's pairs point into (a member list: up to 1024
 * ranks of up to 5 characters) */
typedef struct {
    char v[7][64];
    char dp[8192], tp[8192];
} synth_text;

/* The metadata of rank `rank` (or of the index, rank < 0), values in *t */
static int synth_meta(const synth_opts *o, int rank, synth_text *t, const char **kv)
{
    int n = 0;
    snprintf(t->v[0], 64, "%ld", o->seed);
    snprintf(t->v[1], 64, "%ldx%ld", o->rows, o->cols);
    snprintf(t->v[2], 64, "%ld", o->tp);
    snprintf(t->v[3], 64, "%ld", o->ranks / o->tp);
    kv[2 * n] = "source", kv[2 * n + 1] = "fp8prof synth", n++;
    kv[2 * n] = "seed", kv[2 * n + 1] = t->v[0], n++;
    kv[2 * n] = "shape", kv[2 * n + 1] = t->v[1], n++;
    if (o->ranks > 1 || o->tp > 1) {
        kv[2 * n] = "parallel_tp", kv[2 * n + 1] = t->v[2], n++;
        kv[2 * n] = "parallel_dp", kv[2 * n + 1] = t->v[3], n++;
    }
    if (rank >= 0 && o->ranks > 1 && !getenv("OMPI_COMM_WORLD_SIZE")) {
        /* simulated ranks: the same keys fp8_probe_open_mpi writes, the
         * groups as the declared layout has them */
        snprintf(t->v[4], 64, "%d", rank);
        snprintf(t->v[5], 64, "%ld", o->ranks);
        fp8_ranks_layout_members((int)o->ranks, (int)o->tp, "dp", rank, t->dp, sizeof t->dp);
        fp8_ranks_layout_members((int)o->ranks, (int)o->tp, "tp", rank, t->tp, sizeof t->tp);
        kv[2 * n] = "mpi_rank", kv[2 * n + 1] = t->v[4], n++;
        kv[2 * n] = "mpi_world_size", kv[2 * n + 1] = t->v[5], n++;
        kv[2 * n] = "mpi_groups", kv[2 * n + 1] = "dp,tp", n++;
        kv[2 * n] = "mpi_group.dp", kv[2 * n + 1] = t->dp, n++;
        kv[2 * n] = "mpi_group.tp", kv[2 * n + 1] = t->tp, n++;
        kv[2 * n] = "mpi_simulated", kv[2 * n + 1] = "yes (one process, no amax reduction)", n++;
    }
    return n;
}

/* Declare every tensor of one rank's run. */
static int synth_declare(fp8_probe_run *run, const synth_opts *o, fp8_probe **p)
{
    for (long t = 0; t < o->tensors; t++) {
        char name[FP8_NAME_MAX];
        snprintf(name, sizeof name, "layers.%ld.%s.%s", t / 3, kinds[t % NKINDS], t % 3 == 2 ? "grad_output" : "input");
        p[t] = fp8_probe_declare(run, name, t % 3 == 2 ? FP8_ROLE_GRADIENT : FP8_ROLE_ACTIVATION, (int)(t / 3),
                                 o->active, o->shadows, o->nsh);
        if (!p[t]) {
            fprintf(stderr, "fp8prof: synth: %s\n", fp8_error_message());
            return 2;
        }
    }
    return 0;
}

/* Under mpirun: this rank's run, with groups tp and dp (NULL: failed). */
static fp8_probe_run *synth_open_mpi(const char *out, synth_opts *o)
{
    int rank = 0, size = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (size % o->tp) {
        if (rank == 0)
            fprintf(stderr, "fp8prof: synth: --tp %ld does not divide the %d ranks\n", o->tp, size);
        return NULL;
    }
    o->ranks = size;
    MPI_Comm tp, dp;
    MPI_Comm_split(MPI_COMM_WORLD, rank / (int)o->tp, rank, &tp);
    MPI_Comm_split(MPI_COMM_WORLD, rank % (int)o->tp, rank, &dp);
    const char *names[] = {"dp", "tp"};
    MPI_Comm comms[] = {dp, o->wrong_group ? dp : tp};
    synth_text text;
    const char *kv[40];
    int nkv = synth_meta(o, -1, &text, kv);
    fp8_probe_options po = fp8_probe_defaults();
    po.every = o->every;
    fp8_probe_run *run = fp8_probe_open_mpi(out, &po, kv, nkv, MPI_COMM_WORLD, names, comms, 2);
    if (!run)
        fprintf(stderr, "fp8prof: synth: rank %d: %s\n", rank, fp8_error_message());
    MPI_Comm_free(&tp);
    MPI_Comm_free(&dp);
    return run;
}

/* The options into *o and *out: 0, or the usage error's status. */
static int synth_args(int argc, char **argv, synth_opts *o, const char **out)
{
    const char *shadow_default[] = {"e4m3:current", "e4m3:block=1x128", "mxfp8"};
    int user_shadows = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int rc = 0;
        if (strcmp(a, "--wrong-group") == 0) {
            o->wrong_group = 1;
            continue;
        }
        if (i + 1 >= argc && (strcmp(a, "-o") == 0 || strncmp(a, "--", 2) == 0))
            return cli_usage_error("synth: %s needs a value", a);
        if (strcmp(a, "-o") == 0)
            *out = argv[++i];
        else if (strcmp(a, "--steps") == 0)
            rc = parse_long(a, argv[++i], 1, 10000000, &o->steps);
        else if (strcmp(a, "--tensors") == 0)
            rc = parse_long(a, argv[++i], 1, 100000, &o->tensors);
        else if (strcmp(a, "--rows") == 0)
            rc = parse_long(a, argv[++i], 1, 1 << 20, &o->rows);
        else if (strcmp(a, "--cols") == 0)
            rc = parse_long(a, argv[++i], 1, 1 << 20, &o->cols);
        else if (strcmp(a, "--seed") == 0)
            rc = parse_long(a, argv[++i], 0, 0x7FFFFFFF, &o->seed);
        else if (strcmp(a, "--record-every") == 0)
            rc = parse_long(a, argv[++i], 1, 10000000, &o->every);
        else if (strcmp(a, "--ranks") == 0)
            rc = parse_long(a, argv[++i], 1, 1024, &o->ranks);
        else if (strcmp(a, "--tp") == 0)
            rc = parse_long(a, argv[++i], 1, 1024, &o->tp);
        else if (strcmp(a, "--recipe") == 0)
            o->active = argv[++i];
        else if (strcmp(a, "--shadow") == 0) {
            if (o->nsh == 8)
                return cli_usage_error("synth: at most 8 --shadow recipes");
            o->shadows[o->nsh++] = argv[++i];
            user_shadows = 1;
        } else
            return cli_usage_error("synth: unknown option '%s'", a);
        if (rc)
            return rc;
    }
    if (!*out)
        return cli_usage_error("synth needs -o RUN.h5");
    if (!user_shadows)
        for (o->nsh = 0; o->nsh < 3; o->nsh++)
            o->shadows[o->nsh] = shadow_default[o->nsh];
    return 0;
}

/* One synth: its ranks in this process (one under mpirun), their runs,
 * probes, random streams, and the final names of their files. */
typedef struct {
    synth_opts o;
    const char *out;
    int mpi, world_rank;
    long nlocal;
    fp8_probe_options po;
    char run_id[FP8_RUN_ID_LEN + 1];
    char (*final)[1100];
    long nfinal;
    fp8_probe_run **run;
    fp8_probe **p;
    gsl_rng **rng;
    float *x;
} synth_job;

/* One process: rank r's file is written as FILE.partial (locked: a second
 * synth of the same output is refused) and renamed into place when
 * complete, so a failure leaves no partial run under the final name. */
static int synth_open_local(synth_job *J, long r)
{
    const synth_opts *o = &J->o;
    char path[1200];
    synth_text text;
    const char *kv[40];
    long pid = 0;
    if (o->ranks == 1 ? snprintf(J->final[r], sizeof J->final[r], "%s", J->out) >= (int)sizeof J->final[r]
                      : fp8_rank_path(J->out, (int)r, J->final[r], sizeof J->final[r]) != 0)
        return cli_usage_error("synth: output path too long");
    if (fp8_file_locked(J->final[r], &pid)) {
        fprintf(stderr, "fp8prof: synth: %s is a run file that %s is writing: not replaced; choose another output\n",
                J->final[r], pid > 0 ? "another process" : "this process");
        return 1;
    }
    snprintf(path, sizeof path, "%s.partial", J->final[r]);
    J->nfinal = r + 1;
    J->run[r] = fp8_probe_open(path, &J->po, kv, synth_meta(o, o->ranks == 1 ? 0 : (int)r, &text, kv));
    if (!J->run[r]) {
        fprintf(stderr, "fp8prof: synth: %s\n", fp8_error_message());
        return 1;
    }
    return 0;
}

/* every local rank's run, random stream and probes */
static int synth_open(synth_job *J)
{
    int rc = 0;
    for (long r = 0; r < J->nlocal && !rc; r++) {
        long rank = J->mpi ? J->world_rank : r;
        if (J->mpi)
            rc = !(J->run[r] = synth_open_mpi(J->out, &J->o));
        else
            rc = synth_open_local(J, r);
        J->rng[r] = rc ? NULL : gsl_rng_alloc(gsl_rng_mt19937);
        if (!rc && !J->rng[r])
            rc = 1;
        if (!rc) /* rank r's stream: rank 0 of a multi-rank run draws what a one-process run draws */
            gsl_rng_set(J->rng[r], (unsigned long)J->o.seed + 1000003ul * (unsigned long)rank);
        if (!rc)
            rc = synth_declare(J->run[r], &J->o, J->p + r * J->o.tensors);
    }
    return rc;
}

/* every step: each rank's tensors drawn and cast, its loss and lr */
static int synth_steps(synth_job *J)
{
    const synth_opts *o = &J->o;
    int rc = 0;
    for (long step = 0; step < o->steps && !rc; step++)
        for (long r = 0; r < J->nlocal && !rc; r++) {
            fp8_probe **pr = J->p + r * o->tensors;
            for (long t = 0; t < o->tensors; t++) {
                gen(J->rng[r], (int)(t % NKINDS), step, o->steps, o->rows, o->cols, J->x);
                int e = fp8_probe_apply(pr[t], step, J->x, (size_t)o->rows, (size_t)o->cols, J->x);
                if (e != FP8_OK && J->mpi) /* a failed reduction: said, the run goes on */
                    fprintf(stderr, "fp8prof: synth: rank %d: %s\n", J->world_rank, fp8_error_message());
            }
            fp8_probe_scalar(J->run[r], "loss", step,
                             5.0 * exp(-(double)step / (double)o->steps) + 0.05 * gsl_rng_uniform(J->rng[r]));
            fp8_probe_scalar(J->run[r], "lr", step, 3e-4);
            if (fp8_probe_step_end(J->run[r], step) != FP8_OK) {
                fprintf(stderr, "fp8prof: synth: %s\n", fp8_error_message());
                if (!J->mpi)
                    rc = 1;
            }
        }
    return rc;
}

/* The runs closed; the finished files into place (or, after a failure,
 * the partial ones removed: nothing incomplete under a final name); the
 * index once every rank file is in place.  The status after all that. */
static int synth_finish(synth_job *J, int rc)
{
    for (long r = 0; J->run && r < J->nlocal; r++) {
        if (J->run[r] && fp8_probe_close(J->run[r]) != FP8_OK && !rc) {
            fprintf(stderr, "fp8prof: synth: %s\n", fp8_error_message());
            rc = 1;
        }
        if (J->rng[r])
            gsl_rng_free(J->rng[r]);
    }
    for (long r = 0; J->final && r < J->nfinal; r++) {
        char path[1200];
        snprintf(path, sizeof path, "%s.partial", J->final[r]);
        if (!J->run[r])
            continue; /* (not opened: the file is another writer's, or was never made) */
        if (rc)
            unlink(path);
        else if (fp8_file_commit(path, J->final[r]) != FP8_OK) {
            fprintf(stderr, "fp8prof: synth: %s\n", fp8_error_message());
            rc = 1;
        }
    }
    if (!rc && !J->mpi && J->o.ranks > 1) {
        synth_text text;
        const char *kv[40];
        int nkv = synth_meta(&J->o, -1, &text, kv);
        if (fp8_ranks_write_index(J->out, (int)J->o.ranks, kv, nkv, J->run_id) != FP8_OK) {
            fprintf(stderr, "fp8prof: synth: %s\n", fp8_error_message());
            rc = 1;
        }
    }
    return rc;
}

int cmd_synth(int argc, char **argv)
{
    synth_job J = {.o = {.steps = 300, .tensors = 12, .rows = 32, .cols = 256, .seed = 1, .ranks = 1, .tp = 1,
                         .every = 1, .active = "hybrid:delayed:history=16"}};
    int rc = synth_args(argc, argv, &J.o, &J.out);
    if (rc)
        return rc;
    const synth_opts *o = &J.o;
    J.mpi = getenv("OMPI_COMM_WORLD_SIZE") != NULL;
    if (J.mpi && o->ranks > 1)
        return cli_usage_error("synth: --ranks is for one process; under mpirun the ranks are mpirun's");
    if (!J.mpi && o->ranks % o->tp)
        return cli_usage_error("synth: --tp %ld does not divide --ranks %ld", o->tp, o->ranks);
    if (!J.mpi && o->wrong_group)
        return cli_usage_error("synth: --wrong-group needs real ranks (mpirun)");
    if (J.mpi) {
        MPI_Init(NULL, NULL);
        MPI_Comm_rank(MPI_COMM_WORLD, &J.world_rank);
    }
    J.nlocal = J.mpi ? 1 : o->ranks;
    J.po = fp8_probe_defaults();
    J.po.every = o->every; /* statistics every N steps; the every-step series always */
    fp8_store_run_id_new(J.run_id); /* one id for every rank file of this run and its index */
    J.po.run_id = J.run_id;
    J.final = calloc((size_t)J.nlocal, sizeof *J.final);
    J.run = calloc((size_t)J.nlocal, sizeof *J.run);
    J.p = calloc((size_t)(J.nlocal * o->tensors), sizeof *J.p);
    J.rng = calloc((size_t)J.nlocal, sizeof *J.rng);
    J.x = malloc((size_t)(o->rows * o->cols) * sizeof *J.x);
    if (!J.run || !J.p || !J.rng || !J.x || !J.final) {
        fprintf(stderr, "fp8prof: synth: out of memory\n");
        rc = 1;
    }
    if (!rc)
        rc = synth_open(&J);
    if (!rc)
        rc = synth_steps(&J);
    rc = synth_finish(&J, rc);
    if (!rc && J.world_rank == 0)
        printf("wrote %s: %ld steps x %ld tensors (%ldx%ld), 1 + %d recipes%s\n", J.out, o->steps, o->tensors,
               o->rows, o->cols, o->nsh, o->ranks > 1 ? ", one file per rank and their index" : "");
    free(J.rng), free(J.run), free(J.p), free(J.x), free(J.final);
    if (J.mpi) {
        /* one rank's failure is every rank's: the index names them all */
        int any = rc;
        MPI_Allreduce(MPI_IN_PLACE, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
        MPI_Finalize();
        rc = any;
    }
    return rc;
}
