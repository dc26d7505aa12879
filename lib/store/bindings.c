/*
 * bindings.c — run-time descriptions of fp8_stats and fp8_summary, and
 * accessors of a loaded run (fp8_bindings.h).
 */
#include "fp8_bindings.h"

#define F(t, f, ty) {#f, ty, offsetof(t, f), 1}
#define A(t, f, ty, n) {#f, ty, offsetof(t, f), n}

static const fp8_field stats_fields[] = {
    F(fp8_stats, numel, FP8_FIELD_U64),         F(fp8_stats, finite, FP8_FIELD_U64),
    F(fp8_stats, nan_count, FP8_FIELD_U64),     F(fp8_stats, inf_count, FP8_FIELD_U64),
    F(fp8_stats, zero_count, FP8_FIELD_U64),    F(fp8_stats, amax, FP8_FIELD_F64),
    F(fp8_stats, min, FP8_FIELD_F64),           F(fp8_stats, max, FP8_FIELD_F64),
    F(fp8_stats, mean, FP8_FIELD_F64),          F(fp8_stats, std, FP8_FIELD_F64),
    F(fp8_stats, l1, FP8_FIELD_F64),            F(fp8_stats, l2, FP8_FIELD_F64),
    F(fp8_stats, min_nonzero, FP8_FIELD_F64),   F(fp8_stats, dynamic_range, FP8_FIELD_F64),
    F(fp8_stats, kurtosis, FP8_FIELD_F64),      A(fp8_stats, exp_hist, FP8_FIELD_U64, FP8_EXP_BINS),
    {"classes", FP8_FIELD_U64, offsetof(fp8_stats, classes), FP8_NCLASS},
    F(fp8_stats, overflows, FP8_FIELD_U64),     F(fp8_stats, te_overflows, FP8_FIELD_U64),
    F(fp8_stats, underflows, FP8_FIELD_U64),    F(fp8_stats, subnormals, FP8_FIELD_U64),
    F(fp8_stats, err_excluded, FP8_FIELD_U64),  F(fp8_stats, sq_err, FP8_FIELD_F64),
    F(fp8_stats, mse, FP8_FIELD_F64),           F(fp8_stats, rel_err, FP8_FIELD_F64),
    F(fp8_stats, sqnr_db, FP8_FIELD_F64),       F(fp8_stats, cosine, FP8_FIELD_F64),
    F(fp8_stats, max_abs_err, FP8_FIELD_F64),   F(fp8_stats, nscales, FP8_FIELD_U64),
    F(fp8_stats, scale, FP8_FIELD_F64),         F(fp8_stats, scale_inv, FP8_FIELD_F64),
    F(fp8_stats, global_scale_inv, FP8_FIELD_F64), F(fp8_stats, scale_inv_min, FP8_FIELD_F64),
    F(fp8_stats, scale_inv_max, FP8_FIELD_F64), F(fp8_stats, scale_inv_mean, FP8_FIELD_F64),
    F(fp8_stats, scale_inv_std, FP8_FIELD_F64), A(fp8_stats, scale_hist, FP8_FIELD_U64, FP8_SCALE_BINS),
    F(fp8_stats, nblocks, FP8_FIELD_U64),       F(fp8_stats, blocks_with_overflow, FP8_FIELD_U64),
    F(fp8_stats, blocks_with_underflow, FP8_FIELD_U64), F(fp8_stats, max_block_dynamic_range, FP8_FIELD_F64),
};

static const fp8_field summary_fields[] = {
    F(fp8_summary, tensor, FP8_FIELD_U32),       F(fp8_summary, recipe, FP8_FIELD_U32),
    F(fp8_summary, step, FP8_FIELD_I64),         F(fp8_summary, active, FP8_FIELD_I32),
    F(fp8_summary, row, FP8_FIELD_U64),          F(fp8_summary, hist_row, FP8_FIELD_U64),
    F(fp8_summary, rows, FP8_FIELD_U64),         F(fp8_summary, cols, FP8_FIELD_U64),
    F(fp8_summary, numel, FP8_FIELD_U64),        F(fp8_summary, finite, FP8_FIELD_U64),
    F(fp8_summary, nan_count, FP8_FIELD_U64),    F(fp8_summary, inf_count, FP8_FIELD_U64),
    F(fp8_summary, zero_count, FP8_FIELD_U64),   F(fp8_summary, overflows, FP8_FIELD_U64),
    F(fp8_summary, underflows, FP8_FIELD_U64),   F(fp8_summary, subnormals, FP8_FIELD_U64),
    F(fp8_summary, te_overflows, FP8_FIELD_U64), F(fp8_summary, nscales, FP8_FIELD_U64),
    F(fp8_summary, nblocks, FP8_FIELD_U64),      F(fp8_summary, blocks_with_overflow, FP8_FIELD_U64),
    F(fp8_summary, blocks_with_underflow, FP8_FIELD_U64), F(fp8_summary, amax, FP8_FIELD_F64),
    F(fp8_summary, std, FP8_FIELD_F64),          F(fp8_summary, l2, FP8_FIELD_F64),
    F(fp8_summary, kurtosis, FP8_FIELD_F64),     F(fp8_summary, min_nonzero, FP8_FIELD_F64),
    F(fp8_summary, dynamic_range, FP8_FIELD_F64), F(fp8_summary, rel_err, FP8_FIELD_F64),
    F(fp8_summary, sqnr_db, FP8_FIELD_F64),      F(fp8_summary, mse, FP8_FIELD_F64),
    F(fp8_summary, scale, FP8_FIELD_F64),        F(fp8_summary, scale_inv, FP8_FIELD_F64),
    F(fp8_summary, scale_inv_min, FP8_FIELD_F64), F(fp8_summary, scale_inv_max, FP8_FIELD_F64),
    F(fp8_summary, max_block_dynamic_range, FP8_FIELD_F64),
};
#undef F
#undef A

const fp8_field *fp8_stats_fields(size_t *n)
{
    *n = sizeof stats_fields / sizeof stats_fields[0];
    return stats_fields;
}

size_t fp8_stats_size(void) { return sizeof(fp8_stats); }

const char *fp8_stats_format_name(const fp8_stats *s) { return s && s->format ? s->format->name : ""; }

const fp8_field *fp8_summary_fields(size_t *n)
{
    *n = sizeof summary_fields / sizeof summary_fields[0];
    return summary_fields;
}

size_t fp8_summary_size(void) { return sizeof(fp8_summary); }

size_t fp8_run_count(const fp8_run *r, fp8_run_part what)
{
    if (!r)
        return 0;
    switch (what) {
    case FP8_RUN_META:
        return (size_t)r->nmeta;
    case FP8_RUN_TENSORS:
        return (size_t)r->ntensors;
    case FP8_RUN_RECIPES:
        return (size_t)r->nrecipes;
    case FP8_RUN_SCALAR_NAMES:
        return (size_t)r->nscalar_names;
    case FP8_RUN_RECORDS:
        return r->nrecords;
    case FP8_RUN_SCALARS:
        return r->nscalars;
    case FP8_RUN_SNAPSHOTS:
        return r->nsnapshots;
    case FP8_RUN_STEPS:
        return r->nsteps;
    case FP8_RUN_UNREADABLE_RECORDS:
        return r->unreadable_records;
    case FP8_RUN_UNREADABLE_ROWS:
        return r->unreadable_rows;
    }
    return 0;
}

const char *fp8_run_name(const fp8_run *r, fp8_run_part what, size_t i)
{
    if (!r || i >= fp8_run_count(r, what))
        return NULL;
    switch (what) {
    case FP8_RUN_META:
        return r->meta_key[i];
    case FP8_RUN_TENSORS:
        return r->tensor_name[i];
    case FP8_RUN_RECIPES:
        return r->recipe_spec[i];
    case FP8_RUN_SCALAR_NAMES:
        return r->scalar_name[i];
    default:
        return NULL;
    }
}

const char *fp8_run_meta_value(const fp8_run *r, size_t i)
{
    return r && i < (size_t)r->nmeta ? r->meta_value[i] : NULL;
}

int fp8_run_tensor_info(const fp8_run *r, size_t t, int *role, int *layer)
{
    if (!r || t >= (size_t)r->ntensors)
        return FP8_ERROR(FP8_EINVAL, "run: no tensor %zu", t);
    *role = r->tensor_role[t], *layer = r->tensor_layer[t];
    return FP8_OK;
}

int fp8_run_schema(const fp8_run *r) { return r ? r->schema : 0; }

const fp8_summary *fp8_run_summaries(const fp8_run *r) { return r ? r->summaries : NULL; }

int fp8_run_scalar(const fp8_run *r, size_t i, uint32_t *name, int64_t *step, double *value)
{
    if (!r || i >= r->nscalars)
        return FP8_ERROR(FP8_EINVAL, "run: no scalar row %zu", i);
    *name = r->scalar_id[i], *step = r->scalar_step[i], *value = r->scalar_value[i];
    return FP8_OK;
}

int fp8_run_snapshot_info(const fp8_run *r, size_t i, uint32_t *tensor, int64_t *step, uint64_t *rows, uint64_t *cols)
{
    if (!r || i >= r->nsnapshots)
        return FP8_ERROR(FP8_EINVAL, "run: no snapshot %zu", i);
    const fp8_snapshot *s = &r->snapshots[i];
    *tensor = s->tensor, *step = s->step, *rows = s->rows, *cols = s->cols;
    return FP8_OK;
}
