/*
 * contrasts.c — one-factor comparisons per tensor and per group
 * (contrasts.h; definitions in docs/analyses.md, "Like-for-like").
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "compare.h"
#include "contrasts.h"

struct an_contrasts {
    an_contrast *v;
    size_t n;
};

void an_contrasts_free(an_run *a)
{
    if (a->contrasts) {
        free(a->contrasts->v);
        free(a->contrasts);
        a->contrasts = NULL;
    }
}

/* The paired differences SQNR_b - SQNR_a of tensor t after warm-up, both
 * finite, in step order; steps (may be NULL) gets their steps. */
static size_t paired(const an_run *a, int t, int ra, int rb, double *d, int64_t *steps)
{
    size_t na, nb, m = 0;
    const size_t *sa = an_series(a, t, ra, &na), *sb = an_series(a, t, rb, &nb);
    for (size_t i = 0, j = 0; i < na && j < nb;) {
        const fp8_summary *x = an_rec(a, sa[i]), *y = an_rec(a, sb[j]);
        if (x->step != y->step) {
            x->step < y->step ? i++ : j++;
            continue;
        }
        if (!an_is_warm(a, t, x->step) && isfinite(x->sqnr_db) && isfinite(y->sqnr_db)) {
            if (steps)
                steps[m] = x->step;
            d[m++] = y->sqnr_db - x->sqnr_db;
        }
        i++, j++;
    }
    return m;
}

static int compute(const an_ctx *c, an_run *a)
{
    int T = a->run->ntensors, R = a->run->nrecipes;
    size_t cap = 64, n = 0;
    an_contrast *v = malloc(cap * sizeof *v);
    double *d = malloc((a->run->nrecords + 1) * sizeof *d);
    an_factors *f = malloc(((size_t)R + 1) * sizeof *f);
    if (!v || !d || !f) {
        free(v), free(d), free(f);
        return -1;
    }
    for (int t = 0; t < T; t++) {
        fp8_role role = (fp8_role)a->run->tensor_role[t];
        for (int r = 0; r < R; r++)
            if (a->recipe_ok[r])
                an_factors_of(&a->recipes[r], role, &f[r]);
        for (int x = 0; x < R; x++) {
            size_t nx;
            an_series(a, t, x, &nx);
            if (!nx || !a->recipe_ok[x] || an_canon(a, t, x) != x)
                continue;
            for (int y = x + 1; y < R; y++) {
                size_t ny;
                an_series(a, t, y, &ny);
                if (!ny || !a->recipe_ok[y] || an_canon(a, t, y) != y)
                    continue;
                int k = an_factors_one(&f[x], &f[y]);
                if (k < 0)
                    continue;
                int from = an_factors_from_first((an_factor)k, &f[x], &f[y]) ? x : y, to = from == x ? y : x;
                size_t m = paired(a, t, from, to, d, NULL);
                if (!m)
                    continue;
                if (n == cap) {
                    an_contrast *g = realloc(v, (cap *= 2) * sizeof *v);
                    if (!g) {
                        free(v), free(d), free(f);
                        return -1;
                    }
                    v = g;
                }
                an_contrast *o = &v[n++];
                o->t = t, o->a = from, o->b = to, o->factor = k;
                an_mean_ci(d, m, c->boot, c->seed, &o->d);
            }
        }
    }
    /* Holm over every contrast of the run */
    double *p = malloc((n + 1) * sizeof *p), *adj = malloc((n + 1) * sizeof *adj);
    if (!p || !adj) {
        free(p), free(adj), free(v), free(d), free(f);
        return -1;
    }
    for (size_t i = 0; i < n; i++)
        p[i] = v[i].d.p;
    an_holm(p, n, adj);
    for (size_t i = 0; i < n; i++)
        v[i].padj = adj[i];
    free(p), free(adj), free(d), free(f);
    a->contrasts = calloc(1, sizeof *a->contrasts);
    if (!a->contrasts) {
        free(v);
        return -1;
    }
    a->contrasts->v = v;
    a->contrasts->n = n;
    return 0;
}

const an_contrast *an_run_contrasts(const an_ctx *c, an_run *a, size_t *n)
{
    *n = 0;
    if (!a->contrasts && compute(c, a) != 0)
        return NULL;
    *n = a->contrasts->n;
    return a->contrasts->v;
}

const an_contrast *an_find_contrast(const an_ctx *c, an_run *run, int t, int a, int b, int *flip)
{
    size_t n;
    const an_contrast *v = an_run_contrasts(c, run, &n);
    for (size_t i = 0; i < n; i++)
        if (v[i].t == t && ((v[i].a == a && v[i].b == b) || (v[i].a == b && v[i].b == a))) {
            *flip = v[i].a != a;
            return &v[i];
        }
    return NULL;
}

static int cmp_i64(const void *x, const void *y)
{
    int64_t a = *(const int64_t *)x, b = *(const int64_t *)y;
    return (a > b) - (a < b);
}

int an_contrast_groups(const an_ctx *c, an_run *a, an_cgroup **out, size_t *ng)
{
    *out = NULL, *ng = 0;
    size_t nc;
    const an_contrast *v = an_run_contrasts(c, a, &nc);
    if (!v && nc)
        return -1;
    an_cgroup *g = calloc(nc + 1, sizeof *g);
    int *gi = malloc((nc + 1) * sizeof *gi);
    /* the run's distinct recorded steps, for per-step group means */
    size_t ns = 0;
    int64_t *steps = malloc((a->run->nrecords + 1) * sizeof *steps);
    double *d = malloc((a->run->nrecords + 1) * sizeof *d);
    int64_t *ds = malloc((a->run->nrecords + 1) * sizeof *ds);
    if (!g || !gi || !steps || !d || !ds) {
        free(g), free(gi), free(steps), free(d), free(ds);
        return -1;
    }
    for (size_t i = 0; i < a->run->nrecords; i++)
        steps[i] = a->run->summaries[i].step;
    qsort(steps, a->run->nrecords, sizeof *steps, cmp_i64);
    for (size_t i = 0; i < a->run->nrecords; i++)
        if (!ns || steps[i] != steps[ns - 1])
            steps[ns++] = steps[i];
    size_t n = 0;
    for (size_t i = 0; i < nc; i++) {
        an_factors fa, fb;
        fp8_role role = (fp8_role)a->run->tensor_role[v[i].t];
        an_factors_of(&a->recipes[v[i].a], role, &fa);
        an_factors_of(&a->recipes[v[i].b], role, &fb);
        char la[96], lb[96];
        an_factors_label(&fa, la, sizeof la);
        an_factors_label(&fb, lb, sizeof lb);
        size_t k = 0;
        while (k < n && !(g[k].factor == v[i].factor && g[k].role == (int)role && !strcmp(g[k].la, la) &&
                          !strcmp(g[k].lb, lb)))
            k++;
        if (k == n) {
            g[n].factor = v[i].factor, g[n].role = (int)role;
            snprintf(g[n].la, sizeof g[n].la, "%s", la);
            snprintf(g[n].lb, sizeof g[n].lb, "%s", lb);
            g[n].ra = v[i].a, g[n].rb = v[i].b;
            n++;
        }
        gi[i] = (int)k;
    }
    double *sum = calloc(ns + 1, sizeof *sum), *cnt = calloc(ns + 1, sizeof *cnt), *per = malloc((ns + 1) * sizeof *per);
    int rc = !sum || !cnt || !per;
    for (size_t k = 0; k < n && !rc; k++) {
        an_cgroup *G = &g[k];
        memset(sum, 0, ns * sizeof *sum), memset(cnt, 0, ns * sizeof *cnt);
        size_t pos = 0;
        double ua = 0, ub = 0, oa = 0, ob = 0, na = 0, nb = 0;
        for (size_t i = 0; i < nc; i++) {
            if (gi[i] != (int)k)
                continue;
            const an_contrast *x = &v[i];
            G->tensors++;
            int s = an_contrast_sign(x);
            G->to_better += s > 0, G->from_better += s < 0, G->neither += s == 0;
            pos += x->d.mean > 0;
            size_t m = paired(a, x->t, x->a, x->b, d, ds);
            for (size_t j = 0; j < m; j++) {
                const int64_t *q = bsearch(&ds[j], steps, ns, sizeof *steps, cmp_i64);
                if (q)
                    sum[q - steps] += d[j], cnt[q - steps] += 1;
            }
            const an_sstats *sa = an_series_cached(a, x->t, x->a), *sb = an_series_cached(a, x->t, x->b);
            if (sa && sb) {
                G->events_a += sa->events, G->events_b += sb->events;
                G->steps_a += sa->event_steps, G->steps_b += sb->event_steps;
                ua += sa->underflow_rate * sa->numel, ub += sb->underflow_rate * sb->numel;
                oa += sa->overflow_rate * sa->numel, ob += sb->overflow_rate * sb->numel;
                na += sa->numel, nb += sb->numel;
            }
        }
        size_t nonzero = 0;
        for (size_t i = 0; i < nc; i++)
            if (gi[i] == (int)k && v[i].d.mean != 0)
                nonzero++;
        G->sign_p = an_sign_test(pos, nonzero);
        G->under_a = na > 0 ? ua / na : NAN, G->under_b = nb > 0 ? ub / nb : NAN;
        G->over_a = na > 0 ? oa / na : NAN, G->over_b = nb > 0 ? ob / nb : NAN;
        size_t m = 0;
        for (size_t j = 0; j < ns; j++)
            if (cnt[j] > 0)
                per[m++] = sum[j] / cnt[j];
        an_mean_ci(per, m, c->boot, c->seed, &G->d);
    }
    free(sum), free(cnt), free(per), free(gi), free(steps), free(d), free(ds);
    if (rc) {
        free(g);
        return -1;
    }
    *out = g, *ng = n;
    return 0;
}
