/*
 * cmd_train.c — `fp8prof train`: the built-in FP8 training run.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "fp8_file.h"
#include "train.h"

int cmd_train(int argc, char **argv)
{
    train_options o = train_defaults();
    const char *data[64];
    int user_shadows = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        double d = 0;
        int rc = 0;
        if (!strcmp(a, "--smooth-swiglu") || !strcmp(a, "--smooth-swiglu=fold")) {
            o.smooth_swiglu = SMOOTH_FOLD;
            continue;
        }
        if (!strcmp(a, "--smooth-swiglu=published")) {
            o.smooth_swiglu = SMOOTH_PUBLISHED;
            continue;
        }
        if (!strncmp(a, "--smooth-swiglu=", 16))
            return cli_usage_error("train: --smooth-swiglu=%s: expected fold or published", a + 16);
        if (!strcmp(a, "--fp8-head")) {
            o.fp8_head = 1;
            continue;
        }
        if (!strcmp(a, "--quiet")) {
            o.quiet = 1;
            continue;
        }
        if (i + 1 >= argc)
            return cli_usage_error("train: %s needs a value (or is unknown)", a);
        const char *v = argv[++i];
        if (!strcmp(a, "-o"))
            o.out = v;
        else if (!strcmp(a, "--recipe"))
            o.recipe = v;
        else if (!strcmp(a, "--shadow")) {
            if (!user_shadows)
                o.nshadow = 0, user_shadows = 1;
            if (strcmp(v, "none") == 0) { /* drops every shadow given so far */
                o.nshadow = 0;
                continue;
            }
            if (o.nshadow == 15)
                return cli_usage_error("train: at most 15 --shadow recipes");
            o.shadows[o.nshadow++] = v;
        } else if (!strcmp(a, "--data")) {
            if (o.ndata == 64)
                return cli_usage_error("train: at most 64 --data files");
            data[o.ndata++] = v;
            o.data = data;
        } else if (!strcmp(a, "--steps"))
            rc = cli_number("train", a, v, 1, 1e7, 1, &d), o.steps = (long)d;
        else if (!strcmp(a, "--layers"))
            rc = cli_number("train", a, v, 1, 64, 1, &d), o.model.layers = (int)d;
        else if (!strcmp(a, "--dim"))
            rc = cli_number("train", a, v, 8, 4096, 1, &d), o.model.dim = (int)d;
        else if (!strcmp(a, "--hidden"))
            rc = cli_number("train", a, v, 16, 65536, 1, &d), o.model.hidden = (int)d;
        else if (!strcmp(a, "--data-seed"))
            rc = cli_number("train", a, v, 0, 4294967295.0, 1, &d), o.data_seed = (unsigned long)d;
        else if (!strcmp(a, "--heads"))
            rc = cli_number("train", a, v, 1, 128, 1, &d), o.model.heads = (int)d;
        else if (!strcmp(a, "--ctx"))
            rc = cli_number("train", a, v, 2, 4096, 1, &d), o.model.ctx = (int)d;
        else if (!strcmp(a, "--batch"))
            rc = cli_number("train", a, v, 1, 4096, 1, &d), o.model.batch = (int)d;
        else if (!strcmp(a, "--lr"))
            rc = cli_number("train", a, v, 0, 10, 0, &d), o.lr = (float)d;
        else if (!strcmp(a, "--warmup"))
            rc = cli_number("train", a, v, 0, 1e7, 1, &d), o.warmup = (long)d;
        else if (!strcmp(a, "--weight-decay"))
            rc = cli_number("train", a, v, 0, 10, 0, &d), o.weight_decay = (float)d;
        else if (!strcmp(a, "--seed"))
            rc = cli_number("train", a, v, 0, 4294967295.0, 1, &d), o.seed = (unsigned long)d;
        else if (!strcmp(a, "--val-every"))
            rc = cli_number("train", a, v, 1, 1e7, 1, &d), o.val_every = (long)d;
        else if (!strcmp(a, "--record-every"))
            rc = cli_number("train", a, v, 1, 1e7, 1, &d), o.record_every = (long)d;
        else if (!strcmp(a, "--snapshot-every"))
            rc = cli_number("train", a, v, 2, 1e7, 1, &d), o.snapshot_every = (long)d;
        else if (!strcmp(a, "--acc-bits")) {
            rc = cli_number("train", a, v, 0, 53, 1, &d), o.acc.acc_bits = (int)d;
            if (!rc && o.acc.acc_bits == 1)
                return cli_usage_error("train: --acc-bits 1: an accumulator keeps 0 (float32) or 2..53 bits");
        } else if (!strcmp(a, "--promote"))
            rc = cli_number("train", a, v, 0, 1e7, 1, &d), o.acc.promote = (int)d;
        else if (!strcmp(a, "--gemm-error-every"))
            rc = cli_number("train", a, v, 0, 1e7, 1, &d), o.gemm_every = (long)d;
        else if (!strcmp(a, "--block-amax-every"))
            rc = cli_number("train", a, v, 0, 1e7, 1, &d), o.block_amax_every = (long)d;
        else
            return cli_usage_error("train: unknown option '%s'", a);
        if (rc)
            return rc;
    }
    if (!o.out)
        return cli_usage_error("train needs -o RUN.h5");
    for (int i = 0; i < o.ndata; i++)
        if (fp8_file_same(o.out, data[i]))
            return cli_usage_error("train: -o %s is the --data file %s itself; choose another name", o.out, data[i]);
    if (o.warmup >= o.steps)
        o.warmup = o.steps / 10;
    if (strcmp(o.recipe, "fp32") && strcmp(o.recipe, "bf16")) {
        fp8_recipe r;
        if (fp8_recipe_parse(o.recipe, &r) != FP8_OK)
            return cli_usage_error("train: %s", fp8_error_message());
    }
    for (int k = 0; k < o.nshadow; k++) {
        fp8_recipe r;
        if (fp8_recipe_parse(o.shadows[k], &r) != FP8_OK)
            return cli_usage_error("train: %s", fp8_error_message());
    }
    if (!getenv("OMPI_COMM_WORLD_SIZE"))
        return train_run(&o);
    /* under mpirun: data parallel over every rank */
    o.mpi = 1;
    MPI_Init(NULL, NULL);
    int rc = train_run(&o);
    MPI_Allreduce(MPI_IN_PLACE, &rc, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    MPI_Finalize();
    return rc;
}
