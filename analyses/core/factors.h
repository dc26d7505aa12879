/*
 * factors.h — a recipe, as applied to one tensor, taken apart into the
 * factors a comparison may change one at a time:
 *
 *   format       element format the tensor is cast to (hybrid resolved by role)
 *   timing       none (scale 1) | delayed (stale amax history) | current (this tensor's amax)
 *   granularity  tensor | row | col | RxC tile (the role's: weights=RxC) | 1xG (MX, NVFP4)
 *   encoding     fp32 | pow2 | ue8m0 | e8m0-floor | e8m0-ceil | e8m0-even | e4m3x2 (NVFP4)
 *   amax floor   eps
 *   delayed      history / algorithm / margin / Inf rule (delayed recipes only)
 *   cast         rounding and overflow mode of the element cast, torchao arithmetic
 *
 * MX with `rceil` is the 1x32 block recipe with UE8M0 scales and no floor
 * (scale_inv = 2^ceil(log2(amax / max_elem))), so both get the same factors.
 * Two recipes compared on a tensor must differ in exactly one of format,
 * timing, granularity, encoding, amax floor and delayed settings, and agree
 * on the cast; a timing comparison ignores the delayed settings.
 */
#ifndef FP8_AN_FACTORS_H
#define FP8_AN_FACTORS_H

#include "fp8_recipe.h"

typedef enum {
    AN_F_FORMAT = 0,
    AN_F_TIMING,
    AN_F_GRANULARITY,
    AN_F_ENCODING,
    AN_F_FLOOR,
    AN_F_DELAYED,
    AN_F_CAST, /* element-cast options: rounding, saturation, NVFP4's transform */
    AN_NFACTOR
} an_factor;

typedef struct {
    char format[24];
    int timing;            /* 0 none, 1 delayed, 2 current               */
    char gran[24];         /* "tensor", "row", "col", "1x128", "128x128", ... */
    char enc[16];
    double eps;
    char delayed[64];      /* "h=1024,max,m=0" (+ ",finite_amax"); "" otherwise */
    char cast[64];         /* "" for nearest-even saturating; else the options */
    int bits;              /* element bits                               */
} an_factors;

/* The factors of recipe r on a tensor of the given role. */
void an_factors_of(const fp8_recipe *r, fp8_role role, an_factors *f);

/* 1 when a and b are the same numerics (every factor equal). */
int an_factors_equal(const an_factors *a, const an_factors *b);

/* A total order on numerics: 0 exactly when an_factors_equal. */
int an_factors_cmp(const an_factors *a, const an_factors *b);

/* The factors in which a and b differ, as a bit mask (1 << an_factor). */
unsigned an_factors_diff(const an_factors *a, const an_factors *b);

/* The one factor in which a and b differ, or -1 (none, or more than one). */
int an_factors_one(const an_factors *a, const an_factors *b);

/* Orientation of a comparison: 1 when a is the "from" side (the baseline
 * of the question: E5M2 before E4M3, delayed before current, coarser before
 * finer, fp32 before power-of-two, no floor before a floor, the longer
 * history / smaller margin before the other), 0 when b is. */
int an_factors_from_first(an_factor k, const an_factors *a, const an_factors *b);

/* Names: the factor ("format", "timing", "granularity", "scale_encoding",
 * "amax_floor", "delayed_settings") and one level of it ("e4m3", "delayed",
 * "1x128", "ue8m0", "eps=0.0001", "h=16,max,m=0"). */
const char *an_factor_name(an_factor k);
const char *an_factor_level(an_factor k, const an_factors *f, char *buf, size_t n);

/* A short canonical label of the whole recipe on this tensor, the same for
 * every spelling of the same numerics: "e4m3 delayed h=1024,max,m=0",
 * "e4m3 current", "e4m3 1x128 fp32", "e4m3 1x32 ue8m0", "e4m3 1x32
 * e8m0-floor", "e2m1 1x16 e4m3x2", with " eps=E" and cast options appended
 * when set. */
const char *an_factors_label(const an_factors *f, char *buf, size_t n);

#endif
