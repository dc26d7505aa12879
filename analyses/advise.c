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
#include "compare.h"
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

int an_advise(an_ctx *c)
{
    FILE *ft = an_data(c, "advise_tensors.tsv"), *ff = an_data(c, "advise_formats.tsv");
    int rc = 0;
    if (!ft || !ff) {
        rc = 1;
        goto done;
    }
    fprintf(ft, "run\ttensor\trole\tchoice\tbits_per_element\tsqnr_p50_db\tbest_recipe\tbest_sqnr_p50_db\tcandidates\n");
    fprintf(ff, "run\tscaling\tgroup\ttensors\te4m3_better\te5m2_better\tneither\tsign_p\tmean_delta_sqnr_db\t"
                "events_e5m2\tevents_e4m3\tunderflow_e5m2\tunderflow_e4m3\n");
    fprintf(c->md, "## Cheapest safe format per tensor\n\n**Rule**: among the recipes recorded on a tensor, those with "
                   "fewer than %d overflow events after warm-up and a median SQNR within %.3g dB of the best; the one "
                   "with the fewest bits per element (element bits + scale bits / elements per scale, for this "
                   "tensor's shape) wins, ties to the higher SQNR.\n\n",
            c->min_events, c->sqnr_margin_db);
    for (int ri = 0; ri < c->nruns; ri++) {
        an_run *a = &c->runs[ri];
        int T = a->run->ntensors, R = a->run->nrecipes;
        int *wins = calloc((size_t)R + 1, sizeof *wins);
        double *bits = calloc((size_t)R + 1, sizeof *bits);
        if (!wins || !bits) {
            free(wins), free(bits);
            rc = 1;
            goto done;
        }
        int none = 0;
        for (int t = 0; t < T; t++) {
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
                continue;
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
            char lc[96] = "none", lb[96];
            an_factors f;
            an_factors_of(&a->recipes[best], role, &f);
            an_factors_label(&f, lb, sizeof lb);
            if (choice >= 0) {
                an_factors_of(&a->recipes[choice], role, &f);
                an_factors_label(&f, lc, sizeof lc);
                wins[choice]++;
                bits[choice] += cb;
            } else
                none++;
            fprintf(ft, "%s\t%s\t%s\t%s\t%.9g\t%.9g\t%s\t%.9g\t%d\n", a->label, a->run->tensor_name[t], fp8_role_name(role),
                    lc, choice >= 0 ? cb : NAN, choice >= 0 ? an_series_cached(a, t, choice)->sqnr_p50 : NAN, lb, bsq,
                    ncand);
        }
        fprintf(c->md, "### Run `%s`\n\n| cheapest safe recipe (spec) | tensors | mean bits/element on them |\n"
                       "|---|---|---|\n", a->label);
        for (int r = 0; r < R; r++)
            if (wins[r])
                fprintf(c->md, "| `%s` | %d | %.3f |\n", a->run->recipe_spec[r], wins[r], bits[r] / wins[r]);
        if (none)
            fprintf(c->md, "| none qualifies (every recipe overflowed or fell short) | %d | - |\n", none);
        fprintf(c->md, "\n");
        free(wins), free(bits);

        /* E4M3 vs E5M2 from the like-for-like format comparisons */
        size_t nc;
        const an_contrast *v = an_run_contrasts(c, a, &nc);
        fmtrow rows_[64];
        int nrow = 0;
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
            while (k < nrow && !(rows_[k].grad == grad && !strcmp(rows_[k].ctx, cx)))
                k++;
            if (k == nrow) {
                if (nrow == 64)
                    continue;
                memset(&rows_[nrow], 0, sizeof rows_[0]);
                snprintf(rows_[nrow].ctx, sizeof rows_[0].ctx, "%s", cx);
                rows_[nrow++].grad = grad;
            }
            fmtrow *w = &rows_[k];
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
        if (!nrow) {
            fprintf(c->md, "E4M3 vs E5M2: the run has no pair of recipes that differ only in the element format "
                           "(record e.g. `e4m3:current` and `e5m2:current`, or `e4m3:delayed` and `e5m2:delayed`, as "
                           "shadows to settle it).\n\n");
            continue;
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
            for (int k = 0; k < nrow; k++) {
                fmtrow *w = &rows_[k];
                if (w->grad != g)
                    continue;
                double sp = an_sign_test((size_t)w->pos, (size_t)w->nonzero);
                fprintf(c->md, "| %s, %s | %d | %d / %d / %d | %.2g | %+.2f dB | %zu / %zu | %.4f / %.4f |\n", w->ctx,
                        g ? "gradients" : "forward (activations, weights)", w->tensors, w->e4, w->e5, w->neither, sp,
                        w->dsum / w->tensors, w->ev5, w->ev4, w->numel5 > 0 ? 100 * w->under5 / w->numel5 : NAN,
                        w->numel4 > 0 ? 100 * w->under4 / w->numel4 : NAN);
                fprintf(ff, "%s\t%s\t%s\t%d\t%d\t%d\t%d\t%.9g\t%.9g\t%zu\t%zu\t%.9g\t%.9g\n", a->label, w->ctx,
                        g ? "gradients" : "forward", w->tensors, w->e4, w->e5, w->neither, sp, w->dsum / w->tensors,
                        w->ev5, w->ev4, w->numel5 > 0 ? w->under5 / w->numel5 : NAN,
                        w->numel4 > 0 ? w->under4 / w->numel4 : NAN);
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
done:
    if (an_data_close(c, (FILE *[]){ft, ff}, 2))
        rc = 1;
    return rc;
}
