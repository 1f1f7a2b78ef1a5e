/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Scaling kernels (prescale, postscale) and the average's final step:
 * in-place and copying scale per dtype, integer division truncating toward
 * zero, and cg_reduce_post. The rounding and saturation rules are in
 * core/reduce/reduce.h. Part of core/; calls only core/base and core/reduce/half.h.
 */
#include <assert.h>
#include <string.h>

#include "core/base/error.h"
#include "core/reduce/half.h"
#include "core/reduce/reduce.h"
#include "core/reduce/reduce_half_x86_impl.h"
#include "core/reduce/reduce_impl.h"

/* Double v -> integer type T truncating toward zero (C's conversion),
 * saturating, NaN -> 0. lo is the type's minimum and hi_ex its maximum plus
 * one (both powers of two or 0, exact as doubles even for 64 bits, where
 * the maximum itself is not): v in (lo - 1, lo] truncates to lo and v in
 * [hi_ex - 1, hi_ex) to the maximum anyway, so only values whose
 * conversion C leaves undefined are clamped. */
#define CG__SAT(T, v, lo, hi_ex, tmax)                                        \
    ((v) != (v) ? (T)0                                                        \
                : ((v) >= (hi_ex) ? (T)(tmax)                                 \
                                  : ((v) <= (lo) ? (T)(lo) : (T)(v))))

/* In place and copying variants of one per-element expression EXPR of x,
 * with PREP run once per call and START(out, in, n) a fast path that did
 * the first START elements. */
#define CG__SCALE(sfx, T, PREP, EXPR, START)                                  \
    CG__CLONES static void cg__scale_##sfx(void *buf_v, size_t n,             \
                                           double factor)                     \
    {                                                                         \
        T *restrict buf = buf_v;                                              \
        PREP;                                                                 \
        for (size_t i = START(buf_v, buf_v, n); i < n; i++) {                 \
            const T x = buf[i];                                               \
            buf[i] = (EXPR);                                                  \
        }                                                                     \
    }                                                                         \
    CG__CLONES static void cg__scale_copy_##sfx(void *restrict out_v,         \
                                                const void *restrict in_v,    \
                                                size_t n, double factor)      \
    {                                                                         \
        T *restrict out = out_v;                                              \
        const T *restrict in = in_v;                                          \
        PREP;                                                                 \
        for (size_t i = START(out_v, in_v, n); i < n; i++) {                  \
            const T x = in[i];                                                \
            out[i] = (EXPR);                                                  \
        }                                                                     \
    }

#define CG__NOPREP (void)0
#define CG__HALFPREP const float ff = (float)factor /* f32, f16, bf16 */
#define CG__SNOFAST(out, in, n) ((size_t)0)
#if CG_HAVE_X86_KERNELS /* vector paths, core/reduce/reduce_half_x86.c */
#define CG__F16FAST(out, in, n)                                               \
    ((n) >= 8 && cg__f16c_usable() ? cg__f16c_scale(out, in, n, ff) : 0)
#define CG__BF16FAST(out, in, n)                                              \
    ((n) >= 16 && cg__avx2_usable() ? cg__bf16avx2_scale(out, in, n, ff) : 0)
#else
#define CG__F16FAST CG__SNOFAST
#define CG__BF16FAST CG__SNOFAST
#endif

CG__SCALE(f64, cg__f64u_t, CG__NOPREP, x * factor, CG__SNOFAST)
CG__SCALE(f32, cg__f32u_t, CG__HALFPREP, x * ff, CG__SNOFAST)

/* The average's f32 step: the product in double, one rounding to f32
 * (postscale / nranks is rarely a float: 1/3 rounded to float first would
 * be off by up to an ulp more). */
CG__CLONES static void cg__scale_f32_avg(void *buf_v, size_t n, double factor)
{
    cg__f32u_t *restrict buf = buf_v;
    for (size_t i = 0; i < n; i++)
        buf[i] = (float)((double)buf[i] * factor);
}
CG__SCALE(f16, cg__h16u_t, CG__HALFPREP, cg_f32_to_f16(cg_f16_to_f32(x) * ff),
          CG__F16FAST)
CG__SCALE(bf16, cg__h16u_t, CG__HALFPREP,
          cg_f32_to_bf16(cg_bf16_to_f32(x) * ff), CG__BF16FAST)

#define CG__ISCALE(sfx, T, lo, hi_ex, tmax)                                   \
    static inline T cg__iscale_##sfx(T x, double factor)                      \
    {                                                                         \
        const double v = (double)x * factor;                                  \
        return CG__SAT(T, v, lo, hi_ex, tmax);                                \
    }                                                                         \
    CG__SCALE(sfx, T, CG__NOPREP, cg__iscale_##sfx(x, factor), CG__SNOFAST)

CG__ISCALE(i8, int8_t, -128.0, 128.0, INT8_MAX)
CG__ISCALE(u8, uint8_t, 0.0, 256.0, UINT8_MAX)
CG__ISCALE(i16, cg__i16u_t, -32768.0, 32768.0, INT16_MAX)
CG__ISCALE(u16, cg__u16u_t, 0.0, 65536.0, UINT16_MAX)
CG__ISCALE(i32, cg__i32u_t, -2147483648.0, 2147483648.0, INT32_MAX)
CG__ISCALE(u32, cg__u32u_t, 0.0, 4294967296.0, UINT32_MAX)
CG__ISCALE(i64, cg__i64u_t, -0x1p63, 0x1p63, INT64_MAX)
CG__ISCALE(u64, cg__u64u_t, 0.0, 0x1p64, UINT64_MAX)

/* Integer division truncating toward zero. Up to 32 bits through double:
 * for |x| < 2^53 the correctly rounded quotient never crosses an integer,
 * so truncating it is exact, and the loop vectorises; 64 bits natively. */
#define CG__DIVIDE(sfx, T, EXPR)                                              \
    CG__CLONES static void cg__divide_##sfx(void *buf_v, size_t n,            \
                                            unsigned divisor)                 \
    {                                                                         \
        T *restrict buf = buf_v;                                              \
        const double d = (double)divisor;                                     \
        (void)d;                                                              \
        for (size_t i = 0; i < n; i++) {                                      \
            const T x = buf[i];                                               \
            buf[i] = (EXPR);                                                  \
        }                                                                     \
    }

CG__DIVIDE(i8, int8_t, (int8_t)((double)x / d))
CG__DIVIDE(u8, uint8_t, (uint8_t)((double)x / d))
CG__DIVIDE(i16, cg__i16u_t, (int16_t)((double)x / d))
CG__DIVIDE(u16, cg__u16u_t, (uint16_t)((double)x / d))
CG__DIVIDE(i32, cg__i32u_t, (int32_t)((double)x / d))
CG__DIVIDE(u32, cg__u32u_t, (uint32_t)((double)x / d))
CG__DIVIDE(i64, cg__i64u_t, x / (int64_t)divisor)
CG__DIVIDE(u64, cg__u64u_t, x / (uint64_t)divisor)

typedef struct {
    void (*scale)(void *buf, size_t n, double factor);
    void (*scale_copy)(void *restrict out, const void *restrict in, size_t n,
                       double factor);
    void (*divide)(void *buf, size_t n, unsigned divisor); /* NULL: float */
} cg__scale_kernels_t;

#define CG__SK(sfx, div)                                                      \
    {cg__scale_##sfx, cg__scale_copy_##sfx, div}

static const cg__scale_kernels_t cg__scale_kernels[CG_DTYPE_COUNT] = {
    [CG_DTYPE_I8] = CG__SK(i8, cg__divide_i8),
    [CG_DTYPE_U8] = CG__SK(u8, cg__divide_u8),
    [CG_DTYPE_I32] = CG__SK(i32, cg__divide_i32),
    [CG_DTYPE_U32] = CG__SK(u32, cg__divide_u32),
    [CG_DTYPE_I64] = CG__SK(i64, cg__divide_i64),
    [CG_DTYPE_U64] = CG__SK(u64, cg__divide_u64),
    [CG_DTYPE_F16] = CG__SK(f16, NULL),
    [CG_DTYPE_F32] = CG__SK(f32, NULL),
    [CG_DTYPE_F64] = CG__SK(f64, NULL),
    [CG_DTYPE_BF16] = CG__SK(bf16, NULL),
    [CG_DTYPE_I16] = CG__SK(i16, cg__divide_i16),
    [CG_DTYPE_U16] = CG__SK(u16, cg__divide_u16),
};

void cg_scale(void *buf, size_t count, cg_dtype_t dt, double factor)
{
    assert(cg_dtype_size(dt) != 0);
    if (factor == 1.0 || count == 0)
        return;
    cg__scale_kernels[dt].scale(buf, count, factor);
}

void cg_scale_copy(void *out, const void *in, size_t count, cg_dtype_t dt,
                   double factor)
{
    assert(cg_dtype_size(dt) != 0);
    if (count == 0)
        return;
    if (factor == 1.0) {
        memcpy(out, in, count * cg_dtype_size(dt));
        return;
    }
    cg__scale_kernels[dt].scale_copy(out, in, count, factor);
}

void cg_divide(void *buf, size_t count, cg_dtype_t dt, unsigned divisor)
{
    assert(cg_dtype_size(dt) != 0 && divisor >= 1);
    if (divisor == 1 || count == 0)
        return;
    if (cg__scale_kernels[dt].divide == NULL) {
        cg_scale(buf, count, dt, 1.0 / divisor);
        return;
    }
    cg__scale_kernels[dt].divide(buf, count, divisor);
}

cg_status_t cg_reduce_post(void *buf, size_t count, cg_dtype_t dt,
                           cg_redop_t op, int nranks, double postscale)
{
    cg_status_t status = cg_reduce_check(dt, op);

    if (status != CG_OK)
        return status;
    if (nranks < 1) {
        return cg_error_set(CG_ERR_INVALID_PARAM,
                            "reduction post step: rank count %d, must be at "
                            "least 1", nranks);
    }
    if (op == CG_OP_AVG && dt == CG_DTYPE_F32) {
        if (count != 0 && postscale / nranks != 1.0)
            cg__scale_f32_avg(buf, count, postscale / nranks);
        return CG_OK;
    }
    if (op == CG_OP_AVG && cg__scale_kernels[dt].divide == NULL) {
        cg_scale(buf, count, dt, postscale / nranks);
        return CG_OK;
    }
    if (op == CG_OP_AVG)
        cg_divide(buf, count, dt, (unsigned)nranks);
    cg_scale(buf, count, dt, postscale);
    return CG_OK;
}
