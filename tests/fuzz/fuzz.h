/*
 * fuzz.h — shared by the libFuzzer targets (`make fuzz`): each writes the
 * input where the reader expects a file, under build/fuzz/work.<pid>.
 */
#ifndef FP8_FUZZ_H
#define FP8_FUZZ_H
#include <stddef.h>
#include <stdint.h>

/* path of name inside this process's work directory (created once) */
const char *fuzz_path(const char *name);
/* write n bytes to path; 0 or -1 */
int fuzz_write(const char *path, const uint8_t *data, size_t n);

/* abort() when an HDF5 identifier (file, group, dataset, attribute,
 * dataspace, datatype, property list) is still open: our leaks.  HDF5's
 * own allocations after damaged files are suppressed in LeakSanitizer
 * (tests/fuzz/lsan.supp) and not ours to fix. */
void fuzz_no_open_ids(void);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
#endif
