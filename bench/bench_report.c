/*
 * bench_report.c — `fp8prof report` on a long synthetic run: 10,000 steps x
 * 200 tensors x 4 recipes (1 active + 3 shadows), recorded at every step
 * (8 M records).  References measured in the same run: reading the file's
 * bytes (the I/O floor), and the records read through HDF5 on one thread
 * (what loading alone cost before the two-thread inflate).  Target: the
 * whole report within 4x that read (the former 30 s against the 7.5 s read
 * of the machine it was set on).  The run is written once by `fp8prof synth` and reused.
 */
#include <hdf5.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "analysis.h"
#include "bench.h"
#include "report.h"

#define RUN "build/bench_report.h5"

static double read_file_s(const char *path, double *gb)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return -1;
    static char buf[1 << 20];
    size_t n, tot = 0;
    double t0 = bench_now();
    while ((n = fread(buf, 1, sizeof buf, f)) > 0)
        tot += n;
    fclose(f);
    *gb = (double)tot / 1e9;
    return bench_now() - t0;
}

/* /records through H5Dread on the calling thread, in slabs. */
static double hdf5_serial_s(const char *path)
{
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    if (f < 0)
        return -1;
    hid_t d = H5Dopen2(f, "records", H5P_DEFAULT), t = H5Dget_type(d), sp = H5Dget_space(d);
    hsize_t dims[1];
    H5Sget_simple_extent_dims(sp, dims, NULL);
    size_t sz = H5Tget_size(t);
    hsize_t slab = 65536;
    char *buf = malloc((size_t)slab * sz);
    double t0 = bench_now();
    for (hsize_t s = 0; buf && s < dims[0]; s += slab) {
        hsize_t cnt = dims[0] - s < slab ? dims[0] - s : slab;
        hid_t ms = H5Screate_simple(1, &cnt, NULL);
        H5Sselect_hyperslab(sp, H5S_SELECT_SET, &s, NULL, &cnt, NULL);
        H5Dread(d, t, ms, sp, H5P_DEFAULT, buf);
        H5Sclose(ms);
    }
    double dt = bench_now() - t0;
    free(buf);
    H5Sclose(sp), H5Tclose(t), H5Dclose(d), H5Fclose(f);
    return dt;
}

int bench_report(void)
{
    printf("report: fp8prof report on a synthetic run of 10,000 steps x 200 tensors x 4 recipes, every step recorded\n");
    struct stat st;
    if (stat(RUN, &st) != 0) {
        printf("  writing %s with fp8prof synth (once; about 2 minutes) ...\n", RUN);
        fflush(stdout);
        double t0 = bench_now();
        if (system("build/fp8prof synth --steps 10000 --tensors 200 --rows 4 --cols 64 -o " RUN " > /dev/null") != 0) {
            fprintf(stderr, "bench: fp8prof synth failed (make builds build/fp8prof first)\n");
            return 1;
        }
        printf("  written in %.1f s\n", bench_now() - t0);
        stat(RUN, &st);
    }
    double gb = 0, io = read_file_s(RUN, &gb), ser = hdf5_serial_s(RUN);
    an_ctx c;
    an_defaults(&c);
    c.outdir = "build/bench_report";
    c.quiet = 1;
    const char *p[1] = {RUN};
    double t0 = bench_now();
    if (an_open(&c, p, 1)) {
        an_close(&c);
        return 1;
    }
    double t_load = bench_now() - t0;
    int rc = an_report(&c, 0, t0);
    double t_all = bench_now() - t0;
    size_t nrec = c.runs[0].run->nrecords;
    an_close(&c);
    printf("  %-44s %8.2f s  (%.2f GB file, %zu records)\n", "fp8prof report, in all", t_all, gb, nrec);
    printf("  %-44s %8.2f s\n", "  of which loading the records (2 threads)", t_load);
    printf("  reference: reading the file's bytes          %8.2f s  (%.2f GB/s, page cache)\n", io, gb / io);
    printf("  reference: /records via H5Dread, one thread  %8.2f s\n", ser);
    bench_target("report_8M_records", t_all, "s", ser, "HDF5's one-thread read of /records", 4.0, 1);
    return rc;
}
