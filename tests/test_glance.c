/*
 * test_glance.c — suite "glance": the report's first screen answers the
 * questions and points at the right things.
 *
 *  - where delayed scaling overflows is ranked by events under the recipe
 *    each run cast with (not by how many runs a tensor overflows in), the
 *    verdict of every tensor and run is in summary.json;
 *  - start-up is not behaviour: `check --from-step`;
 *  - a history/margin setting that beats TE's default on both axes is named;
 *  - the page: no two elements share an id, section names do not repeat as
 *    headings, every figure's alt text is its caption, six answers.
 */
#include <gsl/gsl_randist.h>
#include <gsl/gsl_rng.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "an_util.h"
#include "tests.h"

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = malloc((size_t)n + 1);
    if (b && fread(b, 1, (size_t)n, f) != (size_t)n) {
        free(b);
        b = NULL;
    }
    if (b)
        b[n] = 0;
    fclose(f);
    return b;
}

/* ---- (a): ranked by events under the cast recipe -------------------------- */

/* tensor 0 ("burst"): overflows its delayed scale at 30 steps of run A and
 * never in run B; tensor 1 ("steady"): 4 overflows in each run (at steps
 * 20, 40, 60, 80, each outside the last one's history of 16).  Ranked by runs it overflows in, "steady" leads (2 of 2
 * runs); by events, "burst" does (30 against 4). */
static int g_run;
static void gen_rank(gsl_rng *r, int64_t s, int t, float *x, size_t rows, size_t cols)
{
    double k = 1;
    if (t == 0 && g_run == 0 && s >= 50 && s < 80)
        k = pow(2.0, (double)(s - 49)); /* a new high at every step: delayed overflows at each */
    if (t == 1 && s > 0 && s % 20 == 0 && s <= 80)
        k = 64;
    for (size_t i = 0; i < rows * cols; i++) {
        double v = gsl_ran_gaussian(r, 1.0);
        x[i] = (float)(k * (v > 3 ? 3 : v < -3 ? -3 : v));
    }
    x[0] = (float)(3.5 * k);
}

static void test_where_ranking(void)
{
    const char *sh[] = {"e4m3:current"};
    const test_tensor t[] = {{"layers.0.burst.input", FP8_ROLE_ACTIVATION, 8, 256, "e4m3:delayed:history=16", sh, 1},
                             {"layers.0.steady.input", FP8_ROLE_ACTIVATION, 8, 256, "e4m3:delayed:history=16", sh, 1}};
    char pa[512], pb[512], out[512];
    snprintf(pa, sizeof pa, "%s/rank_a.h5", test_scratch_dir());
    snprintf(pb, sizeof pb, "%s/rank_b.h5", test_scratch_dir());
    snprintf(out, sizeof out, "%s", test_path("rank"));
    g_run = 0;
    test_write_run(pa, t, 2, 100, gen_rank, 1, NULL);
    g_run = 1;
    test_write_run(pb, t, 2, 100, gen_rank, 2, NULL);
    const char *paths[] = {pa, pb};
    an_ctx c = test_an_open(paths, 2, out, 200);
    CU_ASSERT_EQUAL_FATAL(an_compare(&c), 0);
    CU_ASSERT_EQUAL(an_json_write(&c), 0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(c.key[AN_Q_WHERE]);
    const char *k = c.key[AN_Q_WHERE];
    const char *burst = strstr(k, "`layers.0.burst.input` ("), *steady = strstr(k, "`layers.0.steady.input` (");
    CU_ASSERT_PTR_NOT_NULL_FATAL(burst);
    CU_ASSERT_PTR_NOT_NULL_FATAL(steady);
    CU_ASSERT(burst < steady); /* by events, not by runs */
    CU_ASSERT(strstr(k, "`layers.0.burst.input` (0..30 a run)") != NULL);
    CU_ASSERT(strstr(k, "`layers.0.steady.input` (4 a run)") != NULL);
    CU_ASSERT(strstr(k, "in the 2 runs that cast with delayed scaling") != NULL);
    test_an_close(&c);
    char js[600];
    snprintf(js, sizeof js, "%s/summary.json", out);
    char *j = slurp(js);
    CU_ASSERT_PTR_NOT_NULL_FATAL(j);
    CU_ASSERT(strstr(j, "\"verdicts\": [") != NULL);
    CU_ASSERT(strstr(j, "{\"run\": \"rank_a\", \"tensor\": \"layers.0.burst.input\", \"role\": \"activation\", "
                        "\"verdict\": \"needs JIT\", \"delayed_recipe\": \"e4m3 delayed h=16,max,m=0\", "
                        "\"delayed_is_cast\": true, \"overflow_events\": 30,") != NULL);
    CU_ASSERT(strstr(j, "{\"run\": \"rank_b\", \"tensor\": \"layers.0.burst.input\", \"role\": \"activation\", "
                        "\"verdict\": \"delayed is safe\"") != NULL);
    free(j);
    /* start-up is not behaviour: the steady tensor's 4 events fall at steps 20..80 */
    char buf[4096];
    CU_ASSERT_EQUAL(test_run_cli("%1$s check %2$s --tensor '*steady*' --max-overflow-events 0", pb, buf, sizeof buf), 1);
    CU_ASSERT(strstr(buf, "overflow events after warm-up = 4") != NULL);
    CU_ASSERT_EQUAL(test_run_cli("%1$s check %2$s --tensor '*steady*' --max-overflow-events 0 --from-step 81", pb, buf,
                                 sizeof buf), 0);
    CU_ASSERT_EQUAL(test_run_cli("%1$s check %2$s --tensor '*steady*' --max-overflow-events 0 --from-step 61", pb, buf,
                                 sizeof buf), 1);
    CU_ASSERT(strstr(buf, "overflow events from --from-step = 1") != NULL);
    CU_ASSERT_EQUAL(test_run_cli("%1$s check %2$s --max-overflow-events 0 --from-step -3 2>&1", pb, buf, sizeof buf), 2);
}

/* ---- (f): a setting that beats TE's default on both axes ----------------- */

/* an amax that halves every 4 steps: no history ever overflows, and TE's
 * running max keeps the scale of the first steps, flushing what follows;
 * a short history follows the amax down and flushes less */
static void gen_decay(gsl_rng *r, int64_t s, int t, float *x, size_t rows, size_t cols)
{
    (void)t;
    double k = pow(2.0, -(double)s / 4.0);
    for (size_t i = 0; i < rows * cols; i++)
        x[i] = (float)(k * gsl_ran_gaussian(r, 1.0));
}

static void test_replay_both_axes(void)
{
    const test_tensor t[] = {{"layers.0.decay.input", FP8_ROLE_ACTIVATION, 8, 256, "e4m3:delayed", NULL, 0}};
    char p[512], out[512];
    snprintf(p, sizeof p, "%s/decay.h5", test_scratch_dir());
    snprintf(out, sizeof out, "%s", test_path("decay"));
    test_write_run(p, t, 1, 60, gen_decay, 3, NULL);
    const char *paths[] = {p};
    an_ctx c = test_an_open(paths, 1, out, 200);
    CU_ASSERT_EQUAL_FATAL(an_replay(&c), 0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(c.key[AN_Q_REPLAY]);
    CU_ASSERT(strstr(c.key[AN_Q_REPLAY], "TE's default (history 1024, max, margin 0) overflows at 0 tensor-steps") !=
              NULL);
    CU_ASSERT(strstr(c.key[AN_Q_REPLAY], "beats it on both overflow and flush in 1 of 1 runs") != NULL);
    CU_ASSERT(strstr(c.key[AN_Q_REPLAY], "(⚠ in a run of 60 steps its history is a running max)") != NULL);
    test_an_close(&c);
}

/* ---- the page ----------------------------------------------------------- */

static void test_page(void)
{
    const char *sh[] = {"e4m3:current", "e4m3:block=1x128:eps=0"};
    const test_tensor t[] = {{"layers.0.burst.input", FP8_ROLE_ACTIVATION, 8, 256, "e4m3:delayed:history=16", sh, 2},
                             {"layers.0.steady.input", FP8_ROLE_ACTIVATION, 8, 256, "e4m3:delayed:history=16", sh, 2}};
    char p[512];
    snprintf(p, sizeof p, "%s/page.h5", test_scratch_dir());
    g_run = 0;
    test_write_run(p, t, 2, 100, gen_rank, 4, NULL);
    char buf[256];
    CU_ASSERT_EQUAL_FATAL(test_run_cli("%1$s report %2$s -o %2$s_rep > /dev/null 2> %2$s_rep.err", p, buf, sizeof buf), 0);
    char hp[600], mp[600];
    snprintf(hp, sizeof hp, "%s_rep/index.html", p);
    snprintf(mp, sizeof mp, "%s_rep/report.md", p);
    char *h = slurp(hp), *md = slurp(mp);
    CU_ASSERT_PTR_NOT_NULL_FATAL(h);
    CU_ASSERT_PTR_NOT_NULL_FATAL(md);
    /* no id twice */
    int ids = 0, dups = 0;
    for (const char *q = h; (q = strstr(q, " id=\"")) != NULL; q += 5) {
        const char *e = strchr(q + 5, '"');
        if (!e)
            break;
        size_t n = (size_t)(e - (q + 5));
        char id[300];
        snprintf(id, sizeof id, " id=\"%.*s\"", (int)(n < 280 ? n : 280), q + 5);
        ids++;
        const char *again = strstr(e, id);
        dups += again != NULL;
    }
    CU_ASSERT(ids > 10);
    CU_ASSERT_EQUAL(dups, 0);
    /* findings are labels, not headings that repeat the sections' names */
    CU_ASSERT(strstr(md, "\n### Outliers\n") == NULL);
    CU_ASSERT(strstr(md, "\n**Outliers**\n") != NULL || strstr(md, "## Outliers") != NULL);
    /* a figure's alt text says what it shows: its caption, not its file */
    const char *img = strstr(h, "<img alt=\"");
    CU_ASSERT_PTR_NOT_NULL_FATAL(img);
    CU_ASSERT(strncmp(img + 10, "fig_", 4) != 0);
    /* six questions, lettered, before anything else */
    const char *sum = strstr(md, "## Summary"), *cont = strstr(md, "## Contents");
    CU_ASSERT_PTR_NOT_NULL_FATAL(sum);
    CU_ASSERT_PTR_NOT_NULL_FATAL(cont);
    static const char *q[] = {"- **(a) ", "- **(b) ", "- **(c) ", "- **(d) ", "- **(e) ", "- **(f) "};
    const char *prev = sum;
    for (int k = 0; k < 6; k++) {
        const char *x = strstr(prev, q[k]);
        CU_ASSERT(x != NULL && x < cont);
        prev = x ? x : prev;
    }
    free(h), free(md);
}

void register_glance_tests(void)
{
    static CU_TestInfo tests[] = {
        {"(a) ranks tensors by events under the cast recipe; every verdict in summary.json; check --from-step", test_where_ranking},
        {"(f) names a setting that beats TE's default on both overflow and flush", test_replay_both_axes},
        {"the page: unique ids, findings are not headings, alt text is the caption, six lettered answers", test_page},
        CU_TEST_INFO_NULL,
    };
    add_suite("glance", tests);
}
