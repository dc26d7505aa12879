/*
 * quantize.c — the quantization engine's passes: a tensor, a recipe state,
 * its dequantized values and every statistic (fp8_stats.h); x's own
 * statistics (fp8_tensor_stats, fp8_tensor_amax).  The cast that runs these
 * passes in steps is quantize_cast.c; the types they share, quantize_pass.h.
 *
 * Work plan for a rows x cols tensor (column-wise recipes first transpose it
 * into scratch, and transpose x_hat back):
 *   1. amax pass (recipes that scale from this tensor): finite amax and
 *      min nonzero |x| of every scale group, vectorised (range_vec.c);
 *      a per-tensor current cast that sums x's statistics sums them here
 *      instead (fp8_tensor_stats: their amax is the pass's), and step 3
 *      casts only (quantize_cast.c, stats_first);
 *   2. the scale of every group, by the reference system's rule
 *      (quantize_scales.c, recipe.c);
 *      (groups one row high whose scales need no more than their own amax
 *      and the tensor's known one — MX, blocks, NVFP4 given x's amax — skip
 *      1 and 2: each unit's ranges and scales are made in step 3, before
 *      its cast, while it is in cache: x is read once);
 *   3. one fused pass over pieces of up to PIECE elements: the element cast
 *      of the piece with its error sums against x_hat made by the cast
 *      kernel on its way, then, while the piece is in cache, x's own
 *      statistics with the exponent bins unless the caller gave them (where
 *      the kernel cannot sum — stochastic rounding, e8m0, formats without
 *      -0, codes wanted, a piece outside the lean range — the cast writes
 *      x_hat and one vector loop sums x's statistics and the errors);
 *   4. the sums turned into fp8_stats (quantize_finish.c).
 * Groups: one per tensor (none, delayed, current), per row (rowwise), per
 * tile (block: tiles of block_rows x block_cols; edge tiles are partial and
 * take their amax over the elements they have), per `group` elements along a
 * row (mx, nvfp4; a row's last group may be partial, groups never span rows).
 */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "f32bits.h"
#include "cast_impl.h"
#include "cast_internal.h"
#include "fp8_stats.h"
#include "fpenv.h"
#include "recipe_internal.h"
#include "parallel.h"
#include "quantize_finish.h"
#include "quantize_many.h"
#include "quantize_pass.h"
#include "quantize_scales.h"
#include "stats_vec.h"
#include "kernels.h"
#include "recipe_state.h"
#include "scratch.h"


/* ---- the fused pass --------------------------------------------------------- */


/* h's counts added into out (when out) and cleared: the bins [lo, hi]
 * only, the others being zero */
static void hist_flush(hist_acc *h, uint64_t *out)
{
    for (uint32_t b = h->s.lo; b <= h->s.hi && b < FP8_EXP_BINS; b++) {
        uint64_t t = 0;
        for (int k = 0; k < FP8_HIST_SUBS; k++)
            t += h->s.sub[k][b], h->s.sub[k][b] = 0;
        if (out)
            out[b] += t;
    }
    h->s.lo = FP8_EXP_BINS, h->s.hi = 0;
    h->pending = 0;
}

/* h as new: no counts, the window's top at 0 */
static void hist_clear(hist_acc *h)
{
    hist_flush(h, NULL);
    h->s.top = 0;
    h->s.wide = 0;
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
    fp8__hist_touch(&h->s, 0, FP8_EXP_BINS - 1);
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



/* x's amax, Inf and NaN counts of a piece, when the cast measures them */
static void piece_scan(pass_ctx *c, const float *x, size_t m)
{
    if (c->scan) {
        uint32_t a;
        uint64_t ci, cn;
        fp8__k.amax_scan(x, m, &a, &ci, &cn); /* m <= PIECE: the lane counters hold it */
        c->amax_bits = a > c->amax_bits ? a : c->amax_bits;
        c->ninf += ci, c->nnan += cn;
    }
}

/* The statistics of a piece of x and its x_hat q: x's own (with the
 * exponent bins in the same pass) unless given, the error sums if wanted. */
static void piece_stats(pass_ctx *c, const float *x, const float *q, size_t m)
{
    if (c->xstats) {
        if (c->stats)
            fp8__k.both_add(&c->xmom, x, q, m, c->hist ? &c->hacc->s : NULL);
        else
            fp8__k.xmoments_add(&c->xmom, x, m, c->hist ? &c->hacc->s : NULL, c->xprefetch);
        if (c->hist)
            hist_count(c->hacc, c->hist, m);
    } else if (c->stats) {
        fp8__k.err_add(&c->mom, x, q, m);
    }
    piece_scan(c, x, m);
}

/* The cast of a piece with its error sums made by the kernel on its way
 * (then x's own statistics, when not given, by a loop over x alone), x_hat
 * written to out only when the caller wants it (never over x: a cast in
 * place goes through the piece buffer, as below): 1 when done,
 * the piece scanned too; 0 when it goes the plain way, nothing kept — the kernel
 * cannot, or the sums left the lean range, where fp8__err_add sums in
 * double (its piece is cast again then: the same bits either way).  Per
 * tensor (gscale NULL) or in groups as fp8__caster_run_groups.  When done,
 * *maxbits (if asked for) gets the kernel's largest |x| or non-hot |x_hat|
 * bits; otherwise it is left as it was. */
static int cast_summing(pass_ctx *c, const float *x, size_t m, float scale, float scale_inv, size_t glen,
                        const float *gscale, const float *ginv, unsigned char *gflags, float *out,
                        uint32_t *maxbits)
{
    if (!c->stats || c->caster.fn != fp8__k.cast_kernel || c->tiny)
        return 0;
    /* the error sums go where piece_stats puts them: with x's own (both_add)
     * or alone (err_add); x's statistics, fields of their own, follow */
    fp8__moments *mom = c->xstats ? &c->xmom : &c->mom;
    fp8__errsums es;
    memset(&es, 0, sizeof es);
    memcpy(es.me, mom->maxerr, sizeof es.me);
    uint64_t cnt[FP8_NCLASS] = {0};
    if (!fp8__caster_run_err(&c->caster, scale, scale_inv, x, m, glen, gscale, ginv, gflags, out, cnt, &es) ||
        !fp8__lean_bits(es.maxbits) || es.hotbound > FP8_LEAN_HI) {
        c->tiny = fp8__tiny_bits(es.maxbits);
        return 0;
    }
    if (maxbits)
        *maxbits = es.maxbits;
    for (int l = 0; l < FP8_ML; l++)
        mom->e2[l] += es.e2[l], mom->q2[l] += es.q2[l], mom->xq[l] += es.xq[l];
    memcpy(mom->maxerr, es.me, sizeof es.me);
    for (int k = 0; k < FP8_NCLASS; k++)
        c->cnt[k] += cnt[k];
    if (c->xstats) {
        fp8__k.xmoments_add(&c->xmom, x, m, c->hist ? &c->hacc->s : NULL, 0); /* (x in cache) */
        if (c->hist)
            hist_count(c->hacc, c->hist, m);
    }
    piece_scan(c, x, m);
    return 1;
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
        uint32_t maxbits = UINT32_MAX; /* the piece's largest |x| bits or more (x_hat's outside the
                                          kernel's hot path, at most fmax * scale_inv in it); unknown: all */
        if (!(scale > 0.0f && !cp &&
              cast_summing(c, x + i, m, scale, scale_inv, 0, NULL, NULL, NULL, out ? dst : NULL, &maxbits))) {
            if (scale > 0.0f)
                fp8__caster_run(&c->caster, scale, scale_inv, x + i, m, cp, dst, c->cnt, index0 + i);
            else
                zero_scale_piece(c->caster.f, x + i, m, dst, cp, c->cnt);
            piece_stats(c, x + i, dst, m);
        }
        /* TE's overflow count, x still whole and in cache; none where no
         * |x| lies above te_thr (nor x_hat outside the hot path) */
        if (c->te_on && maxbits > fp8__float_to_bits(c->te_thr))
            c->te_n += fp8__k.count_above(x + i, m, c->te_thr);
        if (out && dst == c->buf) /* in place: x stays whole until the piece is done */
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

/* A piece's x_hat when it cannot go straight to out, kept per thread
 * (scratch.h); NULL when out of memory */
static float *thread_buf(void) { return fp8__scratch_kept(FP8__SCRATCH_PIECE, PIECE * sizeof(float)); }

/* part p's units of U split into P: [*u0, *u1) */
static void part_range(size_t U, int P, int p, size_t *u0, size_t *u1)
{
    *u0 = U * (size_t)p / (size_t)P, *u1 = U * (size_t)(p + 1) / (size_t)P;
}

/* The parts of a cast, kept per calling thread like the piece buffer (busy
 * starts 0: the block is zeroed): a cast's parts and their histograms
 * freshly allocated would come from fresh pages at every cast once the heap
 * gives them back, and a small cast would spend most of its time zeroing
 * them.  Two sets: a cast that sums x's statistics holds its x pass's
 * (fp8__xpass) beside its own.  A third at once on the same thread (none
 * today) would allocate its own. */
#define PART_SETS 2
typedef struct {
    int busy[PART_SETS];
    part parts[PART_SETS][MAX_PARTS];
    hist_acc hacc[PART_SETS][MAX_PARTS];
} parts_cache;
static parts_cache *thread_parts(void) { return fp8__scratch_kept(FP8__SCRATCH_PARTS, sizeof(parts_cache)); }

/* P parts, zeroed, each with a zeroed histogram accumulator when want_hist;
 * NULL when out of memory */
part *fp8__parts_alloc(int P, int want_hist)
{
    parts_cache *pc = thread_parts();
    for (int k = 0; pc && k < PART_SETS; k++)
        if (!pc->busy[k]) {
            pc->busy[k] = 1;
            memset(pc->parts[k], 0, (size_t)P * sizeof pc->parts[k][0]);
            for (int p = 0; want_hist && p < P; p++) {
                hist_clear(&pc->hacc[k][p]); /* (the block was zeroed when made) */
                pc->parts[k][p].c.hacc = &pc->hacc[k][p];
            }
            return pc->parts[k];
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

void fp8__parts_free(part *parts, int P)
{
    parts_cache *pc = fp8__scratch_has(FP8__SCRATCH_PARTS);
    for (int k = 0; pc && k < PART_SETS; k++)
        if (parts == pc->parts[k]) {
            pc->busy[k] = 0;
            return;
        }
    for (int p = 0; parts && p < P; p++)
        free(parts[p].c.hacc);
    free(parts);
}

/* the parts' exponent histograms added into out (integers: any order) */
void fp8__parts_hist(part *parts, int P, uint64_t out[FP8_EXP_BINS])
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
    if (!(!F->CODES && cast_summing(c, F->X + off, m, 1.0f, 1.0f, F->L->seg, F->scale + gi, F->scale_inv + gi,
                                    F->flags + gi, F->OUT ? dst : NULL, NULL))) {
        fp8__caster_run_groups(&c->caster, F->X + off, m, F->L->seg, F->scale + gi, F->scale_inv + gi, dst,
                               F->CODES ? (char *)F->CODES + off * F->cb : NULL, c->cnt, F->flags + gi, off);
        piece_stats(c, F->X + off, dst, m);
    }
    if (F->OUT && dst == c->buf) /* in place: x stays whole until the chunk is done */
        memcpy(F->OUT + off, c->buf, m * sizeof(float));
}

/* group g's elements [off, off + len) cast as a segment of their own, its
 * overflow and flush flags noted */
static void group_segment(fused *F, pass_ctx *c, size_t g, size_t off, size_t len)
{
    F->flags[g] |= (unsigned char)run_segment(c, F->X + off, len, F->scale[g], F->scale_inv[g],
                                              F->OUT ? F->OUT + off : NULL,
                                              F->CODES ? (char *)F->CODES + off * F->cb : NULL, off);
}

/* Whether group g goes through the grouped kernel: its scale > 0 (NaN is
 * not) and its scale_inv a normal float.  (An all-zero group's MX
 * scale_inv is 2^-127, a float32 subnormal: the kernel's x_hat multiplies
 * ran 1.5x slower on it.) */
static inline int kernel_group(const fused *F, size_t g) { return F->scale[g] > 0.0f && F->scale_inv[g] >= FLT_MIN; }

/* Whether groups [g0, g1) all go through the grouped kernel: bit 0 clear
 * when every scale is > 0, bit 1 clear when every scale_inv is a normal
 * float; 0 when all go.  Four groups at a time, without a branch a group
 * (the loop with one was 1.7 % of a record). */
static unsigned groups_off(const fused *F, size_t g0, size_t g1)
{
    typedef float v4f __attribute__((vector_size(16)));
    typedef int32_t v4i __attribute__((vector_size(16)));
    const float *s = F->scale, *si = F->scale_inv;
    v4i pos = {-1, -1, -1, -1}, nrm = pos;
    size_t g = g0;
    for (; g + 4 <= g1; g += 4) {
        v4f v, w;
        memcpy(&v, s + g, 16);
        memcpy(&w, si + g, 16);
        pos &= (v4i)(v > 0.0f);
        nrm &= (v4i)(w >= FLT_MIN);
    }
    int all_pos = pos[0] & pos[1] & pos[2] & pos[3], all_nrm = nrm[0] & nrm[1] & nrm[2] & nrm[3];
    for (; g < g1; g++) {
        all_pos &= s[g] > 0.0f ? -1 : 0;
        all_nrm &= si[g] >= FLT_MIN ? -1 : 0;
    }
    return (all_pos ? 0u : 1u) | (all_nrm ? 0u : 2u);
}

/* 1 when the n elements at x are all +-0 (nothing NaN or Inf either: a
 * group's amax leaves those out) */
static int all_zero_bits(const float *x, size_t n)
{
    for (size_t i = 0; i < n; i += PIECE) {
        uint32_t a;
        uint64_t ci, cn;
        fp8__k.amax_scan(x + i, n - i < PIECE ? n - i : PIECE, &a, &ci, &cn);
        if (a || ci || cn)
            return 0;
    }
    return 1;
}

/* the largest of a[g0 .. g1) (amax bits of finite values, below 2^31: a
 * signed compare orders them), 0 when empty: eight running maxima (one is
 * a chain of a compare and a move a group, 3 % of NVFP4's statistics) */
static uint32_t top_bits(const uint32_t *a, size_t g0, size_t g1)
{
    typedef int32_t v4i __attribute__((vector_size(16)));
    v4i m0 = {0, 0, 0, 0}, m1 = m0;
    size_t g = g0;
    for (; g + 8 <= g1; g += 8) {
        v4i v0, v1;
        memcpy(&v0, a + g, 16);
        memcpy(&v1, a + g + 4, 16);
        v4i k0 = v0 > m0, k1 = v1 > m1;
        m0 = (v0 & k0) | (m0 & ~k0), m1 = (v1 & k1) | (m1 & ~k1);
    }
    uint32_t top = 0;
    for (int l = 0; l < 4; l++) {
        top = (uint32_t)m0[l] > top ? (uint32_t)m0[l] : top;
        top = (uint32_t)m1[l] > top ? (uint32_t)m1[l] : top;
    }
    for (; g < g1; g++)
        top = a[g] > top ? a[g] : top;
    return top;
}

/* F->late: the ranges and scales of the groups of the unit at off (m
 * elements, whole groups one row high), as the amax pass and the scales
 * jobs would make them; 0 when a group's scale is not > 0 (the unit then
 * goes group by group) */
static int unit_scales(fused *F, size_t off, size_t m)
{
    const layout *L = F->L;
    size_t g0 = off / L->seg, g1 = (off + m) / L->seg;
    if (F->fine) { /* unions of the finer groups the sweep's first cast made of this unit */
        const fp8__ranges *f = F->fine;
        const size_t per = L->seg / f->seg;
        for (size_t g = g0; g < g1; g++) {
            uint32_t a = 0, z = FP8_F32_INF;
            for (size_t k = g * per; k < (g + 1) * per; k++) {
                a = f->amax[k] > a ? f->amax[k] : a;
                z = f->minnz[k] < z ? f->minnz[k] : z;
            }
            F->gamax[g] = a, F->gminnz[g] = z;
        }
    } else {
        fp8__k.range_groups(F->X + off, m, L->seg, F->gamax + g0, F->minnz ? F->gminnz + g0 : NULL);
        if (!F->minnz)
            for (size_t g = g0; g < g1; g++)
                F->gminnz[g] = FP8_F32_INF;
    }
    float sg = 1.0f;
    fp8__group_scales(F->st, g0, F->gamax + g0, g1 - g0, fp8__bits_to_float(F->tot_amax), F->scale + g0,
                      F->scale_inv + g0, &sg);
    if (g0 == 0)
        F->s_global = sg; /* NVFP4's, the same from every unit */
    return !groups_off(F, g0, g1);
}

/* the unit at off (m elements, whole groups g0, g0 + 1, ...; or a row's
 * chunk of tiles), some of whose groups do not go through the grouped
 * kernel (kernel_group): the runs of groups that do through it; runs of
 * all-zero groups as one segment of scale 1 (x_hat = x, every element
 * exact, no flags, whatever the groups' scales); each other group (scale
 * not > 0, NaN or Inf among zeros, a subnormal scale_inv) a segment of its
 * own.  (Group by group throughout, an NVFP4 cast of 4096^2 with one
 * all-zero block of 16 in 1024 ran 0.09 Gelem/s against 0.73 without:
 * every 16-element segment paid a piece's setup and x's statistics'
 * merge.) */
static void unit_segments(fused *F, pass_ctx *c, size_t off, size_t m, size_t g0)
{
    const size_t seg = F->L->seg, end = off + m;
#define G(o) (g0 + ((o) - off) / seg) /* (the groups along [off, end): g0, g0 + 1, ...) */
    for (size_t o = off; o < end;) {
        size_t e = o;
        if (F->grouped)
            while (e < end && kernel_group(F, G(e)))
                e += seg;
        if (e > o) {
            grouped_chunk(F, c, o, e - o, G(o));
            o = e;
            continue;
        }
        while (e < end && F->gamax[G(e)] == 0) /* (every grouped recipe has an amax pass or late ranges) */
            e += seg;
        if (e > o && all_zero_bits(F->X + o, e - o)) {
            /* +-0 casts to itself, exact, at any scale: scale 1's (no flags) */
            run_segment(c, F->X + o, e - o, 1.0f, 1.0f, F->OUT ? F->OUT + o : NULL,
                        F->CODES ? (char *)F->CODES + o * F->cb : NULL, o);
            o = e;
            continue;
        }
        for (e = e > o ? e : o + seg; o < e; o += seg)
            group_segment(F, c, G(o), o, seg);
    }
#undef G
}

/* the cast and statistics of units [u0, u1) */
void fp8__fused_units(fused *F, part *pp, size_t u0, size_t u1)
{
    for (size_t u = u0; u < u1; u++) {
        size_t off = u * F->unit, m = F->numel - off < F->unit ? F->numel - off : F->unit;
        if (F->late ? !unit_scales(F, off, m)
                    : F->any_off && F->grouped && groups_off(F, off / F->L->seg, (off + m) / F->L->seg))
            unit_segments(F, &pp->c, off, m, off / F->L->seg);
        else if (F->grouped)
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
    if (F->grouped) { /* tiles of br rows: a row's chunks, row after row (a chunk with groups
                           the kernel does not take by segments, as a unit one row high) */
        const size_t chunk = (PIECE / L->seg) * L->seg;
        for (size_t i = 0; i < L->R; i++)
            for (size_t j0 = 0; j0 < L->C; j0 += chunk) {
                size_t len = L->C - j0 < chunk ? L->C - j0 : chunk, g = (i / L->br) * L->nbc + j0 / L->seg;
                if (F->any_off && groups_off(F, g, g + len / L->seg))
                    unit_segments(F, c, i * L->C + j0, len, g);
                else
                    grouped_chunk(F, c, i * L->C + j0, len, g);
            }
        return;
    }
    for (size_t i = 0; i < L->R; i++)
        for (size_t jb = 0; jb < L->nbc; jb++) {
            size_t j0 = jb * L->seg, len = L->C - j0 < L->seg ? L->C - j0 : L->seg;
            group_segment(F, c, (i / L->br) * L->nbc + jb, i * L->C + j0, len);
        }
}

void fp8__fused_job(void *ctx, int p)
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
        fp8__fused_units(F, pp, u0, u1);
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
    F->off_kernel[p] |= (unsigned char)groups_off(F, g0, g1); /* such groups take the per-segment path */
    if (g0 == 0)
        F->s_global = sg; /* NVFP4's, the same from every range */
}

void fp8__scales_job(void *ctx, int p)
{
    fused *F = ctx;
    size_t g0, g1;
    part_range(F->ng, F->SJ, p, &g0, &g1);
    group_scales_range(F, g0, g1, p);
}

int fp8__rows_whole(const layout *L) { return L->br == 1 && L->seg % 16 == 0 && L->C % L->seg == 0 && L->seg < 1024; }

/* the amax pass of rows [i0, i1) (groups other than one per tensor) */
void fp8__amax_rows(const layout *L, const float *X, size_t i0, size_t i1, uint32_t *gamax, uint32_t *gminnz)
{
    for (size_t i = i0; i < i1; i++) {
        if (fp8__rows_whole(L)) {
            /* short groups along the row: one call for the whole row */
            fp8__k.range_groups(X + i * L->C, L->C, L->seg, gamax + i * L->nbc, gminnz ? gminnz + i * L->nbc : NULL);
            continue;
        }
        for (size_t jb = 0; jb < L->nbc; jb++) {
            size_t j0 = jb * L->seg, len = L->C - j0 < L->seg ? L->C - j0 : L->seg;
            size_t g = (i / L->br) * L->nbc + jb;
            uint32_t none = FP8_F32_INF; /* (minima not wanted: found all the same) */
            fp8__k.range_pass(X + i * L->C + j0, len, &gamax[g], gminnz ? &gminnz[g] : &none);
        }
    }
}

/* Whether groups L (of the same x, not per tensor) are unions of f's: the
 * same rows, and a group boundary along a row only where f has one. */
int fp8__ranges_nest(const fp8__ranges *f, const layout *L)
{
    return f && !L->per_tensor && f->R == L->R && f->C == L->C && (L->nbc == 1 || L->seg % f->seg == 0);
}

/* The ranges of L's groups in tile rows [t0, t1) as the maxima and minima
 * of f's groups within them (fp8__ranges_nest): exact, no x read. */
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

void fp8__amax_job(void *ctx, int p)
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
        if (!(fp8__rows_whole(L) && F->minnz)) /* (else the pass sets them all) */
            for (size_t g = g0; g < g1; g++)
                F->gminnz[g] = FP8_F32_INF;
        if (L->br > 1)
            r0 *= L->br, r1 = r1 * L->br < L->R ? r1 * L->br : L->R;
        fp8__amax_rows(L, F->X, r0, r1, F->gamax, F->minnz ? F->gminnz : NULL);
    }
    F->pam[p] = top_bits(F->gamax, g0, g1); /* the part's largest amax, for the tensor's */
    if (F->early && g1 > g0) /* scales that need only their group's amax: here, while it is hot */
        group_scales_range(F, g0, g1, p);
}

/* amax, Inf and NaN counts in chunks the lane counters hold */
void fp8__amax_info(const float *x, size_t n, uint32_t *amax_bits, uint64_t *ninf, uint64_t *nnan)
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
    fp8__amax_info(x, n, &a, &out->inf_count, &out->nan_count);
    out->amax = fp8__bits_to_float(a);
    return FP8_OK;
}

void fp8__stats_amax(const fp8_stats *xs, fp8_amax_info *out)
{
    fp8__fenv env; /* (amax holds a float32 value: converted where a subnormal is not flushed) */
    fp8__fenv_enter(&env);
    out->amax = (float)xs->amax, out->inf_count = xs->inf_count, out->nan_count = xs->nan_count;
    fp8__fenv_leave(&env);
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
    W->x = x, W->n = n;
    fp8__split_shape(n, PIECE, &W->U, &W->P);
    W->want_hist = !(flags & FP8_STATS_NO_EXP_HIST);
    if (!(W->parts = fp8__parts_alloc(W->P, W->want_hist))) {
        free(W);
        return NULL;
    }
    for (int p = 0; p < W->P; p++) {
        pass_ctx *c = &W->parts[p].c;
        fp8__moments_init(&c->xmom);
        c->xstats = 1;
        c->hist = W->want_hist ? W->parts[p].hist64 : NULL;
        /* x larger than the L3 (as a cast's kernel, quantize_cast.c): the
         * pass fetches 8 KB ahead (x's statistics of 4096^2 6.23-6.30 ->
         * 6.47-6.49 Gelem/s, e4m3:current all statistics, whose first pass
         * this is, +3 %); in cache it measured 1-2 % slower */
        c->xprefetch = fp8__prefetch_far(n);
    }
    return W;
}

void fp8__split_shape(size_t n, size_t unit, size_t *U, int *P)
{
    *U = (n + unit - 1) / unit;
    *P = *U < 1 ? 1 : (int)(*U < MAX_PARTS ? *U : MAX_PARTS);
}

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
        /* (the merge compares and sums floats that may be subnormal: in
         * the default environment too) */
        fp8__fenv env;
        fp8__fenv_enter(&env);
        fp8__moments *m = &W->parts[0].c.xmom;
        for (int p = 1; p < W->P; p++)
            fp8__moments_merge(m, &W->parts[p].c.xmom);
        fp8__finish_x(stats, m, W->n);
        fp8__fenv_leave(&env);
        if (W->want_hist)
            fp8__parts_hist(W->parts, W->P, stats->exp_hist);
    }
    fp8__parts_free(W->parts, W->P);
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

float *fp8__piece_buf(void) { return thread_buf(); }
