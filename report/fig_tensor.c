/*
 * fig_tensor.c — figures of one tensor: its amax against the delayed
 * scale's range, its exponent histogram against each recipe's window, its
 * per-block scales, and the per-layer magnitudes of a run's tensors against
 * the formats' ranges (figset.h).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "figset.h"
#include "plots.h"

/* One point of the amax figure: the step, amax, band and event. */
typedef struct {
    int64_t step;
    double amax, over, under;
    int ev, warm;
} apoint;

void fig_amax(figset *F, const an_run *a, int t)
{
    int d = an_delayed_recipe(a, t), in = an_input_recipe(a, t);
    if (d >= 0)
        d = an_canon(a, t, d);
    char data[256], name[96], path[4096], vars[1024], q1[300], q2[400], lab[96];
    snprintf(name, sizeof name, "fig_amax_%s_%d", a->label, t);
    snprintf(data, sizeof data, "%s.tsv", name);
    snprintf(path, sizeof path, "%s/%s", F->c->outdir, data);
    /* the every-step rows of the delayed recipe (exact scale at every step), else the records */
    size_t ns = 0, n = 0, nd = 0;
    const size_t *sx = d >= 0 ? an_steps(a, t, d, &ns) : NULL;
    const size_t *ix = an_series(a, t, in, &n), *dx = d >= 0 ? an_series(a, t, d, &nd) : NULL;
    const fp8_format *fmt = d >= 0 ? an_format(a, t, d) : NULL;
    size_t np = ns ? ns : n;
    apoint *pt = calloc(np + 1, sizeof *pt);
    if (!pt)
        return;
    for (size_t i = 0, j = 0; i < np; i++) {
        apoint *p = &pt[i];
        p->over = p->under = NAN;
        if (ns) {
            const fp8_step_row *w = an_steprow(a, sx[i]);
            p->step = w->step, p->amax = w->amax;
            an_thresholds(fmt, 1.0 / w->scale, &p->over, &p->under);
            p->ev = an_overflows_at(fmt, &a->recipes[d].cast, w->amax, w->scale, w->nonfinite);
        } else {
            const fp8_summary *x = an_rec(a, ix[i]);
            p->step = x->step, p->amax = x->amax;
            while (j < nd && an_rec(a, dx[j])->step < x->step)
                j++;
            if (j < nd && an_rec(a, dx[j])->step == x->step && fmt) {
                const fp8_summary *y = an_rec(a, dx[j]);
                an_thresholds(fmt, y->scale_inv, &p->over, &p->under);
                p->ev = y->overflows > 0;
            }
        }
        p->warm = an_is_warm(a, t, p->step);
    }
    FILE *f = fopen(path, "w");
    if (!f) {
        free(pt);
        return;
    }
    fprintf(f, "step\tamax\tover\tunder\tevent\twarmup\n");
    size_t events = 0, points = 0;
    /* long runs: at most ~2000 points, each the step with the largest amax
     * in its bin, marked when any step of the bin had an event */
    size_t bin = np > 2000 ? (np + 1999) / 2000 : 1;
    for (size_t b0 = 0; b0 < np; b0 += bin) {
        size_t best = SIZE_MAX;
        int ev = 0, warm = 0;
        for (size_t i = b0; i < b0 + bin && i < np; i++) {
            events += (size_t)(pt[i].ev && !pt[i].warm);
            ev |= pt[i].ev && !pt[i].warm, warm |= pt[i].warm;
            if (pt[i].amax > 0 && isfinite(pt[i].amax) && (best == SIZE_MAX || pt[i].amax > pt[best].amax))
                best = i;
        }
        if (best == SIZE_MAX)
            continue;
        fprintf(f, "%lld\t%.9g\t%.9g\t%.9g\t%d\t%d\n", (long long)pt[best].step, pt[best].amax, pt[best].over,
                pt[best].under, ev, warm);
        points++;
    }
    fclose(f);
    free(pt);
    if (!points) /* an all-zero tensor: nothing to draw on a log scale */
        return;
    char ttl[512];
    snprintf(ttl, sizeof ttl, "%s — %s: amax and the range of %s (%zu overflow events after warm-up)", a->label,
             a->run->tensor_name[t], d >= 0 ? an_recipe_label_on(a, t, d, lab, sizeof lab) : "no delayed recipe", events);
    snprintf(vars, sizeof vars, "data = %s\nttl = %s\n", plot_quote(data, q1, sizeof q1), plot_quote(ttl, q2, sizeof q2));
    char cap[768];
    /* the delayed recipe is the one that cast the tensor only when it is
     * the run's active recipe on it; otherwise a shadow evaluated beside */
    int active = d >= 0 && a->active[t] >= 0 && an_canon(a, t, a->active[t]) == d;
    snprintf(cap, sizeof cap, "%s, `%s`: amax at %s (black) and the representable range of %s `%s` (band: flush "
                              "threshold to overflow threshold, tensor units); red: overflow events; grey: warm-up "
                              "steps.",
             a->label, a->run->tensor_name[t], ns ? "every step" : "every recorded step",
             active ? "the delayed scale the run cast it with," : "the scale of the delayed shadow recipe (not what "
                                                                 "the run cast with),",
             d >= 0 ? an_recipe_label_on(a, t, d, lab, sizeof lab) : "-");
    fig_draw(F, "amax", name, vars, "compare", cap);
}

/* Tensor t's exponent histogram at its worst step (the first delayed
 * overflow event, else the last record), and below it one row per recipe
 * (canonical label, one colour each, repeats of the same numerics dropped):
 * the window of |x| the recipe represents after scaling. */
void fig_exphist(figset *F, const an_run *a, int t)
{
    int in = an_input_recipe(a, t), d = an_delayed_recipe(a, t);
    size_t n;
    const size_t *ix = an_series(a, t, in, &n);
    if (!n)
        return;
    size_t pick = n - 1;
    if (d >= 0) {
        size_t nd;
        const size_t *dx = an_series(a, t, d, &nd);
        for (size_t j = 0; j < nd; j++)
            if (an_rec(a, dx[j])->overflows > 0 && !an_is_warm(a, t, an_rec(a, dx[j])->step)) {
                for (size_t i = 0; i < n; i++)
                    if (an_rec(a, ix[i])->step == an_rec(a, dx[j])->step)
                        pick = i;
                break;
            }
    }
    const fp8_summary *x = an_rec(a, ix[pick]);
    uint64_t h[FP8_EXP_BINS], row = x->hist_row;
    if (fp8_run_exp_hist(a->run, &row, 1, h) != FP8_OK)
        return;
    char data[256], wins[256], name[96], vars[6400], q1[300], q2[300], q3[400];
    snprintf(name, sizeof name, "fig_exphist_%s_%d", a->label, t);
    snprintf(data, sizeof data, "%s.tsv", name);
    snprintf(wins, sizeof wins, "%s_windows.tsv", name);
    FILE *f = fig_data(F, data);
    if (!f)
        return;
    /* bins 2..255: binades 2^(k-128); the subnormal-input bin (1) is drawn
     * at -127 only when it holds values */
    double xmin = 1e9, xmax = -1e9;
    for (int k = 1; k <= 255; k++)
        if (h[k]) {
            int e = k == 1 ? -127 : k - 128;
            fprintf(f, "%d\t%llu\n", e, (unsigned long long)h[k]);
            xmin = fmin(xmin, e), xmax = fmax(xmax, e + 1);
        }
    fclose(f);
    f = fig_data(F, wins);
    if (!f)
        return;
    int nw = 0;
    char seen[32][120], wt[4096] = "(";
    size_t wl = 1;
    size_t nr;
    const int *rs = an_tensor_recipes(a, t, &nr);
    for (size_t ri = 0; ri < nr && nw < 32; ri++) {
        int r = rs[ri];
        size_t m;
        const size_t *rx = an_series(a, t, r, &m);
        const fp8_format *fmt = an_format(a, t, r);
        for (size_t j = 0; j < m && fmt; j++) {
            const fp8_summary *y = an_rec(a, rx[j]);
            if (y->step != x->step || !(y->scale_inv > 0))
                continue;
            char lab[120];
            an_recipe_label_on(a, t, r, lab, sizeof lab - 20);
            int dup = 0;
            for (int k = 0; k < nw && !dup; k++)
                dup = strcmp(seen[k], lab) == 0;
            if (dup)
                break;
            snprintf(seen[nw], sizeof seen[0], "%s", lab);
            double o1, u1, o2, u2;
            an_thresholds(fmt, y->nscales > 1 ? y->scale_inv_min : y->scale_inv, &o1, &u1);
            an_thresholds(fmt, y->nscales > 1 ? y->scale_inv_max : y->scale_inv, &o2, &u2);
            xmin = fmin(xmin, floor(log2(u1))), xmax = fmax(xmax, ceil(log2(o2)));
            fprintf(f, "%d\t%s%s\t%.9g\t%.9g\t%u\n", nw + 1, lab, y->nscales > 1 ? " (blocks: union)" : "",
                    log2(u1), log2(o2), fig_colour(F, lab));
            if (wl < sizeof wt - 140)
                wl += (size_t)snprintf(wt + wl, sizeof wt - wl, "%s\"%s%s\" %d", nw ? ", " : "", lab,
                                       y->nscales > 1 ? " (union)" : "", nw + 1);
            nw++;
            break;
        }
    }
    fclose(f);
    if (!nw)
        return;
    char ttl[512];
    snprintf(ttl, sizeof ttl, "%s — %s at step %lld: |x| per binade and what each recipe represents", a->label,
             a->run->tensor_name[t], (long long)x->step);
    snprintf(wt + wl, sizeof wt - wl, ")");
    char q4[4400];
    snprintf(vars, sizeof vars, "data = %s\nwindows = %s\nttl = %s\nnw = %d\nxlo = %g\nxhi = %g\nwt = %s\n",
             plot_quote(data, q1, sizeof q1), plot_quote(wins, q2, sizeof q2), plot_quote(ttl, q3, sizeof q3), nw,
             xmin - 1, xmax + 1, plot_quote(wt, q4, sizeof q4));
    char cap[600];
    snprintf(cap, sizeof cap, "%s, `%s` at step %lld: top, how many values fall in each binade [2^k, 2^(k+1)) of |x| "
                              "(log scale); below, one row per recipe: the range of |x| it represents after scaling, "
                              "from the flush-to-zero threshold to the overflow threshold (block recipes: the union "
                              "over their blocks). Values left of a row flush to zero, right of it overflow.",
             a->label, a->run->tensor_name[t], (long long)x->step);
    fig_draw(F, "exphist", name, vars, "replay", cap);
}

/* Per-block scale histograms of tensor t at its last step, one colour per
 * recipe: log2 scale_inv of the blocks.  Blocks whose amax is 0 (scale_inv
 * at the bottom bin, 2^-127) are counted in the caption, not drawn: one
 * far-away bar would squeeze the rest. */
void fig_blockscale(figset *F, const an_run *a, int t)
{
    size_t n;
    int in = an_input_recipe(a, t);
    const size_t *ix = an_series(a, t, in, &n);
    if (!n)
        return;
    int64_t step = an_rec(a, ix[n - 1])->step;
    char pat[FP8_NAME_MAX + 4];
    size_t k = 0; /* fnmatch pattern: the name with its special characters escaped */
    for (const char *s = a->run->tensor_name[t]; *s && k < sizeof pat - 2; s++) {
        if (*s == '*' || *s == '?' || *s == '[' || *s == '\\')
            pat[k++] = '\\';
        pat[k++] = *s;
    }
    pat[k] = 0;
    fp8_run *full = fp8_run_load_filtered(a->run->path, pat, step, step);
    if (!full)
        return;
    char data[256], name[96], vars[1024], q1[300], q2[400], seen[32][96];
    snprintf(name, sizeof name, "fig_blockscale_%s_%d", a->label, t);
    snprintf(data, sizeof data, "%s.tsv", name);
    FILE *f = fig_data(F, data);
    int nr = 0;
    unsigned long long zero = 0;
    for (size_t i = 0; f && i < full->nrecords && nr < 32; i++) {
        const fp8_record *r = &full->records[i];
        if (r->stats.nscales <= 1)
            continue;
        char lab[96];
        an_recipe_label_on(a, t, (int)r->recipe, lab, sizeof lab);
        int dup = 0;
        for (int j = 0; j < nr && !dup; j++)
            dup = strcmp(seen[j], lab) == 0;
        if (dup)
            continue;
        snprintf(seen[nr], sizeof seen[0], "%s", lab);
        unsigned rgb = fig_colour(F, lab);
        fprintf(f, "%s\"%s\"\n", nr ? "\n\n" : "", lab);
        for (int b = 1; b < FP8_SCALE_BINS; b++)
            if (r->stats.scale_hist[b])
                fprintf(f, "%d\t%llu\t%u\n", b - 127, (unsigned long long)r->stats.scale_hist[b], rgb);
        zero = r->stats.scale_hist[0] > zero ? r->stats.scale_hist[0] : zero;
        nr++;
    }
    if (f)
        fclose(f);
    fp8_run_free(full);
    if (!nr)
        return;
    char ttl[512];
    snprintf(ttl, sizeof ttl, "%s — %s at step %lld: per-block scale_inv", a->label, a->run->tensor_name[t],
             (long long)step);
    snprintf(vars, sizeof vars, "data = %s\nnrec = %d\nttl = %s\n", plot_quote(data, q1, sizeof q1), nr,
             plot_quote(ttl, q2, sizeof q2));
    char cap[640], z[160] = "";
    if (zero)
        snprintf(z, sizeof z, " Blocks of zeros (scale_inv at the floor, not drawn): up to %llu.", zero);
    snprintf(cap, sizeof cap, "%s, `%s` at step %lld: how many blocks use each power-of-two range of scale_inv, per "
                              "block recipe (one colour each); a wide spread is what a single per-tensor scale cannot "
                              "follow.%s",
             a->label, a->run->tensor_name[t], (long long)step, z);
    fig_draw(F, "blockscale", name, vars, "dynamics", cap);
}

/* Per-layer magnitudes: each tensor of the run (grouped by layer) as a bar
 * from log2 of its smallest non-zero |x| to log2 of its amax (medians over
 * the recorded steps after warm-up), forward tensors (activations, weights,
 * outputs) and gradients marked apart; E4M3's and E5M2's representable
 * ranges (unscaled: min subnormal to max) as reference lines.  What a
 * scale has to move, per layer. */
void fig_layers(figset *F, const an_run *a)
{
    int T = a->run->ntensors;
    if (T <= 0)
        return;
    char data[256], name[96], vars[1024], q1[300], q2[400];
    snprintf(name, sizeof name, "fig_layers_%s", a->label);
    snprintf(data, sizeof data, "%s.tsv", name);
    FILE *f = fig_data(F, data);
    if (!f)
        return;
    fprintf(f, "row\tlo\tamax\tgrad\tlabel\n");
    /* rows ordered by layer, then name; one row per tensor with data */
    int *ord = malloc((size_t)T * sizeof *ord), m = 0;
    double *v = malloc(4096 * sizeof *v), *w = malloc(4096 * sizeof *w);
    if (!ord || !v || !w) {
        fclose(f);
        free(ord), free(v), free(w);
        return;
    }
    for (int t = 0; t < T; t++)
        if (an_has_data(a, t))
            ord[m++] = t;
    for (int i = 1; i < m; i++) /* insertion sort: (layer, name) */
        for (int j = i; j > 0; j--) {
            int p = ord[j - 1], q = ord[j];
            int lp = a->run->tensor_layer[p], lq = a->run->tensor_layer[q];
            if (lp < lq || (lp == lq && strcmp(a->run->tensor_name[p], a->run->tensor_name[q]) <= 0))
                break;
            ord[j - 1] = q, ord[j] = p;
        }
    int rows = 0;
    double xlo = -18, xhi = 18; /* at least both formats' ranges */
    for (int i = 0; i < m; i++) {
        int t = ord[i];
        size_t n, nv = 0, nw = 0;
        const size_t *ix = an_series(a, t, an_input_recipe(a, t), &n);
        for (size_t j = 0; j < n && nv < 4096; j++) {
            const fp8_summary *x = an_rec(a, ix[j]);
            if (an_is_warm(a, t, x->step) || !(x->amax > 0) || !isfinite(x->amax))
                continue;
            v[nv++] = log2(x->amax);
            if (x->min_nonzero > 0 && isfinite(x->min_nonzero))
                w[nw++] = log2(x->min_nonzero);
        }
        if (!nv)
            continue;
        double lo = nw ? an_quantile(w, nw, 0.5) : NAN, hi = an_quantile(v, nv, 0.5);
        if (lo == lo)
            xlo = fmin(xlo, floor(lo) - 2);
        xhi = fmax(xhi, ceil(hi) + 2);
        const char *nm = a->run->tensor_name[t];
        const char *shortn = strncmp(nm, "layers.", 7) == 0 ? nm + 7 : nm;
        fprintf(f, "%d\t%.6g\t%.6g\t%d\t%s\n", rows++, lo, hi,
                a->run->tensor_role[t] == FP8_ROLE_GRADIENT, shortn);
    }
    fclose(f);
    free(ord), free(v), free(w);
    if (!rows)
        return;
    char ttl[512];
    snprintf(ttl, sizeof ttl, "%s — magnitudes per layer and tensor against the FP8 ranges", a->label);
    snprintf(vars, sizeof vars, "data = %s\nrows = %d\nxlo = %g\nxhi = %g\nttl = %s\n", plot_quote(data, q1, sizeof q1),
             rows, xlo, xhi, plot_quote(ttl, q2, sizeof q2));
    char cap[600];
    snprintf(cap, sizeof cap, "%s: each tensor (layer by layer) from log2 of its smallest non-zero |x| to log2 of its "
                              "amax, medians over the recorded steps after warm-up; blue: forward (activations, "
                              "weights), red: gradients. Dashed: the unscaled ranges of E4M3 (2^-9 to 448) and E5M2 "
                              "(2^-16 to 57344); a scale shifts a bar, a bar longer than a range cannot fit it.",
             a->label);
    fig_draw(F, "layers", name, vars, "outliers", cap);
}
