/*
 * run_file.c — what the readers of run files (run_read.c, run_slices.c)
 * share: opening a run file for reading, and reading rows of its datasets
 * as its writer's last flush left them (run_file.h).
 */
#include <hdf5.h>
#include <stdlib.h>
#include <string.h>

#include "chunkread.h"
#include "fp8_ranks.h"
#include "datasets.h"
#include "run_file.h"

/* Open a run file for reading: SWMR first (a writer may be running or have
 * died), plain read-only else.  HDF5 retries a metadata read whose checksum
 * fails up to 100 times by default in SWMR mode, with delays doubling up to
 * an hour — on a damaged file that is a hang of hours.  A writer's flush
 * makes a checksum fail for an instant at most, so a few attempts do. */
static int open_failed_truncated(void);
/* *truncated (may be NULL): the open failed because the file is shorter
 * than its superblock says (read off HDF5's error stack at once: the next
 * HDF5 call clears it) */
hid_t fp8__run_open_why(const char *path, int *truncated)
{
    if (truncated)
        *truncated = 0;
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    if (fapl >= 0) {
        H5Pset_metadata_read_attempts(fapl, METADATA_READ_ATTEMPTS);
        H5Pset_fclose_degree(fapl, H5F_CLOSE_STRONG); /* closing the file closes what a failed read left open */
    }
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY | H5F_ACC_SWMR_READ, fapl >= 0 ? fapl : H5P_DEFAULT);
    if (f < 0 && truncated)
        *truncated = open_failed_truncated();
    if (f < 0)
        f = H5Fopen(path, H5F_ACC_RDONLY, fapl >= 0 ? fapl : H5P_DEFAULT);
    if (f < 0 && truncated && !*truncated)
        *truncated = open_failed_truncated();
    if (fapl >= 0)
        H5Pclose(fapl);
    return f;
}

hid_t fp8__run_open(const char *path) { return fp8__run_open_why(path, NULL); }

/* Whether HDF5's error stack (after a failed open) says the file is shorter
 * than its superblock's end-of-file address: a copy or download cut short. */
static herr_t truncated_cb(unsigned n, const H5E_error2_t *e, void *flag)
{
    (void)n;
    if (e && e->desc && strstr(e->desc, "truncated"))
        *(int *)flag = 1;
    return 0;
}

static int open_failed_truncated(void)
{
    int flag = 0;
    H5Ewalk2(H5E_DEFAULT, H5E_WALK_DOWNWARD, truncated_cb, &flag);
    return flag;
}

/* Rows of an open dataset as the writer's latest flush left them (SWMR:
 * refreshed first; one handle per dataset, HDF5 1.10 mishandles a refresh
 * through a second one). */
hsize_t fp8__rows_of(hid_t d)
{
    H5Drefresh(d);
    hid_t sp = H5Dget_space(d);
    hsize_t dims[2] = {0, 0};
    H5Sget_simple_extent_dims(sp, dims, NULL);
    H5Sclose(sp);
    return dims[0];
}

/* The rows of dataset `name` now; HSIZE_UNDEF when it is missing. */
hsize_t fp8__rows_now(hid_t file, const char *name)
{
    hid_t d = H5Dopen2(file, name, H5P_DEFAULT);
    if (d < 0)
        return HSIZE_UNDEF;
    hsize_t n = fp8__rows_of(d);
    H5Dclose(d);
    return n;
}


/* Rows [0, want) of d (width values a row; 0: a 1-D dataset) into out,
 * row_bytes apart, or, when some of them cannot be read, their longest
 * readable beginning (found by halving what is left; a killed writer's
 * torn write damages the newest rows): the rows read. */
hsize_t fp8__read_prefix(hid_t d, hid_t memtype, size_t row_bytes, hsize_t want, hsize_t width, void *out)
{
    if (!want || fp8__read_rows(d, memtype, 0, want, width, out) == 0)
        return want;
    hsize_t lo = 0, hi = want; /* [0, lo) read into out; [lo, hi) does not read */
    while (hi - lo > 1) {
        hsize_t mid = lo + (hi - lo) / 2;
        if (fp8__read_rows(d, memtype, lo, mid - lo, width, (char *)out + lo * row_bytes))
            hi = mid;
        else
            lo = mid;
    }
    return lo;
}

/* The first rows of a 1-D dataset: all of them, or at most `limit` (a count
 * taken earlier: a reader following a live writer reads what refers to the
 * registries before the registries, see load).  lost NULL: every row must
 * read; else the rows from the first unreadable one on are left out of *n
 * and added to *lost. */
int fp8__read_upto(hid_t file, const char *name, hid_t memtype, size_t elem, void **out, size_t *n, hsize_t limit,
                     size_t *lost)
{
    hid_t d = H5Dopen2(file, name, H5P_DEFAULT);
    if (d < 0)
        return -1;
    hsize_t have = fp8__rows_of(d), want = have < limit ? have : limit;
    *out = calloc(want ? (size_t)want : 1, elem);
    hsize_t got = *out ? fp8__read_prefix(d, memtype, elem, want, 0, *out) : 0;
    H5Dclose(d);
    *n = (size_t)got;
    if (lost)
        *lost += (size_t)(want - got);
    return *out && (got == want || lost) ? 0 : -1;
}

int fp8__read_all(hid_t file, const char *name, hid_t memtype, size_t elem, void **out, size_t *n)
{
    return fp8__read_upto(file, name, memtype, elem, out, n, HSIZE_UNDEF, NULL);
}

char *fp8__read_str_attr(hid_t obj, const char *name)
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

/* The file a reader opens for path: rank 0's when path is a multi-rank
 * index (*nranks its ranks; 0 otherwise), path itself else; NULL with a
 * message when the index is bad or rank 0's name does not fit in buf. */
const char *fp8__run_file_of(const char *path, char *buf, size_t cap, int *nranks)
{
    *nranks = fp8_ranks_of(path);
    if (*nranks < 0)
        return NULL;
    if (*nranks == 0)
        return path;
    if (fp8_rank_path(path, 0, buf, cap) != 0) {
        FP8_ERROR(FP8_EINVAL, "%s: path too long", path);
        return NULL;
    }
    return buf;
}

/* Rows [start, start + count) of a 1-D or 2-D dataset (already open):
 * inflated on two threads when chunkread.c can, else through H5Dread. */
int fp8__read_rows(hid_t d, hid_t memtype, hsize_t start, hsize_t count, hsize_t width, void *out)
{
    if (fp8__read_rows_parallel(d, memtype, start, count, width, out) == 0)
        return 0;
    int rank = width ? 2 : 1;
    hsize_t st[2] = {start, 0}, cnt[2] = {count, width};
    hid_t fs = H5Dget_space(d), ms = H5Screate_simple(rank, cnt, NULL);
    herr_t e = H5Sselect_hyperslab(fs, H5S_SELECT_SET, st, NULL, cnt, NULL);
    if (e >= 0)
        e = H5Dread(d, memtype, ms, fs, H5P_DEFAULT, out);
    H5Sclose(ms), H5Sclose(fs);
    return e < 0 ? -1 : 0;
}

/* (run_file.h) */
int fp8__read_slice(hid_t file, const char *name, hid_t memtype, hsize_t start, hsize_t count, void *out)
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
