/*
 * report_html.c — the report's Markdown as one self-contained HTML page
 * (report_html.h): headings get GitHub's anchors, every section after the
 * summary folds (<details>), long tables show their first rows with the
 * rest folded, figures are embedded as data URIs (SVG, else PNG) so the
 * page opens anywhere on its own, and a link to a folded section opens it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "keys.h"
#include "report_html.h"

#define TABLE_SHOW 10 /* rows shown of a table longer than TABLE_FOLD */
#define TABLE_FOLD 15

static const char *style =
    "body{font-family:system-ui,sans-serif;max-width:1150px;margin:2em auto;padding:0 1em;color:#1a1a1a;"
    "line-height:1.45}table{border-collapse:collapse;margin:.8em 0;font-size:88%}td,th{border:1px solid #bbb;"
    "padding:3px 8px;text-align:left;vertical-align:top}th{background:#eef0f3}code{background:#f1f1f1;"
    "padding:0 3px;border-radius:3px}figure{margin:1.2em 0}img{max-width:100%;border:1px solid #ccc}"
    "figcaption{font-size:88%;color:#333}h1{margin-bottom:.2em}h2{border-bottom:2px solid #ccd;margin:.2em 0}"
    "h3,h4{margin:.2em 0}details{margin:.4em 0 .4em 0}details>summary{cursor:pointer;list-style:revert}"
    "details>summary>h2,details>summary>h3,details>summary>h4{display:inline}details.sec{border-left:3px solid "
    "#ccd;padding-left:.8em}ul.key li{margin:.35em 0}.more{color:#333;font-size:90%}nav ul{columns:2}"
    "a{color:#0645ad}";

/* open a folded section a link points at (and the sections around it) */
static const char *script =
    "<script>function fp8open(){var h=decodeURIComponent(location.hash.slice(1));if(!h)return;"
    "var e=document.getElementById(h);for(;e;e=e.parentElement)if(e.tagName==='DETAILS')e.open=true;}"
    "window.addEventListener('hashchange',fp8open);window.addEventListener('DOMContentLoaded',fp8open);</script>\n";

static void esc(FILE *f, const char *s, size_t n)
{
    for (size_t i = 0; i < n && s[i]; i++) {
        if (s[i] == '<')
            fputs("&lt;", f);
        else if (s[i] == '>')
            fputs("&gt;", f);
        else if (s[i] == '&')
            fputs("&amp;", f);
        else if (s[i] == '"')
            fputs("&quot;", f);
        else
            fputc(s[i], f);
    }
}

/* `code`, **bold**, *italic*, [text](href) */
static void inline_md(FILE *f, const char *s)
{
    int code = 0, bold = 0;
    for (; *s; s++) {
        if (*s == '`') {
            fputs(code ? "</code>" : "<code>", f);
            code = !code;
        } else if (code) {
            esc(f, s, 1);
        } else if (s[0] == '*' && s[1] == '*') {
            fputs(bold ? "</b>" : "<b>", f);
            bold = !bold;
            s++;
        } else if (s[0] == '*' && s[1] != ' ' && s[1] && strchr(s + 1, '*')) {
            const char *e = strchr(s + 1, '*');
            fputs("<i>", f);
            esc(f, s + 1, (size_t)(e - s - 1));
            fputs("</i>", f);
            s = e;
        } else if (*s == '[' && strstr(s, "](") && strchr(strstr(s, "]("), ')')) {
            const char *m = strstr(s, "]("), *e = strchr(m, ')');
            if (memchr(s, '\n', (size_t)(e - s))) {
                esc(f, s, 1);
                continue;
            }
            fputs("<a href=\"", f);
            esc(f, m + 2, (size_t)(e - m - 2));
            fputs("\">", f);
            char text[512];
            size_t tl = (size_t)(m - s - 1) < sizeof text - 1 ? (size_t)(m - s - 1) : sizeof text - 1;
            memcpy(text, s + 1, tl);
            text[tl] = 0;
            inline_md(f, text);
            fputs("</a>", f);
            s = e;
        } else {
            esc(f, s, 1);
        }
    }
    if (code)
        fputs("</code>", f);
    if (bold)
        fputs("</b>", f);
}

/* GitHub's anchors: the slug, then -1, -2 ... for repeats */
typedef struct {
    char (*s)[160];
    int *count;
    int n, cap;
} slugs;

static void unique_slug(slugs *S, const char *heading, char *out, size_t n)
{
    char base[160];
    /* the slug of the text without Markdown marks, as GitHub renders it */
    an_slug(heading, base, sizeof base);
    for (int i = 0; i < S->n; i++)
        if (strcmp(S->s[i], base) == 0) {
            snprintf(out, n, "%s-%d", base, ++S->count[i]);
            return;
        }
    if (S->n == S->cap) {
        int cap = S->cap ? 2 * S->cap : 64;
        char(*g)[160] = realloc(S->s, (size_t)cap * sizeof *g);
        int *c = g ? realloc(S->count, (size_t)cap * sizeof *c) : NULL;
        if (g)
            S->s = g;
        if (!g || !c) {
            snprintf(out, n, "%s", base);
            return;
        }
        S->count = c, S->cap = cap;
    }
    snprintf(S->s[S->n], sizeof S->s[0], "%s", base);
    S->count[S->n++] = 0;
    snprintf(out, n, "%s", base);
}

static void b64(FILE *f, const unsigned char *p, size_t n)
{
    static const char t[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    for (size_t i = 0; i < n; i += 3) {
        unsigned v = (unsigned)p[i] << 16 | (i + 1 < n ? (unsigned)p[i + 1] << 8 : 0) | (i + 2 < n ? p[i + 2] : 0);
        fputc(t[v >> 18 & 63], f);
        fputc(t[v >> 12 & 63], f);
        fputc(i + 1 < n ? t[v >> 6 & 63] : '=', f);
        fputc(i + 2 < n ? t[v & 63] : '=', f);
    }
}

static unsigned char *slurp(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    unsigned char *buf = NULL;
    size_t cap = 0, len = 0;
    for (;;) {
        if (len == cap) {
            size_t nc = cap ? 2 * cap : 65536;
            unsigned char *g = realloc(buf, nc);
            if (!g) {
                free(buf);
                fclose(f);
                return NULL;
            }
            buf = g, cap = nc;
        }
        size_t got = fread(buf + len, 1, cap - len, f);
        len += got;
        if (got == 0)
            break;
    }
    fclose(f);
    *n = len;
    return buf;
}

/* the figure as a data URI: NAME.svg when drawn, else the PNG named */
static int embed(FILE *f, const char *dir, const char *src)
{
    char path[1024], svg[1024];
    snprintf(path, sizeof path, "%s/%s", dir, src);
    snprintf(svg, sizeof svg, "%s", path);
    char *dot = strrchr(svg, '.');
    if (dot && strcmp(dot, ".png") == 0)
        strcpy(dot, ".svg");
    size_t n = 0;
    unsigned char *d = slurp(svg, &n);
    const char *mime = "image/svg+xml";
    if (!d || !n) {
        free(d);
        d = slurp(path, &n);
        mime = "image/png";
    }
    if (!d || !n) {
        free(d);
        return -1;
    }
    fprintf(f, "data:%s;base64,", mime);
    b64(f, d, n);
    free(d);
    return 0;
}

typedef struct {
    FILE *f;
    int depth;      /* open <details> of headings: level per entry */
    int level[8];
} folds;

static void close_to(folds *F, int lv)
{
    while (F->depth > 0 && F->level[F->depth - 1] >= lv) {
        fputs("</details>\n", F->f);
        F->depth--;
    }
}

int an_report_html(const char *md, const char *dir, FILE *f)
{
    fprintf(f, "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n<meta name=\"viewport\" "
               "content=\"width=device-width\">\n<title>fp8prof report</title>\n<style>%s</style>\n%s</head><body>\n",
            style, script);
    folds F = {f, 0, {0}};
    slugs S = {0};
    const char *p = md;
    int in_table = 0, in_list = 0, in_par = 0, rows = 0, folded_rows = 0, missing = 0;
    int total_rows = 0;
    char line[16384], head_row[16384] = "";
    while (*p) {
        size_t n = strcspn(p, "\n");
        size_t m = n < sizeof line - 1 ? n : sizeof line - 1;
        memcpy(line, p, m);
        line[m] = 0;
        const char *next = p + n + (p[n] == '\n');
        int is_table = line[0] == '|', is_item = line[0] == '-' && line[1] == ' ';
        if (!is_table && in_table) {
            fputs("</table>\n", f);
            if (folded_rows)
                fputs("</details>\n", f);
            in_table = 0;
        }
        if (!is_item && in_list)
            fputs("</ul>\n", f), in_list = 0;
        if ((is_table || is_item || line[0] == '#' || line[0] == 0 || line[0] == '!') && in_par)
            fputs("</p>\n", f), in_par = 0;
        p = next;
        if (line[0] == 0)
            continue;
        if (line[0] == '#') {
            int lv = 0;
            while (line[lv] == '#')
                lv++;
            const char *text = line + lv + (line[lv] == ' ');
            char id[200];
            unique_slug(&S, text, id, sizeof id);
            /* sections fold from the first h2 that is not the summary or the
             * contents; h1 never does */
            int fold = lv >= 2 && lv <= 4 && strcmp(text, "Summary") != 0 && strcmp(text, "Contents") != 0;
            close_to(&F, lv);
            if (fold && F.depth < 8) {
                fprintf(f, "<details class=\"sec\" id=\"%s\"><summary><h%d>", id, lv);
                inline_md(f, text);
                fprintf(f, "</h%d></summary>\n", lv);
                F.level[F.depth++] = lv;
            } else {
                fprintf(f, "<h%d id=\"%s\">", lv, id);
                inline_md(f, text);
                fprintf(f, "</h%d>\n", lv);
            }
        } else if (is_table) {
            if (strncmp(line, "|---", 4) == 0)
                continue;
            if (!in_table) {
                in_table = 1, rows = 0, folded_rows = 0;
                snprintf(head_row, sizeof head_row, "%s", line);
                /* count this table's rows ahead, to fold a long one */
                total_rows = 0;
                for (const char *q = p; *q == '|'; q += strcspn(q, "\n") + (q[strcspn(q, "\n")] == '\n'))
                    total_rows += strncmp(q, "|---", 4) != 0;
                fputs("<table>\n", f);
            }
            if (rows == TABLE_SHOW + 1 && total_rows > TABLE_FOLD) {
                fprintf(f, "</table>\n<details><summary class=\"more\">%d more rows</summary>\n<table>\n",
                        total_rows - TABLE_SHOW);
                folded_rows = 1;
                char hr[sizeof head_row];
                snprintf(hr, sizeof hr, "%s", head_row);
                fputs("<tr>", f);
                for (char *s = hr + 1, *e; (e = strchr(s, '|')) != NULL; s = e + 1) {
                    *e = 0;
                    fputs("<th>", f), inline_md(f, s), fputs("</th>", f);
                }
                fputs("</tr>\n", f);
            }
            const char *cell = rows++ == 0 ? "th" : "td";
            fputs("<tr>", f);
            for (char *s = line + 1, *e; (e = strchr(s, '|')) != NULL; s = e + 1) {
                *e = 0;
                fprintf(f, "<%s>", cell);
                inline_md(f, s);
                fprintf(f, "</%s>", cell);
            }
            fputs("</tr>\n", f);
        } else if (is_item) {
            if (!in_list)
                fputs("<ul class=\"key\">\n", f), in_list = 1;
            fputs("<li>", f);
            inline_md(f, line + 2);
            fputs("</li>\n", f);
        } else if (line[0] == '!' && line[1] == '[') {
            char *cap = line + 2, *ce = strstr(cap, "](");
            if (!ce)
                continue;
            *ce = 0;
            char *src = ce + 2, *se = strchr(src, ')');
            if (se)
                *se = 0;
            char fid[200];
            snprintf(fid, sizeof fid, "%s", src);
            char *dot = strrchr(fid, '.');
            if (dot)
                *dot = 0;
            fputs("<figure id=\"fig-", f);
            esc(f, fid, strlen(fid));
            fputs("\"><img alt=\"", f);
            { /* the caption as plain text: what the figure shows */
                char alt[sizeof line];
                size_t al = 0;
                for (const char *q = cap; *q && al < sizeof alt - 1; q++)
                    if (*q != '`' && *q != '*')
                        alt[al++] = *q;
                alt[al] = 0;
                esc(f, alt, al);
            }
            fputs("\" src=\"", f);
            if (embed(f, dir, src) != 0) {
                missing++;
                esc(f, src, strlen(src)); /* not drawn: the page says so below */
            }
            fputs("\"><figcaption>", f);
            inline_md(f, cap);
            fputs("</figcaption></figure>\n", f);
        } else {
            if (!in_par)
                fputs("<p>", f), in_par = 1;
            else
                fputc(' ', f);
            inline_md(f, line);
        }
    }
    if (in_table) {
        fputs("</table>\n", f);
        if (folded_rows)
            fputs("</details>\n", f);
    }
    if (in_list)
        fputs("</ul>\n", f);
    if (in_par)
        fputs("</p>\n", f);
    close_to(&F, 0);
    fputs("</body></html>\n", f);
    free(S.s), free(S.count);
    return missing;
}
