/*
 * advise.c — per tensor, the cheapest recorded recipe (bits per element,
 * scale storage included) that overflowed less than the material threshold
 * and whose median SQNR is within a stated margin of the best recorded;
 * and what the data say about E4M3 against E5M2, from the like-for-like
 * format comparisons (contrasts.c: the same recipe but for the element
 * format), with a sign test over the tensors and the price in flushed
 * values beside it.
 *
 * Data files: advise_tensors.tsv, advise_formats.tsv.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "analysis.h"
#include "advise.h"
#include "series.h"
#include "contrasts.h"
#include "factors.h"

double an_bits_per_element(const fp8_recipe *p, const fp8_format *f, fp8_role role, uint64_t rows, uint64_t cols)
{
    double numel = rows && cols ? (double)rows * (double)cols : 1.0, b = f ? f->bits : 8;
    switch (p->kind) {
    case FP8_RECIPE_ROWWISE:
        return b + 32.0 / (double)(cols ? cols : 1);
    case FP8_RECIPE_COLWISE:
        return b + 32.0 / (double)(rows ? rows : 1);
    case FP8_RECIPE_BLOCK: {
        int br = p->block_rows, bc = p->block_cols;
        if (role == FP8_ROLE_WEIGHT && p->wblock_rows)
            br = p->wblock_rows, bc = p->wblock_cols;
        return b + (p->ue8m0 ? 8.0 : 32.0) / (double)(br * bc);
    }
    case FP8_RECIPE_MX:
        return b + 8.0 / (double)p->group;
    case FP8_RECIPE_NVFP4:
        return b + 8.0 / (double)p->group + 32.0 / numel;
    default:
        return b + 32.0 / numel;
    }
}

/* E5M2 -> E4M3 per (context, forward/gradient): tensors and outcomes */
typedef struct {
    char ctx[96];        /* the scaling both recipes share: "delayed h=1024,max,m=0", "current", "block 1x128" */
    int grad;
    int tensors, e4, e5, neither, pos, nonzero;
    double dsum, under4, under5, numel4, numel5;
    size_t ev4, ev5;
} fmtrow;

static const char *context(const char *label, char *buf, size_t n)
{
    const char *sp = strchr(label, ' '); /* drop the format word */
    snprintf(buf, n, "%s", sp ? sp + 1 : label);
    return buf;
}

/* ---- one run: compute ------------------------------------------------------ */

/* a tensor's cheapest safe recipe (-1: none qualifies) and the best one */
typedef struct {
    int t, choice, best, ncand;
    double bits, best_sqnr; /* the choice's bits per element; the best recipe's median SQNR */
} choice_row;

/* One run's advice: each tensor's choice, the wins per recipe, and the
 * E4M3 / E5M2 comparisons grouped by scaling and forward / gradient. */
typedef struct {
    choice_row *rows;
    int nrows, none;
    int *wins;      /* [nrecipes] tensors won      */
    double *bits;   /* [nrecipes] their bits summed */
    fmtrow fmt[64];
    int nfmt;
} run_advice;

static void run_advice_free(run_advice *A) { free(A->rows), free(A->wins), free(A->bits); }

/* tensor t: the best recorded recipe by median SQNR, and among the safe
 * ones within the margin of it the fewest bits per element; 0 when the
 * tensor has no recipe with an SQNR */
static int choose_tensor(const an_ctx *c, an_run *a, int t, choice_row *w)
{
    fp8_role role = (fp8_role)a->run->tensor_role[t];
    int best = -1, choice = -1, ncand = 0;
    uint64_t rows = 0, cols = 0;
    size_t nr;
    const int *rs = an_tensor_recipes(a, t, &nr);
    for (size_t i = 0; i < nr; i++) {
        int r = rs[i];
        size_t n;
        const size_t *ix = an_series(a, t, r, &n);
        const an_sstats *s = an_series_cached(a, t, r);
        if (n)
            rows = an_rec(a, ix[n - 1])->rows, cols = an_rec(a, ix[n - 1])->cols;
        if (s && s->records && a->recipe_ok[r] && an_canon(a, t, r) == r && !isnan(s->sqnr_p50) &&
            (best < 0 || s->sqnr_p50 > an_series_cached(a, t, best)->sqnr_p50))
            best = r;
    }
    if (best < 0)
        return 0;
    double cb = INFINITY, bsq = an_series_cached(a, t, best)->sqnr_p50;
    for (size_t i = 0; i < nr; i++) {
        int r = rs[i];
        const an_sstats *s = an_series_cached(a, t, r);
        if (!s || !s->records || !a->recipe_ok[r] || an_canon(a, t, r) != r || (int)s->events >= c->min_events ||
            !(s->sqnr_p50 >= bsq - c->sqnr_margin_db))
            continue;
        ncand++;
        double b = an_bits_per_element(&a->recipes[r], an_format(a, t, r), role, rows, cols);
        if (b < cb - 1e-12 || (fabs(b - cb) <= 1e-12 && s->sqnr_p50 > an_series_cached(a, t, choice)->sqnr_p50))
            cb = b, choice = r;
    }
    *w = (choice_row){t, choice, best, ncand, cb, bsq};
    return 1;
}

/* the like-for-like E5M2 -> E4M3 comparisons, grouped */
static void format_rows(an_ctx *c, an_run *a, run_advice *A)
{
    size_t nc;
    const an_contrast *v = an_run_contrasts(c, a, &nc);
    for (size_t i = 0; v && i < nc; i++) {
        if (v[i].factor != AN_F_FORMAT)
            continue;
        fp8_role role = (fp8_role)a->run->tensor_role[v[i].t];
        an_factors fa, fb;
        an_factors_of(&a->recipes[v[i].a], role, &fa);
        an_factors_of(&a->recipes[v[i].b], role, &fb);
        if (strcmp(fa.format, "e5m2") || strcmp(fb.format, "e4m3"))
            continue;
        char la[96], cx[96];
        context(an_factors_label(&fb, la, sizeof la), cx, sizeof cx);
        int grad = role == FP8_ROLE_GRADIENT, k = 0;
        while (k < A->nfmt && !(A->fmt[k].grad == grad && !strcmp(A->fmt[k].ctx, cx)))
            k++;
        if (k == A->nfmt) {
            if (A->nfmt == 64)
                continue;
            memset(&A->fmt[A->nfmt], 0, sizeof A->fmt[0]);
            snprintf(A->fmt[A->nfmt].ctx, sizeof A->fmt[0].ctx, "%s", cx);
            A->fmt[A->nfmt++].grad = grad;
        }
        fmtrow *w = &A->fmt[k];
        int sgn = an_contrast_sign(&v[i]);
        w->tensors++, w->e4 += sgn > 0, w->e5 += sgn < 0, w->neither += sgn == 0;
        w->pos += v[i].d.mean > 0, w->nonzero += v[i].d.mean != 0, w->dsum += v[i].d.mean;
        const an_sstats *s5 = an_series_cached(a, v[i].t, v[i].a), *s4 = an_series_cached(a, v[i].t, v[i].b);
        if (s5 && s4) {
            w->ev5 += s5->events, w->ev4 += s4->events;
            w->under5 += s5->underflow_rate * s5->numel, w->numel5 += s5->numel;
            w->under4 += s4->underflow_rate * s4->numel, w->numel4 += s4->numel;
        }
    }
}

static int advise_compute(an_ctx *c, an_run *a, run_advice *A)
{
    int T = a->run->ntensors, R = a->run->nrecipes;
    memset(A, 0, sizeof *A);
    A->rows = calloc((size_t)T + 1, sizeof *A->rows);
    A->wins = calloc((size_t)R + 1, sizeof *A->wins);
    A->bits = calloc((size_t)R + 1, sizeof *A->bits);
    if (!A->rows || !A->wins || !A->bits)
        return 1;
    for (int t = 0; t < T; t++) {
        choice_row *w = &A->rows[A->nrows];
        if (!choose_tensor(c, a, t, w))
            continue;
        A->nrows++;
        if (w->choice >= 0)
            A->wins[w->choice]++, A->bits[w->choice] += w->bits;
        else
            A->none++;
    }
    format_rows(c, a, A);
    return 0;
}

/* ---- one run: render -------------------------------------------------------- */

static void advise_choices(an_ctx *c, an_run *a, const run_advice *A, FILE *ft)
{
    for (int i = 0; i < A->nrows; i++) {
        const choice_row *w = &A->rows[i];
        fp8_role role = (fp8_role)a->run->tensor_role[w->t];
        char lc[96] = "none", lb[96];
        an_factors f;
        an_factors_of(&a->recipes[w->best], role, &f);
        an_factors_label(&f, lb, sizeof lb);
        if (w->choice >= 0) {
            an_factors_of(&a->recipes[w->choice], role, &f);
            an_factors_label(&f, lc, sizeof lc);
        }
        fprintf(ft, "%s\t%s\t%s\t%s\t%.9g\t%.9g\t%s\t%.9g\t%d\n", a->label, a->run->tensor_name[w->t],
                fp8_role_name(role), lc, w->choice >= 0 ? w->bits : NAN,
                w->choice >= 0 ? an_series_cached(a, w->t, w->choice)->sqnr_p50 : NAN, lb, w->best_sqnr, w->ncand);
    }
    fprintf(c->md, "### Run `%s`\n\n| cheapest safe recipe (spec) | tensors | mean bits/element on them |\n"
                   "|---|---|---|\n", a->label);
    for (int r = 0; r < a->run->nrecipes; r++)
        if (A->wins[r])
            fprintf(c->md, "| `%s` | %d | %.3f |\n", a->run->recipe_spec[r], A->wins[r], A->bits[r] / A->wins[r]);
    if (A->none)
        fprintf(c->md, "| none qualifies (every recipe overflowed or fell short) | %d | - |\n", A->none);
    fprintf(c->md, "\n");
}

static void advise_formats(an_ctx *c, const an_run *a, const run_advice *A, FILE *ff)
{
    if (!A->nfmt) {
        fprintf(c->md, "E4M3 vs E5M2: the run has no pair of recipes that differ only in the element format "
                       "(record e.g. `e4m3:current` and `e5m2:current`, or `e4m3:delayed` and `e5m2:delayed`, as "
                       "shadows to settle it).\n\n");
        return;
    }
    fprintf(c->md, "**E4M3 vs E5M2**, recipes identical but for the element format, after warm-up. Per tensor: "
                   "which format has the higher SQNR (Holm-adjusted p < 0.05, else neither); sign p: two-sided sign "
                   "test over the tensors (p > 0.05 is no evidence either way). The flushed-to-zero rates are "
                   "pooled element rates: what E4M3's narrower range costs, which SQNR already weighs.\n\n"
                   "| scaling | tensors | E4M3 better / E5M2 better / neither | sign p | mean ΔSQNR (E4M3 − E5M2) "
                   "| overflow events E5M2 / E4M3 | flushed %% E5M2 / E4M3 |\n|---|---|---|---|---|---|---|\n");
    char fnd[1024];
    size_t fl = 0;
    int fwd4 = 0, fwd5 = 0, g4 = 0, g5 = 0;
    double pf = 1, pg = 1;
    for (int g = 0; g < 2; g++)
        for (int k = 0; k < A->nfmt; k++) {
            const fmtrow *w = &A->fmt[k];
            if (w->grad != g)
                continue;
            double sp = an_sign_test((size_t)w->pos, (size_t)w->nonzero);
            double f4 = w->numel4 > 0 ? w->under4 / w->numel4 : NAN, f5 = w->numel5 > 0 ? w->under5 / w->numel5 : NAN;
            fprintf(c->md, "| %s, %s | %d | %d / %d / %d | %.2g | %+.2f dB | %zu / %zu | %.4f / %.4f |\n", w->ctx,
                    g ? "gradients" : "forward (activations, weights)", w->tensors, w->e4, w->e5, w->neither, sp,
                    w->dsum / w->tensors, w->ev5, w->ev4, w->numel5 > 0 ? 100 * w->under5 / w->numel5 : NAN,
                    w->numel4 > 0 ? 100 * w->under4 / w->numel4 : NAN);
            fprintf(ff, "%s\t%s\t%s\t%d\t%d\t%d\t%d\t%.9g\t%.9g\t%zu\t%zu\t%.9g\t%.9g\n", a->label, w->ctx,
                    g ? "gradients" : "forward", w->tensors, w->e4, w->e5, w->neither, sp, w->dsum / w->tensors,
                    w->ev5, w->ev4, f5, f4);
            if (fl < sizeof fnd - 160)
                fl += (size_t)snprintf(fnd + fl, sizeof fnd - fl, "%s%s %s: E4M3 better on %d/%d (sign p %.2g), "
                                                                  "flushed %.3g%% vs %.3g%%",
                                       fl ? "; " : "", w->ctx, g ? "gradients" : "forward", w->e4, w->tensors, sp,
                                       w->numel4 > 0 ? 100 * w->under4 / w->numel4 : NAN,
                                       w->numel5 > 0 ? 100 * w->under5 / w->numel5 : NAN);
            if (g)
                g4 += w->e4, g5 += w->e5, pg = fmin(pg, sp);
            else
                fwd4 += w->e4, fwd5 += w->e5, pf = fmin(pf, sp);
        }
    fprintf(c->md, "\nOn this data, forward tensors: %s; gradients: %s. The contested reverse claim (E5M2 forward, "
                   "E4M3 gradients) %s.\n\n",
            fwd4 > fwd5 && pf < 0.05 ? "E4M3 is better" : fwd5 > fwd4 && pf < 0.05 ? "E5M2 is better" : "no evidence either way",
            g4 > g5 && pg < 0.05 ? "E4M3 is better" : g5 > g4 && pg < 0.05 ? "E5M2 is better" : "no evidence either way",
            fwd5 > fwd4 && pf < 0.05 && g4 > g5 && pg < 0.05 ? "is supported" : "is not supported");
    an_finding(c, "advise", "`%s`: %s", a->label, fnd);
}

int an_advise(an_ctx *c)
{
    FILE *f[2] = {an_data(c, "advise_tensors.tsv"), an_data(c, "advise_formats.tsv")};
    int rc = 0;
    if (!f[0] || !f[1]) {
        rc = 1;
        goto done;
    }
    fprintf(f[0], "run\ttensor\trole\tchoice\tbits_per_element\tsqnr_p50_db\tbest_recipe\tbest_sqnr_p50_db\t"
                  "candidates\n");
    fprintf(f[1], "run\tscaling\tgroup\ttensors\te4m3_better\te5m2_better\tneither\tsign_p\tmean_delta_sqnr_db\t"
                  "events_e5m2\tevents_e4m3\tunderflow_e5m2\tunderflow_e4m3\n");
    fprintf(c->md, "## Cheapest safe format per tensor\n\n**Rule**: among the recipes recorded on a tensor, those with "
                   "fewer than %d overflow events after warm-up and a median SQNR within %.3g dB of the best; the one "
                   "with the fewest bits per element (element bits + scale bits / elements per scale, for this "
                   "tensor's shape) wins, ties to the higher SQNR.\n\n",
            c->min_events, c->sqnr_margin_db);
    for (int ri = 0; ri < c->nruns && !rc; ri++) {
        an_run *a = &c->runs[ri];
        run_advice A;
        rc = advise_compute(c, a, &A);
        if (!rc) {
            advise_choices(c, a, &A, f[0]);
            advise_formats(c, a, &A, f[1]);
        }
        run_advice_free(&A);
    }
done:
    if (an_data_close(c, f, 2))
        rc = 1;
    return rc;
}
