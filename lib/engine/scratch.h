/*
 * scratch.h — internal: tensor-sized scratch for the engine's casts
 * (scratch.c): transposes, the tensors smoothing and the Hadamard transform
 * make.
 */
#ifndef FP8_SCRATCH_H
#define FP8_SCRATCH_H
#include <stddef.h>

/* Kept per thread between casts (up to 64 MB a slot; beyond, a block for
 * this cast alone): taken (NULL: out of memory), given back when the cast
 * is done with it.  One slot per use, so that a cast inside another
 * (smooth -> Hadamard -> transposed) takes another. */
enum { FP8__SCRATCH_SMOOTH, FP8__SCRATCH_RHT, FP8__SCRATCH_XT, FP8__SCRATCH_QT, FP8__SCRATCH_CT, FP8__SCRATCH_SLOTS };
void *fp8__scratch_take(int slot, size_t bytes);
void fp8__scratch_give(int slot, void *p);

#endif
