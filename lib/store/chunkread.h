/*
 * chunkread.h — internal: rows of a chunked, deflated dataset, inflated on
 * two threads (chunkread.c).
 */
#ifndef FP8_CHUNKREAD_H
#define FP8_CHUNKREAD_H

#include <hdf5.h>

/* Rows [start, start + count) of dataset d (1-D: width 0; 2-D: width =
 * the row length) into out, laid out as memtype, which must equal the
 * file's type.  0, or -1 when it declines or fails (the caller then reads
 * with H5Dread). */
int fp8__read_rows_parallel(hid_t d, hid_t memtype, hsize_t start, hsize_t count, hsize_t width, void *out);

#endif
