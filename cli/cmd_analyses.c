/*
 * cmd_analyses.c — `fp8prof compare|claim|replay|dynamics|outliers|swiglu|
 * loss|advise RUN.h5 [MORE.h5 ...]`: one analysis over recorded runs.  Data files go to
 * -o DIR (default fp8prof-out), the Markdown section to stdout.
 */
#include <stdio.h>
#include <string.h>

#include "analysis.h"
#include "cli.h"
#include "report.h"


/* Shared options of the analyses and the report; the run paths are
 * collected into paths[] (at most max).  0, or a usage error status. */
/* Names of runs given to --baseline and --smooth, resolved once the runs
 * are open. */
typedef struct {
    const char *baseline, *smooth;
} run_names;

static int find_run(const char *cmd, const char *opt, const an_ctx *c, const char *const *paths, const char *name)
{
    for (int i = 0; i < c->nruns; i++)
        if (strcmp(c->runs[i].label, name) == 0 || strcmp(paths[i], name) == 0)
            return i;
    fprintf(stderr, "fp8prof: %s: %s '%s' is none of the runs (", cmd, opt, name);
    for (int i = 0; i < c->nruns; i++)
        fprintf(stderr, "%s%s", i ? ", " : "", c->runs[i].label);
    fprintf(stderr, ")\n");
    return -1;
}

static int resolve_names(const char *cmd, an_ctx *c, const char *const *paths, const run_names *nm)
{
    if (nm->baseline) {
        if ((c->baseline = find_run(cmd, "--baseline", c, paths, nm->baseline)) < 0)
            return 2;
        c->baseline_set = 1;
    }
    if (nm->smooth) {
        char a[1024];
        snprintf(a, sizeof a, "%s", nm->smooth);
        char *comma = strchr(a, ',');
        if (!comma)
            return cli_usage_error("%s: --smooth needs WITHOUT,WITH (two runs, e.g. delayed,delayed-smooth)", cmd);
        *comma = 0;
        if ((c->vs_a = find_run(cmd, "--smooth", c, paths, a)) < 0 ||
            (c->vs_b = find_run(cmd, "--smooth", c, paths, comma + 1)) < 0)
            return 2;
    }
    return 0;
}

static int analysis_options(const char *cmd, int argc, char **argv, an_ctx *c, const char **paths, int max, int *n,
                            run_names *nm)
{
    *n = 0;
    memset(nm, 0, sizeof *nm);
    c->outdir = "fp8prof-out";
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        double d;
        int rc = 0;
        if (a[0] == '-' && a[1] && i + 1 >= argc)
            return cli_usage_error("%s: %s needs a value", cmd, a);
        if (strcmp(a, "-o") == 0)
            c->outdir = argv[++i];
        else if (strcmp(a, "--tensor") == 0)
            c->tensor = argv[++i];
        else if (strcmp(a, "--vs") == 0)
            c->vs = argv[++i];
        else if (strcmp(a, "--boot") == 0) {
            if (!(rc = cli_number(cmd, a, argv[++i], 10, 100000, 1, &d)))
                c->boot = (int)d;
        } else if (strcmp(a, "--seed") == 0) {
            if (!(rc = cli_number(cmd, a, argv[++i], 0, 4294967295.0, 1, &d)))
                c->seed = (unsigned long)d;
        } else if (strcmp(a, "--sqnr-margin") == 0)
            rc = cli_number(cmd, a, argv[++i], 0, 100, 0, &c->sqnr_margin_db);
        else if (strcmp(a, "--block-gain") == 0)
            rc = cli_number(cmd, a, argv[++i], 0, 100, 0, &c->block_gain_db);
        else if (strcmp(a, "--underflow-max") == 0)
            rc = cli_number(cmd, a, argv[++i], 0, 1, 0, &c->underflow_max);
        else if (strcmp(a, "--loss") == 0)
            c->loss_name = argv[++i];
        else if (strcmp(a, "--baseline") == 0)
            nm->baseline = argv[++i];
        else if (strcmp(a, "--noise") == 0)
            return cli_usage_error("%s: --noise is gone: the loss's noise is the spread of replicates (runs whose "
                                   "/meta differs only in seed), found among the runs given", cmd);
        else if (strcmp(a, "--smooth") == 0)
            nm->smooth = argv[++i];
        else if (strcmp(a, "--claim-margin") == 0)
            rc = cli_number(cmd, a, argv[++i], 0, 100, 0, &c->claim_margin_db);
        else if (strcmp(a, "--equivalence-margin") == 0)
            rc = cli_number(cmd, a, argv[++i], 0.001, 100, 0, &c->equivalence_pct);
        else if (strcmp(a, "--lr-warmup") == 0) {
            if (!(rc = cli_number(cmd, a, argv[++i], 0, 4.6e18, 1, &d)))
                c->lr_warmup = (long long)d;
        } else if (strcmp(a, "--min-events") == 0) {
            if (!(rc = cli_number(cmd, a, argv[++i], 1, 1e9, 1, &d)))
                c->min_events = (int)d;
        } else if (strcmp(a, "--diverge") == 0)
            rc = cli_number(cmd, a, argv[++i], 0, 10, 0, &c->diverge_rel);
        else if (strcmp(a, "--diverge-steps") == 0) {
            if (!(rc = cli_number(cmd, a, argv[++i], 1, 1e9, 1, &d)))
                c->diverge_steps = (int)d;
        } else if (a[0] == '-' && a[1])
            return cli_usage_error("%s: unknown option '%s'", cmd, a);
        else if (*n == max)
            return cli_usage_error("%s: at most %d run files", cmd, max);
        else
            paths[(*n)++] = a;
        if (rc)
            return rc;
    }
    if (*n == 0)
        return cli_usage_error("%s needs at least one RUN.h5", cmd);
    return 0;
}

static int run_one(const char *cmd, int (*fn)(an_ctx *), int argc, char **argv)
{
    an_ctx c;
    an_defaults(&c);
    const char *paths[64];
    run_names nm;
    int n, rc = analysis_options(cmd, argc, argv, &c, paths, 64, &n, &nm);
    if (rc)
        return rc;
    if (an_outdir_ready(cmd, c.outdir))
        return 1;
    if (an_open(&c, paths, n)) {
        an_close(&c);
        return 1;
    }
    if ((rc = resolve_names(cmd, &c, paths, &nm)) != 0) {
        an_close(&c);
        return rc;
    }
    rc = fn(&c);
    if (rc == 0 || rc == 3) {
        if (c.nfindings)
            printf("\n**Findings**\n\n");
        for (int i = 0; i < c.nfindings; i++)
            printf("- %s\n", c.findings[i]);
        fprintf(stderr, "fp8prof: %s: data files in %s/\n", cmd, c.outdir);
    }
    an_close(&c);
    return rc == 3 ? 1 : rc;
}

int cmd_compare(int argc, char **argv) { return run_one("compare", an_compare, argc, argv); }
int cmd_replay(int argc, char **argv) { return run_one("replay", an_replay, argc, argv); }
int cmd_dynamics(int argc, char **argv) { return run_one("dynamics", an_dynamics, argc, argv); }
int cmd_outliers(int argc, char **argv) { return run_one("outliers", an_outliers, argc, argv); }
int cmd_loss(int argc, char **argv) { return run_one("loss", an_loss, argc, argv); }
int cmd_advise(int argc, char **argv) { return run_one("advise", an_advise, argc, argv); }
int cmd_claim(int argc, char **argv) { return run_one("claim", an_claim, argc, argv); }
int cmd_swiglu(int argc, char **argv) { return run_one("swiglu", an_swiglu, argc, argv); }

int cmd_report(int argc, char **argv)
{
    an_ctx c;
    an_defaults(&c);
    const char *paths[64];
    run_names nm;
    int n, rc = analysis_options("report", argc, argv, &c, paths, 64, &n, &nm);
    if (rc)
        return rc;
    if (an_outdir_ready("report", c.outdir))
        return 1;
    double t0 = an_now();
    fprintf(stderr, "fp8prof report: [1/%d] loading %d run%s\n", an_report_total(), n, n == 1 ? "" : "s");
    if (an_open(&c, paths, n)) {
        an_close(&c);
        return 1;
    }
    if ((rc = resolve_names("report", &c, paths, &nm)) != 0) {
        an_close(&c);
        return rc;
    }
    rc = an_report(&c, 1, t0);
    if (!rc)
        printf("%s/index.html\n", c.outdir);
    an_close(&c);
    return rc;
}
