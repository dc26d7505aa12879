/*
 * compare.h — what compare's parts share (compare.c, compare_notes.c,
 * where.c), with the series statistics and verdicts of analyses/core.
 */
#ifndef FP8_AN_COMPARE_H
#define FP8_AN_COMPARE_H

#include "analysis.h"

#include "series.h"
#include "verdicts.h"

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
