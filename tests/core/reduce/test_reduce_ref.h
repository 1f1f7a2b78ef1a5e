/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Test-only reference for core/reduce*: element decode/encode written
 * independently of core/reduce/half.h (frexp/ldexp/nearbyint instead of bit
 * tricks), wide-integer and double arithmetic, a seeded generator, and a
 * comparison that treats any two NaNs as equal. Shared by tests/core/
 * test_reduce*.c.
 */
#ifndef CG_TEST_REDUCE_REF_H
#define CG_TEST_REDUCE_REF_H

#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "collguard/types.h"

/* Assert only when the check fails: ctest runs Criterion with
 * --full-stats, which reports every assert to the runner, far too slow in
 * loops over all 65536 patterns. The message prints the values. */
#define REF_ASSERT(cond, ...)                                                 \
    do {                                                                      \
        if (!(cond))                                                          \
            cr_assert(cond, __VA_ARGS__);                                     \
    } while (0)
#define REF_ASSERT_EQ(a, b, ...)                                              \
    do {                                                                      \
        if ((a) != (b))                                                       \
            cr_assert_eq(a, b, __VA_ARGS__);                                  \
    } while (0)

static inline int ref_is_float(cg_dtype_t dt)
{
    return dt == CG_DTYPE_F16 || dt == CG_DTYPE_BF16 || dt == CG_DTYPE_F32 ||
           dt == CG_DTYPE_F64;
}

static inline int ref_is_signed(cg_dtype_t dt)
{
    return dt == CG_DTYPE_I8 || dt == CG_DTYPE_I16 || dt == CG_DTYPE_I32 ||
           dt == CG_DTYPE_I64;
}

/* xorshift64*; state local to each test */
static inline uint64_t ref_rand(uint64_t *s)
{
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return *s * 0x2545f4914f6cdd1dull;
}

/* 16-bit float with `mbits` mantissa and `ebits` exponent bits (IEEE-like) */
static inline double ref_h16_decode(uint16_t h, int mbits, int ebits)
{
    int bias = (1 << (ebits - 1)) - 1;
    unsigned e = (h >> mbits) & ((1u << ebits) - 1);
    unsigned m = h & ((1u << mbits) - 1);
    double s = (h & 0x8000u) ? -1.0 : 1.0;
    if (e == (1u << ebits) - 1)
        return m ? NAN : s * INFINITY;
    if (e == 0)
        return s * ldexp(m, 1 - bias - mbits);
    return s * ldexp((double)((1u << mbits) + m), (int)e - bias - mbits);
}

/* Round x to the 16-bit format, to nearest even (nearbyint in the default
 * rounding mode), overflow to inf, NaN to the canonical quiet NaN. */
static inline uint16_t ref_h16_encode(double x, int mbits, int ebits)
{
    int bias = (1 << (ebits - 1)) - 1, emin = 1 - bias, e;
    uint16_t sign = signbit(x) ? 0x8000u : 0;
    uint16_t inf = (uint16_t)(((1u << ebits) - 1) << mbits);
    if (isnan(x))
        return (uint16_t)(inf | (1u << (mbits - 1)));
    double a = fabs(x);
    if (a == 0)
        return sign;
    if (isinf(a))
        return sign | inf;
    frexp(a, &e); /* a = f * 2^e, f in [0.5, 1): leading bit 2^(e-1) */
    int q = (e - 1 < emin ? emin : e - 1) - mbits; /* quantum 2^q */
    double r = nearbyint(ldexp(a, -q));            /* units of 2^q */
    if (r == 0)
        return sign;
    double maxf = ldexp((double)((2u << mbits) - 1), bias - mbits);
    if (ldexp(r, q) > maxf)
        return sign | inf;
    frexp(ldexp(r, q), &e);
    if (e - 1 < emin) /* subnormal: r is the mantissa field */
        return (uint16_t)(sign | (uint16_t)r);
    return (uint16_t)(sign | ((unsigned)(e - 1 + bias) << mbits) |
                      ((unsigned)ldexp(ldexp(r, q), mbits - (e - 1)) -
                       (1u << mbits)));
}

static inline double ref_f16(uint16_t h) { return ref_h16_decode(h, 10, 5); }
static inline double ref_bf16(uint16_t h) { return ref_h16_decode(h, 7, 8); }
static inline uint16_t ref_to_f16(double x)
{
    return ref_h16_encode(x, 10, 5);
}
static inline uint16_t ref_to_bf16(double x)
{
    return ref_h16_encode(x, 7, 8);
}

/* Element i of buf as a double (floats) */
static inline double ref_getf(const void *buf, size_t i, cg_dtype_t dt)
{
    const char *p = (const char *)buf + i * cg_dtype_size(dt);
    uint16_t h;
    float f;
    double d;
    switch (dt) {
    case CG_DTYPE_F16: memcpy(&h, p, 2); return ref_f16(h);
    case CG_DTYPE_BF16: memcpy(&h, p, 2); return ref_bf16(h);
    case CG_DTYPE_F32: memcpy(&f, p, 4); return f;
    default: memcpy(&d, p, 8); return d;
    }
}

/* Element i of buf as raw bits, zero-extended (integers and floats) */
static inline uint64_t ref_getu(const void *buf, size_t i, cg_dtype_t dt)
{
    uint64_t v = 0;
    memcpy(&v, (const char *)buf + i * cg_dtype_size(dt), cg_dtype_size(dt));
    return v;
}

/* Element i of an integer buffer, sign-extended when the type is signed */
static inline int64_t ref_gets(const void *buf, size_t i, cg_dtype_t dt)
{
    unsigned bits = 8 * (unsigned)cg_dtype_size(dt);
    uint64_t u = ref_getu(buf, i, dt);
    if (bits < 64 && ref_is_signed(dt) && (u >> (bits - 1)) & 1)
        u |= ~0ull << bits;
    return (int64_t)u;
}

static inline void ref_setu(void *buf, size_t i, cg_dtype_t dt, uint64_t v)
{
    memcpy((char *)buf + i * cg_dtype_size(dt), &v, cg_dtype_size(dt));
}

/* Store a double into a float element, rounding by the reference */
static inline void ref_setf(void *buf, size_t i, cg_dtype_t dt, double x)
{
    float f = (float)x;
    switch (dt) {
    case CG_DTYPE_F16: ref_setu(buf, i, dt, ref_to_f16(x)); return;
    case CG_DTYPE_BF16: ref_setu(buf, i, dt, ref_to_bf16(x)); return;
    case CG_DTYPE_F32: memcpy((char *)buf + 4 * i, &f, 4); return;
    default: memcpy((char *)buf + 8 * i, &x, 8); return;
    }
}

/* Reference a op b for floats, in double: exact for the sum and product of
 * two f16/bf16/f32 values, then one rounding to the type (ref_setf). min/
 * max: NaN propagates (a's when both), ties keep b. */
static inline double ref_opf(double a, double b, cg_redop_t op)
{
    switch (op) {
    case CG_OP_SUM: case CG_OP_AVG: return a + b;
    case CG_OP_PROD: return a * b;
    case CG_OP_MAX: return isnan(a) ? a : isnan(b) ? b : (a > b ? a : b);
    default: return isnan(a) ? a : isnan(b) ? b : (a < b ? a : b);
    }
}

/* Reference a op b for integers: 64-bit wrap, truncated to the type by the
 * caller's ref_setu; min/max on the sign-extended values */
static inline uint64_t ref_opi(int64_t a, int64_t b, cg_redop_t op,
                               cg_dtype_t dt)
{
    int u = !ref_is_signed(dt);
    switch (op) {
    case CG_OP_SUM: case CG_OP_AVG: return (uint64_t)a + (uint64_t)b;
    case CG_OP_PROD: return (uint64_t)a * (uint64_t)b;
    case CG_OP_MAX:
        return u ? ((uint64_t)a > (uint64_t)b ? (uint64_t)a : (uint64_t)b)
                 : (uint64_t)(a > b ? a : b);
    default:
        return u ? ((uint64_t)a < (uint64_t)b ? (uint64_t)a : (uint64_t)b)
                 : (uint64_t)(a < b ? a : b);
    }
}

/* out[i] = a[i] op b[i] by the reference */
static inline void ref_reduce(void *out, const void *a, const void *b,
                              size_t n, cg_dtype_t dt, cg_redop_t op)
{
    for (size_t i = 0; i < n; i++) {
        if (ref_is_float(dt))
            ref_setf(out, i, dt,
                     ref_opf(ref_getf(a, i, dt), ref_getf(b, i, dt), op));
        else
            ref_setu(out, i, dt,
                     ref_opi(ref_gets(a, i, dt), ref_gets(b, i, dt), op, dt));
    }
}

/* Index of the first element where got and want differ (bitwise; any two
 * NaNs match), or n when none does. */
static inline size_t ref_mismatch(const void *got, const void *want, size_t n,
                                  cg_dtype_t dt)
{
    for (size_t i = 0; i < n; i++) {
        if (ref_is_float(dt) && isnan(ref_getf(got, i, dt)) &&
            isnan(ref_getf(want, i, dt)))
            continue;
        if (ref_getu(got, i, dt) != ref_getu(want, i, dt))
            return i;
    }
    return n;
}

/* Fill n elements with a mix of values: random bit patterns, and (floats)
 * moderate values in about [-64, 64] so sums and products stay finite. */
static inline void ref_fill(void *buf, size_t n, cg_dtype_t dt, uint64_t *s)
{
    for (size_t i = 0; i < n; i++) {
        uint64_t r = ref_rand(s);
        if (ref_is_float(dt) && (r & 3) != 0)
            ref_setf(buf, i, dt,
                     (double)((int64_t)(r >> 40) - (1 << 23)) / 131072.0);
        else
            ref_setu(buf, i, dt, ref_rand(s));
    }
}

#endif
