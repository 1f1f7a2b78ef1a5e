/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Host reductions: dtype/op names and sizes, the validity check, and the
 * dispatch of cg_reduce/cg_reduce3 to the per-dtype kernel tables (one
 * table lookup per call, never per element). Part of core/; calls only
 * core/base (error.h).
 */
#include "core/reduce/reduce.h"

#include <assert.h>
#include <stdint.h>
#include <string.h>

#include "core/base/error.h"
#include "core/reduce/reduce_impl.h"

static const cg__reduce_kernels_t *const cg__reduce_kernels[CG_DTYPE_COUNT] = {
    [CG_DTYPE_I8] = &cg__reduce_kernels_i8,
    [CG_DTYPE_U8] = &cg__reduce_kernels_u8,
    [CG_DTYPE_I32] = &cg__reduce_kernels_i32,
    [CG_DTYPE_U32] = &cg__reduce_kernels_u32,
    [CG_DTYPE_I64] = &cg__reduce_kernels_i64,
    [CG_DTYPE_U64] = &cg__reduce_kernels_u64,
    [CG_DTYPE_F16] = &cg__reduce_kernels_f16,
    [CG_DTYPE_F32] = &cg__reduce_kernels_f32,
    [CG_DTYPE_F64] = &cg__reduce_kernels_f64,
    [CG_DTYPE_BF16] = &cg__reduce_kernels_bf16,
    [CG_DTYPE_I16] = &cg__reduce_kernels_i16,
    [CG_DTYPE_U16] = &cg__reduce_kernels_u16,
};

#define CG__DTYPE_SIZE(e, v, bytes, name) [e] = bytes,
static const size_t cg__dtype_sizes[CG_DTYPE_COUNT] = {
    CG_DTYPE_MAP(CG__DTYPE_SIZE)};
#undef CG__DTYPE_SIZE

#define CG__DTYPE_NAME(e, v, bytes, name) [e] = name,
static const char *const cg__dtype_names[CG_DTYPE_COUNT] = {
    CG_DTYPE_MAP(CG__DTYPE_NAME)};
#undef CG__DTYPE_NAME

#define CG__REDOP_NAME(e, v, name) [e] = name,
static const char *const cg__redop_names[CG_OP_COUNT] = {
    CG_REDOP_MAP(CG__REDOP_NAME)};
#undef CG__REDOP_NAME

/* "i8 u8 ... bf16" and "sum prod ... adasum", built at compile time */
#define CG__DTYPE_WORD(e, v, bytes, name) " " name
#define CG__REDOP_WORD(e, v, name) " " name
static const char cg__dtype_list[] = CG_DTYPE_MAP(CG__DTYPE_WORD);
static const char cg__redop_list[] = CG_REDOP_MAP(CG__REDOP_WORD);
#undef CG__DTYPE_WORD
#undef CG__REDOP_WORD

static int cg__dtype_valid(cg_dtype_t dt)
{
    return (int)dt >= 0 && (int)dt < CG_DTYPE_COUNT;
}

static int cg__redop_valid(cg_redop_t op)
{
    return (int)op >= 0 && (int)op < CG_OP_COUNT;
}

static int cg__dtype_integer(cg_dtype_t dt)
{
    return dt == CG_DTYPE_I8 || dt == CG_DTYPE_U8 || dt == CG_DTYPE_I16 ||
           dt == CG_DTYPE_U16 || dt == CG_DTYPE_I32 || dt == CG_DTYPE_U32 ||
           dt == CG_DTYPE_I64 || dt == CG_DTYPE_U64;
}

size_t cg_dtype_size(cg_dtype_t dt)
{
    return cg__dtype_valid(dt) ? cg__dtype_sizes[dt] : 0;
}

const char *cg_dtype_name(cg_dtype_t dt)
{
    return cg__dtype_valid(dt) ? cg__dtype_names[dt] : "unknown";
}

const char *cg_redop_name(cg_redop_t op)
{
    if (op == CG_OP_BAND)
        return "band";
    return cg__redop_valid(op) ? cg__redop_names[op] : "unknown";
}

cg_status_t cg_dtype_by_name(const char *name, cg_dtype_t *dt_p)
{
    for (int i = 0; name != NULL && i < CG_DTYPE_COUNT; i++) {
        if (strcmp(name, cg__dtype_names[i]) == 0) {
            *dt_p = (cg_dtype_t)i;
            return CG_OK;
        }
    }
    return cg_error_set(CG_ERR_INVALID_PARAM,
                        "unknown dtype '%s' (accepted:%s)",
                        name != NULL ? name : "(null)", cg__dtype_list);
}

cg_status_t cg_redop_by_name(const char *name, cg_redop_t *op_p)
{
    for (int i = 0; name != NULL && i < CG_OP_COUNT; i++) {
        if (strcmp(name, cg__redop_names[i]) == 0) {
            *op_p = (cg_redop_t)i;
            return CG_OK;
        }
    }
    return cg_error_set(CG_ERR_INVALID_PARAM,
                        "unknown reduction op '%s' (accepted:%s)",
                        name != NULL ? name : "(null)", cg__redop_list);
}

cg_status_t cg_reduce_check(cg_dtype_t dt, cg_redop_t op)
{
    if (!cg__dtype_valid(dt)) {
        return cg_error_set(CG_ERR_INVALID_PARAM,
                            "unknown dtype %d (valid 0..%d:%s)", (int)dt,
                            CG_DTYPE_COUNT - 1, cg__dtype_list);
    }
    if (op == CG_OP_BAND && !cg__dtype_integer(dt)) {
        return cg_error_set(CG_ERR_INVALID_PARAM,
                            "bitwise and (internal op %d) on dtype %s: "
                            "integer dtypes only", (int)op,
                            cg__dtype_names[dt]);
    }
    if (op == CG_OP_BAND)
        return CG_OK;
    if (!cg__redop_valid(op)) {
        return cg_error_set(CG_ERR_INVALID_PARAM,
                            "unknown reduction op %d for dtype %s (valid "
                            "0..%d:%s)",
                            (int)op, cg__dtype_names[dt], CG_OP_COUNT - 1,
                            cg__redop_list);
    }
    if (op == CG_OP_ADASUM) {
        return cg_error_set(CG_ERR_UNSUPPORTED,
                            "reduction op adasum on dtype %s is not "
                            "implemented by the host kernels; use sum, "
                            "average, min, max or prod",
                            cg__dtype_names[dt]);
    }
    return CG_OK;
}


/* The kernel index of op: average reduces as sum. */
static int cg__kop(cg_redop_t op)
{
    assert(cg__redop_valid(op) && op != CG_OP_ADASUM);
    return op == CG_OP_AVG ? CG_OP_SUM : (int)op;
}

#ifndef NDEBUG /* only asserts use it (clang flags it unused otherwise) */
/* True if [p, p + n) and [q, q + n) share a byte. */
static inline int cg__overlap(const void *p, const void *q, size_t n)
{
    uintptr_t a = (uintptr_t)p, b = (uintptr_t)q;
    return a < b + n && b < a + n;
}
#endif

void cg_reduce(void *inout, const void *in, size_t count, cg_dtype_t dt,
               cg_redop_t op)
{
    assert(cg__dtype_valid(dt));
    if (count == 0)
        return;
    assert(!cg__overlap(inout, in, count * cg__dtype_sizes[dt]));
    if (op == CG_OP_BAND) {
        cg__reduce_band2(inout, in, count * cg__dtype_sizes[dt]);
        return;
    }
    cg__reduce_kernels[dt]->r2[cg__kop(op)](inout, in, count);
}

void cg_reduce3(void *out, const void *a, const void *b, size_t count,
                cg_dtype_t dt, cg_redop_t op)
{
    assert(cg__dtype_valid(dt));
    if (count == 0)
        return;
    if (out == a) {
        cg_reduce(out, b, count, dt, op);
        return;
    }
    assert(!cg__overlap(out, a, count * cg__dtype_sizes[dt]) &&
           !cg__overlap(out, b, count * cg__dtype_sizes[dt]));
    if (op == CG_OP_BAND) {
        cg__reduce_band3(out, a, b, count * cg__dtype_sizes[dt]);
        return;
    }
    cg__reduce_kernels[dt]->r3[cg__kop(op)](out, a, b, count);
}
