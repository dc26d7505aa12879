/*
 * run_file.h — internal to lib/store: opening run files for reading and
 * reading rows of their datasets (run_file.c), for run_read.c and
 * run_slices.c.
 */
#ifndef FP8_RUN_FILE_H
#define FP8_RUN_FILE_H

#include <hdf5.h>
#include <stddef.h>

/* HDF5 retries a metadata read whose checksum fails up to 100 times by
 * default in SWMR mode, with delays doubling up to an hour: on a damaged
 * file a hang of hours.  A writer's flush makes a checksum fail for an
 * instant at most, so a few attempts do. */
#define METADATA_READ_ATTEMPTS 4

/* A run file opened for reading: SWMR first (a writer may be running or
 * have died), plain read-only else; *truncated (may be NULL) set when the
 * open failed because the file is shorter than its superblock says. */
hid_t fp8__run_open_why(const char *path, int *truncated);
hid_t fp8__run_open(const char *path);

/* Rows of an open dataset as the writer's latest flush left them (SWMR:
 * refreshed first); of dataset `name` (HSIZE_UNDEF when missing). */
hsize_t fp8__rows_of(hid_t d);
hsize_t fp8__rows_now(hid_t file, const char *name);

/* Rows [start, start + count) of a 1-D (width 0) or 2-D dataset into out
 * (two threads when chunkread.c can); 0 or -1. */
int fp8__read_rows(hid_t d, hid_t memtype, hsize_t start, hsize_t count, hsize_t width, void *out);

/* Rows [0, want) of d, or their longest readable beginning: the rows read. */
hsize_t fp8__read_prefix(hid_t d, hid_t memtype, size_t row_bytes, hsize_t want, hsize_t width, void *out);

/* The first rows of 1-D dataset name, all or at most limit, into a new
 * array (run_file.c says what lost does); read_all: every row must read. */
int fp8__read_upto(hid_t file, const char *name, hid_t memtype, size_t elem, void **out, size_t *n, hsize_t limit,
                   size_t *lost);
int fp8__read_all(hid_t file, const char *name, hid_t memtype, size_t elem, void **out, size_t *n);

/* A fixed-length string attribute, malloc'd; NULL when missing or not one. */
char *fp8__read_str_attr(hid_t obj, const char *name);

/* The file a reader opens for path: rank 0's when path is a multi-rank
 * index (*nranks its ranks), path itself else; NULL with a message. */
const char *fp8__run_file_of(const char *path, char *buf, size_t cap, int *nranks);

/* count elements from start of 1-D dataset name (refreshed first). */
int fp8__read_slice(hid_t file, const char *name, hid_t memtype, hsize_t start, hsize_t count, void *out);

#endif
