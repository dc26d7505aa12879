/*
 * compare.c — every recipe recorded on the same tensors (active and
 * shadows), after warm-up: per tensor and per role; the warm-up on its own;
 * like-for-like comparisons that change one factor at a time (contrasts.c);
 * a verdict per tensor with the rule that decided it.
 *
 * Data files: compare_tensors.tsv, compare_groups.tsv, compare_warmup.tsv,
 * compare_contrasts.tsv (per tensor), compare_factors.tsv (per group),
 * compare_verdicts.tsv.
 */
#include <gsl/gsl_statistics_double.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "analysis.h"
#include "compare.h"
#include "contrasts.h"
#include "factors.h"
#include "gemm_error.h"
#include "hash.h"
#include "keys.h"

/* ---- the analysis ------------------------------------------------------- */

/* Tensors of a role (or all) under one canonical recipe label: events,
 * steps and counts summed, so rates are pooled element rates. */
typedef struct {
    char label[96];
    int role, tensors, sqnr_n;
    size_t records, events, event_steps, warm_events, warm_steps;
    double numel, over, te, under, sub, sqnr_sum, warm_numel, warm_under, warm_over;
    int te_known, active;
} group;

/* The groups of a run, found by (role, label) through an index (hash.h):
 * a run with many distinct recipes costs its size, not its square. */
typedef struct {
    group *g;
    int n, cap;
    fp8__index ix;
} group_set;

static uint64_t group_key(int role, const char *label) { return fp8__fnv1a64(FP8_FNV64_SEED ^ (uint64_t)role, label); }

static uint64_t group_hash(const void *items, size_t i)
{
    const group *G = (const group *)items + i;
    return group_key(G->role, G->label);
}

typedef struct {
    int role;
    const char *label;
} group_name;

static int group_eq(const void *items, size_t i, const void *key)
{
    const group *G = (const group *)items + i;
    const group_name *k = key;
    return G->role == k->role && strcmp(G->label, k->label) == 0;
}

static group *group_for(group_set *S, int role, const char *label)
{
    const group_name key = {role, label};
    uint64_t h = group_key(role, label);
    long i = fp8__index_find(&S->ix, h, group_eq, S->g, &key);
    if (i >= 0)
        return &S->g[i];
    if (S->n == S->cap) {
        int cap = S->cap ? 2 * S->cap : 64;
        group *g = realloc(S->g, (size_t)cap * sizeof *g);
        if (!g)
            return NULL;
        S->g = g, S->cap = cap;
    }
    if (fp8__index_reserve(&S->ix, group_hash, S->g) != 0)
        return NULL;
    group *G = &S->g[S->n++];
    memset(G, 0, sizeof *G);
    G->role = role, G->te_known = 1;
    snprintf(G->label, sizeof G->label, "%s", label);
    fp8__index_add(&S->ix, h);
    return G;
}

static void group_add(group *G, const an_sstats *s)
{
    G->tensors++;
    G->records += s->records, G->events += s->events, G->event_steps += s->event_steps;
    G->numel += s->numel, G->over += s->overflow_rate * s->numel, G->under += s->underflow_rate * s->numel;
    G->sub += s->subnormal_rate * s->numel;
    if (isnan(s->te_overflow_rate))
        G->te_known = 0;
    else
        G->te += s->te_overflow_rate * s->numel;
    if (!isnan(s->sqnr_p50))
        G->sqnr_sum += s->sqnr_p50, G->sqnr_n++;
    G->warm_events += s->warm_events, G->warm_steps += s->warm_steps, G->warm_numel += s->warm_numel;
    G->warm_under += s->warm_underflows, G->warm_over += s->warm_overflows;
}

static const char *factor_title(int k)
{
    static const char *t[] = {"Format (E5M2 → E4M3 and other element formats; same scaling)",
                              "Timing (delayed → current scaling; same format, granularity and scale encoding)",
                              "Granularity (coarser → finer scale groups; same format, timing and encoding)",
                              "Scale encoding (fp32 → power-of-two / UE8M0 / E8M0 rounding rules)",
                              "Amax floor (eps)", "Delayed-scaling settings (history, algorithm, margin)",
                              "Cast options (nearest → stochastic rounding, saturation, NVFP4's Hadamard transform)"};
    return k >= 0 && k < AN_NFACTOR ? t[k] : "?";
}

static const char *factor_topic(int k)
{
    static const char *t[] = {"format", "timing", "granularity", "encoding", "floor", "delayedset", "cast"};
    return k >= 0 && k < AN_NFACTOR ? t[k] : "?";
}

static void write_factors(an_ctx *c, an_run *a, FILE *fc, FILE *ff)
{
    size_t nc;
    const an_contrast *v = an_run_contrasts(c, a, &nc);
    for (size_t i = 0; v && i < nc; i++) {
        an_factors fa, fb;
        fp8_role role = (fp8_role)a->run->tensor_role[v[i].t];
        char la[96], lb[96];
        an_factors_of(&a->recipes[v[i].a], role, &fa);
        an_factors_of(&a->recipes[v[i].b], role, &fb);
        const an_sstats *sa = an_series_cached(a, v[i].t, v[i].a), *sb = an_series_cached(a, v[i].t, v[i].b);
        fprintf(fc, "%s\t%s\t%s\t%s\t%s\t%s\t%zu\t%zu\t%.9g\t%.9g\t%.9g\t%.9g\t%.9g\t%d\t%zu\t%zu\t%zu\n", a->label,
                a->run->tensor_name[v[i].t], fp8_role_name(role), an_factor_name((an_factor)v[i].factor),
                an_factors_label(&fa, la, sizeof la), an_factors_label(&fb, lb, sizeof lb), v[i].d.n, v[i].d.block,
                v[i].d.mean, v[i].d.lo, v[i].d.hi, v[i].d.p, v[i].padj, an_contrast_sign(&v[i]),
                sa ? sa->events : 0, sb ? sb->events : 0, sa ? sa->event_steps : 0);
    }
    an_cgroup *g;
    size_t ng;
    if (an_contrast_groups(c, a, &g, &ng) != 0) {
        fprintf(c->md, "(out of memory grouping the comparisons)\n\n");
        return;
    }
    if (!ng) {
        fprintf(c->md, "No pair of recipes recorded on the same tensor differs in exactly one factor: nothing can be "
                       "compared like for like. Record shadows that change one factor at a time (the trainer's "
                       "default set does: `e4m3:delayed`, `e5m2:delayed`, `e4m3:current`, `e5m2:current`, "
                       "`e4m3:block=1x128:eps=0`, ...).\n\n");
        free(g);
        return;
    }
    fprintf(c->md, "Each row compares two recipes that differ in one factor only, on the tensors of one role. ΔSQNR "
                   "= SQNR(to) − SQNR(from) in dB, per step averaged over the tensors, then over the steps after "
                   "warm-up; 95%% CI calibrated at the series' length and autocorrelation (*approx.* where it "
                   "covers less than 90%%: docs/analyses.md, \"Inference\"); the median step beside it, and the "
                   "steps that carry the mean when three do. Tensors: how many are better under *to* / under *from* "
                   "/ neither (Holm-adjusted p < 0.05 over all %zu per-tensor comparisons of the run); sign p: "
                   "two-sided sign test over the tensors. Overflow events are counted after warm-up (every step for "
                   "per-tensor scales).\n\n",
            nc);
    for (int k = 0; k < AN_NFACTOR; k++) {
        int any = 0;
        for (size_t i = 0; i < ng; i++) {
            const an_cgroup *G = &g[i];
            if (G->factor != k)
                continue;
            an_frow_add(c, G, (int)(a - c->runs));
            if (!any)
                fprintf(c->md, "**%s**\n\n| role | from → to | tensors | ΔSQNR dB [95%% CI] | median step | to / "
                               "from / neither better | sign p | overflow events from → to | underflow %% from → to "
                               "|\n|---|---|---|---|---|---|---|---|---|\n",
                        factor_title(k));
            any = 1;
            char dom[96] = "";
            if (G->robust.dominated && fabs(G->robust.mean) >= 0.05)
                snprintf(dom, sizeof dom, " (carried by steps %lld, %lld, %lld)", (long long)G->robust.top_step[0],
                         (long long)G->robust.top_step[1], (long long)G->robust.top_step[2]);
            fprintf(c->md, "| %s | %s → %s%s | %d | %+.2f [%+.2f, %+.2f]%s | %+.2f%s | %d / %d / %d | %.2g | %zu → %zu | "
                           "%.4f → %.4f |\n",
                    fp8_role_name((fp8_role)G->role), G->la, G->lb, G->eps_inert ? " ‡" : "", G->tensors, G->d.mean,
                    G->d.lo, G->d.hi, G->d.approx ? " *approx.*" : "", G->robust.median, dom, G->to_better,
                    G->from_better, G->neither, G->sign_p, G->events_a, G->events_b, 100 * G->under_a,
                    100 * G->under_b);
            FILE *j = k <= AN_F_ENCODING ? an_json(c, AN_J_COMPARISONS) : NULL;
            if (j) {
                /* the group's verdict: its 95% interval clear of zero */
                const char *gv = G->d.lo > 0 ? "b_better" : G->d.hi < 0 ? "a_better" : "no_difference";
                fputs("{\"run\": ", j), an_json_str(j, a->label);
                fputs(", \"factor\": ", j), an_json_str(j, an_factor_name((an_factor)k));
                fputs(", \"a\": ", j), an_json_str(j, a->run->recipe_spec[G->ra]);
                fputs(", \"b\": ", j), an_json_str(j, a->run->recipe_spec[G->rb]);
                fputs(", \"a_label\": ", j), an_json_str(j, G->la);
                fputs(", \"b_label\": ", j), an_json_str(j, G->lb);
                fputs(", \"role\": ", j), an_json_str(j, fp8_role_name((fp8_role)G->role));
                fprintf(j, ", \"tensors\": %d, \"steps\": %zu, \"delta_sqnr_db\": ", G->tensors, G->d.n);
                an_json_num(j, G->d.mean);
                fputs(", \"ci95\": [", j), an_json_num(j, G->d.lo), fputs(", ", j), an_json_num(j, G->d.hi);
                fprintf(j, "], \"overflow_events_a\": %zu, \"overflow_events_b\": %zu, \"event_steps\": %zu, "
                           "\"tensors_b_better\": %d, \"tensors_a_better\": %d, \"sign_p\": ",
                        G->events_a, G->events_b, G->steps_a, G->to_better, G->from_better);
                an_json_num(j, G->sign_p);
                fputs(", \"median_step_db\": ", j), an_json_num(j, G->robust.median);
                fputs(", \"dominated_by_steps\": [", j);
                for (int q = 0; G->robust.dominated && fabs(G->robust.mean) >= 0.05 && q < G->robust.ntop; q++)
                    fprintf(j, "%s%lld", q ? ", " : "", (long long)G->robust.top_step[q]);
                fprintf(j, "], \"approx\": %s, \"eps_inert\": %s, \"phases\": {", G->d.approx ? "true" : "false",
                        G->eps_inert ? "true" : "false");
                for (int ph = 0; ph < AN_NPHASE; ph++) {
                    fprintf(j, "%s\"%s\": {\"steps\": %zu, \"delta_sqnr_db\": ", ph ? ", " : "", an_phase_name(ph),
                            G->ph[ph].n);
                    an_json_num(j, G->ph[ph].mean);
                    fputs(", \"ci95\": [", j), an_json_num(j, G->ph[ph].lo), fputs(", ", j);
                    an_json_num(j, G->ph[ph].hi), fputs("]}", j);
                }
                fputs("}", j);
                fputs(", \"verdict\": ", j), an_json_str(j, gv), fputs("}", j);
            }
            fprintf(ff, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d\t%zu\t%zu\t%.9g\t%.9g\t%.9g\t%.9g\t%d\t%d\t%d\t%.9g\t%zu\t%zu\t"
                        "%zu\t%zu\t%.9g\t%.9g\t%.9g\t%.9g\n",
                    a->label, an_factor_name((an_factor)k), fp8_role_name((fp8_role)G->role), G->la, G->lb,
                    a->run->recipe_spec[G->ra], a->run->recipe_spec[G->rb], G->tensors, G->d.n, G->d.block, G->d.mean,
                    G->d.lo, G->d.hi, G->d.p, G->to_better, G->from_better, G->neither, G->sign_p, G->events_a,
                    G->events_b, G->steps_a, G->steps_b, G->under_a, G->under_b, G->over_a, G->over_b);
        }
        /* one finding per factor and run: each group's mean difference */
        char fnd[2048];
        size_t fl = 0;
        for (size_t i = 0; i < ng && fl < sizeof fnd - 200; i++) {
            const an_cgroup *G = &g[i];
            if (G->factor != k)
                continue;
            fl += (size_t)snprintf(fnd + fl, sizeof fnd - fl, "%s%s %s → %s %+.2f dB [%+.2f, %+.2f] (%d/%d/%d)",
                                   fl ? "; " : "", fp8_role_name((fp8_role)G->role), G->la, G->lb, G->d.mean, G->d.lo,
                                   G->d.hi, G->to_better, G->from_better, G->neither);
        }
        if (fl)
            an_finding(c, factor_topic(k), "`%s`: %s", a->label, fnd);
        if (any)
            fprintf(c->md, "\n");
        int inert = 0;
        for (size_t i = 0; i < ng; i++)
            inert |= g[i].factor == k && g[i].eps_inert;
        if (inert)
            fprintf(c->md, "‡ the two recipes also differ in the amax floor (eps), which bound no group of these "
                           "tensors at any step: paired, since it changed nothing on this data.\n\n");
        else if (!any && k <= AN_F_ENCODING)
            fprintf(c->md, "**%s**: this run has no recipe pair that differs in this factor alone.\n\n", factor_title(k));
        if (k <= AN_F_ENCODING)
            an_floor_bound_note(c, a, k);
    }
    free(g);
}

/* ---- one run: compute ------------------------------------------------------ */

/* tensor t's series under recipe r when compare shows it (records after or
 * during warm-up, a parsed spec), else NULL */
static const an_sstats *shown_series(an_run *a, int t, int r)
{
    const an_sstats *s = an_series_cached(a, t, r);
    return !s || (!s->records && !s->warm_records) || !a->recipe_ok[r] ? NULL : s;
}

/* tensor t's recipe r as its factors label */
static const char *factors_label(const an_run *a, int t, int r, char *lab, size_t n)
{
    an_factors f;
    an_factors_of(&a->recipes[r], (fp8_role)a->run->tensor_role[t], &f);
    return an_factors_label(&f, lab, n);
}

/* One run's comparison: everything its renderers read. */
typedef struct {
    group_set gs;         /* per (role or all, canonical label) */
    int shown_t;          /* tensors with data (--tensor selects) */
    int warm_tensors;     /* tensors with a warm-up, and its span */
    int64_t warm_lo, warm_hi;
    an_verdict *v;        /* [T]: each selected tensor's verdict and why */
    an_vinfo *vi;
    int nverd[4];
} run_compare;

static void run_compare_free(run_compare *C)
{
    free(C->gs.g), fp8__index_free(&C->gs.ix);
    free(C->v), free(C->vi);
}

/* The groups of the run (each tensor's canonical recipes pooled per role
 * and over all roles) and its warm-up span: 0, or 1 out of memory. */
static int compare_groups(an_run *a, run_compare *C)
{
    int T = a->run->ntensors;
    C->warm_lo = INT64_MAX, C->warm_hi = INT64_MIN;
    for (int t = 0; t < T; t++) {
        C->shown_t += an_has_data(a, t);
        if (a->warm_end[t] != INT64_MIN) {
            C->warm_tensors++;
            C->warm_lo = a->warm_end[t] < C->warm_lo ? a->warm_end[t] : C->warm_lo;
            C->warm_hi = a->warm_end[t] > C->warm_hi ? a->warm_end[t] : C->warm_hi;
        }
        size_t nr;
        const int *rs = an_tensor_recipes(a, t, &nr);
        for (size_t k = 0; k < nr; k++) {
            int r = rs[k];
            const an_sstats *s = shown_series(a, t, r);
            if (!s || an_canon(a, t, r) != r)
                continue;
            char lab[96];
            factors_label(a, t, r, lab, sizeof lab);
            group *G = group_for(&C->gs, a->run->tensor_role[t], lab);
            group *A = group_for(&C->gs, FP8_NROLE, lab);
            if (!G || !A)
                return 1;
            group_add(G, s), G->active |= r == a->active[t];
            group_add(A, s), A->active |= r == a->active[t];
        }
    }
    return 0;
}

/* Every selected tensor's verdict (noted for the question across runs). */
static int compare_verdicts(an_ctx *c, an_run *a, run_compare *C)
{
    int T = a->run->ntensors;
    C->v = calloc((size_t)T + 1, sizeof *C->v);
    C->vi = calloc((size_t)T + 1, sizeof *C->vi);
    if (!C->v || !C->vi)
        return 1;
    for (int t = 0; t < T; t++) {
        if (!an_has_data(a, t))
            continue; /* not selected (--tensor): not counted */
        C->v[t] = an_tensor_verdict(c, a, t, &C->vi[t]);
        an_where_add(c, a, t, C->v[t], &C->vi[t]);
        C->nverd[C->v[t]]++;
    }
    return 0;
}

/* ---- one run: render ----------------------------------------------------------- */

/* compare_tensors.tsv and compare_warmup.tsv: every shown series */
static void compare_tsv_tensors(an_run *a, FILE *ft, FILE *fw)
{
    for (int t = 0; t < a->run->ntensors; t++) {
        fp8_role role = (fp8_role)a->run->tensor_role[t];
        size_t nr;
        const int *rs = an_tensor_recipes(a, t, &nr);
        for (size_t k = 0; k < nr; k++) {
            int r = rs[k];
            const an_sstats *s = shown_series(a, t, r);
            if (!s)
                continue;
            char lab[96];
            factors_label(a, t, r, lab, sizeof lab);
            int canon = an_canon(a, t, r);
            fprintf(ft, "%s\t%s\t%s\t%d\t%s\t%s\t%s\t%zu\t%zu\t%zu\t%d\t%.9g\t%.9g\t%.9g\t%.9g\t%.9g\t%.9g\t%.9g\t%.9g\t"
                        "%.9g\t%.9g\t%zu\t%.9g\n",
                    a->label, a->run->tensor_name[t], fp8_role_name(role), a->run->tensor_layer[t], lab,
                    a->run->recipe_spec[r], canon == r ? "-" : a->run->recipe_spec[canon], s->records, s->events,
                    s->event_steps, s->every_step, s->overflow_rate, s->te_overflow_rate, s->underflow_rate,
                    s->subnormal_rate, s->sqnr_p05, s->sqnr_p50, s->sqnr_p95, s->relerr_p50, s->relerr_p95,
                    s->scale_log2_sd, s->scale_changes, s->block_spread);
            if (a->warm_end[t] != INT64_MIN && canon == r)
                fprintf(fw, "%s\t%s\t%s\t%s\t%lld\t%zu\t%zu\t%.9g\t%.9g\n", a->label, a->run->tensor_name[t],
                        fp8_role_name(role), lab, (long long)a->warm_end[t], s->warm_steps, s->warm_events,
                        s->warm_numel > 0 ? s->warm_overflows / s->warm_numel : NAN,
                        s->warm_numel > 0 ? s->warm_underflows / s->warm_numel : NAN);
        }
    }
}

/* The groups of one role (FP8_NROLE: all) in the Markdown table, rows whose
 * numbers are all equal (e.g. the same weights under delayed and current
 * scaling) printed once with their labels joined; and in compare_groups.tsv.
 * Returns the rows merged. */
static int compare_md_role(FILE *md, const an_run *a, const group_set *gs, int role, FILE *fg)
{
    char(*cells)[200] = calloc((size_t)gs->n + 1, sizeof *cells);
    char(*labs)[400] = calloc((size_t)gs->n + 1, sizeof *labs);
    char(*tes)[120] = calloc((size_t)gs->n + 1, sizeof *tes);
    int nrow = 0, merged = 0;
    const char *gname = role == FP8_NROLE ? "all" : fp8_role_name((fp8_role)role);
    for (int i = 0; cells && labs && tes && i < gs->n; i++) {
        const group *G = &gs->g[i];
        if (G->role != role || !G->records)
            continue;
        double n = G->numel > 0 ? G->numel : 1;
        char te[32] = "-"; /* TE defines its count for delayed scaling only */
        if (G->te_known && strstr(G->label, " delayed "))
            snprintf(te, sizeof te, "%.4f", 100 * G->te / n);
        char row[200], rlab[200];
        /* compared without the TE column, which only delayed recipes define */
        snprintf(row, sizeof row, "%d | %zu / %zu | %.4f | %%s | %.4f | %.4f | %.2f", G->tensors, G->events,
                 G->event_steps, 100 * G->over / n, 100 * G->under / n, 100 * G->sub / n,
                 G->sqnr_n ? G->sqnr_sum / G->sqnr_n : NAN);
        snprintf(rlab, sizeof rlab, "%s%s", G->label, G->active ? " (active)" : "");
        fprintf(fg, "%s\t%s\t%s\t%d\t%zu\t%zu\t%zu\t%.9g\t%.9g\t%.9g\t%.9g\t%.9g\n", a->label, gname, G->label,
                G->tensors, G->records, G->events, G->event_steps, G->over / n, G->te_known ? G->te / n : NAN,
                G->under / n, G->sub / n, G->sqnr_n ? G->sqnr_sum / G->sqnr_n : NAN);
        int k = 0;
        while (k < nrow && strcmp(cells[k], row) != 0)
            k++;
        if (k < nrow) {
            size_t l = strlen(labs[k]);
            snprintf(labs[k] + l, sizeof labs[k] - l, " = %s", rlab);
            l = strlen(tes[k]);
            snprintf(tes[k] + l, sizeof tes[k] - l, " / %s", te);
            merged++;
        } else {
            snprintf(cells[nrow], sizeof cells[0], "%s", row);
            snprintf(tes[nrow], sizeof tes[0], "%s", te);
            snprintf(labs[nrow++], sizeof labs[0], "%s", rlab);
        }
    }
    for (int k = 0; k < nrow; k++) {
        char line[400];
        snprintf(line, sizeof line, cells[k], tes[k]);
        fprintf(md, "| %s | %s | %s |\n", gname, labs[k], line);
    }
    free(cells), free(labs), free(tes);
    return merged;
}

/* The run's heading, its notes and the table of every group. */
static void compare_md_table(an_ctx *c, an_run *a, const run_compare *C, FILE *fg)
{
    int T = a->run->ntensors;
    char tcount[64];
    if (C->shown_t < T)
        snprintf(tcount, sizeof tcount, "%d of its %d tensors (--tensor)", C->shown_t, T);
    else
        snprintf(tcount, sizeof tcount, "%d tensors", T);
    fprintf(c->md, "### Run `%s` (%s, %d recipes, statistics every %lld steps%s)\n\n", a->label, tcount,
            a->run->nrecipes, (long long)a->record_every, a->run->nsteps ? ", amax and scales at every step" : "");
    an_history_warnings(c, a);
    an_phase_events(c, a);
    fprintf(c->md, "| role | recipe | tensors | overflow events / steps | overflow %% | TE overflows%% | "
                   "underflow %% | subnormal %% | SQNR dB |\n|---|---|---|---|---|---|---|---|---|\n");
    int merged = 0;
    for (int role = 0; role <= FP8_NROLE; role++)
        merged += compare_md_role(c->md, a, &C->gs, role, fg);
    if (merged)
        fprintf(c->md, "\nRecipes joined by = behave identically on these tensors: every number in their rows is "
                       "equal (`compare_groups.tsv` lists them apart).\n");
    fprintf(c->md, "\n");
}

/* The warm-up on its own: its table, finding and summary.json entry. */
static void compare_md_warmup(an_ctx *c, const an_run *a, const run_compare *C)
{
    if (!C->warm_tensors)
        return;
    char span[64];
    if (C->warm_lo == C->warm_hi)
        snprintf(span, sizeof span, "step %lld", (long long)C->warm_lo);
    else
        snprintf(span, sizeof span, "steps %lld to %lld", (long long)C->warm_lo, (long long)C->warm_hi);
    fprintf(c->md, "**Warm-up** (rule: a delayed recipe casts with its initial scale 1 until its history holds "
                   "a real amax; the steps up to and including a tensor's first step with a finite amax > 0 "
                   "are left out above, for every recipe of that tensor): on %d tensors the warm-up is the "
                   "steps before %s. What it cost:\n\n| role | recipe | tensors | steps | overflow events | "
                   "overflow %% | flushed %% |\n|---|---|---|---|---|---|---|\n",
            C->warm_tensors, span);
    char worst[200] = "";
    double worst_rate = -1;
    for (int role = 0; role < FP8_NROLE; role++)
        for (int i = 0; i < C->gs.n; i++) {
            const group *G = &C->gs.g[i];
            if (G->role != role || !G->warm_steps || !strstr(G->label, "delayed"))
                continue;
            double wn = G->warm_numel > 0 ? G->warm_numel : 1;
            fprintf(c->md, "| %s | %s | %d | %zu | %zu | %.4f | %.4f |\n", fp8_role_name((fp8_role)role), G->label,
                    G->tensors, G->warm_steps, G->warm_events, 100 * G->warm_over / wn, 100 * G->warm_under / wn);
            if (G->warm_numel > 0 && G->warm_under / wn > worst_rate) {
                worst_rate = G->warm_under / wn;
                snprintf(worst, sizeof worst, "%s %s flushed %.3g%% of values during warm-up", G->label,
                         fp8_role_name((fp8_role)role), 100 * worst_rate);
            }
        }
    fprintf(c->md, "\n");
    an_finding(c, "warmup", "`%s`: steps < %lld excluded on %d tensors%s%s", a->label, (long long)C->warm_hi,
               C->warm_tensors, worst[0] ? "; " : "", worst);
    FILE *j = an_json(c, AN_J_WARMUP);
    if (j) {
        fputs("{\"run\": ", j), an_json_str(j, a->label);
        fprintf(j, ", \"steps_excluded\": %lld, \"tensors\": %d, \"rule\": \"until the history holds a real amax\"}",
                (long long)C->warm_hi, C->warm_tensors);
    }
}

/* The verdict rule, each tensor's verdict (compare_verdicts.tsv), their
 * counts and the tensors where delayed scaling overflowed materially. */
static void compare_md_verdicts(an_ctx *c, const an_run *a, const run_compare *C, FILE *fv)
{
    fprintf(c->md, "**Verdict rule** (U = %.3g%%, G = %.3g dB, M = %.3g dB, E = %d): %s.\n\n", 100 * c->underflow_max,
            c->block_gain_db, c->sqnr_margin_db, c->min_events, an_verdict_rule);
    int at_risk = 0;
    char risk[1024] = "", na_why[160] = "";
    size_t rl = 0;
    for (int t = 0; t < a->run->ntensors; t++) {
        if (!an_has_data(a, t))
            continue;
        an_verdict v = C->v[t];
        const an_vinfo *vi = &C->vi[t];
        if (v == AN_VERDICT_NA && !na_why[0])
            snprintf(na_why, sizeof na_why, "%s", vi->why);
        char ld[96] = "-", lc[96] = "-", lb[96] = "-";
        if (vi->D >= 0)
            factors_label(a, t, vi->D, ld, sizeof ld);
        if (vi->C >= 0)
            factors_label(a, t, vi->C, lc, sizeof lc);
        if (vi->B >= 0)
            factors_label(a, t, vi->B, lb, sizeof lb);
        fprintf(fv, "%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\t%zu\t%zu\t%zu\t%.9g\t%.9g\t%.9g\t%.9g\t%.9g\t%.9g\t%s\n", a->label,
                a->run->tensor_name[t], fp8_role_name((fp8_role)a->run->tensor_role[t]), a->run->tensor_layer[t],
                an_verdict_name(v), ld, lc, lb, vi->events_d, vi->steps_d, vi->events_c, vi->d_timing, vi->p_timing,
                vi->d_gran, vi->p_gran, vi->under_c, vi->under_b, vi->why);
        if (v == AN_VERDICT_JIT && (int)vi->events_d >= c->min_events && at_risk < 5 && rl < sizeof risk - 200) {
            rl += (size_t)snprintf(risk + rl, sizeof risk - rl, "%s%s (%zu of %zu steps)", at_risk ? ", " : "",
                                   a->run->tensor_name[t], vi->events_d, vi->steps_d);
            at_risk++;
        }
    }
    fprintf(c->md, "| verdict | tensors |\n|---|---|\n");
    for (int v = 1; v < 4; v++)
        fprintf(c->md, "| %s | %d |\n", an_verdict_name((an_verdict)v), C->nverd[v]);
    if (C->nverd[0])
        fprintf(c->md, "| n/a (e.g. %s) | %d |\n", na_why, C->nverd[0]);
    if (at_risk)
        fprintf(c->md, "\nDelayed scaling overflowed materially on %s%s.\n", risk, at_risk == 5 ? ", ..." : "");
    fprintf(c->md, "\nPer tensor: `compare_verdicts.tsv` (with the deciding rule); every statistic: "
                   "`compare_tensors.tsv`; every comparison: `compare_contrasts.tsv`.\n\n");
    if (C->nverd[1] + C->nverd[2] + C->nverd[3] > 0)
        an_finding(c, "verdict", "`%s` %d / %d / %d%s", a->label, C->nverd[1], C->nverd[2], C->nverd[3],
                   C->nverd[0] ? " (+ n/a)" : "");
}

/* ---- across runs ----------------------------------------------------------------- */

/* The most flushed delayed group of one role after warm-up (the first
 * question's second half), across runs. */
typedef struct {
    double under; /* -1: none yet */
    char lab[240];
} most_flushed;

static void compare_tally(an_ctx *c, const an_run *a, const run_compare *C, most_flushed *q)
{
    for (int i = 0; i < C->gs.n; i++) {
        const group *G = &C->gs.g[i];
        double u = G->numel > 0 ? G->under / G->numel : NAN;
        if (G->role < FP8_NROLE && strstr(G->label, " delayed ") && u > q->under) {
            q->under = u;
            snprintf(q->lab, sizeof q->lab, "%s under %s%s", fp8_role_name((fp8_role)G->role), G->label,
                     G->active ? "" : " (a shadow in `" /* completed below */);
            if (!G->active)
                snprintf(q->lab + strlen(q->lab), sizeof q->lab - strlen(q->lab), "%s`)", a->label);
        }
    }
    /* recipes that overflow at nearly every step: a systematic clip */
    for (int i = 0; i < C->gs.n; i++) {
        const group *G = &C->gs.g[i];
        if (G->role != FP8_NROLE || G->event_steps < 10 || (double)G->events < 0.9 * (double)G->event_steps ||
            !(G->over / (G->numel > 0 ? G->numel : 1) > 1e-4))
            continue;
        int k = 0;
        while (k < c->nclip && strcmp(c->clip_name[k], G->label) != 0)
            k++;
        if (k == c->nclip && k < 16) {
            snprintf(c->clip_name[k], sizeof c->clip_name[k], "%s", G->label);
            c->clip_runs[k] = 0, c->clip_lo[k] = INFINITY, c->clip_hi[k] = 0;
            c->nclip++;
        }
        if (k < 16) {
            double rate = G->over / G->numel;
            c->clip_runs[k]++;
            c->clip_lo[k] = fmin(c->clip_lo[k], rate), c->clip_hi[k] = fmax(c->clip_hi[k], rate);
        }
    }
}

/* the data files' header lines */
static void compare_headers(FILE *const f[7])
{
    fprintf(f[0], "run\ttensor\trole\tlayer\trecipe\tspec\tsame_as\trecords\toverflow_events\tevent_steps\t"
                  "events_every_step\toverflow_rate\tte_overflow_rate\tunderflow_rate\tsubnormal_rate\tsqnr_p05_db\t"
                  "sqnr_p50_db\tsqnr_p95_db\trelerr_p50\trelerr_p95\tscale_log2_step_sd\tscale_changes\t"
                  "block_scale_spread_bits\n");
    fprintf(f[1], "run\trole\trecipe\ttensors\trecords\toverflow_events\tevent_steps\toverflow_rate\tte_overflow_rate\t"
                  "underflow_rate\tsubnormal_rate\tsqnr_p50_mean_db\n");
    fprintf(f[6], "run\tlinear\tgemm\tsteps\tsqnr_db_median\n");
    fprintf(f[2], "run\ttensor\trole\trecipe\twarmup_end_step\twarmup_steps\twarmup_events\twarmup_overflow_rate\t"
                  "warmup_underflow_rate\n");
    fprintf(f[3], "run\ttensor\trole\tfactor\tfrom\tto\tsteps\tblock_len\tdelta_sqnr_db\tci95_lo\tci95_hi\tp\tp_holm\t"
                  "verdict\tevents_from\tevents_to\tevent_steps\n");
    fprintf(f[4], "run\tfactor\trole\tfrom\tto\tfrom_spec\tto_spec\ttensors\tsteps\tblock_len\tdelta_sqnr_db\tci95_lo\t"
                  "ci95_hi\tp\tto_better\tfrom_better\tneither\tsign_p\tevents_from\tevents_to\tevent_steps_from\t"
                  "event_steps_to\tunderflow_from\tunderflow_to\toverflow_from\toverflow_to\n");
    fprintf(f[5], "run\ttensor\trole\tlayer\tverdict\tdelayed\tcurrent\tbest_finer\tdelayed_events\tevent_steps\t"
                  "current_events\tdelta_timing_db\tp_timing\tdelta_granularity_db\tp_granularity\t"
                  "current_underflow_rate\tfiner_underflow_rate\treason\n");
}

/* One run computed and rendered (files: tensors, groups, warmup, contrasts,
 * factors, verdicts, gemm_error): 0, or 1 (out of memory, a file error). */
static int compare_run(an_ctx *c, an_run *a, FILE *const f[7], most_flushed *q)
{
    run_compare C;
    memset(&C, 0, sizeof C);
    if (compare_groups(a, &C) || compare_verdicts(c, a, &C)) {
        run_compare_free(&C);
        return 1;
    }
    compare_tsv_tensors(a, f[0], f[2]);
    compare_md_table(c, a, &C, f[1]);
    compare_md_warmup(c, a, &C);
    /* the FP8 GEMMs' output error, when the run recorded it */
    if (an_gemm_error(c, a, f[6]) != 0) {
        run_compare_free(&C);
        return 1;
    }
    fprintf(c->md, "#### Like for like: one factor at a time\n\n");
    write_factors(c, a, f[3], f[4]);
    compare_md_verdicts(c, a, &C, f[5]);
    compare_tally(c, a, &C, q);
    run_compare_free(&C);
    return 0;
}

int an_compare(an_ctx *c)
{
    most_flushed q = {-1, ""};
    FILE *f[7] = {an_data(c, "compare_tensors.tsv"),   an_data(c, "compare_groups.tsv"),
                  an_data(c, "compare_warmup.tsv"),    an_data(c, "compare_contrasts.tsv"),
                  an_data(c, "compare_factors.tsv"),   an_data(c, "compare_verdicts.tsv"),
                  an_data(c, "gemm_error.tsv")};
    int rc = 0;
    for (int k = 0; k < 7; k++)
        if (!f[k])
            rc = 1;
    if (rc)
        goto done;
    compare_headers(f);
    fprintf(c->md, "## Recipes compared\n\n");
    fprintf(c->md, "After warm-up (below). Rates are pooled element rates: Σ count / Σ numel over the group's tensors "
                   "and recorded steps. An overflow event is a step with at least one overflowing value; for "
                   "per-tensor scales it is decided at every step from the every-step amax and scale (exact), for "
                   "grouped recipes at recorded steps; the denominator is given. SQNR: the mean over tensors of "
                   "each tensor's median over recorded steps. Recipes with the same numerics on a tensor (e.g. "
                   "`hybrid:delayed` and `e4m3:delayed` on an activation) are shown once.\n\n");
    /* the runs' parts go below the table across the runs, written last */
    FILE *head = c->md;
    char *body = NULL;
    size_t bodyn = 0;
    c->md = open_memstream(&body, &bodyn);
    if (!c->md) {
        c->md = head;
        rc = 1;
        goto done;
    }
    an_where_free(c);
    for (int ri = 0; ri < c->nruns && !rc; ri++) {
        an_run *a = &c->runs[ri];
        if (a->run->nrecords == 0)
            fprintf(c->md, "Run `%s`: no records.\n\n", a->label);
        else
            rc = compare_run(c, a, f, &q);
    }
    for (int k = 0; !rc && k < c->nclip; k++)
        an_finding(c, "risk", "`%s` overflows at almost every step of every tensor in %d run%s (%.3g..%.3g%% of "
                              "values): a systematic clip, not outliers",
                   c->clip_name[k], c->clip_runs[k], c->clip_runs[k] == 1 ? "" : "s", 100 * c->clip_lo[k],
                   100 * c->clip_hi[k]);
    fclose(c->md);
    c->md = head;
    if (!rc) {
        char und[320] = "";
        if (q.under >= 0)
            snprintf(und, sizeof und, "; the most flushed to zero: %s, %.3g%% of values after warm-up", q.lab,
                     100 * q.under);
        an_where_render(c, und);
        if (body)
            fwrite(body, 1, bodyn, c->md);
        an_keys_factors(c);
    }
    free(body);
done:
    if (an_data_close(c, f, 7))
        rc = 1;
    return rc;
}
