/*
 * gemm_error.h — the FP8 GEMM output error recorded by the trainer
 * (gemm_error.c).
 */
#ifndef FP8_AN_GEMM_ERROR_H
#define FP8_AN_GEMM_ERROR_H

#include "analysis.h"

/* Write run a's "FP8 GEMM output error" table into c->md and rows
 * (run linear gemm steps median_sqnr_db) into data; nothing when the run
 * has no gemm_sqnr_db scalars.  0, or -1 out of memory. */
int an_gemm_error(an_ctx *c, an_run *a, FILE *data);

/* The median after warm-up of run a's scalar gemm_sqnr_db/<linear>/<gemm>
 * (gemm: fprop, dgrad or wgrad), with *n the steps; NAN when none. */
double an_gemm_median(const an_run *a, const char *linear, const char *gemm, size_t *n);

#endif
