/*
 * figures.c — the report's figures: which are drawn (an_figures).  Each
 * figure writes its data file (or points its script at an analysis's data
 * file), then plots/ draws it (fig_util.c).  The figures are in
 * fig_tensor.c (one tensor: amax, exponents, block scales, layers),
 * fig_run.c (a run or several: heat maps, replay, loss, channels) and
 * fig_answers.c (the summary's answers: effects, the claim).
 *
 * Run the analyses first: the pareto, loss and channel figures read their
 * data files (replay_settings.tsv, loss_*.tsv, outliers_channels.tsv).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "series.h"
#include "factors.h"
#include "figset.h"
#include "plots.h"

/* Tensors ranked by delayed overflow events after warm-up (then by amax
 * volatility). */
static int rank_tensors(an_run *a, int *out, int k)
{
    int T = a->run->ntensors, m = 0;
    double *score = calloc((size_t)T + 1, sizeof *score);
    if (!score)
        return 0;
    for (int t = 0; t < T; t++) {
        int d = an_delayed_recipe(a, t);
        const an_sstats *sd = d >= 0 ? an_series_cached(a, t, an_canon(a, t, d)) : NULL;
        size_t n;
        const size_t *ix = an_series(a, t, an_input_recipe(a, t), &n);
        double lo = INFINITY, hi = 0;
        for (size_t i = 0; i < n; i++) {
            const fp8_summary *x = an_rec(a, ix[i]);
            if (x->amax > 0 && !an_is_warm(a, t, x->step))
                lo = fmin(lo, x->amax), hi = fmax(hi, x->amax);
        }
        score[t] = n ? (sd ? (double)sd->events : 0) * 1000 + (hi > 0 ? log2(hi / lo) : 0) : -1;
    }
    for (; m < k; m++) {
        int b = -1;
        for (int t = 0; t < T; t++)
            if (score[t] >= 0 && (b < 0 || score[t] > score[b]))
                b = t;
        if (b < 0)
            break;
        out[m] = b;
        score[b] = -1;
    }
    free(score);
    return m;
}

/* The run's active recipe (the first tensor's), -1 for a record-only run. */
static int active_of(const an_run *a)
{
    for (int t = 0; t < a->run->ntensors; t++)
        if (a->active[t] >= 0)
            return a->active[t];
    return -1;
}

/* Which figures: per run, the tensor most at risk (amax against the delayed
 * range), the active recipe's overflow and underflow heat maps and the
 * replay; once over all runs, the shadow recipes that overflow most (each
 * from the run where it overflows most, one map per recipe), one exponent
 * histogram, one block-scale histogram, one per-layer magnitude figure, the
 * loss and the outlier channels.  Shadows behave alike in every run, so one
 * map each says it; a per-run copy would only repeat it. */
int an_figures(an_ctx *c, an_figure *figs, int max, int *failed)
{
    figset F;
    memset(&F, 0, sizeof F);
    F.c = c, F.figs = figs, F.max = max;
    char drawn[64][96];
    int ndrawn = 0, first = -1, with_delayed = -1, with_block = -1;
    for (int ri = 0; ri < c->nruns; ri++) {
        an_run *a = &c->runs[ri];
        if (!a->run->nrecords)
            continue;
        if (first < 0)
            first = ri;
        int top[1], nt = rank_tensors(a, top, 1), act = active_of(a);
        if (nt)
            fig_amax(&F, a, top[0]);
        if (act >= 0) {
            fig_heat(&F, a, act, 0);
            fig_heat(&F, a, act, 1);
            if (ndrawn < 64)
                an_recipe_label(a, act, drawn[ndrawn++], sizeof drawn[0]);
            if (a->recipe_ok[act] && a->recipes[act].kind == FP8_RECIPE_DELAYED && with_delayed < 0)
                with_delayed = ri;
            if (a->recipe_ok[act] && (a->recipes[act].kind == FP8_RECIPE_BLOCK || a->recipes[act].kind == FP8_RECIPE_MX) &&
                with_block < 0)
                with_block = ri;
        }
        fig_pareto(&F, a);
    }
    if (first < 0) {
        *failed = 0;
        return 0;
    }
    /* shadows that overflow, by canonical label: the run where each
     * overflows in the most records draws it; at most three */
    for (int k = 0; k < 3; k++) {
        int br = -1, bq = -1;
        size_t bn = 0;
        char blab[96] = "";
        for (int ri = 0; ri < c->nruns; ri++) {
            const an_run *a = &c->runs[ri];
            size_t R = (size_t)a->run->nrecipes, *novf = calloc(R + 1, sizeof *novf);
            if (!novf)
                continue;
            for (size_t i = 0; i < a->run->nrecords; i++) {
                const fp8_summary *x = an_rec(a, i);
                if (x->overflows > 0 && x->overflows != UINT64_MAX && x->recipe < R && !x->active)
                    novf[x->recipe]++;
            }
            for (size_t r = 0; r < R; r++) {
                char lab[96];
                if (!novf[r] || novf[r] <= bn)
                    continue;
                an_recipe_label(a, (int)r, lab, sizeof lab);
                int seen = 0;
                for (int j = 0; j < ndrawn && !seen; j++)
                    seen = strcmp(drawn[j], lab) == 0;
                if (!seen)
                    bn = novf[r], br = ri, bq = (int)r, snprintf(blab, sizeof blab, "%s", lab);
            }
            free(novf);
        }
        if (br < 0 || ndrawn == 64)
            break;
        fig_heat(&F, &c->runs[br], bq, 0);
        snprintf(drawn[ndrawn++], sizeof drawn[0], "%s", blab);
    }
    /* one exponent histogram, one block-scale histogram, one layer figure */
    an_run *ea = &c->runs[with_delayed >= 0 ? with_delayed : first];
    int top[1];
    if (rank_tensors(ea, top, 1))
        fig_exphist(&F, ea, top[0]);
    an_run *ba = &c->runs[with_block >= 0 ? with_block : first];
    int bt = -1;
    double bs = 0;
    for (int t = 0; t < ba->run->ntensors; t++) {
        size_t nr;
        const int *rs = an_tensor_recipes(ba, t, &nr);
        for (size_t i = 0; i < nr; i++) {
            int r = rs[i];
            const an_sstats *s = NULL;
            if (ba->recipe_ok[r] && (ba->recipes[r].kind == FP8_RECIPE_BLOCK || ba->recipes[r].kind == FP8_RECIPE_MX) &&
                (s = an_series_cached(ba, t, r)) && s->records && s->block_spread > bs)
                bs = s->block_spread, bt = t;
        }
    }
    if (bt >= 0)
        fig_blockscale(&F, ba, bt);
    int lb = c->baseline >= 0 && c->baseline < c->nruns && c->runs[c->baseline].run->nrecords ? c->baseline : first;
    fig_layers(&F, &c->runs[lb]);
    fig_effects(&F, AN_F_TIMING);
    fig_effects(&F, AN_F_GRANULARITY);
    fig_claim(&F);
    fig_loss(&F);
    fig_channels(&F);
    if (F.dropped)
        fprintf(stderr, "fp8prof: report: %d figure%s left out (more than %d)\n", F.dropped, F.dropped == 1 ? "" : "s",
                max);
    *failed = F.failed;
    return F.n;
}
