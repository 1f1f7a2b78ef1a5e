/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Reduction kernels for f16 and bf16: both operands widen to f32 exactly,
 * sum/prod run in f32 and round to nearest even on store (core/reduce/half.h);
 * min/max compare in f32 and store the chosen operand's original bits, so
 * they never round (a NaN result is made quiet, as arithmetic would). Part
 * of core/; calls only core/reduce/half.h.
 */
#include "core/reduce/half.h"
#include "core/reduce/reduce_half_x86_impl.h"
#include "core/reduce/reduce_impl.h"

static inline uint16_t cg__f16_quiet(uint16_t h)
{
    return (h & 0x7fffu) > 0x7c00u ? (uint16_t)(h | 0x0200u) : h;
}

static inline uint16_t cg__bf16_quiet(uint16_t h)
{
    return (h & 0x7fffu) > 0x7f80u ? (uint16_t)(h | 0x0040u) : h;
}

/* Vector paths (core/reduce/reduce_half_x86.c) for sum and prod from 16 elements
 * on, where the CPU has the features; the loops below do the tail. */
#if CG_HAVE_X86_KERNELS
#define CG__HALF_FAST(name, usable, fn)                                       \
    static inline size_t name(void *out, const void *a, const void *b,        \
                              size_t n)                                       \
    {                                                                         \
        return n >= 16 && usable() ? fn(out, a, b, n) : 0;                    \
    }
CG__HALF_FAST(cg__f16_fast_sum, cg__f16c_usable, cg__f16c_sum3)
CG__HALF_FAST(cg__f16_fast_prod, cg__f16c_usable, cg__f16c_prod3)
CG__HALF_FAST(cg__bf16_fast_sum, cg__avx2_usable, cg__bf16avx2_sum3)
CG__HALF_FAST(cg__bf16_fast_prod, cg__avx2_usable, cg__bf16avx2_prod3)
#else
#define cg__f16_fast_sum CG__NOFAST
#define cg__f16_fast_prod CG__NOFAST
#define cg__bf16_fast_sum CG__NOFAST
#define cg__bf16_fast_prod CG__NOFAST
#endif

#define CG__HALF_KERNELS(sfx, TO, FROM, QUIET, FSUM, FPROD)                   \
    CG__REDUCE_KERNELS_FAST(                                                  \
        sfx, cg__h16u_t, FROM(TO(a) + TO(b)), FROM(TO(a) * TO(b)),             \
        QUIET((TO(a) > TO(b) || TO(a) != TO(a)) ? a : b),                     \
        QUIET((TO(a) < TO(b) || TO(a) != TO(a)) ? a : b), FSUM, FPROD)

CG__HALF_KERNELS(f16, cg_f16_to_f32, cg_f32_to_f16, cg__f16_quiet,
                 cg__f16_fast_sum, cg__f16_fast_prod)
CG__HALF_KERNELS(bf16, cg_bf16_to_f32, cg_f32_to_bf16, cg__bf16_quiet,
                 cg__bf16_fast_sum, cg__bf16_fast_prod)
