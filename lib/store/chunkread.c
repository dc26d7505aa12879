/*
 * chunkread.c — internal: rows of a chunked dataset read with the
 * decompression spread over two threads.
 *
 * Run files deflate every dataset (after byte shuffling), and inflating is
 * what bounds reading a long run: ~0.5 GB/s on one core.  HDF5 (a serial
 * build) inflates on the calling thread only, so for the big reads (records,
 * exponent histograms) we fetch the compressed chunks ourselves with
 * H5Dread_chunk — a plain file read — and inflate and unshuffle them with
 * zlib on two threads.  Anything this does not recognise (another filter, a
 * memory type unlike the file's, a missing chunk) makes it decline, and the
 * caller reads through H5Dread as before; the result is the same bytes.
 */
#include <hdf5.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "chunkread.h"

typedef struct {
    unsigned char *raw;   /* compressed chunk as stored              */
    size_t raw_size;
    uint32_t mask;        /* filters skipped for this chunk          */
    hsize_t first_row;    /* dataset row of the chunk's first row    */
} chunk;

typedef struct {
    chunk *ch;
    int nch, tid, nthreads;
    int shuffled, deflated;    /* pipeline: [shuffle], deflate      */
    size_t chunk_rows, row_bytes, elem;
    hsize_t start, count;      /* the rows wanted                   */
    unsigned char *out;
    int failed;
} job;

static void *work(void *arg)
{
    job *J = arg;
    size_t cb = J->chunk_rows * J->row_bytes;
    unsigned char *plain = malloc(cb), *uns = J->shuffled ? malloc(cb) : NULL;
    if (!plain || (J->shuffled && !uns)) {
        J->failed = 1;
        goto out;
    }
    for (int i = J->tid; i < J->nch && !J->failed; i += J->nthreads) {
        const chunk *c = &J->ch[i];
        const unsigned char *src = c->raw;
        /* filter i skipped when bit i of the mask is set: shuffle is filter 0 when present */
        int deflate_bit = J->shuffled ? 1 : 0;
        if (J->deflated && !(c->mask & (1u << deflate_bit))) {
            uLongf n = (uLongf)cb;
            if (uncompress(plain, &n, c->raw, (uLong)c->raw_size) != Z_OK || n != cb) {
                J->failed = 1;
                break;
            }
            src = plain;
        } else if (c->raw_size != cb) {
            J->failed = 1;
            break;
        }
        if (J->shuffled && !(c->mask & 1u)) {
            /* HDF5's shuffle: byte b of element e was stored at b * nelem + e */
            size_t nelem = cb / J->elem;
            for (size_t b = 0; b < J->elem; b++) {
                const unsigned char *s = src + b * nelem;
                unsigned char *d = uns + b;
                for (size_t e = 0; e < nelem; e++)
                    d[e * J->elem] = s[e];
            }
            src = uns;
        }
        /* the wanted rows of this chunk */
        hsize_t lo = c->first_row > J->start ? c->first_row : J->start;
        hsize_t hi = c->first_row + J->chunk_rows < J->start + J->count ? c->first_row + J->chunk_rows
                                                                         : J->start + J->count;
        if (hi > lo)
            memcpy(J->out + (size_t)(lo - J->start) * J->row_bytes, src + (size_t)(lo - c->first_row) * J->row_bytes,
                   (size_t)(hi - lo) * J->row_bytes);
    }
out:
    free(plain);
    free(uns);
    return NULL;
}

int fp8__read_rows_parallel(hid_t d, hid_t memtype, hsize_t start, hsize_t count, hsize_t width, void *out)
{
    if (count == 0)
        return 0;
    int rc = -1;
    hid_t dcpl = H5Dget_create_plist(d), ftype = H5Dget_type(d), space = H5Dget_space(d);
    chunk *ch = NULL;
    int nch = 0;
    if (dcpl < 0 || ftype < 0 || space < 0 || H5Tequal(ftype, memtype) <= 0 || H5Pget_layout(dcpl) != H5D_CHUNKED)
        goto done;
    int rank = H5Sget_simple_extent_ndims(space);
    hsize_t dims[2] = {0, 0}, cdims[2] = {0, 0};
    if (rank < 1 || rank > 2 || (rank == 2) != (width > 0))
        goto done;
    H5Sget_simple_extent_dims(space, dims, NULL);
    if (H5Pget_chunk(dcpl, rank, cdims) != rank || (rank == 2 && (cdims[1] != dims[1] || dims[1] != width)) ||
        start + count > dims[0])
        goto done;
    int nf = H5Pget_nfilters(dcpl), shuffled = 0, deflated = 0;
    for (int i = 0; i < nf; i++) {
        unsigned flags = 0, cd[8];
        size_t ncd = 8;
        H5Z_filter_t f = H5Pget_filter2(dcpl, (unsigned)i, &flags, &ncd, cd, 0, NULL, NULL);
        if (f == H5Z_FILTER_SHUFFLE && i == 0)
            shuffled = 1;
        else if (f == H5Z_FILTER_DEFLATE && i == nf - 1)
            deflated = 1;
        else
            goto done;
    }
    size_t elem = H5Tget_size(ftype), row_bytes = elem * (rank == 2 ? (size_t)width : 1);
    size_t chunk_rows = (size_t)cdims[0];
    hsize_t c0 = start / chunk_rows, c1 = (start + count - 1) / chunk_rows;
    /* in batches of up to 256 chunks: fetch (serial), then inflate on two threads */
    enum { BATCH = 256 };
    ch = calloc(BATCH, sizeof *ch);
    if (!ch)
        goto done;
    for (hsize_t b = c0; b <= c1; b += BATCH) {
        nch = 0;
        for (hsize_t c = b; c <= c1 && c < b + BATCH; c++) {
            hsize_t off[2] = {c * chunk_rows, 0}, sz = 0;
            if (H5Dget_chunk_storage_size(d, off, &sz) < 0 || sz == 0)
                goto done;
            chunk *k = &ch[nch];
            unsigned char *p = realloc(k->raw, (size_t)sz);
            if (!p)
                goto done;
            k->raw = p, k->raw_size = (size_t)sz, k->first_row = off[0];
            nch++;
            if (H5Dread_chunk(d, H5P_DEFAULT, off, &k->mask, k->raw) < 0)
                goto done;
        }
        job J[2];
        for (int t = 0; t < 2; t++)
            J[t] = (job){ch, nch, t, 2, shuffled, deflated, chunk_rows, row_bytes, elem, start, count, out, 0};
        pthread_t th;
        int threaded = nch > 1 && pthread_create(&th, NULL, work, &J[1]) == 0;
        if (!threaded)
            J[0].nthreads = J[1].nthreads = 1;
        work(&J[0]);
        if (threaded)
            pthread_join(th, NULL);
        if (J[0].failed || (threaded && J[1].failed))
            goto done;
    }
    rc = 0;
done:
    for (int i = 0; ch && i < BATCH; i++)
        free(ch[i].raw);
    free(ch);
    if (dcpl >= 0)
        H5Pclose(dcpl);
    if (ftype >= 0)
        H5Tclose(ftype);
    if (space >= 0)
        H5Sclose(space);
    return rc;
}
