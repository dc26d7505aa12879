/*
 * quantize_cast.c — a cast in three steps (quantize_internal.h): begun
 * (checked, scratch made, the amax pass or the nested groups' amaxes, the
 * scales, the fused pass set up), its fused pass run (whole, or unit by unit
 * beside other casts of the same x), ended (the sums into fp8_stats, the
 * state moved); and a shadow's cast that produces nothing (only the state
 * moves).  The pass itself is quantize.c's (quantize_pass.h).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "f32bits.h"
#include "fpenv.h"
#include "kernels.h"
#include "parallel.h"
#include "quantize_internal.h"
#include "quantize_many.h"
#include "quantize_pass.h"
#include "recipe_internal.h"
#include "recipe_state.h"
#include "scratch.h"

/* Per-block delayed scaling at a cast that produces nothing (a shadow on
 * a step without statistics): the blocks' amaxes into their histories. */
static int block_observe_only(fp8_recipe_state *st, const float *x, size_t rows, size_t cols, fp8_amax_info *ai)
{
    const fp8_recipe *r = &st->recipe;
    const int trans = fp8__needs_transpose(r);
    layout L;
    fp8__make_layout(r, trans ? cols : rows, trans ? rows : cols, &L);
    int e = fp8__block_state(st, L.ngroups, rows, cols);
    if (e != FP8_OK)
        return e;
    size_t numel = rows * cols;
    uint32_t *gamax = malloc(L.ngroups * sizeof *gamax);
    float *xt = trans ? fp8__scratch_take(FP8__SCRATCH_XT, numel * sizeof *xt) : NULL;
    if (!gamax || (trans && !xt)) {
        free(gamax), fp8__scratch_give(FP8__SCRATCH_XT, xt);
        return FP8_ERROR(FP8_ENOMEM, "fp8_quantize: out of memory for %zu block amaxes", L.ngroups);
    }
    const float *X = x;
    if (trans) {
        fp8__transpose(x, rows, cols, xt);
        X = xt;
    }
    memset(gamax, 0, L.ngroups * sizeof *gamax);
    fp8__fenv env;
    fp8__fenv_enter(&env);
    fp8__amax_rows(&L, X, 0, L.R, gamax, NULL); /* the histories take the maxima alone */
    fp8__block_observe(st, gamax, L.ngroups);
    fp8__fenv_leave(&env);
    if (ai)
        fp8_tensor_amax(x, numel, ai);
    free(gamax), fp8__scratch_give(FP8__SCRATCH_XT, xt);
    return FP8_OK;
}

/* ---- a cast in three steps ----------------------------------------------- */

/* One cast under way: begun (validated, scratch made, amax pass and scales
 * done, the fused pass set up), its fused pass run (fp8__cast_run, or unit
 * by unit beside other casts of the same x: fp8__cast_units), then ended
 * (the sums turned into fp8_stats, the state moved, scratch freed). */
struct fp8__cast {
    fp8_recipe_state *st;
    const float *x;
    size_t rows, cols, numel;
    float *out;
    fp8_stats *stats;
    void *codes;
    float *group_scale_inv;
    fp8_amax_info *ai;
    int trans, x_given, want_hist, threads, te_on;
    int own_ranges; /* F's gamax and gminnz: x's group ranges (fp8__cast_ranges) */
    int shared;     /* begun beside other casts of x (a sweep), which may take its ranges */
    layout L;
    fused F;
    float *xt, *qt;
    void *ct;
};

/* the end of a cast that failed or has nothing left to do */
static void cast_free(fp8__cast *c)
{
    if (!c)
        return;
    fp8__parts_free(c->F.parts, c->F.P);
    fp8__scratch_give(FP8__SCRATCH_XT, c->xt), fp8__scratch_give(FP8__SCRATCH_QT, c->qt);
    fp8__scratch_give(FP8__SCRATCH_CT, c->ct);
    free(c);
}

/* The cast's own checks and the two ways it ends at once: nothing to
 * produce (only the state moves).  1 when done (*rc says how), 0 to go on. */
static int cast_trivial(fp8_recipe_state *st, const float *x, size_t rows, size_t cols, float *out,
                        fp8_stats *stats, void *codes, fp8_amax_info *ai, int *rc)
{
    *rc = FP8_OK;
    if (!st || !x)
        *rc = FP8_ERROR(FP8_EINVAL, "fp8_quantize: %s is NULL", st ? "the tensor" : "the recipe state");
    else if (rows == 0 || cols == 0)
        *rc = FP8_ERROR(FP8_EINVAL, "fp8_quantize: empty shape %zux%zu", rows, cols);
    else if (rows > SIZE_MAX / cols / sizeof(float))
        *rc = FP8_ERROR(FP8_EINVAL, "fp8_quantize: shape %zux%zu too large", rows, cols);
    if (*rc != FP8_OK)
        return 1;
    fp8__kernels_pick();
    const fp8_recipe *r = &st->recipe;
    if (out || stats || codes)
        return 0;
    if (r->block_delayed) {
        *rc = block_observe_only(st, x, rows, cols, ai);
        return 1;
    }
    /* nothing to produce: only the recipe's state moves (delayed scaling
     * notes the amax; the other recipes keep no state), by the caller's own
     * amax when it has one (the probes: no second pass over x) */
    if (r->kind == FP8_RECIPE_DELAYED && !ai && !isnan(st->known_amax)) {
        fp8__observe_amax(st, st->known_amax, st->known_inf);
        return 1;
    }
    if (r->kind == FP8_RECIPE_DELAYED || ai) {
        uint32_t amax;
        uint64_t ninf, nnan;
        fp8__amax_info(x, rows * cols, &amax, &ninf, &nnan); /* integer work only */
        if (r->kind == FP8_RECIPE_DELAYED)
            fp8__observe_amax(st, fp8__bits_to_float(amax), ninf > 0);
        if (ai)
            ai->amax = fp8__bits_to_float(amax), ai->inf_count = ninf, ai->nan_count = nnan;
    }
    return 1;
}

/* scratch, all allocated up front so a failure changes nothing: the
 * per-group arrays in the state's scratch (reused cast after cast), the
 * transposes, the parts */
static int cast_scratch(fp8__cast *c)
{
    fp8_recipe_state *st = c->st;
    const layout *L = &c->L;
    size_t ng = L->ngroups, numel = c->numel;
    if (ng > SIZE_MAX / 32)
        return FP8_ERROR(FP8_ENOMEM, "fp8_quantize: %zu groups", ng);
    size_t need = ng * (4 * sizeof(uint32_t) + 1);
    if (st->scratch_bytes < need) {
        void *sp = malloc(need);
        if (!sp)
            return FP8_ERROR(FP8_ENOMEM, "fp8_quantize: out of memory for %zu groups", ng);
        free(st->scratch);
        st->scratch = sp, st->scratch_bytes = need;
    }
    fused *F = &c->F;
    F->gamax = st->scratch, F->gminnz = F->gamax + ng;
    F->scale = (float *)(F->gminnz + ng), F->scale_inv = F->scale + ng;
    F->flags = (unsigned char *)(F->scale_inv + ng);
    memset(F->gamax, 0, ng * sizeof *F->gamax);
    memset(F->flags, 0, ng);
    const size_t cb = (size_t)st->format->code_bytes;
    c->xt = c->trans ? fp8__scratch_take(FP8__SCRATCH_XT, numel * sizeof *c->xt) : NULL;
    c->qt = c->trans && c->out ? fp8__scratch_take(FP8__SCRATCH_QT, numel * sizeof *c->qt) : NULL;
    c->ct = c->trans && c->codes ? fp8__scratch_take(FP8__SCRATCH_CT, numel * cb) : NULL;
    /* the parts (see fused): pieces of PIECE for per-tensor recipes, chunks
     * of whole groups for groups one row high */
    F->L = L, F->cb = cb, F->numel = numel, F->st = st, F->ng = ng, F->s_global = 1.0f;
    F->grouped = !L->per_tensor && L->seg % 16 == 0 && L->C % L->seg == 0 && L->seg <= PIECE;
    F->split = L->per_tensor || (F->grouped && L->br == 1);
    F->unit = L->per_tensor ? PIECE : (PIECE / L->seg) * L->seg;
    F->U = 1, F->P = 1;
    if (F->split)
        fp8__split_shape(numel, F->unit, &F->U, &F->P);
    F->parts = fp8__parts_alloc(F->P, c->want_hist);
    if ((c->trans && !c->xt) || (c->trans && c->out && !c->qt) || !F->parts || !fp8__piece_buf() ||
        (c->trans && c->codes && !c->ct))
        return FP8_ERROR(FP8_ENOMEM, "fp8_quantize: out of memory for a %zux%zu tensor", c->rows, c->cols);
    return FP8_OK;
}

/* Whether cast c's group ranges and scales can be made unit by unit in
 * its fused pass (F->late) instead of by an amax pass before it: groups one
 * row high in memory order that the grouped kernel takes and the vector
 * range kernel measures, in units of PIECE (so that, begun beside others
 * of the same x, it joins their sweep), and scales that need only the
 * group's own amax (MX, blocks) or also the tensor's amax when the caller
 * gives it (NVFP4).  Its ranges are then its own, or (in a sweep) unions
 * of the ones the sweep's first cast makes of each piece (fine in_sweep). */
static int late_ok(const fp8__cast *c, const fp8__ranges *fine, int known_finite)
{
    const layout *L = &c->L;
    const fp8_recipe *r = &c->st->recipe;
    int kind_ok = r->kind == FP8_RECIPE_MX || r->kind == FP8_RECIPE_BLOCK ||
                  (r->kind == FP8_RECIPE_NVFP4 && known_finite);
    int nests = !c->trans && fp8__ranges_nest(fine, L);
    return kind_ok && fp8__caster_vec_ok(c->st->format) && !L->per_tensor && !c->trans && c->F.grouped &&
           c->F.split && fp8__rows_whole(L) && PIECE % L->seg == 0 && (!nests || fine->in_sweep);
}

/* Whether cast c, which wants x's statistics and has no amax from its
 * caller, takes them in a pass of their own before it (fp8_tensor_stats_ex)
 * instead of an amax pass: where that pass would read all of x for the
 * tensor's amax alone (per-tensor current scaling).  x is read twice
 * either way; the first pass, which waited for memory, now does x's share
 * of the work and the cast's own pass, the longer, has less.  The
 * statistics' amax is the amax pass's (the largest finite |x|): the same
 * scale, and the same bits as x's statistics summed in the cast (the same
 * pieces and parts).  Not NVFP4: its first pass measures every block's
 * range and is not idle (measured: slower with x's statistics added). */
static int stats_first(const fp8__cast *c, const fp8_amax_info *known)
{
    const fp8_recipe *r = &c->st->recipe;
    if (!c->stats || c->x_given || c->ai || c->trans || known)
        return 0;
    return r->kind == FP8_RECIPE_CURRENT && c->L.per_tensor;
}

/* 1. the amax pass (recipes that scale from this tensor; a per-tensor one
 * takes the caller's known amax when it has one) and 2. the scales */
static void cast_scales(fp8__cast *c, const fp8_amax_info *known, const fp8__ranges *fine)
{
    fused *F = &c->F;
    const layout *L = &c->L;
    const fp8_recipe *r = &c->st->recipe;
    const int need_amax = r->kind != FP8_RECIPE_NONE && r->kind != FP8_RECIPE_DELAYED;
    uint32_t *gamax = F->gamax, *gminnz = F->gminnz;
    size_t ng = L->ngroups, numel = c->numel;
    if (!need_amax) /* (else the amax pass sets them) */
        for (size_t g = 0; g < ng; g++)
            gminnz[g] = FP8_F32_INF;
    uint32_t tot_amax = 0; /* (delayed scaling needs no amax pass) */
    const int known_finite = known && known->inf_count + known->nan_count < numel;
    if (need_amax && late_ok(c, fine, known_finite)) {
        /* no amax pass: the fused pass makes each unit's ranges and scales
         * before its cast, while the unit is in cache (one read of x less;
         * NVFP4's tensor amax is the caller's, the maximum of the groups') */
        F->late = 1;
        F->minnz = c->stats || c->shared;
        F->fine = !c->trans && fp8__ranges_nest(fine, L) ? fine : NULL; /* (then in_sweep) */
        c->own_ranges = !F->fine && c->shared; /* the sweep's others may take theirs from these */
        if (known_finite)
            memcpy(&tot_amax, &known->amax, 4);
    } else if (need_amax && L->per_tensor && known_finite) {
        /* x's finite amax is known (a float32 value): no pass (gminnz[0] is
         * not read for one group; set to "none" all the same, not left
         * from the last cast) */
        memcpy(&tot_amax, &known->amax, 4);
        gamax[0] = tot_amax, gminnz[0] = FP8_F32_INF;
    } else if (need_amax) {
        F->early = !L->per_tensor && r->kind != FP8_RECIPE_NVFP4;
        /* (ranges made in a sweep are not there yet) */
        F->fine = !c->trans && fp8__ranges_nest(fine, L) && !fine->in_sweep ? fine : NULL;
        F->minnz = c->stats || c->shared;
        c->own_ranges = !L->per_tensor && !c->trans && L->br == 1;
        if (L->per_tensor)
            gminnz[0] = FP8_F32_INF;
        size_t trows = L->br == 1 ? L->R : (L->R + L->br - 1) / L->br;
        size_t aj = L->per_tensor ? F->U : trows < numel / 4096 ? trows : numel / 4096; /* jobs of >= 4096 elements */
        F->AJ = aj < 1 ? 1 : aj > AJOBS ? AJOBS : (int)aj;
        fp8__parallel_for(F->AJ, c->threads, fp8__amax_job, F);
        for (int p = 0; p < F->AJ; p++) {
            tot_amax = F->pam[p] > tot_amax ? F->pam[p] : tot_amax;
            if (L->per_tensor)
                gminnz[0] = F->pmz[p] < gminnz[0] ? F->pmz[p] : gminnz[0];
        }
        if (L->per_tensor)
            gamax[0] = tot_amax;
    }
    /* scales, a range of groups per part (each group's from its own amax
     * and the tensor's) */
    F->tot_amax = tot_amax;
    if (F->late)
        F->SJ = 0; /* made unit by unit in the fused pass */
    else if (F->early)
        F->SJ = F->AJ; /* done: the amax jobs' zero-scale flags */
    else {
        F->SJ = ng >= 4096 ? (int)(ng / 1024 < AJOBS ? ng / 1024 : AJOBS) : 1;
        fp8__parallel_for(F->SJ, c->threads, fp8__scales_job, F);
    }
}

/* 3. the fused pass's parts set up.  TE's overflow count of a per-tensor
 * static scale is taken piece by piece, after each piece's cast while the
 * piece is in cache (x is still whole then, also in place), in the pieces
 * that can hold such a value: not at all when the caller's amax rules it
 * out. */
static void cast_parts(fp8__cast *c, const fp8_amax_info *known)
{
    fused *F = &c->F;
    const fp8_recipe *r = &c->st->recipe;
    /* groups the grouped kernel does not take (a scale not > 0, a
     * subnormal scale_inv) go by segments within their units or, in
     * tiles, their rows' chunks (fp8__fused_units, fused_whole) */
    for (int p = 0; p < F->SJ; p++)
        F->any_off |= F->off_kernel[p];
    float thr = (float)c->st->format->max * F->scale_inv[0];
    c->te_on = c->stats && !c->trans && c->L.per_tensor &&
               (r->kind == FP8_RECIPE_DELAYED || r->kind == FP8_RECIPE_NONE) &&
               (!known || known->inf_count > 0 || known->amax > thr);
    for (int p = 0; p < F->P; p++) {
        pass_ctx *pc = &F->parts[p].c;
        fp8__caster_init(&pc->caster, c->st->format, &r->cast);
        if (!pc->caster.vec)
            F->grouped = 0;
        /* a late cast on its own: its ranges are the first pass over each
         * piece, a light one that would wait for memory; the kernel, the
         * longest, fetches the next piece as it goes (1x128 blocks +20 %,
         * MXFP8 +12 % in make bench's cast of 4096^2).  Where the kernel is
         * the first to read a piece, the hardware's own stream does as
         * well.  In a sweep the first cast of each piece fetches the next
         * one (fp8__cast_prefetch, set by the sweep piece by piece).  A
         * cast on its own whose x is larger than this machine's L3 (32 MB,
         * FP8_PREFETCH_MIN), where the kernel reads x first from memory:
         * the kernel fetches 8 KB ahead of its reads (make bench's e4m3
         * delayed, all statistics of 4096^2, 3.09-3.13 -> 3.26-3.28
         * Gelem/s; current 2.77-2.90 -> 2.82-3.02; without x_hat +9 %), the
         * hardware's stream alone falling behind; on x in the L3 (2^18 to
         * 2^22 elements) it measured 1-3 % slower, so not there */
        pc->caster.p.prefetch = c->shared ? 0 : F->late ? PIECE * sizeof(float) : fp8__prefetch_far(c->numel);
        /* x_hat straight to the caller's out, too large for a cache to
         * keep for its reader: non-temporal stores (fp8__nt_wanted; no
         * read of each line before it is written over).  Not through a
         * transpose's scratch, nor where the engine reads x_hat back (a
         * smoothed or Hadamard-transformed tensor's cast, undone on out
         * afterwards) */
        pc->caster.p.nt = fp8__nt_wanted(c->st->format, c->x, c->out, c->numel) && !c->trans &&
                          !c->st->recipe.smooth && !c->st->recipe.rht_active;
        fp8__moments_init(&pc->mom);
        fp8__moments_init(&pc->xmom);
        pc->hist = c->want_hist ? F->parts[p].hist64 : NULL;
        pc->stats = c->stats != NULL;
        pc->xstats = c->stats && !c->x_given;
        /* x's amax measured on the cast's own pass, piece by piece while the
         * piece is in cache: asked for, or a delayed recipe's note without
         * statistics and without an amax from the caller */
        pc->scan = c->ai || (r->kind == FP8_RECIPE_DELAYED && !c->stats && isnan(c->st->known_amax));
        pc->te_on = c->te_on, pc->te_thr = thr;
    }
    if (!F->grouped && !c->L.per_tensor)
        F->split = 0; /* one part (P stays: the extra parts stay empty) */
    F->X = c->trans ? c->xt : c->x;
    F->OUT = c->trans ? c->qt : c->out;
    F->CODES = c->trans ? c->ct : c->codes;
}

int fp8__cast_begin(fp8__cast **cp, fp8_recipe_state *st, const float *x, size_t rows, size_t cols, float *out,
                    fp8_stats *stats, unsigned options, void *codes, float *group_scale_inv, fp8_amax_info *ai,
                    const fp8_amax_info *known, const fp8__ranges *fine)
{
    *cp = NULL;
    int rc;
    if (cast_trivial(st, x, rows, cols, out, stats, codes, ai, &rc))
        return rc;
    const fp8_recipe *r = &st->recipe;
    const int x_given = stats && (options & (FP8_STATS_X_GIVEN | FP8__STATS_X_LATER));
    if (stats && (options & FP8_STATS_X_GIVEN) && stats->numel != (uint64_t)rows * cols)
        return FP8_ERROR(FP8_EINVAL, "fp8_quantize: the given statistics of x are of %llu elements, the tensor has %zu",
                         (unsigned long long)stats->numel, rows * cols);
    fp8__cast *c = calloc(1, sizeof *c);
    if (!c)
        return FP8_ERROR(FP8_ENOMEM, "fp8_quantize: out of memory");
    c->st = st, c->x = x, c->rows = rows, c->cols = cols, c->numel = rows * cols, c->out = out, c->stats = stats;
    c->codes = codes, c->group_scale_inv = group_scale_inv, c->ai = ai;
    c->trans = fp8__needs_transpose(r);
    c->x_given = x_given;
    c->shared = (options & FP8__STATS_X_LATER) != 0;
    c->want_hist = stats && !x_given && !(options & FP8_STATS_NO_EXP_HIST);
    c->threads = st->threads > 1 ? st->threads : 1;
    fp8__make_layout(r, c->trans ? cols : rows, c->trans ? rows : cols, &c->L);
    if (r->block_delayed && (rc = fp8__block_state(st, c->L.ngroups, rows, cols)) != FP8_OK) {
        free(c); /* its histories, for this shape (made at the first cast) */
        return rc;
    }
    if ((rc = cast_scratch(c)) != FP8_OK) {
        cast_free(c);
        return rc;
    }
    if (c->trans)
        fp8__transpose(x, rows, cols, c->xt);
    c->F.X = c->trans ? c->xt : x;
    fp8_amax_info xk;
    if (stats_first(c, known)) {
        rc = fp8_tensor_stats_ex(x, c->numel, stats, options & FP8_STATS_NO_EXP_HIST, c->threads);
        if (rc != FP8_OK) {
            cast_free(c);
            return rc;
        }
        c->x_given = 1, c->want_hist = 0;
        fp8__stats_amax(stats, &xk);
        known = &xk;
    }
    /* everything below compares, converts or divides floats that may be
     * subnormal: in the default environment (fpenv.h) */
    fp8__fenv env;
    fp8__fenv_enter(&env);
    cast_scales(c, known, fine);
    cast_parts(c, known);
    fp8__fenv_leave(&env);
    *cp = c;
    return FP8_OK;
}

int fp8__cast_ranges(const fp8__cast *c, fp8__ranges *out)
{
    if (!c || !c->own_ranges)
        return 0;
    *out = (fp8__ranges){.R = c->L.R, .C = c->L.C, .seg = c->L.seg, .nbc = c->L.nbc, .amax = c->F.gamax,
                         .minnz = c->F.gminnz, .in_sweep = c->F.late};
    return 1;
}

int fp8__cast_joins(const fp8__cast *c, size_t *U, int *P)
{
    if (!c || !c->F.split || c->trans || c->F.unit != PIECE)
        return 0;
    *U = c->F.U, *P = c->F.P;
    return 1;
}

void fp8__cast_units(fp8__cast *c, int p, size_t u0, size_t u1, float *buf)
{
    part *pp = &c->F.parts[p];
    pp->c.buf = buf;
    fp8__fused_units(&c->F, pp, u0, u1);
}

void fp8__cast_prefetch(fp8__cast *c, int p, uint32_t bytes) { c->F.parts[p].c.caster.p.prefetch = bytes; }

int fp8__cast_leans(const fp8__cast *c) { return c->F.late && c->F.fine; }

void fp8__cast_run(fp8__cast *c)
{
    fused *F = &c->F;
    fp8__parallel_for(F->split ? F->P : 1, c->threads, fp8__fused_job, F);
    for (int p = 0; p < F->P; p++)
        if (F->parts[p].failed) /* no buffer on its thread: here, where there is one */
            fp8__fused_job(F, p);
}

int fp8__cast_end(fp8__cast *c)
{
    if (!c)
        return FP8_OK;
    fused *F = &c->F;
    const layout *L = &c->L;
    fp8_recipe_state *st = c->st;
    const fp8_recipe *r = &st->recipe;
    fp8_stats *stats = c->stats;
    size_t ng = L->ngroups;
    fp8__fenv env;
    fp8__fenv_enter(&env);
    pass_ctx *c0 = &F->parts[0].c;
    for (int p = 1; p < F->P; p++) { /* the parts' sums, in part order */
        const pass_ctx *pc = &F->parts[p].c;
        for (int k = 0; k < FP8_NCLASS; k++)
            c0->cnt[k] += pc->cnt[k];
        fp8__moments_merge(&c0->xmom, &pc->xmom); /* (sums not kept stay empty) */
        fp8__moments_merge(&c0->mom, &pc->mom);
        c0->amax_bits = pc->amax_bits > c0->amax_bits ? pc->amax_bits : c0->amax_bits;
        c0->ninf += pc->ninf, c0->nnan += pc->nnan, c0->te_n += pc->te_n;
    }
    for (int p = 0; L->per_tensor && p < F->P; p++)
        F->flags[0] |= (unsigned char)F->parts[p].tflags;
    if (c->trans && c->out)
        fp8__transpose(c->qt, L->R, L->C, c->out);
    if (c->trans && c->codes)
        fp8__transpose_codes(c->ct, L->R, L->C, F->cb, c->codes);
    if (c->group_scale_inv)
        memcpy(c->group_scale_inv, F->scale_inv, ng * sizeof *F->scale_inv);
    if (c->ai)
        c->ai->amax = fp8__bits_to_float(c0->amax_bits), c->ai->inf_count = c0->ninf, c->ai->nan_count = c0->nnan;
    if (stats) {
        if (c->x_given) {
            fp8_stats xs;
            fp8__keep_x_fields(&xs, stats);
            memset(stats, 0, sizeof *stats);
            fp8__keep_x_fields(stats, &xs);
        } else {
            memset(stats, 0, sizeof *stats);
            fp8__finish_x(stats, &c0->xmom, c->numel);
        }
        fp8__finish_stats(stats, c0->cnt, fp8__err_sums(c0), L, L->per_tensor ? NULL : F->gamax, F->gminnz, F->scale,
                          F->scale_inv, F->flags, F->s_global, st->format, c->threads);
        /* TE defines its count for per-tensor static scales (delayed scaling);
         * under current and grouped scaling a group's own maximum exceeds
         * fp8_max * scale_inv by a float32 rounding now and then, which would
         * cost a pass and mean nothing: not defined there */
        stats->te_overflows = r->kind != FP8_RECIPE_DELAYED && r->kind != FP8_RECIPE_NONE ? UINT64_MAX
                              : c->te_on ? c0->te_n /* counted piece by piece */
                                         : fp8__te_overflow_count(F->X, L, F->scale_inv, F->gamax, (float)stats->amax,
                                                                  (float)st->format->max, stats->inf_count > 0);
        if (c->want_hist)
            fp8__parts_hist(F->parts, F->P, stats->exp_hist);
        stats->numel = c->numel;
    }
    if (r->block_delayed) /* this step's block amaxes enter the histories */
        fp8__block_observe(st, F->gamax, ng);
    if (r->kind == FP8_RECIPE_DELAYED) { /* this step's amax enters slot 0 (TE's amax: Inf when present) */
        float amax = stats ? (float)stats->amax /* x's, computed or given */
                     : !isnan(st->known_amax) ? st->known_amax /* the caller's own amax pass (probes) */
                                               : fp8__bits_to_float(c0->amax_bits); /* c0->scan */
        int inf = stats ? stats->inf_count > 0 : !isnan(st->known_amax) ? st->known_inf : c0->ninf > 0;
        fp8__observe_amax(st, amax, inf);
    }
    fp8__fenv_leave(&env);
    cast_free(c);
    return FP8_OK;
}

int fp8__quantize_core(fp8_recipe_state *st, const float *x, size_t rows, size_t cols, float *out, fp8_stats *stats,
                       unsigned options, void *codes, float *group_scale_inv, fp8_amax_info *ai)
{
    fp8_amax_info known, *kp = NULL;
    if (stats && (options & FP8_STATS_X_GIVEN)) /* x's amax is in its given statistics */
        fp8__stats_amax(stats, &known), kp = &known;
    fp8__cast *c;
    int rc = fp8__cast_begin(&c, st, x, rows, cols, out, stats, options, codes, group_scale_inv, ai, kp, NULL);
    if (rc != FP8_OK || !c)
        return rc;
    fp8__cast_run(c);
    return fp8__cast_end(c);
}
