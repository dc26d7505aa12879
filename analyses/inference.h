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

/* Mean of x and its 95% interval by the circular block bootstrap (block
 * length an_block_length, B resamples, GSL mt19937 seeded with seed):
 * the 2.5% and 97.5% quantiles of the resampled means; for series longer
 * than AN_BOOT_MAX_N steps the Newey-West interval mean +- t(0.975, n-1) se
 * instead (the bootstrap costs n * B; the two agree at that length).
 * n == 0: NaN. */
#define AN_BOOT_MAX_N 4000
typedef struct {
    size_t n, block;
    double mean, lo, hi;
    double se, p;      /* Newey-West standard error of the mean and the
                          two-sided p-value of mean = 0 (Student t, n - 1 df) */
} an_interval;
void an_mean_ci(const double *x, size_t n, int B, unsigned long seed, an_interval *out);

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
