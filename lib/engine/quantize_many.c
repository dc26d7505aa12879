/*
 * quantize_many.c — one tensor under several recipes in one sweep
 * (fp8__quantize_many, quantize_internal.h).
 *
 * A probe casts each recorded tensor under its active recipe and its
 * shadows.  One after the other, each cast reads x again from memory; here
 * x is read piece by piece (PIECE elements, a core's L2) and, while a piece
 * is in cache, its own statistics are summed once and every recipe that
 * can casts it and sums its errors; the first cast of each piece fetches
 * the next one.  Each recipe's sums see the same pieces
 * in the same order as its own cast would: the same bits as one cast after
 * another (tests/test_stats.c holds the two side by side).
 *
 * Before the sweep: one amax pass over x, which per-tensor current recipes
 * scale from; the recipe with the shortest groups along x's rows makes its
 * group amaxes first, and every other whose groups are unions of those
 * (1x128 tiles of 1x32 MX groups, rows, 128x128 tiles) takes its own as
 * their maxima, exact, without reading x (the others, as alone).  Where the
 * first makes its ranges piece by piece in the sweep (a late cast,
 * quantize_cast.c: MX, blocks, NVFP4), it casts each piece first and the
 * late casts whose groups nest in its take theirs from it on that piece;
 * casts that cannot wait for the sweep make their own before it;
 * after it: the recipes whose pass goes otherwise (transposed, groups not
 * a divisor of a piece, a smoothed or Hadamard-transformed tensor), each on
 * its own with x's statistics given.  A cast in place (out == x) comes
 * last: within the sweep, last on each piece; after the others, when some
 * cast on their own.  On more threads than x has parts (a tensor of a few
 * pieces), the sweep's casts go side by side (sweep_groups).
 */

#include <stdint.h>
#include <string.h>

#include "fp8_stats.h"
#include "fpenv.h"
#include "parallel.h"
#include "quantize_internal.h"
#include "quantize_many.h"
#include "recipe_state.h"

#define MANY_MAX 64 /* requests in one call */

typedef struct {
    fp8__xpass *xp;
    fp8__cast *cast[MANY_MAX + 1]; /* the casts in the sweep, the one in place (if any) last */
    int n;
    size_t U;
    int P;
    int pf; /* the first cast fetches the next piece (parts of more than one) */
    int G;  /* groups of casts, each a job of its own on every part (sweep_groups) */
    unsigned char grp[MANY_MAX + 1]; /* each cast's group */
    unsigned char failed[64];        /* (jobs: parts x groups, at most MAX_PARTS x GROUPS_MAX) */
} sweep;

#define GROUPS_MAX 8
#define GROUPS_MIN (PIECE / 4 * 3 + 1)

/* part p's pieces: x's statistics (with group G - 1) and group g's casts */
static void sweep_part(sweep *S, int p, int g, float *buf)
{
    size_t u0 = S->U * (size_t)p / (size_t)S->P, u1 = S->U * (size_t)(p + 1) / (size_t)S->P;
    fp8__fenv env;
    fp8__fenv_enter(&env);
    for (size_t u = u0; u < u1; u++) {
        if (S->xp && g == S->G - 1)
            fp8__xpass_units(S->xp, p, u, u + 1);
        /* the first cast of a piece fetches the next piece of the part
         * (from memory while the casts' work is in cache: +5-8 % for a
         * record of 1 + 3 recipes of 2^22 elements) */
        if (S->pf)
            fp8__cast_prefetch(S->cast[0], p, u + 1 < u1 ? PIECE * sizeof(float) : 0);
        for (int k = 0; k < S->n; k++)
            if (S->grp[k] == g)
                fp8__cast_units(S->cast[k], p, u, u + 1, buf);
    }
    fp8__fenv_leave(&env);
}

static void sweep_job(void *ctx, int j)
{
    sweep *S = ctx;
    float *buf = fp8__piece_buf();
    if (!buf) {
        S->failed[j] = 1; /* redone on the caller's thread */
        return;
    }
    sweep_part(S, j / S->G, j % S->G, buf);
}

/* whether a sweep of n casts over numel elements in U pieces and P parts
 * on `threads` goes side by side (a cast in place among them or not) */
static int side_by_side(size_t numel, size_t U, int P, int threads, int n, int in_place)
{
    return !in_place && U == (size_t)P && P < threads && n >= 2 && numel >= GROUPS_MIN;
}

/* the group with the fewest casts (the highest of those) */
static int least(const int *load, int G)
{
    int best = G - 1;
    for (int g = G - 2; g >= 0; g--)
        best = load[g] < load[best] ? g : best;
    return best;
}

/* The casts of a sweep with fewer parts than threads (a tensor of a few
 * pieces, each part one piece), which would leave threads idle, in groups
 * that cast each part side by side: S->G jobs a part.  Each cast still
 * sees its pieces in the same order, on one thread at a time: the same
 * sums.  The casts that take their ranges from the first cast's piece
 * (fp8__cast_leans) stay in its group, after it; x's statistics, when
 * summed here, go with that group too.  The rest go one by one to the
 * group with the fewest casts, counting x's statistics as one; group G - 1
 * is the largest, the first job the calling thread takes (a worker that
 * wakes late then finds the smaller one).  Not with a cast in place, which
 * must come after every other cast of its piece. */
static void sweep_groups(sweep *S, size_t numel, int threads, int in_place, int fine_first)
{
    S->G = 1;
    memset(S->grp, 0, sizeof S->grp);
    if (!side_by_side(numel, S->U, S->P, threads, S->n, in_place))
        return;
    unsigned char chained[MANY_MAX + 1] = {0}; /* the first cast and those leaning on it */
    int chain = 0;
    for (int k = 0; k < S->n; k++)
        chain += chained[k] = (unsigned char)((fine_first && k == 0) || fp8__cast_leans(S->cast[k]));
    int units = S->n - chain + (chain > 0), G = units < GROUPS_MAX ? units : GROUPS_MAX;
    if (G < 2)
        return;
    int load[GROUPS_MAX] = {0};
    load[G - 1] = chain + (S->xp != NULL);
    for (int k = 0; k < S->n; k++) {
        int g = chained[k] ? G - 1 : least(load, G);
        S->grp[k] = (unsigned char)g;
        load[g] += !chained[k];
    }
    S->G = G;
}

void fp8__quantize_many_warm(size_t numel, int threads, int n, int in_place)
{
    size_t U;
    int P;
    fp8__split_shape(numel, PIECE, &U, &P);
    if (side_by_side(numel, U, P, threads, n, in_place))
        fp8__parallel_warm(threads);
}

/* the recipes that cast another tensor than x go their own way */
static int own_way(const fp8_recipe_state *st) { return st->recipe.smooth || st->recipe.rht_active; }

/* request i on its own, x's statistics given */
static void cast_alone(fp8__cast_req *q, const float *x, size_t rows, size_t cols, const fp8_stats *xs, unsigned flags)
{
    *q->stats = *xs;
    q->status = q->codes ? fp8_quantize_codes(q->st, x, rows, cols, q->codes, q->group_scale_inv, q->out, q->stats,
                                              flags | FP8_STATS_X_GIVEN)
                         : fp8_quantize_ex(q->st, x, rows, cols, q->out, q->stats, flags | FP8_STATS_X_GIVEN);
}

/* begin request q's cast (see fp8__cast_begin); NULL when it is done already */
static fp8__cast *begin(fp8__cast_req *q, const float *x, size_t rows, size_t cols, unsigned flags,
                        const fp8_amax_info *known, const fp8__ranges *fine)
{
    fp8__cast *c = NULL;
    q->status = fp8__cast_begin(&c, q->st, x, rows, cols, q->out, q->stats, flags | FP8__STATS_X_LATER, q->codes,
                                q->group_scale_inv, NULL, known, fine);
    return c;
}

/* The request whose groups are the shortest stretches of x's rows that an
 * amax pass measures (a recipe scaled from x by groups one row high, not
 * transposed): begun first, so that the others whose groups nest in its
 * take their amaxes from it (fp8__ranges).  -1 when there is none. */
static int finest(const fp8__cast_req *req, int n, const unsigned char *alone, size_t rows, size_t cols)
{
    int best = -1;
    size_t best_seg = SIZE_MAX;
    for (int i = 0; i < n; i++) {
        const fp8_recipe *r = &req[i].st->recipe;
        if (alone[i] || r->kind == FP8_RECIPE_NONE || r->kind == FP8_RECIPE_DELAYED)
            continue;
        layout L;
        fp8__make_layout(r, rows, cols, &L);
        if (!L.per_tensor && L.br == 1 && L.seg < best_seg)
            best = i, best_seg = L.seg;
    }
    return best;
}

static int joins(const fp8__cast *c, const sweep *S)
{
    size_t U;
    int P;
    return c && fp8__cast_joins(c, &U, &P) && U == S->U && P == S->P;
}

/* a begun cast ended with x's statistics */
static void end(fp8__cast *c, fp8__cast_req *q, const fp8_stats *xs)
{
    if (!c)
        return;
    *q->stats = *xs;
    q->status = fp8__cast_end(c);
}

int fp8__quantize_many(const float *x, size_t rows, size_t cols, unsigned flags, int threads, fp8_stats *xs,
                       const fp8_amax_info *amax, fp8__cast_req *req, int n)
{
    if (!x || !xs || n < 0 || (n > 0 && !req) || n > MANY_MAX || rows == 0 || cols == 0 ||
        rows > SIZE_MAX / cols / sizeof(float))
        return FP8_ERROR(FP8_EINVAL, "fp8_quantize_many: no tensor, no statistics, an empty shape or %d recipes", n);
    for (int i = 0; i < n; i++)
        if (!req[i].st || !req[i].stats)
            return FP8_ERROR(FP8_EINVAL, "fp8_quantize_many: request %d has no %s", i,
                             req[i].st ? "statistics" : "recipe state");
    const size_t numel = rows * cols;
    const int x_given = (flags & FP8_STATS_X_GIVEN) != 0;
    flags &= ~FP8_STATS_X_GIVEN; /* (the requests' own statistics are not given) */
    if (x_given && xs->numel != numel)
        return FP8_ERROR(FP8_EINVAL, "fp8_quantize_many: the given statistics of x are of %llu elements, the tensor "
                                     "has %zu", (unsigned long long)xs->numel, numel);
    fp8__xpass *xp = x_given ? NULL : fp8__xpass_begin(x, numel, flags);
    if (!x_given && !xp)
        return FP8_ERROR(FP8_ENOMEM, "fp8_quantize_many: out of memory");
    fp8__cast *cast[MANY_MAX] = {0};
    unsigned char alone[MANY_MAX] = {0};
    sweep S = {.xp = xp};
    fp8__split_shape(numel, PIECE, &S.U, &S.P);
    int inplace = -1, any_alone = 0;
    for (int i = 0; i < n; i++) {
        req[i].status = FP8_OK;
        if (req[i].out == x)
            inplace = i;
        if (own_way(req[i].st) || fp8__needs_transpose(&req[i].st->recipe))
            alone[i] = 1, any_alone = 1;
    }
    fp8_amax_info known;
    if (amax) {
        known = *amax;
    } else if (x_given) {
        fp8__stats_amax(xs, &known);
    } else {
        fp8_tensor_amax(x, numel, &known);
    }
    /* the cast in place: last on each piece of the sweep (the others'
     * casts and TE's overflow counts read each piece before it is written
     * over), or after all when it cannot join */
    fp8__cast *ip = NULL;
    if (inplace >= 0 && any_alone)
        alone[inplace] = 1; /* after those, on its own */
    /* the finest groups before all, their ranges handed to the rest */
    const int fi = finest(req, n, alone, rows, cols);
    fp8__ranges fine, *fp = NULL;
    if (fi >= 0 && fi != inplace && (cast[fi] = begin(&req[fi], x, rows, cols, flags, &known, NULL)) &&
        fp8__cast_ranges(cast[fi], &fine))
        fp = &fine;
    if (inplace >= 0 && !alone[inplace]) {
        ip = begin(&req[inplace], x, rows, cols, flags, &known, fp);
        /* (ranges the cast in place makes in the sweep come after the
         * others' casts of each piece: not handed on) */
        if (fi == inplace && fp8__cast_ranges(ip, &fine) && !fine.in_sweep)
            fp = &fine;
    }
    const int ip_joins = joins(ip, &S);
    /* a first cast whose ranges are made in the sweep casts each piece
     * before the casts that take theirs from it (it joins the sweep: a late
     * cast's groups divide a piece, quantize_cast.c's late_ok) */
    const int fine_first = fp && fp->in_sweep && joins(cast[fi], &S);
    if (fine_first)
        S.cast[S.n++] = cast[fi];
    for (int i = 0; i < n; i++)
        if (i != inplace && !alone[i]) {
            if (i != fi)
                cast[i] = begin(&req[i], x, rows, cols, flags, &known, fp);
            else if (fine_first)
                continue; /* (first in the sweep, above) */
            if (joins(cast[i], &S))
                S.cast[S.n++] = cast[i];
            else if (cast[i])
                fp8__cast_run(cast[i]); /* its own pass, while x is as given */
        }
    if (ip_joins)
        S.cast[S.n++] = ip;
    S.pf = S.n > 0 && S.U > (size_t)S.P;
    sweep_groups(&S, numel, threads, ip_joins, fine_first);
    /* the sweep: x's statistics and every joining cast, piece by piece,
     * the one in place last on each piece */
    fp8__parallel_for(S.P * S.G, threads, sweep_job, &S);
    for (int j = 0; j < S.P * S.G; j++)
        if (S.failed[j])
            sweep_part(&S, j / S.G, j % S.G, fp8__piece_buf());
    if (xp)
        fp8__xpass_end(xp, xs);
    for (int i = 0; i < n; i++)
        end(cast[i], &req[i], xs);
    if (ip_joins)
        end(ip, &req[inplace], xs);
    for (int i = 0; i < n; i++)
        if (alone[i] && i != inplace)
            cast_alone(&req[i], x, rows, cols, xs, flags);
    if (ip && !ip_joins) {
        fp8__cast_run(ip);
        end(ip, &req[inplace], xs);
    } else if (inplace >= 0 && alone[inplace])
        cast_alone(&req[inplace], x, rows, cols, xs, flags);
    return FP8_OK;
}
