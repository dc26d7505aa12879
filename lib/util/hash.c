/*
 * hash.c — FNV-1a and the item index (hash.h).
 */
#include <stdlib.h>

#include "hash.h"

uint32_t fp8__fnv1a(uint32_t h, const char *s)
{
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 16777619u;
    return h;
}

uint64_t fp8__fnv1a64(uint64_t h, const char *s)
{
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

uint64_t fp8__mix64(uint64_t k)
{
    k ^= k >> 33;
    k *= 0xFF51AFD7ED558CCDull;
    k ^= k >> 33;
    k *= 0xC4CEB9FE1A85EC53ull;
    return k ^ (k >> 33);
}

long fp8__index_find(const fp8__index *ix, uint64_t h, fp8__index_eq_fn eq, const void *items, const void *key)
{
    if (!ix->cap)
        return -1;
    for (size_t k = (size_t)h & (ix->cap - 1); ix->slot[k] >= 0; k = (k + 1) & (ix->cap - 1))
        if (eq(items, (size_t)ix->slot[k], key))
            return ix->slot[k];
    return -1;
}

static void put(long *slot, size_t cap, uint64_t h, size_t i)
{
    size_t k = (size_t)h & (cap - 1);
    while (slot[k] >= 0)
        k = (k + 1) & (cap - 1);
    slot[k] = (long)i;
}

int fp8__index_reserve(fp8__index *ix, fp8__index_hash_fn hash, const void *items)
{
    if (2 * (ix->n + 1) <= ix->cap)
        return 0;
    size_t cap = ix->cap ? 2 * ix->cap : 64;
    long *slot = malloc(cap * sizeof *slot);
    if (!slot)
        return -1;
    for (size_t k = 0; k < cap; k++)
        slot[k] = -1;
    for (size_t j = 0; j < ix->n; j++)
        put(slot, cap, hash(items, j), j);
    free(ix->slot);
    ix->slot = slot, ix->cap = cap;
    return 0;
}

void fp8__index_add(fp8__index *ix, uint64_t h)
{
    put(ix->slot, ix->cap, h, ix->n);
    ix->n++;
}

void fp8__index_free(fp8__index *ix)
{
    free(ix->slot);
    ix->slot = NULL, ix->cap = ix->n = 0;
}
