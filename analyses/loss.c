/*
 * loss.c — do the runs' loss curves track the baseline?  Per run and step:
 * the relative difference to the baseline, smoothed by a centred moving
 * mean; against a noise floor measured by a second baseline trained with
 * another seed (what a difference looks like when nothing but the seed
 * changes).  The rule is two-sided: a run that stays above the baseline
 * beyond both the threshold and the noise floor diverges; one that stays
 * below it is better beyond noise; either way it does not "track".
 *
 * Data files: loss_curves.tsv (every run's loss and smoothed loss),
 * loss_diff.tsv (each run against the baseline, with the noise floor),
 * loss_val.tsv, loss_summary.tsv.
 */
#include <gsl/gsl_movstat.h>
#include <gsl/gsl_vector.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "analysis.h"
#include "keys.h"

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

/* The smoothing window for n points: 21, shrunk for short series to the
 * odd number nearest n / 10 (at least 3; 1 below 6 points). */
int an_smooth_window(size_t n)
{
    if (n < 6)
        return 1;
    size_t w = n / 10;
    if (w < 3)
        w = 3;
    if (w % 2 == 0)
        w++;
    return w > 21 ? 21 : (int)w;
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

/* A run aligned with the baseline: steps both logged, relative difference
 * (NaN-bridged), smoothed; bad = index of the first non-finite loss or -1. */
typedef struct {
    size_t m;
    int64_t *step;
    double *dif, *rel, *rsm;
    double *env;       /* noise runs: the envelope max |rsm| over a centred window */
    long bad;
} aligned;

static void aligned_free(aligned *x) { free(x->step), free(x->dif), free(x->rel), free(x->rsm), free(x->env); }

/* The noise envelope: a single second seed crosses the baseline now and
 * then, so the floor at step t is the largest |smoothed difference| within
 * 2W+1 steps around t (GSL movstat max), W the smoothing window. */
static int envelope(aligned *o)
{
    size_t W = (size_t)an_smooth_window(o->m) * 2 + 1;
    o->env = malloc((o->m + 1) * sizeof *o->env);
    gsl_movstat_workspace *w = gsl_movstat_alloc(W);
    gsl_vector *in = o->m ? gsl_vector_alloc(o->m) : NULL, *out = o->m ? gsl_vector_alloc(o->m) : NULL;
    int rc = !o->env || !w || (o->m && (!in || !out));
    for (size_t i = 0; !rc && i < o->m; i++)
        gsl_vector_set(in, i, fabs(o->rsm[i]));
    if (!rc && o->m)
        rc = gsl_movstat_max(GSL_MOVSTAT_END_TRUNCATE, in, out, w);
    for (size_t i = 0; !rc && i < o->m; i++)
        o->env[i] = gsl_vector_get(out, i);
    if (w)
        gsl_movstat_free(w);
    if (in)
        gsl_vector_free(in);
    if (out)
        gsl_vector_free(out);
    return rc;
}

static int align(const int64_t *s, const double *v, size_t n, const int64_t *bs, const double *bv, size_t bn, aligned *o)
{
    memset(o, 0, sizeof *o);
    o->bad = -1;
    size_t cap = (n < bn ? n : bn) + 1;
    o->step = malloc(cap * sizeof *o->step), o->dif = malloc(cap * sizeof *o->dif);
    o->rel = malloc(cap * sizeof *o->rel), o->rsm = malloc(cap * sizeof *o->rsm);
    if (!o->step || !o->dif || !o->rel || !o->rsm)
        return -1;
    for (size_t i = 0, j = 0; i < n && j < bn;) {
        if (s[i] < bs[j]) {
            i++;
        } else if (bs[j] < s[i]) {
            j++;
        } else {
            o->step[o->m] = s[i];
            o->dif[o->m] = v[i] - bv[j];
            o->rel[o->m] = bv[j] != 0 ? o->dif[o->m] / bv[j] : NAN;
            if (!isfinite(v[i]) && o->bad < 0)
                o->bad = (long)o->m;
            o->m++, i++, j++;
        }
    }
    for (size_t i = 1; i < o->m; i++) /* carry the last finite value through gaps */
        if (!isfinite(o->rel[i]))
            o->rel[i] = o->rel[i - 1];
    if (o->m && !isfinite(o->rel[0]))
        o->rel[0] = 0;
    return an_smooth(o->rel, o->m, an_smooth_window(o->m), o->rsm);
}

/* The baseline-like run to measure noise with: same /meta recipe as the
 * baseline (bf16 or fp32 for the trainer), another seed. */
static int find_noise(const an_ctx *c)
{
    const an_run *b = &c->runs[c->baseline];
    const char *br = an_meta(b, "recipe"), *bseed = an_meta(b, "seed");
    for (int i = 0; br && bseed && i < c->nruns; i++) {
        const char *r = an_meta(&c->runs[i], "recipe"), *sd = an_meta(&c->runs[i], "seed");
        if (i != c->baseline && r && sd && !strcmp(r, br) && strcmp(sd, bseed) != 0)
            return i;
    }
    return -1;
}

int an_loss(an_ctx *c)
{
    FILE *fc = an_data(c, "loss_curves.tsv"), *fd = an_data(c, "loss_diff.tsv"), *fv = an_data(c, "loss_val.tsv"),
         *fs = an_data(c, "loss_summary.tsv");
    int rc = 0;
    int64_t *bs = NULL, *ns = NULL;
    double *bv = NULL, *nv = NULL;
    aligned noise = {0};
    const char *lname = c->loss_name ? c->loss_name : "loss";
    an_span q_tail = {0, 0, 0};
    int q_runs = 0, q_within = 0, q_div = 0;
    double q_floor = NAN;
    char q_off[300] = "";
    size_t q_offl = 0;
    if (!fc || !fd || !fv || !fs) {
        rc = 1;
        goto done;
    }
    fprintf(fc, "run\tstep\tloss\tloss_smoothed\n");
    fprintf(fd, "run\tbaseline\tstep\tdiff\trel_diff\trel_diff_smoothed\tnoise_floor\n");
    fprintf(fv, "run\tstep\tval_loss\n");
    fprintf(fs, "run\tbaseline\tsteps\ttail_steps\trel_diff_tail\tnoise_floor_tail\tmax_rel\tmin_rel\tflag_step\tverdict\n");
    fprintf(c->md, "## Loss against the baseline\n\n");
    if (c->baseline < 0 || c->baseline >= c->nruns)
        c->baseline = 0;
    size_t bn = series(c->runs[c->baseline].run, lname, &bs, &bv);
    if (!bn) {
        fprintf(c->md, "The baseline run `%s` has no `%s` series: nothing to compare (`--loss NAME` picks another "
                       "scalar).\n\n", c->runs[c->baseline].label, lname);
        rc = 3;
        goto done;
    }
    if (c->noise < 0 || c->noise >= c->nruns || c->noise == c->baseline)
        c->noise = find_noise(c);
    if (c->noise >= 0) {
        size_t nn = series(c->runs[c->noise].run, lname, &ns, &nv);
        if (!nn || align(ns, nv, nn, bs, bv, bn, &noise) != 0 || !noise.m || envelope(&noise) != 0)
            c->noise = -1;
    }
    int W = an_smooth_window(bn);
    fprintf(c->md, "Baseline: `%s`. Smoothing: centred moving mean over %d steps (shrunk for short runs). ", 
            c->runs[c->baseline].label, W);
    if (c->noise >= 0)
        fprintf(c->md, "Noise floor at step t: the largest |smoothed relative difference| of `%s` (the baseline's "
                       "recipe with seed %s instead of %s) to the baseline within 2W+1 steps around t (an envelope: "
                       "one second seed crosses the baseline now and then). ",
                c->runs[c->noise].label, an_meta(&c->runs[c->noise], "seed"), an_meta(&c->runs[c->baseline], "seed"));
    else
        fprintf(c->md, "**No noise floor**: no second baseline run (same recipe, another seed) was given, so a "
                       "difference cannot be told from seed-to-seed variation; train one (`fp8prof train --recipe bf16 "
                       "--seed 2`) and pass it too. ");
    fprintf(c->md, "**Rule** (two-sided): with n(t) the noise floor at step t (0 without one) and d(t) the smoothed "
                   "relative difference (run − baseline) / baseline, a run *diverges* when d(t) > max(%.3g%%, n(t)) "
                   "for %d consecutive steps or its loss is not finite, is *below the baseline beyond noise* when "
                   "d(t) < −max(%.3g%%, n(t)) for as long, and otherwise *tracks* it. The tail is the mean of the "
                   "unsmoothed difference over the last 10%% of the aligned steps (their number is given), beside the "
                   "mean noise floor over the same steps.\n\n",
            100 * c->diverge_rel, c->diverge_steps, 100 * c->diverge_rel);
    fprintf(c->md, "| run | steps | final loss (smoothed) | tail: mean rel. diff (steps) | noise floor, tail | "
                   "max / min smoothed rel. diff | final val_loss | verdict |\n|---|---|---|---|---|---|---|---|\n");
    for (int ri = 0; ri < c->nruns; ri++) {
        const an_run *a = &c->runs[ri];
        int64_t *s = NULL, *vs = NULL;
        double *v = NULL, *vv = NULL;
        size_t n = series(a->run, lname, &s, &v), nvl = series(a->run, "val_loss", &vs, &vv);
        for (size_t i = 0; i < nvl; i++)
            fprintf(fv, "%s\t%lld\t%.9g\n", a->label, (long long)vs[i], vv[i]);
        double *sm = malloc((n + 1) * sizeof *sm);
        aligned al = {0};
        if (!sm) {
            rc = 1;
        } else if (!n) {
            fprintf(c->md, "| %s | 0 | - | - | - | - | - | no `%s` series |\n", a->label, lname);
        } else if (align(s, v, n, bs, bv, bn, &al) != 0) {
            rc = 1;
        } else {
            an_smooth(v, n, an_smooth_window(n), sm);
            for (size_t i = 0; i < n; i++)
                fprintf(fc, "%s\t%lld\t%.9g\t%.9g\n", a->label, (long long)s[i], v[i], sm[i]);
            int streak_up = 0, streak_dn = 0;
            int64_t up_at = -1, dn_at = -1;
            double mx = -INFINITY, mn = INFINITY;
            for (size_t i = 0, j = 0; i < al.m; i++) {
                double nf = 0; /* the noise floor at this step (aligned by step) */
                while (j < noise.m && noise.step[j] < al.step[i])
                    j++;
                if (c->noise >= 0 && j < noise.m && noise.step[j] == al.step[i])
                    nf = noise.env[j];
                double thr = fmax(c->diverge_rel, nf);
                fprintf(fd, "%s\t%s\t%lld\t%.9g\t%.9g\t%.9g\t%.9g\n", a->label, c->runs[c->baseline].label,
                        (long long)al.step[i], al.dif[i], al.rel[i], al.rsm[i], c->noise >= 0 ? nf : NAN);
                streak_up = al.rsm[i] > thr ? streak_up + 1 : 0;
                streak_dn = al.rsm[i] < -thr ? streak_dn + 1 : 0;
                if (streak_up == c->diverge_steps && up_at < 0)
                    up_at = al.step[i + 1 - (size_t)c->diverge_steps];
                if (streak_dn == c->diverge_steps && dn_at < 0)
                    dn_at = al.step[i + 1 - (size_t)c->diverge_steps];
                mx = fmax(mx, al.rsm[i]), mn = fmin(mn, al.rsm[i]);
            }
            if (al.bad >= 0 && (up_at < 0 || al.step[al.bad] < up_at))
                up_at = al.step[al.bad];
            /* the tail: exactly the last round(10%) of the aligned steps */
            size_t k = (al.m + 5) / 10;
            if (k < 1)
                k = al.m ? 1 : 0;
            double tail = 0, ntail = 0;
            size_t nk = 0;
            for (size_t i = al.m - k; i < al.m; i++)
                tail += al.rel[i];
            for (size_t j = 0; c->noise >= 0 && j < noise.m; j++)
                if (noise.step[j] >= (k ? al.step[al.m - k] : INT64_MAX))
                    ntail += noise.env[j], nk++;
            tail = k ? tail / (double)k : NAN;
            double nfloor = nk ? ntail / (double)nk : NAN;
            char verdict[160];
            if (ri == c->baseline)
                snprintf(verdict, sizeof verdict, "baseline");
            else if (ri == c->noise)
                snprintf(verdict, sizeof verdict, "noise reference (baseline, another seed)");
            else if (up_at >= 0)
                snprintf(verdict, sizeof verdict, "**diverges at step %lld**", (long long)up_at);
            else if (dn_at >= 0)
                snprintf(verdict, sizeof verdict, "**below the baseline beyond noise from step %lld**", (long long)dn_at);
            else if (c->noise >= 0)
                snprintf(verdict, sizeof verdict, "tracks the baseline (%s the noise floor at the tail)",
                         fabs(tail) <= nfloor ? "within" : "outside");
            else
                snprintf(verdict, sizeof verdict, "tracks the baseline (no noise floor measured)");
            char val[64] = "-", nft[32] = "-";
            if (nvl)
                snprintf(val, sizeof val, "%.4f (step %lld)", vv[nvl - 1], (long long)vs[nvl - 1]);
            if (nk)
                snprintf(nft, sizeof nft, "%.3f%%", 100 * nfloor);
            fprintf(c->md, "| %s | %zu | %.4f | %+.3f%% (%zu) | %s | %+.3f%% / %+.3f%% | %s | %s |\n", a->label, n,
                    sm[n - 1], 100 * tail, k, nft, 100 * mx, 100 * mn, val, verdict);
            fprintf(fs, "%s\t%s\t%zu\t%zu\t%.9g\t%.9g\t%.9g\t%.9g\t%lld\t%s\n", a->label, c->runs[c->baseline].label,
                    al.m, k, tail, nfloor, mx, mn, (long long)(up_at >= 0 ? up_at : dn_at), verdict);
            FILE *j = an_json(c, AN_J_LOSS);
            if (j) {
                const char *jv = ri == c->baseline ? "baseline" : ri == c->noise ? "noise_reference"
                                 : up_at >= 0      ? "diverges"
                                 : dn_at >= 0      ? "below_baseline"
                                                   : "tracks";
                fputs("{\"run\": ", j), an_json_str(j, a->label);
                fputs(", \"baseline\": ", j), an_json_str(j, c->runs[c->baseline].label);
                fprintf(j, ", \"tail_steps\": %zu, \"rel_diff_pct\": ", k);
                an_json_num(j, 100 * tail);
                fputs(", \"noise_floor_pct\": ", j), an_json_num(j, nk ? 100 * nfloor : NAN);
                fputs(", \"verdict\": ", j), an_json_str(j, jv);
                if (up_at >= 0 || dn_at >= 0)
                    fprintf(j, ", \"from_step\": %lld", (long long)(up_at >= 0 ? up_at : dn_at));
                fputs("}", j);
            }
            if (ri != c->baseline && ri != c->noise) {
                q_runs++;
                an_span_add(&q_tail, 100 * tail);
                q_floor = nfloor;
                int within = c->noise >= 0 && up_at < 0 && dn_at < 0 && fabs(tail) <= nfloor;
                q_within += within;
                q_div += up_at >= 0;
                if (!within && q_offl < sizeof q_off - 80)
                    q_offl += (size_t)snprintf(q_off + q_offl, sizeof q_off - q_offl, "%s`%s` %+.2f%%", q_offl ? ", " : "",
                                               a->label, 100 * tail);
            }
            if (ri != c->baseline && ri != c->noise)
                an_finding(c, "loss", "`%s` %s (%+.2f%% over the last %zu steps; noise floor %s)", a->label, verdict,
                           100 * tail, k, nft);
        }
        aligned_free(&al);
        free(s), free(v), free(vs), free(vv), free(sm);
        if (rc)
            break;
    }
    fprintf(c->md, "\n");
    if (q_runs) {
        char a1[64];
        if (c->noise >= 0)
            an_key(c, AN_Q_LOSS, "Loss against the baseline",
                   "%d of %d run%s within the noise floor over the last steps (%s%% from `%s`; two seeds of the baseline "
                   "differ by %.2f%% there)%s%s%s",
                   q_within, q_runs, q_runs == 1 ? "" : "s", an_span_fmt(&q_tail, "%+.2f", a1, sizeof a1),
                   c->runs[c->baseline].label, 100 * q_floor, q_off[0] ? "; outside: " : "", q_off,
                   q_div ? "; some diverge (see the section)" : "");
        else
            an_key(c, AN_Q_LOSS, "Loss against the baseline",
                   "%s%% from `%s` over the last steps; no second seed of the baseline, so no noise floor to judge "
                   "it against%s",
                   an_span_fmt(&q_tail, "%+.2f", a1, sizeof a1), c->runs[c->baseline].label,
                   q_div ? "; some diverge (see the section)" : "");
    }
done:
    aligned_free(&noise);
    free(bs), free(bv), free(ns), free(nv);
    if (an_data_close(c, (FILE *[]){fc, fd, fv, fs}, 4))
        rc = 1;
    return rc;
}
