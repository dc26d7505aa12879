/*
 * fp8_nvdlfw.h — NVIDIA nvidia-dlframework-inspect statistics logs, both
 * ways, so TransformerEngine users' scripts (BioNeMo's FP8 analyzer among
 * them) read our runs and our analyses read their GPU runs.
 *
 * Log layout: DIR/nvdlfw_inspect_statistics_logs/nvdlfw_inspect_globalrank-<r>.log
 * (or DIR/rank_<r>/nvdlfw_inspect_statistics_logs/), one line per value as
 * the FileLogger writes it: "<date> <time>,<ms> - INFO - <layer>_<tensor>_<stat>
 * \t iteration=NNNNNN \t value=V".  Our tensor "a.b.c.input" is TE's layer
 * "a.b.c", tensor "activation" (grad_output: gradient; weight, output, wgrad,
 * dgrad keep their names).  Names, recipes and conversions: docs/schema.md.
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
