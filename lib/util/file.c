/*
 * file.c — same-file checks, write-then-rename outputs, the writer's lock
 * on a run file and the regular-file check of inputs (fp8_file.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
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
    long pid;
    if (fp8_file_locked(path, &pid)) {
        unlink(tmp);
        if (pid > 0)
            return FP8_ERROR(FP8_EIO, "%s: a run file that process %ld is writing: not replaced (its run would be "
                                      "lost); choose another output name", path, pid);
        return FP8_ERROR(FP8_EIO, "%s: a run file that this process is writing: not replaced; choose another output "
                                  "name", path);
    }
    if (rename(tmp, path) != 0) {
        int e = errno;
        unlink(tmp);
        return FP8_ERROR(FP8_EIO, "%s: cannot move the finished output into place: %s", path, strerror(e));
    }
    return FP8_OK;
}

/* ---- the writer's lock ------------------------------------------------------
 * Two locks at offsets far past any data (advisory locks need no data there):
 * an open-file-description lock at LOCK_AT is the lock itself (it conflicts
 * between threads of one process too, and survives other descriptors of the
 * file being closed); a classic POSIX read lock at LOCK_AT + 1 only lets a
 * second process learn the holder's pid (OFD locks report -1). */
#define LOCK_AT ((off_t)1 << 62)

static int ofd_lock(int fd, short type, int cmd, struct flock *out)
{
    struct flock fl;
    memset(&fl, 0, sizeof fl);
    fl.l_type = type, fl.l_whence = SEEK_SET, fl.l_start = LOCK_AT, fl.l_len = 1;
    int rc = fcntl(fd, cmd, &fl);
    if (out)
        *out = fl;
    return rc;
}

/* The files this process holds locked (device, inode), to tell "another
 * writer in this process" from "another process whose pid is unknown". */
#define MAX_HELD 256
static pthread_mutex_t held_lock = PTHREAD_MUTEX_INITIALIZER;
static struct { dev_t dev; ino_t ino; int fd; pid_t pid; } held[MAX_HELD]; /* pid: a forked child inherits the table */
static int nheld;

static void held_add(int fd)
{
    struct stat sb;
    if (fstat(fd, &sb) != 0)
        return;
    pthread_mutex_lock(&held_lock);
    if (nheld < MAX_HELD)
        held[nheld].dev = sb.st_dev, held[nheld].ino = sb.st_ino, held[nheld].fd = fd, held[nheld].pid = getpid(),
        nheld++;
    pthread_mutex_unlock(&held_lock);
}

static void held_remove(int fd)
{
    pthread_mutex_lock(&held_lock);
    for (int i = 0; i < nheld; i++)
        if (held[i].fd == fd) {
            held[i] = held[--nheld];
            break;
        }
    pthread_mutex_unlock(&held_lock);
}

/* Close fd, then set again the pid marks of the files this process holds
 * (closing any descriptor of a file drops the process's POSIX locks on it;
 * the writer's OFD lock itself is not affected) */
static void close_keeping_marks(int fd)
{
    close(fd);
    pthread_mutex_lock(&held_lock);
    for (int i = 0; i < nheld; i++)
        if (held[i].pid == getpid())
            fp8_file_lock_mark(held[i].fd);
    pthread_mutex_unlock(&held_lock);
}

static int held_here(int fd)
{
    struct stat sb;
    int here = 0;
    if (fstat(fd, &sb) != 0)
        return 0;
    pthread_mutex_lock(&held_lock);
    for (int i = 0; i < nheld && !here; i++)
        here = held[i].dev == sb.st_dev && held[i].ino == sb.st_ino && held[i].pid == getpid();
    pthread_mutex_unlock(&held_lock);
    return here;
}

/* the pid holding the POSIX read lock beside the writer's lock, 0 unknown */
static long holder_pid(int fd)
{
    struct flock fl;
    memset(&fl, 0, sizeof fl);
    fl.l_type = F_WRLCK, fl.l_whence = SEEK_SET, fl.l_start = LOCK_AT + 1, fl.l_len = 1;
    if (fcntl(fd, F_GETLK, &fl) != 0 || fl.l_type == F_UNLCK)
        return 0; /* no other process holds it: the writer is in this process */
    return (long)fl.l_pid;
}

/* " (this process looks like rank R of a distributed job: ...)" when the
 * launcher's variables say so, else "" */
static void rank_hint(const char *path, char *out, size_t n)
{
    static const char *vars[] = {"RANK", "OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "SLURM_PROCID"};
    out[0] = 0;
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
        const char *v = getenv(vars[i]);
        if (!v || !*v || strspn(v, "0123456789") != strlen(v) || strlen(v) > 9)
            continue;
        size_t len = strlen(path);
        if (len >= 3 && strcmp(path + len - 3, ".h5") == 0)
            len -= 3;
        snprintf(out, n,
                 "; this process looks like rank %s of a distributed job (%s=%s): give each rank its own file, "
                 "e.g. %.*s.rank%s.h5, or open the run with fp8_probe_open_mpi",
                 v, vars[i], v, (int)(len < 600 ? len : 600), path, v);
        return;
    }
}

int fp8_file_regular(const char *path)
{
    struct stat sb;
    if (!path)
        return FP8_ERROR(FP8_EINVAL, "no path");
    if (stat(path, &sb) != 0)
        return FP8_ERROR(FP8_EIO, "%s: cannot open: %s", path, strerror(errno));
    if (S_ISREG(sb.st_mode))
        return FP8_OK;
    const char *what = S_ISDIR(sb.st_mode)    ? "a directory"
                       : S_ISFIFO(sb.st_mode) ? "a FIFO (named pipe)"
                       : S_ISCHR(sb.st_mode)  ? "a character device"
                       : S_ISBLK(sb.st_mode)  ? "a block device"
                       : S_ISSOCK(sb.st_mode) ? "a socket"
                                              : "not a regular file";
    return FP8_ERROR(FP8_EINVAL, "%s: %s, not a regular file: refused (reading it could block or never end)", path, what);
}

int fp8_file_lock(const char *path, int *fd_out)
{
    *fd_out = -1;
    struct stat sb;
    if (stat(path, &sb) == 0 && !S_ISREG(sb.st_mode))
        return fp8_file_regular(path);
    /* opened without truncation: a file another writer holds must survive */
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NONBLOCK, 0666);
    if (fd < 0)
        return FP8_ERROR(FP8_EIO, "%s: cannot create: %s", path, strerror(errno));
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        close_keeping_marks(fd);
        return fp8_file_regular(path);
    }
    if (ofd_lock(fd, F_WRLCK, F_OFD_SETLK, NULL) != 0) {
        int e = errno;
        if (e != EAGAIN && e != EACCES) {
            close_keeping_marks(fd);
            return FP8_ERROR(FP8_EIO, "%s: cannot lock it for writing: %s", path, strerror(e));
        }
        long pid = holder_pid(fd);
        int here = held_here(fd);
        close_keeping_marks(fd);
        char who[64], hint[800];
        if (here)
            snprintf(who, sizeof who, "another writer in this process");
        else if (pid > 0)
            snprintf(who, sizeof who, "process %ld", pid);
        else
            snprintf(who, sizeof who, "another process");
        rank_hint(path, hint, sizeof hint);
        return FP8_ERROR(FP8_EIO, "%s: already open for writing by %s; a second writer would corrupt it: "
                                  "nothing was written, write this run to another file%s",
                         path, who, hint);
    }
    held_add(fd);
    *fd_out = fd;
    return FP8_OK;
}

void fp8_file_lock_mark(int fd)
{
    /* POSIX locks vanish when the process closes any descriptor of the file:
     * set once the file's other opens (HDF5's) are done; best effort, only
     * the message of a refused second writer uses it */
    struct flock fl;
    memset(&fl, 0, sizeof fl);
    fl.l_type = F_RDLCK, fl.l_whence = SEEK_SET, fl.l_start = LOCK_AT + 1, fl.l_len = 1;
    if (fd >= 0)
        (void)fcntl(fd, F_SETLK, &fl);
}

void fp8_file_unlock(int fd)
{
    if (fd >= 0) {
        held_remove(fd);
        close(fd); /* both locks go with the descriptor */
    }
}

int fp8_file_locked(const char *path, long *pid)
{
    if (pid)
        *pid = 0;
    struct stat sb;
    if (!path || stat(path, &sb) != 0 || !S_ISREG(sb.st_mode))
        return 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0)
        return 0;
    struct flock fl;
    int locked = ofd_lock(fd, F_WRLCK, F_OFD_GETLK, &fl) == 0 && fl.l_type != F_UNLCK;
    if (locked && pid)
        *pid = holder_pid(fd);
    close_keeping_marks(fd);
    return locked;
}
