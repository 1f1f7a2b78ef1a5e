/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Public element types and reduction operations of collguard's collectives.
 * Numeric values follow NCCL's ncclDataType_t / ncclRedOp_t, so the NCCL
 * backend passes them through unchanged; frontends (Horovod, PyTorch) map
 * their own types onto these. Thread-safe: every function here.
 */
#ifndef COLLGUARD_TYPES_H
#define COLLGUARD_TYPES_H

#include <stddef.h>

#include "collguard/api.h"
#include "collguard/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* X(enum, value, bytes, name) -- values 0..9 as NCCL's ncclInt8 ..
 * ncclBfloat16; the 16-bit integers (Horovod's HOROVOD_INT16/UINT16) have
 * no NCCL counterpart and take collguard's own values after them (the
 * NCCL backend refuses them, as Horovod's NCCL operations do). */
#define CG_DTYPE_MAP(X)                                                       \
    X(CG_DTYPE_I8, 0, 1, "i8")                                                \
    X(CG_DTYPE_U8, 1, 1, "u8")                                                \
    X(CG_DTYPE_I32, 2, 4, "i32")                                              \
    X(CG_DTYPE_U32, 3, 4, "u32")                                              \
    X(CG_DTYPE_I64, 4, 8, "i64")                                              \
    X(CG_DTYPE_U64, 5, 8, "u64")                                              \
    X(CG_DTYPE_F16, 6, 2, "f16")                                              \
    X(CG_DTYPE_F32, 7, 4, "f32")                                              \
    X(CG_DTYPE_F64, 8, 8, "f64")                                              \
    X(CG_DTYPE_BF16, 9, 2, "bf16")                                            \
    X(CG_DTYPE_I16, 10, 2, "i16")                                             \
    X(CG_DTYPE_U16, 11, 2, "u16")

typedef enum {
#define CG__DTYPE_ENUM(e, v, bytes, name) e = v,
    CG_DTYPE_MAP(CG__DTYPE_ENUM)
#undef CG__DTYPE_ENUM
    CG_DTYPE_COUNT = 12
} cg_dtype_t;

/* X(enum, value, name) -- values as NCCL's ncclSum .. ncclAvg; adasum has no
 * NCCL counterpart and is reserved (rejected by the host kernels). */
#define CG_REDOP_MAP(X)                                                       \
    X(CG_OP_SUM, 0, "sum")                                                    \
    X(CG_OP_PROD, 1, "prod")                                                  \
    X(CG_OP_MAX, 2, "max")                                                    \
    X(CG_OP_MIN, 3, "min")                                                    \
    X(CG_OP_AVG, 4, "average")                                                \
    X(CG_OP_ADASUM, 5, "adasum")

typedef enum {
#define CG__REDOP_ENUM(e, v, name) e = v,
    CG_REDOP_MAP(CG__REDOP_ENUM)
#undef CG__REDOP_ENUM
    CG_OP_COUNT = 6
} cg_redop_t;

/* Bytes per element; 0 for a value outside cg_dtype_t. */
CG_API size_t cg_dtype_size(cg_dtype_t dt);
/* "f32", "bf16", ...; "unknown" for a value outside cg_dtype_t. */
CG_API const char *cg_dtype_name(cg_dtype_t dt);
/* "sum", "average", ...; "unknown" for a value outside cg_redop_t. */
CG_API const char *cg_redop_name(cg_redop_t op);
/* Inverse of the two above (exact, lower-case names). CG_ERR_INVALID_PARAM
 * with cg_last_error() listing the accepted names; *_p untouched then. */
CG_API cg_status_t cg_dtype_by_name(const char *name, cg_dtype_t *dt_p);
CG_API cg_status_t cg_redop_by_name(const char *name, cg_redop_t *op_p);

#ifdef __cplusplus
}
#endif
#endif
