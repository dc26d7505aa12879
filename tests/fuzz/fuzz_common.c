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
    static const H5I_type_t types[] = {H5I_FILE,     H5I_GROUP,    H5I_DATASET,    H5I_ATTR,
                                       H5I_DATASPACE, H5I_DATATYPE, H5I_GENPROP_LST};
    static const char *names[] = {"file", "group", "dataset", "attribute", "dataspace", "datatype", "property list"};
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
        hsize_t n = 0;
        if (H5Inmembers(types[i], &n) >= 0 && n > 0) {
            fprintf(stderr, "fuzz: %llu HDF5 %s identifier(s) left open\n", (unsigned long long)n, names[i]);
            abort();
        }
    }
}
