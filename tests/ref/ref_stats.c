/*
 * ref_stats.c — see ref_stats.h.  Deliberately plain: an element loop for
 * the amax of every group, one for the casts, and the textbook two-pass
 * moments (mean first, then central sums), all in double.
 */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ref_stats.h"
#include "recipe_state.h"

/* group of element (i, j) of the R x C (possibly transposed) data */
static size_t group_of(const fp8_recipe *r, size_t i, size_t j, size_t R, size_t C, size_t *ngroups)
{
    size_t g = 0, nbc;
    (void)R;
    switch (r->kind) {
    case FP8_RECIPE_ROWWISE:
    case FP8_RECIPE_COLWISE:
        *ngroups = R;
        return i;
    case FP8_RECIPE_BLOCK:
        nbc = (C + (size_t)r->block_cols - 1) / (size_t)r->block_cols;
        *ngroups = ((R + (size_t)r->block_rows - 1) / (size_t)r->block_rows) * nbc;
        return (i / (size_t)r->block_rows) * nbc + j / (size_t)r->block_cols;
    case FP8_RECIPE_NVFP4:
        if (r->tile2d) { /* a weight's 2D tiles */
            nbc = (C + (size_t)r->wblock_cols - 1) / (size_t)r->wblock_cols;
            *ngroups = ((R + (size_t)r->wblock_rows - 1) / (size_t)r->wblock_rows) * nbc;
            return (i / (size_t)r->wblock_rows) * nbc + j / (size_t)r->wblock_cols;
        }
        /* fall through */
    case FP8_RECIPE_MX:
        nbc = (C + (size_t)r->group - 1) / (size_t)r->group;
        *ngroups = R * nbc;
        return i * nbc + j / (size_t)r->group;
    default:
        *ngroups = 1;
        return g;
    }
}

int ref_quantize(fp8_recipe_state *st, const float *x0, size_t rows, size_t cols, float *out0, fp8_stats *s)
{
    const fp8_recipe *r = &st->recipe;
    const fp8_format *f = st->format;
    int trans = r->kind == FP8_RECIPE_COLWISE || (r->kind == FP8_RECIPE_BLOCK && r->transposed);
    size_t R = trans ? cols : rows, C = trans ? rows : cols, n = rows * cols;
    float *x = malloc(n * sizeof *x), *q = malloc(n * sizeof *q);
    for (size_t i = 0; i < R; i++)
        for (size_t j = 0; j < C; j++)
            x[i * C + j] = trans ? x0[j * cols + i] : x0[i * cols + j];
    size_t ng;
    group_of(r, 0, 0, R, C, &ng);
    double *gamax = calloc(ng, sizeof *gamax), *gminnz = malloc(ng * sizeof *gminnz);
    float *sc = malloc(ng * sizeof *sc), *si = malloc(ng * sizeof *si);
    int *gov = calloc(ng, sizeof *gov), *gun = calloc(ng, sizeof *gun);
    for (size_t g = 0; g < ng; g++)
        gminnz[g] = INFINITY;
    double amax = 0;
    /* pass 1: group amax / min nonzero over finite values */
    for (size_t i = 0; i < R; i++)
        for (size_t j = 0; j < C; j++) {
            float v = x[i * C + j];
            if (!isfinite(v))
                continue;
            size_t g = group_of(r, i, j, R, C, &ng);
            double a = fabs((double)v);
            if (a > gamax[g])
                gamax[g] = a;
            if (a > 0 && a < gminnz[g])
                gminnz[g] = a;
            if (a > amax)
                amax = a;
        }
    /* scales */
    float fp8max = (float)f->max, s_global = 1.0f;
    if (r->kind == FP8_RECIPE_NVFP4) {
        const fp8_format *e4m3 = fp8_format_find("e4m3", NULL);
        float S_enc = amax > 0 ? 2688.0f / (float)amax : 1.0f;
        if (isinf(S_enc))
            S_enc = FLT_MAX;
        s_global = 1.0f / S_enc;
        for (size_t g = 0; g < ng; g++) {
            float dec = ((float)gamax[g] / 6.0f) * S_enc;
            float sb = fp8_format_decode(e4m3, fp8_format_encode(e4m3, NULL, dec, 0, NULL));
            sc[g] = sb > 0 ? (isinf(S_enc / sb) ? FLT_MAX : S_enc / sb) : 0.0f;
            si[g] = sb > 0 ? sb * s_global : 0.0f;
        }
    } else {
        for (size_t g = 0; g < ng; g++) {
            float a = (float)gamax[g];
            switch (r->kind) {
            case FP8_RECIPE_DELAYED:
                sc[g] = st->scale, si[g] = st->scale_inv;
                break;
            case FP8_RECIPE_CURRENT:
            case FP8_RECIPE_ROWWISE:
            case FP8_RECIPE_COLWISE:
                sc[g] = fp8_scale_current(fp8max, a, r->eps, r->pow2, r->torchao);
                si[g] = 1.0f / sc[g];
                break;
            case FP8_RECIPE_BLOCK:
                fp8_scale_block(fp8max, a, r, &sc[g], &si[g]);
                break;
            case FP8_RECIPE_MX: {
                int E = (int)fp8_scale_mx(f, a, r->mx_round) - 127;
                sc[g] = ldexpf(1.0f, -E);
                si[g] = ldexpf(1.0f, E);
                break;
            }
            default:
                sc[g] = si[g] = 1.0f;
            }
        }
    }
    /* pass 2: element casts, class counts */
    memset(s, 0, sizeof *s);
    for (size_t i = 0; i < R; i++)
        for (size_t j = 0; j < C; j++) {
            size_t k = i * C + j, g = group_of(r, i, j, R, C, &ng);
            float v = x[k];
            fp8_class cls;
            if (sc[g] == 0.0f) { /* nvfp4 block whose scale flushed */
                q[k] = isnan(v) ? v : copysignf(0.0f, v);
                cls = isnan(v) ? FP8_CLASS_NAN : isinf(v) ? FP8_CLASS_SATURATED
                    : v == 0 ? FP8_CLASS_EXACT : FP8_CLASS_FLUSHED;
            } else {
                uint32_t code = fp8_format_encode(f, &r->cast, v * sc[g], k, &cls);
                q[k] = fp8_format_decode(f, code) * si[g];
            }
            s->classes.n[cls]++;
            if (cls == FP8_CLASS_SATURATED || cls == FP8_CLASS_OVERFLOW)
                gov[g] = 1;
            if (cls == FP8_CLASS_FLUSHED)
                gun[g] = 1;
        }
    /* moments, two passes */
    double sum = 0, l1 = 0, x2 = 0, mn = INFINITY, mx = -INFINITY, mnz = INFINITY;
    uint64_t fin = 0;
    for (size_t k = 0; k < n; k++) {
        float v = x[k];
        uint32_t u;
        memcpy(&u, &v, 4);
        uint32_t a = u & 0x7FFFFFFFu, ef = a >> 23;
        s->exp_hist[ef == 0 ? (a != 0) : ef == 255 ? 256 : ef + 1]++;
        if (isnan(v)) {
            s->nan_count++;
            continue;
        }
        if (isinf(v)) {
            s->inf_count++;
            continue;
        }
        fin++;
        if (v == 0)
            s->zero_count++;
        else if (fabs((double)v) < mnz)
            mnz = fabs((double)v);
        sum += v;
        l1 += fabs((double)v);
        x2 += (double)v * v;
        mn = fmin(mn, v);
        mx = fmax(mx, v);
    }
    s->numel = n;
    s->finite = fin;
    double mean = fin ? sum / (double)fin : 0, m2 = 0, m4 = 0, e2 = 0, xq = 0, q2 = 0, maxerr = 0;
    uint64_t bad = 0;
    for (size_t k = 0; k < n; k++) {
        if (!isfinite(x[k]))
            continue;
        double d = x[k] - mean;
        m2 += d * d;
        m4 += d * d * d * d;
        if (!isfinite(q[k])) {
            bad++;
            continue;
        }
        double e = (double)x[k] - (double)q[k];
        e2 += e * e;
        xq += (double)x[k] * q[k];
        q2 += (double)q[k] * q[k];
        maxerr = fmax(maxerr, fabsf(x[k] - q[k]));
    }
    if (fin) {
        s->mean = mean;
        s->std = sqrt(m2 / (double)fin);
        s->kurtosis = m2 > 0 ? (double)fin * m4 / (m2 * m2) : 0;
        s->min = mn, s->max = mx, s->amax = amax;
    }
    s->l1 = l1;
    s->l2 = sqrt(x2);
    s->min_nonzero = isinf(mnz) ? 0 : mnz;
    s->dynamic_range = s->min_nonzero > 0 ? log2(s->amax) - log2(s->min_nonzero) : 0;
    s->overflows = s->classes.n[FP8_CLASS_SATURATED] + s->classes.n[FP8_CLASS_OVERFLOW];
    s->underflows = s->classes.n[FP8_CLASS_FLUSHED];
    s->subnormals = s->classes.n[FP8_CLASS_SUBNORMAL];
    s->err_excluded = bad;
    s->sq_err = e2;
    s->mse = fin - bad ? e2 / (double)(fin - bad) : 0;
    s->rel_err = x2 > 0 ? sqrt(e2 / x2) : (e2 > 0 ? INFINITY : 0);
    s->sqnr_db = e2 > 0 ? 10 * log10(x2 / e2) : INFINITY;
    s->cosine = (x2 > 0 && q2 > 0) ? xq / sqrt(x2 * q2) : (x2 == q2 ? 1.0 : 0.0);
    s->max_abs_err = maxerr;
    s->format = f;
    s->nscales = s->nblocks = ng;
    s->scale = sc[0], s->scale_inv = si[0], s->global_scale_inv = s_global;
    double ssum = 0, smin = INFINITY, smax = -INFINITY, bdr = 0;
    for (size_t g = 0; g < ng; g++) {
        ssum += si[g];
        smin = fmin(smin, si[g]);
        smax = fmax(smax, si[g]);
        uint32_t b;
        memcpy(&b, &si[g], 4);
        s->scale_hist[(b >> 23) & 0xFF]++;
        s->blocks_with_overflow += (uint64_t)gov[g];
        s->blocks_with_underflow += (uint64_t)gun[g];
        if (gamax[g] > 0 && isfinite(gminnz[g]))
            bdr = fmax(bdr, log2(gamax[g]) - log2(gminnz[g]));
    }
    double smean = ssum / (double)ng, sv = 0;
    for (size_t g = 0; g < ng; g++)
        sv += (si[g] - smean) * (si[g] - smean);
    s->scale_inv_min = smin, s->scale_inv_max = smax, s->scale_inv_mean = smean;
    s->scale_inv_std = sqrt(sv / (double)ng);
    s->max_block_dynamic_range = ng == 1 ? s->dynamic_range : bdr;
    if (out0)
        for (size_t i = 0; i < R; i++)
            for (size_t j = 0; j < C; j++)
                out0[trans ? j * cols + i : i * cols + j] = q[i * C + j];
    /* TE's count: |x| > fp8_max * scale_inv, float32 product, every element;
     * defined for per-tensor static scales only */
    if (r->kind == FP8_RECIPE_DELAYED || r->kind == FP8_RECIPE_NONE) {
        for (size_t i = 0; i < R; i++)
            for (size_t j = 0; j < C; j++) {
                float thr = (float)f->max * si[group_of(r, i, j, R, C, &ng)];
                s->te_overflows += fabsf(x[i * C + j]) > thr;
            }
    } else
        s->te_overflows = UINT64_MAX;
    /* TE's amax kernel keeps Inf (fmaxf drops only NaN): Inf enters the history */
    if (r->kind == FP8_RECIPE_DELAYED)
        fp8_recipe_state_observe(st, s->inf_count && !r->finite_amax ? INFINITY : (float)amax);
    free(x), free(q), free(gamax), free(gminnz), free(sc), free(si), free(gov), free(gun);
    return FP8_OK;
}
