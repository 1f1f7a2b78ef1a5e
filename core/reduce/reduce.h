/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Host reduction kernels: elementwise reduce, scale (prescale/postscale) and
 * the average's final division, for every cg_dtype_t and cg_redop_t. Part of
 * core/; calls only core/base. Stateless and thread-safe. Pointers need no
 * alignment (any byte address works); counts are in elements.
 *
 * Rules (deterministic by construction: elementwise, no reassociation, no
 * FMA; the x86 AVX2/F16C paths give the same bits as the portable loops):
 * - sum/prod of integers wrap (two's complement), computed in unsigned
 *   arithmetic. min/max compare in the type (signed or unsigned).
 * - f16/bf16 are computed in f32 and rounded to nearest even on store; for
 *   sum and prod this equals the correctly rounded f16/bf16 result (f32 has
 *   at least 2p+2 bits). NaN stays NaN and is stored quiet; overflow gives
 *   inf; subnormals are exact.
 * - min/max of floats propagate NaN: if either operand is NaN the result is
 *   NaN (the first operand's, inout's / a's, when both are; f16/bf16 make
 *   it quiet, f32/f64 return it as it is). -0 and +0 compare equal; then
 *   the second operand (in / b) is kept. For sum/prod, which NaN's payload
 *   survives when both operands are NaN is left open (IEEE 754).
 * - average reduces as sum; cg_reduce_post() finishes it:
 *     floats: multiply by postscale / nranks (computed in double; f32 and
 *     f64 then multiply in double and round once, f16/bf16 multiply by
 *     that factor rounded to float, in f32);
 *     integers: divide by nranks truncating toward zero (as NCCL's ncclAvg
 *     does for integer types), then apply postscale if it is not 1.
 * - scaling (cg_scale, prescale, postscale): a factor of exactly 1 leaves the
 *   data untouched (so 64-bit integers stay exact). Otherwise
 *     f64: x * factor; f32: x * (float)factor in f32;
 *     f16/bf16: x * (float)factor in f32, rounded to nearest even
 *     (Horovod's CPU ScaleBuffer, bit for bit: it scales f32 and f16 by
 *     the factor rounded to float);
 *     integers: (double)x * factor converted back truncating toward zero,
 *     as Horovod's CPU ScaleBuffer does (C's double -> integer conversion),
 *     bit for bit, except where C leaves that conversion undefined: a
 *     product beyond the type's range saturates to it and NaN gives 0
 *     (values beyond 2^53 lose precision in the double product, as in
 *     Horovod).
 * - the FP environment is the default one (round to nearest, no
 *   flush-to-zero); a caller that changes MXCSR changes the results.
 */
#ifndef CG_CORE_REDUCE_H
#define CG_CORE_REDUCE_H

#include <stddef.h>

#include "collguard/status.h"
#include "collguard/types.h"

/* Internal op, outside cg_redop_t's public range and never in types.h:
 * bitwise AND, for the integer dtypes only (the Horovod shim's
 * negotiation ANDs bit vectors with it). cg_allreduce accepts it. */
#define CG_OP_BAND ((cg_redop_t)64)

/* CG_OK if the host kernels implement op on dt; CG_ERR_INVALID_PARAM for a
 * value outside the enums, CG_ERR_UNSUPPORTED for adasum; cg_last_error()
 * names the dtype, the op and what is accepted. */
cg_status_t cg_reduce_check(cg_dtype_t dt, cg_redop_t op);

/* inout[i] = inout[i] op in[i] for i < count; average acts as sum.
 * inout and in must not overlap. Precondition: cg_reduce_check(dt, op). */
void cg_reduce(void *inout, const void *in, size_t count, cg_dtype_t dt,
               cg_redop_t op);

/* out[i] = a[i] op b[i]. out may be a itself (then this is cg_reduce, and
 * b must not overlap it); otherwise out must not overlap a or b (a and b
 * may overlap each other). Precondition as cg_reduce. */
void cg_reduce3(void *out, const void *a, const void *b, size_t count,
                cg_dtype_t dt, cg_redop_t op);

/* buf[i] = buf[i] * factor, by the scaling rule above. dt must be valid. */
void cg_scale(void *buf, size_t count, cg_dtype_t dt, double factor);

/* out[i] = in[i] * factor (a copy when factor is 1); no overlap. Used for
 * prescale while packing a tensor into the fusion buffer. */
void cg_scale_copy(void *out, const void *in, size_t count, cg_dtype_t dt,
                   double factor);

/* Integers: buf[i] /= divisor, truncating toward zero; floats: buf[i] *=
 * 1 / divisor. divisor >= 1. */
void cg_divide(void *buf, size_t count, cg_dtype_t dt, unsigned divisor);

/* The step after the last reduction: average's division by nranks and the
 * postscale factor, by the rules above. CG_ERR_INVALID_PARAM if nranks < 1
 * or (dt, op) fails cg_reduce_check; buf untouched then. */
cg_status_t cg_reduce_post(void *buf, size_t count, cg_dtype_t dt,
                           cg_redop_t op, int nranks, double postscale);

#endif
