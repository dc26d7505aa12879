/*
 * series.h — one tensor under one recipe over its steps after warm-up: its
 * statistics (series.c), shared by the verdicts, compare, contrasts, advise,
 * the figures and the report.  Definitions: docs/analyses.md, "compare".
 */
#ifndef FP8_AN_SERIES_H
#define FP8_AN_SERIES_H

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

void an_series_cache_free(an_run *a);

/* 1 for recipes with one scale per tensor (none, delayed, current). */
int an_per_tensor_scale(const fp8_recipe *p);

#endif
