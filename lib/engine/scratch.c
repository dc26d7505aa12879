/*
 * scratch.c — the engine's tensor-sized scratch, kept per thread between
 * casts (scratch.h).
 */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>

#include "bigmem.h"
#include "scratch.h"

/* Scratch (a piece's x_hat, a cast's parts, and the tensor-sized blocks of
 * transposes, smoothing and the Hadamard transform), kept per thread and
 * slot between casts: fresh 4 KB pages
 * cost more than the cast (2-12 us a page on the machines here).  Up to
 * KEEP_MAX bytes a slot are kept; a larger block is made for one cast, and
 * (as kept ones of 32 MB or more) backed by huge pages where the kernel
 * offers them (bigmem.h: 512x fewer faults). */
#define KEEP_MAX ((size_t)64 << 20)
typedef struct {
    void *raw, *p; /* p: raw's first 64-byte boundary (a cache line: vector
                      stores past the caches need their lines whole) */
    size_t bytes;
} kept_slot;
static pthread_key_t slots_key;
static pthread_once_t slots_once = PTHREAD_ONCE_INIT;
static void slots_free(void *v)
{
    kept_slot *k = v;
    for (int s = 0; s < FP8__SCRATCH_SLOTS; s++)
        free(k[s].raw);
    free(k);
}
static void slots_make(void) { pthread_key_create(&slots_key, slots_free); }

/* this thread's slots (NULL: none could be made) */
static kept_slot *slots(void)
{
    pthread_once(&slots_once, slots_make);
    kept_slot *k = pthread_getspecific(slots_key);
    if (!k && (k = calloc(FP8__SCRATCH_SLOTS, sizeof *k)) != NULL && pthread_setspecific(slots_key, k) != 0) {
        free(k);
        k = NULL;
    }
    return k;
}

void *fp8__scratch_kept(int slot, size_t bytes)
{
    kept_slot *k = bytes <= KEEP_MAX ? slots() : NULL;
    if (!k)
        return NULL;
    if (k[slot].bytes < bytes || !k[slot].p) {
        void *b = fp8__calloc_big(1, (bytes ? bytes : 1) + 64);
        if (!b)
            return NULL;
        free(k[slot].raw);
        k[slot].raw = b, k[slot].p = (void *)(((uintptr_t)b + 63) & ~(uintptr_t)63), k[slot].bytes = bytes;
    }
    return k[slot].p;
}

void *fp8__scratch_has(int slot)
{
    pthread_once(&slots_once, slots_make);
    kept_slot *k = pthread_getspecific(slots_key);
    return k ? k[slot].p : NULL;
}

void *fp8__scratch_take(int slot, size_t bytes)
{
    void *b = fp8__scratch_kept(slot, bytes);
    return b ? b : fp8__malloc_big(bytes);
}

void fp8__scratch_give(int slot, void *p)
{
    if (p && p != fp8__scratch_has(slot))
        free(p);
}
