/*
 * fp8_probe.h — the API a training loop calls: record what FP8 does to its
 * tensors into an HDF5 run file, and (optionally) apply the FP8 cast itself.
 *
 *   fp8_probe_run *run = fp8_probe_open("run.h5", NULL, meta, 2);
 *   fp8_probe *p = fp8_probe_declare(run, "layers.0.mlp.w1.input", FP8_ROLE_ACTIVATION, 0,
 *                                    "hybrid:delayed", shadows, 3);
 *   for (step = 0; ...; step++) {
 *       fp8_probe_apply(p, step, x, rows, cols, x);   // fake-quant in place + statistics
 *       fp8_probe_scalar(run, "loss", step, loss);
 *       fp8_probe_step_end(run, step);
 *   }
 *   fp8_probe_close(run);
 *
 * Every function returns an fp8_status; a failure never aborts or exits, and
 * its message stays readable with fp8_error_message().  After a storage
 * error (disk full, I/O) recording stops, what was flushed stays readable,
 * and fp8_probe_apply keeps casting, so the training loop carries on.
 * Thread safety: probes may record from several threads at once (a run
 * serialises its storage; each probe serialises its own recipe states).
 *
 * Handles: fp8_probe_close frees the run and every probe declared on it.  A
 * later call with either handle (or a second close) returns FP8_EINVAL with
 * "... is not live" / "the run is closed" instead of touching freed memory,
 * unless the allocator has since given the same address to a new handle of
 * the same type; a probe passed where a run is expected (or the reverse) is
 * refused as such.  fp8_probe_close must not race with other calls on the
 * same run (the caller joins its recording threads first; the Python
 * package's Run.close waits for them).
 * Run files: a writer holds its file's lock until it closes it; a second
 * fp8_probe_open of the same path (thread, process, rank) fails, naming
 * the holder, and the first run loses nothing.
 */
#ifndef FP8_PROBE_H
#define FP8_PROBE_H

#include <stddef.h>
#include <stdint.h>

#include "fp8.h"
#include "fp8_store.h" /* FP8_STEP_MAX, FP8_LAYER_MAX, FP8_NAME_MAX */

typedef struct fp8_probe_run fp8_probe_run;
typedef struct fp8_probe fp8_probe;

typedef struct {
    int64_t every;            /* record every N-th step (1)                         */
    int64_t start, end;       /* record steps in [start, end]; end < 0: no end (0, -1) */
    int exp_hist;             /* store exponent histograms (1)                      */
    int64_t flush_steps;      /* flush every N step ends (10)                       */
    double flush_seconds;     /* ... or when this many seconds passed (5)           */
    const char *snapshot_pattern; /* fnmatch pattern of tensors to snapshot (NULL: none) */
    int64_t snapshot_every;   /* snapshot at steps divisible by this (100)          */
    int snapshot_pairs;       /* 1: also the step after each, so that step-to-step
                                 (lag 1) changes can be measured (0)             */
    int snapshot_codes;       /* 0: float32 values (default); 1: the active recipe's
                                 FP8 codes + its group scales (1/4 the bytes)      */
    int series;               /* 1 (default): at every step in [start, end], whatever
                                 `every`, store each tensor's amax and each recipe's
                                 scale (/steps): exact replays and overflow events */
    int64_t block_amax_every; /* K > 0: at steps kK and kK+1 store every tensor's
                                 1x128-block amaxes (/block_amax; numel/128 floats):
                                 step-to-step block dynamics; 0 (default): off   */
    int threads;              /* 1 (default): every cast on the calling thread;
                                 T (<= 16): each cast, and a record's input
                                 statistics, runs the tensor's parts (pieces of
                                 32768 elements, at most 8 parts) side by side
                                 on T threads (the same bits either way)       */
    const char *run_id;       /* NULL (default): the run file gets a fresh random
                                 id; else FP8_RUN_ID_LEN hex digits, the id every
                                 rank file of one multi-rank run shares
                                 (fp8_probe_open_mpi sets it)               */
    int background;           /* 0 (default): records are made on the calling
                                 thread; 1: a record copies the tensor (or, at a
                                 step that needs only its amax, reads that) and
                                 returns; the run's own thread makes the record,
                                 in call order, with the same bits.  Errors it
                                 meets come back from a later step_end, flush or
                                 close.  Ignored by fp8_probe_open_mpi's runs;
                                 refused in a fork of the opening process.
                                 docs/probes.md "Background"                    */
    int64_t background_mb;    /* the copies a background run holds, at most
                                 (MiB, 256): a record that would pass it waits */
} fp8_probe_options;

/* Steps are 0..FP8_STEP_MAX (2^62) everywhere: the API refuses others, and
 * readers refuse files holding others, so that no step arithmetic can
 * overflow.  Layers are -1 (none) or 0..FP8_LAYER_MAX. */

/* The defaults above. */
fp8_probe_options fp8_probe_defaults(void);

/* For bindings: the struct's size, the defaults written into *o, and one
 * option set by name from text ("every", "start", "end", "exp_hist",
 * "flush_steps", "flush_seconds", "snapshot_pattern", "snapshot_every",
 * "snapshot_pairs", "snapshot_codes", "series", "block_amax_every",
 * "threads", "background", "background_mb", "run_id").
 * snapshot_pattern and run_id keep the pointer: the text must outlive
 * fp8_probe_open.
 * FP8_EINVAL naming an unknown key or a value that is not a number. */
size_t fp8_probe_options_size(void);
void fp8_probe_defaults_into(fp8_probe_options *o);
int fp8_probe_option_set(fp8_probe_options *o, const char *key, const char *value);

/* Create the run file with metadata pairs kv[2i] = kv[2i+1] (nkv pairs).
 * opts may be NULL (defaults).  NULL on failure. */
fp8_probe_run *fp8_probe_open(const char *path, const fp8_probe_options *opts, const char *const *kv, int nkv);

/* Declare a probe on a named tensor: its active recipe (may be NULL: record
 * only the shadows; apply then copies) and nshadow (<= 15) shadow recipes, each with
 * its own state (a shadow whose canonical spec repeats the active recipe or
 * an earlier shadow is dropped).  layer may be -1.  One probe per name and
 * run: declaring a name again fails (with another role or layer it would
 * merge two tensors; with the same, store each record twice).  NULL with
 * one message per cause: a bad spec, too many shadows, a bad role, a long
 * name, a repeated name, a closed run. */
fp8_probe *fp8_probe_declare(fp8_probe_run *run, const char *name, fp8_role role, int layer, const char *active,
                             const char *const *shadows, int nshadow);

typedef enum { FP8_DTYPE_F32 = 0, FP8_DTYPE_BF16, FP8_DTYPE_F16 } fp8_dtype;

/* Record statistics of a rows x cols tensor at step (float32, or raw bf16 /
 * fp16 bits with the _bits variant).  Steps outside the recording window
 * are skipped cheaply, but every recipe state still advances. */
int fp8_probe_record(fp8_probe *p, int64_t step, const float *x, size_t rows, size_t cols);
int fp8_probe_record_bits(fp8_probe *p, int64_t step, const uint16_t *x, fp8_dtype dtype, size_t rows, size_t cols);

/* Record and apply: out = the active recipe's quantize-dequantize of x
 * (out may equal x; an out that overlaps x otherwise, a shifted view of
 * it, is refused with FP8_EINVAL, as by every cast into out).  This is the
 * fake-quant a training loop computes with. */
int fp8_probe_apply(fp8_probe *p, int64_t step, const float *x, size_t rows, size_t cols, float *out);

/* Cast only: out = the active recipe's quantize-dequantize of x with its
 * current state, which is left untouched (no record, no history entry):
 * for evaluation passes.  Without an active recipe out = x. */
int fp8_probe_cast(fp8_probe *p, const float *x, size_t rows, size_t cols, float *out);

/* Cast with one of the probe's recipes (spec: any spelling of its active
 * recipe or one of its shadows) and that recipe's current state, which is
 * left untouched: what the recipe casts x to at this step (a delayed
 * recipe's stale scale).  For a GEMM evaluated under a shadow. */
int fp8_probe_cast_recipe(fp8_probe *p, const char *spec, const float *x, size_t rows, size_t cols, float *out);

/* Smooth SwiGLU evaluated on identical tensors: the weight probe's recipes
 * with option smooth=fold cast W / s (columns), s_j = 1 / max_i |h_ij| of
 * the input probe's record of the same step (record the input first; a
 * step without it skips those recipes), and measure their error in W's
 * units; the input probe's recipes with option smooth cast h * s.  The two
 * probes must belong to one run. */
int fp8_probe_smooth_from(fp8_probe *weight, fp8_probe *input);

/* For callers whose tensors live elsewhere (a GPU): 1 when step needs the
 * tensor itself (statistics, a snapshot, block amaxes, or a recipe whose
 * state follows more than the amax: per-block delayed, smoothed delayed,
 * reduced over ranks), 0 when fp8_probe_note_amax is all the step needs;
 * a negative status on error. */
int fp8_probe_needs_tensor(fp8_probe *p, int64_t step);

/* A step that needs no tensor (fp8_probe_needs_tensor == 0): the tensor's
 * amax (its largest finite |x|) and nonfinite (bit 0: it holds an Inf, bit
 * 1: a NaN), computed by the caller: what record would have done at this
 * step — the every-step series row and delayed histories (an Inf entering
 * as TE's does), several calls in one step taking the max.  No cast: with
 * an active recipe the caller casts itself (fp8_probe_active_scale).
 * FP8_EINVAL when the step needs the tensor. */
int fp8_probe_note_amax(fp8_probe *p, int64_t step, float amax, unsigned nonfinite);

/* The active per-tensor delayed recipe's current scale and scale_inv (what
 * a cast this step uses), for a caller that casts on its own device. */
int fp8_probe_active_scale(fp8_probe *p, float *scale, float *scale_inv);

/* The probe's recipes: specs[i] (canonical; index 0 the active one when
 * the probe has one), at most max of them; returns how many it has. */
int fp8_probe_recipes(fp8_probe *p, const char **specs, int max);

/* The statistics recipe i recorded at the probe's last statistics step
 * (*step), e.g. to hand to a logger; FP8_EINVAL before the first. */
int fp8_probe_last_stats(fp8_probe *p, int i, int64_t *step, fp8_stats *out);

/* A named scalar (loss, learning rate, grad norm, ...) at step. */
int fp8_probe_scalar(fp8_probe_run *run, const char *name, int64_t step, double value);

/* End of step: every recipe state that saw a tensor this step takes its
 * end-of-step update (delayed scaling's history roll); flushes when due. */
int fp8_probe_step_end(fp8_probe_run *run, int64_t step);

/* Training (1, the default) or evaluation (0) passes.  In evaluation,
 * fp8_probe_record records nothing and fp8_probe_apply only casts with the
 * current state (as fp8_probe_cast), so evaluation forwards neither add
 * records nor move delayed scaling's history. */
int fp8_probe_set_training(fp8_probe_run *run, int training);

/* Flush now. */
int fp8_probe_flush(fp8_probe_run *run);

/* Flush, close the file, free every probe of the run. */
int fp8_probe_close(fp8_probe_run *run);

/* Records dropped because storage failed (0 while healthy).  With the
 * option background it first waits until the run's thread has made every
 * record handed to it: the way to wait for that thread without a flush. */
uint64_t fp8_probe_dropped(const fp8_probe_run *run);

#endif
