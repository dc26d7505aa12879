/*
 * compare_notes.h — compare's notes (compare_notes.c): the recipe a run
 * cast with, overflow events by phase of the LR schedule, histories not
 * shorter than the run, pairs an amax floor kept apart.
 */
#ifndef FP8_AN_COMPARE_NOTES_H
#define FP8_AN_COMPARE_NOTES_H

#include "analysis.h"

/* The recipe a run cast tensor t with: its active one,
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

#endif
