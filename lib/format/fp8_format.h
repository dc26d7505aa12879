/*
 * fp8_format.h — number formats: descriptors, registry, bit-exact casts.
 *
 * A format is a const descriptor (fp8_format) found by name in a registry
 * (fp8_format_find).  Built-ins: e4m3 (OCP E4M3FN), e5m2, e4m3fnuz, e5m2fnuz,
 * e8m0 (UE8M0), e2m1, e2m3, e3m2, fp16, bf16; any other "eXmY[bB][suffix]"
 * name builds a generic descriptor (see docs/formats.md for the grammar).
 *
 * Conversions take float32 and give an integer code (the format's bit
 * pattern, sign in the top bit of the format's width) plus a class that says
 * what happened to the value.  Everything here is immune to the caller's
 * floating-point environment: codes, values and classes are the same under
 * any rounding mode and with flush-to-zero / denormals-are-zero set.
 *
 * Conventions (docs/formats.md): q = cast(x * scale), x_hat = decode(q) *
 * scale_inv, scale_inv = 1/scale computed in float32.
 */
#ifndef FP8_FORMAT_H
#define FP8_FORMAT_H

#include <stddef.h>
#include <stdint.h>

#include "fp8_error.h"

/* How a format spends its top exponent and its sign. */
typedef enum {
    FP8_KIND_IEEE = 0, /* top exponent reserved: Inf (mantissa 0) and NaN    */
    FP8_KIND_FN,       /* no Inf; NaN is the all-ones magnitude (S.1..1.1..1) */
    FP8_KIND_FNUZ,     /* no Inf, no -0; NaN is the -0 pattern (0x80)         */
    FP8_KIND_FINITE,   /* no Inf, no NaN (OCP MX FP6/FP4)                     */
    FP8_KIND_E8M0      /* unsigned power of two, no zero, NaN 0xFF (UE8M0)    */
} fp8_kind;

typedef struct fp8_format {
    char name[24];       /* registry name, e.g. "e4m3"                       */
    const char *title;   /* one-line description                             */
    fp8_kind kind;
    int ebits;           /* exponent bits, 2..8                              */
    int mbits;           /* stored mantissa bits, 0..10                      */
    int bias;            /* exponent bias                                    */
    int sign_bits;       /* 1, or 0 for e8m0                                 */
    int bits;            /* total width = sign_bits + ebits + mbits          */
    int code_bytes;      /* storage per code in bulk arrays: 1, 2 or 4       */
    int has_inf, has_nan, has_negzero;
    uint32_t max_mag;    /* magnitude bits of the largest finite value       */
    uint32_t sign_mask;  /* 1 << (bits-1), or 0 when unsigned                */
    uint32_t nan_code;   /* canonical (positive) NaN code; 0 when none       */
    uint32_t inf_code;   /* +Inf code; 0 when none                           */
    int emin;            /* exponent of the smallest normal, 1 - bias        */
    double max;          /* largest finite value                             */
    double min_normal;   /* smallest positive normal                         */
    double min_subnormal;/* smallest positive subnormal (= min_normal if none)*/
} fp8_format;

/* What happened to one value; mutually exclusive, so counts add up to n. */
typedef enum {
    FP8_CLASS_EXACT = 0, /* result equals the (scaled) input; zero in -> zero */
    FP8_CLASS_ROUNDED,   /* normal result, changed by rounding               */
    FP8_CLASS_SUBNORMAL, /* nonzero subnormal result (exact or rounded)      */
    FP8_CLASS_FLUSHED,   /* nonzero input, zero result (TE's "underflow")    */
    FP8_CLASS_SATURATED, /* out of range (finite or Inf), clamped to +-max   */
    FP8_CLASS_OVERFLOW,  /* out of range, became Inf or NaN                  */
    FP8_CLASS_NAN,       /* NaN input                                        */
    FP8_NCLASS
} fp8_class;

typedef enum {
    FP8_ROUND_NEAREST = 0, /* to nearest, ties to even (default)            */
    FP8_ROUND_ZERO,        /* toward zero (IEEE: finite overflow -> +-max)   */
    FP8_ROUND_STOCHASTIC   /* up with probability = discarded fraction       */
} fp8_rounding;

typedef enum {
    FP8_SATURATE = 0,  /* finite overflow and +-Inf -> +-max (default; TE)   */
    FP8_NO_SATURATE    /* overflow -> Inf where the format has it, else NaN  */
} fp8_overflow;

/* How to cast.  A zero-initialised mode is nearest-even, saturating. */
typedef struct {
    fp8_rounding round;
    fp8_overflow overflow;
    uint64_t seed;    /* stochastic rounding: key of the generator          */
    uint64_t offset;  /* stochastic rounding: element index of x[0], so that
                         chunked calls reproduce one whole-tensor call       */
} fp8_cast_mode;

typedef struct {
    uint64_t n[FP8_NCLASS]; /* conversions per class                       */
} fp8_counts;

/* ---- registry ---------------------------------------------------------- */

/* Find a format by name ("e4m3", "bf16", "e3m4fn", ...).  Built-ins return
 * static descriptors; generic names are built into *scratch, which must
 * outlive the returned pointer (pass NULL to accept built-ins only).
 * Returns NULL and sets the error message when the name is not a format. */
const fp8_format *fp8_format_find(const char *name, fp8_format *scratch);

/* Built-in formats in table order; *n receives the count. */
const fp8_format *const *fp8_format_list(size_t *n);

/* Build a generic descriptor; FP8_EINVAL with a message when impossible. */
int fp8_format_make(fp8_format *out, int ebits, int mbits, int bias, fp8_kind kind);

const char *fp8_class_name(fp8_class c);
const char *fp8_kind_name(fp8_kind k);

/* ---- single values (pure integer arithmetic) -------------------------- */

/* Encode x (already scaled).  index selects the stochastic-rounding stream
 * element (mode->offset is not added here).  cls may be NULL. */
uint32_t fp8_format_encode(const fp8_format *f, const fp8_cast_mode *mode,
                           float x, uint64_t index, fp8_class *cls);

/* Decode a code (bits above f->bits are ignored). */
float fp8_format_decode(const fp8_format *f, uint32_t code);

/* Classify a code: "zero", "subnormal", "normal", "inf" or "nan". */
const char *fp8_format_code_class(const fp8_format *f, uint32_t code);

/* ---- arrays with a per-tensor scale ------------------------------------ */

/* codes[i] = encode(x[i] * scale); codes has f->code_bytes per element.
 * counts (may be NULL) is overwritten with this call's class counts. */
int fp8_format_encode_array(const fp8_format *f, const fp8_cast_mode *mode,
                            float scale, const float *x, size_t n,
                            void *codes, fp8_counts *counts);

/* out[i] = decode(codes[i]) * scale_inv. */
int fp8_format_decode_array(const fp8_format *f, float scale_inv,
                            const void *codes, size_t n, float *out);

/* out[i] = decode(encode(x[i] * scale)) * (1/scale); out may equal x (an
 * out overlapping x otherwise: FP8_EINVAL). */
int fp8_format_qdq_array(const fp8_format *f, const fp8_cast_mode *mode,
                         float scale, const float *x, size_t n, float *out,
                         fp8_counts *counts);

/* Which bulk kernel this machine runs ("avx512", "avx2" or "portable"). */
const char *fp8_format_kernel_name(void);

/* Force the portable kernel (for tests and benchmarks); 0 restores dispatch. */
void fp8_format_force_portable(int on);

#endif
