/*
 * run_index.c — the index file of a multi-rank run (fp8_ranks.h).
 *
 * The index holds root attributes fp8prof_index = "1" and fp8prof_ranks =
 * "<N>", the run's metadata in /meta, and one external link per rank,
 * /ranks/rank<R> -> ("<stem>.rank<R>.h5", "/"), so that h5dump, h5py and
 * HDF5 tools can walk the whole run from it.  It has no fp8prof_schema
 * attribute: a reader that does not know indexes refuses it rather than
 * reading an empty run.
 */
#include <hdf5.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fp8_error.h"
#include "fp8_file.h"
#include "fp8_ranks.h"
#include "fp8_store.h"
#include "datasets.h"

int fp8_rank_path(const char *index_path, int rank, char *out, size_t n)
{
    if (!index_path || rank < 0 || !out)
        return -1;
    size_t len = strlen(index_path);
    if (len >= 3 && strcmp(index_path + len - 3, ".h5") == 0)
        len -= 3;
    int w = snprintf(out, n, "%.*s.rank%d.h5", (int)len, index_path, rank);
    return w < 0 || (size_t)w >= n ? -1 : 0;
}

int fp8_ranks_write_index(const char *index_path, int nranks, const char *const *kv, int nkv, const char *run_id)
{
    if (!index_path || nranks < 1 || nranks > FP8_RANKS_MAX || nkv < 0 || (nkv && !kv) || !fp8_store_run_id_ok(run_id))
        return FP8_ERROR(FP8_EINVAL, "rank index: bad arguments (path, 1..%d ranks, metadata, the ranks' run id)",
                         FP8_RANKS_MAX);
    char tmp[1100];
    if (fp8_file_tmp_path(index_path, tmp, sizeof tmp) != 0)
        return FP8_ERROR(FP8_EINVAL, "%s: path too long", index_path);
    quiet q;
    quiet_on(&q);
    hid_t f = H5Fcreate(tmp, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    int bad = f < 0;
    char n[16];
    snprintf(n, sizeof n, "%d", nranks);
    bad = bad || fp8__write_str_attr(f, "fp8prof_index", "1") || fp8__write_str_attr(f, "fp8prof_ranks", n) ||
          fp8__write_str_attr(f, "created_by", "fp8prof") || fp8__write_str_attr(f, "fp8prof_run_id", run_id);
    hid_t meta = bad ? -1 : H5Gcreate2(f, "meta", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    bad = bad || meta < 0;
    for (int i = 0; !bad && i < nkv; i++)
        if (!kv[2 * i] || !kv[2 * i + 1] || !*kv[2 * i] || fp8__write_str_attr(meta, kv[2 * i], kv[2 * i + 1]))
            bad = 1;
    if (meta >= 0)
        H5Gclose(meta);
    hid_t g = bad ? -1 : H5Gcreate2(f, "ranks", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    bad = bad || g < 0;
    for (int r = 0; !bad && r < nranks; r++) {
        char target[1100], link[32];
        fp8_rank_path(index_path, r, target, sizeof target);
        const char *base = strrchr(target, '/');
        snprintf(link, sizeof link, "rank%d", r);
        /* the target's base name: HDF5 looks for it beside the index */
        bad = H5Lcreate_external(base ? base + 1 : target, "/", g, link, H5P_DEFAULT, H5P_DEFAULT) < 0;
    }
    if (g >= 0)
        H5Gclose(g);
    if (f >= 0 && H5Fclose(f) < 0)
        bad = 1;
    quiet_off(&q);
    if (bad) {
        remove(tmp);
        return FP8_ERROR(FP8_EIO, "%s: cannot write the rank index", index_path);
    }
    return fp8_file_commit(tmp, index_path);
}

/* a fixed-length string attribute of obj into buf (cap bytes), 0; -1 when
 * absent, of another type or too long */
static int str_attr(hid_t obj, const char *name, char *buf, size_t cap)
{
    hid_t a = H5Aopen(obj, name, H5P_DEFAULT);
    hid_t t = a >= 0 ? H5Aget_type(a) : -1;
    int rc = -1;
    memset(buf, 0, cap);
    if (t >= 0 && H5Tget_class(t) == H5T_STRING && !H5Tis_variable_str(t) && H5Tget_size(t) < cap &&
        H5Aread(a, t, buf) >= 0)
        rc = 0;
    if (t >= 0)
        H5Tclose(t);
    if (a >= 0)
        H5Aclose(a);
    buf[cap - 1] = 0;
    return rc;
}

int fp8_ranks_run_id(const char *path, char id[FP8_RUN_ID_LEN + 1])
{
    id[0] = 0;
    if (fp8_file_regular(path) != FP8_OK)
        return -1;
    quiet q;
    quiet_on(&q);
    int rc = -1;
    if (H5Fis_hdf5(path) > 0) {
        hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
        if (f < 0)
            f = H5Fopen(path, H5F_ACC_RDONLY | H5F_ACC_SWMR_READ, H5P_DEFAULT);
        if (f >= 0) {
            char buf[64];
            rc = 0;
            if (str_attr(f, "fp8prof_run_id", buf, sizeof buf) == 0 && fp8_store_run_id_ok(buf))
                memcpy(id, buf, FP8_RUN_ID_LEN + 1);
            H5Fclose(f);
        }
    }
    quiet_off(&q);
    return rc;
}

int fp8_ranks_of(const char *path)
{
    /* a FIFO or a device would block the open below: refused first */
    if (path && access(path, F_OK) == 0 && fp8_file_regular(path) != FP8_OK)
        return -1;
    quiet q;
    quiet_on(&q);
    int n = 0;
    if (path && H5Fis_hdf5(path) > 0) {
        hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
        if (f >= 0 && H5Aexists(f, "fp8prof_index") > 0) {
            n = -1;
            hid_t a = H5Aopen(f, "fp8prof_ranks", H5P_DEFAULT);
            hid_t t = a >= 0 ? H5Aget_type(a) : -1;
            char buf[32] = "";
            if (t >= 0 && H5Tget_class(t) == H5T_STRING && !H5Tis_variable_str(t) && H5Tget_size(t) < sizeof buf &&
                H5Aread(a, t, buf) >= 0) {
                char *end;
                long v = strtol(buf, &end, 10);
                if (end != buf && !*end && v >= 1 && v <= FP8_RANKS_MAX)
                    n = (int)v;
            }
            if (t >= 0)
                H5Tclose(t);
            if (a >= 0)
                H5Aclose(a);
            if (n < 0)
                FP8_ERROR(FP8_EINVAL, "%s: a rank index whose fp8prof_ranks is missing or not in 1..%d", path,
                          FP8_RANKS_MAX);
        }
        if (f >= 0)
            H5Fclose(f);
    }
    quiet_off(&q);
    return n;
}

/* first member, stride and size of rank's instance of group; 0, or -1 */
static int layout(int nranks, int tp, const char *group, int rank, int *first, int *step, int *count)
{
    if (!group || nranks < 1 || tp < 1 || nranks % tp || rank < 0 || rank >= nranks)
        return -1;
    if (strcmp(group, "tp") == 0)
        *first = rank / tp * tp, *step = 1, *count = tp;
    else if (strcmp(group, "dp") == 0)
        *first = rank % tp, *step = tp, *count = nranks / tp;
    else if (strcmp(group, "world") == 0)
        *first = 0, *step = 1, *count = nranks;
    else
        return -1;
    return 0;
}

int fp8_ranks_layout_first(int nranks, int tp, const char *group, int rank)
{
    int first, step, count;
    return layout(nranks, tp, group, rank, &first, &step, &count) ? -1 : first;
}

int fp8_ranks_layout_members(int nranks, int tp, const char *group, int rank, char *out, size_t cap)
{
    int first, step, count;
    if (!out || !cap || layout(nranks, tp, group, rank, &first, &step, &count))
        return -1;
    size_t k = 0;
    out[0] = 0;
    for (int i = 0; i < count; i++) {
        int w = snprintf(out + k, cap - k, "%s%d", i ? "," : "", first + i * step);
        if (w < 0 || (size_t)w >= cap - k)
            return -1;
        k += (size_t)w;
    }
    return first;
}

int fp8_run_same_file(const char *run_path, const char *out, char *which, size_t cap)
{
    if (which && cap)
        which[0] = 0;
    if (!run_path || !out)
        return 0;
    if (fp8_file_same(run_path, out)) {
        if (which && cap)
            snprintf(which, cap, "%s", run_path);
        return 1;
    }
    int n = fp8_ranks_of(run_path);
    for (int r = 0; r < n; r++) {
        char rp[1100];
        if (fp8_rank_path(run_path, r, rp, sizeof rp) == 0 && fp8_file_same(rp, out)) {
            if (which && cap)
                snprintf(which, cap, "%s", rp);
            return 1;
        }
    }
    return 0;
}
