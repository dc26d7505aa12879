/*
 * quantize_tiles.c — where a recipe's scale groups lie in a tensor, the
 * transposes of column-wise recipes, and TE's overflow count by group.
 */
#include <math.h>
#include <string.h>

#include "f32bits.h"
#include "fp8_stats.h"
#include "kernels.h"
#include "quantize_tiles.h"

void fp8__make_layout(const fp8_recipe *r, size_t R, size_t C, layout *L)
{
    memset(L, 0, sizeof *L);
    L->R = R;
    L->C = C;
    switch (r->kind) {
    case FP8_RECIPE_ROWWISE:
    case FP8_RECIPE_COLWISE:
        L->seg = C, L->nbc = 1, L->br = 1, L->ngroups = R;
        break;
    case FP8_RECIPE_BLOCK:
        L->seg = (size_t)r->block_cols, L->br = (size_t)r->block_rows;
        L->nbc = (C + L->seg - 1) / L->seg;
        L->ngroups = ((R + L->br - 1) / L->br) * L->nbc;
        break;
    case FP8_RECIPE_NVFP4:
        if (r->tile2d) { /* weights=RxC: 2D scale tiles (the weight's role) */
            L->seg = (size_t)r->wblock_cols, L->br = (size_t)r->wblock_rows;
            L->nbc = (C + L->seg - 1) / L->seg;
            L->ngroups = ((R + L->br - 1) / L->br) * L->nbc;
            break;
        }
        __attribute__((fallthrough)); /* otherwise 1 x group along rows, as MX */
    case FP8_RECIPE_MX:
        L->seg = (size_t)r->group, L->br = 1;
        L->nbc = (C + L->seg - 1) / L->seg;
        L->ngroups = R * L->nbc;
        break;
    default:
        L->per_tensor = 1, L->seg = R * C, L->nbc = 1, L->br = R, L->ngroups = 1;
        break;
    }
}

int fp8__needs_transpose(const fp8_recipe *r)
{
    return r->kind == FP8_RECIPE_COLWISE || (r->kind == FP8_RECIPE_BLOCK && r->transposed);
}

/* Tiles of 16 x 16 through a small buffer, so that every row of dst is
 * written 16 floats (a cache line) at a time: written an element at a time,
 * a row length of a power of two puts the lines of a tile into one cache
 * set, and they evict each other before they are full (1024 x 256: 8 ns an
 * element, 14x the cast it served). */
void fp8__transpose_ref(const float *src, size_t rows, size_t cols, float *dst) /* dst: cols x rows */
{
    enum { T = 16 };
    float t[T][T];
    for (size_t i0 = 0; i0 < rows; i0 += T) {
        const size_t ni = rows - i0 < T ? rows - i0 : T;
        for (size_t j0 = 0; j0 < cols; j0 += T) {
            const size_t nj = cols - j0 < T ? cols - j0 : T;
            for (size_t i = 0; i < ni; i++)
                for (size_t j = 0; j < nj; j++)
                    t[j][i] = src[(i0 + i) * cols + j0 + j];
            for (size_t j = 0; j < nj; j++)
                memcpy(dst + (j0 + j) * rows + i0, t[j], ni * sizeof(float));
        }
    }
}

/* the vector form of this CPU (smooth_vec.c: 8 x 8 blocks in registers,
 * a line of dst at a time); the same values */
void fp8__transpose(const float *src, size_t rows, size_t cols, float *dst)
{
    fp8__kernels_pick();
    fp8__k.transpose(src, rows, cols, dst);
}

void fp8__transpose_codes(const void *src, size_t rows, size_t cols, size_t cb, void *dst)
{
    for (size_t i = 0; i < rows; i++)
        for (size_t j = 0; j < cols; j++)
            memcpy((char *)dst + (j * rows + i) * cb, (const char *)src + (i * cols + j) * cb, cb);
}

size_t fp8_quantize_ngroups(const fp8_recipe *r, size_t rows, size_t cols)
{
    layout L;
    int t = fp8__needs_transpose(r);
    fp8__make_layout(r, t ? cols : rows, t ? rows : cols, &L);
    return L.ngroups;
}

size_t fp8_quantize_group_of(const fp8_recipe *r, size_t rows, size_t cols, size_t i, size_t j)
{
    layout L;
    int t = fp8__needs_transpose(r);
    if (t) {
        size_t k = i;
        i = j, j = k;
    }
    fp8__make_layout(r, t ? cols : rows, t ? rows : cols, &L);
    return L.per_tensor ? 0 : (i / L.br) * L.nbc + j / L.seg;
}

/* TE's overflow count: |x| > fp8_max * scale_inv, both float32 as TE's
 * torch expression computes them (Inf counts, NaN does not), per group.
 * Only groups that can hold such a value are read: their amax exceeds the
 * threshold, or the tensor holds an Inf. */
uint64_t fp8__te_overflow_count(const float *X, const layout *L, const float *scale_inv, const uint32_t *gamax,
                                float amax, float fmax, int any_inf)
{
    uint64_t n = 0;
    for (size_t g = 0; g < L->ngroups; g++) {
        float thr = fmax * scale_inv[g];
        float ga = L->per_tensor ? amax : fp8__bits_to_float(gamax[g]);
        if (!any_inf && !(ga > thr))
            continue;
        size_t r0 = L->per_tensor ? 0 : (g / L->nbc) * L->br, c0 = L->per_tensor ? 0 : (g % L->nbc) * L->seg;
        size_t r1 = L->per_tensor ? 1 : (r0 + L->br < L->R ? r0 + L->br : L->R);
        size_t len = L->per_tensor ? L->R * L->C : (c0 + L->seg < L->C ? L->seg : L->C - c0);
        for (size_t i = r0; i < r1; i++)
            n += fp8__k.count_above(X + i * (L->per_tensor ? 0 : L->C) + c0, len, thr);
    }
    return n;
}
