/*
 * parallel.h — internal: run n independent jobs on up to `threads` threads
 * (the probe option `threads`: the recipes of one record cast side by side).
 */
#ifndef FP8_PROBE_PARALLEL_H
#define FP8_PROBE_PARALLEL_H

/* fn(ctx, i) for every i in [0, n), from n - 1 down, on min(threads, n)
 * threads (the caller one of them), each taking the next job when it is
 * free.  A thread that cannot be started leaves its jobs to the others.
 * Returns when all are done. */
void fp8__parallel_for(int n, int threads, void (*fn)(void *ctx, int i), void *ctx);

#endif
