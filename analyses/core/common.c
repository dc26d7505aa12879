/*
 * common.c — the small helpers the analyses share (defaults, phases,
 * labels, formats, thresholds, quantiles, data files, JSON, findings).
 * Opening and indexing runs: runs.c.
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

#include <unistd.h>

#include "bigmem.h"
#include "analysis.h"
#include "factors.h"
#include "fp8_error.h"
#include "fp8_file.h"
#include "fp8_ranks.h"
#include "hash.h"

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
    c->vs_a = c->vs_b = c->vs_c = -1;
    c->loss_name = "loss";
    c->claim_margin_db = 0.1;
    c->lr_warmup = -1;
    c->equivalence_pct = 1.0;
}

int64_t an_lr_warmup(const an_ctx *c, const an_run *a)
{
    if (c && c->lr_warmup >= 0)
        return c->lr_warmup;
    const char *s = fp8_run_meta(a->run, "lr_warmup");
    char *end;
    long long v = s ? strtoll(s, &end, 10) : -1;
    return s && end != s && !*end && v >= 0 && v <= FP8_STEP_MAX ? v : -1;
}

void an_phase_range(const an_ctx *c, const an_run *a, int ph, int64_t *from, int64_t *to)
{
    int64_t n = an_run_steps(a), w = an_lr_warmup(c, a);
    if (w < 0)
        w = 0; /* unknown: no LR warm-up phase (the report says so) */
    int64_t e = w + (w > n / 10 ? w : n / 10); /* early: max(W, 10% of the run) more steps */
    int64_t b[4] = {0, w, e, INT64_MAX};
    *from = b[ph], *to = b[ph + 1];
}

int an_phase(const an_ctx *c, const an_run *a, int64_t step)
{
    for (int ph = 0; ph < AN_NPHASE; ph++) {
        int64_t f, t;
        an_phase_range(c, a, ph, &f, &t);
        if (step >= f && step < t)
            return ph;
    }
    return AN_PHASE_STEADY;
}

const char *an_phase_name(int ph)
{
    static const char *n[] = {"lr_warmup", "early", "steady"};
    return ph >= 0 && ph < AN_NPHASE ? n[ph] : "?";
}

const char *an_meta(const an_run *a, const char *key) { return fp8_run_meta(a->run, key); }

double an_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
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
    static const char *names[AN_NJSON] = {"comparisons", "replay", "loss", "warmup", "claims", "smooth_swiglu",
                                          "phases", "verdicts"};
    FILE *f = an_data(c, "summary.json");
    if (!f)
        return 1;
    fprintf(f, "{\n  \"schema\": 2,\n  \"scale_convention\": \"q = cast(x * scale); x_hat = decode(q) * scale_inv\"");
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

/* The canonical label (factors.h) of recipe r on a tensor of role role;
 * role < 0: whatever the tensor (hybrid named as such, a weight block
 * shape noted). */
static const char *label_role(const an_run *a, int r, int role, char *buf, size_t n)
{
    if (r < 0 || r >= a->run->nrecipes || !a->recipe_ok[r]) {
        snprintf(buf, n, "%s", r >= 0 && r < a->run->nrecipes ? a->run->recipe_spec[r] : "?");
        return buf;
    }
    const fp8_recipe *p = &a->recipes[r];
    an_factors f;
    an_factors_of(p, role < 0 ? FP8_ROLE_ACTIVATION : (fp8_role)role, &f);
    char lab[160];
    an_factors_label(&f, lab, sizeof lab);
    if (role < 0 && p->hybrid && strncmp(lab, f.format, strlen(f.format)) == 0)
        snprintf(buf, n, "hybrid (e4m3 forward, e5m2 gradients)%s", lab + strlen(f.format));
    else
        snprintf(buf, n, "%s", lab);
    if (role < 0 && p->kind == FP8_RECIPE_BLOCK && p->wblock_rows) {
        size_t l = strlen(buf);
        snprintf(buf + l, n > l ? n - l : 0, " (weights %dx%d)", p->wblock_rows, p->wblock_cols);
    }
    return buf;
}

const char *an_recipe_label(const an_run *a, int r, char *buf, size_t n) { return label_role(a, r, -1, buf, n); }

const char *an_recipe_label_on(const an_run *a, int t, int r, char *buf, size_t n)
{
    return label_role(a, r, t >= 0 && t < a->run->ntensors ? a->run->tensor_role[t] : -1, buf, n);
}

const fp8_format *an_format(const an_run *a, int t, int r)
{
    if (r < 0 || r >= a->run->nrecipes || !a->recipe_ok[r])
        return NULL;
    return fp8_recipe_format(&a->recipes[r], (fp8_role)a->run->tensor_role[t]);
}

/* The data files open for writing: each is written under a temporary name
 * and renamed into place when it closed cleanly, so a full disk or a crash
 * leaves no truncated file under the final name (the old one stays). */
#define AN_MAX_OPEN 64
static struct {
    FILE *f;
    char tmp[4200], path[4096];
} open_files[AN_MAX_OPEN];

int an_outdir_ready(const char *cmd, const char *dir)
{
    struct stat sb;
    if (stat(dir, &sb) == 0) {
        if (!S_ISDIR(sb.st_mode)) {
            fprintf(stderr, "fp8prof: %s: -o %s is a file, not a directory: choose a directory for the data files\n",
                    cmd, dir);
            return 1;
        }
    } else if (mkdir(dir, 0777) != 0) {
        fprintf(stderr, "fp8prof: %s: cannot create the output directory %s: %s%s\n", cmd, dir, strerror(errno),
                errno == ENOENT ? " (its parent directory does not exist)" : "");
        return 1;
    }
    if (access(dir, W_OK | X_OK) != 0) {
        fprintf(stderr, "fp8prof: %s: cannot write into the output directory %s: %s\n", cmd, dir, strerror(errno));
        return 1;
    }
    return 0;
}

FILE *an_data(const an_ctx *c, const char *name)
{
    if (mkdir(c->outdir, 0777) != 0 && errno != EEXIST) {
        fprintf(stderr, "fp8prof: cannot create directory %s: %s\n", c->outdir, strerror(errno));
        return NULL;
    }
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", c->outdir, name);
    for (int i = 0; i < c->nruns; i++) {
        const fp8_run *r = c->runs[i].run;
        char which[1100];
        if (fp8_run_same_file(r->nranks ? r->index_path : r->path, path, which, sizeof which)) {
            fprintf(stderr, "fp8prof: %s would overwrite %s, a file of the input run %s: not written; choose another "
                            "-o directory\n", path, which, c->runs[i].label);
            return NULL;
        }
    }
    int k = 0;
    while (k < AN_MAX_OPEN && open_files[k].f)
        k++;
    if (k == AN_MAX_OPEN) {
        fprintf(stderr, "fp8prof: cannot write %s: too many data files open\n", path);
        return NULL;
    }
    snprintf(open_files[k].path, sizeof open_files[k].path, "%s", path);
    snprintf(open_files[k].tmp, sizeof open_files[k].tmp, "%s.tmp-%ld", path, (long)getpid());
    FILE *f = fopen(open_files[k].tmp, "w");
    if (!f)
        fprintf(stderr, "fp8prof: cannot write %s: %s\n", path, strerror(errno));
    open_files[k].f = f;
    return f;
}

int an_data_close1(const an_ctx *c, FILE *f)
{
    (void)c;
    if (!f)
        return 0;
    int k = 0;
    while (k < AN_MAX_OPEN && open_files[k].f != f)
        k++;
    int bad = (ferror(f) | fclose(f)) != 0;
    if (k == AN_MAX_OPEN)
        return bad; /* (not one of ours) */
    open_files[k].f = NULL;
    if (bad) {
        unlink(open_files[k].tmp);
        fprintf(stderr, "fp8prof: writing %s failed (disk full?): nothing written under that name (an older file "
                        "there is kept)\n", open_files[k].path);
        return 1;
    }
    if (fp8_file_commit(open_files[k].tmp, open_files[k].path) != FP8_OK) {
        fprintf(stderr, "fp8prof: %s\n", fp8_error_message());
        return 1;
    }
    return 0;
}

int an_data_close(const an_ctx *c, FILE *const *fs, int n)
{
    int bad = 0;
    for (int i = 0; i < n; i++)
        bad |= an_data_close1(c, fs[i]);
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

double an_quantile_select(double *v, size_t n, double q)
{
    if (n == 0)
        return NAN;
    /* gsl_stats_quantile_from_sorted_data's interpolation, its two order
     * statistics found by selection (linear time) instead of a sort */
    const double index = q * (double)(n - 1);
    const size_t lhs = (size_t)index;
    const double delta = index - (double)lhs;
    const double lo = gsl_stats_select(v, 1, n, lhs);
    if (lhs == n - 1)
        return lo;
    const double hi = gsl_stats_select(v, 1, n, lhs + 1);
    return (1 - delta) * lo + delta * hi;
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

/* ---- names looked up by sorting, not by scanning ---------------------- */

static const an_names *sort_names;
static int cmp_name(const void *x, const void *y)
{
    int i = *(const int *)x, j = *(const int *)y;
    int c = strcmp(sort_names->base + (size_t)i * sort_names->stride, sort_names->base + (size_t)j * sort_names->stride);
    return c ? c : (i > j) - (i < j);
}

int an_names_init(an_names *x, const char *base, size_t stride, int n)
{
    x->base = base, x->stride = stride, x->n = n;
    x->ord = malloc(((size_t)n + 1) * sizeof *x->ord);
    if (!x->ord)
        return -1;
    for (int i = 0; i < n; i++)
        x->ord[i] = i;
    sort_names = x;
    qsort(x->ord, (size_t)n, sizeof *x->ord, cmp_name);
    return 0;
}

int an_names_find(const an_names *x, const char *key)
{
    int lo = 0, hi = x->n;
    while (lo < hi) { /* the first entry >= key: the lowest index of equal names */
        int mid = lo + (hi - lo) / 2;
        if (strcmp(x->base + (size_t)x->ord[mid] * x->stride, key) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < x->n && strcmp(x->base + (size_t)x->ord[lo] * x->stride, key) == 0 ? x->ord[lo] : -1;
}

void an_names_free(an_names *x)
{
    free(x->ord);
    x->ord = NULL;
}
