/* SPDX-License-Identifier: Apache-2.0 */
/* Units for the internal bitwise AND (CG_OP_BAND, core/reduce/reduce.h) that the
 * Horovod shim's negotiation uses on bit vectors: every integer dtype in
 * place and out of place at unaligned addresses, the check that refuses
 * float dtypes, its name, and the post step that leaves it alone. (The
 * allreduce of it across ranks runs in every test_hvd_cache scenario.) */
#include <criterion/criterion.h>
#include <stdint.h>
#include <string.h>

#include "core/reduce/reduce.h"

static const cg_dtype_t ints[] = {CG_DTYPE_I8,  CG_DTYPE_U8,  CG_DTYPE_I16,
                                  CG_DTYPE_U16, CG_DTYPE_I32, CG_DTYPE_U32,
                                  CG_DTYPE_I64, CG_DTYPE_U64};

/* Byte i of a: a pattern; of b: another; a & b is checked byte by byte
 * (AND has no carries, so every integer dtype is the same bytewise). */
static uint8_t pa(size_t i) { return (uint8_t)(i * 37 + 11); }
static uint8_t pb(size_t i) { return (uint8_t)(i * 101 + 200); }

Test(reduce_band, every_integer_dtype_in_place_unaligned)
{
    uint8_t a[8 * 131 + 3], b[8 * 131 + 5];

    for (size_t d = 0; d < sizeof(ints) / sizeof(ints[0]); d++) {
        size_t n = 131, bytes = n * cg_dtype_size(ints[d]);
        cr_assert_eq(cg_reduce_check(ints[d], CG_OP_BAND), CG_OK,
                     "%s: %s", cg_dtype_name(ints[d]), cg_last_error());
        for (size_t i = 0; i < bytes; i++)
            a[3 + i] = pa(i), b[5 + i] = pb(i);
        cg_reduce(a + 3, b + 5, n, ints[d], CG_OP_BAND);
        for (size_t i = 0; i < bytes; i++)
            cr_assert_eq(a[3 + i], pa(i) & pb(i), "%s byte %zu: %#x, want "
                         "%#x", cg_dtype_name(ints[d]), i, a[3 + i],
                         pa(i) & pb(i));
    }
}

Test(reduce_band, out_of_place_leaves_the_inputs)
{
    uint64_t a[9], b[9], out[9];

    for (int i = 0; i < 9; i++)
        a[i] = ~0ull << i, b[i] = 0x0123456789abcdefull >> i;
    cg_reduce3(out, a, b, 9, CG_DTYPE_U64, CG_OP_BAND);
    for (int i = 0; i < 9; i++) {
        cr_assert_eq(out[i], (~0ull << i) & (0x0123456789abcdefull >> i),
                     "word %d: %#llx", i, (unsigned long long)out[i]);
        cr_assert_eq(a[i], ~0ull << i, "a[%d] changed", i);
    }
}

Test(reduce_band, float_dtypes_are_refused)
{
    cg_status_t st = cg_reduce_check(CG_DTYPE_F32, CG_OP_BAND);

    cr_assert_eq(st, CG_ERR_INVALID_PARAM, "got %s", cg_status_string(st));
    cr_assert(strstr(cg_last_error(), "integer dtypes only") != NULL, "%s",
              cg_last_error());
    cr_assert_str_eq(cg_redop_name(CG_OP_BAND), "band");
}

Test(reduce_band, post_step_leaves_the_bits)
{
    uint32_t v[3] = {0xdeadbeefu, 0, 0xffffffffu};

    cr_assert_eq(cg_reduce_post(v, 3, CG_DTYPE_U32, CG_OP_BAND, 4, 1.0),
                 CG_OK, "%s", cg_last_error());
    cr_assert_eq(v[0], 0xdeadbeefu, "got %#x", v[0]);
    cr_assert_eq(v[2], 0xffffffffu, "got %#x", v[2]);
}
