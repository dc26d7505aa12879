/*
 * live.c — the set of live probes and runs with their types (see live.h).
 * Open addressing with linear probing and backward-shift deletion, one
 * mutex: a lookup costs tens of nanoseconds against the microseconds of a
 * probe call.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>

#include "live.h"

typedef struct {
    uintptr_t p; /* 0 = empty */
    int kind;
} entry;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static entry *slot;
static size_t cap, count;

static size_t home(uintptr_t p, size_t n) { return (size_t)(((uint64_t)p >> 4) * 0x9E3779B97F4A7C15ull >> 20) & (n - 1); }

static int grow(void)
{
    size_t n = cap ? 2 * cap : 64;
    entry *s = calloc(n, sizeof *s);
    if (!s)
        return -1;
    for (size_t i = 0; i < cap; i++)
        if (slot[i].p) {
            size_t h = home(slot[i].p, n);
            while (s[h].p)
                h = (h + 1) & (n - 1);
            s[h] = slot[i];
        }
    free(slot);
    slot = s;
    cap = n;
    return 0;
}

/* the slot holding u, or the empty slot ending its cluster (lock held, cap > 0) */
static size_t find(uintptr_t u)
{
    size_t h = home(u, cap);
    while (slot[h].p && slot[h].p != u)
        h = (h + 1) & (cap - 1);
    return h;
}

int fp8__live_add(const void *p, fp8__live_kind kind)
{
    uintptr_t u = (uintptr_t)p;
    int rc = 0;
    pthread_mutex_lock(&lock);
    if (2 * (count + 1) > cap && grow() != 0) {
        rc = -1;
    } else {
        size_t h = find(u);
        if (!slot[h].p)
            slot[h].p = u, count++;
        slot[h].kind = (int)kind;
    }
    pthread_mutex_unlock(&lock);
    return rc;
}

void fp8__live_remove(const void *p)
{
    uintptr_t u = (uintptr_t)p;
    pthread_mutex_lock(&lock);
    if (cap) {
        size_t h = find(u);
        if (slot[h].p) {
            /* backward shift: pull later entries of the cluster into the hole
             * unless their home lies cyclically in (hole, j] */
            size_t hole = h, j = h;
            for (;;) {
                j = (j + 1) & (cap - 1);
                if (!slot[j].p)
                    break;
                size_t k = home(slot[j].p, cap);
                int stays = hole <= j ? (hole < k && k <= j) : (hole < k || k <= j);
                if (!stays) {
                    slot[hole] = slot[j];
                    hole = j;
                }
            }
            slot[hole].p = 0, slot[hole].kind = 0;
            count--;
        }
    }
    pthread_mutex_unlock(&lock);
}

int fp8__live_kind_of(const void *p)
{
    uintptr_t u = (uintptr_t)p;
    int kind = 0;
    pthread_mutex_lock(&lock);
    if (cap && u) {
        size_t h = find(u);
        kind = slot[h].p == u ? slot[h].kind : 0;
    }
    pthread_mutex_unlock(&lock);
    return kind;
}

int fp8__live_has(const void *p, fp8__live_kind kind) { return fp8__live_kind_of(p) == (int)kind; }
