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
#include "compare.h"
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

/* Per-column amax of every snapshot of tensor t; fills o->chan_* and, when
 * f is given, writes the top channels' series. */
static int channels(const an_run *a, int t, an_outl *o, FILE *f)
{
    size_t idx[AN_MAX_SNAPSHOTS], ns = an_snapshots(a, t, idx);
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
        const double *last = ca + (used - 1) * cols;
        size_t top[TOPK] = {0}, nt = 0;
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
        o->nchan = nt;
        o->chan_ratio = med[used - 1] > 0 ? last[top[0]] / med[used - 1] : NAN;
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
            if (f)
                for (size_t s = 0; s < used; s++)
                    fprintf(f, "%s\t%s\t%lld\t%zu\t%d\t%.9g\t%.9g\n", a->label, a->run->tensor_name[t],
                            (long long)step[s], q, (int)top[q], ca[s * cols + top[q]],
                            med[s] > 0 ? ca[s * cols + top[q]] / med[s] : NAN);
        }
        if (f)
            for (size_t s = 0; s < used; s++)
                fprintf(f, "%s\t%s\t%lld\tmedian\t-1\t%.9g\t1\n", a->label, a->run->tensor_name[t], (long long)step[s],
                        med[s]);
    }
    free(x), free(ca), free(tmp), free(med), free(step);
    return ok ? 0 : -1;
}

/* The down projections' FP8 GEMM output error (trainer scalars) of runs a
 * and b side by side: what Smooth SwiGLU's per-channel scale costs or saves
 * where it acts.  Writes the mean fprop SQNR change into *dfprop (NAN when
 * no linear has both). */
static void versus_gemm(an_ctx *c, const an_run *a, const an_run *b, double *dfprop)
{
    static const char *pfx = "gemm_sqnr_db/", *tail = "mlp.w2/fprop", *g3[3] = {"fprop", "dgrad", "wgrad"};
    size_t lp = strlen(pfx), lt = strlen(tail);
    int rows = 0;
    double sum = 0;
    *dfprop = NAN;
    for (int i = 0; i < a->run->nscalar_names; i++) {
        const char *nm = a->run->scalar_name[i];
        size_t len = strlen(nm);
        if (strncmp(nm, pfx, lp) != 0 || len < lp + lt || strcmp(nm + len - lt, tail) != 0)
            continue;
        char lin[FP8_NAME_MAX];
        snprintf(lin, sizeof lin, "%.*s", (int)(len - lp - strlen("/fprop")), nm + lp);
        double va[3], vb[3];
        size_t na[3], nb[3];
        for (int g = 0; g < 3; g++)
            va[g] = an_gemm_median(a, lin, g3[g], &na[g]), vb[g] = an_gemm_median(b, lin, g3[g], &nb[g]);
        if (!na[0] || !nb[0])
            continue;
        if (!rows++)
            fprintf(c->md, "FP8 GEMM output SQNR of the down projections, dB (median after warm-up), `%s` / `%s`:\n\n"
                           "| linear | fprop | dgrad | wgrad |\n|---|---|---|---|\n",
                    a->label, b->label);
        fprintf(c->md, "| `%s` |", lin);
        for (int g = 0; g < 3; g++)
            fprintf(c->md, na[g] && nb[g] ? " %.2f / %.2f |" : " - |", va[g], vb[g]);
        fprintf(c->md, "\n");
        sum += vb[0] - va[0];
    }
    if (rows) {
        *dfprop = sum / rows;
        fprintf(c->md, "\nMean fprop change over these %d linears: %+.2f dB.\n\n", rows, *dfprop);
    }
}

/* The same tensors of runs a and b side by side, with the overflow events
 * of every recipe both recorded. */
static void versus(an_ctx *c, const an_run *a, const an_run *b, FILE *fc_b, FILE *fv, char *key, size_t keyn)
{
    fprintf(c->md, "### `%s` versus `%s`\n\n| tensor | kurtosis | max/RMS max | top channel × median | recipe | "
                   "overflow events | overflow %% |\n|---|---|---|---|---|---|---|\n",
            a->label, b->label);
    double ev_a = 0, ev_b = 0, kmax_a = 0, kmax_b = 0, drop = 0, rise = 0;
    char prev[FP8_NAME_MAX + 256] = "";
    const char *kname = NULL, *dname = NULL, *rname = NULL;
    size_t drop_a = 0, drop_b = 0, rise_a = 0, rise_b = 0;
    an_names bt, bs;
    bs.ord = NULL;
    if (an_names_init(&bt, (const char *)b->run->tensor_name, FP8_NAME_MAX, b->run->ntensors) ||
        an_names_init(&bs, (const char *)b->run->recipe_spec, FP8_SPEC_MAX, b->run->nrecipes)) {
        an_names_free(&bt);
        fprintf(c->md, "(out of memory matching the runs' tensors)\n\n");
        return;
    }
    for (int t = 0; t < a->run->ntensors; t++) {
        int u = an_names_find(&bt, a->run->tensor_name[t]);
        an_outl oa, ob;
        if (u < 0 || an_tensor_outliers(a, t, &oa) || !oa.steps || an_tensor_outliers(b, u, &ob))
            continue;
        channels(a, t, &oa, NULL);
        if (channels(b, u, &ob, fc_b))
            continue;
        if (oa.maxrms_max > kmax_a)
            kmax_a = oa.maxrms_max, kmax_b = ob.maxrms_max, kname = a->run->tensor_name[t];
        size_t nr;
        const int *rs = an_tensor_recipes(a, t, &nr);
        for (size_t ri = 0; ri < nr; ri++) {
            int r = rs[ri], s = an_names_find(&bs, a->run->recipe_spec[r]);
            an_sstats sa, sb;
            if (s < 0 || an_series_stats(a, t, r, &sa) || an_series_stats(b, u, s, &sb) || !sa.records || !sb.records)
                continue;
            char lab[96], chtxt[64];
            an_recipe_label_on(a, t, r, lab, sizeof lab);
            snprintf(chtxt, sizeof chtxt, "%.1f / %.1f", oa.chan_ratio, ob.chan_ratio);
            fprintf(fv, "%s\t%s\t%s\t%.9g\t%.9g\t%.9g\t%.9g\t%.9g\t%.9g\t%s\t%zu\t%zu\t%.9g\t%.9g\n", a->label, b->label,
                    a->run->tensor_name[t], oa.kurt_p50, ob.kurt_p50, oa.maxrms_max, ob.maxrms_max, oa.chan_ratio,
                    ob.chan_ratio, lab, sa.events, sb.events, sa.overflow_rate, sb.overflow_rate);
            if (a->recipe_ok[r] && a->recipes[r].kind == FP8_RECIPE_DELAYED && r == a->active[t]) {
                double dlt = (double)sb.events - (double)sa.events;
                ev_a += (double)sa.events, ev_b += (double)sb.events;
                if (dlt < drop)
                    drop = dlt, dname = a->run->tensor_name[t], drop_a = sa.events, drop_b = sb.events;
                if (dlt > rise)
                    rise = dlt, rname = a->run->tensor_name[t], rise_a = sa.events, rise_b = sb.events;
            }
            char row[FP8_NAME_MAX + 256];
            snprintf(row, sizeof row, "| %s | %.2f / %.2f | %.1f / %.1f | %s | %s | %zu / %zu | %.4f / %.4f |\n",
                     a->run->tensor_name[t], oa.kurt_p50, ob.kurt_p50, oa.maxrms_max, ob.maxrms_max,
                     oa.nchan ? chtxt : "-", lab, sa.events, sb.events, 100 * sa.overflow_rate, 100 * sb.overflow_rate);
            /* recipes with the same numerics on the tensor (the active one
             * and its twin shadow) give the same row: shown once */
            if ((sa.events + sb.events > 0 || oa.nchan) && strcmp(row, prev) != 0)
                fputs(row, c->md);
            snprintf(prev, sizeof prev, "%s", row);
        }
    }
    an_names_free(&bt), an_names_free(&bs);
    fprintf(c->md, "\nRows: tensors with overflow events or snapshots; values `%s` / `%s`. All pairs: "
                   "`outliers_vs.tsv`.\n\n", a->label, b->label);
    double dfp;
    versus_gemm(c, a, b, &dfp);
    char gtxt[96] = "";
    if (isfinite(dfp))
        snprintf(gtxt, sizeof gtxt, "; down-projection fprop GEMM SQNR %+.2f dB", dfp);
    if (kname) {
        char dtxt[256] = "", rtxt[256] = "";
        if (dname)
            snprintf(dtxt, sizeof dtxt, "; largest drop `%s` %zu → %zu", dname, drop_a, drop_b);
        if (rname)
            snprintf(rtxt, sizeof rtxt, "; largest rise `%s` %zu → %zu", rname, rise_a, rise_b);
        snprintf(key, keyn, "`%s` → `%s` (Smooth SwiGLU): overflow events of the active delayed recipe %.0f → %.0f%s%s%s",
                 a->label, b->label, ev_a, ev_b, dtxt, rtxt, gtxt);
        an_finding(c, "smooth", "`%s` → `%s`: overflow events of the active delayed recipe %.0f → %.0f over the shared "
                                "tensors%s%s; max/RMS of `%s` %.1f → %.1f%s",
                   a->label, b->label, ev_a, ev_b, dtxt, rtxt, kname, kmax_a, kmax_b, gtxt);
    }
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
    for (int ri = 0; ri < c->nruns; ri++) {
        const an_run *a = &c->runs[ri];
        int T = a->run->ntensors, worst = -1;
        double worst_v = 0;
        an_outl *ol = calloc((size_t)T + 1, sizeof *ol);
        if (!ol) {
            rc = 1;
            goto done;
        }
        for (int t = 0; t < T; t++) {
            an_outl *o = &ol[t];
            if (an_tensor_outliers(a, t, o) || channels(a, t, o, fc)) {
                fprintf(stderr, "fp8prof: outliers: out of memory\n");
                rc = 1;
                break;
            }
            if (!o->steps)
                continue;
            fprintf(ft, "%s\t%s\t%s\t%d\t%zu\t%.9g\t%.9g\t%.9g\t%.9g\t%.9g\t%.9g\t%zu\t%d\t%.9g\t%.9g\t%lld\n", a->label,
                    a->run->tensor_name[t], fp8_role_name((fp8_role)a->run->tensor_role[t]), a->run->tensor_layer[t],
                    o->steps, o->kurt_p50, o->kurt_first, o->kurt_last, o->maxrms_p50, o->maxrms_max, o->maxrms_last,
                    o->snapshots, o->nchan ? o->chan[0] : -1, o->chan_ratio, o->nchan ? o->chan_persist[0] : NAN,
                    o->nchan ? (long long)o->chan_first[0] : -1LL);
            if (o->maxrms_max > worst_v)
                worst_v = o->maxrms_max, worst = t;
        }
        /* the table: the 10 tensors with the largest max/RMS */
        fprintf(c->md, "### Run `%s`\n\n| tensor | kurtosis (median) | kurtosis first → last | max/RMS median | "
                       "max/RMS max | top channel × median |\n|---|---|---|---|---|---|\n", a->label);
        char *shown = calloc((size_t)T + 1, 1);
        for (int k = 0; k < 10 && shown; k++) {
            int b = -1;
            for (int t = 0; t < T; t++)
                if (!shown[t] && ol[t].steps && (b < 0 || ol[t].maxrms_max > ol[b].maxrms_max))
                    b = t;
            if (b < 0)
                break;
            shown[b] = 1;
            const an_outl *o = &ol[b];
            fprintf(c->md, "| %s | %.2f | %.2f → %.2f | %.1f | %.1f | ", a->run->tensor_name[b], o->kurt_p50,
                    o->kurt_first, o->kurt_last, o->maxrms_p50, o->maxrms_max);
            if (o->nchan)
                fprintf(c->md, "%.1f (channel %d, %.0f%% of snapshots) |\n", o->chan_ratio, o->chan[0],
                        100 * o->chan_persist[0]);
            else
                fprintf(c->md, "- |\n");
        }
        free(shown);
        fprintf(c->md, "\n");
        if (worst >= 0 && ol[worst].maxrms_max > q_maxrms) {
            q_maxrms = ol[worst].maxrms_max, q_k0 = ol[worst].kurt_first, q_k1 = ol[worst].kurt_last;
            snprintf(q_run, sizeof q_run, "%s", a->label);
            snprintf(q_tensor, sizeof q_tensor, "%s", a->run->tensor_name[worst]);
        }
        if (worst >= 0)
            an_finding(c, "outliers", "`%s`: `%s` max/RMS up to %.0f, kurtosis %.1f → %.1f", a->label,
                       a->run->tensor_name[worst], ol[worst].maxrms_max, ol[worst].kurt_first, ol[worst].kurt_last);
        free(ol);
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
    if (q_maxrms >= 0 || q_smooth[0]) {
        char o[400] = "";
        if (q_maxrms >= 0)
            snprintf(o, sizeof o, "the largest max/RMS is %.0f, on `%s` in `%s` (kurtosis %.1f at the first step, %.1f "
                                  "at the last)",
                     q_maxrms, q_tensor, q_run, q_k0, q_k1);
        /* (Smooth SwiGLU's line is swiglu.c's: on identical tensors; the
         * cross-run pairs stay in this section as evidence) */
        if (o[0])
            an_key(c, AN_Q_OUTLIERS, "Outliers", "%s", o);
    }
done:
    an_close(&vc);
    if (an_data_close(c, (FILE *[]){ft, fc, fv}, 3))
        rc = 1;
    return rc;
}
