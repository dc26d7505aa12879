/*
 * inference.c — intervals calibrated by simulation at the series' length
 * and autocorrelation, HAC standard errors, Holm and the sign test for the
 * analyses (inference.h).  GSL does the sorting, quantiles,
 * random numbers, autocorrelation and distribution tails.
 */
#include <gsl/gsl_cdf.h>
#include <gsl/gsl_randist.h>
#include <gsl/gsl_rng.h>
#include <gsl/gsl_sort.h>
#include <gsl/gsl_statistics_double.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "inference.h"

double an_lag1(const double *x, size_t n)
{
    if (n < 3)
        return 0;
    double v = gsl_stats_variance(x, 1, n);
    if (!(v > 0))
        return 0;
    double r = gsl_stats_lag1_autocorrelation(x, 1, n);
    return isfinite(r) ? r : 0;
}

size_t an_block_length(const double *x, size_t n)
{
    double rho = an_lag1(x, n);
    if (rho <= 0 || n < 4)
        return 1;
    if (rho > 0.95)
        rho = 0.95;
    double l = ceil(pow(2 * rho / (1 - rho * rho), 2.0 / 3.0) * cbrt((double)n));
    size_t L = (size_t)l;
    if (L < 1)
        L = 1;
    if (L > n / 2)
        L = n / 2 ? n / 2 : 1;
    return L;
}

double an_hac_bandwidth(const double *x, size_t n)
{
    if (n < 3)
        return 0;
    double rho = an_lag1(x, n);
    if (rho > 0.97)
        rho = 0.97;
    if (rho < -0.97)
        rho = -0.97;
    double alpha = 4 * rho * rho / ((1 - rho) * (1 - rho) * (1 + rho) * (1 + rho));
    double L = 1.1447 * cbrt(alpha * (double)n);
    return L > (double)(n - 1) ? (double)(n - 1) : L;
}

double an_hac_lrv(const double *x, size_t n, double L)
{
    if (n == 0)
        return NAN;
    double m = 0;
    for (size_t i = 0; i < n; i++)
        m += x[i];
    m /= (double)n;
    double s = 0;
    for (size_t i = 0; i < n; i++)
        s += (x[i] - m) * (x[i] - m);
    double lrv = s / (double)n;
    for (size_t l = 1; l < n && (double)l < L + 1; l++) {
        double w = 1 - (double)l / (L + 1), g = 0;
        if (w <= 0)
            break;
        for (size_t i = l; i < n; i++)
            g += (x[i] - m) * (x[i - l] - m);
        lrv += 2 * w * g / (double)n;
    }
    return lrv > 0 ? lrv : 0;
}

/* The calibration table: per (n, 100 rho) the 95% point of |mean / se| of
 * simulated AR(1) series, made on first use (deterministic: each entry's
 * generator is seeded from its key). */
typedef struct cal_entry {
    size_t n;
    int r100;
    double q;
    struct cal_entry *next;
} cal_entry;
static cal_entry *cal_table[256];
static pthread_mutex_t cal_lock = PTHREAD_MUTEX_INITIALIZER;

/* Newey-West standard error of the mean of x (Andrews' bandwidth) */
static double nw_se(const double *x, size_t n, double *bandwidth)
{
    double L = an_hac_bandwidth(x, n);
    if (bandwidth)
        *bandwidth = L;
    return sqrt(an_hac_lrv(x, n, L) / (double)n);
}

static void ar1(gsl_rng *rng, double rho, double *x, size_t n)
{
    x[0] = gsl_ran_gaussian(rng, 1.0) / sqrt(1 - rho * rho);
    for (size_t t = 1; t < n; t++)
        x[t] = rho * x[t - 1] + gsl_ran_gaussian(rng, 1.0);
}

static double mean_of(const double *x, size_t n)
{
    double m = 0;
    for (size_t i = 0; i < n; i++)
        m += x[i];
    return m / (double)n;
}

static double cal_compute(size_t n, int r100)
{
    double rho = r100 / 100.0, *x = malloc(n * sizeof *x), *t = malloc(AN_CAL_SIMS * sizeof *t);
    gsl_rng *rng = gsl_rng_alloc(gsl_rng_mt19937);
    double q = NAN;
    if (x && t && rng) {
        gsl_rng_set(rng, 0x5eed0000ul + (unsigned long)n * 131ul + (unsigned long)r100);
        size_t k = 0;
        for (int i = 0; i < AN_CAL_SIMS; i++) {
            ar1(rng, rho, x, n);
            double se = nw_se(x, n, NULL);
            if (se > 0)
                t[k++] = fabs(mean_of(x, n) / se);
        }
        if (k) {
            gsl_sort(t, 1, k);
            q = gsl_stats_quantile_from_sorted_data(t, 1, k, 0.95);
        }
    }
    free(x), free(t);
    if (rng)
        gsl_rng_free(rng);
    return q;
}

/* the bias-corrected lag-1 correlation the calibration uses */
static double rho_corrected(const double *x, size_t n)
{
    double r = an_lag1(x, n);
    r += (1 + 4 * r) / (double)n; /* E[r] ~ rho - (1 + 4 rho) / n for AR(1) with its mean estimated */
    return r < 0 ? 0 : r > 0.97 ? 0.97 : r;
}

double an_cal_crit(size_t n, double rho)
{
    if (n < 3)
        return NAN;
    int r100 = (int)lround(rho * 100);
    r100 = r100 < 0 ? 0 : r100 > 97 ? 97 : r100;
    size_t h = (n * 31 + (size_t)r100) % 256;
    pthread_mutex_lock(&cal_lock);
    for (cal_entry *e = cal_table[h]; e; e = e->next)
        if (e->n == n && e->r100 == r100) {
            double q = e->q;
            pthread_mutex_unlock(&cal_lock);
            return q;
        }
    pthread_mutex_unlock(&cal_lock);
    double q = cal_compute(n, r100); /* (outside the lock: a second thread may compute the same) */
    cal_entry *e = malloc(sizeof *e);
    if (e) {
        e->n = n, e->r100 = r100, e->q = q;
        pthread_mutex_lock(&cal_lock);
        e->next = cal_table[h];
        cal_table[h] = e;
        pthread_mutex_unlock(&cal_lock);
    }
    return q;
}

/* series too long to simulate per call: the plain Newey-West t interval,
 * within a point of nominal coverage there */
#define CAL_MAX_N 2000

void an_mean_ci(const double *x, size_t n, int B, unsigned long seed, an_interval *o)
{
    (void)B, (void)seed;
    memset(o, 0, sizeof *o);
    o->n = n;
    o->mean = o->lo = o->hi = o->se = o->p = o->rho = NAN;
    if (n == 0)
        return;
    double m = mean_of(x, n);
    o->mean = m;
    if (n < 3) {
        o->lo = o->hi = m;
        o->approx = 1;
        return;
    }
    double L;
    o->se = nw_se(x, n, &L);
    o->block = (size_t)ceil(L);
    o->rho = rho_corrected(x, n);
    double t975 = gsl_cdf_tdist_Pinv(0.975, (double)(n - 1));
    double q = n <= CAL_MAX_N ? an_cal_crit(n, o->rho) : t975;
    if (!isfinite(q))
        q = t975;
    /* where `fp8prof coverage` measures less than 90% (docs/analyses.md's table) */
    o->approx = n < 20 || (o->rho > 0.7 && n < 40) || (o->rho > 0.85 && n < 100);
    if (!(o->se > 0)) { /* a constant series */
        o->lo = o->hi = m;
        o->p = m == 0 ? 1.0 : 0.0;
        return;
    }
    o->lo = m - q * o->se, o->hi = m + q * o->se;
    double c = q / t975; /* the t distribution widened to the calibrated point */
    o->p = 2 * gsl_cdf_tdist_Q(fabs(m) / (o->se * c), (double)(n - 1));
}

void an_coverage(size_t n, double rho, int m, int B, unsigned long seed, double *cal, double *nw, double *boot)
{
    double *x = malloc(n * sizeof *x), *bs = malloc((size_t)(B > 0 ? B : 1) * sizeof *bs),
           *P = malloc((n + 1) * sizeof *P);
    gsl_rng *rng = gsl_rng_alloc(gsl_rng_mt19937);
    size_t hit_cal = 0, hit_nw = 0, hit_boot = 0;
    if (!x || !bs || !P || !rng)
        goto done;
    gsl_rng_set(rng, seed);
    double t975 = gsl_cdf_tdist_Pinv(0.975, (double)(n - 1));
    for (int i = 0; i < m; i++) {
        ar1(rng, rho, x, n); /* true mean 0 */
        an_interval o;
        an_mean_ci(x, n, 0, 0, &o);
        hit_cal += o.lo <= 0 && 0 <= o.hi;
        hit_nw += fabs(o.mean) <= t975 * o.se;
        /* the circular block bootstrap this file used before */
        size_t Lb = an_block_length(x, n);
        P[0] = 0;
        for (size_t k = 0; k < n; k++)
            P[k + 1] = P[k] + x[k];
        for (int b = 0; b < B; b++) {
            double s = 0;
            for (size_t taken = 0; taken < n;) {
                size_t st = (size_t)gsl_rng_uniform_int(rng, (unsigned long)n), len = n - taken < Lb ? n - taken : Lb;
                s += st + len <= n ? P[st + len] - P[st] : (P[n] - P[st]) + P[st + len - n];
                taken += len;
            }
            bs[b] = s / (double)n;
        }
        if (B >= 10) {
            gsl_sort(bs, 1, (size_t)B);
            hit_boot += gsl_stats_quantile_from_sorted_data(bs, 1, (size_t)B, 0.025) <= 0 &&
                        0 <= gsl_stats_quantile_from_sorted_data(bs, 1, (size_t)B, 0.975);
        }
    }
done:
    if (cal)
        *cal = m > 0 ? (double)hit_cal / m : NAN;
    if (nw)
        *nw = m > 0 ? (double)hit_nw / m : NAN;
    if (boot)
        *boot = m > 0 && B >= 10 ? (double)hit_boot / m : NAN;
    free(x), free(bs), free(P);
    if (rng)
        gsl_rng_free(rng);
}

void an_slope_hac(const double *x, const double *y, size_t n, double *slope, double *se)
{
    *slope = *se = NAN;
    if (n < 3)
        return;
    double mx = 0, my = 0;
    for (size_t i = 0; i < n; i++)
        mx += x[i], my += y[i];
    mx /= (double)n, my /= (double)n;
    double sxx = 0, sxy = 0;
    for (size_t i = 0; i < n; i++)
        sxx += (x[i] - mx) * (x[i] - mx), sxy += (x[i] - mx) * (y[i] - my);
    if (!(sxx > 0))
        return;
    double b = sxy / sxx, a = my - b * mx;
    *slope = b;
    /* the slope's score terms u_i = (x_i - mx) e_i; var(b) = n LRV(u) / sxx^2 */
    double *u = malloc(n * sizeof *u), *e = malloc(n * sizeof *e);
    if (!u || !e) {
        free(u), free(e);
        return;
    }
    for (size_t i = 0; i < n; i++) {
        e[i] = y[i] - a - b * x[i];
        u[i] = (x[i] - mx) * e[i];
    }
    double L = an_hac_bandwidth(e, n);
    /* u has mean 0 by construction; an_hac_lrv centres it anyway */
    double lrv = an_hac_lrv(u, n, L);
    *se = sqrt((double)n * lrv) / sxx;
    free(u), free(e);
}

typedef struct {
    double p;
    size_t i;
} pidx;

static int cmp_p(const void *a, const void *b)
{
    double x = ((const pidx *)a)->p, y = ((const pidx *)b)->p;
    return (x > y) - (x < y);
}

void an_holm(const double *p, size_t m, double *adj)
{
    pidx *v = malloc((m + 1) * sizeof *v);
    size_t k = 0;
    for (size_t i = 0; i < m; i++) {
        adj[i] = NAN;
        if (v && !isnan(p[i]))
            v[k].p = p[i], v[k].i = i, k++;
    }
    if (!v)
        return;
    qsort(v, k, sizeof *v, cmp_p);
    double run = 0;
    for (size_t j = 0; j < k; j++) {
        double a = fmin(1.0, (double)(k - j) * v[j].p);
        run = fmax(run, a);
        adj[v[j].i] = run;
    }
    free(v);
}

double an_sign_test(size_t k, size_t n)
{
    if (n == 0)
        return 1.0;
    double lo = gsl_cdf_binomial_P((unsigned)k, 0.5, (unsigned)n);            /* P(X <= k) */
    double hi = k ? gsl_cdf_binomial_Q((unsigned)k - 1, 0.5, (unsigned)n) : 1; /* P(X >= k) */
    return fmin(1.0, 2 * fmin(lo, hi));
}

void an_robust_of(const double *d, const int64_t *steps, size_t n, an_robust *o)
{
    memset(o, 0, sizeof *o);
    o->n = n;
    o->mean = o->median = o->mean_without_top = NAN;
    if (!n)
        return;
    double *v = malloc(n * sizeof *v);
    if (!v)
        return;
    memcpy(v, d, n * sizeof *v);
    gsl_sort(v, 1, n);
    o->median = gsl_stats_quantile_from_sorted_data(v, 1, n, 0.5);
    free(v);
    o->mean = mean_of(d, n);
    /* the three largest |d|, by a scan (n is small) */
    int used[3] = {-1, -1, -1};
    double sum_top = 0;
    for (int k = 0; k < 3 && (size_t)k < n; k++) {
        size_t best = SIZE_MAX;
        for (size_t i = 0; i < n; i++) {
            if ((int)i == used[0] || (int)i == used[1])
                continue;
            if (best == SIZE_MAX || fabs(d[i]) > fabs(d[best]))
                best = i;
        }
        used[k] = (int)best;
        o->top_step[k] = steps ? steps[best] : (int64_t)best;
        o->top_val[k] = d[best];
        sum_top += d[best];
        o->ntop = k + 1;
    }
    if (n > 3)
        o->mean_without_top = (o->mean * (double)n - sum_top) / (double)(n - 3);
    o->dominated = n >= 8 && o->mean != 0 && fabs(o->mean_without_top - o->mean) > 0.5 * fabs(o->mean);
}
