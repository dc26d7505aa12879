/*
 * fp8_ranks.h — multi-rank runs on disk: one crash-safe run file per rank
 * (<stem>.rank<R>.h5, each an ordinary run) and an index file <stem>.h5
 * that names them (HDF5 external links /ranks/rank<R> -> <file>:/), written
 * by rank 0.  Every reader of a run accepts the index: it reads rank 0's
 * file as the run and the other ranks through fp8_ranks_*.
 * Schema: docs/schema.md, "Multi-rank runs".
 */
#ifndef FP8_RANKS_H
#define FP8_RANKS_H

#include <stddef.h>

#define FP8_RANKS_MAX 65536

/* The file of rank r of the index at index_path: index_path without a
 * trailing ".h5", then ".rank<r>.h5" (same directory).  0, or -1 when it
 * does not fit in n bytes. */
int fp8_rank_path(const char *index_path, int rank, char *out, size_t n);

/* Write the index for nranks rank files with metadata pairs kv (written to
 * a temporary name and renamed into place) and the run id every rank file
 * carries (fp8_store.h: FP8_RUN_ID_LEN hex digits; readers refuse a rank
 * file whose id differs).  FP8_OK or FP8_EIO/EINVAL. */
int fp8_ranks_write_index(const char *index_path, int nranks, const char *const *kv, int nkv, const char *run_id);

/* The run id of a run file or an index into id ("" when the file has none:
 * written before ids existed); 0, or -1 when the file cannot be read. */
int fp8_ranks_run_id(const char *path, char id[33]);

/* nranks (>= 1) when path is an fp8prof multi-rank index, 0 when it is
 * not (an ordinary run, another file, no file), -1 when it claims to be an
 * index but its rank count is missing or out of range, or when path is not
 * a regular file (a FIFO, a device: message set). */
int fp8_ranks_of(const char *path);

/* 1 when writing `out` would destroy a file the run at run_path consists
 * of: the run file itself or, for an index, the index or any of its rank
 * files (same device and inode, whatever the names); `which` (may be NULL)
 * gets that file's name.  Every command that writes checks its outputs. */
int fp8_run_same_file(const char *run_path, const char *out, char *which, size_t cap);

/* The declared layout (Megatron's order: tensor-parallel ranks
 * consecutive): rank's instance of group "tp" is the tp consecutive ranks
 * holding it, of "dp" every tp-th rank from rank % tp, of "world" all.
 * _first returns the instance's lowest rank (which names it); _members
 * writes its world ranks "a,b,c" into out and returns the same.  -1 for
 * another group, a layout that does not factor nranks, or out too small. */
int fp8_ranks_layout_first(int nranks, int tp, const char *group, int rank);
int fp8_ranks_layout_members(int nranks, int tp, const char *group, int rank, char *out, size_t cap);

#endif
