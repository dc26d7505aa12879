/*
 * check_exhaustive.c — `make check-exhaustive`: every one of the 2^32
 * float32 bit patterns through every format and cast mode, the library's
 * bulk kernels (encode codes, per-class counts, quantize-dequantize) and its
 * single-value path against the reference in ref_cast.c.
 *
 * usage: check_exhaustive [FORMAT ...]   (default: all built-ins)
 * Runs on all cores; prints one line per format x mode with its time and
 * mismatch count; exits 1 on any mismatch.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cast_impl.h" /* fp8__random32: the generator is part of the definition */
#include "fp8_format.h"
#include "ref_cast.h"

#define CHUNK (1u << 20)

typedef struct {
    const fp8_format *f;
    const ref_format *r;
    fp8_cast_mode mode;
    atomic_uint next;        /* next chunk index, 0 .. 4096 */
    atomic_ullong mismatches;
} job;

static void *worker(void *arg)
{
    job *j = arg;
    float *x = malloc(CHUNK * 4), *q = malloc(CHUNK * 4);
    uint32_t *codes = malloc(CHUNK * 4);
    if (!x || !q || !codes) {
        fprintf(stderr, "out of memory\n");
        exit(2);
    }
    const int sat = j->mode.overflow == FP8_SATURATE;
    unsigned c;
    while ((c = atomic_fetch_add(&j->next, 1)) < (1u << 12)) {
        uint32_t base = c * CHUNK;
        for (uint32_t i = 0; i < CHUNK; i++) {
            uint32_t u = base + i;
            memcpy(&x[i], &u, 4);
        }
        fp8_cast_mode m = j->mode;
        m.offset = base;
        fp8_counts cnt, want = {{0}};
        fp8_format_encode_array(j->f, &m, 1.0f, x, CHUNK, codes, &cnt);
        fp8_format_qdq_array(j->f, &m, 1.0f, x, CHUNK, q, NULL);
        unsigned long long bad = 0;
        for (uint32_t i = 0; i < CHUNK; i++) {
            uint32_t rnd = m.round == FP8_ROUND_STOCHASTIC ? fp8__random32(m.seed, (uint64_t)base + i) : 0;
            fp8_class rc, sc;
            uint32_t rcode = ref_encode(j->r, m.round, sat, x[i], rnd, &rc);
            uint32_t bcode = j->f->code_bytes == 1 ? ((uint8_t *)codes)[i] : ((uint16_t *)codes)[i];
            uint32_t scode = fp8_format_encode(j->f, &m, x[i], (uint64_t)base + i, &sc);
            float dq = fp8_format_decode(j->f, rcode);
            uint32_t qb, db;
            memcpy(&qb, &q[i], 4);
            memcpy(&db, &dq, 4);
            want.n[rc]++;
            if (bcode != rcode || scode != rcode || sc != rc || qb != db) {
                if (bad++ < 3)
                    fprintf(stderr, "  %s: input 0x%08X ref 0x%X %s bulk 0x%X single 0x%X %s qdq %08X want %08X\n",
                            j->f->name, base + i, rcode, fp8_class_name(rc), bcode, scode, fp8_class_name(sc), qb, db);
            }
        }
        if (memcmp(&cnt, &want, sizeof cnt) != 0)
            bad++;
        atomic_fetch_add(&j->mismatches, bad);
    }
    free(x);
    free(q);
    free(codes);
    return NULL;
}

int main(int argc, char **argv)
{
    size_t nf;
    const fp8_format *const *list = fp8_format_list(&nf);
    const fp8_format *fmts[64];
    size_t n = 0;
    if (argc > 1) {
        for (int i = 1; i < argc && n < 64; i++) {
            const fp8_format *f = fp8_format_find(argv[i], NULL);
            if (!f) {
                fprintf(stderr, "check_exhaustive: %s\n", fp8_error_message());
                return 2;
            }
            fmts[n++] = f;
        }
    } else {
        for (size_t i = 0; i < nf; i++)
            fmts[n++] = list[i];
    }
    const struct { const char *name; fp8_cast_mode m; } modes[] = {
        {"nearest,no-saturate", {FP8_ROUND_NEAREST, FP8_NO_SATURATE, 0, 0}},
        {"nearest,saturate", {FP8_ROUND_NEAREST, FP8_SATURATE, 0, 0}},
        {"zero,no-saturate", {FP8_ROUND_ZERO, FP8_NO_SATURATE, 0, 0}},
        {"zero,saturate", {FP8_ROUND_ZERO, FP8_SATURATE, 0, 0}},
        {"stochastic,saturate", {FP8_ROUND_STOCHASTIC, FP8_SATURATE, 2024, 0}},
    };
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    int nt = ncpu > 0 && ncpu < 64 ? (int)ncpu : 2;
    unsigned long long total_bad = 0;
    struct timespec t0, t1, a, b;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    printf("check_exhaustive: all 2^32 float32 inputs, %d threads, kernel %s\n", nt, fp8_format_kernel_name());
    for (size_t fi = 0; fi < n; fi++) {
        ref_format r;
        if (ref_init(&r, fmts[fi]) != 0)
            return 2;
        for (size_t mi = 0; mi < sizeof modes / sizeof modes[0]; mi++) {
            job j;
            j.f = fmts[fi];
            j.r = &r;
            j.mode = modes[mi].m;
            atomic_init(&j.next, 0);
            atomic_init(&j.mismatches, 0);
            clock_gettime(CLOCK_MONOTONIC, &a);
            pthread_t th[64];
            for (int t = 0; t < nt; t++)
                pthread_create(&th[t], NULL, worker, &j);
            for (int t = 0; t < nt; t++)
                pthread_join(th[t], NULL);
            clock_gettime(CLOCK_MONOTONIC, &b);
            unsigned long long bad = atomic_load(&j.mismatches);
            total_bad += bad;
            printf("%-9s %-20s %8.1f s  %s\n", fmts[fi]->name, modes[mi].name,
                   (double)(b.tv_sec - a.tv_sec) + 1e-9 * (double)(b.tv_nsec - a.tv_nsec),
                   bad ? "MISMATCH" : "ok");
            fflush(stdout);
        }
        ref_free(&r);
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    printf("total %.1f s, %llu mismatches\n", (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec),
           total_bad);
    return total_bad ? 1 : 0;
}
