/*
 * fp8_store.h — run files: the HDF5 storage of recorded statistics.
 *
 * One run file holds, per tensor x recorded step x recipe, every statistic
 * of the engine (fp8_stats), its exponent histogram (stored once per tensor
 * and step: it describes the input, whatever the recipe) and scale histogram, the scalar
 * series (loss, learning rate, ...) and the run's metadata.  Schema (version
 * FP8_STORE_SCHEMA): docs/schema.md.
 *
 * Design, so that a writer can be read while it writes (HDF5 1.10 SWMR) and
 * discover tensors lazily: every dataset is created when the file is
 * created; tensors, recipes and scalar names are rows appended to registry
 * datasets, never new HDF5 objects.  Records are buffered in memory and
 * appended (and flushed) by fp8_store_flush(); what was flushed survives a
 * crash of the writer.
 */
#ifndef FP8_STORE_H
#define FP8_STORE_H

#include <stdint.h>

#include "fp8_recipe.h"
#include "fp8_stats.h"

#define FP8_STORE_SCHEMA 3
#define FP8_NAME_MAX 128   /* tensor and scalar names, bytes incl. NUL */
#define FP8_SPEC_MAX 320   /* recipe specs, bytes incl. NUL            */
#define FP8_STEP_MAX ((int64_t)1 << 62) /* steps are 0..FP8_STEP_MAX: writers refuse others, readers refuse files with them */
#define FP8_LAYER_MAX (1 << 20)         /* layers are -1 (none) or 0..FP8_LAYER_MAX */

typedef struct fp8_store fp8_store;

/* Create path (truncating an existing file) with metadata key/value pairs
 * (nkv pairs in kv[2*i], kv[2*i+1]; may be 0).  Switches the file to SWMR
 * writing.  The writer holds the file's lock until fp8_store_close: a
 * second writer of the same file (thread, process, rank) is refused and
 * the file left as it is (fp8_file.h).  The file gets a fresh random run
 * id (root attribute fp8prof_run_id).  NULL on failure (message in
 * fp8_error_message()). */
fp8_store *fp8_store_create(const char *path, const char *const *kv, int nkv);

/* The run id: 32 lowercase hex digits (128 random bits), shared by every
 * rank file of one multi-rank run and its index, so that a reader can
 * refuse a rank file of another run (docs/schema.md). */
#define FP8_RUN_ID_LEN 32
int fp8_store_run_id_new(char id[FP8_RUN_ID_LEN + 1]);
int fp8_store_run_id_ok(const char *id);
/* fp8_store_create with the given run id (NULL: a fresh one). */
fp8_store *fp8_store_create_id(const char *path, const char *const *kv, int nkv, const char *run_id);

/* Register a tensor / recipe / scalar name; returns its id (>= 0) or -1.
 * The same name returns the same id. */
int fp8_store_tensor(fp8_store *s, const char *name, fp8_role role, int layer);
int fp8_store_recipe(fp8_store *s, const char *spec);
/* The id of a registered tensor, -1 when name is not registered. */
int fp8_store_find_tensor(const fp8_store *s, const char *name);
int fp8_store_scalar_name(fp8_store *s, const char *name);

/* Buffer one record (copied) / one scalar value. */
int fp8_store_add_record(fp8_store *s, int tensor, int recipe, int64_t step, int active, uint64_t rows,
                         uint64_t cols, const fp8_stats *st);
int fp8_store_add_scalar(fp8_store *s, int name, int64_t step, double value);

/* Buffer one every-step row: tensor x recipe x step, the finite amax over
 * the step's casts, the scale the recipe cast with (NaN for grouped
 * recipes), nonfinite bit 0 = an Inf input this step, bit 1 = a NaN. */
int fp8_store_add_step(fp8_store *s, int tensor, int recipe, int64_t step, int active, float amax, float scale,
                       unsigned nonfinite);

/* Buffer per-block amax summaries of a rows x cols tensor at step: blocks
 * of `block` elements along each row (the last one partial), row-major,
 * rows * ceil(cols / block) floats (copied). */
int fp8_store_add_block_amax(fp8_store *s, int tensor, int64_t step, uint64_t rows, uint64_t cols, uint32_t block,
                             const float *amax);

/* Buffer a full-tensor snapshot (float32, copied). */
int fp8_store_add_snapshot(fp8_store *s, int tensor, int64_t step, const float *x, uint64_t rows, uint64_t cols);

/* Buffer a snapshot as a recipe's FP8 codes (code_bytes each, little-endian,
 * row-major) and its groups' scale_inv (fp8_quantize_codes gives both). */
int fp8_store_add_snapshot_codes(fp8_store *s, int tensor, int64_t step, int recipe, const void *codes,
                                 int code_bytes, uint64_t rows, uint64_t cols, const float *scale_inv,
                                 uint64_t nscales);

/* Append everything buffered to the file and flush it to disk. */
int fp8_store_flush(fp8_store *s);

/* Flush and close; returns the first error of the flush, if any. */
int fp8_store_close(fp8_store *s);

/* ---- reading ------------------------------------------------------------- */

/* One stored record: identifiers and the statistics (format pointer NULL,
 * format_name set instead). */
typedef struct {
    uint32_t tensor, recipe;
    int64_t step;
    int active;
    uint64_t rows, cols;
    fp8_stats stats;
} fp8_record;

/* Where snapshot k of a run is (see docs/schema.md). */
typedef struct {
    uint32_t tensor;
    int64_t step;
    uint64_t offset, rows, cols;
    int32_t recipe, code_bytes;  /* recipe -1: float32 values; else codes of that recipe */
    uint64_t codes_offset, scales_offset, nscales;
} fp8_snapshot;

/* One every-step row (schema 3, /steps): the tensor's finite amax over the
 * step's casts, the scale recipe `recipe` cast it with (NaN: grouped
 * recipe), nonfinite bit 0: an Inf input, bit 1: a NaN input. */
typedef struct {
    uint32_t tensor, recipe;
    int64_t step;
    float amax, scale;
    uint32_t nonfinite;
    int32_t active;
} fp8_step_row;

/* Where per-block amax summary k is (schema 3, /block_amax_index): rows x
 * ceil(cols / block) floats, blocks of `block` elements along each row. */
typedef struct {
    uint32_t tensor;
    int64_t step;
    uint64_t rows, cols;
    uint32_t block;
    uint64_t offset, count;
} fp8_block_amax;

/* One stored record without its histograms (what analyses of long runs
 * hold in memory: ~220 bytes instead of ~4.3 KB).  row: its row in /records,
 * /exp_hist and /scale_hist. */
typedef struct {
    uint32_t tensor, recipe;
    int64_t step;
    int32_t active;
    uint64_t row, hist_row, rows, cols; /* hist_row: its /exp_hist row */
    uint64_t numel, finite, nan_count, inf_count, zero_count, overflows, underflows, subnormals;
    uint64_t te_overflows; /* UINT64_MAX: not recorded (schema < 3) */
    uint64_t nscales, nblocks, blocks_with_overflow, blocks_with_underflow;
    double amax, std, l2, kurtosis, min_nonzero, dynamic_range, rel_err, sqnr_db, mse;
    double scale, scale_inv, scale_inv_min, scale_inv_max, max_block_dynamic_range;
} fp8_summary;

typedef struct {
    int schema;
    int nmeta;
    char (*meta_key)[FP8_NAME_MAX];
    char **meta_value;
    int ntensors;
    char (*tensor_name)[FP8_NAME_MAX];
    int *tensor_role, *tensor_layer;
    int nrecipes;
    char (*recipe_spec)[FP8_SPEC_MAX];
    int nscalar_names;
    char (*scalar_name)[FP8_NAME_MAX];
    size_t nrecords;
    fp8_record *records;  /* in the order written (NULL if loaded as summaries) */
    fp8_summary *summaries; /* fp8_run_load_summary: nrecords summaries instead */
    size_t nscalars;
    uint32_t *scalar_id;
    int64_t *scalar_step;
    double *scalar_value;
    size_t nsnapshots;
    fp8_snapshot *snapshots; /* index only; data via fp8_run_snapshot_read */
    size_t nsteps;
    fp8_step_row *steps;     /* every-step rows in file order (0 before schema 3) */
    size_t nblock_amax;
    fp8_block_amax *block_amax; /* index only; data via fp8_run_block_amax_read */
    char path[1024];
    /* a multi-rank run loaded through its index (fp8_ranks.h): nranks ranks,
     * this is rank 0's file (path); 0 for a one-process run */
    int nranks;
    char index_path[1024];
    char run_id[FP8_RUN_ID_LEN + 1]; /* fp8prof_run_id ("" in files before it) */
    /* rows of /records past the first unreadable one (a write torn when the
     * writer was killed, or other damage): not loaded; the rows before it
     * are.  0 for an intact file. */
    size_t unreadable_records;
    /* the same for the every-step series and indexes: the rows of /steps,
     * /scalars, /snapshot_index and /block_amax_index past the first
     * unreadable one in each, summed */
    size_t unreadable_rows;
} fp8_run;

/* Load a run file (also while its writer is running, or after the writer
 * died).  NULL with a message naming the file and the problem: not HDF5,
 * not an fp8prof run, a newer schema, a damaged file.  Records past a
 * damaged stretch of /records (or of their histograms) are left out and
 * counted in unreadable_records when the records before it read; rows past
 * a damaged stretch of /steps, /scalars, /snapshot_index or
 * /block_amax_index likewise, counted in unreadable_rows. */
fp8_run *fp8_run_load(const char *path);
/* The same, keeping only records and snapshots of tensors whose name
 * matches tensor_pattern (fnmatch; NULL: all) and steps in [step_min,
 * step_max].  Registries (tensors, recipes) stay whole. */
fp8_run *fp8_run_load_filtered(const char *path, const char *tensor_pattern, int64_t step_min, int64_t step_max);
void fp8_run_free(fp8_run *run);
/* A /meta value of the run, NULL when the key is absent. */
const char *fp8_run_meta(const fp8_run *run, const char *key);

/* 1 while a writer has the file open (HDF5 refuses a plain read-only open
 * of a file whose SWMR-write flags are set: a running writer, or one that
 * was killed), 0 once it closed it, -1 when the file cannot be opened. */
int fp8_run_writer_open(const char *path);

/* Load records as summaries (run->summaries; run->records NULL): the
 * histograms stay on disk, read on demand with fp8_run_exp_hist. */
fp8_run *fp8_run_load_summary(const char *path, const char *tensor_pattern);
/* Registries, metadata, scalars, snapshot index and the every-step series
 * (/steps) only: no records (nrecords 0).  What cross-rank analyses read. */
fp8_run *fp8_run_load_series(const char *path);
/* Rank `rank` of the multi-rank run indexed at `index` (nranks ranks), as
 * fp8_run_load_series, refused with a message naming the file when it is
 * itself an index, when its /meta mpi_rank and mpi_world_size are not
 * rank and nranks, or when its run id is not the index's (a rank file of
 * another run, a copy of another rank). */
fp8_run *fp8_run_load_rank(const char *index, int rank, int nranks);

/* Exponent histograms (FP8_EXP_BINS each) of the given /exp_hist rows
 * (fp8_summary.hist_row; ascending, repeats allowed) into
 * out[n][FP8_EXP_BINS]. */
int fp8_run_exp_hist(const fp8_run *run, const uint64_t *rows, size_t n, uint64_t *out);

/* Read per-block amax summary i (block_amax[i].count floats) into out. */
int fp8_run_block_amax_read(const fp8_run *run, size_t i, float *out);
/* The whole /block_amax dataset (every summary; index with
 * block_amax[i].offset): one sequential read, for analyses that visit most
 * summaries.  *out is malloc'd; *n gets its length. */
int fp8_run_block_amax_all(const fp8_run *run, float **out, size_t *n);

/* Read snapshot i (rows * cols floats) into out; a codes snapshot is
 * decoded: x_hat = decode(code) * scale_inv of the element's group. */
int fp8_run_snapshot_read(const fp8_run *run, size_t i, float *out);

#endif
