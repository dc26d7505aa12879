/*
 * cmd_check.c — `fp8prof check RUN.h5 [budgets]`: a training job's CI gate.
 * Each tensor of each run is held to the budgets given, after warm-up,
 * under its active recipe (or --recipe SPEC, or every recipe with --recipe
 * all); every breach is listed; the exit status is 1 when any budget is
 * broken, 0 when none is, 2 on a usage error.
 */
#include <fnmatch.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "analysis.h"
#include "cli.h"
#include "series.h"
#include "factors.h"

typedef struct {
    double max_events, max_underflow_pct, max_overflow_pct, min_sqnr_db, max_warmup_steps;
    double from_step; /* NaN: from the end of each tensor's warm-up */
    const char *recipe; /* NULL: active; "all"; or a spec */
    int json;
} budgets;

static int breach(int json, int n, const char *run, const char *tensor, const char *recipe, const char *what,
                  double value, double limit)
{
    if (json) {
        printf("%s\n    {\"run\": ", n ? "," : "");
        an_json_str(stdout, run);
        fputs(", \"tensor\": ", stdout), an_json_str(stdout, tensor);
        fputs(", \"recipe\": ", stdout), an_json_str(stdout, recipe);
        fputs(", \"budget\": ", stdout), an_json_str(stdout, what);
        fputs(", \"value\": ", stdout), an_json_num(stdout, value);
        fputs(", \"limit\": ", stdout), an_json_num(stdout, limit);
        fputs("}", stdout);
    } else
        printf("%s: %s under %s: %s = %.6g (budget %.6g)\n", run, tensor, recipe, what, value, limit);
    return n + 1;
}

int cmd_check(int argc, char **argv)
{
    budgets b = {NAN, NAN, NAN, NAN, NAN, NAN, NULL, 0};
    an_ctx c;
    an_defaults(&c);
    const char *paths[64];
    int np = 0, any = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int rc = 0;
        double *slot = !strcmp(a, "--max-overflow-events") ? &b.max_events
                       : !strcmp(a, "--max-underflow-pct") ? &b.max_underflow_pct
                       : !strcmp(a, "--max-overflow-pct")  ? &b.max_overflow_pct
                       : !strcmp(a, "--min-sqnr-db")       ? &b.min_sqnr_db
                       : !strcmp(a, "--max-warmup-steps")  ? &b.max_warmup_steps
                                                           : NULL;
        if (!strcmp(a, "--json")) {
            b.json = 1;
            continue;
        }
        if (a[0] == '-' && a[1] && i + 1 >= argc)
            return cli_usage_error("check: %s needs a value", a);
        if (slot) {
            /* counts are whole numbers >= 0, percentages 0..100, an SQNR any finite dB */
            int count = slot == &b.max_events || slot == &b.max_warmup_steps;
            int pct = slot == &b.max_underflow_pct || slot == &b.max_overflow_pct;
            rc = cli_number("check", a, argv[++i], count || pct ? 0 : -1e9, pct ? 100 : count ? 1e18 : 1e9, count, slot);
            any = 1;
        } else if (!strcmp(a, "--from-step"))
            rc = cli_number("check", a, argv[++i], 0, 4.6e18, 1, &b.from_step);
        else if (!strcmp(a, "--recipe"))
            b.recipe = argv[++i];
        else if (!strcmp(a, "--tensor"))
            c.tensor = argv[++i];
        else if (a[0] == '-' && a[1])
            return cli_usage_error("check: unknown option '%s'", a);
        else if (np == 64)
            return cli_usage_error("check: at most 64 run files");
        else
            paths[np++] = a;
        if (rc)
            return rc;
    }
    if (!np)
        return cli_usage_error("check needs RUN.h5 (see fp8prof check --help)");
    if (!any)
        return cli_usage_error("check: no budget given (--max-overflow-events N, --max-underflow-pct X, "
                               "--max-overflow-pct X, --min-sqnr-db Y, --max-warmup-steps K)");
    fp8_recipe want;
    if (b.recipe && strcmp(b.recipe, "all") != 0 && fp8_recipe_parse(b.recipe, &want) != FP8_OK)
        return cli_usage_error("check: %s", fp8_error_message());
    c.quiet = 1;
    if (an_open(&c, paths, np)) {
        an_close(&c);
        return 2;
    }
    int n = 0, checked = 0, matched = 0;
    if (b.json)
        printf("{\"violations\": [");
    for (int ri = 0; ri < c.nruns; ri++) {
        an_run *a = &c.runs[ri];
        for (int t = 0; t < a->run->ntensors; t++) {
            const char *tn = a->run->tensor_name[t];
            int64_t warm = a->warm_end[t] == INT64_MIN ? 0 : a->warm_end[t];
            /* --from-step: the steps before it are left out like a warm-up
             * (start-up is not behaviour); the warm-up budget keeps the real one */
            if (!isnan(b.from_step) && (a->warm_end[t] == INT64_MIN || a->warm_end[t] < (int64_t)b.from_step))
                a->warm_end[t] = (int64_t)b.from_step;
            for (int r = 0; r < a->run->nrecipes; r++) {
                int pick = !b.recipe ? r == a->active[t]
                           : !strcmp(b.recipe, "all") ? an_canon(a, t, r) == r
                                                      : a->recipe_ok[r] && !strcmp(a->recipes[r].spec, want.spec);
                const an_sstats *s = pick ? an_series_cached(a, t, r) : NULL;
                if (!s || (!s->records && !s->event_steps))
                    continue;
                matched++;
                checked++;
                const char *spec = a->run->recipe_spec[r];
                if (!isnan(b.max_events) && (double)s->events > b.max_events)
                    n = breach(b.json, n, a->label, tn, spec,
                               isnan(b.from_step) ? "overflow events after warm-up" : "overflow events from --from-step",
                               (double)s->events, b.max_events);
                if (!isnan(b.max_overflow_pct) && 100 * s->overflow_rate > b.max_overflow_pct)
                    n = breach(b.json, n, a->label, tn, spec, "overflow %", 100 * s->overflow_rate, b.max_overflow_pct);
                if (!isnan(b.max_underflow_pct) && 100 * s->underflow_rate > b.max_underflow_pct)
                    n = breach(b.json, n, a->label, tn, spec, "underflow %", 100 * s->underflow_rate,
                               b.max_underflow_pct);
                if (!isnan(b.min_sqnr_db) && s->sqnr_p50 < b.min_sqnr_db)
                    n = breach(b.json, n, a->label, tn, spec, "median SQNR dB", s->sqnr_p50, b.min_sqnr_db);
                if (!isnan(b.max_warmup_steps) && (double)warm > b.max_warmup_steps)
                    n = breach(b.json, n, a->label, tn, spec, "warm-up steps", (double)warm, b.max_warmup_steps);
            }
        }
    }
    if (b.json)
        printf("%s], \"checked\": %d, \"pass\": %s}\n", n ? "\n  " : "", checked, n || !matched ? "false" : "true");
    else if (!matched)
        printf("check: no tensor has %s recorded\n", b.recipe ? b.recipe : "an active recipe");
    else
        printf("check: %d tensor x recipe series checked, %d budget%s broken\n", checked, n, n == 1 ? "" : "s");
    an_close(&c);
    if (!matched) {
        fprintf(stderr, "fp8prof: check: nothing to check (no %s records)\n", b.recipe ? b.recipe : "active-recipe");
        return 2;
    }
    return n ? 1 : 0;
}
