/*
 * compare.h — per-series statistics and the per-tensor verdict, shared by
 * compare, advise and the report.
 */
#ifndef FP8_AN_COMPARE_H
#define FP8_AN_COMPARE_H

#include "analysis.h"

/* One tensor under one recipe over all its recorded steps. */
typedef struct {
    size_t records, events;    /* events: recorded steps with >= 1 overflow  */
    size_t exact;              /* records with SQNR +inf (exact casts)       */
    double overflow_rate, underflow_rate, subnormal_rate; /* sums over numel */
    double sqnr_p05, sqnr_p50, sqnr_p95; /* over records with finite SQNR, dB */
    double relerr_p50, relerr_p95;
    double scale_log2_sd;      /* per-tensor scales: sd of log2(s_t/s_{t-1}) */
    size_t scale_changes;
    double block_spread;       /* grouped: mean log2(scale_inv max/min), bits */
    int64_t last_step;
} an_sstats;

int an_series_stats(const an_run *a, int t, int r, an_sstats *o);
/* The same, computed once per run and kept (NULL when out of memory). */
const an_sstats *an_series_cached(an_run *a, int t, int r);

typedef enum { AN_VERDICT_NA = 0, AN_VERDICT_SAFE, AN_VERDICT_JIT, AN_VERDICT_BLOCK } an_verdict;
extern const char *an_verdict_rule;
/* st: the tensor's an_sstats per recipe [nrecipes]; D, C, B get the delayed,
 * current and best fine-grained recipe used (-1 none). */
an_verdict an_tensor_verdict(const an_ctx *c, const an_run *a, int t, const an_sstats *st, int *D, int *C, int *B);
const char *an_verdict_name(an_verdict v);

/* advise.c: element bits + scale bits per element of recipe p on a
 * rows x cols tensor of the given role whose elements are in format f. */
double an_bits_per_element(const fp8_recipe *p, const fp8_format *f, fp8_role role, uint64_t rows, uint64_t cols);

#endif
