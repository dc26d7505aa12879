/*
 * swiglu.c — what Smooth SwiGLU changes, measured on identical tensors.
 *
 * Paired (the answer): in a run without smoothing, the down projection's
 * input carries the recipe option `smooth` (s^-1 Q(s h), the published
 * form) and its weight `smooth=fold` (Q(W2 / s) s, the scale folded into
 * the weight), beside the plain recipe: at every statistics step after
 * warm-up d = SQNR(smoothed) - SQNR(plain) of the same tensor, its mean
 * with a calibrated 95% interval, the median step, overflow events of both.
 * Where the trainer measured the GEMM output (scalars smooth_sqnr_db/
 * <linear>/published and /fold beside gemm_sqnr_db/<linear>/fprop): the
 * same per step for the down projection's output, both variants.
 *
 * Across runs (kept, beside its placebo): runs trained with smoothing
 * against the same recipe trained without, per tensor the change of the
 * median SQNR of the active recipe — and the same change between two runs
 * that differ only in the initialisation seed, which is how much runs
 * drift when nothing but chance differs.
 *
 * The paper's early warning: per layer the alignment of the gate and up
 * projections (trainer scalars swiglu/<layers.l.mlp>/align_*) and the
 * largest channel amax over the median channel's, over the run.
 *
 * Data files: swiglu_paired.tsv, swiglu_drift.tsv, swiglu_alignment.tsv.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "analysis.h"
#include "series.h"
#include "contrasts.h"
#include "factors.h"
#include "inference.h"
#include "keys.h"

#define SECTION "Smooth SwiGLU on identical tensors"

static int smooth_kind(const an_run *a, int r)
{
    return r >= 0 && r < a->run->nrecipes && a->recipe_ok[r] ? a->recipes[r].smooth : 0;
}

/* the recipe recorded on tensor t that is smoothed recipe s without the
 * smoothing (same spec but the option), -1 none */
static int plain_of(const an_run *a, int t, int s)
{
    fp8_recipe want = a->recipes[s];
    want.smooth = 0;
    fp8_role role = (fp8_role)a->run->tensor_role[t];
    an_factors fw, fr;
    an_factors_of(&want, role, &fw);
    size_t nr;
    const int *rs = an_tensor_recipes(a, t, &nr);
    for (size_t i = 0; i < nr; i++) {
        int r = rs[i];
        if (!a->recipe_ok[r] || a->recipes[r].smooth)
            continue;
        an_factors_of(&a->recipes[r], role, &fr);
        if (an_factors_equal(&fw, &fr))
            return r;
    }
    return -1;
}

/* scalar series `name` of a run by step into v (steps ascending as
 * written), n points; the value of a repeated step is the last */
static size_t scalar(const an_run *a, const char *name, int64_t *st, double *v)
{
    const fp8_run *r = a->run;
    int id = -1;
    for (int i = 0; i < r->nscalar_names && id < 0; i++)
        if (!strcmp(r->scalar_name[i], name))
            id = i;
    size_t n = 0;
    for (size_t i = 0; id >= 0 && i < r->nscalars; i++)
        if ((int)r->scalar_id[i] == id) {
            if (n && st[n - 1] == r->scalar_step[i])
                n--;
            st[n] = r->scalar_step[i], v[n++] = r->scalar_value[i];
        }
    return n;
}

static int grouped(const fp8_recipe *r)
{
    return r->kind != FP8_RECIPE_DELAYED && r->kind != FP8_RECIPE_CURRENT && r->kind != FP8_RECIPE_NONE;
}

static void json_entry(an_ctx *c, const char *run, const char *tensor, const char *variant, int paired_,
                       const char *plain, int grouped_, const an_interval *d, const an_robust *rb, long ev_plain,
                       long ev_smooth)
{
    FILE *j = an_json(c, AN_J_SMOOTH);
    if (!j)
        return;
    fputs("{\"run\": ", j), an_json_str(j, run);
    fputs(", \"tensor\": ", j), an_json_str(j, tensor);
    fputs(", \"variant\": ", j), an_json_str(j, variant);
    fputs(", \"plain_recipe\": ", j), an_json_str(j, plain);
    fprintf(j, ", \"plain_scales\": \"%s\"", grouped_ ? "grouped" : "per-tensor");
    fprintf(j, ", \"paired\": %s, \"steps\": %zu, \"delta_sqnr_db\": ", paired_ ? "true" : "false", d->n);
    an_json_num(j, d->mean);
    fputs(", \"ci95\": [", j), an_json_num(j, d->lo), fputs(", ", j), an_json_num(j, d->hi);
    fputs("], \"median_step_db\": ", j), an_json_num(j, rb ? rb->median : NAN);
    if (ev_plain >= 0)
        fprintf(j, ", \"events_plain\": %ld, \"events_smooth\": %ld", ev_plain, ev_smooth);
    fputs("}", j);
}

/* paired means over runs: operand (input), weight, GEMM output; [0] under
 * per-tensor scales, [1] under grouped ones (blocks, MX, ...) */
typedef struct {
    an_span pub[2], fold[2], gpub[2], gfold[2];
    size_t ev[2][2][2]; /* [grouped][fold][plain, smoothed]: overflow steps of the operands */
    int runs;
} keyacc;


/* One paired comparison, smoothed against plain on identical tensors: an
 * operand (input or weight) of the down projection, or its GEMM output. */
typedef struct {
    int t, plain;            /* the tensor and plain recipe (operands; -1 for GEMM outputs) */
    char lin[FP8_NAME_MAX];  /* the linear (GEMM outputs) */
    const char *variant;     /* "published" or "fold" */
    int gi;                  /* the plain scales grouped (blocks, MX) */
    size_t m, ea, eb;        /* steps; overflow steps plain, smoothed (operands) */
    an_interval iv;
    an_robust rb;
} paired_row;

/* run a's paired operand comparisons into out (cap rows); their count, -1 out of memory */
static int operands_compute(const an_ctx *c, const an_run *a, paired_row *out, int cap)
{
    size_t scap = a->run->nrecords + 1;
    double *d = malloc(scap * sizeof *d);
    int64_t *st = malloc(scap * sizeof *st);
    int rows = 0;
    if (!d || !st) {
        free(d), free(st);
        return -1;
    }
    for (int t = 0; t < a->run->ntensors; t++) {
        size_t nr;
        const int *rs = an_tensor_recipes(a, t, &nr);
        for (size_t i = 0; i < nr && rows < cap; i++) {
            int s = rs[i], kind = smooth_kind(a, s), p = kind ? plain_of(a, t, s) : -1;
            if (p < 0)
                continue;
            paired_row *w = &out[rows++];
            w->t = t, w->plain = p, w->lin[0] = 0;
            w->m = an_paired(a, t, p, s, d, st, &w->ea, &w->eb);
            an_mean_ci(d, w->m, c->boot, c->seed, &w->iv);
            an_robust_of(d, st, w->m, &w->rb);
            w->variant = kind == 2 ? "fold" : "published";
            w->gi = grouped(&a->recipes[p]);
        }
    }
    free(d), free(st);
    return rows;
}

static void operands_render(an_ctx *c, const an_run *a, const paired_row *rows, int n, FILE *f, keyacc *k)
{
    for (int i = 0; i < n; i++) {
        const paired_row *w = &rows[i];
        char lp[96];
        an_recipe_label_on(a, w->t, w->plain, lp, sizeof lp);
        if (!i)
            fprintf(c->md, "#### `%s`: the down projection's operands\n\n| tensor | plain recipe | variant | steps | "
                           "ΔSQNR dB smoothed − plain [95%% CI] | median step | overflow steps plain → smoothed "
                           "|\n|---|---|---|---|---|---|---|\n",
                    a->label);
        fprintf(c->md, "| `%s` | %s | %s | %zu | %+.2f [%+.2f, %+.2f]%s | %+.2f | %zu → %zu |\n",
                a->run->tensor_name[w->t], lp, w->variant, w->m, w->iv.mean, w->iv.lo, w->iv.hi,
                w->iv.approx ? " *approx.*" : "", w->rb.median, w->ea, w->eb);
        fprintf(f, "%s\t%s\toperand\t%s\t%s\t%zu\t%.9g\t%.9g\t%.9g\t%.9g\t%zu\t%zu\n", a->label,
                a->run->tensor_name[w->t], w->variant, a->run->recipe_spec[w->plain], w->m, w->iv.mean, w->iv.lo,
                w->iv.hi, w->rb.median, w->ea, w->eb);
        json_entry(c, a->label, a->run->tensor_name[w->t], w->variant, 1, a->run->recipe_spec[w->plain], w->gi, &w->iv,
                   &w->rb, (long)w->ea, (long)w->eb);
        int fold = !strcmp(w->variant, "fold");
        k->ev[w->gi][fold][0] += w->ea, k->ev[w->gi][fold][1] += w->eb;
        an_span_add(fold ? &k->fold[w->gi] : &k->pub[w->gi], w->iv.mean);
    }
    if (n)
        fprintf(c->md, "\n");
}

/* the run's recipe (its first tensor's active one), -1 none */
static int run_recipe(const an_run *a)
{
    int act = -1;
    for (int t = 0; t < a->run->ntensors && act < 0; t++)
        act = a->active[t];
    return act;
}

/* run a's paired GEMM-output comparisons (trainer scalars) into out; their count */
static int gemms_compute(const an_ctx *c, const an_run *a, paired_row *out, int cap)
{
    const fp8_run *r = a->run;
    size_t scap = r->nscalars + 1;
    int64_t *s0 = malloc(scap * sizeof *s0), *s1 = malloc(scap * sizeof *s1), *st = malloc(scap * sizeof *st);
    double *v0 = malloc(scap * sizeof *v0), *v1 = malloc(scap * sizeof *v1), *d = malloc(scap * sizeof *d);
    int rows = 0, act = run_recipe(a);
    int gi = act >= 0 && a->recipe_ok[act] && grouped(&a->recipes[act]);
    int64_t warm = INT64_MIN; /* the run's warm-up: the latest of its tensors' */
    for (int t = 0; t < r->ntensors; t++)
        if (a->warm_end[t] != INT64_MIN && a->warm_end[t] != INT64_MAX && a->warm_end[t] > warm)
            warm = a->warm_end[t];
    for (int i = 0; s0 && s1 && st && v0 && v1 && d && i < r->nscalar_names && rows < cap; i++) {
        const char *nm = r->scalar_name[i], *pfx = "smooth_sqnr_db/";
        if (strncmp(nm, pfx, strlen(pfx)) != 0)
            continue;
        const char *slash = strrchr(nm, '/');
        paired_row *w = &out[rows++];
        char plain[FP8_NAME_MAX + 32];
        snprintf(w->lin, sizeof w->lin, "%.*s", (int)(slash - nm - strlen(pfx)), nm + strlen(pfx));
        snprintf(plain, sizeof plain, "gemm_sqnr_db/%s/fprop", w->lin);
        size_t n0 = scalar(a, plain, s0, v0), n1 = scalar(a, nm, s1, v1), m = 0;
        for (size_t x = 0, y = 0; x < n0 && y < n1;) {
            if (s0[x] != s1[y]) {
                s0[x] < s1[y] ? x++ : y++;
                continue;
            }
            if (s0[x] >= warm && isfinite(v0[x]) && isfinite(v1[y]))
                st[m] = s0[x], d[m++] = v1[y] - v0[x];
            x++, y++;
        }
        w->t = -1, w->plain = act, w->variant = slash + 1, w->gi = gi, w->m = m, w->ea = w->eb = 0;
        an_mean_ci(d, m, c->boot, c->seed, &w->iv);
        an_robust_of(d, st, m, &w->rb);
    }
    free(s0), free(s1), free(st), free(v0), free(v1), free(d);
    return rows;
}

static void gemms_render(an_ctx *c, const an_run *a, const paired_row *rows, int n, FILE *f, keyacc *k)
{
    for (int i = 0; i < n; i++) {
        const paired_row *w = &rows[i];
        if (!i)
            fprintf(c->md, "#### `%s`: the down projection's GEMM output (y = h W2ᵀ against FP32)\n\n| linear | variant "
                           "| steps | ΔSQNR dB smoothed − plain [95%% CI] | median step |\n|---|---|---|---|---|\n",
                    a->label);
        fprintf(c->md, "| `%s` | %s | %zu | %+.2f [%+.2f, %+.2f]%s | %+.2f |\n", w->lin, w->variant, w->m, w->iv.mean,
                w->iv.lo, w->iv.hi, w->iv.approx ? " *approx.*" : "", w->rb.median);
        fprintf(f, "%s\t%s\tgemm_output\t%s\t%s\t%zu\t%.9g\t%.9g\t%.9g\t%.9g\t\t\n", a->label, w->lin, w->variant,
                "(the run's recipe)", w->m, w->iv.mean, w->iv.lo, w->iv.hi, w->rb.median);
        char tname[FP8_NAME_MAX + 16];
        snprintf(tname, sizeof tname, "%s (GEMM output)", w->lin);
        json_entry(c, a->label, tname, w->variant, 1, w->plain >= 0 ? a->run->recipe_spec[w->plain] : "?", w->gi,
                   &w->iv, &w->rb, -1, -1);
        an_span_add(!strcmp(w->variant, "fold") ? &k->gfold[w->gi] : &k->gpub[w->gi], w->iv.mean);
    }
    if (n)
        fprintf(c->md, "\n");
}

/* run a's paired comparisons, computed then rendered: the number of
 * operand and GEMM rows in *no, *ng; -1 out of memory */
static int paired(an_ctx *c, an_run *a, FILE *f, keyacc *k, int *no, int *ng)
{
    int cap = 0;
    for (int t = 0; t < a->run->ntensors; t++) {
        size_t nr;
        an_tensor_recipes(a, t, &nr);
        cap += (int)nr;
    }
    cap += a->run->nscalar_names;
    paired_row *rows = malloc(((size_t)cap + 1) * sizeof *rows);
    if (!rows)
        return -1;
    *no = operands_compute(c, a, rows, cap);
    *ng = 0;
    if (*no >= 0) {
        operands_render(c, a, rows, *no, f, k);
        *ng = gemms_compute(c, a, rows, cap);
        gemms_render(c, a, rows, *ng, f, k);
    }
    free(rows);
    return *no < 0 ? -1 : 0;
}

/* Across runs: per shared tensor the change of the active recipe's median
 * SQNR from run a to run b (after warm-up), rows into f; the median |change|
 * over the tensors other than the down projections' (which smoothing
 * touches), and the largest change of the down projection's input. */
static void drift(const an_run *a, const an_run *b, const char *what, FILE *f, double *others,
                  double *w2in)
{
    *others = *w2in = NAN;
    double *v = malloc(((size_t)a->run->ntensors + 1) * sizeof *v);
    size_t n = 0;
    for (int t = 0; v && t < a->run->ntensors; t++) {
        int u = -1;
        for (int k = 0; k < b->run->ntensors && u < 0; k++)
            if (!strcmp(b->run->tensor_name[k], a->run->tensor_name[t]))
                u = k;
        int ra = a->active[t], rb = u >= 0 ? b->active[u] : -1;
        if (u < 0 || ra < 0 || rb < 0)
            continue;
        const an_sstats *sa = an_series_cached((an_run *)a, t, an_canon(a, t, ra));
        const an_sstats *sb = an_series_cached((an_run *)b, u, an_canon(b, u, rb));
        if (!sa || !sb || !isfinite(sa->sqnr_p50) || !isfinite(sb->sqnr_p50))
            continue;
        double dd = sb->sqnr_p50 - sa->sqnr_p50;
        fprintf(f, "%s\t%s\t%s\t%s\t%.9g\t%.9g\t%.9g\n", what, a->label, b->label, a->run->tensor_name[t],
                sa->sqnr_p50, sb->sqnr_p50, dd);
        if (strstr(a->run->tensor_name[t], "mlp.w2.input"))
            *w2in = isfinite(*w2in) ? fmax(*w2in, dd) : dd;
        else if (!strstr(a->run->tensor_name[t], "mlp.w2."))
            v[n++] = fabs(dd);
    }
    if (n)
        *others = an_quantile(v, n, 0.5);
    free(v);
}

/* two runs differing in the initialisation seed alone (the placebo) */
static int replicate_pair(const an_ctx *c, int *x, int *y)
{
    static const char *keys[] = {"recipe", "applied", "smooth_swiglu", "data_seed", "steps", "model", "parallel_dp"};
    for (int i = 0; i < c->nruns; i++)
        for (int j = i + 1; j < c->nruns; j++) {
            const an_run *a = &c->runs[i], *b = &c->runs[j];
            const char *sa = an_meta(a, "seed"), *sb = an_meta(b, "seed"), *ra = an_meta(a, "recipe");
            if (!sa || !sb || !ra || !strcmp(sa, sb) || !strcmp(ra, "bf16") || !strcmp(ra, "fp32"))
                continue;
            int same = 1;
            for (size_t k = 0; k < sizeof keys / sizeof keys[0] && same; k++) {
                const char *p = an_meta(a, keys[k]), *q = an_meta(b, keys[k]);
                same = (p == NULL) == (q == NULL) && (!p || !strcmp(p, q));
            }
            if (same) {
                *x = i, *y = j;
                return 1;
            }
        }
    return 0;
}

/* the alignment scalars of run a: first and last recorded value per layer */
static void alignment(an_ctx *c, an_run *a, FILE *f)
{
    const fp8_run *r = a->run;
    int rows = 0;
    size_t cap = r->nscalars + 1;
    int64_t *st = malloc(cap * sizeof *st);
    double *v = malloc(cap * sizeof *v);
    for (int i = 0; st && v && i < r->nscalar_names; i++) {
        const char *nm = r->scalar_name[i];
        if (strncmp(nm, "swiglu/", 7) != 0)
            continue;
        size_t n = scalar(a, nm, st, v);
        for (size_t k = 0; k < n; k++)
            fprintf(f, "%s\t%s\t%lld\t%.9g\n", a->label, nm + 7, (long long)st[k], v[k]);
        const char *stat = strrchr(nm, '/');
        if (!n || !stat || (strcmp(stat, "/align_max") && strcmp(stat, "/amax_ratio")))
            continue;
        if (!rows++)
            fprintf(c->md, "#### `%s`: the early warning (gate/up alignment, channel amax)\n\n| layer | statistic | "
                           "first (step) | last (step) | largest (step) |\n|---|---|---|---|---|\n",
                    a->label);
        size_t hi = 0;
        for (size_t k = 1; k < n; k++)
            if (v[k] > v[hi])
                hi = k;
        fprintf(c->md, "| `%.*s` | %s | %.3f (%lld) | %.3f (%lld) | %.3f (%lld) |\n", (int)(stat - nm - 7), nm + 7,
                stat + 1, v[0], (long long)st[0], v[n - 1], (long long)st[n - 1], v[hi], (long long)st[hi]);
    }
    if (rows)
        fprintf(c->md, "\nalign_max: the largest cosine between a channel's gate (w1) and up (w3) rows; amax_ratio: the "
                       "largest channel amax of the SwiGLU output over the median channel's. Smooth SwiGLU's paper saw "
                       "the alignment grow over long training until the unit turned quadratic and spiked; every "
                       "value: `swiglu_alignment.tsv`.\n\n");
    free(st), free(v);
}

int an_swiglu(an_ctx *c)
{
    FILE *fp = an_data(c, "swiglu_paired.tsv"), *fd = an_data(c, "swiglu_drift.tsv"),
         *fa = an_data(c, "swiglu_alignment.tsv");
    int rc = 0, any = 0;
    keyacc k;
    memset(&k, 0, sizeof k);
    if (!fp || !fd || !fa) {
        rc = 1;
        goto done;
    }
    fprintf(fp, "run\ttensor\tlevel\tvariant\tplain_recipe\tsteps\tdelta_sqnr_db\tci95_lo\tci95_hi\tmedian_step_db\t"
                "events_plain\tevents_smooth\n");
    fprintf(fd, "comparison\tfrom\tto\ttensor\tsqnr_p50_from\tsqnr_p50_to\tdelta_db\n");
    fprintf(fa, "run\tstatistic\tstep\tvalue\n");
    fprintf(c->md, "## " SECTION "\n\n"
                   "In a run without smoothing, the down projection's input is also cast smoothed (recipe option "
                   "`smooth`: s⁻¹ Q(s h), s the channel's 1/amax, as published) and its weight with the scale folded "
                   "in (`smooth=fold`: Q(W2 / s) s), each with its own state (a delayed history of the smoothed "
                   "tensor): the same tensors at the same steps, so the difference has no trajectory noise. ΔSQNR "
                   "= smoothed − plain per statistics step after warm-up; calibrated 95%% intervals.\n\n");
    for (int ri = 0; ri < c->nruns; ri++) {
        an_run *a = &c->runs[ri];
        int o = 0, g = 0;
        if (paired(c, a, fp, &k, &o, &g) < 0)
            rc = 1, o = -1;
        if (o > 0 || g > 0)
            any = 1, k.runs++;
        alignment(c, a, fa);
    }
    if (!any)
        fprintf(c->md, "No run records smoothed shadows (the trainer adds them to runs without --smooth-swiglu; in "
                       "your own loop add `<recipe>:smooth` to the down projection's input probe and "
                       "`<recipe>:smooth=fold` to its weight probe with fp8_probe_smooth_from).\n\n");
    /* across runs, beside the placebo */
    double p_oth = NAN, p_w2 = NAN;
    int px, py;
    if (replicate_pair(c, &px, &py)) {
        drift(&c->runs[px], &c->runs[py], "placebo", fd, &p_oth, &p_w2);
        fprintf(c->md, "**Placebo**: `%s` and `%s` differ in the initialisation seed alone; their tensors' median SQNR "
                       "(active recipe) differ by %.2f dB (median |Δ| over tensors outside the down projection), "
                       "`mlp.w2.input` by %+.2f dB: how far two runs drift when nothing but chance differs.\n\n",
                c->runs[px].label, c->runs[py].label, p_oth, p_w2);
    }
    int pairs[2][2] = {{c->vs_a, c->vs_b}, {c->vs_a, c->vs_c}};
    for (int q = 0; q < 2; q++) {
        int x = pairs[q][0], y = pairs[q][1];
        if (x < 0 || y < 0 || x >= c->nruns || y >= c->nruns)
            continue;
        double oth, w2;
        drift(&c->runs[x], &c->runs[y], "smoothing", fd, &oth, &w2);
        const char *judge;
        if (!isfinite(p_oth) || !isfinite(p_w2))
            judge = "; no placebo pair (two FP8 runs of one recipe that differ in the seed alone) to judge it by";
        else if (oth > 2 * p_oth + 0.05)
            judge = ", more than the placebo's drift: these two runs drifted apart, and their difference on "
                    "`mlp.w2.input` mixes smoothing with that drift";
        else if (fabs(w2) > 2 * fmax(fabs(p_w2), p_oth) + 0.05)
            judge = ", within the placebo's drift, while `mlp.w2.input` moved beyond it: consistent with an effect "
                    "of smoothing";
        else
            judge = ", and `mlp.w2.input` moved no more than the placebo's: nothing across runs to tell apart "
                    "from chance";
        fprintf(c->md, "**Across runs** `%s` → `%s` (trained with Smooth SwiGLU, %s): `mlp.w2.input` median SQNR "
                       "%+.2f dB; the tensors smoothing does not touch move %.2f dB (median |Δ|)%s. The paired "
                       "numbers above, on identical tensors, are the measurement; this is the check that the "
                       "runs did not drift apart.\n\n",
                c->runs[x].label, c->runs[y].label, an_meta(&c->runs[y], "smooth_swiglu"), w2, oth, judge);
    }
    if (any) {
        char a1[48], a2[48], a3[48], a4[48], line[900];
        size_t l = (size_t)snprintf(line, sizeof line, "On identical tensors, ΔSQNR smoothed − plain");
        static const char *under[2] = {"per-tensor scales", "grouped scales (blocks, MX)"};
        for (int g = 0, said = 0; g < 2 && l < sizeof line; g++) {
            if (!k.pub[g].n && !k.fold[g].n && !k.gpub[g].n && !k.gfold[g].n)
                continue;
            l += (size_t)snprintf(line + l, sizeof line - l,
                                  "%s under %s: the down projection's input %s dB (published), its GEMM output %s dB "
                                  "published, %s dB folded",
                                  said++ ? ";" : ":", under[g], an_span_fmt(&k.pub[g], "%+.2f", a1, sizeof a1),
                                  an_span_fmt(&k.gpub[g], "%+.2f", a3, sizeof a3),
                                  an_span_fmt(&k.gfold[g], "%+.2f", a4, sizeof a4));
            if (k.ev[g][1][0] != k.ev[g][1][1] && l < sizeof line)
                l += (size_t)snprintf(line + l, sizeof line - l, "; folding moves w2's weight's overflow from %zu to "
                                      "%zu statistics steps (over the runs), its SQNR %s dB",
                                      k.ev[g][1][0], k.ev[g][1][1], an_span_fmt(&k.fold[g], "%+.2f", a2, sizeof a2));
        }
        an_key(c, AN_Q_SMOOTH, SECTION, "%s", line);
        an_finding(c, "smooth", "%s (paired, ΔSQNR smoothed − plain, mean over runs' ranges)", line);
    }
done:
    if (an_data_close(c, (FILE *[]){fp, fd, fa}, 3))
        rc = 1;
    return rc;
}
