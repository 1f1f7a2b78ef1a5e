/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Internal to core/reduce*.c: x86-64 vector paths for f16 (F16C) and bf16
 * (AVX2) sum, prod and scale (see core/reduce/reduce_half_x86.c). Each does the
 * leading multiple of 8 (f16) or 16 (bf16) elements and returns that
 * count; out may equal an input (each step loads before it stores).
 * Callers check the *_usable() test first. Part of core/; calls nothing.
 */
#ifndef CG_CORE_REDUCE_HALF_X86_IMPL_H
#define CG_CORE_REDUCE_HALF_X86_IMPL_H

#include <stddef.h>

/* CG_REDUCE_PORTABLE (tests) leaves them out, so the portable loops run */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(CG_REDUCE_PORTABLE)
#define CG_HAVE_X86_KERNELS 1

/* CPU features, from cpuid as libgcc read it at start-up */
int cg__f16c_usable(void);  /* AVX and F16C */
int cg__avx2_usable(void);  /* AVX2 */

size_t cg__f16c_sum3(void *out, const void *a, const void *b, size_t n);
size_t cg__f16c_prod3(void *out, const void *a, const void *b, size_t n);
size_t cg__f16c_scale(void *out, const void *in, size_t n, float factor);
size_t cg__bf16avx2_sum3(void *out, const void *a, const void *b, size_t n);
size_t cg__bf16avx2_prod3(void *out, const void *a, const void *b, size_t n);
size_t cg__bf16avx2_scale(void *out, const void *in, size_t n, float factor);
#else
#define CG_HAVE_X86_KERNELS 0
#endif

#endif
