/* util.c — test helpers. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fp8_error.h"
#include "tests.h"

static char skips[16][160];
static int nskips;

void test_skip(const char *why)
{
    fprintf(stderr, " SKIPPED: %s ", why);
    if (nskips < 16)
        snprintf(skips[nskips], sizeof skips[0], "%s", why);
    nskips++;
}

void test_skips_report(void)
{
    if (!nskips)
        return;
    fprintf(stderr, "\n%d test%s skipped:\n", nskips, nskips == 1 ? "" : "s");
    for (int i = 0; i < nskips && i < 16; i++)
        fprintf(stderr, "  %s\n", skips[i]);
}

void add_suite(const char *name, CU_TestInfo *tests)
{
    CU_SuiteInfo suites[] = {{name, NULL, NULL, NULL, NULL, tests}, CU_SUITE_INFO_NULL};
    if (CU_register_suites(suites) != CUE_SUCCESS) {
        fprintf(stderr, "cannot add suite %s: %s\n", name, CU_get_error_msg());
        exit(2);
    }
}

pid_t fork_piped(int fd[2])
{
    if (pipe(fd) != 0)
        return -1;
    pid_t pid = fork();
    if (pid == 0)
        close(fd[0]);
    else
        close(fd[1]);
    return pid;
}

void expect_error_at(int st, const char *words, const char *file, int line)
{
    CU_assertImplementation(st != 0, (unsigned)line, "status is an error", file, "", CU_FALSE);
    const char *m = fp8_error_message();
    int has = m && strstr(m, words) != NULL;
    if (!has)
        fprintf(stderr, "\n  %s:%d: message '%s' lacks '%s'\n", file, line, m ? m : "(none)", words);
    CU_assertImplementation(has, (unsigned)line, "the message names the fault", file, "", CU_FALSE);
}

int test_run_cli(const char *fmt, const char *arg, char *out, size_t cap)
{
    const char *exe = getenv("FP8PROF");
    char abs_exe[4096], cmd[8192];
    /* absolute, so that a line may cd first */
    if (!realpath(exe ? exe : "build/fp8prof", abs_exe))
        snprintf(abs_exe, sizeof abs_exe, "%s", exe ? exe : "build/fp8prof");
    snprintf(cmd, sizeof cmd, fmt, abs_exe, arg ? arg : "");
    FILE *p = popen(cmd, "r");
    if (!p)
        return -1;
    size_t n = fread(out, 1, cap - 1, p);
    out[n] = 0;
    int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* One scratch directory per test process (mkdtemp under $TMPDIR or /tmp),
 * removed when the process exits: runs of the suite side by side (make test
 * and make asan at once) never share a file. */
static char scratch[512];

static void scratch_remove(void)
{
    if (scratch[0] && getenv("FP8PROF_KEEP_SCRATCH") == NULL) {
        char cmd[600];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", scratch);
        if (system(cmd) != 0)
            fprintf(stderr, "could not remove %s\n", scratch);
    }
}

const char *test_scratch_dir(void)
{
    if (!scratch[0]) {
        const char *t = getenv("TMPDIR");
        snprintf(scratch, sizeof scratch, "%s/fp8prof-test-XXXXXX", t && *t ? t : "/tmp");
        if (!mkdtemp(scratch)) {
            fprintf(stderr, "cannot create a scratch directory %s\n", scratch);
            exit(2);
        }
        atexit(scratch_remove);
    }
    return scratch;
}

const char *test_path(const char *name)
{
    static char ring[16][700];
    static int k;
    char *p = ring[k++ % 16];
    snprintf(p, sizeof ring[0], "%s/%s", test_scratch_dir(), name);
    return p;
}

void test_column_scales(const float *x, size_t rows, size_t cols, float *s)
{
    for (size_t j = 0; j < cols; j++) {
        float m = 0;
        for (size_t i = 0; i < rows; i++)
            m = fmaxf(m, fabsf(x[i * cols + j]));
        s[j] = 1.0f / m;
    }
}
