/* bench.h — sections of `make bench`; each prints its table. */
#ifndef FP8_BENCH_H
#define FP8_BENCH_H
#include <stddef.h>
#include <stdint.h>

#include "fp8.h"
int bench_formats(void);
int bench_stats(void);
int bench_probe(void);
int bench_train(void);
int bench_report(void);
int bench_import(void);
int bench_readers(void);
int bench_gemm(void);
int bench_ranks(void);
int bench_loop(void);
int bench_isa(void);
int bench_isa_one(void); /* (isa's child: this process's build) */
double bench_now(void);
/* The engine alone as a probe's record drives it (bench_engine.c): x's own
 * statistics in the read that takes its amax, then the n (1..8) recipes'
 * casts with all statistics in one sweep over x on one thread, sts[0] the
 * active recipe (its x_hat into active_out, NULL: none; x: in place), the
 * shadows sts[1..n) first; each state stepped after; nothing stored.
 * 0, or -1 when the engine refused a cast. */
int bench_engine_record(fp8_recipe_state *const *sts, int n, const float *x, size_t rows, size_t cols,
                        float *active_out);
/* x[0..n) a Gaussian (Box-Muller on xorshift64 from state s) with every
 * element i % 4096 == 7 set to 1000: the spikes beside ordinary values that
 * break FP8 recipes.  Returns the generator's state after it. */
uint64_t bench_fill_spiky(float *x, size_t n, uint64_t s);
/* x[0..n) with |x| log-uniform over 2^-30 .. 2^5 (35 binades, as gradients
 * spread) and random signs, from xorshift64 state s; returns the state after */
uint64_t bench_fill_logu(float *x, size_t n, uint64_t s);
/* x[0..n) uniform in [-h, h) from xorshift64 state s; returns the state after */
uint64_t bench_fill_uniform(float *x, size_t n, double h, uint64_t s);
/* The element rate (Gelem/s) of memcpy on 2^26 float32 (256 MiB, far past
 * the caches: the machine's memory bandwidth), best of 5: the reference of
 * every rate target.  Measured at each call: a section measures its own,
 * beside the kernels it is the reference of (the machine's rate moves
 * between the minutes of one run). */
double bench_memcpy_rate(void);
/* The element rate (Gelem/s) of one memcpy of n float32 from src to dst:
 * for a reference timed between the repetitions of the measurement it is
 * the reference of (the best of each, paired in time), so that a drift of
 * the machine's speed within the run moves both (n past the caches). */
double bench_memcpy_once(float *dst, const float *src, size_t n);
/* One target line, a ratio to a reference measured in the same run:
 * "target NAME: VALUE UNIT = RATIO of REF_NAME (REF UNIT) (goal >= GOAL) met|MISSED".
 * The ratio is value / ref; goal bounds it from below, or from above when
 * at_most.  Rates print the ratio as a percentage, times (at_most) as a
 * factor.  Returns 1 when met; a NAN value (not measurable) is MISSED. */
int bench_target(const char *name, double value, const char *unit, double ref, const char *ref_name, double goal,
                 int at_most);
/* A target kept for the summary main prints at the end of the run: its
 * name, what it measured and its goal as printed, whether it was met
 * (bench_target keeps each of its own) */
void bench_tally(const char *name, const char *got, const char *goal, int met);
/* Vector work like the engine's (bench_vec.c): 1,024 floats in L1, each
 * squared and added into one of eight independent sums, 1,000,000 times
 * (1.024e9 multiply-adds a call), in 128-bit vectors (any machine), 256-bit
 * (x86 with AVX2 and FMA) or 512-bit (x86 with AVX-512), each only where
 * the CPU has it; arg non-NULL works on a second buffer (for a second
 * thread).  Returns arg, as a thread's function. */
void *bench_fma_base(void *arg);
#if defined(__x86_64__)
void *bench_fma_avx2(void *arg);
void *bench_fma_avx512(void *arg);
#endif
#endif
