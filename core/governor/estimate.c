/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The memory estimate (include/collguard/estimate.h): bytes per rank of
 * data-parallel training from a parameter count, dtype, optimizer,
 * mixed-precision mode, rank count and backend, against one device's
 * free memory, and the largest fusion threshold and NCCL_BUFFSIZE that
 * fit. Pure arithmetic. Layer: core/governor; calls core/base only.
 */
#include "collguard/estimate.h"

#include <stdbool.h>
#include <string.h>

#include "core/base/error.h"

#define CG__EST_NAME(e, s) s,
static const char *const cg__optimizers[] = {
    CG_EST_OPTIMIZER_MAP(CG__EST_NAME) NULL};
static const char *const cg__mixed[] = {CG_EST_MIXED_MAP(CG__EST_NAME) NULL};
static const char *const cg__backends[] = {
    CG_EST_BACKEND_MAP(CG__EST_NAME) NULL};
#undef CG__EST_NAME

static int cg__lookup(const char *const *names, const char *name)
{
    for (int i = 0; name != NULL && names[i] != NULL; i++)
        if (strcmp(names[i], name) == 0)
            return i;
    return -1;
}

int cg_est_optimizer_parse(const char *name)
{
    return cg__lookup(cg__optimizers, name);
}

int cg_est_mixed_parse(const char *name)
{
    return cg__lookup(cg__mixed, name);
}

int cg_est_backend_parse(const char *name)
{
    return cg__lookup(cg__backends, name);
}

static uint64_t cg__pow2floor(uint64_t x)
{
    return x == 0 ? 0 : 1ull << (63 - __builtin_clzll(x));
}

static uint64_t cg__min(uint64_t a, uint64_t b)
{
    return a < b ? a : b;
}

/* Bytes per element of the parameter dtypes a model trains in; 0 for
 * the others. */
static uint64_t cg__float_size(cg_dtype_t dt)
{
    switch (dt) {
    case CG_DTYPE_F16:
    case CG_DTYPE_BF16:
        return 2;
    case CG_DTYPE_F32:
        return 4;
    case CG_DTYPE_F64:
        return 8;
    default:
        return 0;
    }
}

static cg_status_t cg__check(const cg_estimate_params_t *p)
{
    if (p->params == 0)
        return cg_error_set(CG_ERR_INVALID_PARAM, "estimate: the parameter "
                            "count must be > 0");
    if (p->ranks < 1)
        return cg_error_set(CG_ERR_INVALID_PARAM, "estimate: ranks must be "
                            ">= 1 (got %d)", p->ranks);
    if (cg__float_size(p->dtype) == 0)
        return cg_error_set(CG_ERR_INVALID_PARAM, "estimate: dtype must be "
                            "f16, bf16, f32 or f64");
    if ((unsigned)p->optimizer > CG_EST_ADAMW ||
        (unsigned)p->mixed > CG_EST_MIXED_BF16 ||
        (unsigned)p->backend > CG_EST_BACKEND_MPI)
        return cg_error_set(CG_ERR_INVALID_PARAM, "estimate: optimizer, "
                            "mixed-precision mode or backend out of range");
    if (p->mixed != CG_EST_MIXED_NONE && p->dtype != CG_DTYPE_F32)
        return cg_error_set(CG_ERR_INVALID_PARAM, "estimate: mixed precision "
                            "%s keeps fp32 master weights: give the "
                            "parameters' dtype as f32 (got %llu-byte "
                            "elements)", cg__mixed[p->mixed],
                            (unsigned long long)cg__float_size(p->dtype));
    if (p->params > (UINT64_MAX >> 5))
        return cg_error_set(CG_ERR_INVALID_PARAM, "estimate: %llu "
                            "parameters overflow the byte counts",
                            (unsigned long long)p->params);
    return CG_OK;
}

/* Weights, gradients, master weights and optimizer state. */
static void cg__model(const cg_estimate_params_t *p, cg_estimate_t *e)
{
    static const uint64_t states[] = {0, 1, 2, 2}; /* buffers per param */
    uint64_t n = p->params, w;

    if (p->mixed == CG_EST_MIXED_NONE) {
        w = cg__float_size(p->dtype);
        e->param_bytes = n * w;
        e->grad_bytes = n * w;
        e->optimizer_bytes = n * w * states[p->optimizer];
    } else {
        e->param_bytes = n * 2;
        e->grad_bytes = n * 2;
        e->master_bytes = n * 4;
        e->optimizer_bytes = n * 4 * states[p->optimizer];
    }
    e->model_bytes = e->param_bytes + e->grad_bytes + e->master_bytes +
                     e->optimizer_bytes;
}

/* The largest sizes that fit in what the model state leaves. */
static void cg__fit(const cg_estimate_params_t *p, cg_estimate_t *e)
{
    bool nccl = p->backend == CG_EST_BACKEND_NCCL;
    uint64_t avail = p->free_bytes > p->reserve_bytes
                         ? p->free_bytes - p->reserve_bytes
                         : 0;
    uint64_t fixed = e->model_bytes + e->nccl_fixed_bytes;
    uint64_t left = avail > fixed ? avail - fixed : 0, b = 0, f;

    if (nccl && p->ranks > 1) {
        uint64_t room = left > p->fusion_min ? left - p->fusion_min : 0;
        b = cg__min(p->nccl_buffsize,
                    cg__pow2floor(room / CG_EST_NCCL_BUFFERS));
        if (b < p->nccl_buffsize_min)
            b = 0;
        e->nccl_buffsize_fit = b;
        if (b == 0) /* NCCL cannot run below its floor: nothing fits */
            return;
        left -= b * CG_EST_NCCL_BUFFERS;
    } else if (nccl) {
        e->nccl_buffsize_fit = p->nccl_buffsize; /* no peers, no buffers */
    }
    f = cg__min(p->fusion_threshold, cg__pow2floor(left));
    e->fusion_fit = f >= p->fusion_min && f > 0 ? f : 0;
}

cg_status_t cg_estimate(const cg_estimate_params_t *params,
                        cg_estimate_t *est)
{
    const cg_estimate_params_t *p = params;
    cg_estimate_t e;
    cg_status_t st;
    uint64_t avail;

    if (p == NULL || est == NULL)
        return cg_error_set(CG_ERR_INVALID_PARAM, "cg_estimate: NULL "
                            "params or est");
    st = cg__check(p);
    if (st != CG_OK)
        return st;
    memset(&e, 0, sizeof(e));
    cg__model(p, &e);
    e.fusion_bytes = p->fusion_threshold;
    if (p->backend == CG_EST_BACKEND_NCCL) {
        e.nccl_fixed_bytes = CG_EST_NCCL_FIXED_BYTES;
        if (p->ranks > 1)
            e.nccl_buffer_bytes = CG_EST_NCCL_BUFFERS * p->nccl_buffsize;
    } else {
        e.staging_host_bytes = p->fusion_threshold;
    }
    e.device_bytes = e.model_bytes + e.fusion_bytes + e.nccl_buffer_bytes +
                     e.nccl_fixed_bytes;
    avail = p->free_bytes > p->reserve_bytes
                ? p->free_bytes - p->reserve_bytes
                : 0;
    e.headroom_bytes = (int64_t)avail - (int64_t)e.device_bytes;
    e.fits = e.device_bytes <= avail;
    cg__fit(p, &e);
    *est = e;
    return CG_OK;
}
