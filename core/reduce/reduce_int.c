/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Reduction kernels for the integer dtypes (i8 u8 i16 u16 i32 u32 i64
 * u64). Sum and
 * prod wrap (two's complement): they run in the unsigned type, where
 * overflow is defined, and convert back (modulo, as gcc defines it). The
 * internal bitwise AND (CG_OP_BAND) works on bytes, whatever the integer
 * dtype. Part of core/; calls nothing.
 */
#include "core/reduce/reduce_impl.h"

#define CG__INT_KERNELS(sfx, T, U)                                            \
    CG__REDUCE_KERNELS(sfx, T, (T)(U)((U)a + (U)b), (T)(U)((U)a * (U)b),      \
                       a > b ? a : b, a < b ? a : b)

/* u8 and i8 promote to int before + and *: 255 * 255 fits, no overflow */
CG__INT_KERNELS(i8, cg__i8u_t, uint8_t)
CG__INT_KERNELS(u8, cg__u8u_t, uint8_t)
/* 16 bits compute in unsigned int: uint16_t would promote to int, where
 * 65535 * 65535 overflows */
CG__INT_KERNELS(i16, cg__i16u_t, unsigned)
CG__INT_KERNELS(u16, cg__u16u_t, unsigned)
CG__INT_KERNELS(i32, cg__i32u_t, uint32_t)
CG__INT_KERNELS(u32, cg__u32u_t, uint32_t)
CG__INT_KERNELS(i64, cg__i64u_t, uint64_t)
CG__INT_KERNELS(u64, cg__u64u_t, uint64_t)

CG__CLONES void cg__reduce_band2(void *restrict inout_v,
                                 const void *restrict in_v, size_t bytes)
{
    uint8_t *restrict io = inout_v;
    const uint8_t *restrict in = in_v;
    for (size_t i = 0; i < bytes; i++)
        io[i] &= in[i];
}

CG__CLONES void cg__reduce_band3(void *restrict out_v,
                                 const void *restrict a_v,
                                 const void *restrict b_v, size_t bytes)
{
    uint8_t *restrict out = out_v;
    const uint8_t *restrict a = a_v;
    const uint8_t *restrict b = b_v;
    for (size_t i = 0; i < bytes; i++)
        out[i] = a[i] & b[i];
}
