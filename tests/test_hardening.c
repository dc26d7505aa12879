/*
 * test_hardening.c — suite "hardening": ordinary use that used to lose a
 * run or corrupt memory (two writers of one path, an output onto a file of
 * the input, FIFOs, unbounded log lines, sizes that wrap, handles of the
 * wrong type, rank files of another run, partial outputs on a full disk,
 * lenient numbers).  Each test reproduces the mistake and asserts the clear
 * refusal and that nothing already written was lost.  Every file lives in
 * the process's scratch directory.
 */
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fp8_probe.h"
#include "fp8_ranks.h"
#include "recipe_state.h"
#include "fp8_store.h"
#include "tests.h"

static char out[1 << 16];

/* a shell line: %1$s the fp8prof command, %2$s the scratch directory */
static int sh(const char *fmt) { return test_run_cli(fmt, test_scratch_dir(), out, sizeof out); }

static int has(const char *words)
{
    int h = strstr(out, words) != NULL;
    if (!h)
        fprintf(stderr, "\n  output lacks '%s':\n%.2000s\n", words, out);
    return h;
}

static void one_record(fp8_probe_run *run, const char *name, int64_t step)
{
    fp8_probe *p = fp8_probe_declare(run, name, FP8_ROLE_ACTIVATION, 0, "e4m3:current", NULL, 0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    float x[64];
    for (int i = 0; i < 64; i++)
        x[i] = 0.01f * (float)(i - 20);
    CU_ASSERT_EQUAL(fp8_probe_record(p, step, x, 2, 32), FP8_OK);
    CU_ASSERT_EQUAL(fp8_probe_step_end(run, step), FP8_OK);
}

/* 1. two writers of one path: the second is refused, the first loses nothing */
static void test_two_writers(void)
{
    char path[700];
    snprintf(path, sizeof path, "%s", test_path("two.h5"));
    fp8_probe_run *a = fp8_probe_open(path, NULL, NULL, 0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(a);
    one_record(a, "x", 0);
    /* another writer in this process (a thread, a second fp8_probe_open) */
    CU_ASSERT_PTR_NULL(fp8_probe_open(path, NULL, NULL, 0));
    CU_ASSERT_PTR_NOT_NULL(strstr(fp8_error_message(), "already open for writing by another writer in this process"));
    /* a rank of a distributed job that opened the shared name */
    setenv("RANK", "3", 1);
    CU_ASSERT_PTR_NULL(fp8_probe_open(path, NULL, NULL, 0));
    CU_ASSERT_PTR_NOT_NULL(strstr(fp8_error_message(), "two.rank3.h5"));
    unsetenv("RANK");
    /* another process */
    int fd[2];
    pid_t pid = fork_piped(fd);
    if (pid == 0) {
        fp8_probe_run *b = fp8_probe_open(path, NULL, NULL, 0);
        char msg[600];
        snprintf(msg, sizeof msg, "%s|%s", b ? "opened" : "refused", fp8_error_message());
        if (write(fd[1], msg, strlen(msg) + 1) < 0)
            _exit(3);
        _exit(b ? 1 : 0);
    }
    char msg[600] = "";
    CU_ASSERT(read(fd[0], msg, sizeof msg - 1) > 0);
    close(fd[0]);
    int st;
    waitpid(pid, &st, 0);
    CU_ASSERT(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    char want[64];
    snprintf(want, sizeof want, "by process %ld", (long)getpid());
    CU_ASSERT_PTR_NOT_NULL(strstr(msg, want));
    one_record(a, "y", 1);
    CU_ASSERT_EQUAL(fp8_probe_close(a), FP8_OK);
    fp8_run *r = fp8_run_load(path);
    CU_ASSERT_PTR_NOT_NULL_FATAL(r);
    CU_ASSERT_EQUAL(r->nrecords, 2);
    CU_ASSERT_EQUAL(r->ntensors, 2);
    fp8_run_free(r);
    /* closed: the path can be written again */
    fp8_probe_run *c = fp8_probe_open(path, NULL, NULL, 0);
    CU_ASSERT_PTR_NOT_NULL(c);
    CU_ASSERT_EQUAL(fp8_probe_close(c), FP8_OK);
    /* the command line: a long synth, a second synth of the same output */
    CU_ASSERT_EQUAL(sh("cd %2$s && { %1$s synth --steps 4000 -o cli.h5 > first.log 2>&1 & p=$!; sleep 0.5; "
                       "%1$s synth --steps 5 -o cli.h5 2>&1; echo rc=$?; wait $p; cat first.log; "
                       "%1$s info cli.h5 | head -6; }"),
                    0);
    CU_ASSERT(has("already open for writing by process"));
    CU_ASSERT(has("rc=1"));
    CU_ASSERT(has("wrote cli.h5: 4000 steps"));
    CU_ASSERT(has("steps 0..3999"));
}

/* 2. an output onto a file the input consists of (a rank file of an index) */
static void test_output_onto_input(void)
{
    CU_ASSERT_EQUAL(sh("cd %2$s && %1$s synth --steps 20 --ranks 2 -o mr.h5 >/dev/null && "
                       "%1$s export mr.h5 --format csv -o mr.rank0.h5 2>&1; echo rc=$?; %1$s ranks mr.h5 | head -3"),
                    0);
    CU_ASSERT(has("mr.rank0.h5, a file of the input run mr.h5"));
    CU_ASSERT(has("rc=1"));
    CU_ASSERT(has("2 ranks")); /* rank 0 intact: the run still reads */
    /* an analysis whose data file would land on the input */
    CU_ASSERT_EQUAL(sh("cd %2$s && mkdir -p clash && %1$s synth --steps 20 -o clash/compare_tensors.tsv >/dev/null && "
                       "%1$s compare clash/compare_tensors.tsv -o clash 2>&1 >/dev/null; echo rc=$?; "
                       "%1$s info clash/compare_tensors.tsv | head -1"),
                    0);
    CU_ASSERT(has("would overwrite"));
    CU_ASSERT(has("rc=1"));
    CU_ASSERT(has("(schema 3)"));
}

/* the address-space limit of the bounded-read test; AddressSanitizer and
 * ThreadSanitizer reserve terabytes of shadow address space, so under them
 * the limit is off (the read is still checked for its result) */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define LIMIT_AS ""
#else
#define LIMIT_AS "ulimit -v 160000; "
#endif

/* 4. import-nvdlfw: lines are read with bounded memory, whatever the file */
static void test_bounded_log_lines(void)
{
    /* 256 MB of NULs (a node crash's tail, sparse on disk) between good
     * lines, under a 160 MB address-space limit: the old reader grew one
     * buffer to the whole "line", failed, took that for the end of the file
     * and imported half the log */
    CU_ASSERT_EQUAL(sh("cd %2$s && L=nul/nvdlfw_inspect_statistics_logs && mkdir -p $L && f=$L/nvdlfw_inspect_globalrank-0.log "
                       "&& for i in 1 2 3; do echo \"layers.0.mlp_activation_cur_amax iteration=00000$i value=1.5\"; "
                       "done > $f && truncate -s +256M $f && echo >> $f && for i in 1 2 3; do echo "
                       "\"layers.0.attn_activation_cur_amax iteration=00000$i value=2.5\" >> $f; done && "
                       "OPENBLAS_NUM_THREADS=1 sh -c '" LIMIT_AS "exec %1$s import-nvdlfw nul -o nul.h5' 2>&1; "
                       "echo rc=$?; %1$s info nul.h5 | grep records"),
                    0);
    CU_ASSERT(has("a line of 268435456 bytes (at most 4096)"));
    CU_ASSERT(has("records 6,"));
    /* a line with a NUL byte inside is reported, not cut silently */
    CU_ASSERT_EQUAL(sh("cd %2$s && L=nul2/nvdlfw_inspect_statistics_logs && mkdir -p $L && "
                       "printf 'layers.0.mlp_activation_cur_amax iteration=000001 value=1.5\\nlayers.0.mlp_activation_"
                       "\\000cur_amax iteration=000002 value=1.5\\n' > $L/a.log && %1$s import-nvdlfw nul2 -o nul2.h5 2>&1"),
                    1);
    CU_ASSERT(has("a.log:2: a line holding NUL bytes"));
}

/* 5. the trainer with fewer tokens than channels (the GEMM-error scratch) */
static void test_train_few_tokens(void)
{
    CU_ASSERT_EQUAL(sh("cd %2$s && %1$s train --steps 2 --layers 1 --dim 96 --heads 4 --ctx 16 --batch 2 "
                       "--record-every 1 -o few.h5 2>&1 | tail -1"),
                    0);
    CU_ASSERT(has("done after 2 steps"));
    fp8_run *r = fp8_run_load(test_path("few.h5"));
    CU_ASSERT_PTR_NOT_NULL_FATAL(r);
    int gemm = 0;
    for (int i = 0; i < r->nscalar_names; i++)
        gemm += strncmp(r->scalar_name[i], "gemm_sqnr_db/", 13) == 0;
    CU_ASSERT_EQUAL(gemm, 15); /* 5 linears x fprop, dgrad, wgrad: measured, not skipped */
    fp8_run_free(r);
}

/* 6. the probe API at its limits: every size checked before any pass */
static void test_api_limits(void)
{
    fp8_probe_options o = fp8_probe_defaults();
    o.block_amax_every = 1;
    fp8_probe_run *run = fp8_probe_open(test_path("lim.h5"), &o, NULL, 0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(run);
    fp8_probe *p = fp8_probe_declare(run, "x", FP8_ROLE_ACTIVATION, 0, "e4m3:current", NULL, 0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    float x[16] = {1};
    EXPECT_ERROR(fp8_probe_record(p, 0, x, ((size_t)1 << 61) + 1, 2), "too large");
    EXPECT_ERROR(fp8_probe_record(p, 0, x, (size_t)1 << 62, 8), "too large");
    EXPECT_ERROR(fp8_probe_apply(p, 0, x, (size_t)1 << 62, 8, x), "too large");
    EXPECT_ERROR(fp8_probe_cast(p, x, 0, 8, x), "empty");
    uint16_t bits[16] = {0};
    EXPECT_ERROR(fp8_probe_record_bits(p, 0, bits, FP8_DTYPE_BF16, SIZE_MAX / 2, 4), "too large");
    EXPECT_ERROR(fp8_probe_record(p, 0, NULL, 1, 16), "NULL");
    const char *const *none = NULL;
    CU_ASSERT_PTR_NULL(fp8_probe_declare(run, "y", FP8_ROLE_ACTIVATION, 0, "e4m3:current", none, 2));
    CU_ASSERT_PTR_NOT_NULL(strstr(fp8_error_message(), "array is NULL"));
    CU_ASSERT_PTR_NULL(fp8_probe_declare(run, "y", FP8_ROLE_ACTIVATION, 1 << 30, "e4m3:current", NULL, 0));
    CU_ASSERT_PTR_NOT_NULL(strstr(fp8_error_message(), "layer"));
    CU_ASSERT_EQUAL(fp8_probe_record(p, 0, x, 1, 16), FP8_OK); /* the probe still works */
    CU_ASSERT_EQUAL(fp8_probe_close(run), FP8_OK);
    CU_ASSERT_PTR_NULL(fp8_probe_open(test_path("lim2.h5"), NULL, NULL, 3));
    CU_ASSERT_PTR_NOT_NULL(strstr(fp8_error_message(), "kv is NULL"));
    const char *kv[] = {"a", NULL};
    CU_ASSERT_PTR_NULL(fp8_probe_open(test_path("lim2.h5"), NULL, kv, 1));
    CU_ASSERT_PTR_NOT_NULL(strstr(fp8_error_message(), "metadata value 0 is NULL"));
}

/* out as a view of x shifted by a few elements (a slice one row on, an
 * offset pointer): every cast into out refuses it by name, leaves x and out
 * as they were and records nothing; in place and apart still cast */
static void test_out_overlapping_x(void)
{
    enum { R = 8, C = 64, N = R * C };
    static float buf[N + 2 * C], keep[N + 2 * C], ref[N], got[N];
    for (int i = 0; i < N + 2 * C; i++)
        buf[i] = 0.37f * (float)(i % 29) - 5.0f;
    memcpy(keep, buf, sizeof buf);
    float *x = buf + C;
    const float *shifted[] = {x + 3, x - 5, x + C, x - (C - 1)};
    fp8_recipe_state *st = fp8_recipe_state_new("e4m3:current", "activation");
    const fp8_format *f = fp8_format_find("e4m3", NULL);
    fp8_probe_options o = fp8_probe_defaults();
    fp8_probe_run *run = fp8_probe_open(test_path("overlap.h5"), &o, NULL, 0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(run);
    fp8_probe *p = fp8_probe_declare(run, "x", FP8_ROLE_ACTIVATION, 0, "e4m3:current", NULL, 0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    for (size_t k = 0; k < sizeof shifted / sizeof shifted[0]; k++) {
        float *o_ = (float *)shifted[k];
        fp8_stats s;
        EXPECT_ERROR(fp8_quantize(st, x, R, C, o_, &s), "fp8_quantize: out overlaps the tensor without being it");
        EXPECT_ERROR(fp8_format_qdq_array(f, NULL, 1.0f, x, N, o_, NULL), "fp8_format_qdq_array: out overlaps");
        EXPECT_ERROR(fp8_probe_apply(p, 0, x, R, C, o_), "fp8_probe_apply: out overlaps");
        EXPECT_ERROR(fp8_probe_cast(p, x, R, C, o_), "fp8_probe_cast: out overlaps");
        EXPECT_ERROR(fp8_probe_cast_recipe(p, "e4m3:current", x, R, C, o_), "fp8_probe_cast_recipe: out overlaps");
        CU_ASSERT_EQUAL(memcmp(buf, keep, sizeof buf), 0); /* nothing written */
    }
    /* fp8_quantize_codes: codes and group scales apart from x, out and
     * each other (codes written over x's own bytes, a caller saving
     * memory, would cast a half-overwritten tensor) */
    static uint8_t codes[N];
    static float gsi[N / 32 + 1], sink[N];
    fp8_recipe_state *mx = fp8_recipe_state_new("mxfp8", "activation");
    CU_ASSERT_EQUAL(fp8_quantize_ngroups(&mx->recipe, R, C), N / 32);
    EXPECT_ERROR(fp8_quantize_codes(mx, x, R, C, (void *)x, gsi, NULL, NULL, 0), "codes and x overlap");
    EXPECT_ERROR(fp8_quantize_codes(mx, x, R, C, codes, x + 7, NULL, NULL, 0), "group_scale_inv and x overlap");
    EXPECT_ERROR(fp8_quantize_codes(mx, x, R, C, codes, gsi, (float *)codes, NULL, 0), "codes and out overlap");
    EXPECT_ERROR(fp8_quantize_codes(mx, x, R, C, codes, (float *)(codes + 64), NULL, NULL, 0),
                 "group_scale_inv and codes overlap");
    EXPECT_ERROR(fp8_quantize_codes(mx, x, R, C, codes, sink + 3, sink, NULL, 0), "group_scale_inv and out overlap");
    CU_ASSERT_EQUAL(memcmp(buf, keep, sizeof buf), 0);
    CU_ASSERT_EQUAL(fp8_quantize_codes(mx, x, R, C, codes, gsi, sink, NULL, 0), FP8_OK);
    CU_ASSERT_EQUAL(fp8_quantize_codes(mx, x, R, C, codes, gsi, NULL, NULL, 0), FP8_OK);
    fp8_recipe_state_free(mx);
    /* the two legal ways: apart, and x itself */
    fp8_stats s;
    CU_ASSERT_EQUAL(fp8_probe_apply(p, 0, x, R, C, ref), FP8_OK);
    CU_ASSERT_EQUAL(fp8_quantize(st, x, R, C, got, &s), FP8_OK);
    CU_ASSERT_EQUAL(fp8_quantize(st, x, R, C, x, &s), FP8_OK);
    CU_ASSERT_EQUAL(memcmp(x, got, sizeof got), 0);
    CU_ASSERT_EQUAL(memcmp(ref, got, sizeof got), 0);
    CU_ASSERT_EQUAL(fp8_probe_step_end(run, 0), FP8_OK);
    CU_ASSERT_EQUAL(fp8_probe_close(run), FP8_OK);
    fp8_run *r = fp8_run_load(test_path("overlap.h5"));
    CU_ASSERT_PTR_NOT_NULL_FATAL(r);
    CU_ASSERT_EQUAL(r->nrecords, 1); /* the refused calls recorded nothing */
    fp8_run_free(r);
    fp8_recipe_state_free(st);
}

/* 7. a handle of the wrong type is refused as such */
static void test_typed_handles(void)
{
    fp8_probe_run *run = fp8_probe_open(test_path("typed.h5"), NULL, NULL, 0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(run);
    fp8_probe *p = fp8_probe_declare(run, "x", FP8_ROLE_ACTIVATION, 0, "e4m3:current", NULL, 0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    float x[4] = {1, 2, 3, 4};
    EXPECT_ERROR(fp8_probe_step_end((fp8_probe_run *)(void *)p, 0), "is a probe (fp8_probe), not a run");
    EXPECT_ERROR(fp8_probe_record((fp8_probe *)(void *)run, 0, x, 1, 4), "is a run (fp8_probe_run), not a probe");
    EXPECT_ERROR(fp8_probe_close((fp8_probe_run *)(void *)p), "not a run");
    CU_ASSERT_PTR_NULL(fp8_probe_declare((fp8_probe_run *)(void *)p, "y", FP8_ROLE_ACTIVATION, 0, NULL, NULL, 0));
    CU_ASSERT_EQUAL(fp8_probe_close(run), FP8_OK);
    EXPECT_ERROR(fp8_probe_record(p, 0, x, 1, 4), "not live");
}

/* 8. FIFOs (and devices, directories) are refused before anything opens them */
static void test_fifos(void)
{
    CU_ASSERT_EQUAL(sh("cd %2$s && mkfifo f.h5 && for c in info export watch compare replay dynamics outliers loss "
                       "advise report check ranks; do extra='-o fo'; [ $c = check ] && extra='--max-overflow-events 1'; "
                       "[ $c = watch ] && extra='--idle 1'; [ $c = info ] || [ $c = ranks ] && extra=; "
                       "[ $c = export ] && extra='--format csv'; timeout 10 %1$s $c f.h5 $extra >/dev/null 2>err.txt; "
                       "echo \"$c $? $(grep -c FIFO err.txt)\"; done"),
                    0);
    static const char *cmds[] = {"info", "export", "watch", "compare", "replay", "dynamics", "outliers", "loss",
                                 "advise", "report", "check", "ranks"};
    for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++) {
        char line[64], hang[64];
        snprintf(hang, sizeof hang, "\n%s 124 ", cmds[i]);
        snprintf(line, sizeof line, "%s ", cmds[i]);
        const char *at = strstr(out, line);
        CU_ASSERT_PTR_NOT_NULL(at);
        CU_ASSERT_PTR_NULL(strstr(out, hang)); /* no timeout: nothing hung */
        if (at) {
            int rc = -1, fifo = 0;
            sscanf(at + strlen(line), "%d %d", &rc, &fifo);
            if (rc == 0 || fifo != 1)
                fprintf(stderr, "\n  %s on a FIFO: exit %d, FIFO named %d times\n", cmds[i], rc, fifo);
            CU_ASSERT(rc != 0 && fifo == 1);
        }
    }
    /* a rank file that is a FIFO, and a TE log that is one */
    CU_ASSERT_EQUAL(sh("cd %2$s && %1$s synth --steps 10 --ranks 2 -o fr.h5 >/dev/null && rm fr.rank1.h5 && "
                       "mkfifo fr.rank1.h5 && timeout 10 %1$s ranks fr.h5 2>&1; echo rc=$?; "
                       "mkdir -p fl/nvdlfw_inspect_statistics_logs && mkfifo fl/nvdlfw_inspect_statistics_logs/a.log && "
                       "timeout 10 %1$s import-nvdlfw fl -o fl.h5 2>&1; echo rc=$?; mkdir -p dl/nvdlfw_inspect_statistics_logs/"
                       "b.log && timeout 10 %1$s import-nvdlfw dl -o dl.h5 2>&1; echo rc=$?"),
                    0);
    CU_ASSERT(has("fr.rank1.h5: a FIFO (named pipe), not a regular file"));
    CU_ASSERT(has("a.log: named like a log but not a regular file"));
    CU_ASSERT(has("b.log: named like a log but not a regular file"));
    CU_ASSERT_PTR_NULL(strstr(out, "rc=0"));
    CU_ASSERT_PTR_NULL(strstr(out, "rc=124"));
}

/* 9. steps outside 0..2^62 refused at the API (and by readers, test_hostile.c) */
static void test_step_range(void)
{
    fp8_probe_options o = fp8_probe_defaults();
    o.start = -1;
    CU_ASSERT_PTR_NULL(fp8_probe_open(test_path("st.h5"), &o, NULL, 0));
    CU_ASSERT_PTR_NOT_NULL(strstr(fp8_error_message(), "start must be in 0..2^62"));
    fp8_probe_run *run = fp8_probe_open(test_path("st.h5"), NULL, NULL, 0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(run);
    fp8_probe *p = fp8_probe_declare(run, "x", FP8_ROLE_ACTIVATION, 0, "e4m3:delayed", NULL, 0);
    float x[4] = {1, 2, 3, 4};
    EXPECT_ERROR(fp8_probe_record(p, INT64_MAX, x, 1, 4), "outside 0..");
    EXPECT_ERROR(fp8_probe_apply(p, -5, x, 1, 4, x), "outside 0..");
    EXPECT_ERROR(fp8_probe_scalar(run, "loss", INT64_MIN, 1.0), "outside 0..");
    CU_ASSERT_EQUAL(fp8_probe_record(p, FP8_STEP_MAX, x, 1, 4), FP8_OK);
    CU_ASSERT_EQUAL(fp8_probe_close(run), FP8_OK);
    /* the analyses on the largest step: no signed overflow (UBSan in make asan) */
    CU_ASSERT_EQUAL(sh("cd %2$s && %1$s report st.h5 -o st >/dev/null 2>&1; echo rc=$?"), 0);
    CU_ASSERT(has("rc=0"));
}

/* 10. a rank file of another run, a copy, an index as a rank: refused */
static void test_rank_identity(void)
{
    CU_ASSERT_EQUAL(sh("cd %2$s && %1$s synth --steps 10 --ranks 2 --seed 1 -o ra.h5 >/dev/null && "
                       "%1$s synth --steps 10 --ranks 2 --seed 2 -o rb.h5 >/dev/null && %1$s ranks ra.h5 >/dev/null; "
                       "echo ok=$?; cp ra.rank1.h5 keep1.h5; cp rb.rank1.h5 ra.rank1.h5; %1$s ranks ra.h5 2>&1; "
                       "echo rc=$?; rm ra.rank1.h5; ln -s rb.rank1.h5 ra.rank1.h5; %1$s report ra.h5 -o rr 2>&1 | tail -3; "
                       "rm ra.rank1.h5; %1$s synth --steps 10 -o plain.h5 >/dev/null; cp plain.h5 ra.rank1.h5; "
                       "%1$s ranks ra.h5 2>&1; echo rc=$?; cp ra.h5 ra.rank1.h5; %1$s ranks ra.h5 2>&1; echo rc=$?; "
                       "cp rb.rank0.h5 ra.rank0.h5; %1$s info ra.h5 2>&1 | head -2"),
                    0);
    CU_ASSERT(has("ok=0"));
    CU_ASSERT(has("ra.rank1.h5 belongs to another run than its index ra.h5"));
    CU_ASSERT(has("rank 1 of 2")); /* the copy without mpi_rank, the index named as rank 1 */
    CU_ASSERT(has("its /meta says rank (none) of (none)"));
    CU_ASSERT(has("a rank file that is itself a rank index: refused"));
    CU_ASSERT(has("ra.rank0.h5 belongs to another run than its index ra.h5"));
    CU_ASSERT_PTR_NULL(strstr(out, "rc=0"));
}

/* 13. messages name the file and the cause */
static void test_messages(void)
{
    CU_ASSERT_EQUAL(sh("cd %2$s && %1$s synth --steps 10 -o m.h5 >/dev/null && touch afile && "
                       "%1$s report m.h5 -o afile 2>&1; echo rc=$?; %1$s compare m.h5 -o no/such/dir 2>&1; echo rc=$?; "
                       "head -c 30000 m.h5 > cut.h5 && %1$s info cut.h5 2>&1; echo rc=$?"),
                    0);
    CU_ASSERT(has("-o afile is a file, not a directory"));
    CU_ASSERT(has("cannot create the output directory no/such/dir"));
    CU_ASSERT(has("cut.h5: truncated"));
    CU_ASSERT_PTR_NULL(strstr(out, "rc=0"));
    if (geteuid() != 0) { /* (root writes anywhere) */
        CU_ASSERT_EQUAL(sh("cd %2$s && mkdir -p ro && chmod 555 ro && %1$s report m.h5 -o ro 2>&1; echo rc=$?; "
                           "chmod 755 ro"),
                        0);
        CU_ASSERT(has("cannot write into the output directory ro"));
        CU_ASSERT(has("rc=1"));
    }
}

/* 14. a full disk leaves no partial output under a final name */
static void test_full_disk_outputs(void)
{
    /* complete outputs first; then the same commands with a 64 KB file-size
     * limit (SIGXFSZ ignored, so writes fail instead of killing): the old
     * complete files must be exactly as they were */
    CU_ASSERT_EQUAL(sh("cd %2$s && %1$s synth --steps 40 -o fd.h5 >/dev/null && %1$s compare fd.h5 -o fdo >/dev/null "
                       "2>&1 && md5sum fd.h5 fdo/compare_tensors.tsv > sums && "
                       "sh -c 'trap \"\" XFSZ; ulimit -f 64; %1$s synth --steps 3000 -o fd.h5' 2>&1; echo rc=$?; "
                       "sh -c 'trap \"\" XFSZ; ulimit -f 4; %1$s compare fd.h5 -o fdo >/dev/null' 2>&1; echo rc=$?; "
                       "md5sum -c sums; ls fdo | grep -c tmp; ls | grep -c partial; true"),
                    0);
    CU_ASSERT(has("fd.h5: OK"));
    CU_ASSERT(has("fdo/compare_tensors.tsv: OK"));
    CU_ASSERT(has("failed (disk full?)"));
    CU_ASSERT(has("\n0\n0\n")); /* no temporary or partial file left */
    CU_ASSERT_PTR_NULL(strstr(out, "rc=0"));
    CU_ASSERT_EQUAL(sh("%1$s cast e4m3 --scale 1e-45 1 2>&1"), 2);
    CU_ASSERT(has("below 2^-128"));
    CU_ASSERT_PTR_NULL(strstr(out, "nan"));
}

/* 15. numbers and inputs that used to be accepted */
static void test_lenient_inputs(void)
{
    CU_ASSERT_EQUAL(sh("cd %2$s && %1$s synth --steps 10 -o n.h5 >/dev/null && for v in -1 0x10 1.5 1e-400 inf; do "
                       "%1$s check n.h5 --max-overflow-events $v >/dev/null 2>&1; echo \"$v $?\"; done; "
                       "%1$s check n.h5 --max-underflow-pct 101 >/dev/null 2>&1; echo \"pct $?\""),
                    0);
    CU_ASSERT(has("-1 2\n") && has("0x10 2\n") && has("1.5 2\n") && has("1e-400 2\n") && has("inf 2\n") &&
              has("pct 2\n"));
    /* an empty log, conflicting duplicate iterations */
    CU_ASSERT_EQUAL(sh("cd %2$s && L=el/nvdlfw_inspect_statistics_logs && mkdir -p $L && : > $L/a.log && "
                       "%1$s import-nvdlfw el -o el.h5 2>&1; echo rc=$?; ls el.h5 2>&1 | grep -c 'No such'; "
                       "L=dup/nvdlfw_inspect_statistics_logs && mkdir -p $L && printf 'x_activation_cur_amax iteration=1 "
                       "value=1.5\\nx_activation_cur_amax iteration=1 value=2.5\\nx_activation_cur_amax iteration=1 "
                       "value=1.5\\n' > $L/a.log && %1$s import-nvdlfw dup -o dup.h5 2>&1; echo rc=$?"),
                    0);
    CU_ASSERT(has("no statistics in the logs"));
    CU_ASSERT(has("\n1\n")); /* el.h5 not created */
    CU_ASSERT(has("a.log:2: iteration 1 of 'x.input' cur_amax again with another value (2.5; 1.5 kept"));
    CU_ASSERT_PTR_NULL(strstr(out, "a.log:3:")); /* the same value again is no conflict */
    CU_ASSERT_PTR_NULL(strstr(out, "rc=0"));
}

void register_hardening_tests(void)
{
    static CU_TestInfo tests[] = {
        {"two writers of one path: the second refused, the first intact", test_two_writers},
        {"an output onto a file of the input (rank file, data file) refused", test_output_onto_input},
        {"TE log lines read with bounded memory; NULs reported", test_bounded_log_lines},
        {"train with fewer tokens than channels", test_train_few_tokens},
        {"probe API sizes, NULL arrays, layers checked before any pass", test_api_limits},
        {"out overlapping x without being it refused by every cast; nothing written or recorded",
         test_out_overlapping_x},
        {"a probe passed as a run (and back) refused as such", test_typed_handles},
        {"FIFOs refused by every command, rank file and log", test_fifos},
        {"steps outside 0..2^62 refused", test_step_range},
        {"rank files of another run, copies, an index as a rank refused", test_rank_identity},
        {"messages name the file: -o a file, missing, read-only; a truncated run", test_messages},
        {"a full disk leaves old outputs intact and no partial file", test_full_disk_outputs},
        {"counts, percentages, empty logs, conflicting duplicates", test_lenient_inputs},
        CU_TEST_INFO_NULL,
    };
    add_suite("hardening", tests);
}
