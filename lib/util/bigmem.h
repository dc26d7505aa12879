/*
 * bigmem.h — internal: arrays of hundreds of MB (a long run's loaded
 * records, the engine's tensor-sized scratch) backed by transparent huge
 * pages where the kernel offers them.
 */
#ifndef FP8_BIGMEM_H
#define FP8_BIGMEM_H

#include <stddef.h>

/* calloc(n, size), and for 32 MB or more the kernel asked to back its
 * 2 MB-aligned part with huge pages (madvise MADV_HUGEPAGE); free() releases
 * it.  NULL when out of memory or n * size overflows. */
void *fp8__calloc_big(size_t n, size_t size);

/* malloc(bytes) likewise (not zeroed: the caller writes it). */
void *fp8__malloc_big(size_t bytes);

#endif
