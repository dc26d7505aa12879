/*
 * parallel.c — fp8__parallel_for (parallel.h): a pool of worker threads,
 * started on first use and kept (a thread start costs about 75 us on the
 * machines here, as much as casting 10^5 elements), jobs handed out one at
 * a time from a shared counter so that unequal jobs balance.  Callers use
 * this for work whose result does not depend on which thread did what.
 */
#include <pthread.h>

#include "parallel.h"

#define MAX_THREADS 16

static pthread_mutex_t busy = PTHREAD_MUTEX_INITIALIZER; /* held by the call using the pool */
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;   /* guards what follows              */
static pthread_cond_t wake = PTHREAD_COND_INITIALIZER, done = PTHREAD_COND_INITIALIZER;
static int nworkers;          /* started and waiting for work */
static unsigned long gen;     /* bumped for every call that hands out work */
static unsigned long born[MAX_THREADS]; /* gen when worker i was started: work after that is its */
static struct {
    int n, next, want, joined, active;
    void (*fn)(void *, int);
    void *ctx;
} job;

static void drain(void)
{
    for (;;) {
        int k = __atomic_fetch_add(&job.next, 1, __ATOMIC_RELAXED);
        if (k >= job.n)
            break;
        job.fn(job.ctx, job.n - 1 - k); /* from the last job down */
    }
}

static void *worker(void *arg)
{
    int index = (int)(long)arg;
    pthread_mutex_lock(&mu);
    unsigned long seen = born[index]; /* (the call that started it may have handed out its work already) */
    for (;;) {
        while (gen == seen)
            pthread_cond_wait(&wake, &mu);
        seen = gen;
        if (index >= job.want)
            continue; /* not needed this time */
        job.joined++, job.active++;
        pthread_mutex_unlock(&mu);
        drain();
        pthread_mutex_lock(&mu);
        if (--job.active == 0)
            pthread_cond_broadcast(&done);
    }
    return NULL;
}

/* a forked child has none of the parent's workers */
static void after_fork(void)
{
    pthread_mutex_init(&busy, NULL);
    pthread_mutex_init(&mu, NULL);
    pthread_cond_init(&wake, NULL);
    pthread_cond_init(&done, NULL);
    nworkers = 0;
}
static pthread_once_t fork_once = PTHREAD_ONCE_INIT;
static void register_fork(void) { pthread_atfork(NULL, NULL, after_fork); }

void fp8__parallel_for(int n, int threads, void (*fn)(void *ctx, int i), void *ctx)
{
    int T = threads < n ? threads : n;
    if (T > MAX_THREADS)
        T = MAX_THREADS;
    if (T <= 1 || pthread_mutex_trylock(&busy) != 0) {
        for (int k = 0; k < n; k++)
            fn(ctx, n - 1 - k);
        return;
    }
    pthread_once(&fork_once, register_fork);
    pthread_mutex_lock(&mu);
    while (nworkers < T - 1) {
        pthread_t t;
        pthread_attr_t a;
        pthread_attr_init(&a);
        pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
        born[nworkers] = gen;
        int ok = pthread_create(&t, &a, worker, (void *)(long)nworkers) == 0;
        pthread_attr_destroy(&a);
        if (!ok)
            break;
        nworkers++;
    }
    job.n = n, job.next = 0, job.fn = fn, job.ctx = ctx, job.joined = 0, job.active = 0;
    job.want = T - 1 < nworkers ? T - 1 : nworkers;
    gen++;
    pthread_cond_broadcast(&wake);
    pthread_mutex_unlock(&mu);
    drain(); /* the caller works too, and takes whatever is left */
    pthread_mutex_lock(&mu);
    while (job.joined < job.want || job.active > 0) /* every worker asked has come and gone */
        pthread_cond_wait(&done, &mu);
    pthread_mutex_unlock(&mu);
    pthread_mutex_unlock(&busy);
}
