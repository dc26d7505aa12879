/*
 * fuzz_nvdlfw.c — libFuzzer target: any bytes as a TransformerEngine
 * FileLogger log (rank 0).  Import it, then read the run it wrote.
 */
#include <stdio.h>
#include <sys/stat.h>

#include "fp8.h"
#include "fp8_nvdlfw.h"
#include "fp8_store.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char dir[256], log[512], out[512];
    snprintf(dir, sizeof dir, "%s", fuzz_path("logs"));
    mkdir(dir, 0755);
    snprintf(log, sizeof log, "%s/nvdlfw_inspect_statistics_logs", dir);
    mkdir(log, 0755);
    snprintf(log, sizeof log, "%s/nvdlfw_inspect_statistics_logs/nvdlfw_inspect_globalrank-0.log", dir);
    snprintf(out, sizeof out, "%s", fuzz_path("imported.h5"));
    if (fuzz_write(log, data, size) != 0)
        return 0;
    remove(out);
    size_t bad = 0;
    FILE *devnull = fopen("/dev/null", "w");
    if (fp8_nvdlfw_import(dir, out, &bad, devnull) == FP8_OK) {
        fp8_run *r = fp8_run_load(out);
        fp8_run_free(r);
    }
    if (devnull)
        fclose(devnull);
    fuzz_no_open_ids();
    return 0;
}
