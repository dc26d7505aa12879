/*
 * store.c — HDF5 run files (see fp8_store.h, docs/schema.md).
 *
 * Every dataset is created with the file, then the file switches to SWMR
 * writing; appends extend datasets and flush them, so readers (and a file
 * left by a killed writer) always see a consistent prefix.  Records are
 * buffered in memory between flushes.  HDF5's own error printing is
 * silenced around our calls; failures come back as FP8_EIO with a message.
 */
#include <fcntl.h>
#include <fnmatch.h>
#include <hdf5.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fp8_store.h"

/* ---- the record layout ---------------------------------------------------- */

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

static hid_t str_type(size_t n)
{
    hid_t t = H5Tcopy(H5T_C_S1);
    H5Tset_size(t, n);
    H5Tset_strpad(t, H5T_STR_NULLTERM);
    return t;
}

static hid_t record_type(void)
{
    hid_t t = H5Tcreate(H5T_COMPOUND, sizeof(disk_record));
    hsize_t nc = FP8_NCLASS;
    hid_t cls = H5Tarray_create2(H5T_NATIVE_UINT64, 1, &nc);
    hid_t fmt = str_type(24);
    H5Tinsert(t, "tensor", HOFFSET(disk_record, tensor), H5T_NATIVE_UINT32);
    H5Tinsert(t, "recipe", HOFFSET(disk_record, recipe), H5T_NATIVE_UINT32);
    H5Tinsert(t, "step", HOFFSET(disk_record, step), H5T_NATIVE_INT64);
    H5Tinsert(t, "active", HOFFSET(disk_record, active), H5T_NATIVE_INT32);
    H5Tinsert(t, "rows", HOFFSET(disk_record, rows), H5T_NATIVE_UINT64);
    H5Tinsert(t, "cols", HOFFSET(disk_record, cols), H5T_NATIVE_UINT64);
    H5Tinsert(t, "classes", HOFFSET(disk_record, classes), cls);
    H5Tinsert(t, "format", HOFFSET(disk_record, format), fmt);
#define INS_U64(f) H5Tinsert(t, #f, HOFFSET(disk_record, f), H5T_NATIVE_UINT64);
#define INS_F64(f) H5Tinsert(t, #f, HOFFSET(disk_record, f), H5T_NATIVE_DOUBLE);
    STAT_FIELDS(INS_U64, INS_F64)
#undef INS_U64
#undef INS_F64
    H5Tclose(cls);
    H5Tclose(fmt);
    return t;
}

static hid_t tensor_type(void)
{
    hid_t t = H5Tcreate(H5T_COMPOUND, sizeof(disk_tensor)), s = str_type(FP8_NAME_MAX);
    H5Tinsert(t, "name", HOFFSET(disk_tensor, name), s);
    H5Tinsert(t, "role", HOFFSET(disk_tensor, role), H5T_NATIVE_INT32);
    H5Tinsert(t, "layer", HOFFSET(disk_tensor, layer), H5T_NATIVE_INT32);
    H5Tclose(s);
    return t;
}

static hid_t recipe_type(void)
{
    hid_t t = H5Tcreate(H5T_COMPOUND, sizeof(disk_recipe)), s = str_type(FP8_SPEC_MAX);
    H5Tinsert(t, "spec", HOFFSET(disk_recipe, spec), s);
    H5Tclose(s);
    return t;
}

static hid_t name_type(void)
{
    hid_t t = H5Tcreate(H5T_COMPOUND, sizeof(disk_name)), s = str_type(FP8_NAME_MAX);
    H5Tinsert(t, "name", HOFFSET(disk_name, name), s);
    H5Tclose(s);
    return t;
}

static hid_t snap_type(void)
{
    hid_t t = H5Tcreate(H5T_COMPOUND, sizeof(disk_snap));
    H5Tinsert(t, "tensor", HOFFSET(disk_snap, tensor), H5T_NATIVE_UINT32);
    H5Tinsert(t, "step", HOFFSET(disk_snap, step), H5T_NATIVE_INT64);
    H5Tinsert(t, "offset", HOFFSET(disk_snap, offset), H5T_NATIVE_UINT64);
    H5Tinsert(t, "rows", HOFFSET(disk_snap, rows), H5T_NATIVE_UINT64);
    H5Tinsert(t, "cols", HOFFSET(disk_snap, cols), H5T_NATIVE_UINT64);
    H5Tinsert(t, "recipe", HOFFSET(disk_snap, recipe), H5T_NATIVE_INT32);
    H5Tinsert(t, "code_bytes", HOFFSET(disk_snap, code_bytes), H5T_NATIVE_INT32);
    H5Tinsert(t, "codes_offset", HOFFSET(disk_snap, codes_offset), H5T_NATIVE_UINT64);
    H5Tinsert(t, "scales_offset", HOFFSET(disk_snap, scales_offset), H5T_NATIVE_UINT64);
    H5Tinsert(t, "nscales", HOFFSET(disk_snap, nscales), H5T_NATIVE_UINT64);
    return t;
}

static hid_t scalar_type(void)
{
    hid_t t = H5Tcreate(H5T_COMPOUND, sizeof(disk_scalar));
    H5Tinsert(t, "id", HOFFSET(disk_scalar, id), H5T_NATIVE_UINT32);
    H5Tinsert(t, "step", HOFFSET(disk_scalar, step), H5T_NATIVE_INT64);
    H5Tinsert(t, "value", HOFFSET(disk_scalar, value), H5T_NATIVE_DOUBLE);
    return t;
}

/* ---- the writer ----------------------------------------------------------- */

enum { D_TENSORS, D_RECIPES, D_SCALAR_NAMES, D_RECORDS, D_EXP_HIST, D_SCALE_HIST, D_SCALARS, D_SNAP_DATA,
       D_SNAP_CODES, D_SNAP_SCALES, D_SNAP_INDEX, ND };
static const char *dset_names[ND] = {"tensors", "recipes", "scalar_names", "records", "exp_hist", "scale_hist",
                                     "scalars", "snapshot_data", "snapshot_codes", "snapshot_scales",
                                     "snapshot_index"};

typedef struct {
    void *data;
    size_t n, cap, elem; /* elements buffered, capacity, bytes per element */
    hsize_t written;     /* rows already in the file                       */
} buffer;

struct fp8_store {
    char path[1024];
    hid_t file, dset[ND], type[ND];
    buffer buf[ND];
    int ntensors, nrecipes, nnames;
    disk_tensor *tensors; /* every registered tensor (for lookups) */
    disk_recipe *recipes;
    disk_name *names;
    int failed;           /* a write failed: later flushes refuse     */
};

typedef struct {
    H5E_auto2_t fn;
    void *data;
} quiet;

static void quiet_on(quiet *q)
{
    H5Eget_auto2(H5E_DEFAULT, &q->fn, &q->data);
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
}

static void quiet_off(const quiet *q) { H5Eset_auto2(H5E_DEFAULT, q->fn, q->data); }

static int buf_push(buffer *b, const void *elem)
{
    if (b->n == b->cap) {
        size_t cap = b->cap ? 2 * b->cap : 64;
        void *d = realloc(b->data, cap * b->elem);
        if (!d)
            return FP8_ERROR(FP8_ENOMEM, "run file: out of memory buffering records");
        b->data = d, b->cap = cap;
    }
    memcpy((char *)b->data + b->n * b->elem, elem, b->elem);
    b->n++;
    return FP8_OK;
}

static hid_t make_dset(hid_t file, const char *name, hid_t type, int rank, hsize_t width, hsize_t chunk_rows)
{
    hsize_t dims[2] = {0, width}, maxd[2] = {H5S_UNLIMITED, width}, chunk[2] = {chunk_rows, width};
    hid_t space = H5Screate_simple(rank, dims, maxd);
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    H5Pset_chunk(dcpl, rank, chunk);
    H5Pset_shuffle(dcpl);
    H5Pset_deflate(dcpl, 1);
    hid_t d = H5Dcreate2(file, name, type, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    H5Pclose(dcpl);
    H5Sclose(space);
    return d;
}

static int write_str_attr(hid_t obj, const char *name, const char *value)
{
    hid_t t = str_type(strlen(value) + 1), sp = H5Screate(H5S_SCALAR);
    hid_t a = H5Acreate2(obj, name, t, sp, H5P_DEFAULT, H5P_DEFAULT);
    herr_t e = a < 0 ? -1 : H5Awrite(a, t, value);
    if (a >= 0)
        H5Aclose(a);
    H5Sclose(sp);
    H5Tclose(t);
    return e < 0 ? -1 : 0;
}

static void store_free(fp8_store *s)
{
    if (!s)
        return;
    for (int i = 0; i < ND; i++) {
        if (s->dset[i] > 0)
            H5Dclose(s->dset[i]);
        if (s->type[i] > 0)
            H5Tclose(s->type[i]);
        free(s->buf[i].data);
    }
    if (s->file > 0)
        H5Fclose(s->file);
    free(s->tensors);
    free(s->recipes);
    free(s->names);
    free(s);
}

fp8_store *fp8_store_create(const char *path, const char *const *kv, int nkv)
{
    if (!path || strlen(path) >= 1024) {
        FP8_ERROR(FP8_EINVAL, "run file: %s", path ? "path too long" : "no path");
        return NULL;
    }
    fp8_store *s = calloc(1, sizeof *s);
    if (!s) {
        FP8_ERROR(FP8_ENOMEM, "run file: out of memory");
        return NULL;
    }
    quiet q;
    quiet_on(&q);
    snprintf(s->path, sizeof s->path, "%s", path);
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    H5Pset_libver_bounds(fapl, H5F_LIBVER_LATEST, H5F_LIBVER_LATEST); /* SWMR needs the 1.10 format */
    s->file = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, fapl);
    H5Pclose(fapl);
    if (s->file < 0) {
        FP8_ERROR(FP8_EIO, "%s: cannot create the run file", path);
        goto fail;
    }
    s->type[D_TENSORS] = tensor_type();
    s->type[D_RECIPES] = recipe_type();
    s->type[D_SCALAR_NAMES] = name_type();
    s->type[D_RECORDS] = record_type();
    s->type[D_EXP_HIST] = H5Tcopy(H5T_NATIVE_UINT64);
    s->type[D_SCALE_HIST] = H5Tcopy(H5T_NATIVE_UINT64);
    s->type[D_SCALARS] = scalar_type();
    s->type[D_SNAP_DATA] = H5Tcopy(H5T_NATIVE_FLOAT);
    s->type[D_SNAP_CODES] = H5Tcopy(H5T_NATIVE_UINT8);
    s->type[D_SNAP_SCALES] = H5Tcopy(H5T_NATIVE_FLOAT);
    s->type[D_SNAP_INDEX] = snap_type();
    const size_t elem[ND] = {sizeof(disk_tensor), sizeof(disk_recipe), sizeof(disk_name), sizeof(disk_record),
                             FP8_EXP_BINS * sizeof(uint64_t), FP8_SCALE_BINS * sizeof(uint64_t), sizeof(disk_scalar),
                             sizeof(float), 1, sizeof(float), sizeof(disk_snap)};
    for (int i = 0; i < ND; i++) {
        int hist = i == D_EXP_HIST || i == D_SCALE_HIST;
        hsize_t width = i == D_EXP_HIST ? FP8_EXP_BINS : i == D_SCALE_HIST ? FP8_SCALE_BINS : 1;
        hsize_t chunk = hist ? 64 : (i == D_SNAP_DATA || i == D_SNAP_CODES || i == D_SNAP_SCALES) ? 65536 : 256;
        s->dset[i] = make_dset(s->file, dset_names[i], s->type[i], hist ? 2 : 1, width, chunk);
        s->buf[i].elem = elem[i];
        if (s->dset[i] < 0) {
            FP8_ERROR(FP8_EIO, "%s: cannot create dataset /%s", path, dset_names[i]);
            goto fail;
        }
    }
    char ver[16];
    snprintf(ver, sizeof ver, "%d", FP8_STORE_SCHEMA);
    if (write_str_attr(s->file, "fp8prof_schema", ver) ||
        write_str_attr(s->file, "scale_convention", "q = cast(x * scale); x_hat = decode(q) * scale_inv") ||
        write_str_attr(s->file, "created_by", "fp8prof")) {
        FP8_ERROR(FP8_EIO, "%s: cannot write the root attributes", path);
        goto fail;
    }
    hid_t meta = H5Gcreate2(s->file, "meta", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    int bad = meta < 0;
    for (int i = 0; !bad && i < nkv; i++)
        if (!kv[2 * i] || !kv[2 * i + 1] || !*kv[2 * i] || write_str_attr(meta, kv[2 * i], kv[2 * i + 1]))
            bad = 1;
    if (meta >= 0)
        H5Gclose(meta);
    if (bad) {
        FP8_ERROR(FP8_EIO, "%s: cannot write metadata (empty or repeated key?)", path);
        goto fail;
    }
    if (H5Fstart_swmr_write(s->file) < 0) {
        FP8_ERROR(FP8_EIO, "%s: cannot switch to SWMR writing", path);
        goto fail;
    }
    quiet_off(&q);
    return s;
fail:
    store_free(s);
    quiet_off(&q);
    return NULL;
}

static int find_or_add(fp8_store *s, int which, const char *name, size_t maxlen, int role, int layer)
{
    if (!s || !name || !*name)
        return FP8_ERROR(FP8_EINVAL, "run file: empty name"), -1;
    if (strlen(name) >= maxlen)
        return FP8_ERROR(FP8_EINVAL, "run file: name '%.40s...' longer than %zu bytes", name, maxlen - 1), -1;
    int *count = which == D_TENSORS ? &s->ntensors : which == D_RECIPES ? &s->nrecipes : &s->nnames;
    for (int i = 0; i < *count; i++) {
        const char *have = which == D_TENSORS ? s->tensors[i].name
                         : which == D_RECIPES ? s->recipes[i].spec : s->names[i].name;
        if (strcmp(have, name) == 0)
            return i;
    }
    void **arr = which == D_TENSORS ? (void **)&s->tensors : which == D_RECIPES ? (void **)&s->recipes
                                                                                 : (void **)&s->names;
    size_t esz = s->buf[which].elem;
    void *grown = realloc(*arr, (size_t)(*count + 1) * esz);
    if (!grown)
        return FP8_ERROR(FP8_ENOMEM, "run file: out of memory"), -1;
    *arr = grown;
    char *slot = (char *)grown + (size_t)*count * esz;
    memset(slot, 0, esz);
    strcpy(slot, name); /* name is the first member of each registry row */
    if (which == D_TENSORS) {
        ((disk_tensor *)(void *)slot)->role = role;
        ((disk_tensor *)(void *)slot)->layer = layer;
    }
    if (buf_push(&s->buf[which], slot) != FP8_OK)
        return -1;
    return (*count)++;
}

int fp8_store_tensor(fp8_store *s, const char *name, fp8_role role, int layer)
{
    return find_or_add(s, D_TENSORS, name, FP8_NAME_MAX, (int)role, layer);
}

int fp8_store_recipe(fp8_store *s, const char *spec) { return find_or_add(s, D_RECIPES, spec, FP8_SPEC_MAX, 0, 0); }

int fp8_store_scalar_name(fp8_store *s, const char *name)
{
    return find_or_add(s, D_SCALAR_NAMES, name, FP8_NAME_MAX, 0, 0);
}

int fp8_store_add_record(fp8_store *s, int tensor, int recipe, int64_t step, int active, uint64_t rows,
                         uint64_t cols, const fp8_stats *st)
{
    if (!s || !st || tensor < 0 || tensor >= s->ntensors || recipe < 0 || recipe >= s->nrecipes)
        return FP8_ERROR(FP8_EINVAL, "run file: record for an unregistered tensor or recipe");
    disk_record d;
    memset(&d, 0, sizeof d);
    d.tensor = (uint32_t)tensor, d.recipe = (uint32_t)recipe, d.step = step, d.active = active != 0;
    d.rows = rows, d.cols = cols;
    memcpy(d.classes, st->classes.n, sizeof d.classes);
    if (st->format)
        snprintf(d.format, sizeof d.format, "%s", st->format->name);
#define CP(f) d.f = st->f;
    STAT_FIELDS(CP, CP)
#undef CP
    int e = buf_push(&s->buf[D_RECORDS], &d);
    if (!e)
        e = buf_push(&s->buf[D_EXP_HIST], st->exp_hist);
    if (!e)
        e = buf_push(&s->buf[D_SCALE_HIST], st->scale_hist);
    return e;
}

int fp8_store_add_scalar(fp8_store *s, int name, int64_t step, double value)
{
    if (!s || name < 0 || name >= s->nnames)
        return FP8_ERROR(FP8_EINVAL, "run file: scalar with an unregistered name");
    disk_scalar d = {(uint32_t)name, step, value};
    return buf_push(&s->buf[D_SCALARS], &d);
}

/* Append n elements of elem bytes to a buffer without a per-element push. */
static int buf_append(buffer *b, const void *data, size_t n)
{
    if (b->n + n > b->cap) {
        size_t cap = b->cap ? b->cap : 65536;
        while (cap < b->n + n)
            cap *= 2;
        void *d = realloc(b->data, cap * b->elem);
        if (!d)
            return FP8_ERROR(FP8_ENOMEM, "run file: out of memory buffering a snapshot");
        b->data = d, b->cap = cap;
    }
    memcpy((char *)b->data + b->n * b->elem, data, n * b->elem);
    b->n += n;
    return FP8_OK;
}

int fp8_store_add_snapshot(fp8_store *s, int tensor, int64_t step, const float *x, uint64_t rows, uint64_t cols)
{
    if (!s || !x || tensor < 0 || tensor >= s->ntensors || !rows || !cols)
        return FP8_ERROR(FP8_EINVAL, "run file: snapshot of an unregistered tensor or an empty one");
    buffer *b = &s->buf[D_SNAP_DATA];
    disk_snap ix;
    memset(&ix, 0, sizeof ix);
    ix.tensor = (uint32_t)tensor, ix.step = step, ix.offset = (uint64_t)(b->written + b->n);
    ix.rows = rows, ix.cols = cols, ix.recipe = -1;
    int e = buf_append(b, x, (size_t)(rows * cols));
    return e ? e : buf_push(&s->buf[D_SNAP_INDEX], &ix);
}

int fp8_store_add_snapshot_codes(fp8_store *s, int tensor, int64_t step, int recipe, const void *codes,
                                 int code_bytes, uint64_t rows, uint64_t cols, const float *scale_inv,
                                 uint64_t nscales)
{
    if (!s || !codes || !scale_inv || tensor < 0 || tensor >= s->ntensors || recipe < 0 || recipe >= s->nrecipes ||
        !rows || !cols || (code_bytes != 1 && code_bytes != 2 && code_bytes != 4))
        return FP8_ERROR(FP8_EINVAL, "run file: bad codes snapshot");
    disk_snap ix;
    memset(&ix, 0, sizeof ix);
    ix.tensor = (uint32_t)tensor, ix.step = step, ix.rows = rows, ix.cols = cols, ix.recipe = recipe;
    ix.code_bytes = code_bytes;
    ix.codes_offset = (uint64_t)(s->buf[D_SNAP_CODES].written + s->buf[D_SNAP_CODES].n);
    ix.scales_offset = (uint64_t)(s->buf[D_SNAP_SCALES].written + s->buf[D_SNAP_SCALES].n);
    ix.nscales = nscales;
    int e = buf_append(&s->buf[D_SNAP_CODES], codes, (size_t)(rows * cols) * (size_t)code_bytes);
    if (!e)
        e = buf_append(&s->buf[D_SNAP_SCALES], scale_inv, (size_t)nscales);
    return e ? e : buf_push(&s->buf[D_SNAP_INDEX], &ix);
}

static int append(fp8_store *s, int i)
{
    buffer *b = &s->buf[i];
    if (!b->n)
        return 0;
    int hist = i == D_EXP_HIST || i == D_SCALE_HIST;
    hsize_t width = i == D_EXP_HIST ? FP8_EXP_BINS : i == D_SCALE_HIST ? FP8_SCALE_BINS : 1;
    hsize_t newdims[2] = {b->written + b->n, width}, start[2] = {b->written, 0}, count[2] = {b->n, width};
    if (H5Dset_extent(s->dset[i], newdims) < 0)
        return -1;
    hid_t fs = H5Dget_space(s->dset[i]);
    hid_t ms = H5Screate_simple(hist ? 2 : 1, count, NULL);
    herr_t e = H5Sselect_hyperslab(fs, H5S_SELECT_SET, start, NULL, count, NULL);
    if (e >= 0)
        e = H5Dwrite(s->dset[i], s->type[i], ms, fs, H5P_DEFAULT, b->data);
    H5Sclose(ms);
    H5Sclose(fs);
    if (e < 0)
        return -1;
    b->written += b->n;
    b->n = 0;
    return 0;
}

/* Reserve disk space for the next flush before HDF5 writes anything: if the
 * disk is full (or a file-size limit is hit) we stop here, while the file
 * still ends exactly where its last flush left it.  A write that fails
 * half-way inside HDF5 could instead leave a file shorter than the end of
 * its allocated space, which HDF5 refuses to open. */
static int reserve_space(fp8_store *s)
{
    size_t raw = 0;
    for (int i = 0; i < ND; i++)
        raw += s->buf[i].n * s->buf[i].elem;
    void *handle = NULL;
    haddr_t eoa = 0;
    if (H5Fget_vfd_handle(s->file, H5P_DEFAULT, &handle) < 0 || !handle || H5Fget_eoa(s->file, &eoa) < 0)
        return 0; /* not the sec2 driver: nothing to reserve with */
    int fd = *(int *)handle;
    off_t need = (off_t)(2 * raw + 256 * 1024); /* compressed data, chunk indexes, metadata */
    return posix_fallocate(fd, (off_t)eoa, need) == 0 ? 0 : -1; /* extends only what is missing */
}

int fp8_store_flush(fp8_store *s)
{
    if (!s)
        return FP8_ERROR(FP8_EINVAL, "run file: NULL store");
    if (s->failed)
        return FP8_ERROR(FP8_EIO, "%s: an earlier write failed; recording has stopped", s->path);
    quiet q;
    quiet_on(&q);
    if (reserve_space(s) != 0) {
        quiet_off(&q);
        s->failed = 1;
        return FP8_ERROR(FP8_EIO, "%s: no space for the next records (disk full or file-size limit); recording "
                                  "stopped, everything flushed before stays readable",
                         s->path);
    }
    /* registries first, so a flushed record never names an unknown tensor */
    static const int order[ND] = {D_TENSORS, D_RECIPES, D_SCALAR_NAMES, D_EXP_HIST, D_SCALE_HIST, D_RECORDS,
                                  D_SCALARS, D_SNAP_DATA, D_SNAP_CODES, D_SNAP_SCALES, D_SNAP_INDEX};
    int bad = 0;
    for (int k = 0; k < ND && !bad; k++)
        bad = append(s, order[k]) != 0;
    for (int k = 0; k < ND && !bad; k++)
        bad = H5Dflush(s->dset[order[k]]) < 0;
    quiet_off(&q);
    if (bad) {
        s->failed = 1;
        return FP8_ERROR(FP8_EIO, "%s: writing failed (disk full?); what was flushed before stays readable", s->path);
    }
    return FP8_OK;
}

int fp8_store_close(fp8_store *s)
{
    if (!s)
        return FP8_OK;
    int st = s->failed ? FP8_OK : fp8_store_flush(s);
    quiet q;
    quiet_on(&q);
    store_free(s);
    quiet_off(&q);
    return st;
}

/* ---- the reader ----------------------------------------------------------- */

static int read_all(hid_t file, const char *name, hid_t memtype, size_t elem, void **out, size_t *n)
{
    hid_t d = H5Dopen2(file, name, H5P_DEFAULT);
    if (d < 0)
        return -1;
    H5Drefresh(d); /* SWMR: see the writer's latest flush */
    hid_t sp = H5Dget_space(d);
    hsize_t dims[2] = {0, 0};
    H5Sget_simple_extent_dims(sp, dims, NULL);
    *n = (size_t)dims[0];
    *out = calloc(*n ? *n : 1, elem);
    herr_t e = *out ? 0 : -1;
    if (!e && *n)
        e = H5Dread(d, memtype, H5S_ALL, H5S_ALL, H5P_DEFAULT, *out);
    H5Sclose(sp);
    H5Dclose(d);
    return e < 0 ? -1 : 0;
}

static char *read_str_attr(hid_t obj, const char *name)
{
    hid_t a = H5Aopen(obj, name, H5P_DEFAULT);
    if (a < 0)
        return NULL;
    hid_t t = H5Aget_type(a);
    char *v = NULL;
    if (H5Tget_class(t) == H5T_STRING && !H5Tis_variable_str(t)) {
        size_t sz = H5Tget_size(t);
        v = calloc(sz + 1, 1);
        if (v && H5Aread(a, t, v) < 0) {
            free(v);
            v = NULL;
        }
    }
    H5Tclose(t);
    H5Aclose(a);
    return v;
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
    free(r->scalar_id);
    free(r->scalar_step);
    free(r->scalar_value);
    free(r->snapshots);
    free(r);
}

static herr_t meta_cb(hid_t loc, const char *name, const H5A_info_t *info, void *op)
{
    (void)info;
    fp8_run *r = op;
    char *v = read_str_attr(loc, name);
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

fp8_run *fp8_run_load(const char *path) { return fp8_run_load_filtered(path, NULL, INT64_MIN, INT64_MAX); }

fp8_run *fp8_run_load_filtered(const char *path, const char *tensor_pattern, int64_t step_min, int64_t step_max)
{
    quiet q;
    quiet_on(&q);
    fp8_run *r = NULL;
    hid_t file = -1;
    void *tens = NULL, *recs = NULL, *names = NULL, *records = NULL, *exph = NULL, *sch = NULL, *scal = NULL;
    void *snaps = NULL;
    size_t nt, nr, nn, nrec, ne, ns, nsc, nsnap;
    if (H5Fis_hdf5(path) <= 0) {
        FILE *f = fopen(path, "rb");
        if (!f)
            FP8_ERROR(FP8_EIO, "%s: cannot open", path);
        else {
            fclose(f);
            FP8_ERROR(FP8_EINVAL, "%s: not an HDF5 file (or a damaged one)", path);
        }
        goto done;
    }
    file = H5Fopen(path, H5F_ACC_RDONLY | H5F_ACC_SWMR_READ, H5P_DEFAULT);
    if (file < 0)
        file = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    if (file < 0) {
        FP8_ERROR(FP8_EIO, "%s: HDF5 cannot open it", path);
        goto done;
    }
    char *ver = read_str_attr(file, "fp8prof_schema");
    if (!ver) {
        FP8_ERROR(FP8_EINVAL, "%s: an HDF5 file, but not an fp8prof run (no fp8prof_schema attribute)", path);
        goto done;
    }
    int schema = atoi(ver);
    free(ver);
    if (schema < 1 || schema > FP8_STORE_SCHEMA) {
        FP8_ERROR(FP8_EINVAL, "%s: schema version %d; this fp8prof reads up to %d (upgrade fp8prof)", path, schema,
                  FP8_STORE_SCHEMA);
        goto done;
    }
    r = calloc(1, sizeof *r);
    if (!r) {
        FP8_ERROR(FP8_ENOMEM, "%s: out of memory", path);
        goto done;
    }
    r->schema = schema;
    hid_t tt = tensor_type(), rt = recipe_type(), nmt = name_type(), rct = record_type(), st = scalar_type(),
          snt = snap_type();
    int bad = read_all(file, "tensors", tt, sizeof(disk_tensor), &tens, &nt) ||
              read_all(file, "recipes", rt, sizeof(disk_recipe), &recs, &nr) ||
              read_all(file, "scalar_names", nmt, sizeof(disk_name), &names, &nn) ||
              read_all(file, "records", rct, sizeof(disk_record), &records, &nrec) ||
              read_all(file, "exp_hist", H5T_NATIVE_UINT64, FP8_EXP_BINS * sizeof(uint64_t), &exph, &ne) ||
              read_all(file, "scale_hist", H5T_NATIVE_UINT64, FP8_SCALE_BINS * sizeof(uint64_t), &sch, &ns) ||
              read_all(file, "scalars", st, sizeof(disk_scalar), &scal, &nsc) ||
              read_all(file, "snapshot_index", snt, sizeof(disk_snap), &snaps, &nsnap);
    H5Tclose(tt), H5Tclose(rt), H5Tclose(nmt), H5Tclose(rct), H5Tclose(st), H5Tclose(snt);
    if (bad) {
        FP8_ERROR(FP8_EINVAL, "%s: a dataset of the run is missing or unreadable", path);
        fp8_run_free(r);
        r = NULL;
        goto done;
    }
    hid_t meta = H5Gopen2(file, "meta", H5P_DEFAULT);
    if (meta >= 0) {
        hsize_t idx = 0;
        H5Aiterate2(meta, H5_INDEX_NAME, H5_ITER_INC, &idx, meta_cb, r);
        H5Gclose(meta);
    }
    /* a reader may catch the histograms a flush ahead of the records */
    if (ne < nrec || ns < nrec)
        nrec = ne < ns ? ne : ns;
    r->ntensors = (int)nt;
    r->tensor_name = calloc(nt + 1, FP8_NAME_MAX);
    r->tensor_role = calloc(nt + 1, sizeof(int));
    r->tensor_layer = calloc(nt + 1, sizeof(int));
    r->nrecipes = (int)nr;
    r->recipe_spec = calloc(nr + 1, FP8_SPEC_MAX);
    r->nscalar_names = (int)nn;
    r->scalar_name = calloc(nn + 1, FP8_NAME_MAX);
    r->nrecords = nrec;
    r->records = calloc(nrec + 1, sizeof *r->records);
    r->nscalars = nsc;
    r->scalar_id = calloc(nsc + 1, sizeof *r->scalar_id);
    r->scalar_step = calloc(nsc + 1, sizeof *r->scalar_step);
    r->scalar_value = calloc(nsc + 1, sizeof *r->scalar_value);
    if (!r->tensor_name || !r->tensor_role || !r->tensor_layer || !r->recipe_spec || !r->scalar_name ||
        !r->records || !r->scalar_id || !r->scalar_step || !r->scalar_value) {
        FP8_ERROR(FP8_ENOMEM, "%s: out of memory", path);
        fp8_run_free(r);
        r = NULL;
        goto done;
    }
    for (size_t i = 0; i < nt; i++) {
        const disk_tensor *d = (const disk_tensor *)tens + i;
        memcpy(r->tensor_name[i], d->name, FP8_NAME_MAX);
        r->tensor_name[i][FP8_NAME_MAX - 1] = 0;
        r->tensor_role[i] = d->role, r->tensor_layer[i] = d->layer;
    }
    for (size_t i = 0; i < nr; i++) {
        memcpy(r->recipe_spec[i], ((const disk_recipe *)recs)[i].spec, FP8_SPEC_MAX);
        r->recipe_spec[i][FP8_SPEC_MAX - 1] = 0;
    }
    for (size_t i = 0; i < nn; i++) {
        memcpy(r->scalar_name[i], ((const disk_name *)names)[i].name, FP8_NAME_MAX);
        r->scalar_name[i][FP8_NAME_MAX - 1] = 0;
    }
    /* tensors the pattern keeps */
    unsigned char *keep = calloc(nt + 1, 1);
    if (!keep) {
        FP8_ERROR(FP8_ENOMEM, "%s: out of memory", path);
        fp8_run_free(r);
        r = NULL;
        goto done;
    }
    for (size_t i = 0; i < nt; i++)
        keep[i] = !tensor_pattern || fnmatch(tensor_pattern, r->tensor_name[i], 0) == 0;
    size_t kept = 0;
    for (size_t i = 0; i < nrec; i++) {
        const disk_record *d = (const disk_record *)records + i;
        if (d->tensor >= nt || !keep[d->tensor] || d->step < step_min || d->step > step_max)
            continue;
        fp8_record *o = &r->records[kept++];
        o->tensor = d->tensor, o->recipe = d->recipe, o->step = d->step, o->active = d->active;
        o->rows = d->rows, o->cols = d->cols;
        memcpy(o->stats.classes.n, d->classes, sizeof d->classes);
        o->stats.format = fp8_format_find(d->format, NULL);
#define CP(f) o->stats.f = d->f;
        STAT_FIELDS(CP, CP)
#undef CP
        memcpy(o->stats.exp_hist, (const uint64_t *)exph + i * FP8_EXP_BINS, sizeof o->stats.exp_hist);
        memcpy(o->stats.scale_hist, (const uint64_t *)sch + i * FP8_SCALE_BINS, sizeof o->stats.scale_hist);
    }
    r->nrecords = kept;
    for (size_t i = 0; i < nsc; i++) {
        const disk_scalar *d = (const disk_scalar *)scal + i;
        r->scalar_id[i] = d->id, r->scalar_step[i] = d->step, r->scalar_value[i] = d->value;
    }
    r->snapshots = calloc(nsnap + 1, sizeof *r->snapshots);
    if (!r->snapshots) {
        FP8_ERROR(FP8_ENOMEM, "%s: out of memory", path);
        fp8_run_free(r);
        r = NULL;
        goto done;
    }
    size_t ks = 0;
    for (size_t j = 0; j < nsnap; j++) {
        const disk_snap *d = (const disk_snap *)snaps + j;
        if (d->tensor >= nt || !keep[d->tensor] || d->step < step_min || d->step > step_max)
            continue;
        size_t i = ks++;
        r->snapshots[i].tensor = d->tensor, r->snapshots[i].step = d->step, r->snapshots[i].offset = d->offset;
        r->snapshots[i].rows = d->rows, r->snapshots[i].cols = d->cols;
        r->snapshots[i].recipe = d->recipe, r->snapshots[i].code_bytes = d->code_bytes;
        r->snapshots[i].codes_offset = d->codes_offset, r->snapshots[i].scales_offset = d->scales_offset;
        r->snapshots[i].nscales = d->nscales;
    }
    r->nsnapshots = ks;
    free(keep);
    snprintf(r->path, sizeof r->path, "%s", path);
done:
    if (file >= 0)
        H5Fclose(file);
    free(tens), free(recs), free(names), free(records), free(exph), free(sch), free(scal), free(snaps);
    quiet_off(&q);
    return r;
}

static int read_slice(hid_t file, const char *name, hid_t memtype, hsize_t start, hsize_t count, void *out)
{
    hid_t d = H5Dopen2(file, name, H5P_DEFAULT);
    if (d < 0)
        return -1;
    H5Drefresh(d);
    hid_t fs = H5Dget_space(d), ms = H5Screate_simple(1, &count, NULL);
    herr_t e = H5Sselect_hyperslab(fs, H5S_SELECT_SET, &start, NULL, &count, NULL);
    if (e >= 0)
        e = H5Dread(d, memtype, ms, fs, H5P_DEFAULT, out);
    H5Sclose(ms), H5Sclose(fs), H5Dclose(d);
    return e < 0 ? -1 : 0;
}

int fp8_run_snapshot_read(const fp8_run *r, size_t i, float *out)
{
    if (!r || i >= r->nsnapshots || !out)
        return FP8_ERROR(FP8_EINVAL, "snapshot %zu does not exist", i);
    const __typeof__(r->snapshots[0]) *sn = &r->snapshots[i];
    size_t n = (size_t)(sn->rows * sn->cols);
    fp8_recipe rec;
    if (sn->recipe >= 0 && (sn->recipe >= r->nrecipes || fp8_recipe_parse(r->recipe_spec[sn->recipe], &rec) != FP8_OK))
        return FP8_ERROR(FP8_EINVAL, "%s: snapshot %zu names an unknown recipe", r->path, i);
    quiet q;
    quiet_on(&q);
    int st = FP8_OK;
    void *codes = NULL;
    float *gsi = NULL;
    hid_t file = H5Fopen(r->path, H5F_ACC_RDONLY | H5F_ACC_SWMR_READ, H5P_DEFAULT);
    if (file < 0)
        file = H5Fopen(r->path, H5F_ACC_RDONLY, H5P_DEFAULT);
    if (file < 0) {
        st = FP8_ERROR(FP8_EIO, "%s: cannot open", r->path);
    } else if (sn->recipe < 0) {
        if (read_slice(file, "snapshot_data", H5T_NATIVE_FLOAT, sn->offset, n, out) != 0)
            st = FP8_ERROR(FP8_EIO, "%s: cannot read snapshot %zu", r->path, i);
    } else {
        codes = malloc(n * (size_t)sn->code_bytes);
        gsi = malloc((size_t)sn->nscales * sizeof *gsi);
        if (!codes || !gsi)
            st = FP8_ERROR(FP8_ENOMEM, "out of memory for snapshot %zu", i);
        else if (read_slice(file, "snapshot_codes", H5T_NATIVE_UINT8, sn->codes_offset, n * (size_t)sn->code_bytes,
                            codes) != 0 ||
                 read_slice(file, "snapshot_scales", H5T_NATIVE_FLOAT, sn->scales_offset, sn->nscales, gsi) != 0)
            st = FP8_ERROR(FP8_EIO, "%s: cannot read snapshot %zu", r->path, i);
        else {
            /* x_hat = decode(code) * scale_inv of the element's group */
            const fp8_format *f = fp8_recipe_format(&rec, (fp8_role)r->tensor_role[sn->tensor]);
            for (size_t a = 0; a < sn->rows; a++)
                for (size_t b = 0; b < sn->cols; b++) {
                    size_t k = a * sn->cols + b, g = fp8_quantize_group_of(&rec, sn->rows, sn->cols, a, b);
                    uint32_t c = 0;
                    memcpy(&c, (char *)codes + k * (size_t)sn->code_bytes, (size_t)sn->code_bytes);
                    out[k] = fp8_format_decode(f, c) * (g < sn->nscales ? gsi[g] : NAN);
                }
        }
    }
    if (file >= 0)
        H5Fclose(file);
    free(codes);
    free(gsi);
    quiet_off(&q);
    return st;
}
