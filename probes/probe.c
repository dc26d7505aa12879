/*
 * probe.c — the probe API (fp8_probe.h): recipe states per tensor, records
 * into the run file, flush policy, and the rule that storage trouble never
 * reaches the training loop's numbers.
 *
 * Locking: a run's mutex guards its store and probe list; a probe's mutex
 * guards its recipe states.  A probe computes its statistics under its own
 * lock, releases it, then takes the run's lock to store them, so the two are
 * never held in the order probe -> run while step_end holds run -> probe.
 */
#include <fnmatch.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fp8_probe.h"
#include "fp8_store.h"
#include "groups.h"
#include "live.h"
#include "recipe_state.h"
#include "quantize_many.h"
#include "smooth.h"
#include "datasets.h" /* fp8__store_set_threads */

#define MAX_RECIPES 16 /* active + up to 15 shadows */
#define BLOCK_AMAX_WIDTH 128 /* elements per block-amax summary, along a row */

/* What the every-step series notes for a probe between two step ends: the
 * tensor's finite amax over the step's casts, Inf/NaN seen, and the scale
 * each delayed recipe cast with (fixed within a step). */
typedef struct {
    int has;
    int64_t step;
    float amax;
    unsigned nonfinite;
    float delayed_scale[MAX_RECIPES];
    float group_amax[MAX_RECIPES]; /* current recipes with reduce=: the reduced amax (NaN: none) */
} step_acc;

struct fp8_probe {
    fp8_probe_run *run;
    pthread_mutex_t lock;
    char name[FP8_NAME_MAX];
    fp8_role role;
    int layer;
    int tensor_id;
    int nrec, has_active;             /* st[0] is the active recipe when has_active */
    fp8_recipe_state *st[MAX_RECIPES];
    int recipe_id[MAX_RECIPES];
    int group[MAX_RECIPES];           /* the run's group recipe i reduces its amax over, -1 none */
    int touched;                      /* cast something since the last step end */
    int snapshot;                     /* name matches the snapshot pattern      */
    step_acc acc;                     /* this step's series row, not yet stored */
    fp8_stats *last;                  /* [nrec]: the statistics of the last recorded step (last_step) */
    int64_t last_step;                /* -1: none yet */
    int bam_has;                      /* block amaxes of this step, not yet stored */
    int64_t bam_step;
    size_t bam_rows, bam_cols;
    float *bam;
    /* Smooth SwiGLU shadows (recipe option smooth=fold): the input probe this
     * one takes its column scales from, and, on an input probe that is such
     * a source, s_j = 1 / max_i |x_ij| of its latest record at sm_step */
    fp8_probe *smooth_from;
    int sm_src, sm_has;
    int64_t sm_step;
    size_t sm_n;
    float *sm_s;
    float *fold_s; /* this probe's copy of its source's scales for one cast */
    size_t fold_n;
};

struct fp8_probe_run {
    pthread_mutex_t lock;
    fp8_store *store;
    fp8_probe_options opt;
    char *snapshot_pattern;
    fp8_probe **probes;
    int nprobes, cap;
    fp8_probe **tensor_probe; /* [ntensor_probe]: the probe of each tensor id, NULL none */
    int ntensor_probe;
    int64_t steps_since_flush;
    double last_flush;
    int io_failed;
    uint64_t dropped;
    int eval; /* fp8_probe_set_training(run, 0): record nothing, apply only casts */
    fp8__groups *groups; /* named communicators of a multi-rank run (NULL: one process) */
};

void fp8__probe_run_set_groups(fp8_probe_run *run, fp8__groups *g) { run->groups = g; }

/* Recipe i of p is a delayed one reducing over group gi. */
static int reduces_delayed(const fp8_probe *p, int i, int gi)
{
    return p->group[i] == gi && p->st[i]->recipe.kind == FP8_RECIPE_DELAYED;
}

static double now_seconds(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

fp8_probe_run *fp8_probe_open(const char *path, const fp8_probe_options *opts, const char *const *kv, int nkv)
{
    if (!path || !*path) {
        FP8_ERROR(FP8_EINVAL, "fp8_probe_open: %s", path ? "empty path" : "the path is NULL");
        return NULL;
    }
    if (nkv < 0 || (nkv > 0 && !kv)) {
        FP8_ERROR(FP8_EINVAL, "fp8_probe_open %s: %d metadata pairs%s", path, nkv,
                  nkv < 0 ? " (must be >= 0)" : " but the array kv is NULL");
        return NULL;
    }
    for (int i = 0; i < 2 * nkv; i++)
        if (!kv[i] || (i % 2 == 0 && !*kv[i])) {
            FP8_ERROR(FP8_EINVAL, "fp8_probe_open %s: metadata %s %d is %s", path, i % 2 ? "value" : "key", i / 2,
                      kv[i] ? "empty" : "NULL");
            return NULL;
        }
    fp8_probe_options o = opts ? *opts : fp8_probe_defaults();
    if (o.every < 1 || o.flush_steps < 1 || o.snapshot_every < 1 || !(o.flush_seconds >= 0) || o.block_amax_every < 0 ||
        o.threads < 1 || o.threads > 16 || o.every > FP8_STEP_MAX || o.snapshot_every > FP8_STEP_MAX ||
        o.block_amax_every > FP8_STEP_MAX) {
        FP8_ERROR(FP8_EINVAL, "probe options: every, flush_steps and snapshot_every must be in 1..2^62, "
                              "block_amax_every in 0..2^62, flush_seconds >= 0, threads 1..16");
        return NULL;
    }
    if (o.start < 0 || o.start > FP8_STEP_MAX || o.end < -1 || o.end > FP8_STEP_MAX) {
        FP8_ERROR(FP8_EINVAL, "probe options: start must be in 0..2^62 and end in 0..2^62 (or -1: no end); got %lld, %lld",
                  (long long)o.start, (long long)o.end);
        return NULL;
    }
    if (o.run_id && !fp8_store_run_id_ok(o.run_id)) {
        FP8_ERROR(FP8_EINVAL, "probe options: run_id '%.40s' is not %d lowercase hex digits", o.run_id, FP8_RUN_ID_LEN);
        return NULL;
    }
    fp8_probe_run *run = calloc(1, sizeof *run);
    if (!run) {
        FP8_ERROR(FP8_ENOMEM, "probe: out of memory");
        return NULL;
    }
    run->store = fp8_store_create_id(path, kv, nkv, o.run_id);
    if (!run->store) {
        free(run);
        return NULL;
    }
    if (o.snapshot_pattern) {
        run->snapshot_pattern = strdup(o.snapshot_pattern);
        o.snapshot_pattern = run->snapshot_pattern;
    }
    o.run_id = NULL; /* (the caller's text; the file has it now) */
    run->opt = o;
    fp8__store_set_threads(run->store, o.threads); /* a flush's chunks encoded on the probe's threads */
    run->last_flush = now_seconds();
    pthread_mutex_init(&run->lock, NULL);
    if (fp8__live_add(run, FP8__LIVE_RUN) != 0) {
        FP8_ERROR(FP8_ENOMEM, "probe: out of memory");
        fp8_store_close(run->store);
        free(run->snapshot_pattern);
        pthread_mutex_destroy(&run->lock);
        free(run);
        return NULL;
    }
    return run;
}

static void probe_free(fp8_probe *p)
{
    if (!p)
        return;
    fp8__live_remove(p);
    for (int i = 0; i < p->nrec; i++)
        fp8_recipe_state_free(p->st[i]);
    pthread_mutex_destroy(&p->lock);
    free(p->bam);
    free(p->sm_s);
    free(p->fold_s);
    free(p->last);
    free(p);
}

fp8_probe *fp8_probe_declare(fp8_probe_run *run, const char *name, fp8_role role, int layer, const char *active,
                             const char *const *shadows, int nshadow)
{
    if (!run || !name || !*name) {
        FP8_ERROR(FP8_EINVAL, "fp8_probe_declare: %s", !run ? "the run is NULL" : !name ? "the name is NULL" : "empty tensor name");
        return NULL;
    }
    if (!fp8__live_has(run, FP8__LIVE_RUN)) {
        FP8_ERROR(FP8_EINVAL, "fp8_probe_declare '%.60s': %s", name,
                  fp8__live_kind_of(run) == FP8__LIVE_PROBE ? "the handle is a probe (fp8_probe), not a run"
                                                             : "the run is closed (or was never opened)");
        return NULL;
    }
    if (nshadow > 0 && !shadows) {
        FP8_ERROR(FP8_EINVAL, "probe '%.60s': %d shadow recipes but the array is NULL", name, nshadow);
        return NULL;
    }
    if (layer < -1 || layer > FP8_LAYER_MAX) {
        FP8_ERROR(FP8_EINVAL, "probe '%.60s': layer %d is not -1 (none) or 0..%d", name, layer, FP8_LAYER_MAX);
        return NULL;
    }
    if (strlen(name) >= FP8_NAME_MAX) {
        FP8_ERROR(FP8_EINVAL, "probe '%.60s...': the name is longer than %d bytes", name, FP8_NAME_MAX - 1);
        return NULL;
    }
    if (nshadow < 0 || nshadow > MAX_RECIPES - 1) {
        FP8_ERROR(FP8_EINVAL, "probe '%s': %d shadow recipes; 0 to %d are allowed", name, nshadow, MAX_RECIPES - 1);
        return NULL;
    }
    if ((unsigned)role >= FP8_NROLE) {
        FP8_ERROR(FP8_EINVAL, "probe '%s': role %d is not one of FP8_ROLE_ACTIVATION .. FP8_ROLE_OTHER", name, (int)role);
        return NULL;
    }
    fp8_probe *p = calloc(1, sizeof *p);
    if (p)
        p->last_step = -1;
    if (!p) {
        FP8_ERROR(FP8_ENOMEM, "probe: out of memory");
        return NULL;
    }
    pthread_mutex_init(&p->lock, NULL);
    p->run = run;
    p->role = role;
    p->layer = layer;
    snprintf(p->name, sizeof p->name, "%s", name);
    const char *specs[MAX_RECIPES];
    int n = 0;
    if (active) {
        specs[n++] = active;
        p->has_active = 1;
    }
    for (int i = 0; i < nshadow; i++)
        specs[n++] = shadows[i];
    for (int i = 0; i < n; i++) {
        fp8_recipe r;
        if (!specs[i] || fp8_recipe_parse(specs[i], &r) != FP8_OK) {
            char why[400];
            snprintf(why, sizeof why, "%s", specs[i] ? fp8_error_message() : "NULL recipe");
            FP8_ERROR(FP8_EINVAL, "probe '%s': %s", name, why);
            probe_free(p);
            return NULL;
        }
        int gi = r.reduce[0] ? fp8__groups_find(run->groups, r.reduce) : -1;
        if (r.reduce[0] && gi < 0) {
            FP8_ERROR(FP8_EINVAL,
                      "probe '%s': recipe '%s' reduces its amax over group '%s', which this run does not have (%s)",
                      name, r.spec, r.reduce,
                      run->groups ? "name it in fp8_probe_open_mpi" : "a one-process run: open it with fp8_probe_open_mpi");
            probe_free(p);
            return NULL;
        }
        int dup = 0; /* a shadow equal to the active recipe or an earlier shadow adds nothing */
        for (int k = 0; k < p->nrec && !dup; k++)
            dup = strcmp(p->st[k]->recipe.spec, r.spec) == 0;
        if (dup)
            continue;
        p->group[p->nrec] = gi;
        p->st[p->nrec] = fp8_recipe_state_alloc(&r, role);
        if (!p->st[p->nrec]) {
            probe_free(p);
            return NULL;
        }
        fp8_recipe_state_set_threads(p->st[p->nrec], run->opt.threads); /* each cast's parts side by side */
        p->nrec++;
    }
    if (run->groups) {
        /* multi-rank: every rank declares the same tensor with the same
         * recipes here, or none does (a later reduction would hang) */
        uint32_t tag = fp8__fnv1a(FP8_FNV32_SEED, name);
        for (int i = 0; i < p->nrec; i++)
            tag = fp8__fnv1a(tag, p->st[i]->recipe.spec);
        if (fp8__groups_max(run->groups, 0, tag, NULL, 0) != FP8_OK) {
            FP8_ERROR(FP8_EINVAL, "probe '%s': the ranks declare different tensors or recipes at this point "
                                  "(fp8_probe_declare is collective: the same ones, in the same order, on every rank)",
                      name);
            probe_free(p);
            return NULL;
        }
    }
    pthread_mutex_lock(&run->lock);
    /* one probe per tensor name: a second would merge two tensors' records
     * (another role or layer) or write each (tensor, recipe, step) twice */
    int ok = 1, known = fp8_store_find_tensor(run->store, name);
    const fp8_probe *q = known >= 0 && known < run->ntensor_probe ? run->tensor_probe[known] : NULL;
    if (q) {
        ok = 0;
        if (q->role != role || q->layer != layer)
            FP8_ERROR(FP8_EINVAL,
                      "probe '%s' is already declared as role %s, layer %d; declaring it again as role %s, layer %d "
                      "would merge two tensors' records: give the second another name",
                      name, fp8_role_name(q->role), q->layer, fp8_role_name(role), layer);
        else
            FP8_ERROR(FP8_EINVAL, "probe '%s' is already declared in this run: keep the fp8_probe the first "
                      "fp8_probe_declare returned", name);
    }
    if (ok)
        p->tensor_id = fp8_store_tensor(run->store, name, role, layer);
    ok = ok && p->tensor_id >= 0;
    for (int i = 0; ok && i < p->nrec; i++)
        ok = (p->recipe_id[i] = fp8_store_recipe(run->store, p->st[i]->recipe.spec)) >= 0;
    if (ok && run->nprobes == run->cap) {
        int cap = run->cap ? 2 * run->cap : 16;
        fp8_probe **grown = realloc(run->probes, (size_t)cap * sizeof *grown);
        if (grown)
            run->probes = grown, run->cap = cap;
        else
            ok = 0, FP8_ERROR(FP8_ENOMEM, "probe: out of memory");
    }
    if (ok && p->tensor_id >= run->ntensor_probe) { /* tensor id -> its probe, for the check above */
        int cap = 2 * p->tensor_id + 16;
        fp8_probe **grown = realloc(run->tensor_probe, (size_t)cap * sizeof *grown);
        if (grown) {
            for (int k = run->ntensor_probe; k < cap; k++)
                grown[k] = NULL;
            run->tensor_probe = grown, run->ntensor_probe = cap;
        } else {
            ok = 0, FP8_ERROR(FP8_ENOMEM, "probe: out of memory");
        }
    }
    if (ok && fp8__live_add(p, FP8__LIVE_PROBE) != 0)
        ok = 0, FP8_ERROR(FP8_ENOMEM, "probe: out of memory");
    if (ok) {
        run->probes[run->nprobes++] = p;
        run->tensor_probe[p->tensor_id] = p;
        p->snapshot = run->snapshot_pattern && fnmatch(run->snapshot_pattern, name, 0) == 0;
    }
    pthread_mutex_unlock(&run->lock);
    if (!ok) {
        probe_free(p);
        return NULL;
    }
    return p;
}

static int dead(const char *fn, const void *h)
{
    if (fp8__live_kind_of(h) == FP8__LIVE_RUN)
        return FP8_ERROR(FP8_EINVAL, "%s: the handle is a run (fp8_probe_run), not a probe", fn);
    return FP8_ERROR(FP8_EINVAL, "%s: the probe is not live: its run was closed (fp8_probe_close frees every probe "
                     "of the run) or it was never returned by fp8_probe_declare", fn);
}

static int closed(const char *fn, const void *h)
{
    if (fp8__live_kind_of(h) == FP8__LIVE_PROBE)
        return FP8_ERROR(FP8_EINVAL, "%s: the handle is a probe (fp8_probe), not a run", fn);
    return FP8_ERROR(FP8_EINVAL, "%s: the run is closed (or was never returned by fp8_probe_open)", fn);
}

/* A tensor handed to the API: rows, cols >= 1 and rows x cols floats
 * addressable, checked before anything reads it; steps in 0..FP8_STEP_MAX
 * (so that step arithmetic cannot overflow anywhere downstream). */
static int check_tensor(const char *fn, const void *x, size_t rows, size_t cols, size_t elem)
{
    if (!x)
        return FP8_ERROR(FP8_EINVAL, "%s: the tensor is NULL", fn);
    if (!rows || !cols || rows > SIZE_MAX / cols / elem || rows * cols > PTRDIFF_MAX / elem)
        return FP8_ERROR(FP8_EINVAL, "%s: shape %zux%zu is %s", fn, rows, cols,
                         !rows || !cols ? "empty" : "too large (rows x cols elements do not fit in memory)");
    return FP8_OK;
}

static int check_step(const char *fn, int64_t step)
{
    if (step < 0 || step > FP8_STEP_MAX)
        return FP8_ERROR(FP8_EINVAL, "%s: step %lld is outside 0..%lld (2^62)", fn, (long long)step,
                         (long long)FP8_STEP_MAX);
    return FP8_OK;
}

static int recorded_step(const fp8_probe_options *o, int64_t step)
{
    if (step < o->start || (o->end >= 0 && step > o->end))
        return 0;
    return (step - o->start) % o->every == 0;
}

/* The scale recipe i of a probe cast with this step: delayed recipes' is
 * the one noted at the step's first cast; current recipes take theirs
 * from the step's amax (the last cast's, when a tensor is cast more than
 * once in a step); grouped recipes have none (NaN). */
static float step_scale(const fp8_probe *p, int i, const step_acc *a)
{
    const fp8_recipe_state *st = p->st[i];
    const fp8_recipe *r = &st->recipe;
    switch (r->kind) {
    case FP8_RECIPE_DELAYED:
        return a->delayed_scale[i];
    case FP8_RECIPE_CURRENT:
        return fp8_scale_current((float)st->format->max, isnan(a->group_amax[i]) ? a->amax : a->group_amax[i], r->eps,
                                 r->pow2, r->torchao);
    case FP8_RECIPE_NONE:
        return 1.0f;
    default:
        return NAN;
    }
}

/* Store a probe's series rows for the step in a (run lock held). */
static void store_series(fp8_probe_run *run, const fp8_probe *p, const step_acc *a)
{
    if (!a->has)
        return;
    if (run->io_failed) {
        run->dropped += (uint64_t)p->nrec;
        return;
    }
    for (int i = 0; i < p->nrec; i++)
        if (fp8_store_add_step(run->store, p->tensor_id, p->recipe_id[i], a->step, p->has_active && i == 0, a->amax,
                               step_scale(p, i, a), a->nonfinite) != FP8_OK)
            run->dropped++;
}

static void store_block_amax(fp8_probe_run *run, fp8_probe *p)
{
    if (!p->bam_has)
        return;
    p->bam_has = 0;
    if (run->io_failed) {
        run->dropped++;
        return;
    }
    if (fp8_store_add_block_amax(run->store, p->tensor_id, p->bam_step, p->bam_rows, p->bam_cols, BLOCK_AMAX_WIDTH,
                                 p->bam) != FP8_OK)
        run->dropped++;
}

/* Per-block amax (finite values) of x into p->bam, max-merged when the
 * tensor is cast again in the same step (probe lock held). */
static void note_block_amax(fp8_probe *p, int64_t step, const float *x, size_t rows, size_t cols)
{
    size_t per_row = (cols + BLOCK_AMAX_WIDTH - 1) / BLOCK_AMAX_WIDTH, n = rows * per_row;
    int merge = p->bam_has && p->bam_step == step && p->bam_rows == rows && p->bam_cols == cols;
    if (p->bam_has && !merge)
        return; /* another step's summary is waiting for the step end: keep it */
    if (!merge) {
        float *b = realloc(p->bam, n * sizeof *b);
        if (!b)
            return;
        p->bam = b;
    }
    for (size_t i = 0; i < rows; i++)
        for (size_t k = 0; k < per_row; k++) {
            size_t j0 = k * BLOCK_AMAX_WIDTH, len = cols - j0 < BLOCK_AMAX_WIDTH ? cols - j0 : BLOCK_AMAX_WIDTH;
            fp8_amax_info ai;
            fp8_tensor_amax(x + i * cols + j0, len, &ai);
            float *slot = &p->bam[i * per_row + k];
            *slot = merge ? fmaxf(*slot, ai.amax) : ai.amax;
        }
    p->bam_has = 1, p->bam_step = step, p->bam_rows = rows, p->bam_cols = cols;
}

/* One recipe's part of a record: the cast (into out for the active recipe)
 * with its statistics, or, for a shadow on a step that records nothing, only
 * a delayed state's move. */
typedef struct {
    fp8_probe *p;
    const float *x;
    size_t rows, cols;
    float *out;          /* the active recipe's x_hat (may alias x when serial) */
    fp8_stats *stats;    /* [nrec] when rec */
    unsigned flags;
    int rec, snap_codes;
    void *codes;
    float *gsi;
    fp8_amax_info ai;
    int st[MAX_RECIPES]; /* each recipe's status */
    int skip[MAX_RECIPES]; /* not cast this time (smooth=fold without its input's scales) */
    int active_done;     /* the active recipe has cast already (fp8_quantize_amax) */
    const fp8_stats *xs; /* recorded steps: the input's own statistics (fp8_tensor_stats: moments,
                            extremes, exponent histogram), computed once for every recipe */
} cast_job;

static void cast_recipe(void *ctx, int i)
{
    cast_job *j = ctx;
    fp8_probe *p = j->p;
    int is_active = p->has_active && i == 0;
    j->st[i] = FP8_OK;
    if (is_active && j->active_done)
        return;
    if (j->skip[i])
        return; /* smooth=fold without its input's scales this step: no record */
    if (!is_active && !j->rec) {
        /* a shadow on a step that records nothing: no cast, no statistics;
         * only a delayed state moves, by the tensor's amax (TE's: Inf when
         * the tensor holds one); per-block delayed and smoothed recipes note
         * the amaxes of what they cast (the blocks', the smoothed tensor's) */
        fp8_recipe_state *s = p->st[i];
        if (s->recipe.block_delayed || (s->recipe.smooth && s->recipe.kind == FP8_RECIPE_DELAYED))
            j->st[i] = fp8_quantize_ex(s, j->x, j->rows, j->cols, NULL, NULL, 0);
        else if (s->recipe.kind == FP8_RECIPE_DELAYED)
            fp8__observe_amax(s, j->ai.amax, j->ai.inf_count > 0);
        return;
    }
    /* the input's own statistics are computed once for all recipes (xs)
     * and given to each (a recipe casting a Hadamard-transformed tensor
     * keeps only their histogram: fp8_stats.h) */
    unsigned fl = j->flags;
    fp8_stats *s = j->rec ? &j->stats[i] : NULL;
    if (s && j->xs) {
        *s = *j->xs;
        fl |= FP8_STATS_X_GIVEN;
    }
    if (is_active && j->snap_codes)
        j->st[i] = fp8_quantize_codes(p->st[i], j->x, j->rows, j->cols, j->codes, j->gsi, j->out, s, fl);
    else
        j->st[i] = fp8_quantize_ex(p->st[i], j->x, j->rows, j->cols, is_active ? j->out : NULL, s, fl);
}

/* 1 when a recipe reduces its amax over a group of ranks */
static int reduces(const fp8_probe *p)
{
    for (int i = 0; i < p->nrec; i++)
        if (p->group[i] >= 0)
            return 1;
    return 0;
}

/* Every recipe's cast (the input's own statistics, on a recorded step, came
 * first), shadows first: out may alias x.  With the probe option threads,
 * each cast runs its tensor's parts side by side (fp8_recipe_state_set_threads):
 * the same bits as one thread. */
static int cast_all(cast_job *j)
{
    int st = FP8_OK;
    for (int i = j->p->nrec - 1; i >= 0 && st == FP8_OK; i--) {
        cast_recipe(j, i);
        st = j->st[i];
    }
    return st;
}

/* A recorded step's casts in one sweep over x (quantize_many.h), which
 * computes x's own statistics into xs on the way: the same bits as
 * cast_all with xs given.  Out of memory for the sweep: cast_all, each
 * recipe computing x's statistics itself. */
static int cast_swept(cast_job *j, fp8_stats *xs, int threads)
{
    fp8_probe *p = j->p;
    fp8__cast_req q[MAX_RECIPES];
    int idx[MAX_RECIPES], n = 0;
    for (int i = p->nrec - 1; i >= 0; i--) { /* shadows first, as cast_all */
        j->st[i] = FP8_OK;
        if (j->skip[i])
            continue; /* smooth=fold without its input's scales this step: no record */
        int is_active = p->has_active && i == 0, codes = is_active && j->snap_codes;
        q[n] = (fp8__cast_req){.st = p->st[i],
                               .out = is_active ? j->out : NULL,
                               .codes = codes ? j->codes : NULL,
                               .group_scale_inv = codes ? j->gsi : NULL,
                               .stats = &j->stats[i]};
        idx[n++] = i;
    }
    if (fp8__quantize_many(j->x, j->rows, j->cols, j->flags, threads, xs, &j->ai, q, n) != FP8_OK) {
        j->xs = NULL;
        return cast_all(j);
    }
    int st = FP8_OK;
    for (int k = 0; k < n; k++) {
        j->st[idx[k]] = q[k].status;
        if (st == FP8_OK)
            st = q[k].status;
    }
    return st;
}

/* Current recipes with reduce=NAME: the tensor's amax (+Inf when it holds
 * one) reduced over each one's group, into their states for this cast
 * (probe lock held; collective over those groups).  Shadows of a step that
 * records nothing do not cast, so take no part.  On a failed reduction the
 * recipe scales from this rank's amax. */
static int reduce_current(fp8_probe *p, const fp8_amax_info *ai, int rec)
{
    int st = FP8_OK;
    if (!p->run->groups)
        return st;
    float local = ai->inf_count ? INFINITY : ai->amax;
    for (int gi = 0; gi < fp8__groups_count(p->run->groups); gi++) {
        float buf[MAX_RECIPES];
        int idx[MAX_RECIPES], n = 0;
        for (int i = 0; i < p->nrec; i++)
            if (p->st[i]->recipe.kind == FP8_RECIPE_CURRENT && p->group[i] == gi &&
                (rec || (p->has_active && i == 0)))
                buf[n] = local, idx[n++] = i;
        if (!n)
            continue;
        int e = fp8__groups_max(p->run->groups, gi, fp8__fnv1a(FP8_FNV32_SEED, p->name), buf, n);
        if (e != FP8_OK) {
            st = e;
            continue;
        }
        for (int k = 0; k < n; k++)
            p->st[idx[k]]->group_amax = buf[k];
    }
    return st;
}

/* An input probe that smooth=fold recipes take their scales from: s_j = 1
 * / max_i |x_ij| (1 for a column without a finite nonzero value), the
 * arithmetic of the trainer's --smooth-swiglu (probe lock held). */
static void note_smooth_scales(fp8_probe *p, int64_t step, const float *x, size_t rows, size_t cols)
{
    if (p->sm_n != cols) {
        float *s = realloc(p->sm_s, cols * sizeof *s);
        if (!s) {
            p->sm_has = 0;
            return;
        }
        p->sm_s = s, p->sm_n = cols;
    }
    fp8__column_scales(x, rows, cols, p->sm_s); /* as the smoothed casts make them */
    p->sm_has = 1, p->sm_step = step;
}

/* smooth=fold recipes of a probe: the source's scales of this step (step <
 * 0: its latest) into the states, or skip[i] = 1 when there are none (probe
 * lock held; the source's lock taken after ours: sources never take a
 * folded probe's lock) */
static void fold_scales(fp8_probe *p, int64_t step, size_t cols, int *skip)
{
    int any = 0;
    for (int i = 0; i < p->nrec; i++)
        any |= p->st[i]->recipe.smooth == 2;
    if (!any)
        return;
    int have = 0;
    fp8_probe *src = p->smooth_from;
    if (src && fp8__live_has(src, FP8__LIVE_PROBE)) {
        pthread_mutex_lock(&src->lock);
        if (src->sm_has && (step < 0 || src->sm_step == step) && src->sm_n == cols) {
            if (p->fold_n != cols) {
                float *f = realloc(p->fold_s, cols * sizeof *f);
                if (f)
                    p->fold_s = f, p->fold_n = cols;
            }
            if (p->fold_n == cols) {
                memcpy(p->fold_s, src->sm_s, cols * sizeof *p->fold_s);
                have = 1;
            }
        }
        pthread_mutex_unlock(&src->lock);
    }
    for (int i = 0; i < p->nrec; i++)
        if (p->st[i]->recipe.smooth == 2) {
            if (have)
                p->st[i]->smooth_src = p->fold_s, p->st[i]->smooth_src_n = cols;
            else if (skip)
                skip[i] = 1;
        }
}

int fp8_probe_smooth_from(fp8_probe *weight, fp8_probe *input)
{
    if (!weight || !input)
        return FP8_ERROR(FP8_EINVAL, "fp8_probe_smooth_from: %s is NULL", weight ? "the input probe" : "the weight probe");
    if (!fp8__live_has(weight, FP8__LIVE_PROBE))
        return dead("fp8_probe_smooth_from", weight);
    if (!fp8__live_has(input, FP8__LIVE_PROBE))
        return dead("fp8_probe_smooth_from", input);
    if (weight == input || weight->run != input->run)
        return FP8_ERROR(FP8_EINVAL, "fp8_probe_smooth_from '%s': the input must be another probe of the same run",
                         weight->name);
    if (weight->sm_src)
        return FP8_ERROR(FP8_EINVAL, "fp8_probe_smooth_from '%s': it is itself a source of scales (no chains)",
                         weight->name);
    pthread_mutex_lock(&input->lock);
    input->sm_src = 1;
    pthread_mutex_unlock(&input->lock);
    pthread_mutex_lock(&weight->lock);
    weight->smooth_from = input;
    pthread_mutex_unlock(&weight->lock);
    return FP8_OK;
}

int fp8_probe_cast_recipe(fp8_probe *p, const char *spec, const float *x, size_t rows, size_t cols, float *out)
{
    if (!p || !out || !spec)
        return FP8_ERROR(FP8_EINVAL, "fp8_probe_cast_recipe: %s is NULL", !p ? "the probe" : !out ? "out" : "the spec");
    if (!fp8__live_has(p, FP8__LIVE_PROBE))
        return dead("fp8_probe_cast_recipe", p);
    int e = check_tensor("fp8_probe_cast_recipe", x, rows, cols, sizeof(float));
    if (e != FP8_OK)
        return e;
    fp8_recipe r;
    if (fp8_recipe_parse(spec, &r) != FP8_OK)
        return FP8_EINVAL;
    pthread_mutex_lock(&p->lock);
    int k = -1;
    for (int i = 0; i < p->nrec && k < 0; i++)
        if (strcmp(p->st[i]->recipe.spec, r.spec) == 0)
            k = i;
    fp8_recipe_state *copy = k >= 0 ? fp8_recipe_state_copy(p->st[k]) : NULL;
    if (copy && copy->recipe.smooth == 2) {
        fold_scales(p, -1, cols, NULL); /* the source's latest scales */
        copy->smooth_src = p->st[k]->smooth_src, copy->smooth_src_n = p->st[k]->smooth_src_n;
        p->st[k]->smooth_src = NULL, p->st[k]->smooth_src_n = 0;
    }
    /* (the copy casts while the lock is held: the fold scales are this probe's) */
    e = !copy ? (k < 0 ? FP8_ERROR(FP8_EINVAL, "fp8_probe_cast_recipe: probe '%s' has no recipe '%s'", p->name, r.spec)
                       : FP8_ENOMEM)
              : fp8_quantize(copy, x, rows, cols, out, NULL);
    pthread_mutex_unlock(&p->lock);
    fp8_recipe_state_free(copy);
    return e;
}

/* This step's every-step row gets the tensor's amax (probe lock held); a
 * row of an earlier step that saw no step_end is returned, to be stored on
 * its own. */
static step_acc series_note(fp8_probe *p, int64_t step, const fp8_amax_info *ai)
{
    step_acc done = {0};
    if (p->acc.has && p->acc.step != step) {
        done = p->acc;
        p->acc.has = 0;
    }
    if (!p->acc.has) {
        p->acc.has = 1, p->acc.step = step, p->acc.amax = 0, p->acc.nonfinite = 0;
        for (int i = 0; i < p->nrec; i++) {
            p->acc.delayed_scale[i] = p->st[i]->scale; /* the scale this step casts with */
            p->acc.group_amax[i] = NAN;
        }
    }
    p->acc.amax = fmaxf(p->acc.amax, ai->amax);
    p->acc.nonfinite |= (ai->inf_count ? 1u : 0u) | (ai->nan_count ? 2u : 0u);
    return done;
}

/* step lies in the options' start..end window */
static int in_window_of(const fp8_probe_options *o, int64_t step)
{
    return step >= o->start && (o->end < 0 || step <= o->end);
}

/* 1 when a step of p needs the tensor itself: a statistics step, a
 * snapshot, block amaxes, or a recipe whose state follows more than the
 * tensor's amax (per-block delayed, smoothed delayed, reduced over ranks) */
static int needs_tensor(const fp8_probe *p, int64_t step)
{
    const fp8_probe_options *o = &p->run->opt;
    int in_window = in_window_of(o, step);
    int64_t ph = step % o->snapshot_every, bph = o->block_amax_every > 0 ? step % o->block_amax_every : -1;
    if (recorded_step(o, step) || reduces(p))
        return 1;
    if (in_window && p->snapshot && (ph == 0 || (o->snapshot_pairs && ph == 1 % o->snapshot_every)))
        return 1;
    if (in_window && (bph == 0 || (bph == 1 && o->block_amax_every > 1)))
        return 1;
    for (int i = 0; i < p->nrec; i++) {
        const fp8_recipe *r = &p->st[i]->recipe;
        if (r->block_delayed || (r->smooth && r->kind == FP8_RECIPE_DELAYED) || p->sm_src)
            return 1;
    }
    return 0;
}

/* The core: cast under every recipe (shadows first: out may alias x), then
 * store what this step records. */
static int probe_run(fp8_probe *p, int64_t step, const float *x, size_t rows, size_t cols, float *out)
{
    fp8_probe_run *run = p->run;
    const fp8_probe_options *o = &run->opt;
    int rec = recorded_step(o, step);
    /* snapshots: every snapshot_every steps inside the recording window (and
     * the step after, with snapshot_pairs), recorded step or not */
    int in_window = in_window_of(o, step);
    int64_t ph = step % o->snapshot_every;
    int snap = in_window && p->snapshot && (ph == 0 || (o->snapshot_pairs && ph == 1 % o->snapshot_every));
    int snap_codes = snap && o->snapshot_codes && p->has_active;
    int64_t bph = o->block_amax_every > 0 ? step % o->block_amax_every : -1;
    int bam = in_window && (bph == 0 || (bph == 1 && o->block_amax_every > 1));
    unsigned flags = o->exp_hist ? 0 : FP8_STATS_NO_EXP_HIST;
    fp8_stats *stats = rec ? malloc((size_t)p->nrec * sizeof *stats) : NULL;
    float *copy = snap && !snap_codes ? malloc(rows * cols * sizeof *copy) : NULL;
    size_t ng = snap_codes ? fp8_quantize_ngroups(&p->st[0]->recipe, rows, cols) : 0;
    int cb = p->has_active ? p->st[0]->format->code_bytes : 1;
    void *codes = snap_codes ? malloc(rows * cols * (size_t)cb) : NULL;
    float *gsi = snap_codes ? malloc(ng * sizeof *gsi) : NULL;
    if (rec && !stats)
        rec = 0; /* no memory for statistics: still cast */
    if (snap_codes && (!codes || !gsi))
        snap_codes = 0;
    if (copy)
        memcpy(copy, x, rows * cols * sizeof *copy);
    /* x's amax first (one read of x), for the series, the reductions over
     * ranks and the delayed recipes; on a recorded step x's own statistics
     * come from the sweep that casts every recipe (cast_swept) */
    fp8_amax_info ai = {0, 0, 0};
    fp8_stats *xs = rec ? malloc(sizeof *xs) : NULL; /* (NULL: each recipe computes them itself) */
    /* an unrecorded step whose active recipe casts: the amax comes from the
     * active cast's own pass, done first (nothing else reads x then; a
     * recipe reducing its amax over ranks needs it before any cast) */
    int fused = !rec && !bam && out && p->has_active && !reduces(p);
    if (!fused && rows && cols && rows <= SIZE_MAX / cols)
        fp8_tensor_amax(x, rows * cols, &ai);
    step_acc done = {0};
    int st = FP8_OK;
    pthread_mutex_lock(&p->lock);
    if (fused) /* (a delayed recipe's note of its amax leaves the scale alone until the step ends) */
        st = fp8_quantize_amax(p->st[0], x, rows, cols, out, &ai);
    if (o->series && in_window)
        done = series_note(p, step, &ai);
    if (bam)
        note_block_amax(p, step, x, rows, cols);
    int rst = reduce_current(p, &ai, rec);
    /* delayed recipes casting without statistics take the amax computed above */
    for (int i = 0; i < p->nrec; i++)
        if (p->st[i]->recipe.kind == FP8_RECIPE_DELAYED && !p->st[i]->recipe.smooth)
            p->st[i]->known_amax = ai.amax, p->st[i]->known_inf = ai.inf_count > 0;
    if (p->sm_src)
        note_smooth_scales(p, step, x, rows, cols);
    cast_job job = {.p = p, .x = x, .rows = rows, .cols = cols, .out = out, .stats = stats, .flags = flags,
                    .rec = rec, .snap_codes = snap_codes, .codes = codes, .gsi = gsi, .ai = ai, .xs = xs,
                    .active_done = fused};
    fold_scales(p, step, cols, job.skip);
    if (st == FP8_OK)
        st = xs ? cast_swept(&job, xs, o->threads) : cast_all(&job);
    for (int i = 0; i < p->nrec; i++) {
        if (o->series && in_window && p->acc.has && !isnan(p->st[i]->group_amax))
            p->acc.group_amax[i] = p->st[i]->group_amax;
        p->st[i]->group_amax = NAN;
        p->st[i]->known_amax = NAN;
        p->st[i]->smooth_src = NULL, p->st[i]->smooth_src_n = 0;
    }
    if (st == FP8_OK && out && !p->has_active && out != x)
        memcpy(out, x, rows * cols * sizeof *out);
    p->touched = 1;
    pthread_mutex_unlock(&p->lock);
    if (done.has || (st == FP8_OK && (rec || copy || snap_codes))) {
        pthread_mutex_lock(&run->lock);
        store_series(run, p, &done);
        if (st != FP8_OK) {
            /* nothing else to store */
        } else if (run->io_failed) {
            run->dropped += (uint64_t)(rec ? p->nrec : 0);
        } else {
            if (rec && (p->last || (p->last = malloc((size_t)p->nrec * sizeof *p->last)) != NULL)) {
                memcpy(p->last, stats, (size_t)p->nrec * sizeof *p->last);
                p->last_step = step;
            }
            for (int i = 0; rec && i < p->nrec; i++)
                if (!job.skip[i] && fp8_store_add_record(run->store, p->tensor_id, p->recipe_id[i], step,
                                                         p->has_active && i == 0, rows, cols, &stats[i]) != FP8_OK)
                    run->dropped++;
            if (copy && fp8_store_add_snapshot(run->store, p->tensor_id, step, copy, rows, cols) != FP8_OK)
                run->dropped++;
            if (snap_codes && fp8_store_add_snapshot_codes(run->store, p->tensor_id, step, p->recipe_id[0], codes, cb,
                                                           rows, cols, gsi, ng) != FP8_OK)
                run->dropped++;
        }
        pthread_mutex_unlock(&run->lock);
    }
    free(stats);
    free(xs);
    free(copy);
    free(codes);
    free(gsi);
    return st != FP8_OK ? st : rst;
}

int fp8_probe_record(fp8_probe *p, int64_t step, const float *x, size_t rows, size_t cols)
{
    if (!p)
        return FP8_ERROR(FP8_EINVAL, "fp8_probe_record: the probe is NULL");
    if (!fp8__live_has(p, FP8__LIVE_PROBE))
        return dead("fp8_probe_record", p);
    int e = check_tensor("fp8_probe_record", x, rows, cols, sizeof(float));
    if (e == FP8_OK)
        e = check_step("fp8_probe_record", step);
    if (e != FP8_OK)
        return e;
    if (__atomic_load_n(&p->run->eval, __ATOMIC_RELAXED))
        return FP8_OK;
    return probe_run(p, step, x, rows, cols, NULL);
}

int fp8_probe_record_bits(fp8_probe *p, int64_t step, const uint16_t *x, fp8_dtype dtype, size_t rows, size_t cols)
{
    if (!p)
        return FP8_ERROR(FP8_EINVAL, "fp8_probe_record_bits: the probe is NULL");
    if (!fp8__live_has(p, FP8__LIVE_PROBE))
        return dead("fp8_probe_record_bits", p);
    int e = check_tensor("fp8_probe_record_bits", x, rows, cols, sizeof(float));
    if (e == FP8_OK)
        e = check_step("fp8_probe_record_bits", step);
    if (e != FP8_OK)
        return e;
    if (__atomic_load_n(&p->run->eval, __ATOMIC_RELAXED))
        return FP8_OK;
    if (dtype != FP8_DTYPE_BF16 && dtype != FP8_DTYPE_F16)
        return FP8_ERROR(FP8_EINVAL, "fp8_probe_record_bits: dtype must be bf16 or fp16");
    if (!rows || !cols || rows > SIZE_MAX / cols / sizeof(float))
        return FP8_ERROR(FP8_EINVAL, "fp8_probe_record_bits: bad shape %zux%zu", rows, cols);
    size_t n = rows * cols;
    float *f = malloc(n * sizeof *f);
    if (!f)
        return FP8_ERROR(FP8_ENOMEM, "fp8_probe_record_bits: out of memory for %zu elements", n);
    if (dtype == FP8_DTYPE_BF16) {
        for (size_t i = 0; i < n; i++) {
            uint32_t u = (uint32_t)x[i] << 16; /* bf16 is float32's top half: exact */
            memcpy(&f[i], &u, 4);
        }
    } else {
        const fp8_format *h = fp8_format_find("fp16", NULL);
        for (size_t i = 0; i < n; i++)
            f[i] = fp8_format_decode(h, x[i]);
    }
    int st = probe_run(p, step, f, rows, cols, NULL);
    free(f);
    return st;
}

int fp8_probe_apply(fp8_probe *p, int64_t step, const float *x, size_t rows, size_t cols, float *out)
{
    if (!p || !out)
        return FP8_ERROR(FP8_EINVAL, "fp8_probe_apply: %s is NULL", !p ? "the probe" : "out");
    if (!fp8__live_has(p, FP8__LIVE_PROBE))
        return dead("fp8_probe_apply", p);
    int e = check_tensor("fp8_probe_apply", x, rows, cols, sizeof(float));
    if (e == FP8_OK)
        e = check_step("fp8_probe_apply", step);
    if (e != FP8_OK)
        return e;
    if (__atomic_load_n(&p->run->eval, __ATOMIC_RELAXED))
        return fp8_probe_cast(p, x, rows, cols, out);
    return probe_run(p, step, x, rows, cols, out);
}

int fp8_probe_cast(fp8_probe *p, const float *x, size_t rows, size_t cols, float *out)
{
    if (!p || !out)
        return FP8_ERROR(FP8_EINVAL, "fp8_probe_cast: %s is NULL", !p ? "the probe" : "out");
    if (!fp8__live_has(p, FP8__LIVE_PROBE))
        return dead("fp8_probe_cast", p);
    int e = check_tensor("fp8_probe_cast", x, rows, cols, sizeof(float));
    if (e != FP8_OK)
        return e;
    if (!p->has_active) {
        if (out != x)
            memcpy(out, x, rows * cols * sizeof *out);
        return FP8_OK;
    }
    /* a private copy of the active state: the cast must not touch history */
    pthread_mutex_lock(&p->lock);
    fp8_recipe_state *copy = fp8_recipe_state_copy(p->st[0]);
    pthread_mutex_unlock(&p->lock);
    if (!copy)
        return FP8_ERROR(FP8_ENOMEM, "fp8_probe_cast: out of memory");
    int st = fp8_quantize(copy, x, rows, cols, out, NULL);
    fp8_recipe_state_free(copy);
    return st;
}

int fp8_probe_scalar(fp8_probe_run *run, const char *name, int64_t step, double value)
{
    if (!run || !name)
        return FP8_ERROR(FP8_EINVAL, "fp8_probe_scalar: %s is NULL", run ? "the name" : "the run");
    if (!fp8__live_has(run, FP8__LIVE_RUN))
        return closed("fp8_probe_scalar", run);
    if (check_step("fp8_probe_scalar", step) != FP8_OK)
        return FP8_EINVAL;
    pthread_mutex_lock(&run->lock);
    int st = FP8_OK;
    if (run->io_failed) {
        run->dropped++;
    } else {
        int id = fp8_store_scalar_name(run->store, name);
        st = id < 0 ? FP8_EINVAL : fp8_store_add_scalar(run->store, id, step, value);
    }
    pthread_mutex_unlock(&run->lock);
    return st;
}

static int flush_locked(fp8_probe_run *run)
{
    if (run->io_failed)
        return FP8_ERROR(FP8_EIO, "recording stopped after a storage error; %llu records dropped",
                         (unsigned long long)run->dropped);
    int st = fp8_store_flush(run->store);
    if (st != FP8_OK)
        run->io_failed = 1;
    run->steps_since_flush = 0;
    run->last_flush = now_seconds();
    return st;
}

/* Delayed recipes with reduce=NAME: this step's amax (history slot 0)
 * reduced over each group before the scale update, all of a group's
 * recipes in one reduction, in declaration order (run lock held;
 * collective over the groups). */
static int reduce_delayed(fp8_probe_run *run)
{
    int st = FP8_OK, ng = fp8__groups_count(run->groups);
    for (int gi = 0; gi < ng; gi++) {
        int n = 0;
        uint32_t tag = FP8_FNV32_SEED;
        for (int k = 0; k < run->nprobes; k++)
            for (int i = 0; i < run->probes[k]->nrec; i++)
                if (reduces_delayed(run->probes[k], i, gi))
                    n++, tag = fp8__fnv1a(tag, run->probes[k]->name);
        if (!n)
            continue;
        float *buf = malloc((size_t)n * sizeof *buf);
        if (!buf) {
            st = FP8_ERROR(FP8_ENOMEM, "amax reduction: out of memory");
            n = 0; /* still take part, with nothing: the fingerprint tells the others */
        }
        int m = 0;
        for (int k = 0; buf && k < run->nprobes; k++) {
            fp8_probe *p = run->probes[k];
            pthread_mutex_lock(&p->lock);
            for (int i = 0; i < p->nrec; i++)
                if (reduces_delayed(p, i, gi))
                    buf[m++] = p->st[i]->history[0];
            pthread_mutex_unlock(&p->lock);
        }
        int e = fp8__groups_max(run->groups, gi, tag, buf, n);
        if (e != FP8_OK)
            st = e;
        m = 0;
        for (int k = 0; buf && e == FP8_OK && k < run->nprobes; k++) {
            fp8_probe *p = run->probes[k];
            pthread_mutex_lock(&p->lock);
            for (int i = 0; i < p->nrec; i++)
                if (reduces_delayed(p, i, gi)) {
                    if (p->touched)
                        p->st[i]->history[0] = buf[m];
                    m++;
                }
            pthread_mutex_unlock(&p->lock);
        }
        free(buf);
    }
    return st;
}

int fp8_probe_step_end(fp8_probe_run *run, int64_t step)
{
    (void)step;
    if (!run)
        return FP8_ERROR(FP8_EINVAL, "fp8_probe_step_end: the run is NULL");
    if (!fp8__live_has(run, FP8__LIVE_RUN))
        return closed("fp8_probe_step_end", run);
    pthread_mutex_lock(&run->lock);
    int rst = reduce_delayed(run);
    for (int k = 0; k < run->nprobes; k++) {
        fp8_probe *p = run->probes[k];
        pthread_mutex_lock(&p->lock);
        /* the step's series rows first: they need the scales this step used */
        store_series(run, p, &p->acc);
        p->acc.has = 0;
        store_block_amax(run, p);
        if (p->touched)
            for (int i = 0; i < p->nrec; i++)
                fp8_recipe_state_step(p->st[i]);
        p->touched = 0;
        pthread_mutex_unlock(&p->lock);
    }
    int st = FP8_OK;
    run->steps_since_flush++;
    if (run->steps_since_flush >= run->opt.flush_steps || now_seconds() - run->last_flush >= run->opt.flush_seconds)
        st = flush_locked(run);
    pthread_mutex_unlock(&run->lock);
    return st != FP8_OK ? st : rst;
}

int fp8_probe_flush(fp8_probe_run *run)
{
    if (!run)
        return FP8_ERROR(FP8_EINVAL, "fp8_probe_flush: the run is NULL");
    if (!fp8__live_has(run, FP8__LIVE_RUN))
        return closed("fp8_probe_flush", run);
    pthread_mutex_lock(&run->lock);
    int st = flush_locked(run);
    pthread_mutex_unlock(&run->lock);
    return st;
}

int fp8_probe_set_training(fp8_probe_run *run, int training)
{
    if (!run)
        return FP8_ERROR(FP8_EINVAL, "fp8_probe_set_training: the run is NULL");
    if (!fp8__live_has(run, FP8__LIVE_RUN))
        return closed("fp8_probe_set_training", run);
    __atomic_store_n(&run->eval, !training, __ATOMIC_RELAXED);
    return FP8_OK;
}

uint64_t fp8_probe_dropped(const fp8_probe_run *run)
{
    return run && fp8__live_has(run, FP8__LIVE_RUN) ? run->dropped : 0;
}

int fp8_probe_close(fp8_probe_run *run)
{
    if (!run)
        return FP8_OK;
    if (!fp8__live_has(run, FP8__LIVE_RUN))
        return closed("fp8_probe_close", run);
    fp8__live_remove(run); /* from here on, other calls with it are refused */
    pthread_mutex_lock(&run->lock);
    for (int k = 0; k < run->nprobes; k++) { /* a last step whose step_end never came */
        fp8_probe *p = run->probes[k];
        pthread_mutex_lock(&p->lock);
        store_series(run, p, &p->acc);
        p->acc.has = 0;
        store_block_amax(run, p);
        pthread_mutex_unlock(&p->lock);
    }
    int st = run->io_failed ? FP8_EIO : FP8_OK;
    int cst = fp8_store_close(run->store); /* flushes what is buffered */
    if (st == FP8_OK)
        st = cst;
    for (int k = 0; k < run->nprobes; k++)
        probe_free(run->probes[k]);
    free(run->probes);
    free(run->tensor_probe);
    free(run->snapshot_pattern);
    fp8__groups_free(run->groups);
    pthread_mutex_unlock(&run->lock);
    pthread_mutex_destroy(&run->lock);
    free(run);
    return st;
}

int fp8_probe_needs_tensor(fp8_probe *p, int64_t step)
{
    if (!p)
        return FP8_ERROR(FP8_EINVAL, "fp8_probe_needs_tensor: the probe is NULL");
    if (!fp8__live_has(p, FP8__LIVE_PROBE))
        return dead("fp8_probe_needs_tensor", p);
    int e = check_step("fp8_probe_needs_tensor", step);
    if (e != FP8_OK)
        return e;
    return needs_tensor(p, step);
}

int fp8_probe_note_amax(fp8_probe *p, int64_t step, float amax, unsigned nonfinite)
{
    if (!p)
        return FP8_ERROR(FP8_EINVAL, "fp8_probe_note_amax: the probe is NULL");
    if (!fp8__live_has(p, FP8__LIVE_PROBE))
        return dead("fp8_probe_note_amax", p);
    int e = check_step("fp8_probe_note_amax", step);
    if (e != FP8_OK)
        return e;
    if (!(amax >= 0) || isinf(amax) || nonfinite > 3)
        return FP8_ERROR(FP8_EINVAL, "fp8_probe_note_amax '%s': amax %g is not a finite number >= 0 (the largest "
                                     "finite |x|), or nonfinite %u is not a bit set of 1 (Inf) and 2 (NaN)",
                         p->name, (double)amax, nonfinite);
    if (needs_tensor(p, step))
        return FP8_ERROR(FP8_EINVAL, "fp8_probe_note_amax '%s': step %lld needs the tensor itself (statistics, a "
                                     "snapshot, block amaxes, or a per-block/smoothed/reduced recipe: "
                                     "fp8_probe_needs_tensor); record it instead",
                         p->name, (long long)step);
    if (__atomic_load_n(&p->run->eval, __ATOMIC_RELAXED))
        return FP8_OK; /* evaluation: nothing moves */
    fp8_amax_info ai = {amax, (nonfinite & 1u) ? 1u : 0u, (nonfinite & 2u) ? 1u : 0u};
    const fp8_probe_options *o = &p->run->opt;
    int in_window = in_window_of(o, step);
    step_acc done = {0};
    pthread_mutex_lock(&p->lock);
    if (o->series && in_window)
        done = series_note(p, step, &ai);
    for (int i = 0; i < p->nrec; i++) { /* what a cast-free step moves: delayed histories */
        fp8_recipe_state *st = p->st[i];
        if (st->recipe.kind == FP8_RECIPE_DELAYED)
            fp8__observe_amax(st, ai.amax, ai.inf_count > 0);
    }
    p->touched = 1;
    pthread_mutex_unlock(&p->lock);
    if (done.has) {
        pthread_mutex_lock(&p->run->lock);
        store_series(p->run, p, &done);
        pthread_mutex_unlock(&p->run->lock);
    }
    return FP8_OK;
}

int fp8_probe_active_scale(fp8_probe *p, float *scale, float *scale_inv)
{
    if (!p || !scale || !scale_inv)
        return FP8_ERROR(FP8_EINVAL, "fp8_probe_active_scale: %s is NULL", !p ? "the probe" : "an output");
    if (!fp8__live_has(p, FP8__LIVE_PROBE))
        return dead("fp8_probe_active_scale", p);
    if (!p->has_active || p->st[0]->recipe.kind != FP8_RECIPE_DELAYED)
        return FP8_ERROR(FP8_EINVAL, "fp8_probe_active_scale '%s': the active recipe is not a per-tensor delayed "
                                     "recipe (its scale comes from each tensor)", p->name);
    pthread_mutex_lock(&p->lock);
    *scale = p->st[0]->scale, *scale_inv = p->st[0]->scale_inv;
    pthread_mutex_unlock(&p->lock);
    return FP8_OK;
}

int fp8_probe_recipes(fp8_probe *p, const char **specs, int max)
{
    if (!p)
        return FP8_ERROR(FP8_EINVAL, "fp8_probe_recipes: the probe is NULL");
    if (!fp8__live_has(p, FP8__LIVE_PROBE))
        return dead("fp8_probe_recipes", p);
    for (int i = 0; specs && i < p->nrec && i < max; i++)
        specs[i] = p->st[i]->recipe.spec;
    return p->nrec;
}

int fp8_probe_last_stats(fp8_probe *p, int i, int64_t *step, fp8_stats *out)
{
    if (!p || !step || !out)
        return FP8_ERROR(FP8_EINVAL, "fp8_probe_last_stats: %s is NULL", !p ? "the probe" : "an output");
    if (!fp8__live_has(p, FP8__LIVE_PROBE))
        return dead("fp8_probe_last_stats", p);
    pthread_mutex_lock(&p->run->lock);
    int ok = p->last && i >= 0 && i < p->nrec;
    if (ok)
        *out = p->last[i], *step = p->last_step;
    pthread_mutex_unlock(&p->run->lock);
    if (!ok)
        return FP8_ERROR(FP8_EINVAL, "fp8_probe_last_stats '%s': %s", p->name,
                         i < 0 || i >= p->nrec ? "no such recipe index" : "nothing recorded yet");
    return FP8_OK;
}
