/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Internal to core/reduce*.c: the per-dtype kernel tables and the macros
 * that generate the kernels as plain loops over restrict pointers (one
 * function per dtype and op, no per-element dispatch), so gcc vectorises
 * them. Element types are declared with alignment 1, so any byte address is
 * a valid buffer. Part of core/; calls nothing.
 */
#ifndef CG_CORE_REDUCE_IMPL_H
#define CG_CORE_REDUCE_IMPL_H

#include <stddef.h>
#include <stdint.h>

#include "collguard/types.h"

/* Element types with alignment 1: loads and stores at any address. */
typedef int8_t cg__i8u_t;
typedef uint8_t cg__u8u_t;
typedef int16_t cg__i16u_t __attribute__((aligned(1)));
typedef uint16_t cg__u16u_t __attribute__((aligned(1)));
typedef int32_t cg__i32u_t __attribute__((aligned(1)));
typedef uint32_t cg__u32u_t __attribute__((aligned(1)));
typedef int64_t cg__i64u_t __attribute__((aligned(1)));
typedef uint64_t cg__u64u_t __attribute__((aligned(1)));
typedef uint16_t cg__h16u_t __attribute__((aligned(1))); /* f16 and bf16 bits */
typedef float cg__f32u_t __attribute__((aligned(1)));
typedef double cg__f64u_t __attribute__((aligned(1)));

/* Ops that have kernels, indexed by their cg_redop_t value (average uses
 * the sum kernel). */
enum { CG__KOP_COUNT = CG_OP_AVG };

typedef void (*cg__reduce2_fn_t)(void *restrict inout, const void *restrict in,
                                 size_t n);
typedef void (*cg__reduce3_fn_t)(void *restrict out, const void *restrict a,
                                 const void *restrict b, size_t n);

typedef struct cg__reduce_kernels {
    cg__reduce2_fn_t r2[CG__KOP_COUNT]; /* inout = inout op in */
    cg__reduce3_fn_t r3[CG__KOP_COUNT]; /* out = a op b */
} cg__reduce_kernels_t;

/* CG_OP_BAND on raw bytes (the same for every integer dtype). */
void cg__reduce_band2(void *restrict inout, const void *restrict in,
                      size_t bytes);
void cg__reduce_band3(void *restrict out, const void *restrict a,
                      const void *restrict b, size_t bytes);

extern const cg__reduce_kernels_t cg__reduce_kernels_i8;
extern const cg__reduce_kernels_t cg__reduce_kernels_u8;
extern const cg__reduce_kernels_t cg__reduce_kernels_i32;
extern const cg__reduce_kernels_t cg__reduce_kernels_u32;
extern const cg__reduce_kernels_t cg__reduce_kernels_i64;
extern const cg__reduce_kernels_t cg__reduce_kernels_u64;
extern const cg__reduce_kernels_t cg__reduce_kernels_f16;
extern const cg__reduce_kernels_t cg__reduce_kernels_f32;
extern const cg__reduce_kernels_t cg__reduce_kernels_f64;
extern const cg__reduce_kernels_t cg__reduce_kernels_bf16;
extern const cg__reduce_kernels_t cg__reduce_kernels_i16;
extern const cg__reduce_kernels_t cg__reduce_kernels_u16;

/* x86-64: each kernel is also built for AVX2 and picked at load time (an
 * ifunc); the baseline build still runs on any x86-64. Same IEEE operations
 * per element either way (no FMA: -ffp-contract=off), so same results.
 * CG_REDUCE_PORTABLE (tests) builds the baseline loops only, and so do
 * clang (its 14 names an extern clone's ifunc "f.ifunc", so callers of f
 * fail to link; clang builds the fuzz targets) and gcc's ThreadSanitizer
 * build (gcc instruments the ifunc resolvers, which the loader runs before
 * the TSan runtime exists: every program crashed at startup). */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && \
    !defined(__SANITIZE_THREAD__) && !defined(CG_REDUCE_PORTABLE)
#define CG__CLONES __attribute__((target_clones("avx2", "default")))
#else
#define CG__CLONES
#endif

/* One elementwise loop: T the element type, EXPR in terms of a and b.
 * START(out, a, b, n) is a fast path that did the first START elements
 * (CG__NOFAST: none). */
#define CG__REDUCE2(fn, T, EXPR, START)                                       \
    CG__CLONES static void fn(void *restrict inout_v,                         \
                              const void *restrict in_v, size_t n)            \
    {                                                                         \
        T *restrict io = inout_v;                                             \
        const T *restrict in = in_v;                                          \
        for (size_t i = START(inout_v, inout_v, in_v, n); i < n; i++) {       \
            const T a = io[i];                                                \
            const T b = in[i];                                                \
            io[i] = (EXPR);                                                   \
        }                                                                     \
    }

#define CG__REDUCE3(fn, T, EXPR, START)                                       \
    CG__CLONES static void fn(void *restrict out_v, const void *restrict a_v, \
                              const void *restrict b_v, size_t n)             \
    {                                                                         \
        T *restrict out = out_v;                                              \
        const T *restrict pa = a_v;                                           \
        const T *restrict pb = b_v;                                           \
        for (size_t i = START(out_v, a_v, b_v, n); i < n; i++) {              \
            const T a = pa[i];                                                \
            const T b = pb[i];                                                \
            out[i] = (EXPR);                                                  \
        }                                                                     \
    }

#define CG__NOFAST(out, a, b, n) ((size_t)0)

/* The four kernels of one dtype in both forms, and its table
 * cg__reduce_kernels_<sfx>; FSUM/FPROD are fast paths for sum and prod. */
#define CG__REDUCE_KERNELS_FAST(sfx, T, SUM, PROD, MAX, MIN, FSUM, FPROD)     \
    CG__REDUCE2(cg__reduce2_sum_##sfx, T, SUM, FSUM)                          \
    CG__REDUCE2(cg__reduce2_prod_##sfx, T, PROD, FPROD)                       \
    CG__REDUCE2(cg__reduce2_max_##sfx, T, MAX, CG__NOFAST)                    \
    CG__REDUCE2(cg__reduce2_min_##sfx, T, MIN, CG__NOFAST)                    \
    CG__REDUCE3(cg__reduce3_sum_##sfx, T, SUM, FSUM)                          \
    CG__REDUCE3(cg__reduce3_prod_##sfx, T, PROD, FPROD)                       \
    CG__REDUCE3(cg__reduce3_max_##sfx, T, MAX, CG__NOFAST)                    \
    CG__REDUCE3(cg__reduce3_min_##sfx, T, MIN, CG__NOFAST)                    \
    const cg__reduce_kernels_t cg__reduce_kernels_##sfx = {                    \
        .r2 = {[CG_OP_SUM] = cg__reduce2_sum_##sfx,                           \
               [CG_OP_PROD] = cg__reduce2_prod_##sfx,                         \
               [CG_OP_MAX] = cg__reduce2_max_##sfx,                           \
               [CG_OP_MIN] = cg__reduce2_min_##sfx},                          \
        .r3 = {[CG_OP_SUM] = cg__reduce3_sum_##sfx,                           \
               [CG_OP_PROD] = cg__reduce3_prod_##sfx,                         \
               [CG_OP_MAX] = cg__reduce3_max_##sfx,                           \
               [CG_OP_MIN] = cg__reduce3_min_##sfx}};

#define CG__REDUCE_KERNELS(sfx, T, SUM, PROD, MAX, MIN)                       \
    CG__REDUCE_KERNELS_FAST(sfx, T, SUM, PROD, MAX, MIN, CG__NOFAST,          \
                            CG__NOFAST)

#endif
