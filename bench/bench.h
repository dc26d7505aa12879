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
double bench_now(void);
#endif
