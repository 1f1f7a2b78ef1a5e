/* SPDX-License-Identifier: Apache-2.0 */
/* Units for core/reduce/reduce.c and the kernels: every dtype x op against the
 * independent reference (tests/core/reduce/test_reduce_ref.h) on odd counts, at
 * aligned and unaligned addresses, in place and out of place, with guard
 * bytes around each buffer; the validity check; names and sizes. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "core/reduce/reduce.h"
#include "tests/core/reduce/test_reduce_ref.h"

#define GUARD 64
#define FILLER 0xa5

static const size_t counts[] = {0, 1, 7, 1023, 4099};
/* byte offsets of (inout or a, in or b, out): aligned and unaligned */
static const size_t offsets[][3] = {{0, 0, 0}, {1, 3, 5}, {4, 2, 7}};

typedef struct {
    unsigned char *base;
    void *p;
    size_t off, bytes;
} tbuf_t;

static void *tbuf_alloc(tbuf_t *b, size_t n, cg_dtype_t dt, size_t off)
{
    b->off = off;
    b->bytes = n * cg_dtype_size(dt);
    b->base = malloc(off + b->bytes + GUARD);
    cr_assert_not_null(b->base);
    memset(b->base, FILLER, off + b->bytes + GUARD);
    b->p = b->base + off;
    return b->p;
}

/* Asserts no byte before or after the buffer's elements changed. */
static void tbuf_free(tbuf_t *b)
{
    for (size_t i = 0; i < b->off + b->bytes + GUARD; i++) {
        if (i >= b->off && i < b->off + b->bytes)
            continue;
        REF_ASSERT_EQ(b->base[i], FILLER, "guard byte %zd changed: 0x%02x",
                      (ssize_t)i - (ssize_t)b->off, b->base[i]);
    }
    free(b->base);
}

/* One case: kernel vs reference; with3 uses cg_reduce3 out of place. */
static void check_case(cg_dtype_t dt, cg_redop_t op, size_t n,
                       const size_t off[3], int with3, uint64_t seed)
{
    tbuf_t a, b, out, want, a0;
    void *pa = tbuf_alloc(&a, n, dt, off[0]);
    void *pb = tbuf_alloc(&b, n, dt, off[1]);
    void *po = tbuf_alloc(&out, n, dt, off[2]);
    void *pw = tbuf_alloc(&want, n, dt, 0);
    void *pa0 = tbuf_alloc(&a0, n, dt, 0);
    ref_fill(pa, n, dt, &seed);
    ref_fill(pb, n, dt, &seed);
    memcpy(pa0, pa, a.bytes);
    ref_reduce(pw, pa, pb, n, dt, op);
    if (with3)
        cg_reduce3(po, pa, pb, n, dt, op);
    else
        cg_reduce(pa, pb, n, dt, op);
    void *got = with3 ? po : pa;
    size_t i = ref_mismatch(got, pw, n, dt);
    REF_ASSERT_EQ(i, n, "%s %s n %zu offsets %zu/%zu/%zu%s: element %zu got "
                  "0x%llx want 0x%llx (a 0x%llx b 0x%llx)", cg_dtype_name(dt),
                  cg_redop_name(op), n, off[0], off[1], off[2],
                  with3 ? " reduce3" : "", i,
                  (unsigned long long)ref_getu(got, i, dt),
                  (unsigned long long)ref_getu(pw, i, dt),
                  (unsigned long long)ref_getu(pa0, i, dt),
                  (unsigned long long)ref_getu(pb, i, dt));
    if (with3) /* inputs untouched */
        cr_assert_eq(memcmp(pa, pa0, a.bytes), 0, "reduce3 changed a");
    tbuf_free(&a), tbuf_free(&b), tbuf_free(&out);
    tbuf_free(&want), tbuf_free(&a0);
}

/* Every op (average reduces as sum) x count x offsets of one dtype. */
static void check_dtype(cg_dtype_t dt, int with3)
{
    for (int op = 0; op < CG_OP_COUNT; op++) {
        if (op == CG_OP_ADASUM)
            continue;
        for (size_t c = 0; c < sizeof(counts) / sizeof(counts[0]); c++)
            for (size_t o = 0; o < sizeof(offsets) / sizeof(offsets[0]); o++)
                check_case(dt, (cg_redop_t)op, counts[c], offsets[o], with3,
                           0x9e3779b97f4a7c15ull * (c + 1) + o + 7 * op);
    }
}

Test(reduce, integers_match_wide_reference)
{
    const cg_dtype_t dts[] = {CG_DTYPE_I8,  CG_DTYPE_U8,  CG_DTYPE_I16,
                              CG_DTYPE_U16, CG_DTYPE_I32, CG_DTYPE_U32,
                              CG_DTYPE_I64, CG_DTYPE_U64};
    for (size_t i = 0; i < sizeof(dts) / sizeof(dts[0]); i++)
        check_dtype(dts[i], 0);
}

Test(reduce, f32_f64_match_double_reference)
{
    check_dtype(CG_DTYPE_F32, 0);
    check_dtype(CG_DTYPE_F64, 0);
}

Test(reduce, f16_bf16_match_double_reference)
{
    check_dtype(CG_DTYPE_F16, 0);
    check_dtype(CG_DTYPE_BF16, 0);
}

Test(reduce, reduce3_out_of_place_matches_reference_every_dtype)
{
    for (int dt = 0; dt < CG_DTYPE_COUNT; dt++)
        check_dtype((cg_dtype_t)dt, 1);
}

Test(reduce, reduce3_with_out_equal_a_is_in_place)
{
    int32_t a[5] = {1, -2, 3, INT32_MAX, 0}, b[5] = {10, 20, -30, 1, 0};
    const int32_t want[5] = {11, 18, -27, INT32_MIN, 0};
    cg_reduce3(a, a, b, 5, CG_DTYPE_I32, CG_OP_SUM);
    for (int i = 0; i < 5; i++)
        cr_assert_eq(a[i], want[i], "element %d got %d want %d", i, a[i],
                     want[i]);
}

Test(reduce, count_zero_reads_and_writes_nothing)
{
    /* NULL buffers: a kernel that touched memory would crash */
    for (int dt = 0; dt < CG_DTYPE_COUNT; dt++) {
        cg_reduce(NULL, NULL, 0, (cg_dtype_t)dt, CG_OP_SUM);
        cg_reduce3(NULL, NULL, NULL, 0, (cg_dtype_t)dt, CG_OP_MAX);
        cg_scale(NULL, 0, (cg_dtype_t)dt, 3.0);
        cg_scale_copy(NULL, NULL, 0, (cg_dtype_t)dt, 3.0);
        cg_divide(NULL, 0, (cg_dtype_t)dt, 3);
    }
}

Test(reduce, check_accepts_every_dtype_with_every_implemented_op)
{
    for (int dt = 0; dt < CG_DTYPE_COUNT; dt++)
        for (int op = 0; op < CG_OP_COUNT; op++) {
            if (op == CG_OP_ADASUM)
                continue;
            cg_status_t st = cg_reduce_check((cg_dtype_t)dt, (cg_redop_t)op);
            cr_assert_eq(st, CG_OK, "%s %s: %s", cg_dtype_name(dt),
                         cg_redop_name(op), cg_last_error());
        }
}

Test(reduce, check_rejects_adasum_as_unsupported_naming_dtype)
{
    cg_status_t st = cg_reduce_check(CG_DTYPE_BF16, CG_OP_ADASUM);
    cr_assert_eq(st, CG_ERR_UNSUPPORTED, "got %s", cg_status_name(st));
    cr_assert(strstr(cg_last_error(), "adasum") != NULL, "%s",
              cg_last_error());
    cr_assert(strstr(cg_last_error(), "bf16") != NULL, "%s", cg_last_error());
    cr_assert(strstr(cg_last_error(), "average") != NULL, "%s",
              cg_last_error());
}

Test(reduce, check_rejects_out_of_range_dtype_and_op)
{
    cg_status_t st = cg_reduce_check((cg_dtype_t)42, CG_OP_SUM);
    cr_assert_eq(st, CG_ERR_INVALID_PARAM, "got %s", cg_status_name(st));
    cr_assert(strstr(cg_last_error(), "dtype 42") != NULL, "%s",
              cg_last_error());
    cr_assert(strstr(cg_last_error(), "bf16") != NULL, "%s", cg_last_error());
    st = cg_reduce_check((cg_dtype_t)-1, CG_OP_SUM);
    cr_assert_eq(st, CG_ERR_INVALID_PARAM, "got %s", cg_status_name(st));
    st = cg_reduce_check(CG_DTYPE_F32, (cg_redop_t)6);
    cr_assert_eq(st, CG_ERR_INVALID_PARAM, "got %s", cg_status_name(st));
    cr_assert(strstr(cg_last_error(), "op 6") != NULL, "%s", cg_last_error());
    cr_assert(strstr(cg_last_error(), "f32") != NULL, "%s", cg_last_error());
}

Test(types, values_sizes_and_names_match_nccl)
{
    /* ncclInt8 0 .. ncclBfloat16 9; ncclSum 0, ncclProd 1, ncclMax 2,
     * ncclMin 3, ncclAvg 4; the 16-bit integers (no NCCL type) after */
    static const struct { cg_dtype_t dt; int v; size_t sz; const char *n; }
        t[] = {{CG_DTYPE_I8, 0, 1, "i8"},   {CG_DTYPE_U8, 1, 1, "u8"},
               {CG_DTYPE_I32, 2, 4, "i32"}, {CG_DTYPE_U32, 3, 4, "u32"},
               {CG_DTYPE_I64, 4, 8, "i64"}, {CG_DTYPE_U64, 5, 8, "u64"},
               {CG_DTYPE_F16, 6, 2, "f16"}, {CG_DTYPE_F32, 7, 4, "f32"},
               {CG_DTYPE_F64, 8, 8, "f64"}, {CG_DTYPE_BF16, 9, 2, "bf16"},
               {CG_DTYPE_I16, 10, 2, "i16"}, {CG_DTYPE_U16, 11, 2, "u16"}};
    for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
        cg_dtype_t back;
        cr_assert_eq((int)t[i].dt, t[i].v, "%s = %d", t[i].n, (int)t[i].dt);
        cr_assert_eq(cg_dtype_size(t[i].dt), t[i].sz, "%s size %zu", t[i].n,
                     cg_dtype_size(t[i].dt));
        cr_assert_str_eq(cg_dtype_name(t[i].dt), t[i].n);
        cr_assert_eq(cg_dtype_by_name(t[i].n, &back), CG_OK);
        cr_assert_eq(back, t[i].dt, "%s -> %d", t[i].n, (int)back);
    }
    cr_assert_eq((int)CG_OP_SUM + CG_OP_PROD + CG_OP_MAX + CG_OP_MIN, 6);
    cr_assert_eq((int)CG_OP_AVG, 4, "avg %d", (int)CG_OP_AVG);
    cr_assert_eq((int)CG_DTYPE_COUNT, 12, "count %d", (int)CG_DTYPE_COUNT);
    cr_assert_eq(cg_dtype_size((cg_dtype_t)12), 0u, "size of 12");
    cr_assert_str_eq(cg_dtype_name((cg_dtype_t)-3), "unknown");
}

Test(types, op_names_round_trip_and_unknown_names_list_choices)
{
    for (int op = 0; op < CG_OP_COUNT; op++) {
        cg_redop_t back;
        cr_assert_eq(cg_redop_by_name(cg_redop_name(op), &back), CG_OK);
        cr_assert_eq((int)back, op, "%s -> %d", cg_redop_name(op), back);
    }
    cr_assert_str_eq(cg_redop_name(CG_OP_AVG), "average");
    cr_assert_str_eq(cg_redop_name((cg_redop_t)99), "unknown");
    cg_redop_t op = CG_OP_MIN;
    cr_assert_eq(cg_redop_by_name("mean", &op), CG_ERR_INVALID_PARAM);
    cr_assert_eq(op, CG_OP_MIN, "output written on failure: %d", op);
    cr_assert(strstr(cg_last_error(), "'mean'") != NULL, "%s",
              cg_last_error());
    cr_assert(strstr(cg_last_error(), "average") != NULL, "%s",
              cg_last_error());
    cg_dtype_t dt = CG_DTYPE_U8;
    cr_assert_eq(cg_dtype_by_name("float32", &dt), CG_ERR_INVALID_PARAM);
    cr_assert_eq(dt, CG_DTYPE_U8, "output written on failure: %d", dt);
    cr_assert(strstr(cg_last_error(), "bf16") != NULL, "%s", cg_last_error());
}
