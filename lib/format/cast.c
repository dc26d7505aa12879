/*
 * cast.c — single-value encode, decode and code classification.
 * All work is integer arithmetic in cast_impl.h.
 */
#include <string.h>

#include "f32bits.h"
#include "cast_impl.h"

uint32_t fp8_format_encode(const fp8_format *f, const fp8_cast_mode *mode,
                           float x, uint64_t index, fp8_class *cls)
{
    static const fp8_cast_mode dflt;
    fp8_class c;
    uint32_t u;
    if (!mode)
        mode = &dflt;
    memcpy(&u, &x, 4);
    uint32_t rnd = mode->round == FP8_ROUND_STOCHASTIC ? fp8__random32(mode->seed, index) : 0;
    uint32_t code = fp8__encode_bits(f, mode->round, mode->overflow == FP8_SATURATE, u, rnd, &c);
    if (cls)
        *cls = c;
    return code;
}

float fp8_format_decode(const fp8_format *f, uint32_t code)
{
    uint32_t b = fp8__decode_bits(f, code);
    float x;
    memcpy(&x, &b, 4);
    return x;
}

const char *fp8_format_code_class(const fp8_format *f, uint32_t code)
{
    uint32_t b = fp8__decode_bits(f, code) & FP8_F32_ABS;
    if (b > FP8_F32_INF)
        return "nan";
    if (b == FP8_F32_INF)
        return "inf";
    if (b == 0)
        return "zero";
    if (f->kind != FP8_KIND_E8M0 && f->mbits > 0) {
        uint32_t mag = code & (f->sign_mask - 1);
        if ((mag >> f->mbits) == 0)
            return "subnormal";
    }
    return "normal";
}
