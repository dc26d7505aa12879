/*
 * cast_impl.h — internal: the scalar cast of one float32 bit pattern, shared
 * by the single-value API and the portable bulk kernel.  Pure integer
 * arithmetic, so the floating-point environment cannot change it.
 *
 * Method: write |x| = sig * 2^(e-23) with sig < 2^24.  The format's grid at
 * that magnitude has step 2^(max(e,emin) - mbits), so the kept integer is
 * k = sig >> s with s = 23 - mbits + max(0, emin - e), rounded by the
 * discarded bits.  The magnitude code is ((max(e+bias,1) - 1) << mbits) + k:
 * a carry out of k (k = 2^(mbits+1)) lands in the exponent by itself, and
 * overflow is decided after rounding (OCP OFP8 §5.3, docs/formats.md), by comparing
 * the code with the largest finite magnitude code.
 */
#ifndef FP8_CAST_IMPL_H
#define FP8_CAST_IMPL_H

#include <stdint.h>
#include "f32bits.h"
#include "fp8_format.h"

/* The generator's two rounds of the murmur3 64-bit finaliser on z (a
 * uint64_t, or a vector of them: the vector kernel's lanes), add added
 * after each */
#define FP8_RANDOM_ROUNDS(z, add)                                                                          \
    do {                                                                                                   \
        for (int r_ = 0; r_ < 2; r_++) {                                                                   \
            (z) ^= (z) >> 33;                                                                              \
            (z) *= 0xFF51AFD7ED558CCDull;                                                                  \
            (z) ^= (z) >> 33;                                                                              \
            (z) *= 0xC4CEB9FE1A85EC53ull;                                                                  \
            (z) ^= (z) >> 33;                                                                              \
            (z) += (add);                                                                                  \
        }                                                                                                  \
    } while (0)

/* Counter-based generator: 32 uniform bits for (seed, index).  Two rounds of
 * the murmur3 64-bit finaliser over a keyed counter; no state, so any
 * chunking or thread count gives the same bits for the same element. */
static inline uint32_t fp8__random32(uint64_t seed, uint64_t index)
{
    uint64_t z = index * 0x9E3779B97F4A7C15ull + (seed ^ 0xD1B54A32D192ED03ull);
    FP8_RANDOM_ROUNDS(z, seed * 0x94D049BB133111EBull);
    return (uint32_t)(z >> 32);
}

/* NaN code for a NaN input of sign sgn (sgn is 0 or f->sign_mask).
 * ml_dtypes keeps the input's sign; for the finite-only MX formats its
 * "NaN" is the -0 pattern, flipped by a negative sign. */
static inline uint32_t fp8__nan_code(const fp8_format *f, uint32_t sgn)
{
    switch (f->kind) {
    case FP8_KIND_FNUZ: return f->sign_mask;
    case FP8_KIND_FINITE: return sgn ^ f->sign_mask;
    case FP8_KIND_E8M0: return 0xFF;
    default: return sgn | f->nan_code;
    }
}

static inline uint32_t fp8__e8m0_encode(int round, int sat, uint32_t u, uint32_t rnd, fp8_class *cls)
{
    uint32_t a = u & FP8_F32_ABS;
    if (a > FP8_F32_INF) { *cls = FP8_CLASS_NAN; return 0xFF; }
    /* zero and negatives are outside e8m0: saturate to the smallest value
     * 2^-127 (code 0x00) or give NaN, as ml_dtypes does. */
    if (a == 0 || (u >> 31)) {
        *cls = sat ? FP8_CLASS_SATURATED : FP8_CLASS_OVERFLOW;
        return sat ? 0x00 : 0xFF;
    }
    if (a == FP8_F32_INF) {
        *cls = sat ? FP8_CLASS_SATURATED : FP8_CLASS_OVERFLOW;
        return sat ? 0xFE : 0xFF;
    }
    if (a < 0x800000u) {
        /* float32 subnormal, a * 2^-149; 2^-127 is a == 0x400000 */
        if (a <= 0x400000u) {
            *cls = a == 0x400000u ? FP8_CLASS_EXACT : FP8_CLASS_ROUNDED;
            return 0x00; /* the nearest (and only) code this low is 2^-127 */
        }
        /* ml_dtypes: everything in (2^-127, 2^-126) goes up to 2^-126 */
        uint32_t up = round == FP8_ROUND_NEAREST;
        if (round == FP8_ROUND_STOCHASTIC)
            up = ((uint64_t)(a - 0x400000u) << 10) + rnd >= (1ull << 32);
        *cls = FP8_CLASS_ROUNDED;
        return up;
    }
    int e = (int)(a >> 23) - 127;
    uint32_t frac = a & 0x7FFFFFu;
    uint32_t code = (uint32_t)(e + 127), up = 0;
    if (round == FP8_ROUND_NEAREST)
        up = frac >= 0x400000u;           /* ties (1.5 * 2^e) go up       */
    else if (round == FP8_ROUND_STOCHASTIC)
        up = ((uint64_t)frac << 9) + rnd >= (1ull << 32);
    code += up;
    if (code > 0xFE) {
        *cls = sat || round == FP8_ROUND_ZERO ? FP8_CLASS_SATURATED : FP8_CLASS_OVERFLOW;
        return *cls == FP8_CLASS_SATURATED ? 0xFE : 0xFF;
    }
    *cls = frac ? FP8_CLASS_ROUNDED : FP8_CLASS_EXACT;
    return code;
}

/* Encode float32 bits u.  round: fp8_rounding; sat: nonzero to saturate;
 * rnd: 32 random bits (stochastic rounding only). */
static inline uint32_t fp8__encode_bits(const fp8_format *f, int round, int sat,
                                        uint32_t u, uint32_t rnd, fp8_class *cls)
{
    if (f->kind == FP8_KIND_E8M0)
        return fp8__e8m0_encode(round, sat, u, rnd, cls);
    const uint32_t a = u & FP8_F32_ABS;
    const uint32_t sgn = (u >> 31) ? f->sign_mask : 0;
    const int clamps = sat || f->kind == FP8_KIND_FINITE; /* no Inf, no NaN */

    if (a > FP8_F32_INF) {
        *cls = FP8_CLASS_NAN;
        return fp8__nan_code(f, sgn);
    }
    if (a == FP8_F32_INF) {
        if (clamps) {
            *cls = FP8_CLASS_SATURATED;
            return sgn | f->max_mag;
        }
        *cls = FP8_CLASS_OVERFLOW;
        return f->has_inf ? (sgn | f->inf_code) : fp8__nan_code(f, sgn);
    }
    if (a == 0) {
        *cls = FP8_CLASS_EXACT;
        return f->has_negzero ? sgn : 0;
    }

    int e;
    uint32_t sig;
    if (a >> 23) {
        e = (int)(a >> 23) - 127;
        sig = (a & 0x7FFFFFu) | 0x800000u;
    } else { /* float32 subnormal: normalise */
        int lz = __builtin_clz(a) - 8;
        sig = a << lz;
        e = -126 - lz;
    }
    int s = 23 - f->mbits + (e < f->emin ? f->emin - e : 0);
    uint32_t k, rem, up = 0;
    if (s < 32) {
        k = sig >> s;
        rem = sig & ((1u << s) - 1);
    } else {
        k = 0;
        rem = sig;
    }
    if (round == FP8_ROUND_NEAREST) {
        if (s < 32) {
            uint32_t half = 1u << (s - 1);
            up = rem > half || (rem == half && (k & 1));
        } /* s >= 32: rem < 2^24 < half, rounds down */
    } else if (round == FP8_ROUND_STOCHASTIC) {
        /* P(up) = rem / 2^s, resolved to 2^-32 */
        uint64_t frac32 = s <= 32 ? (uint64_t)rem << (32 - s)
                        : s - 32 < 32 ? rem >> (s - 32) : 0;
        up = frac32 + rnd >= (1ull << 32);
    }
    k += up;
    int biased = e + f->bias;
    if (biased < 1)
        biased = 1;
    uint32_t mag = ((uint32_t)(biased - 1) << f->mbits) + k;

    if (mag > f->max_mag) {
        if (clamps || round == FP8_ROUND_ZERO) {
            *cls = FP8_CLASS_SATURATED;
            return sgn | f->max_mag;
        }
        *cls = FP8_CLASS_OVERFLOW;
        return f->has_inf ? (sgn | f->inf_code) : fp8__nan_code(f, sgn);
    }
    if (mag == 0) {
        *cls = FP8_CLASS_FLUSHED;
        return f->has_negzero ? sgn : 0;
    }
    if (mag < (1u << f->mbits))
        *cls = FP8_CLASS_SUBNORMAL;
    else
        *cls = rem ? FP8_CLASS_ROUNDED : FP8_CLASS_EXACT;
    return sgn | mag;
}

/* float32 bits of sig * 2^p2, for values float32 represents exactly. */
static inline uint32_t fp8__make_float_bits(uint32_t sig, int p2)
{
    if (sig == 0)
        return 0;
    int top = 31 - __builtin_clz(sig);        /* value = 1.x * 2^(top+p2) */
    int ex = top + p2;
    if (ex >= -126)
        return ((uint32_t)(ex + 127) << 23) | ((sig << (23 - top)) & 0x7FFFFFu);
    return sig << (p2 + 149);                 /* float32 subnormal        */
}

static inline uint32_t fp8__decode_bits(const fp8_format *f, uint32_t code)
{
    code &= (f->bits >= 32) ? 0xFFFFFFFFu : ((1u << f->bits) - 1);
    if (f->kind == FP8_KIND_E8M0) {
        if (code == 0xFF)
            return 0x7FC00000u;
        return code ? code << 23 : 0x00400000u;
    }
    uint32_t sign = (code & f->sign_mask) ? 0x80000000u : 0;
    uint32_t mag = code & (f->sign_mask - 1);
    switch (f->kind) {
    case FP8_KIND_IEEE:
        if ((mag & f->inf_code) == f->inf_code)
            return mag == f->inf_code ? (sign | FP8_F32_INF) : (sign | 0x7FC00000u);
        break;
    case FP8_KIND_FN:
        if (mag == f->nan_code)
            return sign | 0x7FC00000u;
        break;
    case FP8_KIND_FNUZ:
        if (code == f->sign_mask)
            return 0x7FC00000u;
        break;
    default:
        break;
    }
    uint32_t E = mag >> f->mbits, M = mag & ((1u << f->mbits) - 1);
    uint32_t bits = E ? fp8__make_float_bits(M | (1u << f->mbits), (int)E - f->bias - f->mbits)
                      : fp8__make_float_bits(M, f->emin - f->mbits);
    return sign | bits;
}

#endif
