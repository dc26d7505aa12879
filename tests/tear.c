/*
 * tear.c — a write torn by a kill, on demand (tests only).
 *
 * A fatal signal can cut a write(2) that spans several of the kernel's
 * pages: the pages before the cut are in the file, the rest are not.  The
 * test binary's pwrite (which HDF5's file driver calls) passes every write
 * through, until test_tear_at(N) arms it in a forked writer: its N-th
 * write then stops at the first 4 KB boundary inside it (or is written
 * whole when it spans none) and the process kills itself with SIGKILL.
 */
#include <dlfcn.h>
#include <signal.h>
#include <sys/types.h>
#include <unistd.h>

#include "tests.h"

static long tear_at = -1, writes;

void test_tear_at(long n)
{
    tear_at = n;
    writes = 0;
}

typedef ssize_t (*pwrite_fn)(int, const void *, size_t, off_t);

ssize_t pwrite(int fd, const void *buf, size_t n, off_t off)
{
    static pwrite_fn real;
    if (!real)
        real = (pwrite_fn)dlsym(RTLD_NEXT, "pwrite");
    if (tear_at < 0 || ++writes < tear_at)
        return real(fd, buf, n, off);
    off_t cut = (off / 4096 + 1) * 4096;
    real(fd, buf, cut < off + (off_t)n ? (size_t)(cut - off) : n, off);
    raise(SIGKILL);
    return -1;
}

ssize_t pwrite64(int fd, const void *buf, size_t n, off_t off) { return pwrite(fd, buf, n, off); }
