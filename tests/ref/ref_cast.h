/*
 * ref_cast.h — the slow, obviously correct reference the tests trust.
 *
 * Written from the format definitions (OCP OFP8 1.0, OCP MX 1.0, IEEE 754,
 * ml_dtypes' documented special-value rules), not from lib/'s bit tricks:
 * it lists every finite value of the format from the textbook formula
 * (-1)^s * 2^(E-bias) * (1 + M/2^m), finds the two neighbours of |x| by
 * binary search and compares with their midpoint.  All values involved are
 * dyadic with at most 25 significant bits, so double holds them exactly and
 * every comparison is exact.
 */
#ifndef REF_CAST_H
#define REF_CAST_H
#include <stdint.h>
#include "fp8_format.h"

typedef struct {
    const fp8_format *f;
    int n;          /* number of finite nonnegative magnitudes, codes 0..n-1 */
    double *val;    /* val[c] for magnitude code c, plus val[n] = the value
                       one step past max (the grid continued)             */
} ref_format;

int ref_init(ref_format *r, const fp8_format *f);
void ref_free(ref_format *r);

/* The textbook value of a code (NaN for NaN codes, +-inf for Inf). */
double ref_decode(const fp8_format *f, uint32_t code);

/* Reference cast of float32 x; rnd = 32 random bits for stochastic mode. */
uint32_t ref_encode(const ref_format *r, int round, int saturate, float x, uint32_t rnd, fp8_class *cls);

#endif
