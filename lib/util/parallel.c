/*
 * parallel.c — fp8__parallel_for (parallel.h): a pool of worker threads,
 * started on first use and kept (a thread start costs about 75 us on the
 * machines here, as much as casting 10^5 elements), jobs handed out one at
 * a time from a shared counter so that unequal jobs balance; an idle worker
 * spins briefly before it sleeps, and the caller, once every job is taken,
 * waits only for the workers still running one.  Callers use this for work whose result
 * does not depend on which thread did what.
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
    int n, next, want, active;
    int closed; /* every job taken and the caller done with its own: a worker not yet joined stays out */
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

/* Spin this many pauses (some 50 us) for the next piece of work before
 * sleeping: a record hands out work a dozen times in a few milliseconds,
 * and waking a sleeping thread (on a VM, a halted virtual CPU) costs tens
 * of microseconds each time. */
#define SPIN 2000

static inline void pause_once(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

static void *worker(void *arg)
{
    int index = (int)(long)arg;
    pthread_mutex_lock(&mu);
    unsigned long seen = born[index]; /* (the call that started it may have handed out its work already) */
    pthread_mutex_unlock(&mu);
    for (;;) {
        for (int k = 0; k < SPIN && __atomic_load_n(&gen, __ATOMIC_ACQUIRE) == seen; k++)
            pause_once();
        pthread_mutex_lock(&mu);
        while (gen == seen)
            pthread_cond_wait(&wake, &mu);
        seen = gen;
        if (index >= job.want || job.closed) { /* not needed this time, or no longer */
            pthread_mutex_unlock(&mu);
            continue;
        }
        __atomic_add_fetch(&job.active, 1, __ATOMIC_RELEASE);
        pthread_mutex_unlock(&mu);
        drain();
        pthread_mutex_lock(&mu);
        if (__atomic_sub_fetch(&job.active, 1, __ATOMIC_RELEASE) == 0)
            pthread_cond_broadcast(&done);
        pthread_mutex_unlock(&mu);
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

void fp8__parallel_warm(int threads)
{
    if (threads <= 1 || pthread_mutex_trylock(&busy) != 0)
        return; /* (a call using the pool has them awake) */
    pthread_mutex_lock(&mu);
    if (nworkers > 0) {
        job.want = 0; /* (nothing to take: they only start spinning again) */
        __atomic_store_n(&gen, gen + 1, __ATOMIC_RELEASE);
        pthread_cond_broadcast(&wake);
    }
    pthread_mutex_unlock(&mu);
    pthread_mutex_unlock(&busy);
}

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
    job.n = n, job.next = 0, job.fn = fn, job.ctx = ctx, job.closed = 0;
    __atomic_store_n(&job.active, 0, __ATOMIC_RELAXED);
    job.want = T - 1 < nworkers ? T - 1 : nworkers;
    __atomic_store_n(&gen, gen + 1, __ATOMIC_RELEASE);
    pthread_cond_broadcast(&wake);
    pthread_mutex_unlock(&mu);
    drain(); /* the caller works too, and takes whatever is left */
    for (int k = 0; k < SPIN && __atomic_load_n(&job.active, __ATOMIC_ACQUIRE) > 0; k++)
        pause_once();
    /* Every job is taken.  A worker that has not joined by now (its core
     * busy with another library's threads, say) is not waited for: it
     * would find nothing to do, and waiting for it to be scheduled cost
     * whole time slices beside OpenBLAS's spinning threads.  Those that
     * joined may still be running their last job. */
    pthread_mutex_lock(&mu);
    job.closed = 1;
    while (__atomic_load_n(&job.active, __ATOMIC_ACQUIRE) > 0)
        pthread_cond_wait(&done, &mu);
    pthread_mutex_unlock(&mu);
    pthread_mutex_unlock(&busy);
}
