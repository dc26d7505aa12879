/*
 * dynamics.c — how fast amax moves from step to step, at tensor, row and
 * block granularity: the evidence for (or against) "per-tensor amax is
 * stable enough for delayed scaling, per-block amax is not" (BRIEF §4).
 *
 * Tensor granularity uses every recorded step: r_t = log2(amax_t /
 * amax_{t-1}) between consecutive records.  Row and block granularity need
 * the values themselves: consecutive snapshots of a tensor give each row's
 * and each block's amax at both steps; the tensor's own ratio over the same
 * pairs is listed beside them, so the comparison is at equal lag.
 *
 * Data files: dynamics_tensors.tsv (per tensor, recorded steps),
 * dynamics_granularity.tsv (per tensor x granularity, snapshot pairs).
 */
#include <gsl/gsl_fit.h>
#include <gsl/gsl_statistics_double.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "analysis.h"
#include "fp8_error.h"

typedef struct {
    size_t n;
    double sd, p01, p50, p99, maxabs, grow2; /* grow2: share with r > 1 (amax doubled) */
} rstats;

static void rstats_of(double *r, size_t n, rstats *o)
{
    memset(o, 0, sizeof *o);
    o->n = n;
    o->sd = o->p01 = o->p50 = o->p99 = o->maxabs = o->grow2 = NAN;
    if (n < 2)
        return;
    o->sd = gsl_stats_sd(r, 1, n);
    size_t g = 0;
    double m = 0;
    for (size_t i = 0; i < n; i++)
        g += r[i] > 1, m = fmax(m, fabs(r[i]));
    o->maxabs = m;
    o->grow2 = (double)g / (double)n;
    o->p01 = an_quantile(r, n, 0.01); /* sorts r */
    o->p50 = gsl_stats_quantile_from_sorted_data(r, 1, n, 0.5);
    o->p99 = gsl_stats_quantile_from_sorted_data(r, 1, n, 0.99);
}

/* amax of each unit: rows (unit = 0), blocks of `bw` along rows. */
static size_t unit_amax(const float *x, size_t rows, size_t cols, size_t bw, double *out)
{
    size_t k = 0;
    size_t w = bw ? bw : cols;
    for (size_t i = 0; i < rows; i++)
        for (size_t j0 = 0; j0 < cols; j0 += w) {
            double m = 0;
            for (size_t j = j0; j < j0 + w && j < cols; j++) {
                double v = fabs((double)x[i * cols + j]);
                if (isfinite(v) && v > m)
                    m = v;
            }
            out[k++] = m;
        }
    return k;
}

/* pooled ratios of one tensor's snapshots, per granularity */
enum { G_TENSOR, G_ROW, G_B128, G_B32, NG };
static const char *gname[NG] = {"tensor", "row", "block 1x128", "block 1x32"};

typedef struct {
    double *r[NG];
    size_t n[NG], cap[NG];
} pool;

static int push(pool *p, int g, double v)
{
    if (p->n[g] == p->cap[g]) {
        size_t c = p->cap[g] ? 2 * p->cap[g] : 1024;
        double *q = realloc(p->r[g], c * sizeof *q);
        if (!q)
            return -1;
        p->r[g] = q, p->cap[g] = c;
    }
    p->r[g][p->n[g]++] = v;
    return 0;
}

static int snapshot_ratios(const an_run *a, int t, pool *P, int64_t *lag, size_t *pairs)
{
    size_t idx[AN_MAX_SNAPSHOTS], ns = an_snapshots(a, t, idx);
    *pairs = 0;
    if (ns < 2)
        return 0;
    /* the shortest gap between consecutive snapshots: only pairs that far
     * apart are pooled (probes with snapshot_pairs give lag 1) */
    int64_t minlag = INT64_MAX;
    for (size_t k = 1; k < ns; k++) {
        int64_t g = a->run->snapshots[idx[k]].step - a->run->snapshots[idx[k - 1]].step;
        if (g > 0 && g < minlag)
            minlag = g;
    }
    if (minlag == INT64_MAX)
        return 0;
    const fp8_snapshot *s0 = &a->run->snapshots[idx[0]];
    size_t rows = s0->rows, cols = s0->cols, n = rows * cols, nu = rows * cols + rows;
    float *x = malloc(n * sizeof *x);
    double *prev[NG], *cur[NG];
    size_t cnt[NG];
    int rc = 0;
    for (int g = 0; g < NG; g++) {
        prev[g] = malloc(nu * sizeof(double));
        cur[g] = malloc(nu * sizeof(double));
        rc |= !prev[g] || !cur[g];
    }
    if (!x || rc)
        rc = -1;
    int64_t prev_step = 0;
    for (size_t k = 0; k < ns && !rc; k++) {
        const fp8_snapshot *s = &a->run->snapshots[idx[k]];
        if (s->rows != rows || s->cols != cols || fp8_run_snapshot_read(a->run, idx[k], x) != FP8_OK)
            continue;
        cnt[G_TENSOR] = unit_amax(x, 1, n, 0, cur[G_TENSOR]);
        cnt[G_ROW] = unit_amax(x, rows, cols, 0, cur[G_ROW]);
        cnt[G_B128] = unit_amax(x, rows, cols, 128, cur[G_B128]);
        cnt[G_B32] = unit_amax(x, rows, cols, 32, cur[G_B32]);
        if (k > 0 && s->step - prev_step == minlag) {
            *lag = minlag;
            (*pairs)++;
            for (int g = 0; g < NG && !rc; g++)
                for (size_t u = 0; u < cnt[g]; u++)
                    if (prev[g][u] > 0 && cur[g][u] > 0)
                        rc |= push(P, g, log2(cur[g][u] / prev[g][u]));
        }
        for (int g = 0; g < NG; g++) {
            double *tmp = prev[g];
            prev[g] = cur[g], cur[g] = tmp;
        }
        prev_step = s->step;
    }
    free(x);
    for (int g = 0; g < NG; g++)
        free(prev[g]), free(cur[g]);
    return rc;
}

int an_dynamics(an_ctx *c)
{
    FILE *ft = an_data(c, "dynamics_tensors.tsv"), *fg = an_data(c, "dynamics_granularity.tsv");
    int rc = 0;
    if (!ft || !fg) {
        rc = 1;
        goto done;
    }
    fprintf(ft, "run\ttensor\trole\tlayer\tsteps\tlag\tsd_log2\tp01\tp50\tp99\tmax_abs\tshare_doubled\t"
                "autocorr_lag1\ttrend_bits_per_1000_steps\ttrend_stderr\n");
    fprintf(fg, "run\ttensor\tgranularity\tlag\tpairs\tratios\tsd_log2\tp01\tp50\tp99\tmax_abs\tshare_doubled\n");
    fprintf(c->md, "## amax dynamics: tensor, row and block granularity\n\n"
                   "r = log2(amax_t / amax_{t-lag}): the step-to-step change in bits; a delayed scale is stale by "
                   "at least one step, so large positive r is what overflows it. share doubled: P(r > 1).\n\n");
    for (int ri = 0; ri < c->nruns; ri++) {
        const an_run *a = &c->runs[ri];
        int T = a->run->ntensors;
        double sd_sum = 0;
        int sd_n = 0;
        for (int t = 0; t < T; t++) {
            int r = an_input_recipe(a, t);
            size_t n;
            const size_t *ix = an_series(a, t, r, &n);
            if (n < 3)
                continue;
            double *rr = malloc(n * sizeof *rr), *xs = malloc(n * sizeof *xs), *ys = malloc(n * sizeof *ys);
            if (!rr || !xs || !ys) {
                free(rr), free(xs), free(ys);
                rc = 1;
                goto done;
            }
            size_t m = 0, q = 0;
            for (size_t k = 0; k < n; k++) {
                const fp8_summary *x = an_rec(a, ix[k]);
                if (x->amax > 0 && isfinite(x->amax))
                    xs[q] = (double)x->step, ys[q++] = log2(x->amax);
                if (k > 0) {
                    const fp8_summary *p = an_rec(a, ix[k - 1]);
                    if (p->amax > 0 && x->amax > 0 && isfinite(p->amax) && isfinite(x->amax))
                        rr[m++] = log2(x->amax / p->amax);
                }
            }
            double ac = m > 2 ? gsl_stats_lag1_autocorrelation(rr, 1, m) : NAN;
            double c0 = NAN, c1 = NAN, cov00, cov01, cov11, sumsq;
            if (q > 2)
                gsl_fit_linear(xs, 1, ys, 1, q, &c0, &c1, &cov00, &cov01, &cov11, &sumsq);
            rstats s;
            rstats_of(rr, m, &s);
            fprintf(ft, "%s\t%s\t%s\t%d\t%zu\t%lld\t%.9g\t%.9g\t%.9g\t%.9g\t%.9g\t%.9g\t%.9g\t%.9g\t%.9g\n", a->label,
                    a->run->tensor_name[t], fp8_role_name((fp8_role)a->run->tensor_role[t]), a->run->tensor_layer[t],
                    n, (long long)a->record_every, s.sd, s.p01, s.p50, s.p99, s.maxabs, s.grow2, ac, 1000 * c1,
                    q > 2 ? 1000 * sqrt(cov11) : NAN);
            if (!isnan(s.sd))
                sd_sum += s.sd, sd_n++;
            free(rr), free(xs), free(ys);
        }
        fprintf(c->md, "### Run `%s`\n\nPer tensor over recorded steps (lag %lld): mean sd of r over %d tensors = %.3f "
                       "bits (`dynamics_tensors.tsv`: quantiles, lag-1 autocorrelation, linear trend of log2 amax).\n\n",
                a->label, (long long)a->record_every, sd_n, sd_n ? sd_sum / sd_n : NAN);
        /* snapshots: tensor vs row vs block at the same lag */
        pool all;
        memset(&all, 0, sizeof all);
        int64_t lag = 0;
        int with = 0;
        for (int t = 0; t < T; t++) {
            pool P;
            memset(&P, 0, sizeof P);
            size_t pairs = 0;
            int64_t l = 0;
            if (snapshot_ratios(a, t, &P, &l, &pairs) != 0) {
                fprintf(stderr, "fp8prof: dynamics: out of memory reading snapshots\n");
                rc = 1;
            }
            if (pairs) {
                with++;
                lag = l;
                for (int g = 0; g < NG; g++) {
                    rstats s;
                    for (size_t i = 0; i < P.n[g]; i++)
                        push(&all, g, P.r[g][i]);
                    size_t nr = P.n[g];
                    rstats_of(P.r[g], nr, &s);
                    fprintf(fg, "%s\t%s\t%s\t%lld\t%zu\t%zu\t%.9g\t%.9g\t%.9g\t%.9g\t%.9g\t%.9g\n", a->label,
                            a->run->tensor_name[t], gname[g], (long long)l, pairs, nr, s.sd, s.p01, s.p50, s.p99,
                            s.maxabs, s.grow2);
                }
            }
            for (int g = 0; g < NG; g++)
                free(P.r[g]);
        }
        if (!with) {
            fprintf(c->md, "No tensor of this run has two snapshots: row and block granularity need them "
                           "(probe option snapshot_pattern / snapshot_every).\n\n");
        } else {
            rstats s[NG];
            fprintf(c->md, "Snapshots of %d tensors, pairs %lld steps apart, pooled:\n\n| granularity | ratios | sd of r "
                           "(bits) | p01 | p99 | max abs | share doubled |\n|---|---|---|---|---|---|---|\n",
                    with, (long long)lag);
            for (int g = 0; g < NG; g++) {
                rstats_of(all.r[g], all.n[g], &s[g]);
                fprintf(c->md, "| %s | %zu | %.3f | %.3f | %.3f | %.3f | %.4f |\n", gname[g], all.n[g], s[g].sd,
                        s[g].p01, s[g].p99, s[g].maxabs, s[g].grow2);
            }
            double ratio = s[G_TENSOR].sd > 0 ? s[G_B128].sd / s[G_TENSOR].sd : NAN;
            const char *verdict = !(ratio == ratio) ? "is inconclusive on (tensor amax constant, or too few ratios)"
                                  : ratio >= 2      ? "supports"
                                  : ratio >= 1.25   ? "weakly supports"
                                                    : "does not support";
            fprintf(c->md, "\nRule: the claim \"per-tensor amax suits delayed scaling, per-block amax needs "
                           "just-in-time scaling\" is supported when the sd of r of 1x128 blocks is at least 2x the "
                           "tensor's at the same lag (weakly: 1.25x). Here it is %.2fx: this run **%s** the claim.\n\n",
                    ratio, verdict);
            if (ratio == ratio)
                an_finding(c, "dynamics", "`%s`: %.2fx (sd %.2f vs %.2f bits, lag %lld) — %s", a->label, ratio,
                           s[G_B128].sd, s[G_TENSOR].sd, (long long)lag, verdict);
            else
                an_finding(c, "dynamics", "`%s`: inconclusive (tensor amax constant between snapshots)", a->label);
        }
        for (int g = 0; g < NG; g++)
            free(all.r[g]);
    }
done:
    if (an_data_close(c, (FILE *[]){ft, fg}, 2))
        rc = 1;
    return rc;
}
