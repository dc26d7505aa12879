/* util.c — test helpers. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fp8_error.h"
#include "tests.h"

void add_suite(const char *name, const char *const *names, void (*const *fns)(void), int n)
{
    CU_pSuite s = CU_add_suite(name, NULL, NULL);
    if (!s) {
        fprintf(stderr, "cannot add suite %s\n", name);
        exit(2);
    }
    for (int i = 0; i < n; i++)
        if (!CU_add_test(s, names[i], fns[i])) {
            fprintf(stderr, "cannot add test %s\n", names[i]);
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
    char cmd[4096];
    snprintf(cmd, sizeof cmd, fmt, exe ? exe : "build/fp8prof", arg ? arg : "");
    FILE *p = popen(cmd, "r");
    if (!p)
        return -1;
    size_t n = fread(out, 1, cap - 1, p);
    out[n] = 0;
    int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}
