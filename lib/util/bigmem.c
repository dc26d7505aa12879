/*
 * bigmem.c — fp8__calloc_big, fp8__malloc_big (bigmem.h).  Loading a run of
 * 8 M records touches 1.9 GB of fresh memory; on the virtual machines here
 * each 4 KB page's first touch costs some 12 us (a fault, a cleared page),
 * 5-6 s in all.  Backed by 2 MB pages the faults are 512x fewer.  The memory
 * is what calloc/malloc return (large blocks are fresh mappings: calloc's
 * stay untouched until used, so a file that declares more rows than it
 * holds costs address space, not memory); the 2 MB-aligned part of it is
 * advised MADV_HUGEPAGE.  Where the kernel has no huge pages (or madvise
 * fails) nothing changes.
 */
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>

#include "bigmem.h"

#define HUGE_PAGE ((uintptr_t)2 << 20)
#define BIG ((size_t)32 << 20)

static void advise(void *p, size_t bytes)
{
#ifdef MADV_HUGEPAGE
    if (!p || bytes < BIG)
        return;
    uintptr_t lo = ((uintptr_t)p + HUGE_PAGE - 1) & ~(HUGE_PAGE - 1), hi = ((uintptr_t)p + bytes) & ~(HUGE_PAGE - 1);
    if (hi > lo)
        (void)madvise((void *)lo, hi - lo, MADV_HUGEPAGE); /* advice: failure changes nothing */
#else
    (void)p, (void)bytes;
#endif
}

void *fp8__malloc_big(size_t bytes)
{
    void *p = malloc(bytes ? bytes : 1);
    advise(p, bytes);
    return p;
}

void *fp8__calloc_big(size_t n, size_t size)
{
    if (size && n > SIZE_MAX / size)
        return NULL;
    void *p = calloc(n ? n : 1, size ? size : 1);
    advise(p, n * size);
    return p;
}
