/*
 * bench_gemm.c — the emulated FP8 GEMM with a limited accumulator
 * (fp8_gemm.h) next to OpenBLAS sgemm on the same operands: what a trainer
 * pays to train with the accumulator model.
 */
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>

#include "bench.h"
#include "fp8.h"
#include "fp8_gemm.h"

int bench_gemm(void)
{
    const size_t M = 128, N = 128, K = 4096;
    float *A = malloc(M * K * sizeof *A), *B = malloc(N * K * sizeof *B), *C = malloc(M * N * sizeof *C);
    if (!A || !B || !C)
        return 1;
    const fp8_format *f = fp8_format_find("e4m3", NULL);
    uint64_t s = 1;
    for (size_t i = 0; i < M * K; i++)
        A[i] = fp8_format_decode(f, (uint32_t)((s = s * 6364136223846793005ull + 1442695040888963407ull) >> 57));
    for (size_t i = 0; i < N * K; i++)
        B[i] = fp8_format_decode(f, (uint32_t)((s = s * 6364136223846793005ull + 1442695040888963407ull) >> 57));
    double best_s = 1e9, best_e = 1e9, best_p = 1e9;
    for (int r = 0; r < 3; r++) {
        double t0 = bench_now();
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)M, (int)N, (int)K, 1.0f, A, (int)K, B, (int)K, 0.0f, C,
                    (int)N);
        double t1 = bench_now();
        fp8_acc_model m = {14, 0, 0}, mp = {14, 128, 0};
        fp8_gemm_emulate(&m, A, B, M, N, K, 1.0f, C);
        double t2 = bench_now();
        fp8_gemm_emulate(&mp, A, B, M, N, K, 1.0f, C);
        double t3 = bench_now();
        best_s = t1 - t0 < best_s ? t1 - t0 : best_s;
        best_e = t2 - t1 < best_e ? t2 - t1 : best_e;
        best_p = t3 - t2 < best_p ? t3 - t2 : best_p;
    }
    double flop = 2.0 * (double)(M * N * K);
    printf("gemm: %zux%zux%zu, e4m3 operands (best of 3)\n", M, N, K);
    printf("  cblas_sgemm (OpenBLAS, float32)        %9.2f ms  %8.2f GFLOP/s\n", 1e3 * best_s, flop / best_s / 1e9);
    printf("  emulated, 14-bit accumulator           %9.2f ms  %8.3f GFLOP/s (%.0fx sgemm)\n", 1e3 * best_e,
           flop / best_e / 1e9, best_e / best_s);
    printf("  emulated, + promotion every 128        %9.2f ms  %8.3f GFLOP/s (%.0fx sgemm)\n", 1e3 * best_p,
           flop / best_p / 1e9, best_p / best_s);
    free(A), free(B), free(C);
    return 0;
}
