/* bench.h — sections of `make bench`; each prints its table. */
#ifndef FP8_BENCH_H
#define FP8_BENCH_H
int bench_formats(void);
int bench_stats(void);
int bench_probe(void);
int bench_train(void);
int bench_report(void);
int bench_import(void);
int bench_readers(void);
int bench_gemm(void);
int bench_ranks(void);
double bench_now(void);
/* One target line, "target NAME: VALUE UNIT (goal GOAL) met|MISSED" (goal a
 * lower bound, or an upper bound when at_most); returns 1 when met.  A NAN
 * value (not measurable yet) is MISSED with why. */
int bench_target(const char *name, double value, const char *unit, double goal, int at_most, const char *why);
#endif
