/*
 * compare.c — every recipe recorded on the same tensors (active and
 * shadows) side by side: per tensor, per role and per layer; bootstrap
 * confidence intervals for the differences to the active recipe; a verdict
 * per tensor with its rule printed next to it.
 *
 * Data files: compare_tensors.tsv, compare_groups.tsv, compare_bootstrap.tsv,
 * compare_verdicts.tsv.
 */
#include <gsl/gsl_rng.h>
#include <gsl/gsl_statistics_double.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "analysis.h"
#include "compare.h"

static int is_fine(const fp8_recipe *p)
{
    return p->kind == FP8_RECIPE_BLOCK || p->kind == FP8_RECIPE_MX || p->kind == FP8_RECIPE_ROWWISE ||
           p->kind == FP8_RECIPE_COLWISE || p->kind == FP8_RECIPE_NVFP4;
}

int an_series_stats(const an_run *a, int t, int r, an_sstats *o)
{
    size_t n;
    const size_t *s = an_series(a, t, r, &n);
    memset(o, 0, sizeof *o);
    o->sqnr_p05 = o->sqnr_p50 = o->sqnr_p95 = o->relerr_p50 = o->relerr_p95 = NAN;
    o->scale_log2_sd = o->block_spread = NAN;
    if (!n)
        return 0;
    double *v = malloc(n * sizeof *v), *w = malloc(n * sizeof *w);
    if (!v || !w) {
        free(v), free(w);
        return -1;
    }
    double numel = 0, ov = 0, un = 0, sb = 0, d1 = 0, d2 = 0;
    size_t nv = 0, nw = 0, nd = 0;
    for (size_t i = 0; i < n; i++) {
        const fp8_summary *x = an_rec(a, s[i]);
        o->records++;
        o->events += x->overflows > 0;
        numel += (double)x->numel, ov += (double)x->overflows, un += (double)x->underflows;
        sb += (double)x->subnormals;
        if (isfinite(x->sqnr_db))
            v[nv++] = x->sqnr_db;
        if (isfinite(x->rel_err))
            w[nw++] = x->rel_err;
        if (x->nscales > 1 && x->scale_inv_min > 0 && x->scale_inv_max > 0)
            o->block_spread = isnan(o->block_spread) ? 0 : o->block_spread,
            o->block_spread += log2(x->scale_inv_max / x->scale_inv_min);
        if (i > 0) {
            const fp8_summary *p = an_rec(a, s[i - 1]);
            if (p->scale_inv > 0 && x->scale_inv > 0 && x->nscales == 1) {
                double d = log2(x->scale_inv / p->scale_inv);
                d1 += d, d2 += d * d, nd++;
                o->scale_changes += x->scale_inv != p->scale_inv;
            }
        }
        if (x->step > o->last_step || i == 0)
            o->last_step = x->step;
    }
    if (!isnan(o->block_spread))
        o->block_spread /= (double)n;
    o->overflow_rate = numel > 0 ? ov / numel : 0;
    o->underflow_rate = numel > 0 ? un / numel : 0;
    o->subnormal_rate = numel > 0 ? sb / numel : 0;
    o->exact = n - nv;
    if (nv) { /* sort once, then read the quantiles */
        o->sqnr_p05 = an_quantile(v, nv, 0.05);
        o->sqnr_p50 = gsl_stats_quantile_from_sorted_data(v, 1, nv, 0.5);
        o->sqnr_p95 = gsl_stats_quantile_from_sorted_data(v, 1, nv, 0.95);
    }
    if (nw) {
        o->relerr_p50 = an_quantile(w, nw, 0.5);
        o->relerr_p95 = gsl_stats_quantile_from_sorted_data(w, 1, nw, 0.95);
    }
    if (nd > 1) {
        double m = d1 / (double)nd;
        o->scale_log2_sd = sqrt(fmax(0, d2 / (double)nd - m * m));
    }
    free(v), free(w);
    return 0;
}

struct an_sstats_cache {
    an_sstats *st;
    unsigned char *ok;
};

const an_sstats *an_series_cached(an_run *a, int t, int r)
{
    size_t R = (size_t)a->run->nrecipes, T = (size_t)a->run->ntensors;
    if (t < 0 || r < 0 || (size_t)t >= T || (size_t)r >= R)
        return NULL;
    if (!a->cache) {
        a->cache = calloc(1, sizeof *a->cache);
        if (!a->cache)
            return NULL;
        a->cache->st = calloc(T * R + 1, sizeof *a->cache->st);
        a->cache->ok = calloc(T * R + 1, 1);
        if (!a->cache->st || !a->cache->ok) {
            an_series_cache_free(a);
            return NULL;
        }
    }
    size_t k = (size_t)t * R + (size_t)r;
    if (!a->cache->ok[k]) {
        if (an_series_stats(a, t, r, &a->cache->st[k]) != 0)
            return NULL;
        a->cache->ok[k] = 1;
    }
    return &a->cache->st[k];
}

void an_series_cache_free(an_run *a)
{
    if (a->cache) {
        free(a->cache->st);
        free(a->cache->ok);
        free(a->cache);
        a->cache = NULL;
    }
}

const char *an_verdict_rule =
    "needs block scaling: per-tensor current scaling flushes more than U of the values to zero, or the best "
    "fine-grained recipe (block, MX, row-wise) beats it by more than G dB of median SQNR; else needs JIT: the "
    "delayed recipe overflowed at any recorded step, or its median SQNR is more than M dB below current "
    "scaling's; else delayed is safe";

an_verdict an_tensor_verdict(const an_ctx *c, const an_run *a, int t, const an_sstats *st, int *D, int *C, int *B)
{
    int R = a->run->nrecipes;
    *D = *C = *B = -1;
    *D = an_delayed_recipe(a, t);
    for (int r = 0; r < R; r++)
        if (a->recipe_ok[r] && st[r].records && is_fine(&a->recipes[r]) && (*B < 0 || st[r].sqnr_p50 > st[*B].sqnr_p50))
            *B = r;
    for (int r = 0; r < R; r++) { /* current scaling in the delayed recipe's format, else any */
        if (!a->recipe_ok[r] || st[r].records == 0 || a->recipes[r].kind != FP8_RECIPE_CURRENT)
            continue;
        int same = *D >= 0 && an_format(a, t, r) && an_format(a, t, *D) &&
                   strcmp(an_format(a, t, r)->name, an_format(a, t, *D)->name) == 0;
        if (*C < 0 || same)
            *C = r;
    }
    int base = *C >= 0 ? *C : *D;
    if (base < 0)
        return AN_VERDICT_NA;
    if (st[base].underflow_rate > c->underflow_max ||
        (*B >= 0 && st[*B].sqnr_p50 - st[base].sqnr_p50 > c->block_gain_db))
        return AN_VERDICT_BLOCK;
    if (*D < 0)
        return AN_VERDICT_NA;
    if (st[*D].events > 0 || (*C >= 0 && st[*D].sqnr_p50 < st[*C].sqnr_p50 - c->sqnr_margin_db))
        return AN_VERDICT_JIT;
    return AN_VERDICT_SAFE;
}

const char *an_verdict_name(an_verdict v)
{
    static const char *n[] = {"n/a", "delayed is safe", "needs JIT", "needs block scaling"};
    return n[v];
}

/* ---- bootstrap over steps ------------------------------------------------ */

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* Per step, the mean over the group's tensors of (metric under r) - (metric
 * under the tensor's active recipe), for both metrics (0: SQNR dB, 1:
 * overflow percentage points); then the steps are resampled with
 * replacement.  sidx maps a record to its step's index in the run. */
static void bootstrap(const an_ctx *c, const an_run *a, int group_role, int r, const uint32_t *sidx, size_t nsteps,
                      double mean[2], double lo[2], double hi[2], size_t used[2])
{
    double *sum = calloc(2 * nsteps + 2, sizeof *sum), *cnt = calloc(2 * nsteps + 2, sizeof *cnt);
    double *per = malloc((2 * nsteps + 2) * sizeof *per), *bs = malloc(2 * (size_t)c->boot * sizeof *bs);
    size_t *pick = malloc((nsteps + 1) * sizeof *pick);
    for (int k = 0; k < 2; k++)
        mean[k] = lo[k] = hi[k] = NAN, used[k] = 0;
    if (!sum || !cnt || !per || !bs || !pick)
        goto out;
    for (int t = 0; t < a->run->ntensors; t++) {
        int act = a->active[t];
        if (act < 0 || act == r || (group_role >= 0 && a->run->tensor_role[t] != group_role))
            continue;
        size_t na, nb;
        const size_t *sa = an_series(a, t, act, &na), *sb = an_series(a, t, r, &nb);
        for (size_t i = 0, j = 0; i < na && j < nb;) {
            const fp8_summary *x = an_rec(a, sa[i]), *y = an_rec(a, sb[j]);
            if (x->step != y->step) {
                x->step < y->step ? i++ : j++;
                continue;
            }
            size_t k = sidx[sa[i]];
            if (isfinite(x->sqnr_db) && isfinite(y->sqnr_db))
                sum[2 * k] += y->sqnr_db - x->sqnr_db, cnt[2 * k] += 1;
            if (x->numel > 0)
                sum[2 * k + 1] += 100.0 * ((double)y->overflows - (double)x->overflows) / (double)x->numel,
                    cnt[2 * k + 1] += 1;
            i++, j++;
        }
    }
    /* the steps where both metrics exist are resampled together */
    for (int m = 0; m < 2; m++) {
        size_t n = 0;
        for (size_t i = 0; i < nsteps; i++)
            if (cnt[2 * i + (size_t)m] > 0)
                per[(size_t)m * nsteps + n++] = sum[2 * i + (size_t)m] / cnt[2 * i + (size_t)m];
        used[m] = n;
        if (n) {
            double tot = 0;
            for (size_t i = 0; i < n; i++)
                tot += per[(size_t)m * nsteps + i];
            mean[m] = tot / (double)n;
        }
    }
    gsl_rng *rng = gsl_rng_alloc(gsl_rng_mt19937);
    if (!rng)
        goto out;
    gsl_rng_set(rng, c->seed);
    size_t nmax = used[0] > used[1] ? used[0] : used[1];
    for (int b = 0; b < c->boot && nmax; b++) {
        for (size_t i = 0; i < nmax; i++)
            pick[i] = gsl_rng_uniform_int(rng, nmax);
        for (int m = 0; m < 2; m++) {
            double s = 0;
            size_t n = used[m];
            if (!n)
                continue;
            for (size_t i = 0; i < n; i++) /* an index drawn over the longer list, folded onto this one */
                s += per[(size_t)m * nsteps + (n == nmax ? pick[i] : pick[i] % n)];
            bs[(size_t)m * (size_t)c->boot + (size_t)b] = s / (double)n;
        }
    }
    gsl_rng_free(rng);
    for (int m = 0; m < 2; m++)
        if (used[m]) {
            lo[m] = an_quantile(bs + (size_t)m * (size_t)c->boot, (size_t)c->boot, 0.025);
            hi[m] = gsl_stats_quantile_from_sorted_data(bs + (size_t)m * (size_t)c->boot, 1, (size_t)c->boot, 0.975);
        }
out:
    free(sum), free(cnt), free(per), free(bs), free(pick);
}

/* ---- the analysis ------------------------------------------------------- */

/* Tensors of a role or layer under one recipe: events and records summed,
 * rates weighted by records, and the mean of the tensors' median SQNRs. */
typedef struct {
    an_sstats s;
    int tensors, sqnr_n;
    double sqnr_sum;
} group;

static void group_add(group *G, const an_sstats *s)
{
    G->tensors++;
    G->s.records += s->records, G->s.events += s->events;
    G->s.overflow_rate += s->overflow_rate * (double)s->records;
    G->s.underflow_rate += s->underflow_rate * (double)s->records;
    G->s.subnormal_rate += s->subnormal_rate * (double)s->records;
    if (!isnan(s->sqnr_p50))
        G->sqnr_sum += s->sqnr_p50, G->sqnr_n++;
}

static void group_finish(group *G)
{
    double n = (double)G->s.records;
    G->s.overflow_rate /= n, G->s.underflow_rate /= n, G->s.subnormal_rate /= n;
}

static void group_row(FILE *f, const char *run, const char *kind, const char *name, const char *recipe, const group *G)
{
    fprintf(f, "%s\t%s\t%s\t%s\t%d\t%zu\t%zu\t%.9g\t%.9g\t%.9g\n", run, kind, name, recipe, G->tensors, G->s.records,
            G->s.events, G->s.overflow_rate, G->s.underflow_rate, G->s.subnormal_rate);
}

int an_compare(an_ctx *c)
{
    FILE *ft = an_data(c, "compare_tensors.tsv"), *fg = an_data(c, "compare_groups.tsv"),
         *fb = an_data(c, "compare_bootstrap.tsv"), *fv = an_data(c, "compare_verdicts.tsv");
    int rc = 0;
    if (!ft || !fg || !fb || !fv) {
        rc = 1;
        goto done;
    }
    fprintf(ft, "run\ttensor\trole\tlayer\trecipe\trecords\toverflow_events\toverflow_rate\tunderflow_rate\t"
                "subnormal_rate\tsqnr_p05_db\tsqnr_p50_db\tsqnr_p95_db\trelerr_p50\trelerr_p95\tscale_log2_step_sd\t"
                "scale_changes\tblock_scale_spread_bits\n");
    fprintf(fg, "run\tgroup_kind\tgroup\trecipe\ttensors\trecords\toverflow_events\toverflow_rate\tunderflow_rate\t"
                "subnormal_rate\n");
    fprintf(fb, "run\tgroup\trecipe\tversus\tmetric\tsteps\tmean_diff\tci95_lo\tci95_hi\n");
    fprintf(fv, "run\ttensor\trole\tlayer\tverdict\tdelayed\tcurrent\tbest_fine\tdelayed_events\t"
                "current_underflow_rate\tsqnr_delayed\tsqnr_current\tsqnr_best_fine\n");
    fprintf(c->md, "## Recipes compared\n\n");
    fprintf(c->md, "Rates are element counts over `numel` summed over the recorded steps; an overflow event is a "
                   "recorded step with at least one overflowing value. SQNR: median over recorded steps.\n\n");
    for (int ri = 0; ri < c->nruns; ri++) {
        const an_run *a = &c->runs[ri];
        int T = a->run->ntensors, R = a->run->nrecipes;
        if (a->run->nrecords == 0) {
            fprintf(c->md, "Run `%s`: no records.\n\n", a->label);
            continue;
        }
        an_sstats *st = calloc((size_t)T * (size_t)R + 1, sizeof *st);
        group *grp = calloc((size_t)(FP8_NROLE + 1) * (size_t)R + 1, sizeof *grp); /* [role or all][recipe] */
        int64_t *steps = malloc((a->run->nrecords + 1) * sizeof *steps);
        if (!st || !grp || !steps) {
            free(st), free(grp), free(steps);
            fprintf(stderr, "fp8prof: compare: out of memory\n");
            rc = 1;
            goto done;
        }
        char lab[96];
        int nverd[4] = {0};
        int at_risk = 0;
        for (int t = 0; t < T; t++)
            for (int r = 0; r < R; r++) {
                an_sstats *s = &st[(size_t)t * (size_t)R + (size_t)r];
                const an_sstats *cs = an_series_cached(&c->runs[ri], t, r);
                if (cs)
                    *s = *cs;
                else
                    an_series_stats(a, t, r, s);
                if (!s->records)
                    continue;
                fprintf(ft, "%s\t%s\t%s\t%d\t%s\t%zu\t%zu\t%.9g\t%.9g\t%.9g\t%.9g\t%.9g\t%.9g\t%.9g\t%.9g\t%.9g\t%zu\t%.9g\n",
                        a->label, a->run->tensor_name[t], fp8_role_name((fp8_role)a->run->tensor_role[t]),
                        a->run->tensor_layer[t], an_recipe_label(a, r, lab, sizeof lab), s->records, s->events,
                        s->overflow_rate, s->underflow_rate, s->subnormal_rate, s->sqnr_p05, s->sqnr_p50, s->sqnr_p95,
                        s->relerr_p50, s->relerr_p95, s->scale_log2_sd, s->scale_changes, s->block_spread);
                /* role groups (index FP8_NROLE: all tensors) */
                int role = a->run->tensor_role[t];
                if (role >= 0 && role < FP8_NROLE)
                    group_add(&grp[(size_t)role * (size_t)R + (size_t)r], s);
                group_add(&grp[(size_t)FP8_NROLE * (size_t)R + (size_t)r], s);
            }
        /* layer groups, written straight out */
        int maxl = -1;
        for (int t = 0; t < T; t++)
            maxl = a->run->tensor_layer[t] > maxl ? a->run->tensor_layer[t] : maxl;
        for (int l = -1; l <= maxl; l++)
            for (int r = 0; r < R; r++) {
                group L;
                memset(&L, 0, sizeof L);
                for (int t = 0; t < T; t++) {
                    const an_sstats *s = &st[(size_t)t * (size_t)R + (size_t)r];
                    if (a->run->tensor_layer[t] == l && s->records)
                        group_add(&L, s);
                }
                if (!L.tensors)
                    continue;
                group_finish(&L);
                char lname[16];
                snprintf(lname, sizeof lname, "%d", l);
                group_row(fg, a->label, "layer", lname, an_recipe_label(a, r, lab, sizeof lab), &L);
            }
        int act = -1;
        for (int t = 0; t < T && act < 0; t++)
            act = a->active[t];
        fprintf(c->md, "### Run `%s` (%d tensors, %d recipes, records every %lld steps)\n\n", a->label, T, R,
                (long long)a->record_every);
        fprintf(c->md, "| role | recipe | tensors | overflow events | overflow %% | underflow %% | subnormal %% | "
                       "SQNR dB (mean of medians) |\n|---|---|---|---|---|---|---|---|\n");
        for (int gi = 0; gi <= FP8_NROLE; gi++)
            for (int r = 0; r < R; r++) {
                group *G = &grp[(size_t)gi * (size_t)R + (size_t)r];
                if (!G->s.records)
                    continue;
                group_finish(G);
                const char *gname = gi == FP8_NROLE ? "all" : fp8_role_name((fp8_role)gi);
                group_row(fg, a->label, gi == FP8_NROLE ? "all" : "role", gname, an_recipe_label(a, r, lab, sizeof lab), G);
                fprintf(c->md, "| %s | %s%s | %d | %zu | %.4f | %.4f | %.4f | %.2f |\n", gname, lab,
                        r == act ? " (active)" : "", G->tensors, G->s.events, 100 * G->s.overflow_rate,
                        100 * G->s.underflow_rate, 100 * G->s.subnormal_rate,
                        G->sqnr_n ? G->sqnr_sum / G->sqnr_n : NAN);
            }
        fprintf(c->md, "\n");
        /* verdicts */
        fprintf(c->md, "**Verdict rule** (U = %.3g%%, G = %.3g dB, M = %.3g dB): %s.\n\n", 100 * c->underflow_max,
                c->block_gain_db, c->sqnr_margin_db, an_verdict_rule);
        char risk[1024] = "";
        size_t rl = 0;
        for (int t = 0; t < T; t++) {
            int D, C, B;
            const an_sstats *s = &st[(size_t)t * (size_t)R];
            an_verdict v = an_tensor_verdict(c, a, t, s, &D, &C, &B);
            nverd[v]++;
            char ld[96] = "-", lc[96] = "-", lb[96] = "-";
            if (D >= 0)
                an_recipe_label(a, D, ld, sizeof ld);
            if (C >= 0)
                an_recipe_label(a, C, lc, sizeof lc);
            if (B >= 0)
                an_recipe_label(a, B, lb, sizeof lb);
            fprintf(fv, "%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\t%zu\t%.9g\t%.9g\t%.9g\t%.9g\n", a->label, a->run->tensor_name[t],
                    fp8_role_name((fp8_role)a->run->tensor_role[t]), a->run->tensor_layer[t], an_verdict_name(v), ld,
                    lc, lb, D >= 0 ? s[D].events : 0, C >= 0 ? s[C].underflow_rate : NAN,
                    D >= 0 ? s[D].sqnr_p50 : NAN, C >= 0 ? s[C].sqnr_p50 : NAN, B >= 0 ? s[B].sqnr_p50 : NAN);
            if (v == AN_VERDICT_JIT && D >= 0 && s[D].events > 0 && at_risk < 5 && rl < sizeof risk - 200) {
                rl += (size_t)snprintf(risk + rl, sizeof risk - rl, "%s%s (%zu of %zu steps)", at_risk ? ", " : "",
                                       a->run->tensor_name[t], s[D].events, s[D].records);
                at_risk++;
            }
        }
        fprintf(c->md, "| verdict | tensors |\n|---|---|\n");
        for (int v = 1; v < 4; v++)
            fprintf(c->md, "| %s | %d |\n", an_verdict_name((an_verdict)v), nverd[v]);
        if (nverd[0])
            fprintf(c->md, "| n/a (no delayed or current recipe recorded) | %d |\n", nverd[0]);
        if (at_risk)
            fprintf(c->md, "\nDelayed scaling overflowed on %s%s.\n", risk, at_risk == 5 ? ", ..." : "");
        fprintf(c->md, "\nPer tensor: `compare_verdicts.tsv`; every statistic: `compare_tensors.tsv`.\n\n");
        if (nverd[1] + nverd[2] + nverd[3] > 0)
            an_finding(c, "verdict", "`%s` %d / %d / %d", a->label, nverd[1], nverd[2], nverd[3]);
        /* recipes that overflow at nearly every recorded step: a systematic clip, not an outlier */
        for (int r = 0; r < R; r++) {
            const an_sstats *G = &grp[(size_t)FP8_NROLE * (size_t)R + (size_t)r].s;
            if (G->records >= 10 && (double)G->events >= 0.9 * (double)G->records && G->overflow_rate > 1e-4) {
                an_recipe_label(a, r, lab, sizeof lab);
                int k = 0;
                while (k < c->nclip && strcmp(c->clip_name[k], lab) != 0)
                    k++;
                if (k == c->nclip && k < 16) {
                    snprintf(c->clip_name[k], sizeof c->clip_name[k], "%s", lab);
                    c->clip_runs[k] = 0, c->clip_lo[k] = INFINITY, c->clip_hi[k] = 0;
                    c->nclip++;
                }
                if (k < 16) {
                    c->clip_runs[k]++;
                    c->clip_lo[k] = fmin(c->clip_lo[k], G->overflow_rate);
                    c->clip_hi[k] = fmax(c->clip_hi[k], G->overflow_rate);
                }
            }
        }
        /* tensors on which a delayed recipe overflowed, counted across runs */
        for (int t = 0; t < T; t++) {
            int D, C, B;
            an_tensor_verdict(c, a, t, &st[(size_t)t * (size_t)R], &D, &C, &B);
            if (D < 0)
                continue;
            size_t ev = st[(size_t)t * (size_t)R + (size_t)D].events;
            int k = 0;
            while (k < c->nrisk && strcmp(c->risk_name[k], a->run->tensor_name[t]) != 0)
                k++;
            if (k == c->nrisk && k < AN_MAX_RISK) {
                snprintf(c->risk_name[k], sizeof c->risk_name[k], "%s", a->run->tensor_name[t]);
                c->risk_runs[k] = c->risk_events[k] = c->risk_seen[k] = 0;
                c->nrisk++;
            }
            if (k < AN_MAX_RISK) {
                c->risk_seen[k]++;
                c->risk_runs[k] += ev > 0;
                c->risk_events[k] += (int)ev;
            }
        }
        /* bootstrap: each recipe against the active one, per role and overall */
        size_t ns = 0;
        for (size_t i = 0; i < a->run->nrecords; i++)
            steps[ns++] = a->run->summaries[i].step;
        int sorted = 1; /* a run file holds its steps in order: sort only when not */
        for (size_t i = 1; i < ns && sorted; i++)
            sorted = steps[i] >= steps[i - 1];
        if (!sorted)
            qsort(steps, ns, sizeof *steps, cmp_i64);
        size_t u = 0;
        for (size_t i = 0; i < ns; i++)
            if (u == 0 || steps[i] != steps[u - 1])
                steps[u++] = steps[i];
        uint32_t *sidx = malloc((a->run->nrecords + 1) * sizeof *sidx);
        for (size_t i = 0; sidx && i < a->run->nrecords; i++) {
            const int64_t *k = bsearch(&a->run->summaries[i].step, steps, u, sizeof *steps, cmp_i64);
            sidx[i] = (uint32_t)(k - steps);
        }
        if (!sidx)
            act = -1;
        if (R < 2) {
            fprintf(c->md, "This run recorded one recipe and no shadows: nothing to compare it with (declare "
                           "probes with shadow recipes, e.g. `e4m3:current`, `e4m3:block=1x128`, `mxfp8`).\n\n");
        } else if (act < 0) {
            fprintf(c->md, "No active recipe recorded: no paired differences.\n\n");
        } else {
            fprintf(c->md, "Differences to the active recipe `%s`, paired by step (mean over the group's tensors "
                           "per step; 95%% CI from %d bootstrap resamples of the steps, GSL mt19937 seed %lu):\n\n",
                    an_recipe_label(a, act, lab, sizeof lab), c->boot, c->seed);
            fprintf(c->md, "| group | recipe | steps | ΔSQNR dB [95%% CI] | Δoverflow %% [95%% CI] |\n|---|---|---|---|---|\n");
            char gain[1024];
            size_t gl = (size_t)snprintf(gain, sizeof gain, "`%s` (vs `%s`):", a->label, an_recipe_label(a, act, lab, sizeof lab));
            for (int gi = FP8_NROLE; gi >= 0; gi--)
                for (int r = 0; r < R; r++) {
                    if (r == act || !grp[(size_t)gi * (size_t)R + (size_t)r].s.records)
                        continue;
                    double m[2], lo[2], hi[2];
                    size_t used[2];
                    bootstrap(c, a, gi == FP8_NROLE ? -1 : gi, r, sidx, u, m, lo, hi, used);
                    for (int k = 0; k < 2; k++) {
                        fprintf(fb, "%s\t%s\t%s\t%s\t%s\t%zu\t%.9g\t%.9g\t%.9g\n", a->label,
                                gi == FP8_NROLE ? "all" : fp8_role_name((fp8_role)gi), an_recipe_label(a, r, lab, sizeof lab),
                                "active", k ? "overflow_pct" : "sqnr_db", used[k], m[k], lo[k], hi[k]);
                    }
                    if (!used[0] && !used[1])
                        continue;
                    fprintf(c->md, "| %s | %s | %zu | %+.2f [%+.2f, %+.2f] | %+.4f [%+.4f, %+.4f] |\n",
                            gi == FP8_NROLE ? "all" : fp8_role_name((fp8_role)gi), lab, used[0], m[0], lo[0], hi[0],
                            m[1], lo[1], hi[1]);
                    if (gi == FP8_NROLE && used[0] && gl < sizeof gain - 120)
                        gl += (size_t)snprintf(gain + gl, sizeof gain - gl, " %s %+.1f dB [%+.1f, %+.1f], overflow %+.3g%%;",
                                               lab, m[0], lo[0], hi[0], m[1]);
                }
            fprintf(c->md, "\n");
            if (gl > 0 && gain[gl - 1] == ';') {
                gain[gl - 1] = 0;
                an_finding(c, "gain", "%s", gain);
            }
        }
        free(sidx);
        free(st), free(grp), free(steps);
    }
    for (int k = 0; k < c->nclip; k++)
        an_finding(c, "risk", "`%s` overflows at almost every recorded step of every tensor in %d run%s (%.3g..%.3g%% of "
                              "values): a systematic clip, not outliers",
                   c->clip_name[k], c->clip_runs[k], c->clip_runs[k] == 1 ? "" : "s", 100 * c->clip_lo[k],
                   100 * c->clip_hi[k]);
    /* across runs: the tensors delayed scaling overflowed on most often */
    if (!rc && c->nrisk) {
        char txt[1024];
        size_t tl = 0;
        int shown = 0, runs_with = 0;
        char *used = calloc((size_t)c->nrisk, 1);
        for (int k = 0; k < c->nrisk; k++)
            runs_with += c->risk_runs[k] > 0;
        for (; used && shown < 5; shown++) {
            int b = -1;
            for (int k = 0; k < c->nrisk; k++)
                if (!used[k] && c->risk_runs[k] > 0 &&
                    (b < 0 || c->risk_runs[k] > c->risk_runs[b] ||
                     (c->risk_runs[k] == c->risk_runs[b] && c->risk_events[k] > c->risk_events[b])))
                    b = k;
            if (b < 0)
                break;
            used[b] = 1;
            tl += (size_t)snprintf(txt + tl, sizeof txt - tl, "%s`%s` (%d of %d runs, %d events)", shown ? ", " : "",
                                   c->risk_name[b], c->risk_runs[b], c->risk_seen[b], c->risk_events[b]);
        }
        free(used);
        if (shown)
            an_finding(c, "risk", "delayed scaling overflowed on %d tensor%s; most often %s", runs_with,
                       runs_with == 1 ? "" : "s", txt);
        else
            an_finding(c, "risk", "no delayed recipe overflowed on any tensor (%d tensors with a delayed recipe)",
                       c->nrisk);
    }
done:
    if (an_data_close(c, (FILE *[]){ft, fg, fb, fv}, 4))
        rc = 1;
    return rc;
}
