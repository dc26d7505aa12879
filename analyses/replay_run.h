/*
 * replay_run.h — internal to the replay analysis: one run's replay as
 * replay.c computes it and replay_report.c renders it.  Settings are
 * indexed k = (history index x 2 + algorithm) x NM + margin.
 */
#ifndef FP8_AN_REPLAY_RUN_H
#define FP8_AN_REPLAY_RUN_H

#include <stddef.h>

#include "analysis.h"
#include "replay.h"

static const int hist_lens[] = {1, 4, 16, 64, 256, 1024};
#define NH 6
#define NM 4
#define NSET (NH * 2 * NM)

/* The per-setting sums, split by half of the run (robustness). */
typedef struct {
    size_t events, steps, warm_events, events_half[2];
    double numel;
    an_bounds ov, un, ov_est, un_est; /* ov/un: lo and hi used; *_est: est only */
} ssum;

static inline const char *algo_name(int k) { return (k / NM) % 2 ? "most_recent" : "max"; }

/* A tensor's line of replay_tensors.tsv: its events under TE's default and
 * under history 16, and its own best setting (-1: every step warm-up). */
typedef struct {
    int t;
    size_t steps, ev1024, ev16;
    int best;
    size_t best_events;
    double best_un; /* its flush upper bound, a fraction */
} tensor_row;

/* A delayed recipe recorded on a tensor, replayed with its own settings
 * (replay_truth.tsv): scales compared at every step, the true counts
 * against the histogram bounds at the steps with statistics. */
typedef struct {
    int t, r;
    size_t checked, match, recs, outside;
    double ovt, ovl, ovh, ove, unt, unl, unh, une;
} truth_row;

/* The truth rows of one recipe summed over tensors. */
typedef struct {
    double steps, match, outside, recs, ov, ovest, un, unest;
} truth_sum;

/* A point of the front: settings at the very same point merged. */
typedef struct {
    char label[256];
    size_t events;
    double un_lo_pct, un_hi_pct;
} front_point;

/* One run's replay, everything its renderers read. */
typedef struct {
    int ntens;             /* tensors with records (0: nothing to replay) */
    int from_records;      /* no every-step series: replayed at the records' steps */
    int hist_unreadable;   /* exponent histograms unreadable: events only */
    ssum sets[NSET];       /* per setting, summed over tensors */
    size_t with_ev[NSET];  /* tensors with at least one event */
    tensor_row *tens;
    size_t ntensrows;
    truth_row *truth;
    size_t ntruth;
    truth_sum *by_recipe;  /* [nrecipes] */
    size_t nreduced;       /* recipe-series left out of the check: they reduce across ranks */
    int front[NSET], nfront;     /* settings not certainly dominated */
    front_point *points;
    int npoints;
    int best, b1;          /* the choice on the whole run and on its first half (-1: none) */
    int both;              /* beats TE's default on both axes (-1: none) */
} run_replay;

enum { I1024 = (NH - 1) * 2 * NM, I16 = 2 * 2 * NM }; /* TE's default (1024, max, 0); history 16, max, 0 */

/* Run a replayed: 0, or 1 out of memory (R then freed by the caller). */
int an_replay_compute(const an_run *a, run_replay *R);
void an_replay_free(run_replay *R);

/* Setting i of s[0..n) certainly beaten by another on both axes. */
int an_replay_dominated(const ssum *s, int i, int n);

#endif
