/*
 * replay.c — delayed scaling replayed offline from the recorded amax series
 * and exponent histograms: history length x algorithm x margin, without
 * re-running training.
 *
 * Per setting and recorded step the replayed scale is TransformerEngine's
 * (fp8_scale_delayed over the last H recorded amaxes, or the most recent),
 * starting from scale 1 and an empty history.  An overflow event is a step
 * whose amax (or an Inf input) lands beyond the format's range under the
 * stale scale: exact, from the recorded amax.  The fractions of values that
 * overflow or flush to zero come from the |x| exponent histogram: bins wholly
 * past the threshold count fully (lower bound), the binade holding the
 * threshold is split log-uniformly (the estimate) or counted whole (upper
 * bound) — so the estimate's error is at most that one binade's count.
 *
 * Where the run recorded a delayed recipe (active or shadow), its recorded
 * scales and counts are the ground truth the estimate is checked against.
 *
 * Data files: replay_settings.tsv, replay_tensors.tsv, replay_truth.tsv.
 */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "analysis.h"
#include "fp8_error.h"
#include "replay.h"

static const int hist_lens[] = {1, 4, 16, 64, 256, 1024};
#define NH 6
#define NM 4
#define NSET (NH * 2 * NM)

/* ---- compact exponent histograms ------------------------------------------ */

/* prefix[k - lo] = count of bins lo..k-1 among bins 1..255 (nonzero finite
 * values); bins below lo and above hi are empty. */
typedef struct {
    uint16_t lo, hi; /* nonzero bins in [lo, hi]; lo > hi: none */
    uint64_t off;    /* into the pool: hi - lo + 2 prefix sums  */
} chist;

static void chist_make(const uint64_t *h, chist *c, uint64_t *pool, uint64_t *used)
{
    int lo = 1, hi = 255;
    while (lo <= 255 && h[lo] == 0)
        lo++;
    while (hi >= 1 && h[hi] == 0)
        hi--;
    c->lo = (uint16_t)lo, c->hi = (uint16_t)hi, c->off = *used;
    if (lo > hi)
        return;
    uint64_t *p = pool + *used, s = 0;
    p[0] = 0;
    for (int k = lo; k <= hi; k++)
        p[k - lo + 1] = (s += h[k]);
    *used += (uint64_t)(hi - lo + 2);
}

static uint64_t chist_below(const chist *c, const uint64_t *pool, int bin) /* bins 1..bin-1 */
{
    if (c->lo > c->hi || bin <= c->lo)
        return 0;
    if (bin > c->hi)
        bin = c->hi + 1;
    return pool[c->off + (uint64_t)(bin - c->lo)];
}

static uint64_t chist_bin(const chist *c, const uint64_t *pool, int bin)
{
    if (c->lo > c->hi || bin < c->lo || bin > c->hi)
        return 0;
    return pool[c->off + (uint64_t)(bin - c->lo + 1)] - pool[c->off + (uint64_t)(bin - c->lo)];
}

/* The bin of |x| = X: 2..255 for the binades of normal floats (bin b holds
 * [2^(b-128), 2^(b-127))), 1 below them, 256 above. */
static int bin_of(double X)
{
    if (!(X > 0))
        return 1;
    int e;
    frexp(X, &e); /* X = m 2^e, m in [0.5, 1): binade 2^(e-1) */
    int bin = e - 1 + 128;
    return bin < 2 ? 1 : bin > 255 ? 256 : bin;
}

/* Share of a binade's values above u (positions in the binade, log2 units
 * 0..1) when they occupy [lo, hi] with density rho^position: rho, the
 * binade's count over its lower neighbour's, carries the tail's slope in. */
static double geo_share(double hi, double u, double lo, double rho)
{
    if (!(hi > lo))
        return 1;
    if (u <= lo)
        return 1;
    if (u >= hi)
        return 0;
    if (!(rho > 0) || fabs(rho - 1) < 1e-9 || !isfinite(rho))
        return (hi - u) / (hi - lo);
    double l = log(rho);
    return (exp(l * hi) - exp(l * u)) / (exp(l * hi) - exp(l * lo));
}

/* The counts past the thresholds.  Bins wholly beyond a threshold count in
 * full; the binade holding it is split.  The recorded amax and smallest
 * nonzero |x| narrow that split: no value lies above amax or below
 * min_nonzero, and the value amax itself is one overflow when amax > over.
 * Inside the binade the estimate spreads log2|x| over the part of it the
 * values can occupy, with the density's slope taken from the neighbouring
 * binade (geo_share). */
static void counts_past(const chist *c, const uint64_t *pool, double amax, double min_nz, uint64_t inf,
                             double over, double under, an_bounds *ov, an_bounds *un)
{
    uint64_t total = c->lo > c->hi ? 0 : pool[c->off + (uint64_t)(c->hi - c->lo + 1)];
    int b = bin_of(over);
    uint64_t above = b > 255 ? 0 : total - chist_below(c, pool, b + 1), part = b <= 255 ? chist_bin(c, pool, b) : 0;
    ov->lo = (double)above, ov->hi = (double)(above + part), ov->est = ov->lo;
    if (part) {
        if (!(amax > over)) { /* nothing above the threshold */
            ov->hi = ov->lo;
        } else {
            double e0 = b - 128, top = fmin(log2(amax), e0 + 1), bot = fmax(e0, log2(min_nz > 0 ? min_nz : over));
            double below_bin = (double)chist_bin(c, pool, b - 1);
            double share = geo_share(top - e0, log2(over) - e0, bot - e0, below_bin > 0 ? (double)part / below_bin : 1);
            double est = (double)part * fmin(1, fmax(0, share));
            if (amax < ldexp(1, (int)e0 + 1)) { /* amax in this binade: it overflows */
                ov->lo += 1;
                est = fmax(1, est);
            }
            ov->est = (double)above + est;
        }
    }
    ov->lo += (double)inf, ov->est += (double)inf, ov->hi += (double)inf;
    b = bin_of(under);
    uint64_t below = b > 255 ? total : chist_below(c, pool, b);
    part = b <= 255 ? chist_bin(c, pool, b) : 0;
    un->lo = (double)below, un->hi = (double)(below + part), un->est = un->lo;
    if (part) {
        if (!(min_nz <= under)) {
            un->hi = un->lo;
        } else {
            double e0 = b - 128, bot = fmax(log2(min_nz), e0), top = fmin(e0 + 1, log2(amax > 0 ? amax : under));
            double above_bin = (double)chist_bin(c, pool, b + 1);
            double share = 1 - geo_share(top - e0, log2(under) - e0, bot - e0, above_bin > 0 ? above_bin / (double)part : 1);
            double est = (double)part * fmin(1, fmax(0, share));
            if (min_nz >= ldexp(1, (int)e0)) { /* min_nonzero in this binade: it flushes */
                un->lo += 1;
                est = fmax(1, est);
            }
            un->est = (double)below + est;
        }
    }
}

void an_hist_bounds(const uint64_t *hist, double amax, double min_nonzero, uint64_t inf, double over, double under,
                    an_bounds *ov, an_bounds *un)
{
    uint64_t pool[260], used = 0;
    chist c;
    chist_make(hist, &c, pool, &used);
    counts_past(&c, pool, amax, min_nonzero, inf, over, under, ov, un);
}

/* ---- per tensor ------------------------------------------------------------- */

typedef struct {
    size_t n;
    int64_t *step;
    float *amax;
    uint64_t *inf, *numel;
    double *min_nz;
    chist *h;
} tseries;

/* Settings of delayed scaling replayed over one tensor's recorded series,
 * side by side so that settings holding the same scale at a step share the
 * histogram lookups.  scales_out (may be NULL; one setting only): per step
 * the scale the step was cast with. */
typedef struct {
    const tseries *s;
    const uint64_t *pool;
    const fp8_format *f;
    int n;                        /* settings                              */
    const int *H, *recent, *margin, *pow2;
    an_setting_sum *sum;          /* [n], added to                          */
    float *scales_out;
} replay_job;

static void *replay_many(void *arg)
{
    const replay_job *J = arg;
    const tseries *s = J->s;
    int n = J->n;
    double over1, under1; /* thresholds for scale_inv = 1, scaled below */
    an_thresholds(J->f, 1.0, &over1, &under1);
    float fmax = (float)J->f->max;
    float *scale = malloc((size_t)n * sizeof *scale), *last = malloc((size_t)n * sizeof *last);
    size_t *dq = malloc((size_t)n * (s->n + 1) * sizeof *dq), *head = calloc((size_t)n, sizeof *head),
           *tail = calloc((size_t)n, sizeof *tail);
    float *cs = malloc((size_t)n * sizeof *cs);
    an_bounds *cov = malloc((size_t)n * sizeof *cov), *cun = malloc((size_t)n * sizeof *cun);
    int *cev = malloc((size_t)n * sizeof *cev);
    if (!scale || !last || !dq || !head || !tail || !cs || !cov || !cun || !cev)
        goto out;
    for (int i = 0; i < n; i++)
        scale[i] = 1.0f, last[i] = -1.0f;
    for (size_t k = 0; k < s->n; k++) {
        int nc = 0; /* distinct scales this step */
        for (int i = 0; i < n; i++) {
            int c = 0;
            while (c < nc && cs[c] != scale[i])
                c++;
            if (c == nc) {
                double scale_inv = (double)(1.0f / scale[i]), over = over1 * scale_inv, under = under1 * scale_inv;
                cs[c] = scale[i];
                cev[c] = (s->amax[k] > over) || s->inf[k] > 0;
                cov[c] = (an_bounds){(double)s->inf[k], (double)s->inf[k], (double)s->inf[k]};
                cun[c] = (an_bounds){0, 0, 0};
                if (s->h)
                    counts_past(&s->h[k], J->pool, s->amax[k], s->min_nz[k], s->inf[k], over, under, &cov[c],
                                     &cun[c]);
                nc++;
            }
            if (J->scales_out)
                J->scales_out[k] = scale[i];
            an_setting_sum *sum = &J->sum[i];
            sum->events += (size_t)cev[c];
            sum->steps++;
            sum->numel += (double)s->numel[k];
            sum->ov.lo += cov[c].lo, sum->ov.est += cov[c].est, sum->ov.hi += cov[c].hi;
            sum->un.lo += cun[c].lo, sum->un.est += cun[c].est, sum->un.hi += cun[c].hi;
            /* end of step: the window's amax (monotonic deque), TE's update rule */
            float used = s->amax[k];
            if (!J->recent[i]) {
                size_t *q = dq + (size_t)i * (s->n + 1);
                while (tail[i] > head[i] && !(s->amax[q[tail[i] - 1]] > s->amax[k]))
                    tail[i]--;
                q[tail[i]++] = k;
                while (q[head[i]] + (size_t)J->H[i] <= k)
                    head[i]++;
                used = s->amax[q[head[i]]];
            }
            if (used != last[i] || !(used > 0) || isinf(used)) {
                scale[i] = fp8_scale_delayed(fmax, used, J->margin[i], J->pow2[i], scale[i]);
                last[i] = used;
            }
        }
    }
out:
    free(scale), free(last), free(dq), free(head), free(tail), free(cs), free(cov), free(cun), free(cev);
    return NULL;
}

/* One setting (the ground-truth check). */
static void replay_one(const tseries *s, const uint64_t *pool, const fp8_format *f, int H, int recent, int margin,
                       int pow2, an_setting_sum *sum, float *scales_out)
{
    replay_job J = {s, pool, f, 1, &H, &recent, &margin, &pow2, sum, scales_out};
    replay_many(&J);
}

static int load_tensor(const an_run *a, int t, int r, tseries *s)
{
    size_t n;
    const size_t *ix = an_series(a, t, r, &n);
    memset(s, 0, sizeof *s);
    s->n = n;
    s->step = malloc((n + 1) * sizeof *s->step);
    s->amax = malloc((n + 1) * sizeof *s->amax);
    s->inf = malloc((n + 1) * sizeof *s->inf);
    s->numel = malloc((n + 1) * sizeof *s->numel);
    s->min_nz = malloc((n + 1) * sizeof *s->min_nz);
    if (!s->step || !s->amax || !s->inf || !s->numel || !s->min_nz)
        return -1;
    for (size_t k = 0; k < n; k++) {
        const fp8_summary *x = an_rec(a, ix[k]);
        s->step[k] = x->step;
        s->amax[k] = (float)x->amax;
        s->inf[k] = x->inf_count;
        s->numel[k] = x->numel;
        s->min_nz[k] = x->min_nonzero;
    }
    return 0;
}

static void free_tensor(tseries *s)
{
    free(s->step), free(s->amax), free(s->inf), free(s->numel), free(s->min_nz);
}

/* Read the exponent histograms of every tensor's input series, compacted. */
static int load_hists(const an_run *a, const int *input, chist **hs, uint64_t **pool_out)
{
    size_t total = 0;
    for (size_t i = 0; i < a->run->nrecords; i++)
        total += input[an_rec(a, i)->tensor] == (int)an_rec(a, i)->recipe;
    /* (row, record) in row order */
    uint64_t *rows = malloc((total + 1) * sizeof *rows);
    size_t *where = malloc((total + 1) * sizeof *where);
    size_t m = 0;
    if (!rows || !where) {
        free(rows), free(where);
        return -1;
    }
    for (size_t i = 0; i < a->run->nrecords; i++) { /* file order is row order */
        const fp8_summary *x = an_rec(a, i);
        if (input[x->tensor] == (int)x->recipe)
            rows[m] = x->hist_row, where[m++] = i;
    }
    uint64_t cap = (uint64_t)total * 24 + 1024, used = 0;
    uint64_t *pool = malloc(cap * sizeof *pool);
    enum { BATCH = 8192 };
    uint64_t *buf = malloc((size_t)BATCH * FP8_EXP_BINS * sizeof *buf);
    chist *h = calloc(a->run->nrecords + 1, sizeof *h);
    int rc = 0;
    if (!pool || !buf || !h)
        rc = -1;
    for (size_t b = 0; b < m && !rc; b += BATCH) {
        size_t nb = m - b < BATCH ? m - b : BATCH;
        if (fp8_run_exp_hist(a->run, rows + b, nb, buf) != FP8_OK) {
            fprintf(stderr, "fp8prof: replay: %s\n", fp8_error_message());
            rc = -2;
            break;
        }
        for (size_t k = 0; k < nb && !rc; k++) {
            if (used + 260 > cap) {
                uint64_t *np = realloc(pool, (size_t)(cap *= 2) * sizeof *pool);
                if (!np) {
                    rc = -1;
                    break;
                }
                pool = np;
            }
            chist_make(buf + k * FP8_EXP_BINS, &h[where[b + k]], pool, &used);
        }
    }
    free(rows), free(where), free(buf);
    if (rc) {
        free(pool), free(h);
        return rc;
    }
    *hs = h; /* indexed by record */
    *pool_out = pool;
    return 0;
}

static int dominated(const an_setting_sum *s, int i, int n)
{
    for (int j = 0; j < n; j++) {
        if (j == i)
            continue;
        double ai = s[i].ov.est / s[i].numel, bi = s[i].un.est / s[i].numel;
        double aj = s[j].ov.est / s[j].numel, bj = s[j].un.est / s[j].numel;
        if (aj <= ai && bj <= bi && (aj < ai || bj < bi))
            return 1;
    }
    return 0;
}

int an_replay(an_ctx *c)
{
    FILE *fs = an_data(c, "replay_settings.tsv"), *ft = an_data(c, "replay_tensors.tsv"),
         *fg = an_data(c, "replay_truth.tsv"), *ff = an_data(c, "replay_front.tsv");
    int rc = 0;
    if (!fs || !ft || !fg || !ff) {
        rc = 1;
        goto done;
    }
    fprintf(ff, "run\toverflow_pct_est\tflushed_pct_est\tsettings\n");
    fprintf(fs, "run\thistory\talgo\tmargin\ttensors\tsteps\toverflow_events\toverflow_frac_est\toverflow_frac_lo\t"
                "overflow_frac_hi\tunderflow_frac_est\tunderflow_frac_lo\tunderflow_frac_hi\tpareto\n");
    fprintf(ft, "run\ttensor\trole\tsteps\tevents_h1024_max_m0\tevents_h16_max_m0\tsafe_history\tsafe_algo\t"
                "safe_margin\tsafe_underflow_frac_est\n");
    fprintf(fg, "run\trecipe\ttensor\tsteps\tscale_match_steps\toverflows_true\toverflows_est\toverflows_lo\t"
                "overflows_hi\tunderflows_true\tunderflows_est\tunderflows_lo\tunderflows_hi\toutside_bounds\t"
                "max_abs_err_frac\n");
    fprintf(c->md, "## Delayed scaling replayed (history, algorithm, margin)\n\n");
    fp8_recipe hyb;
    fp8_recipe_parse("hybrid:delayed", &hyb);
    for (int ri = 0; ri < c->nruns; ri++) {
        const an_run *a = &c->runs[ri];
        int T = a->run->ntensors, R = a->run->nrecipes;
        int *input = malloc(((size_t)T + 1) * sizeof *input);
        an_setting_sum sets[NSET];
        memset(sets, 0, sizeof sets);
        chist *h = NULL;
        uint64_t *pool = NULL;
        if (!input) {
            rc = 1;
            goto done;
        }
        int ntens = 0;
        for (int t = 0; t < T; t++)
            ntens += (input[t] = an_input_recipe(a, t)) >= 0;
        if (!ntens) {
            fprintf(c->md, "Run `%s`: no tensor records, nothing to replay.\n\n", a->label);
            free(input);
            continue;
        }
        int hr = load_hists(a, input, &h, &pool);
        if (hr == -1) {
            fprintf(stderr, "fp8prof: replay: out of memory\n");
            free(input);
            rc = 1;
            goto done;
        }
        /* truth totals per delayed recipe */
        double tr_out[64] = {0}, tr_err[64] = {0}, tr_steps[64] = {0}, tr_match[64] = {0};
        double tr_ov[64] = {0}, tr_ovest[64] = {0};
        for (int t = 0; t < T; t++) {
            if (input[t] < 0)
                continue;
            tseries s;
            if (load_tensor(a, t, input[t], &s)) {
                free_tensor(&s);
                rc = 1;
                break;
            }
            if (h) { /* the compact histograms of this series, in step order */
                size_t n;
                const size_t *ix = an_series(a, t, input[t], &n);
                s.h = malloc((n + 1) * sizeof *s.h);
                for (size_t k = 0; s.h && k < n; k++)
                    s.h[k] = h[ix[k]];
            }
            /* the format: the tensor's delayed recipe's, else TE's hybrid convention */
            int d = an_delayed_recipe(a, t);
            const fp8_format *f = d >= 0 ? an_format(a, t, d) : fp8_recipe_format(&hyb, (fp8_role)a->run->tensor_role[t]);
            an_setting_sum per[NSET];
            memset(per, 0, sizeof per);
            /* the 48 settings in two halves on two threads (the halves keep
             * max and most_recent mixed, so both share scales) */
            int Hs[NSET], rec[NSET], mar[NSET], p2[NSET];
            for (int k = 0; k < NSET; k++)
                Hs[k] = hist_lens[k / (2 * NM)], rec[k] = (k / NM) % 2, mar[k] = k % NM, p2[k] = 0;
            replay_job half[2] = {{&s, pool, f, NSET / 2, Hs, rec, mar, p2, per, NULL},
                                  {&s, pool, f, NSET / 2, Hs + NSET / 2, rec + NSET / 2, mar + NSET / 2, p2 + NSET / 2,
                                   per + NSET / 2, NULL}};
            pthread_t th;
            int threaded = s.n > 256 && pthread_create(&th, NULL, replay_many, &half[1]) == 0;
            replay_many(&half[0]);
            if (threaded)
                pthread_join(th, NULL);
            else
                replay_many(&half[1]);
            int k = 0;
            for (k = 0; k < NSET; k++) {
                sets[k].events += per[k].events, sets[k].steps += per[k].steps, sets[k].numel += per[k].numel;
                sets[k].ov.lo += per[k].ov.lo, sets[k].ov.est += per[k].ov.est, sets[k].ov.hi += per[k].ov.hi;
                sets[k].un.lo += per[k].un.lo, sets[k].un.est += per[k].un.est, sets[k].un.hi += per[k].un.hi;
            }
            int best = -1;
            for (k = 0; k < NSET; k++)
                if (per[k].events == 0 && (best < 0 || per[k].un.est < per[best].un.est))
                    best = k;
            int i1024 = (NH - 1) * 2 * NM, i16 = 2 * 2 * NM;
            fprintf(ft, "%s\t%s\t%s\t%zu\t%zu\t%zu\t", a->label, a->run->tensor_name[t],
                    fp8_role_name((fp8_role)a->run->tensor_role[t]), s.n, per[i1024].events, per[i16].events);
            if (best >= 0)
                fprintf(ft, "%d\t%s\t%d\t%.9g\n", hist_lens[best / (2 * NM)], (best / NM) % 2 ? "most_recent" : "max",
                        best % NM, per[best].un.est / per[best].numel);
            else
                fprintf(ft, "none\t-\t-\tnan\n");
            /* ground truth: each delayed recipe recorded on this tensor */
            for (int r = 0; r < R && r < 64; r++) {
                size_t n;
                const size_t *ix = an_series(a, t, r, &n);
                if (!n || !a->recipe_ok[r] || a->recipes[r].kind != FP8_RECIPE_DELAYED)
                    continue;
                const fp8_recipe *p = &a->recipes[r];
                const fp8_format *fr = an_format(a, t, r);
                float *sc = malloc((s.n + 1) * sizeof *sc);
                an_setting_sum one;
                memset(&one, 0, sizeof one);
                if (!sc)
                    continue;
                replay_one(&s, pool, fr, p->history_len, p->algo_most_recent, p->margin, p->pow2, &one, sc);
                double ovt = 0, ove = 0, ovl = 0, ovh = 0, unt = 0, une = 0, unl = 0, unh = 0, maxerr = 0;
                size_t match = 0, outside = 0, j = 0;
                for (size_t q = 0; q < n; q++) {
                    const fp8_summary *x = an_rec(a, ix[q]);
                    while (j < s.n && s.step[j] < x->step)
                        j++;
                    if (j == s.n || s.step[j] != x->step)
                        continue;
                    match += (float)x->scale == sc[j];
                    /* the estimate under the recorded scale: checks the histogram estimate itself */
                    double over, under;
                    an_thresholds(fr, x->scale_inv, &over, &under);
                    an_bounds ov = {0, 0, 0}, un = {0, 0, 0};
                    if (s.h)
                        counts_past(&s.h[j], pool, s.amax[j], s.min_nz[j], s.inf[j], over, under, &ov, &un);
                    double to = (double)x->overflows, tu = (double)x->underflows;
                    outside += (to < ov.lo || to > ov.hi || tu < un.lo || tu > un.hi);
                    if (getenv("DBG") && (to < ov.lo || to > ov.hi || tu < un.lo || tu > un.hi))
                        fprintf(stderr, "%s step %lld ov %g [%g %g %g] un %g [%g %g %g] amax %g over %g minnz %g under %g fin %llu zero %llu\n",
                                a->run->tensor_name[t], (long long)x->step, to, ov.lo, ov.est, ov.hi, tu, un.lo, un.est, un.hi,
                                x->amax, over, x->min_nonzero, under, (unsigned long long)x->finite, (unsigned long long)x->zero_count);
                    double e = fmax(fabs(ov.est - to), fabs(un.est - tu)) / (double)(x->numel ? x->numel : 1);
                    maxerr = fmax(maxerr, e);
                    ovt += to, ove += ov.est, ovl += ov.lo, ovh += ov.hi;
                    unt += tu, une += un.est, unl += un.lo, unh += un.hi;
                    tr_err[r] = fmax(tr_err[r], e);
                    tr_ov[r] += to, tr_ovest[r] += ov.est;
                    tr_steps[r] += 1;
                }
                tr_out[r] += (double)outside, tr_match[r] += (double)match;
                char lab[96];
                fprintf(fg, "%s\t%s\t%s\t%zu\t%zu\t%.0f\t%.9g\t%.0f\t%.0f\t%.0f\t%.9g\t%.0f\t%.0f\t%zu\t%.9g\n", a->label,
                        an_recipe_label(a, r, lab, sizeof lab), a->run->tensor_name[t], n, match, ovt, ove, ovl, ovh,
                        unt, une, unl, unh, outside, maxerr);
                free(sc);
            }
            free(s.h);
            free_tensor(&s);
        }
        free(h), free(pool);
        if (rc)
            goto done;
        int front[NSET], nf = 0, best = -1;
        for (int k = 0; k < NSET; k++) {
            int p = sets[k].numel > 0 && !dominated(sets, k, NSET);
            if (p)
                front[nf++] = k;
            fprintf(fs, "%s\t%d\t%s\t%d\t%d\t%zu\t%zu\t%.9g\t%.9g\t%.9g\t%.9g\t%.9g\t%.9g\t%d\n", a->label,
                    hist_lens[k / (2 * NM)], (k / NM) % 2 ? "most_recent" : "max", k % NM, ntens, sets[k].steps,
                    sets[k].events, sets[k].ov.est / sets[k].numel, sets[k].ov.lo / sets[k].numel,
                    sets[k].ov.hi / sets[k].numel, sets[k].un.est / sets[k].numel, sets[k].un.lo / sets[k].numel,
                    sets[k].un.hi / sets[k].numel, p);
            if (sets[k].events == 0 && (best < 0 || sets[k].un.est < sets[best].un.est))
                best = k;
        }
        fprintf(c->md, "### Run `%s`: %d tensors, %zu recorded steps each on average (records every %lld steps)\n\n",
                a->label, ntens, sets[0].steps / (size_t)ntens, (long long)a->record_every);
        if (a->record_every > 1)
            fprintf(c->md, "The run recorded every %lld steps: the replayed history holds recorded steps only (history "
                           "H covers H x %lld training steps but sees only their recorded amaxes).\n\n",
                    (long long)a->record_every, (long long)a->record_every);
        if (hr)
            fprintf(c->md, "Exponent histograms unreadable: overflow events only, no fractions.\n\n");
        fprintf(c->md, "Overflow events (steps with a value past the range, over all tensors) and the estimated "
                       "%% of values overflowing / flushed to zero [lower..upper bound]:\n\n");
        fprintf(c->md, "| history | algo | margin 0 | margin 1 | margin 2 | margin 3 |\n|---|---|---|---|---|---|\n");
        for (int hi = 0; hi < NH; hi++)
            for (int alg = 0; alg < 2; alg++) {
                fprintf(c->md, "| %d | %s |", hist_lens[hi], alg ? "most_recent" : "max");
                for (int m = 0; m < NM; m++) {
                    const an_setting_sum *q = &sets[(hi * 2 + alg) * NM + m];
                    fprintf(c->md, " %zu ev, %.3g%% / %.3g%% |", q->events, 100 * q->ov.est / q->numel,
                            100 * q->un.est / q->numel);
                }
                fprintf(c->md, "\n");
            }
        /* the front, settings at the same point merged: "max h=64,256,1024 m=1" */
        fprintf(c->md, "\nPareto front (no other setting has both fewer overflowing and fewer flushed values): ");
        int shown[NSET] = {0}, nshown = 0;
        for (int i = 0; i < nf; i++) {
            if (shown[i])
                continue;
            const an_setting_sum *q = &sets[front[i]];
            char lab[256];
            int m = front[i] % NM, nh = 0, recent = 0;
            size_t l = 0;
            lab[0] = 0;
            for (int j = i; j < nf; j++) { /* settings at the very same point, any algorithm */
                const an_setting_sum *o = &sets[front[j]];
                if (shown[j] || front[j] % NM != m || o->ov.est != q->ov.est || o->un.est != q->un.est)
                    continue;
                shown[j] = 1;
                if ((front[j] / NM) % 2)
                    recent = 1;
                else if (l < sizeof lab - 16)
                    l += (size_t)snprintf(lab + l, sizeof lab - l, "%s%d", nh++ ? "," : "max h=", hist_lens[front[j] / (2 * NM)]);
            }
            if (recent && l < sizeof lab - 20)
                l += (size_t)snprintf(lab + l, sizeof lab - l, "%smost_recent", nh ? " = " : "");
            if (l < sizeof lab - 8)
                snprintf(lab + l, sizeof lab - l, " m=%d", m);
            fprintf(c->md, "%s%s", nshown++ ? "; " : "", lab);
            fprintf(ff, "%s\t%.9g\t%.9g\t%s\n", a->label, 100 * q->ov.est / q->numel, 100 * q->un.est / q->numel, lab);
        }
        fprintf(c->md, ".\n\n");
        if (best >= 0) {
            fprintf(c->md, "Safe setting (no overflow event on any tensor) flushing the fewest values: history %d, %s, "
                           "margin %d (%.3g%% flushed). Per tensor: `replay_tensors.tsv`.\n\n",
                    hist_lens[best / (2 * NM)], (best / NM) % 2 ? "most_recent" : "max", best % NM,
                    100 * sets[best].un.est / sets[best].numel);
            an_finding(c, "replay", "`%s`: overflow-free with history %d, %s, margin %d (%.3g%% flushed; TE default "
                                    "1024/max/0: %zu events)",
                       a->label, hist_lens[best / (2 * NM)], (best / NM) % 2 ? "most_recent" : "max", best % NM,
                       100 * sets[best].un.est / sets[best].numel, sets[(NH - 1) * 2 * NM].events);
        } else {
            fprintf(c->md, "No setting is free of overflow events on every tensor (see `replay_tensors.tsv` for each "
                           "tensor's safe setting).\n\n");
            int fewest = 0;
            for (int k = 1; k < NSET; k++)
                if (sets[k].events < sets[fewest].events ||
                    (sets[k].events == sets[fewest].events && sets[k].un.est < sets[fewest].un.est))
                    fewest = k;
            an_finding(c, "replay", "`%s`: no setting is overflow-free on every tensor; fewest events %zu with history "
                                    "%d, %s, margin %d (TE default 1024/max/0: %zu)",
                       a->label, sets[fewest].events, hist_lens[fewest / (2 * NM)],
                       (fewest / NM) % 2 ? "most_recent" : "max", fewest % NM, sets[(NH - 1) * 2 * NM].events);
        }
        int anytruth = 0;
        for (int r = 0; r < R && r < 64; r++) {
            if (tr_steps[r] == 0)
                continue;
            char lab[96];
            if (!anytruth)
                fprintf(c->md, "Ground truth — the recorded delayed recipes. The histogram estimate's error is bounded "
                               "by the count of the one binade holding each threshold; the true count must lie in "
                               "[lower, upper]:\n\n| recipe | steps | replayed scale = recorded | true overflows | "
                               "estimated | outside bounds | max error (fraction of numel) |\n|---|---|---|---|---|---|---|\n");
            anytruth = 1;
            fprintf(c->md, "| %s | %.0f | %.1f%% | %.0f | %.1f | %.0f | %.3g |\n", an_recipe_label(a, r, lab, sizeof lab),
                    tr_steps[r], 100 * tr_match[r] / tr_steps[r], tr_ov[r], tr_ovest[r], tr_out[r], tr_err[r]);
        }
        if (!anytruth)
            fprintf(c->md, "This run has no delayed recipe recorded (active or shadow): no ground truth to check the "
                           "replay against.\n");
        fprintf(c->md, "\n");
        free(input);
    }
done:
    if (an_data_close(c, (FILE *[]){fs, ft, fg, ff}, 4))
        rc = 1;
    return rc;
}
