/*
 * chunkwrite.h — internal: chunks of the run file encoded as its datasets'
 * filter pipeline stores them (shuffle, then deflate level 1), so the writer
 * can hand HDF5 finished chunks (H5Dwrite_chunk) and encode them on the
 * probe's threads (chunkwrite.c).
 */
#ifndef FP8_CHUNKWRITE_H
#define FP8_CHUNKWRITE_H

#include <stddef.h>

#define FP8_ZKEEP_MAX 16

/* One chunk to encode: `present` bytes of rows from src, then zeros up to
 * `bytes` (the chunk's full size: HDF5 stores whole chunks), shuffled as
 * elements of `elem` bytes.  out (malloc'd, the caller frees) and out_size
 * are set; failed on no memory or a zlib error.  rle: zlib's Z_RLE strategy
 * instead of the default (a standard deflate stream all the same; on
 * shuffled float32 data about as small and 2.5x as fast to make). */
typedef struct {
    const void *src;
    size_t present, bytes, elem;
    int rle;            /* deflate with zlib's run-length strategy (float data) */
    unsigned char *out;
    size_t out_size;
    int failed;
} fp8__chunk_enc;

/* What encoding keeps between flushes: one deflate stream and one shuffle
 * buffer per thread (a stream's first use allocates ~270 KB that a fresh
 * one would take, and fault in, at every chunk). */
typedef struct {
    void *z[FP8_ZKEEP_MAX];
    int rle[FP8_ZKEEP_MAX]; /* the strategy stream t is set to */
    unsigned char *scratch[FP8_ZKEEP_MAX];
    size_t scratch_size[FP8_ZKEEP_MAX];
} fp8__zkeep;

/* Encode jobs[0..n) on up to `threads` threads (the caller one of them).
 * Each job's result is the same bytes on any thread count. */
void fp8__encode_chunks(fp8__chunk_enc *jobs, int n, int threads, fp8__zkeep *keep);

/* HDF5's shuffle filter on `present` bytes of whole elements followed by
 * zeros up to `bytes` (a multiple of elem), on its own (tests compare it
 * with HDF5's). */
void fp8__shuffle(unsigned char *dst, const unsigned char *src, size_t present, size_t bytes, size_t elem);

void fp8__zkeep_free(fp8__zkeep *keep);

#endif
