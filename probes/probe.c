/*
 * probe.c — the probe API (fp8_probe.h), a run's life: open, declare, the
 * step end (flush policy, the delayed recipes' step, reductions over
 * ranks), close, and what a caller asks of a probe; the rule that storage
 * trouble never reaches the training loop's numbers.  A record itself:
 * probe_record.c.  Locking: probe_internal.h.
 */
#include <fnmatch.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "probe_internal.h"
#include "live.h"
#include "datasets.h" /* fp8__store_set_threads */

/* What fp8_probe_scalar and fp8_probe_step_end do past their checks, on
 * the calling thread or the run's background thread (background.h). */
static int scalar_now(fp8_probe_run *run, int id, int64_t step, double value);
static int step_end_now(fp8_probe_run *run);

void fp8__probe_run_set_groups(fp8_probe_run *run, fp8__groups *g)
{
    run->groups = g;
    if (g && run->bg) { /* reductions over ranks are collective calls: on the calling thread */
        fp8__bg_stop(run->bg);
        run->bg = NULL;
    }
}

/* 1, with an error naming fn, when this process is a fork of the one that
 * opened run with the option background (whose thread, and maybe locks it
 * held, did not come along): every call on such a run is refused there. */
static int forked(const fp8_probe_run *run, const char *fn)
{
    if (!run->bg || !fp8__bg_foreign(run->bg))
        return 0;
    FP8_ERROR(FP8_EINVAL, "%s: this process is a fork of the one that opened the run with the option background; "
                          "the run's thread and locks are that process's: use the run there (or open another here)",
              fn);
    return 1;
}

/* (probe_internal.h) */
void fp8__probe_settle(fp8_probe_run *run)
{
    if (run->bg)
        fp8__bg_drain(run->bg);
}

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
        o.block_amax_every > FP8_STEP_MAX || (o.background != 0 && o.background != 1) || o.background_mb < 1 ||
        o.background_mb > (1 << 20)) {
        FP8_ERROR(FP8_EINVAL, "probe options: every, flush_steps and snapshot_every must be in 1..2^62, "
                              "block_amax_every in 0..2^62, flush_seconds >= 0, threads 1..16, background 0 or 1, "
                              "background_mb 1..2^20");
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
    if (o.background) /* (when the thread cannot be started, the calls do their work themselves) */
        run->bg = fp8__bg_start(run, (size_t)o.background_mb << 20);
    if (fp8__live_add(run, FP8__LIVE_RUN) != 0) {
        FP8_ERROR(FP8_ENOMEM, "probe: out of memory");
        fp8__bg_stop(run->bg);
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

/* The recipes specs[0..n) parsed into p's states, a repeat of one before
 * left out: FP8_OK, or the error (p as far as it got; the caller frees it). */
static int add_recipes(fp8_probe *p, const char *const *specs, int n)
{
    for (int i = 0; i < n; i++) {
        fp8_recipe r;
        if (!specs[i] || fp8_recipe_parse(specs[i], &r) != FP8_OK) {
            char why[400];
            snprintf(why, sizeof why, "%s", specs[i] ? fp8_error_message() : "NULL recipe");
            FP8_ERROR(FP8_EINVAL, "probe '%s': %s", p->name, why);
            return FP8_EINVAL;
        }
        int gi = r.reduce[0] ? fp8__groups_find(p->run->groups, r.reduce) : -1;
        if (r.reduce[0] && gi < 0) {
            FP8_ERROR(FP8_EINVAL,
                      "probe '%s': recipe '%s' reduces its amax over group '%s', which this run does not have (%s)",
                      p->name, r.spec, r.reduce,
                      p->run->groups ? "name it in fp8_probe_open_mpi" : "a one-process run: open it with fp8_probe_open_mpi");
            return FP8_EINVAL;
        }
        int dup = 0; /* a shadow equal to the active recipe or an earlier shadow adds nothing */
        for (int k = 0; k < p->nrec && !dup; k++)
            dup = strcmp(p->st[k]->recipe.spec, r.spec) == 0;
        if (dup)
            continue;
        p->group[p->nrec] = gi;
        p->st[p->nrec] = fp8_recipe_state_alloc(&r, p->role);
        if (!p->st[p->nrec]) {
            return FP8_EINVAL;
        }
        fp8_recipe_state_set_threads(p->st[p->nrec], p->run->opt.threads); /* each cast's parts side by side */
        p->nrec++;
    }
    return FP8_OK;
}

/* p entered in run's file and probe list (run lock taken here): 1, or 0
 * with the error (a tensor of that name declared before, no memory). */
static int register_probe(fp8_probe_run *run, fp8_probe *p)
{
    pthread_mutex_lock(&run->lock);
    /* one probe per tensor name: a second would merge two tensors' records
     * (another role or layer) or write each (tensor, recipe, step) twice */
    int ok = 1, known = fp8_store_find_tensor(run->store, p->name);
    const fp8_probe *q = known >= 0 && known < run->ntensor_probe ? run->tensor_probe[known] : NULL;
    if (q) {
        ok = 0;
        if (q->role != p->role || q->layer != p->layer)
            FP8_ERROR(FP8_EINVAL,
                      "probe '%s' is already declared as role %s, layer %d; declaring it again as role %s, layer %d "
                      "would merge two tensors' records: give the second another name",
                      p->name, fp8_role_name(q->role), q->layer, fp8_role_name(p->role), p->layer);
        else
            FP8_ERROR(FP8_EINVAL, "probe '%s' is already declared in this run: keep the fp8_probe the first "
                      "fp8_probe_declare returned", p->name);
    }
    if (ok)
        p->tensor_id = fp8_store_tensor(run->store, p->name, p->role, p->layer);
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
        p->snapshot = run->snapshot_pattern && fnmatch(run->snapshot_pattern, p->name, 0) == 0;
    }
    pthread_mutex_unlock(&run->lock);
    return ok;
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
    if (forked(run, "fp8_probe_declare"))
        return NULL;
    fp8__probe_settle(run);
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
    if (add_recipes(p, specs, n) != FP8_OK) {
        probe_free(p);
        return NULL;
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
    if (!register_probe(run, p)) {
        probe_free(p);
        return NULL;
    }
    return p;
}

/* (probe_internal.h) */
int fp8__probe_unusable(const fp8_probe *p, const char *fn)
{
    if (fp8__live_has(p, FP8__LIVE_PROBE))
        return forked(p->run, fn);
    if (fp8__live_kind_of(p) == FP8__LIVE_RUN)
        FP8_ERROR(FP8_EINVAL, "%s: the handle is a run (fp8_probe_run), not a probe", fn);
    else
        FP8_ERROR(FP8_EINVAL, "%s: the probe is not live: its run was closed (fp8_probe_close frees every probe "
                  "of the run) or it was never returned by fp8_probe_declare", fn);
    return 1;
}

/* (probe_internal.h) */
int fp8__run_unusable(const fp8_probe_run *run, const char *fn)
{
    if (fp8__live_has(run, FP8__LIVE_RUN))
        return forked(run, fn);
    if (fp8__live_kind_of(run) == FP8__LIVE_PROBE)
        FP8_ERROR(FP8_EINVAL, "%s: the handle is a probe (fp8_probe), not a run", fn);
    else
        FP8_ERROR(FP8_EINVAL, "%s: the run is closed (or was never returned by fp8_probe_open)", fn);
    return 1;
}

/* (probe_internal.h) */
int fp8__probe_check_tensor(const char *fn, const void *x, size_t rows, size_t cols, size_t elem)
{
    if (!x)
        return FP8_ERROR(FP8_EINVAL, "%s: the tensor is NULL", fn);
    if (!rows || !cols || rows > SIZE_MAX / cols / elem || rows * cols > PTRDIFF_MAX / elem)
        return FP8_ERROR(FP8_EINVAL, "%s: shape %zux%zu is %s", fn, rows, cols,
                         !rows || !cols ? "empty" : "too large (rows x cols elements do not fit in memory)");
    return FP8_OK;
}

int fp8__probe_check_step(const char *fn, int64_t step)
{
    if (step < 0 || step > FP8_STEP_MAX)
        return FP8_ERROR(FP8_EINVAL, "%s: step %lld is outside 0..%lld (2^62)", fn, (long long)step,
                         (long long)FP8_STEP_MAX);
    return FP8_OK;
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

/* (probe_internal.h) */
void fp8__probe_store_series(fp8_probe_run *run, const fp8_probe *p, const step_acc *a)
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

int fp8_probe_scalar(fp8_probe_run *run, const char *name, int64_t step, double value)
{
    if (!run || !name)
        return FP8_ERROR(FP8_EINVAL, "fp8_probe_scalar: %s is NULL", run ? "the name" : "the run");
    if (fp8__run_unusable(run, "fp8_probe_scalar"))
        return FP8_EINVAL;
    if (fp8__probe_check_step("fp8_probe_scalar", step) != FP8_OK)
        return FP8_EINVAL;
    pthread_mutex_lock(&run->lock);
    int id = run->io_failed ? -1 : fp8_store_scalar_name(run->store, name);
    int named = run->io_failed || id >= 0;
    pthread_mutex_unlock(&run->lock);
    if (!named)
        return FP8_EINVAL;
    if (!run->bg)
        return scalar_now(run, id, step, value);
    fp8__bg_scalar(run->bg, scalar_now, id, step, value);
    return FP8_OK;
}

static int scalar_now(fp8_probe_run *run, int id, int64_t step, double value)
{
    pthread_mutex_lock(&run->lock);
    int st = FP8_OK;
    if (run->io_failed || id < 0)
        run->dropped++;
    else
        st = fp8_store_add_scalar(run->store, id, step, value);
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
    if (!run)
        return FP8_ERROR(FP8_EINVAL, "fp8_probe_step_end: the run is NULL");
    if (fp8__run_unusable(run, "fp8_probe_step_end"))
        return FP8_EINVAL;
    if (!run->bg)
        return step_end_now(run);
    fp8__bg_step_end(run->bg, step_end_now, step);
    return fp8__bg_error(run->bg);
}

static int step_end_now(fp8_probe_run *run)
{
    pthread_mutex_lock(&run->lock);
    int rst = reduce_delayed(run);
    for (int k = 0; k < run->nprobes; k++) {
        fp8_probe *p = run->probes[k];
        pthread_mutex_lock(&p->lock);
        /* the step's series rows first: they need the scales this step used */
        fp8__probe_store_series(run, p, &p->acc);
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
    if (fp8__run_unusable(run, "fp8_probe_flush"))
        return FP8_EINVAL;
    int bst = FP8_OK;
    if (run->bg) {
        fp8__bg_drain(run->bg);
        bst = fp8__bg_error(run->bg);
    }
    pthread_mutex_lock(&run->lock);
    int st = flush_locked(run);
    pthread_mutex_unlock(&run->lock);
    return st != FP8_OK ? st : bst;
}

int fp8_probe_set_training(fp8_probe_run *run, int training)
{
    if (!run)
        return FP8_ERROR(FP8_EINVAL, "fp8_probe_set_training: the run is NULL");
    if (fp8__run_unusable(run, "fp8_probe_set_training"))
        return FP8_EINVAL;
    __atomic_store_n(&run->eval, !training, __ATOMIC_RELAXED);
    return FP8_OK;
}

uint64_t fp8_probe_dropped(const fp8_probe_run *run)
{
    if (!run || !fp8__live_has(run, FP8__LIVE_RUN) || forked(run, "fp8_probe_dropped"))
        return 0;
    fp8__probe_settle((fp8_probe_run *)run);
    return run->dropped;
}

int fp8_probe_close(fp8_probe_run *run)
{
    if (!run)
        return FP8_OK;
    if (fp8__run_unusable(run, "fp8_probe_close"))
        return FP8_EINVAL;
    fp8__live_remove(run); /* from here on, other calls with it are refused */
    int bst = FP8_OK;
    if (run->bg) { /* what it was handed, done; then no more thread */
        fp8__bg_drain(run->bg);
        bst = fp8__bg_error(run->bg);
        fp8__bg_stop(run->bg);
        run->bg = NULL;
    }
    pthread_mutex_lock(&run->lock);
    for (int k = 0; k < run->nprobes; k++) { /* a last step whose step_end never came */
        fp8_probe *p = run->probes[k];
        pthread_mutex_lock(&p->lock);
        fp8__probe_store_series(run, p, &p->acc);
        p->acc.has = 0;
        store_block_amax(run, p);
        pthread_mutex_unlock(&p->lock);
    }
    int st = run->io_failed ? FP8_EIO : FP8_OK;
    int cst = fp8_store_close(run->store); /* flushes what is buffered */
    if (st == FP8_OK)
        st = cst;
    if (st == FP8_OK)
        st = bst;
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

int fp8_probe_active_scale(fp8_probe *p, float *scale, float *scale_inv)
{
    if (!p || !scale || !scale_inv)
        return FP8_ERROR(FP8_EINVAL, "fp8_probe_active_scale: %s is NULL", !p ? "the probe" : "an output");
    if (fp8__probe_unusable(p, "fp8_probe_active_scale"))
        return FP8_EINVAL;
    if (!p->has_active || p->st[0]->recipe.kind != FP8_RECIPE_DELAYED)
        return FP8_ERROR(FP8_EINVAL, "fp8_probe_active_scale '%s': the active recipe is not a per-tensor delayed "
                                     "recipe (its scale comes from each tensor)", p->name);
    fp8__probe_settle(p->run);
    pthread_mutex_lock(&p->lock);
    *scale = p->st[0]->scale, *scale_inv = p->st[0]->scale_inv;
    pthread_mutex_unlock(&p->lock);
    return FP8_OK;
}

int fp8_probe_recipes(fp8_probe *p, const char **specs, int max)
{
    if (!p)
        return FP8_ERROR(FP8_EINVAL, "fp8_probe_recipes: the probe is NULL");
    if (fp8__probe_unusable(p, "fp8_probe_recipes"))
        return FP8_EINVAL;
    for (int i = 0; specs && i < p->nrec && i < max; i++)
        specs[i] = p->st[i]->recipe.spec;
    return p->nrec;
}

int fp8_probe_last_stats(fp8_probe *p, int i, int64_t *step, fp8_stats *out)
{
    if (!p || !step || !out)
        return FP8_ERROR(FP8_EINVAL, "fp8_probe_last_stats: %s is NULL", !p ? "the probe" : "an output");
    if (fp8__probe_unusable(p, "fp8_probe_last_stats"))
        return FP8_EINVAL;
    fp8__probe_settle(p->run);
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
