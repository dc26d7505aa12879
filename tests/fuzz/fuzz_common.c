/* fuzz_common.c — see fuzz.h. */
#include <hdf5.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fuzz.h"

const char *fuzz_path(const char *name)
{
    static char dir[64];
    static char path[256];
    if (!dir[0]) {
        mkdir("build/fuzz", 0755);
        snprintf(dir, sizeof dir, "build/fuzz/work.%d", (int)getpid());
        mkdir(dir, 0755);
    }
    snprintf(path, sizeof path, "%s/%s", dir, name);
    return path;
}

int fuzz_write(const char *path, const uint8_t *data, size_t n)
{
    FILE *f = fopen(path, "wb");
    if (!f)
        return -1;
    size_t w = n ? fwrite(data, 1, n, f) : 0;
    return fclose(f) == 0 && w == n ? 0 : -1;
}

void fuzz_no_open_ids(void)
{
    /* files, groups, datasets, named datatypes and attributes still open
     * (H5Inmembers refuses the library's own types in HDF5 1.10) */
    ssize_t n = H5Fget_obj_count(H5F_OBJ_ALL, H5F_OBJ_ALL);
    if (n > 0) {
        fprintf(stderr, "fuzz: %zd HDF5 object identifier(s) left open\n", n);
        abort();
    }
}
