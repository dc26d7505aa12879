/*
 * report.h — the report over loaded runs (fp8prof report).
 */
#ifndef FP8_AN_REPORT_H
#define FP8_AN_REPORT_H

#include "analysis.h"

/* Run every analysis and figure into c->outdir and write report.md and
 * index.html there.  Progress lines count on from nsteps_done_before
 * (loading), timed from t0 (CLOCK_MONOTONIC seconds).  0 or 1. */
int an_report(an_ctx *c, int nsteps_done_before, double t0);
/* The progress lines' total: loading, every analysis, figures, done. */
int an_report_total(void);

#endif
