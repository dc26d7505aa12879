/*
 * loss.c — do the runs' loss curves track the baseline (the first run
 * given)?  Per run and step: the difference and relative difference to the
 * baseline, smoothed by a centred moving mean (GSL movstat, 21 steps,
 * truncated at the ends); divergence is flagged by a stated rule.
 *
 * Data files: loss_curves.tsv (every run's loss and smoothed loss),
 * loss_diff.tsv (each run against the baseline), loss_val.tsv.
 */
#include <gsl/gsl_movstat.h>
#include <gsl/gsl_vector.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "analysis.h"

#define SMOOTH 21

static int scalar_id(const fp8_run *r, const char *name)
{
    for (int i = 0; i < r->nscalar_names; i++)
        if (strcmp(r->scalar_name[i], name) == 0)
            return i;
    return -1;
}

/* The series `name` of a run, by step (the last value of a repeated step). */
static size_t series(const fp8_run *r, const char *name, int64_t **step, double **val)
{
    int id = scalar_id(r, name);
    size_t n = 0;
    *step = malloc((r->nscalars + 1) * sizeof **step);
    *val = malloc((r->nscalars + 1) * sizeof **val);
    if (!*step || !*val || id < 0)
        return 0;
    for (size_t i = 0; i < r->nscalars; i++) {
        if ((int)r->scalar_id[i] != id)
            continue;
        if (n && (*step)[n - 1] == r->scalar_step[i])
            n--;
        (*step)[n] = r->scalar_step[i], (*val)[n++] = r->scalar_value[i];
    }
    return n;
}

/* Centred moving mean of x over `window` points (GSL movstat, truncated
 * at the ends) into out; non-finite inputs are bridged. */
static int an_smooth(const double *x, size_t n, int window, double *out)
{
    if (n == 0)
        return 0;
    gsl_movstat_workspace *w = gsl_movstat_alloc((size_t)window);
    gsl_vector *in = gsl_vector_alloc(n), *o = gsl_vector_alloc(n);
    int rc = !w || !in || !o;
    if (!rc) {
        /* a non-finite value (a NaN step) is bridged by the last finite one */
        double last = NAN;
        for (size_t i = 0; i < n && isnan(last); i++)
            if (isfinite(x[i]))
                last = x[i];
        for (size_t i = 0; i < n; i++) {
            if (isfinite(x[i]))
                last = x[i];
            gsl_vector_set(in, i, last);
        }
        rc = gsl_movstat_mean(GSL_MOVSTAT_END_TRUNCATE, in, o, w);
        for (size_t i = 0; i < n && !rc; i++)
            out[i] = gsl_vector_get(o, i);
    }
    if (w)
        gsl_movstat_free(w);
    if (in)
        gsl_vector_free(in);
    if (o)
        gsl_vector_free(o);
    return rc;
}

int an_loss(an_ctx *c)
{
    FILE *fc = an_data(c, "loss_curves.tsv"), *fd = an_data(c, "loss_diff.tsv"), *fv = an_data(c, "loss_val.tsv");
    int rc = 0;
    int64_t *bs = NULL;
    double *bv = NULL, *bsm = NULL;
    if (!fc || !fd || !fv) {
        rc = 1;
        goto done;
    }
    fprintf(fc, "run\tstep\tloss\tloss_smoothed\n");
    fprintf(fd, "run\tbaseline\tstep\tdiff\trel_diff\trel_diff_smoothed\n");
    fprintf(fv, "run\tstep\tval_loss\n");
    fprintf(c->md, "## Loss against the baseline\n\n");
    if (c->baseline < 0 || c->baseline >= c->nruns)
        c->baseline = 0;
    size_t bn = series(c->runs[c->baseline].run, "loss", &bs, &bv);
    if (!bn) {
        fprintf(c->md, "The baseline run `%s` has no `loss` series: nothing to compare.\n\n", c->runs[c->baseline].label);
        rc = 3;
        goto done;
    }
    bsm = malloc(bn * sizeof *bsm);
    if (!bsm || an_smooth(bv, bn, SMOOTH, bsm)) {
        rc = 1;
        goto done;
    }
    fprintf(c->md, "Baseline: `%s`. Smoothing: centred moving mean over %d steps. **Divergence rule**: the smoothed "
                   "relative difference (run − baseline) / baseline stays above %.3g%% for %d consecutive steps, or "
                   "the loss is not finite.\n\n",
            c->runs[c->baseline].label, SMOOTH, 100 * c->diverge_rel, c->diverge_steps);
    fprintf(c->md, "| run | steps | final loss (smoothed) | mean rel. diff, last 10%% | max smoothed rel. diff (step) | "
                   "final val_loss | verdict |\n|---|---|---|---|---|---|---|\n");
    for (int ri = 0; ri < c->nruns; ri++) {
        const an_run *a = &c->runs[ri];
        int64_t *s = NULL, *vs = NULL;
        double *v = NULL, *vv = NULL;
        size_t n = series(a->run, "loss", &s, &v), nv = series(a->run, "val_loss", &vs, &vv);
        for (size_t i = 0; i < nv; i++)
            fprintf(fv, "%s\t%lld\t%.9g\n", a->label, (long long)vs[i], vv[i]);
        double *sm = malloc((n + 1) * sizeof *sm), *rel = malloc((n + 1) * sizeof *rel),
               *rsm = malloc((n + 1) * sizeof *rsm), *dif = malloc((n + 1) * sizeof *dif);
        int64_t *rs = malloc((n + 1) * sizeof *rs);
        if (!sm || !rel || !rsm || !dif || !rs) {
            rc = 1;
        } else if (!n) {
            fprintf(c->md, "| %s | 0 | - | - | - | - | no `loss` series |\n", a->label);
        } else {
            an_smooth(v, n, SMOOTH, sm);
            for (size_t i = 0; i < n; i++)
                fprintf(fc, "%s\t%lld\t%.9g\t%.9g\n", a->label, (long long)s[i], v[i], sm[i]);
            /* aligned steps */
            size_t m = 0, bad_step = (size_t)-1;
            for (size_t i = 0, j = 0; i < n && j < bn;) {
                if (s[i] < bs[j]) {
                    i++;
                } else if (bs[j] < s[i]) {
                    j++;
                } else {
                    rs[m] = s[i];
                    dif[m] = v[i] - bv[j];
                    rel[m] = bv[j] != 0 ? dif[m] / bv[j] : NAN;
                    if (!isfinite(v[i]) && bad_step == (size_t)-1)
                        bad_step = m;
                    m++, i++, j++;
                }
            }
            /* NaN-safe smoothing: carry the last finite value through gaps */
            for (size_t i = 1; i < m; i++)
                if (!isfinite(rel[i]))
                    rel[i] = rel[i - 1];
            if (m && !isfinite(rel[0]))
                rel[0] = 0;
            an_smooth(rel, m, SMOOTH, rsm);
            int streak = 0;
            int64_t div_at = -1;
            double mx = -INFINITY;
            int64_t mx_step = 0;
            for (size_t i = 0; i < m; i++) {
                fprintf(fd, "%s\t%s\t%lld\t%.9g\t%.9g\t%.9g\n", a->label, c->runs[c->baseline].label, (long long)rs[i], dif[i],
                        rel[i], rsm[i]);
                streak = rsm[i] > c->diverge_rel ? streak + 1 : 0;
                if (streak == c->diverge_steps && div_at < 0)
                    div_at = rs[i + 1 - (size_t)c->diverge_steps];
                if (rsm[i] > mx)
                    mx = rsm[i], mx_step = rs[i];
            }
            if (bad_step != (size_t)-1 && (div_at < 0 || rs[bad_step] < div_at))
                div_at = rs[bad_step];
            double tail = 0;
            size_t from = m - m / 10 - (m >= 1 ? 1 : 0), tn = 0;
            for (size_t i = from; i < m; i++)
                tail += rel[i], tn++;
            char verdict[96];
            if (ri == c->baseline)
                snprintf(verdict, sizeof verdict, "baseline");
            else if (div_at >= 0)
                snprintf(verdict, sizeof verdict, "**diverges at step %lld**", (long long)div_at);
            else
                snprintf(verdict, sizeof verdict, "tracks the baseline");
            char val[64] = "-";
            if (nv)
                snprintf(val, sizeof val, "%.4f (step %lld)", vv[nv - 1], (long long)vs[nv - 1]);
            fprintf(c->md, "| %s | %zu | %.4f | %+.3f%% | %+.3f%% (%lld) | %s | %s |\n", a->label, n, sm[n - 1],
                    tn ? 100 * tail / (double)tn : NAN, 100 * mx, (long long)mx_step, val, verdict);
            if (ri != c->baseline)
                an_finding(c, "loss", "`%s` %s (%+.2f%% over the last 10%% of steps)", a->label, verdict,
                           tn ? 100 * tail / (double)tn : NAN);
        }
        free(s), free(v), free(vs), free(vv), free(sm), free(rel), free(rsm), free(dif), free(rs);
        if (rc)
            break;
    }
    fprintf(c->md, "\n");
done:
    free(bs), free(bv), free(bsm);
    if (an_data_close(c, (FILE *[]){fc, fd, fv}, 3))
        rc = 1;
    return rc;
}
