/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Choice and life of the Horovod shim's backends: the names of the kinds,
 * AUTO's resolution, creation by kind (MPI and NCCL only where built in,
 * else an error naming the variable) and the core's pair, one for host
 * tensors (CG_CPU_OPERATIONS) and one for CUDA tensors
 * (CG_GPU_OPERATIONS), shared when both name the same kind.
 * Layer: core/backend; calls the backends (backend_*.c).
 */
#include "core/backend/hvd_backend.h"

#include "cg_build.h"
#include "core/base/error.h"
#include "core/engine/hvd_core.h"

#if CG_HAVE_NCCL && defined(CG_HVD_NCCL_BACKEND)
#define CG__NCCL_BUILT 1
#else
#define CG__NCCL_BUILT 0
#endif

const char *cg_backend_kind_name(cg_backend_kind_t kind)
{
    switch (kind) {
    case CG_BACKEND_COLLGUARD:
        return "COLLGUARD";
    case CG_BACKEND_MPI:
        return "MPI";
    case CG_BACKEND_NCCL:
        return "NCCL";
    case CG_BACKEND_AUTO:
        return "AUTO";
    }
    return "unknown";
}

cg_backend_kind_t cg_backend_resolve(cg_backend_kind_t kind)
{
    if (kind != CG_BACKEND_AUTO)
        return kind;
    return CG__NCCL_BUILT ? CG_BACKEND_NCCL : CG_BACKEND_COLLGUARD;
}

cg_status_t cg_backend_create(cg_backend_kind_t kind,
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

void cg_backend_destroy(cg_backend_t *be)
{
    if (be != NULL)
        be->ops->destroy(be);
}

cg_status_t cg_hvd_backends_create(cg_hvd_core_t *core)
{
    const cg_config_t *cfg = &core->ctx->cfg;
    cg_backend_kind_t cpu = (cg_backend_kind_t)cfg->cpu_operations;
    cg_backend_kind_t gpu = cg_backend_resolve(
        (cg_backend_kind_t)cfg->gpu_operations);
    cg_backend_params_t p = {core->gov, core->log, cfg, core->ctx->bs,
                             core->comm, core->rank, core->size,
                             CG_BACKEND_MEM_HOST, "HOROVOD_CPU_OPERATIONS"};
    cg_backend_t *be_cpu, *be_gpu;
    cg_status_t st;

    st = cg_backend_create(cpu, &p, &be_cpu);
    if (st != CG_OK)
        return st;
    if (gpu == cpu) {
        be_gpu = be_cpu;
    } else {
        p.mem = CG_BACKEND_MEM_CUDA;
        p.var = "HOROVOD_GPU_OPERATIONS";
        st = cg_backend_create(gpu, &p, &be_gpu);
        if (st != CG_OK)
            goto err_cpu;
    }
    cg_info(core->log, "host tensors: %s backend, CUDA tensors: %s backend",
            be_cpu->ops->name, be_gpu->ops->name);
    core->be_cpu = be_cpu;
    core->be_gpu = be_gpu;
    return CG_OK;

err_cpu:
    cg_backend_destroy(be_cpu);
    return st;
}

void cg_hvd_backends_destroy(cg_hvd_core_t *core)
{
    if (core->be_gpu != core->be_cpu)
        cg_backend_destroy(core->be_gpu);
    cg_backend_destroy(core->be_cpu);
    core->be_cpu = NULL;
    core->be_gpu = NULL;
}
