/*
 * bench_engine.c — the engine alone as a probe's record drives it, nothing
 * stored (bench.h): what the probe and loop sections set beside their
 * end-to-end figures.
 */
#include "bench.h"
#include "quantize_many.h"

int bench_engine_record(fp8_recipe_state *const *sts, int n, const float *x, size_t rows, size_t cols,
                        float *active_out)
{
    fp8_stats xs, rs[8];
    fp8__cast_req q[8];
    if (n < 1 || n > 8)
        return -1;
    /* shadows first, the active recipe last (in place when active_out is x) */
    for (int i = n - 1; i >= 0; i--)
        q[n - 1 - i] = (fp8__cast_req){.st = sts[i], .out = i == 0 ? active_out : NULL, .stats = &rs[i]};
    /* as the probe's record: x's statistics first (its amax from them),
     * then the sweep with them given */
    fp8_amax_info ai;
    int bad = fp8_tensor_stats_ex(x, rows * cols, &xs, 0, 1) != FP8_OK;
    fp8__stats_amax(&xs, &ai);
    bad |= fp8__quantize_many(x, rows, cols, FP8_STATS_X_GIVEN, 1, &xs, &ai, q, n) != FP8_OK;
    for (int i = 0; i < n; i++) {
        bad |= q[i].status != FP8_OK;
        fp8_recipe_state_step(sts[i]); /* (the step's end: a delayed recipe casts next with its history's scale) */
    }
    return bad ? -1 : 0;
}
