/*
 * verdicts.h — the per-tensor verdict (verdicts.c): delayed scaling is
 * safe, needs JIT (current) scaling, or needs block scaling, from the
 * tensor's series statistics and one-factor contrasts.  Definitions:
 * docs/analyses.md, "compare".
 */
#ifndef FP8_AN_VERDICTS_H
#define FP8_AN_VERDICTS_H

#include "analysis.h"

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

extern const char *an_verdict_rule;
an_verdict an_tensor_verdict(const an_ctx *c, an_run *a, int t, an_vinfo *vi);
const char *an_verdict_name(an_verdict v);

#endif
