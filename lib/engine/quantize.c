/*
 * quantize.c — the quantization engine: a tensor, a recipe state, its
 * dequantized values and every statistic (fp8_stats.h).
 *
 * Work plan for a rows x cols tensor (column-wise recipes first transpose it
 * into scratch, and transpose x_hat back):
 *   1. amax pass (recipes that scale from this tensor): finite amax and
 *      min nonzero |x| of every scale group, vectorised (stats_vec.c);
 *   2. the scale of every group, by the reference system's rule
 *      (quantize_scales.c, recipe.c);
 *   3. one fused pass over pieces of up to PIECE elements: the element cast
 *      of the piece, then, while it is in cache, x's own statistics with the
 *      exponent bins and the error sums against x_hat (one vector loop, or
 *      the error sums alone when the caller gave x's statistics);
 *   4. the sums turned into fp8_stats (quantize_finish.c).
 * Groups: one per tensor (none, delayed, current), per row (rowwise), per
 * tile (block: tiles of block_rows x block_cols; edge tiles are partial and
 * take their amax over the elements they have), per `group` elements along a
 * row (mx, nvfp4; a row's last group may be partial, groups never span rows).
 */
#include <float.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "f32bits.h"
#include "cast_impl.h"
#include "cast_internal.h"
#include "fp8_stats.h"
#include "fpenv.h"
#include "recipe_internal.h"
#include "parallel.h"
#include "quantize_internal.h"
#include "stats_vec.h"
#include "kernels.h"
#include "recipe_state.h"
#include "scratch.h"

/* elements cast and summed per step of the fused pass: a piece of x and
 * its x_hat (256 KB) stay in a core's L2 while the passes over them run;
 * measured here, 4096 (L1-sized) was 10 % slower, 32768 and up level */
#define PIECE 32768

/* ---- the fused pass --------------------------------------------------------- */

/* Interleaved 32-bit sub-histograms (stats_vec.h), flushed into the
 * 64-bit histogram before any counter can wrap. */
typedef struct {
    fp8__hist_state s;
    uint64_t pending;
} hist_acc;

static void hist_flush(hist_acc *h, uint64_t *out)
{
    fp8__hist_fold(&h->s);
    for (int k = 0; k < FP8_HIST_SUBS; k++)
        for (int b = 0; b < FP8_EXP_BINS; b++)
            out[b] += h->s.sub[k][b];
    memset(h->s.sub, 0, sizeof h->s.sub);
    h->pending = 0;
}

/* n more elements counted in h's 32-bit sub-histograms: flushed into out
 * before any counter can wrap */
static void hist_count(hist_acc *h, uint64_t *out, size_t n)
{
    if ((h->pending += n) > ((uint64_t)1 << 31))
        hist_flush(h, out);
}

static void hist_add(hist_acc *h, uint64_t *out, const float *x, size_t n)
{
    fp8__k.hist_vec(h->s.sub, x, n);
    hist_count(h, out, n);
}

/* A group whose scale is zero (nvfp4 block scale underflowed): every
 * element becomes +-0; nonzero finite values are flushed.  codes (may be
 * NULL) get the codes of +-0, NaN, or +-max for +-Inf. */
static void zero_scale_piece(const fp8_format *f, const float *x, size_t n, float *q, void *codes,
                             uint64_t cnt[FP8_NCLASS])
{
    for (size_t i = 0; i < n; i++) {
        float v = x[i];
        if (codes) {
            float w = isnan(v) || isinf(v) ? v : copysignf(0.0f, v);
            uint32_t u;
            fp8_class cls;
            memcpy(&u, &w, 4);
            uint32_t code = fp8__encode_bits(f, FP8_ROUND_NEAREST, 1, u, 0, &cls);
            if (f->code_bytes == 1)
                ((uint8_t *)codes)[i] = (uint8_t)code;
            else
                ((uint16_t *)codes)[i] = (uint16_t)code;
        }
        q[i] = copysignf(0.0f, v);
        if (isnan(v))
            cnt[FP8_CLASS_NAN]++, q[i] = v;
        else if (isinf(v))
            cnt[FP8_CLASS_SATURATED]++;
        else if (v == 0.0f)
            cnt[FP8_CLASS_EXACT]++;
        else
            cnt[FP8_CLASS_FLUSHED]++;
    }
}

typedef struct {
    fp8__caster caster;
    fp8__moments mom;   /* the error sums when x's statistics are given */
    fp8__moments xmom;  /* x's own statistics (and the error sums otherwise) */
    uint64_t cnt[FP8_NCLASS];
    uint64_t *hist;     /* FP8_EXP_BINS, or NULL */
    hist_acc *hacc;
    int stats;          /* error sums wanted     */
    int xstats;         /* x's statistics wanted (not given by the caller) */
    int scan;           /* x's amax, Inf and NaN counts wanted, piece by piece while hot */
    uint32_t amax_bits;
    uint64_t ninf, nnan;
    int te_on;          /* TE's overflow count, |x| > te_thr, taken before each piece's cast */
    float te_thr;
    uint64_t te_n;
    float *buf;         /* PIECE floats          */
} pass_ctx;

/* the sums that hold the error sums */
static const fp8__moments *err_sums(const pass_ctx *c) { return c->xstats ? &c->xmom : &c->mom; }

/* The statistics of a piece of x and its x_hat q: x's own (with the
 * exponent bins in the same pass) unless given, the error sums if wanted. */
static void piece_stats(pass_ctx *c, const float *x, const float *q, size_t m)
{
    if (c->xstats) {
        if (c->stats)
            fp8__k.both_add(&c->xmom, x, q, m, c->hist ? &c->hacc->s : NULL);
        else
            fp8__k.xmoments_add(&c->xmom, x, m, c->hist ? &c->hacc->s : NULL);
        if (c->hist)
            hist_count(c->hacc, c->hist, m);
    } else if (c->stats) {
        fp8__k.err_add(&c->mom, x, q, m);
    }
    if (c->scan) {
        uint32_t a;
        uint64_t ci, cn;
        fp8__k.amax_scan(x, m, &a, &ci, &cn); /* m <= PIECE: the lane counters hold it */
        c->amax_bits = a > c->amax_bits ? a : c->amax_bits;
        c->ninf += ci, c->nnan += cn;
    }
}

/* the elements with |x| > thr (Inf counts, NaN does not): TE's overflow test */
static uint64_t te_count(const float *x, size_t n, float thr)
{
    uint64_t k = 0;
    for (size_t i = 0; i < n; i++)
        k += fabsf(x[i]) > thr;
    return k;
}

/* Cast one segment and accumulate; returns its overflow/underflow flags. */
static unsigned run_segment(pass_ctx *c, const float *x, size_t n, float scale, float scale_inv, float *out,
                            void *codes, uint64_t index0)
{
    const size_t cb = (size_t)c->caster.f->code_bytes;
    uint64_t before_ovf = c->cnt[FP8_CLASS_SATURATED] + c->cnt[FP8_CLASS_OVERFLOW];
    uint64_t before_unf = c->cnt[FP8_CLASS_FLUSHED];
    for (size_t i = 0; i < n; i += PIECE) {
        size_t m = n - i < PIECE ? n - i : PIECE;
        /* cast straight into out unless it overwrites x (in place) */
        float *dst = (out && out != x) ? out + i : c->buf;
        void *cp = codes ? (char *)codes + i * cb : NULL;
        if (c->te_on)
            c->te_n += te_count(x + i, m, c->te_thr);
        if (scale > 0.0f)
            fp8__caster_run(&c->caster, scale, scale_inv, x + i, m, cp, dst, c->cnt, index0 + i);
        else
            zero_scale_piece(c->caster.f, x + i, m, dst, cp, c->cnt);
        piece_stats(c, x + i, dst, m);
        if (out && dst == c->buf)
            memcpy(out + i, c->buf, m * sizeof(float));
    }
    unsigned flags = 0;
    if (c->cnt[FP8_CLASS_SATURATED] + c->cnt[FP8_CLASS_OVERFLOW] > before_ovf)
        flags |= 1;
    if (c->cnt[FP8_CLASS_FLUSHED] > before_unf)
        flags |= 2;
    return flags;
}

/* ---- parts: the passes side by side ------------------------------------- */

/* Blocks kept per thread until it exits (fresh pages cost more than a small
 * tensor's cast on some machines): zeroed when first made; NULL when out of
 * memory. */
static pthread_key_t buf_key, parts_key;
static pthread_once_t keys_once = PTHREAD_ONCE_INIT;
static void keys_make(void)
{
    pthread_key_create(&buf_key, free);
    pthread_key_create(&parts_key, free);
}
static void *kept_block(const pthread_key_t *key, size_t bytes)
{
    pthread_once(&keys_once, keys_make); /* (before *key is read) */
    void *b = pthread_getspecific(*key);
    if (!b && (b = calloc(1, bytes)) != NULL && pthread_setspecific(*key, b) != 0) {
        free(b);
        b = NULL;
    }
    return b;
}

/* A piece's x_hat when it cannot go straight to out */
static float *thread_buf(void) { return kept_block(&buf_key, PIECE * sizeof(float)); }

/* Per-tensor recipes and groups one row high (their groups lie in memory
 * order) split into up to MAX_PARTS parts of whole pieces (chunks of whole
 * groups); each part has sums of its own, merged in part order, so the
 * result is the same bits whatever the number of threads that ran the
 * parts (the recipe state's `threads`).  Other layouts run as one part. */
#define MAX_PARTS 8
/* The amax pass and the scales (a maximum, and values group by group: the
 * same whatever the split) in up to this many jobs, finer than the parts
 * so that two threads end together */
#define AJOBS 32

typedef struct {
    pass_ctx c;
    uint64_t hist64[FP8_EXP_BINS]; /* this part's histogram flushes */
    unsigned tflags;               /* per-tensor recipes: the one group's flags */
    int failed;                    /* no buffer on its thread: redone on the caller's */
} part;

typedef struct {
    const layout *L;
    const float *X;
    float *OUT;
    void *CODES;
    size_t cb, numel, unit, U; /* U units of `unit` elements (the last may be short) */
    int grouped, split, P;
    float *scale, *scale_inv;
    unsigned char *flags;
    uint32_t *gamax, *gminnz;
    const fp8__ranges *fine;             /* the amax pass takes the group ranges from these */
    int AJ, SJ;                          /* jobs of the amax pass and of the scales */
    int early;                           /* the amax jobs compute the scales too (not NVFP4's:
                                            they need the tensor's amax) */
    uint32_t pam[AJOBS], pmz[AJOBS];     /* amax pass, per job (pmz: per-tensor recipes) */
    unsigned char zero_scale[AJOBS];     /* scales: a group's scale is not > 0, per job */
    fp8_recipe_state *st;                    /* the scales: */
    size_t ng;
    uint32_t tot_amax;
    float s_global;
    part *parts;
} fused;

/* part p's units of U split into P: [*u0, *u1) */
static void part_range(size_t U, int P, int p, size_t *u0, size_t *u1)
{
    *u0 = U * (size_t)p / (size_t)P, *u1 = U * (size_t)(p + 1) / (size_t)P;
}

/* The parts of a cast, kept per calling thread like the piece buffer (busy
 * starts 0: the block is zeroed): a
 * cast's parts and their histograms (~250 KB) freshly allocated would come
 * from fresh pages at every cast once the heap gives them back.  A nested
 * cast on the same thread (none today) would allocate its own. */
typedef struct {
    int busy;
    part parts[MAX_PARTS];
    hist_acc hacc[MAX_PARTS];
} parts_cache;
static parts_cache *thread_parts(void) { return kept_block(&parts_key, sizeof(parts_cache)); }

/* P parts, zeroed, each with a zeroed histogram accumulator when want_hist;
 * NULL when out of memory */
static part *parts_alloc(int P, int want_hist)
{
    parts_cache *pc = thread_parts();
    if (pc && !pc->busy) {
        pc->busy = 1;
        memset(pc->parts, 0, (size_t)P * sizeof *pc->parts);
        for (int p = 0; want_hist && p < P; p++) {
            memset(&pc->hacc[p], 0, sizeof pc->hacc[p]);
            pc->parts[p].c.hacc = &pc->hacc[p];
        }
        return pc->parts;
    }
    part *parts = calloc((size_t)P, sizeof *parts);
    for (int p = 0; parts && want_hist && p < P; p++)
        if (!(parts[p].c.hacc = calloc(1, sizeof(hist_acc)))) {
            while (p--)
                free(parts[p].c.hacc);
            free(parts);
            return NULL;
        }
    return parts;
}

static void parts_free(part *parts, int P)
{
    parts_cache *pc = pthread_getspecific(parts_key); /* (the key exists: parts_alloc made it) */
    if (pc && parts == pc->parts) {
        pc->busy = 0;
        return;
    }
    for (int p = 0; parts && p < P; p++)
        free(parts[p].c.hacc);
    free(parts);
}

/* the parts' exponent histograms added into out (integers: any order) */
static void parts_hist(part *parts, int P, uint64_t out[FP8_EXP_BINS])
{
    for (int p = 0; p < P; p++) {
        hist_flush(parts[p].c.hacc, parts[p].hist64);
        for (int k = 0; k < FP8_EXP_BINS; k++)
            out[k] += parts[p].hist64[k];
    }
}

/* the cast and statistics of one chunk of whole groups (the grouped kernel) */
static void grouped_chunk(fused *F, pass_ctx *c, size_t off, size_t m, size_t gi)
{
    float *dst = (F->OUT && F->OUT != F->X) ? F->OUT + off : c->buf;
    fp8__caster_run_groups(&c->caster, F->X + off, m, F->L->seg, F->scale + gi, F->scale_inv + gi, dst,
                           F->CODES ? (char *)F->CODES + off * F->cb : NULL, c->cnt, F->flags + gi, off);
    piece_stats(c, F->X + off, dst, m);
    if (F->OUT && dst == c->buf)
        memcpy(F->OUT + off, c->buf, m * sizeof(float));
}

/* the cast and statistics of units [u0, u1) */
static void fused_units(fused *F, part *pp, size_t u0, size_t u1)
{
    for (size_t u = u0; u < u1; u++) {
        size_t off = u * F->unit, m = F->numel - off < F->unit ? F->numel - off : F->unit;
        if (F->grouped)
            grouped_chunk(F, &pp->c, off, m, off / F->L->seg);
        else /* per tensor */
            pp->tflags |= run_segment(&pp->c, F->X + off, m, F->scale[0], F->scale_inv[0],
                                      F->OUT ? F->OUT + off : NULL,
                                      F->CODES ? (char *)F->CODES + off * F->cb : NULL, off);
    }
}

/* the layouts that run as one part: tiles more than a row high, and
 * segments the grouped kernel does not take */
static void fused_whole(fused *F, part *pp)
{
    pass_ctx *c = &pp->c;
    const layout *L = F->L;
    const float *X = F->X;
    if (F->grouped) { /* tiles of br rows: a row's chunks, row after row */
        const size_t chunk = (PIECE / L->seg) * L->seg;
        for (size_t i = 0; i < L->R; i++)
            for (size_t j0 = 0; j0 < L->C; j0 += chunk)
                grouped_chunk(F, c, i * L->C + j0, L->C - j0 < chunk ? L->C - j0 : chunk,
                              (i / L->br) * L->nbc + j0 / L->seg);
        return;
    }
    for (size_t i = 0; i < L->R; i++)
        for (size_t jb = 0; jb < L->nbc; jb++) {
            size_t j0 = jb * L->seg, len = L->C - j0 < L->seg ? L->C - j0 : L->seg;
            size_t g = (i / L->br) * L->nbc + jb, off = i * L->C + j0;
            F->flags[g] |= (unsigned char)run_segment(c, X + off, len, F->scale[g], F->scale_inv[g],
                                                      F->OUT ? F->OUT + off : NULL,
                                                      F->CODES ? (char *)F->CODES + off * F->cb : NULL, off);
        }
}

static void fused_job(void *ctx, int p)
{
    fused *F = ctx;
    part *pp = &F->parts[p];
    if (!(pp->c.buf = thread_buf())) {
        pp->failed = 1;
        return;
    }
    fp8__fenv env; /* this thread's floating-point environment, as the caller's */
    fp8__fenv_enter(&env);
    size_t u0, u1;
    part_range(F->U, F->P, p, &u0, &u1);
    if (F->split)
        fused_units(F, pp, u0, u1);
    else
        fused_whole(F, pp);
    fp8__fenv_leave(&env);
}

/* the scales of groups [g0, g1), noted in job p's zero-scale flag */
static void group_scales_range(fused *F, size_t g0, size_t g1, int p)
{
    float sg = 1.0f;
    fp8__fenv env;
    fp8__fenv_enter(&env);
    fp8__group_scales(F->st, g0, F->gamax + g0, g1 - g0, fp8__bits_to_float(F->tot_amax), F->scale + g0,
                      F->scale_inv + g0, &sg);
    fp8__fenv_leave(&env);
    for (size_t g = g0; g < g1; g++)
        if (!(F->scale[g] > 0.0f))
            F->zero_scale[p] = 1; /* such groups take the per-segment path */
    if (g0 == 0)
        F->s_global = sg; /* NVFP4's, the same from every range */
}

static void scales_job(void *ctx, int p)
{
    fused *F = ctx;
    size_t g0, g1;
    part_range(F->ng, F->SJ, p, &g0, &g1);
    group_scales_range(F, g0, g1, p);
}

/* the amax pass of rows [i0, i1) (groups other than one per tensor) */
static void amax_rows(const layout *L, const float *X, size_t i0, size_t i1, uint32_t *gamax, uint32_t *gminnz)
{
    for (size_t i = i0; i < i1; i++) {
        if (L->br == 1 && L->seg % 16 == 0 && L->C % L->seg == 0 && L->seg < 1024) {
            /* short groups along the row: one call for the whole row */
            fp8__k.range_groups(X + i * L->C, L->C, L->seg, gamax + i * L->nbc, gminnz + i * L->nbc);
            continue;
        }
        for (size_t jb = 0; jb < L->nbc; jb++) {
            size_t j0 = jb * L->seg, len = L->C - j0 < L->seg ? L->C - j0 : L->seg;
            size_t g = (i / L->br) * L->nbc + jb;
            fp8__k.range_pass(X + i * L->C + j0, len, &gamax[g], &gminnz[g]);
        }
    }
}

/* Whether groups L (of the same x, not per tensor) are unions of f's: the
 * same rows, and a group boundary along a row only where f has one. */
static int ranges_nest(const fp8__ranges *f, const layout *L)
{
    return f && !L->per_tensor && f->R == L->R && f->C == L->C && (L->nbc == 1 || L->seg % f->seg == 0);
}

/* The ranges of L's groups in tile rows [t0, t1) as the maxima and minima
 * of f's groups within them (ranges_nest): exact, no x read. */
static void ranges_from_fine(const layout *L, const fp8__ranges *f, size_t t0, size_t t1, uint32_t *gamax,
                             uint32_t *gminnz)
{
    const size_t per = L->nbc == 1 ? f->nbc : L->seg / f->seg; /* f's groups across one of L's */
    for (size_t t = t0; t < t1; t++) {
        size_t i0 = t * L->br, i1 = i0 + L->br < L->R ? i0 + L->br : L->R;
        for (size_t jb = 0; jb < L->nbc; jb++) {
            size_t k0 = jb * per, k1 = k0 + per < f->nbc ? k0 + per : f->nbc;
            uint32_t a = 0, z = FP8_F32_INF;
            for (size_t i = i0; i < i1; i++) {
                const uint32_t *fa = f->amax + i * f->nbc, *fz = f->minnz + i * f->nbc;
                for (size_t k = k0; k < k1; k++) {
                    a = fa[k] > a ? fa[k] : a;
                    z = fz[k] < z ? fz[k] : z;
                }
            }
            gamax[t * L->nbc + jb] = a, gminnz[t * L->nbc + jb] = z;
        }
    }
}

static void amax_job(void *ctx, int p)
{
    fused *F = ctx;
    const layout *L = F->L;
    if (L->per_tensor) {
        size_t u0, u1;
        part_range(F->U, F->AJ, p, &u0, &u1);
        size_t e0 = u0 * F->unit, e1 = u1 * F->unit < F->numel ? u1 * F->unit : F->numel;
        F->pam[p] = 0, F->pmz[p] = FP8_F32_INF;
        if (e1 > e0)
            fp8__k.range_pass(F->X + e0, e1 - e0, &F->pam[p], &F->pmz[p]);
        return;
    }
    size_t rows = L->br == 1 ? L->R : (L->R + L->br - 1) / L->br; /* whole tile rows per job */
    size_t r0, r1;
    part_range(rows, F->AJ, p, &r0, &r1);
    size_t g0 = r0 * L->nbc, g1 = r1 * L->nbc; /* this part's groups */
    if (F->fine) {
        ranges_from_fine(L, F->fine, r0, r1, F->gamax, F->gminnz);
    } else {
        for (size_t g = g0; g < g1; g++)
            F->gminnz[g] = FP8_F32_INF;
        if (L->br > 1)
            r0 *= L->br, r1 = r1 * L->br < L->R ? r1 * L->br : L->R;
        amax_rows(L, F->X, r0, r1, F->gamax, F->gminnz);
    }
    uint32_t top = 0; /* the part's largest amax, for the tensor's */
    for (size_t g = g0; g < g1; g++)
        top = F->gamax[g] > top ? F->gamax[g] : top;
    F->pam[p] = top;
    if (F->early && g1 > g0) /* scales that need only their group's amax: here, while it is hot */
        group_scales_range(F, g0, g1, p);
}

/* amax, Inf and NaN counts in chunks the lane counters hold */
static void amax_info(const float *x, size_t n, uint32_t *amax_bits, uint64_t *ninf, uint64_t *nnan)
{
    enum { CHUNK = 1u << 30 };
    *amax_bits = 0, *ninf = 0, *nnan = 0;
    for (size_t i = 0; i < n; i += CHUNK) {
        uint32_t a;
        uint64_t ci, cn;
        fp8__k.amax_scan(x + i, n - i < CHUNK ? n - i : CHUNK, &a, &ci, &cn);
        if (a > *amax_bits)
            *amax_bits = a;
        *ninf += ci, *nnan += cn;
    }
}

int fp8_tensor_amax(const float *x, size_t n, fp8_amax_info *out)
{
    if (!out || (!x && n))
        return FP8_ERROR(FP8_EINVAL, "fp8_tensor_amax: %s is NULL", out ? "the tensor" : "out");
    fp8__kernels_pick();
    uint32_t a;
    amax_info(x, n, &a, &out->inf_count, &out->nan_count);
    out->amax = fp8__bits_to_float(a);
    return FP8_OK;
}

int fp8_tensor_exp_hist(const float *x, size_t n, uint64_t hist[FP8_EXP_BINS])
{
    if (!hist || (!x && n))
        return FP8_ERROR(FP8_EINVAL, "fp8_tensor_exp_hist: %s is NULL", hist ? "the tensor" : "hist");
    fp8__kernels_pick();
    hist_acc *h = calloc(1, sizeof *h);
    if (!h)
        return FP8_ERROR(FP8_ENOMEM, "fp8_tensor_exp_hist: out of memory");
    memset(hist, 0, FP8_EXP_BINS * sizeof *hist);
    enum { CHUNK = 1u << 30 };
    for (size_t i = 0; i < n; i += CHUNK)
        hist_add(h, hist, x + i, n - i < CHUNK ? n - i : CHUNK);
    hist_flush(h, hist);
    free(h);
    return FP8_OK;
}

int fp8_tensor_stats(const float *x, size_t n, fp8_stats *stats, unsigned flags)
{
    return fp8_tensor_stats_ex(x, n, stats, flags, 1);
}

/* x's own statistics, pieces [U p / P, U (p + 1) / P) into part p: the
 * parts a per-tensor recipe's cast takes, so the same sums */
struct fp8__xpass {
    const float *x;
    size_t n, U;
    int P, want_hist;
    part *parts;
};

fp8__xpass *fp8__xpass_begin(const float *x, size_t n, unsigned flags)
{
    fp8__kernels_pick();
    fp8__xpass *W = calloc(1, sizeof *W);
    if (!W)
        return NULL;
    W->x = x, W->n = n, W->U = (n + PIECE - 1) / PIECE;
    W->P = W->U < 1 ? 1 : (int)(W->U < MAX_PARTS ? W->U : MAX_PARTS);
    W->want_hist = !(flags & FP8_STATS_NO_EXP_HIST);
    if (!(W->parts = parts_alloc(W->P, W->want_hist))) {
        free(W);
        return NULL;
    }
    for (int p = 0; p < W->P; p++) {
        pass_ctx *c = &W->parts[p].c;
        fp8__moments_init(&c->xmom);
        c->xstats = 1;
        c->hist = W->want_hist ? W->parts[p].hist64 : NULL;
    }
    return W;
}

void fp8__xpass_shape(const fp8__xpass *W, size_t *U, int *P) { *U = W->U, *P = W->P; }

void fp8__xpass_units(fp8__xpass *W, int p, size_t u0, size_t u1)
{
    for (size_t u = u0; u < u1; u++) {
        size_t off = u * PIECE;
        piece_stats(&W->parts[p].c, W->x + off, NULL, W->n - off < PIECE ? W->n - off : PIECE);
    }
}

void fp8__xpass_end(fp8__xpass *W, fp8_stats *stats)
{
    if (stats) {
        memset(stats, 0, sizeof *stats);
        fp8__moments *m = &W->parts[0].c.xmom;
        for (int p = 1; p < W->P; p++)
            fp8__moments_merge(m, &W->parts[p].c.xmom);
        fp8__fenv env;
        fp8__fenv_enter(&env);
        fp8__finish_x(stats, m, W->n);
        fp8__fenv_leave(&env);
        if (W->want_hist)
            parts_hist(W->parts, W->P, stats->exp_hist);
    }
    parts_free(W->parts, W->P);
    free(W);
}

static void xstats_job(void *ctx, int p)
{
    fp8__xpass *W = ctx;
    fp8__fenv env;
    fp8__fenv_enter(&env);
    size_t u0, u1;
    part_range(W->U, W->P, p, &u0, &u1);
    fp8__xpass_units(W, p, u0, u1);
    fp8__fenv_leave(&env);
}

int fp8_tensor_stats_ex(const float *x, size_t n, fp8_stats *stats, unsigned flags, int threads)
{
    if (!stats || (!x && n))
        return FP8_ERROR(FP8_EINVAL, "fp8_tensor_stats: %s is NULL", stats ? "the tensor" : "stats");
    fp8__xpass *W = fp8__xpass_begin(x, n, flags);
    if (!W)
        return FP8_ERROR(FP8_ENOMEM, "fp8_tensor_stats: out of memory");
    fp8__parallel_for(W->P, threads, xstats_job, W);
    fp8__xpass_end(W, stats);
    return FP8_OK;
}

/* Per-block delayed scaling at a cast that produces nothing (a shadow on
 * a step without statistics): the blocks' amaxes into their histories. */
static int block_observe_only(fp8_recipe_state *st, const float *x, size_t rows, size_t cols, fp8_amax_info *ai)
{
    const fp8_recipe *r = &st->recipe;
    const int trans = fp8__needs_transpose(r);
    layout L;
    fp8__make_layout(r, trans ? cols : rows, trans ? rows : cols, &L);
    int e = fp8__block_state(st, L.ngroups, rows, cols);
    if (e != FP8_OK)
        return e;
    size_t numel = rows * cols;
    uint32_t *gamax = malloc(2 * L.ngroups * sizeof *gamax);
    float *xt = trans ? fp8__scratch_take(FP8__SCRATCH_XT, numel * sizeof *xt) : NULL;
    if (!gamax || (trans && !xt)) {
        free(gamax), fp8__scratch_give(FP8__SCRATCH_XT, xt);
        return FP8_ERROR(FP8_ENOMEM, "fp8_quantize: out of memory for %zu block amaxes", L.ngroups);
    }
    const float *X = x;
    if (trans) {
        fp8__transpose(x, rows, cols, xt);
        X = xt;
    }
    memset(gamax, 0, L.ngroups * sizeof *gamax);
    for (size_t g = 0; g < L.ngroups; g++)
        gamax[L.ngroups + g] = FP8_F32_INF;
    fp8__fenv env;
    fp8__fenv_enter(&env);
    amax_rows(&L, X, 0, L.R, gamax, gamax + L.ngroups);
    fp8__block_observe(st, gamax, L.ngroups);
    fp8__fenv_leave(&env);
    if (ai)
        fp8_tensor_amax(x, numel, ai);
    free(gamax), fp8__scratch_give(FP8__SCRATCH_XT, xt);
    return FP8_OK;
}

/* ---- a cast in three steps ----------------------------------------------- */

/* One cast under way: begun (validated, scratch made, amax pass and scales
 * done, the fused pass set up), its fused pass run (fp8__cast_run, or unit
 * by unit beside other casts of the same x: fp8__cast_units), then ended
 * (the sums turned into fp8_stats, the state moved, scratch freed). */
struct fp8__cast {
    fp8_recipe_state *st;
    const float *x;
    size_t rows, cols, numel;
    float *out;
    fp8_stats *stats;
    void *codes;
    float *group_scale_inv;
    fp8_amax_info *ai;
    int trans, x_given, want_hist, threads, te_on;
    int own_ranges; /* F's gamax and gminnz: x's group ranges (fp8__cast_ranges) */
    layout L;
    fused F;
    float *xt, *qt;
    void *ct;
};

/* the end of a cast that failed or has nothing left to do */
static void cast_free(fp8__cast *c)
{
    if (!c)
        return;
    parts_free(c->F.parts, c->F.P);
    fp8__scratch_give(FP8__SCRATCH_XT, c->xt), fp8__scratch_give(FP8__SCRATCH_QT, c->qt);
    fp8__scratch_give(FP8__SCRATCH_CT, c->ct);
    free(c);
}

/* The cast's own checks and the two ways it ends at once: nothing to
 * produce (only the state moves).  1 when done (*rc says how), 0 to go on. */
static int cast_trivial(fp8_recipe_state *st, const float *x, size_t rows, size_t cols, float *out,
                        fp8_stats *stats, void *codes, fp8_amax_info *ai, int *rc)
{
    *rc = FP8_OK;
    if (!st || !x)
        *rc = FP8_ERROR(FP8_EINVAL, "fp8_quantize: %s is NULL", st ? "the tensor" : "the recipe state");
    else if (rows == 0 || cols == 0)
        *rc = FP8_ERROR(FP8_EINVAL, "fp8_quantize: empty shape %zux%zu", rows, cols);
    else if (rows > SIZE_MAX / cols / sizeof(float))
        *rc = FP8_ERROR(FP8_EINVAL, "fp8_quantize: shape %zux%zu too large", rows, cols);
    if (*rc != FP8_OK)
        return 1;
    fp8__kernels_pick();
    const fp8_recipe *r = &st->recipe;
    if (out || stats || codes)
        return 0;
    if (r->block_delayed) {
        *rc = block_observe_only(st, x, rows, cols, ai);
        return 1;
    }
    /* nothing to produce: only the recipe's state moves (delayed scaling
     * notes the amax; the other recipes keep no state) */
    if (r->kind == FP8_RECIPE_DELAYED || ai) {
        uint32_t amax;
        uint64_t ninf, nnan;
        amax_info(x, rows * cols, &amax, &ninf, &nnan); /* integer work only */
        if (r->kind == FP8_RECIPE_DELAYED)
            fp8__observe_amax(st, fp8__bits_to_float(amax), ninf > 0);
        if (ai)
            ai->amax = fp8__bits_to_float(amax), ai->inf_count = ninf, ai->nan_count = nnan;
    }
    return 1;
}

/* scratch, all allocated up front so a failure changes nothing: the
 * per-group arrays in the state's scratch (reused cast after cast), the
 * transposes, the parts */
static int cast_scratch(fp8__cast *c)
{
    fp8_recipe_state *st = c->st;
    const layout *L = &c->L;
    size_t ng = L->ngroups, numel = c->numel;
    if (ng > SIZE_MAX / 32)
        return FP8_ERROR(FP8_ENOMEM, "fp8_quantize: %zu groups", ng);
    size_t need = ng * (4 * sizeof(uint32_t) + 1);
    if (st->scratch_bytes < need) {
        void *sp = malloc(need);
        if (!sp)
            return FP8_ERROR(FP8_ENOMEM, "fp8_quantize: out of memory for %zu groups", ng);
        free(st->scratch);
        st->scratch = sp, st->scratch_bytes = need;
    }
    fused *F = &c->F;
    F->gamax = st->scratch, F->gminnz = F->gamax + ng;
    F->scale = (float *)(F->gminnz + ng), F->scale_inv = F->scale + ng;
    F->flags = (unsigned char *)(F->scale_inv + ng);
    memset(F->gamax, 0, ng * sizeof *F->gamax);
    memset(F->flags, 0, ng);
    const size_t cb = (size_t)st->format->code_bytes;
    c->xt = c->trans ? fp8__scratch_take(FP8__SCRATCH_XT, numel * sizeof *c->xt) : NULL;
    c->qt = c->trans && c->out ? fp8__scratch_take(FP8__SCRATCH_QT, numel * sizeof *c->qt) : NULL;
    c->ct = c->trans && c->codes ? fp8__scratch_take(FP8__SCRATCH_CT, numel * cb) : NULL;
    /* the parts (see fused): pieces of PIECE for per-tensor recipes, chunks
     * of whole groups for groups one row high */
    F->L = L, F->cb = cb, F->numel = numel, F->st = st, F->ng = ng, F->s_global = 1.0f;
    F->grouped = !L->per_tensor && L->seg % 16 == 0 && L->C % L->seg == 0 && L->seg <= PIECE;
    F->split = L->per_tensor || (F->grouped && L->br == 1);
    F->unit = L->per_tensor ? PIECE : (PIECE / L->seg) * L->seg;
    F->U = F->split ? (numel + F->unit - 1) / F->unit : 1;
    F->P = F->split ? (int)(F->U < MAX_PARTS ? F->U : MAX_PARTS) : 1;
    F->parts = parts_alloc(F->P, c->want_hist);
    if ((c->trans && !c->xt) || (c->trans && c->out && !c->qt) || !F->parts || !thread_buf() ||
        (c->trans && c->codes && !c->ct))
        return FP8_ERROR(FP8_ENOMEM, "fp8_quantize: out of memory for a %zux%zu tensor", c->rows, c->cols);
    return FP8_OK;
}

/* 1. the amax pass (recipes that scale from this tensor; a per-tensor one
 * takes the caller's known amax when it has one) and 2. the scales */
static void cast_scales(fp8__cast *c, const fp8_amax_info *known, const fp8__ranges *fine)
{
    fused *F = &c->F;
    const layout *L = &c->L;
    const fp8_recipe *r = &c->st->recipe;
    const int need_amax = r->kind != FP8_RECIPE_NONE && r->kind != FP8_RECIPE_DELAYED;
    uint32_t *gamax = F->gamax, *gminnz = F->gminnz;
    size_t ng = L->ngroups, numel = c->numel;
    if (!need_amax) /* (else the amax pass sets them) */
        for (size_t g = 0; g < ng; g++)
            gminnz[g] = FP8_F32_INF;
    uint32_t tot_amax = 0; /* (delayed scaling needs no amax pass) */
    if (need_amax && L->per_tensor && known && known->inf_count + known->nan_count < numel) {
        /* x's finite amax is known (a float32 value): no pass (gminnz[0] is
         * not read for one group; set to "none" all the same, not left
         * from the last cast) */
        memcpy(&tot_amax, &known->amax, 4);
        gamax[0] = tot_amax, gminnz[0] = FP8_F32_INF;
    } else if (need_amax) {
        F->early = !L->per_tensor && r->kind != FP8_RECIPE_NVFP4;
        F->fine = !c->trans && ranges_nest(fine, L) ? fine : NULL;
        c->own_ranges = !L->per_tensor && !c->trans && L->br == 1;
        if (L->per_tensor)
            gminnz[0] = FP8_F32_INF;
        size_t trows = L->br == 1 ? L->R : (L->R + L->br - 1) / L->br;
        size_t aj = L->per_tensor ? F->U : trows < numel / 4096 ? trows : numel / 4096; /* jobs of >= 4096 elements */
        F->AJ = aj < 1 ? 1 : aj > AJOBS ? AJOBS : (int)aj;
        fp8__parallel_for(F->AJ, c->threads, amax_job, F);
        for (int p = 0; p < F->AJ; p++) {
            tot_amax = F->pam[p] > tot_amax ? F->pam[p] : tot_amax;
            if (L->per_tensor)
                gminnz[0] = F->pmz[p] < gminnz[0] ? F->pmz[p] : gminnz[0];
        }
        if (L->per_tensor)
            gamax[0] = tot_amax;
    }
    /* scales, a range of groups per part (each group's from its own amax
     * and the tensor's) */
    F->tot_amax = tot_amax;
    if (F->early)
        F->SJ = F->AJ; /* done: the amax jobs' zero-scale flags */
    else {
        F->SJ = ng >= 4096 ? (int)(ng / 1024 < AJOBS ? ng / 1024 : AJOBS) : 1;
        fp8__parallel_for(F->SJ, c->threads, scales_job, F);
    }
}

/* 3. the fused pass's parts set up.  TE's overflow count of a per-tensor
 * static scale reads x after the cast when it can hold such a value; when
 * x will have changed by then (cast in place, or beside a cast in place),
 * it is counted piece by piece before each piece's cast instead. */
static void cast_parts(fp8__cast *c, const fp8_amax_info *known, int x_changes)
{
    fused *F = &c->F;
    const fp8_recipe *r = &c->st->recipe;
    for (int p = 0; p < F->SJ; p++)
        if (F->zero_scale[p])
            F->grouped = 0; /* zero-scale groups take the per-segment path */
    float thr = (float)c->st->format->max * F->scale_inv[0];
    c->te_on = c->stats && x_changes && !c->trans && c->L.per_tensor &&
               (r->kind == FP8_RECIPE_DELAYED || r->kind == FP8_RECIPE_NONE) &&
               (!known || known->inf_count > 0 || known->amax > thr);
    for (int p = 0; p < F->P; p++) {
        pass_ctx *pc = &F->parts[p].c;
        fp8__caster_init(&pc->caster, c->st->format, &r->cast);
        if (!pc->caster.vec)
            F->grouped = 0;
        fp8__moments_init(&pc->mom);
        fp8__moments_init(&pc->xmom);
        pc->hist = c->want_hist ? F->parts[p].hist64 : NULL;
        pc->stats = c->stats != NULL;
        pc->xstats = c->stats && !c->x_given;
        /* x's amax measured on the cast's own pass, piece by piece while the
         * piece is in cache: asked for, or a delayed recipe's note without
         * statistics and without an amax from the caller */
        pc->scan = c->ai || (r->kind == FP8_RECIPE_DELAYED && !c->stats && isnan(c->st->known_amax));
        pc->te_on = c->te_on, pc->te_thr = thr;
    }
    if (!F->grouped && !c->L.per_tensor)
        F->split = 0; /* one part (P stays: the extra parts stay empty) */
    F->X = c->trans ? c->xt : c->x;
    F->OUT = c->trans ? c->qt : c->out;
    F->CODES = c->trans ? c->ct : c->codes;
}

int fp8__cast_begin(fp8__cast **cp, fp8_recipe_state *st, const float *x, size_t rows, size_t cols, float *out,
                    fp8_stats *stats, unsigned options, void *codes, float *group_scale_inv, fp8_amax_info *ai,
                    const fp8_amax_info *known, const fp8__ranges *fine, int x_changes)
{
    *cp = NULL;
    int rc;
    if (cast_trivial(st, x, rows, cols, out, stats, codes, ai, &rc))
        return rc;
    const fp8_recipe *r = &st->recipe;
    const int x_given = stats && (options & (FP8_STATS_X_GIVEN | FP8__STATS_X_LATER));
    if (stats && (options & FP8_STATS_X_GIVEN) && stats->numel != (uint64_t)rows * cols)
        return FP8_ERROR(FP8_EINVAL, "fp8_quantize: the given statistics of x are of %llu elements, the tensor has %zu",
                         (unsigned long long)stats->numel, rows * cols);
    fp8__cast *c = calloc(1, sizeof *c);
    if (!c)
        return FP8_ERROR(FP8_ENOMEM, "fp8_quantize: out of memory");
    c->st = st, c->x = x, c->rows = rows, c->cols = cols, c->numel = rows * cols, c->out = out, c->stats = stats;
    c->codes = codes, c->group_scale_inv = group_scale_inv, c->ai = ai;
    c->trans = fp8__needs_transpose(r);
    c->x_given = x_given;
    c->want_hist = stats && !x_given && !(options & FP8_STATS_NO_EXP_HIST);
    c->threads = st->threads > 1 ? st->threads : 1;
    fp8__make_layout(r, c->trans ? cols : rows, c->trans ? rows : cols, &c->L);
    if (r->block_delayed && (rc = fp8__block_state(st, c->L.ngroups, rows, cols)) != FP8_OK) {
        free(c); /* its histories, for this shape (made at the first cast) */
        return rc;
    }
    if ((rc = cast_scratch(c)) != FP8_OK) {
        cast_free(c);
        return rc;
    }
    if (c->trans)
        fp8__transpose(x, rows, cols, c->xt);
    c->F.X = c->trans ? c->xt : x;
    /* everything below compares, converts or divides floats that may be
     * subnormal: in the default environment (fpenv.h) */
    fp8__fenv env;
    fp8__fenv_enter(&env);
    cast_scales(c, known, fine);
    cast_parts(c, known, x_changes || (out == x && !c->trans));
    fp8__fenv_leave(&env);
    *cp = c;
    return FP8_OK;
}

int fp8__cast_ranges(const fp8__cast *c, fp8__ranges *out)
{
    if (!c || !c->own_ranges)
        return 0;
    *out = (fp8__ranges){.R = c->L.R, .C = c->L.C, .seg = c->L.seg, .nbc = c->L.nbc, .amax = c->F.gamax,
                         .minnz = c->F.gminnz};
    return 1;
}

int fp8__cast_joins(const fp8__cast *c, size_t *U, int *P)
{
    if (!c || !c->F.split || c->trans || c->F.unit != PIECE)
        return 0;
    *U = c->F.U, *P = c->F.P;
    return 1;
}

void fp8__cast_units(fp8__cast *c, int p, size_t u0, size_t u1, float *buf)
{
    part *pp = &c->F.parts[p];
    pp->c.buf = buf;
    fused_units(&c->F, pp, u0, u1);
}

void fp8__cast_run(fp8__cast *c)
{
    fused *F = &c->F;
    fp8__parallel_for(F->split ? F->P : 1, c->threads, fused_job, F);
    for (int p = 0; p < F->P; p++)
        if (F->parts[p].failed) /* no buffer on its thread: here, where there is one */
            fused_job(F, p);
}

float *fp8__piece_buf(void) { return thread_buf(); }

int fp8__cast_end(fp8__cast *c)
{
    if (!c)
        return FP8_OK;
    fused *F = &c->F;
    const layout *L = &c->L;
    fp8_recipe_state *st = c->st;
    const fp8_recipe *r = &st->recipe;
    fp8_stats *stats = c->stats;
    size_t ng = L->ngroups;
    fp8__fenv env;
    fp8__fenv_enter(&env);
    pass_ctx *c0 = &F->parts[0].c;
    for (int p = 1; p < F->P; p++) { /* the parts' sums, in part order */
        const pass_ctx *pc = &F->parts[p].c;
        for (int k = 0; k < FP8_NCLASS; k++)
            c0->cnt[k] += pc->cnt[k];
        fp8__moments_merge(&c0->xmom, &pc->xmom); /* (sums not kept stay empty) */
        fp8__moments_merge(&c0->mom, &pc->mom);
        c0->amax_bits = pc->amax_bits > c0->amax_bits ? pc->amax_bits : c0->amax_bits;
        c0->ninf += pc->ninf, c0->nnan += pc->nnan, c0->te_n += pc->te_n;
    }
    for (int p = 0; L->per_tensor && p < F->P; p++)
        F->flags[0] |= (unsigned char)F->parts[p].tflags;
    if (c->trans && c->out)
        fp8__transpose(c->qt, L->R, L->C, c->out);
    if (c->trans && c->codes)
        fp8__transpose_codes(c->ct, L->R, L->C, F->cb, c->codes);
    if (c->group_scale_inv)
        memcpy(c->group_scale_inv, F->scale_inv, ng * sizeof *F->scale_inv);
    if (c->ai)
        c->ai->amax = fp8__bits_to_float(c0->amax_bits), c->ai->inf_count = c0->ninf, c->ai->nan_count = c0->nnan;
    if (stats) {
        if (c->x_given) {
            fp8_stats xs;
            fp8__keep_x_fields(&xs, stats);
            memset(stats, 0, sizeof *stats);
            fp8__keep_x_fields(stats, &xs);
        } else {
            memset(stats, 0, sizeof *stats);
            fp8__finish_x(stats, &c0->xmom, c->numel);
        }
        fp8__finish_stats(stats, c0->cnt, err_sums(c0), L, L->per_tensor ? NULL : F->gamax, F->gminnz, F->scale,
                          F->scale_inv, F->flags, F->s_global, st->format, c->threads);
        /* TE defines its count for per-tensor static scales (delayed scaling);
         * under current and grouped scaling a group's own maximum exceeds
         * fp8_max * scale_inv by a float32 rounding now and then, which would
         * cost a pass and mean nothing: not defined there */
        stats->te_overflows = r->kind != FP8_RECIPE_DELAYED && r->kind != FP8_RECIPE_NONE ? UINT64_MAX
                              : c->te_on ? c0->te_n /* counted before the pieces were cast over */
                                         : fp8__te_overflow_count(F->X, L, F->scale_inv, F->gamax, (float)stats->amax,
                                                                  (float)st->format->max, stats->inf_count > 0);
        if (c->want_hist)
            parts_hist(F->parts, F->P, stats->exp_hist);
        stats->numel = c->numel;
    }
    if (r->block_delayed) /* this step's block amaxes enter the histories */
        fp8__block_observe(st, F->gamax, ng);
    if (r->kind == FP8_RECIPE_DELAYED) { /* this step's amax enters slot 0 (TE's amax: Inf when present) */
        float amax = stats ? (float)stats->amax /* x's, computed or given */
                     : !isnan(st->known_amax) ? st->known_amax /* the caller's own amax pass (probes) */
                                               : fp8__bits_to_float(c0->amax_bits); /* c0->scan */
        int inf = stats ? stats->inf_count > 0 : !isnan(st->known_amax) ? st->known_inf : c0->ninf > 0;
        fp8__observe_amax(st, amax, inf);
    }
    fp8__fenv_leave(&env);
    cast_free(c);
    return FP8_OK;
}

int fp8__quantize_core(fp8_recipe_state *st, const float *x, size_t rows, size_t cols, float *out, fp8_stats *stats,
                       unsigned options, void *codes, float *group_scale_inv, fp8_amax_info *ai)
{
    fp8_amax_info known, *kp = NULL;
    if (stats && (options & FP8_STATS_X_GIVEN)) /* x's amax is in its given statistics */
        known.amax = (float)stats->amax, known.inf_count = stats->inf_count, known.nan_count = stats->nan_count,
        kp = &known;
    fp8__cast *c;
    int rc = fp8__cast_begin(&c, st, x, rows, cols, out, stats, options, codes, group_scale_inv, ai, kp, NULL, 0);
    if (rc != FP8_OK || !c)
        return rc;
    fp8__cast_run(c);
    return fp8__cast_end(c);
}
