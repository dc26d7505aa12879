/*
 * run_read.c — loading run files (fp8_store.h): whole, or a selection of
 * tensors and steps; also while their writer runs (SWMR) or after it died.
 * Opening and row reads: run_file.c; a loaded run's block amaxes,
 * snapshots and histograms read on demand: run_slices.c.
 */
#include <fnmatch.h>
#include <hdf5.h>
#include <unistd.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fp8_file.h"
#include "fp8_ranks.h"
#include "bigmem.h"
#include "datasets.h"
#include "run_file.h"

int fp8_run_writer_open(const char *path)
{
    if (!path || fp8_file_regular(path) != FP8_OK)
        return -1; /* (a FIFO would block the open below) */
    /* an index: its rank 0's writer (the index itself is written once, closed) */
    char rank0[1024];
    int nr;
    const char *rp = fp8__run_file_of(path, rank0, sizeof rank0, &nr);
    if (rp)
        path = rp;
    quiet q;
    quiet_on(&q);
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    if (fapl >= 0)
        H5Pset_metadata_read_attempts(fapl, METADATA_READ_ATTEMPTS);
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, fapl >= 0 ? fapl : H5P_DEFAULT);
    int st = 0;
    if (f >= 0)
        H5Fclose(f);
    else {
        hid_t g = H5Fopen(path, H5F_ACC_RDONLY | H5F_ACC_SWMR_READ, fapl >= 0 ? fapl : H5P_DEFAULT);
        st = g >= 0 ? 1 : -1;
        if (g >= 0)
            H5Fclose(g);
    }
    if (fapl >= 0)
        H5Pclose(fapl);
    quiet_off(&q);
    return st;
}

const char *fp8_run_meta(const fp8_run *r, const char *key)
{
    for (int i = 0; r && i < r->nmeta; i++)
        if (strcmp(r->meta_key[i], key) == 0)
            return r->meta_value[i];
    return NULL;
}

void fp8_run_free(fp8_run *r)
{
    if (!r)
        return;
    for (int i = 0; i < r->nmeta; i++)
        free(r->meta_value[i]);
    free(r->meta_key);
    free(r->meta_value);
    free(r->tensor_name);
    free(r->tensor_role);
    free(r->tensor_layer);
    free(r->recipe_spec);
    free(r->scalar_name);
    free(r->records);
    free(r->summaries);
    free(r->scalar_id);
    free(r->scalar_step);
    free(r->scalar_value);
    free(r->snapshots);
    free(r->steps);
    free(r->block_amax);
    free(r);
}

static herr_t meta_cb(hid_t loc, const char *name, const H5A_info_t *info, void *op)
{
    (void)info;
    fp8_run *r = op;
    char *v = fp8__read_str_attr(loc, name);
    if (!v)
        return 0;
    void *k = realloc(r->meta_key, (size_t)(r->nmeta + 1) * sizeof *r->meta_key);
    void *vv = k ? realloc(r->meta_value, (size_t)(r->nmeta + 1) * sizeof *r->meta_value) : NULL;
    if (k)
        r->meta_key = k;
    if (!k || !vv) {
        free(v);
        return -1;
    }
    r->meta_value = vv;
    snprintf(r->meta_key[r->nmeta], FP8_NAME_MAX, "%s", name);
    r->meta_value[r->nmeta++] = v;
    return 0;
}

/* The statistics a summary keeps (U = uint64, D = double). */
#define SUMMARY_FIELDS(U, D)                                                                                 \
    U(numel) U(finite) U(nan_count) U(inf_count) U(zero_count) U(overflows) U(underflows) U(subnormals)     \
    U(nscales) U(nblocks) U(blocks_with_overflow) U(blocks_with_underflow) D(amax) D(std) D(l2) D(kurtosis)              \
    D(min_nonzero) D(dynamic_range) D(rel_err) D(sqnr_db) D(mse) D(scale) D(scale_inv) D(scale_inv_min)       \
    D(scale_inv_max) D(max_block_dynamic_range)

static void summarize(const disk_record *d, uint64_t row, fp8_summary *o)
{
    o->te_overflows = d->te_overflows;
    o->tensor = d->tensor, o->recipe = d->recipe, o->step = d->step, o->active = d->active, o->row = row;
    o->hist_row = d->hist;
    o->rows = d->rows, o->cols = d->cols;
#define CP(f) o->f = d->f;
    SUMMARY_FIELDS(CP, CP)
#undef CP
}

static fp8_run *load(const char *path, const char *tensor_pattern, int64_t step_min, int64_t step_max, int lean,
                     int no_index);

/* Schema 3: the every-step rows and the block-amax index, kept for the
 * tensors and steps selected; an index naming a tensor or recipe the file
 * does not have is an error naming the dataset and row. */
/* lim_steps, lim_bix: the rows of /steps and /block_amax_index counted
 * before the registries were read (load) */
static int load_series(hid_t file, fp8_run *r, const unsigned char *keep, int64_t step_min, int64_t step_max,
                       hsize_t lim_steps, hsize_t lim_bix)
{
    void *rows = NULL, *bix = NULL;
    size_t n = 0, nb = 0;
    hid_t st = fp8__step_type(), bt = fp8__bamax_type();
    /* /steps can hold millions of rows: inflated on two threads */
    hid_t ds = H5Dopen2(file, fp8__datasets[D_STEPS].name, H5P_DEFAULT);
    int bad = ds < 0;
    if (!bad) {
        hsize_t have = fp8__rows_of(ds);
        n = (size_t)(have < lim_steps ? have : lim_steps);
        rows = n <= SIZE_MAX / sizeof(disk_step) ? fp8__malloc_big((n ? n : 1) * sizeof(disk_step)) : NULL;
        bad = !rows;
        if (rows) { /* a damaged stretch: the rows before it, the rest counted */
            size_t got = (size_t)fp8__read_prefix(ds, st, sizeof(disk_step), n, 0, rows);
            r->unreadable_rows += n - got;
            n = got;
        }
        H5Dclose(ds);
    }
    bad = bad || fp8__read_upto(file, fp8__datasets[D_BAMAX_INDEX].name, bt, sizeof(disk_bamax), &bix, &nb, lim_bix,
                           &r->unreadable_rows);
    H5Tclose(st), H5Tclose(bt);
    uint64_t len_bam = 0;
    hid_t dba = bad ? -1 : H5Dopen2(file, fp8__datasets[D_BAMAX_DATA].name, H5P_DEFAULT);
    if (dba >= 0) {
        len_bam = (uint64_t)fp8__rows_of(dba);
        H5Dclose(dba);
    } else
        bad = 1;
    if (bad) {
        free(rows), free(bix);
        return FP8_ERROR(FP8_EINVAL, "%s: /steps or /block_amax_index is missing or unreadable", r->path);
    }
    r->steps = fp8__calloc_big(n + 1, sizeof *r->steps);
    r->block_amax = malloc((nb + 1) * sizeof *r->block_amax);
    if (!r->steps || !r->block_amax) {
        free(rows), free(bix);
        return FP8_ERROR(FP8_ENOMEM, "%s: out of memory for %zu step rows", r->path, n);
    }
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        const disk_step *d = (const disk_step *)rows + i;
        if (d->step < 0 || d->step > FP8_STEP_MAX) {
            int e = FP8_ERROR(FP8_EINVAL, "%s: /steps row %zu: step %lld is outside 0..2^62", r->path, i,
                              (long long)d->step);
            free(rows), free(bix);
            return e;
        }
        if (d->tensor >= (uint32_t)r->ntensors || d->recipe >= (uint32_t)r->nrecipes) {
            int e = FP8_ERROR(FP8_EINVAL, "%s: /steps row %zu names tensor %u and recipe %u; the file has %d and %d",
                              r->path, i, d->tensor, d->recipe, r->ntensors, r->nrecipes);
            free(rows), free(bix); /* d points into rows: the message first */
            return e;
        }
        if (!keep[d->tensor] || d->step < step_min || d->step > step_max)
            continue;
        fp8_step_row *o = &r->steps[k++];
        o->tensor = d->tensor, o->recipe = d->recipe, o->step = d->step, o->amax = d->amax, o->scale = d->scale;
        o->nonfinite = d->nonfinite, o->active = d->active;
    }
    r->nsteps = k;
    k = 0;
    for (size_t i = 0; i < nb; i++) {
        const disk_bamax *d = (const disk_bamax *)bix + i;
        uint64_t per_row = d->block ? d->cols / d->block + (d->cols % d->block != 0) : 0;
        if (d->tensor >= (uint32_t)r->ntensors || !d->block || !d->rows || !d->cols || d->rows > UINT64_MAX / per_row ||
            d->step < 0 || d->step > FP8_STEP_MAX ||
            d->count != d->rows * per_row || d->offset > len_bam || d->count > len_bam - d->offset) {
            int e = FP8_ERROR(FP8_EINVAL,
                              "%s: /block_amax_index row %zu is inconsistent (tensor %u, %llux%llu, block %u, count %llu "
                              "at %llu of %llu)",
                              r->path, i, d->tensor, (unsigned long long)d->rows, (unsigned long long)d->cols, d->block,
                              (unsigned long long)d->count, (unsigned long long)d->offset, (unsigned long long)len_bam);
            free(rows), free(bix); /* d points into bix: the message first */
            return e;
        }
        if (!keep[d->tensor] || d->step < step_min || d->step > step_max)
            continue;
        fp8_block_amax *o = &r->block_amax[k++];
        o->tensor = d->tensor, o->step = d->step, o->rows = d->rows, o->cols = d->cols, o->block = d->block;
        o->offset = d->offset, o->count = d->count;
    }
    r->nblock_amax = k;
    free(rows), free(bix);
    return 0;
}

fp8_run *fp8_run_load(const char *path) { return load(path, NULL, INT64_MIN, INT64_MAX, 0, 0); }

fp8_run *fp8_run_load_filtered(const char *path, const char *tensor_pattern, int64_t step_min, int64_t step_max)
{
    return load(path, tensor_pattern, step_min, step_max, 0, 0);
}

fp8_run *fp8_run_load_summary(const char *path, const char *tensor_pattern)
{
    return load(path, tensor_pattern, INT64_MIN, INT64_MAX, 1, 0);
}

fp8_run *fp8_run_load_series(const char *path) { return load(path, NULL, INT64_MIN, INT64_MAX, 2, 0); }

fp8_run *fp8_run_load_rank(const char *index, int rank, int nranks)
{
    char rp[1100], iid[FP8_RUN_ID_LEN + 1];
    if (!index || rank < 0 || fp8_rank_path(index, rank, rp, sizeof rp) != 0) {
        FP8_ERROR(FP8_EINVAL, "%s: path too long", index ? index : "(null)");
        return NULL;
    }
    if (fp8_ranks_run_id(index, iid) != 0) {
        FP8_ERROR(FP8_EIO, "%s: cannot read the index", index);
        return NULL;
    }
    fp8_run *run = load(rp, NULL, INT64_MIN, INT64_MAX, 2, 1);
    if (!run)
        return NULL;
    const char *mr = fp8_run_meta(run, "mpi_rank"), *mw = fp8_run_meta(run, "mpi_world_size");
    char want_r[16], want_w[16];
    snprintf(want_r, sizeof want_r, "%d", rank);
    snprintf(want_w, sizeof want_w, "%d", nranks);
    if (!mr || !mw || strcmp(mr, want_r) != 0 || strcmp(mw, want_w) != 0) {
        FP8_ERROR(FP8_EINVAL, "%s: its /meta says rank %s of %s, the index says rank %d of %d", rp, mr ? mr : "(none)",
                  mw ? mw : "(none)", rank, nranks);
        fp8_run_free(run);
        return NULL;
    }
    if (iid[0] && strcmp(iid, run->run_id) != 0) {
        FP8_ERROR(FP8_EINVAL, "%s belongs to another run than its index %s (run id %s, the index's %s): a rank file "
                              "of another run, or a copy; refused",
                  rp, index, run->run_id[0] ? run->run_id : "(none)", iid);
        fp8_run_free(run);
        return NULL;
    }
    return run;
}

/* Largest tensor a snapshot may describe (elements): far past any real one,
 * and small enough that rows * cols * 4 cannot wrap. */
#define SNAPSHOT_MAX_ELEMENTS (UINT64_C(1) << 40)

/* Why snapshot index row d cannot be trusted, or NULL: its tensor and
 * recipe exist, its shape is non-empty without overflow, its code width is
 * the recipe's format's, its group count is the recipe's for that shape,
 * and its data lie inside the datasets. */
static const char *snapshot_row_bad(const disk_snap *d, const fp8_run *r, uint64_t len_data, uint64_t len_codes,
                                    uint64_t len_scales)
{
    if (d->tensor >= (uint32_t)r->ntensors)
        return "tensor index past /tensors";
    if (!d->rows || !d->cols || d->rows > SNAPSHOT_MAX_ELEMENTS / d->cols)
        return "shape empty or too large (rows x cols)";
    uint64_t n = d->rows * d->cols;
    if (d->recipe < 0) {
        if (d->offset > len_data || n > len_data - d->offset)
            return "float32 values past the end of /snapshot_data";
        return NULL;
    }
    if (d->recipe >= r->nrecipes)
        return "recipe index past /recipes";
    fp8_recipe rec;
    if (fp8_recipe_parse(r->recipe_spec[d->recipe], &rec) != FP8_OK)
        return "its recipe spec does not parse";
    fp8_recipe_for_role(&rec, (fp8_role)r->tensor_role[d->tensor]);
    const fp8_format *f = fp8_recipe_format(&rec, (fp8_role)r->tensor_role[d->tensor]);
    if (!f || d->code_bytes != f->code_bytes)
        return "code_bytes is not its format's code width";
    if (d->nscales != fp8_quantize_ngroups(&rec, (size_t)d->rows, (size_t)d->cols))
        return "nscales is not its recipe's number of groups for the shape";
    uint64_t nb = n * (uint64_t)d->code_bytes;
    if (d->codes_offset > len_codes || nb > len_codes - d->codes_offset)
        return "codes past the end of /snapshot_codes";
    if (d->scales_offset > len_scales || d->nscales > len_scales - d->scales_offset)
        return "scales past the end of /snapshot_scales";
    return NULL;
}

/* What reading /records a slab at a time needs: its datasets, buffers and
 * the /exp_hist rows the buffer holds. */
typedef struct {
    hid_t drec, rct, dexp, dsch;
    int schema, lean;
    size_t slab;
    uint64_t ne;
    void *records;
    uint64_t *exph, *sch;
    uint64_t hbase, hcnt;
} slab_reader;

/* rows [i, i + cnt) of /records and their histograms into the buffers: 0,
 * or nonzero when some of them cannot be read */
static int slab_read(slab_reader *S, size_t i, hsize_t cnt)
{
    if (!cnt)
        return 0;
    if (fp8__read_rows(S->drec, S->rct, i, cnt, 0, S->records))
        return 1;
    disk_record *rec = S->records;
    for (size_t j = 0; S->schema < 2 && j < cnt; j++)
        rec[j].hist = i + j; /* schema 1: one histogram row per record */
    for (size_t j = 0; S->schema < 3 && j < cnt; j++)
        rec[j].te_overflows = UINT64_MAX; /* not recorded before schema 3 */
    if (S->lean)
        return 0;
    /* the slab's histograms: rows from its first record's on */
    S->hbase = rec[0].hist;
    S->hcnt = S->hbase < S->ne ? (S->ne - S->hbase < S->slab ? S->ne - S->hbase : S->slab) : 0;
    return (S->hcnt && fp8__read_rows(S->dexp, H5T_NATIVE_UINT64, S->hbase, S->hcnt, FP8_EXP_BINS, S->exph)) ||
           fp8__read_rows(S->dsch, H5T_NATIVE_UINT64, i, cnt, FP8_SCALE_BINS, S->sch);
}

/* The slab at i of cnt rows, or, when some of it cannot be read, its
 * longest readable beginning (found by halving; a killed writer's torn
 * write damages the newest rows): the rows read, held in the buffers. */
static hsize_t slab_salvage(slab_reader *S, size_t i, hsize_t cnt)
{
    if (!slab_read(S, i, cnt))
        return cnt;
    hsize_t lo = 0, hi = cnt; /* lo rows read, hi do not */
    while (hi - lo > 1) {
        hsize_t mid = lo + (hi - lo) / 2;
        if (slab_read(S, i, mid))
            hi = mid;
        else
            lo = mid;
    }
    if (lo)
        slab_read(S, i, lo);
    return lo;
}

/* The file behind path (rank 0's for an index), opened for reading: its
 * handle, or -1 with the error set naming why (not there, not HDF5,
 * truncated, damaged). */
static hid_t open_file(const char *path, const char *index, int nranks)
{
    if (H5Fis_hdf5(path) <= 0) {
        FILE *f = fopen(path, "rb");
        if (!f && nranks)
            FP8_ERROR(FP8_EIO, "%s: cannot open rank 0's file %s", index, path);
        else if (!f)
            FP8_ERROR(FP8_EIO, "%s: cannot open", path);
        else {
            fclose(f);
            FP8_ERROR(FP8_EINVAL, "%s: not an HDF5 file (or a damaged one)", path);
        }
        return -1;
    }
    int truncated;
    hid_t file = fp8__run_open_why(path, &truncated);
    if (file < 0) {
        if (truncated)
            FP8_ERROR(FP8_EIO, "%s: truncated: the file is shorter than its HDF5 header says (a copy or transfer cut "
                               "short?); nothing can be read from it", path);
        else
            FP8_ERROR(FP8_EIO, "%s: HDF5 cannot open it (damaged?)", path);
    }
    return file;
}

/* A new run for an open file: its schema (one this reader knows), path and
 * run id, which must be the index's when path is rank 0's file of one; NULL
 * with the error set. */
static fp8_run *new_run(hid_t file, const char *path, const char *index, int nranks)
{
    char *ver = fp8__read_str_attr(file, "fp8prof_schema");
    if (!ver) {
        FP8_ERROR(FP8_EINVAL, "%s: an HDF5 file, but not an fp8prof run (no fp8prof_schema attribute)", path);
        return NULL;
    }
    int schema = atoi(ver);
    free(ver);
    if (schema < 1 || schema > FP8_STORE_SCHEMA) {
        FP8_ERROR(FP8_EINVAL, "%s: schema version %d; this fp8prof reads up to %d (upgrade fp8prof)", path, schema,
                  FP8_STORE_SCHEMA);
        return NULL;
    }
    fp8_run *r = calloc(1, sizeof *r);
    if (!r) {
        FP8_ERROR(FP8_ENOMEM, "%s: out of memory", path);
        return NULL;
    }
    r->schema = schema;
    snprintf(r->path, sizeof r->path, "%s", path); /* (messages below name it) */
    char *id = fp8__read_str_attr(file, "fp8prof_run_id");
    if (id && fp8_store_run_id_ok(id))
        snprintf(r->run_id, sizeof r->run_id, "%s", id);
    free(id);
    if (nranks) { /* rank 0's file must be the index's */
        char iid[FP8_RUN_ID_LEN + 1];
        if (fp8_ranks_run_id(index, iid) == 0 && iid[0] && strcmp(iid, r->run_id) != 0) {
            FP8_ERROR(FP8_EINVAL, "%s belongs to another run than its index %s (run id %s, the index's %s): refused",
                      path, index, r->run_id[0] ? r->run_id : "(none)", iid);
            fp8_run_free(r);
            return NULL;
        }
    }
    return r;
}

/* The run's arrays for nt tensors, nr recipes, nn scalar names, nrec
 * records (summaries when lean) and nsc scalars: 0, or -1 out of memory. */
static int alloc_arrays(fp8_run *r, size_t nt, size_t nr, size_t nn, size_t nrec, size_t nsc, int lean)
{
    r->ntensors = (int)nt;
    r->tensor_name = calloc(nt + 1, FP8_NAME_MAX);
    r->tensor_role = calloc(nt + 1, sizeof(int));
    r->tensor_layer = calloc(nt + 1, sizeof(int));
    r->nrecipes = (int)nr;
    r->recipe_spec = calloc(nr + 1, FP8_SPEC_MAX);
    r->nscalar_names = (int)nn;
    r->scalar_name = calloc(nn + 1, FP8_NAME_MAX);
    r->nrecords = nrec;
    if (lean)
        r->summaries = fp8__calloc_big(nrec + 1, sizeof *r->summaries);
    else
        r->records = fp8__calloc_big(nrec + 1, sizeof *r->records);
    r->nscalars = nsc;
    r->scalar_id = calloc(nsc + 1, sizeof *r->scalar_id);
    r->scalar_step = calloc(nsc + 1, sizeof *r->scalar_step);
    r->scalar_value = calloc(nsc + 1, sizeof *r->scalar_value);
    if (!r->tensor_name || !r->tensor_role || !r->tensor_layer || !r->recipe_spec || !r->scalar_name ||
        !(lean ? (void *)r->summaries : (void *)r->records) || !r->scalar_id || !r->scalar_step || !r->scalar_value) {
        FP8_ERROR(FP8_ENOMEM, "%s: out of memory", r->path);
        return -1;
    }
    return 0;
}

/* The registries' rows into the run (names cut at their last byte): 0, or
 * -1 with the error set for a tensor whose role or layer is out of range. */
static int copy_registries(fp8_run *r, const disk_tensor *tens, size_t nt, const disk_recipe *recs, size_t nr,
                           const disk_name *names, size_t nn)
{
    for (size_t i = 0; i < nt; i++) {
        const disk_tensor *d = tens + i;
        memcpy(r->tensor_name[i], d->name, FP8_NAME_MAX);
        r->tensor_name[i][FP8_NAME_MAX - 1] = 0;
        r->tensor_role[i] = d->role, r->tensor_layer[i] = d->layer;
        if (d->layer < -1 || d->layer > FP8_LAYER_MAX || d->role < 0 || d->role >= FP8_NROLE) {
            FP8_ERROR(FP8_EINVAL, "%s: /tensors row %zu: %s %d is outside %s", r->path, i,
                      d->role < 0 || d->role >= FP8_NROLE ? "role" : "layer",
                      d->role < 0 || d->role >= FP8_NROLE ? d->role : d->layer,
                      d->role < 0 || d->role >= FP8_NROLE ? "0..4" : "-1..2^20");
            return -1;
        }
    }
    for (size_t i = 0; i < nr; i++) {
        memcpy(r->recipe_spec[i], recs[i].spec, FP8_SPEC_MAX);
        r->recipe_spec[i][FP8_SPEC_MAX - 1] = 0;
    }
    for (size_t i = 0; i < nn; i++) {
        memcpy(r->scalar_name[i], names[i].name, FP8_NAME_MAX);
        r->scalar_name[i][FP8_NAME_MAX - 1] = 0;
    }
    return 0;
}

/* /records' nrec rows, a slab at a time, into the run: those of the tensors
 * kept, in [step_min, step_max] (as summaries when SR->lean).  Rows from a
 * damaged slab on are left out and counted; 0, or -1 with the error set
 * when the first slab cannot be read or a row is out of range. */
static int load_records(fp8_run *r, slab_reader *SR, size_t nrec, const unsigned char *keep, int64_t step_min,
                        int64_t step_max)
{
    const size_t nt = (size_t)r->ntensors, nr = (size_t)r->nrecipes;
    size_t kept = 0;
    for (size_t i = 0; i < nrec; i++) {
        size_t k = i % SR->slab;
        if (k == 0) {
            hsize_t cnt = nrec - i < SR->slab ? nrec - i : SR->slab, got = slab_salvage(SR, i, cnt);
            if (!got && !i) {
                FP8_ERROR(FP8_EIO, "%s: cannot read records %zu..%zu", r->path, i, i + (size_t)cnt - 1);
                return -1;
            }
            if (got < cnt) { /* the records from the damage on are left out, and counted */
                r->unreadable_records = nrec - (i + got);
                nrec = i + got;
                if (!got)
                    break;
            }
        }
        const disk_record *d = (const disk_record *)SR->records + k;
        if (d->step < 0 || d->step > FP8_STEP_MAX) {
            FP8_ERROR(FP8_EINVAL, "%s: /records row %zu: step %lld is outside 0..2^62", r->path, i,
                      (long long)d->step);
            return -1;
        }
        if (d->tensor >= nt || d->recipe >= nr) {
            /* registries are flushed before records: an index past them is damage, not a live writer */
            FP8_ERROR(FP8_EINVAL, "%s: /records row %zu names %s %u; the file has %zu", r->path, i,
                      d->tensor >= nt ? "tensor" : "recipe", d->tensor >= nt ? d->tensor : d->recipe,
                      d->tensor >= nt ? nt : nr);
            return -1;
        }
        if (!keep[d->tensor] || d->step < step_min || d->step > step_max || d->hist >= SR->ne)
            continue;
        if (SR->lean) {
            summarize(d, i, &r->summaries[kept++]);
            continue;
        }
        fp8_record *o = &r->records[kept++];
        o->tensor = d->tensor, o->recipe = d->recipe, o->step = d->step, o->active = d->active;
        o->rows = d->rows, o->cols = d->cols;
        memcpy(o->stats.classes.n, d->classes, sizeof d->classes);
        char fmt[sizeof d->format + 1];
        memcpy(fmt, d->format, sizeof d->format);
        fmt[sizeof d->format] = 0; /* the file's bytes need not end in NUL */
        o->stats.format = fp8_format_find(fmt, NULL);
#define CP(f) o->stats.f = d->f;
        STAT_FIELDS(CP, CP)
#undef CP
        o->stats.te_overflows = d->te_overflows;
        if (d->hist >= SR->hbase && d->hist - SR->hbase < SR->hcnt)
            memcpy(o->stats.exp_hist, SR->exph + (d->hist - SR->hbase) * FP8_EXP_BINS, sizeof o->stats.exp_hist);
        memcpy(o->stats.scale_hist, SR->sch + k * FP8_SCALE_BINS, sizeof o->stats.scale_hist);
    }
    r->nrecords = kept;
    return 0;
}

/* /scalars' nsc rows into the run: 0, or -1 with the error set for a row
 * naming a scalar past /scalar_names or a step out of range. */
static int load_scalars(fp8_run *r, const disk_scalar *scal, size_t nsc)
{
    const size_t nn = (size_t)r->nscalar_names;
    for (size_t i = 0; i < nsc; i++) {
        const disk_scalar *d = scal + i;
        if (d->id >= nn) {
            FP8_ERROR(FP8_EINVAL, "%s: /scalars row %zu names scalar %u; the file has %zu names", r->path, i, d->id, nn);
            return -1;
        }
        if (d->step < 0 || d->step > FP8_STEP_MAX) {
            FP8_ERROR(FP8_EINVAL, "%s: /scalars row %zu: step %lld is outside 0..2^62", r->path, i, (long long)d->step);
            return -1;
        }
        r->scalar_id[i] = d->id, r->scalar_step[i] = d->step, r->scalar_value[i] = d->value;
    }
    return 0;
}

/* /snapshot_index's nsnap rows, each checked against the snapshot datasets'
 * lengths, into the run: those of the tensors kept, in [step_min, step_max];
 * 0, or -1 with the error set (a row that cannot be trusted, no memory). */
static int load_snapshots(hid_t file, fp8_run *r, const disk_snap *snaps, size_t nsnap, const unsigned char *keep,
                          int64_t step_min, int64_t step_max)
{
    uint64_t len[3] = {0, 0, 0}; /* /snapshot_data, _codes, _scales */
    const int ds_of[3] = {D_SNAP_DATA, D_SNAP_CODES, D_SNAP_SCALES};
    for (int k = 0; k < 3; k++) {
        hid_t ds = H5Dopen2(file, fp8__datasets[ds_of[k]].name, H5P_DEFAULT);
        if (ds >= 0) {
            len[k] = (uint64_t)fp8__rows_of(ds);
            H5Dclose(ds);
        }
    }
    r->snapshots = calloc(nsnap + 1, sizeof *r->snapshots);
    if (!r->snapshots) {
        FP8_ERROR(FP8_ENOMEM, "%s: out of memory", r->path);
        return -1;
    }
    size_t ks = 0;
    for (size_t j = 0; j < nsnap; j++) {
        const disk_snap *d = snaps + j;
        const char *why = d->step < 0 || d->step > FP8_STEP_MAX ? "step outside 0..2^62"
                          : snapshot_row_bad(d, r, len[0], len[1], len[2]);
        if (why) {
            FP8_ERROR(FP8_EINVAL, "%s: /snapshot_index row %zu: %s", r->path, j, why);
            return -1;
        }
        if (!keep[d->tensor] || d->step < step_min || d->step > step_max)
            continue;
        fp8_snapshot *s = &r->snapshots[ks++];
        s->tensor = d->tensor, s->step = d->step, s->offset = d->offset;
        s->rows = d->rows, s->cols = d->cols;
        s->recipe = d->recipe, s->code_bytes = d->code_bytes;
        s->codes_offset = d->codes_offset, s->scales_offset = d->scales_offset;
        s->nscales = d->nscales;
    }
    r->nsnapshots = ks;
    return 0;
}

static fp8_run *load(const char *path, const char *tensor_pattern, int64_t step_min, int64_t step_max, int lean,
                     int no_index)
{
    /* a multi-rank index: rank 0's file is the run (no_index: path is a rank
     * file, which must not be an index itself) */
    const char *index = path;
    char rank0[1024];
    int nranks;
    if (!path) {
        FP8_ERROR(FP8_EINVAL, "no run file given");
        return NULL;
    }
    if (access(path, F_OK) == 0 && fp8_file_regular(path) != FP8_OK)
        return NULL; /* a FIFO, a device, a directory: refused before anything opens it */
    path = fp8__run_file_of(index, rank0, sizeof rank0, &nranks);
    if (!path)
        return NULL;
    if (no_index && nranks) {
        FP8_ERROR(FP8_EINVAL, "%s: a rank file that is itself a rank index: refused, not followed", index);
        return NULL;
    }
    if (nranks && access(path, F_OK) == 0 && fp8_file_regular(path) != FP8_OK)
        return NULL;
    quiet q;
    quiet_on(&q);
    fp8_run *r = NULL;
    hid_t drec = -1, dexp = -1, dsch = -1, rct = -1;
    void *tens = NULL, *recs = NULL, *names = NULL, *records = NULL, *exph = NULL, *sch = NULL, *scal = NULL;
    void *snaps = NULL;
    unsigned char *keep = NULL;
    size_t nt, nr, nn, nrec, ne, ns, nsc, nsnap;
    hid_t file = open_file(path, index, nranks);
    if (file < 0 || !(r = new_run(file, path, index, nranks)))
        goto done;
    hid_t tt = fp8__tensor_type(), rt = fp8__recipe_type(), nmt = fp8__name_type(), st = fp8__scalar_type(),
          snt = fp8__snap_type();
    rct = fp8__record_type(r->schema);
    /* A writer flushes the registries (tensors, recipes, names) before the
     * rows that refer to them, and histograms and data before their records
     * and indexes; a reader following it live counts in the other order —
     * the referring rows first, then what they refer to — so every row it
     * reads refers to rows it reads too (a flush between two counts adds
     * rows to what is counted later). */
    drec = H5Dopen2(file, fp8__datasets[D_RECORDS].name, H5P_DEFAULT);
    nrec = drec >= 0 ? fp8__rows_of(drec) : 0;
    hsize_t lim_scal = fp8__rows_now(file, fp8__datasets[D_SCALARS].name), lim_snap = fp8__rows_now(file, fp8__datasets[D_SNAP_INDEX].name);
    hsize_t lim_steps = fp8__rows_now(file, fp8__datasets[D_STEPS].name), lim_bix = fp8__rows_now(file, fp8__datasets[D_BAMAX_INDEX].name);
    dexp = H5Dopen2(file, fp8__datasets[D_EXP_HIST].name, H5P_DEFAULT);
    dsch = H5Dopen2(file, fp8__datasets[D_SCALE_HIST].name, H5P_DEFAULT);
    ne = dexp >= 0 ? fp8__rows_of(dexp) : 0, ns = dsch >= 0 ? fp8__rows_of(dsch) : 0;
    int bad = fp8__read_all(file, fp8__datasets[D_TENSORS].name, tt, sizeof(disk_tensor), &tens, &nt) ||
              fp8__read_all(file, fp8__datasets[D_RECIPES].name, rt, sizeof(disk_recipe), &recs, &nr) ||
              fp8__read_all(file, fp8__datasets[D_SCALAR_NAMES].name, nmt, sizeof(disk_name), &names, &nn) ||
              fp8__read_upto(file, fp8__datasets[D_SCALARS].name, st, sizeof(disk_scalar), &scal, &nsc, lim_scal,
                        &r->unreadable_rows) ||
              fp8__read_upto(file, fp8__datasets[D_SNAP_INDEX].name, snt, sizeof(disk_snap), &snaps, &nsnap, lim_snap,
                        &r->unreadable_rows);
    H5Tclose(tt), H5Tclose(rt), H5Tclose(nmt), H5Tclose(st), H5Tclose(snt);
    /* records per read: larger when the histograms are not held beside them */
    const size_t SLAB = lean ? 65536 : 4096;
    records = malloc(SLAB * sizeof(disk_record));
    if (!lean) {
        exph = malloc(SLAB * FP8_EXP_BINS * sizeof(uint64_t));
        sch = malloc(SLAB * FP8_SCALE_BINS * sizeof(uint64_t));
    }
    bad = bad || drec < 0 || dexp < 0 || dsch < 0;
    if (!bad && (!records || (!lean && (!exph || !sch)))) {
        FP8_ERROR(FP8_ENOMEM, "%s: out of memory", path);
        goto fail;
    }
    if (bad) {
        FP8_ERROR(FP8_EINVAL, "%s: a dataset of the run is missing or unreadable", path);
        goto fail;
    }
    hid_t meta = H5Gopen2(file, "meta", H5P_DEFAULT);
    if (meta >= 0) {
        hsize_t idx = 0;
        H5Aiterate2(meta, H5_INDEX_NAME, H5_ITER_INC, &idx, meta_cb, r);
        H5Gclose(meta);
    }
    /* a reader may catch the histograms a flush ahead of the records (and,
     * schema 2, a record whose shared exponent histogram is not there yet:
     * skipped below) */
    if (ns < nrec)
        nrec = ns;
    if (r->schema < 2 && ne < nrec)
        nrec = ne;
    if (lean == 2)
        nrec = 0; /* the series only */
    if (alloc_arrays(r, nt, nr, nn, nrec, nsc, lean) != 0 || copy_registries(r, tens, nt, recs, nr, names, nn) != 0)
        goto fail;
    /* tensors the pattern keeps */
    keep = calloc(nt + 1, 1);
    if (!keep) {
        FP8_ERROR(FP8_ENOMEM, "%s: out of memory", path);
        goto fail;
    }
    for (size_t i = 0; i < nt; i++)
        keep[i] = !tensor_pattern || fnmatch(tensor_pattern, r->tensor_name[i], 0) == 0;
    slab_reader SR = {drec, rct, dexp, dsch, r->schema, lean, SLAB, ne, records, exph, sch, 0, 0};
    if (load_records(r, &SR, nrec, keep, step_min, step_max) != 0 || load_scalars(r, scal, nsc) != 0 ||
        load_snapshots(file, r, snaps, nsnap, keep, step_min, step_max) != 0 ||
        (r->schema >= 3 && load_series(file, r, keep, step_min, step_max, lim_steps, lim_bix) != 0))
        goto fail;
    if (nranks) {
        const char *mr = fp8_run_meta(r, "mpi_rank");
        if (!mr || strcmp(mr, "0") != 0) {
            FP8_ERROR(FP8_EINVAL, "%s: rank 0's file of the index %s says its rank is %s: refused", path, index,
                      mr ? mr : "(none: not a rank file)");
            goto fail;
        }
    }
    r->nranks = nranks;
    if (nranks)
        snprintf(r->index_path, sizeof r->index_path, "%s", index);
    goto done;
fail:
    fp8_run_free(r);
    r = NULL;
done:
    if (rct >= 0)
        H5Tclose(rct);
    if (drec >= 0)
        H5Dclose(drec);
    if (dexp >= 0)
        H5Dclose(dexp);
    if (dsch >= 0)
        H5Dclose(dsch);
    if (file >= 0)
        H5Fclose(file);
    free(keep);
    free(tens), free(recs), free(names), free(records), free(exph), free(sch), free(scal), free(snaps);
    quiet_off(&q);
    return r;
}
