/*
 * kernel_lanes.h — internal to kernel_vec.c (included there once, built
 * with it per instruction set): the cast kernel's lane-wise helpers — whole
 * masks as one test, the hot path's range test, the rounded lanes' count,
 * the wide path's classes as lane bits, the codes' narrowing stores,
 * stochastic rounding's counters and its lanes below the normal range,
 * x_hat's non-temporal stores, the largest of a scale array.
 */
#ifndef FP8_KERNEL_LANES_H
#define FP8_KERNEL_LANES_H
#include <stdint.h>
#include <string.h>
#if defined(__AVX512F__) || defined(__AVX2__)
#include <immintrin.h>
#endif

#include "cast_impl.h"
#include "f32bits.h"
#include "kernel_vec.h"
#include "vec_isa.h"
#include "vec_sums.h"

typedef uint8_t vb __attribute__((vector_size(16)));

/* 1 when every lane of mask m (-1/0 lanes) is set. */
static inline int all_lanes(vi16 m)
{
#if defined(__AVX512F__)
    __m512i v;
    memcpy(&v, &m, sizeof v);
    return _mm512_cmpeq_epi32_mask(v, _mm512_set1_epi32(-1)) == 0xFFFF;
#elif defined(__AVX2__)
    __m256i lo = (__m256i)FP8_P32(m, 0), hi = (__m256i)FP8_P32(m, 1);
    return _mm256_movemask_ps(_mm256_castsi256_ps(_mm256_and_si256(lo, hi))) == 0xFF;
#else
    for (int l = 0; l < VL; l++)
        if (!m[l])
            return 0;
    return 1;
#endif
}

/* Bit l set when lane l of mask m (-1/0 lanes) is set. */
static inline unsigned lane_bits(vi16 m)
{
#if defined(__AVX512F__)
    __m512i v;
    memcpy(&v, &m, sizeof v);
    return _mm512_cmpeq_epi32_mask(v, _mm512_set1_epi32(-1));
#elif defined(__AVX2__)
    return (unsigned)_mm256_movemask_ps((__m256)FP8_P32(m, 0)) |
           (unsigned)_mm256_movemask_ps((__m256)FP8_P32(m, 1)) << 8;
#else
    unsigned b = 0;
    for (int l = 0; l < VL; l++)
        b |= (m[l] != 0) << l;
    return b;
#endif
}

/* 1 when every lane of a (|y|'s float32 bits) is 0 or in [lo, lo + range]:
 * the hot path's condition (with AVX-512 straight from the compare masks;
 * lo and range scalars there, vectors elsewhere: kernel_body's KV) */
#if defined(__AVX512F__)
static inline int all_in_range(vu16 a, uint32_t lo, uint32_t range)
{
    __m512i v;
    memcpy(&v, &a, sizeof v);
    __mmask16 k = _mm512_cmple_epu32_mask(_mm512_sub_epi32(v, _mm512_set1_epi32((int)lo)),
                                          _mm512_set1_epi32((int)range)) |
                  _mm512_testn_epi32_mask(v, v);
    return k == 0xFFFF;
}
#elif defined(__AVX2__)
/* (piece by piece: a - lo <= range where min(a - lo, range) is a - lo) */
static inline int all_in_range(vu16 a, vu16 lo, vu16 range)
{
    __m256i r = (__m256i)FP8_P32(range, 0), z = _mm256_setzero_si256();
    __m256i a0 = (__m256i)FP8_P32(a, 0), a1 = (__m256i)FP8_P32(a, 1);
    __m256i t0 = _mm256_sub_epi32(a0, (__m256i)FP8_P32(lo, 0)), t1 = _mm256_sub_epi32(a1, (__m256i)FP8_P32(lo, 1));
    __m256i k0 = _mm256_or_si256(_mm256_cmpeq_epi32(_mm256_min_epu32(t0, r), t0), _mm256_cmpeq_epi32(a0, z));
    __m256i k1 = _mm256_or_si256(_mm256_cmpeq_epi32(_mm256_min_epu32(t1, r), t1), _mm256_cmpeq_epi32(a1, z));
    return _mm256_movemask_ps(_mm256_castsi256_ps(_mm256_and_si256(k0, k1))) == 0xFF;
}
#else
static inline int all_in_range(vu16 a, vu16 lo, vu16 range) { return all_lanes(VLE(a - lo, range) | VEQ(a, 0)); }
#endif

/* how many lanes of v & m are nonzero (AVX-512: one test of v against m) */
static inline unsigned count_nonzero(vu16 v, vu16 m)
{
#if defined(__AVX512F__)
    __m512i w, k;
    memcpy(&w, &v, sizeof w);
    memcpy(&k, &m, sizeof k);
    return (unsigned)__builtin_popcount(_mm512_test_epi32_mask(w, k));
#elif defined(__AVX2__)
    v &= m;
    __m256i z = _mm256_setzero_si256();
    __m256 z0 = _mm256_castsi256_ps(_mm256_cmpeq_epi32((__m256i)FP8_P32(v, 0), z));
    __m256 z1 = _mm256_castsi256_ps(_mm256_cmpeq_epi32((__m256i)FP8_P32(v, 1), z));
    unsigned zero = (unsigned)_mm256_movemask_ps(z0) | (unsigned)_mm256_movemask_ps(z1) << 8;
    return (unsigned)__builtin_popcount(~zero & 0xFFFFu);
#else
    return (unsigned)__builtin_popcount(~lane_bits(VEQ(v & m, 0)) & 0xFFFFu);
#endif
}

/* The classes of a vector on kernel_body's wide path as lane bits (lane l:
 * bit l), for popcount to count (as vectors of -1/0 lanes subtracted into
 * counters they took a sixth of a per-tensor cast of spiky data, which
 * takes that path): sub the lanes below min normal, flush those rounded to
 * 0 from nonzero, subres those rounded to a subnormal (k, the path's
 * round(|y| / q), below lowsub), round those rounded up to min normal or
 * normal with bits below the format's, subnz the nonzero lanes below min
 * normal.  wide_of makes them from the compares: the lanes below min
 * normal, the zero lanes of |y| and of k, those of k below lowsub and the
 * lanes with bits below the format's. */
typedef struct {
    unsigned sub, flush, subres, round, subnz;
} wide_lanes;
static inline wide_lanes wide_of(unsigned sub, unsigned az, unsigned kz, unsigned low, unsigned inexact)
{
    return (wide_lanes){.sub = sub,
                        .flush = sub & kz & ~az,
                        .subres = sub & ~kz & low,
                        .round = ((sub & ~low) | (~sub & inexact)) & 0xFFFFu,
                        .subnz = sub & ~az};
}
#if defined(__AVX512F__)
/* (a: |y|'s bits; the compare masks straight) */
static inline wide_lanes wide_classes(vu16 a, vu16 k, uint32_t lo_bits, uint32_t lowsub, uint32_t low_mask)
{
    __m512i va, vk;
    memcpy(&va, &a, sizeof va);
    memcpy(&vk, &k, sizeof vk);
    return wide_of(_mm512_cmplt_epu32_mask(va, _mm512_set1_epi32((int)lo_bits)), _mm512_testn_epi32_mask(va, va),
                   _mm512_testn_epi32_mask(vk, vk), _mm512_cmplt_epu32_mask(vk, _mm512_set1_epi32((int)lowsub)),
                   _mm512_test_epi32_mask(va, _mm512_set1_epi32((int)low_mask)));
}
#else
/* (subv: the lanes below min normal as a -1/0 vector, which the path's
 * selects use; lane_bits of each compare.  The baseline build, which has
 * no wide path, compiles it unused) */
static inline wide_lanes wide_classes(vi16 subv, vu16 a, vu16 k, vu16 lowsub, vu16 low_mask)
{
    return wide_of(lane_bits(subv), lane_bits(VEQ(a, 0)), lane_bits(VEQ(k, 0)), lane_bits(VLT(k, lowsub)),
                   ~lane_bits(VEQ(a & low_mask, 0)));
}
#endif

#if defined(__AVX512F__)
/* lane-wise m ? a : b, m lane bits */
static inline vu16 sel_bits(unsigned m, vu16 a, vu16 b)
{
    __m512i wa, wb;
    memcpy(&wa, &a, sizeof wa);
    memcpy(&wb, &b, sizeof wb);
    __m512i r = _mm512_mask_blend_epi32((__mmask16)m, wb, wa);
    vu16 o;
    memcpy(&o, &r, sizeof o);
    return o;
}
#endif

/* Narrow 16 codes to the format's storage width and store them at codes[i]. */
#if defined(__AVX2__) && !defined(__AVX512F__)
/* (AVX2: the narrowing packs each piece's 32-bit lanes, which hold codes
 * below 2^16, to 16 bits and, for 1-byte codes, to 8; GCC's generic
 * conversion of 16 lanes went lane by lane there, vec_isa.h) */
#define store_codes(codes, code_bytes, i, code)                                                              \
    do {                                                                                                   \
        __m256i h_ = _mm256_permute4x64_epi64(                                                             \
            _mm256_packus_epi32((__m256i)FP8_P32(code, 0), (__m256i)FP8_P32(code, 1)), 0xD8);              \
        if ((code_bytes) == 1) {                                                                           \
            __m128i b_ = _mm_packus_epi16(_mm256_castsi256_si128(h_), _mm256_extracti128_si256(h_, 1));    \
            _mm_storeu_si128((__m128i *)(void *)((uint8_t *)(codes) + (i)), b_);                           \
        } else {                                                                                           \
            _mm256_storeu_si256((__m256i *)(void *)((uint16_t *)(codes) + (i)), h_);                       \
        }                                                                                                  \
    } while (0)
#else
#define store_codes(codes, code_bytes, i, code)                                                              \
    do {                                                                                                   \
        if ((code_bytes) == 1) {                                                                           \
            vb cb_ = __builtin_convertvector((code), vb);                                                  \
            memcpy((uint8_t *)(codes) + (i), &cb_, sizeof cb_);                                            \
        } else {                                                                                           \
            vh16 ch_ = __builtin_convertvector((code), vh16);                                              \
            memcpy((uint16_t *)(codes) + (i), &ch_, sizeof ch_);                                           \
        }                                                                                                  \
    } while (0)
#endif

#define SEL(m, a, b) (((a) & (m)) | ((b) & ~(m))) /* m ? a : b, lane-wise */

typedef uint64_t vq __attribute__((vector_size(128)));

/* fp8__random32 (cast_impl.h) of the 16 keyed counters z = index *
 * 0x9E3779B97F4A7C15 + (seed ^ 0xD1B54A32D192ED03) (kept by the caller, one
 * vector add a step) and add = seed * 0x94D049BB133111EB broadcast: the same
 * bits lane by lane.  (Keys built once per call: GCC lowers a 64-bit scalar
 * broadcast into a 1024-bit vector through the stack.) */
static inline vu16 random16(vq z, vq add)
{
    FP8_RANDOM_ROUNDS(z, add);
    return __builtin_convertvector(z >> 32, vu16);
}

static inline vq vq_fill(uint64_t v)
{
    vq r;
    for (int l = 0; l < VL; l++)
        r[l] = v;
    return r;
}

/* Stochastic rounding of |y| bits a below the format's normal range, as
 * fp8__encode_bits (cast_impl.h) does it for a normal float32: the shift
 * s = 23 - mbits + emin - e (>= 24 - mbits), k = sig >> s, the rest's top
 * 32 bits rounded up with 32 random bits rnd: the magnitude code k + up,
 * 0 (flushed) to 2^mbits (up to min normal).  Shifts of 31 or more take
 * the same values as the scalar's (sig < 2^24). */
static inline vu16 sr_sub(const vparams *p, vu16 a, vu16 rnd)
{
    vu16 s = (vu16){0} + (uint32_t)(150 - p->mbits + p->emin) - (a >> 23);
    const vu16 sig = (a & 0x7FFFFFu) | 0x800000u, sc = umin16(s, (vu16){0} + 31u);
    vu16 k = sig >> sc, rem = sig & ((((vu16){0} + 1u) << sc) - 1u);
    vu16 lsh = (vu16)VLT(s, 32u) & (32u - s), rsh = umin16((vu16)VGT(s, 32u) & (s - 32u), (vu16){0} + 31u);
    vu16 frac = (rem << lsh) >> rsh;
    return k + ((vu16)VLT(frac + rnd, frac) & 1u);
}

#if defined(__AVX512F__) || defined(__AVX2__)
/* 16 floats to d with non-temporal stores: nt_whole for d aligned to
 * NT_WHOLE bytes, nt_quarters for d 16-byte aligned */
#if defined(__AVX512F__)
#define NT_WHOLE 64
static inline void nt_whole(float *d, vf16 o)
{
    __m512 w;
    memcpy(&w, &o, 64);
    _mm512_stream_ps(d, w);
}
#else
#define NT_WHOLE 32
static inline void nt_whole(float *d, vf16 o)
{
    _mm256_stream_ps(d, (__m256)FP8_P32(o, 0));
    _mm256_stream_ps(d + 8, (__m256)FP8_P32(o, 1));
}
#endif
#if defined(__AVX512F__)
/* AVX-512, out 16-byte aligned and dl floats (4, 8 or 12) past a 64-byte
 * line (nt_mode 2): the line at out + i - dl holds the previous vector's
 * last dl lanes and this one's first 16 - dl, joined by one two-source
 * permute (idx, nt_carry_idx) into a whole-line stream store (nt_carry).
 * The call's first vector's first 16 - dl lanes and its last vector's last
 * dl go by ordinary masked stores (i == 0 here, nt_carry_end): the lines
 * at the call's two ends.  Four 16-byte stream stores a vector and their
 * three extracts (nt_quarters) ran an all-statistics cast of 4096^2 about
 * 10 % slower than a 64-byte aligned out's whole-line stores. */
static inline __m512i nt_carry_idx(unsigned dl)
{
    __m512i j = _mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0);
    return _mm512_and_si512(_mm512_add_epi32(j, _mm512_set1_epi32(16 - (int)dl)), _mm512_set1_epi32(31));
}
static inline void nt_carry(float *out, size_t i, vf16 o, __m512 *carry, unsigned dl, __m512i idx)
{
    __m512 w;
    memcpy(&w, &o, 64);
    if (__builtin_expect(i == 0, 0))
        _mm512_mask_storeu_ps(out, (__mmask16)((1u << (16 - dl)) - 1), w);
    else
        _mm512_stream_ps(out + i - dl, _mm512_permutex2var_ps(*carry, idx, w));
    *carry = w;
}
static inline void nt_carry_end(float *out, size_t n, __m512 carry, unsigned dl)
{
    if (n)
        _mm512_mask_storeu_ps(out + n - 16, (__mmask16)(0xFFFFu & ~((1u << (16 - dl)) - 1)), carry);
}
#endif
static inline void nt_quarters(float *d, vf16 o)
{
    _mm_stream_ps(d, (__m128)__builtin_shufflevector(o, o, 0, 1, 2, 3));
    _mm_stream_ps(d + 4, (__m128)__builtin_shufflevector(o, o, 4, 5, 6, 7));
    _mm_stream_ps(d + 8, (__m128)__builtin_shufflevector(o, o, 8, 9, 10, 11));
    _mm_stream_ps(d + 12, (__m128)__builtin_shufflevector(o, o, 12, 13, 14, 15));
}
#endif

/* the largest of v[0 .. n-1] (n >= 1, none NaN): sixteen running maxima
 * (one alone is a chain of 4-cycle maxima, a group's worth of a cast of
 * 16-element groups) */
static float largest(const float *v, size_t n)
{
    vf16 m = (vf16){0} + v[0];
    size_t k = 0;
    if (n >= VL)
        for (memcpy(&m, v, sizeof m), k = VL; k + VL <= n; k += VL) {
            vf16 w;
            memcpy(&w, v + k, sizeof w);
            m = (vf16)SEL((vu16)(w > m), (vu16)w, (vu16)m);
        }
    float r = m[0];
    for (int l = 1; l < VL; l++)
        r = m[l] > r ? m[l] : r;
    for (; k < n; k++)
        r = v[k] > r ? v[k] : r;
    return r;
}

#endif
