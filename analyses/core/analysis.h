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
    /* the (tensor, recipe) pairs with records or every-step rows: tensor
     * t's are tpair[t] .. tpair[t+1], recipes ascending in pair_recipe
     * (an_pair finds one); everything below is indexed by pair */
    size_t *tpair, npairs;
    int *pair_recipe;
    /* series: record indices grouped by pair, steps ascending: series of
     * pair k is order[start[k] .. start[k+1]) */
    size_t *start, *order;
    int *active;             /* per tensor: the active recipe id, -1 none  */
    int64_t record_every;    /* most common step gap between records       */
    struct an_sstats_cache *cache; /* compare.c: per-series statistics, lazily */
    /* every-step rows (schema 3 /steps) grouped like the records:
     * rows of pair k are sorder[sstart[k] .. sstart[k+1]) */
    size_t *sstart, *sorder;
    /* warm-up: per tensor, the first step that is not warm-up (docs/analyses.md) */
    int64_t *warm_end;
    int *canon;              /* per pair: the recipe with the same numerics
                                on this tensor that stands for both (factors.h)      */
    struct an_contrasts *contrasts; /* contrasts.c: one-factor comparisons, lazily */
    int64_t steps;           /* an_run_steps, found once by an_open (0: not yet) */
} an_run;

/* The questions of the report's summary, one line each (keys.h), in the
 * order the summary asks them: (a) where delayed scaling overflows, (b)
 * what just-in-time and block scaling buy (two keys, one line), (c) the
 * claim, (d) Smooth SwiGLU, (e) loss, (f) history and margin; then the
 * format and the outliers. */
enum {
    AN_Q_WHERE = 0,
    AN_Q_JIT,
    AN_Q_BLOCKS,
    AN_Q_DYNAMICS,
    AN_Q_SMOOTH,
    AN_Q_LOSS,
    AN_Q_REPLAY,
    AN_Q_FORMAT,
    AN_Q_OUTLIERS,
    AN_NQ
};

/* One line for the report's summary ("a busy reader can act on"). */
#define AN_MAX_FINDINGS 256
typedef struct {
    an_run *runs;
    int nruns;
    const char *outdir;      /* data files and figures go here             */
    FILE *md;                /* Markdown section of the analysis           */
    char *key[AN_NQ];        /* the summary's line per question (an_key), NULL: unanswered */
    char key_section[AN_NQ][128];
    char key_anchor[AN_NQ][160]; /* an explicit anchor the evidence link goes to ("" : the section) */
    char *key_missing[AN_NQ]; /* why a question is unanswered, when an analysis knows */
    struct an_frow *frows;   /* compare's factor groups of every run (keys.c) */
    size_t nfrows, capfrows;
    char *findings[AN_MAX_FINDINGS];
    char topic[AN_MAX_FINDINGS][16];
    /* compare: every tensor's verdict of every run (where.c) */
    struct an_where *where;
    /* compare: recipes that overflow at nearly every step, across runs */
    int nclip, clip_runs[16];
    char clip_name[16][96];
    double clip_lo[16], clip_hi[16];
    int nfindings;
    /* options shared by the analyses (defaults in an_defaults) */
    const char *tensor;      /* fnmatch pattern of tensors to analyse      */
    const char *vs;          /* outliers --vs: a second run's path         */
    int vs_a, vs_b;          /* outliers: compare loaded runs vs_a and vs_b (-1: off) */
    int vs_c;                /* a second Smooth SwiGLU variant: vs_a -> vs_c and
                                vs_b -> vs_c too (-1: none)                   */
    int baseline;            /* loss: the baseline run (default 0)        */
    int baseline_set;        /* set by an option: the report keeps it     */
    const char *loss_name;   /* loss: the scalar series to compare ("loss") */
    double sqnr_margin_db;   /* verdict/advise: "within X dB of the best"  */
    double block_gain_db;    /* verdict: block scaling needed if it gains more */
    double underflow_max;    /* verdict: current scaling loses too much above this fraction */
    int min_events;          /* verdict: delayed overflowed materially at this many events */
    double diverge_rel;      /* loss: smoothed relative difference flagged above */
    int diverge_steps;       /* ... for this many consecutive steps        */
    int boot;                /* bootstrap resamples                        */
    unsigned long seed;
    int quiet;
    double claim_margin_db;  /* claim test: the smallest extra cost of delayed
                                scaling at block granularity that counts (0.1 dB) */
    long long lr_warmup;     /* phases: LR warm-up steps (-1: /meta lr_warmup) */
    double equivalence_pct;  /* loss: the equivalence margin, % of the baseline (1) */
    /* summary.json, filled by the analyses (an_json), written by the report */
#define AN_NJSON 8
    char *json[AN_NJSON];
    size_t jsonn[AN_NJSON];
    FILE *jf[AN_NJSON];
    int jcount[AN_NJSON];
} an_ctx;

/* The sections of summary.json (docs/analyses.md, "summary.json"). */
enum { AN_J_COMPARISONS = 0, AN_J_REPLAY, AN_J_LOSS, AN_J_WARMUP, AN_J_CLAIMS, AN_J_SMOOTH, AN_J_PHASES, AN_J_VERDICTS };

/* Phases of a run (docs/analyses.md, "Phases"): the LR warm-up (steps
 * below /meta lr_warmup, or --lr-warmup), early (the next max(W, 10% of the
 * run) steps), steady state (the rest). */
enum { AN_PHASE_LR_WARMUP = 0, AN_PHASE_EARLY, AN_PHASE_STEADY, AN_NPHASE };
int an_phase(const an_ctx *c, const an_run *a, int64_t step);
const char *an_phase_name(int ph);
/* The run's planned steps (/meta steps), else its last step + 1. */
int64_t an_run_steps(const an_run *a);
/* The LR warm-up steps (--lr-warmup, else /meta lr_warmup), -1 unknown. */
int64_t an_lr_warmup(const an_ctx *c, const an_run *a);
/* [from, to) of phase ph */
void an_phase_range(const an_ctx *c, const an_run *a, int ph, int64_t *from, int64_t *to);

/* Start one more object in a summary.json section: returns the stream to
 * print the object into (separators written), NULL when out of memory. */
FILE *an_json(an_ctx *c, int section);
/* A JSON string literal of s (quotes, backslashes, control characters escaped). */
void an_json_str(FILE *f, const char *s);
/* A JSON number, or null when not finite. */
void an_json_num(FILE *f, double v);
/* Write summary.json into c->outdir: 0, or 1 with a message. */
int an_json_write(an_ctx *c);

void an_defaults(an_ctx *c);

/* A /meta value of the run (docs/schema.md lists the keys the analyses
 * read), NULL when absent. */
const char *an_meta(const an_run *a, const char *key);

/* CLOCK_MONOTONIC in seconds (the report's progress times). */
double an_now(void);

/* Load runs (summaries) and index them; 0, or 1 with a message printed that
 * names the file and the problem (unreadable, not a run, no records). */
int an_open(an_ctx *c, const char *const *paths, int n);
void an_close(an_ctx *c);

/* Series of tensor t under recipe r: record indices into run->summaries,
 * steps ascending; *n gets the length (0: none). */
const size_t *an_series(const an_run *a, int t, int r, size_t *n);
/* What a module keeps on a run or on the context (series statistics,
 * contrasts, verdicts) it frees through a function it registers when it
 * first fills its cache; an_close calls each registered function once
 * (a run's for every run).  So an_close needs to know no module above it. */
void an_on_close_run(void (*fn)(an_run *a));
void an_on_close_ctx(void (*fn)(an_ctx *c));
static inline const fp8_summary *an_rec(const an_run *a, size_t i) { return &a->run->summaries[i]; }

/* Every-step rows of tensor t under recipe r (indices into run->steps),
 * steps ascending; *n = 0 when the file has none (schema < 3). */
const size_t *an_steps(const an_run *a, int t, int r, size_t *n);
static inline const fp8_step_row *an_steprow(const an_run *a, size_t i) { return &a->run->steps[i]; }

/* Warm-up: a delayed recipe casts with its initial scale 1 until its
 * history holds a real amax (finite, > 0).  Steps up to and including the
 * tensor's first step with a real amax are its warm-up; on a tensor with a
 * delayed recipe they are left out of every rate, event count, verdict and
 * comparison of every recipe of that tensor (like for like), and reported
 * on their own.  Tensors without a delayed recipe have none. */
static inline int an_is_warm(const an_run *a, int t, int64_t step) { return step < a->warm_end[t]; }

/* The recipe that stands for r on tensor t: the first (plain before hybrid)
 * recipe recorded on t with the same factors (factors.h), e.g. e4m3:delayed
 * for hybrid:delayed on an activation. */
int an_canon(const an_run *a, int t, int r);

/* The pair id of tensor t and recipe r, -1 when the run has no data for it. */
int an_pair(const an_run *a, int t, int r);

/* 1 when tensor t has records or every-step rows (a --tensor pattern
 * leaves the others registered but empty). */
static inline int an_has_data(const an_run *a, int t) { return a->tpair && a->tpair[t + 1] > a->tpair[t]; }

/* The recipes with records or every-step rows on tensor t, ascending; loop
 * over these, not over every recipe of the run. */
const int *an_tensor_recipes(const an_run *a, int t, size_t *n);

/* An overflow at one cast of a per-tensor scale: amax * scale (float32, as
 * the cast computes it) encodes past the format's max, or an Inf input. */
int an_overflows_at(const fp8_format *f, const fp8_cast_mode *mode, float amax, float scale, unsigned nonfinite);

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

/* The canonical label of recipe r (factors.h: "e4m3 delayed h=1024,max,m=0",
 * "e4m3 block 1x128", "mxfp8 floor"), the same in every table, legend and
 * figure: on tensor t (its role resolves hybrid formats and weight block
 * shapes), or whatever the tensor ("hybrid (e4m3 forward, e5m2 gradients)
 * delayed ...", "e4m3 block 1x128 (weights 128x128)"). */
const char *an_recipe_label(const an_run *a, int r, char *buf, size_t n);
const char *an_recipe_label_on(const an_run *a, int t, int r, char *buf, size_t n);

/* Names (tensor names, recipe specs: n strings stride bytes apart from
 * base) found by binary search; the lowest index among equal names. */
typedef struct {
    const char *base;
    size_t stride;
    int n;
    int *ord;
} an_names;
int an_names_init(an_names *x, const char *base, size_t stride, int n); /* 0, -1 out of memory */
int an_names_find(const an_names *x, const char *key);                  /* index or -1 */
void an_names_free(an_names *x);

/* The element format tensor t uses under recipe r. */
const fp8_format *an_format(const an_run *a, int t, int r);

/* Open DIR/name for writing a data file (C locale numbers), under a
 * temporary name until an_data_close renames it into place; refused when
 * DIR/name is a file of an input run.  NULL with a message printed. */
FILE *an_data(const an_ctx *c, const char *name);

/* Close the n data files of an analysis (NULL entries skipped) and move
 * each into place; a file whose writing failed is removed instead (an
 * older file of that name stays).  1 with a message when one failed. */
int an_data_close(const an_ctx *c, FILE *const *fs, int n);
int an_data_close1(const an_ctx *c, FILE *f);

/* The -o directory of a command: created if absent; 1 with a message
 * naming it when it is a file, cannot be created or is not writable. */
int an_outdir_ready(const char *cmd, const char *dir);

/* Add a finding for the report summary (printf-style), under a topic:
 * "risk", "gain", "verdict", "replay", "dynamics", "outliers", "smooth",
 * "loss", "advise".  The summary puts each topic's findings in one bullet. */
void an_finding(an_ctx *c, const char *topic, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* loss.c: the centred moving-mean window for a series of n points: 21,
 * shrunk for short series (docs/analyses.md). */
int an_smooth_window(size_t n);

/* Quantile (0..1) of n doubles; sorts v in place (GSL); NaN if n == 0. */
double an_quantile(double *v, size_t n, double q);
/* the same value without sorting (v is reordered, not sorted): for a few
 * quantiles of millions of values */
double an_quantile_select(double *v, size_t n, double q);

/* Overflow/underflow thresholds of a format in x units for multiplier
 * scale_inv: |x| > over overflows (rounds past max), |x| <= under flushes
 * to zero (round to nearest even). */
void an_thresholds(const fp8_format *f, double scale_inv, double *over, double *under);

/* The analyses: each writes its data files, a Markdown section to c->md
 * and findings; returns 0, 1 on failure (message printed), 3 when the
 * runs lack what it needs (message in the section, not a failure). */
int an_compare(an_ctx *c);
int an_claim(an_ctx *c);   /* claim.c: delayed scaling at tensor and block granularity */
int an_swiglu(an_ctx *c);  /* swiglu.c: Smooth SwiGLU on identical tensors and across runs */
int an_replay(an_ctx *c);
int an_dynamics(an_ctx *c);
int an_outliers(an_ctx *c);
int an_loss(an_ctx *c);
int an_advise(an_ctx *c);

/* Figures over the runs and the analyses' data files in c->outdir (run
 * the analyses first).  Each figure is OUT.png + OUT.svg + OUT.gp. */
typedef struct {
    char name[96];       /* file stem in outdir; "" a figure not drawn
                            because it would show nothing (caption: why) */
    char caption[512];
    char section[32];    /* which analysis it illustrates             */
} an_figure;
#define AN_MAX_FIGURES 96
/* Draws what the runs support; returns the number drawn, *failed gets the
 * number gnuplot failed on (messages printed). */
int an_figures(an_ctx *c, an_figure *figs, int max, int *failed);

#endif
