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
#include <string.h>

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

/* GCC 12 and the 512-bit vectors above without AVX-512 (no register holds
 * one: AVX2 and SSE2 measured here, NEON built the same way).  It lowers
 * their arithmetic to the pieces the ISA has, but compares one lane at a
 * time in scalar code (70-100 instructions for one compare), builds a
 * scalar's broadcast by sixteen stores, and keeps a vector that lives
 * across loop iterations, or passes through a union or memcpy, in memory,
 * moved through general registers — the loops ran 20-40x slower on AVX2
 * than on AVX-512.  Hence, in the vector loops: comparisons through VEQ ..
 * VGE, pieces through FP8_P32 / FP8_P64, stores through VSTORE, broadcasts
 * made once through VSPLAT, and loop-carried vectors (sums, maxima,
 * counters) as accumulators af16 / au16 / ad8 held in native pieces,
 * updated through VA_*.  With AVX-512 these are the plain operators and
 * vectors. */
#if defined(__AVX512F__)
#define FP8_VPIECE 64
#elif defined(__AVX__)
#define FP8_VPIECE 32
#else
#define FP8_VPIECE 16
#endif
#define FP8_NPIECE (64 / FP8_VPIECE)

/* VLT(a, b) is a < b, -1 / 0 lanes (vi16 for 32-bit lanes, vl8 for
 * 64-bit), b a vector of a's type or a scalar (made one as the operator
 * would); compared piece by piece */
#if FP8_NPIECE == 1
#define VEQ(a, b) ((a) == (b))
#define VNE(a, b) ((a) != (b))
#define VLT(a, b) ((a) < (b))
#define VLE(a, b) ((a) <= (b))
#define VGT(a, b) ((a) > (b))
#define VGE(a, b) ((a) >= (b))
#else
/* 32-bit integer lanes by arithmetic, which GCC keeps in the ISA's
 * registers (Hacker's Delight 2-12: the sign of a - b, corrected where it
 * overflowed; a == b where (a ^ b) | -(a ^ b) has no sign bit); float and
 * 64-bit lanes piece by piece (the masks then pass through memory) */
#define FP8_LTU(a, b) ((vi16)((~(a) & (b)) | (~((a) ^ (b)) & ((a) - (b)))) >> 31)
#define FP8_LTS(a, b) ((vi16)(((a) - (b)) ^ (((a) ^ (b)) & (((a) - (b)) ^ (a)))) >> 31)
#define FP8_EQ(a, b) (~((vi16)(((a) ^ (b)) | (0 - ((a) ^ (b)))) >> 31))
#define FP8_VC(a, b, U, S, op)                                                                             \
    __extension__({                                                                                    \
        __typeof__(a) va_ = (a), vb_ = {0};                                                            \
        vb_ += (b);                                                                                    \
        vu16 ua_ = (vu16)va_, ub_ = (vu16)vb_;                                                         \
        __builtin_choose_expr(                                                                         \
            __builtin_types_compatible_p(__typeof__(va_[0]), uint32_t), U(ua_, ub_),                   \
            __builtin_choose_expr(__builtin_types_compatible_p(__typeof__(va_[0]), int32_t), S(ua_, ub_), \
                                  FP8_VCMP(op, va_, vb_)));                                            \
    })
#define FP8_GTU(a, b) FP8_LTU(b, a)
#define FP8_GTS(a, b) FP8_LTS(b, a)
#define FP8_LEU(a, b) (~FP8_LTU(b, a))
#define FP8_LES(a, b) (~FP8_LTS(b, a))
#define FP8_GEU(a, b) (~FP8_LTU(a, b))
#define FP8_GES(a, b) (~FP8_LTS(a, b))
#define FP8_NE(a, b) (~FP8_EQ(a, b))
#define VEQ(a, b) FP8_VC(a, b, FP8_EQ, FP8_EQ, ==)
#define VNE(a, b) FP8_VC(a, b, FP8_NE, FP8_NE, !=)
#define VLT(a, b) FP8_VC(a, b, FP8_LTU, FP8_LTS, <)
#define VLE(a, b) FP8_VC(a, b, FP8_LEU, FP8_LES, <=)
#define VGT(a, b) FP8_VC(a, b, FP8_GTU, FP8_GTS, >)
#define VGE(a, b) FP8_VC(a, b, FP8_GEU, FP8_GES, >=)
#define FP8_VCMP(op, a, b)                                                                                 \
    __extension__({                                                                                    \
        typedef __typeof__((a)[0]) el_;                                                                \
        typedef el_ pv_ __attribute__((vector_size(FP8_VPIECE)));                                      \
        union { __typeof__(a) w; pv_ h[FP8_NPIECE]; } pa_ = {(a)}, pb_ = {(b)};                        \
        union { __typeof__((a) == (a)) w; __typeof__(pa_.h[0] == pb_.h[0]) h[FP8_NPIECE]; } pr_;       \
        for (int k_ = 0; k_ < FP8_NPIECE; k_++)                                                        \
            pr_.h[k_] = pa_.h[k_] op pb_.h[k_];                                                        \
        pr_.w;                                                                                         \
    })
#endif

/* a vector's pieces (with AVX-512 the whole vector) */
typedef float fp8_pf __attribute__((vector_size(FP8_VPIECE)));
typedef uint32_t fp8_pu __attribute__((vector_size(FP8_VPIECE)));
typedef int32_t fp8_pi __attribute__((vector_size(FP8_VPIECE)));
typedef double fp8_pd __attribute__((vector_size(FP8_VPIECE)));

/* FP8_P32(v, k): piece k of a vector of 32-bit lanes, FP8_P64(v, k) of
 * 64-bit lanes, k a literal; FP8_EACH(M, a, b, c) is M(k, a, b, c) for
 * every piece k.  A shuffle, which GCC keeps in registers (a union or a
 * memcpy would send the vector through memory). */
#if FP8_NPIECE == 2
#define FP8_P32(v, k) __builtin_shufflevector(v, v, 8 * k, 8 * k + 1, 8 * k + 2, 8 * k + 3, 8 * k + 4, 8 * k + 5, \
                                              8 * k + 6, 8 * k + 7)
#define FP8_P64(v, k) __builtin_shufflevector(v, v, 4 * k, 4 * k + 1, 4 * k + 2, 4 * k + 3)
#define FP8_EACH(M, a, b, c) M(0, a, b, c) M(1, a, b, c)
#elif FP8_NPIECE == 4
#define FP8_P32(v, k) __builtin_shufflevector(v, v, 4 * k, 4 * k + 1, 4 * k + 2, 4 * k + 3)
#define FP8_P64(v, k) __builtin_shufflevector(v, v, 2 * k, 2 * k + 1)
#define FP8_EACH(M, a, b, c) M(0, a, b, c) M(1, a, b, c) M(2, a, b, c) M(3, a, b, c)
#endif

/* the 64 bytes of vector v (32-bit lanes) to p (unaligned), piece by piece */
#if FP8_NPIECE == 1
#define VSTORE(p, v) memcpy((p), &(v), 64)
#else
#define FP8_STORE_K(k, p, v, unused)                                                                       \
    {                                                                                                      \
        __typeof__(FP8_P32(v, k)) t_ = FP8_P32(v, k);                                                      \
        memcpy((char *)(p) + k * FP8_VPIECE, &t_, FP8_VPIECE);                                             \
    }
#define VSTORE(p, v)                                                                                       \
    do {                                                                                                   \
        __typeof__(v) vs_ = (v);                                                                           \
        FP8_EACH(FP8_STORE_K, p, vs_, )                                                                    \
    } while (0)
#endif

/* VSPLAT(T, s): scalar s (32-bit lanes) in every lane of a vector of type
 * T, each piece broadcast on its own (one instruction a piece).  Not
 * (T){0} + s: without -ffast-math 0.0f + s is an add the compiler must
 * keep (-0.0 + 0 is +0). */
#define FP8_REP4(e) e, e, e, e
#define FP8_REP(e) FP8_REP4(e), FP8_REP4(e), FP8_REP4(e), FP8_REP4(e) /* FP8_VPIECE / 4 lanes */
#if FP8_VPIECE == 32
#undef FP8_REP
#define FP8_REP(e) FP8_REP4(e), FP8_REP4(e)
#elif FP8_VPIECE == 16
#undef FP8_REP
#define FP8_REP(e) FP8_REP4(e)
#endif
#define VSPLAT(T, s)                                                                                       \
    __extension__({                                                                                    \
        __typeof__(((T){0})[0]) e_ = (s);                                                              \
        typedef __typeof__(e_) pe_ __attribute__((vector_size(FP8_VPIECE)));                           \
        union { pe_ h[FP8_NPIECE]; T w; } u_;                                                          \
        for (int k_ = 0; k_ < FP8_NPIECE; k_++)                                                        \
            u_.h[k_] = (pe_){FP8_REP(e_)};                                                             \
        u_.w;                                                                                          \
    })

/* Accumulators: VA_OP(acc, +, v) is acc = acc + v, VA_FN(acc, f, v) is
 * acc = f(acc, v) with f of two pieces (fp8_pmaxu .. below), VA_OPD for ad8
 * (64-bit lanes), VA_GET(T, acc) the vector of type T, VA_MAKE(T, v) an
 * accumulator holding vector v (both through memory: outside loops) */
#if FP8_NPIECE == 1
typedef vf16 af16;
typedef vu16 au16;
typedef vd8 ad8;
#define VA_OP(acc, op, v) ((acc) = (acc)op(v))
#define VA_OPD(acc, op, v) ((acc) = (acc)op(v))
#define VA_FN(acc, f, v) ((acc) = f((acc), (v)))
#define VA_GET(T, acc) ((T)(acc))
#define VA_MAKE(T, v) ((T)(v))
#else
typedef struct { fp8_pf p[FP8_NPIECE]; } af16;
typedef struct { fp8_pu p[FP8_NPIECE]; } au16;
typedef struct { fp8_pd p[FP8_NPIECE]; } ad8;
#define FP8_VA_OP_K(k, acc, op, v) (acc).p[k] = (acc).p[k] op FP8_P32(v, k);
#define FP8_VA_OPD_K(k, acc, op, v) (acc).p[k] = (acc).p[k] op FP8_P64(v, k);
#define FP8_VA_FN_K(k, acc, f, v) (acc).p[k] = f((acc).p[k], FP8_P32(v, k));
#define VA_OP(acc, op, v)                                                                                  \
    do {                                                                                                   \
        __typeof__(v) vo_ = (v);                                                                           \
        FP8_EACH(FP8_VA_OP_K, acc, op, vo_)                                                                \
    } while (0)
#define VA_OPD(acc, op, v)                                                                                 \
    do {                                                                                                   \
        __typeof__(v) vo_ = (v);                                                                           \
        FP8_EACH(FP8_VA_OPD_K, acc, op, vo_)                                                               \
    } while (0)
#define VA_FN(acc, f, v)                                                                                   \
    do {                                                                                                   \
        __typeof__(v) vo_ = (v);                                                                           \
        FP8_EACH(FP8_VA_FN_K, acc, f, vo_)                                                                 \
    } while (0)
#define VA_GET(T, acc) (((union { __typeof__(acc) a; T w; }){(acc)}).w)
#define VA_MAKE(T, v) (((union { __typeof__(v) w; T a; }){(v)}).a)
#endif

#endif
