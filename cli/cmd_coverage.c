/*
 * cmd_coverage.c — `fp8prof coverage`: how often the report's 95% intervals
 * cover the true mean of an autocorrelated step series, by simulation at
 * given lengths and lag-1 autocorrelations (Gaussian AR(1), true mean 0):
 * the calibrated interval the analyses use, the plain Newey-West t interval
 * and a circular block bootstrap.  The table of docs/analyses.md, "Inference".
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "inference.h"

#define MAXV 16

/* a comma-separated list of numbers in [lo, hi] into v (at most MAXV) */
static int list(const char *opt, const char *s, double lo, double hi, int integer, double *v, int *n)
{
    char buf[256];
    snprintf(buf, sizeof buf, "%s", s);
    *n = 0;
    for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        if (*n == MAXV)
            return cli_usage_error("coverage: %s takes at most %d values", opt, MAXV);
        int rc = cli_number("coverage", opt, t, lo, hi, integer, &v[*n]);
        if (rc)
            return rc;
        (*n)++;
    }
    return *n ? 0 : cli_usage_error("coverage: %s needs at least one value", opt);
}

int cmd_coverage(int argc, char **argv)
{
    double ns[MAXV] = {25, 49, 100, 200}, rhos[MAXV] = {0, 0.5, 0.8, 0.9}, d;
    int nn = 4, nr = 4, sims = 2000, boot = 400, rc = 0;
    unsigned long seed = 1;
    for (int i = 1; i < argc && !rc; i++) {
        const char *a = argv[i];
        if (i + 1 >= argc)
            return cli_usage_error("coverage: unknown argument '%s' (or an option without its value)", a);
        if (!strcmp(a, "--n"))
            rc = list(a, argv[++i], 3, 2000, 1, ns, &nn);
        else if (!strcmp(a, "--rho"))
            rc = list(a, argv[++i], 0, 0.97, 0, rhos, &nr);
        else if (!strcmp(a, "--sims")) {
            if (!(rc = cli_number("coverage", a, argv[++i], 100, 1e6, 1, &d)))
                sims = (int)d;
        } else if (!strcmp(a, "--boot")) {
            if (!(rc = cli_number("coverage", a, argv[++i], 0, 1e5, 1, &d)))
                boot = (int)d;
        } else if (!strcmp(a, "--seed")) {
            if (!(rc = cli_number("coverage", a, argv[++i], 0, 4294967295.0, 1, &d)))
                seed = (unsigned long)d;
        } else
            return cli_usage_error("coverage: unknown option '%s'", a);
    }
    if (rc)
        return rc;
    printf("Coverage of nominal 95%% intervals for the mean of a Gaussian AR(1) series (true mean 0), %d series per "
           "cell, seed %lu:\n\n| n | ρ | calibrated (the analyses') | Newey-West t | block bootstrap%s |\n"
           "|---|---|---|---|---|\n",
           sims, seed, boot ? "" : " (not run: --boot 0)");
    for (int i = 0; i < nn; i++)
        for (int j = 0; j < nr; j++) {
            double cal, nw, bs;
            an_coverage((size_t)ns[i], rhos[j], sims, boot, seed + (unsigned long)(i * MAXV + j), &cal, &nw, &bs);
            char b[16] = "—";
            if (boot)
                snprintf(b, sizeof b, "%.1f%%", 100 * bs);
            printf("| %.0f | %.2g | %.1f%% | %.1f%% | %s |\n", ns[i], rhos[j], 100 * cal, 100 * nw, b);
            fflush(stdout);
        }
    return 0;
}
