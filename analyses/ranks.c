/*
 * ranks.c — analyses across the ranks of a multi-rank run (ranks.h).
 *
 * Every rank file is untrusted: its tensors and recipes are matched to
 * rank 0's by name and spec (not by id), its mpi_rank and mpi_world_size
 * must agree with the index, and rows outside rank 0's step range are
 * counted and skipped.
 */
#include <errno.h>
#include <fnmatch.h>
#include <gsl/gsl_sort.h>
#include <gsl/gsl_statistics_double.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "analysis.h"
#include "fp8_error.h"
#include "fp8_ranks.h"
#include "fp8_recipe.h"
#include "plots.h"
#include "ranks.h"

#define MAX_CELLS ((size_t)1 << 31) /* floats held per array: 8 GB, refused above */

static int meta_int(const fp8_run *run, const char *key, int lo, int hi, int *out)
{
    const char *v = fp8_run_meta(run, key);
    if (!v)
        return 0;
    char *end;
    errno = 0;
    long x = strtol(v, &end, 10);
    if (end == v || *end || errno || x < lo || x > hi)
        return -1;
    *out = (int)x;
    return 1;
}

static int find_name(char (*names)[FP8_NAME_MAX], int n, const char *s)
{
    for (int i = 0; i < n; i++)
        if (strcmp(names[i], s) == 0)
            return i;
    return -1;
}

static int find_spec(char (*specs)[FP8_SPEC_MAX], int n, const char *s)
{
    for (int i = 0; i < n; i++)
        if (strcmp(specs[i], s) == 0)
            return i;
    return -1;
}

/* The instance of group g rank r belongs to under the declared topology
 * (tp ranks consecutive, Megatron's order), or from the rank's recorded
 * membership (lowest member), -1 when neither tells. */
static int instance_of(const an_ranks *R, const char *g, int r, const char *recorded)
{
    if (strcmp(g, "world") == 0)
        return 0;
    if (R->tp > 0 && (strcmp(g, "tp") == 0 || strcmp(g, "dp") == 0))
        return fp8_ranks_layout_first(R->nranks, R->tp, g, r);
    if (!recorded)
        return -1;
    char *end;
    long lo = strtol(recorded, &end, 10);
    for (const char *p = recorded; *p; p++)
        if (*p == ',') {
            long v = strtol(p + 1, &end, 10);
            if (v < lo)
                lo = v;
        }
    return lo >= 0 && lo < R->nranks ? (int)lo : -1;
}

/* rank r's amax of tensor t at step s0 + j (NaN: no row) */
#define AMAX(R, r, t, j) (R)->amax[((size_t)(r) * (size_t)(R)->ntensors + (size_t)(t)) * (R)->nsteps + (j)]
/* in an_ranks_load: rank r's scale of reducing recipe q, tensor t, step s0 + j */
#define SCALE(L, r, q, t, j)                                                                                \
    (L)->scl[(((size_t)(r) * (size_t)(L)->nred + (size_t)(q)) * (size_t)(L)->R->ntensors + (size_t)(t)) *          \
                 (L)->R->nsteps +                                                                              \
             (j)]

static int same_scale(float a, float b) { return a == b || (isnan(a) && isnan(b)); }

void an_ranks_free(an_ranks *r)
{
    if (!r)
        return;
    free(r->tname);
    free(r->rspec);
    free(r->amax);
    free(r->skew);
    free(r->scales);
    memset(r, 0, sizeof *r);
}

static void skew_of(an_ranks *R, int t, double *tmp)
{
    an_rank_skew *s = &R->skew[t];
    s->t = t;
    s->skew_max_step = -1;
    s->top_rank = -1;
    int *top = calloc((size_t)R->nranks, sizeof *top);
    size_t n = 0;
    for (size_t j = 0; j < R->nsteps; j++) {
        float hi = 0, lo = INFINITY;
        int cnt = 0, arg = -1;
        for (int r = 0; r < R->nranks; r++) {
            float a = AMAX(R, r, t, j);
            if (!(a > 0) || isinf(a))
                continue;
            cnt++;
            if (a > hi)
                hi = a, arg = r;
            if (a < lo)
                lo = a;
        }
        if (cnt < 2)
            continue;
        tmp[n] = (double)hi / (double)lo;
        if (tmp[n] > s->skew_max || s->skew_max_step < 0)
            s->skew_max = tmp[n], s->skew_max_step = R->s0 + (int64_t)j;
        if (top)
            top[arg]++;
        n++;
    }
    s->steps = n;
    if (n) {
        gsl_sort(tmp, 1, n);
        s->skew_median = gsl_stats_median_from_sorted_data(tmp, 1, n);
        s->skew_p95 = gsl_stats_quantile_from_sorted_data(tmp, 1, n, 0.95);
    } else
        s->skew_median = s->skew_p95 = s->skew_max = NAN;
    for (int r = 0; top && r < R->nranks; r++)
        if (s->top_rank < 0 || top[r] > top[s->top_rank])
            s->top_rank = r;
    s->top_share = n && top && s->top_rank >= 0 ? (double)top[s->top_rank] / (double)n : NAN;
    free(top);
}

/* What loading keeps beside the result: the reducing recipes' scales and
 * each rank's recorded communicator members, per reducing recipe. */
typedef struct {
    an_ranks *R;
    const char *path;
    int n;
    float *scl;       /* [rank][nred][tensor][step] */
    int *red_k, nred; /* rank 0's reducing recipes */
    char **recorded;  /* [rank][nred + 1]: mpi_group.<g>, whole */
    size_t nrecorded;
} loader;

static void loader_free(loader *L)
{
    free(L->scl), free(L->red_k);
    for (size_t i = 0; L->recorded && i < L->nrecorded; i++)
        free(L->recorded[i]);
    free(L->recorded);
}

/* rank 0 sets the shape: tensors, recipes, steps, topology */
static int load_first(loader *L, const fp8_run *run, const char *rp)
{
    an_ranks *R = L->R;
    int n = L->n, tp = 0, dp = 0;
    if (meta_int(run, "parallel_tp", 1, n, &tp) < 0 || meta_int(run, "parallel_dp", 1, n, &dp) < 0 ||
        (tp && n % tp) || (tp && dp && tp * dp != n))
        return FP8_ERROR(FP8_EINVAL, "%s: parallel_tp / parallel_dp in /meta do not factor the %d ranks", rp, n);
    R->tp = tp, R->dp = tp ? n / tp : 0;
    R->simulated = fp8_run_meta(run, "mpi_simulated") != NULL;
    R->ntensors = run->ntensors, R->nrecipes = run->nrecipes;
    R->tname = calloc((size_t)run->ntensors + 1, sizeof *R->tname);
    R->rspec = calloc((size_t)run->nrecipes + 1, sizeof *R->rspec);
    L->red_k = calloc((size_t)run->nrecipes + 1, sizeof *L->red_k);
    int64_t lo = INT64_MAX, hi = INT64_MIN;
    for (size_t i = 0; i < run->nsteps; i++) {
        lo = run->steps[i].step < lo ? run->steps[i].step : lo;
        hi = run->steps[i].step > hi ? run->steps[i].step : hi;
    }
    R->s0 = run->nsteps ? lo : 0;
    R->nsteps = run->nsteps ? (size_t)(hi - lo + 1) : 0;
    if (!R->tname || !R->rspec || !L->red_k)
        return FP8_ERROR(FP8_ENOMEM, "%s: out of memory", L->path);
    memcpy(R->tname, run->tensor_name, (size_t)run->ntensors * sizeof *R->tname);
    memcpy(R->rspec, run->recipe_spec, (size_t)run->nrecipes * sizeof *R->rspec);
    for (int k = 0; k < run->nrecipes; k++) {
        fp8_recipe rec;
        if (fp8_recipe_parse(run->recipe_spec[k], &rec) == FP8_OK && rec.reduce[0])
            L->red_k[L->nred++] = k;
    }
    size_t per = (size_t)n * (size_t)(R->ntensors ? R->ntensors : 1), nred = (size_t)L->nred;
    if (R->nsteps && (per > MAX_CELLS / R->nsteps || (nred && per * nred > MAX_CELLS / R->nsteps)))
        return FP8_ERROR(FP8_EINVAL, "%s: %d ranks x %d tensors x %zu steps is more than this analysis holds", L->path,
                         n, R->ntensors, R->nsteps);
    R->amax = malloc((per * R->nsteps + 1) * sizeof *R->amax);
    L->scl = malloc((per * nred * R->nsteps + 1) * sizeof *L->scl);
    L->nrecorded = (size_t)n * (nred + 1);
    L->recorded = calloc(L->nrecorded, sizeof *L->recorded);
    if (!R->amax || !L->scl || !L->recorded)
        return FP8_ERROR(FP8_ENOMEM, "%s: out of memory for %d ranks x %d tensors x %zu steps", L->path, n,
                         R->ntensors, R->nsteps);
    for (size_t i = 0; i < per * R->nsteps; i++)
        R->amax[i] = NAN;
    for (size_t i = 0; i < per * nred * R->nsteps; i++)
        L->scl[i] = NAN;
    return FP8_OK;
}

/* rank r's every-step rows, its tensors and recipes matched to rank 0's by
 * name and spec, and its recorded communicators */
static int load_rank(loader *L, const fp8_run *run, int r, const char *rp)
{
    an_ranks *R = L->R;
    int nred = L->nred, st = FP8_OK;
    int *tmap = malloc(((size_t)run->ntensors + 1) * sizeof *tmap);
    int *kmap = malloc(((size_t)run->nrecipes + 1) * sizeof *kmap);
    if (!tmap || !kmap) {
        free(tmap), free(kmap);
        return FP8_ERROR(FP8_ENOMEM, "%s: out of memory", rp);
    }
    for (int t = 0; t < run->ntensors; t++)
        tmap[t] = find_name(R->tname, R->ntensors, run->tensor_name[t]);
    for (int k = 0; k < run->nrecipes; k++) {
        int k0 = find_spec(R->rspec, R->nrecipes, run->recipe_spec[k]);
        kmap[k] = -1;
        for (int q = 0; k0 >= 0 && q < nred; q++)
            if (L->red_k[q] == k0)
                kmap[k] = q;
        if (k0 < 0)
            kmap[k] = -2;
    }
    for (int q = 0; q < nred && st == FP8_OK; q++) {
        fp8_recipe rec;
        fp8_recipe_parse(R->rspec[L->red_k[q]], &rec);
        char key[64];
        snprintf(key, sizeof key, "mpi_group.%s", rec.reduce);
        const char *v = fp8_run_meta(run, key);
        char **slot = &L->recorded[(size_t)r * (size_t)(nred + 1) + (size_t)q];
        if (!(*slot = strdup(v ? v : "")))
            st = FP8_ERROR(FP8_ENOMEM, "%s: out of memory", rp);
    }
    for (size_t i = 0; i < run->nsteps && st == FP8_OK; i++) {
        const fp8_step_row *s = &run->steps[i];
        int t = tmap[s->tensor], q = kmap[s->recipe];
        if (t < 0 || q == -2 || s->step < R->s0 || (uint64_t)(s->step - R->s0) >= R->nsteps) {
            R->skipped_rows++;
            continue;
        }
        size_t j = (size_t)(s->step - R->s0);
        AMAX(R, r, t, j) = s->amax;
        if (q >= 0)
            SCALE(L, r, q, t, j) = s->scale;
    }
    free(tmap), free(kmap);
    return st;
}

/* every rank's file, rank 0 first */
static int load_ranks(loader *L)
{
    for (int r = 0; r < L->n; r++) {
        char rp[1100];
        if (fp8_rank_path(L->path, r, rp, sizeof rp) != 0)
            return FP8_ERROR(FP8_EINVAL, "%s: path too long", L->path);
        fp8_run *run = fp8_run_load_rank(L->path, r, L->n); /* its rank, size and run id checked */
        if (!run) {
            char why[600];
            snprintf(why, sizeof why, "%s", fp8_error_message());
            return FP8_ERROR(FP8_EINVAL, "rank %d of %s: %s", r, L->path, why);
        }
        int st = r == 0 ? load_first(L, run, rp) : FP8_OK;
        if (st == FP8_OK)
            st = load_rank(L, run, r, rp);
        fp8_run_free(run);
        if (st != FP8_OK)
            return st;
    }
    return FP8_OK;
}

/* membership against the declared topology, once per group name */
static int check_members(loader *L)
{
    an_ranks *R = L->R;
    int n = L->n;
    size_t wantcap = (size_t)n * 7 + 16;
    char *want = malloc(wantcap); /* a layout's member list */
    if (!want)
        return FP8_ERROR(FP8_ENOMEM, "%s: out of memory", L->path);
    char checked[8][24];
    int nchecked = 0;
    for (int q = 0; q < L->nred && R->tp; q++) {
        fp8_recipe rec;
        fp8_recipe_parse(R->rspec[L->red_k[q]], &rec);
        int seen = 0;
        for (int m = 0; m < nchecked; m++)
            seen |= strcmp(checked[m], rec.reduce) == 0;
        if (seen || (strcmp(rec.reduce, "tp") && strcmp(rec.reduce, "dp")))
            continue;
        if (nchecked < 8)
            snprintf(checked[nchecked++], sizeof checked[0], "%s", rec.reduce);
        for (int r = 0; r < n; r++) {
            const char *got = L->recorded[(size_t)r * (size_t)(L->nred + 1) + (size_t)q];
            if (!*got || fp8_ranks_layout_members(n, R->tp, rec.reduce, r, want, wantcap) < 0 ||
                strcmp(got, want) == 0)
                continue;
            if (R->nmember_bad < 8)
                snprintf(R->member_msg[R->nmember_bad], sizeof R->member_msg[0],
                         "rank %d: the communicator registered as '%s' holds ranks %.90s; tp=%d, dp=%d expects %.90s", r,
                         rec.reduce, got, R->tp, R->dp, want);
            R->nmember_bad++;
        }
    }
    free(want);
    return FP8_OK;
}

/* step j of tensor t under reducing recipe q: whether two ranks of one
 * instance differ (the first such noted in o), and each rank's cost added
 * to *csum / *cn (gm, ref, refs: scratch per instance) */
static int scale_step(loader *L, int q, int t, size_t j, const int *inst, int ninst, an_rank_scales *o, float *gm,
                      int *ref, float *refs, double *csum, size_t *cn)
{
    an_ranks *R = L->R;
    int differ = 0;
    /* per instance: the group amax and the first rank's scale (O(ranks)) */
    for (int g = 0; g < ninst; g++)
        gm[g] = 0, ref[g] = -1;
    for (int r = 0; r < L->n; r++) {
        float sr = SCALE(L, r, q, t, j);
        float ar = AMAX(R, r, t, j);
        int g = inst[r];
        gm[g] = ar > gm[g] ? ar : gm[g];
        if (ref[g] < 0) {
            ref[g] = r, refs[g] = sr;
        } else if (!same_scale(refs[g], sr) && !differ) {
            differ = 1;
            if (o->first_step < 0)
                o->first_step = R->s0 + (int64_t)j, o->rank_a = ref[g], o->rank_b = r, o->scale_a = refs[g],
                o->scale_b = sr;
        }
    }
    for (int r = 0; r < L->n; r++) {
        float ar = AMAX(R, r, t, j), gmax = gm[inst[r]];
        if (ar > 0 && isfinite(ar) && isfinite(gmax)) {
            double c = log2((double)gmax / (double)ar);
            *csum += c, ++*cn;
            o->cost_max = c > o->cost_max ? c : o->cost_max;
        }
    }
    return differ;
}

/* scales inside each instance of reducing recipe q's group, per tensor */
static int check_scales(loader *L, int q, int *inst)
{
    an_ranks *R = L->R;
    int n = L->n;
    fp8_recipe rec;
    fp8_recipe_parse(R->rspec[L->red_k[q]], &rec);
    int ninst = 0, known = 1;
    for (int r = 0; r < n; r++) {
        inst[r] = instance_of(R, rec.reduce, r, L->recorded[(size_t)r * (size_t)(L->nred + 1) + (size_t)q]);
        known &= inst[r] >= 0;
        ninst = inst[r] + 1 > ninst ? inst[r] + 1 : ninst;
    }
    float *gm = malloc(((size_t)ninst + 1) * sizeof *gm), *refs = malloc(((size_t)ninst + 1) * sizeof *refs);
    int *ref = malloc(((size_t)ninst + 1) * sizeof *ref);
    if (!gm || !refs || !ref) {
        free(gm), free(refs), free(ref);
        return FP8_ERROR(FP8_ENOMEM, "%s: out of memory", L->path);
    }
    for (int t = 0; t < R->ntensors; t++) {
        an_rank_scales *o = &R->scales[R->nscales];
        memset(o, 0, sizeof *o);
        o->t = t, o->k = L->red_k[q], o->first_step = -1, o->rank_a = o->rank_b = -1;
        snprintf(o->group, sizeof o->group, "%s", rec.reduce);
        o->ninst = known ? ninst : 0;
        double csum = 0;
        size_t cn = 0;
        int any = 0;
        for (size_t j = 0; known && j < R->nsteps; j++) {
            int all = 1;
            for (int r = 0; r < n && all; r++)
                all = !isnan(AMAX(R, r, t, j));
            if (!all)
                continue;
            any = 1;
            o->steps++;
            o->differ += (size_t)scale_step(L, q, t, j, inst, ninst, o, gm, ref, refs, &csum, &cn);
        }
        o->cost_mean = cn ? csum / (double)cn : NAN;
        if (!cn)
            o->cost_max = NAN;
        if (any || !known)
            R->nscales++;
    }
    free(gm), free(refs), free(ref);
    return FP8_OK;
}

/* the rank skew, the membership and the scale checks of the loaded run */
static int analyse(loader *L)
{
    an_ranks *R = L->R;
    R->skew = calloc((size_t)R->ntensors + 1, sizeof *R->skew);
    double *tmp = malloc((R->nsteps + 1) * sizeof *tmp);
    R->scales = calloc((size_t)R->ntensors * (size_t)L->nred + 1, sizeof *R->scales);
    int *inst = malloc((size_t)L->n * sizeof *inst);
    int st = FP8_OK;
    if (!R->skew || !tmp || !R->scales || !inst)
        st = FP8_ERROR(FP8_ENOMEM, "%s: out of memory", L->path);
    for (int t = 0; st == FP8_OK && t < R->ntensors; t++)
        skew_of(R, t, tmp);
    if (st == FP8_OK)
        st = check_members(L);
    for (int q = 0; q < L->nred && st == FP8_OK; q++)
        st = check_scales(L, q, inst);
    free(tmp), free(inst);
    return st;
}

int an_ranks_load(const char *path, an_ranks *R)
{
    memset(R, 0, sizeof *R);
    int n = fp8_ranks_of(path);
    if (n < 0)
        return 1;
    if (n == 0) {
        FILE *f = fopen(path, "rb");
        if (!f)
            FP8_ERROR(FP8_EIO, "%s: cannot open: %s", path, strerror(errno));
        else
            FP8_ERROR(FP8_EINVAL, "%s: not a multi-rank run (no rank index: fp8_probe_open_mpi or synth --ranks write one)",
                      path);
        if (f)
            fclose(f);
        return 1;
    }
    snprintf(R->index_path, sizeof R->index_path, "%s", path);
    R->nranks = n;
    loader L = {.R = R, .path = path, .n = n};
    int rc = load_ranks(&L) != FP8_OK || analyse(&L) != FP8_OK;
    loader_free(&L);
    if (rc)
        an_ranks_free(R);
    return rc;
}

void an_ranks_print(const an_ranks *R, FILE *f)
{
    fprintf(f, "multi-rank run %s: %d ranks", R->index_path, R->nranks);
    if (R->tp)
        fprintf(f, " (declared topology: tp=%d x dp=%d, tp ranks consecutive)", R->tp, R->dp);
    fprintf(f, "%s, %d tensors, steps %lld..%lld\n", R->simulated ? ", simulated in one process (no reduction)" : "",
            R->ntensors, (long long)R->s0, (long long)(R->s0 + (int64_t)R->nsteps - 1));
    if (R->skipped_rows)
        fprintf(f, "note: %zu every-step rows skipped (a tensor or recipe rank 0 lacks, or a step outside rank 0's)\n",
                R->skipped_rows);
    fprintf(f, "\nrank skew: max/min amax over ranks at each step (steps with >= 2 ranks' positive finite amax)\n");
    fprintf(f, "%-40s %7s %10s %10s %10s %8s %12s\n", "tensor", "steps", "median", "p95", "max", "at step",
            "largest on");
    for (int t = 0; t < R->ntensors; t++) {
        const an_rank_skew *s = &R->skew[t];
        if (!s->steps)
            continue;
        fprintf(f, "%-40s %7zu %10.3g %10.3g %10.3g %8lld  rank %d %3.0f%%\n", R->tname[t], s->steps, s->skew_median,
                s->skew_p95, s->skew_max, (long long)s->skew_max_step, s->top_rank, 100 * s->top_share);
    }
    if (R->nmember_bad) {
        fprintf(f, "\ncommunicators that are not the declared topology's (%d rank%s):\n", R->nmember_bad,
                R->nmember_bad == 1 ? "" : "s");
        for (int m = 0; m < R->nmember_bad && m < 8; m++)
            fprintf(f, "  %s\n", R->member_msg[m]);
    }
    if (R->nscales) {
        fprintf(f, "\nscales of recipes that reduce their amax (equal within each instance of the group, or a bug):\n");
        fprintf(f, "%-40s %6s %-8s %7s %8s %8s %10s %10s  %s\n", "tensor", "recipe", "group", "steps", "differ", "first",
                "cost mean", "cost max", "example");
        for (size_t i = 0; i < R->nscales; i++) {
            const an_rank_scales *s = &R->scales[i];
            char ex[160] = "";
            if (s->differ)
                snprintf(ex, sizeof ex, "rank %d scale %.6g, rank %d scale %.6g", s->rank_a, (double)s->scale_a,
                         s->rank_b, (double)s->scale_b);
            else if (!s->ninst)
                snprintf(ex, sizeof ex, "group membership unknown (no topology, no mpi_group.%s)", s->group);
            fprintf(f, "%-40s %6d %-8s %7zu %8zu %8lld %10.3f %10.3f  %s\n", R->tname[s->t], s->k, s->group, s->steps,
                    s->differ, (long long)s->first_step, s->cost_mean, s->cost_max, ex);
        }
        fprintf(f, "(cost: binades log2(group amax / rank amax) the reduction moves each rank's scale; recipes by id:\n");
        for (int k = 0; k < R->nrecipes; k++)
            fprintf(f, "  [%d] %s\n", k, R->rspec[k]);
        fprintf(f, ")\n");
    }
    fprintf(f, "\nverdict: %s\n",
            an_ranks_bad(R) ? "SCALES DIFFER inside a reduction group, or a communicator is not the declared one: the "
                              "amax is reduced over the wrong group (see above)"
                            : R->nscales ? "every reducing recipe's scale is equal within each instance of its group"
                                         : "no recipe reduces its amax across ranks (reduce=NAME); skew only");
}

void an_ranks_json(const an_ranks *R, FILE *f)
{
    /* names come from untrusted files: escaped; a number that is not finite is null */
    fputs("{\n  \"index\": ", f), an_json_str(f, R->index_path);
    fprintf(f, ", \"ranks\": %d, \"tp\": %d, \"dp\": %d, \"simulated\": %s,\n", R->nranks, R->tp, R->dp,
            R->simulated ? "true" : "false");
    fprintf(f, "  \"steps\": [%lld, %lld], \"skipped_rows\": %zu, \"bad\": %s,\n  \"skew\": [", (long long)R->s0,
            (long long)(R->s0 + (int64_t)R->nsteps - 1), R->skipped_rows, an_ranks_bad(R) ? "true" : "false");
    int first = 1;
    for (int t = 0; t < R->ntensors; t++) {
        const an_rank_skew *s = &R->skew[t];
        if (!s->steps)
            continue;
        fprintf(f, "%s\n    {\"tensor\": ", first ? "" : ","), an_json_str(f, R->tname[t]);
        fprintf(f, ", \"steps\": %zu, \"median\": ", s->steps), an_json_num(f, s->skew_median);
        fputs(", \"p95\": ", f), an_json_num(f, s->skew_p95);
        fputs(", \"max\": ", f), an_json_num(f, s->skew_max);
        fprintf(f, ", \"max_step\": %lld, \"top_rank\": %d, \"top_share\": ", (long long)s->skew_max_step, s->top_rank);
        an_json_num(f, s->top_share), fputc('}', f);
        first = 0;
    }
    fprintf(f, "\n  ],\n  \"membership_errors\": %d,\n  \"scales\": [", R->nmember_bad);
    for (size_t i = 0; i < R->nscales; i++) {
        const an_rank_scales *s = &R->scales[i];
        fprintf(f, "%s\n    {\"tensor\": ", i ? "," : ""), an_json_str(f, R->tname[s->t]);
        fputs(", \"recipe\": ", f), an_json_str(f, R->rspec[s->k]);
        fputs(", \"group\": ", f), an_json_str(f, s->group);
        fprintf(f, ", \"instances\": %d, \"steps\": %zu, \"differ\": %zu, \"first_step\": %lld, \"cost_mean\": ",
                s->ninst, s->steps, s->differ, (long long)s->first_step);
        an_json_num(f, s->cost_mean), fputs(", \"cost_max\": ", f), an_json_num(f, s->cost_max), fputc('}', f);
    }
    fprintf(f, "\n  ]\n}\n");
}

/* the tensor with the largest median skew, -1 none */
int an_ranks_most_skewed(const an_ranks *R)
{
    int best = -1;
    for (int t = 0; t < R->ntensors; t++)
        if (R->skew[t].steps && (best < 0 || R->skew[t].skew_median > R->skew[best].skew_median))
            best = t;
    return best;
}

/* tensor indices by median skew, largest first (ties: name order) */
static const an_ranks *sort_R;
static int by_skew(const void *a, const void *b)
{
    const an_rank_skew *x = &sort_R->skew[*(const int *)a], *y = &sort_R->skew[*(const int *)b];
    double u = x->steps ? x->skew_median : -1, v = y->steps ? y->skew_median : -1;
    return u < v ? 1 : u > v ? -1 : (*(const int *)a > *(const int *)b) - (*(const int *)a < *(const int *)b);
}

void an_ranks_tsv(const an_ranks *R, FILE *skew, FILE *scales)
{
    if (skew) {
        fprintf(skew, "tensor\tsteps\tskew_median\tskew_p95\tskew_max\tskew_max_step\ttop_rank\ttop_share\n");
        for (int t = 0; t < R->ntensors; t++) {
            const an_rank_skew *s = &R->skew[t];
            if (s->steps)
                fprintf(skew, "%s\t%zu\t%.9g\t%.9g\t%.9g\t%lld\t%d\t%.6f\n", R->tname[t], s->steps, s->skew_median,
                        s->skew_p95, s->skew_max, (long long)s->skew_max_step, s->top_rank, s->top_share);
        }
    }
    if (scales) {
        fprintf(scales, "tensor\trecipe\tgroup\tinstances\tsteps\tdiffer\tfirst_step\trank_a\tscale_a\trank_b\tscale_b\t"
                        "cost_mean_binades\tcost_max_binades\n");
        for (size_t i = 0; i < R->nscales; i++) {
            const an_rank_scales *s = &R->scales[i];
            fprintf(scales, "%s\t%s\t%s\t%d\t%zu\t%zu\t%lld\t%d\t%.9g\t%d\t%.9g\t%.6g\t%.6g\n", R->tname[s->t],
                    R->rspec[s->k], s->group, s->ninst, s->steps, s->differ, (long long)s->first_step, s->rank_a,
                    (double)s->scale_a, s->rank_b, (double)s->scale_b, s->cost_mean, s->cost_max);
        }
    }
}

/* the span of a statistic over the tensors whose name ends in suffix */
static int span_of(const an_ranks *R, const char *suffix, int which, double *lo, double *hi)
{
    int n = 0;
    size_t ls = strlen(suffix);
    for (int t = 0; t < R->ntensors; t++) {
        size_t lt = strlen(R->tname[t]);
        const an_rank_skew *s = &R->skew[t];
        if (!s->steps || lt < ls || strcmp(R->tname[t] + lt - ls, suffix) != 0)
            continue;
        double v = which ? s->skew_max : s->skew_median;
        if (!n || v < *lo)
            *lo = v;
        if (!n || v > *hi)
            *hi = v;
        n++;
    }
    return n;
}

void an_ranks_summary(const an_ranks *R, char *out, size_t cap)
{
    size_t k = 0;
    k += (size_t)snprintf(out + k, cap - k, "%d ranks", R->nranks);
    static const char *roles[][2] = {{".input", "activations"}, {".weight", "weights"}, {".grad_output", "gradients"}};
    for (int i = 0; i < 3 && k < cap; i++) {
        double lo = 0, hi = 0, mlo = 0, mhi = 0;
        if (span_of(R, roles[i][0], 0, &lo, &hi) && span_of(R, roles[i][0], 1, &mlo, &mhi))
            k += (size_t)snprintf(out + k, cap - k, "; rank skew of %s %.3g..%.3g at the median step (max %.3g)",
                                  roles[i][1], lo, hi, mhi);
    }
    size_t differ = 0, checked = 0;
    for (size_t i = 0; i < R->nscales; i++)
        differ += R->scales[i].differ > 0, checked++;
    if (k < cap && checked)
        k += (size_t)snprintf(out + k, cap - k, "; %s", differ || R->nmember_bad ?
                              "SCALES DIFFER inside a reduction group (wrong group)" :
                              "every reducing recipe's scale equal within its group at every step");
}

void an_ranks_markdown(const an_ranks *R, const char *label, FILE *md)
{
    fprintf(md, "## Across ranks: %s\n\n%d ranks", label, R->nranks);
    if (R->tp)
        fprintf(md, ", declared tp=%d x dp=%d", R->tp, R->dp);
    fprintf(md, "%s. The other sections read rank 0's file; this one reads every rank's every-step series "
                "(definitions: docs/analyses.md, \"ranks\"; every tensor in `ranks_skew_%s.tsv` and "
                "`ranks_scales_%s.tsv`).\n\n",
            R->simulated ? " (simulated in one process: no amax reduction)" : "", label, label);
    char sum[600];
    an_ranks_summary(R, sum, sizeof sum);
    fprintf(md, "%s.\n\n", sum);
    int *ord = malloc(((size_t)R->ntensors + 1) * sizeof *ord);
    int shown = 0;
    if (ord) {
        for (int t = 0; t < R->ntensors; t++)
            ord[t] = t;
        sort_R = R;
        qsort(ord, (size_t)R->ntensors, sizeof *ord, by_skew);
        fprintf(md, "The ten tensors with the largest median rank skew:\n\n| tensor | steps | rank skew median | p95 | "
                    "max (step) | largest amax most often on |\n|---|---|---|---|---|---|\n");
        for (int j = 0; j < R->ntensors && shown < 10; j++) {
            const an_rank_skew *s = &R->skew[ord[j]];
            if (!s->steps)
                continue;
            fprintf(md, "| `%s` | %zu | %.3g | %.3g | %.3g (%lld) | rank %d (%.0f %%) |\n", R->tname[ord[j]], s->steps,
                    s->skew_median, s->skew_p95, s->skew_max, (long long)s->skew_max_step, s->top_rank,
                    100 * s->top_share);
            shown++;
        }
        free(ord);
    }
    for (int m = 0; m < R->nmember_bad && m < 8; m++)
        fprintf(md, "%s- **Communicator**: %s\n", m ? "" : "\n", R->member_msg[m]);
    if (R->nscales) {
        /* every differing row, then the reducing recipes' costliest rows, ten at most in all */
        fprintf(md, "\n| tensor | recipe | group | steps | steps where scales differ | first | reduction cost mean / max "
                    "(binades) |\n|---|---|---|---|---|---|---|\n");
        int rows = 0;
        for (int pass = 0; pass < 2; pass++)
            for (size_t i = 0; i < R->nscales && rows < 10; i++) {
                const an_rank_scales *s = &R->scales[i];
                if ((pass == 0) != (s->differ > 0))
                    continue;
                if (pass == 1) { /* the costliest ones: above the median cost of all rows */
                    int above = 0;
                    for (size_t q = 0; q < R->nscales; q++)
                        above += R->scales[q].cost_mean > s->cost_mean;
                    if ((size_t)above >= 10)
                        continue;
                }
                fprintf(md, "| `%s` | `%s` | %s | %zu | %s%zu%s | %lld | %.3f / %.3f |\n", R->tname[s->t],
                        R->rspec[s->k], s->group, s->steps, s->differ ? "**" : "", s->differ, s->differ ? "**" : "",
                        (long long)s->first_step, s->cost_mean, s->cost_max);
                rows++;
            }
        fprintf(md, "\n(Rows whose scales differ first, then the reduction's costliest; %zu rows in all.)\n", R->nscales);
    }
    fprintf(md, "\n%s\n\n",
            an_ranks_bad(R) ? "**Verdict: the amax is reduced over the wrong group** — scales differ inside a group "
                              "whose recipe reduces over it, or its communicator is not the declared topology's."
                            : R->nscales ? "Every reducing recipe's scale is equal within each instance of its group."
                                         : "No recipe reduces its amax across ranks: the table is the skew a reduction "
                                           "would face.");
}

int an_ranks_heatmap(const an_ranks *R, const char *pattern, const char *dir, const char *name)
{
    int t = -1;
    for (int i = 0; i < R->ntensors && t < 0; i++)
        if (!pattern || fnmatch(pattern, R->tname[i], 0) == 0)
            t = i;
    if (t < 0)
        return FP8_ERROR(FP8_EINVAL, "no tensor matches '%s'", pattern), 1;
    mkdir(dir, 0777);
    char p[1200];
    snprintf(p, sizeof p, "%s/%s.tsv", dir, name);
    FILE *f = fopen(p, "w");
    if (!f)
        return FP8_ERROR(FP8_EIO, "%s: cannot write", p), 1;
    for (size_t j = 0; j < R->nsteps; j++) {
        for (int r = 0; r < R->nranks; r++) {
            float a = AMAX(R, r, t, j);
            if (a > 0 && isfinite(a))
                fprintf(f, "%lld\t%d\t%.6g\n", (long long)(R->s0 + (int64_t)j), r, log2((double)a));
            else
                fprintf(f, "%lld\t%d\tNaN\n", (long long)(R->s0 + (int64_t)j), r);
        }
        fputc('\n', f);
    }
    if (fclose(f) != 0)
        return FP8_ERROR(FP8_EIO, "%s: cannot write", p), 1;
    char vars[1000], q[300], q2[300], q3[300], msg[300], ttl[300], data[300];
    snprintf(ttl, sizeof ttl, "%s: log2(amax) per rank", R->tname[t]);
    snprintf(data, sizeof data, "%s.tsv", name);
    snprintf(vars, sizeof vars, "data=%s\nttl=%s\nout=%s\n", plot_quote(data, q2, sizeof q2), plot_quote(ttl, q, sizeof q),
             plot_quote(name, q3, sizeof q3));
    if (plot_render(dir, "ranks", name, vars, msg, sizeof msg) != 0)
        return FP8_ERROR(FP8_EIO, "rank heat map: %s", msg), 1;
    return 0;
}
