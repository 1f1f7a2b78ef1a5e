/* SPDX-License-Identifier: Apache-2.0 */
/* Units for core/reduce/reduce_scale.c: scaling (prescale/postscale) of every dtype
 * against a libm reference (trunc, explicit saturation), integer
 * truncation (Horovod's rule) and saturation, the exact factor 1, average over several ranks
 * for every dtype, and the checks of cg_reduce_post. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/reduce/reduce.h"
#include "tests/core/reduce/test_reduce_ref.h"

/* Reference scale of element i of buf, by the rule in core/reduce/reduce.h */
static void ref_scale1(void *buf, size_t i, cg_dtype_t dt, double f)
{
    if (dt == CG_DTYPE_F16 || dt == CG_DTYPE_BF16 || dt == CG_DTYPE_F32) {
        /* Horovod: the factor rounded to float, the product in f32 */
        float p = (float)ref_getf(buf, i, dt) * (float)f;
        ref_setf(buf, i, dt, p);
        return;
    }
    if (ref_is_float(dt)) {
        ref_setf(buf, i, dt, ref_getf(buf, i, dt) * f);
        return;
    }
    unsigned bits = 8 * (unsigned)cg_dtype_size(dt);
    double x = ref_is_signed(dt) ? (double)ref_gets(buf, i, dt)
                                 : (double)ref_getu(buf, i, dt);
    double v = trunc(x * f); /* Horovod: (T)(factor * x), toward zero */
    double lo = ref_is_signed(dt) ? -ldexp(1, bits - 1) : 0;
    double hi = ref_is_signed(dt) ? ldexp(1, bits - 1) : ldexp(1, bits);
    uint64_t tmax = ref_is_signed(dt) ? (~0ull >> (65 - bits))
                                      : (~0ull >> (64 - bits));
    uint64_t r = isnan(v)    ? 0
                 : v >= hi   ? tmax
                 : v <= lo   ? (uint64_t)(int64_t)lo
                 : ref_is_signed(dt) ? (uint64_t)(int64_t)v : (uint64_t)v;
    ref_setu(buf, i, dt, r);
}

static void check_scale(cg_dtype_t dt, double f, size_t n, uint64_t seed)
{
    size_t sz = cg_dtype_size(dt);
    char *in = malloc(n * sz + 1), *inp = malloc(n * sz + 3);
    char *cp = malloc(n * sz + 5), *want = malloc(n * sz);
    ref_fill(in + 1, n, dt, &seed);
    memcpy(inp + 3, in + 1, n * sz);
    memcpy(want, in + 1, n * sz);
    for (size_t i = 0; i < n; i++)
        ref_scale1(want, i, dt, f);
    cg_scale(inp + 3, n, dt, f);                /* in place, unaligned */
    cg_scale_copy(cp + 5, in + 1, n, dt, f);    /* copy, unaligned */
    size_t i = ref_mismatch(inp + 3, want, n, dt);
    REF_ASSERT_EQ(i, n, "%s x %a: element %zu of %zu: 0x%llx -> 0x%llx want "
                  "0x%llx", cg_dtype_name(dt), f, i, n,
                  (unsigned long long)ref_getu(in + 1, i, dt),
                  (unsigned long long)ref_getu(inp + 3, i, dt),
                  (unsigned long long)ref_getu(want, i, dt));
    i = ref_mismatch(cp + 5, want, n, dt);
    cr_assert_eq(i, n, "%s copy x %a: element %zu differs", cg_dtype_name(dt),
                 f, i);
    free(in), free(inp), free(cp), free(want);
}

Test(scale, every_dtype_matches_reference_for_several_factors)
{
    const double fs[] = {0.5, -1.5, 1.0 / 3, 1e-3, 2.0, 0.0, 1e30, -0.25};
    for (int dt = 0; dt < CG_DTYPE_COUNT; dt++)
        for (size_t k = 0; k < sizeof(fs) / sizeof(fs[0]); k++)
            check_scale((cg_dtype_t)dt, fs[k], 1023, 77 + 13 * k + dt);
}

Test(scale, integers_truncate_toward_zero_as_horovod)
{
    int32_t v[6] = {5, 7, -5, -7, 3, 1};
    const int32_t want[6] = {2, 3, -2, -3, 1, 0};
    cg_scale(v, 6, CG_DTYPE_I32, 0.5);
    for (int i = 0; i < 6; i++)
        cr_assert_eq(v[i], want[i], "element %d got %d want %d", i, v[i],
                     want[i]);
    /* Horovod's ScaleBufferCPUImpl: output[i] = (T)(factor * input[i]) */
    const double f = 0.1915194503788923; /* a factor in (0, 1) as Horovod's tests draw */
    int16_t h[5] = {-100, -1, 37, 99, 32767}, hc[5];
    int64_t l[3] = {-99, 53, (int64_t)1 << 53};
    uint16_t u[2] = {65535, 11};
    cg_scale_copy(hc, h, 5, CG_DTYPE_I16, f);
    cg_scale(l, 3, CG_DTYPE_I64, f);
    cg_scale(u, 2, CG_DTYPE_U16, f);
    const int16_t hin[5] = {-100, -1, 37, 99, 32767};
    for (int i = 0; i < 5; i++)
        cr_assert_eq(hc[i], (int16_t)(f * hin[i]), "i16 %d got %d", i, hc[i]);
    cr_assert(l[0] == (int64_t)(f * -99) && l[0] == -18 &&
                  l[1] == (int64_t)(f * 53) && l[1] == 10 &&
                  l[2] == (int64_t)(f * (double)((int64_t)1 << 53)),
              "i64 got %lld %lld %lld", (long long)l[0], (long long)l[1],
              (long long)l[2]);
    cr_assert(u[0] == (uint16_t)(f * 65535) && u[1] == 2, "u16 got %u %u",
              u[0], u[1]);
    int8_t c[2] = {-1, 1};
    cg_scale(c, 2, CG_DTYPE_I8, 0.99);
    cr_assert(c[0] == 0 && c[1] == 0, "i8 +-1 * 0.99 got %d %d", c[0], c[1]);
}

Test(scale, f32_multiplies_by_the_factor_rounded_to_float_as_horovod)
{
    /* 9 * 0.1 in double, then to float, is 0x1.ccccccp-1; Horovod's
     * ScaleBufferCPUImpl rounds the factor to float first: 0.1f * 9.0f
     * is 0x1.cccccep-1 */
    float v[1] = {9.0f};
    volatile float want = 0.1f * 9.0f;
    cg_scale(v, 1, CG_DTYPE_F32, 0.1);
    cr_assert_eq(v[0], want, "got %a want %a", v[0], want);
    cr_assert_neq(v[0], (float)(9.0 * 0.1), "%a", v[0]);
}

Test(scale, integers_saturate_and_nan_gives_zero)
{
    int8_t c[2] = {100, -100};
    cg_scale(c, 2, CG_DTYPE_I8, 2.0);
    cr_assert(c[0] == 127 && c[1] == -128, "i8 got %d %d", c[0], c[1]);
    uint8_t u[1] = {10};
    cg_scale(u, 1, CG_DTYPE_U8, -1.0);
    cr_assert_eq(u[0], 0, "u8 10 * -1 = %u", u[0]);
    int64_t l[2] = {INT64_MAX, INT64_MIN};
    cg_scale(l, 2, CG_DTYPE_I64, 2.0);
    cr_assert(l[0] == INT64_MAX && l[1] == INT64_MIN, "i64 got %lld %lld",
              (long long)l[0], (long long)l[1]);
    uint64_t ul[1] = {1};
    cg_scale(ul, 1, CG_DTYPE_U64, INFINITY);
    cr_assert_eq(ul[0], UINT64_MAX, "u64 1 * inf = %llu",
                 (unsigned long long)ul[0]);
    int32_t s[1] = {12345};
    cg_scale(s, 1, CG_DTYPE_I32, NAN);
    cr_assert_eq(s[0], 0, "i32 * NaN = %d", s[0]);
    int16_t h[2] = {20000, -20000};
    cg_scale(h, 2, CG_DTYPE_I16, 1.75);
    cr_assert(h[0] == INT16_MAX && h[1] == INT16_MIN, "i16 got %d %d", h[0],
              h[1]);
    uint16_t uh[2] = {60000, 7};
    cg_scale(uh, 2, CG_DTYPE_U16, -0.5);
    cr_assert(uh[0] == 0 && uh[1] == 0, "u16 * -0.5 got %u %u", uh[0], uh[1]);
    cg_scale(uh, 1, CG_DTYPE_U16, 0.0);
    uh[0] = 40000;
    cg_scale(uh, 1, CG_DTYPE_U16, 2.0);
    cr_assert_eq(uh[0], UINT16_MAX, "u16 40000 * 2 = %u", uh[0]);
    uint32_t w[1] = {4000000000u};
    cg_scale(w, 1, CG_DTYPE_U32, 1.5);
    cr_assert_eq(w[0], UINT32_MAX, "u32 4e9 * 1.5 = %u", w[0]);
}

Test(scale, factor_one_keeps_64_bit_integers_exact)
{
    /* INT64_MAX - 1 has no exact double: any trip through double shows */
    int64_t v[1] = {INT64_MAX - 1}, c[1] = {0};
    cg_scale(v, 1, CG_DTYPE_I64, 1.0);
    cg_scale_copy(c, v, 1, CG_DTYPE_I64, 1.0);
    cr_assert_eq(v[0], INT64_MAX - 1, "got %lld", (long long)v[0]);
    cr_assert_eq(c[0], INT64_MAX - 1, "copy got %lld", (long long)c[0]);
    cr_assert_eq(cg_reduce_post(v, 1, CG_DTYPE_I64, CG_OP_SUM, 4, 1.0), CG_OK);
    cr_assert_eq(v[0], INT64_MAX - 1, "post sum got %lld", (long long)v[0]);
}

/* nr ranks of random data; the reduced, averaged, postscaled result
 * against the reference fold (per-step rounding, then the post rule). */
static void check_average(cg_dtype_t dt, int nr, double post, uint64_t seed)
{
    enum { N = 1023 };
    size_t sz = cg_dtype_size(dt);
    char *acc = malloc(N * sz), *want = malloc(N * sz), *in = malloc(N * sz);
    ref_fill(acc, N, dt, &seed);
    memcpy(want, acc, N * sz);
    for (int r = 1; r < nr; r++) {
        ref_fill(in, N, dt, &seed);
        cg_reduce(acc, in, N, dt, CG_OP_AVG);
        ref_reduce(want, want, in, N, dt, CG_OP_SUM);
    }
    cr_assert_eq(cg_reduce_post(acc, N, dt, CG_OP_AVG, nr, post), CG_OK,
                 "%s", cg_last_error());
    for (size_t i = 0; i < N; i++) {
        if (dt == CG_DTYPE_F32) { /* in double, one rounding */
            ref_setf(want, i, dt, ref_getf(want, i, dt) * (post / nr));
            continue;
        }
        if (ref_is_float(dt)) {
            ref_scale1(want, i, dt, post / nr);
            continue;
        }
        if (ref_is_signed(dt))
            ref_setu(want, i, dt, (uint64_t)(ref_gets(want, i, dt) / nr));
        else
            ref_setu(want, i, dt, ref_getu(want, i, dt) / (uint64_t)nr);
        if (post != 1.0)
            ref_scale1(want, i, dt, post);
    }
    size_t i = ref_mismatch(acc, want, N, dt);
    REF_ASSERT_EQ(i, (size_t)N, "%s average of %d ranks, postscale %g: "
                  "element %zu got 0x%llx want 0x%llx", cg_dtype_name(dt), nr,
                  post, i,
                  (unsigned long long)ref_getu(acc, i, dt),
                  (unsigned long long)ref_getu(want, i, dt));
    free(acc), free(want), free(in);
}

Test(average, every_dtype_over_several_ranks_matches_reference)
{
    for (int dt = 0; dt < CG_DTYPE_COUNT; dt++) {
        check_average((cg_dtype_t)dt, 1, 1.0, 5 + dt);
        check_average((cg_dtype_t)dt, 3, 1.0, 50 + dt);
        check_average((cg_dtype_t)dt, 4, 0.5, 500 + dt);
        check_average((cg_dtype_t)dt, 7, 3.0, 5000 + dt);
    }
}

Test(average, integer_division_truncates_toward_zero)
{
    int32_t s[4] = {-7, 7, -1, 5};
    cr_assert_eq(cg_reduce_post(s, 4, CG_DTYPE_I32, CG_OP_AVG, 2, 1.0), CG_OK);
    const int32_t want[4] = {-3, 3, 0, 2};
    for (int i = 0; i < 4; i++)
        cr_assert_eq(s[i], want[i], "i32 %d got %d want %d", i, s[i], want[i]);
    int64_t l[1] = {INT64_MIN};
    cg_reduce_post(l, 1, CG_DTYPE_I64, CG_OP_AVG, 3, 1.0);
    cr_assert_eq(l[0], INT64_MIN / 3, "i64 got %lld", (long long)l[0]);
    uint64_t u[1] = {UINT64_MAX};
    cg_reduce_post(u, 1, CG_DTYPE_U64, CG_OP_AVG, 2, 1.0);
    cr_assert_eq(u[0], UINT64_MAX / 2, "u64 got %llu",
                 (unsigned long long)u[0]);
    int8_t c[1] = {-128};
    cg_reduce_post(c, 1, CG_DTYPE_I8, CG_OP_AVG, 3, 1.0);
    cr_assert_eq(c[0], -42, "i8 -128 / 3 got %d", c[0]);
}

Test(average, float_average_is_sum_times_postscale_over_ranks)
{
    float acc[1] = {1.0f};
    const float r1[1] = {2.0f}, r2[1] = {3.0f};
    cg_reduce(acc, r1, 1, CG_DTYPE_F32, CG_OP_AVG);
    cg_reduce(acc, r2, 1, CG_DTYPE_F32, CG_OP_AVG);
    cr_assert_eq(acc[0], 6.0f, "sum got %a", acc[0]);
    cr_assert_eq(cg_reduce_post(acc, 1, CG_DTYPE_F32, CG_OP_AVG, 3, 3.0),
                 CG_OK);
    cr_assert_eq(acc[0], 6.0f, "6 * 3 / 3 got %a", acc[0]);
    double d[1] = {10.0};
    cg_reduce_post(d, 1, CG_DTYPE_F64, CG_OP_MAX, 4, 0.5);
    cr_assert_eq(d[0], 5.0, "max then postscale 0.5: %a", d[0]);
}

Test(prescale, applies_to_each_rank_input_before_the_sum)
{
    /* Horovod order: each rank's input * prescale (truncated in its type),
     * summed, then average and postscale */
    const int32_t x0[2] = {3, -3}, x1[2] = {5, 1};
    int32_t acc[2], tmp[2];
    cg_scale_copy(acc, x0, 2, CG_DTYPE_I32, 0.5);  /* 1 (1.5), -1 (-1.5) */
    cg_scale_copy(tmp, x1, 2, CG_DTYPE_I32, 0.5);  /* 2 (2.5), 0 (0.5) */
    cg_reduce(acc, tmp, 2, CG_DTYPE_I32, CG_OP_AVG);
    cr_assert(acc[0] == 3 && acc[1] == -1, "sum %d %d", acc[0], acc[1]);
    cr_assert_eq(cg_reduce_post(acc, 2, CG_DTYPE_I32, CG_OP_AVG, 2, 3.0),
                 CG_OK);
    /* 3 / 2 -> 1, * 3; -1 / 2 -> 0 */
    cr_assert(acc[0] == 3 && acc[1] == 0, "avg*3 %d %d", acc[0], acc[1]);
    uint16_t h[1] = {0x3c00}; /* f16 1.0 * 1/3: f32 product, then RNE */
    cg_scale(h, 1, CG_DTYPE_F16, 1.0 / 3);
    cr_assert_eq(h[0], 0x3555, "f16 1/3 got 0x%04x", h[0]);
}

Test(post, rejects_zero_ranks_and_unsupported_ops_leaving_buffer)
{
    float v[1] = {8.0f};
    cg_status_t st = cg_reduce_post(v, 1, CG_DTYPE_F32, CG_OP_AVG, 0, 1.0);
    cr_assert_eq(st, CG_ERR_INVALID_PARAM, "got %s", cg_status_name(st));
    cr_assert(strstr(cg_last_error(), "rank count 0") != NULL, "%s",
              cg_last_error());
    st = cg_reduce_post(v, 1, CG_DTYPE_F32, CG_OP_ADASUM, 2, 1.0);
    cr_assert_eq(st, CG_ERR_UNSUPPORTED, "got %s", cg_status_name(st));
    st = cg_reduce_post(v, 1, CG_DTYPE_COUNT, CG_OP_SUM, 2, 1.0);
    cr_assert_eq(st, CG_ERR_INVALID_PARAM, "got %s", cg_status_name(st));
    cr_assert_eq(v[0], 8.0f, "buffer changed to %a", v[0]);
}

Test(divide, floats_multiply_by_the_reciprocal_and_divisor_one_is_a_no_op)
{
    float f[2] = {3.0f, -1.0f};
    cg_divide(f, 2, CG_DTYPE_F32, 4);
    cr_assert(f[0] == 0.75f && f[1] == -0.25f, "got %a %a", f[0], f[1]);
    uint16_t h[1] = {0x4200}; /* f16 3.0 / 3 = 1.0 (times (float)(1/3)) */
    cg_divide(h, 1, CG_DTYPE_F16, 3);
    cr_assert_eq(h[0], 0x3c00, "f16 3 / 3 got 0x%04x", h[0]);
    int64_t l[1] = {INT64_MAX};
    cg_divide(l, 1, CG_DTYPE_I64, 1);
    cr_assert_eq(l[0], INT64_MAX, "i64 / 1 got %lld", (long long)l[0]);
    uint32_t u[1] = {UINT32_MAX};
    cg_divide(u, 1, CG_DTYPE_U32, 0xfffffffeu);
    cr_assert_eq(u[0], 1u, "u32 max / (max - 1) got %u", u[0]);
}
