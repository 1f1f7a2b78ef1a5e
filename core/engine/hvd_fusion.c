/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Execution of a cycle's ready list in the Horovod shim's core: the
 * governed fusion buffer (min(CG_FUSION_THRESHOLD, the governor's fusion
 * size), shrunk on allocation failure, agreed as the minimum over ranks so
 * every rank groups alike; the CUDA staging slots are sized and offered
 * alongside), fused allreduces packed / reduced once /
 * unpacked (CUDA tensors on NCCL: the copies and NCCL's allreduce on one
 * stream, waited for once; a group of one reduced on the tensor itself,
 * no copies), tensors too large for the buffer reduced alone, and
 * broadcast, each through the backend of the tensor's memory (host:
 * core->be_cpu, CUDA: core->be_gpu); groups never mix devices. Allgather
 * runs in hvd_gather.c, reducescatter in hvd_rscatter.c, alltoall in
 * hvd_alltoall.c; grouped requests are checked first (hvd_group.c).
 * Background thread only. Layer: core/engine; calls the backends (hvd_backend.h),
 * core/coll/coll.h, the GPU data path (hvd_gpu.h) and the governor.
 */
#include <stdio.h>
#include <string.h>

#include "core/base/error.h"
#include "core/engine/hvd_copy.h"
#include "core/base/clock.h"
#include "core/engine/hvd_core.h"
#include "core/engine/hvd_metrics.h"
#include "core/backend/hvd_gpu.h"
#include "core/engine/hvd_timeline.h"

#define CG__FUSION_ALIGN 64

void cg_hvd_fusion_release(cg_hvd_core_t *core)
{
    cg_governor_free(core->gov, CG_MEM_CAT_FUSION, core->fbuf,
                     core->fbuf_len);
    core->fbuf = NULL;
    core->fbuf_len = 0;
    core->fbuf_want = 0;
}

static size_t cg__host_prepare(cg_hvd_core_t *core)
{
    uint64_t want = core->ctx->cfg.fusion_threshold;
    uint64_t gov = cg_governor_fusion_size(core->gov);
    size_t floor, got;
    void *p;

    if (gov < want)
        want = gov;
    if (want == core->fbuf_want && core->fbuf != NULL)
        return core->fbuf_len;
    cg_hvd_fusion_release(core);
    if (want == 0)
        return 0;
    floor = core->ctx->cfg.fusion_min < want ? core->ctx->cfg.fusion_min
                                             : want;
    if (cg_governor_alloc_shrink(core->gov, CG_MEM_CAT_FUSION, want, floor,
                                 CG__FUSION_ALIGN, "CG_FUSION_MIN", &p,
                                 &got) != CG_OK) {
        cg_warn(core->log, "no fusion buffer this cycle: %s; tensors are "
                "reduced one by one", cg_last_error());
        return 0;
    }
    core->fbuf = p;
    core->fbuf_len = got;
    core->fbuf_want = want;
    if (got < want)
        cg_debug(core->log, "fusion buffer %zu bytes (asked %llu)", got,
                 (unsigned long long)want);
    return got;
}

/* Host buffer, and the CUDA one once this rank has CUDA tensors: the
 * smaller is offered, so the agreed size fits both on every rank. Then
 * the staging slots of CUDA tensors on a host backend: what they hold is
 * offered, so the agreed chunk fits every rank's. A rank with a CUDA
 * request in this cycle has its device set (cg_hvd_gpu_check, before the
 * request reached the inbox this cycle took), so its slots are sized
 * before any rank can find the request ready. */
void cg_hvd_fusion_prepare(cg_hvd_core_t *core, cg_hvd_offer_t *offer)
{
    size_t host = cg__host_prepare(core);
    size_t gpu = cg_hvd_gpu_prepare(core->gpu, host);
    /* (AUTO not yet chosen: slots too, in case it stages) */
    bool staged = core->gpu_auto || (core->be_gpu != NULL &&
                                     core->be_gpu->kind != CG_BACKEND_NCCL);

    offer->fusion = gpu < host ? gpu : host;
    offer->chunk = cg_hvd_gpu_stage_prepare(core->gpu, staged);
    core->tstats.stage_slot_bytes = cg_hvd_gpu_stage_slot(core->gpu);
}

/* The backend that serves a tensor's memory. */
static cg_backend_t *cg__backend(const cg_hvd_core_t *core,
                                 const cg_hvd_entry_t *e)
{
    return e->w.device < 0 ? core->be_cpu : core->be_gpu;
}

static cg_backend_mem_t cg__mem(const cg_hvd_entry_t *e)
{
    return e->w.device < 0 ? CG_BACKEND_MEM_HOST : CG_BACKEND_MEM_CUDA;
}

/* The fusion buffer for tensors on e's device and its agreed capacity
 * (NULL / 0: tensors there are reduced one by one). CUDA tensors use the
 * CUDA fusion buffer (hvd_gpu.h), offered in the same agreement. */
static void *cg__fusion_buffer(const cg_hvd_core_t *core,
                               const cg_hvd_entry_t *e, size_t *cap_p)
{
    if (e->w.device >= 0 && cg_hvd_gpu_fbuf(core->gpu) != NULL &&
        core->fbuf != NULL) {
        size_t len = cg_hvd_gpu_fbuf_len(core->gpu);
        *cap_p = core->fusion_cap < len ? core->fusion_cap : len;
        return cg_hvd_gpu_fbuf(core->gpu);
    }
    if (e->w.device >= 0 || core->fbuf == NULL) {
        *cap_p = 0;
        return NULL;
    }
    *cap_p = core->fusion_cap;
    return core->fbuf;
}

/* A collective on e's memory: host tensors go to their backend, CUDA
 * tensors through the GPU data path (NCCL direct, host backends staged);
 * with queued, NCCL's may be left queued behind the fusion copies (the
 * caller then waits with cg_hvd_gpu_sync). */
static cg_status_t cg__run_allreduce(cg_hvd_core_t *core, cg_backend_t *be,
                                     const cg_hvd_entry_t *e, const void *send,
                                     void *recv, size_t count, bool queued)
{
    if (e->w.device >= 0)
        return (queued ? cg_hvd_gpu_allreduce_queued : cg_hvd_gpu_allreduce)(
            core->gpu, be, send, recv, count, e->w.dtype, e->w.op,
            e->w.prescale, e->w.postscale);
    return be->ops->allreduce(be, send, recv, count, e->w.dtype, e->w.op,
                              e->w.prescale, e->w.postscale, cg__mem(e));
}

static cg_status_t cg__run_broadcast(cg_hvd_core_t *core, cg_backend_t *be,
                                     const cg_hvd_entry_t *e, void *buf,
                                     size_t count)
{
    if (e->w.device >= 0)
        return cg_hvd_gpu_broadcast(core->gpu, be, buf, count, e->w.dtype,
                                    e->w.root);
    return be->ops->broadcast(be, buf, count, e->w.dtype, e->w.root,
                              cg__mem(e));
}

/* CG_FAULT_COLLECTIVE: the Nth collective of this rank breaks its
 * backend, as an MPI or NCCL error would. */
static cg_status_t cg__fault(cg_hvd_core_t *core, cg_backend_t *be)
{
    int n = core->ctx->cfg.fault_collective;

    if (n <= 0 || ++core->n_colls != (uint64_t)n)
        return CG_OK;
    be->broken = true;
    return cg_error_set(CG_ERR_IO, "collective %d of rank %d failed "
                        "(CG_FAULT_COLLECTIVE=%d); the %s backend is "
                        "unusable from now on", n, core->rank, n,
                        cg_backend_kind_name(be->ops->kind));
}

/* A failure that leaves no way to run more collectives this job. */
static bool cg__broken(const cg_hvd_core_t *core)
{
    return cg_comm_broken(core->comm) ||
           (core->be_cpu != NULL && core->be_cpu->broken) ||
           (core->be_gpu != NULL && core->be_gpu->broken);
}

static bool cg__fusable(const cg_hvd_entry_t *a, const cg_hvd_entry_t *b)
{
    return !b->done && !b->failed && b->w.type == CG_HVD_ALLREDUCE &&
           a->w.device == b->w.device && a->w.dtype == b->w.dtype &&
           a->w.op == b->w.op &&
           a->w.prescale == b->w.prescale && a->w.postscale == b->w.postscale;
}

static void cg__count_call(cg_hvd_core_t *core, uint64_t tensors)
{
    core->tstats.allreduce_calls++;
    core->tstats.allreduce_tensors += tensors;
    if (tensors > 1)
        core->tstats.fused_calls++;
    if (tensors > core->tstats.max_fused_tensors)
        core->tstats.max_fused_tensors = tensors;
}

/* Packed whole, reduced, unpacked whole (other backends, CUDA tensors). */
static cg_status_t cg__fused_packed(cg_hvd_core_t *core, cg_backend_t *be,
                                    char *fbuf, size_t bytes, size_t i,
                                    int group)
{
    cg_hvd_entry_t *head = core->ready[i];
    size_t dsize = cg_dtype_size(head->w.dtype);
    uint64_t tl_t0 = cg_hvd_tl_now(core);
    cg_status_t st;

    for (size_t j = i; j < core->ready_len; j++) {
        cg_hvd_ready_prefetch(core, j);
        cg_hvd_entry_t *e = core->ready[j];
        if (e->group == group)
            cg_hvd_copy_in(core, e, fbuf + e->foff, e->local->input,
                           e->local->count * dsize);
    }
    cg_hvd_tl_fused(core, i, group, CG_HVD_TL_PACKED, tl_t0,
                    be->ops->allreduce_activity);
    st = cg__run_allreduce(core, be, head, fbuf, fbuf, bytes / dsize, true);
    cg_hvd_tl_fused(core, i, group, CG_HVD_TL_REDUCED, 0, NULL);
    for (size_t j = i; j < core->ready_len && st == CG_OK; j++) {
        cg_hvd_entry_t *e = core->ready[j];
        if (e->group == group)
            st = cg_hvd_copy_out(core, e, e->local->output, fbuf + e->foff,
                              e->local->count * dsize);
    }
    if (head->w.device >= 0) { /* copies and NCCL's queued: wait once */
        cg_status_t w = cg_hvd_gpu_sync(core->gpu);
        if (st == CG_OK)
            st = w;
    }
    return st;
}

/* The allreduces from ready[i] on that fit the agreed buffer with it. */
static cg_status_t cg__fused_allreduce(cg_hvd_core_t *core, size_t i)
{
    cg_hvd_entry_t *head = core->ready[i], *last = NULL;
    cg_backend_t *be = cg__backend(core, head);
    size_t dsize = cg_dtype_size(head->w.dtype), off = 0, n = 0, cap;
    char *fbuf = cg__fusion_buffer(core, head, &cap);
    bool staged = head->w.device < 0 && be->ops->allreduce_staged != NULL;
    int group = (int)i + 1;
    uint64_t t0 = cg_now_ns();
    cg_status_t st = CG_OK;

    for (size_t j = i; j < core->ready_len; j++) {
        cg_hvd_ready_prefetch(core, j);
        cg_hvd_entry_t *e = core->ready[j];
        size_t bytes = e->local->count * dsize;
        if (!cg__fusable(head, e) || bytes == 0 || bytes > cap - off)
            continue;
        e->group = group;
        e->foff = off;
        off += bytes;
        n++;
        last = e;
    }
    if (staged)
        st = cg_hvd_fused_staged(core, be, i, group, n, fbuf, off, &staged);
    if (n == 1 && head->w.device >= 0 && be->kind == CG_BACKEND_NCCL)
        /* alone (head itself when it has bytes): NCCL on the tensor, no
         * copy in or out */
        st = cg__run_allreduce(core, be, last, last->local->input,
                               last->local->output, last->local->count,
                               false);
    else if (!staged)
        st = cg__fused_packed(core, be, fbuf, off, i, group);
    cg__count_call(core, n);
    core->tstats.fused_bytes += n > 1 ? off : 0;
    core->tstats.allreduce_bytes += off;
    cg_hvd_metrics_op(core, CG_HVD_ALLREDUCE, cg_now_ns() - t0);
    cg_hvd_complete_begin(core); /* one lock and one wake-up for all */
    for (size_t j = i; j < core->ready_len; j++) {
        cg_hvd_ready_prefetch(core, j);
        cg_hvd_entry_t *e = core->ready[j];
        if (e->group != group)
            continue;
        e->done = true;
        cg_hvd_req_complete_locked(core, e->local, st,
                                   st == CG_OK ? NULL : cg_last_error());
    }
    cg_hvd_complete_end(core);
    cg_hvd_tl_fused(core, i, group, CG_HVD_TL_DONE, 0, NULL);
    return st;
}

static cg_status_t cg__allreduce(cg_hvd_core_t *core, size_t i)
{
    cg_hvd_entry_t *e = core->ready[i];
    cg_backend_t *be = cg__backend(core, e);
    size_t bytes = cg_hvd_wire_count(&e->w) * cg_dtype_size(e->w.dtype), cap;
    cg_status_t st;

    st = cg__fault(core, be);
    if (st != CG_OK)
        return st; /* the request fails with the core (cg_hvd_fail_all) */
    if (bytes > 0 && cg__fusion_buffer(core, e, &cap) != NULL && bytes <= cap)
        return cg__fused_allreduce(core, i);
    uint64_t tl_t0 = cg_hvd_tl_now(core), t0 = cg_now_ns();
    if (e->w.device < 0 && be->ops->allreduce_staged != NULL &&
        core->size > 2) /* the ring on its own segments, as when fused */
        st = cg_hvd_single_staged(core, be, e);
    else
        st = cg__run_allreduce(core, be, e, e->local->input,
                               e->local->output, e->local->count, false);
    cg__count_call(core, 1);
    core->tstats.allreduce_bytes += bytes;
    cg_hvd_metrics_op(core, CG_HVD_ALLREDUCE, cg_now_ns() - t0);
    cg_hvd_tl_single(core, e, tl_t0, be->ops->allreduce_activity);
    e->done = true;
    cg_hvd_req_complete(core, e->local, st,
                        st == CG_OK ? NULL : cg_last_error());
    return st;
}

static cg_status_t cg__broadcast(cg_hvd_core_t *core, cg_hvd_entry_t *e)
{
    struct cg_hvd_req *req = e->local;
    cg_backend_t *be = cg__backend(core, e);
    cg_status_t st = cg__fault(core, be);
    uint64_t tl_t0 = cg_hvd_tl_now(core), t0 = cg_now_ns();
    size_t bytes = req->count * cg_dtype_size(e->w.dtype);

    if (st != CG_OK)
        return st;
    if (core->rank == e->w.root && req->output != req->input && req->count)
        cg_hvd_copy_in(core, e, req->output, req->input, bytes);
    st = cg__run_broadcast(core, be, e, req->output, req->count);
    core->tstats.broadcast_calls++;
    core->tstats.broadcast_bytes += bytes;
    cg_hvd_metrics_op(core, CG_HVD_BROADCAST, cg_now_ns() - t0);
    cg_hvd_tl_single(core, e, tl_t0, be->ops->broadcast_activity);
    cg_hvd_req_complete(core, req, st, st == CG_OK ? NULL : cg_last_error());
    return st;
}

cg_status_t cg_hvd_execute(cg_hvd_core_t *core)
{
    cg_status_t st = CG_OK;

    cg_hvd_group_check(core); /* a group fails whole */
    for (size_t i = 0; i < core->ready_len; i++) {
        cg_hvd_entry_t *e = core->ready[i];
        if (e->done)
            continue;
        if (e->failed) {
            core->tstats.mismatches++;
            /* Every rank fails it; rank 0 says so at error level. */
            if (core->rank == 0)
                cg_error(core->log, "%s", e->err);
            else
                cg_debug(core->log, "%s", e->err);
            if (e->local != NULL) /* NULL: a joined rank's */
                cg_hvd_req_complete(core, e->local, CG_ERR_MISMATCH, e->err);
            e->done = true;
            continue;
        }
        if (core->gpu_auto && e->w.device >= 0 &&
            (e->w.type == CG_HVD_ALLREDUCE || e->w.type == CG_HVD_BROADCAST))
            st = cg_hvd_gpu_auto_settle(core); /* same entry, every rank */
        if (st != CG_OK) {
            if (e->local != NULL)
                cg_hvd_req_complete(core, e->local, st, cg_last_error());
            e->done = true;
            if (core->be_gpu != NULL)
                core->be_gpu->broken = true;
            else if (!cg_comm_broken(core->comm))
                cg_comm_fail(core->comm);
            break;
        }
        switch (e->w.type) {
        case CG_HVD_ALLREDUCE:
            st = cg__allreduce(core, i);
            break;
        case CG_HVD_BROADCAST:
            st = cg__broadcast(core, e);
            break;
        case CG_HVD_REDUCESCATTER:
            st = cg_hvd_reducescatter_run(core, i);
            break;
        case CG_HVD_ALLTOALL:
            st = cg_hvd_alltoall_run(core, i);
            break;
        default:
            st = cg_hvd_allgather_run(core, i);
            break;
        }
        e->done = true;
        if (st != CG_OK && cg__broken(core)) {
            /* A broken backend (MPI, NCCL) stops this rank; breaking the
             * engine's group too makes the other ranks fail at their next
             * negotiation instead of waiting CG_TIMEOUT for this one. */
            if (!cg_comm_broken(core->comm))
                cg_comm_fail(core->comm);
            break;
        }
        st = CG_OK;
    }
    for (size_t i = 0; i < core->ready_len; i++) {
        cg_hvd_ready_prefetch(core, i);
        cg_hvd_entry_free(core, core->ready[i]);
    }
    core->ready_len = 0;
    return st;
}
