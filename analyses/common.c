/*
 * common.c — loading and indexing runs for the analyses, and the small
 * helpers they share (labels, formats, thresholds, quantiles, data files).
 */
#include <errno.h>
#include <gsl/gsl_sort.h>
#include <gsl/gsl_statistics_double.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "analysis.h"
#include "factors.h"
#include "fp8_error.h"

void an_defaults(an_ctx *c)
{
    memset(c, 0, sizeof *c);
    c->outdir = ".";
    c->md = stdout;
    c->sqnr_margin_db = 1.0;
    c->block_gain_db = 3.0;
    c->underflow_max = 0.01;
    c->min_events = 3;
    c->diverge_rel = 0.02;
    c->diverge_steps = 20;
    c->boot = 1000;
    c->seed = 1;
    c->vs_a = c->vs_b = -1;
    c->noise = -1;
    c->loss_name = "loss";
}

const char *an_meta(const an_run *a, const char *key)
{
    for (int i = 0; i < a->run->nmeta; i++)
        if (strcmp(a->run->meta_key[i], key) == 0)
            return a->run->meta_value[i];
    return NULL;
}

static const fp8_summary *sort_recs;
double an_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int cmp_series(const void *a, const void *b)
{
    const fp8_summary *x = &sort_recs[*(const size_t *)a], *y = &sort_recs[*(const size_t *)b];
    if (x->step != y->step)
        return x->step < y->step ? -1 : 1;
    if (x->active != y->active)
        return x->active > y->active ? -1 : 1; /* the active copy first */
    return *(const size_t *)a < *(const size_t *)b ? -1 : 1;
}

static int index_run(an_run *a)
{
    const fp8_run *r = a->run;
    size_t T = (size_t)r->ntensors, R = (size_t)r->nrecipes, n = r->nrecords;
    a->start = calloc(T * R + 1, sizeof *a->start);
    a->order = malloc((n + 1) * sizeof *a->order);
    a->active = malloc((T + 1) * sizeof *a->active);
    a->recipes = calloc(R + 1, sizeof *a->recipes);
    a->recipe_ok = calloc(R + 1, sizeof *a->recipe_ok);
    size_t *fill = calloc(T * R + 1, sizeof *fill);
    if (!a->start || !a->order || !a->active || !a->recipes || !a->recipe_ok || !fill) {
        free(fill);
        return -1;
    }
    for (size_t r0 = 0; r0 < R; r0++)
        a->recipe_ok[r0] = fp8_recipe_parse(r->recipe_spec[r0], &a->recipes[r0]) == FP8_OK;
    for (size_t t = 0; t < T; t++)
        a->active[t] = -1;
    /* counting sort by series, then steps within each series */
    size_t *cnt = calloc(T * R + 1, sizeof *cnt);
    if (!cnt) {
        free(fill);
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        const fp8_summary *s = &r->summaries[i];
        cnt[(size_t)s->tensor * R + s->recipe]++;
        if (s->active && a->active[s->tensor] < 0)
            a->active[s->tensor] = (int)s->recipe;
    }
    for (size_t k = 0; k < T * R; k++)
        a->start[k + 1] = a->start[k] + cnt[k];
    for (size_t i = 0; i < n; i++) {
        size_t k = (size_t)r->summaries[i].tensor * R + r->summaries[i].recipe;
        a->order[a->start[k] + fill[k]++] = i;
    }
    free(cnt);
    free(fill);
    /* sort each series by step where the file did not already have it in order,
     * and drop repeated steps (an older writer stored a shadow equal to the
     * active recipe twice): compact in place, keeping the active copy */
    sort_recs = r->summaries;
    size_t out = 0, gaps[8] = {0};
    int64_t gapv[8] = {0};
    for (size_t k = 0; k < T * R; k++) {
        size_t b = a->start[k], e = a->start[k + 1], sorted = 1;
        for (size_t i = b + 1; i < e && sorted; i++)
            sorted = r->summaries[a->order[i]].step > r->summaries[a->order[i - 1]].step;
        if (!sorted)
            qsort(a->order + b, e - b, sizeof *a->order, cmp_series);
        a->start[k] = out;
        for (size_t i = b; i < e; i++) {
            if (i > b && r->summaries[a->order[i]].step == r->summaries[a->order[out - 1]].step)
                continue;
            if (i > b) { /* the most common step gap, among a few candidates */
                int64_t g = r->summaries[a->order[i]].step - r->summaries[a->order[out - 1]].step;
                for (int j = 0; j < 8; j++)
                    if (gapv[j] == g || gaps[j] == 0) {
                        gapv[j] = g, gaps[j]++;
                        break;
                    }
            }
            a->order[out++] = a->order[i];
        }
    }
    a->start[T * R] = out;
    a->record_every = 1;
    size_t best = 0;
    for (int j = 0; j < 8; j++)
        if (gaps[j] > best)
            best = gaps[j], a->record_every = gapv[j];
    return 0;
}

static const fp8_step_row *sort_steps;
static int cmp_steprow(const void *a, const void *b)
{
    int64_t x = sort_steps[*(const size_t *)a].step, y = sort_steps[*(const size_t *)b].step;
    return (x > y) - (x < y);
}

/* The every-step rows grouped by (tensor, recipe) in step order (a repeated
 * step keeps its first row), the canonical recipe of each tensor x recipe,
 * and each tensor's warm-up end. */
static int index_series(an_run *a)
{
    const fp8_run *r = a->run;
    size_t T = (size_t)r->ntensors, R = (size_t)r->nrecipes, n = r->nsteps;
    a->sstart = calloc(T * R + 1, sizeof *a->sstart);
    a->sorder = malloc((n + 1) * sizeof *a->sorder);
    a->warm_end = malloc((T + 1) * sizeof *a->warm_end);
    a->canon = malloc((T * R + 1) * sizeof *a->canon);
    size_t *fill = calloc(T * R + 1, sizeof *fill);
    if (!a->sstart || !a->sorder || !a->warm_end || !a->canon || !fill) {
        free(fill);
        return -1;
    }
    for (size_t i = 0; i < n; i++)
        a->sstart[(size_t)r->steps[i].tensor * R + r->steps[i].recipe + 1]++;
    for (size_t k = 0; k < T * R; k++)
        a->sstart[k + 1] += a->sstart[k];
    for (size_t i = 0; i < n; i++) {
        size_t k = (size_t)r->steps[i].tensor * R + r->steps[i].recipe;
        a->sorder[a->sstart[k] + fill[k]++] = i;
    }
    free(fill);
    sort_steps = r->steps;
    size_t out = 0;
    for (size_t k = 0; k < T * R; k++) {
        size_t b = a->sstart[k], e = a->sstart[k + 1], sorted = 1;
        for (size_t i = b + 1; i < e && sorted; i++)
            sorted = r->steps[a->sorder[i]].step > r->steps[a->sorder[i - 1]].step;
        if (!sorted)
            qsort(a->sorder + b, e - b, sizeof *a->sorder, cmp_steprow);
        a->sstart[k] = out;
        for (size_t i = b; i < e; i++)
            if (i == b || r->steps[a->sorder[i]].step != r->steps[a->sorder[out - 1]].step)
                a->sorder[out++] = a->sorder[i];
    }
    a->sstart[T * R] = out;
    /* canonical recipes: same factors on this tensor, plain before hybrid */
    an_factors *f = malloc((R + 1) * sizeof *f);
    if (!f)
        return -1;
    for (size_t t = 0; t < T; t++) {
        for (size_t q = 0; q < R; q++) {
            a->canon[t * R + q] = (int)q;
            if (a->recipe_ok[q])
                an_factors_of(&a->recipes[q], (fp8_role)r->tensor_role[t], &f[q]);
        }
        for (size_t q = 0; q < R; q++) {
            size_t nq, ns;
            an_series(a, (int)t, (int)q, &nq);
            an_steps(a, (int)t, (int)q, &ns);
            if (!a->recipe_ok[q] || (!nq && !ns))
                continue;
            int best = (int)q;
            for (size_t o = 0; o < R; o++) {
                size_t no, nso;
                an_series(a, (int)t, (int)o, &no);
                an_steps(a, (int)t, (int)o, &nso);
                if (o == q || !a->recipe_ok[o] || (!no && !nso) || !an_factors_equal(&f[q], &f[o]))
                    continue;
                int ob = a->recipes[best].hybrid, oo = a->recipes[o].hybrid;
                if ((ob && !oo) || (ob == oo && (int)o < best))
                    best = (int)o;
            }
            a->canon[t * R + q] = best;
        }
    }
    free(f);
    /* warm-up: up to the first step with a real amax, on tensors with a delayed recipe */
    for (size_t t = 0; t < T; t++) {
        a->warm_end[t] = INT64_MIN;
        int delayed = 0, src = -1;
        size_t best = 0;
        for (size_t q = 0; q < R; q++) {
            size_t nq, ns;
            an_series(a, (int)t, (int)q, &nq);
            an_steps(a, (int)t, (int)q, &ns);
            delayed |= (nq || ns) && a->recipe_ok[q] && a->recipes[q].kind == FP8_RECIPE_DELAYED;
            if (ns > best)
                best = ns, src = (int)q;
        }
        if (!delayed)
            continue;
        a->warm_end[t] = INT64_MAX; /* no real amax yet: all warm-up */
        if (src >= 0) {
            size_t ns;
            const size_t *ix = an_steps(a, (int)t, src, &ns);
            for (size_t i = 0; i < ns; i++)
                if (r->steps[ix[i]].amax > 0 && isfinite(r->steps[ix[i]].amax)) {
                    a->warm_end[t] = r->steps[ix[i]].step + 1;
                    break;
                }
        } else {
            int in = an_input_recipe(a, (int)t);
            size_t nr;
            const size_t *ix = an_series(a, (int)t, in, &nr);
            for (size_t i = 0; i < nr; i++)
                if (an_rec(a, ix[i])->amax > 0 && isfinite(an_rec(a, ix[i])->amax)) {
                    a->warm_end[t] = an_rec(a, ix[i])->step + 1;
                    break;
                }
        }
    }
    return 0;
}

const size_t *an_steps(const an_run *a, int t, int r, size_t *n)
{
    size_t R = (size_t)a->run->nrecipes;
    if (!a->sstart || t < 0 || r < 0 || t >= a->run->ntensors || r >= a->run->nrecipes) {
        *n = 0;
        return NULL;
    }
    size_t k = (size_t)t * R + (size_t)r;
    *n = a->sstart[k + 1] - a->sstart[k];
    return a->sorder + a->sstart[k];
}

int an_overflows_at(const fp8_format *f, const fp8_cast_mode *mode, float amax, float scale, unsigned nonfinite)
{
    if (nonfinite & 1u)
        return 1;
    fp8_class cls;
    fp8_format_encode(f, mode, amax * scale, 0, &cls);
    return cls == FP8_CLASS_SATURATED || cls == FP8_CLASS_OVERFLOW;
}

int an_open(an_ctx *c, const char *const *paths, int n)
{
    c->runs = calloc((size_t)n + 1, sizeof *c->runs);
    if (!c->runs) {
        fprintf(stderr, "fp8prof: out of memory\n");
        return 1;
    }
    for (int i = 0; i < n; i++) {
        an_run *a = &c->runs[c->nruns];
        a->run = fp8_run_load_summary(paths[i], c->tensor);
        if (!a->run) {
            fprintf(stderr, "fp8prof: %s\n", fp8_error_message());
            return 1;
        }
        c->nruns++;
        if (c->tensor && a->run->nrecords == 0) {
            fprintf(stderr, "fp8prof: %s: no tensor matches '%s'; its tensors:", paths[i], c->tensor);
            for (int t = 0; t < a->run->ntensors && t < 12; t++)
                fprintf(stderr, " %s", a->run->tensor_name[t]);
            fprintf(stderr, "%s\n", a->run->ntensors > 12 ? " ..." : a->run->ntensors ? "" : " (none)");
            return 1;
        }
        const char *b = strrchr(paths[i], '/');
        snprintf(a->label, sizeof a->label, "%s", b ? b + 1 : paths[i]);
        char *dot = strstr(a->label, ".h5");
        if (dot && dot[3] == 0)
            *dot = 0;
        for (char *q = a->label; *q; q++) /* labels are words in tables and plot scripts */
            if (*q == ' ' || *q == '\t' || *q == '\'' || *q == '"' || *q == '|')
                *q = '_';
        if (a->run->nrecords == 0 && a->run->nscalars == 0) {
            fprintf(stderr, "fp8prof: %s: the run is empty (no records, no scalars)\n", paths[i]);
            return 1;
        }
        if (index_run(a) || index_series(a)) {
            fprintf(stderr, "fp8prof: %s: out of memory indexing the run\n", paths[i]);
            return 1;
        }
    }
    /* two runs with the same file name: tell them apart by position */
    for (int i = 0; i < c->nruns; i++)
        for (int j = i + 1; j < c->nruns; j++)
            if (strcmp(c->runs[i].label, c->runs[j].label) == 0) {
                size_t l = strlen(c->runs[j].label);
                snprintf(c->runs[j].label + (l < 52 ? l : 52), 12, "#%d", (j + 1) % 1000);
            }
    return 0;
}

FILE *an_json(an_ctx *c, int sec)
{
    if (sec < 0 || sec >= AN_NJSON)
        return NULL;
    if (!c->jf[sec] && !(c->jf[sec] = open_memstream(&c->json[sec], &c->jsonn[sec])))
        return NULL;
    fputs(c->jcount[sec]++ ? ",\n    " : "\n    ", c->jf[sec]);
    return c->jf[sec];
}

void an_json_str(FILE *f, const char *s)
{
    fputc('"', f);
    for (; s && *s; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch == '"' || ch == '\\')
            fprintf(f, "\\%c", ch);
        else if (ch < 0x20)
            fprintf(f, "\\u%04x", ch);
        else
            fputc(ch, f);
    }
    fputc('"', f);
}

void an_json_num(FILE *f, double v)
{
    if (isfinite(v))
        fprintf(f, "%.9g", v);
    else
        fputs("null", f);
}

int an_json_write(an_ctx *c)
{
    static const char *names[AN_NJSON] = {"comparisons", "replay", "loss", "warmup"};
    FILE *f = an_data(c, "summary.json");
    if (!f)
        return 1;
    fprintf(f, "{\n  \"schema\": 1,\n  \"scale_convention\": \"q = cast(x * scale); x_hat = decode(q) * scale_inv\"");
    for (int k = 0; k < AN_NJSON; k++) {
        if (c->jf[k])
            fflush(c->jf[k]);
        fprintf(f, ",\n  \"%s\": [", names[k]);
        if (c->json[k])
            fwrite(c->json[k], 1, c->jsonn[k], f);
        fprintf(f, "%s]", c->jcount[k] ? "\n  " : "");
    }
    fprintf(f, "\n}\n");
    return an_data_close(c, (FILE *[]){f}, 1);
}

void an_close(an_ctx *c)
{
    for (int k = 0; k < AN_NJSON; k++) {
        if (c->jf[k])
            fclose(c->jf[k]);
        free(c->json[k]);
        c->jf[k] = NULL, c->json[k] = NULL, c->jsonn[k] = 0, c->jcount[k] = 0;
    }
    for (int i = 0; i < c->nruns; i++) {
        an_run *a = &c->runs[i];
        an_series_cache_free(a);
        an_contrasts_free(a);
        fp8_run_free(a->run);
        free(a->recipes), free(a->recipe_ok), free(a->start), free(a->order), free(a->active);
        free(a->sstart), free(a->sorder), free(a->warm_end), free(a->canon);
    }
    free(c->runs);
    for (int i = 0; i < c->nfindings; i++)
        free(c->findings[i]);
    c->runs = NULL;
    c->nruns = c->nfindings = 0;
}

const size_t *an_series(const an_run *a, int t, int r, size_t *n)
{
    size_t R = (size_t)a->run->nrecipes;
    if (t < 0 || r < 0 || t >= a->run->ntensors || r >= a->run->nrecipes) {
        *n = 0;
        return NULL;
    }
    size_t k = (size_t)t * R + (size_t)r;
    *n = a->start[k + 1] - a->start[k];
    return a->order + a->start[k];
}

int an_input_recipe(const an_run *a, int t)
{
    size_t n;
    if (a->active[t] >= 0 && (an_series(a, t, a->active[t], &n), n > 0))
        return a->active[t];
    int best = -1;
    size_t bn = 0;
    for (int r = 0; r < a->run->nrecipes; r++)
        if (an_series(a, t, r, &n), n > bn)
            bn = n, best = r;
    return best;
}

size_t an_snapshots(const an_run *a, int t, size_t *idx)
{
    size_t ns = 0;
    for (size_t i = 0; i < a->run->nsnapshots && ns < AN_MAX_SNAPSHOTS; i++)
        if ((int)a->run->snapshots[i].tensor == t)
            idx[ns++] = i;
    return ns;
}

int an_delayed_recipe(const an_run *a, int t)
{
    int d = -1;
    for (int r = 0; r < a->run->nrecipes; r++) {
        size_t n;
        an_series(a, t, r, &n);
        if (n && a->recipe_ok[r] && a->recipes[r].kind == FP8_RECIPE_DELAYED && (d < 0 || r == a->active[t]))
            d = r;
    }
    return d;
}

const char *an_recipe_label(const an_run *a, int r, char *buf, size_t n)
{
    if (r < 0 || r >= a->run->nrecipes || !a->recipe_ok[r]) {
        snprintf(buf, n, "%s", r >= 0 && r < a->run->nrecipes ? a->run->recipe_spec[r] : "?");
        return buf;
    }
    const fp8_recipe *p = &a->recipes[r];
    char fmt[40];
    if (p->hybrid)
        snprintf(fmt, sizeof fmt, "hybrid");
    else
        snprintf(fmt, sizeof fmt, "%s", p->fwd.name);
    switch (p->kind) {
    case FP8_RECIPE_DELAYED:
        snprintf(buf, n, "%s:delayed h=%d %s m=%d%s", fmt, p->history_len, p->algo_most_recent ? "recent" : "max",
                 p->margin, p->pow2 ? " pow2" : "");
        break;
    case FP8_RECIPE_BLOCK:
        snprintf(buf, n, "%s:block %dx%d%s", fmt, p->block_rows, p->block_cols, p->ue8m0 ? " ue8m0" : "");
        break;
    case FP8_RECIPE_MX:
        snprintf(buf, n, "mx%s", fmt);
        break;
    default:
        snprintf(buf, n, "%s:%s%s", fmt, fp8_recipe_kind_name(p->kind), p->pow2 ? " pow2" : "");
    }
    return buf;
}

const fp8_format *an_format(const an_run *a, int t, int r)
{
    if (r < 0 || r >= a->run->nrecipes || !a->recipe_ok[r])
        return NULL;
    return fp8_recipe_format(&a->recipes[r], (fp8_role)a->run->tensor_role[t]);
}

FILE *an_data(const an_ctx *c, const char *name)
{
    if (mkdir(c->outdir, 0777) != 0 && errno != EEXIST) {
        fprintf(stderr, "fp8prof: cannot create directory %s: %s\n", c->outdir, strerror(errno));
        return NULL;
    }
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", c->outdir, name);
    FILE *f = fopen(path, "w");
    if (!f)
        fprintf(stderr, "fp8prof: cannot write %s: %s\n", path, strerror(errno));
    return f;
}

int an_data_close(const an_ctx *c, FILE *const *fs, int n)
{
    int bad = 0;
    for (int i = 0; i < n; i++)
        if (fs[i] && (ferror(fs[i]) | fclose(fs[i])) != 0)
            bad = 1;
    if (bad)
        fprintf(stderr, "fp8prof: writing the data files in %s failed (disk full?): they are incomplete\n", c->outdir);
    return bad;
}

void an_finding(an_ctx *c, const char *topic, const char *fmt, ...)
{
    if (c->nfindings == AN_MAX_FINDINGS)
        return;
    snprintf(c->topic[c->nfindings], sizeof c->topic[0], "%s", topic);
    va_list ap;
    va_start(ap, fmt);
    char *s = NULL;
    if (vasprintf(&s, fmt, ap) >= 0)
        c->findings[c->nfindings++] = s;
    va_end(ap);
}

double an_quantile(double *v, size_t n, double q)
{
    if (n == 0)
        return NAN;
    gsl_sort(v, 1, n);
    return gsl_stats_quantile_from_sorted_data(v, 1, n, q);
}

void an_thresholds(const fp8_format *f, double scale_inv, double *over, double *under)
{
    /* max plus half its ulp: above it round-to-nearest goes past max.  The
     * tie itself goes to the even neighbour (max for E4M3, past it for
     * E5M2); a single point, inside the replay's stated error bound. */
    int e = (int)floor(log2(f->max));
    double ulp = ldexp(1.0, e - f->mbits);
    *over = (f->max + ulp / 2) * scale_inv;
    /* below half the smallest subnormal, a value rounds to zero; the tie
     * goes to the even code, zero */
    *under = f->min_subnormal / 2 * scale_inv;
}
