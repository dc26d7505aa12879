/*
 * arrays.h — internal: checks on the arrays a caller hands the library.
 */
#ifndef FP8_ARRAYS_H
#define FP8_ARRAYS_H
#include <stddef.h>
#include <stdint.h>

#include "fp8_error.h"

/* whether the `abytes` at a and the `bbytes` at b share a byte (an empty
 * range shares none) */
static inline int fp8__bytes_overlap(const void *a, size_t abytes, const void *b, size_t bbytes)
{
    uintptr_t pa = (uintptr_t)a, pb = (uintptr_t)b;
    return abytes && bbytes && (pa < pb ? pb - pa < abytes : pa - pb < bbytes);
}

/* FP8_EINVAL, naming fn, when the n floats at out overlap the n at x
 * without being them (a view of x shifted by a few elements: a cast would
 * read input it had already written over); out NULL, out == x (in place)
 * or apart: FP8_OK.  Every public cast of x into out checks it. */
static inline int fp8__check_out(const char *fn, const float *x, const float *out, size_t n)
{
    if (!x || !out || out == x || n > SIZE_MAX / sizeof(float) ||
        !fp8__bytes_overlap(x, n * sizeof(float), out, n * sizeof(float)))
        return FP8_OK;
    uintptr_t a = (uintptr_t)x, b = (uintptr_t)out;
    size_t gap = a < b ? b - a : a - b;
    return FP8_ERROR(FP8_EINVAL,
                     "%s: out overlaps the tensor without being it (starts %zu elements %s it); pass the tensor "
                     "itself as out to cast in place, or an array apart from it",
                     fn, gap / sizeof(float), a < b ? "past" : "before");
}

/* FP8_EINVAL, naming fn and the two arrays, when the `abytes` at a and the
 * `bbytes` at b share a byte (either NULL or empty: FP8_OK): outputs that
 * must lie apart from the input and from each other. */
static inline int fp8__check_apart(const char *fn, const char *aname, const void *a, size_t abytes, const char *bname,
                                   const void *b, size_t bbytes)
{
    if (!a || !b || !fp8__bytes_overlap(a, abytes, b, bbytes))
        return FP8_OK;
    return FP8_ERROR(FP8_EINVAL, "%s: %s and %s overlap in memory; give each an array of its own", fn, aname, bname);
}

#endif
