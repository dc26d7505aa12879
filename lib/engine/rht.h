/*
 * rht.h — internal: NVFP4's random Hadamard transform (rht.c).
 */
#ifndef FP8_RHT_H
#define FP8_RHT_H
#include <stddef.h>
#include <stdint.h>

/* NVFP4's random Hadamard transform: the 16 signs of a seed, and the
 * transform (or its inverse) of every whole group of 16 along each row of
 * x into y (y may be x; a row's last partial group copied as it is). */
void fp8__rht_signs(uint64_t seed, float d[16]);
void fp8__rht_apply(const float *x, float *y, size_t rows, size_t cols, const float d[16], int inverse);
/* the same, a butterfly at a time: the slow reference the tests hold
 * fp8__rht_apply to */
void fp8__rht_apply_ref(float *x, size_t rows, size_t cols, const float d[16], int inverse);

#endif
