/*
 * claim.c — the claim "per-tensor amax suits delayed scaling, per-block
 * amax suits just-in-time scaling", tested on identical tensors.
 *
 * On each tensor four recorded recipes that differ only in timing and
 * granularity: T_del (delayed, one scale per tensor), T_cur (current, per
 * tensor), B_del (delayed per block position: block=RxC:delayed, the same
 * history, algorithm and margin as T_del) and B_cur (current per block).
 * At every statistics step after warm-up where all four have a finite
 * SQNR:  tensor cost d_t = SQNR(T_cur) - SQNR(T_del), block cost d_b =
 * SQNR(B_cur) - SQNR(B_del), and their difference DiD = d_b - d_t, the
 * extra price of the stale scale at block granularity.  Per role: per step
 * the mean over the role's tensors, then the mean over the steps after the
 * LR warm-up with its calibrated 95% interval (inference.h), the median
 * step, the steps that dominate, and overflow events of all four at the
 * same steps (a step with an overflowing value).  Verdict per role, with
 * the stated margin D (--claim-margin, 0.1 dB): *supported* when the
 * interval of DiD lies above D, *not supported* when it lies below D,
 * *cannot tell* otherwise (or fewer than 8 steps).  Every phase apart in
 * claim_phases.tsv.
 *
 * Data files: claim_tensors.tsv, claim_roles.tsv, claim_phases.tsv.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "analysis.h"
#include "contrasts.h"
#include "factors.h"
#include "inference.h"
#include "keys.h"

#define SECTION "Delayed scaling at tensor and block granularity"

/* the four recipes of one comparison on one tensor */
typedef struct {
    int t, td, tc, bd, bc; /* tensor; T_del, T_cur, B_del, B_cur (canonical ids) */
    char key[200];         /* what groups it with other tensors: the labels of T_del and B_del */
} quad;

/* one aligned statistics step of a quad */
typedef struct {
    int64_t step;
    double dt, db;
    int ev[4]; /* overflow at this step: T_del, T_cur, B_del, B_cur */
} qstep;

static int timing_of(const an_run *a, int t, int r)
{
    an_factors f;
    an_factors_of(&a->recipes[r], (fp8_role)a->run->tensor_role[t], &f);
    return strcmp(f.gran, "tensor") == 0 ? f.timing : 10 + f.timing; /* 10+: grouped */
}

/* the canonical recipe of tensor t that differs from x in timing alone (eps
 * allowed when inert) and is current; -1 none */
static int current_partner(const an_run *a, int t, int x)
{
    size_t nr;
    const int *rs = an_tensor_recipes(a, t, &nr);
    for (size_t i = 0; i < nr; i++) {
        int z = rs[i], inert;
        size_t n;
        an_series(a, t, z, &n);
        if (!n || !a->recipe_ok[z] || an_canon(a, t, z) != z || z == x)
            continue;
        if (an_one_factor(a, t, x, z, &inert) == AN_F_TIMING && timing_of(a, t, z) % 10 == 2)
            return z;
    }
    return -1;
}

/* every quad of a run */
static size_t find_quads(const an_run *a, quad *q, size_t cap)
{
    size_t n = 0;
    for (int t = 0; t < a->run->ntensors && n < cap; t++) {
        fp8_role role = (fp8_role)a->run->tensor_role[t];
        size_t nr;
        const int *rs = an_tensor_recipes(a, t, &nr);
        for (size_t i = 0; i < nr && n < cap; i++) {
            int x = rs[i];
            size_t nx;
            an_series(a, t, x, &nx);
            if (!nx || !a->recipe_ok[x] || an_canon(a, t, x) != x || timing_of(a, t, x) != 1)
                continue;
            for (size_t j = 0; j < nr && n < cap; j++) {
                int y = rs[j], inert;
                size_t ny;
                an_series(a, t, y, &ny);
                if (!ny || !a->recipe_ok[y] || an_canon(a, t, y) != y || timing_of(a, t, y) != 11 ||
                    an_one_factor(a, t, x, y, &inert) != AN_F_GRANULARITY)
                    continue;
                int z = current_partner(a, t, x), w = current_partner(a, t, y);
                if (z < 0 || w < 0)
                    continue;
                quad *o = &q[n++];
                o->t = t, o->td = x, o->tc = z, o->bd = y, o->bc = w;
                an_factors fx, fy;
                char lx[96], ly[96];
                an_factors_of(&a->recipes[x], role, &fx);
                an_factors_of(&a->recipes[y], role, &fy);
                snprintf(o->key, sizeof o->key, "%s|%s", an_factors_label(&fx, lx, sizeof lx),
                         an_factors_label(&fy, ly, sizeof ly));
            }
        }
    }
    return n;
}

/* the record of recipe r at step s on tensor t (series in step order; *i
 * moves forward), NULL when none */
static const fp8_summary *at_step(const an_run *a, const size_t *s, size_t n, size_t *i, int64_t step)
{
    while (*i < n && an_rec(a, s[*i])->step < step)
        (*i)++;
    return *i < n && an_rec(a, s[*i])->step == step ? an_rec(a, s[*i]) : NULL;
}

/* the aligned steps of a quad after warm-up: all four records there, SQNRs finite */
static size_t align(const an_run *a, const quad *q, qstep *out, size_t cap)
{
    size_t n[4], i[4] = {0, 0, 0, 0}, m = 0;
    const int rs[4] = {q->td, q->tc, q->bd, q->bc};
    const size_t *s[4];
    for (int k = 0; k < 4; k++)
        s[k] = an_series(a, q->t, rs[k], &n[k]);
    for (size_t j = 0; j < n[0] && m < cap; j++) {
        const fp8_summary *r0 = an_rec(a, s[0][j]);
        if (an_is_warm(a, q->t, r0->step))
            continue;
        const fp8_summary *r[4] = {r0, NULL, NULL, NULL};
        int ok = isfinite(r0->sqnr_db);
        for (int k = 1; k < 4 && ok; k++)
            ok = (r[k] = at_step(a, s[k], n[k], &i[k], r0->step)) != NULL && isfinite(r[k]->sqnr_db);
        if (!ok)
            continue;
        qstep *o = &out[m++];
        o->step = r0->step;
        o->dt = r[1]->sqnr_db - r[0]->sqnr_db;
        o->db = r[3]->sqnr_db - r[2]->sqnr_db;
        for (int k = 0; k < 4; k++)
            o->ev[k] = r[k]->overflows != UINT64_MAX && r[k]->overflows > 0;
    }
    return m;
}

static const char *role_plural(int role)
{
    static const char *p[] = {"activations", "weights", "gradients", "outputs", "other tensors"};
    return role >= 0 && role < 5 ? p[role] : "tensors";
}

/* a group's per-step means over its tensors, for the steps of phase set
 * `phases` (bit mask), into dt, db, did (steps ascending); events summed */
typedef struct {
    size_t n, tensor_steps;
    double *dt, *db, *did;
    int64_t *step;
    size_t ev[4];
} series3;

static int cmp_qstep(const void *x, const void *y)
{
    int64_t a = ((const qstep *)x)->step, b = ((const qstep *)y)->step;
    return (a > b) - (a < b);
}

static void pool(const an_ctx *c, const an_run *a, qstep *all, size_t n, unsigned phases, series3 *o)
{
    qsort(all, n, sizeof *all, cmp_qstep);
    o->n = o->tensor_steps = 0;
    memset(o->ev, 0, sizeof o->ev);
    for (size_t i = 0; i < n;) {
        size_t j = i;
        double st = 0, sb = 0;
        while (j < n && all[j].step == all[i].step) {
            st += all[j].dt, sb += all[j].db;
            j++;
        }
        if (phases & (1u << an_phase(c, a, all[i].step))) {
            double k = (double)(j - i);
            o->dt[o->n] = st / k, o->db[o->n] = sb / k, o->did[o->n] = (sb - st) / k;
            o->step[o->n++] = all[i].step;
            o->tensor_steps += j - i;
            for (size_t q = i; q < j; q++)
                for (int e = 0; e < 4; e++)
                    o->ev[e] += (size_t)all[q].ev[e];
        }
        i = j;
    }
}

static const char *verdict(const an_interval *d, double margin)
{
    if (d->n < 8 || !isfinite(d->lo))
        return "cannot tell";
    if (d->lo > margin)
        return "supported";
    if (d->hi < margin)
        return "not supported";
    return "cannot tell";
}

static void json_cost(FILE *j, const char *name, const an_interval *d, const an_robust *rb, size_t ev_del,
                      size_t ev_cur, size_t steps)
{
    fprintf(j, ", \"%s\": {\"delta_sqnr_db\": ", name);
    an_json_num(j, d->mean);
    fputs(", \"ci95\": [", j), an_json_num(j, d->lo), fputs(", ", j), an_json_num(j, d->hi);
    fputs("], \"median_step_db\": ", j), an_json_num(j, rb->median);
    fprintf(j, ", \"overflow_events_delayed\": %zu, \"overflow_events_current\": %zu, \"tensor_steps\": %zu}", ev_del,
            ev_cur, steps);
}

/* ---- one run: compute ------------------------------------------------------ */

/* a tensor's own row: its aligned steps after warm-up */
typedef struct {
    size_t m;
    double st, sb;  /* the sums of d_t and d_b */
    an_interval iv; /* of DiD */
    size_t ev[4];
} claim_trow;

/* one phase of a group */
typedef struct {
    size_t n, tensor_steps, ev[4];
    double mt, mb; /* sums of the per-step means */
    an_interval di;
} claim_phase;

/* the tensors of one role whose quads share their labels, pooled */
typedef struct {
    int role;
    char lt[96], lb[96];   /* T_del's and B_del's labels */
    size_t tensors, n, tensor_steps, ev[4];
    an_interval it, ib, id;
    an_robust rt, rb, rd;
    const char *verdict;
    claim_phase ph[AN_NPHASE];
} claim_group;

typedef struct {
    quad *q;
    size_t nq;
    claim_trow *rows; /* [nq] */
    claim_group *g;
    size_t ng;
} claim_run;

static void claim_run_free(claim_run *R)
{
    free(R->q), free(R->rows), free(R->g);
    memset(R, 0, sizeof *R);
}

/* the quads' pooled steps of group (role, key) of quad k; marks them done */
static size_t gather(const an_run *a, const quad *q, size_t nq, size_t k, qstep *const *qs, const size_t *qn,
                     unsigned char *done_q, qstep *all, size_t *tensors)
{
    int role = a->run->tensor_role[q[k].t];
    size_t m = 0;
    *tensors = 0;
    for (size_t l = k; l < nq; l++)
        if (!done_q[l] && a->run->tensor_role[q[l].t] == role && !strcmp(q[l].key, q[k].key)) {
            memcpy(all + m, qs[l], qn[l] * sizeof *all);
            m += qn[l];
            done_q[l] = 1;
            ++*tensors;
        }
    return m;
}

/* a group's phases apart, then its costs and verdict on the steps after
 * the LR warm-up (S: scratch of at least m steps) */
static void group_stats(const an_ctx *c, const an_run *a, qstep *all, size_t m, series3 *S, claim_group *G)
{
    for (int ph = 0; ph < AN_NPHASE; ph++) {
        claim_phase *P = &G->ph[ph];
        pool(c, a, all, m, 1u << ph, S);
        an_mean_ci(S->did, S->n, c->boot, c->seed, &P->di);
        P->mt = P->mb = 0;
        for (size_t i = 0; i < S->n; i++)
            P->mt += S->dt[i], P->mb += S->db[i];
        P->n = S->n, P->tensor_steps = S->tensor_steps;
        memcpy(P->ev, S->ev, sizeof P->ev);
    }
    pool(c, a, all, m, (1u << AN_PHASE_EARLY) | (1u << AN_PHASE_STEADY), S);
    an_mean_ci(S->dt, S->n, c->boot, c->seed, &G->it);
    an_mean_ci(S->db, S->n, c->boot, c->seed, &G->ib);
    an_mean_ci(S->did, S->n, c->boot, c->seed, &G->id);
    an_robust_of(S->dt, S->step, S->n, &G->rt);
    an_robust_of(S->db, S->step, S->n, &G->rb);
    an_robust_of(S->did, S->step, S->n, &G->rd);
    G->verdict = verdict(&G->id, c->claim_margin_db);
    G->n = S->n, G->tensor_steps = S->tensor_steps;
    memcpy(G->ev, S->ev, sizeof G->ev);
}

/* each quad's aligned steps and own row */
static int claim_tensors(const an_ctx *c, const an_run *a, claim_run *R, qstep **qs, size_t *qn, qstep *buf,
                         size_t maxs, series3 *S)
{
    for (size_t k = 0; k < R->nq; k++) {
        size_t m = align(a, &R->q[k], buf, maxs);
        if (!(qs[k] = malloc((m + 1) * sizeof **qs)))
            return 1;
        memcpy(qs[k], buf, m * sizeof *buf);
        qn[k] = m;
        claim_trow *w = &R->rows[k];
        w->m = m;
        for (size_t i = 0; i < m; i++) {
            S->did[i] = buf[i].db - buf[i].dt, S->step[i] = buf[i].step, w->st += buf[i].dt, w->sb += buf[i].db;
            for (int e = 0; e < 4; e++)
                w->ev[e] += (size_t)buf[i].ev[e];
        }
        an_mean_ci(S->did, m, c->boot, c->seed, &w->iv);
    }
    return 0;
}

/* The run's quads, each one's row, and its groups (role, labels) in order
 * of first appearance: 0, or 1 out of memory. */
static int claim_compute(const an_ctx *c, const an_run *a, claim_run *R)
{
    memset(R, 0, sizeof *R);
    size_t cap = (size_t)a->run->ntensors * 8 + 8, maxs = a->run->nrecords + 1;
    if (!(R->q = malloc(cap * sizeof *R->q)))
        return 1;
    if (!(R->nq = find_quads(a, R->q, cap)))
        return 0;
    qstep *buf = malloc(maxs * sizeof *buf), *all = malloc(maxs * sizeof *all);
    qstep **qs = calloc(R->nq, sizeof *qs);
    size_t *qn = calloc(R->nq, sizeof *qn);
    unsigned char *done_q = calloc(R->nq, 1);
    series3 S;
    S.dt = malloc(maxs * sizeof *S.dt), S.db = malloc(maxs * sizeof *S.db), S.did = malloc(maxs * sizeof *S.did);
    S.step = malloc(maxs * sizeof *S.step);
    R->rows = calloc(R->nq, sizeof *R->rows);
    R->g = calloc(R->nq, sizeof *R->g);
    int rc = !buf || !all || !qs || !qn || !done_q || !S.dt || !S.db || !S.did || !S.step || !R->rows || !R->g;
    if (!rc)
        rc = claim_tensors(c, a, R, qs, qn, buf, maxs, &S);
    for (size_t k = 0; !rc && k < R->nq; k++) {
        if (done_q[k])
            continue;
        claim_group *G = &R->g[R->ng++];
        G->role = a->run->tensor_role[R->q[k].t];
        const char *key = R->q[k].key, *bar = strchr(key, '|');
        snprintf(G->lt, sizeof G->lt, "%.*s", (int)(bar ? bar - key : 0), key);
        snprintf(G->lb, sizeof G->lb, "%s", bar ? bar + 1 : "");
        size_t m = gather(a, R->q, R->nq, k, qs, qn, done_q, all, &G->tensors);
        group_stats(c, a, all, m, &S, G);
    }
    for (size_t k = 0; qs && k < R->nq; k++)
        free(qs[k]);
    free(qs), free(qn), free(buf), free(all), free(done_q);
    free(S.dt), free(S.db), free(S.did), free(S.step);
    return rc;
}

/* ---- one run: render -------------------------------------------------------- */

static void claim_tsv(const an_run *a, const claim_run *R, FILE *ft, FILE *fr, FILE *fp)
{
    for (size_t k = 0; k < R->nq; k++) {
        const quad *x = &R->q[k];
        const claim_trow *w = &R->rows[k];
        fprintf(ft, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%zu\t%.9g\t%.9g\t%.9g\t%.9g\t%.9g\t%zu\t%zu\t%zu\t%zu\n", a->label,
                a->run->tensor_name[x->t], fp8_role_name((fp8_role)a->run->tensor_role[x->t]),
                a->run->recipe_spec[x->td], a->run->recipe_spec[x->tc], a->run->recipe_spec[x->bd],
                a->run->recipe_spec[x->bc], w->m, w->m ? w->st / (double)w->m : NAN, w->m ? w->sb / (double)w->m : NAN,
                w->iv.mean, w->iv.lo, w->iv.hi, w->ev[0], w->ev[1], w->ev[2], w->ev[3]);
    }
    for (size_t i = 0; i < R->ng; i++) {
        const claim_group *G = &R->g[i];
        const char *role = fp8_role_name((fp8_role)G->role);
        for (int ph = 0; ph < AN_NPHASE; ph++) {
            const claim_phase *P = &G->ph[ph];
            fprintf(fp, "%s\t%s\t%s\t%s\t%zu\t%.9g\t%.9g\t%.9g\t%.9g\t%.9g\t%zu\t%zu\t%zu\n", a->label, role, G->lb,
                    an_phase_name(ph), P->n, P->n ? P->mt / (double)P->n : NAN, P->n ? P->mb / (double)P->n : NAN,
                    P->di.mean, P->di.lo, P->di.hi, P->ev[0], P->ev[2], P->tensor_steps);
        }
        char dom[96] = "";
        const an_robust *rd = &G->rd;
        if (rd->dominated && fabs(rd->mean) >= 0.05) /* (a mean of ~0 is no effect to be carried) */
            snprintf(dom, sizeof dom, "steps %lld, %lld, %lld", (long long)rd->top_step[0],
                     (long long)rd->top_step[1], (long long)rd->top_step[2]);
        fprintf(fr, "%s\t%s\t%s\t%s\t%zu\t%zu\t%.9g\t%.9g\t%.9g\t%.9g\t%.9g\t%.9g\t%.9g\t%.9g\t%.9g\t%.9g\t%s\t%d\t"
                    "%zu\t%zu\t%zu\t%zu\t%zu\t%s\n",
                a->label, role, G->lt, G->lb, G->tensors, G->n, G->it.mean, G->it.lo, G->it.hi, G->ib.mean, G->ib.lo,
                G->ib.hi, G->id.mean, G->id.lo, G->id.hi, rd->median, dom, G->id.approx, G->ev[0], G->ev[1], G->ev[2],
                G->ev[3], G->tensor_steps, G->verdict);
    }
}

static void claim_json(an_ctx *c, const an_run *a, const claim_group *G)
{
    FILE *j = an_json(c, AN_J_CLAIMS);
    if (!j)
        return;
    fputs("{\"claim\": \"per_tensor_delayed_per_block_jit\", \"run\": ", j), an_json_str(j, a->label);
    fputs(", \"role\": ", j), an_json_str(j, fp8_role_name((fp8_role)G->role));
    fputs(", \"verdict\": ", j), an_json_str(j, G->verdict);
    fputs(", \"delayed_tensor\": ", j), an_json_str(j, G->lt);
    fputs(", \"delayed_block\": ", j), an_json_str(j, G->lb);
    fprintf(j, ", \"tensors\": %zu, \"steps\": %zu", G->tensors, G->n);
    json_cost(j, "tensor_cost", &G->it, &G->rt, G->ev[0], G->ev[1], G->tensor_steps);
    json_cost(j, "block_cost", &G->ib, &G->rb, G->ev[2], G->ev[3], G->tensor_steps);
    fputs(", \"difference_db\": ", j), an_json_num(j, G->id.mean);
    fputs(", \"ci95\": [", j), an_json_num(j, G->id.lo), fputs(", ", j), an_json_num(j, G->id.hi);
    fputs("], \"median_step_db\": ", j), an_json_num(j, G->rd.median);
    fprintf(j, ", \"approx\": %s, \"margin_db\": ", G->id.approx ? "true" : "false");
    an_json_num(j, c->claim_margin_db);
    fputs("}", j);
}

/* the verdicts over runs, per role: counts and the range of DiD */
typedef struct {
    int count[5][3]; /* supported, not, cannot tell */
    double did[5][2];
} claim_tally;

/* the run's table, its summary.json entries and findings */
static void claim_md(an_ctx *c, const an_run *a, const claim_run *R, claim_tally *K)
{
    int daggers = 0;
    for (size_t i = 0; i < R->ng; i++) {
        const claim_group *G = &R->g[i];
        const an_robust *rd = &G->rd;
        int dom = rd->dominated && fabs(rd->mean) >= 0.05;
        daggers += dom;
        if (!i)
            fprintf(c->md, "### Run `%s`\n\n| role | delayed at tensor → at block | tensors | steps | tensor cost "
                           "dB [95%% CI] | block cost dB [95%% CI] | difference dB [95%% CI] (median step) | "
                           "overflow events: tensor delayed / current, block delayed / current (of tensor-steps) | "
                           "verdict |\n|---|---|---|---|---|---|---|---|---|\n",
                    a->label);
        fprintf(c->md, "| %s | %s → %s | %zu | %zu | %+.2f [%+.2f, %+.2f] | %+.2f [%+.2f, %+.2f] | %+.2f [%+.2f, "
                       "%+.2f]%s (%+.2f)%s | %zu / %zu, %zu / %zu (%zu) | **%s** |\n",
                fp8_role_name((fp8_role)G->role), G->lt, G->lb, G->tensors, G->n, G->it.mean, G->it.lo, G->it.hi,
                G->ib.mean, G->ib.lo, G->ib.hi, G->id.mean, G->id.lo, G->id.hi, G->id.approx ? " *approx.*" : "",
                rd->median, dom ? " †" : "", G->ev[0], G->ev[1], G->ev[2], G->ev[3], G->tensor_steps, G->verdict);
        int vi = !strcmp(G->verdict, "supported") ? 0 : !strcmp(G->verdict, "not supported") ? 1 : 2;
        if (G->role >= 0 && G->role < 5) {
            K->count[G->role][vi]++;
            if (isfinite(G->id.mean))
                K->did[G->role][0] = fmin(K->did[G->role][0], G->id.mean),
                K->did[G->role][1] = fmax(K->did[G->role][1], G->id.mean);
        }
        claim_json(c, a, G);
        an_finding(c, "claim", "`%s` %s: block cost %+.2f dB vs tensor cost %+.2f dB, difference %+.2f [%+.2f, %+.2f] "
                               "(median step %+.2f): %s",
                   a->label, role_plural(G->role), G->ib.mean, G->it.mean, G->id.mean, G->id.lo, G->id.hi, rd->median,
                   G->verdict);
    }
    if (R->ng)
        fprintf(c->md, "\n");
    if (daggers)
        fprintf(c->md, "%s", "† the mean is carried by three steps (leaving them out moves it by more than half); "
                               "`claim_roles.tsv` names them.\n\n");
}

/* ---- across runs --------------------------------------------------------------- */

/* the summary's line: roles grouped by their verdict, the verdict first */
static void claim_key(an_ctx *c, const claim_tally *K)
{
    static const char *vname[3] = {"Supported", "Not supported", "Cannot tell"};
    char line[1024] = "";
    size_t l = 0;
    for (int vi = 0; vi < 4 && l < sizeof line - 200; vi++) { /* 3: mixed over runs */
        int first = 1;
        for (int role = 0; role < 5 && l < sizeof line - 200; role++) {
            const int *n = K->count[role];
            int tot = n[0] + n[1] + n[2];
            int mine = vi < 3 ? n[vi] == tot : n[0] != tot && n[1] != tot && n[2] != tot;
            if (!tot || !mine)
                continue;
            if (first)
                l += (size_t)snprintf(line + l, sizeof line - l, "%s**%s** for ", l ? "; " : "",
                                      vi < 3 ? vname[vi] : "Mixed over runs");
            l += (size_t)snprintf(line + l, sizeof line - l, "%s%s", first ? "" : ", ", role_plural(role));
            if (vi == 3)
                l += (size_t)snprintf(line + l, sizeof line - l, " (supported %d, not %d, cannot tell %d)", n[0], n[1],
                                      n[2]);
            if (isfinite(K->did[role][0]))
                l += (size_t)snprintf(line + l, sizeof line - l,
                                      K->did[role][0] == K->did[role][1] ? " (%+.2f dB)" : " (%+.2f..%+.2f dB)",
                                      K->did[role][0], K->did[role][1]);
            first = 0;
        }
    }
    an_key(c, AN_Q_DYNAMICS, SECTION,
           "%s: on identical tensors, what a stale (delayed) scale costs at block granularity beyond its cost per "
           "tensor, ΔSQNR of current over delayed scaling, block minus tensor",
           line);
}

int an_claim(an_ctx *c)
{
    FILE *f[3] = {an_data(c, "claim_tensors.tsv"), an_data(c, "claim_roles.tsv"), an_data(c, "claim_phases.tsv")};
    int rc = 0, any = 0;
    claim_tally K;
    memset(&K, 0, sizeof K);
    for (int r = 0; r < 5; r++)
        K.did[r][0] = INFINITY, K.did[r][1] = -INFINITY;
    if (!f[0] || !f[1] || !f[2]) {
        rc = 1;
        goto done;
    }
    fprintf(f[0], "run\ttensor\trole\tt_delayed\tt_current\tb_delayed\tb_current\tsteps\ttensor_cost_db\t"
                  "block_cost_db\tdifference_db\tci95_lo\tci95_hi\tevents_t_delayed\tevents_t_current\t"
                  "events_b_delayed\tevents_b_current\n");
    fprintf(f[1], "run\trole\tdelayed_tensor\tdelayed_block\ttensors\tsteps\ttensor_cost_db\ttensor_lo\ttensor_hi\t"
                  "block_cost_db\tblock_lo\tblock_hi\tdifference_db\tdiff_lo\tdiff_hi\tdiff_median_step\t"
                  "dominated_by\tapprox\tevents_t_delayed\tevents_t_current\tevents_b_delayed\tevents_b_current\t"
                  "tensor_steps\tverdict\n");
    fprintf(f[2], "run\trole\tdelayed_block\tphase\tsteps\ttensor_cost_db\tblock_cost_db\tdifference_db\tdiff_lo\t"
                  "diff_hi\tevents_t_delayed\tevents_b_delayed\ttensor_steps\n");
    fprintf(c->md, "## " SECTION "\n\n"
                   "The claim: *per-tensor amax suits delayed scaling, per-block amax suits just-in-time scaling*. "
                   "On identical tensors, four recorded recipes that differ only in timing and granularity: what "
                   "current scaling gains over delayed scaling at tensor granularity (tensor cost = SQNR(current) − "
                   "SQNR(delayed), one scale per tensor) and at block granularity (block cost, one scale per block; "
                   "per-block delayed scaling keeps a history per block position, `block=RxC:delayed`, with the "
                   "tensor recipe's history, algorithm and margin). The claim holds where the block cost exceeds "
                   "the tensor cost: **supported** when the 95%% interval of the difference lies above %.2f dB, "
                   "**not supported** when it lies below, **cannot tell** otherwise. Steps: statistics steps after "
                   "warm-up and after the LR warm-up; per step the mean over the role's tensors; intervals "
                   "calibrated at the series' length and autocorrelation (docs/analyses.md, \"Inference\"; "
                   "*approx.* where they cover less than 90%%). Events: statistics steps with an overflowing value. "
                   "On activations and gradients a block position holds other tokens at every step, so its history "
                   "is a max over other data; weights' blocks persist.\n\n",
            c->claim_margin_db);
    for (int ri = 0; ri < c->nruns && !rc; ri++) {
        const an_run *a = &c->runs[ri];
        claim_run R;
        rc = claim_compute(c, a, &R);
        if (!rc && !R.nq)
            fprintf(c->md, "`%s`: no tensor carries the four recipes (e.g. `e4m3:delayed:history=H`, `e4m3:current`, "
                           "`e4m3:block=1x128:delayed,history=H,eps=0`, `e4m3:block=1x128:eps=0`): not measured.\n\n",
                    a->label);
        else if (!rc) {
            any = 1;
            claim_tsv(a, &R, f[0], f[1], f[2]);
            claim_md(c, a, &R, &K);
        }
        claim_run_free(&R);
    }
    if (rc) {
        fprintf(stderr, "fp8prof: claim: out of memory\n");
    } else if (any) {
        claim_key(c, &K);
    } else {
        free(c->key_missing[AN_Q_DYNAMICS]);
        c->key_missing[AN_Q_DYNAMICS] =
            strdup("no run records per-tensor and per-block recipes both delayed and current (record e.g. "
                   "`e4m3:block=1x128:delayed,history=64,eps=0` beside `e4m3:delayed:history=64`, `e4m3:current` "
                   "and `e4m3:block=1x128:eps=0`)");
        fprintf(c->md, "Not measured in any run.\n\n");
    }
done:
    if (an_data_close(c, f, 3))
        rc = 1;
    return rc;
}
