/*
 * run_slices.c — what a loaded run (fp8_store.h) reads from its file on
 * demand: a record's block amaxes, a snapshot's values, the exponent
 * histograms of chosen records.
 */
#include <hdf5.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "datasets.h"
#include "run_file.h"

int fp8_run_block_amax_read(const fp8_run *r, size_t i, float *out)
{
    if (!r || i >= r->nblock_amax || !out)
        return FP8_ERROR(FP8_EINVAL, "block-amax summary %zu does not exist", i);
    const fp8_block_amax *b = &r->block_amax[i];
    quiet q;
    quiet_on(&q);
    int st = FP8_OK;
    hid_t file = fp8__run_open(r->path);
    if (file < 0)
        st = FP8_ERROR(FP8_EIO, "%s: cannot open", r->path);
    else if (fp8__read_slice(file, fp8__datasets[D_BAMAX_DATA].name, H5T_NATIVE_FLOAT, b->offset, b->count, out) != 0)
        st = FP8_ERROR(FP8_EIO, "%s: cannot read block-amax summary %zu (rows %llu..%llu of /block_amax)", r->path, i,
                       (unsigned long long)b->offset, (unsigned long long)(b->offset + b->count - 1));
    if (file >= 0)
        H5Fclose(file);
    quiet_off(&q);
    return st;
}

int fp8_run_block_amax_all(const fp8_run *r, float **out, size_t *n)
{
    if (!r || !out || !n)
        return FP8_ERROR(FP8_EINVAL, "fp8_run_block_amax_all: NULL argument");
    *out = NULL, *n = 0;
    quiet q;
    quiet_on(&q);
    int st = FP8_OK;
    hid_t file = fp8__run_open(r->path);
    hid_t d = file >= 0 ? H5Dopen2(file, fp8__datasets[D_BAMAX_DATA].name, H5P_DEFAULT) : -1;
    if (d < 0) {
        st = FP8_ERROR(FP8_EIO, "%s: cannot open /block_amax", r->path);
    } else {
        hsize_t rows = fp8__rows_of(d);
        float *buf = malloc((size_t)(rows ? rows : 1) * sizeof *buf);
        if (!buf)
            st = FP8_ERROR(FP8_ENOMEM, "out of memory for %llu block amaxes", (unsigned long long)rows);
        else if (rows && fp8__read_rows(d, H5T_NATIVE_FLOAT, 0, rows, 0, buf) != 0) {
            free(buf);
            st = FP8_ERROR(FP8_EIO, "%s: cannot read /block_amax", r->path);
        } else
            *out = buf, *n = (size_t)rows;
    }
    if (d >= 0)
        H5Dclose(d);
    if (file >= 0)
        H5Fclose(file);
    quiet_off(&q);
    return st;
}

int fp8_run_snapshot_read(const fp8_run *r, size_t i, float *out)
{
    if (!r || i >= r->nsnapshots || !out)
        return FP8_ERROR(FP8_EINVAL, "snapshot %zu does not exist", i);
    const fp8_snapshot *sn = &r->snapshots[i];
    size_t n = (size_t)(sn->rows * sn->cols);
    fp8_recipe rec;
    if (sn->recipe >= 0 && (sn->recipe >= r->nrecipes || fp8_recipe_parse(r->recipe_spec[sn->recipe], &rec) != FP8_OK))
        return FP8_ERROR(FP8_EINVAL, "%s: snapshot %zu names an unknown recipe", r->path, i);
    quiet q;
    quiet_on(&q);
    int st = FP8_OK;
    void *codes = NULL;
    float *gsi = NULL;
    hid_t file = fp8__run_open(r->path);
    if (file < 0) {
        st = FP8_ERROR(FP8_EIO, "%s: cannot open", r->path);
    } else if (sn->recipe < 0) {
        if (fp8__read_slice(file, fp8__datasets[D_SNAP_DATA].name, H5T_NATIVE_FLOAT, sn->offset, n, out) != 0)
            st = FP8_ERROR(FP8_EIO, "%s: cannot read snapshot %zu", r->path, i);
    } else {
        codes = malloc(n * (size_t)sn->code_bytes);
        gsi = malloc((size_t)sn->nscales * sizeof *gsi);
        if (!codes || !gsi)
            st = FP8_ERROR(FP8_ENOMEM, "out of memory for snapshot %zu", i);
        else if (fp8__read_slice(file, fp8__datasets[D_SNAP_CODES].name, H5T_NATIVE_UINT8, sn->codes_offset, n * (size_t)sn->code_bytes,
                            codes) != 0 ||
                 fp8__read_slice(file, fp8__datasets[D_SNAP_SCALES].name, H5T_NATIVE_FLOAT, sn->scales_offset, sn->nscales, gsi) != 0)
            st = FP8_ERROR(FP8_EIO, "%s: cannot read snapshot %zu", r->path, i);
        else {
            /* x_hat = decode(code) * scale_inv of the element's group */
            fp8_recipe_for_role(&rec, (fp8_role)r->tensor_role[sn->tensor]);
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

int fp8_run_exp_hist(const fp8_run *r, const uint64_t *rows, size_t n, uint64_t *out)
{
    if (!r || (n && (!rows || !out)))
        return FP8_ERROR(FP8_EINVAL, "exp_hist: no run or no rows");
    for (size_t i = 1; i < n; i++)
        if (rows[i] < rows[i - 1])
            return FP8_ERROR(FP8_EINVAL, "exp_hist: rows must ascend");
    quiet q;
    quiet_on(&q);
    int st = FP8_OK;
    hid_t file = fp8__run_open(r->path);
    hid_t d = file >= 0 ? H5Dopen2(file, fp8__datasets[D_EXP_HIST].name, H5P_DEFAULT) : -1;
    hsize_t total = d >= 0 ? fp8__rows_of(d) : 0;
    /* rows closer than a chunk (64 rows) are read as one span, at most 4096 rows at a time */
    enum { SPAN = 4096, GAP = 64 };
    uint64_t *buf = malloc((size_t)SPAN * FP8_EXP_BINS * sizeof *buf);
    if (d < 0)
        st = FP8_ERROR(FP8_EIO, "%s: cannot open /exp_hist", r->path);
    else if (!buf)
        st = FP8_ERROR(FP8_ENOMEM, "out of memory reading /exp_hist");
    for (size_t i = 0; i < n && st == FP8_OK;) {
        size_t j = i + 1;
        while (j < n && rows[j] - rows[j - 1] <= GAP && rows[j] - rows[i] < SPAN)
            j++;
        hsize_t start = rows[i], cnt = rows[j - 1] - rows[i] + 1;
        if (rows[j - 1] >= total) {
            st = FP8_ERROR(FP8_EINVAL, "%s: /exp_hist has %llu rows, row %llu asked", r->path,
                           (unsigned long long)total, (unsigned long long)rows[j - 1]);
            break;
        }
        if (fp8__read_rows(d, H5T_NATIVE_UINT64, start, cnt, FP8_EXP_BINS, buf)) {
            st = FP8_ERROR(FP8_EIO, "%s: cannot read /exp_hist rows %llu..%llu", r->path, (unsigned long long)start,
                           (unsigned long long)(start + cnt - 1));
            break;
        }
        for (size_t k = i; k < j; k++)
            memcpy(out + k * FP8_EXP_BINS, buf + (rows[k] - start) * FP8_EXP_BINS, FP8_EXP_BINS * sizeof *buf);
        i = j;
    }
    free(buf);
    if (d >= 0)
        H5Dclose(d);
    if (file >= 0)
        H5Fclose(file);
    quiet_off(&q);
    return st;
}
