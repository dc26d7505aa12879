/*
 * replay.c — delayed scaling replayed offline: history length x algorithm x
 * margin, without re-running training.
 *
 * The replay runs over each tensor's every-step amax series (schema 3
 * /steps), so its scales are exactly what TransformerEngine's rule gives at
 * every step whatever the statistics cadence: the scale used at step k is
 * fp8_scale_delayed over the amaxes of the H steps before it (or the most
 * recent one), starting from scale 1 and an empty history; an Inf input
 * enters the history as TE's amax does.  Checked: every delayed recipe the
 * run recorded is replayed with its own settings and its every-step scales
 * must match bit for bit.
 *
 * An overflow event (a step with a value past the range) is exact: the
 * step's amax times the replayed scale encodes past the format's max, or an
 * Inf input.  Warm-up steps (no real amax in the history yet) are counted
 * apart.  The shares of values that overflow or flush to zero exist only at
 * steps with statistics (the |x| exponent histogram): only their rigorous
 * bounds are used (bins wholly past the threshold, plus or minus the one
 * binade that holds it); the in-binade estimate is kept in the data files
 * with its bias measured against the recorded recipes.
 *
 * Data files: replay_settings.tsv, replay_tensors.tsv, replay_truth.tsv,
 * replay_front.tsv, written with the report's text by replay_report.c;
 * this file computes a run's replay (replay_run.h).
 */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "bigmem.h"
#include "analysis.h"
#include "keys.h"
#include "series.h"
#include "fp8_error.h"
#include "replay.h"
#include "replay_run.h"

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
    size_t n;          /* steps in the series                              */
    int64_t *step;
    float *amax;       /* finite amax                                      */
    unsigned *nf;      /* nonfinite bits (1: Inf)                          */
    int *hist;         /* index into h[] of the step's histogram, -1: none */
    size_t warm;       /* steps [0, warm) are warm-up                      */
    int64_t half;      /* first step of the second half of the run          */
    /* at the steps with statistics */
    size_t nh;
    chist *h;
    double *min_nz;
    uint64_t *inf, *numel;
} tseries;

typedef struct {
    const tseries *s;
    const uint64_t *pool;
    const fp8_format *f;
    int n;
    const int *H, *recent, *margin, *pow2, *finite;
    ssum *sum;            /* [n], added to                           */
    float *scales_out;    /* one setting: the scale of every step    */
} replay_job;

static void *replay_many(void *arg)
{
    const replay_job *J = arg;
    const tseries *s = J->s;
    int n = J->n;
    double over1, under1;
    an_thresholds(J->f, 1.0, &over1, &under1);
    const fp8_cast_mode mode = {0};
    float fmax = (float)J->f->max;
    float *scale = malloc((size_t)n * sizeof *scale), *last = malloc((size_t)n * sizeof *last);
    size_t *dq = malloc((size_t)n * (s->n + 1) * sizeof *dq), *head = calloc((size_t)n, sizeof *head),
           *tail = calloc((size_t)n, sizeof *tail);
    float *hv = malloc((s->n + 1) * sizeof *hv); /* what enters the history: Inf for Inf steps */
    float *hf = malloc((s->n + 1) * sizeof *hf); /* ... finite_amax recipes: the finite amax   */
    float *cs = malloc((size_t)n * sizeof *cs);
    int *cev = malloc((size_t)n * sizeof *cev);
    an_bounds *cov = malloc((size_t)n * sizeof *cov), *cun = malloc((size_t)n * sizeof *cun);
    if (!scale || !last || !dq || !head || !tail || !hv || !hf || !cs || !cev || !cov || !cun)
        goto out;
    for (size_t k = 0; k < s->n; k++)
        hv[k] = (s->nf[k] & 1u) ? INFINITY : s->amax[k], hf[k] = s->amax[k];
    for (int i = 0; i < n; i++)
        scale[i] = 1.0f, last[i] = -1.0f;
    for (size_t k = 0; k < s->n; k++) {
        int warm = k < s->warm, half = s->step[k] >= s->half, nc = 0;
        for (int i = 0; i < n; i++) {
            if (J->scales_out)
                J->scales_out[k] = scale[i];
            ssum *sum = &J->sum[i];
            /* settings holding the same scale this step share the work */
            int c = 0;
            while (c < nc && cs[c] != scale[i])
                c++;
            if (c == nc) {
                cs[c] = scale[i];
                cev[c] = an_overflows_at(J->f, &mode, s->amax[k], scale[i], s->nf[k]);
                cov[c] = cun[c] = (an_bounds){0, 0, 0};
                if (!warm && s->hist[k] >= 0) {
                    double scale_inv = (double)(1.0f / scale[i]), over = over1 * scale_inv, under = under1 * scale_inv;
                    int hk = s->hist[k];
                    counts_past(&s->h[hk], J->pool, s->amax[k], s->min_nz[hk], s->inf[hk], over, under, &cov[c], &cun[c]);
                }
                nc++;
            }
            int ev = cev[c];
            if (warm) {
                sum->warm_events += (size_t)ev;
            } else {
                sum->events += (size_t)ev, sum->steps++;
                sum->events_half[half] += (size_t)ev;
                if (s->hist[k] >= 0) {
                    sum->numel += (double)s->numel[s->hist[k]];
                    sum->ov.lo += cov[c].lo, sum->ov.hi += cov[c].hi, sum->ov_est.est += cov[c].est;
                    sum->un.lo += cun[c].lo, sum->un.hi += cun[c].hi, sum->un_est.est += cun[c].est;
                }
            }
            /* end of step: the window's amax (monotonic deque), TE's update rule */
            const float *hs = J->finite[i] ? hf : hv;
            float used = hs[k];
            if (!J->recent[i]) {
                size_t *q = dq + (size_t)i * (s->n + 1);
                while (tail[i] > head[i] && !(hs[q[tail[i] - 1]] > hs[k]))
                    tail[i]--;
                q[tail[i]++] = k;
                while (q[head[i]] + (size_t)J->H[i] <= k)
                    head[i]++;
                used = hs[q[head[i]]];
            }
            if (used != last[i] || !(used > 0) || isinf(used)) {
                scale[i] = fp8_scale_delayed(fmax, used, J->margin[i], J->pow2[i], scale[i]);
                last[i] = used;
            }
        }
    }
out:
    free(scale), free(last), free(dq), free(head), free(tail), free(hv), free(hf);
    free(cs), free(cev), free(cov), free(cun);
    return NULL;
}

static void free_tensor(tseries *s)
{
    free(s->step), free(s->amax), free(s->nf), free(s->hist), free(s->h), free(s->min_nz), free(s->inf), free(s->numel);
}

/* The tensor's series: every step from /steps (any recipe's rows: the amax
 * is the tensor's), else the recorded steps (older files); the histograms
 * of the steps with statistics from the input series' records. */
static int load_tensor(const an_run *a, int t, int in, const chist *hall, tseries *s, int *from_steps)
{
    memset(s, 0, sizeof *s);
    int src = -1;
    size_t best = 0, n, nrs;
    const int *rs = an_tensor_recipes(a, t, &nrs);
    for (size_t i = 0; i < nrs; i++)
        if (an_steps(a, t, rs[i], &n), n > best)
            best = n, src = rs[i];
    size_t nr;
    const size_t *rx = an_series(a, t, in, &nr);
    *from_steps = src >= 0;
    s->n = src >= 0 ? best : nr;
    s->step = malloc((s->n + 1) * sizeof *s->step);
    s->amax = malloc((s->n + 1) * sizeof *s->amax);
    s->nf = malloc((s->n + 1) * sizeof *s->nf);
    s->hist = malloc((s->n + 1) * sizeof *s->hist);
    s->h = malloc((nr + 1) * sizeof *s->h);
    s->min_nz = malloc((nr + 1) * sizeof *s->min_nz);
    s->inf = malloc((nr + 1) * sizeof *s->inf);
    s->numel = malloc((nr + 1) * sizeof *s->numel);
    if (!s->step || !s->amax || !s->nf || !s->hist || !s->h || !s->min_nz || !s->inf || !s->numel)
        return -1;
    if (src >= 0) {
        const size_t *ix = an_steps(a, t, src, &n);
        for (size_t k = 0; k < n; k++) {
            const fp8_step_row *w = an_steprow(a, ix[k]);
            s->step[k] = w->step, s->amax[k] = w->amax, s->nf[k] = w->nonfinite, s->hist[k] = -1;
        }
    } else {
        for (size_t k = 0; k < nr; k++) {
            const fp8_summary *x = an_rec(a, rx[k]);
            s->step[k] = x->step, s->amax[k] = (float)x->amax, s->nf[k] = x->inf_count ? 1u : 0u, s->hist[k] = -1;
        }
    }
    for (size_t q = 0, k = 0; q < nr; q++) { /* histograms at the steps with statistics */
        const fp8_summary *x = an_rec(a, rx[q]);
        while (k < s->n && s->step[k] < x->step)
            k++;
        if (k == s->n || s->step[k] != x->step)
            continue;
        s->h[s->nh] = hall ? hall[rx[q]] : (chist){1, 0, 0};
        s->min_nz[s->nh] = x->min_nonzero, s->inf[s->nh] = x->inf_count, s->numel[s->nh] = x->numel;
        s->hist[k] = (int)s->nh++;
    }
    s->warm = 0; /* warm-up: up to the first real amax, as an_is_warm */
    while (s->warm < s->n && an_is_warm(a, t, s->step[s->warm]))
        s->warm++;
    if (a->warm_end[t] == INT64_MIN) { /* no delayed recipe recorded: the replay's own warm-up */
        while (s->warm < s->n && !(s->amax[s->warm] > 0))
            s->warm++;
        if (s->warm < s->n)
            s->warm++;
    }
    return 0;
}

/* Read the exponent histograms of every tensor's input series, compacted. */
static int load_hists(const an_run *a, const int *input, chist **hs, uint64_t **pool_out)
{
    size_t total = 0;
    for (size_t i = 0; i < a->run->nrecords; i++)
        total += input[an_rec(a, i)->tensor] == (int)an_rec(a, i)->recipe;
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
    uint64_t *pool = fp8__malloc_big(cap * sizeof *pool); /* (huge pages: bigmem.h) */
    enum { BATCH = 8192 };
    uint64_t *buf = malloc((size_t)BATCH * FP8_EXP_BINS * sizeof *buf);
    chist *h = fp8__calloc_big(a->run->nrecords + 1, sizeof *h);
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

/* Certainly dominated: another setting has no more events and a flush upper
 * bound at or below this one's lower bound, one of them strictly better. */
int an_replay_dominated(const ssum *s, int i, int n)
{
    for (int j = 0; j < n; j++) {
        if (j == i || !(s[j].numel > 0))
            continue;
        double lo_i = s[i].un.lo / s[i].numel, hi_j = s[j].un.hi / s[j].numel;
        if (s[j].events <= s[i].events && hi_j <= lo_i && (s[j].events < s[i].events || hi_j < lo_i))
            return 1;
    }
    return 0;
}

static void add_sum(ssum *d, const ssum *x)
{
    d->events += x->events, d->steps += x->steps, d->warm_events += x->warm_events, d->numel += x->numel;
    d->events_half[0] += x->events_half[0], d->events_half[1] += x->events_half[1];
    d->ov.lo += x->ov.lo, d->ov.hi += x->ov.hi, d->un.lo += x->un.lo, d->un.hi += x->un.hi;
    d->ov_est.est += x->ov_est.est, d->un_est.est += x->un_est.est;
}

/* The stated choice: fewest overflow events, then the smallest flush upper
 * bound, then TE's default side (longer history, max, smaller margin). */
static int choose(const ssum *s, int n, int half)
{
    int best = -1;
    for (int k = 0; k < n; k++) {
        if (!(s[k].steps > 0))
            continue;
        size_t ek = half < 0 ? s[k].events : s[k].events_half[half];
        if (best < 0) {
            best = k;
            continue;
        }
        size_t eb = half < 0 ? s[best].events : s[best].events_half[half];
        double uk = s[k].numel > 0 ? s[k].un.hi / s[k].numel : 0, ub = s[best].numel > 0 ? s[best].un.hi / s[best].numel : 0;
        if (ek < eb || (ek == eb && uk < ub))
            best = k;
    }
    return best;
}

/* ---- one run: compute ------------------------------------------------------ */

void an_replay_free(run_replay *R)
{
    free(R->tens), free(R->truth), free(R->by_recipe), free(R->points);
    memset(R, 0, sizeof *R);
}

/* The delayed recipes recorded on tensor t replayed with their own settings. */
static int replay_truth(const an_run *a, int t, const tseries *s, const uint64_t *pool, run_replay *R)
{
    size_t nrs;
    const int *rs = an_tensor_recipes(a, t, &nrs);
    for (size_t ri2 = 0; ri2 < nrs; ri2++) {
        int r = rs[ri2];
        size_t n, nsr;
        const size_t *ix = an_series(a, t, r, &n);
        const size_t *sx = an_steps(a, t, r, &nsr);
        if ((!n && !nsr) || !a->recipe_ok[r] || a->recipes[r].kind != FP8_RECIPE_DELAYED)
            continue;
        if (a->recipes[r].reduce[0]) { /* its history held the group's amax, not this rank's */
            R->nreduced++;
            continue;
        }
        const fp8_recipe *p = &a->recipes[r];
        const fp8_format *fr = an_format(a, t, r);
        float *sc = malloc((s->n + 1) * sizeof *sc);
        truth_row *row = realloc(R->truth, (R->ntruth + 1) * sizeof *row);
        if (!sc || !row) {
            free(sc);
            if (row)
                R->truth = row;
            continue;
        }
        R->truth = row;
        row = &R->truth[R->ntruth];
        memset(row, 0, sizeof *row);
        row->t = t, row->r = r;
        ssum one;
        memset(&one, 0, sizeof one);
        int H = p->history_len, re = p->algo_most_recent, m = p->margin, pw = p->pow2, fi = p->finite_amax;
        replay_job J = {s, pool, fr, 1, &H, &re, &m, &pw, &fi, &one, sc};
        replay_many(&J);
        /* every-step scales (or, in older files, the records' scales) */
        if (nsr) {
            for (size_t q = 0, j = 0; q < nsr; q++) {
                const fp8_step_row *w = an_steprow(a, sx[q]);
                while (j < s->n && s->step[j] < w->step)
                    j++;
                if (j == s->n || s->step[j] != w->step)
                    continue;
                row->checked++;
                row->match += w->scale == sc[j];
            }
        } else {
            for (size_t q = 0, j = 0; q < n; q++) {
                const fp8_summary *x = an_rec(a, ix[q]);
                while (j < s->n && s->step[j] < x->step)
                    j++;
                if (j == s->n || s->step[j] != x->step)
                    continue;
                row->checked++;
                row->match += (float)x->scale == sc[j];
            }
        }
        for (size_t q = 0, j = 0; q < n; q++) { /* the histogram bounds under the recorded scale */
            const fp8_summary *x = an_rec(a, ix[q]);
            while (j < s->n && s->step[j] < x->step)
                j++;
            if (j == s->n || s->step[j] != x->step || s->hist[j] < 0 || R->hist_unreadable)
                continue;
            double over, under;
            an_thresholds(fr, x->scale_inv, &over, &under);
            an_bounds ov, un;
            int hk = s->hist[j];
            counts_past(&s->h[hk], pool, s->amax[j], s->min_nz[hk], s->inf[hk], over, under, &ov, &un);
            double to = (double)x->overflows, tu = (double)x->underflows;
            row->outside += (to < ov.lo || to > ov.hi || tu < un.lo || tu > un.hi);
            row->ovt += to, row->ove += ov.est, row->ovl += ov.lo, row->ovh += ov.hi;
            row->unt += tu, row->une += un.est, row->unl += un.lo, row->unh += un.hi;
            row->recs++;
        }
        truth_sum *b = &R->by_recipe[r];
        b->steps += (double)row->checked, b->match += (double)row->match, b->outside += (double)row->outside;
        b->recs += (double)row->recs, b->ov += row->ovt, b->ovest += row->ove, b->un += row->unt,
            b->unest += row->une;
        R->ntruth++;
        free(sc);
    }
    return 0;
}

/* Tensor t replayed under every setting (two threads, half the settings
 * each), its sums added to the run's, then its recorded delayed recipes. */
static int replay_tensor(const an_run *a, int t, int input, const chist *h, const uint64_t *pool,
                         const fp8_recipe *hyb, run_replay *R)
{
    tseries s;
    int fs_ok;
    if (load_tensor(a, t, input, h, &s, &fs_ok)) {
        free_tensor(&s);
        return 1;
    }
    R->from_records |= !fs_ok;
    int d = an_delayed_recipe(a, t);
    const fp8_format *f = d >= 0 ? an_format(a, t, d) : fp8_recipe_format(hyb, (fp8_role)a->run->tensor_role[t]);
    /* the halves: split at the median step of the series */
    s.half = s.n ? s.step[s.n / 2] : 0;
    ssum per[NSET];
    memset(per, 0, sizeof per);
    int Hs[NSET], rec[NSET], mar[NSET], p2[NSET], fin[NSET];
    for (int k = 0; k < NSET; k++)
        Hs[k] = hist_lens[k / (2 * NM)], rec[k] = (k / NM) % 2, mar[k] = k % NM, p2[k] = 0, fin[k] = 0;
    replay_job half[2] = {{&s, pool, f, NSET / 2, Hs, rec, mar, p2, fin, per, NULL},
                          {&s, pool, f, NSET / 2, Hs + NSET / 2, rec + NSET / 2, mar + NSET / 2, p2 + NSET / 2,
                           fin + NSET / 2, per + NSET / 2, NULL}};
    pthread_t th;
    int threaded = s.n > 256 && pthread_create(&th, NULL, replay_many, &half[1]) == 0;
    replay_many(&half[0]);
    if (threaded)
        pthread_join(th, NULL);
    else
        replay_many(&half[1]);
    for (int k = 0; k < NSET; k++) {
        add_sum(&R->sets[k], &per[k]);
        R->with_ev[k] += per[k].events > 0;
    }
    tensor_row *tr = &R->tens[R->ntensrows++];
    int best = choose(per, NSET, -1);
    *tr = (tensor_row){t, per[0].steps, per[I1024].events, per[I16].events, best, 0, NAN};
    if (best >= 0)
        tr->best_events = per[best].events,
        tr->best_un = per[best].numel > 0 ? per[best].un.hi / per[best].numel : NAN;
    replay_truth(a, t, &s, pool, R);
    free_tensor(&s);
    return 0;
}

/* The front (settings at the very same point merged), the choices and the
 * setting that beats TE's default on both axes. */
static int replay_choose(run_replay *R)
{
    const ssum *sets = R->sets;
    for (int k = 0; k < NSET; k++)
        if (sets[k].numel > 0 && !an_replay_dominated(sets, k, NSET))
            R->front[R->nfront++] = k;
    R->points = calloc((size_t)R->nfront + 1, sizeof *R->points);
    if (!R->points)
        return 1;
    int shown[NSET] = {0};
    for (int i = 0; i < R->nfront; i++) {
        if (shown[i])
            continue;
        const ssum *q = &sets[R->front[i]];
        front_point *pt = &R->points[R->npoints++];
        char *lab = pt->label;
        const size_t cap = sizeof pt->label;
        int m = R->front[i] % NM, nh = 0, recent = 0;
        size_t l = 0;
        lab[0] = 0;
        for (int j = i; j < R->nfront; j++) {
            const ssum *o = &sets[R->front[j]];
            if (shown[j] || R->front[j] % NM != m || o->events != q->events || o->un.lo != q->un.lo ||
                o->un.hi != q->un.hi)
                continue;
            shown[j] = 1;
            if ((R->front[j] / NM) % 2)
                recent = 1;
            else if (l < cap - 16)
                l += (size_t)snprintf(lab + l, cap - l, "%s%d", nh++ ? "," : "max h=", hist_lens[R->front[j] / (2 * NM)]);
        }
        if (recent && l < cap - 20)
            l += (size_t)snprintf(lab + l, cap - l, "%smost_recent", nh ? " = " : "");
        if (l < cap - 8)
            snprintf(lab + l, cap - l, " m=%d", m);
        pt->events = q->events, pt->un_lo_pct = 100 * q->un.lo / q->numel, pt->un_hi_pct = 100 * q->un.hi / q->numel;
    }
    R->best = choose(sets, NSET, -1), R->b1 = choose(sets, NSET, 0), R->both = -1;
    const ssum *te = &sets[I1024];
    for (int k = 0; k < NSET; k++) {
        const ssum *q = &sets[k];
        if (!(q->numel > 0) || k == I1024 || q->events > te->events || q->un.hi / q->numel > te->un.lo / te->numel ||
            (q->events == te->events && q->un.hi >= te->un.lo))
            continue;
        int w = R->both;
        if (w < 0 || q->events < sets[w].events ||
            (q->events == sets[w].events && q->un.hi / q->numel < sets[w].un.hi / sets[w].numel))
            R->both = k;
    }
    return 0;
}

/* Run a replayed: 0, or 1 out of memory (R then freed by the caller). */
int an_replay_compute(const an_run *a, run_replay *R)
{
    int T = a->run->ntensors, rc = 0;
    memset(R, 0, sizeof *R);
    R->best = R->b1 = R->both = -1;
    int *input = malloc(((size_t)T + 1) * sizeof *input);
    R->tens = calloc((size_t)T + 1, sizeof *R->tens);
    R->by_recipe = calloc((size_t)a->run->nrecipes + 1, sizeof *R->by_recipe);
    if (!input || !R->tens || !R->by_recipe) {
        free(input);
        return 1;
    }
    for (int t = 0; t < T; t++)
        R->ntens += (input[t] = an_input_recipe(a, t)) >= 0;
    if (!R->ntens) {
        free(input);
        return 0;
    }
    chist *h = NULL;
    uint64_t *pool = NULL;
    int hr = load_hists(a, input, &h, &pool);
    if (hr == -1) {
        free(input);
        return 1;
    }
    R->hist_unreadable = hr != 0;
    fp8_recipe hyb; /* a tensor without a delayed recipe is replayed in hybrid's format for its role */
    fp8_recipe_parse("hybrid:delayed", &hyb);
    for (int t = 0; t < T && !rc; t++)
        if (input[t] >= 0)
            rc = replay_tensor(a, t, input[t], h, pool, &hyb, R);
    free(h), free(pool), free(input);
    return rc ? rc : replay_choose(R);
}
