/*
 * test_nvdlfw.c — suite "nvdlfw": TransformerEngine's debug statistics logs
 * as its FileLogger writes them (timestamps, tabs, per-rank files in
 * rank_<r>/ directories, recipe-prefixed and column-wise statistics,
 * GroupedLinear layers, block dynamic ranges), the errors a damaged log
 * holds (listed by file:line, never phantom tensors or huge counts),
 * statistics absent from the log staying absent, and our own export coming
 * back with its names and roles.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fp8_nvdlfw.h"
#include "fp8_ranks.h"
#include "fp8_probe.h"
#include "fp8_store.h"
#include "tests.h"

static void put(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    fputs(text, f);
    fclose(f);
}

static int tensor_id(const fp8_run *r, const char *name)
{
    for (int t = 0; t < r->ntensors; t++)
        if (strcmp(r->tensor_name[t], name) == 0)
            return t;
    return -1;
}

static int recipe_id(const fp8_run *r, const char *spec)
{
    for (int k = 0; k < r->nrecipes; k++)
        if (strcmp(r->recipe_spec[k], spec) == 0)
            return k;
    return -1;
}

static const fp8_record *find(const fp8_run *r, int t, int k, int64_t step)
{
    for (size_t i = 0; i < r->nrecords; i++)
        if ((int)r->records[i].tensor == t && (int)r->records[i].recipe == k && r->records[i].step == step)
            return &r->records[i];
    return NULL;
}

static void test_real_logs(void)
{
    system("rm -rf build/t_te && mkdir -p build/t_te/rank_0/nvdlfw_inspect_statistics_logs "
           "build/t_te/rank_1/nvdlfw_inspect_statistics_logs");
    put("build/t_te/rank_0/nvdlfw_inspect_statistics_logs/nvdlfw_inspect_globalrank-0.log",
        "2025-03-04 10:11:12,345 - INFO - model.decoder.layers.3.self_attention.linear_qkv_activation_max \t\t\t\t "
        "iteration=000001 \t\t\t\t value=4.3188\n"
        "2025-03-04 10:11:12,345 - INFO - model.decoder.layers.3.self_attention.linear_qkv_activation_underflows% "
        "\t\t\t\t iteration=000001 \t\t\t\t value=0.2500\n"
        "2025-03-04 10:11:12,346 - INFO - model.decoder.layers.3.self_attention.linear_qkv_gradient_"
        "fp8_delayed_scaling_underflows% \t\t\t\t iteration=000001 \t\t\t\t value=1.5000\n"
        "2025-03-04 10:11:12,346 - INFO - model.decoder.layers.3.self_attention.linear_qkv_gradient_"
        "fp8_delayed_scaling_overflows% \t iteration=000001 \t value=0.0100\n"
        "2025-03-04 10:11:12,347 - INFO - model.decoder.layers.3.mlp.experts.linear_fc1.gemm_2_weight_"
        "mxfp8_scale_inv_min_columnwise \t iteration=000002 \t value=0.0039\n"
        "2025-03-04 10:11:12,347 - INFO - model.decoder.layers.3.mlp.experts.linear_fc1.gemm_2_activation_"
        "max_blockwise_dynamic_range_block_size_32_dims_1 \t iteration=000002 \t value=7.5000\n"
        "2025-03-04 10:11:12,348 - INFO - model.decoder.layers.3.mlp.linear_fc2_wgrad_std \t iteration=000002 \t "
        "value=0.5000\n"
        "2025-03-04 10:11:12,348 - INFO - model.decoder.layers.3.mlp.linear_fc2_wgrad_numel \t iteration=000002 \t "
        "value=1000\n");
    put("build/t_te/rank_1/nvdlfw_inspect_statistics_logs/nvdlfw_inspect_globalrank-1.log",
        "2025-03-04 10:11:12,345 - INFO - model.decoder.layers.3.self_attention.linear_qkv_activation_max \t "
        "iteration=000001 \t value=5.0000\n");
    size_t bad = 99;
    FILE *rep = fopen("build/t_te/report.txt", "w");
    CU_ASSERT_EQUAL_FATAL(fp8_nvdlfw_import("build/t_te", "build/t_te.h5", &bad, rep), FP8_OK);
    fclose(rep);
    CU_ASSERT_EQUAL(bad, 0);
    /* two ranks' logs: one multi-rank run, a file per rank and their index */
    CU_ASSERT_EQUAL(fp8_ranks_of("build/t_te.h5"), 2);
    fp8_run *r1 = fp8_run_load("build/t_te.rank1.h5");
    CU_ASSERT_PTR_NOT_NULL_FATAL(r1);
    CU_ASSERT_EQUAL(r1->ntensors, 1);
    CU_ASSERT_STRING_EQUAL(r1->tensor_name[0], "model.decoder.layers.3.self_attention.linear_qkv.input");
    CU_ASSERT_EQUAL(r1->nrecords, 1);
    CU_ASSERT_EQUAL(r1->records[0].stats.max, 5.0);
    fp8_run_free(r1);
    fp8_run *r = fp8_run_load("build/t_te.h5"); /* the index: rank 0's file */
    CU_ASSERT_PTR_NOT_NULL_FATAL(r);
    CU_ASSERT_EQUAL(r->nranks, 2);
    int qkv = tensor_id(r, "model.decoder.layers.3.self_attention.linear_qkv.input");
    int g = tensor_id(r, "model.decoder.layers.3.self_attention.linear_qkv.grad_output");
    int w = tensor_id(r, "model.decoder.layers.3.mlp.experts.linear_fc1.gemm_2.weight");
    int wg = tensor_id(r, "model.decoder.layers.3.mlp.linear_fc2.wgrad");
    CU_ASSERT(qkv >= 0 && g >= 0 && w >= 0 && wg >= 0);
    CU_ASSERT_EQUAL(r->ntensors, 5);
    if (g >= 0)
        CU_ASSERT_EQUAL(r->tensor_role[g], FP8_ROLE_GRADIENT);
    if (w >= 0)
        CU_ASSERT_EQUAL(r->tensor_role[w], FP8_ROLE_WEIGHT);
    if (qkv >= 0)
        CU_ASSERT_EQUAL(r->tensor_layer[qkv], 3);
    int unk = recipe_id(r, "unknown:imported-from-nvdlfw-inspect"), ds = recipe_id(r, "te:fp8_delayed_scaling"),
        mx = recipe_id(r, "te:mxfp8:columnwise");
    CU_ASSERT(unk >= 0 && ds >= 0 && mx >= 0);
    const fp8_record *a = find(r, qkv, unk, 1);
    CU_ASSERT_PTR_NOT_NULL_FATAL(a);
    CU_ASSERT_EQUAL(a->stats.max, 4.3188);
    CU_ASSERT_EQUAL(a->stats.underflows, 2500); /* 0.25% of the nominal 1,000,000 */
    CU_ASSERT_EQUAL(a->stats.overflows, UINT64_MAX); /* not in the log: absent, not 0 */
    CU_ASSERT(isnan(a->stats.mse) && isnan(a->stats.amax));
    CU_ASSERT_EQUAL(a->active, 1);
    const fp8_record *b = find(r, g, ds, 1);
    CU_ASSERT_PTR_NOT_NULL_FATAL(b);
    CU_ASSERT_EQUAL(b->stats.underflows, 15000);
    CU_ASSERT_EQUAL(b->stats.te_overflows, 100);
    CU_ASSERT_EQUAL(b->active, 0); /* a recipe TE evaluated: a shadow */
    const fp8_record *c = find(r, w, mx, 2);
    CU_ASSERT_PTR_NOT_NULL_FATAL(c);
    CU_ASSERT_EQUAL(c->stats.scale_inv_min, 0.0039);
    const fp8_record *d = find(r, wg, unk, 2);
    CU_ASSERT_PTR_NOT_NULL_FATAL(d);
    CU_ASSERT_EQUAL(d->stats.numel, 1000); /* the logged numel, not the nominal one */
    CU_ASSERT_DOUBLE_EQUAL(d->stats.std, 0.5 * sqrt(999.0 / 1000.0), 1e-12);
    int bdr = tensor_id(r, "model.decoder.layers.3.mlp.experts.linear_fc1.gemm_2.input");
    const fp8_record *e = bdr >= 0 ? find(r, bdr, unk, 2) : NULL;
    CU_ASSERT_PTR_NOT_NULL_FATAL(e);
    CU_ASSERT_EQUAL(e->stats.max_block_dynamic_range, 7.5);
    fp8_run_free(r);
    /* ranks 0 and 2 only (rank 1 did not log): not a whole multi-rank run, so
     * one run whose rank-2 tensors are named "@rank2" */
    system("rm -rf build/t_te3 && mkdir -p build/t_te3/nvdlfw_inspect_statistics_logs");
    put("build/t_te3/nvdlfw_inspect_statistics_logs/nvdlfw_inspect_globalrank-0.log",
        "l.a_activation_max \t iteration=1 \t value=1.0\n");
    put("build/t_te3/nvdlfw_inspect_statistics_logs/nvdlfw_inspect_globalrank-2.log",
        "l.a_activation_max \t iteration=1 \t value=3.0\n");
    CU_ASSERT_EQUAL_FATAL(fp8_nvdlfw_import("build/t_te3", "build/t_te3.h5", &bad, NULL), FP8_OK);
    CU_ASSERT_EQUAL(fp8_ranks_of("build/t_te3.h5"), 0);
    r = fp8_run_load("build/t_te3.h5");
    CU_ASSERT_PTR_NOT_NULL_FATAL(r);
    CU_ASSERT(tensor_id(r, "l.a.input") >= 0 && tensor_id(r, "l.a.input@rank2") >= 0);
    fp8_run_free(r);
}

static void test_bad_lines(void)
{
    system("rm -rf build/t_te2 && mkdir -p build/t_te2/nvdlfw_inspect_statistics_logs");
    char *long_line = malloc(6000);
    memset(long_line, 'a', 5000);
    strcpy(long_line + 5000, "_activation_max iteration=000001 value=1.0\n");
    FILE *f = fopen("build/t_te2/nvdlfw_inspect_statistics_logs/nvdlfw_inspect_globalrank-0.log", "w");
    fputs("l.a_activation_underflows% iteration=000001 value=nan\n", f);      /* 1 */
    fputs("l.a_activation_underflows% iteration=000001 value=-1\n", f);       /* 2 */
    fputs("l.a_activation_overflows% iteration=000001 value=100.5\n", f);     /* 3 */
    fputs("l.a_activation_max iteration=000001 value=\n", f);                 /* 4 */
    fputs(long_line, f);                                                       /* 5 */
    fputs("l.a_activation_max iteration=000001 value=2.5\n", f);             /* 6: good */
    fputs("l.a_sparkle_max iteration=000001 value=2.5\n", f);                /* 7 */
    fputs("l.a_activation_max iteration=-3 value=2.5\n", f);                 /* 8 */
    fclose(f);
    free(long_line);
    size_t bad = 0;
    FILE *rep = fopen("build/t_te2/report.txt", "w");
    CU_ASSERT_EQUAL_FATAL(fp8_nvdlfw_import("build/t_te2", "build/t_te2.h5", &bad, rep), FP8_OK);
    fclose(rep);
    CU_ASSERT_EQUAL(bad, 7);
    char buf[8192] = "";
    f = fopen("build/t_te2/report.txt", "r");
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = 0;
    fclose(f);
    CU_ASSERT_PTR_NOT_NULL(strstr(buf, "globalrank-0.log:1: underflows% = nan is not a percentage"));
    CU_ASSERT_PTR_NOT_NULL(strstr(buf, "globalrank-0.log:2: underflows% = -1 is not a percentage"));
    CU_ASSERT_PTR_NOT_NULL(strstr(buf, "globalrank-0.log:3: overflows% = 100.5 is not a percentage"));
    CU_ASSERT_PTR_NOT_NULL(strstr(buf, "globalrank-0.log:4: an empty value"));
    CU_ASSERT_PTR_NOT_NULL(strstr(buf, "globalrank-0.log:5: a line of 5042 bytes"));
    CU_ASSERT_PTR_NOT_NULL(strstr(buf, "globalrank-0.log:7: 'l.a_sparkle_max' is not"));
    CU_ASSERT_PTR_NOT_NULL(strstr(buf, "globalrank-0.log:8: the iteration is not"));
    fp8_run *r = fp8_run_load("build/t_te2.h5");
    CU_ASSERT_PTR_NOT_NULL_FATAL(r);
    CU_ASSERT_EQUAL(r->ntensors, 1); /* no phantom tensor from the long line */
    CU_ASSERT_EQUAL(r->nrecords, 1);
    fp8_run_free(r);
    /* the output may not be one of the inputs, and a failed import keeps the old file */
    CU_ASSERT_EQUAL(fp8_nvdlfw_import("build/t_te2", "build/t_te2/nvdlfw_inspect_statistics_logs/"
                                      "nvdlfw_inspect_globalrank-0.log", &bad, NULL), FP8_EINVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(fp8_error_message(), "is one of the input logs"));
    struct stat st;
    CU_ASSERT(stat("build/t_te2/nvdlfw_inspect_statistics_logs/nvdlfw_inspect_globalrank-0.log", &st) == 0 &&
              st.st_size > 5000);
}

/* our names and roles survive export -> import */
static void test_round_trip_names(void)
{
    fp8_probe_run *run = fp8_probe_open("build/t_rt.h5", NULL, NULL, 0);
    const char *names[3] = {"layers.0.mlp.w1.input", "layers.0.mlp.w1.weight", "layers.0.mlp.w1.grad_output"};
    fp8_role roles[3] = {FP8_ROLE_ACTIVATION, FP8_ROLE_WEIGHT, FP8_ROLE_GRADIENT};
    float x[64];
    for (int i = 0; i < 64; i++)
        x[i] = (float)(i - 30) * 0.1f;
    for (int k = 0; k < 3; k++) {
        fp8_probe *p = fp8_probe_declare(run, names[k], roles[k], 0, "hybrid:delayed", NULL, 0);
        fp8_probe_record(p, 0, x, 1, 64);
    }
    CU_ASSERT_EQUAL(fp8_probe_step_end(run, 0), FP8_OK);
    CU_ASSERT_EQUAL(fp8_probe_close(run), FP8_OK);
    fp8_run *r = fp8_run_load("build/t_rt.h5");
    system("rm -rf build/t_rt");
    CU_ASSERT_EQUAL_FATAL(fp8_nvdlfw_export(r, "build/t_rt", NULL), FP8_OK);
    fp8_run_free(r);
    size_t bad;
    CU_ASSERT_EQUAL_FATAL(fp8_nvdlfw_import("build/t_rt", "build/t_rt2.h5", &bad, NULL), FP8_OK);
    CU_ASSERT_EQUAL(bad, 0);
    r = fp8_run_load("build/t_rt2.h5");
    CU_ASSERT_PTR_NOT_NULL_FATAL(r);
    CU_ASSERT_EQUAL(r->ntensors, 3);
    for (int k = 0; k < 3; k++) {
        int t = tensor_id(r, names[k]);
        CU_ASSERT(t >= 0);
        if (t >= 0)
            CU_ASSERT_EQUAL(r->tensor_role[t], roles[k]);
    }
    fp8_run_free(r);
}

void register_nvdlfw_tests(void)
{
    static CU_TestInfo tests[] = {
        {"TE FileLogger lines, ranks, recipe-prefixed and column-wise statistics", test_real_logs},
        {"bad lines listed by file:line; no phantom tensors; output = input refused", test_bad_lines},
        {"export -> import keeps names and roles", test_round_trip_names},
        CU_TEST_INFO_NULL,
    };
    add_suite("nvdlfw", tests);
}
