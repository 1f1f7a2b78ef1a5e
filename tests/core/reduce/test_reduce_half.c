/* SPDX-License-Identifier: Apache-2.0 */
/* Units for core/reduce/half.h and the f16/bf16 kernels: exhaustive widening,
 * narrowing against the frexp/nearbyint reference over every tie point and
 * a sweep of f32 patterns, ties to even, overflow to inf, subnormals, NaN
 * kept and made quiet. */
#include <criterion/criterion.h>
#include <float.h>
#include <math.h>
#include <stdlib.h>

#include "core/reduce/half.h"
#include "core/reduce/reduce.h"
#include "tests/core/reduce/test_reduce_ref.h"

typedef struct {
    float (*widen)(uint16_t);
    uint16_t (*narrow)(float);
    double (*ref_widen)(uint16_t);
    uint16_t (*ref_narrow)(double);
    uint16_t inf, qbit;
    const char *name;
} fmt_t;

static const fmt_t f16 = {cg_f16_to_f32, cg_f32_to_f16, ref_f16, ref_to_f16,
                          0x7c00, 0x0200, "f16"};
static const fmt_t bf16 = {cg_bf16_to_f32, cg_f32_to_bf16, ref_bf16,
                           ref_to_bf16, 0x7f80, 0x0040, "bf16"};

static int is_nan16(const fmt_t *f, uint16_t h)
{
    return (h & 0x7fff) > f->inf;
}

/* Widening is exact for all 65536 patterns; narrowing back is the
 * identity, except that a NaN comes back with its quiet bit set. */
static void check_all_patterns(const fmt_t *f)
{
    for (uint32_t h = 0; h <= 0xffff; h++) {
        float w = f->widen((uint16_t)h);
        double r = f->ref_widen((uint16_t)h);
        uint16_t back = f->narrow(w);
        if (is_nan16(f, (uint16_t)h)) {
            REF_ASSERT(isnan(w), "%s 0x%04x widened to %a", f->name, h, w);
            REF_ASSERT_EQ(back, h | f->qbit, "%s NaN 0x%04x -> 0x%04x",
                          f->name, h, back);
            continue;
        }
        REF_ASSERT(w == r && !signbit(w) == !signbit(r),
                   "%s 0x%04x widened to %a, reference %a", f->name, h, w, r);
        REF_ASSERT_EQ(back, h, "%s 0x%04x round trip gave 0x%04x", f->name,
                      h, back);
    }
}

Test(half, f16_widens_exactly_and_round_trips_all_patterns)
{
    check_all_patterns(&f16);
}

Test(half, bf16_widens_exactly_and_round_trips_all_patterns)
{
    check_all_patterns(&bf16);
}

/* Narrowing equals the reference at every midpoint between neighbours
 * (the ties), one f32 ulp either side, and over a sweep of f32 patterns. */
static void check_narrowing(const fmt_t *f)
{
    for (uint32_t h = 0; h < f->inf; h++) {
        float lo = f->widen((uint16_t)h), hi = f->widen((uint16_t)(h + 1));
        float mid = lo + (hi - lo) / 2; /* exact in f32 */
        float cand[3] = {mid, nextafterf(mid, 0), nextafterf(mid, INFINITY)};
        for (int k = 0; k < 3; k++) {
            for (int s = 0; s < 2; s++) {
                float x = s ? -cand[k] : cand[k];
                uint16_t got = f->narrow(x), want = f->ref_narrow(x);
                REF_ASSERT_EQ(got, want, "%s narrow(%a) got 0x%04x want "
                              "0x%04x", f->name, x, got, want);
            }
        }
    }
    for (uint64_t u = 0; u <= 0xffffffffull; u += 4093) {
        float x = cg_f32_from_bits((uint32_t)u);
        uint16_t got = f->narrow(x), want = f->ref_narrow(x);
        REF_ASSERT(got == want || (isnan(x) && is_nan16(f, got)),
                   "%s narrow(0x%08x) got 0x%04x want 0x%04x", f->name,
                   (unsigned)u, got, want);
    }
}

Test(half, f16_narrowing_matches_reference_at_ties_and_sweep)
{
    check_narrowing(&f16);
}

Test(half, bf16_narrowing_matches_reference_at_ties_and_sweep)
{
    check_narrowing(&bf16);
}

Test(half, f16_ties_round_to_even_in_normal_and_subnormal_range)
{
    static const struct { float x; uint16_t want; } t[] = {
        {1.0f + 0x1p-11f, 0x3c00},       /* tie, 1.0 is even */
        {1.0f + 3 * 0x1p-11f, 0x3c02},   /* tie, up to even */
        {0x1p-25f, 0x0000},              /* half the smallest subnormal */
        {3 * 0x1p-25f, 0x0002},          /* tie between 1 and 2 ulps */
        {0x1p-24f, 0x0001},              /* smallest subnormal, exact */
        {0x1p-14f - 0x1p-25f, 0x0400},   /* tie at the normal boundary */
        {-(2048.0f + 1.0f), 0xe800},     /* tie at ulp 2: 2048 even */
        {2048.0f + 3.0f, 0x6802}};       /* tie at ulp 2: up to 2052 */
    for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
        uint16_t got = cg_f32_to_f16(t[i].x);
        cr_assert_eq(got, t[i].want, "%a -> 0x%04x want 0x%04x", t[i].x, got,
                     t[i].want);
    }
}

Test(half, f16_overflows_to_inf_from_the_midpoint_above_max)
{
    static const struct { float x; uint16_t want; } t[] = {
        {65504.0f, 0x7bff}, {65519.99f, 0x7bff}, {65520.0f, 0x7c00},
        {-65520.0f, 0xfc00}, {1e10f, 0x7c00}, {FLT_MAX, 0x7c00},
        {INFINITY, 0x7c00}, {-INFINITY, 0xfc00}};
    for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
        uint16_t got = cg_f32_to_f16(t[i].x);
        cr_assert_eq(got, t[i].want, "%a -> 0x%04x want 0x%04x", t[i].x, got,
                     t[i].want);
    }
}

Test(half, bf16_keeps_nan_with_low_payload_and_rounds_ties_to_even)
{
    static const struct { uint32_t x; uint16_t want; } t[] = {
        {0x7f800001, 0x7fc0}, /* NaN only in the low bits: not inf */
        {0xff800001, 0xffc0}, {0x7fc00000, 0x7fc0}, {0x7fa12345, 0x7fe1},
        {0x3f808000, 0x3f80}, /* 1 + 2^-8: tie, down to even */
        {0x3f818000, 0x3f82}, /* 1 + 3 * 2^-8: tie, up to even */
        {0x7f7fffff, 0x7f80}, /* FLT_MAX rounds to inf */
        {0x00008000, 0x0000}, /* subnormal tie, down to even (0) */
        {0x00018000, 0x0002}};
    for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
        uint16_t got = cg_f32_to_bf16(cg_f32_from_bits(t[i].x));
        cr_assert_eq(got, t[i].want, "0x%08x -> 0x%04x want 0x%04x", t[i].x,
                     got, t[i].want);
    }
}

Test(half, f16_sum_kernel_rounds_ties_to_even_and_overflows_to_inf)
{
    uint16_t a[4] = {0x3c00, 0x3c01, 0x7bff, 0x0001};
    const uint16_t b[4] = {0x1000, 0x1000, 0x4c00, 0x0001};
    /* 1 + 2^-11 -> 1; (1 + 2^-10) + 2^-11 -> 1 + 2^-9; 65504 + 16 = 65520
     * -> inf; 2^-24 + 2^-24 = 2^-23 (subnormals add exactly) */
    const uint16_t want[4] = {0x3c00, 0x3c02, 0x7c00, 0x0002};
    cg_reduce(a, b, 4, CG_DTYPE_F16, CG_OP_SUM);
    for (int i = 0; i < 4; i++)
        cr_assert_eq(a[i], want[i], "element %d got 0x%04x want 0x%04x", i,
                     a[i], want[i]);
}

Test(half, min_max_propagate_nan_and_store_it_quiet)
{
    /* f16: signalling NaN 0x7c01 first or second; bf16: 0x7f81 */
    uint16_t h[4] = {0x7c01, 0x3c00, 0x7c01, 0x3c00};
    const uint16_t hb[4] = {0x3c00, 0x7d00, 0x3c00, 0xfd00};
    cg_reduce(h, hb, 2, CG_DTYPE_F16, CG_OP_MAX);
    cg_reduce(h + 2, hb + 2, 2, CG_DTYPE_F16, CG_OP_MIN);
    const uint16_t hw[4] = {0x7e01, 0x7f00, 0x7e01, 0xff00};
    for (int i = 0; i < 4; i++)
        cr_assert_eq(h[i], hw[i], "f16 %d got 0x%04x want 0x%04x", i, h[i],
                     hw[i]);
    uint16_t b[2] = {0x7f81, 0x3f80};
    const uint16_t bb[2] = {0x3f80, 0xff81};
    cg_reduce(b, bb, 2, CG_DTYPE_BF16, CG_OP_MAX);
    cr_assert_eq(b[0], 0x7fc1, "bf16 got 0x%04x", b[0]);
    cr_assert_eq(b[1], 0xffc1, "bf16 got 0x%04x", b[1]);
}

/* Bits of a quiet NaN in the format (exponent all ones, quiet bit set) */
static int is_qnan16(const fmt_t *f, uint16_t h)
{
    return is_nan16(f, h) && (h & f->qbit);
}

/* got is want, or both NaN and got quiet: IEEE 754 leaves open which
 * payload survives when both operands are NaN. */
static void check_bits(const fmt_t *f, const char *what, uint16_t a,
                       uint16_t b, uint16_t got, uint16_t want)
{
    if (is_nan16(f, want))
        REF_ASSERT(is_qnan16(f, got), "%s 0x%04x %s 0x%04x got 0x%04x, "
                   "want a quiet NaN", f->name, a, what, b, got);
    else
        REF_ASSERT_EQ(got, want, "%s 0x%04x %s 0x%04x got 0x%04x want "
                      "0x%04x", f->name, a, what, b, got, want);
}

/* The kernels (a vector path where the CPU has it, 8 or 16 at a time, and
 * the portable loop for the tail) equal core/reduce/half.h's conversions bit for bit
 * for every pattern a against a spread of b, as sum, prod and scale. */
static void check_kernels_vs_portable(const fmt_t *f, cg_dtype_t dt,
                                      const uint16_t *bs, size_t nb)
{
    enum { N = 65536 };
    uint16_t *a = malloc(2 * N), *b = malloc(2 * N), *s = malloc(2 * N);
    uint16_t *p = malloc(2 * N), *c = malloc(2 * N);
    for (size_t k = 0; k < nb; k++) {
        for (uint32_t i = 0; i < N; i++)
            a[i] = (uint16_t)i, b[i] = bs[k];
        cg_reduce3(s, a, b, N, dt, CG_OP_SUM);
        cg_reduce3(p, a, b, N, dt, CG_OP_PROD);
        double factor = f->widen(bs[k]);
        cg_scale_copy(c, a, N, dt, factor);
        for (uint32_t i = 0; i < N; i++) {
            float fa = f->widen(a[i]), fb = f->widen(b[i]);
            check_bits(f, "+", a[i], b[i], s[i], f->narrow(fa + fb));
            check_bits(f, "*", a[i], b[i], p[i], f->narrow(fa * fb));
            /* a factor of exactly 1 copies the bits unchanged */
            if (factor == 1.0)
                REF_ASSERT_EQ(c[i], a[i], "%s scale by 1 changed 0x%04x to "
                              "0x%04x", f->name, a[i], c[i]);
            else
                check_bits(f, "scaled by", a[i], b[i], c[i],
                           f->narrow(fa * (float)factor));
        }
    }
    free(a), free(b), free(s), free(p), free(c);
}

Test(half, f16_kernels_equal_portable_conversions_for_all_patterns)
{
    static const uint16_t bs[] = {0x0000, 0x8000, 0x0001, 0x03ff, 0x0400,
                                  0x3c00, 0xbc01, 0x7bff, 0x7c00, 0xfc00,
                                  0x7c01, 0x7e00, 0x1000, 0x5555, 0xc8a7};
    check_kernels_vs_portable(&f16, CG_DTYPE_F16, bs, sizeof(bs) / 2);
}

Test(half, bf16_kernels_equal_portable_conversions_for_all_patterns)
{
    static const uint16_t bs[] = {0x0000, 0x8000, 0x0001, 0x007f, 0x0080,
                                  0x3f80, 0xbf81, 0x7f7f, 0x7f80, 0xff80,
                                  0x7f81, 0x7fc0, 0x3b80, 0x5555, 0xc8a7};
    check_kernels_vs_portable(&bf16, CG_DTYPE_BF16, bs, sizeof(bs) / 2);
}
