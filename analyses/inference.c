/*
 * inference.c — bootstrap intervals, HAC standard errors, Holm and the sign
 * test for the analyses (inference.h).  GSL does the sorting, quantiles,
 * random numbers, autocorrelation and distribution tails.
 */
#include <gsl/gsl_cdf.h>
#include <gsl/gsl_rng.h>
#include <gsl/gsl_sort.h>
#include <gsl/gsl_statistics_double.h>
#include <math.h>
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

void an_mean_ci(const double *x, size_t n, int B, unsigned long seed, an_interval *o)
{
    memset(o, 0, sizeof *o);
    o->n = n;
    o->mean = o->lo = o->hi = o->se = o->p = NAN;
    if (n == 0)
        return;
    double m = 0;
    for (size_t i = 0; i < n; i++)
        m += x[i];
    m /= (double)n;
    o->mean = m;
    o->block = an_block_length(x, n);
    if (n >= 2) {
        double lrv = an_hac_lrv(x, n, an_hac_bandwidth(x, n));
        o->se = sqrt(lrv / (double)n);
        if (o->se > 0)
            o->p = 2 * gsl_cdf_tdist_Q(fabs(m) / o->se, (double)(n - 1));
        else
            o->p = m == 0 ? 1.0 : 0.0; /* a constant nonzero difference */
    }
    if (n < 2 || B < 10) {
        o->lo = o->hi = m;
        return;
    }
    if (n > AN_BOOT_MAX_N) {
        /* long series: the Newey-West interval (the block bootstrap's cost
         * grows as n * B; the two agree for series this long) */
        double q = gsl_cdf_tdist_Pinv(0.975, (double)(n - 1));
        o->lo = m - q * o->se, o->hi = m + q * o->se;
        return;
    }
    double *bs = malloc((size_t)B * sizeof *bs), *P = malloc((n + 1) * sizeof *P);
    gsl_rng *rng = gsl_rng_alloc(gsl_rng_mt19937);
    if (!bs || !P || !rng) {
        free(bs), free(P);
        if (rng)
            gsl_rng_free(rng);
        return;
    }
    gsl_rng_set(rng, seed);
    /* prefix sums: a block's sum in O(1), wrapping around the end (circular) */
    P[0] = 0;
    for (size_t i = 0; i < n; i++)
        P[i + 1] = P[i] + x[i];
    size_t L = o->block;
    for (int b = 0; b < B; b++) {
        double s = 0;
        for (size_t taken = 0; taken < n;) {
            size_t start = (size_t)gsl_rng_uniform_int(rng, (unsigned long)n), len = n - taken < L ? n - taken : L;
            s += start + len <= n ? P[start + len] - P[start] : (P[n] - P[start]) + P[start + len - n];
            taken += len;
        }
        bs[b] = s / (double)n;
    }
    gsl_sort(bs, 1, (size_t)B);
    o->lo = gsl_stats_quantile_from_sorted_data(bs, 1, (size_t)B, 0.025);
    o->hi = gsl_stats_quantile_from_sorted_data(bs, 1, (size_t)B, 0.975);
    gsl_rng_free(rng);
    free(bs), free(P);
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
