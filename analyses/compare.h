/*
 * compare.h — per-series statistics after warm-up and the per-tensor
 * verdict, shared by compare, contrasts, advise, the figures and the report.
 */
#ifndef FP8_AN_COMPARE_H
#define FP8_AN_COMPARE_H

#include "analysis.h"

/* One tensor under one recipe over its steps after warm-up (warm-up apart). */
typedef struct {
    size_t records;            /* recorded steps after warm-up                 */
    size_t events, event_steps;/* overflow events and the steps counted          */
    int every_step;            /* 1: events from the every-step rows (exact at
                                  every step); 0: at recorded steps only       */
    size_t exact;              /* records with SQNR +inf (exact casts)         */
    double numel;              /* sum of numel over the records               */
    double overflow_rate, te_overflow_rate, underflow_rate, subnormal_rate;
                               /* pooled: sum of counts / sum of numel; te: NaN
                                  when the file does not record it             */
    double sqnr_p05, sqnr_p50, sqnr_p95; /* over records with finite SQNR, dB */
    double relerr_p50, relerr_p95;
    double scale_log2_sd;      /* per-tensor scales: sd of log2(s_t/s_{t-1}) */
    size_t scale_changes;
    double block_spread;       /* grouped: mean log2(scale_inv max/min), bits */
    int64_t last_step;
    /* warm-up steps, on their own */
    size_t warm_records, warm_events, warm_steps;
    double warm_numel, warm_overflows, warm_underflows;
} an_sstats;

int an_series_stats(const an_run *a, int t, int r, an_sstats *o);
/* The same, computed once per run and kept (NULL when out of memory). */
const an_sstats *an_series_cached(an_run *a, int t, int r);

typedef enum { AN_VERDICT_NA = 0, AN_VERDICT_SAFE, AN_VERDICT_JIT, AN_VERDICT_BLOCK } an_verdict;

typedef struct {
    int D, C, B;               /* delayed, its current partner, the best finer
                                  granularity partner of C (-1 none)          */
    double d_timing, p_timing; /* SQNR(C) - SQNR(D), dB, Holm-adjusted p      */
    double d_gran, p_gran;     /* SQNR(B) - SQNR(C)                            */
    size_t events_d, steps_d, events_c;
    double under_c, under_b;
    char why[160];             /* the rule that decided, or why n/a          */
} an_vinfo;

/* 1 for recipes with one scale per tensor (none, delayed, current). */
int an_per_tensor_scale(const fp8_recipe *p);

extern const char *an_verdict_rule;
an_verdict an_tensor_verdict(const an_ctx *c, an_run *a, int t, an_vinfo *vi);
const char *an_verdict_name(an_verdict v);

/* compare_notes.c.  The recipe a run cast tensor t with: its active one,
 * else (a run that only recorded) its first delayed recipe, *shadow = 1
 * then; -1 none. */
int an_cast_recipe_of(const an_run *a, int t, int *shadow);
/* Overflow events and tensor-steps of tensor t under recipe r after its
 * warm-up, by phase of the LR schedule (every step for per-tensor scales,
 * else at the statistics steps); added into ev and steps. */
void an_tensor_phase_events(const an_ctx *c, const an_run *a, int t, int r, size_t ev[], size_t steps[]);
/* The run's events by phase (a sentence, summary.json "phases"); its
 * delayed histories not shorter than the run (a warning each); after
 * factor k's table, the pairs an amax floor kept apart. */
void an_phase_events(an_ctx *c, an_run *a);
void an_history_warnings(an_ctx *c, an_run *a);
void an_floor_bound_note(an_ctx *c, const an_run *a, int k);

/* where.c: each tensor's verdict of each run, then across the runs the
 * tensor x run grid (to c->md), summary.json "verdicts" and the summary's
 * first line (flushed: its closing clause, may be empty). */
void an_where_add(an_ctx *c, an_run *a, int t, an_verdict v, const an_vinfo *vi);
void an_where_render(an_ctx *c, const char *flushed);
void an_where_free(an_ctx *c);

/* advise.c: element bits + scale bits per element of recipe p on a
 * rows x cols tensor of the given role whose elements are in format f. */
double an_bits_per_element(const fp8_recipe *p, const fp8_format *f, fp8_role role, uint64_t rows, uint64_t cols);

#endif
