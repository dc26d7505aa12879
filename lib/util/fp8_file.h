/*
 * fp8_file.h — writing outputs without destroying inputs: whether two
 * paths name the same file (device and inode, not names), the temporary
 * name an output is written under before it is renamed into place (so a
 * failed or interrupted write leaves the old file intact), the lock a run
 * file's writer holds (so a second writer is refused instead of corrupting
 * it) and the check that an input is a regular file (a FIFO or a device
 * would block a reader, or never end).
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
 * removed.  A path that a writer holds locked (fp8_file_lock) is never
 * replaced.  FP8_OK or FP8_EIO with a message naming both. */
int fp8_file_commit(const char *tmp, const char *path);

/* Open path for writing a run file (created if absent, never truncated
 * here), refuse anything but a regular file, and take the writer's lock:
 * advisory, held by *fd until fp8_file_unlock, conflicting with every other
 * fp8_file_lock of the same file (another thread, process or rank).  On
 * conflict FP8_EIO naming the path and the holder (its pid when another
 * process; a hint at per-rank files when the launcher's RANK-like variables
 * are set); the file is then untouched. */
int fp8_file_lock(const char *path, int *fd);
/* After the file's other opens are done: let a refused second writer learn
 * this process's pid (a POSIX read lock beside the writer's lock). */
void fp8_file_lock_mark(int fd);
void fp8_file_unlock(int fd);

/* 1 when a writer holds path's lock (*pid: its process, 0 when it is this
 * one or unknown), else 0 (also when path does not exist). */
int fp8_file_locked(const char *path, long *pid);

/* FP8_OK when path names a regular file (links followed); else FP8_EINVAL
 * ("PATH: a FIFO (named pipe), not a regular file ...") or FP8_EIO when it
 * cannot be examined.  Readers call it before opening anything. */
int fp8_file_regular(const char *path);

#endif
