/*
 * hash.h — internal: FNV-1a string hashes and an index (open addressing,
 * linear probing) over items the caller keeps in an array of its own: the
 * index holds only item numbers, so a table of names, rows or groups
 * stays one array and lookups cost O(1).  Used for the store's registries,
 * the TE log importer's names, compare's groups and the probe's MPI tags.
 */
#ifndef FP8_HASH_H
#define FP8_HASH_H

#include <stddef.h>
#include <stdint.h>

#define FP8_FNV32_SEED 2166136261u
#define FP8_FNV64_SEED 1469598103934665603ull

/* FNV-1a over the bytes of s, continuing from h (a seed above, or an
 * earlier result: hashes of several strings chain). */
uint32_t fp8__fnv1a(uint32_t h, const char *s);
uint64_t fp8__fnv1a64(uint64_t h, const char *s);

/* A 64-bit integer key mixed so that every bit of it reaches the low bits
 * the index takes (the finaliser of MurmurHash3's 64-bit mix): keys that
 * differ only in high bits (a tensor id shifted up) do not share a chain. */
uint64_t fp8__mix64(uint64_t k);

/* Items 0..n-1 (numbered in the order they were added); cap slots (a
 * power of two, or 0), each an item number or -1; at most half of them
 * used, so a probe sequence always ends at an empty slot. */
typedef struct {
    long *slot;
    size_t cap, n;
} fp8__index;

/* item i's hash, and whether item i equals key (1) */
typedef uint64_t (*fp8__index_hash_fn)(const void *items, size_t i);
typedef int (*fp8__index_eq_fn)(const void *items, size_t i, const void *key);

/* The item equal to key, whose hash is h; -1 when none. */
long fp8__index_find(const fp8__index *ix, uint64_t h, fp8__index_eq_fn eq, const void *items, const void *key);

/* Room for one more item: the index grown (rebuilt from items 0..n-1 with
 * hash) when one more would make it more than half full.  0, or -1 when
 * out of memory (the index unchanged).  Call it before storing the item,
 * so that a failure leaves nothing half added. */
int fp8__index_reserve(fp8__index *ix, fp8__index_hash_fn hash, const void *items);

/* Item number n, whose hash is h, added (after fp8__index_reserve). */
void fp8__index_add(fp8__index *ix, uint64_t h);

void fp8__index_free(fp8__index *ix);

#endif
