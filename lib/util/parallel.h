/*
 * parallel.h — internal: run n independent jobs on up to `threads` threads
 * (the probe option `threads`: a record's casts spread over that many).
 */
#ifndef FP8_PARALLEL_H
#define FP8_PARALLEL_H

/* fn(ctx, i) for every i in [0, n), handed out from n - 1 down, on up to
 * min(threads, n) threads (the caller one of them), each taking the next
 * job when it is free.  Workers are started on first use and kept.  One
 * call uses them at a time: a call that finds them busy (another thread's
 * call) runs its jobs on the calling thread, as does one whose workers
 * cannot be started.  Returns when all jobs are done. */
void fp8__parallel_for(int n, int threads, void (*fn)(void *ctx, int i), void *ctx);

/* Wakes the workers that sleep (those started so far, when threads > 1 and
 * no call is using them), without work: they spin for a call's worth of
 * time again.  A caller about to hand out work after some serial work of
 * its own calls this first, so that a worker's wake-up (tens of
 * microseconds on a virtual machine) passes during that work. */
void fp8__parallel_warm(int threads);

#endif
