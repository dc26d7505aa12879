/*
 * fig_answers.c — figures for the summary's questions (b) and (c): each
 * factor's comparisons across the runs with their intervals (fig_effects),
 * and the claim test per tensor, tensor cost against block cost
 * (fig_claim) (figset.h).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "factors.h"
#include "figset.h"
#include "keys.h"
#include "plots.h"

static const char *plural(int role)
{
    static const char *p[] = {"activations", "weights", "gradients", "outputs", "other"};
    return role >= 0 && role < 5 ? p[role] : "?";
}

/* The comparisons of one factor (those with a label pair seen in at least
 * two runs, or every one with a single run), a row per (role, from, to), a
 * point per run. */
void fig_effects(figset *F, int factor)
{
    an_ctx *c = F->c;
    const struct an_frow *v = c->frows;
    size_t n = c->nfrows;
    if (!v || !n)
        return;
    /* rows: distinct (role, la, lb) of this factor, in order of first appearance */
    int *row = calloc(n, sizeof *row), nrow = 0;
    size_t *first = calloc(n, sizeof *first);
    if (!row || !first) {
        free(row), free(first);
        return;
    }
    for (size_t i = 0; i < n; i++) {
        row[i] = -1;
        if (v[i].factor != factor || !isfinite(v[i].mean))
            continue;
        int k = 0;
        while (k < nrow && !(v[first[k]].role == v[i].role && !strcmp(v[first[k]].la, v[i].la) &&
                             !strcmp(v[first[k]].lb, v[i].lb)))
            k++;
        if (k == nrow)
            first[nrow++] = i;
        row[i] = k;
    }
    if (!nrow || nrow > 40) { /* nothing, or too many rows to read: the table has them */
        free(row), free(first);
        return;
    }
    char name[64], data[80];
    snprintf(name, sizeof name, "fig_effects_%s", an_factor_name((an_factor)factor));
    snprintf(data, sizeof data, "%s.tsv", name);
    FILE *f = fig_data(F, data);
    if (!f) {
        free(row), free(first);
        return;
    }
    fprintf(f, "row\tlabel\trun\tmean\tlo\thi\tmedian\n");
    double lo = 0, hi = 0;
    for (size_t i = 0; i < n; i++) {
        if (row[i] < 0)
            continue;
        const struct an_frow *r = &v[i];
        fprintf(f, "%d\t%s %s → %s\t%d\t%.9g\t%.9g\t%.9g\t%.9g\n", row[i] + 1, plural(r->role), r->la, r->lb, r->run,
                r->mean, isfinite(r->lo) ? r->lo : r->mean, isfinite(r->hi) ? r->hi : r->mean, r->median);
        lo = fmin(lo, fmin(r->lo, r->median)), hi = fmax(hi, fmax(r->hi, r->median));
    }
    fclose(f);
    double pad = 0.05 * (hi - lo) + 0.05;
    /* the row labels once each (a ytics list), and a margin that holds them */
    size_t cap = 64 + (size_t)nrow * 240, yl = 0, longest = 10;
    char *yt = malloc(cap), *yq = malloc(2 * cap + 8);
    if (!yt || !yq) {
        free(yt), free(yq), free(row), free(first);
        return;
    }
    yl += (size_t)snprintf(yt + yl, cap - yl, "(");
    for (int k = 0; k < nrow; k++) {
        const struct an_frow *r = &v[first[k]];
        char lab[240];
        snprintf(lab, sizeof lab, "%s: %s → %s", plural(r->role), r->la, r->lb);
        for (char *q = lab; *q; q++)
            if (*q == '"' || *q == '\\')
                *q = '\'';
        longest = strlen(lab) > longest ? strlen(lab) : longest;
        yl += (size_t)snprintf(yt + yl, cap - yl, "%s\"%s\" %d", k ? ", " : "", lab, k + 1);
    }
    snprintf(yt + yl, cap - yl, ")");
    char vars[12000], q1[200], q2[400];
    char ttl[300];
    snprintf(ttl, sizeof ttl, "%s: every comparison, every run (ΔSQNR, dB)", an_factor_name((an_factor)factor));
    snprintf(vars, sizeof vars, "data = %s\nrows = %d\nttl = %s\nxlo = %.9g\nxhi = %.9g\nh = %d\nlm = %d\nyt = %s\n",
             plot_quote(data, q1, sizeof q1), nrow, plot_quote(ttl, q2, sizeof q2), lo - pad, hi + pad,
             160 + 28 * nrow, (int)(longest * 0.95) + 2, plot_quote(yt, yq, 2 * cap + 8));
    free(yt), free(yq);
    char capt[512];
    snprintf(capt, sizeof capt, "%s comparisons that change one factor: per row (role, from → to) one point per run "
                                "with its 95%% interval (mean over the steps after warm-up) and the median step (open "
                                "circle); right of 0 the second recipe is better.",
             factor == AN_F_TIMING ? "Timing (delayed → current)" : factor == AN_F_GRANULARITY
                                                                     ? "Granularity (coarser → finer)"
                                                                     : "Format (E5M2 → E4M3)");
    fig_draw(F, "effects", name, vars, "compare", capt);
    free(row), free(first);
}

/* The claim test per tensor: claim_tensors.tsv as written by claim. */
void fig_claim(figset *F)
{
    an_ctx *c = F->c;
    if (!fig_has_rows(c->outdir, "claim_tensors.tsv"))
        return;
    char path[1200];
    snprintf(path, sizeof path, "%s/claim_tensors.tsv", c->outdir);
    FILE *in = fopen(path, "r");
    double lo = 0, hi = 0;
    char line[4096];
    int rows = 0;
    while (in && fgets(line, sizeof line, in)) {
        if (!rows++)
            continue; /* header */
        char *col[12];
        int k = 0;
        for (char *q = line, *t; k < 12 && (t = strsep(&q, "\t")) != NULL;)
            col[k++] = t;
        if (k < 10)
            continue;
        double x = atof(col[8]), y = atof(col[9]);
        if (isfinite(x) && isfinite(y))
            lo = fmin(lo, fmin(x, y)), hi = fmax(hi, fmax(x, y));
    }
    if (in)
        fclose(in);
    double pad = 0.05 * (hi - lo) + 0.1;
    char vars[800], q1[200], q2[300];
    snprintf(vars, sizeof vars, "data = %s\nttl = %s\nlo = %.9g\nhi = %.9g\n",
             plot_quote("claim_tensors.tsv", q1, sizeof q1),
             plot_quote("What delayed scaling costs, per tensor: one scale per tensor vs per block", q2, sizeof q2),
             lo - pad, hi + pad);
    fig_draw(F, "claim", "fig_claim", vars, "claim",
             "The claim test per tensor and run: x, what current scaling gains over delayed with one scale per tensor; "
             "y, the same with one scale per block (per-block delayed scaling keeps a history per block position). "
             "Above the dashed diagonal a stale scale costs more per block than per tensor — the claim; on it, alike.");
}
