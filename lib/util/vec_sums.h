/*
 * vec_sums.h — internal: the lane-wise arithmetic that the vector loops
 * built once per instruction set share where they sum the same things
 * (lib/engine/stats_vec.c's error sums, and the cast kernel's
 * lib/format/kernel_vec.c, which makes the same sums on its way): the
 * same macros, so the same bits.  Include after vec_isa.h.
 */
#ifndef FP8_VEC_SUMS_H
#define FP8_VEC_SUMS_H
#include <string.h>
#if defined(__AVX512F__) || defined(__AVX2__)
#include <immintrin.h>
#endif

/* lane-wise unsigned max / min (one instruction where the ISA has it; the
 * generic vector form compiles to a compare and a blend) */
#if defined(__AVX512F__)
static inline vu16 umax16(vu16 a, vu16 b) { return (vu16)_mm512_max_epu32((__m512i)a, (__m512i)b); }
static inline vu16 umin16(vu16 a, vu16 b) { return (vu16)_mm512_min_epu32((__m512i)a, (__m512i)b); }
#elif defined(__AVX2__)
#define UMINMAX16(name, op)                                                                                \
    static inline vu16 name(vu16 a, vu16 b)                                                            \
    {                                                                                                  \
        __m256i h[2][2], r[2];                                                                         \
        memcpy(h[0], &a, 64), memcpy(h[1], &b, 64);                                                    \
        r[0] = op(h[0][0], h[1][0]), r[1] = op(h[0][1], h[1][1]);                                      \
        vu16 o;                                                                                        \
        memcpy(&o, r, 64);                                                                             \
        return o;                                                                                      \
    }
UMINMAX16(umax16, _mm256_max_epu32)
UMINMAX16(umin16, _mm256_min_epu32)
#else
static inline vu16 umax16(vu16 a, vu16 b) { return (vu16)(((vi16)(a >= b) & (vi16)a) | (~(vi16)(a >= b) & (vi16)b)); }
static inline vu16 umin16(vu16 a, vu16 b) { return (vu16)(((vi16)(a <= b) & (vi16)a) | (~(vi16)(a <= b) & (vi16)b)); }
#endif

/* lane-wise min / max / fused multiply-add, as macros (no vector-by-value
 * calls); FMA(acc, a, b) is acc += a * b, fused where the ISA has it. */
#if defined(__AVX512F__)
#define VMIN16(a, b) ((vf16)_mm512_min_ps((__m512)(a), (__m512)(b)))
#define VMAX16(a, b) ((vf16)_mm512_max_ps((__m512)(a), (__m512)(b)))
#define FMA16(acc, a, b) ((acc) = (vf16)_mm512_fmadd_ps((__m512)(a), (__m512)(b), (__m512)(acc)))
#define FMA8(acc, a, b) ((acc) = (vd8)_mm512_fmadd_pd((__m512d)(a), (__m512d)(b), (__m512d)(acc)))
#else
#define FMA8(acc, a, b) ((acc) += (a) * (b))
#define FMA16(acc, a, b) ((acc) += (a) * (b))
#define VSEL16(m, a, b) ((vf16)(((vi16)(a) & (m)) | ((vi16)(b) & ~(m))))
#define VMIN16(a, b) VSEL16((vi16)((a) <= (b)), a, b)
#define VMAX16(a, b) VSEL16((vi16)((a) >= (b)), a, b)
#endif
/* v's two halves of 8 floats, each widened to 8 doubles (with AVX-512 in
 * one instruction each: GCC lowers the generic conversion in 256-bit
 * pieces and joins them) */
#if defined(__AVX512F__)
#define HALVES(v, lo, hi)                                                                                  \
    do {                                                                                                   \
        __m512 w_;                                                                                         \
        memcpy(&w_, &(v), 64);                                                                             \
        lo = (vd8)_mm512_cvtps_pd(_mm512_castps512_ps256(w_));                                             \
        hi = (vd8)_mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(w_), 1)));      \
    } while (0)
/* the same of the 16 floats at p, each half converted straight from memory
 * (no shuffle to take the upper half out of a register) */
#define HALVES_AT(p, lo, hi)                                                                               \
    do {                                                                                                   \
        lo = (vd8)_mm512_cvtps_pd(_mm256_loadu_ps(p));                                                     \
        hi = (vd8)_mm512_cvtps_pd(_mm256_loadu_ps((p) + 8));                                               \
    } while (0)
#else
#define HALVES(v, lo, hi)                                                                                  \
    do {                                                                                                   \
        vf8 h_[2];                                                                                         \
        memcpy(h_, &(v), 64);                                                                              \
        lo = __builtin_convertvector(h_[0], vd8);                                                          \
        hi = __builtin_convertvector(h_[1], vd8);                                                          \
    } while (0)
#define HALVES_AT(p, lo, hi)                                                                               \
    do {                                                                                                   \
        vf16 a_;                                                                                           \
        memcpy(&a_, (p), 64);                                                                              \
        HALVES(a_, lo, hi);                                                                                \
    } while (0)
#endif

/* a float32 partial v added into the double lanes D */
#define ACC(D, v)                                                                                          \
    do {                                                                                                   \
        vd8 lo_, hi_;                                                                                      \
        HALVES(v, lo_, hi_);                                                                               \
        D += lo_ + hi_;                                                                                    \
    } while (0)
/* one vector's error terms into the partials e2, xq2, q2 and the lane max me */
#define ERR_STEP(xv, qv)                                                                                   \
    do {                                                                                                   \
        vf16 e_ = (xv) - (qv);                                                                             \
        FMA16(e2, e_, e_);                                                                                 \
        FMA16(xq2, xv, qv);                                                                                \
        FMA16(q2, qv, qv);                                                                                 \
        me = VMAX16(me, (vf16)((vi16)e_ & 0x7FFFFFFF));                                                    \
    } while (0)

#endif
