/*
 * file.c — same-file checks and write-then-rename outputs (fp8_file.h).
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fp8_error.h"
#include "fp8_file.h"

int fp8_file_same(const char *a, const char *b)
{
    struct stat sa, sb;
    if (!a || !b || stat(a, &sa) != 0 || stat(b, &sb) != 0)
        return 0;
    return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

int fp8_file_tmp_path(const char *path, char *out, size_t n)
{
    int k = snprintf(out, n, "%s.tmp-%ld", path, (long)getpid());
    return k < 0 || (size_t)k >= n ? -1 : 0;
}

int fp8_file_commit(const char *tmp, const char *path)
{
    if (rename(tmp, path) != 0) {
        int e = errno;
        unlink(tmp);
        return FP8_ERROR(FP8_EIO, "%s: cannot move the finished output into place: %s", path, strerror(e));
    }
    return FP8_OK;
}
