/*
 * analysis.h — what every analysis program shares: the runs it reads (as
 * record summaries, histograms left on disk), an index of each tensor x
 * recipe series in step order, the output directory where tab-separated
 * data files go, the Markdown section it writes, and the findings it hands
 * to the report's summary.
 *
 * Analyses read runs only through lib (fp8_store.h); nothing in lib or
 * probes depends on them.
 */
#ifndef FP8_ANALYSIS_H
#define FP8_ANALYSIS_H

#include <stdint.h>
#include <stdio.h>

#include "fp8_recipe.h"
#include "fp8_store.h"

typedef struct {
    fp8_run *run;            /* summaries (run->summaries)                 */
    char label[64];          /* file name without directory and .h5       */
    fp8_recipe *recipes;     /* parsed specs, [nrecipes]                  */
    int *recipe_ok;          /* the spec parsed                            */
    /* series: record indices grouped by (tensor, recipe), steps ascending:
     * series (t, r) is order[start[t*R+r] .. start[t*R+r+1]) */
    size_t *start, *order;
    int *active;             /* per tensor: the active recipe id, -1 none  */
    int64_t record_every;    /* most common step gap between records       */
    struct an_sstats_cache *cache; /* compare.c: per-series statistics, lazily */
} an_run;

/* One line for the report's summary ("a busy reader can act on"). */
#define AN_MAX_FINDINGS 64
typedef struct {
    an_run *runs;
    int nruns;
    const char *outdir;      /* data files and figures go here             */
    FILE *md;                /* Markdown section of the analysis           */
    char *findings[AN_MAX_FINDINGS];
    char topic[AN_MAX_FINDINGS][16];
    /* compare: tensors a delayed recipe overflowed on, across runs */
#define AN_MAX_RISK 512
    int nrisk;
    char risk_name[AN_MAX_RISK][FP8_NAME_MAX];
    int risk_runs[AN_MAX_RISK], risk_events[AN_MAX_RISK], risk_seen[AN_MAX_RISK];
    /* compare: recipes that overflow at nearly every step, across runs */
    int nclip, clip_runs[16];
    char clip_name[16][96];
    double clip_lo[16], clip_hi[16];
    int nfindings;
    /* options shared by the analyses (defaults in an_defaults) */
    const char *tensor;      /* fnmatch pattern of tensors to analyse      */
    const char *vs;          /* outliers --vs: a second run's path         */
    int vs_a, vs_b;          /* outliers: compare loaded runs vs_a and vs_b (-1: off) */
    int baseline;            /* loss: the baseline run (default 0)        */
    double sqnr_margin_db;   /* verdict/advise: "within X dB of the best"  */
    double block_gain_db;    /* verdict: block scaling needed if it gains more */
    double underflow_max;    /* verdict: current scaling loses too much above this fraction */
    double diverge_rel;      /* loss: smoothed relative difference flagged above */
    int diverge_steps;       /* ... for this many consecutive steps        */
    int boot;                /* bootstrap resamples                        */
    unsigned long seed;
    int quiet;
} an_ctx;

void an_defaults(an_ctx *c);

/* CLOCK_MONOTONIC in seconds (the report's progress times). */
double an_now(void);

/* Load runs (summaries) and index them; 0, or 1 with a message printed that
 * names the file and the problem (unreadable, not a run, no records). */
int an_open(an_ctx *c, const char *const *paths, int n);
void an_close(an_ctx *c);

/* Series of tensor t under recipe r: record indices into run->summaries,
 * steps ascending; *n gets the length (0: none). */
const size_t *an_series(const an_run *a, int t, int r, size_t *n);
void an_series_cache_free(an_run *a); /* compare.c */
static inline const fp8_summary *an_rec(const an_run *a, size_t i) { return &a->run->summaries[i]; }

/* The series that describes the tensor's input itself (amax, kurtosis, ...):
 * its active recipe's, else the longest. -1 when the tensor has no records. */
int an_input_recipe(const an_run *a, int t);

/* Indices (into run->snapshots, in step order as written) of tensor t's
 * snapshots, at most AN_MAX_SNAPSHOTS; returns how many. */
#define AN_MAX_SNAPSHOTS 4096
size_t an_snapshots(const an_run *a, int t, size_t *idx);

/* The tensor's delayed-scaling recipe: its active recipe when that is
 * delayed, else the first delayed recipe with records on it; -1 none. */
int an_delayed_recipe(const an_run *a, int t);

/* A short label for recipe r ("hybrid:delayed h=1024 max m=0",
 * "e4m3:block 1x128", ...), stable for tables and legends. */
const char *an_recipe_label(const an_run *a, int r, char *buf, size_t n);

/* The element format tensor t uses under recipe r. */
const fp8_format *an_format(const an_run *a, int t, int r);

/* Open DIR/name for writing a data file (C locale numbers); NULL with a
 * message printed. */
FILE *an_data(const an_ctx *c, const char *name);

/* Close the n data files of an analysis (NULL entries skipped); 1 with a
 * message when a write failed (the files are incomplete), else 0. */
int an_data_close(const an_ctx *c, FILE *const *fs, int n);

/* Add a finding for the report summary (printf-style), under a topic:
 * "risk", "gain", "verdict", "replay", "dynamics", "outliers", "smooth",
 * "loss", "advise".  The summary puts each topic's findings in one bullet. */
void an_finding(an_ctx *c, const char *topic, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* Quantile (0..1) of n doubles; sorts v in place (GSL); NaN if n == 0. */
double an_quantile(double *v, size_t n, double q);

/* Overflow/underflow thresholds of a format in x units for multiplier
 * scale_inv: |x| > over overflows (rounds past max), |x| <= under flushes
 * to zero (round to nearest even). */
void an_thresholds(const fp8_format *f, double scale_inv, double *over, double *under);

/* The analyses: each writes its data files, a Markdown section to c->md
 * and findings; returns 0, 1 on failure (message printed), 3 when the
 * runs lack what it needs (message in the section, not a failure). */
int an_compare(an_ctx *c);
int an_replay(an_ctx *c);
int an_dynamics(an_ctx *c);
int an_outliers(an_ctx *c);
int an_loss(an_ctx *c);
int an_advise(an_ctx *c);

/* Figures over the runs and the analyses' data files in c->outdir (run
 * the analyses first).  Each figure is OUT.png + OUT.svg + OUT.gp. */
typedef struct {
    char name[96];       /* file stem in outdir                       */
    char caption[512];
    char section[32];    /* which analysis it illustrates             */
} an_figure;
#define AN_MAX_FIGURES 48
/* Draws what the runs support; returns the number drawn, *failed gets the
 * number gnuplot failed on (messages printed). */
int an_figures(an_ctx *c, an_figure *figs, int max, int *failed);

#endif
