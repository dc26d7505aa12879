/*
 * plot.c — write a gnuplot script beside its data and run gnuplot on it
 * (fork + exec, never a pipe: a failing script must fail the caller).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <stdlib.h>
#include <unistd.h>

#include "plots.h"

const char *plot_quote(const char *s, char *buf, int n)
{
    int k = 0;
    if (n < 3)
        return "''";
    buf[k++] = '\'';
    for (; *s && k < n - 3; s++) {
        if (*s == '\'')
            buf[k++] = '\'';
        buf[k++] = *s == '\n' ? ' ' : *s;
    }
    buf[k++] = '\'';
    buf[k] = 0;
    return buf;
}

int plot_png_size(const char *path, int *width, int *height)
{
    unsigned char h[24];
    FILE *f = fopen(path, "rb");
    if (!f)
        return 0;
    size_t got = fread(h, 1, sizeof h, f);
    fclose(f);
    static const unsigned char sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
    if (got < 24 || memcmp(h, sig, 8) != 0 || memcmp(h + 12, "IHDR", 4) != 0)
        return 0;
    *width = (int)((uint32_t)h[16] << 24 | (uint32_t)h[17] << 16 | (uint32_t)h[18] << 8 | h[19]);
    *height = (int)((uint32_t)h[20] << 24 | (uint32_t)h[21] << 16 | (uint32_t)h[22] << 8 | h[23]);
    return 1;
}

int plot_render(const char *dir, const char *script, const char *out, const char *vars, char *msg, int msglen)
{
    const plot_script *ps = NULL;
    for (const plot_script *p = plot_scripts; p->name; p++)
        if (strcmp(p->name, script) == 0)
            ps = p;
    if (!ps) {
        snprintf(msg, (size_t)msglen, "no plot script named '%s'", script);
        return 1;
    }
    char path[4096], outq[1100];
    snprintf(path, sizeof path, "%s/%s.gp", dir, out);
    FILE *f = fopen(path, "w");
    if (!f) {
        snprintf(msg, (size_t)msglen, "cannot write %s: %s", path, strerror(errno));
        return 1;
    }
    fprintf(f, "# %s.gp: plots/%s.gp with its inputs; run: gnuplot %s.gp\nout = %s\n%s\n%s", out, script, out,
            plot_quote(out, outq, (int)sizeof outq), vars ? vars : "", ps->text);
    if (fclose(f) != 0) {
        snprintf(msg, (size_t)msglen, "cannot write %s", path);
        return 1;
    }
    char errpath[4096];
    snprintf(errpath, sizeof errpath, "%s/%s.gnuplot.log", dir, out);
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        snprintf(msg, (size_t)msglen, "cannot start gnuplot: %s", strerror(errno));
        return 1;
    }
    if (pid == 0) {
        int fd = open(errpath, O_WRONLY | O_CREAT | O_TRUNC, 0666);
        if (fd >= 0) {
            dup2(fd, 2);
            dup2(fd, 1);
            close(fd);
        }
        if (chdir(dir) != 0)
            _exit(126);
        char name[1100];
        snprintf(name, sizeof name, "%s.gp", out);
        setenv("LC_ALL", "C", 1);
        execlp("gnuplot", "gnuplot", name, (char *)NULL);
        _exit(127);
    }
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        int code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
        snprintf(msg, (size_t)msglen, "%s", code == 127 ? "gnuplot is not installed (apt-get install gnuplot-nox)" : "");
        if (code != 127) { /* gnuplot's error: its last line that is not a warning */
            char line[512] = "", last[512] = "";
            FILE *e = fopen(errpath, "r");
            while (e && fgets(line, sizeof line, e))
                if (!strstr(line, "arning:") && strspn(line, " \t^\n") < strlen(line))
                    snprintf(last, sizeof last, "%s", line);
            if (e)
                fclose(e);
            last[strcspn(last, "\n")] = 0;
            snprintf(msg, (size_t)msglen, "gnuplot failed on %s (exit %d): %s", path, code, last);
        }
        return 1;
    }
    snprintf(path, sizeof path, "%s/%s.png", dir, out);
    int w, h;
    if (!plot_png_size(path, &w, &h)) {
        snprintf(msg, (size_t)msglen, "gnuplot ran but %s is not a PNG", path);
        return 1;
    }
    unlink(errpath);
    return 0;
}
