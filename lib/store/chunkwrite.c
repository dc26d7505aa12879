/*
 * chunkwrite.c — internal: a chunk's stored bytes, made as HDF5's filter
 * pipeline makes them (the mirror of chunkread.c).
 *
 * Every run-file dataset is chunked, shuffled and deflated at level 1.  A
 * flush rewrites each dataset's last, partly filled chunk, and HDF5 (a
 * serial build) shuffles and deflates it on the calling thread with a
 * deflate stream made afresh per chunk.  Here the writer shuffles and
 * deflates its chunks itself — the same zlib parameters as HDF5's deflate
 * filter (compress2: window 15 bits, memory level 8, default strategy), so
 * the same bytes — keeping one stream per thread, on the probe's threads,
 * and hands HDF5 the finished chunks (H5Dwrite_chunk).  The stream is raw
 * deflate wrapped here: zlib's own wrapper would checksum every byte of a
 * partly filled chunk's zero tail at every flush.
 */
#include <limits.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "chunkwrite.h"
#include "parallel.h"

#define LEVEL 1 /* H5Pset_deflate(dcpl, 1) in store.c */

/* the nonzero elements of src scattered (64 bytes of zeros skipped at a
 * time: a histogram row is mostly zero) */
#define SCATTER_NONZERO(T, E)                                                                              \
    for (size_t e = 0; e < have;) {                                                                        \
        if (e + 64 / (E) <= have) {                                                                        \
            uint64_t q[8], o = 0;                                                                          \
            memcpy(q, src + e * (E), 64);                                                                  \
            for (int k = 0; k < 8; k++)                                                                    \
                o |= q[k];                                                                                 \
            if (!o) {                                                                                      \
                e += 64 / (E);                                                                             \
                continue;                                                                                  \
            }                                                                                              \
        }                                                                                                  \
        size_t stop = e + 64 / (E) < have ? e + 64 / (E) : have;                                           \
        for (; e < stop; e++) {                                                                            \
            T w;                                                                                           \
            memcpy(&w, src + e * (E), (E));                                                                \
            if (w)                                                                                         \
                for (size_t b = 0; b < (E); b++)                                                           \
                    dst[b * nelem + e] = src[e * (E) + b];                                                 \
        }                                                                                                  \
    }

/* x[r] as row r of an 8 x 8 byte matrix (byte b of x[r]: column b, in
 * memory order) transposed in place: three rounds of swapping blocks of 4,
 * 2, 1 bytes between rows 4, 2, 1 apart */
static inline void transpose8(uint64_t x[8])
{
    for (int i = 0; i < 4; i++) {
        uint64_t t = ((x[i] >> 32) ^ x[i + 4]) & 0x00000000FFFFFFFFull;
        x[i + 4] ^= t, x[i] ^= t << 32;
    }
    for (int i = 0; i < 8; i += i % 4 == 1 ? 3 : 1) { /* 0, 1, 4, 5 */
        uint64_t t = ((x[i] >> 16) ^ x[i + 2]) & 0x0000FFFF0000FFFFull;
        x[i + 2] ^= t, x[i] ^= t << 16;
    }
    for (int i = 0; i < 8; i += 2) {
        uint64_t t = ((x[i] >> 8) ^ x[i + 1]) & 0x00FF00FF00FF00FFull;
        x[i + 1] ^= t, x[i] ^= t << 8;
    }
}

void fp8__shuffle(unsigned char *dst, const unsigned char *src, size_t present, size_t bytes, size_t elem)
{
    /* HDF5's shuffle: byte b of element e goes to b * nelem + e */
    size_t nelem = bytes / elem, have = present / elem;
    if (elem == 8 || elem == 4) {
        /* the histograms and float series: mostly zero elements, whose
         * bytes are zero wherever they go; only the others are scattered */
        memset(dst, 0, bytes);
        if (elem == 8) {
            SCATTER_NONZERO(uint64_t, 8)
        } else {
            SCATTER_NONZERO(uint32_t, 4)
        }
        return;
    }
    /* blocks of 8 rows x 8 bytes transposed in registers (the records'
     * compound rows, the every-step rows), the rest byte by byte */
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    size_t e8 = have - have % 8, b8 = elem - elem % 8;
#else
    size_t e8 = 0, b8 = 0; /* (transpose8 reads a row's bytes in little-endian order) */
#endif
    for (size_t e0 = 0; e0 < e8; e0 += 8)
        for (size_t b = 0; b < b8; b += 8) {
            uint64_t x[8];
            for (int r = 0; r < 8; r++)
                memcpy(&x[r], src + (e0 + (size_t)r) * elem + b, 8);
            transpose8(x);
            for (int k = 0; k < 8; k++)
                memcpy(dst + (b + (size_t)k) * nelem + e0, &x[k], 8);
        }
    for (size_t e = 0; e < have; e++)
        for (size_t b = e < e8 ? b8 : 0; b < elem; b++)
            dst[b * nelem + e] = src[e * elem + b];
    for (size_t b = 0; b < elem; b++)
        memset(dst + b * nelem + have, 0, nelem - have);
}

/* stream t's scratch, at least `bytes` long; NULL when out of memory */
static unsigned char *scratch(fp8__zkeep *keep, int t, size_t bytes)
{
    if (keep->scratch_size[t] < bytes) {
        unsigned char *b = realloc(keep->scratch[t], bytes);
        if (!b)
            return NULL;
        keep->scratch[t] = b, keep->scratch_size[t] = bytes;
    }
    return keep->scratch[t];
}

/* Adler-32 (RFC 1950) of `adler`'s bytes followed by n zero bytes: zeros
 * leave the sum A as it is and add A to B once each, so the zeros cost
 * nothing (a partly filled chunk is mostly its zero tail) */
static uLong adler_zeros(uLong adler, size_t n)
{
    const uLong BASE = 65521;
    uLong a = adler & 0xFFFF, b = adler >> 16;
    b = (b + (uLong)(n % BASE) * a) % BASE;
    return b << 16 | a;
}

/* Adler-32 of p[0..n) continued from ad, the 64-byte blocks of zeros by
 * adler_zeros: the histograms' byte planes are mostly zero (counts below
 * 2^16 leave six of a count's eight bytes zero) */
static uLong adler_sparse(uLong ad, const unsigned char *p, size_t n)
{
    size_t i = 0, from = 0, zeros = 0; /* the stretch [from, i) not yet summed, or `zeros` zero bytes */
    for (; i + 64 <= n; i += 64) {
        uint64_t w[8], o = 0;
        memcpy(w, p + i, 64);
        for (int k = 0; k < 8; k++)
            o |= w[k];
        if (!o) {
            if (from < i)
                ad = adler32_z(ad, p + from, i - from);
            zeros += 64, from = i + 64;
        } else if (zeros) {
            ad = adler_zeros(ad, zeros), zeros = 0;
        }
    }
    if (zeros)
        ad = adler_zeros(ad, zeros);
    return from < n ? adler32_z(ad, p + from, n - from) : ad;
}

/* Adler-32 of the chunk as deflated: the shuffled byte planes (each its
 * present bytes, then zeros), or the present bytes and the zero tail */
static uLong chunk_adler(const fp8__chunk_enc *c, const unsigned char *in)
{
    uLong ad = adler32(0L, Z_NULL, 0);
    if (c->elem > 1) {
        size_t nelem = c->bytes / c->elem, have = c->present / c->elem;
        for (size_t b = 0; b < c->elem; b++)
            ad = adler_zeros(adler_sparse(ad, in + b * nelem, have), nelem - have);
        return ad;
    }
    return adler_zeros(adler_sparse(ad, in, c->present), c->bytes - c->present);
}

static int encode(fp8__chunk_enc *c, fp8__zkeep *keep, int t)
{
    if (!c->elem || c->bytes % c->elem || c->present > c->bytes || c->present % c->elem || c->bytes > UINT_MAX / 2)
        return -1; /* not whole elements (the shuffle would not be HDF5's), or beyond one zlib call */
    z_stream *z = keep->z[t];
    if (!z) {
        z = calloc(1, sizeof *z);
        if (!z)
            return -1;
        /* a raw stream: the zlib header and checksum are written here
         * (deflate's own checksum would read the whole zero tail) */
        if (deflateInit2(z, LEVEL, Z_DEFLATED, -15, 8, Z_DEFAULT_STRATEGY) != Z_OK) {
            free(z);
            return -1;
        }
        keep->z[t] = z, keep->rle[t] = 0;
    } else if (deflateReset(z) != Z_OK) {
        return -1;
    }
    if (keep->rle[t] != c->rle) { /* (a reset stream: nothing pending to flush) */
        if (deflateParams(z, LEVEL, c->rle ? Z_RLE : Z_DEFAULT_STRATEGY) != Z_OK)
            return -1;
        keep->rle[t] = c->rle;
    }
    const unsigned char *in = c->src;
    if (c->elem > 1 || c->present < c->bytes) { /* shuffled, or at least the zero tail appended */
        unsigned char *sc = scratch(keep, t, c->bytes);
        if (!sc)
            return -1;
        if (c->elem > 1)
            fp8__shuffle(sc, c->src, c->present, c->bytes, c->elem);
        else
            memcpy(sc, c->src, c->present), memset(sc + c->present, 0, c->bytes - c->present);
        in = sc;
    }
    uLong cap = deflateBound(z, (uLong)c->bytes) + 6;
    c->out = malloc(cap);
    if (!c->out)
        return -1;
    /* the zlib stream HDF5's filter writes (compress2 at level 1): header
     * 0x78 0x01 (32 KB window, the "fastest" level flag, FCHECK), the raw
     * deflate data, then Adler-32 of the input, most significant byte first */
    c->out[0] = 0x78, c->out[1] = 0x01;
    z->next_in = (Bytef *)in, z->avail_in = (uInt)c->bytes;
    z->next_out = c->out + 2, z->avail_out = (uInt)(cap - 6);
    if (deflate(z, Z_FINISH) != Z_STREAM_END) {
        free(c->out);
        c->out = NULL;
        return -1;
    }
    size_t n = 2 + (size_t)z->total_out;
    uLong ad = chunk_adler(c, in);
    for (int k = 0; k < 4; k++)
        c->out[n + (size_t)k] = (unsigned char)(ad >> (24 - 8 * k));
    c->out_size = n + 4;
    return 0;
}

typedef struct {
    fp8__chunk_enc *jobs;
    int n;
    atomic_int next;
    fp8__zkeep *keep;
} enc_ctx;

/* task t takes the next job until none is left, with stream t */
static void enc_task(void *ctx, int t)
{
    enc_ctx *E = ctx;
    for (int i; (i = atomic_fetch_add(&E->next, 1)) < E->n;)
        E->jobs[i].failed = encode(&E->jobs[i], E->keep, t) != 0;
}

void fp8__encode_chunks(fp8__chunk_enc *jobs, int n, int threads, fp8__zkeep *keep)
{
    if (threads < 1)
        threads = 1;
    if (threads > FP8_ZKEEP_MAX)
        threads = FP8_ZKEEP_MAX;
    if (threads > n)
        threads = n;
    for (int i = 0; i < n; i++)
        jobs[i].out = NULL, jobs[i].out_size = 0, jobs[i].failed = 0;
    enc_ctx E = {.jobs = jobs, .n = n, .keep = keep};
    atomic_init(&E.next, 0);
    if (threads <= 1)
        enc_task(&E, 0);
    else
        fp8__parallel_for(threads, threads, enc_task, &E);
}

void fp8__zkeep_free(fp8__zkeep *keep)
{
    for (int t = 0; t < FP8_ZKEEP_MAX; t++) {
        if (keep->z[t]) {
            deflateEnd(keep->z[t]);
            free(keep->z[t]);
        }
        free(keep->scratch[t]);
        keep->z[t] = NULL, keep->scratch[t] = NULL, keep->scratch_size[t] = 0;
    }
}
