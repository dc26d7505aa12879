/*
 * outliers.c — where the outliers are and whether they grow: per tensor
 * kurtosis and max/RMS over the recorded steps; from snapshots, the
 * channels (columns) whose amax stands far above the median channel's, how
 * long they stay on top, and their amax over time.  With --vs RUN2 (e.g. the
 * same run with Smooth SwiGLU) the same tensors side by side, with the
 * overflow events of the recipes both runs recorded.
 *
 * Data files: outliers_tensors.tsv, outliers_channels.tsv (top channels'
 * amax per snapshot), outliers_vs.tsv.
 */
#include <gsl/gsl_statistics_double.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "analysis.h"
#include "keys.h"
#include "series.h"
#include "fp8_error.h"
#include "gemm_error.h"
#include "outliers.h"

#define TOPK 8

int an_tensor_outliers(const an_run *a, int t, an_outl *o)
{
    memset(o, 0, sizeof *o);
    o->kurt_p50 = o->kurt_last = o->kurt_first = o->maxrms_p50 = o->maxrms_max = o->maxrms_last = NAN;
    o->chan_ratio = NAN;
    int r = an_input_recipe(a, t);
    size_t n;
    const size_t *ix = an_series(a, t, r, &n);
    if (!n)
        return 0;
    double *k = malloc(n * sizeof *k), *m = malloc(n * sizeof *m);
    if (!k || !m) {
        free(k), free(m);
        return -1;
    }
    size_t nk = 0, nm = 0;
    for (size_t i = 0; i < n; i++) {
        const fp8_summary *x = an_rec(a, ix[i]);
        uint64_t fin = x->finite;
        if (fin > 0 && x->l2 > 0) {
            double rms = x->l2 / sqrt((double)fin);
            m[nm++] = x->amax / rms;
            o->maxrms_last = x->amax / rms;
        }
        if (x->kurtosis > 0 && isfinite(x->kurtosis)) {
            if (nk == 0)
                o->kurt_first = x->kurtosis;
            k[nk++] = x->kurtosis;
            o->kurt_last = x->kurtosis;
        }
    }
    o->steps = n;
    if (nk) {
        o->kurt_p50 = an_quantile(k, nk, 0.5);
    }
    if (nm) {
        o->maxrms_p50 = an_quantile(m, nm, 0.5);
        o->maxrms_max = m[nm - 1];
    }
    free(k), free(m);
    return 0;
}

/* A tensor's channels over its snapshots: the median column amax and the
 * top channels' amax at each snapshot (outliers_channels.tsv). */
typedef struct {
    size_t used;            /* snapshots read */
    int64_t *step;          /* [used] */
    double *med;            /* [used] */
    double *top;            /* [nchan][used]: top channel q's amax at snapshot s */
} chan_series;

static void chan_series_free(chan_series *cs)
{
    free(cs->step), free(cs->med), free(cs->top);
    memset(cs, 0, sizeof *cs);
}

/* the TOPK channels with the largest amax at the last snapshot, largest first */
static size_t top_channels(const double *last, size_t cols, size_t top[TOPK])
{
    size_t nt = 0;
    for (size_t j = 0; j < cols; j++) {
        size_t p = nt < TOPK ? nt++ : TOPK;
        if (p == TOPK && !(last[j] > last[top[TOPK - 1]]))
            continue;
        if (p == TOPK)
            p = TOPK - 1;
        while (p > 0 && last[j] > last[top[p - 1]])
            top[p] = top[p - 1], p--;
        top[p] = j;
    }
    return nt;
}

/* Per-column amax of every snapshot of tensor t; fills o->chan_* and, when
 * cs is given, the top channels' series.  0, or -1 out of memory. */
static int channels(const an_run *a, int t, an_outl *o, chan_series *cs)
{
    size_t idx[AN_MAX_SNAPSHOTS], ns = an_snapshots(a, t, idx);
    if (cs)
        memset(cs, 0, sizeof *cs);
    if (!ns)
        return 0;
    size_t rows = a->run->snapshots[idx[0]].rows, cols = a->run->snapshots[idx[0]].cols;
    float *x = malloc(rows * cols * sizeof *x);
    double *ca = calloc(ns * cols + 1, sizeof *ca), *tmp = malloc((cols + 1) * sizeof *tmp);
    double *med = calloc(ns + 1, sizeof *med);
    int64_t *step = calloc(ns + 1, sizeof *step);
    int ok = x && ca && tmp && med && step;
    size_t used = 0;
    for (size_t s = 0; s < ns && ok; s++) {
        const fp8_snapshot *sn = &a->run->snapshots[idx[s]];
        if (sn->rows != rows || sn->cols != cols || fp8_run_snapshot_read(a->run, idx[s], x) != FP8_OK)
            continue;
        double *c = ca + used * cols;
        for (size_t i = 0; i < rows; i++)
            for (size_t j = 0; j < cols; j++) {
                double v = fabs((double)x[i * cols + j]);
                if (isfinite(v) && v > c[j])
                    c[j] = v;
            }
        memcpy(tmp, c, cols * sizeof *tmp);
        med[used] = an_quantile(tmp, cols, 0.5);
        step[used++] = sn->step;
    }
    if (ok && used) {
        /* top channels at the last snapshot, by amax / median channel amax */
        size_t top[TOPK] = {0}, nt = top_channels(ca + (used - 1) * cols, cols, top);
        o->nchan = nt;
        o->chan_ratio = med[used - 1] > 0 ? ca[(used - 1) * cols + top[0]] / med[used - 1] : NAN;
        o->snapshots = used;
        /* persistence: snapshots in which each top channel is above 4x the median */
        for (size_t q = 0; q < nt; q++) {
            size_t on = 0;
            int64_t first = -1;
            for (size_t s = 0; s < used; s++)
                if (med[s] > 0 && ca[s * cols + top[q]] > 4 * med[s]) {
                    on++;
                    if (first < 0)
                        first = step[s];
                }
            o->chan[q] = (int)top[q];
            o->chan_persist[q] = (double)on / (double)used;
            o->chan_first[q] = first;
        }
        if (cs && (cs->top = malloc((nt * used + 1) * sizeof *cs->top)) != NULL) {
            for (size_t q = 0; q < nt; q++)
                for (size_t s = 0; s < used; s++)
                    cs->top[q * used + s] = ca[s * cols + top[q]];
            cs->used = used, cs->step = step, cs->med = med;
            step = NULL, med = NULL;
        } else if (cs)
            ok = 0;
    }
    free(x), free(ca), free(tmp), free(med), free(step);
    return ok ? 0 : -1;
}

/* outliers_channels.tsv: each top channel's amax and its ratio to the
 * median at every snapshot, then the median itself */
static void channels_tsv(FILE *f, const an_run *a, int t, const an_outl *o, const chan_series *cs)
{
    for (size_t q = 0; q < o->nchan && cs->used; q++)
        for (size_t s = 0; s < cs->used; s++) {
            double v = cs->top[q * cs->used + s];
            fprintf(f, "%s\t%s\t%lld\t%zu\t%d\t%.9g\t%.9g\n", a->label, a->run->tensor_name[t], (long long)cs->step[s], q,
                    o->chan[q], v, cs->med[s] > 0 ? v / cs->med[s] : NAN);
        }
    for (size_t s = 0; s < cs->used; s++)
        fprintf(f, "%s\t%s\t%lld\tmedian\t-1\t%.9g\t1\n", a->label, a->run->tensor_name[t], (long long)cs->step[s],
                cs->med[s]);
}

/* The down projections' FP8 GEMM output error (trainer scalars) of runs a
 * and b side by side: what Smooth SwiGLU's per-channel scale costs or saves
 * where it acts. */
typedef struct {
    char lin[FP8_NAME_MAX];
    double va[3], vb[3]; /* fprop, dgrad, wgrad medians */
    size_t na[3], nb[3];
} gemm_pair;

static int versus_gemm(const an_run *a, const an_run *b, gemm_pair *out, int cap)
{
    static const char *pfx = "gemm_sqnr_db/", *tail = "mlp.w2/fprop", *g3[3] = {"fprop", "dgrad", "wgrad"};
    size_t lp = strlen(pfx), lt = strlen(tail);
    int rows = 0;
    for (int i = 0; i < a->run->nscalar_names && rows < cap; i++) {
        const char *nm = a->run->scalar_name[i];
        size_t len = strlen(nm);
        if (strncmp(nm, pfx, lp) != 0 || len < lp + lt || strcmp(nm + len - lt, tail) != 0)
            continue;
        gemm_pair *w = &out[rows];
        snprintf(w->lin, sizeof w->lin, "%.*s", (int)(len - lp - strlen("/fprop")), nm + lp);
        for (int g = 0; g < 3; g++)
            w->va[g] = an_gemm_median(a, w->lin, g3[g], &w->na[g]), w->vb[g] = an_gemm_median(b, w->lin, g3[g], &w->nb[g]);
        if (w->na[0] && w->nb[0])
            rows++;
    }
    return rows;
}

/* One recipe both runs recorded on one shared tensor. */
typedef struct {
    int t, r;
    an_outl oa, ob;
    an_sstats sa, sb;
} vs_row;

/* The same tensors of runs a and b side by side. */
typedef struct {
    vs_row *rows;
    size_t nrows;
    chan_series *bch; /* [a's tensors]: b's channel series, the tensor b's name matched */
    int *bt;          /* [a's tensors]: b's tensor id (-1: not compared) */
    an_outl *bo;
    double ev_a, ev_b, kmax_a, kmax_b, drop, rise; /* the active delayed recipe's events */
    const char *kname, *dname, *rname;
    size_t drop_a, drop_b, rise_a, rise_b;
    gemm_pair gemm[64];
    int ngemm;
} versus_result;

static void versus_free(const an_run *a, versus_result *V)
{
    for (int t = 0; V->bch && t < a->run->ntensors; t++)
        chan_series_free(&V->bch[t]);
    free(V->rows), free(V->bch), free(V->bt), free(V->bo);
}

/* shared tensor t (u in b) and its recipes both runs recorded */
static void versus_tensor(const an_run *a, const an_run *b, int t, int u, const an_names *bs, versus_result *V)
{
    an_outl oa, ob;
    if (an_tensor_outliers(a, t, &oa) || !oa.steps || an_tensor_outliers(b, u, &ob))
        return;
    channels(a, t, &oa, NULL);
    if (channels(b, u, &ob, &V->bch[t]))
        return;
    V->bt[t] = u, V->bo[t] = ob;
    if (oa.maxrms_max > V->kmax_a)
        V->kmax_a = oa.maxrms_max, V->kmax_b = ob.maxrms_max, V->kname = a->run->tensor_name[t];
    size_t nr;
    const int *rs = an_tensor_recipes(a, t, &nr);
    for (size_t ri = 0; ri < nr; ri++) {
        int r = rs[ri], s = an_names_find(bs, a->run->recipe_spec[r]);
        vs_row *w = &V->rows[V->nrows];
        if (s < 0 || an_series_stats(a, t, r, &w->sa) || an_series_stats(b, u, s, &w->sb) || !w->sa.records ||
            !w->sb.records)
            continue;
        w->t = t, w->r = r, w->oa = oa, w->ob = ob;
        V->nrows++;
        if (a->recipe_ok[r] && a->recipes[r].kind == FP8_RECIPE_DELAYED && r == a->active[t]) {
            double dlt = (double)w->sb.events - (double)w->sa.events;
            V->ev_a += (double)w->sa.events, V->ev_b += (double)w->sb.events;
            if (dlt < V->drop)
                V->drop = dlt, V->dname = a->run->tensor_name[t], V->drop_a = w->sa.events, V->drop_b = w->sb.events;
            if (dlt > V->rise)
                V->rise = dlt, V->rname = a->run->tensor_name[t], V->rise_a = w->sa.events, V->rise_b = w->sb.events;
        }
    }
}

/* a against b, tensors matched by name and recipes by spec: 0, or -1 out of memory */
static int versus_compute(const an_run *a, const an_run *b, versus_result *V)
{
    memset(V, 0, sizeof *V);
    size_t cap = 0;
    for (int t = 0; t < a->run->ntensors; t++) {
        size_t nr;
        an_tensor_recipes(a, t, &nr);
        cap += nr;
    }
    V->rows = calloc(cap + 1, sizeof *V->rows);
    V->bch = calloc((size_t)a->run->ntensors + 1, sizeof *V->bch);
    V->bt = malloc(((size_t)a->run->ntensors + 1) * sizeof *V->bt);
    V->bo = calloc((size_t)a->run->ntensors + 1, sizeof *V->bo);
    an_names bt, bs;
    bs.ord = NULL, bt.ord = NULL;
    if (!V->rows || !V->bch || !V->bt || !V->bo ||
        an_names_init(&bt, (const char *)b->run->tensor_name, FP8_NAME_MAX, b->run->ntensors) ||
        an_names_init(&bs, (const char *)b->run->recipe_spec, FP8_SPEC_MAX, b->run->nrecipes)) {
        an_names_free(&bt), an_names_free(&bs);
        return -1;
    }
    for (int t = 0; t < a->run->ntensors; t++) {
        V->bt[t] = -1;
        int u = an_names_find(&bt, a->run->tensor_name[t]);
        if (u >= 0)
            versus_tensor(a, b, t, u, &bs, V);
    }
    an_names_free(&bt), an_names_free(&bs);
    V->ngemm = versus_gemm(a, b, V->gemm, 64);
    return 0;
}

/* the comparison's table, data rows (b's channels when fc_b), the GEMM
 * table, the finding and the summary's line in key */
static void versus_render(an_ctx *c, const an_run *a, const an_run *b, const versus_result *V, FILE *fc_b, FILE *fv,
                          char *key, size_t keyn)
{
    fprintf(c->md, "### `%s` versus `%s`\n\n| tensor | kurtosis | max/RMS max | top channel × median | recipe | "
                   "overflow events | overflow %% |\n|---|---|---|---|---|---|---|\n",
            a->label, b->label);
    for (int t = 0; fc_b && t < a->run->ntensors; t++)
        if (V->bt[t] >= 0)
            channels_tsv(fc_b, b, V->bt[t], &V->bo[t], &V->bch[t]);
    char prev[FP8_NAME_MAX + 256] = "";
    for (size_t i = 0; i < V->nrows; i++) {
        const vs_row *w = &V->rows[i];
        const an_outl *oa = &w->oa, *ob = &w->ob;
        const an_sstats *sa = &w->sa, *sb = &w->sb;
        char lab[96], chtxt[64];
        an_recipe_label_on(a, w->t, w->r, lab, sizeof lab);
        snprintf(chtxt, sizeof chtxt, "%.1f / %.1f", oa->chan_ratio, ob->chan_ratio);
        fprintf(fv, "%s\t%s\t%s\t%.9g\t%.9g\t%.9g\t%.9g\t%.9g\t%.9g\t%s\t%zu\t%zu\t%.9g\t%.9g\n", a->label, b->label,
                a->run->tensor_name[w->t], oa->kurt_p50, ob->kurt_p50, oa->maxrms_max, ob->maxrms_max, oa->chan_ratio,
                ob->chan_ratio, lab, sa->events, sb->events, sa->overflow_rate, sb->overflow_rate);
        char row[FP8_NAME_MAX + 256];
        snprintf(row, sizeof row, "| %s | %.2f / %.2f | %.1f / %.1f | %s | %s | %zu / %zu | %.4f / %.4f |\n",
                 a->run->tensor_name[w->t], oa->kurt_p50, ob->kurt_p50, oa->maxrms_max, ob->maxrms_max,
                 oa->nchan ? chtxt : "-", lab, sa->events, sb->events, 100 * sa->overflow_rate,
                 100 * sb->overflow_rate);
        /* recipes with the same numerics on the tensor (the active one and
         * its twin shadow) give the same row: shown once */
        if ((sa->events + sb->events > 0 || oa->nchan) && strcmp(row, prev) != 0)
            fputs(row, c->md);
        snprintf(prev, sizeof prev, "%s", row);
    }
    fprintf(c->md, "\nRows: tensors with overflow events or snapshots; values `%s` / `%s`. All pairs: "
                   "`outliers_vs.tsv`.\n\n", a->label, b->label);
    double dfp = NAN, sum = 0;
    for (int i = 0; i < V->ngemm; i++) {
        const gemm_pair *w = &V->gemm[i];
        if (!i)
            fprintf(c->md, "FP8 GEMM output SQNR of the down projections, dB (median after warm-up), `%s` / `%s`:\n\n"
                           "| linear | fprop | dgrad | wgrad |\n|---|---|---|---|\n",
                    a->label, b->label);
        fprintf(c->md, "| `%s` |", w->lin);
        for (int g = 0; g < 3; g++)
            fprintf(c->md, w->na[g] && w->nb[g] ? " %.2f / %.2f |" : " - |", w->va[g], w->vb[g]);
        fprintf(c->md, "\n");
        sum += w->vb[0] - w->va[0];
    }
    if (V->ngemm) {
        dfp = sum / V->ngemm;
        fprintf(c->md, "\nMean fprop change over these %d linears: %+.2f dB.\n\n", V->ngemm, dfp);
    }
    char gtxt[96] = "";
    if (isfinite(dfp))
        snprintf(gtxt, sizeof gtxt, "; down-projection fprop GEMM SQNR %+.2f dB", dfp);
    if (!V->kname)
        return;
    char dtxt[256] = "", rtxt[256] = "";
    if (V->dname)
        snprintf(dtxt, sizeof dtxt, "; largest drop `%s` %zu → %zu", V->dname, V->drop_a, V->drop_b);
    if (V->rname)
        snprintf(rtxt, sizeof rtxt, "; largest rise `%s` %zu → %zu", V->rname, V->rise_a, V->rise_b);
    snprintf(key, keyn, "`%s` → `%s` (Smooth SwiGLU): overflow events of the active delayed recipe %.0f → %.0f%s%s%s",
             a->label, b->label, V->ev_a, V->ev_b, dtxt, rtxt, gtxt);
    an_finding(c, "smooth", "`%s` → `%s`: overflow events of the active delayed recipe %.0f → %.0f over the shared "
                            "tensors%s%s; max/RMS of `%s` %.1f → %.1f%s",
               a->label, b->label, V->ev_a, V->ev_b, dtxt, rtxt, V->kname, V->kmax_a, V->kmax_b, gtxt);
}

/* runs a and b compared and rendered (b's channels into fc_b when given) */
static int versus(an_ctx *c, const an_run *a, const an_run *b, FILE *fc_b, FILE *fv, char *key, size_t keyn)
{
    versus_result V;
    int rc = versus_compute(a, b, &V);
    if (rc)
        fprintf(c->md, "### `%s` versus `%s`\n\n(out of memory matching the runs' tensors)\n\n", a->label, b->label);
    else
        versus_render(c, a, b, &V, fc_b, fv, key, keyn);
    versus_free(a, &V);
    return rc;
}

/* ---- one run ------------------------------------------------------------------- */

/* One run's outlier measures: each tensor's, its channel series, and the
 * tensor with the largest max/RMS (-1: none). */
typedef struct {
    an_outl *ol;
    chan_series *cs;
    int worst;
} run_outliers;

static void run_outliers_free(const an_run *a, run_outliers *R)
{
    for (int t = 0; R->cs && t < a->run->ntensors; t++)
        chan_series_free(&R->cs[t]);
    free(R->ol), free(R->cs);
}

static int outliers_compute(const an_run *a, run_outliers *R)
{
    int T = a->run->ntensors;
    double worst_v = 0;
    R->worst = -1;
    R->ol = calloc((size_t)T + 1, sizeof *R->ol);
    R->cs = calloc((size_t)T + 1, sizeof *R->cs);
    if (!R->ol || !R->cs)
        return -1;
    for (int t = 0; t < T; t++) {
        an_outl *o = &R->ol[t];
        if (an_tensor_outliers(a, t, o) || channels(a, t, o, &R->cs[t]))
            return -1;
        if (o->steps && o->maxrms_max > worst_v)
            worst_v = o->maxrms_max, R->worst = t;
    }
    return 0;
}

/* the data rows, the table of the 10 tensors with the largest max/RMS and
 * the finding */
static void outliers_render(an_ctx *c, const an_run *a, const run_outliers *R, FILE *ft, FILE *fc)
{
    int T = a->run->ntensors;
    for (int t = 0; t < T; t++) {
        const an_outl *o = &R->ol[t];
        channels_tsv(fc, a, t, o, &R->cs[t]);
        if (!o->steps)
            continue;
        fprintf(ft, "%s\t%s\t%s\t%d\t%zu\t%.9g\t%.9g\t%.9g\t%.9g\t%.9g\t%.9g\t%zu\t%d\t%.9g\t%.9g\t%lld\n", a->label,
                a->run->tensor_name[t], fp8_role_name((fp8_role)a->run->tensor_role[t]), a->run->tensor_layer[t],
                o->steps, o->kurt_p50, o->kurt_first, o->kurt_last, o->maxrms_p50, o->maxrms_max, o->maxrms_last,
                o->snapshots, o->nchan ? o->chan[0] : -1, o->chan_ratio, o->nchan ? o->chan_persist[0] : NAN,
                o->nchan ? (long long)o->chan_first[0] : -1LL);
    }
    fprintf(c->md, "### Run `%s`\n\n| tensor | kurtosis (median) | kurtosis first → last | max/RMS median | "
                   "max/RMS max | top channel × median |\n|---|---|---|---|---|---|\n", a->label);
    char *shown = calloc((size_t)T + 1, 1);
    for (int k = 0; k < 10 && shown; k++) {
        int b = -1;
        for (int t = 0; t < T; t++)
            if (!shown[t] && R->ol[t].steps && (b < 0 || R->ol[t].maxrms_max > R->ol[b].maxrms_max))
                b = t;
        if (b < 0)
            break;
        shown[b] = 1;
        const an_outl *o = &R->ol[b];
        fprintf(c->md, "| %s | %.2f | %.2f → %.2f | %.1f | %.1f | ", a->run->tensor_name[b], o->kurt_p50, o->kurt_first,
                o->kurt_last, o->maxrms_p50, o->maxrms_max);
        if (o->nchan)
            fprintf(c->md, "%.1f (channel %d, %.0f%% of snapshots) |\n", o->chan_ratio, o->chan[0],
                    100 * o->chan_persist[0]);
        else
            fprintf(c->md, "- |\n");
    }
    free(shown);
    fprintf(c->md, "\n");
    int w = R->worst;
    if (w >= 0)
        an_finding(c, "outliers", "`%s`: `%s` max/RMS up to %.0f, kurtosis %.1f → %.1f", a->label,
                   a->run->tensor_name[w], R->ol[w].maxrms_max, R->ol[w].kurt_first, R->ol[w].kurt_last);
}

int an_outliers(an_ctx *c)
{
    FILE *ft = an_data(c, "outliers_tensors.tsv"), *fc = an_data(c, "outliers_channels.tsv"),
         *fv = an_data(c, "outliers_vs.tsv");
    int rc = 0;
    an_ctx vc;
    an_defaults(&vc);
    char q_smooth[1800] = "", q_run[64] = "", q_tensor[FP8_NAME_MAX] = "";
    double q_maxrms = -1, q_k0 = NAN, q_k1 = NAN;
    if (!ft || !fc || !fv) {
        rc = 1;
        goto done;
    }
    fprintf(ft, "run\ttensor\trole\tlayer\tsteps\tkurtosis_p50\tkurtosis_first\tkurtosis_last\tmax_over_rms_p50\t"
                "max_over_rms_max\tmax_over_rms_last\tsnapshots\ttop_channel\ttop_channel_ratio\ttop_channel_persistence\t"
                "top_channel_first_step\n");
    fprintf(fc, "run\ttensor\tstep\trank\tchannel\tamax\tratio_to_median\n");
    fprintf(fv, "run_a\trun_b\ttensor\tkurtosis_p50_a\tkurtosis_p50_b\tmax_over_rms_max_a\tmax_over_rms_max_b\t"
                "top_channel_ratio_a\ttop_channel_ratio_b\trecipe\toverflow_events_a\toverflow_events_b\t"
                "overflow_rate_a\toverflow_rate_b\n");
    fprintf(c->md, "## Outliers\n\nKurtosis: m4/m2² (Gaussian 3). max/RMS: amax / sqrt(Σx²/finite). Channel ratio: a "
                   "column's amax over the median column amax, from snapshots; persistence: share of snapshots in "
                   "which the channel is above 4x the median.\n\n");
    for (int ri = 0; ri < c->nruns && !rc; ri++) {
        const an_run *a = &c->runs[ri];
        run_outliers R;
        if (outliers_compute(a, &R)) {
            fprintf(stderr, "fp8prof: outliers: out of memory\n");
            rc = 1;
        } else {
            outliers_render(c, a, &R, ft, fc);
            int w = R.worst;
            if (w >= 0 && R.ol[w].maxrms_max > q_maxrms) {
                q_maxrms = R.ol[w].maxrms_max, q_k0 = R.ol[w].kurt_first, q_k1 = R.ol[w].kurt_last;
                snprintf(q_run, sizeof q_run, "%s", a->label);
                snprintf(q_tensor, sizeof q_tensor, "%s", a->run->tensor_name[w]);
            }
        }
        run_outliers_free(a, &R);
    }
    if (!rc && c->vs && c->nruns > 0) {
        const char *vp[1] = {c->vs};
        vc.md = c->md;
        if (an_open(&vc, vp, 1))
            rc = 1;
        else
            versus(c, &c->runs[0], &vc.runs[0], fc, fv, q_smooth, sizeof q_smooth); /* b's channels are not written yet */
    } else if (!rc && c->vs_a >= 0 && c->vs_b >= 0 && c->vs_a < c->nruns && c->vs_b < c->nruns) {
        versus(c, &c->runs[c->vs_a], &c->runs[c->vs_b], NULL, fv, q_smooth, sizeof q_smooth);
        if (c->vs_c >= 0 && c->vs_c < c->nruns) { /* the other variant: against none, and the two variants */
            char k2[600] = "", k3[600] = "";
            versus(c, &c->runs[c->vs_a], &c->runs[c->vs_c], NULL, fv, k2, sizeof k2);
            versus(c, &c->runs[c->vs_b], &c->runs[c->vs_c], NULL, fv, k3, sizeof k3);
            size_t l = strlen(q_smooth);
            snprintf(q_smooth + l, sizeof q_smooth - l, "%s%s%s%s", k2[0] ? "; " : "", k2, k3[0] ? "; " : "", k3);
        }
    }
    if (q_maxrms >= 0) {
        /* (Smooth SwiGLU's line is swiglu.c's: on identical tensors; the
         * cross-run pairs stay in this section as evidence) */
        an_key(c, AN_Q_OUTLIERS, "Outliers",
               "the largest max/RMS is %.0f, on `%s` in `%s` (kurtosis %.1f at the first step, %.1f at the last)",
               q_maxrms, q_tensor, q_run, q_k0, q_k1);
    }
done:
    an_close(&vc);
    if (an_data_close(c, (FILE *[]){ft, fc, fv}, 3))
        rc = 1;
    return rc;
}
