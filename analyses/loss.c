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

/* one point of a run's curve against the baseline arm's mean curve */
typedef struct {
    int64_t step;
    double dif, rel, rel_sm, band; /* loss - mean, its share of the mean; smoothed; the noise floor */
} diff_pt;

/* an arm's line of the table: its runs, the difference and the verdict */
typedef struct {
    int i;                          /* the arm's first run */
    char runs[400];
    int64_t div;                    /* the first step any of its runs diverged at, -1 none */
    const char *v;
    double d, lo, hi, mdd;          /* %, the 90% interval, min. detectable */
    char dtxt[96], mtxt[32], vtxt[120];
} arm_row;

/* The study: arms, outcomes, baseline, noise and every arm's verdict. */
typedef struct {
    int N, B;
    char why[300];
    int *arm;
    outcome *out;
    armstat *as;
    int64_t *bstep;
    double *bm, *bsd;
    size_t nb;
    double df, sd_pct, k_need;
    int narms;
    diff_pt **diff;
    size_t *ndiff;
    arm_row *rows;
    int nrows;
    int q_eq, q_diff, q_ct, q_arms;
    an_span q_d, q_mdd;
} loss_study;

static void loss_study_free(loss_study *S)
{
    for (int i = 0; S->out && i < S->N; i++)
        outcome_free(&S->out[i]);
    for (int i = 0; S->diff && i < S->N; i++)
        free(S->diff[i]);
    free(S->out), free(S->arm), free(S->as), free(S->bstep), free(S->bm), free(S->bsd);
    free(S->diff), free(S->ndiff), free(S->rows);
}

/* every run's loss and its smoothed curve: 0, or 1 out of memory */
static int loss_outcomes(an_ctx *c, loss_study *S, const char *lname)
{
    for (int i = 0; i < S->N; i++) {
        outcome *o = &S->out[i];
        o->diverged = -1;
        o->n = series(c->runs[i].run, lname, &o->step, &o->val);
        o->sm = malloc((o->n + 1) * sizeof *o->sm);
        if (!o->sm)
            return 1;
        an_smooth(o->val, o->n, an_smooth_window(o->n), o->sm);
    }
    return 0;
}

/* the arms' outcomes and the pooled noise; the replicates each arm would
 * need for a min. detectable difference of the margin */
static void loss_noise(an_ctx *c, loss_study *S)
{
    double ssw = 0;
    for (int i = 0; i < S->N; i++) {
        if (S->arm[i] != i)
            continue;
        armstat *x = &S->as[i];
        x->arm = i;
        double s = 0, s2 = 0;
        for (int j = 0; j < S->N; j++)
            if (S->arm[j] == i && S->out[j].n && isfinite(S->out[j].tail))
                s += S->out[j].tail, s2 += S->out[j].tail * S->out[j].tail, x->k++;
        x->mean = x->k ? s / x->k : NAN;
        x->var = x->k > 1 ? fmax(0, (s2 - s * s / x->k) / (x->k - 1)) : NAN;
        if (x->k > 1)
            ssw += x->var * (x->k - 1), S->df += x->k - 1;
    }
    S->sd_pct = S->df > 0 ? 100 * sqrt(ssw / S->df) / S->as[S->B].mean : NAN;
    S->k_need = NAN;
    if (S->df > 0 && isfinite(S->sd_pct) && S->sd_pct > 0) {
        /* the smallest K with (t975 + t80) sd sqrt(2 / K) <= m, the t's at
         * the df a design of K replicates in each of this study's arms has */
        S->narms = arms_of(c, S->arm);
        for (int K = 2; K <= 100000 && !isfinite(S->k_need); K++) {
            double dfk = (double)S->narms * (K - 1);
            if ((tq(0.975, dfk) + tq(0.80, dfk)) * S->sd_pct * sqrt(2.0 / K) <= c->equivalence_pct)
                S->k_need = K;
        }
    }
}

/* run i's curve against the baseline arm's mean curve, and where it diverged */
static int loss_diff(const an_ctx *c, loss_study *S, int i)
{
    outcome *o = &S->out[i];
    int KA = S->as[S->arm[i]].k, KB = S->as[S->B].k, streak = 0;
    diff_pt *p = S->diff[i] = malloc((o->n + 1) * sizeof *p);
    if (!p)
        return 1;
    for (size_t k = 0, j = 0; k < o->n && S->nb; k++) {
        const int64_t *bstep = S->bstep;
        const double *bm = S->bm, *bsd = S->bsd;
        while (j < S->nb && bstep[j] < o->step[k])
            j++;
        if (j == S->nb || bstep[j] != o->step[k])
            continue;
        double dif = o->val[k] - bm[j], rel = bm[j] != 0 ? (o->sm[k] - bm[j]) / bm[j] : NAN;
        double band = isfinite(bsd[j]) && bm[j] != 0 ? 1.96 * bsd[j] * sqrt(1.0 / KA + 1.0 / KB) / bm[j] : NAN;
        p[S->ndiff[i]++] = (diff_pt){o->step[k], dif, bm[j] != 0 ? dif / bm[j] : NAN, rel, band};
        streak = rel > c->diverge_rel ? streak + 1 : 0;
        if ((streak == c->diverge_steps || !isfinite(o->val[k])) && o->diverged < 0)
            o->diverged = o->step[k];
    }
    return 0;
}

/* arm i's line: its runs, the first divergence, the equivalence test */
static void loss_arm(an_ctx *c, loss_study *S, int i, arm_row *w)
{
    const armstat *x = &S->as[i], *base = &S->as[S->B];
    size_t rl = 0;
    w->i = i, w->div = -1, w->runs[0] = 0;
    for (int j = 0; j < S->N && rl < sizeof w->runs - 80; j++)
        if (S->arm[j] == i) {
            rl += (size_t)snprintf(w->runs + rl, sizeof w->runs - rl, "%s%s", rl ? ", " : "", c->runs[j].label);
            if (S->out[j].diverged >= 0 && (w->div < 0 || S->out[j].diverged < w->div))
                w->div = S->out[j].diverged;
        }
    w->v = "baseline";
    w->d = w->lo = w->hi = w->mdd = NAN;
    if (i != S->B) {
        w->d = 100 * (x->mean - base->mean) / base->mean;
        if (S->df > 0) {
            double se = S->sd_pct * sqrt(1.0 / x->k + 1.0 / base->k);
            double t90 = tq(0.95, S->df), t975 = tq(0.975, S->df), t80 = tq(0.80, S->df);
            w->lo = w->d - t90 * se, w->hi = w->d + t90 * se;
            w->mdd = (t975 + t80) * se;
            w->v = w->lo > -c->equivalence_pct && w->hi < c->equivalence_pct ? "equivalent"
                   : fabs(w->d) > t975 * se                                  ? "different"
                                                                             : "cannot tell";
        } else
            w->v = "cannot tell";
        S->q_arms++;
        S->q_eq += !strcmp(w->v, "equivalent"), S->q_diff += !strcmp(w->v, "different");
        S->q_ct += !strcmp(w->v, "cannot tell");
        an_span_add(&S->q_d, w->d), an_span_add(&S->q_mdd, w->mdd);
    }
    snprintf(w->dtxt, sizeof w->dtxt, "—"), snprintf(w->mtxt, sizeof w->mtxt, "—");
    if (i != S->B)
        snprintf(w->dtxt, sizeof w->dtxt, isfinite(w->lo) ? "%+.2f%% [%+.2f, %+.2f]" : "%+.2f%%", w->d, w->lo, w->hi);
    if (isfinite(w->mdd))
        snprintf(w->mtxt, sizeof w->mtxt, "%.2f%%", w->mdd);
    snprintf(w->vtxt, sizeof w->vtxt, "%s%s", w->v, w->div >= 0 ? "; **diverged**" : "");
    if (w->div >= 0)
        snprintf(w->vtxt + strlen(w->vtxt), sizeof w->vtxt - strlen(w->vtxt), " at step %lld", (long long)w->div);
}

/* the study from the baseline on (the outcomes loaded): 0, or 1 out of memory */
static int loss_compare(an_ctx *c, loss_study *S)
{
    int64_t first = S->out[S->B].step[0];
    for (int i = 0; i < S->N; i++)
        tail_of(&S->out[i], first);
    loss_noise(c, S);
    S->nb = baseline_curve(c, S->arm, S->B, S->out, &S->bstep, &S->bm, &S->bsd);
    S->diff = calloc((size_t)S->N + 1, sizeof *S->diff);
    S->ndiff = calloc((size_t)S->N + 1, sizeof *S->ndiff);
    S->rows = calloc((size_t)S->N + 1, sizeof *S->rows);
    if (!S->diff || !S->ndiff || !S->rows)
        return 1;
    for (int i = 0; i < S->N; i++)
        if (loss_diff(c, S, i))
            return 1;
    /* (every replicate's divergence known first: an arm diverged where any
     * of its runs did) */
    for (int i = 0; i < S->N; i++)
        if (S->arm[i] == i && S->as[i].k) /* (a replicate: reported with its arm) */
            loss_arm(c, S, i, &S->rows[S->nrows++]);
    return 0;
}

/* ---- render ----------------------------------------------------------------------- */

static void loss_tsv_curves(an_ctx *c, const loss_study *S, FILE *fc, FILE *fv)
{
    for (int i = 0; i < S->N; i++) {
        const outcome *o = &S->out[i];
        for (size_t k = 0; k < o->n; k++)
            fprintf(fc, "%s\t%lld\t%.9g\t%.9g\n", c->runs[i].label, (long long)o->step[k], o->val[k], o->sm[k]);
        int64_t *vs = NULL;
        double *vv = NULL;
        size_t nv = series(c->runs[i].run, "val_loss", &vs, &vv);
        for (size_t k = 0; k < nv; k++)
            fprintf(fv, "%s\t%lld\t%.9g\n", c->runs[i].label, (long long)vs[k], vv[k]);
        free(vs), free(vv);
    }
}

static void loss_md_design(an_ctx *c, const loss_study *S)
{
    const armstat *base = &S->as[S->B];
    fprintf(c->md, "Baseline: `%s`%s, %s. Runs are replicates of one arm when their /meta agrees on all but the "
                   "initialisation `seed` (recipe, applied, smooth_swiglu, data_seed, steps, model, data, "
                   "parallel_dp). Outcome of a run: its mean loss over the last 10%% of the steps. Noise: the pooled "
                   "sd of the outcomes within arms, **%.2f%%** of the baseline (df %.0f)%s. **Rule**: two one-sided "
                   "tests at the margin ±%.2g%% (stated in advance: --equivalence-margin) — *equivalent* when the "
                   "90%% interval of the difference lies inside it; else *different* when the two-sided 95%% test "
                   "rejects no difference; else *cannot tell* (always without replicates). Min. detectable: the "
                   "difference the design finds 80%% of the time at α = 0.05.\n\n",
            c->runs[S->B].label, base->k > 1 ? " (arm of replicates)" : "", S->why, S->sd_pct, S->df,
            S->df > 0 ? "" : " — **no replicates: no noise, every verdict is cannot tell**; train K >= 3 replicates of "
                             "the baseline with the same batches (`datasets/study.sh`, or your own loop: another init "
                             "seed, the same data order)",
            c->equivalence_pct);
    if (isfinite(S->k_need))
        fprintf(c->md, "To tell a %.2g%% difference apart at 80%% power with this noise, each of the %d arms needs "
                       "about %.0f replicates: the smallest K with (t₀.₉₇₅ + t₀.₈₀) · sd · √(2/K) ≤ %.2g%%, the "
                       "t's at df = %d (K − 1).\n\n",
                c->equivalence_pct, S->narms, S->k_need, c->equivalence_pct, S->narms);
}

/* the curves against the baseline, the arms' table, their summary rows,
 * summary.json entries and findings */
static void loss_render(an_ctx *c, const loss_study *S, FILE *fd, FILE *fs)
{
    const char *bl = c->runs[S->B].label;
    loss_md_design(c, S);
    fprintf(c->md, "| arm | replicates | tail loss | Δ vs baseline [90%% CI] | min. detectable | verdict |\n"
                   "|---|---|---|---|---|---|\n");
    for (int i = 0; i < S->N; i++)
        for (size_t k = 0; k < S->ndiff[i]; k++) {
            const diff_pt *p = &S->diff[i][k];
            fprintf(fd, "%s\t%s\t%lld\t%.9g\t%.9g\t%.9g\t%.9g\n", c->runs[i].label, bl, (long long)p->step, p->dif,
                    p->rel, p->rel_sm, p->band);
        }
    for (int r = 0; r < S->nrows; r++) {
        const arm_row *w = &S->rows[r];
        const armstat *x = &S->as[w->i];
        int i = w->i;
        fprintf(c->md, "| %s | %d | %.4f | %s | %s | %s |\n", w->runs, x->k, x->mean, w->dtxt, w->mtxt, w->vtxt);
        fprintf(fs, "%s\t%s\t%d\t%s\t%zu\t%.9g\t%.9g\t%.9g\t%.9g\t%.9g\t%.0f\t%.9g\t%.9g\t%s\t%lld\n", c->runs[i].label,
                w->runs, x->k, bl, S->out[i].tail_steps, x->mean, w->d, w->lo, w->hi, S->sd_pct, S->df, w->mdd,
                c->equivalence_pct, w->v, (long long)w->div);
        json_loss(c, &c->runs[i], bl, x->k, S->as[S->B].k, S->out[i].tail_steps, w->d, w->lo, w->hi, S->sd_pct, S->df,
                  w->mdd, i == S->B ? "baseline" : w->v, w->div);
        if (i != S->B)
            an_finding(c, "loss", "`%s` (%d replicate%s): %s%% from the baseline, %s (noise sd %.2f%%, min. detectable "
                                  "%s)",
                       c->runs[i].label, x->k, x->k == 1 ? "" : "s", w->dtxt, w->vtxt, S->sd_pct, w->mtxt);
    }
    fprintf(c->md, "\n");
}

/* the summary's line */
static void loss_key(an_ctx *c, const loss_study *S)
{
    const char *bl = c->runs[S->B].label;
    if (S->q_arms && S->df > 0) {
        char a1[64], a2[64], lead[160];
        if (S->q_ct == S->q_arms)
            snprintf(lead, sizeof lead, "**Cannot tell** on %s%d FP8 arm%s at ±%.2g%%", S->q_arms > 1 ? "all " : "",
                     S->q_arms, S->q_arms == 1 ? "" : "s", c->equivalence_pct);
        else
            snprintf(lead, sizeof lead, "**Equivalent** within ±%.2g%% on %d, **different** on %d, **cannot tell** on %d "
                                        "of %d FP8 arm%s",
                     c->equivalence_pct, S->q_eq, S->q_diff, S->q_ct, S->q_arms, S->q_arms == 1 ? "" : "s");
        char need[120] = "";
        if (isfinite(S->k_need) && S->q_ct)
            snprintf(need, sizeof need, "; about %.0f replicates per arm would decide at ±%.2g%%", S->k_need,
                     c->equivalence_pct);
        an_key(c, AN_Q_LOSS, "Loss against the baseline",
               "%s: Δ %s%% from `%s` (noise sd %.2f%% from %.0f replicate df; min. detectable %s%%)%s", lead,
               an_span_fmt(&S->q_d, "%+.2f", a1, sizeof a1), bl, S->sd_pct, S->df,
               an_span_fmt(&S->q_mdd, "%.2f", a2, sizeof a2), need);
    } else if (S->q_arms) {
        char a1[64];
        an_key(c, AN_Q_LOSS, "Loss against the baseline",
               "**Cannot tell** on %d FP8 arm%s (Δ %s%% from `%s`): no replicates, so no noise to judge a difference "
               "by; train K >= 3 replicates per arm (another initialisation seed, the same batches)",
               S->q_arms, S->q_arms == 1 ? "" : "s", an_span_fmt(&S->q_d, "%+.2f", a1, sizeof a1), bl);
    }
}

int an_loss(an_ctx *c)
{
    FILE *f[4] = {an_data(c, "loss_curves.tsv"), an_data(c, "loss_diff.tsv"), an_data(c, "loss_val.tsv"),
                  an_data(c, "loss_summary.tsv")};
    const char *lname = c->loss_name ? c->loss_name : "loss";
    loss_study S;
    memset(&S, 0, sizeof S);
    S.N = c->nruns;
    S.arm = calloc((size_t)S.N + 1, sizeof *S.arm);
    S.out = calloc((size_t)S.N + 1, sizeof *S.out);
    S.as = calloc((size_t)S.N + 1, sizeof *S.as);
    int rc = 0;
    if (!f[0] || !f[1] || !f[2] || !f[3] || !S.arm || !S.out || !S.as) {
        rc = 1;
        goto done;
    }
    fprintf(f[0], "run\tstep\tloss\tloss_smoothed\n");
    fprintf(f[1], "run\tbaseline\tstep\tdiff\trel_diff\trel_diff_smoothed\tnoise_floor\n");
    fprintf(f[2], "run\tstep\tval_loss\n");
    fprintf(f[3], "arm\truns\treplicates\tbaseline\ttail_steps\ttail_loss\trel_diff_pct\tci90_lo\tci90_hi\t"
                  "noise_sd_pct\tnoise_df\tmin_detectable_pct\tmargin_pct\tverdict\tdiverged_at_step\n");
    fprintf(c->md, "## Loss against the baseline\n\n");
    arms_of(c, S.arm);
    S.B = baseline_arm(c, S.arm, S.why, sizeof S.why);
    if (loss_outcomes(c, &S, lname)) {
        rc = 1;
        goto done;
    }
    loss_tsv_curves(c, &S, f[0], f[2]);
    c->baseline = S.B;
    if (S.B < 0 || !S.out[S.B].n) {
        fprintf(c->md, "Not measured: %s.\n\n", S.B < 0 ? S.why : "the baseline has no loss series (--loss NAME)");
        free(c->key_missing[AN_Q_LOSS]);
        c->key_missing[AN_Q_LOSS] = strdup(S.B < 0 ? S.why : "the baseline has no loss series");
        rc = 3;
        goto done;
    }
    if (loss_compare(c, &S)) {
        rc = 1;
        goto done;
    }
    loss_render(c, &S, f[1], f[3]);
    loss_key(c, &S);
done:
    loss_study_free(&S);
    if (an_data_close(c, f, 4))
        rc = 1;
    return rc;
}
