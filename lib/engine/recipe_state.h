/*
 * recipe_state.h — internal: the recipe state's fields, for the engine and
 * the probes of this library (fp8_recipe.h keeps the type opaque).
 */
#ifndef FP8_RECIPE_STATE_H
#define FP8_RECIPE_STATE_H

#include "fp8_recipe.h"

struct fp8_recipe_state {
    fp8_recipe recipe;
    fp8_role role;
    const fp8_format *format;  /* = fp8_recipe_format(recipe, role)         */
    float *history;            /* delayed: amax_history[history_len]        */
    float scale, scale_inv;    /* delayed: the scale the next cast uses     */
    int64_t steps;             /* completed steps                           */
    int recorded;              /* an amax entered slot 0 during this step    */
    float group_amax;          /* current scaling: the amax reduced over the
                                  recipe's group for the next cast, which
                                  then scales from it instead of the
                                  tensor's own amax (NaN, the default: none) */
    float known_amax;          /* delayed scaling without statistics: the
                                  tensor's finite amax for this cast when the
                                  caller has it already (NaN, the default: an
                                  amax pass computes it), with known_inf: it
                                  holds an Inf.  The caller resets both.     */
    int known_inf;
    void *scratch;             /* the per-group arrays of the last cast (group
                                  amaxes, scales, flags: 17 bytes a group),
                                  kept for the next: fresh pages cost more than
                                  a small tensor's cast on some machines.  Owned
                                  by the state (fp8_recipe_state_free; copies:
                                  fp8_recipe_state_copy) */
    size_t scratch_bytes;
    int threads;               /* fp8_quantize's threads (0 or 1: the calling
                                  one; at most 16): a tensor of more than one
                                  piece of 32768 elements is cast in parts side
                                  by side.  The results are the same bits
                                  whatever the number (the probe option
                                  `threads` sets it) */
    /* block_delayed: per block position, a ring of history_len amaxes
     * (slot bhead is this step's; slot-major: bhist[slot * bgroups + g]) and
     * the scale each block casts with; made for the layout of the first cast
     * (bgroups blocks of a brows x bcols tensor) and made again, as at the
     * first step, when a cast has another shape */
    float *bhist, *bscale, *bscale_inv;
    float *bmax;               /* per block, the largest amax in its ring (kept
                                  as the ring moves: a step costs O(blocks), not
                                  O(blocks x history_len)); bscale's allocation */
    size_t bgroups, brows, bcols;
    int bhead;
    /* smooth=fold: the column scales s of the linked input for this cast
     * (NULL: none; the caller sets and resets them) */
    const float *smooth_src;
    size_t smooth_src_n;
};

/* Delayed scaling's note of a cast's amax: the largest finite |x|, or +Inf
 * when the tensor held an Inf (TransformerEngine's rule) unless the recipe
 * has finite_amax. */
void fp8__observe_amax(fp8_recipe_state *st, float finite_amax, int has_inf);

#endif
