/*
 * store.c — HDF5 run files (see fp8_store.h, docs/schema.md).
 *
 * Every dataset is created with the file, then the file switches to SWMR
 * writing; appends extend datasets and flush them, so readers (and a file
 * left by a killed writer) always see a consistent prefix.  Records are
 * buffered in memory between flushes.  HDF5's own error printing is
 * silenced around our calls; failures come back as FP8_EIO with a message.
 */
#include <errno.h>
#include <fcntl.h>
#include <hdf5.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include <sys/random.h>

#include "chunkwrite.h"
#include "fp8_file.h"
#include "datasets.h"
#include "hash.h"

/* ---- the writer ----------------------------------------------------------- */

static hsize_t chunk_rows(int i);

#define FSPACE_PAGE 1024 /* bytes: the file-space page (see fp8_store_create) */

typedef struct {
    void *data;          /* kept rows, then the n rows not yet written       */
    size_t n, cap, elem; /* rows buffered, capacity, bytes per row           */
    size_t kept;         /* rows of the last, partly filled chunk, already in
                            the file: a flush rewrites that chunk whole      */
    hsize_t written;     /* rows already in the file                         */
} buffer;

struct fp8_store {
    char path[1024];
    int lock_fd;          /* holds the writer's lock (fp8_file_lock) until closed */
    hid_t file, dset[ND], type[ND];
    buffer buf[ND];
    int ntensors, nrecipes, nnames;
    disk_tensor *tensors; /* every registered tensor (for lookups) */
    disk_recipe *recipes;
    disk_name *names;
    int regcap[3];        /* allocated rows of tensors, recipes, names   */
    fp8__index idx[3];    /* their rows by name (hash.h)               */
    int failed;           /* a write failed: later flushes refuse     */
    int threads;          /* chunks encoded on up to this many threads */
    fp8__zkeep zkeep;
    int snaps_off, bamax_off; /* no space for snapshots / block amaxes: dropped from then on, the rest goes on */
    uint64_t reserved_end; /* the file's blocks up to here are allocated (reserve) */
    /* the last exponent histogram stored, for records of the same tensor
     * and step (hist_row UINT64_MAX: none yet) */
    int hist_tensor;
    int64_t hist_step;
    uint64_t hist_row;
    uint64_t hist_last[FP8_EXP_BINS];
};

static int buf_push(buffer *b, const void *elem)
{
    if (b->kept + b->n == b->cap) {
        size_t cap = b->cap ? 2 * b->cap : 64;
        void *d = realloc(b->data, cap * b->elem);
        if (!d)
            return FP8_ERROR(FP8_ENOMEM, "run file: out of memory buffering records");
        b->data = d, b->cap = cap;
    }
    memcpy((char *)b->data + (b->kept + b->n) * b->elem, elem, b->elem);
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
    fp8__zkeep_free(&s->zkeep);
    if (s->file > 0)
        H5Fclose(s->file);
    if (s->lock_fd >= 0) {
        /* release the blocks reserved past the end of the file (truncated to
         * its own size), then the lock: no other writer can have started */
        struct stat sb;
        if (s->file > 0 && fstat(s->lock_fd, &sb) == 0)
            (void)!ftruncate(s->lock_fd, sb.st_size);
        fp8_file_unlock(s->lock_fd);
    }
    free(s->tensors);
    free(s->recipes);
    free(s->names);
    for (int k = 0; k < 3; k++)
        fp8__index_free(&s->idx[k]);
    free(s);
}

int fp8_store_run_id_new(char id[FP8_RUN_ID_LEN + 1])
{
    unsigned char b[16];
    size_t got = 0;
    while (got < sizeof b) {
        ssize_t k = getrandom(b + got, sizeof b - got, 0);
        if (k <= 0) {
            if (k < 0 && errno == EINTR)
                continue;
            break;
        }
        got += (size_t)k;
    }
    if (got < sizeof b) { /* no entropy source: time, pid and an address, mixed */
        struct timespec t;
        clock_gettime(CLOCK_REALTIME, &t);
        uint64_t h[2] = {(uint64_t)t.tv_sec * 1000000007u ^ (uint64_t)t.tv_nsec, (uint64_t)getpid() ^ (uint64_t)(uintptr_t)b};
        for (int i = 0; i < 2; i++) {
            h[i] ^= h[i] >> 33, h[i] *= 0xff51afd7ed558ccdULL, h[i] ^= h[i] >> 33;
            memcpy(b + 8 * i, &h[i], 8);
        }
    }
    for (int i = 0; i < 16; i++)
        snprintf(id + 2 * i, 3, "%02x", b[i]);
    return FP8_OK;
}

int fp8_store_run_id_ok(const char *id)
{
    return id && strlen(id) == FP8_RUN_ID_LEN && strspn(id, "0123456789abcdef") == FP8_RUN_ID_LEN;
}

fp8_store *fp8_store_create(const char *path, const char *const *kv, int nkv)
{
    return fp8_store_create_id(path, kv, nkv, NULL);
}

fp8_store *fp8_store_create_id(const char *path, const char *const *kv, int nkv, const char *run_id)
{
    if (!path || strlen(path) >= 1024) {
        FP8_ERROR(FP8_EINVAL, "run file: %s", path ? "path too long" : "no path");
        return NULL;
    }
    if (nkv < 0 || (nkv > 0 && !kv)) {
        FP8_ERROR(FP8_EINVAL, "%s: %d metadata pairs%s", path, nkv, nkv < 0 ? "" : " but the array is NULL");
        return NULL;
    }
    if (run_id && !fp8_store_run_id_ok(run_id)) {
        FP8_ERROR(FP8_EINVAL, "%s: run id '%.40s' is not %d lowercase hex digits", path, run_id, FP8_RUN_ID_LEN);
        return NULL;
    }
    fp8_store *s = calloc(1, sizeof *s);
    if (s)
        s->hist_row = UINT64_MAX, s->lock_fd = -1;
    if (!s) {
        FP8_ERROR(FP8_ENOMEM, "run file: out of memory");
        return NULL;
    }
    /* the writer's lock first: a file another writer holds is left as it is */
    if (fp8_file_lock(path, &s->lock_fd) != FP8_OK) {
        free(s);
        return NULL;
    }
    char id[FP8_RUN_ID_LEN + 1];
    if (run_id)
        snprintf(id, sizeof id, "%s", run_id);
    else
        fp8_store_run_id_new(id);
    quiet q;
    quiet_on(&q);
    snprintf(s->path, sizeof s->path, "%s", path);
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    H5Pset_libver_bounds(fapl, H5F_LIBVER_LATEST, H5F_LIBVER_LATEST); /* SWMR needs the 1.10 format */
    /* HDF5's own flock is dropped in SWMR mode anyway; the lock above is ours
     * (and on NFS, where flock is emulated by fcntl locks, they would clash) */
    H5Pset_file_locking(fapl, 0, 1);
    /* Paged file space (docs/schema.md, "A killed writer"): every piece of
     * metadata smaller than a page lies inside one page, so inside one of
     * the kernel's 4 KB pages, and a write of it cannot be torn: a SIGKILL
     * can cut a write that spans pages, and a torn chunk-index block made
     * every record of the file unreadable.  1 KB pages cost ~7% of file
     * size (4 KB pages ~35%: large chunks are page-aligned). */
    hid_t fcpl = H5Pcreate(H5P_FILE_CREATE);
    if (fcpl >= 0 && (H5Pset_file_space_strategy(fcpl, H5F_FSPACE_STRATEGY_PAGE, 0, 1) < 0 ||
                      H5Pset_file_space_page_size(fcpl, FSPACE_PAGE) < 0)) {
        H5Pclose(fcpl);
        fcpl = -1;
    }
    s->file = fcpl < 0 ? -1 : H5Fcreate(path, H5F_ACC_TRUNC, fcpl, fapl);
    if (fcpl >= 0)
        H5Pclose(fcpl);
    H5Pclose(fapl);
    if (s->file < 0) {
        FP8_ERROR(FP8_EIO, "%s: cannot create the run file", path);
        goto fail;
    }
    for (int i = 0; i < ND; i++) {
        const fp8__dataset *D = &fp8__datasets[i];
        s->type[i] = D->type();
        s->dset[i] = make_dset(s->file, D->name, s->type[i], D->width ? 2 : 1, D->width ? D->width : 1, D->chunk_rows);
        s->buf[i].elem = D->elem;
        if (s->dset[i] < 0) {
            FP8_ERROR(FP8_EIO, "%s: cannot create dataset /%s", path, D->name);
            goto fail;
        }
    }
    char ver[16];
    snprintf(ver, sizeof ver, "%d", FP8_STORE_SCHEMA);
    if (fp8__write_str_attr(s->file, "fp8prof_schema", ver) ||
        fp8__write_str_attr(s->file, "scale_convention", "q = cast(x * scale); x_hat = decode(q) * scale_inv") ||
        fp8__write_str_attr(s->file, "created_by", "fp8prof") || fp8__write_str_attr(s->file, "fp8prof_run_id", id)) {
        FP8_ERROR(FP8_EIO, "%s: cannot write the root attributes", path);
        goto fail;
    }
    hid_t meta = H5Gcreate2(s->file, "meta", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    int bad = meta < 0;
    for (int i = 0; !bad && i < nkv; i++)
        if (!kv[2 * i] || !kv[2 * i + 1] || !*kv[2 * i] || fp8__write_str_attr(meta, kv[2 * i], kv[2 * i + 1]))
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
    fp8_file_lock_mark(s->lock_fd);
    quiet_off(&q);
    return s;
fail:
    store_free(s);
    quiet_off(&q);
    return NULL;
}

/* The registries (tensors, recipes, scalar names) are found by a hash of
 * their names: registering n names costs O(n), not O(n^2). */
static const char *reg_name(const fp8_store *s, int which, int i)
{
    return which == D_TENSORS ? s->tensors[i].name : which == D_RECIPES ? s->recipes[i].spec : s->names[i].name;
}

static int reg_slot(int which) { return which == D_TENSORS ? 0 : which == D_RECIPES ? 1 : 2; }

static int *reg_count(fp8_store *s, int which)
{
    return which == D_TENSORS ? &s->ntensors : which == D_RECIPES ? &s->nrecipes : &s->nnames;
}

/* one registry as the index's items */
typedef struct {
    const fp8_store *s;
    int which;
} reg_items;

static uint64_t reg_hash(const void *items, size_t i)
{
    const reg_items *r = items;
    return fp8__fnv1a64(FP8_FNV64_SEED, reg_name(r->s, r->which, (int)i));
}

static int reg_eq(const void *items, size_t i, const void *name)
{
    const reg_items *r = items;
    return strcmp(reg_name(r->s, r->which, (int)i), name) == 0;
}

/* the row named name, whose hash is h, or -1 */
static int reg_find(const fp8_store *s, int which, const char *name, uint64_t h)
{
    reg_items r = {s, which};
    return (int)fp8__index_find(&s->idx[reg_slot(which)], h, reg_eq, &r, name);
}

static int find_or_add(fp8_store *s, int which, const char *name, size_t maxlen, int role, int layer)
{
    if (!s || !name || !*name)
        return FP8_ERROR(FP8_EINVAL, "run file: empty name"), -1;
    if (strlen(name) >= maxlen)
        return FP8_ERROR(FP8_EINVAL, "run file: name '%.40s...' longer than %zu bytes", name, maxlen - 1), -1;
    int k = reg_slot(which), *count = reg_count(s, which);
    uint64_t h = fp8__fnv1a64(FP8_FNV64_SEED, name);
    int found = reg_find(s, which, name, h);
    if (found >= 0)
        return found;
    reg_items items = {s, which};
    if (fp8__index_reserve(&s->idx[k], reg_hash, &items) != 0)
        return FP8_ERROR(FP8_ENOMEM, "run file: out of memory"), -1;
    void **arr = which == D_TENSORS ? (void **)&s->tensors : which == D_RECIPES ? (void **)&s->recipes
                                                                                 : (void **)&s->names;
    size_t esz = s->buf[which].elem;
    if (*count == s->regcap[k]) {
        int cap = s->regcap[k] ? 2 * s->regcap[k] : 16;
        void *grown = realloc(*arr, (size_t)cap * esz);
        if (!grown)
            return FP8_ERROR(FP8_ENOMEM, "run file: out of memory"), -1;
        *arr = grown, s->regcap[k] = cap;
    }
    char *slot = (char *)*arr + (size_t)*count * esz;
    memset(slot, 0, esz);
    strcpy(slot, name); /* name is the first member of each registry row */
    if (which == D_TENSORS) {
        ((disk_tensor *)(void *)slot)->role = role;
        ((disk_tensor *)(void *)slot)->layer = layer;
    }
    if (buf_push(&s->buf[which], slot) != FP8_OK)
        return -1;
    fp8__index_add(&s->idx[k], h);
    return (*count)++;
}

int fp8_store_find_tensor(const fp8_store *s, const char *name)
{
    return s && name ? reg_find(s, D_TENSORS, name, fp8__fnv1a64(FP8_FNV64_SEED, name)) : -1;
}

/* steps and layers a run file may hold (fp8_store.h): readers refuse others */
static int bad_step(int64_t step)
{
    return step < 0 || step > FP8_STEP_MAX
               ? FP8_ERROR(FP8_EINVAL, "run file: step %lld is outside 0..2^62", (long long)step)
               : FP8_OK;
}

int fp8_store_tensor(fp8_store *s, const char *name, fp8_role role, int layer)
{
    if (layer < -1 || layer > FP8_LAYER_MAX || (unsigned)role >= FP8_NROLE)
        return FP8_ERROR(FP8_EINVAL, "run file: tensor '%.60s': %s", name ? name : "",
                         (unsigned)role >= FP8_NROLE ? "bad role" : "layer outside -1..2^20"),
               -1;
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
    if (bad_step(step))
        return FP8_EINVAL;
    disk_record d;
    memset(&d, 0, sizeof d);
    d.tensor = (uint32_t)tensor, d.recipe = (uint32_t)recipe, d.step = step, d.active = active != 0;
    d.rows = rows, d.cols = cols;
    d.te_overflows = st->te_overflows;
    memcpy(d.classes, st->classes.n, sizeof d.classes);
    if (st->format)
        snprintf(d.format, sizeof d.format, "%s", st->format->name);
#define CP(f) d.f = st->f;
    STAT_FIELDS(CP, CP)
#undef CP
    /* the recipes of one tensor and step share its exponent histogram (it
     * describes the input): store it once, records point at it */
    int e = 0;
    if (s->hist_tensor == tensor && s->hist_step == step && s->hist_row != UINT64_MAX &&
        memcmp(s->hist_last, st->exp_hist, sizeof s->hist_last) == 0) {
        d.hist = s->hist_row;
    } else {
        d.hist = (uint64_t)(s->buf[D_EXP_HIST].written + s->buf[D_EXP_HIST].n);
        e = buf_push(&s->buf[D_EXP_HIST], st->exp_hist);
        if (!e) {
            s->hist_tensor = tensor, s->hist_step = step, s->hist_row = d.hist;
            memcpy(s->hist_last, st->exp_hist, sizeof s->hist_last);
        }
    }
    if (!e)
        e = buf_push(&s->buf[D_RECORDS], &d);
    if (!e)
        e = buf_push(&s->buf[D_SCALE_HIST], st->scale_hist);
    return e;
}

int fp8_store_add_scalar(fp8_store *s, int name, int64_t step, double value)
{
    if (!s || name < 0 || name >= s->nnames)
        return FP8_ERROR(FP8_EINVAL, "run file: scalar with an unregistered name");
    if (bad_step(step))
        return FP8_EINVAL;
    disk_scalar d;
    memset(&d, 0, sizeof d); /* the padding after id too: a file's bytes are the data's alone */
    d.id = (uint32_t)name, d.step = step, d.value = value;
    return buf_push(&s->buf[D_SCALARS], &d);
}

int fp8_store_add_step(fp8_store *s, int tensor, int recipe, int64_t step, int active, float amax, float scale,
                       unsigned nonfinite)
{
    if (!s || tensor < 0 || tensor >= s->ntensors || recipe < 0 || recipe >= s->nrecipes)
        return FP8_ERROR(FP8_EINVAL, "run file: step row for an unregistered tensor or recipe");
    if (bad_step(step))
        return FP8_EINVAL;
    disk_step d = {(uint32_t)tensor, (uint32_t)recipe, step, amax, scale, nonfinite & 3u, active != 0};
    return buf_push(&s->buf[D_STEPS], &d);
}

static int buf_append(buffer *b, const void *data, size_t n);

int fp8_store_add_block_amax(fp8_store *s, int tensor, int64_t step, uint64_t rows, uint64_t cols, uint32_t block,
                             const float *amax)
{
    if (!s || !amax || tensor < 0 || tensor >= s->ntensors || !rows || !cols || !block)
        return FP8_ERROR(FP8_EINVAL, "run file: bad block-amax row");
    uint64_t per_row = cols / block + (cols % block != 0);
    if (bad_step(step) || rows > SIZE_MAX / sizeof(float) / per_row)
        return bad_step(step) ? FP8_EINVAL : FP8_ERROR(FP8_EINVAL, "run file: block-amax shape %llux%llu too large",
                                                       (unsigned long long)rows, (unsigned long long)cols);
    if (s->bamax_off)
        return FP8_OK; /* no space left for them: dropped */
    uint64_t n = rows * per_row;
    buffer *b = &s->buf[D_BAMAX_DATA];
    disk_bamax ix;
    memset(&ix, 0, sizeof ix); /* (its padding: as above) */
    ix.tensor = (uint32_t)tensor, ix.step = step, ix.rows = rows, ix.cols = cols, ix.block = block;
    ix.offset = (uint64_t)(b->written + b->n), ix.count = n;
    int e = buf_append(b, amax, (size_t)n);
    return e ? e : buf_push(&s->buf[D_BAMAX_INDEX], &ix);
}

/* Append n elements of elem bytes to a buffer without a per-element push. */
static int buf_append(buffer *b, const void *data, size_t n)
{
    if (b->kept + b->n + n > b->cap) {
        size_t cap = b->cap ? b->cap : 65536;
        while (cap < b->kept + b->n + n)
            cap *= 2;
        void *d = realloc(b->data, cap * b->elem);
        if (!d)
            return FP8_ERROR(FP8_ENOMEM, "run file: out of memory buffering a snapshot");
        b->data = d, b->cap = cap;
    }
    memcpy((char *)b->data + (b->kept + b->n) * b->elem, data, n * b->elem);
    b->n += n;
    return FP8_OK;
}

int fp8_store_add_snapshot(fp8_store *s, int tensor, int64_t step, const float *x, uint64_t rows, uint64_t cols)
{
    if (!s || !x || tensor < 0 || tensor >= s->ntensors || !rows || !cols)
        return FP8_ERROR(FP8_EINVAL, "run file: snapshot of an unregistered tensor or an empty one");
    if (bad_step(step) || rows > SIZE_MAX / sizeof(float) / cols)
        return bad_step(step) ? FP8_EINVAL : FP8_ERROR(FP8_EINVAL, "run file: snapshot shape too large");
    if (s->snaps_off)
        return FP8_OK; /* no space left for them: dropped */
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
    if (bad_step(step) || rows > SIZE_MAX / 4 / cols)
        return bad_step(step) ? FP8_EINVAL : FP8_ERROR(FP8_EINVAL, "run file: snapshot shape too large");
    if (s->snaps_off)
        return FP8_OK; /* no space left for them: dropped */
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

/* The chunk rows of dataset i (its creation layout; see fp8_store_create). */
static hsize_t chunk_rows(int i) { return fp8__datasets[i].chunk_rows; }

/* Make sure the next `need` bytes past HDF5's end of allocation can be
 * written before HDF5 writes anything: under a file-size limit (checked,
 * so that no write meets SIGXFSZ) and on the disk (fallocate with
 * FALLOC_FL_KEEP_SIZE: the blocks are taken but the file does not grow, so
 * HDF5 allocates where it always would and the reservation is not a hole
 * in the file; close releases what was left).  A write that failed half-way
 * inside HDF5 could instead leave a file shorter than its allocated space,
 * which HDF5 refuses to open.  0, or -1 (no space). */
static int reserve(fp8_store *s, size_t need)
{
    void *handle = NULL;
    haddr_t eoa = 0;
    if (H5Fget_vfd_handle(s->file, H5P_DEFAULT, &handle) < 0 || !handle || H5Fget_eoa(s->file, &eoa) < 0)
        return 0; /* not the sec2 driver: nothing to reserve with */
    int fd = *(int *)handle;
    struct rlimit rl;
    if (getrlimit(RLIMIT_FSIZE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY && (uint64_t)eoa + need > (uint64_t)rl.rlim_cur)
        return -1;
    if ((uint64_t)eoa + need <= s->reserved_end)
        return 0; /* allocated by an earlier call */
    /* a stretch more than asked, so that the next chunks need no call of
     * their own; where the disk has not that much, exactly what is asked */
    const uint64_t ahead = 4u << 20;
    if (fallocate(fd, FALLOC_FL_KEEP_SIZE, (off_t)eoa, (off_t)(need + ahead)) == 0) {
        s->reserved_end = (uint64_t)eoa + need + ahead;
        return 0;
    }
    if (fallocate(fd, FALLOC_FL_KEEP_SIZE, (off_t)eoa, (off_t)need) == 0) {
        s->reserved_end = (uint64_t)eoa + need;
        return 0;
    }
    if (errno != EOPNOTSUPP && errno != ENOSYS)
        return -1;
    struct statvfs v; /* a file system without fallocate: the free space at least */
    return fstatvfs(fd, &v) == 0 && (uint64_t)v.f_bavail * v.f_frsize >= need ? 0 : -1;
}

/* The chunks dataset i's buffered rows touch: the partly filled last one
 * (its kept rows and the first new ones), then the next; each encoded as
 * the filters store it.  Returns how many were added at jobs (jobs NULL:
 * only counted). */
static int plan(const fp8_store *s, int i, fp8__chunk_enc *jobs)
{
    const buffer *b = &s->buf[i];
    size_t total = b->kept + b->n, step = (size_t)chunk_rows(i), row_bytes = b->elem, elem = H5Tget_size(s->type[i]);
    if (!b->n)
        return 0;
    int nj = 0;
    for (size_t r = 0; r < total; r += step, nj++) {
        size_t have = total - r < step ? total - r : step;
        if (jobs)
            jobs[nj] = (fp8__chunk_enc){.src = (const char *)b->data + r * row_bytes, .present = have * row_bytes,
                                        .bytes = step * row_bytes, .elem = elem,
                                        .rle = fp8__datasets[i].rle};
    }
    return nj;
}

/* Write dataset i's encoded chunks (plan's, in order) a chunk at a time,
 * each behind its own reservation (its bytes, metadata), so a full disk
 * stops recording at a chunk boundary and keeps what fits.  headroom:
 * bytes that must stay free (reserved) after this dataset's writes, for
 * the statistics of later flushes.  0, -1 (a write failed), -2 (no space). */
static int append(fp8_store *s, int i, const fp8__chunk_enc *jobs, int nj, size_t headroom)
{
    buffer *b = &s->buf[i];
    if (!b->n)
        return 0;
    hsize_t width = fp8__datasets[i].width ? fp8__datasets[i].width : 1;
    size_t step = (size_t)chunk_rows(i), total = b->kept + b->n, in_file = b->kept, row_bytes = b->elem;
    hsize_t first = b->written - b->kept; /* the dataset row of data's first row: a chunk boundary */
    int rc = 0;
    for (int c = 0; c < nj && !rc; c++) {
        size_t end = (size_t)(c + 1) * step < total ? (size_t)(c + 1) * step : total;
        hsize_t newdims[2] = {first + end, width}, offset[2] = {first + (hsize_t)c * step, 0};
        if (jobs[c].failed)
            rc = -1; /* no memory to encode it */
        else if (reserve(s, jobs[c].out_size + 16 * 1024 + headroom) != 0)
            rc = -2;
        else if (H5Dset_extent(s->dset[i], newdims) < 0 ||
                 H5Dwrite_chunk(s->dset[i], H5P_DEFAULT, 0, offset, jobs[c].out_size, jobs[c].out) < 0)
            rc = -1;
        else
            in_file = end;
    }
    /* keep the rows of the chunk now partly filled, then those not written
     * (dropped when recording stops) */
    b->written = first + in_file;
    size_t keep_from = in_file - (size_t)(b->written % step);
    memmove(b->data, (char *)b->data + keep_from * row_bytes, (total - keep_from) * row_bytes);
    b->kept = in_file - keep_from, b->n = total - in_file;
    if (H5Dflush(s->dset[i]) < 0 && !rc)
        rc = -1;
    return rc;
}

/* SIGXFSZ kills a process that writes past its file-size limit; the
 * training loop must survive: block it in this thread while writing, then
 * take any that became pending. */
static void xfsz_block(sigset_t *old)
{
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGXFSZ);
    pthread_sigmask(SIG_BLOCK, &set, old);
}

static void xfsz_restore(const sigset_t *old)
{
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGXFSZ);
    struct timespec zero = {0, 0};
    while (sigtimedwait(&set, NULL, &zero) == SIGXFSZ)
        ;
    pthread_sigmask(SIG_SETMASK, old, NULL);
}

int fp8_store_flush(fp8_store *s)
{
    if (!s)
        return FP8_ERROR(FP8_EINVAL, "run file: NULL store");
    if (s->failed)
        return FP8_ERROR(FP8_EIO, "%s: an earlier write failed; recording has stopped", s->path);
    quiet q;
    quiet_on(&q);
    sigset_t old;
    xfsz_block(&old);
    /* registries first, so a flushed record never names an unknown tensor;
     * histograms before their records; data before its index */
    /* the statistics come first; the bulky optional data may only use the
     * disk while room for several more flushes of statistics stays reserved */
    size_t essential = 0;
    for (int i = 0; i < ND; i++)
        if (fp8__datasets[i].optional == FP8__ESSENTIAL)
            essential += s->buf[i].n * s->buf[i].elem;
    size_t headroom = 4 * essential > (1u << 20) ? 4 * essential : (1u << 20);
    /* every dataset's chunks encoded first, on the probe's threads */
    int nj = 0, first_job[ND + 1];
    for (int i = 0; i < ND; i++)
        nj += plan(s, i, NULL);
    fp8__chunk_enc *jobs = nj ? malloc((size_t)nj * sizeof *jobs) : NULL;
    int bad = nj && !jobs ? -1 : 0;
    if (jobs) {
        for (int i = 0, at = 0; i < ND; i++)
            first_job[i] = at, at += plan(s, i, jobs + at);
        first_job[ND] = nj;
        fp8__encode_chunks(jobs, nj, s->threads, &s->zkeep);
    }
    for (int k = 0; k < ND && !bad && jobs; k++) {
        int i = fp8__flush_order[k];
        fp8__optional opt = fp8__datasets[i].optional;
        bad = append(s, i, jobs + first_job[i], first_job[i + 1] - first_job[i], opt ? headroom : 0);
        /* the bulky optional data (snapshots, block amaxes) give way to the
         * statistics: drop their group, keep recording the rest */
        if (bad == -2 && opt) {
            int *off = opt == FP8__SNAPSHOTS ? &s->snaps_off : &s->bamax_off;
            *off = 1;
            for (int j = 0; j < ND; j++)
                if (fp8__datasets[j].optional == opt)
                    s->buf[j].n = 0;
            bad = 0;
        }
    }
    for (int j = 0; j < nj; j++)
        free(jobs[j].out);
    free(jobs);
    xfsz_restore(&old);
    quiet_off(&q);
    if (bad) {
        s->failed = 1;
        if (bad == -2)
            return FP8_ERROR(FP8_EIO, "%s: no space for the next records (disk full or file-size limit); recording "
                                      "stopped, everything written before stays readable",
                             s->path);
        return FP8_ERROR(FP8_EIO, "%s: writing failed (disk full?); what was flushed before stays readable", s->path);
    }
    return FP8_OK;
}

void fp8__store_set_threads(fp8_store *s, int threads)
{
    if (s)
        s->threads = threads;
}

int fp8_store_close(fp8_store *s)
{
    if (!s)
        return FP8_OK;
    int st = s->failed ? FP8_OK : fp8_store_flush(s);
    quiet q;
    quiet_on(&q);
    sigset_t old;
    xfsz_block(&old);
    store_free(s); /* (truncates the reservation, then releases the lock) */
    xfsz_restore(&old);
    quiet_off(&q);
    return st;
}
