/* SPDX-License-Identifier: Apache-2.0 */
/* Units for the edge values of core/reduce/reduce_float.c and core/reduce/reduce_int.c:
 * NaN, +-inf, subnormals and signed zeros in f32/f64, min/max with NaN as
 * documented in core/reduce/reduce.h, and two's complement wraparound of integer
 * sum and prod (these run clean under UBSan). */
#include <criterion/criterion.h>
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "core/reduce/reduce.h"

Test(edge, f32_inf_nan_and_subnormal_arithmetic)
{
    float a[6] = {INFINITY, INFINITY, NAN, FLT_TRUE_MIN, FLT_MIN, FLT_MAX};
    const float b[6] = {1.0f, -INFINITY, 1.0f, FLT_TRUE_MIN, -FLT_TRUE_MIN,
                        FLT_MAX};
    cg_reduce(a, b, 6, CG_DTYPE_F32, CG_OP_SUM);
    cr_assert(isinf(a[0]) && a[0] > 0, "inf + 1 = %a", a[0]);
    cr_assert(isnan(a[1]), "inf + -inf = %a", a[1]);
    cr_assert(isnan(a[2]), "NaN + 1 = %a", a[2]);
    cr_assert_eq(a[3], 2 * FLT_TRUE_MIN, "subnormal sum %a", a[3]);
    cr_assert_eq(a[4], FLT_MIN - FLT_TRUE_MIN, "to subnormal: %a", a[4]);
    cr_assert(isinf(a[5]), "FLT_MAX + FLT_MAX = %a", a[5]);
}

Test(edge, f64_prod_of_inf_zero_and_subnormals)
{
    double a[4] = {INFINITY, DBL_TRUE_MIN, 0x1p-600, -0.0};
    const double b[4] = {0.0, 0.5, 0x1p-600, 5.0};
    cg_reduce(a, b, 4, CG_DTYPE_F64, CG_OP_PROD);
    cr_assert(isnan(a[0]), "inf * 0 = %a", a[0]);
    cr_assert_eq(a[1], 0.0, "DBL_TRUE_MIN * 0.5 = %a (tie to even 0)", a[1]);
    cr_assert_eq(a[2], 0.0, "underflow to 0 got %a", a[2]);
    cr_assert(a[3] == 0 && signbit(a[3]), "-0 * 5 = %a", a[3]);
}

Test(edge, f32_max_min_propagate_nan_from_either_side)
{
    float mx[4] = {NAN, 1.0f, -INFINITY, 2.0f};
    float mn[4] = {NAN, 1.0f, -INFINITY, 2.0f};
    const float b[4] = {1.0f, NAN, 3.0f, 2.0f};
    cg_reduce(mx, b, 4, CG_DTYPE_F32, CG_OP_MAX);
    cg_reduce(mn, b, 4, CG_DTYPE_F32, CG_OP_MIN);
    cr_assert(isnan(mx[0]) && isnan(mx[1]), "max: %a %a", mx[0], mx[1]);
    cr_assert(isnan(mn[0]) && isnan(mn[1]), "min: %a %a", mn[0], mn[1]);
    cr_assert_eq(mx[2], 3.0f, "max(-inf, 3) = %a", mx[2]);
    cr_assert_eq(mn[2], -INFINITY, "min(-inf, 3) = %a", mn[2]);
    cr_assert_eq(mx[3], 2.0f, "max(2, 2) = %a", mx[3]);
}

Test(edge, f64_max_of_two_nans_keeps_the_first_and_zeros_keep_the_second)
{
    uint64_t na = 0x7ff8000000000001ull, nb = 0x7ff8000000000002ull;
    double a[3], b[3] = {0, +0.0, -0.0};
    memcpy(&a[0], &na, 8);
    memcpy(&b[0], &nb, 8);
    a[1] = -0.0, a[2] = +0.0;
    cg_reduce(a, b, 3, CG_DTYPE_F64, CG_OP_MAX);
    uint64_t got;
    memcpy(&got, &a[0], 8);
    cr_assert_eq(got, na, "max(NaN a, NaN b) = 0x%llx",
                 (unsigned long long)got);
    cr_assert(a[1] == 0 && !signbit(a[1]), "max(-0, +0) = %a", a[1]);
    cr_assert(a[2] == 0 && signbit(a[2]), "max(+0, -0) = %a", a[2]);
}

Test(edge, i32_sum_wraps_at_int32_max)
{
    int32_t a[3] = {INT32_MAX, INT32_MIN, -1};
    const int32_t b[3] = {1, -1, INT32_MIN};
    cg_reduce(a, b, 3, CG_DTYPE_I32, CG_OP_SUM);
    cr_assert_eq(a[0], INT32_MIN, "INT32_MAX + 1 = %d", a[0]);
    cr_assert_eq(a[1], INT32_MAX, "INT32_MIN - 1 = %d", a[1]);
    cr_assert_eq(a[2], INT32_MAX, "-1 + INT32_MIN = %d", a[2]);
}

Test(edge, i8_and_u8_prod_wrap)
{
    int8_t a[4] = {16, -128, 127, -3};
    const int8_t b[4] = {16, -1, 127, 50};
    cg_reduce(a, b, 4, CG_DTYPE_I8, CG_OP_PROD);
    cr_assert_eq(a[0], 0, "16 * 16 = %d", a[0]);
    cr_assert_eq(a[1], -128, "-128 * -1 = %d", a[1]);
    cr_assert_eq(a[2], 1, "127 * 127 = %d (16129 mod 256)", a[2]);
    cr_assert_eq(a[3], 106, "-3 * 50 = %d (-150 + 256)", a[3]);
    uint8_t u[2] = {255, 255};
    const uint8_t v[2] = {255, 1};
    cg_reduce(u, v, 1, CG_DTYPE_U8, CG_OP_PROD);
    cg_reduce(u + 1, v + 1, 1, CG_DTYPE_U8, CG_OP_SUM);
    cr_assert_eq(u[0], 1, "255 * 255 = %u", u[0]);
    cr_assert_eq(u[1], 0, "255 + 1 = %u", u[1]);
}

Test(edge, i16_and_u16_wrap_in_sum_and_prod)
{
    /* u16 * u16 promotes to int in C, where 65535 * 65535 overflows: the
     * kernel must compute in unsigned int (UBSan flags it otherwise) */
    int16_t a[4] = {256, INT16_MIN, INT16_MAX, -3};
    const int16_t b[4] = {256, -1, INT16_MAX, 20000};
    cg_reduce(a, b, 4, CG_DTYPE_I16, CG_OP_PROD);
    cr_assert_eq(a[0], 0, "256 * 256 = %d", a[0]);
    cr_assert_eq(a[1], INT16_MIN, "-32768 * -1 = %d", a[1]);
    cr_assert_eq(a[2], 1, "32767 * 32767 = %d (mod 65536)", a[2]);
    cr_assert_eq(a[3], 5536, "-3 * 20000 = %d (-60000 + 65536)", a[3]);
    uint16_t u[3] = {65535, 65535, 0};
    const uint16_t v[3] = {65535, 1, 1};
    cg_reduce(u, v, 1, CG_DTYPE_U16, CG_OP_PROD);
    cg_reduce(u + 1, v + 1, 1, CG_DTYPE_U16, CG_OP_SUM);
    cg_reduce(u + 2, v + 2, 1, CG_DTYPE_U16, CG_OP_MAX);
    cr_assert_eq(u[0], 1, "65535 * 65535 = %u", u[0]);
    cr_assert_eq(u[1], 0, "65535 + 1 = %u", u[1]);
    cr_assert_eq(u[2], 1, "max(0, 1) = %u", u[2]);
    int16_t s[1] = {-1};
    const int16_t one[1] = {1};
    uint16_t w[1] = {0xffff};
    const uint16_t wone[1] = {1};
    cg_reduce(s, one, 1, CG_DTYPE_I16, CG_OP_MIN);
    cg_reduce(w, wone, 1, CG_DTYPE_U16, CG_OP_MIN);
    cr_assert(s[0] == -1 && w[0] == 1, "i16 min %d, u16 min %u", s[0], w[0]);
}

Test(edge, i64_and_u64_wrap_in_sum_and_prod)
{
    int64_t a[2] = {INT64_MAX, INT64_MIN};
    const int64_t b[2] = {INT64_MAX, -1};
    cg_reduce(a, b, 2, CG_DTYPE_I64, CG_OP_PROD);
    cr_assert_eq(a[0], 1, "INT64_MAX^2 = %lld", (long long)a[0]);
    cr_assert_eq(a[1], INT64_MIN, "INT64_MIN * -1 = %lld", (long long)a[1]);
    uint64_t u[1] = {UINT64_MAX};
    const uint64_t v[1] = {2};
    cg_reduce(u, v, 1, CG_DTYPE_U64, CG_OP_SUM);
    cr_assert_eq(u[0], 1, "UINT64_MAX + 2 = %llu", (unsigned long long)u[0]);
}

Test(edge, integer_min_max_compare_signed_and_unsigned_by_type)
{
    uint32_t u[1] = {0xffffffffu};
    int32_t s[1] = {-1};
    const uint32_t one_u[1] = {1};
    const int32_t one_s[1] = {1};
    cg_reduce(u, one_u, 1, CG_DTYPE_U32, CG_OP_MAX);
    cg_reduce(s, one_s, 1, CG_DTYPE_I32, CG_OP_MAX);
    cr_assert_eq(u[0], 0xffffffffu, "u32 max(0xffffffff, 1) = %u", u[0]);
    cr_assert_eq(s[0], 1, "i32 max(-1, 1) = %d", s[0]);
    int8_t c[1] = {-128};
    const int8_t d[1] = {127};
    cg_reduce(c, d, 1, CG_DTYPE_I8, CG_OP_MIN);
    cr_assert_eq(c[0], -128, "i8 min(-128, 127) = %d", c[0]);
}
