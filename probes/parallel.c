/*
 * parallel.c — fp8__parallel_for (parallel.h): plain pthreads, started and
 * joined per call (a record's casts take far longer than a thread start:
 * the probe uses it only on large tensors), jobs handed out one at a time
 * from a shared counter so that unequal jobs balance.
 */
#include <pthread.h>

#include "parallel.h"

#define MAX_THREADS 16

typedef struct {
    int n, next;
    void (*fn)(void *, int);
    void *ctx;
} queue;

static void *drain(void *arg)
{
    queue *q = arg;
    for (;;) {
        int k = __atomic_fetch_add(&q->next, 1, __ATOMIC_RELAXED);
        if (k >= q->n)
            break;
        q->fn(q->ctx, q->n - 1 - k); /* from the last job down */
    }
    return NULL;
}

void fp8__parallel_for(int n, int threads, void (*fn)(void *ctx, int i), void *ctx)
{
    int T = threads < n ? threads : n;
    if (T > MAX_THREADS)
        T = MAX_THREADS;
    queue q = {n, 0, fn, ctx};
    pthread_t tid[MAX_THREADS];
    int started[MAX_THREADS] = {0};
    for (int k = 1; k < T; k++)
        started[k] = pthread_create(&tid[k], NULL, drain, &q) == 0;
    drain(&q); /* the caller works too, and picks up whatever a missing thread would have */
    for (int k = 1; k < T; k++)
        if (started[k])
            pthread_join(tid[k], NULL);
}
