/*
 * probe_internal.h — internal to probes/: a run and a probe as the API's
 * two files share them.  probe.c holds a run's life (open, declare, step
 * end, flush, close) and the questions a caller asks of a probe;
 * probe_record.c the call a training loop makes on a tensor (record,
 * apply, cast, a noted amax) and everything it runs.
 *
 * Locking: a run's mutex guards its store and probe list; a probe's mutex
 * guards its recipe states.  A probe computes its statistics under its own
 * lock, releases it, then takes the run's lock to store them, so the two are
 * never held in the order probe -> run while step_end holds run -> probe.
 */
#ifndef FP8_PROBE_INTERNAL_H
#define FP8_PROBE_INTERNAL_H

#include <pthread.h>
#include <stdint.h>

#include "fp8_probe.h"
#include "fp8_store.h"
#include "background.h"
#include "groups.h"
#include "recipe_state.h"

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
    fp8__bg *bg;         /* the option background: the run's own thread (NULL: none) */
};

/* 1, with an error naming fn, when a handle the API was given cannot be
 * used: not a live probe / run (closed, never returned, or the other kind),
 * or a run opened with the option background in the process this one was
 * forked from (its thread, and maybe locks it held, did not come along). */
int fp8__probe_unusable(const fp8_probe *p, const char *fn);
int fp8__run_unusable(const fp8_probe_run *run, const char *fn);

/* A tensor handed to the API: rows, cols >= 1 and rows x cols elements of
 * elem bytes addressable, checked before anything reads it; steps in
 * 0..FP8_STEP_MAX (so that step arithmetic cannot overflow downstream). */
int fp8__probe_check_tensor(const char *fn, const void *x, size_t rows, size_t cols, size_t elem);
int fp8__probe_check_step(const char *fn, int64_t step);

/* Store a probe's series rows for the step in a (run lock held). */
void fp8__probe_store_series(fp8_probe_run *run, const fp8_probe *p, const step_acc *a);

/* The run's background thread (if any) done with all it was handed: before
 * a call that reads or changes what that thread works on. */
void fp8__probe_settle(fp8_probe_run *run);

#endif
