/*
 * replay_report.c — the delayed-scaling replay (replay.c) rendered: its
 * data files, its section of the report, its JSON and the summary's
 * answer across runs; an_replay, the analysis's entry.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analysis.h"
#include "keys.h"
#include "replay.h"
#include "replay_run.h"

/* ---- one run: render --------------------------------------------------------- */

/* The data files: replay_tensors.tsv and replay_truth.tsv rows, then
 * replay_settings.tsv and replay_front.tsv. */
static void replay_tsv(const an_run *a, const run_replay *R, FILE *fs, FILE *ft, FILE *fg, FILE *ff)
{
    for (size_t i = 0; i < R->ntensrows; i++) {
        const tensor_row *w = &R->tens[i];
        fprintf(ft, "%s\t%s\t%s\t%zu\t%zu\t%zu\t", a->label, a->run->tensor_name[w->t],
                fp8_role_name((fp8_role)a->run->tensor_role[w->t]), w->steps, w->ev1024, w->ev16);
        if (w->best >= 0)
            fprintf(ft, "%d\t%s\t%d\t%zu\t%.9g\n", hist_lens[w->best / (2 * NM)], algo_name(w->best), w->best % NM,
                    w->best_events, w->best_un);
        else /* every step was warm-up */
            fprintf(ft, "-\t-\t-\t0\tnan\n");
    }
    for (size_t i = 0; i < R->ntruth; i++) {
        const truth_row *w = &R->truth[i];
        char lab[96];
        fprintf(fg, "%s\t%s\t%s\t%zu\t%zu\t%zu\t%.0f\t%.0f\t%.0f\t%.9g\t%.0f\t%.0f\t%.0f\t%.9g\t%zu\n", a->label,
                an_recipe_label_on(a, w->t, w->r, lab, sizeof lab), a->run->tensor_name[w->t], w->checked, w->match,
                w->recs, w->ovt, w->ovl, w->ovh, w->ove, w->unt, w->unl, w->unh, w->une, w->outside);
    }
    for (int k = 0; k < NSET; k++) {
        const ssum *q = &R->sets[k];
        int p = q->numel > 0 && !an_replay_dominated(R->sets, k, NSET);
        double nu = q->numel > 0 ? q->numel : NAN;
        fprintf(fs, "%s\t%d\t%s\t%d\t%d\t%zu\t%zu\t%zu\t%zu\t%zu\t%zu\t%.9g\t%.9g\t%.9g\t%.9g\t%.9g\t%.9g\t%d\n", a->label,
                hist_lens[k / (2 * NM)], algo_name(k), k % NM, R->ntens, q->steps, q->events, R->with_ev[k],
                q->warm_events, q->events_half[0], q->events_half[1], q->ov.lo / nu, q->ov.hi / nu, q->un.lo / nu,
                q->un.hi / nu, q->ov_est.est / nu, q->un_est.est / nu, p);
    }
    for (int i = 0; i < R->npoints; i++)
        fprintf(ff, "%s\t%zu\t%.9g\t%.9g\t%s\n", a->label, R->points[i].events, R->points[i].un_lo_pct,
                R->points[i].un_hi_pct, R->points[i].label);
}

/* The Markdown table of every setting and the front. */
static void replay_md_table(FILE *md, const an_run *a, const run_replay *R)
{
    const ssum *te = &R->sets[I1024];
    fprintf(md, "### Run `%s`: %d tensors, %zu tensor-steps after warm-up\n\n", a->label, R->ntens, te->steps);
    if (R->from_records)
        fprintf(md, "**This run has no every-step amax (a file older than schema 3, or recorded without the "
                    "series): the replay sees only the recorded steps (every %lld), so a history of H covers H x "
                    "%lld training steps and its scales and events differ from what TE would have done.**\n\n",
                (long long)a->record_every, (long long)a->record_every);
    if (R->hist_unreadable)
        fprintf(md, "Exponent histograms unreadable: overflow events only, no value shares.\n\n");
    fprintf(md, "Per setting: overflow events (steps with a value past the range, summed over tensors; exact, "
                "every step after warm-up; denominator %zu tensor-steps) and the share of values flushed to zero "
                "[lower, upper bound] at the %s steps with statistics (%.3g elements):\n\n"
                "| history | algo | margin 0 | margin 1 | margin 2 | margin 3 |\n|---|---|---|---|---|---|\n",
            te->steps, a->record_every > 1 ? "recorded" : "", te->numel);
    for (int row = 0; row <= NH; row++) { /* max at each history, then most_recent (history-free) */
        int base = row < NH ? row * 2 * NM : NM;
        if (row < NH)
            fprintf(md, "| %d | max |", hist_lens[row]);
        else
            fprintf(md, "| any | most_recent |");
        for (int m = 0; m < NM; m++) {
            const ssum *q = &R->sets[base + m];
            fprintf(md, " %zu ev, [%.3g, %.3g]%% |", q->events, 100 * q->un.lo / q->numel, 100 * q->un.hi / q->numel);
        }
        fprintf(md, "\n");
    }
    fprintf(md, "\nNot certainly dominated (no other setting has no more events and a flush upper bound at or "
                "below this one's lower bound): ");
    for (int i = 0; i < R->npoints; i++)
        fprintf(md, "%s%s (%zu ev)", i ? "; " : "", R->points[i].label, R->points[i].events);
    fprintf(md, ".\n\n");
}

/* The choice, its robustness, the setting better on both axes. */
static void replay_md_choice(FILE *md, const run_replay *R)
{
    const ssum *sets = R->sets, *te = &sets[I1024];
    int best = R->best, b1 = R->b1, w = R->both;
    fprintf(md, "**Choice** (rule: fewest overflow events after warm-up, then the smallest flush upper bound): "
                "history %d, %s, margin %d — %zu events on %zu of %d tensors, flushed [%.3g, %.3g]%%; TE's default "
                "(1024, max, 0): %zu events on %zu of %d tensors, flushed [%.3g, %.3g]%%.\n\n",
            hist_lens[best / (2 * NM)], algo_name(best), best % NM, sets[best].events, R->with_ev[best], R->ntens,
            100 * sets[best].un.lo / sets[best].numel, 100 * sets[best].un.hi / sets[best].numel, te->events,
            R->with_ev[I1024], R->ntens, 100 * te->un.lo / te->numel, 100 * te->un.hi / te->numel);
    fprintf(md, "**Robustness**: chosen on the first half of the steps alone, the rule picks history %d, %s, "
                "margin %d, which has %zu events in the second half (TE's default: %zu; the full-run choice: %zu). "
                "%s\n\n",
            hist_lens[b1 / (2 * NM)], algo_name(b1), b1 % NM, sets[b1].events_half[1], te->events_half[1],
            sets[best].events_half[1],
            sets[b1].events_half[1] <= te->events_half[1]
                ? "The first-half choice holds up out of sample."
                : "The first-half choice does worse than TE's default out of sample: the ranking is not stable "
                  "on this run.");
    if (w >= 0)
        fprintf(md, "**On both axes**: history %d, %s, margin %d has %zu events (TE's default %zu) and "
                    "flushes [%.3g, %.3g]%% (TE's [%.3g, %.3g]%%): no worse on either, better on one.\n\n",
                hist_lens[w / (2 * NM)], algo_name(w), w % NM, sets[w].events, te->events,
                100 * sets[w].un.lo / sets[w].numel, 100 * sets[w].un.hi / sets[w].numel, 100 * te->un.lo / te->numel,
                100 * te->un.hi / te->numel);
    else
        fprintf(md, "**On both axes**: no setting has fewer events than TE's default and certainly no "
                    "more flushed: fewer events cost flush here (the figure shows the trade).\n\n");
}

/* summary.json's replay entry of the run */
static void replay_json(an_ctx *c, const an_run *a, const run_replay *R)
{
    FILE *j = an_json(c, AN_J_REPLAY);
    if (!j)
        return;
    const ssum *sets = R->sets, *te = &sets[I1024];
    int best = R->best, b1 = R->b1;
    double match_all = 0, steps_all = 0;
    for (int r = 0; r < a->run->nrecipes; r++)
        match_all += R->by_recipe[r].match, steps_all += R->by_recipe[r].steps;
    fputs("{\"run\": ", j), an_json_str(j, a->label);
    fprintf(j, ", \"tensor_count\": %d, \"tensor_steps\": %zu, \"every_step\": %s, \"scale_match_fraction\": ",
            R->ntens, te->steps, R->from_records ? "false" : "true");
    an_json_num(j, steps_all > 0 ? match_all / steps_all : NAN);
    fprintf(j, ", \"te_default\": {\"events\": %zu, \"tensors_with_events\": %zu}, \"best\": {\"history\": %d, "
               "\"algo\": \"%s\", \"margin\": %d, \"events\": %zu, \"flushed_frac_hi\": ",
            te->events, R->with_ev[I1024], hist_lens[best / (2 * NM)], algo_name(best), best % NM, sets[best].events);
    an_json_num(j, sets[best].un.hi / sets[best].numel);
    fprintf(j, "}, \"first_half_choice\": {\"history\": %d, \"algo\": \"%s\", \"margin\": %d, "
               "\"events_second_half\": %zu, \"te_default_events_second_half\": %zu}}",
            hist_lens[b1 / (2 * NM)], algo_name(b1), b1 % NM, sets[b1].events_half[1], te->events_half[1]);
}

/* The check against the recorded delayed recipes, and its finding. */
static void replay_md_truth(an_ctx *c, const an_run *a, const run_replay *R)
{
    int anytruth = 0;
    double match_all = 0, steps_all = 0;
    for (int r = 0; r < a->run->nrecipes; r++) {
        const truth_sum *b = &R->by_recipe[r];
        if (b->steps == 0)
            continue;
        char lab[96];
        if (!anytruth)
            fprintf(c->md, "Checked against the recorded delayed recipes, each replayed with its own settings: "
                           "scales at every step must match bit for bit; at the steps with statistics the true "
                           "counts must lie inside the histogram bounds. The in-binade estimate (data files only) "
                           "is shown with its measured bias:\n\n| recipe | steps | replayed scale = recorded | "
                           "records | outside bounds | overflows: true / estimate | flushed: true / estimate |\n"
                           "|---|---|---|---|---|---|---|\n");
        anytruth = 1;
        match_all += b->match, steps_all += b->steps;
        fprintf(c->md, "| %s | %.0f | %.2f%% | %.0f | %.0f | %.0f / %.0f (x%.2f) | %.0f / %.0f (x%.2f) |\n",
                an_recipe_label(a, r, lab, sizeof lab), b->steps, 100 * b->match / b->steps, b->recs, b->outside,
                b->ov, b->ovest, b->ov > 0 ? b->ovest / b->ov : NAN, b->un, b->unest, b->un > 0 ? b->unest / b->un : NAN);
    }
    if (R->nreduced)
        fprintf(c->md, "%sNot checked: delayed recipes that reduce their amax across ranks (`reduce=`): their "
                       "history held the group's amax, which one rank's file does not have (`fp8prof ranks` "
                       "checks that their scales agree across the group). The replays above read this rank's "
                       "amax: what the recipes would have done without the reduction.\n",
                anytruth ? "\n" : "");
    if (!anytruth && !R->nreduced)
        fprintf(c->md, "This run has no delayed recipe recorded (active or shadow): no ground truth to check the "
                       "replay against.\n");
    else
        an_finding(c, "replaycheck", "`%s`: replayed scales equal the recorded ones at %.2f%% of %.0f recipe-steps%s",
                   a->label, 100 * match_all / steps_all, steps_all,
                   R->nreduced ? " (recipes reducing their amax across ranks not checked: one rank's file lacks the "
                                 "group's amax)"
                               : "");
    fprintf(c->md, "\n");
}

/* ---- across runs: the summary's answer ---------------------------------------- */

typedef struct {
    an_span te, b1, te2, fl_b1, fl_te; /* events; flush upper bounds, % */
    char set[160];                     /* the first-half choices */
    size_t setl;
    char win[8][48];                   /* the settings better on both axes, and in how many runs */
    int win_n[8], nwin, runs;
} replay_totals;

static void replay_tally(replay_totals *Q, const run_replay *R)
{
    const ssum *sets = R->sets, *te = &sets[I1024];
    int b1 = R->b1, w = R->both;
    Q->runs++;
    an_span_add(&Q->fl_b1, 100 * sets[b1].un.hi / sets[b1].numel), an_span_add(&Q->fl_te, 100 * te->un.hi / te->numel);
    char one[48];
    if (w >= 0) {
        snprintf(one, sizeof one, "%d/%s/%d", hist_lens[w / (2 * NM)], algo_name(w), w % NM);
        int k = 0;
        while (k < Q->nwin && strcmp(Q->win[k], one) != 0)
            k++;
        if (k == Q->nwin && k < 8)
            snprintf(Q->win[Q->nwin++], sizeof Q->win[0], "%s", one);
        if (k < 8)
            Q->win_n[k]++;
    }
    an_span_add(&Q->te, (double)te->events), an_span_add(&Q->b1, (double)sets[b1].events_half[1]);
    an_span_add(&Q->te2, (double)te->events_half[1]);
    snprintf(one, sizeof one, "%d/%s/%d", hist_lens[b1 / (2 * NM)], algo_name(b1), b1 % NM);
    if (!strstr(Q->set, one) && Q->setl < sizeof Q->set - 60)
        Q->setl += (size_t)snprintf(Q->set + Q->setl, sizeof Q->set - Q->setl, "%s%s", Q->setl ? ", " : "", one);
}

static void replay_key(an_ctx *c, const replay_totals *Q)
{
    if (!Q->te.n)
        return;
    char a1[48], a2[48], a3[48], hist[200] = "";
    int64_t shortest = INT64_MAX; /* runs not longer than TE's history make its default a running max */
    for (int ri = 0; ri < c->nruns; ri++)
        shortest = an_run_steps(&c->runs[ri]) < shortest ? an_run_steps(&c->runs[ri]) : shortest;
    if (shortest <= 1024)
        snprintf(hist, sizeof hist, " (⚠ in a run of %lld steps its history is a running max)", (long long)shortest);
    char win[200] = "";
    int wb = -1;
    for (int k = 0; k < Q->nwin; k++)
        if (wb < 0 || Q->win_n[k] > Q->win_n[wb])
            wb = k;
    if (wb >= 0)
        snprintf(win, sizeof win, "; **%s** beats it on both overflow and flush in %d of %d runs", Q->win[wb],
                 Q->win_n[wb], Q->runs);
    else
        snprintf(win, sizeof win, "; no setting beats it on both overflow and flush");
    char f1[48], f2[48];
    an_key(c, AN_Q_REPLAY, "Delayed scaling replayed (history, algorithm, margin)",
           "TE's default (history 1024, max, margin 0) overflows at %s tensor-steps after warm-up%s%s%s; chosen "
           "on the first half of the steps, %s had %s events in the second half against %s for TE's default, "
           "flushing up to %s%% of values against TE's %s%%",
           an_span_fmt(&Q->te, "%.0f", a1, sizeof a1), Q->te.n > 1 ? " (range over the runs)" : "", hist, win, Q->set,
           an_span_fmt(&Q->b1, "%.0f", a2, sizeof a2), an_span_fmt(&Q->te2, "%.0f", a3, sizeof a3),
           an_span_fmt(&Q->fl_b1, "%.3g", f1, sizeof f1), an_span_fmt(&Q->fl_te, "%.3g", f2, sizeof f2));
}

/* One run's outputs, in the order the Markdown reads. */
static void replay_render(an_ctx *c, const an_run *a, const run_replay *R, FILE *const f[4], replay_totals *Q)
{
    replay_tsv(a, R, f[0], f[1], f[2], f[3]);
    replay_md_table(c->md, a, R);
    if (R->best < 0 || R->b1 < 0) {
        fprintf(c->md, "No tensor has steps after warm-up: nothing to choose from.\n\n");
        return;
    }
    replay_md_choice(c->md, R);
    replay_tally(Q, R);
    const ssum *sets = R->sets, *te = &sets[I1024];
    int best = R->best, b1 = R->b1;
    an_finding(c, "replay", "`%s`: TE default (1024/max/0) %zu overflow events on %zu of %d tensors after warm-up "
                            "(every step); fewest: history %d, %s, margin %d with %zu (flushed <= %.3g%%); chosen on "
                            "the first half, %s/%d has %zu events in the second half vs TE's %zu",
               a->label, te->events, R->with_ev[I1024], R->ntens, hist_lens[best / (2 * NM)], algo_name(best),
               best % NM, sets[best].events, 100 * sets[best].un.hi / sets[best].numel, algo_name(b1),
               hist_lens[b1 / (2 * NM)], sets[b1].events_half[1], te->events_half[1]);
    replay_json(c, a, R);
    replay_md_truth(c, a, R);
}

int an_replay(an_ctx *c)
{
    FILE *f[4] = {an_data(c, "replay_settings.tsv"), an_data(c, "replay_tensors.tsv"), an_data(c, "replay_truth.tsv"),
                  an_data(c, "replay_front.tsv")};
    int rc = 0;
    if (!f[0] || !f[1] || !f[2] || !f[3]) {
        rc = 1;
        goto done;
    }
    fprintf(f[3], "run\toverflow_events\tflushed_pct_lo\tflushed_pct_hi\tsettings\n");
    fprintf(f[0], "run\thistory\talgo\tmargin\ttensors\tsteps\toverflow_events\ttensors_with_events\twarmup_events\t"
                  "events_first_half\tevents_second_half\toverflow_frac_lo\toverflow_frac_hi\tunderflow_frac_lo\t"
                  "underflow_frac_hi\toverflow_frac_est\tunderflow_frac_est\tpareto\n");
    fprintf(f[1], "run\ttensor\trole\tsteps\tevents_h1024_max_m0\tevents_h16_max_m0\tbest_history\tbest_algo\t"
                  "best_margin\tbest_events\tbest_underflow_frac_hi\n");
    fprintf(f[2], "run\trecipe\ttensor\tseries_steps\tscale_match_steps\trecords\toverflows_true\toverflows_lo\t"
                  "overflows_hi\toverflows_est\tunderflows_true\tunderflows_lo\tunderflows_hi\tunderflows_est\t"
                  "outside_bounds\n");
    fprintf(c->md, "## Delayed scaling replayed (history, algorithm, margin)\n\n");
    replay_totals Q;
    memset(&Q, 0, sizeof Q);
    for (int ri = 0; ri < c->nruns && !rc; ri++) {
        const an_run *a = &c->runs[ri];
        run_replay R;
        if (an_replay_compute(a, &R) != 0) {
            fprintf(stderr, "fp8prof: replay: out of memory\n");
            rc = 1;
        } else if (!R.ntens) {
            fprintf(c->md, "Run `%s`: no tensor records, nothing to replay.\n\n", a->label);
        } else {
            replay_render(c, a, &R, f, &Q);
        }
        an_replay_free(&R);
    }
    if (!rc)
        replay_key(c, &Q);
done:
    if (an_data_close(c, f, 4))
        rc = 1;
    return rc;
}
