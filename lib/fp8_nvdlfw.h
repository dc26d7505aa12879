/*
 * fp8_nvdlfw.h — NVIDIA nvidia-dlframework-inspect statistics logs, both
 * ways, so TransformerEngine users' scripts (BioNeMo's FP8 analyzer among
 * them) read our runs and our analyses read their GPU runs.
 *
 * Log layout: DIR/nvdlfw_inspect_statistics_logs/nvdlfw_inspect_globalrank-<r>.log,
 * one line per value: "<layer>_<tensor>_<stat> iteration=NNNNNN value=V"
 * (6-digit iteration, 4 decimals).  Our tensor "a.b.c.input" is layer
 * "a.b.c", tensor "input".  Statistic names and conversions: docs/schema.md.
 */
#ifndef FP8_NVDLFW_H
#define FP8_NVDLFW_H

#include <stddef.h>
#include <stdio.h>

#include "fp8_store.h"

/* Write the records of one recipe (spec; NULL: the active recipe of each
 * tensor) as rank 0's log under dir. */
int fp8_nvdlfw_export(const fp8_run *run, const char *dir, const char *recipe_spec);

/* Read every rank's log under logdir (or logdir/nvdlfw_inspect_statistics_logs)
 * into a new run file.  Lines that cannot be parsed are reported on report
 * (file:line: reason) and counted in *bad; they do not stop the import. */
int fp8_nvdlfw_import(const char *logdir, const char *out_path, size_t *bad, FILE *report);

#endif
