/*
 * where.h — the report's first question across runs (where.c).
 */
#ifndef FP8_AN_WHERE_H
#define FP8_AN_WHERE_H

#include "analysis.h"
#include "verdicts.h"

/* Each tensor's verdict of each run, then across the runs the
 * tensor x run grid (to c->md), summary.json "verdicts" and the summary's
 * first line (flushed: its closing clause, may be empty). */
void an_where_add(an_ctx *c, an_run *a, int t, an_verdict v, const an_vinfo *vi);
void an_where_render(an_ctx *c, const char *flushed);
void an_where_free(an_ctx *c);

#endif
