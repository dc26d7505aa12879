/*
 * cmd_run.c — commands over run files: info, export (csv, jsonl, nvdlfw), watch.
 */
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "analysis.h"
#include "cli.h"
#include "fp8.h"
#include "fp8_store.h"
#include "fp8_file.h"
#include "fp8_nvdlfw.h"
#include "fp8_ranks.h"

static fp8_run *load_or_complain(const char *path)
{
    fp8_run *r = fp8_run_load(path);
    if (!r)
        fprintf(stderr, "fp8prof: %s\n", fp8_error_message());
    return r;
}

/* a percentage; NaN for a count the file does not carry (UINT64_MAX, imported logs) */
static double pct(uint64_t count, uint64_t numel)
{
    return count == UINT64_MAX ? NAN : numel ? 100.0 * (double)count / (double)numel : 0.0;
}

/* a count for CSV: empty when not carried */
static const char *cnt(uint64_t v, char *buf, size_t n)
{
    if (v == UINT64_MAX)
        buf[0] = 0;
    else
        snprintf(buf, n, "%llu", (unsigned long long)v);
    return buf;
}

static const fp8_run *sort_run; /* qsort has no context argument */

static int by_tensor_recipe(const void *pa, const void *pb)
{
    const fp8_summary *a = &sort_run->summaries[*(const size_t *)pa], *b = &sort_run->summaries[*(const size_t *)pb];
    if (a->tensor != b->tensor)
        return a->tensor < b->tensor ? -1 : 1;
    if (a->recipe != b->recipe)
        return a->recipe < b->recipe ? -1 : 1;
    return *(const size_t *)pa < *(const size_t *)pb ? -1 : *(const size_t *)pa > *(const size_t *)pb;
}

int cmd_info(int argc, char **argv)
{
    if (argc != 2)
        return cli_usage_error("info takes one RUN.h5");
    fp8_run *r = fp8_run_load_summary(argv[1], NULL); /* no histograms: ~220 bytes a record */
    if (!r) {
        fprintf(stderr, "fp8prof: %s\n", fp8_error_message());
        return 1;
    }
    printf("run %s (schema %d)\n", argv[1], r->schema);
    if (r->nranks)
        printf("  rank 0 of a %d-rank run: what follows is %s (every rank: fp8prof ranks %s)\n", r->nranks, r->path,
               argv[1]);
    for (int i = 0; i < r->nmeta; i++)
        printf("  %-20s %s\n", r->meta_key[i], r->meta_value[i]);
    int64_t lo = INT64_MAX, hi = INT64_MIN;
    for (size_t i = 0; i < r->nrecords; i++) {
        lo = r->summaries[i].step < lo ? r->summaries[i].step : lo;
        hi = r->summaries[i].step > hi ? r->summaries[i].step : hi;
    }
    printf("records %zu, steps %lld..%lld, tensors %d, recipes %d, scalars %zu (%d series), snapshots %zu\n",
           r->nrecords, r->nrecords ? (long long)lo : 0LL, r->nrecords ? (long long)hi : 0LL, r->ntensors,
           r->nrecipes, r->nscalars, r->nscalar_names, r->nsnapshots);
    if (r->unreadable_records)
        printf("damaged: the last %zu records cannot be read (a write torn when the writer was killed?); the "
               "%zu before them are above\n",
               r->unreadable_records, r->nrecords);
    if (r->unreadable_rows)
        printf("damaged: %zu rows of the every-step series (/steps, /scalars) and indexes (/snapshot_index, "
               "/block_amax_index) cannot be read and are left out: each one's rows before its damage are used\n",
               r->unreadable_rows);
    printf("recipes:\n");
    for (int k = 0; k < r->nrecipes; k++)
        printf("  [%d] %s\n", k, r->recipe_spec[k]);
    printf("%-40s %-10s %6s %5s %12s %12s %10s\n", "tensor", "role", "recipe", "recs", "max overflow%",
           "max underflow%", "min SQNR dB");
    /* one pass over the records in (tensor, recipe) order: sorting an index
     * costs N log N whatever the number of tensors and recipes */
    size_t *ord = malloc((r->nrecords ? r->nrecords : 1) * sizeof *ord);
    if (!ord) {
        fprintf(stderr, "fp8prof: info: out of memory for %zu records\n", r->nrecords);
        fp8_run_free(r);
        return 1;
    }
    for (size_t i = 0; i < r->nrecords; i++)
        ord[i] = i;
    sort_run = r;
    qsort(ord, r->nrecords, sizeof *ord, by_tensor_recipe);
    for (size_t a = 0, b; a < r->nrecords; a = b) {
        const fp8_summary *first = &r->summaries[ord[a]];
        double mo = 0, mu = 0, ms = INFINITY;
        for (b = a; b < r->nrecords && r->summaries[ord[b]].tensor == first->tensor &&
                    r->summaries[ord[b]].recipe == first->recipe;
             b++) {
            const fp8_summary *rec = &r->summaries[ord[b]];
            mo = fmax(mo, pct(rec->overflows, rec->numel));
            mu = fmax(mu, pct(rec->underflows, rec->numel));
            ms = fmin(ms, rec->sqnr_db);
        }
        printf("%-40s %-10s %6u %5zu %12.4f %12.4f %10.2f\n", r->tensor_name[first->tensor],
               fp8_role_name((fp8_role)r->tensor_role[first->tensor]), (unsigned)first->recipe, b - a, mo, mu, ms);
    }
    free(ord);
    fp8_run_free(r);
    return 0;
}

static void csv_str(FILE *f, const char *s)
{
    int quote = strpbrk(s, ",\"\n") != NULL;
    if (!quote) {
        fputs(s, f);
        return;
    }
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"')
            fputc('"', f);
        fputc(*s, f);
    }
    fputc('"', f);
}

static int export_csv(const fp8_run *r, FILE *f, int scalars)
{
    if (scalars) {
        fprintf(f, "name,step,value\n");
        for (size_t i = 0; i < r->nscalars; i++) {
            csv_str(f, r->scalar_name[r->scalar_id[i]]);
            fprintf(f, ",%lld,%.17g\n", (long long)r->scalar_step[i], r->scalar_value[i]);
        }
        return 0;
    }
    fprintf(f, "tensor,role,layer,step,recipe,active,format,rows,cols,numel,finite,nan_count,inf_count,zero_count,"
               "scale,scale_inv,amax,min,max,mean,std,l1,l2,dynamic_range,kurtosis,overflows,underflows,subnormals,"
               "overflow_pct,underflow_pct,subnormal_pct,mse,sq_err,rel_err,sqnr_db,cosine,max_abs_err,nscales,"
               "scale_inv_min,scale_inv_max,blocks_with_overflow,blocks_with_underflow,max_block_dynamic_range\n");
    for (size_t i = 0; i < r->nrecords; i++) {
        const fp8_record *rec = &r->records[i];
        const fp8_stats *s = &rec->stats;
        char c1[24], c2[24], c3[24];
        csv_str(f, r->tensor_name[rec->tensor]);
        fprintf(f, ",%s,%d,%lld,", fp8_role_name((fp8_role)r->tensor_role[rec->tensor]), r->tensor_layer[rec->tensor],
                (long long)rec->step);
        csv_str(f, r->recipe_spec[rec->recipe]);
        fprintf(f,
                ",%d,%s,%llu,%llu,%llu,%llu,%llu,%llu,%llu,%.9g,%.9g,%.9g,%.9g,%.9g,%.9g,%.9g,%.9g,%.9g,%.9g,%.9g,"
                "%s,%s,%s,%.9g,%.9g,%.9g,%.9g,%.9g,%.9g,%.9g,%.9g,%.9g,%llu,%.9g,%.9g,%llu,%llu,%.9g\n",
                rec->active, s->format ? s->format->name : "", (unsigned long long)rec->rows,
                (unsigned long long)rec->cols, (unsigned long long)s->numel, (unsigned long long)s->finite,
                (unsigned long long)s->nan_count, (unsigned long long)s->inf_count, (unsigned long long)s->zero_count,
                s->scale, s->scale_inv, s->amax, s->min, s->max, s->mean, s->std, s->l1, s->l2, s->dynamic_range,
                s->kurtosis, cnt(s->overflows, c1, sizeof c1), cnt(s->underflows, c2, sizeof c2),
                cnt(s->subnormals, c3, sizeof c3), pct(s->overflows, s->numel), pct(s->underflows, s->numel),
                pct(s->subnormals, s->numel), s->mse, s->sq_err, s->rel_err, s->sqnr_db, s->cosine, s->max_abs_err,
                (unsigned long long)s->nscales, s->scale_inv_min, s->scale_inv_max,
                (unsigned long long)s->blocks_with_overflow, (unsigned long long)s->blocks_with_underflow,
                s->max_block_dynamic_range);
    }
    return 0;
}

static void json_s(FILE *f, const char *k, const char *v, int first)
{
    fprintf(f, "%s\"%s\": ", first ? "" : ", ", k);
    an_json_str(f, v);
}

static void json_d(FILE *f, const char *k, double v)
{
    if (isfinite(v))
        fprintf(f, ", \"%s\": %.9g", k, v);
    else
        fprintf(f, ", \"%s\": null", k);
}

static void json_u(FILE *f, const char *k, uint64_t v)
{
    if (v == UINT64_MAX)
        fprintf(f, ", \"%s\": null", k);
    else
        fprintf(f, ", \"%s\": %llu", k, (unsigned long long)v);
}

/* One JSON object per record (tensor x step x recipe), TransformerEngine's
 * statistic names where they exist (docs/statistics.md, "nvdlfw-inspect log
 * names"), ours beside them; non-finite numbers and undefined counts null. */
static int export_jsonl(const fp8_run *r, FILE *f)
{
    for (size_t i = 0; i < r->nrecords; i++) {
        const fp8_record *rec = &r->records[i];
        const fp8_stats *s = &rec->stats;
        double n = s->numel ? (double)s->numel : NAN;
        fputc('{', f);
        json_s(f, "tensor", r->tensor_name[rec->tensor], 1);
        json_s(f, "role", fp8_role_name((fp8_role)r->tensor_role[rec->tensor]), 0);
        fprintf(f, ", \"layer\": %d, \"step\": %lld", r->tensor_layer[rec->tensor], (long long)rec->step);
        json_s(f, "recipe", r->recipe_spec[rec->recipe], 0);
        fprintf(f, ", \"active\": %s", rec->active ? "true" : "false");
        json_s(f, "format", s->format ? s->format->name : "", 0);
        fprintf(f, ", \"rows\": %llu, \"cols\": %llu", (unsigned long long)rec->rows, (unsigned long long)rec->cols);
        json_u(f, "numel", s->numel);
        json_d(f, "underflows%", s->underflows == UINT64_MAX ? NAN : 100.0 * (double)s->underflows / n);
        json_d(f, "overflows%", s->overflows == UINT64_MAX ? NAN : 100.0 * (double)s->overflows / n);
        json_u(f, "underflows_num", s->underflows);
        json_u(f, "overflows_num", s->overflows);
        json_d(f, "fp8_delayed_scaling_overflows%", s->te_overflows == UINT64_MAX ? NAN
                                                                                   : 100.0 * (double)s->te_overflows / n);
        json_d(f, "mse", s->mse);
        json_d(f, "total_square_error", s->sq_err);
        json_d(f, "cur_amax", s->amax);
        json_d(f, "dynamic_range", s->dynamic_range);
        json_d(f, "min", s->min), json_d(f, "max", s->max), json_d(f, "mean", s->mean), json_d(f, "std", s->std);
        json_d(f, "l1_norm", s->l1), json_d(f, "l2_norm", s->l2);
        json_d(f, "scale_inv_min", s->scale_inv_min), json_d(f, "scale_inv_max", s->scale_inv_max);
        json_d(f, "max_block_dynamic_range", s->max_block_dynamic_range);
        json_d(f, "scale", s->scale), json_d(f, "scale_inv", s->scale_inv);
        json_d(f, "sqnr_db", s->sqnr_db), json_d(f, "rel_err", s->rel_err), json_d(f, "cosine", s->cosine);
        json_u(f, "subnormals", s->subnormals);
        json_u(f, "nan_count", s->nan_count), json_u(f, "inf_count", s->inf_count);
        fputs("}\n", f);
    }
    return 0;
}

int cmd_export(int argc, char **argv)
{
    const char *path = NULL, *format = "csv", *out = NULL, *recipe = NULL;
    int scalars = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--format") == 0 && i + 1 < argc)
            format = argv[++i];
        else if (strcmp(argv[i], "-o") == 0 && i + 1 < argc)
            out = argv[++i];
        else if (strcmp(argv[i], "--recipe") == 0 && i + 1 < argc)
            recipe = argv[++i];
        else if (strcmp(argv[i], "--scalars") == 0)
            scalars = 1;
        else if (argv[i][0] == '-' && argv[i][1])
            return cli_usage_error("export: unknown option '%s' (or it lacks its value)", argv[i]);
        else if (!path)
            path = argv[i];
        else
            return cli_usage_error("export: one RUN.h5 only (extra '%s')", argv[i]);
    }
    if (!path)
        return cli_usage_error("export needs RUN.h5");
    if (strcmp(format, "csv") != 0 && strcmp(format, "jsonl") != 0 && strcmp(format, "nvdlfw") != 0)
        return cli_usage_error("export: unknown format '%s' (csv, jsonl, nvdlfw)", format);
    if (strcmp(format, "jsonl") == 0 && scalars)
        return cli_usage_error("export --scalars: csv only");
    if (strcmp(format, "nvdlfw") == 0 && !out)
        return cli_usage_error("export --format nvdlfw needs -o DIR");
    char clash[1100];
    if (out && fp8_run_same_file(path, out, clash, sizeof clash)) {
        fprintf(stderr, "fp8prof: export: the output %s is %s, a file of the input run %s; nothing written, choose "
                        "another name\n", out, clash, path);
        return 1;
    }
    fp8_run *r = load_or_complain(path);
    if (!r)
        return 1;
    int rc = 0;
    if (strcmp(format, "csv") == 0 || strcmp(format, "jsonl") == 0) {
        /* written under a temporary name and renamed: a failure leaves any old file */
        char tmp[1200];
        if (out && fp8_file_tmp_path(out, tmp, sizeof tmp) != 0) {
            fprintf(stderr, "fp8prof: export: output path too long\n");
            fp8_run_free(r);
            return 1;
        }
        FILE *f = out ? fopen(tmp, "w") : stdout;
        if (!f) {
            fprintf(stderr, "fp8prof: export: cannot create %s: %s\n", out, strerror(errno));
            rc = 1;
        } else {
            if (strcmp(format, "csv") == 0)
                export_csv(r, f, scalars);
            else
                export_jsonl(r, f);
            if ((out && (ferror(f) | fclose(f)) != 0) || (!out && fflush(f) != 0)) {
                fprintf(stderr, "fp8prof: export: writing %s failed\n", out ? out : "stdout");
                if (out)
                    unlink(tmp);
                rc = 1;
            } else if (out && fp8_file_commit(tmp, out) != FP8_OK) {
                fprintf(stderr, "fp8prof: export: %s\n", fp8_error_message());
                rc = 1;
            }
        }
    } else if (fp8_nvdlfw_export(r, out, recipe) != FP8_OK) {
        fprintf(stderr, "fp8prof: export: %s\n", fp8_error_message());
        rc = 1;
    }
    fp8_run_free(r);
    return rc;
}

int cmd_import_nvdlfw(int argc, char **argv)
{
    const char *dir = NULL, *out = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "-o") == 0 && i + 1 < argc)
            out = argv[++i];
        else if (argv[i][0] == '-')
            return cli_usage_error("import-nvdlfw: unknown option '%s'", argv[i]);
        else if (!dir)
            dir = argv[i];
        else
            return cli_usage_error("import-nvdlfw: one LOGDIR only (extra '%s')", argv[i]);
    }
    if (!dir || !out)
        return cli_usage_error("usage: fp8prof import-nvdlfw LOGDIR -o RUN.h5");
    size_t bad = 0;
    int st = fp8_nvdlfw_import(dir, out, &bad, stderr);
    if (st != FP8_OK) {
        fprintf(stderr, "fp8prof: import-nvdlfw: %s\n", fp8_error_message());
        return 1;
    }
    if (bad)
        fprintf(stderr, "fp8prof: import-nvdlfw: %zu lines could not be parsed (listed above)\n", bad);
    return bad ? 1 : 0;
}

static volatile sig_atomic_t stop_watch;
static void on_sigint(int sig)
{
    (void)sig;
    stop_watch = 1;
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* One line per step: the worst tensors of that step. */
static void watch_step(const fp8_run *r, int64_t step)
{
    const fp8_record *wo = NULL, *wu = NULL, *ws = NULL;
    for (size_t i = 0; i < r->nrecords; i++) {
        const fp8_record *rec = &r->records[i];
        if (rec->step != step)
            continue;
        if (!wo || pct(rec->stats.overflows, rec->stats.numel) > pct(wo->stats.overflows, wo->stats.numel))
            wo = rec;
        if (!wu || pct(rec->stats.underflows, rec->stats.numel) > pct(wu->stats.underflows, wu->stats.numel))
            wu = rec;
        if (!ws || rec->stats.sqnr_db < ws->stats.sqnr_db)
            ws = rec;
    }
    if (!wo)
        return;
    printf("step %lld: worst overflow %.4f%% %s [%s]; underflow %.4f%% %s [%s]; SQNR %.2f dB %s [%s]\n", (long long)step,
           pct(wo->stats.overflows, wo->stats.numel), r->tensor_name[wo->tensor], r->recipe_spec[wo->recipe],
           pct(wu->stats.underflows, wu->stats.numel), r->tensor_name[wu->tensor], r->recipe_spec[wu->recipe],
           ws->stats.sqnr_db, r->tensor_name[ws->tensor], r->recipe_spec[ws->recipe]);
}

int cmd_watch(int argc, char **argv)
{
    const char *path = NULL;
    double interval = 2.0, idle = 0;
    int once = 0;
    for (int i = 1; i < argc; i++) {
        int rc = 0;
        if (strcmp(argv[i], "--interval") == 0 && i + 1 < argc)
            rc = cli_number("watch", "--interval", argv[++i], 0.05, 3600, 0, &interval);
        else if (strcmp(argv[i], "--idle") == 0 && i + 1 < argc)
            rc = cli_number("watch", "--idle", argv[++i], 0, 1e7, 0, &idle);
        else if (strcmp(argv[i], "--once") == 0)
            once = 1;
        else if (argv[i][0] == '-')
            return cli_usage_error("watch: unknown option '%s' (or it lacks its value)", argv[i]);
        else
            path = argv[i];
        if (rc)
            return rc;
    }
    if (!path)
        return cli_usage_error("watch needs RUN.h5");
    if (access(path, F_OK) == 0 && fp8_file_regular(path) != FP8_OK) {
        fprintf(stderr, "fp8prof: watch: %s\n", fp8_error_message());
        return 1;
    }
    signal(SIGINT, on_sigint);
    int64_t shown = INT64_MIN;
    int misses = 0, first = 1;
    double last_new = 0, waited = 0;
    while (!stop_watch) {
        /* the writer's state before the read: records flushed before a close are all in this read */
        int writing = fp8_run_writer_open(path);
        fp8_run *r = fp8_run_load(path);
        if (!r) {
            if (once || ++misses > 3) {
                fprintf(stderr, "fp8prof: watch: %s\n", fp8_error_message());
                return 1;
            }
        } else {
            misses = 0;
            /* the distinct steps recorded after the last one shown (no loop
             * over every integer: a step may be anything, INT64_MAX included) */
            int64_t *steps = malloc((r->nrecords + 1) * sizeof *steps);
            size_t n = 0;
            for (size_t i = 0; steps && i < r->nrecords; i++)
                if (shown == INT64_MIN || r->records[i].step > shown)
                    steps[n++] = r->records[i].step;
            if (steps)
                qsort(steps, n, sizeof *steps, cmp_i64);
            size_t u = 0;
            for (size_t i = 0; i < n; i++)
                if (!u || steps[i] != steps[u - 1])
                    steps[u++] = steps[i];
            if ((first || once) && u > 1) { /* the first look shows the last step only */
                steps[0] = steps[u - 1];
                u = 1;
            }
            for (size_t i = 0; i < u; i++)
                watch_step(r, steps[i]);
            if (u) {
                shown = steps[u - 1];
                last_new = waited;
            }
            free(steps);
            fflush(stdout);
            fp8_run_free(r);
        }
        if (once)
            break;
        if (writing == 0) {
            printf("watch: the writer closed %s; done\n", path);
            break;
        }
        if (first && writing == 1)
            fprintf(stderr, "fp8prof: watch: following %s while its writer runs (every %g s; Ctrl-C to stop%s)\n", path,
                    interval, idle > 0 ? ", or when idle" : "");
        first = 0;
        if (idle > 0 && waited - last_new >= idle) {
            printf("watch: no new step for %g s (the writer may have died: its file still says it is writing); "
                   "done\n", waited - last_new);
            break;
        }
        struct timespec ts = {(time_t)interval, (long)((interval - floor(interval)) * 1e9)};
        nanosleep(&ts, NULL);
        waited += interval;
    }
    return 0;
}
