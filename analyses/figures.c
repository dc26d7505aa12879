/*
 * figures.c — the report's figures: writes each figure's data file (or
 * points its script at an analysis's data file), then has plots/ draw it
 * with gnuplot as a separate process whose exit status is checked.
 *
 * Run the analyses first: pareto, loss and channel figures read their
 * data files (replay_settings.tsv, loss_*.tsv, outliers_channels.tsv).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "analysis.h"
#include "compare.h"
#include "fp8_error.h"
#include "plots.h"

typedef struct {
    an_ctx *c;
    an_figure *figs;
    int max, n, failed;
} figset;

static void draw(figset *F, const char *script, const char *name, const char *vars, const char *section,
                 const char *caption)
{
    if (F->n == F->max)
        return;
    char msg[1024];
    if (plot_render(F->c->outdir, script, name, vars, msg, (int)sizeof msg) != 0) {
        fprintf(stderr, "fp8prof: figure %s: %s\n", name, msg);
        F->failed++;
        return;
    }
    an_figure *f = &F->figs[F->n++];
    snprintf(f->name, sizeof f->name, "%s", name);
    snprintf(f->caption, sizeof f->caption, "%s", caption);
    snprintf(f->section, sizeof f->section, "%s", section);
}

/* 1 when data file DIR/name has a row below its header line. */
static int file_has_rows(const char *dir, const char *name)
{
    char p[4096];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    FILE *f = fopen(p, "r");
    int ch, lines = 0;
    while (f && lines < 2 && (ch = getc(f)) != EOF)
        lines += ch == '\n';
    if (f)
        fclose(f);
    return lines >= 2;
}

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

/* One point of the amax figure: the step, amax, band and event. */
typedef struct {
    int64_t step;
    double amax, over, under;
    int ev, warm;
} apoint;

static void amax_figure(figset *F, const an_run *a, int t)
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
    char cap[512];
    snprintf(cap, sizeof cap, "%s, `%s`: amax at %s (black) and the representable range of the delayed scale it was "
                              "cast with (band: flush threshold to overflow threshold, tensor units); red: overflow "
                              "events; grey: warm-up steps.",
             a->label, a->run->tensor_name[t], ns ? "every step" : "every recorded step");
    draw(F, "amax", name, vars, "compare", cap);
}

#define MAX_HEAT 12 /* overflow heat maps per run */

static int cmp_int(const void *x, const void *y)
{
    int a = *(const int *)x, b = *(const int *)y;
    return (a > b) - (a < b);
}

/* layer x step heat map of overflow % (what=0) or underflow % (1) under recipe r */
static void heat_figure(figset *F, const an_run *a, int r, int what)
{
    int T = a->run->ntensors, L = 0;
    for (int t = 0; t < T; t++)
        L = a->run->tensor_layer[t] + 1 > L ? a->run->tensor_layer[t] + 1 : L;
    if (L <= 0)
        return;
    /* steps of recipe r */
    size_t ns = 0, cap = 1024;
    int64_t *steps = malloc(cap * sizeof *steps);
    double *num = NULL, *den = NULL;
    if (!steps)
        return;
    for (int t = 0; t < T; t++) {
        size_t n;
        const size_t *ix = an_series(a, t, r, &n);
        for (size_t i = 0; i < n; i++) {
            int64_t s = an_rec(a, ix[i])->step;
            size_t lo = 0, hi = ns;
            while (lo < hi) {
                size_t m = (lo + hi) / 2;
                if (steps[m] < s)
                    lo = m + 1;
                else
                    hi = m;
            }
            if (lo < ns && steps[lo] == s)
                continue;
            if (ns == cap) {
                int64_t *p = realloc(steps, (cap *= 2) * sizeof *steps);
                if (!p)
                    goto out;
                steps = p;
            }
            memmove(steps + lo + 1, steps + lo, (ns - lo) * sizeof *steps);
            steps[lo] = s, ns++;
        }
    }
    if (ns < 2)
        goto out;
    num = calloc(ns * (size_t)L, sizeof *num), den = calloc(ns * (size_t)L, sizeof *den);
    if (!num || !den)
        goto out;
    for (int t = 0; t < T; t++) {
        int l = a->run->tensor_layer[t];
        if (l < 0)
            continue;
        size_t n, k = 0;
        const size_t *ix = an_series(a, t, r, &n);
        for (size_t i = 0; i < n; i++) {
            const fp8_summary *x = an_rec(a, ix[i]);
            if (an_is_warm(a, t, x->step))
                continue; /* warm-up is not behaviour: kept out of the colour scale */
            while (k < ns && steps[k] < x->step)
                k++;
            if (k == ns)
                break;
            num[k * (size_t)L + (size_t)l] += (double)(what ? x->underflows : x->overflows);
            den[k * (size_t)L + (size_t)l] += (double)x->numel;
        }
    }
    char data[256], name[96], path[4096], vars[1024], q1[300], q2[400], q3[100], lab[96];
    snprintf(name, sizeof name, "fig_heat_%s_%s_r%d", what ? "underflow" : "overflow", a->label, r);
    snprintf(data, sizeof data, "%s.tsv", name);
    snprintf(path, sizeof path, "%s/%s", F->c->outdir, data);
    FILE *f = fopen(path, "w");
    if (!f)
        goto out;
    double mx = 0;
    size_t bin = ns > 400 ? (ns + 399) / 400 : 1; /* long runs: columns of `bin` recorded steps */
    for (size_t k0 = 0; k0 < ns; k0 += bin) {
        for (int l = 0; l < L; l++) {
            double nu = 0, de = 0;
            for (size_t k = k0; k < k0 + bin && k < ns; k++)
                nu += num[k * (size_t)L + (size_t)l], de += den[k * (size_t)L + (size_t)l];
            double v = de > 0 ? 100 * nu / de : 0;
            mx = fmax(mx, v);
            fprintf(f, "%lld\t%d\t%.9g\n", (long long)steps[k0], l, v);
        }
        fprintf(f, "\n");
    }
    fclose(f);
    char ttl[512];
    snprintf(ttl, sizeof ttl, "%s — %s %% per layer under %s (max %.3g%%)", a->label, what ? "underflow" : "overflow",
             an_recipe_label(a, r, lab, sizeof lab), mx);
    snprintf(vars, sizeof vars, "data = %s\nttl = %s\ncblab = %s\nlogcb = %d\n", plot_quote(data, q1, sizeof q1),
             plot_quote(ttl, q2, sizeof q2),
             plot_quote(what ? "underflow (% of elements)" : "overflow (% of elements)", q3, sizeof q3), mx > 0);
    char capt[512];
    snprintf(capt, sizeof capt, "%s: %s %% of each layer's elements (all its recorded tensors) per recorded step under "
                                "`%s`, warm-up steps left out (blank).", a->label, what ? "underflow (flushed to zero)" : "overflow", lab);
    draw(F, "heatmap", name, vars, "compare", capt);
out:
    free(steps), free(num), free(den);
}

/* exponent histogram of tensor t at its worst step, against each recipe's window */
static void exphist_figure(figset *F, const an_run *a, int t)
{
    int in = an_input_recipe(a, t), d = an_delayed_recipe(a, t);
    size_t n;
    const size_t *ix = an_series(a, t, in, &n);
    if (!n)
        return;
    /* worst step: the first delayed overflow event, else the last record */
    size_t pick = n - 1;
    if (d >= 0) {
        size_t nd;
        const size_t *dx = an_series(a, t, d, &nd);
        for (size_t j = 0; j < nd; j++)
            if (an_rec(a, dx[j])->overflows > 0) {
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
    char data[256], wins[256], name[96], path[4096], vars[1200], q1[300], q2[300], q3[400], lab[96];
    snprintf(name, sizeof name, "fig_exphist_%s_%d", a->label, t);
    snprintf(data, sizeof data, "%s.tsv", name);
    snprintf(wins, sizeof wins, "%s_windows.tsv", name);
    snprintf(path, sizeof path, "%s/%s", F->c->outdir, data);
    FILE *f = fopen(path, "w");
    if (!f)
        return;
    for (int k = 1; k <= 255; k++)
        if (h[k])
            fprintf(f, "%d\t%llu\n", k == 1 ? -127 : k - 128, (unsigned long long)h[k]);
    fclose(f);
    snprintf(path, sizeof path, "%s/%s", F->c->outdir, wins);
    f = fopen(path, "w");
    if (!f)
        return;
    int nw = 0;
    size_t nr;
    const int *rs = an_tensor_recipes(a, t, &nr);
    for (size_t ri = 0; ri < nr; ri++) {
        int r = rs[ri];
        size_t m;
        const size_t *rx = an_series(a, t, r, &m);
        const fp8_format *fmt = an_format(a, t, r);
        for (size_t j = 0; j < m && fmt; j++) {
            const fp8_summary *y = an_rec(a, rx[j]);
            if (y->step != x->step || !(y->scale_inv > 0))
                continue;
            double o1, u1, o2, u2;
            an_thresholds(fmt, y->nscales > 1 ? y->scale_inv_min : y->scale_inv, &o1, &u1);
            an_thresholds(fmt, y->nscales > 1 ? y->scale_inv_max : y->scale_inv, &o2, &u2);
            fprintf(f, "%s%s\t%.9g\t%.9g\t%.3f\n", an_recipe_label_on(a, t, r, lab, sizeof lab),
                    y->nscales > 1 ? " (union of blocks)" : "", log2(u1), log2(o2), 0.9 - 0.12 * nw);
            nw++;
        }
    }
    fclose(f);
    if (!nw)
        return;
    char ttl[512];
    snprintf(ttl, sizeof ttl, "%s — %s at step %lld: |x| exponents and each recipe's window", a->label,
             a->run->tensor_name[t], (long long)x->step);
    snprintf(vars, sizeof vars, "data = %s\nwindows = %s\nttl = %s\n", plot_quote(data, q1, sizeof q1),
             plot_quote(wins, q2, sizeof q2), plot_quote(ttl, q3, sizeof q3));
    char cap[512];
    snprintf(cap, sizeof cap, "%s, `%s` at step %lld: histogram of log2|x| (bars) and, per recipe, the window of |x| "
                              "it represents after scaling (from the flush threshold to the overflow threshold; block "
                              "recipes: the union over blocks).", a->label, a->run->tensor_name[t], (long long)x->step);
    draw(F, "exphist", name, vars, "replay", cap);
}

/* per-block scale histograms of tensor t at its last step, for every grouped recipe */
static void blockscale_figure(figset *F, const an_run *a, int t)
{
    size_t n;
    int in = an_input_recipe(a, t);
    const size_t *ix = an_series(a, t, in, &n);
    if (!n)
        return;
    int64_t step = an_rec(a, ix[n - 1])->step;
    char pat[FP8_NAME_MAX + 4];
    /* fnmatch pattern: the name with its special characters escaped */
    size_t k = 0;
    for (const char *s = a->run->tensor_name[t]; *s && k < sizeof pat - 2; s++) {
        if (*s == '*' || *s == '?' || *s == '[' || *s == '\\')
            pat[k++] = '\\';
        pat[k++] = *s;
    }
    pat[k] = 0;
    fp8_run *full = fp8_run_load_filtered(a->run->path, pat, step, step);
    if (!full)
        return;
    char data[256], name[96], path[4096], vars[1024], q1[300], q2[400], lab[96];
    snprintf(name, sizeof name, "fig_blockscale_%s_%d", a->label, t);
    snprintf(data, sizeof data, "%s.tsv", name);
    snprintf(path, sizeof path, "%s/%s", F->c->outdir, data);
    FILE *f = fopen(path, "w");
    int nr = 0;
    for (size_t i = 0; f && i < full->nrecords; i++) {
        const fp8_record *r = &full->records[i];
        if (r->stats.nscales <= 1)
            continue;
        int dup = 0;
        for (size_t j = 0; j < i; j++)
            dup |= full->records[j].recipe == r->recipe;
        if (dup)
            continue;
        fprintf(f, "%s%s\n", nr ? "\n\n" : "", an_recipe_label_on(a, t, (int)r->recipe, lab, sizeof lab));
        for (int b = 0; b < FP8_SCALE_BINS; b++)
            if (r->stats.scale_hist[b])
                fprintf(f, "%s\t%d\t%llu\n", lab, b - 127, (unsigned long long)r->stats.scale_hist[b]);
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
    char cap[512];
    snprintf(cap, sizeof cap, "%s, `%s` at step %lld: how many blocks use each power-of-two range of scale_inv, per "
                              "block recipe; a wide spread is what a single per-tensor scale cannot follow.",
             a->label, a->run->tensor_name[t], (long long)step);
    draw(F, "blockscale", name, vars, "dynamics", cap);
}

int an_figures(an_ctx *c, an_figure *figs, int max, int *failed)
{
    figset F = {c, figs, max, 0, 0};
    char vars[2048], q1[300], q2[300], q3[600], q4[300];
    for (int ri = 0; ri < c->nruns; ri++) {
        const an_run *a = &c->runs[ri];
        if (!a->run->nrecords)
            continue;
        int top[2], nt = rank_tensors(&c->runs[ri], top, 2);
        for (int i = 0; i < nt; i++)
            amax_figure(&F, a, top[i]);
        /* heat maps: the active recipe's overflow and underflow, and overflow of any recipe that overflowed */
        int act = -1;
        for (int t = 0; t < a->run->ntensors && act < 0; t++)
            act = a->active[t];
        /* recipes by their records with overflows (one pass); at most
         * MAX_HEAT maps: the active recipe's, then the most overflowing */
        size_t R = (size_t)a->run->nrecipes, *novf = calloc(R + 1, sizeof *novf);
        int *pick = malloc((R + 1) * sizeof *pick), npick = 0;
        if (novf && pick) {
            for (size_t i = 0; i < a->run->nrecords; i++) {
                const fp8_summary *x = an_rec(a, i);
                if (x->overflows > 0 && x->overflows != UINT64_MAX && x->recipe < R)
                    novf[x->recipe]++;
            }
            if (act >= 0)
                pick[npick++] = act;
            for (int k = npick; k < MAX_HEAT; k++) {
                int m = -1;
                for (size_t r = 0; r < R; r++) {
                    int taken = 0;
                    for (int j = 0; j < npick && !taken; j++)
                        taken = pick[j] == (int)r;
                    if (!taken && novf[r] && (m < 0 || novf[r] > novf[m]))
                        m = (int)r;
                }
                if (m < 0)
                    break;
                pick[npick++] = m;
            }
            qsort(pick, (size_t)npick, sizeof *pick, cmp_int);
            for (int k = 0; k < npick; k++)
                heat_figure(&F, a, pick[k], 0);
        }
        free(novf), free(pick);
        if (act >= 0)
            heat_figure(&F, a, act, 1);
        if (nt)
            exphist_figure(&F, a, top[0]);
        /* block scales: the tensor with the largest block spread */
        int bt = -1;
        double bs = 0;
        for (int t = 0; t < a->run->ntensors; t++) {
            size_t nr;
            const int *rs = an_tensor_recipes(a, t, &nr);
            for (size_t ri2 = 0; ri2 < nr; ri2++) {
                int r = rs[ri2];
                const an_sstats *s = NULL;
                if (a->recipe_ok[r] && (a->recipes[r].kind == FP8_RECIPE_BLOCK || a->recipes[r].kind == FP8_RECIPE_MX) &&
                    (s = an_series_cached(&c->runs[ri], t, r)) && s->records && s->block_spread > bs)
                    bs = s->block_spread, bt = t;
            }
        }
        if (bt >= 0)
            blockscale_figure(&F, a, bt);
        if (file_has_rows(c->outdir, "replay_settings.tsv")) {
            char ttl[256], name[96];
            snprintf(ttl, sizeof ttl, "%s — delayed scaling replayed: overflow events vs values flushed, per setting", a->label);
            snprintf(name, sizeof name, "fig_pareto_%s", a->label);
            snprintf(vars, sizeof vars, "data = 'replay_settings.tsv'\nfront = 'replay_front.tsv'\nrun = %s\nttl = %s\n",
                     plot_quote(a->label, q1, sizeof q1), plot_quote(ttl, q2, sizeof q2));
            draw(&F, "pareto", name, vars, "replay",
                 "Every replayed delayed-scaling setting (history, max/most_recent, margin): overflow events after "
                 "warm-up (exact, every step) against the share of values flushed to zero (bars: its rigorous lower "
                 "and upper bounds at the steps with statistics); red: settings no other one certainly beats.");
        }
    }
    /* loss curves: baseline first */
    if (file_has_rows(c->outdir, "loss_curves.tsv") && c->nruns > 0) {
        char runs[1024] = "";
        size_t k = 0;
        int b = c->baseline >= 0 && c->baseline < c->nruns ? c->baseline : 0;
        k += (size_t)snprintf(runs + k, sizeof runs - k, "%s", c->runs[b].label);
        for (int i = 0; i < c->nruns && k < sizeof runs - 70; i++)
            if (i != b)
                k += (size_t)snprintf(runs + k, sizeof runs - k, " %s", c->runs[i].label);
        snprintf(vars, sizeof vars, "curves = 'loss_curves.tsv'\ndiffs = 'loss_diff.tsv'\nruns = %s\nttl = %s\n",
                 plot_quote(runs, q3, sizeof q3), plot_quote("Training loss and its difference to the baseline", q2, sizeof q2));
        draw(&F, "loss", "fig_loss", vars, "loss",
             "Top: training loss per step, smoothed (centred moving mean). Bottom: relative difference to the baseline, "
             "smoothed; grey band: the noise floor (a second baseline seed's envelope), when one was trained.");
    }
    /* outlier channels, A/B: the pair the outliers analysis compared, else the first run alone */
    if (file_has_rows(c->outdir, "outliers_channels.tsv") && c->nruns > 0) {
        int A = c->vs_a >= 0 ? c->vs_a : 0, B = c->vs_b >= 0 ? c->vs_b : -1;
        const an_run *a = &c->runs[A];
        /* the tensor with snapshots and the largest max/RMS... first snapshotted tensor with the highest kurtosis */
        int best = -1;
        double bk = 0;
        for (size_t i = 0; i < a->run->nsnapshots; i++) {
            int t = (int)a->run->snapshots[i].tensor;
            size_t n;
            const size_t *ix = an_series(a, t, an_input_recipe(a, t), &n);
            if (n && an_rec(a, ix[n - 1])->kurtosis > bk)
                bk = an_rec(a, ix[n - 1])->kurtosis, best = t;
        }
        if (best >= 0) {
            char ttl[512];
            snprintf(ttl, sizeof ttl, "%s: top outlier channels' amax%s%s", a->run->tensor_name[best],
                     B >= 0 ? ", solid vs dashed: " : "", B >= 0 ? c->runs[B].label : "");
            snprintf(vars, sizeof vars, "data = 'outliers_channels.tsv'\ntensor = %s\nruna = %s\nrunb = %s\nttl = %s\n",
                     plot_quote(a->run->tensor_name[best], q1, sizeof q1), plot_quote(a->label, q2, sizeof q2),
                     plot_quote(B >= 0 ? c->runs[B].label : "-", q4, sizeof q4), plot_quote(ttl, q3, sizeof q3));
            char cap[512];
            snprintf(cap, sizeof cap, "`%s`: amax of its top channels (columns) in each snapshot, %s (solid)%s%s%s, "
                                      "with the median channel (black).", a->run->tensor_name[best], a->label,
                     B >= 0 ? " and " : "", B >= 0 ? c->runs[B].label : "", B >= 0 ? " (dashed)" : "");
            draw(&F, "channels", "fig_channels", vars, "outliers", cap);
        }
    }
    *failed = F.failed;
    return F.n;
}
