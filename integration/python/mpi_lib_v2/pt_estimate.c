/* SPDX-License-Identifier: Apache-2.0 */
/*
 * collguard_estimate: the memory estimate of collguard-info --estimate
 * (cg_estimate, include/collguard/estimate.h) for collguard.torch's
 * estimate_memory, with the caps and floors of the configuration in the
 * environment (the initialized library's, or a context made for the
 * call). Bad values raise ValueError with the estimator's message.
 * Layer: integration (mpi_lib_v2).
 */
#include "integration/python/mpi_lib_v2/pt.h"

#include <string.h>

#include "collguard/estimate.h"
#include "plugin/hvd_abi.h"

static int pt__dtype(const char *name, cg_dtype_t *dt)
{
#define PT__DTYPE(e, v, bytes, s)                                             \
    if (strcmp(name, s) == 0) {                                               \
        *dt = e;                                                              \
        return 0;                                                             \
    }
    CG_DTYPE_MAP(PT__DTYPE)
#undef PT__DTYPE
    return -1;
}

/* (params, dtype, optimizer, mixed, ranks, backend, free, total) -> dict */
PyObject *pt_estimate(PyObject *self, PyObject *args)
{
    unsigned long long params, free_b, total_b;
    const char *dtype, *opt, *mixed, *backend;
    int ranks, o, m, b;
    cg_estimate_params_t p;
    cg_estimate_t e;
    cg_ctx_h ctx, own = NULL;
    cg_status_t st;

    (void)self;
    if (!PyArg_ParseTuple(args, "KsssisKK", &params, &dtype, &opt, &mixed,
                          &ranks, &backend, &free_b, &total_b))
        return NULL;
    memset(&p, 0, sizeof(p));
    o = cg_est_optimizer_parse(opt);
    m = cg_est_mixed_parse(mixed);
    b = cg_est_backend_parse(backend);
    if (pt__dtype(dtype, &p.dtype) != 0 || o < 0 || m < 0 || b < 0) {
        PyErr_Format(PyExc_ValueError, "collguard: estimate: dtype '%s', "
                     "optimizer '%s', mixed '%s', backend '%s': expected "
                     "f16/bf16/f32/f64, sgd/momentum/adam/adamw, "
                     "none/fp16/bf16, nccl/collguard/mpi",
                     dtype, opt, mixed, backend);
        return NULL;
    }
    p.params = params;
    p.optimizer = (cg_est_optimizer_t)o;
    p.mixed = (cg_est_mixed_t)m;
    p.backend = (cg_est_backend_t)b;
    p.ranks = ranks;
    p.free_bytes = free_b;
    p.total_bytes = total_b;
    ctx = cg_hvd_global_ctx();
    if (ctx == NULL) {
        if (cg_ctx_create(NULL, &own) != CG_OK) {
            PyErr_Format(PyExc_ValueError, "collguard: estimate: %s",
                         cg_last_error());
            return NULL;
        }
        ctx = own;
    }
    st = cg_ctx_estimate_params(ctx, &p);
    cg_ctx_destroy(own);
    if (st == CG_OK)
        st = cg_estimate(&p, &e);
    if (st != CG_OK) {
        PyErr_Format(PyExc_ValueError, "collguard: estimate: %s",
                     cg_last_error());
        return NULL;
    }
    return Py_BuildValue(
        "{s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:O,s:L,s:K,s:K,s:K,s:K}",
        "param_bytes", (unsigned long long)e.param_bytes, "grad_bytes",
        (unsigned long long)e.grad_bytes, "master_bytes",
        (unsigned long long)e.master_bytes, "optimizer_bytes",
        (unsigned long long)e.optimizer_bytes, "model_bytes",
        (unsigned long long)e.model_bytes, "fusion_bytes",
        (unsigned long long)e.fusion_bytes, "staging_host_bytes",
        (unsigned long long)e.staging_host_bytes, "nccl_buffer_bytes",
        (unsigned long long)e.nccl_buffer_bytes, "nccl_fixed_bytes",
        (unsigned long long)e.nccl_fixed_bytes, "device_bytes",
        (unsigned long long)e.device_bytes, "fits",
        e.fits ? Py_True : Py_False, "headroom_bytes",
        (long long)e.headroom_bytes, "fusion_fit",
        (unsigned long long)e.fusion_fit, "nccl_buffsize_fit",
        (unsigned long long)e.nccl_buffsize_fit, "reserve_bytes",
        (unsigned long long)p.reserve_bytes, "free_bytes",
        (unsigned long long)p.free_bytes);
}
