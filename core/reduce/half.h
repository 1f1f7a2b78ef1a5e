/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Conversions between f32 and the 16-bit float formats (IEEE binary16 "f16"
 * and bfloat16 "bf16"), bit-exact, round to nearest even, written branch-free
 * (selects only) so loops that call them vectorise. NaN stays NaN and comes
 * back quiet; overflow gives inf; subnormals are exact. Part of core/;
 * calls nothing.
 */
#ifndef CG_CORE_HALF_H
#define CG_CORE_HALF_H

#include <stdint.h>
#include <string.h>

static inline uint32_t cg_f32_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof(u));
    return u;
}

static inline float cg_f32_from_bits(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof(f));
    return f;
}

/* f16 -> f32: exact for every input (NaN payload kept in the top bits). */
static inline float cg_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t em = h & 0x7fffu;
    /* normal: rebias the exponent by 127 - 15 = 112 */
    uint32_t normal = (em << 13) + (112u << 23);
    /* inf/NaN: exponent all ones in both formats */
    uint32_t special = (em << 13) | 0x7f800000u;
    /* subnormal (and zero): em * 2^-24, exact in f32 */
    uint32_t sub = cg_f32_bits((float)(int32_t)em * 0x1p-24f);
    uint32_t mag = em >= 0x7c00u ? special : (em < 0x0400u ? sub : normal);
    return cg_f32_from_bits(sign | mag);
}

/* f32 -> f16, round to nearest even. */
static inline uint16_t cg_f32_to_f16(float f)
{
    uint32_t x = cg_f32_bits(f);
    uint32_t sign = (x >> 16) & 0x8000u;
    uint32_t a = x & 0x7fffffffu;
    /* |f| >= 2^16 rounds to inf in any case; NaN keeps its top payload bits
     * and gets the quiet bit */
    uint32_t big = a > 0x7f800000u ? (0x7e00u | ((a >> 13) & 0x3ffu))
                                   : 0x7c00u;
    /* normal range: rebias, add half an ulp minus one plus the lsb of the
     * kept mantissa (ties to even), shift; a carry rolls into the exponent,
     * up to inf for 65520 <= |f| < 2^16 */
    uint32_t norm = (a - (112u << 23) + 0x0fffu + ((a >> 13) & 1u)) >> 13;
    /* |f| < 2^-14: adding 0.5 puts the f16 subnormal ulp (2^-24) at the f32
     * ulp of 0.5, so the f32 adder does the rounding to nearest even */
    uint32_t sub = cg_f32_bits(cg_f32_from_bits(a) + 0.5f) - 0x3f000000u;
    uint32_t mag = a >= 0x47800000u ? big : (a < 0x38800000u ? sub : norm);
    return (uint16_t)(sign | mag);
}

/* bf16 -> f32: exact (bf16 is the top half of an f32). */
static inline float cg_bf16_to_f32(uint16_t b)
{
    return cg_f32_from_bits((uint32_t)b << 16);
}

/* f32 -> bf16, round to nearest even; NaN keeps its sign and top payload
 * bits and gets the quiet bit, so a NaN whose payload sits only in the low
 * 16 bits does not turn into inf. */
static inline uint16_t cg_f32_to_bf16(float f)
{
    uint32_t x = cg_f32_bits(f);
    uint32_t nan = (x >> 16) | 0x0040u;
    uint32_t rne = (x + 0x7fffu + ((x >> 16) & 1u)) >> 16;
    return (uint16_t)((x & 0x7fffffffu) > 0x7f800000u ? nan : rne);
}

#endif
