/*
 * dynamics.c — how fast amax moves from one step to the next at tensor,
 * row and block granularity (descriptive: what the stale scale costs at
 * each granularity is claim.c's test, on identical tensors).
 *
 * r = log2(amax_t / amax_{t-1}), one step apart.  Tensor granularity: the
 * every-step amax series (schema 3), every consecutive pair after warm-up
 * (older files: consecutive records).  Rows, 1x128 blocks and 128x128
 * tiles: the per-block amax summaries the probes store at steps kK and
 * kK+1 for every tensor (rows and tiles are maxima of 1x128 blocks); files
 * without them fall back to consecutive snapshots of the snapshot tensors.
 * Per tensor the ratio sd(r, 1x128 blocks) / sd(r, tensor) gets a 95%
 * bootstrap interval: step pairs resampled whole for the blocks (the blocks
 * of one pair move together), circular blocks of steps for the tensor.
 *
 * Data files: dynamics_tensors.tsv (per tensor, every step),
 * dynamics_granularity.tsv (per tensor x granularity), dynamics_volatility.tsv.
 */
#include <gsl/gsl_rng.h>
#include <gsl/gsl_sort.h>
#include <gsl/gsl_statistics_double.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "analysis.h"
#include "keys.h"
#include "series.h"
#include "fp8_error.h"
#include "inference.h"

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
    double *c = malloc(n * sizeof *c);
    if (!c)
        return;
    memcpy(c, r, n * sizeof *c);
    o->p01 = an_quantile_select(c, n, 0.01); /* (millions of ratios: selection, not a sort) */
    o->p50 = an_quantile_select(c, n, 0.5);
    o->p99 = an_quantile_select(c, n, 0.99);
    free(c);
}

enum { G_ROW, G_B128, G_T128, G_B32, NG };
static const char *gname[NG] = {"row", "block 1x128", "tile 128x128", "block 1x32"};

/* ratios of one tensor at one granularity, grouped by step pair */
typedef struct {
    double *r;
    size_t n, cap;
    size_t *pair_end; /* r[pair_end[k-1] .. pair_end[k]) belong to pair k */
    size_t npairs, pcap;
} pool;

static int push(pool *p, double v)
{
    if (p->n == p->cap) {
        size_t c = p->cap ? 2 * p->cap : 1024;
        double *q = realloc(p->r, c * sizeof *q);
        if (!q)
            return -1;
        p->r = q, p->cap = c;
    }
    p->r[p->n++] = v;
    return 0;
}

static int end_pair(pool *p)
{
    if (p->npairs == p->pcap) {
        size_t c = p->pcap ? 2 * p->pcap : 64;
        size_t *q = realloc(p->pair_end, c * sizeof *q);
        if (!q)
            return -1;
        p->pair_end = q, p->pcap = c;
    }
    p->pair_end[p->npairs++] = p->n;
    return 0;
}

static void pool_free(pool *p) { free(p->r), free(p->pair_end); }

/* unit amaxes of a rows x nb grid of 1x128 block amaxes: rows, blocks, 128x128 tiles */
static size_t derive(const float *b, size_t rows, size_t nb, int g, double *out)
{
    size_t k = 0;
    if (g == G_B128) {
        for (size_t i = 0; i < rows * nb; i++)
            out[k++] = b[i];
    } else if (g == G_ROW) {
        for (size_t i = 0; i < rows; i++) {
            double m = 0;
            for (size_t j = 0; j < nb; j++)
                m = fmax(m, b[i * nb + j]);
            out[k++] = m;
        }
    } else {
        for (size_t i0 = 0; i0 < rows; i0 += 128)
            for (size_t j = 0; j < nb; j++) {
                double m = 0;
                for (size_t i = i0; i < rows && i < i0 + 128; i++)
                    m = fmax(m, b[i * nb + j]);
                out[k++] = m;
            }
    }
    return k;
}

/* Block-amax pairs one step apart (schema 3); all: the whole /block_amax. */
static int block_ratios(const an_run *a, int t, const float *all, size_t nall, pool *P, size_t *pairs)
{
    const fp8_run *r = a->run;
    *pairs = 0;
    float *prev = NULL, *cur = NULL;
    double *u0 = NULL, *u1 = NULL;
    const fp8_block_amax *pb = NULL;
    int rc = 0;
    for (size_t i = 0; i < r->nblock_amax && !rc; i++) {
        const fp8_block_amax *b = &r->block_amax[i];
        if ((int)b->tensor != t || b->block != 128 || an_is_warm(a, t, b->step))
            continue;
        if (b->offset > nall || b->count > nall - b->offset)
            continue; /* a reader ahead of the writer's data */
        float *buf = realloc(cur, (size_t)b->count * sizeof *buf);
        if (!buf) {
            rc = -1;
            break;
        }
        cur = buf;
        memcpy(cur, all + b->offset, (size_t)b->count * sizeof *cur);
        if (pb && b->step == pb->step + 1 && b->rows == pb->rows && b->cols == pb->cols) {
            size_t nb = (size_t)(b->count / b->rows), nu = (size_t)b->count + (size_t)b->rows;
            double *x = realloc(u0, nu * sizeof *x), *y = x ? realloc(u1, nu * sizeof *y) : NULL;
            if (x)
                u0 = x;
            if (!x || !y) {
                rc = -1;
                break;
            }
            u1 = y;
            for (int g = 0; g < G_B32 && !rc; g++) {
                size_t k0 = derive(prev, (size_t)b->rows, nb, g, u0), k1 = derive(cur, (size_t)b->rows, nb, g, u1);
                for (size_t u = 0; u < k0 && u < k1 && !rc; u++)
                    if (u0[u] > 0 && u1[u] > 0)
                        rc |= push(&P[g], log2(u1[u] / u0[u]));
                rc |= end_pair(&P[g]);
            }
            (*pairs)++;
        }
        float *tmp = prev;
        prev = cur, cur = tmp;
        pb = b;
    }
    free(prev), free(cur), free(u0), free(u1);
    return rc;
}

/* Fallback for files without block amaxes: consecutive snapshots (the
 * shortest gap), 1x128 and 1x32 blocks and rows from the values. */
static int snapshot_ratios(const an_run *a, int t, pool *P, int64_t *lag, size_t *pairs)
{
    size_t idx[AN_MAX_SNAPSHOTS], ns = an_snapshots(a, t, idx);
    *pairs = 0;
    if (ns < 2)
        return 0;
    int64_t minlag = INT64_MAX;
    for (size_t k = 1; k < ns; k++) {
        int64_t g = a->run->snapshots[idx[k]].step - a->run->snapshots[idx[k - 1]].step;
        if (g > 0 && g < minlag)
            minlag = g;
    }
    if (minlag == INT64_MAX)
        return 0;
    const fp8_snapshot *s0 = &a->run->snapshots[idx[0]];
    size_t rows = (size_t)s0->rows, cols = (size_t)s0->cols, n = rows * cols;
    float *x = malloc(n * sizeof *x);
    double *prev[NG], *cur[NG];
    size_t cnt[NG] = {0};
    int rc = !x;
    for (int g = 0; g < NG; g++) {
        prev[g] = malloc((n + rows) * sizeof(double));
        cur[g] = malloc((n + rows) * sizeof(double));
        rc |= !prev[g] || !cur[g];
    }
    int64_t prev_step = 0;
    for (size_t k = 0; k < ns && !rc; k++) {
        const fp8_snapshot *s = &a->run->snapshots[idx[k]];
        if (s->rows != rows || s->cols != cols || fp8_run_snapshot_read(a->run, idx[k], x) != FP8_OK)
            continue;
        for (int g = 0; g < NG; g++) {
            size_t w = g == G_ROW ? cols : g == G_B32 ? 32 : 128, c = 0;
            if (g == G_T128) {
                cnt[g] = 0;
                continue;
            }
            for (size_t i = 0; i < rows; i++)
                for (size_t j0 = 0; j0 < cols; j0 += w) {
                    double m = 0;
                    for (size_t j = j0; j < j0 + w && j < cols; j++)
                        if (isfinite(x[i * cols + j]))
                            m = fmax(m, fabs((double)x[i * cols + j]));
                    cur[g][c++] = m;
                }
            cnt[g] = c;
        }
        if (k > 0 && s->step - prev_step == minlag && !an_is_warm(a, t, prev_step)) {
            *lag = minlag;
            (*pairs)++;
            for (int g = 0; g < NG && !rc; g++) {
                for (size_t u = 0; u < cnt[g]; u++)
                    if (prev[g][u] > 0 && cur[g][u] > 0)
                        rc |= push(&P[g], log2(cur[g][u] / prev[g][u]));
                rc |= end_pair(&P[g]);
            }
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

/* The tensor's r series: every step one apart after warm-up (the every-step
 * rows), else consecutive records; also log2 amax against step for the trend. */
static size_t tensor_series(const an_run *a, int t, double *r, double *xs, double *ys, size_t *q, int64_t *lag)
{
    int src = -1;
    size_t best = 0, n, m = 0, nr;
    const int *rs = an_tensor_recipes(a, t, &nr);
    for (size_t i = 0; i < nr; i++)
        if (an_steps(a, t, rs[i], &n), n > best)
            best = n, src = rs[i];
    *q = 0;
    if (src >= 0) {
        const size_t *ix = an_steps(a, t, src, &n);
        *lag = 1;
        for (size_t k = 0; k < n; k++) {
            const fp8_step_row *w = an_steprow(a, ix[k]);
            if (an_is_warm(a, t, w->step))
                continue;
            if (w->amax > 0)
                xs[*q] = (double)w->step, ys[(*q)++] = log2(w->amax);
            if (k > 0) {
                const fp8_step_row *p = an_steprow(a, ix[k - 1]);
                if (w->step == p->step + 1 && p->amax > 0 && w->amax > 0 && !an_is_warm(a, t, p->step))
                    r[m++] = log2((double)w->amax / (double)p->amax);
            }
        }
        return m;
    }
    const size_t *ix = an_series(a, t, an_input_recipe(a, t), &n);
    *lag = a->record_every;
    for (size_t k = 0; k < n; k++) {
        const fp8_summary *x = an_rec(a, ix[k]);
        if (an_is_warm(a, t, x->step))
            continue;
        if (x->amax > 0 && isfinite(x->amax))
            xs[*q] = (double)x->step, ys[(*q)++] = log2(x->amax);
        if (k > 0) {
            const fp8_summary *p = an_rec(a, ix[k - 1]);
            if (p->amax > 0 && x->amax > 0 && isfinite(p->amax) && isfinite(x->amax) && !an_is_warm(a, t, p->step))
                r[m++] = log2(x->amax / p->amax);
        }
    }
    return m;
}

/* 95% interval of sd(block r) / sd(tensor r): step pairs resampled whole
 * for the blocks, circular blocks of steps for the tensor series. */
static void ratio_ci(const an_ctx *c, const pool *B, const double *tr, size_t tn, double *lo, double *hi)
{
    *lo = *hi = NAN;
    if (B->npairs < 2 || tn < 3 || c->boot < 10)
        return;
    double *v = malloc((size_t)c->boot * sizeof *v);
    gsl_rng *rng = gsl_rng_alloc(gsl_rng_mt19937);
    if (!v || !rng) {
        free(v);
        if (rng)
            gsl_rng_free(rng);
        return;
    }
    gsl_rng_set(rng, c->seed);
    /* per pair: count, sum and sum of squares, so a resample costs O(pairs) */
    double *ps = malloc(3 * B->npairs * sizeof *ps);
    if (!ps) {
        free(v), gsl_rng_free(rng);
        return;
    }
    for (size_t p = 0; p < B->npairs; p++) {
        double a1 = 0, a2 = 0;
        size_t b0 = p ? B->pair_end[p - 1] : 0;
        for (size_t i = b0; i < B->pair_end[p]; i++)
            a1 += B->r[i], a2 += B->r[i] * B->r[i];
        ps[3 * p] = (double)(B->pair_end[p] - b0), ps[3 * p + 1] = a1, ps[3 * p + 2] = a2;
    }
    size_t L = an_block_length(tr, tn);
    double *P1 = malloc((tn + 1) * sizeof *P1), *P2 = malloc((tn + 1) * sizeof *P2);
    if (!P1 || !P2) {
        free(P1), free(P2), free(v), free(ps), gsl_rng_free(rng);
        return;
    }
    P1[0] = P2[0] = 0;
    for (size_t i = 0; i < tn; i++)
        P1[i + 1] = P1[i] + tr[i], P2[i + 1] = P2[i] + tr[i] * tr[i];
    int k = 0;
    for (int b = 0; b < c->boot; b++) {
        double s1 = 0, s2 = 0, n = 0;
        for (size_t p = 0; p < B->npairs; p++) {
            size_t q = (size_t)gsl_rng_uniform_int(rng, (unsigned long)B->npairs);
            n += ps[3 * q], s1 += ps[3 * q + 1], s2 += ps[3 * q + 2];
        }
        double t1 = 0, t2 = 0, tn2 = 0;
        for (size_t taken = 0; taken < tn;) { /* circular blocks, sums from the prefix arrays */
            size_t st = (size_t)gsl_rng_uniform_int(rng, (unsigned long)tn), len = tn - taken < L ? tn - taken : L;
            if (st + len <= tn)
                t1 += P1[st + len] - P1[st], t2 += P2[st + len] - P2[st];
            else
                t1 += (P1[tn] - P1[st]) + P1[st + len - tn], t2 += (P2[tn] - P2[st]) + P2[st + len - tn];
            taken += len, tn2 += (double)len;
        }
        double vb = n > 1 ? (s2 - s1 * s1 / n) / (n - 1) : NAN, vt = tn2 > 1 ? (t2 - t1 * t1 / tn2) / (tn2 - 1) : NAN;
        if (vt > 0 && vb >= 0)
            v[k++] = sqrt(vb / vt);
    }
    if (k > 10) {
        gsl_sort(v, 1, (size_t)k);
        *lo = gsl_stats_quantile_from_sorted_data(v, 1, (size_t)k, 0.025);
        *hi = gsl_stats_quantile_from_sorted_data(v, 1, (size_t)k, 0.975);
    }
    gsl_rng_free(rng);
    free(v), free(ps), free(P1), free(P2);
}

/* ---- one run: compute ------------------------------------------------------ */

/* a tensor's own amax series (written when it has two ratios) */
typedef struct {
    int t;
    int64_t lag;
    rstats s;
    double ac, slope, se; /* lag-1 autocorrelation; trend of log2 amax and its HAC error, per step */
} dyn_tensor;

/* a tensor's ratios at one granularity */
typedef struct {
    int t, g;
    const char *source; /* "block_amax" or "snapshots" */
    int64_t lag;
    size_t pairs;
    rstats s;
} dyn_gran;

/* a tensor's volatility ratio sd(r, 1x128 blocks) / sd(r, tensor) */
typedef struct {
    int t;
    double sd_t, sd_b, ratio, lo, hi;
} dyn_vol;

/* One run's amax dynamics: what its renderers read. */
typedef struct {
    dyn_tensor *tens;
    int ntens, sd_n;
    double sd_sum;
    int64_t lag_t, lag_b;
    dyn_gran *gran;
    int ngran;
    dyn_vol *vol;
    int nvol, with;      /* tensors with block ratios */
    rstats pooled[NG];   /* every tensor's block ratios pooled, per granularity (n 0: none) */
    double med, mlo, mhi; /* the median volatility ratio over tensors and its bootstrap interval */
    int nratio;           /* tensors with a finite ratio: what the median is over */
} run_dynamics;

static void run_dynamics_free(run_dynamics *D) { free(D->tens), free(D->gran), free(D->vol); }

/* the longest series of the run, at least 1024: the scratch's size */
static size_t longest_series(const an_run *a)
{
    size_t cap = 1024;
    for (int t = 0; t < a->run->ntensors; t++) {
        size_t n, nr;
        const int *rs = an_tensor_recipes(a, t, &nr);
        for (size_t i = 0; i < nr; i++)
            if (an_steps(a, t, rs[i], &n), n + 1 > cap)
                cap = n + 1;
        if (an_series(a, t, an_input_recipe(a, t), &n), n + 1 > cap)
            cap = n + 1;
    }
    return cap;
}

/* the median of the tensors' volatility ratios, its bootstrap interval and
 * how many tensors it is over, into D */
static void median_ratio(const an_ctx *c, run_dynamics *D)
{
    double *med = &D->med, *lo = &D->mlo, *hi = &D->mhi;
    *med = *lo = *hi = NAN;
    int n = 0;
    for (int i = 0; i < D->nvol; i++)
        n += D->vol[i].ratio == D->vol[i].ratio;
    D->nratio = n;
    if (!n)
        return;
    double *ratio = malloc((size_t)n * sizeof *ratio), *cp = malloc((size_t)n * sizeof *cp),
           *bm = malloc((size_t)c->boot * sizeof *bm);
    gsl_rng *rng = gsl_rng_alloc(gsl_rng_mt19937);
    if (ratio && cp && bm && rng) {
        for (int i = 0, k = 0; i < D->nvol; i++)
            if (D->vol[i].ratio == D->vol[i].ratio)
                ratio[k++] = D->vol[i].ratio;
        memcpy(cp, ratio, (size_t)n * sizeof *cp);
        *med = an_quantile(cp, (size_t)n, 0.5);
        gsl_rng_set(rng, c->seed);
        for (int b = 0; b < c->boot; b++) {
            for (int i = 0; i < n; i++)
                cp[i] = ratio[gsl_rng_uniform_int(rng, (unsigned long)n)];
            bm[b] = an_quantile(cp, (size_t)n, 0.5);
        }
        if (c->boot >= 10) {
            *lo = an_quantile(bm, (size_t)c->boot, 0.025);
            *hi = an_quantile(bm, (size_t)c->boot, 0.975);
        }
    }
    free(ratio), free(cp), free(bm);
    if (rng)
        gsl_rng_free(rng);
}

/* tensor t's block side (the probes' block amaxes, else snapshots): its
 * granularity rows and volatility ratio; its ratios pooled into all[] */
static int tensor_blocks(const an_ctx *c, const an_run *a, int t, const float *bam, size_t nbam, const double *rr,
                         size_t m, const rstats *s, pool all[NG], run_dynamics *D)
{
    int rc = 0;
    pool P[NG];
    memset(P, 0, sizeof P);
    size_t pairs = 0;
    int64_t bl = 1;
    const char *source = "block_amax";
    if (bam && block_ratios(a, t, bam, nbam, P, &pairs) != 0)
        rc = 1;
    if (!pairs) {
        for (int g = 0; g < NG; g++)
            pool_free(&P[g]);
        memset(P, 0, sizeof P);
        source = "snapshots";
        if (snapshot_ratios(a, t, P, &bl, &pairs) != 0)
            rc = 1;
    }
    if (pairs) {
        D->with++;
        D->lag_b = bl;
        for (int g = 0; g < NG; g++) {
            if (!P[g].n)
                continue;
            dyn_gran *w = &D->gran[D->ngran++];
            *w = (dyn_gran){t, g, source, bl, pairs, {0}};
            rstats_of(P[g].r, P[g].n, &w->s);
            for (size_t i = 0; i < P[g].n; i++)
                push(&all[g], P[g].r[i]);
        }
        rstats bs;
        rstats_of(P[G_B128].r, P[G_B128].n, &bs);
        dyn_vol *v = &D->vol[D->nvol++];
        *v = (dyn_vol){t, s->sd, bs.sd, s->sd > 0 ? bs.sd / s->sd : NAN, NAN, NAN};
        ratio_ci(c, &P[G_B128], rr, m, &v->lo, &v->hi);
    }
    for (int g = 0; g < NG; g++)
        pool_free(&P[g]);
    return rc;
}

/* Run a's dynamics: 0; 1 when a tensor's block side could not be read
 * (the rest is filled in); -1 out of memory (nothing is). */
static int dynamics_compute(const an_ctx *c, an_run *a, run_dynamics *D)
{
    int T = a->run->ntensors, rc = 0;
    memset(D, 0, sizeof *D);
    D->lag_t = D->lag_b = 1;
    size_t cap = longest_series(a);
    double *rr = malloc(cap * sizeof *rr), *xs = malloc(cap * sizeof *xs), *ys = malloc(cap * sizeof *ys);
    D->tens = calloc((size_t)T + 1, sizeof *D->tens);
    D->gran = calloc((size_t)T * NG + 1, sizeof *D->gran);
    D->vol = calloc((size_t)T + 1, sizeof *D->vol);
    if (!rr || !xs || !ys || !D->tens || !D->gran || !D->vol) {
        free(rr), free(xs), free(ys);
        return -1;
    }
    float *bam = NULL;
    size_t nbam = 0;
    if (a->run->nblock_amax && fp8_run_block_amax_all(a->run, &bam, &nbam) != FP8_OK)
        fprintf(stderr, "fp8prof: dynamics: %s\n", fp8_error_message());
    pool all[NG];
    memset(all, 0, sizeof all);
    for (int t = 0; t < T; t++) {
        size_t q = 0;
        int64_t lag = 1;
        size_t m = tensor_series(a, t, rr, xs, ys, &q, &lag);
        D->lag_t = lag;
        dyn_tensor w = {t, lag, {0}, m > 2 ? an_lag1(rr, m) : NAN, 0, 0};
        rstats_of(rr, m, &w.s);
        an_slope_hac(xs, ys, q, &w.slope, &w.se);
        if (m >= 2) {
            D->tens[D->ntens++] = w;
            if (!isnan(w.s.sd))
                D->sd_sum += w.s.sd, D->sd_n++;
        }
        rc |= tensor_blocks(c, a, t, bam, nbam, rr, m, &w.s, all, D);
    }
    for (int g = 0; g < NG; g++) {
        if (all[g].n)
            rstats_of(all[g].r, all[g].n, &D->pooled[g]);
        pool_free(&all[g]);
    }
    if (D->with)
        median_ratio(c, D);
    free(rr), free(xs), free(ys), free(bam);
    return rc;
}

/* ---- one run: render -------------------------------------------------------- */

static void dynamics_tsv(const an_run *a, const run_dynamics *D, FILE *ft, FILE *fg, FILE *fc)
{
    for (int i = 0; i < D->ntens; i++) {
        const dyn_tensor *w = &D->tens[i];
        const rstats *s = &w->s;
        fprintf(ft, "%s\t%s\t%s\t%d\t%zu\t%lld\t%.9g\t%.9g\t%.9g\t%.9g\t%.9g\t%.9g\t%.9g\t%.9g\t%.9g\n", a->label,
                a->run->tensor_name[w->t], fp8_role_name((fp8_role)a->run->tensor_role[w->t]),
                a->run->tensor_layer[w->t], s->n, (long long)w->lag, s->sd, s->p01, s->p50, s->p99, s->maxabs,
                s->grow2, w->ac, 1000 * w->slope, 1000 * w->se);
    }
    for (int i = 0; i < D->ngran; i++) {
        const dyn_gran *w = &D->gran[i];
        const rstats *s = &w->s;
        fprintf(fg, "%s\t%s\t%s\t%s\t%lld\t%zu\t%zu\t%.9g\t%.9g\t%.9g\t%.9g\t%.9g\t%.9g\n", a->label,
                a->run->tensor_name[w->t], gname[w->g], w->source, (long long)w->lag, w->pairs, s->n, s->sd, s->p01,
                s->p50, s->p99, s->maxabs, s->grow2);
    }
    for (int i = 0; i < D->nvol; i++) {
        const dyn_vol *w = &D->vol[i];
        fprintf(fc, "%s\t%s\t%s\t%.9g\t%.9g\t%.9g\t%.9g\t%.9g\n", a->label, a->run->tensor_name[w->t],
                fp8_role_name((fp8_role)a->run->tensor_role[w->t]), w->sd_t, w->sd_b, w->ratio, w->lo, w->hi);
    }
}

static void dynamics_md(an_ctx *c, const an_run *a, const run_dynamics *D)
{
    fprintf(c->md, "### Run `%s`\n\nTensor amax over %s (lag %lld): mean sd of r over %d tensors = %.3f bits "
                   "(`dynamics_tensors.tsv`: quantiles, lag-1 autocorrelation, trend of log2 amax with a "
                   "Newey-West standard error).\n\n",
            a->label, a->run->nsteps ? "every step" : "the recorded steps", (long long)D->lag_t, D->sd_n,
            D->sd_n ? D->sd_sum / D->sd_n : NAN);
    if (!D->with) {
        fprintf(c->md, "No tensor of this run has block amaxes one step apart (probe option block_amax_every, "
                       "trainer --block-amax-every) or consecutive snapshots: the block side cannot be measured.\n\n");
        return;
    }
    fprintf(c->md, "Blocks: %d tensors, pairs %lld step apart, pooled:\n\n| granularity | ratios | sd of r (bits) | "
                   "p01 | p99 | max abs | share doubled |\n|---|---|---|---|---|---|---|\n",
            D->with, (long long)D->lag_b);
    for (int g = 0; g < NG; g++) {
        const rstats *s = &D->pooled[g];
        if (s->n)
            fprintf(c->md, "| %s | %zu | %.3f | %.3f | %.3f | %.3f | %.4f |\n", gname[g], s->n, s->sd, s->p01, s->p99,
                    s->maxabs, s->grow2);
    }
    fprintf(c->md, "\nVolatility ratio sd(r, 1x128 blocks) / sd(r, tensor): median %.2f [%.2f, %.2f] over %d "
                   "tensors (`dynamics_volatility.tsv`, per tensor with a bootstrap interval).\n\n",
            D->med, D->mlo, D->mhi, D->nratio);
    an_finding(c, "dynamics", "`%s`: block/tensor volatility ratio, median %.2fx [%.2f, %.2f] over %d tensors "
                              "(descriptive)",
               a->label, D->med, D->mlo, D->mhi, D->nratio);
}

int an_dynamics(an_ctx *c)
{
    FILE *f[3] = {an_data(c, "dynamics_tensors.tsv"), an_data(c, "dynamics_granularity.tsv"),
                  an_data(c, "dynamics_volatility.tsv")};
    int rc = 0;
    if (!f[0] || !f[1] || !f[2]) {
        rc = 1;
        goto done;
    }
    fprintf(f[0], "run\ttensor\trole\tlayer\tsteps\tlag\tsd_log2\tp01\tp50\tp99\tmax_abs\tshare_doubled\t"
                  "autocorr_lag1\ttrend_bits_per_1000_steps\ttrend_stderr_hac\n");
    fprintf(f[1], "run\ttensor\tgranularity\tsource\tlag\tpairs\tratios\tsd_log2\tp01\tp50\tp99\tmax_abs\t"
                  "share_doubled\n");
    fprintf(f[2], "run\ttensor\trole\tsd_tensor\tsd_block_1x128\tvolatility_ratio\tci95_lo\tci95_hi\n");
    fprintf(c->md, "## amax volatility: tensor, row and block granularity (descriptive)\n\n"
                   "r = log2(amax_t / amax_{t-1}) between steps one apart, after warm-up: the step-to-step change "
                   "in bits; a delayed scale is stale by at least one step, so large positive r is what overflows "
                   "it. share doubled: P(r > 1). The volatility ratio sd(r, 1x128 blocks) / sd(r, tensor) describes "
                   "how much more a block's amax moves than the tensor's; it is not a test of delayed scaling: on "
                   "activations and gradients a block position holds other tokens at each step, so the ratio "
                   "compares a max over one row's 128 values with a max over the whole tensor (a max over fewer "
                   "values varies more whatever the dynamics). What the stale scale costs at each granularity is "
                   "measured on identical tensors in \"Delayed scaling at tensor and block granularity\".\n\n");
    for (int ri = 0; ri < c->nruns; ri++) {
        an_run *a = &c->runs[ri];
        run_dynamics D;
        int e = dynamics_compute(c, a, &D);
        if (e < 0) {
            run_dynamics_free(&D);
            rc = 1;
            goto done;
        }
        rc |= e != 0;
        dynamics_tsv(a, &D, f[0], f[1], f[2]);
        dynamics_md(c, a, &D);
        run_dynamics_free(&D);
    }
done:
    if (an_data_close(c, f, 3))
        rc = 1;
    return rc;
}
