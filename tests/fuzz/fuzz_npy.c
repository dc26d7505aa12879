/*
 * fuzz_npy.c — libFuzzer target: any bytes as a .npy file.  The reader must
 * return FP8_OK with a consistent array or an error; never read or write
 * out of bounds, leak, or allocate what the file cannot hold.
 */
#include <stdlib.h>

#include "fp8.h"
#include "fp8_npy.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *p = fuzz_path("x.npy");
    if (fuzz_write(p, data, size) != 0)
        return 0;
    float *x = NULL;
    size_t r = 0, c = 0;
    if (fp8_npy_sniff(p) == 1 && fp8_npy_read(p, &x, &r, &c) == FP8_OK) {
        volatile float s = 0;
        for (size_t i = 0; i < r * c; i++) /* every element is there */
            s += x[i];
        (void)s;
        if (!r || !c)
            abort();
    }
    free(x);
    return 0;
}
