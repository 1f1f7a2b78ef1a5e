/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The single-tensor enqueues of the Horovod shim's core for allreduce,
 * broadcast and allgather: each starts with the process-set route
 * (cg_hvd_route: the core of the set the tensor names), then the op's
 * wire (cg_hvd_check_tensor plus the op's own checks: allreduce's op,
 * the non-leaf broadcast rule and its root, a job rank mapped to the
 * set's, allgather's first dimension), then hvd_queue.c's enqueue. The
 * *_wire checks are shared with grouped operations (hvd_group.c), which
 * route once for the whole group. Reducescatter's is in hvd_rscatter.c,
 * alltoall's in hvd_alltoall.c. Layer: core/engine; calls hvd_check.c,
 * hvd_queue.c and hvd_sets.c.
 */
#include "core/base/error.h"
#include "core/engine/hvd_core.h"

cg_status_t cg_hvd_allreduce_wire(cg_hvd_core_t *core,
                                  const cg_hvd_tensor_t *t, cg_redop_t op,
                                  double prescale, double postscale,
                                  cg_hvd_wire_t *w)
{
    cg_status_t st = cg_hvd_check_tensor(core, t, CG_HVD_ALLREDUCE, w);

    if (st != CG_OK)
        return st;
    if (op < 0 || op >= CG_OP_COUNT || op == CG_OP_ADASUM)
        return cg_error_set(CG_ERR_INVALID_PARAM, "allreduce of tensor '%s': "
                            "op %s (%d) is not supported (sum, prod, max, "
                            "min, average)", t->name, cg_redop_name(op),
                            (int)op);
    w->op = (int32_t)op;
    w->prescale = prescale;
    w->postscale = postscale;
    return CG_OK;
}

cg_status_t cg_hvd_enqueue_allreduce(cg_hvd_core_h core,
                                     const cg_hvd_tensor_t *t, cg_redop_t op,
                                     double prescale, double postscale,
                                     cg_hvd_req_h *req_p)
{
    cg_hvd_wire_t w;
    cg_status_t st = cg_hvd_route(&core, t, "allreduce");

    if (st == CG_OK)
        st = cg_hvd_allreduce_wire(core, t, op, prescale, postscale, &w);

    if (st != CG_OK)
        return st;
    return cg_hvd_enqueue(core, t, CG_HVD_ALLREDUCE, &w, req_p);
}

cg_status_t cg_hvd_enqueue_broadcast(cg_hvd_core_h core,
                                     const cg_hvd_tensor_t *t, int root,
                                     cg_hvd_req_h *req_p)
{
    cg_hvd_wire_t w;
    cg_status_t st = cg_hvd_route(&core, t, "broadcast");
    int set_root;

    if (st == CG_OK)
        st = cg_hvd_check_tensor(core, t, CG_HVD_BROADCAST, &w);

    if (st != CG_OK)
        return st;
    if ((t->flags & CG_HVD_REQUIRES_GRAD) && !(t->flags & CG_HVD_IS_LEAF)) {
        pthread_mutex_lock(&core->lock);
        core->stats.nonleaf_rejected++;
        pthread_mutex_unlock(&core->lock);
        return cg_error_set(CG_ERR_INVALID_PARAM, "broadcast of tensor '%s': "
                            "it requires grad and is not a leaf (it has a "
                            "grad_fn), so broadcasting it would build autograd "
                            "graph; broadcast the leaf tensor instead, or "
                            ".detach() it first", t->name);
    }
    /* The root is a job rank, as in Horovod; the wire holds the set's. */
    set_root = cg_hvd_set_rank_of(core, root);
    if (set_root < 0 && core->set_ranks != NULL)
        return cg_error_set(CG_ERR_INVALID_PARAM, "broadcast of tensor '%s': "
                            "root rank %d is not a member of process set %d",
                            t->name, root, (int)core->set_id);
    if (set_root < 0)
        return cg_error_set(CG_ERR_INVALID_PARAM, "broadcast of tensor '%s': "
                            "root rank %d, the job has ranks 0 to %d",
                            t->name, root, core->size - 1);
    w.root = set_root;
    return cg_hvd_enqueue(core, t, CG_HVD_BROADCAST, &w, req_p);
}

cg_status_t cg_hvd_allgather_wire(cg_hvd_core_t *core,
                                  const cg_hvd_tensor_t *t, cg_hvd_wire_t *w)
{
    cg_status_t st = cg_hvd_check_tensor(core, t, CG_HVD_ALLGATHER, w);

    if (st != CG_OK)
        return st;
    if (t->ndim == 0)
        return cg_error_set(CG_ERR_INVALID_PARAM, "allgather of tensor '%s': "
                            "a scalar has no first dimension to gather along",
                            t->name);
    return CG_OK;
}

cg_status_t cg_hvd_enqueue_allgather(cg_hvd_core_h core,
                                     const cg_hvd_tensor_t *t,
                                     cg_hvd_req_h *req_p)
{
    cg_hvd_wire_t w;
    cg_status_t st = cg_hvd_route(&core, t, "allgather");

    if (st == CG_OK)
        st = cg_hvd_allgather_wire(core, t, &w);

    if (st != CG_OK)
        return st;
    return cg_hvd_enqueue(core, t, CG_HVD_ALLGATHER, &w, req_p);
}
