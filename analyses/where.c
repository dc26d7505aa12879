/*
 * where.c — the report's first question across runs: does per-tensor
 * delayed scaling overflow, and where?  compare adds each tensor's verdict
 * of each run (an_where_add); an_where_render writes the tensor x run grid
 * at the top of compare's section, summary.json's "verdicts" and the
 * summary line, which reads the runs that cast with delayed scaling (their
 * delayed shadows only when no run did, and says so).
 */
#include <stdlib.h>
#include <string.h>

#include "analysis.h"
#include "compare_notes.h"
#include "where.h"
#include "factors.h"
#include "keys.h"

typedef struct {
    int run, t;
    an_verdict v;
    int cast; /* the delayed recipe judged is the one the run cast the tensor with */
    size_t events, steps;
    size_t ph_ev[AN_NPHASE], ph_steps[AN_NPHASE];
    char why[160], dlabel[96];
} wrow;

struct an_where {
    wrow *r;
    size_t n, cap;
};

void an_where_add(an_ctx *c, an_run *a, int t, an_verdict v, const an_vinfo *vi)
{
    if (vi->D < 0)
        return;
    struct an_where *w = c->where;
    if (!w)
        an_on_close_ctx(an_where_free);
    if (!w && !(w = c->where = calloc(1, sizeof *w)))
        return;
    if (w->n == w->cap) {
        size_t cap = w->cap ? 2 * w->cap : 64;
        wrow *r = realloc(w->r, cap * sizeof *r);
        if (!r)
            return;
        w->r = r, w->cap = cap;
    }
    wrow *o = &w->r[w->n++];
    memset(o, 0, sizeof *o);
    o->run = (int)(a - c->runs), o->t = t, o->v = v;
    o->cast = a->active[t] >= 0 && an_canon(a, t, a->active[t]) == an_canon(a, t, vi->D);
    o->events = vi->events_d, o->steps = vi->steps_d;
    an_tensor_phase_events(c, a, t, vi->D, o->ph_ev, o->ph_steps);
    snprintf(o->why, sizeof o->why, "%s", vi->why);
    an_factors f;
    an_factors_of(&a->recipes[vi->D], (fp8_role)a->run->tensor_role[t], &f);
    an_factors_label(&f, o->dlabel, sizeof o->dlabel);
}

void an_where_free(an_ctx *c)
{
    if (c->where)
        free(c->where->r);
    free(c->where);
    c->where = NULL;
}

static const char *tname(const an_ctx *c, const wrow *r) { return c->runs[r->run].run->tensor_name[r->t]; }

/* one tensor across runs (rows of the same name), for ranking */
typedef struct {
    const char *name;
    int role;
    size_t total, lo, hi;
    int runs;
} wtensor;

static int by_total(const void *x, const void *y)
{
    const wtensor *a = x, *b = y;
    return (a->total < b->total) - (a->total > b->total);
}

/* the tensors of the rows that `use` selects, ranked by their events */
static size_t rank_tensors(const an_ctx *c, const struct an_where *w, const unsigned char *use, wtensor *out)
{
    size_t n = 0;
    for (size_t i = 0; i < w->n; i++) {
        if (!use[i])
            continue;
        const wrow *r = &w->r[i];
        size_t k = 0;
        while (k < n && strcmp(out[k].name, tname(c, r)) != 0)
            k++;
        if (k == n)
            out[n++] = (wtensor){tname(c, r), c->runs[r->run].run->tensor_role[r->t], 0, r->events, r->events, 0};
        wtensor *x = &out[k];
        x->total += r->events, x->runs++;
        x->lo = r->events < x->lo ? r->events : x->lo;
        x->hi = r->events > x->hi ? r->events : x->hi;
    }
    qsort(out, n, sizeof *out, by_total);
    return n;
}

static const char *short_verdict(an_verdict v)
{
    static const char *s[] = {"n/a", "safe", "JIT", "blocks"};
    return s[v];
}

void an_where_render(an_ctx *c, const char *flushed)
{
    struct an_where *w = c->where;
    if (!w || !w->n)
        return;
    unsigned char *use = calloc(w->n, 1);
    wtensor *tt = calloc(w->n, sizeof *tt);
    if (!use || !tt) {
        free(use), free(tt);
        return;
    }
    /* the runs that cast with delayed scaling; else every run's shadows */
    int cast_runs = 0, *is_cast = calloc((size_t)c->nruns + 1, sizeof *is_cast);
    for (size_t i = 0; is_cast && i < w->n; i++)
        is_cast[w->r[i].run] |= w->r[i].cast;
    for (int i = 0; is_cast && i < c->nruns; i++)
        cast_runs += is_cast[i];
    for (size_t i = 0; i < w->n; i++)
        use[i] = cast_runs ? w->r[i].cast : 1;
    /* the grid: every tensor by its events over all runs, a column per run */
    unsigned char *all = malloc(w->n);
    size_t nt = 0;
    if (all) {
        memset(all, 1, w->n);
        nt = rank_tensors(c, w, all, tt);
    }
    fprintf(c->md, "### Across the runs: where delayed scaling overflows, and the verdict per tensor\n\n"
                   "Per tensor and run: the verdict of the rule below and the overflow events after warm-up of the "
                   "tensor's delayed recipe (every step); *(s)*: that recipe is a shadow in the run (it cast the "
                   "tensor otherwise). Sorted by events over the runs.\n\n| tensor | role |");
    for (int i = 0; i < c->nruns; i++)
        fprintf(c->md, " %s |", c->runs[i].label);
    fprintf(c->md, "\n|---|---|");
    for (int i = 0; i < c->nruns; i++)
        fprintf(c->md, "---|");
    fprintf(c->md, "\n");
    for (size_t k = 0; k < nt; k++) {
        fprintf(c->md, "| `%s` | %s |", tt[k].name, fp8_role_name((fp8_role)tt[k].role));
        for (int ri = 0; ri < c->nruns; ri++) {
            const wrow *r = NULL;
            for (size_t i = 0; i < w->n && !r; i++)
                if (w->r[i].run == ri && !strcmp(tname(c, &w->r[i]), tt[k].name))
                    r = &w->r[i];
            if (r)
                fprintf(c->md, " %s, %zu%s |", short_verdict(r->v), r->events, r->cast ? "" : " (s)");
            else
                fprintf(c->md, " – |");
        }
        fprintf(c->md, "\n");
    }
    fprintf(c->md, "\n");
    /* summary.json: every verdict */
    for (size_t i = 0; i < w->n; i++) {
        const wrow *r = &w->r[i];
        FILE *j = an_json(c, AN_J_VERDICTS);
        if (!j)
            break;
        fputs("{\"run\": ", j), an_json_str(j, c->runs[r->run].label);
        fputs(", \"tensor\": ", j), an_json_str(j, tname(c, r));
        fputs(", \"role\": ", j), an_json_str(j, fp8_role_name((fp8_role)c->runs[r->run].run->tensor_role[r->t]));
        fputs(", \"verdict\": ", j), an_json_str(j, an_verdict_name(r->v));
        fputs(", \"delayed_recipe\": ", j), an_json_str(j, r->dlabel);
        fprintf(j, ", \"delayed_is_cast\": %s, \"overflow_events\": %zu, \"event_steps\": %zu, \"evidence\": ",
                r->cast ? "true" : "false", r->events, r->steps);
        an_json_str(j, r->why);
        fputs("}", j);
    }
    /* the summary line, over the rows in use */
    an_span material = {0, 0, 0};
    int tensors = 0, verd[4] = {0};
    size_t ph[AN_NPHASE] = {0}, evs = 0;
    for (int ri = 0; ri < c->nruns; ri++) {
        int m = 0, any = 0, nten = 0;
        for (size_t i = 0; i < w->n; i++) {
            const wrow *r = &w->r[i];
            if (!use[i] || r->run != ri)
                continue;
            any = 1, nten++;
            m += (int)r->events >= c->min_events;
            verd[r->v]++;
            for (int p = 0; p < AN_NPHASE; p++)
                ph[p] += r->ph_ev[p], evs += r->ph_ev[p];
        }
        if (any)
            an_span_add(&material, m), tensors = nten > tensors ? nten : tensors;
    }
    size_t nu = rank_tensors(c, w, use, tt);
    char top[600] = "", sp[48];
    size_t l = 0;
    for (size_t k = 0; k < nu && k < 3 && tt[k].total > 0; k++) {
        an_span e = {0, 0, 0};
        an_span_add(&e, (double)tt[k].lo), an_span_add(&e, (double)tt[k].hi);
        l += (size_t)snprintf(top + l, sizeof top - l, "%s`%s` (%s a run)", k ? ", " : "", tt[k].name,
                              an_span_fmt(&e, "%.0f", sp, sizeof sp));
    }
    char phases[240] = "";
    if (evs) {
        int known = 0;
        for (int ri = 0; ri < c->nruns; ri++)
            known |= an_lr_warmup(c, &c->runs[ri]) >= 0;
        if (known)
            snprintf(phases, sizeof phases, "; of those runs' %zu overflow events, %.0f%% fell in the LR warm-up, "
                                            "%.0f%% early, %.0f%% in the steady phase",
                     evs, 100.0 * (double)ph[0] / (double)evs, 100.0 * (double)ph[1] / (double)evs,
                     100.0 * (double)ph[2] / (double)evs);
        else
            snprintf(phases, sizeof phases, "; of those runs' %zu overflow events, %.0f%% fell in the first 10%% of "
                                            "the steps (no LR warm-up known)",
                     evs, 100.0 * (double)(ph[0] + ph[1]) / (double)evs);
    }
    int yes = material.n && material.hi > 0;
    char who[160];
    if (cast_runs)
        snprintf(who, sizeof who, "in the %d run%s that cast with delayed scaling", cast_runs, cast_runs == 1 ? "" : "s");
    else
        snprintf(who, sizeof who, "under the runs' delayed *shadows* (no run cast with delayed scaling)");
    char slug[160];
    an_slug("Across the runs: where delayed scaling overflows, and the verdict per tensor", slug, sizeof slug);
    an_key(c, AN_Q_WHERE, "Recipes compared",
           "**%s** — %s, %s of %d tensors overflowed at %d or more steps after warm-up%s%s%s; per tensor and run: "
           "delayed is safe %d, needs JIT %d, needs blocks %d%s%s",
           yes ? "Yes" : "No", who, an_span_fmt(&material, "%.0f", sp, sizeof sp), tensors, c->min_events,
           material.n > 1 ? " (range over the runs)" : "", top[0] ? "; most events: " : "", top, verd[1], verd[2],
           verd[3], phases, flushed && *flushed ? flushed : "");
    snprintf(c->key_anchor[AN_Q_WHERE], sizeof c->key_anchor[AN_Q_WHERE], "%s", slug);
    if (top[0])
        an_finding(c, "risk", "delayed scaling (%s) overflowed at >= %d steps after warm-up on %s of %d tensors; most "
                              "events: %s", cast_runs ? "as cast" : "shadows", c->min_events,
                   an_span_fmt(&material, "%.0f", sp, sizeof sp), tensors, top);
    free(use), free(tt), free(all), free(is_cast);
}
