/*
 * quantize_scales.c — the scale of every group from its amax, by the
 * reference system's rule for each recipe (recipe.c holds the per-value
 * rules; NVFP4's two-level scales are set here, sixteen blocks at a time
 * by range_vec.c's loop, and MX scales under the OCP rule and block scales
 * four groups at a time where the rule's ordinary case holds for all four).
 */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cast_impl.h"
#include "cast_internal.h"
#include "kernels.h"
#include "quantize_scales.h"
#include "recipe_internal.h"
#include "recipe_state.h"

/* 2^e for e in [-149, 127], exactly, without libm (called per block) */
static float pow2f(int e)
{
    return fp8__bits_to_float(e >= -126 ? (uint32_t)(e + 127) << 23 : 1u << (e + 149));
}

/* nvfp4 (TE NVFP4BlockScaling, docs/recipes.md): S_enc = 448*6/global_amax, block
 * decode scale (block_amax/6)*S_enc stored as e4m3 (RNE, saturating); the
 * elements are cast as x * (S_enc / s_block) and dequantised with
 * s_block * s_global, s_global = 1/S_enc. */
static void nvfp4_scales(float gamax, const uint32_t *amax, size_t ng, float *scale, float *scale_inv,
                         float *s_global)
{
    const fp8_format *e4m3 = fp8_format_find("e4m3", NULL);
    fp8_class cls;
    float S_enc = 1.0f;
    if (gamax > 0.0f) {
        S_enc = (448.0f * 6.0f) / gamax;
        if (isinf(S_enc))
            S_enc = FLT_MAX;
    }
    *s_global = 1.0f / S_enc;
    const float sg = *s_global;
    /* sixteen blocks at a time in the machine's vectors (range_vec.c),
     * the rest here one by one */
    fp8__kernels_pick();
    size_t g = fp8__k.nvfp4_scales(amax, ng, S_enc, sg, scale, scale_inv);
    for (; g < ng; g++) {
        float dec = (fp8__bits_to_float(amax[g]) / 6.0f) * S_enc;
        uint32_t db;
        memcpy(&db, &dec, 4);
        float sb = fp8__bits_to_float(fp8__decode_bits(e4m3, fp8__encode_bits(e4m3, FP8_ROUND_NEAREST, 1, db, 0, &cls)));
        if (sb > 0.0f) {
            scale[g] = S_enc / sb;
            if (isinf(scale[g]))
                scale[g] = FLT_MAX;
            scale_inv[g] = sb * sg;
        } else {
            scale[g] = 0.0f; /* the block's nonzero values all flush */
            scale_inv[g] = 0.0f;
        }
    }
}

/* The MX scale exponent E of a group amax's bits b (finite), by the rules of
 * fp8__scale_mx (recipe.c) written out for a mode known at the loop: 0 for
 * the NaN scale (E > 127), which casts as scale 1 */
static inline int mx_exponent(uint32_t b, fp8_mx_round mode, int emax, int mbits, float fmax)
{
    if (b == 0)
        return -127;
    if (b >= 0x7F800000u) /* (group amaxes are finite; Inf and NaN give the NaN scale) */
        return 0;
    int E;
    switch (mode) {
    case FP8_MX_CEIL:
        E = fp8__floor_log2_bits(b) + !fp8__pow2_bits(b) - emax;
        break;
    case FP8_MX_RCEIL: {
        float r = fp8__bits_to_float(b) / fmax;
        uint32_t rb;
        memcpy(&rb, &r, 4);
        if (rb == 0)
            return -127;
        E = fp8__floor_log2_bits(rb) + !fp8__pow2_bits(rb);
        break;
    }
    case FP8_MX_EVEN:
        if (b >= 0x00800000u) {
            uint32_t rb = (b + (1u << (22 - mbits))) & 0x7F800000u; /* rounded to the element's mantissa: a carry moves the binade */
            E = rb == 0x7F800000u ? 128 : fp8__floor_log2_bits(rb);
        } else {
            E = fp8__floor_log2_bits(b);
        }
        E -= emax;
        break;
    default:
        E = fp8__floor_log2_bits(b) - emax;
        break;
    }
    return E < -127 ? -127 : E > 127 ? 0 : E;
}

/* The OCP rule (floor) four groups at a time where all four amaxes are
 * normal floats with E = floor(log2 amax) - emax >= -126, or 0 (an
 * all-zero group: E = -127, scale_inv 2^-127, scale 2^127): otherwise
 * scale_inv is 2^E and scale 2^-E, both normal, made from the exponent
 * field e alone (2^E: field e - emax; 2^-E: 254 + emax - e).  Returns the
 * groups done (a multiple of four, stopping at the first four that need
 * the general rule's clamps or subnormals); emax >= 1 for every MX
 * element format. */
static size_t mx_floor4(int emax, const uint32_t *amax, size_t ng, float *scale, float *scale_inv)
{
    typedef int32_t v4i __attribute__((vector_size(16)));
    const int32_t lo = (int32_t)(emax + 1) << 23; /* field >= emax + 1: E >= -126 */
    size_t g = 0;
    for (; g + 4 <= ng; g += 4) {
        v4i b; /* (amax bits are of |x|: below 2^31, signed compares hold) */
        memcpy(&b, amax + g, 16);
        v4i z = b == 0, ok = ((b >= lo) & (b < 0x7F800000)) | z;
        if (!(ok[0] & ok[1] & ok[2] & ok[3]))
            break;
        v4i e = b >> 23;
        v4i si = (((e - emax) << 23) & ~z) | (z & 0x00400000), sc = ((((254 + emax) - e) << 23) & ~z) | (z & 0x7F000000);
        memcpy(scale_inv + g, &si, 16);
        memcpy(scale + g, &sc, 16);
    }
    return g;
}

/* MX groups' scales, the mode's rule hoisted out of the loop (the suite
 * holds them against fp8_scale_mx group by group) */
static void mx_scales(const fp8_format *f, fp8_mx_round mode, const uint32_t *amax, size_t ng, float *scale,
                      float *scale_inv)
{
    uint32_t mb;
    const float fmax = (float)f->max;
    memcpy(&mb, &fmax, 4);
    const int emax = fp8__floor_log2_bits(mb), mbits = f->mbits;
    if (mode == FP8_MX_FLOOR) { /* runs of four by the exponent field, the rest by the rule */
        for (size_t g = 0; g < ng;) {
            size_t d = emax >= 1 ? mx_floor4(emax, amax + g, ng - g, scale + g, scale_inv + g) : 0;
            g += d;
            for (size_t k = 0; k < 4 && g < ng; k++, g++) {
                int E = mx_exponent(amax[g], FP8_MX_FLOOR, emax, mbits, fmax);
                scale[g] = pow2f(-E), scale_inv[g] = pow2f(E);
            }
        }
        return;
    }
#define MX_LOOP(M)                                                                                         \
    for (size_t g = 0; g < ng; g++) {                                                                      \
        int E = mx_exponent(amax[g], M, emax, mbits, fmax);                                                \
        scale[g] = pow2f(-E), scale_inv[g] = pow2f(E);                                                     \
    }
    switch (mode) {
    case FP8_MX_CEIL: MX_LOOP(FP8_MX_CEIL) break;
    case FP8_MX_RCEIL: MX_LOOP(FP8_MX_RCEIL) break;
    default: MX_LOOP(FP8_MX_EVEN) break;
    }
#undef MX_LOOP
}

/* Block scales (fp8__scale_block, recipe.c: fp32 scale_inv, or pow2) four
 * groups at a time where the rule's ordinary case holds for all four: the
 * amax floored at eps is > 0, and the scales it gives are normal and
 * finite (IEEE division and a mask of the mantissa: the scalar rule's own
 * operations).  Returns the groups done, a multiple of four, stopping at
 * the first four that need the rule's other cases. */
static size_t block4(float fmax, float eps, int pow2, const uint32_t *amax, size_t ng, float *scale,
                     float *scale_inv)
{
    typedef float v4f __attribute__((vector_size(16)));
    typedef int32_t v4i __attribute__((vector_size(16)));
    const v4f ev = (v4f){0} + eps, fv = (v4f){0} + fmax;
    const v4i nmin = (v4i){0} + 0x00800000, inf = (v4i){0} + 0x7F800000, expo = (v4i){0} + (int32_t)0xFF800000u;
    size_t g = 0;
    for (; g + 4 <= ng; g += 4) {
        v4i ab; /* (finite |x| bits) */
        memcpy(&ab, amax + g, 16);
        v4f a = (v4f)ab;
        v4i lt = a < ev;
        a = (v4f)((lt & (v4i)ev) | (~lt & (v4i)a));
        v4f sc = fv / a, si;
        v4i ok = (a > 0.0f) & ((v4i)a < inf);
        if (pow2) {
            sc = (v4f)((v4i)sc & expo);
            ok &= ((v4i)sc >= nmin) & ((v4i)sc < inf);
            si = 1.0f / sc;
        } else {
            si = a / fv;
            ok &= ((v4i)sc < inf) & ((v4i)si >= nmin);
        }
        if (!(ok[0] & ok[1] & ok[2] & ok[3]))
            break;
        memcpy(scale + g, &sc, 16);
        memcpy(scale_inv + g, &si, 16);
    }
    return g;
}

int fp8__block_state(fp8_recipe_state *st, size_t ng, size_t rows, size_t cols)
{
    if (st->bhist && st->bgroups == ng && st->brows == rows && st->bcols == cols)
        return FP8_OK;
    size_t L = (size_t)st->recipe.history_len;
    if (!ng || ng > FP8_BLOCK_HISTORY_MAX / L)
        return FP8_ERROR(FP8_ENOMEM, "per-block delayed scaling: %zu blocks x a history of %zu is more than %zu "
                                     "floats; choose a shorter history",
                         ng, L, (size_t)FP8_BLOCK_HISTORY_MAX);
    float *h = calloc(ng * L, sizeof *h), *s = malloc(3 * ng * sizeof *s);
    if (!h || !s) {
        free(h), free(s);
        return FP8_ERROR(FP8_ENOMEM, "per-block delayed scaling: out of memory for %zu block histories", ng);
    }
    for (size_t g = 0; g < 2 * ng; g++)
        s[g] = 1.0f; /* as TE starts a tensor: scale 1 until a history holds an amax */
    for (size_t g = 2 * ng; g < 3 * ng; g++)
        s[g] = 0.0f; /* the rings' maxima: empty rings */
    free(st->bhist), free(st->bscale);
    st->bhist = h, st->bscale = s, st->bscale_inv = s + ng, st->bmax = s + 2 * ng;
    st->bgroups = ng, st->brows = rows, st->bcols = cols, st->bhead = 0;
    return FP8_OK;
}

void fp8__block_observe(fp8_recipe_state *st, const uint32_t *gamax, size_t ng)
{
    float *slot = st->bhist + (size_t)st->bhead * st->bgroups;
    for (size_t g = 0; g < ng && g < st->bgroups; g++) {
        float a = fp8__bits_to_float(gamax[g]); /* finite (NaN and Inf stay out of group amaxes) */
        slot[g] = a > slot[g] ? a : slot[g];
    }
}

void fp8__group_scales(fp8_recipe_state *st, size_t g0, const uint32_t *amax, size_t ng, float gamax, float *scale,
                         float *scale_inv, float *s_global)
{
    const fp8_recipe *r = &st->recipe;
    const float fp8max = (float)st->format->max;
    *s_global = 1.0f;
    if (r->kind == FP8_RECIPE_BLOCK && r->block_delayed) { /* the scales the histories gave */
        memcpy(scale, st->bscale + g0, ng * sizeof *scale);
        memcpy(scale_inv, st->bscale_inv + g0, ng * sizeof *scale_inv);
        return;
    }
    if (r->kind == FP8_RECIPE_MX) {
        mx_scales(st->format, r->mx_round, amax, ng, scale, scale_inv);
        return;
    }
    if (r->kind == FP8_RECIPE_BLOCK && !r->ue8m0) { /* runs of four, the rest by the rule */
        for (size_t g = 0; g < ng;) {
            g += block4(fp8max, (float)r->eps, r->pow2, amax + g, ng - g, scale + g, scale_inv + g);
            for (size_t k = 0; k < 4 && g < ng; k++, g++)
                fp8__scale_block(fp8max, fp8__bits_to_float(amax[g]), r, &scale[g], &scale_inv[g]);
        }
        return;
    }
    for (size_t g = 0; g < ng; g++) {
        float a = fp8__bits_to_float(amax[g]);
        switch (r->kind) {
        case FP8_RECIPE_DELAYED:
            scale[g] = st->scale, scale_inv[g] = st->scale_inv;
            break;
        case FP8_RECIPE_CURRENT:
            if (!isnan(st->group_amax))
                a = st->group_amax > a ? st->group_amax : a; /* reduced over the recipe's group */
            /* fall through */
        case FP8_RECIPE_ROWWISE:
        case FP8_RECIPE_COLWISE:
            scale[g] = fp8__scale_current(fp8max, a, r->eps, r->pow2, r->torchao);
            scale_inv[g] = 1.0f / scale[g];
            break;
        case FP8_RECIPE_BLOCK:
            fp8__scale_block(fp8max, a, r, &scale[g], &scale_inv[g]);
            break;
        case FP8_RECIPE_NVFP4:
            nvfp4_scales(gamax, amax, ng, scale, scale_inv, s_global);
            return;
        default:
            scale[g] = scale_inv[g] = 1.0f;
            break;
        }
    }
}

