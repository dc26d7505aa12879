/*
 * fp8_npy.h — read tensors from NumPy .npy files and raw float32 files.
 *
 * .npy: format versions 1.0, 2.0 and 3.0; dtypes float32 and float16 in either
 * byte order ('<f4', '>f4', '<f2', '>f2', '|'/'=' native); C or Fortran
 * order; any shape: the last axis becomes cols, the others multiply into
 * rows (0-d and 1-D arrays are one row).  float16 is widened exactly.
 * Raw files: little-endian float32, shape given by the caller.
 */
#ifndef FP8_NPY_H
#define FP8_NPY_H

#include <stddef.h>

/* Read path into a malloc'd row-major float32 array (*data, free() it).
 * Returns FP8_OK, or FP8_EIO / FP8_EINVAL with a message naming the file
 * and what was wrong. */
int fp8_npy_read(const char *path, float **data, size_t *rows, size_t *cols);

/* Read a raw little-endian float32 file.  rows/cols: 0 means "infer": with
 * both 0 the file is one row; with one given, the other is derived and must
 * divide the element count exactly. */
int fp8_raw_read(const char *path, size_t rows, size_t cols, float **data, size_t *out_rows, size_t *out_cols);

/* 1 when path begins with the .npy magic (\x93NUMPY), 0 when it does not
 * (or is shorter), -1 with a message when it cannot be read. */
int fp8_npy_sniff(const char *path);

/* Write a 2-D float32 array as a version 1.0 .npy file. */
int fp8_npy_write(const char *path, const float *data, size_t rows, size_t cols);

#endif
