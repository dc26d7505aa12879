/*
 * report.c — `fp8prof report`: every analysis and figure over the runs,
 * put together as DIR/report.md and DIR/index.html (one self-contained
 * page: report_html.c): a summary of one line per question with the link to
 * its evidence, the contents, then every section.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "analysis.h"
#include "fp8_error.h"
#include "keys.h"
#include "ranks.h"
#include "report.h"
#include "factors.h"
#include "report_html.h"

#define meta an_meta

static void progress(const an_ctx *c, int k, int n, const char *what, double t0)
{
    if (c->quiet)
        return;
    int tty = isatty(2);
    fprintf(stderr, "%sfp8prof report: [%d/%d] %-28s %6.1f s%s", tty ? "\r" : "", k, n, what, an_now() - t0,
            tty ? "" : "\n");
    if (tty && k == n)
        fprintf(stderr, "\n");
    fflush(stderr);
}

/* ---- the report ------------------------------------------------------------ */

/* For a factor no one-factor pair answered: the first recorded pair of
 * recipes that differ in it and in something else, and what else (NULL
 * when the runs record no such pair: then advising what to record is
 * right).  malloc'd. */
static char *why_unpaired(const an_ctx *c, int factor)
{
    static const char *fname[] = {"the element format", "the timing", "the granularity", "the scale encoding",
                                  "the amax floor (eps)", "the delayed settings", "the cast options"};
    for (int ri = 0; ri < c->nruns; ri++) {
        const an_run *a = &c->runs[ri];
        for (int t = 0; t < a->run->ntensors; t++) {
            fp8_role role = (fp8_role)a->run->tensor_role[t];
            size_t nr;
            const int *rs = an_tensor_recipes(a, t, &nr);
            for (size_t i = 0; i < nr; i++)
                for (size_t j = i + 1; j < nr; j++) {
                    int x = rs[i], y = rs[j];
                    if (!a->recipe_ok[x] || !a->recipe_ok[y])
                        continue;
                    an_factors fx, fy;
                    an_factors_of(&a->recipes[x], role, &fx);
                    an_factors_of(&a->recipes[y], role, &fy);
                    unsigned m = an_factors_diff(&fx, &fy);
                    if (!(m & (1u << factor)) || m == (1u << factor))
                        continue;
                    char other[200] = "";
                    size_t l = 0;
                    for (int k = 0; k < AN_NFACTOR; k++)
                        if (k != factor && (m & (1u << k)))
                            l += (size_t)snprintf(other + l, sizeof other - l, "%s%s", l ? " and " : "", fname[k]);
                    char *out = NULL, lx[96], ly[96];
                    if (asprintf(&out, "`%s` and `%s` are recorded (e.g. on `%s` in `%s`), but they differ in %s too, "
                                       "which is not one factor at a time: record a partner that differs in %s alone%s",
                                 an_factors_label(&fx, lx, sizeof lx), an_factors_label(&fy, ly, sizeof ly),
                                 a->run->tensor_name[t], a->label, other, fname[factor],
                                 (m & (1u << AN_F_FLOOR)) ? " (the floor bound some group's amax here, so the pair "
                                                            "could not be treated as equal in it; `eps=0` on both "
                                                            "avoids that)" : "") < 0)
                        return NULL;
                    return out;
                }
        }
    }
    return NULL;
}

#define NANALYSES 8
int an_report_total(void) { return 1 + NANALYSES + 2; }

static const struct {
    const char *name;
    int (*fn)(an_ctx *);
} analyses[NANALYSES] = {{"compare", an_compare}, {"claim", an_claim},     {"replay", an_replay},
                         {"dynamics", an_dynamics}, {"outliers", an_outliers}, {"swiglu", an_swiglu},
                         {"loss", an_loss},       {"advise", an_advise}};

/* Smooth SwiGLU (unless --smooth named the pair): a run without it and one
 * with it (folded, "yes" in older files, before published), same /meta
 * recipe and steps; a run with the other variant is vs_c */
static void pair_smooth_runs(an_ctx *c)
{
    for (int i = 0; i < c->nruns && c->vs_a < 0; i++)
        for (int pass = 0; pass < 2; pass++)
            for (int j = 0; j < c->nruns; j++) {
                const char *si = meta(&c->runs[i], "smooth_swiglu"), *sj = meta(&c->runs[j], "smooth_swiglu");
                const char *ri = meta(&c->runs[i], "recipe"), *rj = meta(&c->runs[j], "recipe");
                const char *ti = meta(&c->runs[i], "steps"), *tj = meta(&c->runs[j], "steps");
                if (!si || !sj || !ri || !rj || strcmp(si, "no") != 0 || strcmp(ri, rj) != 0 ||
                    (ti && tj && strcmp(ti, tj) != 0))
                    continue;
                int fold = !strcmp(sj, "yes") || !strcmp(sj, "fold"), published = !strcmp(sj, "published");
                if (c->vs_a < 0 && (pass ? published : fold))
                    c->vs_a = i, c->vs_b = j;
                else if (c->vs_a == i && c->vs_c < 0 && j != c->vs_b && published)
                    c->vs_c = j;
            }
}

/* every analysis, each section's Markdown into sec[k]: 0, or 1 when one failed */
static int run_analyses(an_ctx *c, char *sec[NANALYSES], size_t secn[NANALYSES], int done_before, int total,
                        double t0)
{
    FILE *keep = c->md;
    int rc = 0;
    for (int k = 0; k < NANALYSES && !rc; k++) {
        progress(c, done_before + k + 1, total, analyses[k].name, t0);
        c->md = open_memstream(&sec[k], &secn[k]);
        if (!c->md) {
            rc = 1;
            break;
        }
        int r = analyses[k].fn(c);
        fclose(c->md);
        if (r == 1) {
            fprintf(stderr, "\nfp8prof: report: the %s analysis failed\n", analyses[k].name);
            rc = 1;
        }
    }
    c->md = keep;
    return rc;
}

/* the summary: one line per question, its key number and evidence */
static void md_summary(an_ctx *c, FILE *f, int failed)
{
    fprintf(f, "## Summary\n\n");
    static const char *unanswered[AN_NQ] = {
        "no delayed recipe was recorded",
        "no two recipes differ in the timing alone (record e.g. `e4m3:delayed` and `e4m3:current`)",
        "no per-tensor current recipe has a finer-grouped partner (record e.g. `e4m3:current` and "
        "`e4m3:block=1x128:eps=0`)",
        "no tensor carries per-tensor and per-block recipes both delayed and current (record e.g. "
        "`e4m3:block=1x128:delayed,history=64,eps=0` beside `e4m3:delayed:history=64`, `e4m3:current` and "
        "`e4m3:block=1x128:eps=0`)",
        "no run records smoothed shadows (`<recipe>:smooth` on the down projection's input, `<recipe>:smooth=fold` "
        "on its weight; the trainer adds them to runs without --smooth-swiglu)",
        "fewer than two runs carry the loss series",
        "no tensor has steps after warm-up",
        "no two recipes differ in the element format alone (record e.g. `e5m2:current` and `e4m3:current`)",
        "no records to measure"};
    /* a question about one factor that no pair answered: when recipes of
     * both sides were recorded, say why they are not compared instead of
     * advising to record them again */
    static const int qfactor[AN_NQ] = {-1, AN_F_TIMING, AN_F_GRANULARITY, -1, -1, -1, -1, AN_F_FORMAT, -1};
    for (int q = 0; q < AN_NQ; q++)
        if (!c->key[q] && !c->key_missing[q] && qfactor[q] >= 0)
            c->key_missing[q] = why_unpaired(c, qfactor[q]);
    for (int q = 0; q < AN_NQ; q++) {
        const char *text = c->key[q] ? c->key[q] : c->key_missing[q] ? c->key_missing[q] : unanswered[q];
        char link[200] = "";
        if (c->key[q]) {
            char slug[160];
            an_slug(c->key_section[q], slug, sizeof slug);
            snprintf(link, sizeof link, " ([evidence](#%s))", c->key_anchor[q][0] ? c->key_anchor[q] : slug);
        }
        if (q == AN_Q_BLOCKS) /* the second half of (b) */
            continue;
        if (q == AN_Q_FORMAT)
            fprintf(f, "\nAlso:\n\n");
        if (q == AN_Q_JIT) {
            const char *bt = c->key[AN_Q_BLOCKS]           ? c->key[AN_Q_BLOCKS]
                             : c->key_missing[AN_Q_BLOCKS] ? c->key_missing[AN_Q_BLOCKS]
                                                           : unanswered[AN_Q_BLOCKS];
            fprintf(f, "- **%s** Just-in-time scaling: %s%s. Finer scale blocks: %s%s%s.\n", an_key_title(q),
                    c->key[q] ? "" : "not measured: ", text, c->key[AN_Q_BLOCKS] ? "" : "not measured: ", bt, link);
            continue;
        }
        fprintf(f, "- **%s** %s%s%s.\n", an_key_title(q), c->key[q] ? "" : "Not measured: ", text, link);
    }
    if (failed)
        fprintf(f, "- %d figure%s could not be drawn (gnuplot failed; messages on stderr).\n", failed,
                failed == 1 ? "" : "s");
    fprintf(f, "\n");
}

/* multi-rank runs: their section across ranks (analyses/ranks.h), its data
 * files, finding and heat map; the Markdown into *rk (malloc'd) */
static int ranks_sections(an_ctx *c, char **rk, size_t *rkn)
{
    int rc = 0;
    FILE *rf = open_memstream(rk, rkn);
    for (int i = 0; rf && i < c->nruns; i++) {
        if (!c->runs[i].run->nranks)
            continue;
        an_ranks R;
        if (an_ranks_load(c->runs[i].run->index_path, &R) != 0) {
            fprintf(rf, "## Across ranks: %s\n\nNot analysed: %s\n\n", c->runs[i].label, fp8_error_message());
            continue;
        }
        an_ranks_markdown(&R, c->runs[i].label, rf);
        char nm1[128], nm2[128], sum[600];
        snprintf(nm1, sizeof nm1, "ranks_skew_%s.tsv", c->runs[i].label);
        snprintf(nm2, sizeof nm2, "ranks_scales_%s.tsv", c->runs[i].label);
        FILE *f1 = an_data(c, nm1), *f2 = an_data(c, nm2);
        an_ranks_tsv(&R, f1, f2);
        if (an_data_close(c, (FILE *[]){f1, f2}, 2))
            rc = 1;
        an_ranks_summary(&R, sum, sizeof sum);
        an_finding(c, "ranks", "`%s`: %s", c->runs[i].label, sum);
        int t = an_ranks_most_skewed(&R);
        char name[96];
        snprintf(name, sizeof name, "ranks_heatmap_%d", i);
        if (t >= 0 && an_ranks_heatmap(&R, R.tname[t], c->outdir, name) == 0)
            fprintf(rf, "![log2(amax) per rank and step of %s, the tensor with the largest median rank skew](%s.png)\n\n",
                    R.tname[t], name);
        an_ranks_free(&R);
    }
    if (rf)
        fclose(rf);
    return rc;
}

/* contents: the sections' headings, as written below */
static void md_contents(FILE *f, char *const sec[NANALYSES], const char *rk)
{
    fprintf(f, "## Contents\n\n- [Runs](#runs)\n- [Every finding, by topic](#every-finding-by-topic)\n");
    for (int k = 0; k <= NANALYSES; k++)
        for (const char *q = k < NANALYSES ? sec[k] : rk; q && *q; q += strcspn(q, "\n") + (q[strcspn(q, "\n")] == '\n'))
            if (q[0] == '#' && q[1] == '#' && q[2] == ' ') {
                char h[256], slug[256];
                size_t hl = strcspn(q + 3, "\n");
                snprintf(h, sizeof h, "%.*s", (int)(hl < 255 ? hl : 255), q + 3);
                an_slug(h, slug, sizeof slug);
                fprintf(f, "- [%s](#%s)\n", h, slug);
            }
}

/* run a's recipe as the table of runs names it */
static void run_recipe_label(const an_run *a, char *lab, size_t n)
{
    const char *r = meta(a, "recipe");
    fp8_recipe pr;
    const char *ap = meta(a, "applied"), *rr = meta(a, "recorded_recipe");
    snprintf(lab, n, "-");
    if (r && (!strcmp(r, "bf16") || !strcmp(r, "fp32")) && rr)
        snprintf(lab, n, "%s, record-only; %s as shadow (no FP8 applied)", r, rr);
    else if (r && (!strcmp(r, "bf16") || !strcmp(r, "fp32")))
        snprintf(lab, n, "%s (no FP8%s)", r, a->run->nrecipes ? "; recipes recorded as shadows only" : "");
    else if (ap && !strcmp(ap, "no"))
        snprintf(lab, n, "%s recorded, not applied (record-only)", r ? r : "?");
    else if (r && fp8_recipe_parse(r, &pr) == FP8_OK) {
        int k = 0; /* the run's own id of it, for the canonical label */
        while (k < a->run->nrecipes && strcmp(a->run->recipe_spec[k], pr.spec) != 0)
            k++;
        if (k < a->run->nrecipes)
            an_recipe_label(a, k, lab, n);
        else
            snprintf(lab, n, "%s", r);
    } else if (r)
        snprintf(lab, n, "%s", r);
}

/* the table of runs, and which of them smooth their SwiGLU */
static void md_runs(const an_ctx *c, FILE *f)
{
    fprintf(f, "\n## Runs\n\n| run | recipe (canonical name) | steps | tensors | recipes | records | "
               "statistics every |\n|---|---|---|---|---|---|---|\n");
    for (int i = 0; i < c->nruns; i++) {
        const an_run *a = &c->runs[i];
        const char *r = meta(a, "recipe"), *s = meta(a, "steps");
        char lab[200];
        run_recipe_label(a, lab, sizeof lab);
        char shown[48];
        int with = 0;
        for (int t = 0; t < a->run->ntensors; t++)
            with += an_has_data(a, t);
        if (with < a->run->ntensors)
            snprintf(shown, sizeof shown, "%d of %d", with, a->run->ntensors);
        else
            snprintf(shown, sizeof shown, "%d", a->run->ntensors);
        char rk0[120] = "";
        if (a->run->nranks)
            snprintf(rk0, sizeof rk0, " (rank 0 of %d)", a->run->nranks);
        if (a->run->unreadable_records) /* a damaged file: what it lacks is said where the run is named */
            snprintf(rk0 + strlen(rk0), sizeof rk0 - strlen(rk0), " (damaged: its last %zu records unreadable)",
                     a->run->unreadable_records);
        if (a->run->unreadable_rows)
            snprintf(rk0 + strlen(rk0), sizeof rk0 - strlen(rk0), " (damaged: %zu every-step rows unreadable)",
                     a->run->unreadable_rows);
        int named = r && strcmp(lab, r);
        fprintf(f, "| %s%s%s | %s%s%s%s | %s | %s | %d | %zu | %lld |\n", a->label, rk0,
                i == c->baseline ? " (baseline)" : "", lab, named ? " (`" : "", named ? r : "", named ? "`)" : "",
                s ? s : "-", shown, a->run->nrecipes, a->run->nrecords,
                a->run->nrecords ? (long long)a->record_every : 0LL);
    }
    int nsw = 0;
    for (int i = 0; i < c->nruns; i++) {
        const char *sw = meta(&c->runs[i], "smooth_swiglu");
        if (sw && strcmp(sw, "no") != 0)
            fprintf(f, "%s`%s` (%s)", nsw++ ? ", " : "\nRuns with Smooth SwiGLU: ", c->runs[i].label,
                    strcmp(sw, "published") == 0 ? "as published" : "folded into w2");
    }
    if (nsw)
        fprintf(f, ".");
}

/* every finding, grouped by topic under a label */
static void md_findings(const an_ctx *c, FILE *f)
{
    fprintf(f, "\n\n## Every finding, by topic\n\n");
    if (!c->nfindings)
        fprintf(f, "No findings: the runs hold no records the analyses could use.\n");
    static const char *topics[][2] = {
        {"risk", "At risk"},
        {"warmup", "Warm-up (left out of every rate, count and verdict; its cost)"},
        {"timing", "Delayed → current scaling (same format, granularity, encoding): ΔSQNR dB [95% CI] (tensors "
                   "better / worse / neither)"},
        {"granularity", "Finer scale groups (same format, timing, encoding)"},
        {"format", "E5M2 → E4M3 (same scaling)"},
        {"encoding", "Scale encoding (fp32 → power-of-two / UE8M0; MX rounding rules)"},
        {"floor", "Amax floor (eps)"},
        {"delayedset", "Delayed-scaling settings (history, algorithm, margin), as recorded"},
        {"cast", "Cast options (stochastic rounding, saturation, NVFP4's Hadamard transform)"},
        {"verdict", "Verdicts per run (delayed is safe / needs JIT / needs block scaling)"},
        {"replay", "Delayed scaling replayed (history, algorithm, margin)"},
        {"replaycheck", "Replay checked against the recorded recipes"},
        {"dynamics", "Block vs tensor amax volatility"},
        {"outliers", "Outliers"},
        {"smooth", "What Smooth SwiGLU changed"},
        {"loss", "Loss against the baseline"},
        {"advise", "E4M3 vs E5M2 per scaling kind (sign test over tensors; flushed values E4M3 vs E5M2)"},
        {"gemm", "FP8 GEMM output error (SQNR against the same GEMM in FP32)"},
        {"ranks", "Across ranks (multi-rank runs: rank skew, scales of reducing recipes)"}};
    for (size_t k = 0; k < sizeof topics / sizeof topics[0]; k++) {
        int any = 0;
        for (int i = 0; i < c->nfindings; i++)
            if (strcmp(c->topic[i], topics[k][0]) == 0) {
                if (!any) /* a label, not a heading: section names repeat here */
                    fprintf(f, "**%s**\n\n", topics[k][1]);
                fprintf(f, "- %s\n", c->findings[i]);
                any = 1;
            }
        if (any)
            fprintf(f, "\n");
    }
}

/* the analyses' sections, each with its figures under a heading of its own */
static void md_sections(FILE *f, char *const sec[NANALYSES], const size_t secn[NANALYSES], const an_figure *figs,
                        int nf)
{
    for (int k = 0; k < NANALYSES; k++) {
        if (sec[k])
            fwrite(sec[k], 1, secn[k], f);
        int nfig = 0;
        for (int i = 0; i < nf; i++)
            if (strcmp(figs[i].section, analyses[k].name) == 0) {
                if (!nfig++)
                    fprintf(f, "### Figures: %s\n\n", analyses[k].name);
                if (figs[i].name[0])
                    fprintf(f, "![%s](%s.png)\n\n", figs[i].caption, figs[i].name);
                else
                    fprintf(f, "Not drawn: %s\n\n", figs[i].caption);
            }
    }
}

/* report.md, index.html and summary.json from the Markdown: 0 or 1 */
static int write_outputs(an_ctx *c, const char *md, size_t mdn)
{
    int rc = 0;
    if (an_json_write(c) != 0)
        rc = 1;
    FILE *o = an_data(c, "report.md"), *h = an_data(c, "index.html");
    if (!o || !h || !md) {
        rc = 1;
    } else {
        fwrite(md, 1, mdn, o);
        int missing = an_report_html(md, c->outdir, h);
        if (missing)
            fprintf(stderr, "fp8prof: report: %d figure%s missing from index.html (not drawn)\n", missing,
                    missing == 1 ? "" : "s");
    }
    if (an_data_close(c, (FILE *[]){o, h}, 2))
        rc = 1;
    return rc;
}

int an_report(an_ctx *c, int nsteps_done_before, double t0)
{
    int total = nsteps_done_before + NANALYSES + 2;
    char *sec[NANALYSES] = {0};
    size_t secn[NANALYSES] = {0};
    /* the baseline: --baseline, else the loss analysis's stated rule (an
     * arm without FP8, the one with most replicates; never file order) */
    if (!c->baseline_set)
        c->baseline = -1;
    pair_smooth_runs(c);
    int rc = run_analyses(c, sec, secn, nsteps_done_before, total, t0);
    an_figure *figs = calloc(AN_MAX_FIGURES, sizeof *figs);
    int nf = 0, failed = 0;
    if (!rc && figs) {
        progress(c, total - 1, total, "figures (gnuplot)", t0);
        nf = an_figures(c, figs, AN_MAX_FIGURES, &failed);
    }
    char *md = NULL;
    size_t mdn = 0;
    FILE *f = rc ? NULL : open_memstream(&md, &mdn);
    if (f) {
        time_t tt = time(NULL);
        char date[64];
        strftime(date, sizeof date, "%Y-%m-%d %H:%M UTC", gmtime(&tt));
        fprintf(f, "# fp8prof report\n\n%d run%s, written %s. Every number below is defined in docs/analyses.md and "
                   "docs/statistics.md; the data files (tab-separated) and figures (PNG, SVG, gnuplot script) are "
                   "beside this file.\n\n",
                c->nruns, c->nruns == 1 ? "" : "s", date);
        md_summary(c, f, failed);
        char *rk = NULL;
        size_t rkn = 0;
        if (ranks_sections(c, &rk, &rkn))
            rc = 1;
        md_contents(f, sec, rk);
        md_runs(c, f);
        md_findings(c, f);
        md_sections(f, sec, secn, figs, nf);
        if (rk)
            fwrite(rk, 1, rkn, f);
        free(rk);
        fprintf(f, "---\nDefinitions of every statistic: docs/statistics.md; of every analysis and rule: "
                   "docs/analyses.md.\n");
        fclose(f);
        if (write_outputs(c, md, mdn))
            rc = 1;
        progress(c, total, total, rc ? "failed" : "done", t0);
    }
    free(md);
    free(figs);
    for (int k = 0; k < NANALYSES; k++)
        free(sec[k]);
    return rc;
}
