/*
 * fp8_gemm.h — an FP8 GEMM with a limited-precision accumulator, emulated.
 *
 * FP8 tensor cores multiply FP8 operands exactly but do not accumulate in
 * full FP32: DeepSeek-V3 (§3.3.2) measured that Hopper's FP8 GEMM keeps
 * about 14 bits of the running sum, which costs up to ~2% relative error at
 * K = 4096, and fixed it by promoting the partial sum to FP32 every 128
 * products.  The model here (docs/gemm.md has the derivation):
 *
 *   - products a_k * b_k are exact (FP8 x FP8 fits in float32);
 *   - a limited accumulator S holds acc_bits significant bits: adding a
 *     product p aligns both to the larger exponent e of the two and keeps
 *     only multiples of 2^(e - acc_bits + 1) (dropped bits truncated toward
 *     zero, as an alignment shifter does, or rounded to nearest even);
 *     a carry into the next binade is truncated again;
 *   - every `promote` products, S is added to an FP32 accumulator (round to
 *     nearest) and reset; promote 0: never (S holds the whole sum);
 *   - acc_bits 0: no limit (float32 accumulation, sequential).
 *   - the result is the FP32 accumulator plus S, times alpha (the two
 *     scale_inv factors) in float32.
 */
#ifndef FP8_GEMM_H
#define FP8_GEMM_H

#include <stddef.h>

typedef struct {
    int acc_bits; /* significant bits of the limited accumulator, 0: float32 */
    int promote;  /* products per promotion to FP32, 0: never              */
    int round;    /* 0: truncate the dropped bits (default), 1: nearest even */
} fp8_acc_model;

/* One dot product of a[0..K) and b[0..K) (already FP8 values) under m. */
double fp8_dot_emulate(const fp8_acc_model *m, const float *a, const float *b, size_t K);

/* C[M x N] = alpha * A[M x K] * B[N x K]^T under m (row-major; B holds the
 * rows of the second operand, as nn.Linear stores weights).  FP8_EINVAL on
 * a bad model (acc_bits outside 0 or 2..53, promote < 0). */
int fp8_gemm_emulate(const fp8_acc_model *m, const float *A, const float *B, size_t M, size_t N, size_t K,
                     float alpha, float *C);

#endif
