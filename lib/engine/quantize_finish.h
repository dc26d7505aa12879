/*
 * quantize_finish.h — internal: the engine's sums turned into fp8_stats
 * (quantize_finish.c).
 */
#ifndef FP8_QUANTIZE_FINISH_H
#define FP8_QUANTIZE_FINISH_H
#include <stdint.h>

#include "fp8_format.h"
#include "fp8_stats.h"
#include "quantize_tiles.h"
#include "stats_vec.h"

/* x's statistics (the high-precision side of fp8_stats) from its sums */
void fp8__finish_x(fp8_stats *s, const fp8__moments *m, uint64_t numel);
/* x's statistics from src to dst, the rest of dst untouched */
void fp8__keep_x_fields(fp8_stats *dst, const fp8_stats *src);
/* The recipe's statistics; s already holds x's.  cnt: the cast's classes,
 * err: the error sums; gamax/gminnz NULL for per-tensor recipes.  The
 * per-group summary runs on up to `threads` threads (the same bits). */
void fp8__finish_stats(fp8_stats *s, const uint64_t cnt[FP8_NCLASS], const fp8__moments *err, const layout *L,
                       const uint32_t *gamax_bits, const uint32_t *gminnz_bits, const float *scale,
                       const float *scale_inv, const unsigned char *flags, float s_global, const fp8_format *f,
                       int threads);

#endif
