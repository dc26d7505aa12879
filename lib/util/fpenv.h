/*
 * fpenv.h — internal: run float arithmetic in a known environment.
 *
 * A host built with -ffast-math sets flush-to-zero and denormals-are-zero;
 * another may call fesetround().  Bulk kernels multiply by scales in float32,
 * so they run between fp8__fenv_enter() (round to nearest, no FTZ/DAZ,
 * exceptions masked) and fp8__fenv_leave(), which restores the caller's
 * environment, sticky flags included.  Keep the float work in a separate
 * non-inlined function so the compiler cannot move it across the switch.
 */
#ifndef FP8_FPENV_H
#define FP8_FPENV_H

#if defined(__x86_64__) || defined(__i386__)
#include <xmmintrin.h>
typedef struct { unsigned int csr; } fp8__fenv;
static inline void fp8__fenv_enter(fp8__fenv *s)
{
    s->csr = _mm_getcsr();
    _mm_setcsr(0x1F80); /* all exceptions masked, nearest, FTZ=0, DAZ=0 */
}
static inline void fp8__fenv_leave(const fp8__fenv *s) { _mm_setcsr(s->csr); }
#else
#include <fenv.h>
typedef struct { fenv_t env; } fp8__fenv;
static inline void fp8__fenv_enter(fp8__fenv *s)
{
    fegetenv(&s->env);
    fesetenv(FE_DFL_ENV);
}
static inline void fp8__fenv_leave(const fp8__fenv *s) { fesetenv(&s->env); }
#endif

#endif
