/*
 * seeds.c — starting corpora for `make fuzz`: small valid inputs of each
 * reader (a .npy of each dtype and order, a FileLogger log in the real
 * format, a run with records, every-step rows, snapshots and block amaxes).
 * usage: fuzz_seeds DIR  (writes DIR/npy, DIR/nvdlfw, DIR/run, DIR/ranks)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fp8_npy.h"
#include "fp8_probe.h"
#include "fp8_ranks.h"

/* DIR/ranks/NAME = the byte sel, then the bytes of file src (fuzz_ranks.c's
 * input: which file of its run the rest replaces) */
static int prefixed(const char *d, const char *name, int sel, const char *src)
{
    char p[600];
    snprintf(p, sizeof p, "%s/ranks/%s", d, name);
    FILE *in = fopen(src, "rb"), *o = fopen(p, "wb");
    int ok = in && o && fputc(sel, o) != EOF;
    char buf[65536];
    size_t n;
    while (ok && (n = fread(buf, 1, sizeof buf, in)) > 0)
        ok = fwrite(buf, 1, n, o) == n;
    if (in)
        fclose(in);
    if (o && fclose(o) != 0)
        ok = 0;
    return ok ? 0 : -1;
}

/* a two-rank run with fuzz_ranks.c's run id, as its seeds */
static int rank_seeds(const char *d)
{
    char idx[600], rp[700];
    snprintf(idx, sizeof idx, "%s/ranks-src", d);
    mkdir(idx, 0755); /* (the raw files, outside the corpus directory) */
    snprintf(idx, sizeof idx, "%s/ranks-src/r.h5", d);
    for (int r = 0; r < 2; r++) {
        char rs[8];
        snprintf(rs, sizeof rs, "%d", r);
        fp8_rank_path(idx, r, rp, sizeof rp);
        fp8_probe_options o = fp8_probe_defaults();
        o.run_id = "0123456789abcdef0123456789abcdef";
        const char *kv[] = {"mpi_rank", rs, "mpi_world_size", "2", "mpi_groups", "dp", "mpi_group.dp", "0,1"};
        fp8_probe_run *run = fp8_probe_open(rp, &o, kv, 4);
        fp8_probe *a = run ? fp8_probe_declare(run, "a", FP8_ROLE_ACTIVATION, 0, "e4m3:delayed", NULL, 0) : NULL;
        if (!a)
            return -1;
        float x[32];
        for (int s = 0; s < 4; s++) {
            for (int i = 0; i < 32; i++)
                x[i] = (float)((i * 5 + s + r) % 11) - 5.0f;
            fp8_probe_record(a, s, x, 2, 16);
            fp8_probe_step_end(run, s);
        }
        if (fp8_probe_close(run) != 0)
            return -1;
    }
    const char *kv[] = {"mpi_world_size", "2", "mpi_groups", "dp"};
    if (fp8_ranks_write_index(idx, 2, kv, 2, "0123456789abcdef0123456789abcdef") != 0)
        return -1;
    fp8_rank_path(idx, 1, rp, sizeof rp);
    return prefixed(d, "index", 0, idx) || prefixed(d, "rank1", 1, rp) ? -1 : 0;
}

static void npy_raw(const char *path, const char *dict, const void *data, size_t n)
{
    size_t len = strlen(dict);
    FILE *f = fopen(path, "wb");
    if (!f)
        return;
    fwrite("\x93NUMPY\x01\x00", 1, 8, f);
    fputc((int)(len & 0xFF), f);
    fputc((int)(len >> 8), f);
    fwrite(dict, 1, len, f);
    fwrite(data, 1, n, f);
    fclose(f);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: fuzz_seeds DIR\n");
        return 2;
    }
    char p[512];
    const char *d = argv[1];
    mkdir(d, 0755);
    snprintf(p, sizeof p, "%s/npy", d), mkdir(p, 0755);
    snprintf(p, sizeof p, "%s/nvdlfw", d), mkdir(p, 0755);
    snprintf(p, sizeof p, "%s/run", d), mkdir(p, 0755);
    snprintf(p, sizeof p, "%s/ranks", d), mkdir(p, 0755);
    if (rank_seeds(d) != 0)
        return 1;
    float v[6] = {1.5f, -2, 0.25f, 448, -0.0f, 3};
    snprintf(p, sizeof p, "%s/npy/a.npy", d);
    fp8_npy_write(p, v, 2, 3);
    uint16_t h[4] = {0x3C00, 0xC000, 0x7BFF, 0x0001};
    snprintf(p, sizeof p, "%s/npy/b.npy", d);
    npy_raw(p, "{'descr': '>f2', 'fortran_order': True, 'shape': (2, 2), }\n", h, sizeof h);
    snprintf(p, sizeof p, "%s/npy/c.npy", d);
    npy_raw(p, "{'descr': '<f4', 'fortran_order': False, 'shape': (1, 2, 3)}", v, sizeof v);

    snprintf(p, sizeof p, "%s/nvdlfw/rank0.log", d);
    FILE *f = fopen(p, "w");
    if (!f)
        return 1;
    static const char *st[] = {"underflows%", "overflows%", "cur_amax", "dynamic_range", "scale_inv_min",
                               "fp8_delayed_scaling_mse", "mxfp8_underflows%_columnwise",
                               "max_blockwise_dynamic_range_block_size_4_dims_2"};
    for (int it = 0; it < 3; it++)
        for (int k = 0; k < 8; k++)
            fprintf(f, "2025-03-04 10:11:12,345 - INFO - model.layers.%d.mlp.fc1_%s_%s \t\t\t\t iteration=%06d "
                       "\t\t\t\t value=%.4f\n",
                    k % 2, k % 3 ? "activation" : "gradient", st[k], it, 0.5 + 0.1 * k);
    fclose(f);

    snprintf(p, sizeof p, "%s/run/a.h5", d);
    fp8_probe_options o = fp8_probe_defaults();
    o.snapshot_pattern = "*w1*";
    o.snapshot_every = 2;
    o.block_amax_every = 2;
    o.every = 2;
    fp8_probe_run *run = fp8_probe_open(p, &o, (const char *[]){"recipe", "hybrid:delayed", "seed", "1"}, 2);
    const char *sh[] = {"e4m3:current", "e4m3:block=1x128", "e5m2:delayed"};
    fp8_probe *a = fp8_probe_declare(run, "layers.0.w1.input", FP8_ROLE_ACTIVATION, 0, "hybrid:delayed", sh, 3);
    fp8_probe *b = fp8_probe_declare(run, "layers.0.w1.grad_output", FP8_ROLE_GRADIENT, 0, "hybrid:delayed", sh, 3);
    if (!run || !a || !b)
        return 1;
    float x[2 * 128];
    for (int s = 0; s < 6; s++) {
        for (int i = 0; i < 256; i++)
            x[i] = (float)((i * 37 + s * 11) % 101 - 50) * (s == 3 ? 8.0f : 0.1f);
        fp8_probe_record(a, s, x, 2, 128);
        fp8_probe_record(b, s, x, 2, 128);
        fp8_probe_scalar(run, "loss", s, 2.0 - 0.1 * s);
        fp8_probe_step_end(run, s);
    }
    return fp8_probe_close(run) == 0 ? 0 : 1;
}
