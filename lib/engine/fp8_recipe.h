/*
 * fp8_recipe.h — scaling recipes: how a tensor's scale(s) are chosen.
 *
 * A recipe is named by a spec string (grammar in docs/recipes.md), e.g.
 *   e4m3:delayed:history=1024,algo=max,margin=0   hybrid:delayed
 *   e4m3:current:pow2   e4m3:rowwise   e4m3:block=1x128:ue8m0   mxfp8:floor
 *   nvfp4   e5m2:none
 * fp8_recipe_parse() turns it into an fp8_recipe (plain data); the state
 * that evolves over steps (delayed scaling's amax history and scale) lives
 * in an fp8_recipe_state, one per tensor, so several recipes can run side
 * by side on the same data.
 *
 * Scale convention (docs/recipes.md): q = cast(x * scale), x_hat = decode(q) *
 * scale_inv.  MX and NVFP4 store scale_inv-like "decode" scales in their
 * formats; their per-block values here are likewise given as scale and
 * scale_inv.
 */
#ifndef FP8_RECIPE_H
#define FP8_RECIPE_H

#include <stddef.h>
#include <stdint.h>

#include "fp8_format.h"

/* What a tensor is; hybrid recipes pick E4M3 for the forward roles and
 * E5M2 for gradients (TransformerEngine Format.HYBRID). */
typedef enum {
    FP8_ROLE_ACTIVATION = 0,
    FP8_ROLE_WEIGHT,
    FP8_ROLE_GRADIENT,
    FP8_ROLE_OUTPUT,
    FP8_ROLE_OTHER,
    FP8_NROLE
} fp8_role;

typedef enum {
    FP8_RECIPE_NONE = 0, /* cast with scale 1                               */
    FP8_RECIPE_DELAYED,  /* TE DelayedScaling: scale from the amax history   */
    FP8_RECIPE_CURRENT,  /* TE Float8CurrentScaling / torchao tensorwise     */
    FP8_RECIPE_ROWWISE,  /* one current scale per row (torchao rowwise)      */
    FP8_RECIPE_COLWISE,  /* one current scale per column                     */
    FP8_RECIPE_BLOCK,    /* DeepSeek-V3 / TE Float8BlockScaling tiles        */
    FP8_RECIPE_MX,       /* OCP MX v1.0: 32-element blocks, e8m0 scale       */
    FP8_RECIPE_NVFP4     /* e2m1, 16-element e4m3 block scales + FP32 global */
} fp8_recipe_kind;

/* MX shared-exponent rounding (torchao ScaleCalculationMode names). */
typedef enum {
    FP8_MX_FLOOR = 0, /* OCP spec: 2^(floor(log2 amax) - emax_elem)          */
    FP8_MX_CEIL,      /* 2^(ceil(log2 amax) - emax_elem)                     */
    FP8_MX_RCEIL,     /* 2^ceil(log2(amax / max_elem)): TE/cuBLAS, no clip   */
    FP8_MX_EVEN       /* amax rounded to the element's mantissa, then floor  */
} fp8_mx_round;

typedef struct {
    char spec[320];          /* canonical spec string (every option spelt)  */
    fp8_recipe_kind kind;
    int hybrid;              /* 1: fwd format for forward roles, bwd for gradients */
    fp8_format fwd, bwd;     /* element formats (equal unless hybrid)        */
    fp8_cast_mode cast;      /* rounding and overflow of the element cast    */

    /* delayed (and block with block_delayed: one history per block) */
    int history_len;         /* amax_history_len, >= 1 (default 1024)        */
    int algo_most_recent;    /* 0: max over the history; 1: slot 0 only      */
    int margin;              /* scale *= 2^-margin (default 0)               */
    int finite_amax;         /* 1: an Inf amax stays out of the history; 0
                                (default, TE): it enters and, while in the
                                window, keeps the scale where it was        */

    /* current, rowwise, colwise, block */
    double eps;              /* amax floor: amax = max(amax, eps)            */
    int torchao;             /* torchao: clamp 1e-12, float64 division       */

    /* power-of-two scales: delayed (pre-2023 TE / MS-AMP rule), current and
     * block (TE: clear the mantissa of scale, i.e. round scale down) */
    int pow2;
    int ue8m0;               /* block: scale_inv rounded up to 2^k (DeepSeek-V3.1) */

    /* block: tile of block_rows x block_cols; transposed: quantize the
     * transpose (column-wise orientation), tile read as cols x rows */
    int block_rows, block_cols, transposed;
    int wblock_rows, wblock_cols; /* weights=RxC: the tile for weight tensors
                                     (DeepSeek-V3: 1x128 activations and
                                     gradients, 128x128 weights); 0: same */
    int block_delayed;       /* block + delayed: each block position keeps an
                                amax history (history, algo, margin above) and
                                is cast with the scale its history gave at the
                                end of the previous step: delayed scaling at
                                block granularity (docs/recipes.md)          */

    /* Smooth SwiGLU as a shadow (Fishman et al. 2024): 1 (`smooth`): each
     * column j is multiplied by s_j = 1 / max_i |x_ij| before the cast and
     * x_hat divided by it after, s^-1 Q(s x) (the published form, on the
     * down projection's input); 2 (`smooth=fold`): the columns are divided
     * by the s of a linked input (fp8_probe_smooth_from) before the cast and
     * multiplied by it after (the scale folded into the weight).  Errors and
     * SQNR are of x; the cast's counts and scales of the smoothed tensor. */
    int smooth;

    /* mx / nvfp4 */
    int group;               /* elements per block along a row (32 / 16)     */
    fp8_mx_round mx_round;

    /* nvfp4 as trained in 2025 (NVIDIA's NVFP4 recipe): weights=16x16 (2D
     * scale tiles for weights, reusing wblock_rows/cols), sr_grad (stochastic
     * rounding of gradients), rht (a 16x16 random Hadamard transform of
     * gradients before the cast, signs from rht_seed).  tile2d and
     * rht_active are the role-resolved switches fp8_recipe_for_role sets. */
    int sr_grad, rht;
    uint64_t rht_seed;
    int tile2d, rht_active;

    /* delayed / current: reduce=NAME, the amax is reduced (max) over the
     * ranks of the communicator the probe run registered under NAME before
     * the scale is computed (TransformerEngine's amax reduction group);
     * "" (default): this rank's amax alone.  Letters, digits, '_', '-'. */
    char reduce[24];
} fp8_recipe;

/* Parse a spec.  On error returns FP8_EINVAL; the message names the bad
 * part ("recipe 'e4m3:delyed': unknown kind 'delyed'"). */
int fp8_recipe_parse(const char *spec, fp8_recipe *out);

/* Apply the role-specific parts of a recipe in place (the weights' tile of
 * a block recipe); fp8_recipe_state_alloc does this for its copy. */
void fp8_recipe_for_role(fp8_recipe *r, fp8_role role);

/* 1 when s names an amax reduction group: 1..23 letters, digits, '_', '-'
 * (the recipe option reduce=NAME and fp8_probe_open_mpi's names). */
int fp8_group_name_ok(const char *s);

/* The element format a tensor of this role is cast to. */
const fp8_format *fp8_recipe_format(const fp8_recipe *r, fp8_role role);

const char *fp8_role_name(fp8_role role);
int fp8_role_parse(const char *name, fp8_role *out); /* FP8_EINVAL if unknown */
const char *fp8_recipe_kind_name(fp8_recipe_kind k);

/* ---- scale rules (pure functions, exposed for tests and replay) -------- */

/* TE delayed-scaling update: the new scale from the amax used, or the old
 * one when amax is 0, NaN or Inf; FLT_MAX when fp8_max/amax overflows. */
float fp8_scale_delayed(float fp8_max, float amax, int margin, int pow2, float old_scale);

/* Current scaling: TE (eps floor; bad amax -> 1; pow2 clears the mantissa)
 * or torchao (clamp 1e-12, float64 division; pow2 = 2^floor(log2 scale)). */
float fp8_scale_current(float fp8_max, float amax, double eps, int pow2, int torchao);

/* Block scaling: DeepSeek's scale_inv = amax/448 (ue8m0: rounded up to a
 * power of two) or TE's current rule; amax floored at eps. */
void fp8_scale_block(float fp8_max, float amax, const fp8_recipe *r, float *scale, float *scale_inv);

/* MX shared exponent for a block amax; returns the e8m0 code (0xFF: NaN). */
uint32_t fp8_scale_mx(const fp8_format *elem, float block_amax, fp8_mx_round mode);

/* ---- state (one per tensor and recipe) ---------------------------------- */

/* A recipe's state for one tensor: its delayed history and scales, and the
 * scratch of its last cast.  Opaque: read it through the functions below. */
typedef struct fp8_recipe_state fp8_recipe_state;

/* Largest per-block delayed history a state holds (blocks x history_len
 * floats): 2^26 (256 MB); a cast that needs more is refused (FP8_ENOMEM). */
#define FP8_BLOCK_HISTORY_MAX ((size_t)1 << 26)

/* Allocate the state of recipe r for a tensor of the given role.  Delayed
 * scaling starts with scale 1 and a zero history, as TE does. */
fp8_recipe_state *fp8_recipe_state_alloc(const fp8_recipe *r, fp8_role role);
void fp8_recipe_state_free(fp8_recipe_state *st);
/* An independent copy of st (its history copied, no scratch shared): to
 * cast with a state's current scales without touching it.  NULL when out
 * of memory.  Free it with fp8_recipe_state_free. */
fp8_recipe_state *fp8_recipe_state_copy(const fp8_recipe_state *st);
/* Parse spec and allocate its state for a tensor of role name ("activation",
 * ...): NULL with the parse error's message. */
fp8_recipe_state *fp8_recipe_state_new(const char *spec, const char *role);

/* Delayed scaling: note this step's amax in history slot 0 (max with what
 * the slot already holds: a tensor may be cast more than once per step).
 * As TransformerEngine's fmaxf: NaN is ignored, +Inf enters (and freezes
 * the scale while it is in the window) unless the recipe has finite_amax. */
void fp8_recipe_state_observe(fp8_recipe_state *st, float amax);

/* End of a step: delayed scaling updates the scale from the history, rolls
 * it and zeroes slot 0; other recipes only count the step. */
void fp8_recipe_state_step(fp8_recipe_state *st);

/* What a state holds: its recipe, the format its role casts to, the scale
 * (and 1/scale) delayed scaling's next cast uses (1 for other recipes),
 * and the steps it has completed. */
const fp8_recipe *fp8_recipe_state_recipe(const fp8_recipe_state *st);
const fp8_format *fp8_recipe_state_format(const fp8_recipe_state *st);
float fp8_recipe_state_scale(const fp8_recipe_state *st, float *scale_inv);
int64_t fp8_recipe_state_steps(const fp8_recipe_state *st);

/* fp8_quantize's threads for this state (0 or 1: the calling one; at most
 * 16): a tensor of more than one piece of 32768 elements is cast in parts
 * side by side, the same bits whatever the number. */
void fp8_recipe_state_set_threads(fp8_recipe_state *st, int threads);

#endif
