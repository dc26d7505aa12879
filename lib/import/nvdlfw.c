/*
 * nvdlfw.c — nvidia-dlframework-inspect statistics logs (fp8_nvdlfw.h).
 *
 * A log line, as TransformerEngine's debug features write it through the
 * inspect tool's FileLogger:
 *   2025-03-04 10:11:12,345 - INFO - <layer>_<tensor>_<stat> \t iteration=000042 \t value=4.3188
 * (the timestamp and "INFO - " are optional: our own export writes
 * "<layer>_<tensor>_<stat> iteration=NNNNNN value=V").  <tensor> is one of
 * activation, gradient, weight, output, wgrad, dgrad; <stat> is a statistic
 * of LogTensorStats (of the high-precision tensor) or LogFp8TensorStats,
 * whose names carry the recipe ("fp8_delayed_scaling_underflows%",
 * "mxfp8_scale_inv_min_columnwise").  The layer name may hold anything,
 * underscores and GroupedLinear's ".gemm_<i>" included, so a line is split at
 * the last "_<tensor>_" whose remainder is a known statistic.
 *
 * Mapping: our tensor "<layer>.input|weight|grad_output|output" is TE's
 * "<layer>" tensor "activation|weight|gradient|output" (and back; wgrad and
 * dgrad keep their names).  A statistic without a recipe prefix belongs to
 * the recipe "unknown:imported-from-nvdlfw-inspect"; a prefixed one to
 * "te:<prefix>" ("te:<prefix>:columnwise" for the column-wise copy).
 * Percentages become counts of the logged numel, or of a nominal 1,000,000
 * when numel is not logged (rows = cols = 0 mark it); statistics the log does
 * not carry stay absent: NaN for values, UINT64_MAX for counts.  std is
 * logged as torch.std (n - 1) and stored as ours (n).
 */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fp8_file.h"
#include "fp8_nvdlfw.h"
#include "fp8_ranks.h"
#include "fp8_store.h"
#include "hash.h"

#define NOMINAL 1000000.0
#define LOGSUB "nvdlfw_inspect_statistics_logs"
#define MAX_LINE 4096 /* longer lines are errors, not names */

/* The statistics we map, in record order; the exporter writes these. */
enum { S_UNDER, S_OVER, S_MSE, S_AMAX, S_DR, S_SIMIN, S_SIMAX, S_MIN, S_MAX, S_MEAN, S_STD, S_L1, S_L2,
       S_NUMEL, S_UNDER_NUM, S_OVER_NUM, S_VAR, S_TSE, S_BDR, NSTAT };
static const char *stat_names[NSTAT] = {"underflows%", "overflows%", "mse", "cur_amax", "dynamic_range",
                                        "scale_inv_min", "scale_inv_max", "min", "max", "mean", "std", "l1_norm",
                                        "l2_norm", "numel", "underflows_num", "overflows_num", "variance",
                                        "total_square_error", "max_blockwise_dynamic_range"};
#define NEXPORT 13 /* the first 13 are written by the export */

static const char *recipe_prefixes[] = {"fp8_delayed_scaling_", "fp8_current_scaling_", "fp8_block_scaling_",
                                        "mxfp8_", "nvfp4_"};
#define NPREFIX 5

/* TE tensor names and ours */
static const struct {
    const char *te, *ours;
    fp8_role role;
} tensors[] = {{"activation", "input", FP8_ROLE_ACTIVATION}, {"gradient", "grad_output", FP8_ROLE_GRADIENT},
               {"weight", "weight", FP8_ROLE_WEIGHT},       {"output", "output", FP8_ROLE_OUTPUT},
               {"wgrad", "wgrad", FP8_ROLE_GRADIENT},       {"dgrad", "dgrad", FP8_ROLE_GRADIENT}};
#define NTENSOR 6

static int known(uint64_t u) { return u != UINT64_MAX; }

static double stat_value(const fp8_stats *s, size_t k, int *have)
{
    double n = (double)s->numel, f = (double)s->finite;
    *have = 1;
    switch (k) {
    case S_UNDER:
        *have = known(s->underflows);
        return n ? 100.0 * (double)s->underflows / n : 0;
    case S_OVER: { /* TE's definition where recorded, else ours */
        uint64_t o = known(s->te_overflows) ? s->te_overflows : s->overflows;
        *have = known(o);
        return n ? 100.0 * (double)o / n : 0;
    }
    case S_MSE: *have = !isnan(s->mse); return s->mse;
    case S_AMAX: *have = !isnan(s->amax); return s->amax;
    case S_DR: *have = !isnan(s->dynamic_range); return s->dynamic_range;
    case S_SIMIN: *have = !isnan(s->scale_inv_min); return s->scale_inv_min;
    case S_SIMAX: *have = !isnan(s->scale_inv_max); return s->scale_inv_max;
    case S_MIN: *have = !isnan(s->min); return s->min;
    case S_MAX: *have = !isnan(s->max); return s->max;
    case S_MEAN: *have = !isnan(s->mean); return s->mean;
    case S_STD: *have = !isnan(s->std); return f > 1 ? s->std * sqrt(f / (f - 1)) : 0; /* torch.std: n - 1 */
    case S_L1: *have = !isnan(s->l1); return s->l1;
    default: *have = !isnan(s->l2); return s->l2;
    }
}

static int mkdir_p(const char *dir)
{
    char tmp[1300];
    snprintf(tmp, sizeof tmp, "%s", dir);
    for (char *p = tmp + 1; *p; p++)
        if (*p == '/') {
            *p = 0;
            if (mkdir(tmp, 0777) != 0 && errno != EEXIST)
                return -1;
            *p = '/';
        }
    return mkdir(tmp, 0777) != 0 && errno != EEXIST ? -1 : 0;
}

/* Our tensor name as TE's layer and tensor: "a.b.input" -> "a.b", "activation". */
static void te_names(const char *name, fp8_role role, char *layer, size_t n, const char **tensor)
{
    const char *dot = strrchr(name, '.');
    for (int k = 0; k < NTENSOR; k++)
        if (dot && strcmp(dot + 1, tensors[k].ours) == 0) {
            snprintf(layer, n, "%.*s", (int)(dot - name), name);
            *tensor = tensors[k].te;
            return;
        }
    /* not our naming convention: the whole name is the layer, the role the tensor */
    snprintf(layer, n, "%s", name);
    *tensor = role == FP8_ROLE_GRADIENT ? "gradient" : role == FP8_ROLE_WEIGHT ? "weight"
              : role == FP8_ROLE_OUTPUT ? "output" : "activation";
}

int fp8_nvdlfw_export(const fp8_run *run, const char *dir, const char *recipe_spec)
{
    char path[1200];
    snprintf(path, sizeof path, "%s/%s", dir, LOGSUB);
    if (mkdir_p(path) != 0)
        return FP8_ERROR(FP8_EIO, "%s: cannot create: %s", path, strerror(errno));
    snprintf(path, sizeof path, "%s/%s/nvdlfw_inspect_globalrank-0.log", dir, LOGSUB);
    if (fp8_file_same(path, run->path))
        return FP8_ERROR(FP8_EINVAL, "%s is the input run itself; choose another output directory", path);
    int want = -1;
    if (recipe_spec) {
        for (int k = 0; k < run->nrecipes; k++)
            if (strcmp(run->recipe_spec[k], recipe_spec) == 0)
                want = k;
        if (want < 0)
            return FP8_ERROR(FP8_EINVAL, "no recipe '%s' in the run (fp8prof info lists them)", recipe_spec);
    }
    char tmp[1300];
    if (fp8_file_tmp_path(path, tmp, sizeof tmp) != 0)
        return FP8_ERROR(FP8_EINVAL, "%s: path too long", path);
    FILE *f = fopen(tmp, "w");
    if (!f)
        return FP8_ERROR(FP8_EIO, "%s: cannot create: %s", path, strerror(errno));
    for (size_t i = 0; i < run->nrecords; i++) {
        const fp8_record *r = &run->records[i];
        if (want >= 0 ? (int)r->recipe != want : !r->active)
            continue;
        char layer[FP8_NAME_MAX];
        const char *tensor;
        te_names(run->tensor_name[r->tensor], (fp8_role)run->tensor_role[r->tensor], layer, sizeof layer, &tensor);
        for (size_t k = 0; k < NEXPORT; k++) {
            int have;
            double v = stat_value(&r->stats, k, &have);
            if (have) /* absent statistics stay absent */
                fprintf(f, "%s_%s_%s iteration=%06lld value=%.4f\n", layer, tensor, stat_names[k], (long long)r->step, v);
        }
    }
    if ((ferror(f) | fclose(f)) != 0) {
        unlink(tmp);
        return FP8_ERROR(FP8_EIO, "%s: write failed", path);
    }
    return fp8_file_commit(tmp, path);
}

/* ---- import ----------------------------------------------------------------- */

/* One record being assembled: a tensor x recipe x step, its statistics so far. */
typedef struct {
    int tensor, recipe;
    long long step;
    double v[NSTAT];
    uint32_t have;
} pending;

/* (tensor, recipe, step) -> pending row by an index (hash.h): linear time */
static uint64_t key_hash(int t, int r, long long s)
{
    return fp8__mix64((uint64_t)t * 0x9E3779B97F4A7C15ULL ^ (uint64_t)r * 0xC2B2AE3D27D4EB4FULL ^ (uint64_t)s);
}

static uint64_t pending_hash(const void *items, size_t i)
{
    const pending *q = (const pending *)items + i;
    return key_hash(q->tensor, q->recipe, q->step);
}

static int pending_eq(const void *items, size_t i, const void *key)
{
    const pending *q = (const pending *)items + i, *k = key;
    return q->tensor == k->tensor && q->recipe == k->recipe && q->step == k->step;
}

/* the names seen so far (tensors, recipes) with their ids, by an index */
typedef struct {
    char (*name)[FP8_NAME_MAX + 32];
    int *id;
    size_t n, cap;
    fp8__index ix;
} names_t;

static uint64_t name_hash(const void *items, size_t i)
{
    const names_t *t = items;
    return fp8__fnv1a64(FP8_FNV64_SEED, t->name[i]);
}

static int name_eq(const void *items, size_t i, const void *key)
{
    const names_t *t = items;
    return strcmp(t->name[i], key) == 0;
}

/* the id stored with name, or -1 */
static int names_find(const names_t *t, const char *name)
{
    long i = fp8__index_find(&t->ix, fp8__fnv1a64(FP8_FNV64_SEED, name), name_eq, t, name);
    return i < 0 ? -1 : t->id[i];
}

/* name (not in t yet) with its id */
static int names_add(names_t *t, const char *name, int id)
{
    if (t->n == t->cap) {
        size_t cap = t->cap ? 2 * t->cap : 64;
        void *a = realloc(t->name, cap * sizeof *t->name), *b = a ? realloc(t->id, cap * sizeof *t->id) : NULL;
        if (a)
            t->name = a;
        if (!a || !b)
            return -1;
        t->id = b, t->cap = cap;
    }
    if (fp8__index_reserve(&t->ix, name_hash, t) != 0)
        return -1;
    snprintf(t->name[t->n], sizeof t->name[0], "%s", name);
    t->id[t->n] = id;
    fp8__index_add(&t->ix, fp8__fnv1a64(FP8_FNV64_SEED, name));
    t->n++;
    return 0;
}

static void names_free(names_t *t) { free(t->name), free(t->id), fp8__index_free(&t->ix); }

/* Split "<layer>_<tensor>_<stat>" at the last "_<tensor>_" whose remainder
 * parses as a statistic: *tk the tensor kind, *stat the base statistic,
 * *prefix the recipe prefix (-1 none), *colwise.  0, or -1. */
static int split_metric(char *m, int *tk, int *stat, int *prefix, int *colwise)
{
    for (char *p = m + strlen(m); p > m; p--) {
        if (p[-1] != '_')
            continue;
        char *us = p - 1; /* candidate "_<tensor>_" ends here */
        for (int k = 0; k < NTENSOR; k++) {
            size_t L = strlen(tensors[k].te);
            if ((size_t)(us - m) <= L || us[-(ptrdiff_t)L - 1] != '_' || strncmp(us - L, tensors[k].te, L) != 0)
                continue;
            char *rest = us + 1, buf[256];
            snprintf(buf, sizeof buf, "%s", rest);
            size_t bl = strlen(buf);
            *colwise = bl > 11 && strcmp(buf + bl - 11, "_columnwise") == 0;
            if (*colwise)
                buf[bl - 11] = 0;
            char *st = buf;
            *prefix = -1;
            for (int q = 0; q < NPREFIX; q++)
                if (strncmp(st, recipe_prefixes[q], strlen(recipe_prefixes[q])) == 0) {
                    *prefix = q;
                    st += strlen(recipe_prefixes[q]);
                    break;
                }
            if (strncmp(st, "max_blockwise_dynamic_range", 27) == 0)
                st[27] = 0; /* "..._block_size_<n>_dims_<d>": the block size is not kept */
            for (int s = 0; s < NSTAT; s++)
                if (strcmp(st, stat_names[s]) == 0) {
                    *tk = k, *stat = s;
                    us[-(ptrdiff_t)L - 1] = 0; /* terminate the layer name */
                    return 0;
                }
        }
    }
    return -1;
}

/* The metric, step and value of a line; NULL with *why when it is not one. */
static char *parse_line(char *line, long long *step, double *v, const char **why)
{
    /* optional "YYYY-MM-DD HH:MM:SS,mmm - " and "<LEVEL> - " */
    char *p = line;
    if (strlen(p) > 26 && p[4] == '-' && p[7] == '-' && p[10] == ' ' && p[13] == ':' && p[19] == ',' &&
        strncmp(p + 23, " - ", 3) == 0)
        p += 26;
    char *dash = strstr(p, " - ");
    if (dash && dash - p <= 8) { /* INFO, WARNING, DEBUG ... */
        int upper = 1;
        for (char *q = p; q < dash; q++)
            upper &= *q >= 'A' && *q <= 'Z';
        if (upper)
            p = dash + 3;
    }
    char *it = strstr(p, "iteration=");
    char *val = it ? strstr(it, "value=") : NULL;
    if (!it || !val || it == p || (it[-1] != ' ' && it[-1] != '\t')) {
        *why = "not '<layer>_<tensor>_<stat> iteration=N value=V'";
        return NULL;
    }
    char *end1, *end2;
    errno = 0;
    *step = strtoll(it + 10, &end1, 10);
    if (end1 == it + 10 || errno || *step < 0 || (*end1 != ' ' && *end1 != '\t')) {
        *why = "the iteration is not a non-negative integer";
        return NULL;
    }
    if (*step > FP8_STEP_MAX) {
        *why = "the iteration is past 2^62, the largest step a run file holds";
        return NULL;
    }
    for (char *q = end1; q < val; q++)
        if (*q != ' ' && *q != '\t') {
            *why = "text between the iteration and the value";
            return NULL;
        }
    *v = strtod(val + 6, &end2);
    while (*end2 == ' ' || *end2 == '\t' || *end2 == '\r')
        end2++;
    if (end2 == val + 6 || *end2) {
        *why = val[6] ? "the value is not a number" : "an empty value";
        return NULL;
    }
    char *e = it;
    while (e > p && (e[-1] == ' ' || e[-1] == '\t'))
        e--;
    *e = 0;
    return p;
}

/* One line of f into buf (at most cap - 1 bytes kept, the line's end not
 * included): memory is bounded whatever the file holds (a node crash's NUL
 * tail, a log gone wrong).  Returns the line's full length (longer than
 * cap - 1 when it was cut), -1 at end of file, -2 on a read error; *nul
 * is set when the line holds a NUL byte. */
static long read_line(FILE *f, char *buf, size_t cap, int *nul)
{
    long n = 0;
    int c;
    *nul = 0;
    while ((c = getc_unlocked(f)) != EOF && c != '\n') { /* (one thread reads f) */
        if (c == 0)
            *nul = 1;
        if ((size_t)n < cap - 1)
            buf[n] = (char)c;
        if (n < LONG_MAX)
            n++;
    }
    if (ferror(f))
        return -2;
    if (c == EOF && n == 0)
        return -1;
    buf[(size_t)n < cap - 1 ? (size_t)n : cap - 1] = 0;
    return n;
}

/* The statistics-log files under logdir: the .log files of
 * logdir/nvdlfw_inspect_statistics_logs, of every logdir/rank_<r>/nvdlfw_inspect_statistics_logs
 * (BioNeMo's and Megatron's layout), else of logdir itself. */
typedef struct {
    char (*path)[1400];
    int *rank;
    int n, cap;
    char bad[1500]; /* the first .log that is not a regular file, "" none */
} filelist;

static int cmp_path(const void *a, const void *b) { return strcmp((const char *)a, (const char *)b); }

static void add_logs(filelist *L, const char *dir, int dir_rank)
{
    DIR *d = opendir(dir);
    if (!d)
        return;
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t n = strlen(e->d_name);
        if (n <= 4 || strcmp(e->d_name + n - 4, ".log") != 0)
            continue;
        char full[1400];
        snprintf(full, sizeof full, "%s/%s", dir, e->d_name);
        struct stat sb;
        if (stat(full, &sb) != 0 || !S_ISREG(sb.st_mode)) {
            /* a directory, FIFO or device named *.log: reading it would fail,
             * block or never end */
            if (!L->bad[0])
                snprintf(L->bad, sizeof L->bad, "%s", full);
            continue;
        }
        if (L->n == L->cap) {
            int cap = L->cap ? 2 * L->cap : 16;
            void *p = realloc(L->path, (size_t)cap * sizeof *L->path), *r = p ? realloc(L->rank, (size_t)cap * sizeof *L->rank) : NULL;
            if (p)
                L->path = p;
            if (!p || !r)
                break;
            L->rank = r, L->cap = cap;
        }
        snprintf(L->path[L->n], sizeof L->path[0], "%s/%s", dir, e->d_name);
        const char *g = strstr(e->d_name, "globalrank-");
        L->rank[L->n] = g ? atoi(g + 11) : dir_rank;
        L->n++;
    }
    closedir(d);
}

static void find_logs(const char *logdir, filelist *L)
{
    char sub[1300];
    snprintf(sub, sizeof sub, "%s/%s", logdir, LOGSUB);
    add_logs(L, sub, 0);
    DIR *d = opendir(logdir);
    struct dirent *e;
    while (d && (e = readdir(d)))
        if (strncmp(e->d_name, "rank_", 5) == 0) {
            snprintf(sub, sizeof sub, "%s/%s/%s", logdir, e->d_name, LOGSUB);
            add_logs(L, sub, atoi(e->d_name + 5));
        }
    if (d)
        closedir(d);
    if (!L->n)
        add_logs(L, logdir, 0);
    /* sort paths, keeping ranks aligned: sort an index */
    for (int i = 1; i < L->n; i++)
        for (int j = i; j > 0 && cmp_path(L->path[j - 1], L->path[j]) > 0; j--) {
            char t[1400];
            memcpy(t, L->path[j], sizeof t), memcpy(L->path[j], L->path[j - 1], sizeof t), memcpy(L->path[j - 1], t, sizeof t);
            int r = L->rank[j];
            L->rank[j] = L->rank[j - 1], L->rank[j - 1] = r;
        }
}

static int layer_of(const char *name)
{
    const char *p = strstr(name, "layers.");
    return p ? atoi(p + 7) : -1;
}

/* What an import holds while it reads the logs of one output file: the
 * store, the registries seen so far, the records being assembled, and the
 * lines not understood. */
typedef struct {
    fp8_store *s;
    FILE *report;
    size_t nbad;
    names_t tn, rn;
    pending *pend;
    size_t np, capp;
    fp8__index ix;
} import_state;

/* A line not understood: "PATH:LINE: why" to the report, and counted. */
__attribute__((format(printf, 4, 5))) static void bad_line(import_state *S, const char *path, long lineno,
                                                           const char *fmt, ...)
{
    if (S->report) {
        fprintf(S->report, "%s:%ld: ", path, lineno);
        va_list ap;
        va_start(ap, fmt);
        vfprintf(S->report, fmt, ap);
        va_end(ap);
        fputc('\n', S->report);
    }
    S->nbad++;
}

/* The id of a tensor or recipe name: the one it got when first seen, or a
 * new one from the store (add); -1 when the store refuses it or no memory. */
static int name_id(import_state *S, names_t *t, const char *name, fp8_role role, int tensor)
{
    int id = names_find(t, name);
    if (id >= 0)
        return id;
    id = tensor ? fp8_store_tensor(S->s, name, role, layer_of(name)) : fp8_store_recipe(S->s, name);
    return id < 0 || names_add(t, name, id) != 0 ? -1 : id;
}

/* The pending record of (tensor, recipe, step), made when first seen: its
 * row, or SIZE_MAX with the error set (no memory). */
static size_t pending_row(import_state *S, int tid, int rid, long long step)
{
    const pending key = {.tensor = tid, .recipe = rid, .step = step};
    uint64_t kh = key_hash(tid, rid, step);
    long found = fp8__index_find(&S->ix, kh, pending_eq, S->pend, &key);
    if (found >= 0)
        return (size_t)found;
    if (S->np == S->capp) {
        size_t cap = S->capp ? 2 * S->capp : 1024;
        pending *g = realloc(S->pend, cap * sizeof *g);
        if (!g) {
            FP8_ERROR(FP8_ENOMEM, "import: out of memory");
            return SIZE_MAX;
        }
        S->pend = g, S->capp = cap;
    }
    if (fp8__index_reserve(&S->ix, pending_hash, S->pend) != 0) {
        FP8_ERROR(FP8_ENOMEM, "import: out of memory");
        return SIZE_MAX;
    }
    pending *q = &S->pend[S->np];
    memset(q, 0, sizeof *q);
    q->tensor = tid, q->recipe = rid, q->step = step;
    fp8__index_add(&S->ix, kh);
    return S->np++;
}

/* One line of a log (NUL-terminated, line ending cut, not empty): its
 * statistic into the pending record of (tensor, recipe, iteration); a line
 * not understood is reported and counted.  at_rank >= 0: "@rank<r>" ends
 * the tensor's name.  FP8_OK, or an error that stops the import (storage,
 * memory). */
static int take_line(import_state *S, char *line, const char *path, long lineno, int at_rank)
{
    long long step;
    double v;
    const char *why = NULL;
    char *metric = parse_line(line, &step, &v, &why);
    if (!metric) {
        bad_line(S, path, lineno, "%s", why);
        return FP8_OK;
    }
    int tk, stat, prefix, colwise;
    if (split_metric(metric, &tk, &stat, &prefix, &colwise) != 0) {
        bad_line(S, path, lineno, "'%.200s' is not <layer>_<activation|gradient|weight|output|wgrad|dgrad>_<a "
                                  "statistic fp8prof maps>", metric);
        return FP8_OK;
    }
    int pct = stat == S_UNDER || stat == S_OVER;
    if (pct && !(v >= 0 && v <= 100)) {
        bad_line(S, path, lineno, "%s = %g is not a percentage in 0..100", stat_names[stat], v);
        return FP8_OK;
    }
    if ((stat == S_NUMEL || stat == S_UNDER_NUM || stat == S_OVER_NUM) && !(v >= 0 && v <= 9e18 && v == floor(v))) {
        bad_line(S, path, lineno, "%s = %g is not a count", stat_names[stat], v);
        return FP8_OK;
    }
    char name[FP8_NAME_MAX + 32];
    int w = snprintf(name, sizeof name, "%s.%s", metric, tensors[tk].ours);
    if (at_rank >= 0 && w > 0)
        w += snprintf(name + w, sizeof name - (size_t)w, "@rank%d", at_rank);
    if (w <= 0 || (size_t)w >= FP8_NAME_MAX) {
        bad_line(S, path, lineno, "tensor name longer than %d bytes", FP8_NAME_MAX - 1);
        return FP8_OK;
    }
    int tid = name_id(S, &S->tn, name, tensors[tk].role, 1);
    if (tid < 0)
        return FP8_EIO;
    char spec[80];
    if (prefix < 0)
        snprintf(spec, sizeof spec, "unknown:imported-from-nvdlfw-inspect");
    else
        snprintf(spec, sizeof spec, "te:%.*s%s", (int)strlen(recipe_prefixes[prefix]) - 1, recipe_prefixes[prefix],
                 colwise ? ":columnwise" : "");
    int rid = name_id(S, &S->rn, spec, 0, 0);
    if (rid < 0)
        return FP8_EIO;
    size_t row = pending_row(S, tid, rid, step);
    if (row == SIZE_MAX)
        return FP8_ENOMEM;
    pending *q = &S->pend[row];
    if ((q->have & (1u << stat)) && !(q->v[stat] == v)) {
        /* the same statistic of the same tensor and iteration twice, with
         * another value (a restarted job appending to its log?): the first
         * kept, this line reported */
        bad_line(S, path, lineno, "iteration %lld of '%s' %s again with another value (%.9g; %.9g kept from an "
                                  "earlier line)", step, name, stat_names[stat], v, q->v[stat]);
        return FP8_OK;
    }
    q->v[stat] = v;
    q->have |= 1u << stat;
    return FP8_OK;
}

/* The lines of one log file into S (line: a buffer of MAX_LINE + 2 bytes):
 * FP8_OK, or the error that stopped it (not a regular file, unreadable,
 * storage, memory). */
static int read_log(import_state *S, const char *path, int at_rank, char *line)
{
    if (fp8_file_regular(path) != FP8_OK)
        return FP8_EINVAL;
    FILE *f = fopen(path, "r");
    if (!f)
        return FP8_ERROR(FP8_EIO, "%s: cannot open: %s", path, strerror(errno));
    long lineno = 0, got;
    int nul, st = FP8_OK;
    while (st == FP8_OK && (got = read_line(f, line, MAX_LINE + 2, &nul)) >= 0) {
        lineno++;
        size_t n = (size_t)got;
        if (n > MAX_LINE) {
            bad_line(S, path, lineno, "a line of %zu bytes (at most %d)", n, MAX_LINE);
            continue;
        }
        while (n && line[n - 1] == '\r')
            line[--n] = 0;
        if (nul) {
            bad_line(S, path, lineno, "a line holding NUL bytes (a crash's tail?)");
            continue;
        }
        if (n)
            st = take_line(S, line, path, lineno, at_rank);
    }
    if (st == FP8_OK && got == -2)
        st = FP8_ERROR(FP8_EIO, "%s: read error after line %ld: %s", path, lineno, strerror(errno));
    fclose(f);
    return st;
}

/* A pending record's statistics as the store holds them: percentages as
 * counts of the logged numel (or the nominal one), std as ours (n), what
 * the log does not carry absent (NaN, UINT64_MAX). */
static void pending_stats(const pending *q, fp8_stats *x)
{
    memset(x, 0, sizeof *x);
#define HAS(k) (q->have & (1u << (k)))
    double numel = HAS(S_NUMEL) && q->v[S_NUMEL] > 0 ? q->v[S_NUMEL] : NOMINAL;
    x->numel = x->finite = (uint64_t)numel;
    /* the log's overflows% is TE's count; ours is not in the log: the same number stands for both */
    x->underflows = HAS(S_UNDER_NUM) ? (uint64_t)q->v[S_UNDER_NUM]
                    : HAS(S_UNDER)   ? (uint64_t)llround(q->v[S_UNDER] * numel / 100.0)
                                     : UINT64_MAX;
    x->overflows = x->te_overflows = HAS(S_OVER_NUM) ? (uint64_t)q->v[S_OVER_NUM]
                                     : HAS(S_OVER)   ? (uint64_t)llround(q->v[S_OVER] * numel / 100.0)
                                                     : UINT64_MAX;
    x->subnormals = UINT64_MAX;
    x->mse = HAS(S_MSE) ? q->v[S_MSE] : NAN;
    x->sq_err = HAS(S_TSE) ? q->v[S_TSE] : NAN;
    x->amax = HAS(S_AMAX) ? q->v[S_AMAX] : NAN;
    x->dynamic_range = HAS(S_DR) ? q->v[S_DR] : NAN;
    x->scale_inv_min = HAS(S_SIMIN) ? q->v[S_SIMIN] : NAN;
    x->scale_inv_max = HAS(S_SIMAX) ? q->v[S_SIMAX] : NAN;
    x->min = HAS(S_MIN) ? q->v[S_MIN] : NAN;
    x->max = HAS(S_MAX) ? q->v[S_MAX] : NAN;
    x->mean = HAS(S_MEAN) ? q->v[S_MEAN] : NAN;
    x->std = HAS(S_STD)   ? q->v[S_STD] * sqrt((numel - 1) / numel)
             : HAS(S_VAR) ? sqrt(q->v[S_VAR] * (numel - 1) / numel)
                          : NAN;
    x->l1 = HAS(S_L1) ? q->v[S_L1] : NAN;
    x->l2 = HAS(S_L2) ? q->v[S_L2] : NAN;
    x->max_block_dynamic_range = HAS(S_BDR) ? q->v[S_BDR] : NAN;
    x->min_nonzero = x->kurtosis = x->rel_err = x->cosine = x->max_abs_err = x->scale = x->scale_inv = NAN;
    x->sqnr_db = NAN; /* not logged by nvdlfw-inspect */
    x->nscales = x->nblocks = 1;
#undef HAS
}

/* The assembled records into the store, flushed every 4096: FP8_OK, or
 * FP8_EIO (the store's error); *nrecords counts them. */
static int write_records(import_state *S, size_t *nrecords)
{
    int unknown_rid = names_find(&S->rn, "unknown:imported-from-nvdlfw-inspect");
    int st = FP8_OK;
    for (size_t p = 0; p < S->np && st == FP8_OK; p++) {
        const pending *q = &S->pend[p];
        fp8_stats x;
        pending_stats(q, &x);
        /* the high-precision tensor's statistics stand for the run's own casts
         * (active); the recipes TE evaluated are shadows */
        int active = q->recipe == unknown_rid;
        if (fp8_store_add_record(S->s, q->tensor, q->recipe, q->step, active, 0, 0, &x) != FP8_OK)
            st = FP8_EIO;
        (*nrecords)++;
        if (p % 4096 == 4095 && st == FP8_OK)
            st = fp8_store_flush(S->s);
    }
    return st;
}

/* Import the logs of rank `only` (-1: every rank, names of ranks > 0 get
 * "@rank<r>") into out_path; nranks > 0 adds mpi_rank / mpi_world_size to
 * /meta.  Unparsable lines are reported and counted into *nbad. */
static int import_one(const filelist *L, int only, int nranks, const char *logdir, const char *out_path,
                      size_t *nbad_out, FILE *report, const char *run_id)
{
    char tmp[1200];
    if (fp8_file_tmp_path(out_path, tmp, sizeof tmp) != 0)
        return FP8_ERROR(FP8_EINVAL, "%s: path too long", out_path);
    char rtxt[16], wtxt[16];
    snprintf(rtxt, sizeof rtxt, "%d", only);
    snprintf(wtxt, sizeof wtxt, "%d", nranks);
    const char *kv[] = {"imported_from", logdir, "numel", "as logged, else a nominal 1000000 (percentages only)",
                        "recipes", "unknown = the high-precision tensor's statistics; te:<recipe> = TE's statistics "
                                   "of that recipe (its settings are not in the log)",
                        "mpi_rank", rtxt, "mpi_world_size", wtxt};
    /* written under a temporary name, renamed when complete: a failed import
     * leaves whatever file was there */
    import_state S = {.report = report};
    S.s = fp8_store_create_id(tmp, kv, nranks > 0 ? 5 : 3, run_id);
    if (!S.s)
        return FP8_EIO;
    char *line = malloc(MAX_LINE + 2);
    if (!line) {
        fp8_store_close(S.s);
        unlink(tmp);
        return FP8_ERROR(FP8_ENOMEM, "import: out of memory");
    }
    int st = FP8_OK;
    for (int fi = 0; fi < L->n && st == FP8_OK; fi++)
        if (only < 0 || L->rank[fi] == only)
            st = read_log(&S, L->path[fi], only < 0 && L->rank[fi] > 0 ? L->rank[fi] : -1, line);
    free(line);
    size_t nrecords = 0;
    if (st == FP8_OK)
        st = write_records(&S, &nrecords);
    if (st == FP8_OK && nrecords == 0)
        st = FP8_ERROR(FP8_EINVAL, "%s: no statistics in the logs%s (%zu lines not understood); nothing written",
                       logdir, only >= 0 ? " of this rank" : "", S.nbad);
    int cst = fp8_store_close(S.s);
    if (st == FP8_OK)
        st = cst;
    if (st == FP8_OK)
        st = fp8_file_commit(tmp, out_path);
    else
        unlink(tmp);
    free(S.pend), fp8__index_free(&S.ix);
    names_free(&S.tn), names_free(&S.rn);
    *nbad_out += S.nbad;
    return st;
}

int fp8_nvdlfw_import(const char *logdir, const char *out_path, size_t *bad, FILE *report)
{
    filelist L = {0};
    if (bad)
        *bad = 0;
    struct stat sb;
    if (!logdir || stat(logdir, &sb) != 0)
        return FP8_ERROR(FP8_EIO, "%s: cannot open: %s", logdir ? logdir : "(null)", strerror(errno));
    if (!S_ISDIR(sb.st_mode))
        return FP8_ERROR(FP8_EINVAL, "%s: not a directory (import-nvdlfw reads a log directory: DIR/%s/*.log)", logdir,
                         LOGSUB);
    find_logs(logdir, &L);
    if (L.bad[0]) {
        int st = FP8_ERROR(FP8_EINVAL, "%s: named like a log but not a regular file (a directory, FIFO or device): "
                                       "refused; move it away", L.bad);
        free(L.path), free(L.rank);
        return st;
    }
    if (!L.n) {
        free(L.path), free(L.rank);
        return FP8_ERROR(FP8_EINVAL, "%s: no .log files (expected %s/nvdlfw_inspect_globalrank-<r>.log)", logdir, LOGSUB);
    }
    for (int i = 0; i < L.n; i++)
        if (fp8_file_same(L.path[i], out_path)) {
            int st = FP8_ERROR(FP8_EINVAL, "the output %s is one of the input logs (%s); choose another name", out_path,
                               L.path[i]);
            free(L.path), free(L.rank);
            return st;
        }
    /* ranks 0..N-1 (N >= 2), each with a log: one run file per rank and
     * their index (fp8_ranks.h); anything else: one run, "@rank<r>" names */
    int maxr = -1, contiguous = 1;
    for (int i = 0; i < L.n; i++)
        maxr = L.rank[i] > maxr ? L.rank[i] : maxr;
    for (int r = 0; r <= maxr && contiguous && maxr < FP8_RANKS_MAX; r++) {
        int has = 0;
        for (int i = 0; i < L.n && !has; i++)
            has = L.rank[i] == r;
        contiguous = has;
    }
    size_t nbad = 0;
    int st = FP8_OK;
    char run_id[FP8_RUN_ID_LEN + 1];
    fp8_store_run_id_new(run_id); /* one for every rank file and the index */
    if (maxr >= 1 && maxr < FP8_RANKS_MAX && contiguous) {
        for (int r = 0; r <= maxr && st == FP8_OK; r++) {
            char rp[1100];
            if (fp8_rank_path(out_path, r, rp, sizeof rp) != 0)
                st = FP8_ERROR(FP8_EINVAL, "%s: path too long", out_path);
            for (int i = 0; i < L.n && st == FP8_OK; i++)
                if (fp8_file_same(L.path[i], rp))
                    st = FP8_ERROR(FP8_EINVAL, "rank %d's output %s is one of the input logs; choose another name", r, rp);
            if (st == FP8_OK)
                st = import_one(&L, r, maxr + 1, logdir, rp, &nbad, report, run_id);
        }
        if (st == FP8_OK) {
            const char *kv[] = {"imported_from", logdir};
            st = fp8_ranks_write_index(out_path, maxr + 1, kv, 1, run_id);
        }
    } else
        st = import_one(&L, -1, 0, logdir, out_path, &nbad, report, NULL);
    free(L.path), free(L.rank);
    if (bad)
        *bad = nbad;
    return st;
}
