/*
 * scratch.h — internal: scratch for the engine's casts kept per thread
 * (scratch.c): a piece's x_hat and a cast's parts (quantize.c), and the
 * tensor-sized blocks of transposes, smoothing and the Hadamard transform.
 */
#ifndef FP8_SCRATCH_H
#define FP8_SCRATCH_H
#include <stddef.h>

/* Kept per thread between casts (up to 64 MB a slot; beyond, a block for
 * this cast alone): taken (NULL: out of memory), given back when the cast
 * is done with it.  One slot per use, so that a cast inside another
 * (smooth -> Hadamard -> transposed) takes another. */
enum {
    FP8__SCRATCH_PIECE, FP8__SCRATCH_PARTS, FP8__SCRATCH_SMOOTH, FP8__SCRATCH_RHT, FP8__SCRATCH_XT, FP8__SCRATCH_QT,
    FP8__SCRATCH_CT, FP8__SCRATCH_SLOTS
};
void *fp8__scratch_take(int slot, size_t bytes);
void fp8__scratch_give(int slot, void *p);
/* The slot's kept block itself: at least bytes, zeroed when made (made
 * again, zeroed, when it is smaller); NULL when none can be kept (no
 * memory, or more than 64 MB) — never a block of its own for the caller.
 * fp8__scratch_has: the block kept now, or NULL. */
void *fp8__scratch_kept(int slot, size_t bytes);
void *fp8__scratch_has(int slot);

#endif
