/*
 * test_index.c — suite "index": the analyses' sparse (tensor, recipe) index
 * and the lookups built on it, against slow obvious references: which
 * recipes have data on a tensor (a scan of every record and every-step row),
 * the canonical recipe (the pairwise rule the index replaces), the contrast
 * groups (a scan of the contrasts), and the name lookups.  The run has
 * tensors with different recipe subsets, spellings of the same numerics
 * (hybrid:delayed = e4m3:delayed on activations, = e5m2:delayed on
 * gradients) and recipes no tensor shares.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analysis.h"
#include "contrasts.h"
#include "factors.h"
#include "fp8_probe.h"
#include "tests.h"

#define NT 40
#define NSTEP 12

static const char *pool[] = {"hybrid:delayed:history=16", "e4m3:delayed:history=16", "e5m2:delayed:history=16",
                             "e4m3:current",         "e5m2:current",            "e4m3:block=1x128",
                             "e5m2:block=1x128",     "mxfp8",                    "e4m3:current:pow2"};
#define NPOOL (int)(sizeof pool / sizeof pool[0])

static void make_run(const char *path)
{
    fp8_probe_options o = fp8_probe_defaults();
    o.exp_hist = 0;
    o.every = 3; /* statistics every 3 steps, every-step rows at each */
    fp8_probe_run *run = fp8_probe_open(path, &o, NULL, 0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(run);
    fp8_probe *p[NT];
    uint64_t seed = 4242;
    for (int t = 0; t < NT; t++) {
        char name[64], own[64];
        snprintf(name, sizeof name, "layers.%d.t%d.%s", t / 4, t, t % 3 == 2 ? "grad_output" : "input");
        snprintf(own, sizeof own, "e4m3:current:eps=%g", 1e-6 * (t + 1)); /* a recipe of its own */
        const char *sh[NPOOL + 1];
        int ns = 0;
        for (int k = 1; k < NPOOL; k++)
            if (test_rand(&seed) % 3)
                sh[ns++] = pool[k];
        sh[ns++] = own;
        p[t] = fp8_probe_declare(run, name, t % 3 == 2 ? FP8_ROLE_GRADIENT : FP8_ROLE_ACTIVATION, t / 4,
                                 t % 5 == 4 ? NULL : pool[0], sh, ns);
        CU_ASSERT_PTR_NOT_NULL_FATAL(p[t]);
    }
    float x[256];
    for (int s = 0; s < NSTEP; s++) {
        for (int t = 0; t < NT; t++) {
            for (int i = 0; i < 256; i++)
                x[i] = (float)((int)(test_rand(&seed) % 2001) - 1000) * 1e-3f * (float)(1 + (t + s) % 7);
            CU_ASSERT_EQUAL(fp8_probe_record(p[t], s, x, 2, 128), FP8_OK);
        }
        CU_ASSERT_EQUAL(fp8_probe_step_end(run, s), FP8_OK);
    }
    CU_ASSERT_EQUAL(fp8_probe_close(run), FP8_OK);
}

/* the old pairwise rule: among recipes with data on t and equal factors,
 * plain before hybrid, then the lowest id */
static int slow_canon(const an_run *a, int t, int q, const int *has)
{
    int R = a->run->nrecipes, best = q;
    fp8_role role = (fp8_role)a->run->tensor_role[t];
    an_factors fq, fo;
    if (!a->recipe_ok[q])
        return q;
    an_factors_of(&a->recipes[q], role, &fq);
    for (int o = 0; o < R; o++) {
        if (o == q || !has[o] || !a->recipe_ok[o])
            continue;
        an_factors_of(&a->recipes[o], role, &fo);
        if (!an_factors_equal(&fq, &fo))
            continue;
        int hb = a->recipes[best].hybrid, ho = a->recipes[o].hybrid;
        if ((hb && !ho) || (hb == ho && o < best))
            best = o;
    }
    return best;
}

static void test_pairs_and_canon(void)
{
    make_run("build/t_index.h5");
    an_ctx c;
    an_defaults(&c);
    c.outdir = "build";
    c.md = fopen("/dev/null", "w");
    c.quiet = 1;
    const char *paths[1] = {"build/t_index.h5"};
    CU_ASSERT_EQUAL_FATAL(an_open(&c, paths, 1), 0);
    an_run *a = &c.runs[0];
    const fp8_run *r = a->run;
    int R = r->nrecipes, T = r->ntensors;
    CU_ASSERT_EQUAL(T, NT);
    CU_ASSERT(R > NT); /* every tensor has a recipe of its own */
    int *has = calloc((size_t)R, sizeof *has), *nrec = calloc((size_t)R, sizeof *nrec), *nst = calloc((size_t)R, sizeof *nst);
    CU_ASSERT_PTR_NOT_NULL_FATAL(has);
    size_t hybrid_merged = 0, pairs = 0;
    for (int t = 0; t < T; t++) {
        memset(has, 0, (size_t)R * sizeof *has);
        memset(nrec, 0, (size_t)R * sizeof *nrec);
        memset(nst, 0, (size_t)R * sizeof *nst);
        for (size_t i = 0; i < r->nrecords; i++)
            if ((int)r->summaries[i].tensor == t)
                has[r->summaries[i].recipe] = 1, nrec[r->summaries[i].recipe]++;
        for (size_t i = 0; i < r->nsteps; i++)
            if ((int)r->steps[i].tensor == t)
                has[r->steps[i].recipe] = 1, nst[r->steps[i].recipe]++;
        size_t nr;
        const int *rs = an_tensor_recipes(a, t, &nr);
        size_t want = 0;
        for (int q = 0; q < R; q++) {
            want += (size_t)has[q];
            size_t n1, n2;
            an_series(a, t, q, &n1);
            an_steps(a, t, q, &n2);
            CU_ASSERT_EQUAL(n1, (size_t)nrec[q]); /* one record per recorded step, no repeats here */
            CU_ASSERT_EQUAL(n2, (size_t)nst[q]);
            CU_ASSERT_EQUAL(an_pair(a, t, q) >= 0, has[q]);
            if (has[q]) {
                int cq = an_canon(a, t, q), sq = slow_canon(a, t, q, has);
                CU_ASSERT_EQUAL(cq, sq);
                hybrid_merged += a->recipes[q].hybrid && cq != q;
                pairs++;
            }
        }
        CU_ASSERT_EQUAL(nr, want);
        for (size_t i = 1; i < nr; i++)
            CU_ASSERT(rs[i - 1] < rs[i]);
        CU_ASSERT_EQUAL(an_pair(a, t, R), -1);
        CU_ASSERT_EQUAL(an_pair(a, t, -1), -1);
    }
    CU_ASSERT(hybrid_merged > 0); /* the rule was exercised, not vacuous */
    CU_ASSERT_EQUAL(pairs, a->npairs);
    /* every record lands in its series, once */
    size_t total = 0;
    for (size_t k = 0; k < a->npairs; k++)
        total += a->start[k + 1] - a->start[k];
    CU_ASSERT_EQUAL(total, r->nrecords);

    /* contrasts: per tensor, a slice of the run's; groups against a scan */
    size_t nc, sum = 0;
    const an_contrast *v = an_run_contrasts(&c, a, &nc);
    CU_ASSERT_FATAL(v != NULL && nc > 0);
    for (int t = 0; t < T; t++) {
        size_t n;
        const an_contrast *vt = an_tensor_contrasts(&c, a, t, &n);
        size_t scan = 0;
        for (size_t i = 0; i < nc; i++)
            scan += v[i].t == t;
        CU_ASSERT_EQUAL(n, scan);
        for (size_t i = 0; i < n; i++)
            CU_ASSERT_EQUAL(vt[i].t, t);
        sum += n;
    }
    CU_ASSERT_EQUAL(sum, nc);
    an_cgroup *g;
    size_t ng;
    CU_ASSERT_EQUAL_FATAL(an_contrast_groups(&c, a, &g, &ng), 0);
    int tensors = 0, prev_first = -1;
    for (size_t k = 0; k < ng; k++) {
        int scan = 0, first = -1;
        for (size_t i = 0; i < nc; i++) {
            an_factors fa, fb;
            fp8_role role = (fp8_role)r->tensor_role[v[i].t];
            an_factors_of(&a->recipes[v[i].a], role, &fa);
            an_factors_of(&a->recipes[v[i].b], role, &fb);
            char la[96], lb[96];
            an_factors_label(&fa, la, sizeof la);
            an_factors_label(&fb, lb, sizeof lb);
            if (v[i].factor == g[k].factor && (int)role == g[k].role && !strcmp(la, g[k].la) && !strcmp(lb, g[k].lb)) {
                scan++;
                if (first < 0)
                    first = (int)i;
            }
        }
        CU_ASSERT_EQUAL(g[k].tensors, scan);
        CU_ASSERT(first >= 0 && g[k].ra == v[first].a && g[k].rb == v[first].b);
        tensors += g[k].tensors;
        CU_ASSERT(first > prev_first); /* in the order of their first contrast */
        prev_first = first;
    }
    CU_ASSERT_EQUAL((size_t)tensors, nc);
    free(g);

    /* names by binary search: the lowest index of equal names */
    an_names nm;
    CU_ASSERT_EQUAL_FATAL(an_names_init(&nm, (const char *)r->recipe_spec, FP8_SPEC_MAX, R), 0);
    for (int q = 0; q < R; q++)
        CU_ASSERT_EQUAL(an_names_find(&nm, r->recipe_spec[q]), q);
    CU_ASSERT_EQUAL(an_names_find(&nm, "e4m3:nonesuch"), -1);
    CU_ASSERT_EQUAL(an_names_find(&nm, ""), -1);
    an_names_free(&nm);
    const char dup[4][8] = {"b", "a", "b", "c"};
    CU_ASSERT_EQUAL_FATAL(an_names_init(&nm, dup[0], 8, 4), 0);
    CU_ASSERT_EQUAL(an_names_find(&nm, "b"), 0);
    CU_ASSERT_EQUAL(an_names_find(&nm, "c"), 3);
    CU_ASSERT_EQUAL(an_names_find(&nm, "bb"), -1);
    an_names_free(&nm);
    free(has), free(nrec), free(nst);
    fclose(c.md);
    an_close(&c);
}

void register_index_tests(void)
{
    static CU_TestInfo tests[] = {
        {"sparse pair index, canonical recipes, contrast groups, names", test_pairs_and_canon},
        CU_TEST_INFO_NULL,
    };
    add_suite("index", tests);
}
