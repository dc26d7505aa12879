/*
 * fp8_bindings.h — the library's records described at run time, for
 * bindings (the Python package reads them with ctypes and numpy): the
 * fields of fp8_stats and fp8_summary with their types and byte offsets,
 * the contents of a loaded run through accessors instead of its struct,
 * and the probe options by name.  C programs use the structs directly.
 */
#ifndef FP8_BINDINGS_H
#define FP8_BINDINGS_H

#include <stddef.h>
#include <stdint.h>

#include "fp8_stats.h"
#include "fp8_store.h"

typedef enum { FP8_FIELD_U64 = 0, FP8_FIELD_F64, FP8_FIELD_U32, FP8_FIELD_I64, FP8_FIELD_I32 } fp8_field_type;

typedef struct {
    const char *name;
    fp8_field_type type;
    size_t offset; /* bytes from the struct's start */
    size_t count;  /* 1, or the array's length (exp_hist, scale_hist, classes) */
} fp8_field;

/* Every statistic of fp8_stats (docs/statistics.md names them), and its
 * size; the element format is fp8_stats_format_name(). */
const fp8_field *fp8_stats_fields(size_t *n);
size_t fp8_stats_size(void);
const char *fp8_stats_format_name(const fp8_stats *s);

/* The fields of fp8_summary (a record of a run without its histograms). */
const fp8_field *fp8_summary_fields(size_t *n);
size_t fp8_summary_size(void);

/* A loaded run, what by what: counts, names, rows. */
typedef enum {
    FP8_RUN_META = 0,  /* name: key, value: value                            */
    FP8_RUN_TENSORS,   /* name, role, layer                                  */
    FP8_RUN_RECIPES,   /* name: the canonical spec                           */
    FP8_RUN_SCALAR_NAMES,
    FP8_RUN_RECORDS,   /* fp8_run_summaries (load with fp8_run_load_summary) */
    FP8_RUN_SCALARS,   /* fp8_run_scalar                                     */
    FP8_RUN_SNAPSHOTS, /* fp8_run_snapshot_info                              */
    FP8_RUN_STEPS,     /* every-step rows                                    */
    FP8_RUN_UNREADABLE_RECORDS, /* a damaged file: records past the damage, not loaded */
    FP8_RUN_UNREADABLE_ROWS     /* ... and rows of the series and indexes likewise     */
} fp8_run_part;
size_t fp8_run_count(const fp8_run *r, fp8_run_part what);
/* Name i of a part (tensor name, recipe spec, scalar name, meta key); NULL
 * out of range. */
const char *fp8_run_name(const fp8_run *r, fp8_run_part what, size_t i);
const char *fp8_run_meta_value(const fp8_run *r, size_t i);
int fp8_run_tensor_info(const fp8_run *r, size_t t, int *role, int *layer);
int fp8_run_schema(const fp8_run *r);
/* The summaries' array (NULL when loaded with fp8_run_load). */
const fp8_summary *fp8_run_summaries(const fp8_run *r);
/* Scalar row i: its name id, step and value. */
int fp8_run_scalar(const fp8_run *r, size_t i, uint32_t *name, int64_t *step, double *value);
/* Snapshot i: tensor, step and shape (read it with fp8_run_snapshot_read). */
int fp8_run_snapshot_info(const fp8_run *r, size_t i, uint32_t *tensor, int64_t *step, uint64_t *rows, uint64_t *cols);

#endif
