/*
 * bench_import.c — importing TransformerEngine debug logs: time against
 * size, to show it grows linearly (the reference: reading the same bytes
 * with fgets).  Logs of 25k, 50k and 100k tensor x step pairs, 13 lines
 * each, in the FileLogger format.
 */
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "bench.h"
#include "fp8_nvdlfw.h"

static const char *stats[13] = {"underflows%", "overflows%", "mse", "cur_amax", "dynamic_range", "scale_inv_min",
                                "scale_inv_max", "min", "max", "mean", "std", "l1_norm", "l2_norm"};

static long write_log(const char *dir, long pairs)
{
    char path[512];
    snprintf(path, sizeof path, "mkdir -p %s/nvdlfw_inspect_statistics_logs", dir);
    if (system(path) != 0)
        return -1;
    snprintf(path, sizeof path, "%s/nvdlfw_inspect_statistics_logs/nvdlfw_inspect_globalrank-0.log", dir);
    FILE *f = fopen(path, "w");
    if (!f)
        return -1;
    long tensors = pairs / 100, lines = 0;
    for (long s = 0; s < 100; s++)
        for (long t = 0; t < tensors; t++)
            for (int k = 0; k < 13; k++, lines++)
                fprintf(f, "2025-03-04 10:11:12,345 - INFO - model.layers.%ld.mlp.fc1_activation_%s \t\t\t\t "
                           "iteration=%06ld \t\t\t\t value=%.4f\n",
                        t, stats[k], s, 0.25 + 0.001 * (double)((t + s + k) % 97));
    fclose(f);
    return lines;
}

int bench_import(void)
{
    printf("import-nvdlfw: TE FileLogger logs, 13 statistics per tensor x step pair\n");
    double per[3];
    long sizes[3] = {25000, 50000, 100000};
    for (int i = 0; i < 3; i++) {
        char dir[128];
        snprintf(dir, sizeof dir, "build/bench_import_%ld", sizes[i]);
        long lines = write_log(dir, sizes[i]);
        if (lines < 0)
            return 1;
        char path[256];
        snprintf(path, sizeof path, "%s/nvdlfw_inspect_statistics_logs/nvdlfw_inspect_globalrank-0.log", dir);
        double t0 = bench_now();
        FILE *f = fopen(path, "r");
        char buf[4096];
        long n = 0;
        while (f && fgets(buf, sizeof buf, f))
            n++;
        if (f)
            fclose(f);
        double tread = bench_now() - t0;
        snprintf(path, sizeof path, "%s.h5", dir);
        size_t bad = 0;
        t0 = bench_now();
        int st = fp8_nvdlfw_import(dir, path, &bad, NULL);
        double t = bench_now() - t0;
        per[i] = t / (double)lines;
        printf("  %6ld pairs (%7ld lines): %6.2f s (%.2f us/line; reading the lines alone %.2f s)%s\n", sizes[i], lines, t,
               1e6 * per[i], tread, st || bad ? "  FAILED" : "");
    }
    printf("  time per line, 100k against 25k pairs: %.2fx (1 = linear; was 4x per doubling)\n", per[2] / per[0]);
    return 0;
}
