/*
 * fuzz_ranks.c — libFuzzer target: the multi-rank index reader.  The first
 * byte of an input says which file the rest replaces: 0 the index r.h5 of
 * a valid two-rank run (written once, at start), 1 its rank 1 file.  Every
 * reader of an index runs on it: fp8_ranks_of, fp8_run_load through the
 * index, and the cross-rank analysis (an_ranks_load, which reads every
 * rank's registries, /meta and /steps).
 */
#include <stdio.h>
#include <string.h>

#include "analysis.h"
#include "fp8_probe.h"
#include "fp8_ranks.h"
#include "fp8_store.h"
#include "fuzz.h"
#include "ranks.h"

/* the run id of the rank files written at start and of seeds.c's index */
#define FUZZ_RUN_ID "0123456789abcdef0123456789abcdef"

static int write_rank(const char *index, int r)
{
    char p[300], rs[8];
    fp8_rank_path(index, r, p, sizeof p);
    snprintf(rs, sizeof rs, "%d", r);
    fp8_probe_options o = fp8_probe_defaults();
    o.run_id = FUZZ_RUN_ID;
    const char *kv[] = {"mpi_rank", rs, "mpi_world_size", "2", "mpi_groups", "dp", "mpi_group.dp", "0,1"};
    fp8_probe_run *run = fp8_probe_open(p, &o, kv, 4);
    fp8_probe *a = run ? fp8_probe_declare(run, "a", FP8_ROLE_ACTIVATION, 0, "e4m3:delayed", NULL, 0) : NULL;
    if (!a)
        return -1;
    float x[32];
    for (int s = 0; s < 4; s++) {
        for (int i = 0; i < 32; i++)
            x[i] = (float)((i * 7 + s * 3 + r) % 13) - 6.0f;
        fp8_probe_record(a, s, x, 2, 16);
        fp8_probe_step_end(run, s);
    }
    return fp8_probe_close(run);
}

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    char index[300];
    snprintf(index, sizeof index, "%s", fuzz_path("r.h5"));
    return write_rank(index, 0) || write_rank(index, 1) ? 1 : 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    char index[300], target[300];
    snprintf(index, sizeof index, "%s", fuzz_path("r.h5"));
    if (data[0] & 1)
        fp8_rank_path(index, 1, target, sizeof target);
    else
        snprintf(target, sizeof target, "%s", index);
    if (fuzz_write(target, data + 1, size - 1) != 0)
        return 0;
    (void)fp8_ranks_of(index);
    fp8_run *run = fp8_run_load(index);
    fp8_run_free(run);
    an_ranks R;
    if (an_ranks_load(index, &R) == 0)
        an_ranks_free(&R);
    fuzz_no_open_ids();
    if (data[0] & 1) /* the next input starts from the valid rank 1 again */
        write_rank(index, 1);
    return 0;
}
