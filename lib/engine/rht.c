/*
 * rht.c — NVFP4's random Hadamard transform (the 2025 NVFP4 recipe's
 * 16x16 RHT on weight-gradient inputs): random signs from a seed, then the
 * orthonormal Walsh-Hadamard transform of every whole group of 16 along a
 * row; its own inverse up to the signs.
 */
#include <stddef.h>
#include <stdint.h>

#include "kernels.h"
#include "rht.h"

/* The 16 random signs of seed (splitmix64), as +-1. */
void fp8__rht_signs(uint64_t seed, float d[16])
{
    uint64_t z = seed + 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    for (int i = 0; i < 16; i++)
        d[i] = (z >> i) & 1 ? -1.0f : 1.0f;
}

/* v <- H16 v / 4 (H16 the Sylvester Hadamard matrix: orthonormal after /4,
 * symmetric, its own inverse) */
static void wht16(float *v)
{
    for (int len = 1; len < 16; len <<= 1)
        for (int i = 0; i < 16; i += 2 * len)
            for (int j = i; j < i + len; j++) {
                float a = v[j], b = v[j + len];
                v[j] = a + b, v[j + len] = a - b;
            }
    for (int i = 0; i < 16; i++)
        v[i] *= 0.25f;
}

/* forward: y = H (d . x) / 4 on every whole group of 16 along each row;
 * inverse: x = d . (H y / 4).  A row's last partial group is left alone.
 * The slow reference: a butterfly at a time. */
void fp8__rht_apply_ref(float *x, size_t rows, size_t cols, const float d[16], int inverse)
{
    for (size_t i = 0; i < rows; i++)
        for (size_t j = 0; j + 16 <= cols; j += 16) {
            float *v = x + i * cols + j;
            if (!inverse)
                for (int k = 0; k < 16; k++)
                    v[k] *= d[k];
            wht16(v);
            if (inverse)
                for (int k = 0; k < 16; k++)
                    v[k] *= d[k];
        }
}


/* the vector form (smooth_vec.c, this CPU's build): the same bits */
void fp8__rht_apply(const float *x, float *y, size_t rows, size_t cols, const float d[16], int inverse)
{
    fp8__kernels_pick();
    fp8__k.rht(x, y, rows, cols, d, inverse);
}
