/*
 * verdicts.c — the per-tensor verdict (an_tensor_verdict: delayed is safe /
 * needs JIT / needs block scaling) from the tensor's series statistics and
 * its one-factor contrasts.  Definitions: docs/analyses.md, "compare".
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "analysis.h"
#include "contrasts.h"
#include "factors.h"
#include "series.h"
#include "verdicts.h"

const char *an_verdict_rule =
    "with D the tensor's delayed recipe, C the recorded recipe that differs from D only in timing (current "
    "scaling, same format and scale encoding) and B the finer-granularity partner of C with the largest SQNR "
    "gain: **needs block scaling** when B beats C by more than G dB (Holm-adjusted p < 0.05) or C flushes more "
    "than U of the values while B flushes at most U/2; else **needs JIT** when D had at least E overflow events "
    "after warm-up (and more than C) or C beats D by more than M dB (Holm-adjusted p < 0.05); else **delayed is "
    "safe**. n/a when the run lacks D or C (nothing like for like to decide on)";

an_verdict an_tensor_verdict(const an_ctx *c, an_run *a, int t, an_vinfo *vi)
{
    memset(vi, 0, sizeof *vi);
    vi->D = vi->C = vi->B = -1;
    vi->d_timing = vi->p_timing = vi->d_gran = vi->p_gran = vi->under_c = vi->under_b = NAN;
    int D = -1;
    fp8_role role = (fp8_role)a->run->tensor_role[t];
    size_t nr;
    const int *rs = an_tensor_recipes(a, t, &nr);
    for (size_t ri = 0; ri < nr; ri++) { /* the active recipe when delayed, else the first delayed */
        int r = rs[ri];
        size_t n;
        an_series(a, t, r, &n);
        if (!n || !a->recipe_ok[r] || a->recipes[r].kind != FP8_RECIPE_DELAYED)
            continue;
        if (D < 0 || r == a->active[t])
            D = an_canon(a, t, r);
    }
    if (D < 0) {
        snprintf(vi->why, sizeof vi->why, "no delayed recipe recorded");
        return AN_VERDICT_NA;
    }
    vi->D = D;
    an_factors fd, fr;
    an_factors_of(&a->recipes[D], role, &fd);
    size_t nc;
    const an_contrast *v = an_tensor_contrasts(c, a, t, &nc);
    for (size_t i = 0; v && i < nc; i++)
        if (v[i].factor == AN_F_TIMING && v[i].a == D) {
            an_factors_of(&a->recipes[v[i].b], role, &fr);
            if (fr.timing == 2) {
                vi->C = v[i].b, vi->d_timing = v[i].d.mean, vi->p_timing = v[i].padj;
                break;
            }
        }
    const an_sstats *sd = an_series_cached(a, t, D);
    if (sd)
        vi->events_d = sd->events, vi->steps_d = sd->event_steps;
    if (vi->C < 0) {
        char lab[96];
        snprintf(vi->why, sizeof vi->why, "no current-scaling recipe like %s but for timing",
                 an_factors_label(&fd, lab, sizeof lab));
        return AN_VERDICT_NA;
    }
    const an_sstats *sc = an_series_cached(a, t, vi->C);
    if (sc)
        vi->events_c = sc->events, vi->under_c = sc->underflow_rate;
    for (size_t i = 0; v && i < nc; i++)
        if (v[i].factor == AN_F_GRANULARITY && v[i].a == vi->C &&
            (vi->B < 0 || v[i].d.mean > vi->d_gran)) {
            vi->B = v[i].b, vi->d_gran = v[i].d.mean, vi->p_gran = v[i].padj;
        }
    if (vi->B >= 0) {
        const an_sstats *sb = an_series_cached(a, t, vi->B);
        if (sb)
            vi->under_b = sb->underflow_rate;
        if (vi->d_gran > c->block_gain_db && vi->p_gran < AN_ALPHA) {
            snprintf(vi->why, sizeof vi->why, "blocks gain %.2f dB (p_adj %.2g)", vi->d_gran, vi->p_gran);
            return AN_VERDICT_BLOCK;
        }
        if (vi->under_c > c->underflow_max && vi->under_b <= c->underflow_max / 2) {
            snprintf(vi->why, sizeof vi->why, "current flushes %.3g%% of values, blocks %.3g%%", 100 * vi->under_c,
                     100 * vi->under_b);
            return AN_VERDICT_BLOCK;
        }
    }
    if ((int)vi->events_d >= c->min_events && vi->events_d > vi->events_c) {
        snprintf(vi->why, sizeof vi->why, "%zu overflow events in %zu steps after warm-up (current: %zu)", vi->events_d,
                 vi->steps_d, vi->events_c);
        return AN_VERDICT_JIT;
    }
    if (vi->d_timing > c->sqnr_margin_db && vi->p_timing < AN_ALPHA) {
        snprintf(vi->why, sizeof vi->why, "current gains %.2f dB (p_adj %.2g)", vi->d_timing, vi->p_timing);
        return AN_VERDICT_JIT;
    }
    snprintf(vi->why, sizeof vi->why, "%zu overflow events (< %d), timing %+.2f dB, blocks %+.2f dB", vi->events_d,
             c->min_events, vi->d_timing, vi->d_gran);
    return AN_VERDICT_SAFE;
}

const char *an_verdict_name(an_verdict v)
{
    static const char *n[] = {"n/a", "delayed is safe", "needs JIT", "needs block scaling"};
    return n[v];
}
