/*
 * stats_hist.h — internal to stats_vec.c (included there once, built with
 * it per instruction set): x's exponent histogram in registers, the window
 * of 15 bins (and the wide one of 31) that xm_core's loop counts, their
 * flush into the sub-histograms, and the values outside the window.  Its
 * macros use xm_core's locals (the counter words nib_*, m4, hist, top).
 */
#ifndef FP8_STATS_HIST_H
#define FP8_STATS_HIST_H
#include <stdint.h>
#include <string.h>

#include "f32bits.h"
#include "moments.h"
#include "vec_isa.h"
#if defined(__AVX512F__) || defined(__AVX2__)
#include <immintrin.h>
#endif

/* 1 << s lane-wise, 0 where s >= 32 (the vector shifts' own rule; the
 * scalar form spells it out, C's shift being undefined there) */
static inline vu16 one_shl(vu16 s)
{
#if defined(__AVX512F__)
    __m512i v;
    memcpy(&v, &s, 64);
    v = _mm512_sllv_epi32(_mm512_set1_epi32(1), v);
    memcpy(&s, &v, 64);
    return s;
#else
    /* (masked: C's shift is undefined there; arithmetic that GCC keeps in
     * the registers, vec_isa.h) */
    return (((vu16){0} + 1u) << (s & 31u)) & (vu16)FP8_LTU(s, (vu16){0} + 32u);
#endif
}

/* The exponent histogram's window (bins top - 14 .. top, top >= 16; code
 * c = top - bin) counted in registers.  An element of code c adds 1 << 4c
 * to its lane's 32-bit word: codes 0-7 into nib_a (shift 4c), codes 8-15
 * into nib_b (shift 4c - 32); any other c (bins below the window, zeros and
 * subnormals, or above it: c wraps) shifts by 32 or more and adds nothing,
 * so the shift s = 4c needs no clamp (c = 15, outside the window too, lands
 * in nib_b's top nibble, never read).  Eight 4-bit counters a word take at
 * most 8 vectors before they are spilled into 8-bit counters (codes
 * 0,2,4,6 / 1,3,5,7 / 8,10,12,14 / 9,11,13,15 in nib_0 .. nib_3; at most 8 a
 * spill, so at most 31 spills); nib_flush sums those across lanes into the
 * window's bins of sub[0].  Locals of xm_core, so that they stay in
 * registers.
 *
 * Data wider than the window (gradients over many binades: half the values
 * of a log-uniform spread over 35 binades fell below it and were counted
 * one by one, x's statistics at a third of plain data's rate) switch the
 * later pieces of a tensor's part to a wide window (hist->wide; the
 * AVX-512 and AVX2 builds): bins top - 30 .. top, codes 16-31 in two more
 * words (nib_c: shift 4c - 64, nib_d: 4c - 96; c = 15 counted, c = 31 the
 * unread one), spilled into nib_4 .. nib_7.  It needs top >= 32 (a largest
 * |x| of 2^-96 or more), so that its lowest bin is a normal one: zeros and
 * subnormals stay outside.  Two more shifts and adds a vector, in a copy
 * of the loop of its own (xm_wide), so that the narrow loop's registers
 * are as they were (switching within a piece, both loops in one function,
 * cost plain data 2 %); a piece turns the next ones wide after a block
 * with WIDE_AFTER or more lanes outside the window (3 %: never on the
 * bench's uniform x, 0.3 a block on average; a Gaussian beside outliers
 * 1000x larger 13 a block, 35 binades 146); a part's first piece from its
 * first block (wide_first). */
#define WIDE_AFTER 8
#if FP8_NPIECE == 1
#define XM_WIDE 1
#define NIB_ADD_HI(s)                                                                                      \
    do {                                                                                                   \
        nib_c += one_shl((s) - 64u);                                                                       \
        nib_d += one_shl((s) - 96u);                                                                       \
    } while (0)
#elif defined(__AVX2__) /* (the accumulators piece by piece: vec_isa.h) */
#define XM_WIDE 1
#define NIB_ADD_HI(s)                                                                                      \
    do {                                                                                                   \
        vu16 c_ = (s) - 64u, d_ = (s) - 96u;                                                               \
        FP8_EACH(NIB_SHL_K, nib_c, c_, )                                                                   \
        FP8_EACH(NIB_SHL_K, nib_d, d_, )                                                                   \
    } while (0)
#else
/* (the baseline: 16 registers of 4 lanes, a vector in four; the wide loop
 * measured 0.29 -> 0.26 Gelem/s on 35 binades there) */
#define XM_WIDE 0
#define NIB_ADD_HI(s) ((void)0)
#endif
#if XM_WIDE
#define NIB_SPILL_HI()                                                                                     \
    do {                                                                                                   \
        NIB_SPILL_PAIR(nib_c, nib_d, nib_4, nib_5, nib_6, nib_7);                                          \
        nib_c = nib_d = (au16){0};                                                                         \
    } while (0)
#else
#define NIB_SPILL_HI() ((void)0)
#endif
#if FP8_NPIECE == 1
#define NIB_ADD(s)                                                                                         \
    do {                                                                                                   \
        nib_a += one_shl(s);                                                                               \
        nib_b += one_shl((s) - 32u);                                                                       \
    } while (0)
/* words a and b's 4-bit counters into the 8-bit ones n0 .. n3 */
#define NIB_SPILL_PAIR(a, b, n0, n1, n2, n3)                                                               \
    do {                                                                                                   \
        n0 += (a) & m4, n1 += (a) >> 4 & m4;                                                               \
        n2 += (b) & m4, n3 += (b) >> 4 & m4;                                                               \
    } while (0)
#else
/* (the accumulators piece by piece: vec_isa.h) */
#if defined(__AVX2__)
#define NIB_SHL_K(k, acc, s, unused)                                                                       \
    (acc).p[k] += (fp8_pu)_mm256_sllv_epi32(_mm256_set1_epi32(1), (__m256i)FP8_P32(s, k));
#define NIB_ADD(s)                                                                                         \
    do {                                                                                                   \
        vu16 s_ = (s), t_ = s_ - 32u;                                                                      \
        FP8_EACH(NIB_SHL_K, nib_a, s_, )                                                                   \
        FP8_EACH(NIB_SHL_K, nib_b, t_, )                                                                   \
    } while (0)
#else
#define NIB_ADD(s)                                                                                         \
    do {                                                                                                   \
        VA_OP(nib_a, +, one_shl(s));                                                                       \
        VA_OP(nib_b, +, one_shl((s) - 32u));                                                               \
    } while (0)
#endif
#define NIB_SPILL_PAIR(a, b, n0, n1, n2, n3)                                                               \
    do {                                                                                                   \
        const fp8_pu m4p_ = FP8_P32(m4, 0);                                                                \
        for (int k_ = 0; k_ < FP8_NPIECE; k_++) {                                                          \
            (n0).p[k_] += (a).p[k_] & m4p_, (n1).p[k_] += (a).p[k_] >> 4 & m4p_;                           \
            (n2).p[k_] += (b).p[k_] & m4p_, (n3).p[k_] += (b).p[k_] >> 4 & m4p_;                           \
        }                                                                                                  \
    } while (0)
#endif
#define NIB_SPILL_PIECES() NIB_SPILL_PAIR(nib_a, nib_b, nib_0, nib_1, nib_2, nib_3)
#define NIB_SPILL()                                                                                        \
    do {                                                                                                   \
        NIB_SPILL_PIECES();                                                                                \
        nib_a = nib_b = (au16){0};                                                                         \
        if (WIDE)                                                                                          \
            NIB_SPILL_HI();                                                                                \
        if (++nib_spills == 31)                                                                            \
            NIB_FLUSH();                                                                                   \
    } while (0)
#define NIB_FLUSH()                                                                                        \
    do {                                                                                                   \
        nib_flush(hist, VA_GET(vu16, nib_0), VA_GET(vu16, nib_1), VA_GET(vu16, nib_2), VA_GET(vu16, nib_3), 0, \
                  WIDE ? 32u : 15u);                                                                       \
        nib_0 = nib_1 = nib_2 = nib_3 = (au16){0};                                                         \
        if (WIDE) {                                                                                        \
            nib_flush(hist, VA_GET(vu16, nib_4), VA_GET(vu16, nib_5), VA_GET(vu16, nib_6),                 \
                      VA_GET(vu16, nib_7), 16u, 31u);                                                      \
            nib_4 = nib_5 = nib_6 = nib_7 = (au16){0};                                                     \
        }                                                                                                  \
        nib_spills = 0;                                                                                    \
    } while (0)

/* (codes base + ...; the code skip, a word's unread top nibble, left out) */
static inline __attribute__((always_inline)) void nib_flush(fp8__hist_state *hist, vu16 n0, vu16 n1, vu16 n2,
                                                            vu16 n3, uint32_t base, uint32_t skip)
{
    /* byte j of n0 / n1 / n2 / n3: codes 2j / 2j + 1 / 8 + 2j / 9 + 2j past base */
    const vu16 acc[4] = {n0, n1, n2, n3};
    for (int k = 0; k < 4; k++) {
        uint32_t w[2] = {0, 0}; /* 16-bit sums: bytes 0, 2 / 1, 3 */
        for (int l = 0; l < 16; l++)
            w[0] += acc[k][l] & 0x00FF00FFu, w[1] += acc[k][l] >> 8 & 0x00FF00FFu;
        for (uint32_t j = 0; j < 4; j++) {
            uint32_t c = base + 8 * (uint32_t)(k >> 1) + 2 * j + (uint32_t)(k & 1);
            uint32_t cnt = w[j & 1] >> 16 * (j >> 1) & 0xFFFF;
            if (c != skip && cnt) {
                hist->sub[0][hist->top - c] += cnt;
                fp8__hist_touch(hist, hist->top - c, hist->top - c);
            }
        }
    }
}

/* Bit v set when om[v] (v < nv <= 16) has a lane: made at once, without a
 * branch per vector (such a branch mispredicts on most blocks that have
 * any: x's statistics of the bench's x, a few lanes a block below the
 * window, 5.9 -> 6.15 Gelem/s) */
static inline unsigned vectors_with(const uint16_t *om, size_t nv)
{
#if defined(__AVX512F__)
    __m256i o = _mm256_loadu_si256((const void *)om);
    return (unsigned)_mm256_cmpneq_epi16_mask(o, _mm256_setzero_si256()) & ((1u << nv) - 1u);
#else
    unsigned vs = 0;
    for (size_t v = 0; v < nv; v++)
        vs |= (unsigned)(om[v] != 0) << v;
    return vs;
#endif
}

/* The nonzero elements outside the register window of a block of nv
 * vectors at x (om[v]: vector v's lanes; zeros: bin 0's count is x's zero
 * count) counted into the sub-histograms, the bins touched noted once.
 * Few lanes outside (om_any, the block's lanes outside in any vector, has
 * at most two: ordinary data, a value or two a block below the window) are
 * taken one by one from the vectors that have some.  Many (data wider than
 * the window, such as a Gaussian beside outliers 1000x larger): with
 * AVX-512 every vector's bins are made at once and packed (a compress in
 * registers), without a branch on its om (a coin toss there: x's
 * statistics 2.6 -> 4.0 Gelem/s), then counted in a tight loop. */
static unsigned outside_bins(fp8__hist_state *hist, const float *x, const uint16_t *om, size_t nv, unsigned om_any)
{
    unsigned counted = 0;
    uint32_t blo = UINT32_MAX, bhi = 0;
#if defined(__AVX512F__)
    if (__builtin_popcount(om_any) > 2) {
        uint32_t bins[256 + 16]; /* (each store writes 16, the first popcount of them kept) */
        size_t nb = 0;
        __m512i lo = _mm512_set1_epi32(-1), hi = _mm512_setzero_si512();
        for (size_t v = 0; v < nv; v++) {
            __m512i a = _mm512_loadu_si512((const void *)(x + 16 * v));
            __m512i bin = _mm512_add_epi32(_mm512_srli_epi32(_mm512_and_si512(a, _mm512_set1_epi32(FP8_F32_ABS)), 23),
                                           _mm512_set1_epi32(1));
            lo = _mm512_mask_min_epu32(lo, om[v], lo, bin);
            hi = _mm512_mask_max_epu32(hi, om[v], hi, bin);
            _mm512_storeu_si512((void *)(bins + nb), _mm512_maskz_compress_epi32(om[v], bin));
            nb += (size_t)__builtin_popcount(om[v]);
        }
        for (size_t j = 0; j < nb; j++)
            hist->sub[j & 7][bins[j]]++;
        fp8__hist_touch(hist, (uint32_t)_mm512_reduce_min_epu32(lo), (uint32_t)_mm512_reduce_max_epu32(hi));
        return (unsigned)nb;
    }
#else
    (void)om_any;
#endif
    for (unsigned vs = vectors_with(om, nv); vs; vs &= vs - 1) {
        size_t v = (size_t)__builtin_ctz(vs);
        for (unsigned b = om[v]; b; b &= b - 1) {
            int l = __builtin_ctz(b);
            uint32_t u;
            memcpy(&u, x + v * 16 + (size_t)l, 4);
            uint32_t bin = ((u & FP8_F32_ABS) >> 23) + 1;
            hist->sub[l & 7][bin]++;
            blo = bin < blo ? bin : blo, bhi = bin > bhi ? bin : bhi;
            counted++;
        }
    }
    if (bhi)
        fp8__hist_touch(hist, blo, bhi);
    return counted;
}

#endif
