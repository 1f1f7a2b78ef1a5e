/* SPDX-License-Identifier: Apache-2.0 */
/*
 * x86-64 vector paths for the 16-bit floats: f16 through the F16C
 * conversions (vcvtph2ps, vcvtps2ph rounding to nearest even), 8 a step;
 * bf16 through AVX2 integer ops doing what core/reduce/half.h does, 16 a step.
 * Only these functions are built for AVX/F16C/AVX2 (target attributes) and
 * callers use them only when the CPU has the features, so the library runs
 * on any x86-64. Results equal core/reduce/half.h's bit for bit (same IEEE f32 ops
 * and rounding; default MXCSR, no flush-to-zero), except which payload a
 * NaN carries when both operands are NaN. Part of core/; calls nothing.
 */
#include "core/reduce/reduce_half_x86_impl.h"

#if CG_HAVE_X86_KERNELS

#include <immintrin.h>
#include <stdint.h>

#define CG__F16C __attribute__((target("avx,f16c")))
#define CG__AVX2 __attribute__((target("avx2")))

int cg__f16c_usable(void)
{
#if defined(__clang__)
    /* clang's __builtin_cpu_supports knows no "f16c"; every CPU with AVX2
     * has F16C (Intel since Ivy Bridge, AMD since Piledriver) */
    return __builtin_cpu_supports("avx2");
#else
    return __builtin_cpu_supports("avx") && __builtin_cpu_supports("f16c");
#endif
}

int cg__avx2_usable(void)
{
    return __builtin_cpu_supports("avx2");
}

static inline CG__F16C __m256 cg__f16_load8(const uint16_t *p)
{
    return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p));
}

static inline CG__F16C void cg__f16_store8(uint16_t *p, __m256 v)
{
    _mm_storeu_si128((__m128i *)p,
                     _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT |
                                            _MM_FROUND_NO_EXC));
}

/* bf16 x16 -> two f32 x8, each bf16 the top half of its f32. Interleaving
 * with zeros works within 128-bit lanes, so lo holds elements 0-3 and 8-11,
 * hi 4-7 and 12-15; cg__bf16_store16 packs them back in the same order. */
static inline CG__AVX2 void cg__bf16_load16(const uint16_t *p, __m256 *lo,
                                            __m256 *hi)
{
    const __m256i v = _mm256_loadu_si256((const __m256i *)p);
    const __m256i z = _mm256_setzero_si256();
    *lo = _mm256_castsi256_ps(_mm256_unpacklo_epi16(z, v));
    *hi = _mm256_castsi256_ps(_mm256_unpackhi_epi16(z, v));
}

/* f32 -> bf16 bits in the low half of each 32-bit lane, as cg_f32_to_bf16:
 * NaN -> top bits with the quiet bit set; otherwise add 0x7fff plus the
 * kept lsb (ties to even) and shift. */
static inline CG__AVX2 __m256i cg__bf16_round8(__m256 v)
{
    const __m256i x = _mm256_castps_si256(v);
    const __m256i hi = _mm256_srli_epi32(x, 16);
    __m256i rne = _mm256_add_epi32(x, _mm256_set1_epi32(0x7fff));
    rne = _mm256_add_epi32(rne, _mm256_and_si256(hi, _mm256_set1_epi32(1)));
    rne = _mm256_srli_epi32(rne, 16);
    const __m256i nan = _mm256_or_si256(hi, _mm256_set1_epi32(0x40));
    const __m256 isnan = _mm256_cmp_ps(v, v, _CMP_UNORD_Q); /* no exception */
    return _mm256_blendv_epi8(rne, nan, _mm256_castps_si256(isnan));
}

static inline CG__AVX2 void cg__bf16_store16(uint16_t *p, __m256 lo,
                                             __m256 hi)
{
    /* each lane < 0x10000, so the unsigned saturating pack is exact */
    _mm256_storeu_si256((__m256i *)p,
                        _mm256_packus_epi32(cg__bf16_round8(lo),
                                            cg__bf16_round8(hi)));
}

#define CG__BF16_KERNEL(name, ARGS, IN1, IN2, OP)                             \
    CG__AVX2 size_t name ARGS                                                 \
    {                                                                         \
        size_t i = 0;                                                         \
        for (; i + 16 <= n; i += 16) {                                        \
            __m256 a0, a1, b0, b1;                                            \
            cg__bf16_load16((const uint16_t *)(IN1) + i, &a0, &a1);           \
            IN2;                                                              \
            cg__bf16_store16((uint16_t *)out + i, OP(a0, b0), OP(a1, b1));    \
        }                                                                     \
        return i;                                                             \
    }

CG__BF16_KERNEL(cg__bf16avx2_sum3,
                (void *out, const void *a, const void *b, size_t n), a,
                cg__bf16_load16((const uint16_t *)b + i, &b0, &b1),
                _mm256_add_ps)
CG__BF16_KERNEL(cg__bf16avx2_prod3,
                (void *out, const void *a, const void *b, size_t n), a,
                cg__bf16_load16((const uint16_t *)b + i, &b0, &b1),
                _mm256_mul_ps)
CG__BF16_KERNEL(cg__bf16avx2_scale,
                (void *out, const void *in, size_t n, float factor), in,
                b0 = b1 = _mm256_set1_ps(factor), _mm256_mul_ps)

/* f16: sum3, prod3 and scale over the F16C load/store pair */
#define CG__VEC_KERNELS(pfx, ATTR, LOAD, STORE)                               \
    ATTR size_t cg__##pfx##_sum3(void *out, const void *a, const void *b,     \
                                 size_t n)                                    \
    {                                                                         \
        size_t i = 0;                                                         \
        for (; i + 8 <= n; i += 8)                                            \
            STORE((uint16_t *)out + i,                                        \
                  _mm256_add_ps(LOAD((const uint16_t *)a + i),                \
                                LOAD((const uint16_t *)b + i)));              \
        return i;                                                             \
    }                                                                         \
    ATTR size_t cg__##pfx##_prod3(void *out, const void *a, const void *b,    \
                                  size_t n)                                   \
    {                                                                         \
        size_t i = 0;                                                         \
        for (; i + 8 <= n; i += 8)                                            \
            STORE((uint16_t *)out + i,                                        \
                  _mm256_mul_ps(LOAD((const uint16_t *)a + i),                \
                                LOAD((const uint16_t *)b + i)));              \
        return i;                                                             \
    }                                                                         \
    ATTR size_t cg__##pfx##_scale(void *out, const void *in, size_t n,        \
                                  float factor)                               \
    {                                                                         \
        const __m256 f = _mm256_set1_ps(factor);                              \
        size_t i = 0;                                                         \
        for (; i + 8 <= n; i += 8)                                            \
            STORE((uint16_t *)out + i,                                        \
                  _mm256_mul_ps(LOAD((const uint16_t *)in + i), f));          \
        return i;                                                             \
    }

CG__VEC_KERNELS(f16c, CG__F16C, cg__f16_load8, cg__f16_store8)

#endif
