/*
 * fp8_file.h — writing outputs without destroying inputs: whether two
 * paths name the same file (device and inode, not names), and the
 * temporary name an output is written under before it is renamed into
 * place (so a failed or interrupted write leaves the old file intact).
 */
#ifndef FP8_FILE_H
#define FP8_FILE_H

#include <stddef.h>

/* 1 when both paths exist and are the same file (same device and inode,
 * whatever the names: links, "./x", "../d/x"), else 0. */
int fp8_file_same(const char *a, const char *b);

/* out = path + ".tmp-<pid>" (for writing, then fp8_file_commit). 0, or -1
 * when it does not fit in n bytes. */
int fp8_file_tmp_path(const char *path, char *out, size_t n);

/* Rename tmp onto path (atomic on one file system); on failure tmp is
 * removed.  FP8_OK or FP8_EIO with a message naming both. */
int fp8_file_commit(const char *tmp, const char *path);

#endif
