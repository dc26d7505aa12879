/*
 * compare_notes.c — what compare says beside its tables: overflow events by
 * phase of the learning-rate schedule (summary.json "phases"), delayed
 * histories not shorter than the run, and pairs left unpaired because an
 * amax floor bound.  Definitions: docs/analyses.md, "compare".
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "analysis.h"
#include "compare_notes.h"
#include "series.h"
#include "verdicts.h"
#include "contrasts.h"
#include "factors.h"
#include "keys.h"

/* The recipe a run cast tensor t with: its active recipe, else (a run that
 * only recorded) its first delayed recipe, *shadow = 1 then; -1 none. */
int an_cast_recipe_of(const an_run *a, int t, int *shadow)
{
    *shadow = 0;
    if (a->active[t] >= 0)
        return an_canon(a, t, a->active[t]);
    int d = an_delayed_recipe(a, t);
    *shadow = d >= 0;
    return d >= 0 ? an_canon(a, t, d) : -1;
}

void an_tensor_phase_events(const an_ctx *c, const an_run *a, int t, int r, size_t ev[], size_t steps[])
{
    size_t ns, n;
    const size_t *ix = an_steps(a, t, r, &ns);
    if (ns && an_per_tensor_scale(&a->recipes[r])) {
        const fp8_format *f = an_format(a, t, r);
        for (size_t i = 0; i < ns; i++) {
            const fp8_step_row *w = an_steprow(a, ix[i]);
            if (an_is_warm(a, t, w->step))
                continue;
            int ph = an_phase(c, a, w->step);
            steps[ph]++, ev[ph] += (size_t)an_overflows_at(f, &a->recipes[r].cast, w->amax, w->scale, w->nonfinite);
        }
        return;
    }
    const size_t *sr = an_series(a, t, r, &n);
    for (size_t i = 0; i < n; i++) {
        const fp8_summary *x = an_rec(a, sr[i]);
        if (an_is_warm(a, t, x->step))
            continue;
        int ph = an_phase(c, a, x->step);
        steps[ph]++, ev[ph] += x->overflows != UINT64_MAX && x->overflows > 0;
    }
}

/* Overflow events of the recipe each tensor was cast with, by phase (LR
 * warm-up, early, steady), after the tensors' warm-up: every step for
 * per-tensor scales, else at the statistics steps.  A sentence, the rows of
 * summary.json's "phases". */
void an_phase_events(an_ctx *c, an_run *a)
{
    size_t ev[AN_NPHASE] = {0}, steps[AN_NPHASE] = {0};
    int shadow_any = 0;
    for (int t = 0; t < a->run->ntensors; t++) {
        int sh, r = an_cast_recipe_of(a, t, &sh);
        if (r < 0 || !a->recipe_ok[r])
            continue;
        shadow_any |= sh;
        an_tensor_phase_events(c, a, t, r, ev, steps);
    }
    int64_t w = an_lr_warmup(c, a);
    fprintf(c->md, "Overflow events by phase of `%s`, of the recipe %s (after each tensor's warm-up; LR warm-up %s):",
            a->label, shadow_any ? "each tensor was recorded with (a shadow: the run applied no FP8)" : "each tensor was "
            "cast with", w >= 0 ? "from /meta lr_warmup or --lr-warmup" : "unknown — no /meta lr_warmup: phases are the "
            "first 10% (early) and the rest");
    for (int ph = 0; ph < AN_NPHASE; ph++) {
        int64_t f, to;
        an_phase_range(c, a, ph, &f, &to);
        char range[64];
        if (to <= f)
            snprintf(range, sizeof range, "none");
        else if (to == INT64_MAX)
            snprintf(range, sizeof range, "%lld..", (long long)f);
        else
            snprintf(range, sizeof range, "%lld..%lld", (long long)f, (long long)(to - 1));
        fprintf(c->md, "%s %s (steps %s) %zu of %zu tensor-steps", ph ? ";" : "", an_phase_name(ph), range, ev[ph],
                steps[ph]);
        FILE *j = an_json(c, AN_J_PHASES);
        if (j) {
            fputs("{\"run\": ", j), an_json_str(j, a->label);
            fputs(", \"phase\": ", j), an_json_str(j, an_phase_name(ph));
            fputs(", \"steps\": ", j), an_json_str(j, range);
            fprintf(j, ", \"overflow_events\": %zu, \"tensor_steps\": %zu, \"recipe_is_shadow\": %s}", ev[ph],
                    steps[ph], shadow_any ? "true" : "false");
        }
    }
    fprintf(c->md, ".\n\n");
}

/* Delayed recipes whose history is not shorter than the run: their
 * history max never forgets (a running max of every step so far). */
void an_history_warnings(an_ctx *c, an_run *a)
{
    int64_t steps = an_run_steps(a);
    char seen[8][96];
    int ns = 0;
    for (int r = 0; r < a->run->nrecipes && ns < 8; r++) {
        if (!a->recipe_ok[r])
            continue;
        const fp8_recipe *p = &a->recipes[r];
        int delayed = p->kind == FP8_RECIPE_DELAYED || p->block_delayed;
        if (!delayed || p->algo_most_recent || (int64_t)p->history_len < steps)
            continue;
        an_factors f;
        an_factors_of(p, FP8_ROLE_ACTIVATION, &f);
        char lab[96];
        an_factors_label(&f, lab, sizeof lab);
        int dup = 0;
        for (int k = 0; k < ns && !dup; k++)
            dup = !strcmp(seen[k], lab);
        if (dup)
            continue;
        snprintf(seen[ns++], sizeof seen[0], "%s", lab);
        fprintf(c->md, "⚠ `%s`: %s has a history of %d steps, not shorter than the run's %lld: its amax is the max of "
                       "every step so far (a running max), not the delayed scaling a longer run would see.\n\n",
                a->label, lab, p->history_len, (long long)steps);
        an_finding(c, "risk", "`%s`: %s's history (%d) is not shorter than the run (%lld steps): a running max here",
                   a->label, lab, p->history_len, (long long)steps);
    }
}

/* Pairs of run a that differ in factor k and in an amax floor (eps) that
 * bound some group's amax on the tensor (so they are not paired): how many
 * tensors, the first one and the two labels, said after factor k's table. */
void an_floor_bound_note(an_ctx *c, const an_run *a, int k)
{
    int tensors = 0, first = -1;
    char la[96] = "", lb[96] = "";
    for (int t = 0; t < a->run->ntensors; t++) {
        fp8_role role = (fp8_role)a->run->tensor_role[t];
        size_t nr;
        const int *rs = an_tensor_recipes(a, t, &nr);
        int hit = 0;
        for (size_t i = 0; i < nr && !hit; i++)
            for (size_t j = i + 1; j < nr && !hit; j++) {
                int x = rs[i], y = rs[j], inert;
                if (!a->recipe_ok[x] || !a->recipe_ok[y] || an_canon(a, t, x) != x || an_canon(a, t, y) != y)
                    continue;
                an_factors fx, fy;
                an_factors_of(&a->recipes[x], role, &fx);
                an_factors_of(&a->recipes[y], role, &fy);
                if (an_factors_diff(&fx, &fy) != ((1u << k) | (1u << AN_F_FLOOR)) || an_one_factor(a, t, x, y, &inert) >= 0)
                    continue;
                hit = 1;
                if (first < 0) {
                    first = t;
                    an_factors_label(&fx, la, sizeof la);
                    an_factors_label(&fy, lb, sizeof lb);
                }
            }
        tensors += hit;
    }
    if (!tensors)
        return;
    fprintf(c->md, "Not paired on %d tensor%s (e.g. `%s`): `%s` and `%s` differ in %s and in the amax floor (eps), "
                   "and the floor bound some group's amax there (an amax at or below eps, e.g. a row of zeros), so "
                   "the difference would not be one factor's. Record both with the same eps (`eps=0`) to compare "
                   "them there.\n\n",
            tensors, tensors == 1 ? "" : "s", a->run->tensor_name[first], la, lb,
            k == AN_F_GRANULARITY ? "granularity" : an_factor_name((an_factor)k));
}
