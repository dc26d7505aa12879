/*
 * gemm_error.c — the FP8 GEMMs' output error of a run (the trainer's
 * scalars gemm_sqnr_db/<linear>/<gemm>, docs/analyses.md): per linear layer
 * and GEMM (fprop, dgrad, wgrad) the median SQNR over the recorded steps
 * after warm-up, as a table in compare's section, a data file and a finding.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gemm_error.h"

#define PREFIX "gemm_sqnr_db/"

static const char *gemms[3] = {"fprop", "dgrad", "wgrad"};

/* the run's warm-up: the latest warm-up end of any tensor */
static int64_t run_warm_end(const an_run *a)
{
    int64_t warm = INT64_MIN;
    for (int t = 0; t < a->run->ntensors; t++)
        if (a->warm_end[t] != INT64_MIN && a->warm_end[t] != INT64_MAX && a->warm_end[t] > warm)
            warm = a->warm_end[t];
    return warm;
}

double an_gemm_median(const an_run *a, const char *linear, const char *gemm, size_t *n)
{
    const fp8_run *r = a->run;
    char name[256];
    *n = 0;
    if ((size_t)snprintf(name, sizeof name, PREFIX "%s/%s", linear, gemm) >= sizeof name)
        return NAN;
    int id = -1;
    for (int i = 0; i < r->nscalar_names && id < 0; i++)
        if (strcmp(r->scalar_name[i], name) == 0)
            id = i;
    double *v = id < 0 ? NULL : malloc((r->nscalars + 1) * sizeof *v);
    if (!v)
        return NAN;
    int64_t warm = run_warm_end(a);
    for (size_t i = 0; i < r->nscalars; i++)
        if (r->scalar_id[i] == (uint32_t)id && r->scalar_step[i] >= warm && isfinite(r->scalar_value[i]))
            v[(*n)++] = r->scalar_value[i];
    double med = *n ? an_quantile(v, *n, 0.5) : NAN;
    free(v);
    return med;
}

int an_gemm_error(an_ctx *c, an_run *a, FILE *data)
{
    const fp8_run *r = a->run;
    int64_t warm = run_warm_end(a);
    /* linears named by the scalar names, in order of first appearance */
    int nl = 0;
    char (*lin)[96] = calloc((size_t)r->nscalar_names + 1, sizeof *lin);
    int *which = malloc(((size_t)r->nscalar_names + 1) * sizeof *which); /* name id -> linear*3 + gemm, -1 */
    if (!lin || !which) {
        free(lin), free(which);
        return -1;
    }
    for (int i = 0; i < r->nscalar_names; i++) {
        which[i] = -1;
        const char *n = r->scalar_name[i];
        if (strncmp(n, PREFIX, strlen(PREFIX)) != 0)
            continue;
        const char *l = n + strlen(PREFIX), *slash = strrchr(l, '/');
        if (!slash || slash == l || (size_t)(slash - l) >= sizeof lin[0])
            continue;
        int g = -1;
        for (int k = 0; k < 3; k++)
            if (strcmp(slash + 1, gemms[k]) == 0)
                g = k;
        if (g < 0)
            continue;
        int k = 0;
        while (k < nl && (strncmp(lin[k], l, (size_t)(slash - l)) != 0 || lin[k][slash - l] != 0))
            k++;
        if (k == nl)
            snprintf(lin[nl++], sizeof lin[0], "%.*s", (int)(slash - l), l);
        which[i] = k * 3 + g;
    }
    if (!nl) {
        free(lin), free(which);
        return 0;
    }
    size_t cap = r->nscalars + 1;
    double *v = malloc(cap * sizeof *v);
    int *cnt = calloc((size_t)nl * 3, sizeof *cnt);
    if (!v || !cnt) {
        free(lin), free(which), free(v), free(cnt);
        return -1;
    }
    fprintf(c->md, "#### FP8 GEMM output error\n\nSQNR in dB of each linear layer's FP8 GEMM output against the same "
                   "GEMM on the unquantized operands (fprop: the layer's output; dgrad: the input gradient; wgrad: "
                   "the weight gradient), median over the recorded steps after warm-up (`gemm_error.tsv`). Higher is "
                   "better; every 6 dB is one bit.\n\n| linear | fprop | dgrad | wgrad |\n|---|---|---|---|\n");
    double worst = INFINITY;
    int wl = -1, wg = -1;
    for (int l = 0; l < nl; l++) {
        fprintf(c->md, "| `%s` |", lin[l]);
        for (int g = 0; g < 3; g++) {
            size_t n = 0;
            for (size_t i = 0; i < r->nscalars; i++)
                if (r->scalar_id[i] < (uint32_t)r->nscalar_names && which[r->scalar_id[i]] == l * 3 + g &&
                    r->scalar_step[i] >= warm && isfinite(r->scalar_value[i]))
                    v[n++] = r->scalar_value[i];
            double med = an_quantile(v, n, 0.5);
            if (n)
                fprintf(c->md, " %.2f |", med);
            else
                fprintf(c->md, " - |");
            fprintf(data, "%s\t%s\t%s\t%zu\t%.9g\n", a->label, lin[l], gemms[g], n, med);
            if (n && med < worst)
                worst = med, wl = l, wg = g;
        }
        fprintf(c->md, "\n");
    }
    fprintf(c->md, "\n");
    if (wl >= 0)
        an_finding(c, "gemm", "`%s`: the lowest FP8 GEMM output SQNR is %s of `%s`, %.2f dB (median after warm-up)",
                   a->label, gemms[wg], lin[wl], worst);
    free(lin), free(which), free(v), free(cnt);
    return 0;
}
