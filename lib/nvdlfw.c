/*
 * nvdlfw.c — nvidia-dlframework-inspect logs (fp8_nvdlfw.h).
 *
 * Conversions: underflows% = 100 underflows / numel; overflows% is TE's
 * definition, 100 te_overflows / numel (|x| > fp8_max * scale_inv before
 * rounding), or ours when the run file predates te_overflows;
 * std is logged as torch.std does it (denominator n - 1) and stored as ours
 * (denominator n).  Imported percentages become counts of a nominal numel
 * of 1,000,000 (exact for 4 decimals); imported records have rows = cols = 0,
 * which marks the numel as nominal.
 */
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fp8_nvdlfw.h"

#define NOMINAL 1000000.0
#define LOGSUB "nvdlfw_inspect_statistics_logs"

static const char *stat_names[] = {"underflows%", "overflows%", "mse", "cur_amax", "dynamic_range", "scale_inv_min",
                                   "scale_inv_max", "min", "max", "mean", "std", "l1_norm", "l2_norm"};
#define NSTATS (sizeof stat_names / sizeof stat_names[0])

static double stat_value(const fp8_stats *s, size_t k)
{
    double n = (double)s->numel, f = (double)s->finite;
    switch (k) {
    case 0: return n ? 100.0 * (double)s->underflows / n : 0;
    case 1: return n ? 100.0 * (double)(s->te_overflows != UINT64_MAX ? s->te_overflows : s->overflows) / n : 0;
    case 2: return s->mse;
    case 3: return s->amax;
    case 4: return s->dynamic_range;
    case 5: return s->scale_inv_min;
    case 6: return s->scale_inv_max;
    case 7: return s->min;
    case 8: return s->max;
    case 9: return s->mean;
    case 10: return f > 1 ? s->std * sqrt(f / (f - 1)) : 0; /* torch.std: n - 1 */
    case 11: return s->l1;
    default: return s->l2;
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

int fp8_nvdlfw_export(const fp8_run *run, const char *dir, const char *recipe_spec)
{
    char path[1200];
    snprintf(path, sizeof path, "%s/%s", dir, LOGSUB);
    if (mkdir_p(path) != 0)
        return FP8_ERROR(FP8_EIO, "%s: cannot create: %s", path, strerror(errno));
    snprintf(path, sizeof path, "%s/%s/nvdlfw_inspect_globalrank-0.log", dir, LOGSUB);
    FILE *f = fopen(path, "w");
    if (!f)
        return FP8_ERROR(FP8_EIO, "%s: cannot create: %s", path, strerror(errno));
    int want = -1;
    if (recipe_spec) {
        for (int k = 0; k < run->nrecipes; k++)
            if (strcmp(run->recipe_spec[k], recipe_spec) == 0)
                want = k;
        if (want < 0) {
            fclose(f);
            return FP8_ERROR(FP8_EINVAL, "no recipe '%s' in the run (fp8prof info lists them)", recipe_spec);
        }
    }
    for (size_t i = 0; i < run->nrecords; i++) {
        const fp8_record *r = &run->records[i];
        if (want >= 0 ? (int)r->recipe != want : !r->active)
            continue;
        const char *name = run->tensor_name[r->tensor];
        const char *dot = strrchr(name, '.');
        char layer[FP8_NAME_MAX];
        snprintf(layer, sizeof layer, "%.*s", dot ? (int)(dot - name) : (int)strlen(name), name);
        const char *tensor = dot ? dot + 1 : "tensor";
        for (size_t k = 0; k < NSTATS; k++)
            fprintf(f, "%s_%s_%s iteration=%06lld value=%.4f\n", layer, tensor, stat_names[k], (long long)r->step,
                    stat_value(&r->stats, k));
    }
    if (fclose(f) != 0)
        return FP8_ERROR(FP8_EIO, "%s: write failed", path);
    return FP8_OK;
}

/* ---- import ----------------------------------------------------------------- */

typedef struct {
    char name[FP8_NAME_MAX];
    long long step;
    double v[NSTATS];
    unsigned have;
} pending;

static fp8_role guess_role(const char *tensor)
{
    if (strstr(tensor, "grad"))
        return FP8_ROLE_GRADIENT;
    if (strstr(tensor, "weight"))
        return FP8_ROLE_WEIGHT;
    if (strstr(tensor, "output"))
        return FP8_ROLE_OUTPUT;
    if (strstr(tensor, "activation") || strstr(tensor, "input"))
        return FP8_ROLE_ACTIVATION;
    return FP8_ROLE_OTHER;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

int fp8_nvdlfw_import(const char *logdir, const char *out_path, size_t *bad, FILE *report)
{
    char dir[1200];
    snprintf(dir, sizeof dir, "%s/%s", logdir, LOGSUB);
    DIR *d = opendir(dir);
    if (!d) {
        snprintf(dir, sizeof dir, "%s", logdir);
        d = opendir(dir);
    }
    if (!d)
        return FP8_ERROR(FP8_EIO, "%s: cannot open the log directory: %s", logdir, strerror(errno));
    char *files[4096];
    int nf = 0;
    struct dirent *e;
    while ((e = readdir(d)) && nf < 4096) {
        size_t L = strlen(e->d_name);
        if (L > 4 && strcmp(e->d_name + L - 4, ".log") == 0)
            files[nf++] = strdup(e->d_name);
    }
    closedir(d);
    if (!nf)
        return FP8_ERROR(FP8_EINVAL, "%s: no .log files (expected %s/nvdlfw_inspect_globalrank-<r>.log)", logdir,
                         LOGSUB);
    qsort(files, (size_t)nf, sizeof *files, cmp_str);
    const char *kv[] = {"imported_from", logdir, "numel", "nominal 1000000 (nvdlfw logs keep percentages only)"};
    fp8_store *s = fp8_store_create(out_path, kv, 2);
    if (!s) {
        for (int i = 0; i < nf; i++)
            free(files[i]);
        return FP8_EIO;
    }
    int rid = fp8_store_recipe(s, "unknown:imported-from-nvdlfw-inspect");
    size_t nbad = 0;
    pending *pend = NULL;
    size_t np = 0, capp = 0;
    int st = FP8_OK;
    for (int fi = 0; fi < nf && st == FP8_OK; fi++) {
        char path[2400];
        snprintf(path, sizeof path, "%s/%s", dir, files[fi]);
        int rank = 0;
        const char *rp = strstr(files[fi], "globalrank-");
        if (rp)
            rank = atoi(rp + 11);
        FILE *f = fopen(path, "r");
        if (!f) {
            st = FP8_ERROR(FP8_EIO, "%s: cannot open: %s", path, strerror(errno));
            break;
        }
        char line[1024];
        long lineno = 0;
        while (fgets(line, sizeof line, f)) {
            lineno++;
            size_t L = strlen(line);
            while (L && (line[L - 1] == '\n' || line[L - 1] == '\r'))
                line[--L] = 0;
            if (!L)
                continue;
            char *it = strstr(line, " iteration=");
            char *val = it ? strstr(it, " value=") : NULL;
            char *end1 = NULL, *end2 = NULL;
            long long step = it ? strtoll(it + 11, &end1, 10) : 0;
            double v = val ? strtod(val + 7, &end2) : 0;
            if (!it || !val || end1 != val || !end2 || *end2) {
                if (report)
                    fprintf(report, "%s:%ld: not '<layer>_<tensor>_<stat> iteration=N value=V'\n", path, lineno);
                nbad++;
                continue;
            }
            *it = 0;
            size_t k = NSTATS;
            for (size_t j = 0; j < NSTATS; j++) {
                size_t sl = strlen(stat_names[j]), kl = strlen(line);
                if (kl > sl + 1 && line[kl - sl - 1] == '_' && strcmp(line + kl - sl, stat_names[j]) == 0 &&
                    (k == NSTATS || sl > strlen(stat_names[k])))
                    k = j;
            }
            if (k == NSTATS) {
                if (report)
                    fprintf(report, "%s:%ld: statistic of '%s' is not one fp8prof maps\n", path, lineno, line);
                nbad++;
                continue;
            }
            line[strlen(line) - strlen(stat_names[k]) - 1] = 0; /* "<layer>_<tensor>" */
            char *us = strrchr(line, '_');
            char full[1100], name[FP8_NAME_MAX];
            if (us)
                snprintf(full, sizeof full, "%.*s.%s%s%.0d", (int)(us - line), line, us + 1, rank ? "@rank" : "",
                         rank);
            else
                snprintf(full, sizeof full, "%s", line);
            if (strlen(full) >= sizeof name) {
                if (report)
                    fprintf(report, "%s:%ld: tensor name longer than %d bytes\n", path, lineno, FP8_NAME_MAX - 1);
                nbad++;
                continue;
            }
            memcpy(name, full, strlen(full) + 1);
            size_t p = np;
            for (size_t q = np; q-- > 0;) /* recent entries first */
                if (pend[q].step == step && strcmp(pend[q].name, name) == 0) {
                    p = q;
                    break;
                }
            if (p == np) {
                if (np == capp) {
                    capp = capp ? 2 * capp : 256;
                    pending *g = realloc(pend, capp * sizeof *g);
                    if (!g) {
                        st = FP8_ERROR(FP8_ENOMEM, "import: out of memory");
                        break;
                    }
                    pend = g;
                }
                memset(&pend[np], 0, sizeof pend[np]);
                snprintf(pend[np].name, sizeof pend[np].name, "%s", name);
                pend[np].step = step;
                np++;
            }
            pend[p].v[k] = v;
            pend[p].have |= 1u << k;
        }
        fclose(f);
    }
    for (size_t p = 0; p < np && st == FP8_OK; p++) {
        const char *dot = strrchr(pend[p].name, '.');
        int tid = fp8_store_tensor(s, pend[p].name, guess_role(dot ? dot + 1 : pend[p].name), -1);
        fp8_stats x;
        memset(&x, 0, sizeof x);
        x.numel = x.finite = (uint64_t)NOMINAL;
        x.underflows = (uint64_t)llround(pend[p].v[0] * NOMINAL / 100.0);
        /* the log's overflows% is TE's count; ours is not in the log: the same number stands for both */
        x.overflows = x.te_overflows = (uint64_t)llround(pend[p].v[1] * NOMINAL / 100.0);
        x.mse = pend[p].v[2];
        x.amax = pend[p].v[3];
        x.dynamic_range = pend[p].v[4];
        x.scale_inv_min = pend[p].v[5];
        x.scale_inv_max = pend[p].v[6];
        x.min = pend[p].v[7];
        x.max = pend[p].v[8];
        x.mean = pend[p].v[9];
        x.std = pend[p].v[10] * sqrt((NOMINAL - 1) / NOMINAL);
        x.l1 = pend[p].v[11];
        x.l2 = pend[p].v[12];
        x.nscales = x.nblocks = 1;
        x.sqnr_db = NAN; /* not logged by nvdlfw-inspect */
        if (tid < 0 || fp8_store_add_record(s, tid, rid, pend[p].step, 1, 0, 0, &x) != FP8_OK)
            st = FP8_EIO;
        if (p % 4096 == 4095 && st == FP8_OK)
            st = fp8_store_flush(s);
    }
    int cst = fp8_store_close(s);
    if (st == FP8_OK)
        st = cst;
    free(pend);
    for (int i = 0; i < nf; i++)
        free(files[i]);
    if (bad)
        *bad = nbad;
    return st;
}
