/*
 * kernel_vec.h — internal: the vector cast kernel, built once per
 * instruction set (kernel_vec.c compiled with -mavx512f, -mavx2 and the
 * baseline) and picked at run time by bulk.c.  Same integer method as
 * cast_impl.h, 16 lanes at a time; the tests compare the two bit for bit.
 */
#ifndef FP8_KERNEL_VEC_H
#define FP8_KERNEL_VEC_H
#include <stddef.h>
#include <stdint.h>

#define VL 16

typedef struct {
    int32_t mbits, emin, bias, lowsub;  /* lowsub = 1 << mbits             */
    uint32_t max_mag, sign_shift, negzero_keep;
    uint32_t inf_code[2], ovf_code[2], nan_code[2]; /* [sign]           */
    uint32_t inf_val[2], ovf_val[2], nan_val[2];    /* decoded bits      */
    int32_t inf_sat, ovf_sat, nearest;              /* -1 or 0 masks     */
    /* hot path: lanes with lo_bits <= |y| bits <= lo_bits + range_bits
     * (min_normal up to the largest |y| that rounds to max) */
    uint32_t lo_bits, range_bits;
    uint32_t rshift;     /* 23 - mbits                                     */
    uint32_t round_add;  /* nearest: 2^(rshift-1) - 1; toward zero: 0      */
    uint32_t round_lsb;  /* nearest: 1 (ties to even); toward zero: 0      */
    uint32_t keep_mask;  /* clears the rshift low bits                     */
    uint32_t rebias;     /* (127 - bias) << mbits                           */
    /* medium path: every lane finite and |y| <= max (subnormals, zeros) */
    int32_t medium_ok;   /* 2^(mbits - emin) fits float32                   */
    uint32_t max_bits;   /* float32 bits of max                             */
    float inv_q, q;      /* 2^(mbits - emin), 2^(emin - mbits): subnormal step */
    /* the wide path (kernel_vec.c): nearest rounding with medium_ok, on
     * blocks where many vectors left the hot path; lanes up to top_bits
     * (lo_bits + range_bits), subnormals rounded by adding sub_add, the
     * float32 2^(emin - mbits + 23), whose ulp is the subnormal step */
    int32_t wide_ok;
    uint32_t top_bits, sub_add;
    /* stochastic rounding: the hot path adds 2^rshift when the discarded
     * bits, as a 32-bit fraction, plus 32 random bits (fp8__random32 of
     * seed and the element's index, index0 + i) carry out.  e8m0: positive
     * normal float32 below 2^127 (zeros and negatives lane-wise too), code
     * = exponent field + up.  sr_fallback(sr_ctx, i, k) is the scalar cast
     * of elements i..i+k-1 (with gscale, of their group's scale, its flags
     * noted): stochastic rounding sends it the lanes outside the hot path
     * and the format's subnormal range one by one, e8m0 (never with gscale)
     * whole vectors of 16 */
    int32_t stochastic, e8m0;
    uint64_t seed, index0;
    void (*sr_fallback)(void *ctx, size_t i, size_t k);
    void *sr_ctx;
    /* 0, or: as it reads x[i], the kernel asks for the cache line this
     * many bytes further on (the engine's next piece, so that its first
     * pass finds it in cache; a prefetch past the array does no harm) */
    uint32_t prefetch;
    /* 1: x_hat goes to out with non-temporal stores (AVX-512 and AVX2,
     * out at least 16-byte aligned: kernel_vec.c's nt_mode, whose lines
     * at a call's two ends may take ordinary stores); 0: ordinary
     * stores */
    int32_t nt;
} vparams;

/* Casts of at least this many elements into an out of their own (not x)
 * ask for non-temporal stores, formats of 8 bits or more: 16 MB of x_hat,
 * which beside x fills this machine's 32 MB L3, so that no cache would keep
 * it for its reader; memcpy does the same for large copies (measured: 2^22
 * and 2^24 elements 1.07-1.13x faster with all statistics, 2^20 1.02-1.04x,
 * but an out that fits in cache would then miss for its reader).  FP4 and
 * FP6 elements mostly take the kernel's slower subnormal-aware path, a
 * cast that waits on arithmetic, not memory (MXFP4 measured 0.93x). */
#define FP8_NT_MIN ((size_t)1 << 22)
/* the elements from which a per-tensor cast on its own prefetches x ahead
 * of its kernel (x of 32 MB: past this machine's L3; quantize_cast.c) */
#define FP8_PREFETCH_MIN ((size_t)1 << 23)
/* how far ahead such a pass over n elements fetches x: 8 KB, 0 below
 * FP8_PREFETCH_MIN (in the L3 it measured 1-3 % slower) */
static inline uint32_t fp8__prefetch_far(size_t n) { return n >= FP8_PREFETCH_MIN ? 8192u : 0; }


/* Processes n (a multiple of VL) elements; codes or out may be NULL.
 * acc: flushed, subnormal, rounded, saturated, overflow, nan counts are
 * added (exact = n - the rest). */
/* With gscale != NULL, element i uses gscale[i / glen] and ginv[i / glen]
 * (glen a multiple of VL) instead of scale / scale_inv, and gflags[i / glen]
 * gets bit 0 when an element of that group overflowed or saturated and
 * bit 1 when one flushed to zero. */
/* With es != NULL (only on the plain case: not stochastic, not e8m0, a
 * format with -0, codes NULL), the kernel also makes the error sums of x
 * and its x_hat as the engine's fp8__err_add does them on x[0..n) (the
 * same float32 partials of 256 elements, the same bits): it adds them into
 * es->e2, q2, xq, keeps es->me as the running lane maxima of |x - x_hat|,
 * raises es->maxbits to the largest |x| bits it saw and |x_hat| bits
 * outside the hot path, and es->hotbound to the bits of max * scale_inv
 * (the largest scale_inv used), which no hot-path |x_hat| exceeds.  So the
 * largest |x| or |x_hat| lies in [maxbits, max(maxbits, hotbound)]: the
 * caller keeps the sums when that range lies in [FP8_LEAN_LO,
 * FP8_LEAN_HI] (vec_sums.h; stricter than the engine's own condition, so
 * both routes give the same bits) and otherwise sums the piece the
 * engine's way. */
/* The lean error sums hold only when the larger of x's and x_hat's maxima
 * (float32 bits; NaN and Inf lie above) lies in [2^-24, 2^28], or is 0
 * (every x and x_hat is +-0: every term is an exact 0); otherwise the
 * engine sums in double (stats_vec.c) */
#define FP8_LEAN_LO 0x33800000u
#define FP8_LEAN_HI 0x4D800000u
static inline int fp8__lean_bits(uint32_t maxbits)
{
    return maxbits == 0 || (maxbits >= FP8_LEAN_LO && maxbits <= FP8_LEAN_HI);
}
/* below the lean range but not 0: the engine sums such a piece lean on
 * values scaled by a power of two (stats_vec.c) */
static inline int fp8__tiny_bits(uint32_t maxbits) { return maxbits && maxbits < FP8_LEAN_LO; }

typedef struct {
    double e2[8], q2[8], xq[8];
    float me[16];
    uint32_t maxbits, hotbound;
} fp8__errsums;

#define FP8_VEC_KERNEL_ARGS const vparams *p, int code_bytes, float scale, float scale_inv, \
    const float *x, size_t n, void *codes, float *out, uint64_t acc[6], \
    const float *gscale, const float *ginv, size_t glen, unsigned char *gflags, fp8__errsums *es
void fp8__vec_kernel_avx512(FP8_VEC_KERNEL_ARGS);
void fp8__vec_kernel_avx2(FP8_VEC_KERNEL_ARGS);
void fp8__vec_kernel_base(FP8_VEC_KERNEL_ARGS);

#endif
