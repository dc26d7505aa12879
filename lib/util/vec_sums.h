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
#else
/* by arithmetic: a select on an unsigned compare (vec_isa.h's), which GCC
 * keeps in the ISA's registers */
static inline vu16 umax16(vu16 a, vu16 b) { return a ^ ((a ^ b) & (vu16)FP8_LTU(a, b)); }
static inline vu16 umin16(vu16 a, vu16 b) { return b ^ ((a ^ b) & (vu16)FP8_LTU(a, b)); }
#endif

/* AVX-512's lane-wise min / max / fused multiply-add, as macros (no
 * vector-by-value calls); FMA16(acc, a, b) is acc += a * b, fused.  The
 * other builds make these piece by piece (fp8_pfmax, VA_FMA below). */
#if defined(__AVX512F__)
#define VMIN16(a, b) ((vf16)_mm512_min_ps((__m512)(a), (__m512)(b)))
#define VMAX16(a, b) ((vf16)_mm512_max_ps((__m512)(a), (__m512)(b)))
#define FMA16(acc, a, b) ((acc) = (vf16)_mm512_fmadd_ps((__m512)(a), (__m512)(b), (__m512)(acc)))
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
#else
#define HALVES(v, lo, hi)                                                                                  \
    do {                                                                                                   \
        vf8 l_ = __builtin_shufflevector(v, v, 0, 1, 2, 3, 4, 5, 6, 7);                                    \
        vf8 h_ = __builtin_shufflevector(v, v, 8, 9, 10, 11, 12, 13, 14, 15);                              \
        lo = __builtin_convertvector(l_, vd8);                                                             \
        hi = __builtin_convertvector(h_, vd8);                                                             \
    } while (0)
#endif

/* piece-wise max / min for VA_FN (vec_isa.h): unsigned, and float as
 * a >= b ? a : b (VMAX16 with AVX-512: the second where either is NaN) */
#if FP8_NPIECE == 1
#define fp8_pmaxu umax16
#define fp8_pminu umin16
static inline vf16 fp8_pfmax(vf16 a, vf16 b) { return VMAX16(a, b); }
static inline vf16 fp8_pfmin(vf16 a, vf16 b) { return VMIN16(a, b); }
#else
#define FP8_PSEL(m, a, b) (((m) & (fp8_pi)(a)) | (~(m) & (fp8_pi)(b)))
#if defined(__AVX2__)
static inline fp8_pu fp8_pmaxu(fp8_pu a, fp8_pu b) { return (fp8_pu)_mm256_max_epu32((__m256i)a, (__m256i)b); }
static inline fp8_pu fp8_pminu(fp8_pu a, fp8_pu b) { return (fp8_pu)_mm256_min_epu32((__m256i)a, (__m256i)b); }
#else
static inline fp8_pu fp8_pmaxu(fp8_pu a, fp8_pu b) { return (fp8_pu)FP8_PSEL((fp8_pi)(a >= b), a, b); }
static inline fp8_pu fp8_pminu(fp8_pu a, fp8_pu b) { return (fp8_pu)FP8_PSEL((fp8_pi)(a <= b), a, b); }
#endif
static inline fp8_pf fp8_pfmax(fp8_pf a, fp8_pf b) { return (fp8_pf)FP8_PSEL((fp8_pi)(a >= b), a, b); }
static inline fp8_pf fp8_pfmin(fp8_pf a, fp8_pf b) { return (fp8_pf)FP8_PSEL((fp8_pi)(a <= b), a, b); }
#endif

/* acc += a * b on accumulators (fused with AVX-512 only: the error sums'
 * last bits differ between builds, within docs/statistics.md's bounds) */
#if FP8_NPIECE == 1
#define VA_FMA(acc, a, b) FMA16(acc, a, b)
#else
#define VA_FMA(acc, a, b) VA_OP(acc, +, (a) * (b))
#endif

/* a float32 partial v (an af16) added into the double lanes D (an ad8) */
#define ACC(D, v)                                                                                          \
    do {                                                                                                   \
        vf16 accw_ = VA_GET(vf16, v);                                                                      \
        vd8 lo_, hi_;                                                                                      \
        HALVES(accw_, lo_, hi_);                                                                           \
        VA_OPD(D, +, lo_ + hi_);                                                                           \
    } while (0)
/* one vector's error terms into the partials e2, xq2, q2 and the lane max
 * me (af16 accumulators) */
#define ERR_STEP(xv, qv)                                                                                   \
    do {                                                                                                   \
        vf16 e_ = (xv) - (qv);                                                                             \
        VA_FMA(e2, e_, e_);                                                                                \
        VA_FMA(xq2, xv, qv);                                                                               \
        VA_FMA(q2, qv, qv);                                                                                \
        VA_FN(me, fp8_pfmax, (vf16)((vi16)e_ & 0x7FFFFFFF));                                               \
    } while (0)

#endif
