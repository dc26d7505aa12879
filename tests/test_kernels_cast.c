/*
 * test_kernels_cast.c — suite kernels_cast: the cast kernel (lib/format/
 * kernel_vec.c) of every instruction set this CPU runs, against the
 * engine's separate loops: its error sums made on the way, and x_hat
 * written past the caches.  A set this CPU lacks is reported as a skip.
 */
#include <CUnit/CUnit.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cast_internal.h"
#include "f32bits.h"
#include "fp8_format.h"
#include "kernels_isas.h"
#include "tests.h"

/* The cast kernel's error sums made on its way (kernel_vec.h) equal, bit
 * for bit, the same ISA's err_add on x and the x_hat the kernel writes,
 * per tensor and in groups of 32, on every kind of input (x_hat through
 * the hot, medium and general paths: scales that put x in range, push it
 * to subnormals or past max), for e4m3 and e5m2; where the sums left the
 * lean range the caller redoes them, so only maxbits is compared there. */
static void test_cast_err_sums(void)
{
    find_isas();
    static void (*const kern[3])(FP8_VEC_KERNEL_ARGS) = {fp8__vec_kernel_base, fp8__vec_kernel_avx2,
                                                          fp8__vec_kernel_avx512};
    const char *fmts[] = {"e4m3", "e5m2"};
    const float scales[] = {1.0f, 96.0f, 1.0f / 4096.0f};
    const size_t ns[] = {16, 256, 272, 4096};
    float *x = malloc(4099 * sizeof *x), *q = malloc(4096 * sizeof *q), *q2 = malloc(4096 * sizeof *q2);
    float gs[128], gi[128];
    unsigned char gf[128];
    CU_ASSERT_FATAL(x && q && q2);
    int compared = 0, differ = 0;
    for (int k = 0; k < 3; k++) {
        if (!isas[k].runs_here)
            continue;
        for (int fi = 0; fi < 2; fi++) {
            fp8__caster c;
            fp8__caster_init(&c, fp8_format_find(fmts[fi], NULL), NULL);
            for (int kind = 0; kind < NKINDS; kind++)
                for (size_t li = 0; li < 4; li++)
                    for (int si = 0; si < 3; si++)
                        for (int grouped = 0; grouped < 2; grouped++) {
                            size_t n = ns[li];
                            fill(x, n, kind);
                            /* one group's scale the smallest (its scale_inv the
                             * largest, which the kernel finds after the loop):
                             * the last group, one in the middle, or the first */
                            size_t gbig = si == 0 ? n / 32 - 1 : si == 1 ? n / 64 : 0;
                            for (size_t g = 0; g < 128; g++)
                                gs[g] = scales[si] * (g == gbig ? 0.75f : (float)(1 + g % 3)),
                                gi[g] = 1.0f / gs[g], gf[g] = 0;
                            const float *G = grouped ? gs : NULL, *GI = grouped ? gi : NULL;
                            uint64_t a1[6] = {0}, a2[6] = {0};
                            fp8__errsums es;
                            memset(&es, 0, sizeof es);
                            for (int l = 0; l < 16; l++)
                                es.me[l] = (float)l * 0.25f; /* a running maximum from earlier pieces */
                            fp8__moments m;
                            fp8__moments_init(&m);
                            memcpy(m.maxerr, es.me, sizeof es.me);
                            kern[k](&c.p, 1, scales[si], 1.0f / scales[si], x, n, NULL, q, a1, G, GI, 32, gf, &es);
                            kern[k](&c.p, 1, scales[si], 1.0f / scales[si], x, n, NULL, q2, a2, G, GI, 32, gf, NULL);
                            isas[k].err(&m, x, q2, n);
                            int same_cast = !memcmp(q, q2, n * 4) && !memcmp(a1, a2, sizeof a1);
                            CU_ASSERT(same_cast);
                            /* maxbits: |x|'s maximum or more, up to x_hat's; with
                             * hotbound (max * the largest scale_inv) the larger */
                            uint32_t mb = 0, mx = 0;
                            float sinv = grouped ? 0.0f : 1.0f / scales[si];
                            for (size_t i = 0; i < n; i++) {
                                uint32_t bx = bits(x[i]) & FP8_F32_ABS, bq = bits(q2[i]) & FP8_F32_ABS;
                                mx = bx > mx ? bx : mx, mb = bx > mb ? bx : mb, mb = bq > mb ? bq : mb;
                                if (grouped)
                                    sinv = gi[i / 32] > sinv ? gi[i / 32] : sinv;
                            }
                            CU_ASSERT(es.maxbits >= mx && es.maxbits <= mb);
                            CU_ASSERT_EQUAL(es.hotbound, bits((float)fp8_format_find(fmts[fi], NULL)->max * sinv));
                            CU_ASSERT((es.maxbits > es.hotbound ? es.maxbits : es.hotbound) >= mb);
                            if (mb < FP8_LEAN_LO || mb > FP8_LEAN_HI)
                                continue;
                            compared++;
                            int same = !memcmp(es.e2, m.e2, sizeof es.e2) && !memcmp(es.q2, m.q2, sizeof es.q2) &&
                                       !memcmp(es.xq, m.xq, sizeof es.xq) && !memcmp(es.me, m.maxerr, sizeof es.me);
                            differ += !same;
                            CU_ASSERT(same);
                        }
        }
    }
    CU_ASSERT(compared > 100); /* (the lean case is the common one) */
    if (differ)
        fprintf(stderr, "\n  cast error sums: %d of %d cases differ from err_add", differ, compared);
    free(x), free(q), free(q2);
}

/* Non-temporal stores of x_hat (vparams.nt, large casts into the caller's
 * out) write what ordinary stores write, and nothing else: every ISA, out
 * aligned to a line, 16, 32 and 48 bytes past one (AVX-512: lines joined
 * across vectors, the call's first and last by masked stores; AVX2: each
 * vector in 16-byte stores) and to 4 (ordinary stores), 17 vectors and
 * one, per tensor and in groups, with and
 * without codes and error sums, nearest and stochastic rounding, every
 * kind of input through the hot, medium and general paths; the elements
 * around out untouched. */
static void no_fallback(void *ctx, size_t i, size_t k) { (void)ctx, (void)i, (void)k; }

static void test_cast_nt_stores(void)
{
    find_isas();
    static void (*const kern[3])(FP8_VEC_KERNEL_ARGS) = {fp8__vec_kernel_base, fp8__vec_kernel_avx2,
                                                          fp8__vec_kernel_avx512};
    const char *fmts[] = {"e4m3", "e5m2", "e2m1"};
    const float scales[] = {1.0f, 96.0f, 1.0f / 4096.0f};
    const size_t offs[] = {0, 8, 4, 12, 1}, noffs = sizeof offs / sizeof offs[0], lens[] = {272, 16}, pad = 32;
    size_t n = lens[0];
    float *x = malloc(n * sizeof *x), *ref = aligned_alloc(64, (n + 2 * pad) * sizeof(float)),
          *got = aligned_alloc(64, (n + 2 * pad) * sizeof(float));
    uint8_t cref[272], cgot[272];
    float gs[16], gi[16];
    unsigned char gf1[16], gf2[16];
    CU_ASSERT_FATAL(x && ref && got);
    int cases = 0, wrong = 0;
    for (int k = 0; k < 3; k++) {
        if (!isas[k].runs_here)
            continue;
        for (int fi = 0; fi < 3; fi++)
            for (int sr = 0; sr < 2; sr++) {
                fp8_cast_mode mode = {.round = sr ? FP8_ROUND_STOCHASTIC : FP8_ROUND_NEAREST, .seed = 7};
                fp8__caster c;
                fp8__caster_init(&c, fp8_format_find(fmts[fi], NULL), &mode);
                if (!c.vec)
                    continue;
                for (int kind = 0; kind < NKINDS; kind++)
                    for (int si = 0; si < 3; si++)
                        for (int v = 0; v < 16; v++) { /* bits: 0 grouped, 1 codes, 2 error sums, 3 one vector */
                            const int grouped = v & 1, codes = (v >> 1) & 1, err = (v >> 2) & 1;
                            n = lens[v >> 3];
                            if (err && (codes || sr))
                                continue; /* (the kernel's error sums: plain case only) */
                            fill(x, n, kind);
                            for (size_t g = 0; g < 16; g++)
                                gs[g] = scales[si] * (float)(1 + g % 3), gi[g] = 1.0f / gs[g], gf1[g] = gf2[g] = 0;
                            for (size_t oi = 0; oi < noffs; oi++) {
                                float *r = ref + pad + offs[oi], *o = got + pad + offs[oi];
                                for (size_t i = 0; i < n + 2 * pad; i++)
                                    ref[i] = got[i] = -1234.5f;
                                uint64_t a1[6] = {0}, a2[6] = {0};
                                fp8__errsums e1, e2;
                                memset(&e1, 0, sizeof e1), memset(&e2, 0, sizeof e2);
                                vparams P = c.p;
                                P.sr_fallback = no_fallback; /* (the lanes it would cast stay as the vector left them) */
                                P.nt = 0;
                                kern[k](&P, 1, scales[si], 1.0f / scales[si], x, n, codes ? cref : NULL, r, a1,
                                        grouped ? gs : NULL, grouped ? gi : NULL, 32, gf1, err ? &e1 : NULL);
                                P.nt = 1;
                                kern[k](&P, 1, scales[si], 1.0f / scales[si], x, n, codes ? cgot : NULL, o, a2,
                                        grouped ? gs : NULL, grouped ? gi : NULL, 32, gf2, err ? &e2 : NULL);
                                /* (the error sums as the engine keeps them: where they
                                 * left the lean range, a NaN's payload in them may
                                 * differ with the compiled code, and they are redone) */
                                int lean = e1.maxbits >= FP8_LEAN_LO && e1.maxbits <= FP8_LEAN_HI &&
                                           e1.hotbound <= FP8_LEAN_HI;
                                int same = !memcmp(ref, got, (n + 2 * pad) * sizeof(float)) &&
                                           !memcmp(a1, a2, sizeof a1) && !memcmp(gf1, gf2, sizeof gf1) &&
                                           (!codes || !memcmp(cref, cgot, n)) && e1.maxbits == e2.maxbits &&
                                           e1.hotbound == e2.hotbound && (!lean || !memcmp(&e1, &e2, sizeof e1));
                                cases++;
                                wrong += !same;
                                CU_ASSERT(same);
                            }
                        }
            }
    }
    CU_ASSERT(cases > 1000);
    if (wrong)
        fprintf(stderr, "\n  non-temporal stores: %d of %d cases differ from ordinary stores", wrong, cases);
    free(x), free(ref), free(got);
}

/* Stochastic rounding through the caster (the vector kernel of each ISA
 * and its scalar fallback), per tensor and in groups of 16, against the
 * scalar cast element by element (fp8_format_encode with the element's
 * index): codes, x_hat, class counts and group flags.  Scales put lanes in
 * the format's subnormal range (vector since the kernel rounds them) and
 * past max (saturating formats: vector too), beside NaN, Inf and float32
 * subnormals (the fallback). */
static void test_cast_stochastic(void)
{
    find_isas();
    static void (*const kern[3])(FP8_VEC_KERNEL_ARGS) = {fp8__vec_kernel_base, fp8__vec_kernel_avx2,
                                                          fp8__vec_kernel_avx512};
    const char *fmts[] = {"e4m3", "e5m2", "e2m1", "e3m2"};
    const float scales[] = {1.0f, 0.01f, 7.0f, 1.0f / 4096.0f};
    enum { N = 512, GL = 16 };
    float *x = malloc(N * sizeof *x), *q = malloc(N * sizeof *q), gs[N / GL], gi[N / GL];
    uint8_t codes[N];
    unsigned char gf[N / GL], rgf[N / GL];
    CU_ASSERT_FATAL(x && q);
    int cases = 0, wrong = 0;
    for (int k = 0; k < 3; k++) {
        if (!isas[k].runs_here)
            continue;
        for (int fi = 0; fi < 4; fi++) {
            const fp8_format *f = fp8_format_find(fmts[fi], NULL);
            fp8_cast_mode mode = {.round = FP8_ROUND_STOCHASTIC, .overflow = FP8_SATURATE, .seed = 11};
            for (int sat = 0; sat < 2; sat++) {
                mode.overflow = sat ? FP8_SATURATE : FP8_NO_SATURATE;
                fp8__caster c;
                fp8__caster_init(&c, f, &mode);
                if (!c.vec)
                    continue;
                c.fn = kern[k];
                for (int kind = 0; kind < NKINDS; kind++)
                    for (int si = 0; si < 4; si++)
                        for (int grouped = 0; grouped < 2; grouped++) {
                            fill(x, N, kind);
                            for (size_t g = 0; g < N / GL; g++)
                                gs[g] = scales[si] * (float)(1 + g % 5), gi[g] = 1.0f / gs[g], gf[g] = rgf[g] = 0;
                            uint64_t cnt[FP8_NCLASS] = {0}, rcnt[FP8_NCLASS] = {0};
                            const uint64_t off = 1000003u * (uint64_t)(kind + 1);
                            if (grouped)
                                fp8__caster_run_groups(&c, x, N, GL, gs, gi, q, codes, cnt, gf, off);
                            else
                                fp8__caster_run(&c, scales[si], 1.0f / scales[si], x, N, codes, q, cnt, off);
                            int bad = 0;
                            for (size_t i = 0; i < N; i++) {
                                float s = grouped ? gs[i / GL] : scales[si], si_ = grouped ? gi[i / GL] : 1.0f / scales[si];
                                fp8_class cls;
                                uint32_t code = fp8_format_encode(f, &mode, x[i] * s, off + i, &cls);
                                float xh = fp8_format_decode(f, code) * si_;
                                rcnt[cls]++;
                                if (cls == FP8_CLASS_SATURATED || cls == FP8_CLASS_OVERFLOW)
                                    rgf[i / GL] |= 1;
                                if (cls == FP8_CLASS_FLUSHED)
                                    rgf[i / GL] |= 2;
                                bad += codes[i] != code || (memcmp(&q[i], &xh, 4) && !(isnan(q[i]) && isnan(xh)));
                            }
                            bad += memcmp(cnt, rcnt, sizeof cnt) != 0;
                            if (grouped)
                                bad += memcmp(gf, rgf, sizeof gf) != 0;
                            cases++;
                            if (bad && wrong++ < 5)
                                fprintf(stderr, "\n  stochastic %s %s sat %d kind %d scale %g grouped %d: %d differ", isas[k].name,
                                        fmts[fi], sat, kind, (double)scales[si], grouped, bad);
                            CU_ASSERT_EQUAL(bad, 0);
                        }
            }
        }
    }
    CU_ASSERT(cases > 100);
    free(x), free(q);
}

void register_kernels_cast_tests(void)
{
    static CU_TestInfo tests[] = {
        {"the cast kernel's error sums on its way equal err_add's, every ISA", test_cast_err_sums},
        {"non-temporal stores of x_hat write what ordinary stores write, every ISA and alignment", test_cast_nt_stores},
        {"stochastic rounding of every ISA, per tensor and in groups, equals the scalar cast element by element",
         test_cast_stochastic},
        CU_TEST_INFO_NULL,
    };
    add_suite("kernels_cast", tests);
}
