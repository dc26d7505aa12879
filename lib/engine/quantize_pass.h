/*
 * quantize_pass.h — internal: the fused pass of the engine's casts and its
 * parts (quantize.c), for the cast in steps (quantize_cast.c) and the sweep
 * (quantize_many.c): the pieces, the per-part sums, the amax pass and the
 * scales, run as jobs of fp8__parallel_for; x's own statistics in steps.
 */
#ifndef FP8_QUANTIZE_PASS_H
#define FP8_QUANTIZE_PASS_H
#include <stdint.h>

#include "cast_internal.h"
#include "fp8_recipe.h"
#include "fp8_stats.h"
#include "quantize_tiles.h"
#include "stats_vec.h"

/* x's group ranges as one cast found them, for the next cast of the same x
 * (`fine` of fp8__cast_begin): groups of seg elements along each of the R
 * rows of C (nbc a row, the last one partial), each one's finite amax and
 * min nonzero |x| (float32 bits; 0x7F800000: none).  A cast whose groups
 * are unions of these (the same rows, a multiple of seg along them, or a
 * whole row) takes its own as their maxima and minima, exact, and reads
 * no x for them (fp8__cast_ranges, quantize_internal.h, gives a begun
 * cast's own). */
typedef struct {
    size_t R, C, seg, nbc;
    const uint32_t *amax, *minnz;
    int in_sweep; /* made piece by piece in the cast's fused pass (a late cast
                     in a sweep, quantize_many.c): a cast may take its own
                     from them only as it casts the same piece, after this
                     one, in the same sweep */
} fp8__ranges;

/* elements cast and summed per step of the fused pass: a piece of x and
 * its x_hat (256 KB) stay in a core's L2 while the passes over them run;
 * measured here, 4096 (L1-sized) was 10 % slower, 32768 and up level */
#define PIECE 32768

/* Interleaved 32-bit sub-histograms (stats_vec.h), flushed into the
 * 64-bit histogram before any counter can wrap. */
typedef struct {
    fp8__hist_state s;
    uint64_t pending;
} hist_acc;

typedef struct {
    fp8__caster caster;
    fp8__moments mom;   /* the error sums when x's statistics are given */
    fp8__moments xmom;  /* x's own statistics (and the error sums otherwise) */
    uint64_t cnt[FP8_NCLASS];
    uint64_t *hist;     /* FP8_EXP_BINS, or NULL */
    hist_acc *hacc;
    int stats;          /* error sums wanted     */
    int xstats;         /* x's statistics wanted (not given by the caller) */
    int scan;           /* x's amax, Inf and NaN counts wanted, piece by piece while hot */
    uint32_t xprefetch; /* x's own pass (fp8__xpass): bytes ahead of x it fetches, 0 none */
    uint32_t amax_bits;
    uint64_t ninf, nnan;
    int te_on;          /* TE's overflow count, |x| > te_thr, taken after each piece's cast */
    float te_thr;
    uint64_t te_n;
    float *buf;         /* PIECE floats          */
    int tiny;           /* a piece's kernel sums were refused as tiny (stats_vec.c): the part's
                           later pieces go the plain way at once (the same bits, no cast twice) */
} pass_ctx;

/* the sums that hold the error sums */
static inline const fp8__moments *fp8__err_sums(const pass_ctx *c) { return c->xstats ? &c->xmom : &c->mom; }

/* Per-tensor recipes and groups one row high (their groups lie in memory
 * order) split into up to MAX_PARTS parts of whole pieces (chunks of whole
 * groups); each part has sums of its own, merged in part order, so the
 * result is the same bits whatever the number of threads that ran the
 * parts (the recipe state's `threads`).  Other layouts run as one part. */
#define MAX_PARTS 8
/* The amax pass and the scales (a maximum, and values group by group: the
 * same whatever the split) in up to this many jobs, finer than the parts
 * so that two threads end together */
#define AJOBS 32

typedef struct {
    pass_ctx c;
    uint64_t hist64[FP8_EXP_BINS]; /* this part's histogram flushes */
    unsigned tflags;               /* per-tensor recipes: the one group's flags */
    int failed;                    /* no buffer on its thread: redone on the caller's */
} part;

typedef struct {
    const layout *L;
    const float *X;
    float *OUT;
    void *CODES;
    size_t cb, numel, unit, U; /* U units of `unit` elements (the last may be short) */
    int grouped, split, P;
    float *scale, *scale_inv;
    unsigned char *flags;
    uint32_t *gamax, *gminnz;
    const fp8__ranges *fine;             /* the amax pass (or, late, each unit) takes the group
                                            ranges from these */
    int minnz;                           /* the amax pass finds each group's min nonzero too: for
                                            statistics, or for other casts' ranges (a sweep);
                                            otherwise gminnz stays "none" */
    int AJ, SJ;                          /* jobs of the amax pass and of the scales */
    int early;                           /* the amax jobs compute the scales too (not NVFP4's:
                                            they need the tensor's amax) */
    int late;                            /* no amax pass: each unit's group ranges and scales are
                                            made in the fused pass, before its cast, while the
                                            unit is in cache (groups one row high) */
    uint32_t pam[AJOBS], pmz[AJOBS];     /* amax pass, per job (pmz: per-tensor recipes) */
    unsigned char off_kernel[AJOBS];     /* scales, per job: groups the grouped kernel does not
                                            take (quantize.c, groups_off: bit 0 a scale not > 0,
                                            bit 1 a subnormal scale_inv) */
    int any_off;                         /* their union: the units (or tile rows' chunks) check
                                            their groups (fp8__fused_units, fused_whole) */
    fp8_recipe_state *st;                    /* the scales: */
    size_t ng;
    uint32_t tot_amax;
    float s_global;
    part *parts;
} fused;

/* P parts, zeroed, each with a zeroed histogram accumulator when want_hist
 * (kept per calling thread: fresh pages cost more than a small cast); NULL
 * when out of memory.  fp8__parts_free gives them back; fp8__parts_hist
 * adds their exponent histograms into out. */
part *fp8__parts_alloc(int P, int want_hist);
void fp8__parts_free(part *parts, int P);
void fp8__parts_hist(part *parts, int P, uint64_t out[FP8_EXP_BINS]);
/* the cast and statistics of units [u0, u1) of a split pass */
void fp8__fused_units(fused *F, part *pp, size_t u0, size_t u1);
/* jobs of fp8__parallel_for over a fused (ctx): part p of the fused pass;
 * range p of SJ of the groups' scales; range p of AJ of the amax pass
 * (with the scales too when F->early) */
void fp8__fused_job(void *ctx, int p);
void fp8__scales_job(void *ctx, int p);
void fp8__amax_job(void *ctx, int p);
/* the amax pass of rows [i0, i1) (groups other than one per tensor);
 * gminnz NULL: the groups' minima are not wanted */
void fp8__amax_rows(const layout *L, const float *X, size_t i0, size_t i1, uint32_t *gamax, uint32_t *gminnz);
/* whether the amax pass hands L's rows whole to the vector range kernel
 * (short groups one row high), which sets every group's amax and (when
 * asked) min nonzero */
int fp8__rows_whole(const layout *L);
/* whether L's groups (of the same x, not per tensor) are unions of f's */
int fp8__ranges_nest(const fp8__ranges *f, const layout *L);
/* x's finite amax (float32 bits) and its Inf and NaN counts */
void fp8__amax_info(const float *x, size_t n, uint32_t *amax_bits, uint64_t *ninf, uint64_t *nnan);


float *fp8__piece_buf(void);
/* x's own statistics (fp8_tensor_stats) in the same steps: begun (NULL:
 * out of memory), pieces [u0, u1) of part p summed, ended into *stats
 * (NULL: dropped) and freed.  fp8__split_shape: the units (*U) of `unit`
 * elements of n and the parts (*P) they are split into — a split cast's,
 * and with unit PIECE x's statistics' and a per-tensor cast's, so that
 * both sum the same pieces in the same parts. */
typedef struct fp8__xpass fp8__xpass;
fp8__xpass *fp8__xpass_begin(const float *x, size_t n, unsigned flags);
void fp8__split_shape(size_t n, size_t unit, size_t *U, int *P);
void fp8__xpass_units(fp8__xpass *W, int p, size_t u0, size_t u1);
void fp8__xpass_end(fp8__xpass *W, fp8_stats *stats);

#endif
