/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Choice and life of the Horovod shim's backends: the names of the kinds,
 * AUTO's resolution, creation by kind (MPI and NCCL only where built in,
 * else an error naming the variable). The engine holds a pair, one for
 * host tensors and one for CUDA tensors (core/engine/hvd_cycle.c).
 * Layer: core/backend; calls the backends (backend_*.c).
 */
#include "core/backend/hvd_backend.h"

#include "cg_build.h"
#include "core/base/error.h"

#if CG_HAVE_NCCL && defined(CG_HVD_NCCL_BACKEND)
#define CG__NCCL_BUILT 1
#else
#define CG__NCCL_BUILT 0
#endif

cg_backend_kind_t cg_backend_resolve(cg_backend_kind_t kind)
{
    if (kind != CG_BACKEND_AUTO)
        return kind;
    return CG__NCCL_BUILT ? CG_BACKEND_NCCL : CG_BACKEND_COLLGUARD;
}

bool cg_backend_auto_pending(cg_backend_kind_t kind)
{
    return kind == CG_BACKEND_AUTO && CG__NCCL_BUILT;
}

cg_status_t cg_backend_start(cg_backend_t *be, uint64_t *took_p)
{
    *took_p = 0;
#if CG__NCCL_BUILT
    if (be->ops->kind == CG_BACKEND_NCCL)
        return cg_backend_nccl_start(be, took_p);
#else
    (void)be;
#endif
    return CG_OK;
}

static cg_status_t cg__create(cg_backend_kind_t kind,
                              const cg_backend_params_t *params,
                              cg_backend_t **be_p)
{
    const char *var = params->var != NULL ? params->var : "the backend";

    switch (cg_backend_resolve(kind)) {
    case CG_BACKEND_COLLGUARD:
        return cg_backend_collguard_create(params, be_p);
    case CG_BACKEND_MPI:
#if CG_HAVE_MPI
        return cg_backend_mpi_create(params, be_p);
#else
        return cg_error_set(CG_ERR_UNSUPPORTED, "%s=MPI: this collguard was "
                            "built without MPI (CMake found no MPI, or "
                            "-DCG_WITH_MPI=OFF); rebuild with MPI or choose "
                            "COLLGUARD", var);
#endif
    case CG_BACKEND_NCCL:
#if CG__NCCL_BUILT
        return cg_backend_nccl_create(params, be_p);
#else
        return cg_error_set(CG_ERR_UNSUPPORTED, "%s=NCCL: the NCCL backend "
                            "is not built into this collguard; rebuild with "
                            "NCCL found by CMake or choose COLLGUARD or MPI",
                            var);
#endif
    case CG_BACKEND_AUTO:
        break;
    }
    return cg_error_set(CG_ERR_INVALID_PARAM, "%s: unknown backend kind %d",
                        var, (int)kind);
}

cg_status_t cg_backend_create(cg_backend_kind_t kind,
                              const cg_backend_params_t *params,
                              cg_backend_t **be_p)
{
    cg_status_t st = cg__create(kind, params, be_p);

    if (st == CG_OK)
        (*be_p)->size = params->size;
    return st;
}

void cg_backend_destroy(cg_backend_t *be)
{
    if (be != NULL)
        be->ops->destroy(be);
}
