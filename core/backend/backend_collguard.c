/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The COLLGUARD backend of the Horovod shim: the engine's own AllReduce,
 * Broadcast and reduce-scatter (core/coll/coll.h) over the core's communicator, on host
 * memory. A failed collective that broke the communicator marks the
 * backend broken. Layer: core/backend; calls core/coll/coll.h and the governor.
 */
#include "core/base/error.h"
#include "core/coll/coll.h"
#include "core/backend/hvd_backend.h"

typedef struct cg__be_collguard {
    cg_backend_t super;
    cg_governor_t *gov;
    cg_comm_t *comm;
} cg__be_collguard_t;

static cg_status_t cg__cgbe_host_only(cg_backend_mem_t mem, const char *what)
{
    if (mem == CG_BACKEND_MEM_HOST)
        return CG_OK;
    return cg_error_set(CG_ERR_UNSUPPORTED, "collguard backend: %s of CUDA "
                        "memory needs host staging, which this build does "
                        "not have", what);
}

static cg_status_t cg__cgbe_done(cg__be_collguard_t *be, cg_status_t st)
{
    if (st != CG_OK && cg_comm_broken(be->comm))
        be->super.broken = true;
    return st;
}

static cg_status_t cg__cgbe_allreduce(cg_backend_t *super, const void *send,
                                      void *recv, size_t count, cg_dtype_t dt,
                                      cg_redop_t op, double prescale,
                                      double postscale, cg_backend_mem_t mem)
{
    cg__be_collguard_t *be = (cg__be_collguard_t *)super;
    cg_status_t st = cg__cgbe_host_only(mem, "allreduce");

    if (st != CG_OK)
        return st;
    return cg__cgbe_done(be, cg_allreduce(be->comm, send, recv, count, dt, op,
                                          prescale, postscale));
}

static cg_status_t cg__cgbe_allreduce_staged(cg_backend_t *super, void *buf,
                                             size_t count, cg_dtype_t dt,
                                             cg_redop_t op, double prescale,
                                             double postscale,
                                             const cg_coll_stage_t *stage)
{
    cg__be_collguard_t *be = (cg__be_collguard_t *)super;

    return cg__cgbe_done(be, cg_allreduce_staged(be->comm, buf, count, dt, op,
                                                 prescale, postscale, stage));
}

static cg_status_t cg__cgbe_broadcast(cg_backend_t *super, void *buf,
                                      size_t count, cg_dtype_t dt, int root,
                                      cg_backend_mem_t mem)
{
    cg__be_collguard_t *be = (cg__be_collguard_t *)super;
    cg_status_t st = cg__cgbe_host_only(mem, "broadcast");

    if (st != CG_OK)
        return st;
    return cg__cgbe_done(be, cg_broadcast(be->comm, buf, count, dt, root));
}

static cg_status_t cg__cgbe_reducescatter(cg_backend_t *super,
                                          const void *send, void *recv,
                                          const size_t *counts, cg_dtype_t dt,
                                          cg_redop_t op, double prescale,
                                          double postscale)
{
    cg__be_collguard_t *be = (cg__be_collguard_t *)super;

    return cg__cgbe_done(be, cg_reduce_scatterv(be->comm, send, recv, counts,
                                                dt, op, prescale, postscale));
}

static void cg__cgbe_destroy(cg_backend_t *super)
{
    cg__be_collguard_t *be = (cg__be_collguard_t *)super;

    cg_governor_free(be->gov, CG_MEM_CAT_CONTROL, be, sizeof(*be));
}

static const cg_backend_ops_t cg__cgbe_ops = {
    .kind = CG_BACKEND_COLLGUARD,
    .allreduce_activity = "COLLGUARD_ALLREDUCE",
    .broadcast_activity = "COLLGUARD_BCAST",
    .allreduce = cg__cgbe_allreduce,
    .broadcast = cg__cgbe_broadcast,
    .allreduce_staged = cg__cgbe_allreduce_staged,
    .reducescatter = cg__cgbe_reducescatter,
    .reducescatter_activity = "COLLGUARD_REDUCESCATTER",
    .destroy = cg__cgbe_destroy,
};

cg_status_t cg_backend_collguard_create(const cg_backend_params_t *params,
                                        cg_backend_t **be_p)
{
    cg__be_collguard_t *be;
    cg_status_t st;

    if (params->comm == NULL)
        return cg_error_set(CG_ERR_INVALID_PARAM, "collguard backend: no "
                            "communicator");
    st = cg_governor_alloc(params->gov, CG_MEM_CAT_CONTROL, sizeof(*be),
                           (void **)&be);
    if (st != CG_OK)
        return st;
    be->super.ops = &cg__cgbe_ops;
    be->super.kind = CG_BACKEND_COLLGUARD;
    be->super.broken = false;
    be->gov = params->gov;
    be->comm = params->comm;
    *be_p = &be->super;
    return CG_OK;
}
