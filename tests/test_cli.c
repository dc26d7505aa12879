/*
 * test_cli.c — suite "cli": build/fp8prof's format commands, run as a user
 * would (path from $FP8PROF, default build/fp8prof): output lines and exit
 * statuses, including the errors.
 */
#include <stdio.h>
#include <stdlib.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fp8.h"
#include "fp8_npy.h"
#include "fp8_probe.h"
#include "tests.h"

static int run(const char *fmt, const char *arg, char *out, size_t cap) { return test_run_cli(fmt, arg, out, cap); }

static char buf[1 << 20];

static void test_cast_output(void)
{
    CU_ASSERT_EQUAL(run("%s cast e4m3 464 500 1e-3 -0x1p-10 nan --no-saturate", NULL, buf, sizeof buf), 0);
    CU_ASSERT_STRING_EQUAL(buf, "464 0x7E 448 rounded\n"
                                "500 0x7F nan overflow\n"
                                "1e-3 0x01 0.001953125 subnormal\n"
                                "-0x1p-10 0x80 -0 flushed\n"
                                "nan 0x7F nan nan\n");
    /* stdin, scale: 2500 * 2 = 5000 -> 5120 -> / 2 */
    CU_ASSERT_EQUAL(run("echo '1.5  2.5e3\n0x1p-3' | %s cast e5m2 --scale 2", NULL, buf, sizeof buf), 0);
    CU_ASSERT_STRING_EQUAL(buf, "1.5 0x42 1.5 exact\n2.5e3 0x6D 2560 rounded\n0x1p-3 0x34 0.125 exact\n");
    /* default is saturating */
    CU_ASSERT_EQUAL(run("%s cast e5m2 1e6 -inf", NULL, buf, sizeof buf), 0);
    CU_ASSERT_STRING_EQUAL(buf, "1e6 0x7B 57344 saturated\n-inf 0xFB -57344 saturated\n");
    CU_ASSERT_EQUAL(run("%s cast e4m3 --round zero 479", NULL, buf, sizeof buf), 0);
    CU_ASSERT_STRING_EQUAL(buf, "479 0x7E 448 rounded\n");
    CU_ASSERT_EQUAL(run("%s cast bf16 1.00390625", NULL, buf, sizeof buf), 0);
    CU_ASSERT_STRING_EQUAL(buf, "1.00390625 0x3F80 1 rounded\n");
    /* stochastic: the seed reproduces */
    char other[256];
    CU_ASSERT_EQUAL(run("%s cast e4m3 --round stochastic --seed 9 1.3 1.3 1.3 1.3 1.3 1.3", NULL, buf, sizeof buf), 0);
    CU_ASSERT_EQUAL(run("%s cast e4m3 --round stochastic --seed 9 1.3 1.3 1.3 1.3 1.3 1.3", NULL, other, sizeof other), 0);
    CU_ASSERT_STRING_EQUAL(buf, other);
}

static void test_errors(void)
{
    /* an unparsable value: named, exit 2, nothing printed for it */
    CU_ASSERT_EQUAL(run("%s cast e4m3 1 x3 2 2>&1", NULL, buf, sizeof buf), 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(buf, "1 0x38 1 exact\n"));
    CU_ASSERT_PTR_NOT_NULL(strstr(buf, "'x3'"));
    CU_ASSERT_PTR_NULL(strstr(buf, "x3 0x"));
    CU_ASSERT_PTR_NULL(strstr(buf, "\n2 0x"));
    CU_ASSERT_EQUAL(run("%s cast e9m2 1 2>&1", NULL, buf, sizeof buf), 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(buf, "e9m2"));
    CU_ASSERT_EQUAL(run("%s cast nosuch 1 2>&1", NULL, buf, sizeof buf), 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(buf, "'nosuch'"));
    CU_ASSERT_EQUAL(run("%s cast e4m3 --bogus 1 2>&1", NULL, buf, sizeof buf), 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(buf, "--bogus"));
    CU_ASSERT_EQUAL(run("%s cast e4m3 --scale -1 1 2>&1", NULL, buf, sizeof buf), 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(buf, "-1"));
    CU_ASSERT_EQUAL(run("%s cast e4m3 --round up 1 2>&1", NULL, buf, sizeof buf), 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(buf, "'up'"));
    CU_ASSERT_EQUAL(run("%s table 2>&1", NULL, buf, sizeof buf), 2);
    CU_ASSERT_EQUAL(run("%s nosuchcommand 2>&1", NULL, buf, sizeof buf), 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(buf, "nosuchcommand"));
    CU_ASSERT_EQUAL(run("%s --help", NULL, buf, sizeof buf), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(buf, "cast"));
    CU_ASSERT_EQUAL(run("%s table --help", NULL, buf, sizeof buf), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(buf, "usage: fp8prof table"));
}

static void test_table_and_formats(void)
{
    CU_ASSERT_EQUAL(run("%s table e4m3", NULL, buf, sizeof buf), 0);
    int lines = 0;
    for (char *p = buf; *p; p++)
        lines += *p == '\n';
    CU_ASSERT_EQUAL(lines, 256);
    CU_ASSERT_PTR_NOT_NULL(strstr(buf, "0x7E normal 0x1.cp+8 448\n"));
    CU_ASSERT_PTR_NOT_NULL(strstr(buf, "0x01 subnormal 0x1p-9 0.001953125\n"));
    CU_ASSERT_PTR_NOT_NULL(strstr(buf, "0x80 zero -0x0p+0 -0\n"));
    CU_ASSERT_PTR_NOT_NULL(strstr(buf, "0x7F nan"));
    CU_ASSERT_EQUAL(run("%s table e5m2", NULL, buf, sizeof buf), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(buf, "0x7C inf inf inf\n"));
    CU_ASSERT_EQUAL(run("%s table fp16 | wc -l", NULL, buf, sizeof buf), 0);
    CU_ASSERT_EQUAL(atoi(buf), 65536);
    CU_ASSERT_EQUAL(run("%s formats", NULL, buf, sizeof buf), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(buf, "e4m3fnuz"));
    CU_ASSERT_PTR_NOT_NULL(strstr(buf, "57344"));
    CU_ASSERT_PTR_NOT_NULL(strstr(buf, "65504"));
}

/* fp8prof stats: a delayed recipe replays across files; JSON; errors */
static void test_stats_command(void)
{
    /* step 0: amax 2 under scale 1; step 1: amax 4 cast with scale 448/2 = 224: 4*224 = 896 saturates */
    const float a[4] = {2.0f, -1.0f, 0.5f, 0.0f}, b[4] = {4.0f, 1.0f, -0.25f, 0.0f};
    fp8_npy_write("build/s0.npy", a, 2, 2);
    fp8_npy_write("build/s1.npy", b, 2, 2);
    CU_ASSERT_EQUAL(run("%s stats --recipe e4m3:delayed:history=4 --json build/s0.npy build/s1.npy", NULL, buf,
                        sizeof buf), 0);
    char *second = strchr(buf, '\n');
    CU_ASSERT_PTR_NOT_NULL_FATAL(second);
    CU_ASSERT_PTR_NOT_NULL(strstr(buf, "\"scale\": 1,"));
    CU_ASSERT_PTR_NOT_NULL(strstr(second, "\"scale\": 224,"));
    CU_ASSERT_PTR_NOT_NULL(strstr(second, "\"overflows\": 1,"));
    CU_ASSERT_PTR_NOT_NULL(strstr(second, "\"step\": 1,"));
    CU_ASSERT_PTR_NOT_NULL(strstr(buf, "\"zero_count\": 1,"));
    /* text output, raw file with a shape */
    FILE *f = fopen("build/s.f32", "wb");
    fwrite(b, 4, 4, f);
    fclose(f);
    CU_ASSERT_EQUAL(run("%s stats --recipe e4m3:current --rows 2 build/s.f32 2>&1", NULL, buf, sizeof buf), 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(buf, "build/s.f32: not a .npy file (no \\x93NUMPY magic); pass --raw"));
    CU_ASSERT_EQUAL(run("%s stats --recipe e4m3:current --raw --rows 2 build/s.f32", NULL, buf, sizeof buf), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(buf, "(2x2, step 0, e4m3:current:eps=0"));
    CU_ASSERT_PTR_NOT_NULL(strstr(buf, "  scale                    112\n"));
    /* errors */
    CU_ASSERT_EQUAL(run("%s stats --recipe e4m3:curent build/s0.npy 2>&1", NULL, buf, sizeof buf), 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(buf, "'curent'"));
    CU_ASSERT_EQUAL(run("%s stats build/s0.npy 2>&1", NULL, buf, sizeof buf), 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(buf, "--recipe"));
    CU_ASSERT_EQUAL(run("%s stats --recipe e4m3:current build/s0.npy build/nope.npy 2>&1", NULL, buf, sizeof buf), 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(buf, "build/s0.npy  (2x2"));
    CU_ASSERT_PTR_NOT_NULL(strstr(buf, "nope.npy: cannot open"));
    CU_ASSERT_EQUAL(run("%s stats --recipe e4m3:current --raw --rows 3 build/s.f32 2>&1", NULL, buf, sizeof buf), 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(buf, "do not fill"));
}

static int count_lines(const char *b)
{
    int n = 0;
    for (; *b; b++)
        n += *b == '\n';
    return n;
}

/* synth -> info, export csv, nvdlfw export -> import -> export, watch */
static void test_run_commands(void)
{
    CU_ASSERT_EQUAL(run("rm -rf build/t_nv build/t_nv2 && %s synth --steps 20 --tensors 4 --rows 4 --cols 64 "
                        "-o build/t_synth.h5",
                        NULL, buf, sizeof buf),
                    0);
    CU_ASSERT_PTR_NOT_NULL(strstr(buf, "20 steps x 4 tensors"));
    CU_ASSERT_EQUAL(run("%s info build/t_synth.h5", NULL, buf, sizeof buf), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(buf, "records 320, steps 0..19, tensors 4, recipes 4"));
    CU_ASSERT_PTR_NOT_NULL(strstr(buf, "layers.0.gauss.input"));
    CU_ASSERT_EQUAL(run("%s export build/t_synth.h5 --format csv", NULL, buf, sizeof buf), 0);
    CU_ASSERT_EQUAL(count_lines(buf), 1 + 320);
    CU_ASSERT(strncmp(buf, "tensor,role,layer,step,recipe,active,format,rows,cols,numel,", 60) == 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(buf, ",scale,scale_inv,amax,"));
    CU_ASSERT_PTR_NOT_NULL(strstr(buf, ",overflows,underflows,subnormals,"));
    CU_ASSERT_PTR_NOT_NULL(strstr(buf, ",mse,sq_err,rel_err,sqnr_db,"));
    CU_ASSERT_EQUAL(run("%s export build/t_synth.h5 --scalars", NULL, buf, sizeof buf), 0);
    CU_ASSERT_EQUAL(count_lines(buf), 1 + 40);
    /* nvdlfw: export, import, export again: identical to the 4 decimals */
    CU_ASSERT_EQUAL(run("%s export build/t_synth.h5 --format nvdlfw -o build/t_nv", NULL, buf, sizeof buf), 0);
    CU_ASSERT_EQUAL(run("%s import-nvdlfw build/t_nv -o build/t_nv.h5", NULL, buf, sizeof buf), 0);
    CU_ASSERT_EQUAL(run("%s export build/t_nv.h5 --format nvdlfw -o build/t_nv2", NULL, buf, sizeof buf), 0);
    CU_ASSERT_EQUAL(run("sort build/t_nv/nvdlfw_inspect_statistics_logs/nvdlfw_inspect_globalrank-0.log > build/t_a.txt;"
                        " sort build/t_nv2/nvdlfw_inspect_statistics_logs/nvdlfw_inspect_globalrank-0.log > build/t_b.txt;"
                        " cmp build/t_a.txt build/t_b.txt && wc -l < build/t_a.txt",
                        NULL, buf, sizeof buf),
                    0);
    CU_ASSERT_EQUAL(atoi(buf), 20 * 4 * 13);
    CU_ASSERT_EQUAL(run("grep -c '^layers.0.gauss_activation_underflows%% iteration=000007 value=' "
                        "build/t_nv/nvdlfw_inspect_statistics_logs/nvdlfw_inspect_globalrank-0.log",
                        NULL, buf, sizeof buf),
                    0);
    CU_ASSERT_EQUAL(atoi(buf), 1);
    /* a bad line is reported with file and line number */
    CU_ASSERT_EQUAL(run("echo 'garbage here' >> build/t_nv/nvdlfw_inspect_statistics_logs/nvdlfw_inspect_globalrank-0.log"
                        " && %s import-nvdlfw build/t_nv -o build/t_nv3.h5 2>&1",
                        NULL, buf, sizeof buf),
                    1);
    CU_ASSERT_PTR_NOT_NULL(strstr(buf, "nvdlfw_inspect_globalrank-0.log:1041: not '<layer>_<tensor>_<stat>"));
    /* an output that is an input is refused (device + inode, not names), the input intact */
    CU_ASSERT_EQUAL(run("cp build/t_synth.h5 build/t_same.h5 && cd build && %s export ./t_same.h5 -o ../build/t_same.h5 2>&1",
                        NULL, buf, sizeof buf), 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(buf, "a file of the input run"));
    CU_ASSERT_EQUAL(run("%s info build/t_same.h5 | head -1", NULL, buf, sizeof buf), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(buf, "(schema 3)"));
    CU_ASSERT_EQUAL(run("%s import-nvdlfw build/t_nv -o build/t_nv/nvdlfw_inspect_statistics_logs/"
                        "nvdlfw_inspect_globalrank-0.log 2>&1 | grep -c 'is one of the input logs'; "
                        "wc -l < build/t_nv/nvdlfw_inspect_statistics_logs/nvdlfw_inspect_globalrank-0.log",
                        NULL, buf, sizeof buf), 0);
    CU_ASSERT_EQUAL(atoi(buf), 1);
    CU_ASSERT_EQUAL(atoi(strchr(buf, '\n') + 1), 20 * 4 * 13 + 1); /* the log, untouched (with the garbage line) */
    /* plain HDF5: h5dump (Debian's hdf5-tools) reads it without fp8prof */
    CU_ASSERT_EQUAL(run("h5dump -H build/t_synth.h5", NULL, buf, sizeof buf), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(buf, "DATASET \"records\""));
    CU_ASSERT_PTR_NOT_NULL(strstr(buf, "H5T_STD_U64LE \"overflows\";"));
    /* watch --once prints the last step's worst tensors */
    CU_ASSERT_EQUAL(run("%s watch build/t_synth.h5 --once", NULL, buf, sizeof buf), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(buf, "step 19: worst overflow "));
    /* errors */
    CU_ASSERT_EQUAL(run("%s info build/nonexistent.h5 2>&1", NULL, buf, sizeof buf), 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(buf, "nonexistent.h5: cannot open"));
    CU_ASSERT_EQUAL(run("%s export build/t_synth.h5 --format xml 2>&1", NULL, buf, sizeof buf), 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(buf, "'xml'"));
    CU_ASSERT_EQUAL(run("%s synth --steps 0 -o x.h5 2>&1", NULL, buf, sizeof buf), 2);
    CU_ASSERT_EQUAL(run("%s synth --recipe e4m3:bogus -o build/t_bad.h5 2>&1", NULL, buf, sizeof buf), 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(buf, "'bogus'"));
}

/* fp8prof train: a tiny run on a given text, then Ctrl-C on a long one */
static void test_train_command(void)
{
    FILE *f = fopen("build/t_text.txt", "w");
    for (int i = 0; i < 400; i++)
        fprintf(f, "line %d: the quick brown fox jumps over the lazy dog.\n", i);
    fclose(f);
    CU_ASSERT_EQUAL(run("%s train --steps 12 --layers 1 --dim 16 --heads 2 --ctx 16 --batch 2 --val-every 6 "
                        "--record-every 3 "
                        "--data build/t_text.txt --shadow e4m3:current -o build/t_train.h5",
                        NULL, buf, sizeof buf),
                    0);
    CU_ASSERT_PTR_NOT_NULL(strstr(buf, "done after 12 steps"));
    CU_ASSERT_PTR_NOT_NULL(strstr(buf, "unigram entropy"));
    CU_ASSERT_EQUAL(run("%s info build/t_train.h5", NULL, buf, sizeof buf), 0);
    /* the active recipe, the shadow, and Smooth SwiGLU's two on the down projection */
    CU_ASSERT_PTR_NOT_NULL(strstr(buf, "tensors 15, recipes 4"));
    CU_ASSERT_PTR_NOT_NULL(strstr(buf, "layers.0.mlp.w2.grad_output"));
    CU_ASSERT_PTR_NOT_NULL(strstr(buf, "snapshots 2"));
    CU_ASSERT_EQUAL(run("%s export build/t_train.h5 --scalars | grep -c '^val_loss,'", NULL, buf, sizeof buf), 0);
    CU_ASSERT_EQUAL(atoi(buf), 2);
    /* Ctrl-C: exit 130, and everything so far is in the file */
    CU_ASSERT_EQUAL(run("%s train --steps 100000 --layers 1 --dim 16 --heads 2 --ctx 16 --batch 2 --quiet "
                        "--data build/t_text.txt -o build/t_int.h5 & pid=$!; sleep 1.5; kill -INT $pid; wait $pid; "
                        "echo rc=$?",
                        NULL, buf, sizeof buf),
                    0);
    CU_ASSERT_PTR_NOT_NULL(strstr(buf, "rc=130"));
    CU_ASSERT_EQUAL(run("%s info build/t_int.h5", NULL, buf, sizeof buf), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(buf, "scalars "));
    CU_ASSERT_PTR_NULL(strstr(buf, "records 0,"));
    /* errors */
    CU_ASSERT_EQUAL(run("%s train --recipe e4m3:nope -o x.h5 2>&1", NULL, buf, sizeof buf), 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(buf, "'nope'"));
    CU_ASSERT_EQUAL(run("%s train --dim 30 --heads 4 --data build/t_text.txt -o build/t_bad.h5 2>&1", NULL, buf,
                        sizeof buf),
                    1);
    CU_ASSERT_PTR_NOT_NULL(strstr(buf, "dim must split"));
    CU_ASSERT_EQUAL(run("%s train --data build/nope.txt -o build/t_bad.h5 2>&1", NULL, buf, sizeof buf), 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(buf, "cannot read build/nope.txt"));
}

/* watch: the largest step (2^62), a writer that closes, a writer that was killed */
static void test_watch(void)
{
    fp8_probe_run *pr = fp8_probe_open("build/t_watch.h5", NULL, NULL, 0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(pr);
    fp8_probe *p = fp8_probe_declare(pr, "x", FP8_ROLE_ACTIVATION, 0, "e4m3:current", NULL, 0);
    float x[32];
    for (int i = 0; i < 32; i++)
        x[i] = (float)i;
    fp8_probe_record(p, 0, x, 1, 32);
    CU_ASSERT_EQUAL(fp8_probe_step_end(pr, 0), FP8_OK);
    CU_ASSERT_EQUAL(fp8_probe_record(p, FP8_STEP_MAX, x, 1, 32), FP8_OK);
    CU_ASSERT_EQUAL(fp8_probe_step_end(pr, FP8_STEP_MAX), FP8_OK);
    CU_ASSERT_EQUAL(fp8_probe_close(pr), FP8_OK);
    CU_ASSERT_EQUAL(run("timeout 20 %s watch build/t_watch.h5 --interval 0.1", NULL, buf, sizeof buf), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(buf, "step 4611686018427387904: worst overflow"));
    CU_ASSERT_PTR_NOT_NULL(strstr(buf, "the writer closed"));
    /* a writer killed with SIGKILL leaves its file marked as written: --idle ends the watch */
    pid_t pid = fork();
    if (pid == 0) {
        fp8_probe_run *r2 = fp8_probe_open("build/t_watch2.h5", NULL, NULL, 0);
        fp8_probe *q = fp8_probe_declare(r2, "x", FP8_ROLE_ACTIVATION, 0, "e4m3:current", NULL, 0);
        for (int s = 0; s < 3; s++) {
            fp8_probe_record(q, s, x, 1, 32);
            CU_ASSERT_EQUAL(fp8_probe_step_end(r2, s), FP8_OK);
        }
        fp8_probe_flush(r2);
        raise(SIGKILL);
    }
    int st;
    waitpid(pid, &st, 0);
    CU_ASSERT(WIFSIGNALED(st));
    CU_ASSERT_EQUAL(run("timeout 20 %s watch build/t_watch2.h5 --interval 0.1 --idle 0.5", NULL, buf, sizeof buf), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(buf, "step 2: worst overflow"));
    CU_ASSERT_PTR_NOT_NULL(strstr(buf, "no new step for"));
    CU_ASSERT_EQUAL(run("%s watch build/t_watch.h5 --interval 1e30 2>&1", NULL, buf, sizeof buf), 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(buf, "--interval '1e30' is not a decimal number in 0.05..3600"));
}

/* the analyses and the report as commands: output, exit statuses, messages */
static void test_analysis_commands(void)
{
    CU_ASSERT_EQUAL(run("%s synth --steps 60 --tensors 6 --rows 4 --cols 128 -o build/t_an_cli.h5 >/dev/null", NULL, buf,
                        sizeof buf), 0);
    CU_ASSERT_EQUAL(run("%s compare build/t_an_cli.h5 -o build/t_an_cli 2>/dev/null", NULL, buf, sizeof buf), 0);
    CU_ASSERT(strstr(buf, "## Recipes compared") != NULL);
    CU_ASSERT(strstr(buf, "Verdict rule") != NULL);
    CU_ASSERT_EQUAL(run("%s replay build/t_an_cli.h5 -o build/t_an_cli 2>/dev/null", NULL, buf, sizeof buf), 0);
    CU_ASSERT(strstr(buf, "replayed scale = recorded | records |") != NULL);
    CU_ASSERT(strstr(buf, "| 100.00% |") != NULL); /* synth records every step: the replay is exact */
    CU_ASSERT_EQUAL(run("%s outliers build/t_an_cli.h5 --vs build/t_an_cli.h5 -o build/t_an_cli 2>/dev/null", NULL,
                        buf, sizeof buf), 0);
    CU_ASSERT(strstr(buf, "versus") != NULL);
    CU_ASSERT_EQUAL(run("%s report build/t_an_cli.h5 -o build/t_an_cli/rep 2>/dev/null", NULL, buf, sizeof buf), 0);
    CU_ASSERT_STRING_EQUAL(buf, "build/t_an_cli/rep/index.html\n");
    /* bad input: exit 2 for usage, 1 for files, the message names the problem */
    CU_ASSERT_EQUAL(run("%s compare 2>&1", NULL, buf, sizeof buf), 2);
    CU_ASSERT(strstr(buf, "needs at least one RUN.h5") != NULL);
    CU_ASSERT_EQUAL(run("%s replay build/t_an_cli.h5 --bogus 1 2>&1", NULL, buf, sizeof buf), 2);
    CU_ASSERT(strstr(buf, "unknown option '--bogus'") != NULL);
    CU_ASSERT_EQUAL(run("%s compare build/no-such.h5 2>&1", NULL, buf, sizeof buf), 1);
    CU_ASSERT(strstr(buf, "build/no-such.h5: cannot open") != NULL);
    CU_ASSERT_EQUAL(run("%s dynamics build/t_an_cli.h5 --tensor 'nope*' 2>&1", NULL, buf, sizeof buf), 1);
    CU_ASSERT(strstr(buf, "no tensor matches 'nope*'") != NULL);
    CU_ASSERT_EQUAL(run("%s advise build/t_an_cli.h5 --sqnr-margin -1 2>&1", NULL, buf, sizeof buf), 2);
    /* runs named by option: --baseline, --smooth; a name that is no run */
    CU_ASSERT_EQUAL(run("cp build/t_an_cli.h5 build/t_an_cli2.h5 && %s compare build/t_an_cli.h5 build/t_an_cli2.h5 "
                        "--baseline t_an_cli3 -o build/t_an_cli 2>&1",
                        NULL, buf, sizeof buf), 2);
    CU_ASSERT(strstr(buf, "--baseline 't_an_cli3' is none of the runs (t_an_cli, t_an_cli2)") != NULL);
    CU_ASSERT_EQUAL(run("%s outliers build/t_an_cli.h5 build/t_an_cli2.h5 --smooth t_an_cli2 -o build/t_an_cli 2>&1",
                        NULL, buf, sizeof buf), 2);
    CU_ASSERT(strstr(buf, "--smooth needs WITHOUT,WITH") != NULL);
    CU_ASSERT_EQUAL(run("%s outliers build/t_an_cli.h5 build/t_an_cli2.h5 --smooth t_an_cli,build/t_an_cli2.h5 "
                        "-o build/t_an_cli 2>/dev/null",
                        NULL, buf, sizeof buf), 0);
    CU_ASSERT(strstr(buf, "### `t_an_cli` versus `t_an_cli2`") != NULL);
    /* the report: the summary's questions, each answered or saying why not */
    CU_ASSERT_EQUAL(run("%s report build/t_an_cli.h5 build/t_an_cli2.h5 --baseline t_an_cli2 -o build/t_an_cli/rep2 "
                        ">/dev/null 2>&1 && grep -c '^- \\*\\*' build/t_an_cli/rep2/report.md",
                        NULL, buf, sizeof buf), 0);
    CU_ASSERT(atoi(buf) >= 8);
    CU_ASSERT_EQUAL(run("grep -c 't_an_cli2 (baseline)' build/t_an_cli/rep2/report.md", NULL, buf, sizeof buf), 0);
    /* self-contained: every figure is a data URI, none a file */
    CU_ASSERT_EQUAL(run("grep -c '<img alt=\"[^\"]*\" src=\"data:image/' build/t_an_cli/rep2/index.html", NULL, buf,
                        sizeof buf), 0);
    CU_ASSERT(atoi(buf) >= 1);
    CU_ASSERT_EQUAL(run("grep -c 'src=\"fig_' build/t_an_cli/rep2/index.html", NULL, buf, sizeof buf), 1);
}

void register_cli_tests(void)
{
    static CU_TestInfo tests[] = {
        {"cast output lines", test_cast_output},
        {"errors name the bad item, exit 2", test_errors},
        {"table and formats", test_table_and_formats},
        {"stats: delayed replay over files, JSON, errors", test_stats_command},
        {"run files: synth, info, export csv/nvdlfw, import, watch", test_run_commands},
        {"train: a tiny run, Ctrl-C, errors", test_train_command},
        {"analyses and report: output, exit statuses, messages", test_analysis_commands},
        {"watch: the largest step, a writer that closes, one that was killed", test_watch},
        CU_TEST_INFO_NULL,
    };
    add_suite("cli", tests);
}
