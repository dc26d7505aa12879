/*
 * recipe.c — the scale rules of each reference system, and the recipe
 * state (delayed scaling's amax history, per-block delayed histories).
 * Specs and their parsing: recipe_parse.c.
 *
 * Scale rules follow docs/recipes.md to the letter; each function
 * names the system whose arithmetic it reproduces.  Invariant: a rule never
 * returns a NaN, zero, negative or infinite scale.
 */
#include <fenv.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "f32bits.h"
#include "fp8_recipe.h"
#include "fpenv.h"
#include "recipe_internal.h"
#include "recipe_state.h"

/* ---- names ------------------------------------------------------------------ */

static const char *role_names[FP8_NROLE] = {"activation", "weight", "gradient", "output", "other"};

const char *fp8_role_name(fp8_role role)
{
    return (unsigned)role < FP8_NROLE ? role_names[role] : "?";
}

int fp8_role_parse(const char *name, fp8_role *out)
{
    for (int i = 0; i < FP8_NROLE; i++)
        if (name && strcmp(name, role_names[i]) == 0) {
            *out = (fp8_role)i;
            return FP8_OK;
        }
    return FP8_ERROR(FP8_EINVAL, "unknown role '%s' (activation, weight, gradient, output, other)",
                     name ? name : "(null)");
}

const char *fp8_recipe_kind_name(fp8_recipe_kind k)
{
    static const char *n[] = {"none", "delayed", "current", "rowwise", "colwise", "block", "mx", "nvfp4"};
    return (unsigned)k < sizeof n / sizeof n[0] ? n[k] : "?";
}

void fp8_recipe_for_role(fp8_recipe *r, fp8_role role)
{
    if (r->kind == FP8_RECIPE_BLOCK && role == FP8_ROLE_WEIGHT && r->wblock_rows > 0) {
        r->block_rows = r->wblock_rows;
        r->block_cols = r->wblock_cols;
    }
    if (r->kind == FP8_RECIPE_NVFP4) {
        r->tile2d = role == FP8_ROLE_WEIGHT && r->wblock_rows > 0;
        r->rht_active = r->rht && role == FP8_ROLE_GRADIENT;
        if (r->sr_grad && role == FP8_ROLE_GRADIENT)
            r->cast.round = FP8_ROUND_STOCHASTIC;
    }
}

const fp8_format *fp8_recipe_format(const fp8_recipe *r, fp8_role role)
{
    return (r->hybrid && role == FP8_ROLE_GRADIENT) ? &r->bwd : &r->fwd;
}

/* ---- scale rules ------------------------------------------------------------ */

/* TransformerEngine DelayedScaling (docs/recipes.md): sf = (fp8_max / amax) / 2^margin,
 * kept when amax is not finite and > 0, FLT_MAX when it overflows.  pow2: the
 * pre-2023 TE / MS-AMP rule 2^(floor(log2(fp8_max/amax)) - margin). */
float fp8__scale_delayed(float fp8_max, float amax, int margin, int pow2, float old_scale)
{
    if (!(amax > 0.0f) || !isfinite(amax))
        return old_scale;
    float r = fp8_max / amax;
    if (isinf(r))
        return FLT_MAX;
    if (pow2) {
        int e;
        frexpf(r, &e); /* r = f * 2^e, f in [0.5, 1): floor(log2 r) = e - 1 */
        return ldexpf(1.0f, e - 1 - margin);
    }
    float sf = r / ldexpf(1.0f, margin);
    if (isinf(sf))
        sf = FLT_MAX;
    if (!(sf > 0.0f)) /* margin so large that the scale underflows */
        sf = FLT_MIN;
    return sf;
}

/* TE Float8CurrentScaling: amax = max(amax, eps); amax 0/Inf/NaN -> 1;
 * scale = fp8_max / amax (IEEE float32 division), Inf -> FLT_MAX; pow2
 * clears the mantissa (rounds down).  torchao tensorwise: scale =
 * fp8_max / clamp(amax, 1e-12) in float64, then float32; pow2 takes
 * 2^floor(log2 scale). */
float fp8__scale_current(float fp8_max, float amax, double eps, int pow2, int torchao)
{
    float sf;
    if (torchao) {
        double a = (double)amax;
        if (!(a >= 1e-12)) /* clamp; NaN stays out: our amax is finite */
            a = 1e-12;
        if (isnan((double)amax) || isinf((double)amax))
            return 1.0f;
        double s = (double)fp8_max / a;
        sf = s > (double)FLT_MAX ? FLT_MAX : (float)s;
        if (pow2) {
            int e;
            frexpf(sf, &e);
            sf = ldexpf(1.0f, e - 1);
        }
        return sf;
    }
    float a = amax;
    if (a < (float)eps)
        a = (float)eps;
    if (!(a > 0.0f) || !isfinite(a))
        return 1.0f;
    sf = fp8_max / a;
    if (isinf(sf))
        sf = FLT_MAX;
    if (pow2) {
        uint32_t b;
        memcpy(&b, &sf, 4);
        b &= 0xFF800000u;
        memcpy(&sf, &b, 4);
        if (sf == 0.0f) /* a subnormal scale: keep the smallest normal */
            sf = FLT_MIN;
    }
    return sf;
}

/* Block scaling.  DeepSeek-V3 / DeepGEMM: amax floored (1e-4), x is cast as
 * x * (fp8_max / amax) and dequantised with scale_inv = amax / fp8_max;
 * ue8m0 (DeepSeek-V3.1) rounds scale_inv up to a power of two.  pow2 (TE
 * Float8BlockScaling's default): the current-scaling rule with the mantissa
 * of scale cleared. */
void fp8__scale_block(float fp8_max, float amax, const fp8_recipe *r, float *scale, float *scale_inv)
{
    float a = amax;
    if (a < (float)r->eps)
        a = (float)r->eps;
    if (!(a > 0.0f) || !isfinite(a)) {
        *scale = *scale_inv = 1.0f;
        return;
    }
    if (r->pow2) {
        *scale = fp8__scale_current(fp8_max, a, 0.0, 1, 0);
        *scale_inv = 1.0f / *scale;
        return;
    }
    float si = a / fp8_max;
    if (r->ue8m0) {
        uint32_t b;
        memcpy(&b, &si, 4);
        if (b & 0x7FFFFFu) /* not a power of two: up to the next one */
            b = (b & 0xFF800000u) + 0x800000u;
        if (b == 0) /* underflowed to zero: smallest normal power */
            b = 0x00800000u;
        memcpy(&si, &b, 4);
        *scale_inv = si;
        *scale = 1.0f / si;
        return;
    }
    if (si == 0.0f)
        si = FLT_MIN;
    *scale_inv = si;
    *scale = fp8_max / a;
    if (isinf(*scale))
        *scale = FLT_MAX;
}

/* floor(log2 a) and whether a is a power of two, for finite a > 0 (the
 * bit rules of f32bits.h, shared with the engine's MX scale loop) */
static int floor_log2f(float a)
{
    uint32_t b;
    memcpy(&b, &a, 4);
    return fp8__floor_log2_bits(b);
}

static int is_pow2f(float a)
{
    uint32_t b;
    memcpy(&b, &a, 4);
    return fp8__pow2_bits(b);
}

/* OCP MX v1.0 §6.3 and its variants (docs/recipes.md): X = 2^E with E from the
 * block's amax; E < -127 clamps to -127, E > 127 gives the NaN scale. */
uint32_t fp8__scale_mx(const fp8_format *elem, float amax, fp8_mx_round mode)
{
    if (isnan(amax))
        return 0xFF;
    if (!(amax > 0.0f)) /* all-zero block: the smallest scale */
        return 0x00;
    if (isinf(amax))
        return 0xFF;
    int emax = floor_log2f((float)elem->max);
    int E;
    switch (mode) {
    case FP8_MX_CEIL:
        E = floor_log2f(amax) + !is_pow2f(amax) - emax;
        break;
    case FP8_MX_RCEIL: {
        float r = amax / (float)elem->max;
        if (r == 0.0f)
            return 0x00;
        E = floor_log2f(r) + !is_pow2f(r);
        break;
    }
    case FP8_MX_EVEN: {
        /* round amax to the element's mantissa width (half up), keep the
         * exponent: a carry moves amax to the next binade (torchao EVEN) */
        uint32_t b;
        memcpy(&b, &amax, 4);
        if (b >= 0x00800000u) {
            b = (b + (1u << (22 - elem->mbits))) & FP8_F32_EXP;
            float ra;
            memcpy(&ra, &b, 4);
            E = isinf(ra) ? 128 : floor_log2f(ra);
        } else {
            E = floor_log2f(amax);
        }
        E -= emax;
        break;
    }
    default:
        E = floor_log2f(amax) - emax;
        break;
    }
    if (E < -127)
        E = -127;
    if (E > 127)
        return 0xFF;
    return (uint32_t)(E + 127);
}

/* ---- state ------------------------------------------------------------------ */

fp8_recipe_state *fp8_recipe_state_alloc(const fp8_recipe *r, fp8_role role)
{
    if (!r || (unsigned)role >= FP8_NROLE) {
        FP8_ERROR(FP8_EINVAL, "recipe state: %s", r ? "bad role" : "no recipe");
        return NULL;
    }
    fp8_recipe_state *st = calloc(1, sizeof *st);
    if (!st) {
        FP8_ERROR(FP8_ENOMEM, "recipe state: out of memory");
        return NULL;
    }
    st->recipe = *r;
    fp8_recipe_for_role(&st->recipe, role);
    st->role = role;
    st->format = fp8_recipe_format(&st->recipe, role);
    st->scale = st->scale_inv = 1.0f;
    st->group_amax = NAN;
    st->known_amax = NAN;
    if (r->kind == FP8_RECIPE_DELAYED) {
        st->history = calloc((size_t)r->history_len, sizeof(float));
        if (!st->history) {
            free(st);
            FP8_ERROR(FP8_ENOMEM, "recipe state: out of memory for a history of %d", r->history_len);
            return NULL;
        }
    }
    return st;
}

fp8_recipe_state *fp8_recipe_state_copy(const fp8_recipe_state *st)
{
    if (!st) {
        FP8_ERROR(FP8_EINVAL, "recipe state copy: no state");
        return NULL;
    }
    fp8_recipe_state *c = malloc(sizeof *c);
    float *h = st->history ? malloc((size_t)st->recipe.history_len * sizeof *h) : NULL;
    if (!c || (st->history && !h)) {
        free(c), free(h);
        FP8_ERROR(FP8_ENOMEM, "recipe state copy: out of memory");
        return NULL;
    }
    size_t bn = st->bhist ? st->bgroups * (size_t)st->recipe.history_len : 0;
    float *bh = bn ? malloc(bn * sizeof *bh) : NULL, *bs = bn ? malloc(3 * st->bgroups * sizeof *bs) : NULL;
    if (bn && (!bh || !bs)) {
        free(c), free(h), free(bh), free(bs);
        FP8_ERROR(FP8_ENOMEM, "recipe state copy: out of memory for %zu block histories", st->bgroups);
        return NULL;
    }
    *c = *st;
    if (h)
        memcpy(h, st->history, (size_t)st->recipe.history_len * sizeof *h);
    c->history = h;
    if (bn) {
        memcpy(bh, st->bhist, bn * sizeof *bh);
        memcpy(bs, st->bscale, 3 * st->bgroups * sizeof *bs); /* scales, their inverses, the rings' maxima */
    }
    c->bhist = bh, c->bscale = bs, c->bscale_inv = bs ? bs + st->bgroups : NULL;
    c->bmax = bs ? bs + 2 * st->bgroups : NULL;
    c->format = fp8_recipe_format(&c->recipe, c->role); /* its own recipe's, not the original's */
    c->scratch = NULL, c->scratch_bytes = 0;
    return c;
}

void fp8_recipe_state_free(fp8_recipe_state *st)
{
    if (!st)
        return;
    free(st->history);
    free(st->scratch);
    free(st->bhist);
    free(st->bscale);
    free(st);
}

void fp8__observe_amax(fp8_recipe_state *st, float finite_amax, int has_inf)
{
    fp8_recipe_state_observe(st, has_inf && !st->recipe.finite_amax ? INFINITY : finite_amax);
}

void fp8_recipe_state_observe(fp8_recipe_state *st, float amax)
{
    /* TE's history update takes fmaxf: a NaN amax leaves the slot as it
     * was; an Inf one enters it (finite_amax: it does not) */
    if (!st || !st->history || isnan(amax) || amax < 0.0f || (isinf(amax) && st->recipe.finite_amax))
        return;
    fp8__fenv env;
    fp8__fenv_enter(&env); /* subnormal amaxes must compare as themselves */
    if (amax > st->history[0])
        st->history[0] = amax;
    fp8__fenv_leave(&env);
    st->recorded = 1;
}

/* Per-block delayed scaling at the end of a step: each block's scale from
 * the max of its history (or its latest slot) by the block recipe's rule
 * (floor eps, fp32 / ue8m0 / pow2), divided by 2^margin; a history of zeros
 * keeps the scale (a new block position: 1, as TE starts a tensor).  Then
 * the ring moves on and the new slot is zeroed.
 *
 * The max of a ring is kept in bmax (amaxes are finite and >= 0): this
 * step's slot only grew during the step, so at its end the max is the kept
 * one or that slot's; when the slot the ring drops held the max, the ring
 * is searched again (rarely: it held the largest of history_len values).
 * The same maxima as searching every ring at every step, which cost
 * blocks x history_len reads a step (the trainer's default 1x128 shadow
 * with a history of 1024: two thirds of a training step). */
static void block_step(fp8_recipe_state *st)
{
    const fp8_recipe *r = &st->recipe;
    size_t ng = st->bgroups, L = (size_t)r->history_len;
    const float fmax = (float)st->format->max, m = ldexpf(1.0f, r->margin);
    fp8__fenv env;
    fp8__fenv_enter(&env);
    const float *cur = st->bhist + (size_t)st->bhead * ng;
    for (size_t g = 0; g < ng; g++) {
        float a = cur[g];
        if (!r->algo_most_recent) {
            st->bmax[g] = a > st->bmax[g] ? a : st->bmax[g];
            a = st->bmax[g];
        }
        if (!(a > 0.0f) || !isfinite(a))
            continue;
        float s, si;
        fp8__scale_block(fmax, a, r, &s, &si);
        s /= m, si *= m; /* powers of two: exact */
        if (!(s > 0.0f))
            s = FLT_MIN, si = 1.0f / FLT_MIN;
        st->bscale[g] = s, st->bscale_inv[g] = si;
    }
    st->bhead = (int)(((size_t)st->bhead + 1) % L);
    float *drop = st->bhist + (size_t)st->bhead * ng;
    for (size_t g = 0; g < ng; g++) {
        float old = drop[g];
        drop[g] = 0.0f;
        if (r->algo_most_recent || !(old > 0.0f) || old != st->bmax[g])
            continue;
        float a = 0.0f;
        for (size_t k = 0; k < L; k++)
            a = st->bhist[k * ng + g] > a ? st->bhist[k * ng + g] : a;
        st->bmax[g] = a;
    }
    fp8__fenv_leave(&env);
}

/* The largest of h[0..L) as the plain loop finds it (m = h[0], then m =
 * h[i] wherever h[i] > m: a NaN is passed over unless it is h[0]), sixteen
 * lanes at a time (four 4-lane vectors, what any x86-64 has): each lane
 * runs the plain loop from h[0] over its share, and the lanes' results are
 * met the same way.  A probe steps every delayed recipe at every training
 * step, over histories of 1024. */
static float history_max(const float *h, int L)
{
    typedef float f4v __attribute__((vector_size(16)));
    typedef int32_t i4v __attribute__((vector_size(16)));
    float m = h[0];
    int i = 0;
    if (L >= 16) {
        f4v a0 = (f4v){0} + m, a1 = a0, a2 = a0, a3 = a0; /* named: kept in registers */
#define LANE_MAX(a, at)                                                                                    \
    do {                                                                                                   \
        f4v v_;                                                                                            \
        memcpy(&v_, at, sizeof v_);                                                                        \
        i4v gt_ = v_ > a;                                                                                  \
        a = (f4v)(((i4v)v_ & gt_) | ((i4v)a & ~gt_));                                                      \
    } while (0)
        for (; i + 16 <= L; i += 16) {
            LANE_MAX(a0, h + i);
            LANE_MAX(a1, h + i + 4);
            LANE_MAX(a2, h + i + 8);
            LANE_MAX(a3, h + i + 12);
        }
#undef LANE_MAX
        const f4v acc[4] = {a0, a1, a2, a3};
        for (int k = 0; k < 4; k++)
            for (int l = 0; l < 4; l++)
                if (acc[k][l] > m)
                    m = acc[k][l];
    }
    for (; i < L; i++)
        if (h[i] > m)
            m = h[i];
    return m;
}

void fp8_recipe_state_step(fp8_recipe_state *st)
{
    if (!st)
        return;
    st->steps++;
    st->recorded = 0;
    if (st->bhist && st->recipe.block_delayed)
        block_step(st);
    if (!st->history)
        return;
    const fp8_recipe *r = &st->recipe;
    int L = r->history_len;
    fp8__fenv env;
    fp8__fenv_enter(&env);
    float amax = r->algo_most_recent ? st->history[0] : history_max(st->history, L);
    st->scale = fp8__scale_delayed((float)st->format->max, amax, r->margin, r->pow2, st->scale);
    st->scale_inv = 1.0f / st->scale;
    /* roll left by one: new[i] = old[i+1], new[L-1] = old[0]; zero slot 0 */
    float first = st->history[0];
    memmove(st->history, st->history + 1, (size_t)(L - 1) * sizeof(float));
    st->history[L - 1] = first;
    st->history[0] = 0.0f;
    fp8__fenv_leave(&env);
}

/* ---- public rules: the same, inside the floating-point guard ---------------- */

float fp8_scale_delayed(float fp8_max, float amax, int margin, int pow2, float old_scale)
{
    fp8__fenv env;
    fp8__fenv_enter(&env);
    float r = fp8__scale_delayed(fp8_max, amax, margin, pow2, old_scale);
    fp8__fenv_leave(&env);
    return r;
}

float fp8_scale_current(float fp8_max, float amax, double eps, int pow2, int torchao)
{
    fp8__fenv env;
    fp8__fenv_enter(&env);
    float r = fp8__scale_current(fp8_max, amax, eps, pow2, torchao);
    fp8__fenv_leave(&env);
    return r;
}

void fp8_scale_block(float fp8_max, float amax, const fp8_recipe *r, float *scale, float *scale_inv)
{
    fp8__fenv env;
    fp8__fenv_enter(&env);
    fp8__scale_block(fp8_max, amax, r, scale, scale_inv);
    fp8__fenv_leave(&env);
}

uint32_t fp8_scale_mx(const fp8_format *elem, float block_amax, fp8_mx_round mode)
{
    fp8__fenv env;
    fp8__fenv_enter(&env);
    uint32_t r = fp8__scale_mx(elem, block_amax, mode);
    fp8__fenv_leave(&env);
    return r;
}

const fp8_recipe *fp8_recipe_state_recipe(const fp8_recipe_state *st) { return st ? &st->recipe : NULL; }

const fp8_format *fp8_recipe_state_format(const fp8_recipe_state *st) { return st ? st->format : NULL; }

float fp8_recipe_state_scale(const fp8_recipe_state *st, float *scale_inv)
{
    if (scale_inv)
        *scale_inv = st ? st->scale_inv : NAN;
    return st ? st->scale : NAN;
}

int64_t fp8_recipe_state_steps(const fp8_recipe_state *st) { return st ? st->steps : -1; }

void fp8_recipe_state_set_threads(fp8_recipe_state *st, int threads)
{
    if (st)
        st->threads = threads < 0 ? 0 : threads > 16 ? 16 : threads;
}
