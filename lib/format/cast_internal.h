/*
 * cast_internal.h — internal: a prepared caster for engines that cast many
 * segments with different scales (the recipes).  Set up once, then run per
 * segment inside one floating-point-environment guard (fpenv.h).
 */
#ifndef FP8_CAST_INTERNAL_H
#define FP8_CAST_INTERNAL_H

#include "fp8_format.h"
#include "kernel_vec.h"

typedef void (*vec_kernel_fn)(FP8_VEC_KERNEL_ARGS);

typedef struct {
    const fp8_format *f;
    fp8_cast_mode mode;
    int vec;          /* the vector kernel applies                          */
    vec_kernel_fn fn;
    vparams p;
} fp8__caster;

void fp8__caster_init(fp8__caster *c, const fp8_format *f, const fp8_cast_mode *mode);

/* whether a cast of n elements of x into out under format f asks for
 * non-temporal stores (vparams.nt): out its own buffer (not x), at least
 * FP8_NT_MIN elements, a format of 8 bits or more (kernel_vec.h) */
static inline int fp8__nt_wanted(const fp8_format *f, const float *x, const float *out, size_t n)
{
    return out && out != x && n >= FP8_NT_MIN && f->bits >= 8;
}
/* whether f's casts take the vector kernel (a caster's vec, without making one) */
int fp8__caster_vec_ok(const fp8_format *f);

/* Cast x[0..n) with (scale, scale_inv): codes and/or out (either may be
 * NULL); class counts are ADDED to cnt.  offset: stochastic index of x[0].
 * The caller holds the fenv guard. */
void fp8__caster_run(const fp8__caster *c, float scale, float scale_inv, const float *x, size_t n,
                     void *codes, float *out, uint64_t cnt[FP8_NCLASS], uint64_t offset);

/* Cast n elements in consecutive groups of glen, group g with gscale[g] /
 * ginv[g], into out and/or codes (either may be NULL); class counts added to cnt; gflags[g] |= 1 when the group had an
 * overflow, |= 2 when it had a flush.  Every scale must be > 0. */
void fp8__caster_run_groups(const fp8__caster *c, const float *x, size_t n, size_t glen, const float *gscale,
                            const float *ginv, float *out, void *codes, uint64_t cnt[FP8_NCLASS],
                            unsigned char *gflags, uint64_t offset);

/* The cast of x[0..n) into out (may be NULL) with the error sums of x and
 * x_hat made on the way (kernel_vec.h's fp8__errsums), per tensor (gscale
 * NULL: scale, scale_inv) or in groups of glen as fp8__caster_run_groups;
 * class counts added to cnt.  Returns 0, having done nothing, when the
 * kernel cannot (the portable kernel, stochastic rounding, e8m0, a format
 * without -0, n not whole vectors or groups, or beyond 2^20 elements). */
int fp8__caster_run_err(const fp8__caster *c, float scale, float scale_inv, const float *x, size_t n,
                        size_t glen, const float *gscale, const float *ginv, unsigned char *gflags, float *out,
                        uint64_t cnt[FP8_NCLASS], fp8__errsums *es);

#endif
