/*
 * moments.h — internal: the statistics engine's running sums (moments.c):
 * central moments joined by Pebay's pairwise update, lane sums, extremes
 * and counts; and the exponent histogram as x's pass keeps it.
 */
#ifndef FP8_MOMENTS_H
#define FP8_MOMENTS_H
#include <stddef.h>
#include <stdint.h>

#define FP8_ML 8 /* double lanes */

typedef struct {
    double cn, cmean, cM2, cM3, cM4;                /* running central moments */
    double l1[FP8_ML];                              /* sum |x|               */
    double e2[FP8_ML];                              /* sum (x - x_hat)^2     */
    double q2[FP8_ML];                              /* sum x_hat^2           */
    double xq[FP8_ML];                              /* sum x * x_hat         */
    double xx[FP8_ML];                              /* sum x^2 over finite x: sqnr's and rel_err's denominator */
    float mn[16], mx[16], maxerr[16], mnz[16];      /* lane min, max, max|e|, min nonzero |x| */
    uint64_t nan, inf, zero, qbad;                  /* counts                */
    int tiny;                                       /* the last piece was tiny (stats_vec.c): the
                                                       next one's maxima are looked at first */
} fp8__moments;

void fp8__moments_init(fp8__moments *m);
/* Pebay's pairwise update: a set of nb values with mean mb and central
 * sums M2b..M4b joins m's running moments */
void fp8__moments_combine(fp8__moments *m, double nb, double mb, double M2b, double M3b, double M4b);
/* A piece's sums about a shift K (n values; S1..S4: the sums of (x - K)^p)
 * merged into the running moments (Pebay 2008, the pairwise form of
 * Welford's update) */
void fp8__moments_add_shifted(fp8__moments *m, double n, double K, double S1, double S2, double S3, double S4);
/* b's sums, extremes and counts join a's (b's values after a's) */
void fp8__moments_merge(fp8__moments *a, const fp8__moments *b);

/* The exponent histogram as x's pass keeps it: eight interleaved 32-bit
 * sub-histograms (as fp8__hist_add); the pass counts the window of the 15
 * bins top-14 .. top in registers and adds them to sub[0] before it
 * returns, the elements outside the window one by one.  top follows the
 * largest bin seen.  Every bin any sub-histogram may hold a count in lies
 * in [lo, hi] (lo > hi: none), so that flushing and clearing touch those
 * bins only (a small tensor's cast counts a few of 257).  All zero to
 * start. */
typedef struct {
    uint32_t sub[8][257];
    uint32_t top;
    uint32_t lo, hi;
    int wide; /* the window of 31 bins top-30 .. top (stats_vec.c): set only where top >= 32 */
} fp8__hist_state;

/* bins [lo, hi] may now hold counts */
static inline void fp8__hist_touch(fp8__hist_state *h, uint32_t lo, uint32_t hi)
{
    h->lo = lo < h->lo ? lo : h->lo;
    h->hi = hi > h->hi ? hi : h->hi;
}

#endif
