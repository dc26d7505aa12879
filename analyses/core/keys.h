/*
 * keys.h — the report's summary: one short line per question a researcher
 * brings (where delayed scaling overflows and underflows, what JIT buys,
 * what blocks buy, E4M3 or E5M2, amax stability, a safe history and margin,
 * outliers and Smooth SwiGLU, the loss), each with its key number, its
 * spread over the runs or interval, and the section with the evidence.
 * The analysis that answers a question sets its line (an_key); questions
 * no analysis could answer say why (an_key_missing).
 */
#ifndef FP8_AN_KEYS_H
#define FP8_AN_KEYS_H

#include "analysis.h"
#include "contrasts.h"

/* A value's spread over the runs: "x" for one run or equal values, else
 * "lo..hi" (printf format for each end). */
typedef struct {
    int n;
    double lo, hi;
} an_span;
void an_span_add(an_span *s, double v);
const char *an_span_fmt(const an_span *s, const char *fmt, char *buf, size_t n);

/* Set question q's line: anchor is the heading of the section with the
 * evidence (its text; the link is derived), fmt the line. */
void an_key(an_ctx *c, int q, const char *section, const char *fmt, ...) __attribute__((format(printf, 4, 5)));

/* The question's title, and the GitHub-style anchor of a heading. */
const char *an_key_title(int q);
void an_slug(const char *heading, char *out, size_t n);

/* compare: keep one factor group of run `run` for the cross-run lines. */
/* One compare group of one run, kept for the summary and the figures. */
struct an_frow {
    int factor, role, run, tensors;
    char la[96], lb[96];
    double mean, lo, hi, under_a, under_b, median;
};
void an_frow_add(an_ctx *c, const an_cgroup *G, int run);
/* compare: the lines of the timing, granularity and format questions. */
void an_keys_factors(an_ctx *c);

#endif
