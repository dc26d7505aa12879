/*
 * loss.c — does FP8 loss track the baseline, by an equivalence test?
 *
 * Runs are grouped into arms: runs whose /meta agree on everything but the
 * initialisation `seed` (recipe, applied, smooth_swiglu, data_seed, steps,
 * model, data, parallel_dp, accumulation) are replicates of one arm.  The
 * baseline arm is the one --baseline names, else the arm of runs without
 * FP8 (/meta recipe bf16 or fp32) with the most replicates; the report says
 * which rule chose it and refuses to guess between equal candidates.
 *
 * Per run the outcome is its tail: the mean loss over the last 10% of the
 * steps it shares with the baseline arm.  The noise is the pooled
 * standard deviation of the outcomes within arms (df = sum of K - 1), in %
 * of the baseline arm's mean.  For each other arm, d = (mean_A - mean_B) /
 * mean_B in % with SE = sd sqrt(1/K_A + 1/K_B):
 *   equivalent  — two one-sided tests at the margin m (--equivalence-margin,
 *                 1%): d -+ t(0.95, df) SE inside (-m, +m);
 *   different   — else when |d| > t(0.975, df) SE;
 *   cannot tell — else, and whenever df = 0 (no replicates: no noise).
 * The minimum detectable difference at 80% power is (t(0.975) + t(0.80)) SE.
 * A run whose loss is not finite, or whose smoothed relative difference to
 * the baseline stays above --diverge for --diverge-steps steps, diverged
 * (said beside the verdict).
 *
 * Data files: loss_curves.tsv (every run's loss and smoothed loss),
 * loss_diff.tsv (each run against the baseline arm's mean curve, with the
 * replicates' 95% band), loss_val.tsv, loss_summary.tsv (per arm).
 */
#include <gsl/gsl_cdf.h>
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

/* ---- arms ----------------------------------------------------------------- */

/* the /meta keys that make runs replicates of one arm when all agree */
static const char *arm_keys[] = {"recipe", "applied", "smooth_swiglu", "data_seed", "steps", "model",
                                 "data", "parallel_dp", "accumulation", "recorded_recipe"};
#define NARMKEY (sizeof arm_keys / sizeof arm_keys[0])

static int same_arm(const an_run *a, const an_run *b)
{
    if (!an_meta(a, "recipe") || !an_meta(b, "recipe"))
        return 0; /* not the trainer's: a run is its own arm */
    for (size_t k = 0; k < NARMKEY; k++) {
        const char *x = an_meta(a, arm_keys[k]), *y = an_meta(b, arm_keys[k]);
        if ((x == NULL) != (y == NULL) || (x && strcmp(x, y) != 0))
            return 0;
    }
    return 1;
}

static int no_fp8(const an_run *a)
{
    const char *r = an_meta(a, "recipe"), *ap = an_meta(a, "applied");
    return (r && (!strcmp(r, "bf16") || !strcmp(r, "fp32"))) || (ap && !strcmp(ap, "no"));
}

/* arm[i] = the index of run i's arm (its first run's index); returns how
 * many arms */
static int arms_of(const an_ctx *c, int *arm)
{
    int n = 0;
    for (int i = 0; i < c->nruns; i++) {
        arm[i] = i;
        for (int j = 0; j < i; j++)
            if (arm[j] == j && same_arm(&c->runs[i], &c->runs[j])) {
                arm[i] = j;
                break;
            }
        n += arm[i] == i;
    }
    return n;
}

static int arm_size(const int *arm, int n, int a)
{
    int k = 0;
    for (int i = 0; i < n; i++)
        k += arm[i] == a;
    return k;
}

/* The baseline arm (its first run), and the rule that chose it in why; -1
 * when none can be chosen without guessing. */
static int baseline_arm(const an_ctx *c, const int *arm, char *why, size_t n)
{
    if (c->baseline_set && c->baseline >= 0 && c->baseline < c->nruns) {
        snprintf(why, n, "named by --baseline");
        return arm[c->baseline];
    }
    int best = -1, bk = 0, tie = 0;
    for (int i = 0; i < c->nruns; i++) {
        if (arm[i] != i || !no_fp8(&c->runs[i]))
            continue;
        int k = arm_size(arm, c->nruns, i);
        if (k > bk)
            best = i, bk = k, tie = 0;
        else if (k == bk)
            tie = 1;
    }
    if (best < 0) {
        snprintf(why, n, "no run without FP8 (/meta recipe bf16 or fp32, or applied=no) among the runs; name one with "
                         "--baseline");
        return -1;
    }
    if (tie) {
        snprintf(why, n, "several arms without FP8 have %d replicates each; name the baseline with --baseline", bk);
        return -1;
    }
    snprintf(why, n, "the arm of runs without FP8 (/meta recipe bf16/fp32 or applied=no) with the most replicates (%d)",
             bk);
    return best;
}

/* ---- one run's outcome ----------------------------------------------------- */

typedef struct {
    size_t n;            /* the run's loss points                   */
    int64_t *step;
    double *val, *sm;    /* loss and its smoothed curve             */
    double tail;         /* mean loss over the tail steps            */
    size_t tail_steps;
    int64_t diverged;    /* step it diverged at, -1 never           */
} outcome;

static void outcome_free(outcome *o) { free(o->step), free(o->val), free(o->sm); }

/* the mean of the run's loss over the last 10% of the steps from `from` on */
static void tail_of(outcome *o, int64_t from)
{
    size_t first = 0;
    while (first < o->n && o->step[first] < from)
        first++;
    size_t m = o->n - first, k = (m + 5) / 10;
    if (!k && m)
        k = 1;
    double s = 0;
    for (size_t i = o->n - k; i < o->n; i++)
        s += o->val[i];
    o->tail = k ? s / (double)k : NAN;
    o->tail_steps = k;
}

/* ---- the analysis ------------------------------------------------------- */

static double tq(double p, double df) { return gsl_cdf_tdist_Pinv(p, df); }

typedef struct {
    int arm, k;          /* the arm's first run, its replicates        */
    double mean, var;    /* of the tail outcomes                       */
} armstat;

/* per-step mean and sd of the baseline arm's smoothed curves, at its first
 * run's steps (bm, bsd), the steps in bstep; n of them */
static size_t baseline_curve(const an_ctx *c, const int *arm, int b, const outcome *out, int64_t **bstep, double **bm,
                             double **bsd)
{
    const outcome *r0 = &out[b];
    *bstep = malloc((r0->n + 1) * sizeof **bstep), *bm = malloc((r0->n + 1) * sizeof **bm);
    *bsd = malloc((r0->n + 1) * sizeof **bsd);
    if (!*bstep || !*bm || !*bsd)
        return 0;
    size_t m = 0;
    for (size_t i = 0; i < r0->n; i++) {
        double s = 0, s2 = 0;
        int k = 0, all = 1;
        for (int j = 0; j < c->nruns && all; j++) {
            if (arm[j] != b)
                continue;
            /* the replicate's value at this step (the series share steps) */
            const outcome *o = &out[j];
            size_t lo = 0, hi = o->n;
            while (lo < hi) {
                size_t mid = (lo + hi) / 2;
                if (o->step[mid] < r0->step[i])
                    lo = mid + 1;
                else
                    hi = mid;
            }
            if (lo == o->n || o->step[lo] != r0->step[i]) {
                all = 0;
                break;
            }
            s += o->sm[lo], s2 += o->sm[lo] * o->sm[lo], k++;
        }
        if (!all || !k)
            continue;
        (*bstep)[m] = r0->step[i];
        (*bm)[m] = s / k;
        (*bsd)[m] = k > 1 ? sqrt(fmax(0, (s2 - s * s / k) / (k - 1))) : NAN;
        m++;
    }
    return m;
}

static void json_loss(an_ctx *c, const an_run *a, const char *base, int K, int KB, size_t tail_steps, double d,
                      double lo90, double hi90, double sd, double df, double mdd, const char *v, int64_t div)
{
    FILE *j = an_json(c, AN_J_LOSS);
    if (!j)
        return;
    fputs("{\"run\": ", j), an_json_str(j, a->label);
    fputs(", \"baseline\": ", j), an_json_str(j, base);
    fprintf(j, ", \"replicates\": %d, \"baseline_replicates\": %d, \"tail_steps\": %zu, \"rel_diff_pct\": ", K, KB,
            tail_steps);
    an_json_num(j, d);
    fputs(", \"ci90\": [", j), an_json_num(j, lo90), fputs(", ", j), an_json_num(j, hi90);
    fputs("], \"noise_sd_pct\": ", j), an_json_num(j, sd);
    fprintf(j, ", \"noise_df\": %.0f, \"min_detectable_pct\": ", df);
    an_json_num(j, mdd);
    fputs(", \"equivalence_margin_pct\": ", j), an_json_num(j, c->equivalence_pct);
    fputs(", \"verdict\": ", j), an_json_str(j, v);
    if (div >= 0)
        fprintf(j, ", \"diverged_at_step\": %lld", (long long)div);
    fputs("}", j);
}

int an_loss(an_ctx *c)
{
    FILE *fc = an_data(c, "loss_curves.tsv"), *fd = an_data(c, "loss_diff.tsv"), *fv = an_data(c, "loss_val.tsv"),
         *fs = an_data(c, "loss_summary.tsv");
    const char *lname = c->loss_name ? c->loss_name : "loss";
    int rc = 0, N = c->nruns;
    int *arm = calloc((size_t)N + 1, sizeof *arm);
    outcome *out = calloc((size_t)N + 1, sizeof *out);
    armstat *as = calloc((size_t)N + 1, sizeof *as);
    int64_t *bstep = NULL;
    double *bm = NULL, *bsd = NULL;
    if (!fc || !fd || !fv || !fs || !arm || !out || !as) {
        rc = 1;
        goto done;
    }
    fprintf(fc, "run\tstep\tloss\tloss_smoothed\n");
    fprintf(fd, "run\tbaseline\tstep\tdiff\trel_diff\trel_diff_smoothed\tnoise_floor\n");
    fprintf(fv, "run\tstep\tval_loss\n");
    fprintf(fs, "arm\truns\treplicates\tbaseline\ttail_steps\ttail_loss\trel_diff_pct\tci90_lo\tci90_hi\tnoise_sd_pct\t"
                "noise_df\tmin_detectable_pct\tmargin_pct\tverdict\tdiverged_at_step\n");
    fprintf(c->md, "## Loss against the baseline\n\n");
    arms_of(c, arm);
    char why[300];
    int B = baseline_arm(c, arm, why, sizeof why);
    /* every run's loss, smoothed */
    for (int i = 0; i < N; i++) {
        outcome *o = &out[i];
        o->diverged = -1;
        o->n = series(c->runs[i].run, lname, &o->step, &o->val);
        o->sm = malloc((o->n + 1) * sizeof *o->sm);
        if (!o->sm) {
            rc = 1;
            goto done;
        }
        an_smooth(o->val, o->n, an_smooth_window(o->n), o->sm);
        for (size_t k = 0; k < o->n; k++)
            fprintf(fc, "%s\t%lld\t%.9g\t%.9g\n", c->runs[i].label, (long long)o->step[k], o->val[k], o->sm[k]);
        int64_t *vs = NULL;
        double *vv = NULL;
        size_t nv = series(c->runs[i].run, "val_loss", &vs, &vv);
        for (size_t k = 0; k < nv; k++)
            fprintf(fv, "%s\t%lld\t%.9g\n", c->runs[i].label, (long long)vs[k], vv[k]);
        free(vs), free(vv);
    }
    c->baseline = B;
    if (B < 0 || !out[B].n) {
        fprintf(c->md, "Not measured: %s.\n\n", B < 0 ? why : "the baseline has no loss series (--loss NAME)");
        free(c->key_missing[AN_Q_LOSS]);
        c->key_missing[AN_Q_LOSS] = strdup(B < 0 ? why : "the baseline has no loss series");
        rc = 3;
        goto done;
    }
    int64_t first = out[B].step[0];
    for (int i = 0; i < N; i++)
        tail_of(&out[i], first);
    /* the arms' outcomes and the pooled noise */
    double ssw = 0, df = 0;
    for (int i = 0; i < N; i++) {
        if (arm[i] != i)
            continue;
        armstat *x = &as[i];
        x->arm = i;
        double s = 0, s2 = 0;
        for (int j = 0; j < N; j++)
            if (arm[j] == i && out[j].n && isfinite(out[j].tail))
                s += out[j].tail, s2 += out[j].tail * out[j].tail, x->k++;
        x->mean = x->k ? s / x->k : NAN;
        x->var = x->k > 1 ? fmax(0, (s2 - s * s / x->k) / (x->k - 1)) : NAN;
        if (x->k > 1)
            ssw += x->var * (x->k - 1), df += x->k - 1;
    }
    const armstat *base = &as[B];
    double sd_pct = df > 0 ? 100 * sqrt(ssw / df) / base->mean : NAN;
    size_t nb = baseline_curve(c, arm, B, out, &bstep, &bm, &bsd);
    fprintf(c->md, "Baseline: `%s`%s, %s. Runs are replicates of one arm when their /meta agrees on all but the "
                   "initialisation `seed` (recipe, applied, smooth_swiglu, data_seed, steps, model, data, "
                   "parallel_dp). Outcome of a run: its mean loss over the last 10%% of the steps. Noise: the pooled "
                   "sd of the outcomes within arms, **%.2f%%** of the baseline (df %.0f)%s. **Rule**: two one-sided "
                   "tests at the margin ±%.2g%% (stated in advance: --equivalence-margin) — *equivalent* when the "
                   "90%% interval of the difference lies inside it; else *different* when the two-sided 95%% test "
                   "rejects no difference; else *cannot tell* (always without replicates). Min. detectable: the "
                   "difference the design finds 80%% of the time at α = 0.05.\n\n",
            c->runs[B].label, base->k > 1 ? " (arm of replicates)" : "", why, sd_pct, df,
            df > 0 ? "" : " — **no replicates: no noise, every verdict is cannot tell**; train K >= 3 replicates of the "
                          "baseline with the same batches (`datasets/study.sh`, or your own loop: another init seed, "
                          "the same data order)",
            c->equivalence_pct);
    double k_need = NAN; /* replicates per arm for a min. detectable difference of the margin */
    if (df > 0 && isfinite(sd_pct) && sd_pct > 0) {
        /* the smallest K with (t975 + t80) sd sqrt(2 / K) <= m, the t's at
         * the df a design of K replicates in each of this study's arms has */
        int narms = arms_of(c, arm);
        for (int K = 2; K <= 100000 && !isfinite(k_need); K++) {
            double dfk = (double)narms * (K - 1);
            if ((tq(0.975, dfk) + tq(0.80, dfk)) * sd_pct * sqrt(2.0 / K) <= c->equivalence_pct)
                k_need = K;
        }
        if (isfinite(k_need))
            fprintf(c->md, "To tell a %.2g%% difference apart at 80%% power with this noise, each of the %d arms needs "
                           "about %.0f replicates: the smallest K with (t₀.₉₇₅ + t₀.₈₀) · sd · √(2/K) ≤ %.2g%%, the "
                           "t's at df = %d (K − 1).\n\n",
                    c->equivalence_pct, narms, k_need, c->equivalence_pct, narms);
    }
    fprintf(c->md, "| arm | replicates | tail loss | Δ vs baseline [90%% CI] | min. detectable | verdict |\n"
                   "|---|---|---|---|---|---|\n");
    int q_eq = 0, q_diff = 0, q_ct = 0, q_arms = 0;
    an_span q_d = {0, 0, 0}, q_mdd = {0, 0, 0};
    for (int i = 0; i < N && !rc; i++) {
        /* every run's curve against the baseline arm's mean curve */
        outcome *o = &out[i];
        int K = arm[i] == i ? as[i].k : 0, KA = as[arm[i]].k;
        int streak = 0;
        for (size_t k = 0, j = 0; k < o->n && nb; k++) {
            while (j < nb && bstep[j] < o->step[k])
                j++;
            if (j == nb || bstep[j] != o->step[k])
                continue;
            double dif = o->val[k] - bm[j], rel = bm[j] != 0 ? (o->sm[k] - bm[j]) / bm[j] : NAN;
            double band = isfinite(bsd[j]) && bm[j] != 0 ? 1.96 * bsd[j] * sqrt(1.0 / KA + 1.0 / base->k) / bm[j] : NAN;
            fprintf(fd, "%s\t%s\t%lld\t%.9g\t%.9g\t%.9g\t%.9g\n", c->runs[i].label, c->runs[B].label,
                    (long long)o->step[k], dif, bm[j] != 0 ? dif / bm[j] : NAN, rel, band);
            streak = rel > c->diverge_rel ? streak + 1 : 0;
            if ((streak == c->diverge_steps || !isfinite(o->val[k])) && o->diverged < 0)
                o->diverged = isfinite(o->val[k]) ? o->step[k] : o->step[k];
        }
        if (!K)
            continue; /* (a replicate: reported with its arm) */
        const armstat *x = &as[i];
        char runs[400] = "";
        size_t rl = 0;
        int64_t div = -1;
        for (int j = 0; j < N && rl < sizeof runs - 80; j++)
            if (arm[j] == i) {
                rl += (size_t)snprintf(runs + rl, sizeof runs - rl, "%s%s", rl ? ", " : "", c->runs[j].label);
                if (out[j].diverged >= 0 && (div < 0 || out[j].diverged < div))
                    div = out[j].diverged;
            }
        const char *v = "baseline";
        double d = NAN, lo = NAN, hi = NAN, mdd = NAN, se = NAN;
        if (i != B) {
            d = 100 * (x->mean - base->mean) / base->mean;
            if (df > 0) {
                se = sd_pct * sqrt(1.0 / x->k + 1.0 / base->k);
                double t90 = tq(0.95, df), t975 = tq(0.975, df), t80 = tq(0.80, df);
                lo = d - t90 * se, hi = d + t90 * se;
                mdd = (t975 + t80) * se;
                v = lo > -c->equivalence_pct && hi < c->equivalence_pct ? "equivalent"
                    : fabs(d) > t975 * se                               ? "different"
                                                                        : "cannot tell";
            } else
                v = "cannot tell";
            q_arms++;
            q_eq += !strcmp(v, "equivalent"), q_diff += !strcmp(v, "different"), q_ct += !strcmp(v, "cannot tell");
            an_span_add(&q_d, d), an_span_add(&q_mdd, mdd);
        }
        char dtxt[96] = "—", mtxt[32] = "—", vtxt[120];
        if (i != B)
            snprintf(dtxt, sizeof dtxt, isfinite(lo) ? "%+.2f%% [%+.2f, %+.2f]" : "%+.2f%%", d, lo, hi);
        if (isfinite(mdd))
            snprintf(mtxt, sizeof mtxt, "%.2f%%", mdd);
        snprintf(vtxt, sizeof vtxt, "%s%s", v, div >= 0 ? "; **diverged**" : "");
        if (div >= 0)
            snprintf(vtxt + strlen(vtxt), sizeof vtxt - strlen(vtxt), " at step %lld", (long long)div);
        fprintf(c->md, "| %s | %d | %.4f | %s | %s | %s |\n", runs, x->k, x->mean, dtxt, mtxt, vtxt);
        fprintf(fs, "%s\t%s\t%d\t%s\t%zu\t%.9g\t%.9g\t%.9g\t%.9g\t%.9g\t%.0f\t%.9g\t%.9g\t%s\t%lld\n", c->runs[i].label,
                runs, x->k, c->runs[B].label, out[i].tail_steps, x->mean, d, lo, hi, sd_pct, df, mdd,
                c->equivalence_pct, v, (long long)div);
        json_loss(c, &c->runs[i], c->runs[B].label, x->k, base->k, out[i].tail_steps, d, lo, hi, sd_pct, df, mdd,
                  i == B ? "baseline" : v, div);
        if (i != B)
            an_finding(c, "loss", "`%s` (%d replicate%s): %s%% from the baseline, %s (noise sd %.2f%%, min. detectable "
                                  "%s)",
                       c->runs[i].label, x->k, x->k == 1 ? "" : "s", dtxt, vtxt, sd_pct, mtxt);
    }
    fprintf(c->md, "\n");
    if (q_arms && df > 0) {
        char a1[64], a2[64], lead[160];
        if (q_ct == q_arms)
            snprintf(lead, sizeof lead, "**Cannot tell** on %s%d FP8 arm%s at ±%.2g%%", q_arms > 1 ? "all " : "",
                     q_arms, q_arms == 1 ? "" : "s", c->equivalence_pct);
        else
            snprintf(lead, sizeof lead, "**Equivalent** within ±%.2g%% on %d, **different** on %d, **cannot tell** on %d "
                                        "of %d FP8 arm%s",
                     c->equivalence_pct, q_eq, q_diff, q_ct, q_arms, q_arms == 1 ? "" : "s");
        char need[120] = "";
        if (isfinite(k_need) && q_ct)
            snprintf(need, sizeof need, "; about %.0f replicates per arm would decide at ±%.2g%%", k_need,
                     c->equivalence_pct);
        an_key(c, AN_Q_LOSS, "Loss against the baseline",
               "%s: Δ %s%% from `%s` (noise sd %.2f%% from %.0f replicate df; min. detectable %s%%)%s", lead,
               an_span_fmt(&q_d, "%+.2f", a1, sizeof a1), c->runs[B].label, sd_pct, df,
               an_span_fmt(&q_mdd, "%.2f", a2, sizeof a2), need);
    } else if (q_arms) {
        char a1[64];
        an_key(c, AN_Q_LOSS, "Loss against the baseline",
               "**Cannot tell** on %d FP8 arm%s (Δ %s%% from `%s`): no replicates, so no noise to judge a difference "
               "by; train K >= 3 replicates per arm (another initialisation seed, the same batches)",
               q_arms, q_arms == 1 ? "" : "s", an_span_fmt(&q_d, "%+.2f", a1, sizeof a1), c->runs[B].label);
    }
done:
    for (int i = 0; out && i < N; i++)
        outcome_free(&out[i]);
    free(out), free(arm), free(as), free(bstep), free(bm), free(bsd);
    if (an_data_close(c, (FILE *[]){fc, fd, fv, fs}, 4))
        rc = 1;
    return rc;
}
