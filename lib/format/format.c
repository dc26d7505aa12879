/*
 * format.c — format descriptors and the registry that finds them by name.
 *
 * Every descriptor is derived by fp8_format_make() from (ebits, mbits, bias,
 * kind), so the built-in table cannot disagree with the generic rule; the
 * tests check the derived numbers against the OCP OFP8 tables (docs/formats.md).
 */
#include <ctype.h>
#include <float.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fp8_format.h"

int fp8_format_make(fp8_format *out, int ebits, int mbits, int bias, fp8_kind kind)
{
    fp8_format f;
    memset(&f, 0, sizeof f);
    if (kind == FP8_KIND_E8M0) {
        if (ebits != 8 || mbits != 0)
            return FP8_ERROR(FP8_EINVAL, "e8m0 kind needs 8 exponent and 0 mantissa bits");
    }
    if (ebits < 2 || ebits > 8)
        return FP8_ERROR(FP8_EINVAL, "exponent bits %d outside 2..8", ebits);
    if (mbits < 0 || mbits > 10)
        return FP8_ERROR(FP8_EINVAL, "mantissa bits %d outside 0..10", mbits);
    if (kind == FP8_KIND_IEEE && mbits == 0)
        return FP8_ERROR(FP8_EINVAL, "an IEEE-like format needs at least 1 mantissa bit for NaN");
    if (bias < 0)
        bias = (kind == FP8_KIND_FNUZ) ? (1 << (ebits - 1)) : (1 << (ebits - 1)) - 1;
    f.kind = kind;
    f.ebits = ebits;
    f.mbits = mbits;
    f.bias = bias;
    f.sign_bits = (kind == FP8_KIND_E8M0) ? 0 : 1;
    f.bits = f.sign_bits + ebits + mbits;
    f.code_bytes = f.bits <= 8 ? 1 : f.bits <= 16 ? 2 : 4;
    f.sign_mask = f.sign_bits ? 1u << (ebits + mbits) : 0;
    f.emin = 1 - bias;

    uint32_t all_ones = (1u << (ebits + mbits)) - 1;
    uint32_t top_exp = ((1u << ebits) - 1) << mbits;
    switch (kind) {
    case FP8_KIND_IEEE:
        f.has_inf = f.has_nan = f.has_negzero = 1;
        f.inf_code = top_exp;
        f.nan_code = top_exp | (1u << (mbits - 1));
        f.max_mag = top_exp - 1;
        break;
    case FP8_KIND_FN:
        f.has_nan = f.has_negzero = 1;
        f.nan_code = all_ones;
        f.max_mag = all_ones - 1;
        break;
    case FP8_KIND_FNUZ:
        f.has_nan = 1;
        f.nan_code = f.sign_mask;
        f.max_mag = all_ones;
        break;
    case FP8_KIND_FINITE:
        f.has_negzero = 1;
        f.max_mag = all_ones;
        break;
    case FP8_KIND_E8M0:
        f.has_nan = 1;
        f.nan_code = 0xFF;
        f.max_mag = 0xFE;
        f.emin = -127;
        break;
    }
    if (kind == FP8_KIND_E8M0) {
        f.max = ldexp(1.0, 127);
        f.min_normal = f.min_subnormal = ldexp(1.0, -127);
    } else {
        int emax = (int)(f.max_mag >> mbits) - bias;
        double mant = 1.0 + (double)(f.max_mag & ((1u << mbits) - 1)) / (double)(1u << mbits);
        f.max = ldexp(mant, emax);
        f.min_normal = ldexp(1.0, f.emin);
        f.min_subnormal = mbits ? ldexp(1.0, f.emin - mbits) : f.min_normal;
        if (f.max > FLT_MAX)
            return FP8_ERROR(FP8_EINVAL, "e%dm%d with bias %d exceeds float32's range", ebits, mbits, bias);
        if (f.min_subnormal < ldexp(1.0, -149))
            return FP8_ERROR(FP8_EINVAL, "e%dm%d with bias %d goes below float32's smallest subnormal",
                             ebits, mbits, bias);
    }
    snprintf(f.name, sizeof f.name, "e%dm%d", ebits, mbits);
    f.title = "generic";
    *out = f;
    return FP8_OK;
}

/* ---- built-ins ----------------------------------------------------------- */

typedef struct {
    const char *name;
    const char *aliases; /* space separated */
    const char *title;
    int ebits, mbits, bias;
    fp8_kind kind;
} builtin_spec;

static const builtin_spec specs[] = {
    {"e4m3", "e4m3fn float8_e4m3fn", "OCP OFP8 E4M3 (E4M3FN): no Inf, NaN S.1111.111", 4, 3, 7, FP8_KIND_FN},
    {"e5m2", "float8_e5m2", "OCP OFP8 E5M2: IEEE-like, Inf and NaN", 5, 2, 15, FP8_KIND_IEEE},
    {"e4m3fnuz", "float8_e4m3fnuz", "E4M3 FNUZ (AMD MI300, Graphcore): NaN 0x80, no -0", 4, 3, 8, FP8_KIND_FNUZ},
    {"e5m2fnuz", "float8_e5m2fnuz", "E5M2 FNUZ (AMD MI300, Graphcore): NaN 0x80, no -0", 5, 2, 16, FP8_KIND_FNUZ},
    {"e8m0", "ue8m0 e8m0fnu float8_e8m0fnu", "OCP MX UE8M0 scale: unsigned power of two, NaN 0xFF", 8, 0, 127, FP8_KIND_E8M0},
    {"e2m1", "e2m1fn fp4 float4_e2m1fn", "OCP MX FP4 E2M1: finite only", 2, 1, 1, FP8_KIND_FINITE},
    {"e2m3", "e2m3fn float6_e2m3fn", "OCP MX FP6 E2M3: finite only", 2, 3, 1, FP8_KIND_FINITE},
    {"e3m2", "e3m2fn float6_e3m2fn", "OCP MX FP6 E3M2: finite only", 3, 2, 3, FP8_KIND_FINITE},
    {"fp16", "f16 half float16", "IEEE 754 binary16", 5, 10, 15, FP8_KIND_IEEE},
    {"bf16", "bfloat16", "bfloat16: float32's exponent, 7 mantissa bits", 8, 7, 127, FP8_KIND_IEEE},
};
#define NBUILTIN (sizeof specs / sizeof specs[0])

static fp8_format builtins[NBUILTIN];
static const fp8_format *builtin_ptrs[NBUILTIN];
static pthread_once_t builtins_once = PTHREAD_ONCE_INIT;

static void builtins_init(void)
{
    for (size_t i = 0; i < NBUILTIN; i++) {
        fp8_format_make(&builtins[i], specs[i].ebits, specs[i].mbits, specs[i].bias, specs[i].kind);
        snprintf(builtins[i].name, sizeof builtins[i].name, "%s", specs[i].name);
        builtins[i].title = specs[i].title;
        builtin_ptrs[i] = &builtins[i];
    }
}

const fp8_format *const *fp8_format_list(size_t *n)
{
    pthread_once(&builtins_once, builtins_init);
    if (n)
        *n = NBUILTIN;
    return builtin_ptrs;
}

static int word_in(const char *list, const char *w)
{
    size_t n = strlen(w);
    for (const char *p = list; *p;) {
        const char *e = strchr(p, ' ');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        if (len == n && strncmp(p, w, n) == 0)
            return 1;
        if (!e)
            break;
        p = e + 1;
    }
    return 0;
}

/* Generic grammar: e<E>m<M>[b<BIAS>][ieee|fn|fnuz|f]; no suffix = ieee. */
static int parse_generic(const char *name, fp8_format *out)
{
    const char *p = name;
    char *end;
    if (*p++ != 'e' || !isdigit((unsigned char)*p))
        return -1;
    long e = strtol(p, &end, 10);
    p = end;
    if (*p++ != 'm' || !isdigit((unsigned char)*p))
        return -1;
    long m = strtol(p, &end, 10);
    p = end;
    long bias = -1;
    if (*p == 'b' && isdigit((unsigned char)p[1])) {
        bias = strtol(p + 1, &end, 10);
        p = end;
    }
    fp8_kind kind;
    if (*p == 0 || strcmp(p, "ieee") == 0)
        kind = FP8_KIND_IEEE;
    else if (strcmp(p, "fn") == 0)
        kind = FP8_KIND_FN;
    else if (strcmp(p, "fnuz") == 0)
        kind = FP8_KIND_FNUZ;
    else if (strcmp(p, "f") == 0)
        kind = FP8_KIND_FINITE;
    else
        return -1;
    if (e > 8 || m > 10 || bias > 1000) {
        FP8_ERROR(FP8_EINVAL, "format '%s': exponent bits must be 2..8 and mantissa bits 0..10", name);
        return -2;
    }
    if (fp8_format_make(out, (int)e, (int)m, (int)bias, kind) != FP8_OK) {
        char why[400];
        snprintf(why, sizeof why, "%s", fp8_error_message());
        FP8_ERROR(FP8_EINVAL, "format '%s': %s", name, why);
        return -2;
    }
    snprintf(out->name, sizeof out->name, "%s", name);
    out->title = "generic eXmY format";
    return 0;
}

const fp8_format *fp8_format_find(const char *name, fp8_format *scratch)
{
    size_t n;
    const fp8_format *const *list = fp8_format_list(&n);
    if (!name || !*name) {
        FP8_ERROR(FP8_EINVAL, "empty format name");
        return NULL;
    }
    for (size_t i = 0; i < n; i++)
        if (strcmp(name, specs[i].name) == 0 || word_in(specs[i].aliases, name))
            return list[i];
    if (scratch && strlen(name) < sizeof scratch->name) {
        int r = parse_generic(name, scratch);
        if (r == 0)
            return scratch;
        if (r == -2)
            return NULL;
    }
    FP8_ERROR(FP8_EINVAL,
              "unknown format '%s' (try: e4m3 e5m2 e4m3fnuz e5m2fnuz e8m0 e2m1 e2m3 e3m2 fp16 bf16, "
              "or eXmY[bBIAS][ieee|fn|fnuz|f])",
              name);
    return NULL;
}

const char *fp8_class_name(fp8_class c)
{
    static const char *names[FP8_NCLASS] = {"exact", "rounded", "subnormal", "flushed",
                                            "saturated", "overflow", "nan"};
    return (unsigned)c < FP8_NCLASS ? names[c] : "?";
}

const char *fp8_kind_name(fp8_kind k)
{
    switch (k) {
    case FP8_KIND_IEEE: return "ieee";
    case FP8_KIND_FN: return "fn";
    case FP8_KIND_FNUZ: return "fnuz";
    case FP8_KIND_FINITE: return "finite";
    case FP8_KIND_E8M0: return "e8m0";
    }
    return "?";
}
