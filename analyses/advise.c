/*
 * advise.c — per tensor, the cheapest recorded format and recipe (bits per
 * element, scale storage included) that never overflowed and whose median
 * SQNR is within a stated margin of the best recorded; and what the data
 * say about the E4M3-forward / E5M2-backward convention, from pairs of
 * recipes that differ only in the element format.
 *
 * Data files: advise_tensors.tsv, advise_formats.tsv.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "analysis.h"
#include "compare.h"

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

/* Two recipes that differ only in the element format of this tensor. */
static int same_but_format(const fp8_recipe *x, const fp8_recipe *y)
{
    return x->kind == y->kind && x->block_rows == y->block_rows && x->block_cols == y->block_cols &&
           x->group == y->group && x->history_len == y->history_len && x->margin == y->margin &&
           x->algo_most_recent == y->algo_most_recent && x->pow2 == y->pow2;
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
    fprintf(ff, "run\ttensor\trole\tkind\te4m3_recipe\te5m2_recipe\tsqnr_e4m3\tsqnr_e5m2\tevents_e4m3\tevents_e5m2\t"
                "underflow_e4m3\tunderflow_e5m2\twinner\n");
    fprintf(c->md, "## Cheapest safe format per tensor\n\n**Rule**: among the recipes recorded on a tensor, those with "
                   "no overflow event and a median SQNR within %.3g dB of the best; the one with the fewest bits per "
                   "element (element bits + scale bits / elements per scale) wins, ties to the higher SQNR.\n\n",
            c->sqnr_margin_db);
    for (int ri = 0; ri < c->nruns; ri++) {
        const an_run *a = &c->runs[ri];
        int T = a->run->ntensors, R = a->run->nrecipes;
        an_sstats *st = calloc((size_t)R + 1, sizeof *st);
        int *wins = calloc((size_t)R + 1, sizeof *wins);
        /* [forward/gradient][e4m3 wins, e5m2 wins, tie] */
        /* [scaling kind][forward/gradient][e4m3 wins, e5m2 wins, tie] */
        int conv[FP8_RECIPE_NVFP4 + 1][2][3];
        double flushed[FP8_RECIPE_NVFP4 + 1][2][2]; /* summed underflow rates, [e4m3, e5m2] */
        memset(conv, 0, sizeof conv);
        memset(flushed, 0, sizeof flushed);
        if (!st || !wins) {
            free(st), free(wins);
            rc = 1;
            goto done;
        }
        int none = 0;
        for (int t = 0; t < T; t++) {
            fp8_role role = (fp8_role)a->run->tensor_role[t];
            int best = -1, choice = -1, ncand = 0;
            uint64_t rows = 0, cols = 0;
            for (int r = 0; r < R; r++) {
                const an_sstats *cs = an_series_cached(&c->runs[ri], t, r);
                if (cs)
                    st[r] = *cs;
                else
                    an_series_stats(a, t, r, &st[r]);
                size_t n;
                const size_t *ix = an_series(a, t, r, &n);
                if (n)
                    rows = an_rec(a, ix[n - 1])->rows, cols = an_rec(a, ix[n - 1])->cols;
                if (st[r].records && a->recipe_ok[r] && !isnan(st[r].sqnr_p50) &&
                    (best < 0 || st[r].sqnr_p50 > st[best].sqnr_p50))
                    best = r;
            }
            if (best < 0)
                continue;
            double cb = INFINITY;
            for (int r = 0; r < R; r++) {
                if (!st[r].records || !a->recipe_ok[r] || st[r].events > 0 ||
                    !(st[r].sqnr_p50 >= st[best].sqnr_p50 - c->sqnr_margin_db))
                    continue;
                ncand++;
                double b = an_bits_per_element(&a->recipes[r], an_format(a, t, r), role, rows, cols);
                if (b < cb - 1e-12 || (fabs(b - cb) <= 1e-12 && st[r].sqnr_p50 > st[choice].sqnr_p50))
                    cb = b, choice = r;
            }
            char lc[96] = "none", lb[96];
            an_recipe_label(a, best, lb, sizeof lb);
            if (choice >= 0) {
                an_recipe_label(a, choice, lc, sizeof lc);
                wins[choice]++;
            } else
                none++;
            fprintf(ft, "%s\t%s\t%s\t%s\t%.9g\t%.9g\t%s\t%.9g\t%d\n", a->label, a->run->tensor_name[t], fp8_role_name(role),
                    lc, choice >= 0 ? cb : NAN, choice >= 0 ? st[choice].sqnr_p50 : NAN, lb, st[best].sqnr_p50, ncand);
            /* E4M3 vs E5M2 on recipes alike but for the format: per scaling
             * kind one pair per tensor, plain (non-hybrid) recipes first */
            int paired[FP8_RECIPE_NVFP4 + 1] = {0};
            for (int pass = 0; pass < 2; pass++)
            for (int x = 0; x < R; x++)
                for (int y = 0; y < R; y++) {
                    const fp8_format *fx = an_format(a, t, x), *fy = an_format(a, t, y);
                    if (!fx || !fy || !st[x].records || !st[y].records || strcmp(fx->name, "e4m3") != 0 ||
                        strcmp(fy->name, "e5m2") != 0 || !same_but_format(&a->recipes[x], &a->recipes[y]) ||
                        (pass == 0 && (a->recipes[x].hybrid || a->recipes[y].hybrid)) || paired[a->recipes[x].kind])
                        continue;
                    paired[a->recipes[x].kind] = 1;
                    /* winner: no more overflow events, then the higher median SQNR */
                    int w = st[x].events < st[y].events   ? 0
                            : st[y].events < st[x].events ? 1
                            : st[x].sqnr_p50 > st[y].sqnr_p50 + 0.1 ? 0
                            : st[y].sqnr_p50 > st[x].sqnr_p50 + 0.1 ? 1
                                                                    : 2;
                    conv[a->recipes[x].kind][role == FP8_ROLE_GRADIENT][w]++;
                    flushed[a->recipes[x].kind][role == FP8_ROLE_GRADIENT][0] += st[x].underflow_rate;
                    flushed[a->recipes[x].kind][role == FP8_ROLE_GRADIENT][1] += st[y].underflow_rate;
                    char l1[96], l2[96];
                    fprintf(ff, "%s\t%s\t%s\t%s\t%s\t%s\t%.9g\t%.9g\t%zu\t%zu\t%.9g\t%.9g\t%s\n", a->label,
                            a->run->tensor_name[t], fp8_role_name(role), fp8_recipe_kind_name(a->recipes[x].kind),
                            an_recipe_label(a, x, l1, sizeof l1), an_recipe_label(a, y, l2, sizeof l2), st[x].sqnr_p50,
                            st[y].sqnr_p50, st[x].events, st[y].events, st[x].underflow_rate, st[y].underflow_rate,
                            w == 0 ? "e4m3" : w == 1 ? "e5m2" : "tie");
                }
        }
        fprintf(c->md, "### Run `%s`\n\n| cheapest safe recipe | tensors |\n|---|---|\n", a->label);
        char lab[96];
        for (int r = 0; r < R; r++)
            if (wins[r])
                fprintf(c->md, "| %s (%.3g bits/element on a 1024x1024 activation) | %d |\n",
                        an_recipe_label(a, r, lab, sizeof lab),
                        an_bits_per_element(&a->recipes[r], fp8_recipe_format(&a->recipes[r], FP8_ROLE_ACTIVATION),
                                            FP8_ROLE_ACTIVATION, 1024, 1024),
                        wins[r]);
        if (none)
            fprintf(c->md, "| none qualifies (every recipe overflowed or fell short) | %d |\n", none);
        fprintf(c->md, "\n");
        int any = 0;
        for (int k = 0; k <= FP8_RECIPE_NVFP4; k++)
            for (int g = 0; g < 2; g++)
                any += conv[k][g][0] + conv[k][g][1] + conv[k][g][2];
        if (!any) {
            fprintf(c->md, "E4M3 vs E5M2: the run has no pair of recipes differing only in the element format "
                           "(record e.g. `e4m3:current` and `e5m2:current`, or `hybrid:delayed` and `e4m3:delayed`, "
                           "as shadows to settle it).\n\n");
        } else {
            fprintf(c->md, "E4M3 vs E5M2 on recipes alike but for the format (winner: fewer overflow events, then "
                           "median SQNR higher by > 0.1 dB); tensors counted per scaling kind:\n\n"
                           "| scaling | tensors | E4M3 better | E5M2 better | tie | flushed to zero, E4M3 / E5M2 (mean %%) |\n"
                           "|---|---|---|---|---|---|\n");
            char fnd[1024];
            size_t fl = 0;
            fnd[0] = 0;
            for (int k = 0; k <= FP8_RECIPE_NVFP4; k++)
                for (int g = 0; g < 2; g++) {
                    int *v = conv[k][g], n = v[0] + v[1] + v[2];
                    if (!n)
                        continue;
                    fprintf(c->md, "| %s | %s | %d | %d | %d | %.3g / %.3g |\n", fp8_recipe_kind_name((fp8_recipe_kind)k),
                            g ? "gradients" : "forward (activations, weights)", v[0], v[1], v[2],
                            100 * flushed[k][g][0] / n, 100 * flushed[k][g][1] / n);
                    if (fl < sizeof fnd - 80)
                        fl += (size_t)snprintf(fnd + fl, sizeof fnd - fl, "%s%s %s %d/%d (flushed %.2g%% vs %.2g%%)",
                                               fl ? ", " : "", fp8_recipe_kind_name((fp8_recipe_kind)k),
                                               g ? "gradients" : "forward", v[0], n, 100 * flushed[k][g][0] / n,
                                               100 * flushed[k][g][1] / n);
                }
            int fe4 = 0, fe5 = 0, ge4 = 0, ge5 = 0;
            for (int k = 0; k <= FP8_RECIPE_NVFP4; k++)
                fe4 += conv[k][0][0], fe5 += conv[k][0][1], ge4 += conv[k][1][0], ge5 += conv[k][1][1];
            fprintf(c->md, "\nThe winner is decided on overflow and SQNR; the last column is the price E4M3's narrower "
                           "range pays in values flushed to zero.\n");
            fprintf(c->md, "\nOver all kinds: the convention (TE HYBRID: E4M3 forward, E5M2 gradients) %s for forward "
                           "tensors and %s for gradients on this data; the contested reverse claim (E5M2 forward, E4M3 "
                           "gradients) %s.\n\n",
                    fe4 >= fe5 ? "holds" : "does not hold",
                    ge5 > ge4 ? "holds" : "does not hold (E4M3 does as well or better)",
                    fe5 > fe4 && ge4 > ge5 ? "is supported" : "is not supported");
            an_finding(c, "advise", "`%s`: E4M3 better on %s", a->label, fnd);
        }
        free(st), free(wins);
    }
done:
    if (an_data_close(c, (FILE *[]){ft, ff}, 2))
        rc = 1;
    return rc;
}
