/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Reduction kernels for f32 and f64: IEEE arithmetic in the type, one
 * rounding per element, no reassociation. min/max propagate NaN (the
 * first operand's NaN when both are); -0 and +0 compare equal, the second
 * operand is kept then. Part of core/; calls nothing.
 */
#include "core/reduce/reduce_impl.h"

/* a != a is true only for NaN; written so gcc if-converts it to a select */
#define CG__FLOAT_KERNELS(sfx, T)                                             \
    CG__REDUCE_KERNELS(sfx, T, a + b, a * b, (a > b || a != a) ? a : b,       \
                       (a < b || a != a) ? a : b)

CG__FLOAT_KERNELS(f32, cg__f32u_t)
CG__FLOAT_KERNELS(f64, cg__f64u_t)
