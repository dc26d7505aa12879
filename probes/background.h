/*
 * background.h — internal to probes/: the probe option `background`.  A
 * run's records, noted amaxes, scalars and step ends go, in the order they
 * were called, to one thread of the run's own, which does what the call
 * would have done on the calling thread; a record hands it a copy of the
 * tensor (the caller may change its tensor as soon as the call returns).
 * The copies queued are bounded (`background_mb`): a call that would pass
 * the bound waits until the thread has used enough of them.
 *
 * Every other call on the run or its probes first waits until the thread
 * has done all that was handed to it (fp8__bg_drain), then runs as without
 * the option.  What a job does is the caller's function, handed with it:
 * this queue knows nothing of probes beyond their handles.  What the thread's calls return is kept: the first error
 * since it was last asked for (fp8__bg_error) is returned by the next step
 * end, flush or close.
 */
#ifndef FP8_PROBE_BACKGROUND_H
#define FP8_PROBE_BACKGROUND_H

#include <stddef.h>
#include <stdint.h>

#include "fp8_probe.h"

typedef struct fp8__bg fp8__bg;

/* What the thread calls for each kind of job (status FP8_OK or an error). */
typedef int (*fp8__bg_record_fn)(fp8_probe *p, int64_t step, const float *x, size_t rows, size_t cols);
typedef void (*fp8__bg_note_fn)(fp8_probe *p, int64_t step, float amax, unsigned nonfinite);
typedef int (*fp8__bg_scalar_fn)(fp8_probe_run *run, int scalar, int64_t step, double value);
typedef int (*fp8__bg_step_end_fn)(fp8_probe_run *run);

/* The thread started for run, with copies bounded to cap bytes; NULL when
 * it cannot be started (the run then works on the calling thread). */
fp8__bg *fp8__bg_start(fp8_probe_run *run, size_t cap);

/* A buffer for n floats to copy a tensor into, reserved against the bound
 * (waiting, while the queue holds others, until the thread has used
 * enough); NULL when n floats alone are more than the bound or memory is
 * short (record on the calling thread then).  Buffers are kept for reuse:
 * a loop records the same shapes step after step. */
float *fp8__bg_buffer(fp8__bg *b, size_t n);

/* Hand over fn(p, step, x, rows, cols), x from fp8__bg_buffer (the
 * thread's from now on). */
void fp8__bg_record(fp8__bg *b, fp8__bg_record_fn fn, fp8_probe *p, int64_t step, float *x, size_t rows,
                    size_t cols);

/* Hand over a noted amax, a scalar (by its id in the run file, taken on
 * the calling thread) and a step end: fn called with these arguments (the
 * run's own for the last two). */
void fp8__bg_note(fp8__bg *b, fp8__bg_note_fn fn, fp8_probe *p, int64_t step, float amax, unsigned nonfinite);
void fp8__bg_scalar(fp8__bg *b, fp8__bg_scalar_fn fn, int scalar, int64_t step, double value);
void fp8__bg_step_end(fp8__bg *b, fp8__bg_step_end_fn fn, int64_t step);

/* Wait until the thread has done everything handed to it. */
void fp8__bg_drain(fp8__bg *b);

/* The first error of the thread's calls since the last time asked, raised
 * again on this thread (its message prefixed "background: "); FP8_OK none. */
int fp8__bg_error(fp8__bg *b);

/* 1 in a forked child of the process that started b: its thread did not
 * come along (nor, maybe, locks it held), so none of the calls above may
 * be made there (the probes refuse them first: fp8__probe_forked). */
int fp8__bg_foreign(const fp8__bg *b);

/* Drain, stop and free (NULL: nothing). */
void fp8__bg_stop(fp8__bg *b);

#endif
