/*
 * contrasts.c — one-factor comparisons per tensor and per group
 * (contrasts.h; definitions in docs/analyses.md, "Like-for-like").
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "series.h"
#include "contrasts.h"

struct an_contrasts {
    an_contrast *v;  /* in tensor order */
    size_t n;
    size_t *tstart;  /* tensor t's contrasts are v[tstart[t] .. tstart[t+1]) */
};

void an_contrasts_free(an_run *a)
{
    if (a->contrasts) {
        free(a->contrasts->v);
        free(a->contrasts->tstart);
        free(a->contrasts);
        a->contrasts = NULL;
    }
}

int an_eps_inert(const an_run *a, int t, int r)
{
    if (r < 0 || r >= a->run->nrecipes || !a->recipe_ok[r])
        return 0;
    fp8_recipe rec = a->recipes[r];
    fp8_recipe_for_role(&rec, (fp8_role)a->run->tensor_role[t]);
    if (!(rec.eps > 0))
        return 1;
    const fp8_format *f = fp8_recipe_format(&rec, (fp8_role)a->run->tensor_role[t]);
    if (!f)
        return 0;
    /* the scale_inv an amax at the floor gives: a group at or below eps
     * shows it as the record's smallest scale_inv */
    double floor_si;
    if (rec.kind == FP8_RECIPE_BLOCK) {
        float s, si;
        fp8_scale_block((float)f->max, (float)rec.eps, &rec, &s, &si);
        floor_si = si;
    } else {
        floor_si = 1.0 / fp8_scale_current((float)f->max, (float)rec.eps, rec.eps, rec.pow2, rec.torchao);
    }
    size_t n;
    const size_t *sr = an_series(a, t, r, &n);
    size_t seen = 0;
    for (size_t i = 0; i < n; i++) {
        const fp8_summary *x = an_rec(a, sr[i]);
        if (an_is_warm(a, t, x->step))
            continue;
        seen++;
        int per_tensor = rec.kind == FP8_RECIPE_CURRENT || rec.kind == FP8_RECIPE_DELAYED;
        if (per_tensor ? !(x->amax > rec.eps) : !(x->scale_inv_min > floor_si))
            return 0;
    }
    return seen > 0;
}

int an_one_factor(const an_run *a, int t, int x, int y, int *eps_inert)
{
    *eps_inert = 0;
    fp8_role role = (fp8_role)a->run->tensor_role[t];
    an_factors fx, fy;
    an_factors_of(&a->recipes[x], role, &fx);
    an_factors_of(&a->recipes[y], role, &fy);
    int k = an_factors_one(&fx, &fy);
    if (k >= 0 || fx.eps == fy.eps)
        return k;
    fy.eps = fx.eps; /* apart from the floor, one factor? */
    k = an_factors_one(&fx, &fy);
    if (k < 0 || k == AN_F_FLOOR || !an_eps_inert(a, t, x) || !an_eps_inert(a, t, y))
        return -1;
    *eps_inert = 1;
    return k;
}

size_t an_paired(const an_run *a, int t, int ra, int rb, double *d, int64_t *steps, size_t *ev_a, size_t *ev_b)
{
    size_t na, nb, m = 0, ea = 0, eb = 0;
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
            ea += x->overflows != UINT64_MAX && x->overflows > 0;
            eb += y->overflows != UINT64_MAX && y->overflows > 0;
        }
        i++, j++;
    }
    if (ev_a)
        *ev_a = ea;
    if (ev_b)
        *ev_b = eb;
    return m;
}

static int compute(const an_ctx *c, an_run *a)
{
    int T = a->run->ntensors;
    size_t cap = 64, n = 0, maxr = 1;
    for (int t = 0; t < T; t++)
        maxr = a->tpair[t + 1] - a->tpair[t] > maxr ? a->tpair[t + 1] - a->tpair[t] : maxr;
    an_contrast *v = malloc(cap * sizeof *v);
    double *d = malloc((a->run->nrecords + 1) * sizeof *d);
    an_factors *f = malloc(maxr * sizeof *f);
    if (!v || !d || !f) {
        free(v), free(d), free(f);
        return -1;
    }
    for (int t = 0; t < T; t++) {
        fp8_role role = (fp8_role)a->run->tensor_role[t];
        size_t nr;
        const int *rs = an_tensor_recipes(a, t, &nr);
        for (size_t i = 0; i < nr; i++)
            if (a->recipe_ok[rs[i]])
                an_factors_of(&a->recipes[rs[i]], role, &f[i]);
        for (size_t ix = 0; ix < nr; ix++) {
            int x = rs[ix];
            size_t nx;
            an_series(a, t, x, &nx);
            if (!nx || !a->recipe_ok[x] || an_canon(a, t, x) != x)
                continue;
            for (size_t iy = ix + 1; iy < nr; iy++) {
                int y = rs[iy];
                size_t ny;
                an_series(a, t, y, &ny);
                if (!ny || !a->recipe_ok[y] || an_canon(a, t, y) != y)
                    continue;
                int inert = 0, k = an_one_factor(a, t, x, y, &inert);
                if (k < 0)
                    continue;
                int from = an_factors_from_first((an_factor)k, &f[ix], &f[iy]) ? x : y, to = from == x ? y : x;
                size_t m = an_paired(a, t, from, to, d, NULL, NULL, NULL);
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
                o->t = t, o->a = from, o->b = to, o->factor = k, o->eps_inert = inert;
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
    an_on_close_run(an_contrasts_free);
    a->contrasts = calloc(1, sizeof *a->contrasts);
    if (!a->contrasts) {
        free(v);
        return -1;
    }
    a->contrasts->v = v;
    a->contrasts->n = n;
    a->contrasts->tstart = calloc((size_t)T + 2, sizeof *a->contrasts->tstart);
    if (!a->contrasts->tstart) {
        an_contrasts_free(a);
        return -1;
    }
    for (size_t i = 0; i < n; i++) /* computed tensor by tensor: already in order */
        a->contrasts->tstart[v[i].t + 1]++;
    for (int t = 0; t < T; t++)
        a->contrasts->tstart[t + 1] += a->contrasts->tstart[t];
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

const an_contrast *an_tensor_contrasts(const an_ctx *c, an_run *a, int t, size_t *n)
{
    size_t all;
    const an_contrast *v = an_run_contrasts(c, a, &all);
    *n = 0;
    if (!v || t < 0 || t >= a->run->ntensors)
        return NULL;
    *n = a->contrasts->tstart[t + 1] - a->contrasts->tstart[t];
    return v + a->contrasts->tstart[t];
}

const an_contrast *an_find_contrast(const an_ctx *c, an_run *run, int t, int a, int b, int *flip)
{
    size_t n;
    const an_contrast *v = an_tensor_contrasts(c, run, t, &n);
    for (size_t i = 0; i < n; i++)
        if ((v[i].a == a && v[i].b == b) || (v[i].a == b && v[i].b == a)) {
            *flip = v[i].a != a;
            return &v[i];
        }
    return NULL;
}

static int cmp_size(const void *x, const void *y)
{
    size_t a = *(const size_t *)x, b = *(const size_t *)y;
    return (a > b) - (a < b);
}

static int cmp_i64(const void *x, const void *y)
{
    int64_t a = *(const int64_t *)x, b = *(const int64_t *)y;
    return (a > b) - (a < b);
}

typedef struct {
    int factor, role;
    char la[96], lb[96];
    size_t i; /* contrast index */
} gkey;

static int cmp_gkey(const void *x, const void *y)
{
    const gkey *p = x, *q = y;
    int c;
    if (p->factor != q->factor)
        return p->factor < q->factor ? -1 : 1;
    if (p->role != q->role)
        return p->role < q->role ? -1 : 1;
    if ((c = strcmp(p->la, q->la)) != 0 || (c = strcmp(p->lb, q->lb)) != 0)
        return c;
    return (p->i > q->i) - (p->i < q->i);
}

static const size_t *sort_first; /* qsort has no context argument */
static int cmp_first(const void *x, const void *y)
{
    size_t a = sort_first[*(const size_t *)x], b = sort_first[*(const size_t *)y];
    return (a > b) - (a < b);
}

int an_contrast_groups(const an_ctx *c, an_run *a, an_cgroup **out, size_t *ng)
{
    *out = NULL, *ng = 0;
    size_t nc;
    const an_contrast *v = an_run_contrasts(c, a, &nc);
    if (!v && nc)
        return -1;
    /* groups by sorting the contrasts' keys (factor, role, labels), in the
     * order of their first contrast: linear-logarithmic in contrasts, never
     * contrasts x groups */
    gkey *key = malloc((nc + 1) * sizeof *key);
    size_t *first = malloc((nc + 1) * sizeof *first), *gorder = malloc((nc + 1) * sizeof *gorder);
    size_t *gbeg = malloc((nc + 2) * sizeof *gbeg);
    an_cgroup *g = calloc(nc + 1, sizeof *g);
    size_t ns = 0, nrec = a->run->nrecords;
    int64_t *steps = malloc((nrec + 1) * sizeof *steps), *ds = malloc((nrec + 1) * sizeof *ds);
    double *d = malloc((nrec + 1) * sizeof *d);
    if (!key || !first || !gorder || !gbeg || !g || !steps || !ds || !d) {
        free(key), free(first), free(gorder), free(gbeg), free(g), free(steps), free(ds), free(d);
        return -1;
    }
    for (size_t i = 0; i < nc; i++) {
        an_factors fa, fb;
        fp8_role role = (fp8_role)a->run->tensor_role[v[i].t];
        an_factors_of(&a->recipes[v[i].a], role, &fa);
        an_factors_of(&a->recipes[v[i].b], role, &fb);
        key[i].factor = v[i].factor, key[i].role = (int)role, key[i].i = i;
        an_factors_label(&fa, key[i].la, sizeof key[i].la);
        an_factors_label(&fb, key[i].lb, sizeof key[i].lb);
    }
    qsort(key, nc, sizeof *key, cmp_gkey);
    size_t n = 0; /* groups; members of sorted group k are key[gbeg[k] .. gbeg[k+1]) */
    for (size_t i = 0; i < nc; i++)
        if (i == 0 || key[i].factor != key[i - 1].factor || key[i].role != key[i - 1].role ||
            strcmp(key[i].la, key[i - 1].la) || strcmp(key[i].lb, key[i - 1].lb)) {
            gbeg[n] = i;
            first[n] = key[i].i; /* members are in contrast order: the first is the smallest */
            gorder[n] = n;
            n++;
        }
    gbeg[n] = nc;
    sort_first = first;
    qsort(gorder, n, sizeof *gorder, cmp_first);
    /* the run's distinct recorded steps, for per-step group means */
    for (size_t i = 0; i < nrec; i++)
        steps[i] = a->run->summaries[i].step;
    qsort(steps, nrec, sizeof *steps, cmp_i64);
    for (size_t i = 0; i < nrec; i++)
        if (!ns || steps[i] != steps[ns - 1])
            steps[ns++] = steps[i];
    double *sum = calloc(ns + 1, sizeof *sum), *cnt = calloc(ns + 1, sizeof *cnt), *per = malloc((ns + 1) * sizeof *per);
    double *phv = malloc((ns + 1) * sizeof *phv);
    int64_t *pst = malloc((ns + 1) * sizeof *pst);
    size_t *touched = malloc((ns + 1) * sizeof *touched);
    int rc = !sum || !cnt || !per || !touched || !phv || !pst;
    for (size_t o = 0; o < n && !rc; o++) {
        size_t k = gorder[o];
        an_cgroup *G = &g[o];
        const an_contrast *x0 = &v[key[gbeg[k]].i];
        G->factor = key[gbeg[k]].factor, G->role = key[gbeg[k]].role;
        snprintf(G->la, sizeof G->la, "%s", key[gbeg[k]].la);
        snprintf(G->lb, sizeof G->lb, "%s", key[gbeg[k]].lb);
        G->ra = x0->a, G->rb = x0->b;
        size_t pos = 0, nonzero = 0, nt = 0;
        double ua = 0, ub = 0, oa = 0, ob = 0, na = 0, nb = 0;
        for (size_t m0 = gbeg[k]; m0 < gbeg[k + 1]; m0++) {
            const an_contrast *x = &v[key[m0].i];
            G->tensors++;
            G->eps_inert += x->eps_inert;
            int sg = an_contrast_sign(x);
            G->to_better += sg > 0, G->from_better += sg < 0, G->neither += sg == 0;
            pos += x->d.mean > 0, nonzero += x->d.mean != 0;
            size_t m = an_paired(a, x->t, x->a, x->b, d, ds, NULL, NULL);
            for (size_t j = 0; j < m; j++) {
                const int64_t *q = bsearch(&ds[j], steps, ns, sizeof *steps, cmp_i64);
                if (!q)
                    continue;
                size_t sj = (size_t)(q - steps);
                if (cnt[sj] == 0)
                    touched[nt++] = sj;
                sum[sj] += d[j], cnt[sj] += 1;
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
        G->sign_p = an_sign_test(pos, nonzero);
        G->under_a = na > 0 ? ua / na : NAN, G->under_b = nb > 0 ? ub / nb : NAN;
        G->over_a = na > 0 ? oa / na : NAN, G->over_b = nb > 0 ? ob / nb : NAN;
        /* per-step means in step order; only the touched steps are reset */
        qsort(touched, nt, sizeof *touched, cmp_size);
        for (size_t j = 0; j < nt; j++) {
            per[j] = sum[touched[j]] / cnt[touched[j]];
            pst[j] = steps[touched[j]];
            sum[touched[j]] = 0, cnt[touched[j]] = 0;
        }
        an_mean_ci(per, nt, c->boot, c->seed, &G->d);
        an_robust_of(per, pst, nt, &G->robust);
        for (int ph = 0; ph < AN_NPHASE; ph++) { /* the phases apart */
            size_t m = 0;
            for (size_t j = 0; j < nt; j++)
                if (an_phase(c, a, pst[j]) == ph)
                    phv[m++] = per[j];
            an_mean_ci(phv, m, c->boot, c->seed, &G->ph[ph]);
        }
    }
    free(sum), free(cnt), free(per), free(touched), free(phv), free(pst);
    free(key), free(first), free(gorder), free(gbeg), free(steps), free(ds), free(d);
    if (rc) {
        free(g);
        return -1;
    }
    *out = g, *ng = n;
    return 0;
}
