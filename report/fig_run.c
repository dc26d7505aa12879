/*
 * fig_run.c — figures of a run or several: layer x step heat maps, the
 * delayed-scaling replay's settings, the loss curves, the outlier channels
 * (figset.h).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "figset.h"
#include "plots.h"

/* layer x step heat map of overflow % (what=0) or underflow % (1) under recipe r */
void fig_heat(figset *F, const an_run *a, int r, int what)
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
        /* underflow: gradients only (BioNeMo's FP8-analyzer view, where
         * flushing hurts); overflow: every role */
        if (l < 0 || (what && a->run->tensor_role[t] != FP8_ROLE_GRADIENT))
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
    char data[256], name[96], vars[1400], q1[300], q2[400], q3[100], q4[400], lab[96];
    {
        double any = 0, cells = 0;
        for (size_t i = 0; i < ns * (size_t)L; i++)
            any += num[i], cells += den[i];
        if (!(any > 0)) { /* a map of zeros (or of nothing) says nothing: one line instead */
            char why[400];
            snprintf(why, sizeof why, "`%s`: no %s under `%s` after warm-up at any recorded step%s — its heat map "
                                      "would be blank, not drawn.",
                     a->label, what ? "gradient value flushed to zero" : "overflow", an_recipe_label(a, r, lab, sizeof lab),
                     cells > 0 ? "" : " (no tensor with a layer)");
            fig_skip(F, "compare", why);
            goto out;
        }
    }
    snprintf(name, sizeof name, "fig_heat_%s_%s_r%d", what ? "underflow" : "overflow", a->label, r);
    snprintf(data, sizeof data, "%s.tsv", name);
    FILE *f = fig_data(F, data);
    if (!f)
        goto out;
    double mx = 0, mn = INFINITY;
    size_t bin = ns > 400 ? (ns + 399) / 400 : 1; /* long runs: columns of `bin` recorded steps */
    for (size_t k0 = 0; k0 < ns; k0 += bin) {
        for (int l = 0; l < L; l++) {
            double nu = 0, de = 0;
            for (size_t k = k0; k < k0 + bin && k < ns; k++)
                nu += num[k * (size_t)L + (size_t)l], de += den[k * (size_t)L + (size_t)l];
            double v = de > 0 ? 100 * nu / de : 0;
            mx = fmax(mx, v);
            if (v > 0)
                mn = fmin(mn, v);
            fprintf(f, "%lld\t%d\t%.9g\n", (long long)steps[k0], l, v);
        }
        fprintf(f, "\n");
    }
    fclose(f);
    /* colour scale: underflow against BioNeMo's FP8-analyzer thresholds
     * (0.5, 2 and 4 % of elements: fine / watch / act), linear from 0;
     * overflow on a log scale with ticks at every decade, or at its ends
     * and middle when the values span less than one */
    char tics[300] = "";
    int mode = 0; /* 0: all zero, 1: log, 2: thresholds */
    if (what) {
        mode = 2;
        snprintf(tics, sizeof tics, "(\"0\" 0, \"0.5\" 0.5, \"2\" 2, \"4\" 4, \"%.3g\" %.9g)", fmax(mx, 6), fmax(mx, 6));
    } else if (mx > 0) {
        mode = 1;
        int d0 = (int)floor(log10(mn)), d1 = (int)ceil(log10(mx));
        size_t l = (size_t)snprintf(tics, sizeof tics, "(");
        if (d1 - d0 >= 2) {
            for (int d = d0; d <= d1 && l < sizeof tics - 40; d++)
                l += (size_t)snprintf(tics + l, sizeof tics - l, "%s\"%.0e\" 1e%d", d > d0 ? ", " : "", pow(10, d), d);
        } else {
            double g = sqrt(mn * mx);
            l += (size_t)snprintf(tics + l, sizeof tics - l, "\"%.2g\" %.9g, \"%.2g\" %.9g, \"%.2g\" %.9g", mn, mn, g, g,
                                  mx, mx);
        }
        snprintf(tics + l, sizeof tics - l, ")");
    }
    char ttl[512];
    snprintf(ttl, sizeof ttl, "%s — %s %% per layer under %s (max %.3g%%)", a->label,
             what ? "gradient underflow" : "overflow", an_recipe_label(a, r, lab, sizeof lab), mx);
    snprintf(vars, sizeof vars, "data = %s\nttl = %s\ncblab = %s\nmode = %d\ncbmin = %.9g\ncbmax = %.9g\ncbt = %s\n",
             plot_quote(data, q1, sizeof q1), plot_quote(ttl, q2, sizeof q2),
             plot_quote(what ? "underflow (% of elements)" : "overflow (% of elements)", q3, sizeof q3), mode,
             mode == 1 ? (mx > mn * 1.0001 ? mn : mn / 2) : 0,
             mode == 2 ? fmax(mx, 6) : mode == 1 ? (mx > mn * 1.0001 ? mx : mx * 2) : 1, plot_quote(tics, q4, sizeof q4));
    char capt[640];
    snprintf(capt, sizeof capt, "%s: %s %% of each layer's elements (%s) per recorded step under `%s`, warm-up steps "
                                "left out (blank).%s",
             a->label, what ? "gradient underflow (flushed to zero)" : "overflow",
             what ? "its gradient tensors" : "all its recorded tensors", lab,
             what ? " Colour bands at BioNeMo's FP8-analyzer thresholds: below 0.5 % fine, 0.5-2 % watch, 2-4 % "
                    "act, above 4 % a problem."
                  : " Log colour scale; white: no overflow.");
    fig_draw(F, "heatmap", name, vars, "compare", capt);
out:
    free(steps), free(num), free(den);
}

/* Loss curves, the baseline first, and the difference to it. */
void fig_loss(figset *F)
{
    an_ctx *c = F->c;
    char vars[2048], q2[300], q3[600];
    if (!fig_has_rows(c->outdir, "loss_curves.tsv") || c->nruns < 1)
        return;
    char runs[1024] = "";
    size_t k = 0;
    int b = c->baseline >= 0 && c->baseline < c->nruns ? c->baseline : 0;
    k += (size_t)snprintf(runs + k, sizeof runs - k, "%s", c->runs[b].label);
    for (int i = 0; i < c->nruns && k < sizeof runs - 70; i++)
        if (i != b)
            k += (size_t)snprintf(runs + k, sizeof runs - k, " %s", c->runs[i].label);
    snprintf(vars, sizeof vars, "curves = 'loss_curves.tsv'\ndiffs = 'loss_diff.tsv'\nruns = %s\nttl = %s\n",
             plot_quote(runs, q3, sizeof q3), plot_quote("Training loss and its difference to the baseline", q2, sizeof q2));
    fig_draw(F, "loss", "fig_loss", vars, "loss",
             "Top: training loss per step, smoothed (centred moving mean). Bottom: relative difference to the baseline "
             "arm's mean curve, smoothed; grey band: 95% of the spread between replicates of the baseline (when it has "
             "some).");
}

/* The top outlier channels of the snapshotted tensor with the highest
 * kurtosis: run A solid, run B (the Smooth SwiGLU pair, when there is one)
 * dashed; each channel named by its index. */
void fig_channels(figset *F)
{
    an_ctx *c = F->c;
    if (!fig_has_rows(c->outdir, "outliers_channels.tsv") || c->nruns < 1)
        return;
    int A = c->vs_a >= 0 ? c->vs_a : 0, B = c->vs_b >= 0 && c->vs_b != A ? c->vs_b : -1;
    const an_run *a = &c->runs[A];
    int best = -1;
    double bk = 0;
    for (size_t i = 0; i < a->run->nsnapshots; i++) {
        int t = (int)a->run->snapshots[i].tensor;
        size_t n;
        const size_t *ix = an_series(a, t, an_input_recipe(a, t), &n);
        if (n && an_rec(a, ix[n - 1])->kurtosis > bk)
            bk = an_rec(a, ix[n - 1])->kurtosis, best = t;
    }
    if (best < 0)
        return;
    char ttl[512], vars[2048], q1[300], q2[300], q3[600], q4[300];
    if (B >= 0)
        snprintf(ttl, sizeof ttl, "%s: amax of the top outlier channels, %s (solid) and %s (dashed)",
                 a->run->tensor_name[best], a->label, c->runs[B].label);
    else
        snprintf(ttl, sizeof ttl, "%s: amax of the top outlier channels, %s", a->run->tensor_name[best], a->label);
    /* each run's channel index per rank 0..3, from the data file */
    char cha[64] = "- - - -", chb[64] = "- - - -", line[1024], path[4096];
    int ia[4] = {-1, -1, -1, -1}, ib[4] = {-1, -1, -1, -1};
    snprintf(path, sizeof path, "%s/outliers_channels.tsv", c->outdir);
    FILE *in = fopen(path, "r");
    int flat_b = B >= 0; /* run B: the top channel's amax equals the median's at every snapshot */
    while (in && fgets(line, sizeof line, in)) {
        char run[96], tn[FP8_NAME_MAX], rank[16];
        long long st;
        int ch = -1;
        double am = NAN, ratio = NAN;
        int got = sscanf(line, "%95[^\t]\t%127[^\t]\t%lld\t%15[^\t]\t%d\t%lf\t%lf", run, tn, &st, rank, &ch, &am,
                         &ratio);
        if (got >= 4 && B >= 0 && strcmp(run, c->runs[B].label) == 0 && strcmp(tn, a->run->tensor_name[best]) == 0 &&
            strcmp(rank, "0") == 0 && !(got == 7 && fabs(ratio - 1) < 1e-6))
            flat_b = 0;
        if (got < 5 || strcmp(tn, a->run->tensor_name[best]) != 0 || rank[0] < '0' || rank[0] > '3' || rank[1])
            continue;
        int q = rank[0] - '0';
        if (strcmp(run, a->label) == 0 && ia[q] < 0)
            ia[q] = ch;
        else if (B >= 0 && strcmp(run, c->runs[B].label) == 0 && ib[q] < 0)
            ib[q] = ch;
    }
    if (in)
        fclose(in);
    snprintf(cha, sizeof cha, "%d %d %d %d", ia[0], ia[1], ia[2], ia[3]);
    snprintf(chb, sizeof chb, "%d %d %d %d", ib[0], ib[1], ib[2], ib[3]);
    char q5[100], q6[100];
    snprintf(vars, sizeof vars,
             "data = 'outliers_channels.tsv'\ntensor = %s\nruna = %s\nrunb = %s\ncha = %s\nchb = %s\nttl = %s\n",
             plot_quote(a->run->tensor_name[best], q1, sizeof q1), plot_quote(a->label, q2, sizeof q2),
             plot_quote(B >= 0 ? c->runs[B].label : "", q4, sizeof q4), plot_quote(cha, q5, sizeof q5),
             plot_quote(chb, q6, sizeof q6), plot_quote(ttl, q3, sizeof q3));
    char cap[768], flat[300] = "";
    if (flat_b)
        snprintf(flat, sizeof flat, " In %s every channel has the same amax as the median one (Smooth SwiGLU scales "
                                    "each channel to the same amax before the cast): its \"top\" channels are ties, "
                                    "their indices arbitrary.",
                 c->runs[B].label);
    snprintf(cap, sizeof cap, "`%s`: amax of its top four channels (columns, named by index) in each snapshot, "
                              "%s%s%s%s, with the median channel (black).%s",
             a->run->tensor_name[best], a->label, B >= 0 ? " (solid) and " : "", B >= 0 ? c->runs[B].label : "",
             B >= 0 ? " (dashed)" : "", flat);
    fig_draw(F, "channels", "fig_channels", vars, "outliers", cap);
}

/* The replay's settings for one run: overflow events after warm-up (x)
 * against the share flushed to zero (y, bounds as bars); the settings no
 * other one certainly beats in red, the first few labelled where they do
 * not crowd; TE's default (1024, max, 0) marked.  Written from
 * replay_settings.tsv into the figure's own data file. */
void fig_pareto(figset *F, const an_run *a)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/replay_settings.tsv", F->c->outdir);
    FILE *in = fopen(path, "r");
    if (!in)
        return;
    char name[96], data[256], vars[1400], q1[300], q2[400], line[4096];
    snprintf(name, sizeof name, "fig_pareto_%s", a->label);
    snprintf(data, sizeof data, "%s.tsv", name);
    FILE *f = fig_data(F, data);
    if (!f) {
        fclose(in);
        return;
    }
    fprintf(f, "events\tflushed_mid\tflushed_lo\tflushed_hi\tfront\tte\tlabel\n");
    typedef struct {
        double x, mid, lo, hi;
        int front, te;
        char lab[48];
    } pt;
    pt *p = NULL;
    int rows = 0, ncap = 0;
    double xmax = 1, ylo = INFINITY, yhi = 0;
    while (fgets(line, sizeof line, in)) {
        char *col[20];
        int nc = 0;
        for (char *s = line; nc < 20;) {
            col[nc++] = s;
            char *tab = strchr(s, '\t');
            if (!tab)
                break;
            *tab = 0;
            s = tab + 1;
        }
        if (nc < 18 || strcmp(col[0], a->label) != 0)
            continue;
        if (rows == ncap) {
            pt *g = realloc(p, (size_t)(ncap = ncap ? 2 * ncap : 64) * sizeof *p);
            if (!g)
                break;
            p = g;
        }
        pt *q = &p[rows++];
        int hist = atoi(col[1]), margin = atoi(col[3]);
        double ev = atof(col[6]);
        q->lo = 100 * atof(col[13]), q->hi = 100 * atof(col[14]);
        q->x = ev > 0 ? ev : 0.5, q->mid = (q->lo + q->hi) / 2;
        q->front = atoi(col[17]) > 0;
        q->te = hist == 1024 && strcmp(col[2], "max") == 0 && margin == 0;
        snprintf(q->lab, sizeof q->lab, "%d/%s/%d", hist, strcmp(col[2], "max") == 0 ? "max" : "recent", margin);
        xmax = fmax(xmax, q->x), ylo = fmin(ylo, q->lo), yhi = fmax(yhi, q->hi);
    }
    fclose(in);
    /* label front points left to right, each at least 40% right of the
     * last one labelled, so that labels do not pile up */
    double last_x = -1;
    for (;;) {
        int b = -1;
        for (int i = 0; i < rows; i++)
            if (p[i].front && p[i].x > last_x * 1.4 && (last_x < 0 || p[i].x > last_x) && (b < 0 || p[i].x < p[b].x))
                b = i;
        if (b < 0)
            break;
        last_x = p[b].x;
        p[b].front = 2; /* labelled */
    }
    for (int i = 0; i < rows; i++)
        fprintf(f, "%.9g\t%.9g\t%.9g\t%.9g\t%d\t%d\t%s\n", p[i].x, p[i].mid, p[i].lo, p[i].hi, p[i].front > 0, p[i].te,
                p[i].front == 2 ? p[i].lab : "-");
    free(p);
    fclose(f);
    if (!rows)
        return;
    double span = yhi - ylo, pad = span > 0 ? 0.08 * span : fmax(0.01, 0.05 * yhi);
    char ttl[512];
    snprintf(ttl, sizeof ttl, "%s — delayed scaling replayed: overflow events against values flushed, per setting "
                              "(history/algorithm/margin)", a->label);
    snprintf(vars, sizeof vars, "data = %s\nttl = %s\nxmax = %.9g\nylo = %.9g\nyhi = %.9g\n",
             plot_quote(data, q1, sizeof q1), plot_quote(ttl, q2, sizeof q2), xmax * 6, fmax(0, ylo - pad), yhi + pad);
    char cap[640], tiny[200] = "";
    if (span < 0.05)
        snprintf(tiny, sizeof tiny, " The flush axis spans only %.3g percentage points: the settings hardly differ in "
                                    "what they flush; overflow events tell them apart.",
                 span);
    snprintf(cap, sizeof cap, "%s: every replayed delayed-scaling setting: overflow events after warm-up (exact, every "
                              "step; log scale, 0 drawn at 0.5) against the share of values flushed to zero (bars: "
                              "rigorous lower and upper bounds at the steps with statistics); red: settings no other "
                              "one certainly beats (some labelled history/algorithm/margin); black square: TE's default "
                              "1024/max/0.%s",
             a->label, tiny);
    fig_draw(F, "pareto", name, vars, "replay", cap);
}
