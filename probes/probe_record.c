/*
 * probe_record.c — the calls a training loop makes on a tensor
 * (fp8_probe_record, _record_bits, _apply, _cast, _cast_recipe,
 * _note_amax, _needs_tensor): x's amax, the every-step series, block
 * amaxes, Smooth SwiGLU's scales, amax reductions over ranks, and every
 * recipe's cast — on a recorded step in one sweep over x with its
 * statistics.  Locking: probe_internal.h.
 */
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "arrays.h"
#include "probe_internal.h"
#include "live.h"
#include "quantize_many.h"
#include "smooth.h"

/* What fp8_probe_record and fp8_probe_note_amax do past their checks, on
 * the calling thread or the run's background thread (background.h). */
static int record_now(fp8_probe *p, int64_t step, const float *x, size_t rows, size_t cols);
static void note_now(fp8_probe *p, int64_t step, float amax, unsigned nonfinite);

static int recorded_step(const fp8_probe_options *o, int64_t step)
{
    if (step < o->start || (o->end >= 0 && step > o->end))
        return 0;
    return (step - o->start) % o->every == 0;
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

/* A recorded step's casts in one sweep over x (quantize_many.h), x's own
 * statistics given in xs: the same bits as cast_all with xs given, which
 * casts them instead when the sweep has no memory. */
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
    if (fp8__quantize_many(j->x, j->rows, j->cols, j->flags | FP8_STATS_X_GIVEN, threads, xs, &j->ai, q, n) !=
        FP8_OK)
        return cast_all(j); /* (xs given to each) */
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
    if (fp8__probe_unusable(weight, "fp8_probe_smooth_from"))
        return FP8_EINVAL;
    if (fp8__probe_unusable(input, "fp8_probe_smooth_from"))
        return FP8_EINVAL;
    fp8__probe_settle(input->run);
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
    if (fp8__probe_unusable(p, "fp8_probe_cast_recipe"))
        return FP8_EINVAL;
    fp8__probe_settle(p->run);
    int e = fp8__probe_check_tensor("fp8_probe_cast_recipe", x, rows, cols, sizeof(float));
    if (e == FP8_OK)
        e = fp8__check_out("fp8_probe_cast_recipe", x, out, rows * cols);
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
     * in that read (their amax is the same), given to every recipe's cast
     * (cast_swept): the read that waited for memory does x's share of the
     * work, the sweep over the recipes' casts has less */
    fp8_amax_info ai = {0, 0, 0};
    fp8_stats *xs = rec ? malloc(sizeof *xs) : NULL; /* (NULL: each recipe computes them itself) */
    /* an unrecorded step whose active recipe casts: the amax comes from the
     * active cast's own pass, done first (nothing else reads x then; a
     * recipe reducing its amax over ranks needs it before any cast) */
    int fused = !rec && !bam && out && p->has_active && !reduces(p);
    const int shape_ok = rows && cols && rows <= SIZE_MAX / cols;
    if (xs && shape_ok)
        fp8__quantize_many_warm(rows * cols, o->threads, p->nrec, out == x && p->has_active);
    if (xs && (!shape_ok || fp8_tensor_stats_ex(x, rows * cols, xs, flags, o->threads) != FP8_OK)) {
        free(xs); /* (out of memory: each recipe computes them itself) */
        xs = NULL;
    }
    if (xs)
        fp8__stats_amax(xs, &ai);
    else if (!fused && shape_ok)
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
        fp8__probe_store_series(run, p, &done);
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

/* A record handed to the run's background thread: at a step that needs
 * only x's amax (fp8_probe_needs_tensor), the amax read here and noted
 * there; else a copy of x, recorded there.  A tensor larger than the
 * copies' bound, or no memory for its copy: recorded here, after all
 * that came before. */
static int record_background(fp8_probe *p, int64_t step, const float *x, size_t rows, size_t cols)
{
    fp8__bg *b = p->run->bg;
    if (!needs_tensor(p, step)) {
        fp8_amax_info ai;
        fp8_tensor_amax(x, rows * cols, &ai);
        fp8__bg_note(b, note_now, p, step, ai.amax, (ai.inf_count ? 1u : 0u) | (ai.nan_count ? 2u : 0u));
        return FP8_OK;
    }
    float *copy = fp8__bg_buffer(b, rows * cols);
    if (!copy) {
        fp8__bg_drain(b);
        return probe_run(p, step, x, rows, cols, NULL);
    }
    memcpy(copy, x, rows * cols * sizeof *copy);
    fp8__bg_record(b, record_now, p, step, copy, rows, cols);
    return FP8_OK;
}

/* The checks of a call handing over a tensor of rows x cols at step (its
 * elements counted as floats: a 16-bit tensor is converted to them):
 * FP8_OK, or the error, named. */
static int tensor_call(const fp8_probe *p, const char *fn, const void *x, size_t rows, size_t cols, int64_t step)
{
    if (fp8__probe_unusable(p, fn))
        return FP8_EINVAL;
    int e = fp8__probe_check_tensor(fn, x, rows, cols, sizeof(float));
    return e != FP8_OK ? e : fp8__probe_check_step(fn, step);
}

int fp8_probe_record(fp8_probe *p, int64_t step, const float *x, size_t rows, size_t cols)
{
    if (!p)
        return FP8_ERROR(FP8_EINVAL, "fp8_probe_record: the probe is NULL");
    int e = tensor_call(p, "fp8_probe_record", x, rows, cols, step);
    if (e != FP8_OK)
        return e;
    if (__atomic_load_n(&p->run->eval, __ATOMIC_RELAXED))
        return FP8_OK;
    if (p->run->bg)
        return record_background(p, step, x, rows, cols);
    return probe_run(p, step, x, rows, cols, NULL);
}

static int record_now(fp8_probe *p, int64_t step, const float *x, size_t rows, size_t cols)
{
    return probe_run(p, step, x, rows, cols, NULL);
}

int fp8_probe_record_bits(fp8_probe *p, int64_t step, const uint16_t *x, fp8_dtype dtype, size_t rows, size_t cols)
{
    if (!p)
        return FP8_ERROR(FP8_EINVAL, "fp8_probe_record_bits: the probe is NULL");
    int e = tensor_call(p, "fp8_probe_record_bits", x, rows, cols, step);
    if (e != FP8_OK)
        return e;
    if (__atomic_load_n(&p->run->eval, __ATOMIC_RELAXED))
        return FP8_OK;
    if (dtype != FP8_DTYPE_BF16 && dtype != FP8_DTYPE_F16)
        return FP8_ERROR(FP8_EINVAL, "fp8_probe_record_bits: dtype must be bf16 or fp16");
    size_t n = rows * cols;
    fp8__bg *b = p->run->bg && needs_tensor(p, step) ? p->run->bg : NULL; /* (else the amax of f, below) */
    float *f = b ? fp8__bg_buffer(b, n) : NULL;
    if (!f)
        b = NULL, f = malloc(n * sizeof *f);
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
    if (b) { /* converted straight into the background thread's copy */
        fp8__bg_record(b, record_now, p, step, f, rows, cols);
        return FP8_OK;
    }
    int st = p->run->bg ? record_background(p, step, f, rows, cols) : probe_run(p, step, f, rows, cols, NULL);
    free(f);
    return st;
}

int fp8_probe_apply(fp8_probe *p, int64_t step, const float *x, size_t rows, size_t cols, float *out)
{
    if (!p || !out)
        return FP8_ERROR(FP8_EINVAL, "fp8_probe_apply: %s is NULL", !p ? "the probe" : "out");
    int e = tensor_call(p, "fp8_probe_apply", x, rows, cols, step);
    if (e == FP8_OK)
        e = fp8__check_out("fp8_probe_apply", x, out, rows * cols);
    if (e != FP8_OK)
        return e;
    fp8__probe_settle(p->run);
    if (__atomic_load_n(&p->run->eval, __ATOMIC_RELAXED))
        return fp8_probe_cast(p, x, rows, cols, out);
    return probe_run(p, step, x, rows, cols, out);
}

int fp8_probe_cast(fp8_probe *p, const float *x, size_t rows, size_t cols, float *out)
{
    if (!p || !out)
        return FP8_ERROR(FP8_EINVAL, "fp8_probe_cast: %s is NULL", !p ? "the probe" : "out");
    if (fp8__probe_unusable(p, "fp8_probe_cast"))
        return FP8_EINVAL;
    fp8__probe_settle(p->run);
    int e = fp8__probe_check_tensor("fp8_probe_cast", x, rows, cols, sizeof(float));
    if (e == FP8_OK)
        e = fp8__check_out("fp8_probe_cast", x, out, rows * cols);
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

int fp8_probe_needs_tensor(fp8_probe *p, int64_t step)
{
    if (!p)
        return FP8_ERROR(FP8_EINVAL, "fp8_probe_needs_tensor: the probe is NULL");
    if (fp8__probe_unusable(p, "fp8_probe_needs_tensor"))
        return FP8_EINVAL; /* (no wait for a background thread: the answer rests on the options and recipes) */
    int e = fp8__probe_check_step("fp8_probe_needs_tensor", step);
    if (e != FP8_OK)
        return e;
    return needs_tensor(p, step);
}

int fp8_probe_note_amax(fp8_probe *p, int64_t step, float amax, unsigned nonfinite)
{
    if (!p)
        return FP8_ERROR(FP8_EINVAL, "fp8_probe_note_amax: the probe is NULL");
    if (fp8__probe_unusable(p, "fp8_probe_note_amax"))
        return FP8_EINVAL;
    int e = fp8__probe_check_step("fp8_probe_note_amax", step);
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
    if (p->run->bg)
        fp8__bg_note(p->run->bg, note_now, p, step, amax, nonfinite);
    else
        note_now(p, step, amax, nonfinite);
    return FP8_OK;
}

static void note_now(fp8_probe *p, int64_t step, float amax, unsigned nonfinite)
{
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
        fp8__probe_store_series(p->run, p, &done);
        pthread_mutex_unlock(&p->run->lock);
    }
}
