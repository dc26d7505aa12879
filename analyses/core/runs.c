/*
 * runs.c — the analyses' runs: opened (an_open), indexed by (tensor,
 * recipe) and by step, asked for their series, snapshots and recipes, and
 * closed with the caches the analyses registered.
 */
#include <errno.h>
#include <gsl/gsl_sort.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bigmem.h"
#include "analysis.h"
#include "factors.h"
#include "fp8_error.h"
#include "fp8_file.h"
#include "fp8_ranks.h"
#include "hash.h"

/* (the phases ask this once per step they place: an_open finds it once) */
static int64_t find_run_steps(const an_run *a)
{
    const char *s = fp8_run_meta(a->run, "steps");
    char *end;
    long long v = s ? strtoll(s, &end, 10) : 0;
    if (s && end != s && !*end && v > 0 && v <= FP8_STEP_MAX)
        return v;
    int64_t last = -1;
    for (size_t i = 0; i < a->run->nrecords; i++)
        last = a->run->summaries[i].step > last ? a->run->summaries[i].step : last;
    for (size_t i = 0; i < a->run->nsteps; i++)
        last = a->run->steps[i].step > last ? a->run->steps[i].step : last;
    return last + 1;
}

int64_t an_run_steps(const an_run *a) { return a->steps > 0 ? a->steps : find_run_steps(a); }

static const fp8_summary *sort_recs;

static int cmp_series(const void *a, const void *b)
{
    const fp8_summary *x = &sort_recs[*(const size_t *)a], *y = &sort_recs[*(const size_t *)b];
    if (x->step != y->step)
        return x->step < y->step ? -1 : 1;
    if (x->active != y->active)
        return x->active > y->active ? -1 : 1; /* the active copy first */
    return *(const size_t *)a < *(const size_t *)b ? -1 : 1;
}

/* The (tensor, recipe) pairs that have records or every-step rows, sorted;
 * a hash from the pair's key to its id while building.  Everything indexed
 * per pair costs what the file holds, never tensors x recipes (a run with
 * 100,000 recipes over 10,000 tensors has 10^9 such cells). */
static uint64_t pair_key(uint32_t t, uint32_t r) { return (uint64_t)t << 32 | r; }

static uint64_t keys_hash(const void *items, size_t i) { return fp8__mix64(((const uint64_t *)items)[i]); }

static int keys_eq(const void *items, size_t i, const void *key)
{
    return ((const uint64_t *)items)[i] == *(const uint64_t *)key;
}

/* the run's pair keys, sorted, and an index (hash.h) whose item numbers are
 * their positions: a key's pair id */
typedef struct {
    fp8__index ix;
    uint64_t *keys;
} pair_hash;

static size_t pair_id(const pair_hash *h, uint64_t k)
{
    return (size_t)fp8__index_find(&h->ix, fp8__mix64(k), keys_eq, h->keys, &k);
}

static int cmp_u64(const void *x, const void *y)
{
    uint64_t a = *(const uint64_t *)x, b = *(const uint64_t *)y;
    return (a > b) - (a < b);
}

static int index_pairs(an_run *a, pair_hash *h)
{
    const fp8_run *r = a->run;
    size_t n = r->nrecords + r->nsteps;
    uint64_t *uniq = fp8__malloc_big((n + 1) * sizeof *uniq); /* (per-record arrays: huge pages, bigmem.h) */
    a->tpair = calloc((size_t)r->ntensors + 2, sizeof *a->tpair);
    h->keys = uniq;
    if (!uniq || !a->tpair)
        return -1;
    fp8__index seen = {0}; /* the distinct keys, in order of first sight */
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        uint64_t k = i < r->nrecords ? pair_key(r->summaries[i].tensor, r->summaries[i].recipe)
                                     : pair_key(r->steps[i - r->nrecords].tensor, r->steps[i - r->nrecords].recipe);
        uint64_t kh = fp8__mix64(k);
        if (fp8__index_find(&seen, kh, keys_eq, uniq, &k) >= 0)
            continue;
        if (fp8__index_reserve(&seen, keys_hash, uniq) != 0) {
            fp8__index_free(&seen);
            return -1;
        }
        uniq[m++] = k;
        fp8__index_add(&seen, kh);
    }
    fp8__index_free(&seen);
    qsort(uniq, m, sizeof *uniq, cmp_u64);
    a->npairs = m;
    a->pair_recipe = malloc((m + 1) * sizeof *a->pair_recipe);
    if (!a->pair_recipe)
        return -1;
    for (size_t i = 0; i < m; i++) { /* indexed again in sorted order: item i is pair id i */
        if (fp8__index_reserve(&h->ix, keys_hash, uniq) != 0)
            return -1;
        fp8__index_add(&h->ix, fp8__mix64(uniq[i]));
        a->pair_recipe[i] = (int)(uint32_t)uniq[i];
        a->tpair[(uniq[i] >> 32) + 1]++;
    }
    for (int t = 0; t < r->ntensors; t++)
        a->tpair[t + 1] += a->tpair[t];
    return 0;
}

int an_pair(const an_run *a, int t, int r)
{
    if (t < 0 || r < 0 || t >= a->run->ntensors || r >= a->run->nrecipes || !a->tpair)
        return -1;
    size_t lo = a->tpair[t], hi = a->tpair[t + 1];
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (a->pair_recipe[mid] < r)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < a->tpair[t + 1] && a->pair_recipe[lo] == r ? (int)lo : -1;
}

const int *an_tensor_recipes(const an_run *a, int t, size_t *n)
{
    if (t < 0 || t >= a->run->ntensors || !a->tpair) {
        *n = 0;
        return NULL;
    }
    *n = a->tpair[t + 1] - a->tpair[t];
    return a->pair_recipe + a->tpair[t];
}

/* A counting sort: order[start[p] .. start[p + 1]) becomes the i with
 * pid[i] == p, in ascending i (start: P + 1 zeros in, fill: P zeros) */
static void bucket_order(const size_t *pid, size_t n, size_t P, size_t *start, size_t *order, size_t *fill)
{
    for (size_t i = 0; i < n; i++)
        start[pid[i] + 1]++;
    for (size_t k = 0; k < P; k++)
        start[k + 1] += start[k];
    for (size_t i = 0; i < n; i++)
        order[start[pid[i]] + fill[pid[i]]++] = i;
}

static int index_run(an_run *a, const pair_hash *h)
{
    const fp8_run *r = a->run;
    size_t T = (size_t)r->ntensors, R = (size_t)r->nrecipes, n = r->nrecords, P = a->npairs;
    a->start = calloc(P + 2, sizeof *a->start);
    a->order = fp8__malloc_big((n + 1) * sizeof *a->order);
    a->active = malloc((T + 1) * sizeof *a->active);
    a->recipes = calloc(R + 1, sizeof *a->recipes);
    a->recipe_ok = calloc(R + 1, sizeof *a->recipe_ok);
    size_t *fill = calloc(P + 1, sizeof *fill), *pid = fp8__malloc_big((n + 1) * sizeof *pid);
    if (!a->start || !a->order || !a->active || !a->recipes || !a->recipe_ok || !fill || !pid) {
        free(fill), free(pid);
        return -1;
    }
    for (size_t r0 = 0; r0 < R; r0++)
        a->recipe_ok[r0] = fp8_recipe_parse(r->recipe_spec[r0], &a->recipes[r0]) == FP8_OK;
    for (size_t t = 0; t < T; t++)
        a->active[t] = -1;
    /* counting sort by pair, then steps within each series */
    for (size_t i = 0; i < n; i++) {
        const fp8_summary *s = &r->summaries[i];
        pid[i] = pair_id(h, pair_key(s->tensor, s->recipe));
        if (s->active && a->active[s->tensor] < 0)
            a->active[s->tensor] = (int)s->recipe;
    }
    bucket_order(pid, n, P, a->start, a->order, fill);
    free(fill);
    free(pid);
    /* sort each series by step where the file did not already have it in order,
     * and drop repeated steps (an older writer stored a shadow equal to the
     * active recipe twice): compact in place, keeping the active copy */
    sort_recs = r->summaries;
    size_t out = 0, gaps[8] = {0};
    int64_t gapv[8] = {0};
    for (size_t k = 0; k < P; k++) {
        size_t b = a->start[k], e = a->start[k + 1], sorted = 1;
        for (size_t i = b + 1; i < e && sorted; i++)
            sorted = r->summaries[a->order[i]].step > r->summaries[a->order[i - 1]].step;
        if (!sorted)
            qsort(a->order + b, e - b, sizeof *a->order, cmp_series);
        a->start[k] = out;
        for (size_t i = b; i < e; i++) {
            if (i > b && r->summaries[a->order[i]].step == r->summaries[a->order[out - 1]].step)
                continue;
            if (i > b) { /* the most common step gap, among a few candidates */
                int64_t g = r->summaries[a->order[i]].step - r->summaries[a->order[out - 1]].step;
                for (int j = 0; j < 8; j++)
                    if (gapv[j] == g || gaps[j] == 0) {
                        gapv[j] = g, gaps[j]++;
                        break;
                    }
            }
            a->order[out++] = a->order[i];
        }
    }
    a->start[P] = out;
    a->record_every = 1;
    size_t best = 0;
    for (int j = 0; j < 8; j++)
        if (gaps[j] > best)
            best = gaps[j], a->record_every = gapv[j];
    return 0;
}

static const fp8_step_row *sort_steps;
static int cmp_steprow(const void *a, const void *b)
{
    int64_t x = sort_steps[*(const size_t *)a].step, y = sort_steps[*(const size_t *)b].step;
    return (x > y) - (x < y);
}

/* The every-step rows grouped by (tensor, recipe) in step order (a repeated
 * step keeps its first row), the canonical recipe of each tensor x recipe,
 * and each tensor's warm-up end. */
static const an_factors *sort_fac;
static const fp8_recipe *sort_rec;
static const int *sort_pr;

/* pairs of one tensor by numerics, then plain before hybrid, then recipe id */
static int cmp_numerics(const void *x, const void *y)
{
    size_t i = *(const size_t *)x, j = *(const size_t *)y;
    int c = an_factors_cmp(&sort_fac[i], &sort_fac[j]);
    if (c)
        return c;
    int hi = sort_rec[sort_pr[i]].hybrid, hj = sort_rec[sort_pr[j]].hybrid;
    if (hi != hj)
        return hi - hj;
    return (sort_pr[i] > sort_pr[j]) - (sort_pr[i] < sort_pr[j]);
}

static int index_series(an_run *a, const pair_hash *h)
{
    const fp8_run *r = a->run;
    size_t T = (size_t)r->ntensors, n = r->nsteps, P = a->npairs;
    a->sstart = calloc(P + 2, sizeof *a->sstart);
    a->sorder = fp8__malloc_big((n + 1) * sizeof *a->sorder);
    a->warm_end = malloc((T + 1) * sizeof *a->warm_end);
    a->canon = malloc((P + 1) * sizeof *a->canon);
    size_t *fill = calloc(P + 1, sizeof *fill), *pid = fp8__malloc_big((n + 1) * sizeof *pid);
    if (!a->sstart || !a->sorder || !a->warm_end || !a->canon || !fill || !pid) {
        free(fill), free(pid);
        return -1;
    }
    for (size_t i = 0; i < n; i++)
        pid[i] = pair_id(h, pair_key(r->steps[i].tensor, r->steps[i].recipe));
    bucket_order(pid, n, P, a->sstart, a->sorder, fill);
    free(fill);
    free(pid);
    sort_steps = r->steps;
    size_t out = 0;
    for (size_t k = 0; k < P; k++) {
        size_t b = a->sstart[k], e = a->sstart[k + 1], sorted = 1;
        for (size_t i = b + 1; i < e && sorted; i++)
            sorted = r->steps[a->sorder[i]].step > r->steps[a->sorder[i - 1]].step;
        if (!sorted)
            qsort(a->sorder + b, e - b, sizeof *a->sorder, cmp_steprow);
        a->sstart[k] = out;
        for (size_t i = b; i < e; i++)
            if (i == b || r->steps[a->sorder[i]].step != r->steps[a->sorder[out - 1]].step)
                a->sorder[out++] = a->sorder[i];
    }
    a->sstart[P] = out;
    /* canonical recipes: among a tensor's recipes with the same factors, the
     * plain one before the hybrid, then the lowest id (a sort per tensor,
     * not a pairwise search) */
    an_factors *f = malloc((P + 1) * sizeof *f);
    size_t *ord = malloc((P + 1) * sizeof *ord);
    if (!f || !ord) {
        free(f), free(ord);
        return -1;
    }
    for (size_t t = 0; t < T; t++) {
        size_t b = a->tpair[t], e = a->tpair[t + 1], m = 0;
        for (size_t k = b; k < e; k++) {
            a->canon[k] = a->pair_recipe[k];
            if (a->recipe_ok[a->pair_recipe[k]]) {
                an_factors_of(&a->recipes[a->pair_recipe[k]], (fp8_role)r->tensor_role[t], &f[k]);
                ord[m++] = k;
            }
        }
        sort_fac = f, sort_rec = a->recipes, sort_pr = a->pair_recipe;
        qsort(ord, m, sizeof *ord, cmp_numerics);
        for (size_t i = 0, g = 0; i < m; i++) {
            if (i > 0 && an_factors_cmp(&f[ord[i]], &f[ord[g]]) != 0)
                g = i;
            a->canon[ord[i]] = a->pair_recipe[ord[g]];
        }
    }
    free(f);
    free(ord);
    /* warm-up: up to the first step with a real amax, on tensors with a delayed recipe */
    for (size_t t = 0; t < T; t++) {
        a->warm_end[t] = INT64_MIN;
        int delayed = 0, src = -1;
        size_t best = 0;
        for (size_t k = a->tpair[t]; k < a->tpair[t + 1]; k++) {
            int q = a->pair_recipe[k];
            size_t ns = a->sstart[k + 1] - a->sstart[k];
            delayed |= a->recipe_ok[q] && a->recipes[q].kind == FP8_RECIPE_DELAYED;
            if (ns > best)
                best = ns, src = q;
        }
        if (!delayed)
            continue;
        a->warm_end[t] = INT64_MAX; /* no real amax yet: all warm-up */
        if (src >= 0) {
            size_t ns;
            const size_t *ix = an_steps(a, (int)t, src, &ns);
            for (size_t i = 0; i < ns; i++)
                if (r->steps[ix[i]].amax > 0 && isfinite(r->steps[ix[i]].amax)) {
                    a->warm_end[t] = r->steps[ix[i]].step + 1;
                    break;
                }
        } else {
            int in = an_input_recipe(a, (int)t);
            size_t nr;
            const size_t *ix = an_series(a, (int)t, in, &nr);
            for (size_t i = 0; i < nr; i++)
                if (an_rec(a, ix[i])->amax > 0 && isfinite(an_rec(a, ix[i])->amax)) {
                    a->warm_end[t] = an_rec(a, ix[i])->step + 1;
                    break;
                }
        }
    }
    return 0;
}

const size_t *an_steps(const an_run *a, int t, int r, size_t *n)
{
    int k = a->sstart ? an_pair(a, t, r) : -1;
    if (k < 0) {
        *n = 0;
        return NULL;
    }
    *n = a->sstart[k + 1] - a->sstart[k];
    return a->sorder + a->sstart[k];
}

int an_canon(const an_run *a, int t, int r)
{
    int k = an_pair(a, t, r);
    return k < 0 || !a->canon ? r : a->canon[k];
}

int an_overflows_at(const fp8_format *f, const fp8_cast_mode *mode, float amax, float scale, unsigned nonfinite)
{
    if (nonfinite & 1u)
        return 1;
    fp8_class cls;
    fp8_format_encode(f, mode, amax * scale, 0, &cls);
    return cls == FP8_CLASS_SATURATED || cls == FP8_CLASS_OVERFLOW;
}

int an_open(an_ctx *c, const char *const *paths, int n)
{
    c->runs = calloc((size_t)n + 1, sizeof *c->runs);
    if (!c->runs) {
        fprintf(stderr, "fp8prof: out of memory\n");
        return 1;
    }
    for (int i = 0; i < n; i++) {
        an_run *a = &c->runs[c->nruns];
        a->run = fp8_run_load_summary(paths[i], c->tensor);
        if (!a->run) {
            fprintf(stderr, "fp8prof: %s\n", fp8_error_message());
            return 1;
        }
        c->nruns++;
        if (a->run->unreadable_records)
            fprintf(stderr, "fp8prof: %s: the last %zu records cannot be read (a write torn when the writer was "
                            "killed?); the analyses use the records before them\n",
                    paths[i], a->run->unreadable_records);
        if (a->run->unreadable_rows)
            fprintf(stderr, "fp8prof: %s: %zu rows of the every-step series and indexes cannot be read; the analyses "
                            "use the rows before them\n",
                    paths[i], a->run->unreadable_rows);
        if (c->tensor && a->run->nrecords == 0) {
            fprintf(stderr, "fp8prof: %s: no tensor matches '%s'; its tensors:", paths[i], c->tensor);
            for (int t = 0; t < a->run->ntensors && t < 12; t++)
                fprintf(stderr, " %s", a->run->tensor_name[t]);
            fprintf(stderr, "%s\n", a->run->ntensors > 12 ? " ..." : a->run->ntensors ? "" : " (none)");
            return 1;
        }
        const char *b = strrchr(paths[i], '/');
        snprintf(a->label, sizeof a->label, "%s", b ? b + 1 : paths[i]);
        char *dot = strstr(a->label, ".h5");
        if (dot && dot[3] == 0)
            *dot = 0;
        for (char *q = a->label; *q; q++) /* labels are words in tables and plot scripts */
            if (*q == ' ' || *q == '\t' || *q == '\'' || *q == '"' || *q == '|')
                *q = '_';
        /* a run that recorded a recipe without applying it is named so in every
         * table, figure and summary line: it is not an FP8 run */
        const char *ap = fp8_run_meta(a->run, "applied"), *rr = fp8_run_meta(a->run, "recorded_recipe");
        if (ap && !strcmp(ap, "no") && rr && !strstr(a->label, "record-only")) {
            size_t l = strlen(a->label);
            snprintf(a->label + (l < 50 ? l : 50), sizeof a->label - (l < 50 ? l : 50), "_record-only");
        }
        if (a->run->nrecords == 0 && a->run->nscalars == 0) {
            fprintf(stderr, "fp8prof: %s: the run is empty (no records, no scalars)\n", paths[i]);
            return 1;
        }
        pair_hash h = {0};
        a->steps = find_run_steps(a);
        int bad = index_pairs(a, &h) || index_run(a, &h) || index_series(a, &h);
        fp8__index_free(&h.ix), free(h.keys);
        if (bad) {
            fprintf(stderr, "fp8prof: %s: out of memory indexing the run\n", paths[i]);
            return 1;
        }
    }
    /* two runs with the same file name: tell them apart by position */
    for (int i = 0; i < c->nruns; i++)
        for (int j = i + 1; j < c->nruns; j++)
            if (strcmp(c->runs[i].label, c->runs[j].label) == 0) {
                size_t l = strlen(c->runs[j].label);
                snprintf(c->runs[j].label + (l < 52 ? l : 52), 12, "#%d", (j + 1) % 1000);
            }
    return 0;
}

/* the registered cache frees (an_on_close_run, an_on_close_ctx) */
#define AN_MAX_CLOSERS 8
static void (*run_closers[AN_MAX_CLOSERS])(an_run *);
static void (*ctx_closers[AN_MAX_CLOSERS])(an_ctx *);

void an_on_close_run(void (*fn)(an_run *a))
{
    for (int i = 0; i < AN_MAX_CLOSERS; i++)
        if (run_closers[i] == fn || !run_closers[i]) {
            run_closers[i] = fn;
            return;
        }
    abort(); /* more cache kinds than slots: a programming error */
}

void an_on_close_ctx(void (*fn)(an_ctx *c))
{
    for (int i = 0; i < AN_MAX_CLOSERS; i++)
        if (ctx_closers[i] == fn || !ctx_closers[i]) {
            ctx_closers[i] = fn;
            return;
        }
    abort();
}

void an_close(an_ctx *c)
{
    for (int k = 0; k < AN_NJSON; k++) {
        if (c->jf[k])
            fclose(c->jf[k]);
        free(c->json[k]);
        c->jf[k] = NULL, c->json[k] = NULL, c->jsonn[k] = 0, c->jcount[k] = 0;
    }
    for (int i = 0; i < c->nruns; i++) {
        an_run *a = &c->runs[i];
        for (int k = 0; k < AN_MAX_CLOSERS && run_closers[k]; k++)
            run_closers[k](a);
        fp8_run_free(a->run);
        free(a->recipes), free(a->recipe_ok), free(a->start), free(a->order), free(a->active);
        free(a->sstart), free(a->sorder), free(a->warm_end), free(a->canon);
        free(a->tpair), free(a->pair_recipe);
    }
    free(c->runs);
    for (int i = 0; i < c->nfindings; i++)
        free(c->findings[i]);
    for (int q = 0; q < AN_NQ; q++) {
        free(c->key[q]), free(c->key_missing[q]);
        c->key[q] = c->key_missing[q] = NULL;
    }
    free(c->frows);
    c->frows = NULL, c->nfrows = c->capfrows = 0;
    for (int k = 0; k < AN_MAX_CLOSERS && ctx_closers[k]; k++)
        ctx_closers[k](c);
    c->runs = NULL;
    c->nruns = c->nfindings = 0;
}

const size_t *an_series(const an_run *a, int t, int r, size_t *n)
{
    int k = a->start ? an_pair(a, t, r) : -1;
    if (k < 0) {
        *n = 0;
        return NULL;
    }
    *n = a->start[k + 1] - a->start[k];
    return a->order + a->start[k];
}

int an_input_recipe(const an_run *a, int t)
{
    size_t n;
    if (a->active[t] >= 0 && (an_series(a, t, a->active[t], &n), n > 0))
        return a->active[t];
    int best = -1;
    size_t bn = 0, nr;
    const int *rs = an_tensor_recipes(a, t, &nr);
    for (size_t i = 0; i < nr; i++)
        if (an_series(a, t, rs[i], &n), n > bn)
            bn = n, best = rs[i];
    return best;
}

size_t an_snapshots(const an_run *a, int t, size_t *idx)
{
    size_t ns = 0;
    for (size_t i = 0; i < a->run->nsnapshots && ns < AN_MAX_SNAPSHOTS; i++)
        if ((int)a->run->snapshots[i].tensor == t)
            idx[ns++] = i;
    return ns;
}

int an_delayed_recipe(const an_run *a, int t)
{
    int d = -1;
    size_t nr;
    const int *rs = an_tensor_recipes(a, t, &nr);
    for (size_t i = 0; i < nr; i++) {
        int r = rs[i];
        size_t n;
        an_series(a, t, r, &n);
        if (n && a->recipe_ok[r] && a->recipes[r].kind == FP8_RECIPE_DELAYED && (d < 0 || r == a->active[t]))
            d = r;
    }
    return d;
}
