/*
 * datasets.h — internal: the on-disk layout of run files shared by the
 * writer (store.c) and the reader (run_read.c): record structs, HDF5 types,
 * dataset names, and the guard that silences HDF5's own error printing.
 * docs/schema.md is the public description of the same layout.
 */
#ifndef FP8_STORE_DATASETS_H
#define FP8_STORE_DATASETS_H

#include <hdf5.h>
#include <stdint.h>

#include "fp8_store.h"


/* Every numeric statistic of fp8_stats, as stored (X-macro: U = uint64,
 * D = double).  The on-disk member names are these names. */
#define STAT_FIELDS(U, D)                                                                                    \
    U(numel) U(finite) U(nan_count) U(inf_count) U(zero_count) D(amax) D(min) D(max) D(mean) D(std) D(l1)      \
    D(l2) D(min_nonzero) D(dynamic_range) D(kurtosis) U(overflows) U(underflows) U(subnormals)                 \
    U(err_excluded) D(sq_err) D(mse) D(rel_err) D(sqnr_db) D(cosine) D(max_abs_err) U(nscales) D(scale)        \
    D(scale_inv) D(global_scale_inv) D(scale_inv_min) D(scale_inv_max) D(scale_inv_mean) D(scale_inv_std)     \
    U(nblocks) U(blocks_with_overflow) U(blocks_with_underflow) D(max_block_dynamic_range)

#define AS_U64(f) uint64_t f;
#define AS_F64(f) double f;
typedef struct {
    uint32_t tensor, recipe;
    int64_t step;
    int32_t active;
    uint64_t rows, cols;
    uint64_t classes[FP8_NCLASS];
    char format[24];
    STAT_FIELDS(AS_U64, AS_F64)
    uint64_t hist; /* schema 2: row of /exp_hist (shared by the recipes of one tensor and step) */
    uint64_t te_overflows; /* schema 3: TE's overflow count (|x| > fp8_max * scale_inv) */
} disk_record;
#undef AS_U64
#undef AS_F64

typedef struct {
    char name[FP8_NAME_MAX];
    int32_t role, layer;
} disk_tensor;

typedef struct {
    char spec[FP8_SPEC_MAX];
} disk_recipe;

typedef struct {
    char name[FP8_NAME_MAX];
} disk_name;

typedef struct {
    uint32_t id;
    int64_t step;
    double value;
} disk_scalar;

typedef struct {
    uint32_t tensor;
    int64_t step;
    uint64_t offset, rows, cols; /* float32: into /snapshot_data, in elements */
    int32_t recipe;              /* -1: float32 values; else codes of this recipe */
    int32_t code_bytes;
    uint64_t codes_offset;       /* into /snapshot_codes, in bytes          */
    uint64_t scales_offset, nscales; /* into /snapshot_scales (scale_inv per group) */
} disk_snap;


/* One row per tensor x recipe x step the probe saw (schema 3), whatever the
 * statistics cadence: what exact replays and overflow events need. */
typedef struct {
    uint32_t tensor, recipe;
    int64_t step;
    float amax;          /* finite amax over the step's casts of the tensor */
    float scale;         /* the scale this recipe cast with; NaN: grouped   */
    uint32_t nonfinite;  /* bit 0: an Inf input this step; bit 1: a NaN     */
    int32_t active;      /* 1: the recipe the loop computed with            */
} disk_step;

/* Per-block amax summaries (schema 3): blocks of `block` elements along
 * each row, row-major, the last block of a row partial. */
typedef struct {
    uint32_t tensor;
    int64_t step;
    uint64_t rows, cols;
    uint32_t block;
    uint64_t offset, count; /* into /block_amax */
} disk_bamax;

hid_t fp8__str_type(size_t n);
/* A fixed-length string attribute name = value on obj: 0, or -1. */
int fp8__write_str_attr(hid_t obj, const char *name, const char *value);
/* the record of a schema version (1: no hist member; 2: no te_overflows) */
hid_t fp8__record_type(int schema);
hid_t fp8__step_type(void);
hid_t fp8__bamax_type(void);
hid_t fp8__tensor_type(void);
hid_t fp8__recipe_type(void);
hid_t fp8__name_type(void);
hid_t fp8__snap_type(void);
hid_t fp8__scalar_type(void);

enum { D_TENSORS, D_RECIPES, D_SCALAR_NAMES, D_RECORDS, D_EXP_HIST, D_SCALE_HIST, D_SCALARS, D_SNAP_DATA,
       D_SNAP_CODES, D_SNAP_SCALES, D_SNAP_INDEX, D_STEPS, D_BAMAX_DATA, D_BAMAX_INDEX, ND };

/* Bulky optional data, which gives way to the statistics when the disk
 * runs short (a flush drops the group and keeps recording the rest). */
typedef enum { FP8__ESSENTIAL = 0, FP8__SNAPSHOTS, FP8__BLOCK_AMAX } fp8__optional;

/* What the writer knows of one dataset of a run file, in one place
 * (docs/schema.md describes the same datasets). */
typedef struct {
    const char *name;       /* /name                                          */
    hid_t (*type)(void);    /* a new HDF5 type of its rows (the caller closes it) */
    size_t elem;            /* bytes a row                                     */
    hsize_t width;          /* columns of a 2-D dataset (histograms); 0: 1-D   */
    hsize_t chunk_rows;     /* rows a chunk                                    */
    fp8__optional optional;
    int rle;                /* float data: deflated with zlib's run-length
                               strategy (chunkwrite.h)                      */
} fp8__dataset;

/* indexed by D_* */
extern const fp8__dataset fp8__datasets[ND];

/* The order of a flush: registries first, so a flushed record never names
 * an unknown tensor; histograms before their records; the essential data
 * before the optional; data before its index. */
extern const int fp8__flush_order[ND];

typedef struct {
    H5E_auto2_t fn;
    void *data;
} quiet;

static inline void quiet_on(quiet *q)
{
    H5Eget_auto2(H5E_DEFAULT, &q->fn, &q->data);
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
}

static inline void quiet_off(const quiet *q) { H5Eset_auto2(H5E_DEFAULT, q->fn, q->data); }


/* The writer encodes a flush's chunks on up to this many threads (the
 * probe option threads; 1 when never set). */
void fp8__store_set_threads(fp8_store *s, int threads);

#endif
