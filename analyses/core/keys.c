/*
 * keys.c — the report summary's one line per question (keys.h).
 */
#include <ctype.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "factors.h"
#include "keys.h"

void an_span_add(an_span *s, double v)
{
    if (!isfinite(v))
        return;
    if (!s->n++ || v < s->lo)
        s->lo = v;
    if (s->n == 1 || v > s->hi)
        s->hi = v;
}

const char *an_span_fmt(const an_span *s, const char *fmt, char *buf, size_t n)
{
    char a[48], b[48];
    if (!s->n) {
        snprintf(buf, n, "n/a");
        return buf;
    }
    snprintf(a, sizeof a, fmt, s->lo);
    snprintf(b, sizeof b, fmt, s->hi);
    if (strcmp(a, b) == 0)
        snprintf(buf, n, "%s", a);
    else
        snprintf(buf, n, "%s..%s", a, b);
    return buf;
}

static const char *titles[AN_NQ] = {"(a) Does per-tensor delayed scaling overflow, and where?",
                                    "(b) Would just-in-time or block scaling help, by how much?",
                                    "finer scale blocks",
                                    "(c) Is the block amax less stable than the tensor amax?",
                                    "(d) What does Smooth SwiGLU change?",
                                    "(e) Does FP8 loss track the baseline?",
                                    "(f) Which amax history and margin?",
                                    "E4M3 or E5M2",
                                    "Outliers"};

const char *an_key_title(int q) { return q >= 0 && q < AN_NQ ? titles[q] : "?"; }

void an_slug(const char *h, char *out, size_t n)
{
    size_t k = 0;
    for (; *h && k + 1 < n; h++) {
        unsigned char ch = (unsigned char)*h;
        if (isalnum(ch) || ch == '-' || ch == '_')
            out[k++] = (char)tolower(ch);
        else if (ch == ' ')
            out[k++] = '-';
        else if (ch >= 0x80) /* UTF-8 bytes of letters stay, as GitHub keeps them */
            out[k++] = (char)ch;
    }
    out[k] = 0;
}

void an_key(an_ctx *c, int q, const char *section, const char *fmt, ...)
{
    if (q < 0 || q >= AN_NQ)
        return;
    va_list ap;
    va_start(ap, fmt);
    char *s = NULL;
    if (vasprintf(&s, fmt, ap) >= 0) {
        free(c->key[q]);
        c->key[q] = s;
        snprintf(c->key_section[q], sizeof c->key_section[q], "%s", section);
    }
    va_end(ap);
}

void an_frow_add(an_ctx *c, const an_cgroup *G, int run)
{
    if (c->nfrows == c->capfrows) {
        size_t cap = c->capfrows ? 2 * c->capfrows : 64;
        struct an_frow *f = realloc(c->frows, cap * sizeof *f);
        if (!f)
            return;
        c->frows = f, c->capfrows = cap;
    }
    struct an_frow *r = &c->frows[c->nfrows++];
    r->factor = G->factor, r->role = G->role, r->run = run, r->tensors = G->tensors;
    snprintf(r->la, sizeof r->la, "%s", G->la);
    snprintf(r->lb, sizeof r->lb, "%s", G->lb);
    r->mean = G->d.mean, r->lo = G->d.lo, r->hi = G->d.hi, r->median = G->robust.median;
    r->under_a = G->under_a, r->under_b = G->under_b;
}

static const char *plural(int role)
{
    static const char *p[] = {"activations", "weights", "gradients", "outputs", "other tensors"};
    return role >= 0 && role < 5 ? p[role] : "tensors";
}

/* One comparison (role, from, to) over the runs: its means' span and how
 * many runs' intervals lie above / below zero. */
typedef struct {
    int role;
    const char *la, *lb;
    an_span m, med;
    int above, below, runs;
    double under_a, under_b; /* the largest over runs */
} cmp;

static int collect(const an_ctx *c, int factor, int (*keep)(const struct an_frow *), cmp *out, int cap)
{
    int n = 0;
    for (size_t i = 0; i < c->nfrows; i++) {
        const struct an_frow *r = &c->frows[i];
        if (r->factor != factor || (keep && !keep(r)))
            continue;
        int k = 0;
        while (k < n && !(out[k].role == r->role && !strcmp(out[k].la, r->la) && !strcmp(out[k].lb, r->lb)))
            k++;
        if (k == n) {
            if (n == cap)
                continue;
            memset(&out[n], 0, sizeof out[n]);
            out[n].role = r->role, out[n].la = r->la, out[n].lb = r->lb;
            out[n].under_a = out[n].under_b = NAN;
            n++;
        }
        an_span_add(&out[k].m, r->mean);
        an_span_add(&out[k].med, r->median);
        out[k].runs++;
        out[k].above += r->lo > 0;
        out[k].below += r->hi < 0;
        if (!(out[k].under_b >= r->under_b))
            out[k].under_b = r->under_b, out[k].under_a = r->under_a;
    }
    return n;
}

static double mid(const cmp *x) { return 0.5 * (x->m.lo + x->m.hi); }

static const char *ci_note(const cmp *x, char *buf, size_t n)
{
    if (x->above == x->runs)
        snprintf(buf, n, "95%% CI above 0 in %s", x->runs == 1 ? "the run" : "every run");
    else if (x->below == x->runs)
        snprintf(buf, n, "95%% CI below 0 in %s", x->runs == 1 ? "the run" : "every run");
    else
        snprintf(buf, n, "95%% CI clear of 0 in %d of %d run%s", x->above + x->below, x->runs, x->runs == 1 ? "" : "s");
    return buf;
}

static int is_current_tensor(const struct an_frow *r)
{
    const char *sp = strchr(r->la, ' ');
    return sp && strcmp(sp, " current") == 0; /* "<format> current": one scale per tensor */
}

static int is_e5_to_e4(const struct an_frow *r) { return !strncmp(r->la, "e5m2 ", 5) && !strncmp(r->lb, "e4m3 ", 5); }

/* a timing comparison at tensor granularity (what the question asks:
 * per-block delayed scaling is the claim test's) */
static int is_tensor_timing(const struct an_frow *r)
{
    return !strstr(r->la, " block ") && !strstr(r->la, "wise") && !strstr(r->lb, " block ");
}

#define MAXC 256

void an_keys_factors(an_ctx *c)
{
    static const char *sec = "Recipes compared";
    cmp *v = malloc(MAXC * sizeof *v);
    if (!v)
        return;
    char s1[64], s2[64], ci[64];
    /* timing: the comparison with the largest effect, and the span of the rest */
    int n = collect(c, AN_F_TIMING, is_tensor_timing, v, MAXC), top = -1;
    for (int i = 0; i < n; i++)
        if (top < 0 || fabs(mid(&v[i])) > fabs(mid(&v[top])))
            top = i;
    if (top >= 0) {
        an_span rest = {0, 0, 0};
        for (int i = 0; i < n; i++)
            if (i != top)
                an_span_add(&rest, v[i].m.lo), an_span_add(&rest, v[i].m.hi);
        char tail[160] = "";
        if (rest.n)
            snprintf(tail, sizeof tail, "; the other %d (one scale per tensor): %s dB", n - 1,
                     an_span_fmt(&rest, "%+.2f", s2, sizeof s2));
        char s3[64];
        an_key(c, AN_Q_JIT, sec, "%s, %s → %s: the median step gains %s dB (mean %s dB, %s)%s", plural(v[top].role),
               v[top].la, v[top].lb, an_span_fmt(&v[top].med, "%+.2f", s3, sizeof s3),
               an_span_fmt(&v[top].m, "%+.2f", s1, sizeof s1), ci_note(&v[top], ci, sizeof ci), tail);
    }
    /* blocks: per-tensor current scaling against finer groups, E4M3 when
     * recorded; per role the finer recipe that gains most */
    n = collect(c, AN_F_GRANULARITY, is_current_tensor, v, MAXC);
    int e4 = 0;
    for (int i = 0; i < n; i++)
        e4 |= !strncmp(v[i].la, "e4m3 ", 5);
    char line[1024] = "";
    size_t l = 0;
    for (int role = 0; role < 5 && l < sizeof line - 200; role++) {
        /* among the comparisons recorded in the most runs (a group seen in
         * one run is not picked for being the largest of few) */
        int b = -1;
        for (int i = 0; i < n; i++)
            if (v[i].role == role && (!e4 || !strncmp(v[i].la, "e4m3 ", 5)) &&
                (b < 0 || v[i].m.n > v[b].m.n || (v[i].m.n == v[b].m.n && mid(&v[i]) > mid(&v[b]))))
                b = i;
        if (b < 0)
            continue;
        l += (size_t)snprintf(line + l, sizeof line - l, "%s%s %s %s dB (%s)", l ? "; " : "", plural(role), v[b].lb,
                              an_span_fmt(&v[b].m, "%+.2f", s1, sizeof s1), ci_note(&v[b], ci, sizeof ci));
    }
    if (l) {
        const char *fmt0 = e4 ? "e4m3" : "per-tensor";
        an_key(c, AN_Q_BLOCKS, sec, "over %s current scaling, the finer groups that gain most: %s", fmt0, line);
    }
    /* format: forward tensors and gradients apart, with what E4M3 flushes */
    n = collect(c, AN_F_FORMAT, is_e5_to_e4, v, MAXC);
    an_span fwd = {0, 0, 0}, grad = {0, 0, 0};
    int fwd_cmp = 0, grad_cmp = 0, fwd_above = 0, fwd_runs = 0, g_above = 0, g_runs = 0;
    double ua = NAN, ub = NAN;
    const char *ub_lab = NULL;
    for (int i = 0; i < n; i++) {
        int g = v[i].role == FP8_ROLE_GRADIENT;
        an_span *sp = g ? &grad : &fwd;
        an_span_add(sp, v[i].m.lo), an_span_add(sp, v[i].m.hi);
        if (g) {
            grad_cmp++, g_above += v[i].above, g_runs += v[i].runs;
            if (!(ub >= v[i].under_b))
                ub = v[i].under_b, ua = v[i].under_a, ub_lab = v[i].lb;
        } else {
            fwd_cmp++, fwd_above += v[i].above, fwd_runs += v[i].runs;
        }
    }
    if (n) {
        char fl[200] = "", gl[400] = "";
        if (fwd_cmp)
            snprintf(fl, sizeof fl, "activations and weights %s dB (%d of %d run-comparisons with CI above 0)",
                     an_span_fmt(&fwd, "%+.2f", s1, sizeof s1), fwd_above, fwd_runs);
        if (grad_cmp)
            snprintf(gl, sizeof gl, "%sgradients %s dB (%d of %d with CI above 0), but under `%s` E4M3 flushes %.3g%% of "
                                    "gradient values after warm-up (E5M2: %.2g%%)",
                     fwd_cmp ? "; " : "", an_span_fmt(&grad, "%+.2f", s2, sizeof s2), g_above, g_runs,
                     ub_lab ? ub_lab : "?", 100 * ub, 100 * ua);
        an_key(c, AN_Q_FORMAT, sec, "E4M3 over E5M2, same scaling: %s%s", fl, gl);
    }
    free(v);
}
