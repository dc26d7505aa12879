/*
 * series.c — one tensor under one recipe over its statistics steps after
 * warm-up: its statistics (an_series_stats, kept per run by
 * an_series_cached; the verdicts built on them are in verdicts.c).
 * Definitions: docs/analyses.md, "compare".
 */
#include <gsl/gsl_statistics_double.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "analysis.h"
#include "factors.h"
#include "series.h"

int an_per_tensor_scale(const fp8_recipe *p)
{
    return p->kind == FP8_RECIPE_DELAYED || p->kind == FP8_RECIPE_CURRENT || p->kind == FP8_RECIPE_NONE;
}

int an_series_stats(const an_run *a, int t, int r, an_sstats *o)
{
    size_t n;
    const size_t *s = an_series(a, t, r, &n);
    memset(o, 0, sizeof *o);
    o->sqnr_p05 = o->sqnr_p50 = o->sqnr_p95 = o->relerr_p50 = o->relerr_p95 = NAN;
    o->scale_log2_sd = o->block_spread = o->te_overflow_rate = NAN;
    if (!n)
        return 0;
    double *v = malloc(n * sizeof *v), *w = malloc(n * sizeof *w);
    if (!v || !w) {
        free(v), free(w);
        return -1;
    }
    /* counts a file does not carry (imported logs) are UINT64_MAX: each rate
     * is over the records that carry its count */
    double ov = 0, te = 0, un = 0, sb = 0, d1 = 0, d2 = 0, spread = 0, n_ov = 0, n_un = 0, n_sb = 0;
    size_t nv = 0, nw = 0, nd = 0, nspread = 0, te_known = 1;
    const fp8_summary *prev = NULL;
    for (size_t i = 0; i < n; i++) {
        const fp8_summary *x = an_rec(a, s[i]);
        int kov = x->overflows != UINT64_MAX, kun = x->underflows != UINT64_MAX, ksb = x->subnormals != UINT64_MAX;
        if (an_is_warm(a, t, x->step)) {
            o->warm_records++;
            o->warm_numel += (double)x->numel;
            o->warm_overflows += kov ? (double)x->overflows : 0;
            o->warm_underflows += kun ? (double)x->underflows : 0;
            continue;
        }
        o->records++;
        o->events += kov && x->overflows > 0;
        o->numel += (double)x->numel;
        if (kov)
            ov += (double)x->overflows, n_ov += (double)x->numel;
        if (kun)
            un += (double)x->underflows, n_un += (double)x->numel;
        if (ksb)
            sb += (double)x->subnormals, n_sb += (double)x->numel;
        if (x->te_overflows == UINT64_MAX)
            te_known = 0;
        else
            te += (double)x->te_overflows;
        if (isfinite(x->sqnr_db))
            v[nv++] = x->sqnr_db;
        if (isfinite(x->rel_err))
            w[nw++] = x->rel_err;
        if (x->nscales > 1 && x->scale_inv_min > 0 && x->scale_inv_max > 0)
            spread += log2(x->scale_inv_max / x->scale_inv_min), nspread++;
        if (prev && prev->scale_inv > 0 && x->scale_inv > 0 && x->nscales == 1) {
            double d = log2(x->scale_inv / prev->scale_inv);
            d1 += d, d2 += d * d, nd++;
            o->scale_changes += x->scale_inv != prev->scale_inv;
        }
        prev = x;
        o->last_step = x->step;
    }
    o->event_steps = o->records;
    if (nspread)
        o->block_spread = spread / (double)nspread;
    o->overflow_rate = n_ov > 0 ? ov / n_ov : o->numel > 0 ? NAN : 0;
    o->te_overflow_rate = te_known && o->numel > 0 ? te / o->numel : NAN;
    o->underflow_rate = n_un > 0 ? un / n_un : o->numel > 0 ? NAN : 0;
    o->subnormal_rate = n_sb > 0 ? sb / n_sb : o->numel > 0 ? NAN : 0;
    o->exact = o->records - nv;
    if (nv) { /* sort once (an_quantile sorts), then read the quantiles */
        o->sqnr_p05 = an_quantile(v, nv, 0.05);
        o->sqnr_p50 = gsl_stats_quantile_from_sorted_data(v, 1, nv, 0.5);
        o->sqnr_p95 = gsl_stats_quantile_from_sorted_data(v, 1, nv, 0.95);
    }
    if (nw) {
        o->relerr_p50 = an_quantile(w, nw, 0.5);
        o->relerr_p95 = gsl_stats_quantile_from_sorted_data(w, 1, nw, 0.95);
    }
    if (nd > 1) {
        double m = d1 / (double)nd;
        o->scale_log2_sd = sqrt(fmax(0, d2 / (double)nd - m * m));
    }
    free(v), free(w);
    /* per-tensor scales with every-step rows: events at every step, exact */
    size_t ns;
    const size_t *ix = an_steps(a, t, r, &ns);
    if (ns && a->recipe_ok[r] && an_per_tensor_scale(&a->recipes[r])) {
        const fp8_format *f = an_format(a, t, r);
        o->every_step = 1;
        o->events = o->event_steps = 0;
        for (size_t i = 0; i < ns; i++) {
            const fp8_step_row *w0 = an_steprow(a, ix[i]);
            int ev = an_overflows_at(f, &a->recipes[r].cast, w0->amax, w0->scale, w0->nonfinite);
            if (an_is_warm(a, t, w0->step))
                o->warm_steps++, o->warm_events += (size_t)ev;
            else
                o->event_steps++, o->events += (size_t)ev;
        }
    } else {
        o->warm_steps = o->warm_records;
        for (size_t i = 0; i < n; i++) {
            const fp8_summary *x = an_rec(a, s[i]);
            o->warm_events += an_is_warm(a, t, x->step) && x->overflows > 0 && x->overflows != UINT64_MAX;
        }
    }
    return 0;
}

struct an_sstats_cache {
    an_sstats *st; /* per pair (an_pair) */
    unsigned char *ok;
    an_sstats none; /* a series without data */
};

const an_sstats *an_series_cached(an_run *a, int t, int r)
{
    if (t < 0 || r < 0 || t >= a->run->ntensors || r >= a->run->nrecipes)
        return NULL;
    if (!a->cache) {
        an_on_close_run(an_series_cache_free);
        a->cache = calloc(1, sizeof *a->cache);
        if (!a->cache)
            return NULL;
        a->cache->st = calloc(a->npairs + 1, sizeof *a->cache->st);
        a->cache->ok = calloc(a->npairs + 1, 1);
        if (!a->cache->st || !a->cache->ok || an_series_stats(a, -1, -1, &a->cache->none) != 0) {
            an_series_cache_free(a);
            return NULL;
        }
    }
    int k = an_pair(a, t, r);
    if (k < 0)
        return &a->cache->none;
    if (!a->cache->ok[k]) {
        if (an_series_stats(a, t, r, &a->cache->st[k]) != 0)
            return NULL;
        a->cache->ok[k] = 1;
    }
    return &a->cache->st[k];
}

void an_series_cache_free(an_run *a)
{
    if (a->cache) {
        free(a->cache->st);
        free(a->cache->ok);
        free(a->cache);
        a->cache = NULL;
    }
}
