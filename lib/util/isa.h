/*
 * isa.h — internal: which instruction set the vector loops use (each is
 * built for AVX-512, AVX2 and the baseline; see vec_isa.h): the widest this
 * CPU has, or fewer when the environment variable FP8PROF_ISA names a
 * narrower one (avx512, avx2, base) — to compare the builds on one machine,
 * or to match a run made elsewhere.
 */
#ifndef FP8_ISA_PICK_H
#define FP8_ISA_PICK_H

enum { FP8_ISA_BASE = 0, FP8_ISA_AVX2 = 1, FP8_ISA_AVX512 = 2 };

/* FP8_ISA_*: the widest set this CPU runs, FP8PROF_ISA aside (the tests
 * and the bench that run every set ask it) */
int fp8__isa_cpu(void);

/* FP8_ISA_*, decided once per process.  An FP8PROF_ISA it does not know,
 * or one this CPU lacks, is named on stderr once and not used. */
int fp8__isa_pick(void);

#endif
