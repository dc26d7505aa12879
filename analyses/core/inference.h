/*
 * inference.h — the statistics the analyses' verdicts rest on, for step
 * series that are autocorrelated (a tensor's SQNR at step t resembles its
 * SQNR at t+1): circular block bootstrap confidence intervals, Newey-West
 * (HAC) standard errors of a mean and of a least-squares slope with Andrews'
 * AR(1) plug-in bandwidth, Holm's step-down adjustment for many tests, and
 * the two-sided sign test.  Definitions: docs/analyses.md, "Inference".
 */
#ifndef FP8_AN_INFERENCE_H
#define FP8_AN_INFERENCE_H

#include <stddef.h>

/* Lag-1 autocorrelation of x (GSL); 0 when n < 3 or x is constant. */
double an_lag1(const double *x, size_t n);

/* Block length of the circular block bootstrap for the mean of an AR(1)-like
 * series: ceil((2 rho / (1 - rho^2))^(2/3) n^(1/3)) with rho the lag-1
 * autocorrelation clipped to [0, 0.95]; 1 when rho <= 0; at most n / 2. */
size_t an_block_length(const double *x, size_t n);

/* Mean of x and its 95% interval for an autocorrelated step series,
 * calibrated at the series' own length and autocorrelation: mean +- q se,
 * se the Newey-West standard error (below), q the 95% point of |mean / se|
 * over AN_CAL_SIMS Gaussian AR(1) series of the same length n whose lag-1
 * correlation is x's, bias-corrected (rho + (1 + 4 rho) / n, clipped to
 * [0, 0.97]).  The plain t interval covers far less than 95% at the demo's
 * length and autocorrelation; this one keeps close to it (measured by
 * `fp8prof coverage`: docs/analyses.md, "Inference", the table).
 * p: two-sided, t with n - 1 degrees of freedom scaled so that its 97.5%
 * point is q.  approx = 1 where the simulated coverage at this n and rho
 * falls below 90% (n under 20; rho above 0.7 with n under 40; rho above
 * 0.85 with n under 100): the report marks such intervals.  B and seed are not used (kept for callers).
 * n == 0: NaN. */
#define AN_CAL_SIMS 4000
typedef struct {
    size_t n, block;   /* block: the Newey-West bandwidth, in steps        */
    double mean, lo, hi;
    double se, p;      /* Newey-West standard error of the mean, two-sided p */
    double rho;        /* lag-1 autocorrelation, bias-corrected           */
    int approx;        /* the interval's real coverage is below 90% here */
} an_interval;
void an_mean_ci(const double *x, size_t n, int B, unsigned long seed, an_interval *out);
/* The calibrated critical value q(n, rho) itself (cached). */
double an_cal_crit(size_t n, double rho);
/* Coverage of the interval of an_mean_ci, of the plain Newey-West t
 * interval and of a circular block bootstrap (B resamples) on m simulated
 * AR(1) series of length n and correlation rho (what docs/analyses.md's
 * table shows and the tests check). */
void an_coverage(size_t n, double rho, int m, int B, unsigned long seed, double *cal, double *nw, double *boot);

/* A mean over steps that one or a few steps may carry: the median step,
 * the three steps of largest |d| with their values, and whether they
 * dominate the mean (n >= 8 and leaving those three out moves the mean by
 * more than half of it). */
typedef struct {
    size_t n;
    double mean, median, mean_without_top;
    int ntop, dominated;
    int64_t top_step[3];
    double top_val[3];
} an_robust;
void an_robust_of(const double *d, const int64_t *steps, size_t n, an_robust *o);

/* Newey-West (Bartlett kernel) long-run variance of x about its mean with
 * bandwidth L; Andrews' AR(1) plug-in bandwidth 1.1447 (alpha n)^(1/3),
 * alpha = 4 rho^2 / ((1 - rho)^2 (1 + rho)^2), at most n - 1. */
double an_hac_bandwidth(const double *x, size_t n);
double an_hac_lrv(const double *x, size_t n, double L);

/* Least-squares slope of y on x with its Newey-West standard error (the
 * bandwidth from the residuals).  NaN when n < 3 or x is constant. */
void an_slope_hac(const double *x, const double *y, size_t n, double *slope, double *se);

/* Holm's step-down adjustment of m p-values (NaN entries left NaN and not
 * counted in m): adj[i] = max over j <= rank(i) of min(1, (m - j + 1) p_(j)). */
void an_holm(const double *p, size_t m, double *adj);

/* Two-sided sign test: k of n nonzero differences positive, H0 p = 1/2. */
double an_sign_test(size_t k, size_t n);

#endif
