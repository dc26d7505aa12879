/*
 * vec_isa.h — internal: what the vector loops built once per instruction
 * set share (lib/format/kernel_vec.c, lib/engine/stats_vec.c, range_vec.c,
 * lib/engine/smooth_vec.c; the Makefile defines FP8_ISA and the ISA's
 * flags): the ISA's name in their function names, and GCC's vector types
 * of one 512-bit register (or its halves), which the compiler lowers to
 * what the ISA has.
 */
#ifndef FP8_VEC_ISA_H
#define FP8_VEC_ISA_H
#include <stdint.h>

#ifndef FP8_ISA
#define FP8_ISA base
#endif
#define FP8_CAT2(a, b) a##b
#define FP8_CAT(a, b) FP8_CAT2(a, b)
/* name##FP8_ISA: fp8__err_add_ -> fp8__err_add_avx512 */
#define FN(name) FP8_CAT(name, FP8_ISA)

typedef float vf16 __attribute__((vector_size(64)));
typedef uint32_t vu16 __attribute__((vector_size(64)));
typedef int32_t vi16 __attribute__((vector_size(64)));
typedef uint16_t vh16 __attribute__((vector_size(32)));
typedef float vf8 __attribute__((vector_size(32)));
typedef double vd8 __attribute__((vector_size(64)));
typedef int64_t vl8 __attribute__((vector_size(64)));

#endif
