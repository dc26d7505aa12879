/*
 * contrasts.h — like-for-like comparisons: on each tensor, every pair of
 * recorded recipes that differ in exactly one factor (factors.h), oriented
 * from the baseline of the question to the alternative (E5M2 -> E4M3,
 * delayed -> current, coarser -> finer, fp32 -> power-of-two scales, ...).
 *
 * Per tensor: the paired SQNR difference d_s = SQNR_to(s) - SQNR_from(s) at
 * every recorded step after warm-up where both are finite; its mean with a
 * circular block bootstrap 95% interval and a Newey-West p-value, Holm-
 * adjusted over every contrast of the run.  Per group (factor, the two
 * recipes' labels, the tensors' role): per step the mean of d over the
 * group's tensors, then the mean over steps with its block-bootstrap
 * interval; counts of tensors where either side is better (Holm, alpha
 * 0.05) and the sign test over the tensors' mean differences; overflow
 * events and pooled underflow rates of both sides after warm-up.
 */
#ifndef FP8_AN_CONTRASTS_H
#define FP8_AN_CONTRASTS_H

#include "analysis.h"
#include "factors.h"
#include "inference.h"

#define AN_ALPHA 0.05

typedef struct {
    int t, a, b;       /* tensor; from / to recipe (canonical ids)        */
    int factor;        /* an_factor                                       */
    an_interval d;     /* SQNR_b - SQNR_a, dB                            */
    double padj;       /* Holm-adjusted p over every contrast of the run   */
    int eps_inert;     /* the two also differ in the amax floor, which
                          bound no group of this tensor in either (an_eps_inert) */
} an_contrast;

/* 1 when recipe r's amax floor (eps) changed nothing on tensor t: eps is 0,
 * or at every record after warm-up every group's amax lay above it (seen
 * from the records: a per-tensor amax above eps; a grouped recipe's
 * smallest scale_inv above the one eps itself gives). */
int an_eps_inert(const an_run *a, int t, int r);

/* The one factor recipes x and y differ in on tensor t (an_factors_one), or
 * that factor when they differ in it and in an amax floor inert in both
 * (*eps_inert = 1); -1 otherwise. */
int an_one_factor(const an_run *a, int t, int x, int y, int *eps_inert);

/* The paired differences d = SQNR_b - SQNR_a of tensor t under recipes ra
 * and rb, at the statistics steps after warm-up where both are finite, in
 * step order; steps (may be NULL) gets their steps, ev_a / ev_b (may be
 * NULL) how many of those steps had an overflowing value under each.
 * Returns how many. */
size_t an_paired(const an_run *a, int t, int ra, int rb, double *d, int64_t *steps, size_t *ev_a, size_t *ev_b);

/* Every contrast of the run (computed once, kept in the run). */
const an_contrast *an_run_contrasts(const an_ctx *c, an_run *a, size_t *n);

/* Tensor t's contrasts (a slice of the run's, which are in tensor order). */
const an_contrast *an_tensor_contrasts(const an_ctx *c, an_run *a, int t, size_t *n);

/* Verdict on one contrast: 1 the "to" side is better, -1 the "from" side,
 * 0 no difference detected (Holm-adjusted p >= alpha). */
static inline int an_contrast_sign(const an_contrast *x)
{
    if (!(x->padj < AN_ALPHA))
        return 0;
    return x->d.mean > 0 ? 1 : x->d.mean < 0 ? -1 : 0;
}

/* The contrast on tensor t between canonical recipes a and b (either
 * order; *flip = 1 when stored as b -> a); NULL when there is none. */
const an_contrast *an_find_contrast(const an_ctx *c, an_run *run, int t, int a, int b, int *flip);

typedef struct {
    int factor, role;
    char la[96], lb[96];     /* canonical labels, from and to             */
    int ra, rb;              /* representative recipe ids (for specs)    */
    int tensors, to_better, from_better, neither;
    double sign_p;           /* sign test over the tensors' mean differences */
    an_interval d;           /* per-step group means, then mean and CI    */
    size_t events_a, events_b, steps_a, steps_b; /* overflow events after warm-up */
    double under_a, under_b, over_a, over_b;     /* pooled element rates after warm-up */
    an_robust robust;        /* the per-step means: median step, the steps that carry the mean */
    int eps_inert;           /* members paired although their amax floors differ (inert here) */
    an_interval ph[3];       /* the per-step means by phase (an_phase): LR warm-up, early, steady */
} an_cgroup;

/* The run's contrasts grouped; *out is malloc'd (free it). */
int an_contrast_groups(const an_ctx *c, an_run *a, an_cgroup **out, size_t *n);

/* Frees a run's contrasts (registered with an_on_close_run). */
void an_contrasts_free(an_run *a);

#endif
