/*
 * f32bits.h — internal: the IEEE 754 binary32 fields the kernels compare
 * bit patterns against.  For |x|'s bits b (sign cleared): b < FP8_F32_INF
 * is finite, b == FP8_F32_INF is infinite, b > FP8_F32_INF is NaN; and as
 * unsigned integers the bits of non-negative floats order as the floats do.
 */
#ifndef FP8_F32BITS_H
#define FP8_F32BITS_H

#define FP8_F32_ABS 0x7FFFFFFFu      /* everything but the sign: |x|'s bits  */
#define FP8_F32_EXP 0x7F800000u      /* the exponent field                   */
#define FP8_F32_INF 0x7F800000u      /* +inf; above it, NaN                  */

#include <stdint.h>
#include <string.h>

/* the float32 whose bits are b */
static inline float fp8__bits_to_float(uint32_t b)
{
    float f;
    memcpy(&f, &b, 4);
    return f;
}

/* the bits of the float32 f */
static inline uint32_t fp8__float_to_bits(float f)
{
    uint32_t b;
    memcpy(&b, &f, 4);
    return b;
}

/* For the bits b > 0 of a finite float: floor(log2) of its value, and
 * whether it is a power of two (subnormals included) */
static inline int fp8__floor_log2_bits(uint32_t b) { return b >> 23 ? (int)(b >> 23) - 127 : -118 - __builtin_clz(b); }
static inline int fp8__pow2_bits(uint32_t b) { return b >> 23 ? (b & 0x7FFFFFu) == 0 : (b & (b - 1)) == 0; }

#endif
