/*
 * report.c — `fp8prof report`: every analysis and figure over the runs,
 * put together as DIR/report.md and DIR/index.html (figures inline, opens
 * from disk), headed by a summary of the findings.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "analysis.h"
#include "report.h"

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

/* ---- a small Markdown to HTML converter for what the analyses write ------- */

static void html_inline(FILE *f, const char *s)
{
    int code = 0, bold = 0;
    for (; *s; s++) {
        if (*s == '`') {
            fputs(code ? "</code>" : "<code>", f);
            code = !code;
        } else if (!code && s[0] == '*' && s[1] == '*') {
            fputs(bold ? "</b>" : "<b>", f);
            bold = !bold;
            s++;
        } else if (!code && s[0] == '*' && s[1] != ' ' && strchr(s + 1, '*')) {
            const char *e = strchr(s + 1, '*');
            fputs("<i>", f);
            for (const char *q = s + 1; q < e; q++)
                fputc(*q == '<' ? '[' : *q, f);
            fputs("</i>", f);
            s = e;
        } else if (*s == '<')
            fputs("&lt;", f);
        else if (*s == '>')
            fputs("&gt;", f);
        else if (*s == '&')
            fputs("&amp;", f);
        else
            fputc(*s, f);
    }
    if (code)
        fputs("</code>", f);
    if (bold)
        fputs("</b>", f);
}

static void md_to_html(const char *md, FILE *f)
{
    fputs("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n<title>fp8prof report</title>\n"
          "<style>body{font-family:sans-serif;max-width:1100px;margin:2em auto;padding:0 1em;color:#222}"
          "table{border-collapse:collapse;margin:1em 0;font-size:90%}td,th{border:1px solid #ccc;padding:3px 8px;"
          "text-align:left}th{background:#f0f0f0}code{background:#f4f4f4;padding:0 3px}figure{margin:1.5em 0}"
          "img{max-width:100%;border:1px solid #ddd}figcaption{font-size:90%;color:#444}h2{border-bottom:1px solid "
          "#ccc;margin-top:2em}</style></head><body>\n",
          f);
    const char *p = md;
    int in_table = 0, in_list = 0, in_par = 0, table_row = 0;
    char line[8192];
    while (*p) {
        size_t n = strcspn(p, "\n");
        size_t m = n < sizeof line - 1 ? n : sizeof line - 1;
        memcpy(line, p, m);
        line[m] = 0;
        p += n + (p[n] == '\n');
        int is_table = line[0] == '|', is_item = line[0] == '-' && line[1] == ' ';
        if (!is_table && in_table)
            fputs("</table>\n", f), in_table = 0;
        if (!is_item && in_list)
            fputs("</ul>\n", f), in_list = 0;
        if ((is_table || is_item || line[0] == '#' || line[0] == 0 || line[0] == '!') && in_par)
            fputs("</p>\n", f), in_par = 0;
        if (line[0] == 0)
            continue;
        if (line[0] == '#') {
            int lv = 0;
            while (line[lv] == '#')
                lv++;
            fprintf(f, "<h%d>", lv);
            html_inline(f, line + lv + 1);
            fprintf(f, "</h%d>\n", lv);
        } else if (is_table) {
            if (strncmp(line, "|---", 4) == 0)
                continue;
            if (!in_table)
                fputs("<table>\n", f), in_table = 1, table_row = 0;
            const char *cell = "td";
            if (table_row++ == 0)
                cell = "th";
            fputs("<tr>", f);
            char *s = line + 1;
            while (*s) {
                char *e = strchr(s, '|');
                if (!e)
                    break;
                *e = 0;
                fprintf(f, "<%s>", cell);
                html_inline(f, s);
                fprintf(f, "</%s>", cell);
                s = e + 1;
            }
            fputs("</tr>\n", f);
        } else if (is_item) {
            if (!in_list)
                fputs("<ul>\n", f), in_list = 1;
            fputs("<li>", f);
            html_inline(f, line + 2);
            fputs("</li>\n", f);
        } else if (line[0] == '!' && line[1] == '[') {
            char *cap = line + 2, *ce = strstr(cap, "](");
            if (!ce)
                continue;
            *ce = 0;
            char *src = ce + 2, *se = strchr(src, ')');
            if (se)
                *se = 0;
            fprintf(f, "<figure><img src=\"%s\" alt=\"figure\"><figcaption>", src);
            html_inline(f, cap);
            fputs("</figcaption></figure>\n", f);
        } else {
            if (!in_par)
                fputs("<p>", f), in_par = 1;
            else
                fputc(' ', f);
            html_inline(f, line);
        }
    }
    if (in_table)
        fputs("</table>\n", f);
    if (in_list)
        fputs("</ul>\n", f);
    if (in_par)
        fputs("</p>\n", f);
    fputs("</body></html>\n", f);
}

/* ---- the report ------------------------------------------------------------ */

int an_report(an_ctx *c, int nsteps_done_before, double t0)
{
    static const struct {
        const char *name;
        int (*fn)(an_ctx *);
    } steps[] = {{"compare", an_compare}, {"replay", an_replay}, {"dynamics", an_dynamics},
                 {"outliers", an_outliers}, {"loss", an_loss},     {"advise", an_advise}};
    enum { NA = 6 };
    int total = nsteps_done_before + NA + 2;
    char *sec[NA] = {0};
    size_t secn[NA] = {0};
    int rc = 0;
    /* the baseline: a run recorded without FP8 (bf16/fp32), else the first */
    c->baseline = 0;
    for (int i = 0; i < c->nruns; i++) {
        const char *r = meta(&c->runs[i], "recipe");
        if (r && (strcmp(r, "bf16") == 0 || strcmp(r, "fp32") == 0)) {
            c->baseline = i;
            break;
        }
    }
    /* Smooth SwiGLU: a run with it and one without, same recipe */
    for (int i = 0; i < c->nruns && c->vs_a < 0; i++)
        for (int j = 0; j < c->nruns; j++) {
            const char *si = meta(&c->runs[i], "smooth_swiglu"), *sj = meta(&c->runs[j], "smooth_swiglu");
            const char *ri = meta(&c->runs[i], "recipe"), *rj = meta(&c->runs[j], "recipe");
            const char *ti = meta(&c->runs[i], "steps"), *tj = meta(&c->runs[j], "steps");
            if (si && sj && ri && rj && strcmp(si, "no") == 0 && strcmp(sj, "yes") == 0 && strcmp(ri, rj) == 0 &&
                (!ti || !tj || strcmp(ti, tj) == 0)) {
                c->vs_a = i, c->vs_b = j;
                break;
            }
        }
    FILE *keep = c->md;
    for (int k = 0; k < NA; k++) {
        progress(c, nsteps_done_before + k + 1, total, steps[k].name, t0);
        c->md = open_memstream(&sec[k], &secn[k]);
        if (!c->md) {
            rc = 1;
            break;
        }
        int r = steps[k].fn(c);
        fclose(c->md);
        if (r == 1) {
            fprintf(stderr, "\nfp8prof: report: the %s analysis failed\n", steps[k].name);
            rc = 1;
            break;
        }
    }
    c->md = keep;
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
        fprintf(f, "# fp8prof report\n\n%d run%s, written %s. Data files (tab-separated) and figures (PNG, SVG, "
                   "gnuplot script) are beside this file.\n\n",
                c->nruns, c->nruns == 1 ? "" : "s", date);
        fprintf(f, "| run | recipe | steps | tensors | recipes | records | recorded every |\n|---|---|---|---|---|---|---|\n");
        for (int i = 0; i < c->nruns; i++) {
            const an_run *a = &c->runs[i];
            const char *r = meta(a, "recipe"), *s = meta(a, "steps");
            fprintf(f, "| %s%s | %s%s | %s | %d | %d | %zu | %lld |\n", a->label, i == c->baseline ? " (baseline)" : "",
                    r ? r : "-", meta(a, "smooth_swiglu") && strcmp(meta(a, "smooth_swiglu"), "yes") == 0 ? " + Smooth SwiGLU" : "",
                    s ? s : "-", a->run->ntensors, a->run->nrecipes, a->run->nrecords, (long long)a->record_every);
        }
        fprintf(f, "\n## Summary\n\n");
        if (!c->nfindings)
            fprintf(f, "No findings: the runs hold no records the analyses could use.\n");
        static const char *topics[][2] = {
            {"risk", "At risk"},
            {"warmup", "Warm-up (left out of every rate, count and verdict below; its cost)"},
            {"timing", "What just-in-time scaling buys (delayed → current; same format, granularity, encoding; "
                       "ΔSQNR dB [95% CI] (tensors better / worse / neither))"},
            {"granularity", "What finer scale groups buy (same format, timing, encoding)"},
            {"format", "E5M2 → E4M3 (same scaling)"},
            {"encoding", "Scale encoding (fp32 → power-of-two / UE8M0; MX rounding rules)"},
            {"verdict", "Verdicts per run (delayed is safe / needs JIT / needs block scaling)"},
            {"replay", "Delayed scaling replayed (history, algorithm, margin)"},
            {"replaycheck", "Replay checked against the recorded recipes"},
            {"dynamics", "Block vs tensor amax volatility (the per-tensor-delayed / per-block-JIT claim)"},
            {"outliers", "Outliers"},
            {"smooth", "What Smooth SwiGLU changed"},
            {"loss", "Loss against the baseline"},
            {"advise", "E4M3 vs E5M2, per scaling kind (sign test over tensors; flushed values E4M3 vs E5M2)"}};
        for (size_t k = 0; k < sizeof topics / sizeof topics[0]; k++) {
            int any = 0;
            for (int i = 0; i < c->nfindings; i++)
                if (strcmp(c->topic[i], topics[k][0]) == 0) {
                    fprintf(f, "%s%s", any ? "; " : "- **", any ? "" : topics[k][1]);
                    if (!any)
                        fprintf(f, "**: ");
                    fprintf(f, "%s", c->findings[i]);
                    any = 1;
                }
            if (any)
                fprintf(f, ".\n");
        }
        if (failed)
            fprintf(f, "- %d figure%s could not be drawn (gnuplot failed; messages on stderr).\n", failed,
                    failed == 1 ? "" : "s");
        fprintf(f, "\n");
        for (int k = 0; k < NA; k++) {
            if (sec[k])
                fwrite(sec[k], 1, secn[k], f);
            for (int i = 0; i < nf; i++)
                if (strcmp(figs[i].section, steps[k].name) == 0)
                    fprintf(f, "![%s](%s.png)\n\n", figs[i].caption, figs[i].name);
        }
        fprintf(f, "---\nDefinitions of every statistic: docs/statistics.md; of every analysis and rule: "
                   "docs/analyses.md.\n");
        fclose(f);
        if (an_json_write(c) != 0)
            rc = 1;
        FILE *o = an_data(c, "report.md"), *h = an_data(c, "index.html");
        if (!o || !h || !md) {
            rc = 1;
        } else {
            fwrite(md, 1, mdn, o);
            md_to_html(md, h);
        }
        if (o && fclose(o) != 0)
            rc = 1;
        if (h && fclose(h) != 0)
            rc = 1;
        progress(c, total, total, rc ? "failed" : "done", t0);
    }
    free(md);
    free(figs);
    for (int k = 0; k < NA; k++)
        free(sec[k]);
    return rc;
}
