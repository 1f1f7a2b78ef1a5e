/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Execution of a cycle's ready list in the Horovod shim's core: the
 * governed fusion buffer (min(CG_FUSION_THRESHOLD, the governor's fusion
 * size), shrunk on allocation failure, agreed as the minimum over ranks so
 * every rank groups alike), fused allreduces packed / reduced once /
 * unpacked, tensors too large for the buffer reduced alone, broadcast, and
 * allgather (sizes from negotiation, then one broadcast per rank).
 * Background thread only. Layer: core; calls core/coll.h and the governor.
 */
#include <stdio.h>
#include <string.h>

#include "core/base/error.h"
#include "core/hvd_core.h"

#define CG__FUSION_ALIGN 64

void cg_hvd_fusion_release(cg_hvd_core_t *core)
{
    cg_governor_free(core->gov, CG_MEM_CAT_FUSION, core->fbuf,
                     core->fbuf_len);
    core->fbuf = NULL;
    core->fbuf_len = 0;
    core->fbuf_want = 0;
}

size_t cg_hvd_fusion_prepare(cg_hvd_core_t *core)
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

static bool cg__fusable(const cg_hvd_entry_t *a, const cg_hvd_entry_t *b)
{
    return !b->done && !b->failed && b->w.type == CG_HVD_ALLREDUCE &&
           a->w.dtype == b->w.dtype && a->w.op == b->w.op &&
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

/* The allreduces from ready[i] on that fit the agreed buffer with it. */
static cg_status_t cg__fused_allreduce(cg_hvd_core_t *core, size_t i)
{
    cg_hvd_entry_t *head = core->ready[i];
    size_t dsize = cg_dtype_size(head->w.dtype), off = 0, n = 0;
    int group = (int)i + 1;
    cg_status_t st;

    for (size_t j = i; j < core->ready_len; j++) {
        cg_hvd_entry_t *e = core->ready[j];
        size_t bytes = cg_hvd_wire_count(&e->w) * dsize;
        if (!cg__fusable(head, e) || bytes == 0 ||
            bytes > core->fusion_cap - off)
            continue;
        e->group = group;
        e->foff = off;
        memcpy((char *)core->fbuf + off, e->local->input, bytes);
        off += bytes;
        n++;
    }
    st = cg_allreduce(core->comm, core->fbuf, core->fbuf, off / dsize,
                      head->w.dtype, head->w.op, head->w.prescale,
                      head->w.postscale);
    cg__count_call(core, n);
    for (size_t j = i; j < core->ready_len; j++) {
        cg_hvd_entry_t *e = core->ready[j];
        if (e->group != group)
            continue;
        if (st == CG_OK)
            memcpy(e->local->output, (char *)core->fbuf + e->foff,
                   cg_hvd_wire_count(&e->w) * dsize);
        e->done = true;
        cg_hvd_req_complete(core, e->local, st,
                            st == CG_OK ? NULL : cg_last_error());
    }
    return st;
}

static cg_status_t cg__allreduce(cg_hvd_core_t *core, size_t i)
{
    cg_hvd_entry_t *e = core->ready[i];
    size_t bytes = cg_hvd_wire_count(&e->w) * cg_dtype_size(e->w.dtype);
    cg_status_t st;

    if (bytes > 0 && bytes <= core->fusion_cap && core->fbuf != NULL)
        return cg__fused_allreduce(core, i);
    st = cg_allreduce(core->comm, e->local->input, e->local->output,
                      e->local->count, e->w.dtype, e->w.op, e->w.prescale,
                      e->w.postscale);
    cg__count_call(core, 1);
    e->done = true;
    cg_hvd_req_complete(core, e->local, st,
                        st == CG_OK ? NULL : cg_last_error());
    return st;
}

static cg_status_t cg__broadcast(cg_hvd_core_t *core, cg_hvd_entry_t *e)
{
    struct cg_hvd_req *req = e->local;
    cg_status_t st;

    if (core->rank == e->w.root && req->output != req->input && req->count)
        memcpy(req->output, req->input,
               req->count * cg_dtype_size(e->w.dtype));
    st = cg_broadcast(core->comm, req->output, req->count, e->w.dtype,
                      e->w.root);
    cg_hvd_req_complete(core, req, st, st == CG_OK ? NULL : cg_last_error());
    return st;
}

static cg_status_t cg__allgather(cg_hvd_core_t *core, cg_hvd_entry_t *e)
{
    struct cg_hvd_req *req = e->local;
    size_t dsize = cg_dtype_size(e->w.dtype), row = dsize, off = 0;
    int64_t dim0 = 0;
    cg_status_t st = CG_OK;

    for (int d = 1; d < e->w.ndim; d++)
        row *= (size_t)e->w.shape[d];
    for (int r = 0; r < core->size; r++)
        dim0 += e->dim0[r];
    req->gather_bytes = (size_t)dim0 * row;
    /* Every rank must join every broadcast: a transient (injected)
     * failure is retried; a persistent one breaks the group. */
    for (int a = 0; a < 3 && req->gather_bytes > 0 && req->gather == NULL;
         a++)
        st = cg_governor_alloc(core->gov, CG_MEM_CAT_STAGING,
                               req->gather_bytes, &req->gather);
    if (st != CG_OK) {
        char why[256];
        snprintf(why, sizeof(why), "%s", cg_last_error());
        req->gather_bytes = 0;
        cg_comm_fail(core->comm);
        return cg_error_set(st, "allgather of tensor '%s': no memory for "
                            "the %lld x %zu-byte result: %s", e->w.name,
                            (long long)dim0, row, why);
    }
    for (int r = 0; r < core->size && st == CG_OK; r++) {
        size_t len = (size_t)e->dim0[r] * row;
        if (r == core->rank && len > 0)
            memcpy((char *)req->gather + off, req->input, len);
        if (len > 0)
            st = cg_broadcast(core->comm, (char *)req->gather + off,
                              len / dsize, e->w.dtype, r);
        off += len;
    }
    req->gather_dim0 = dim0;
    cg_hvd_req_complete(core, req, st, st == CG_OK ? NULL : cg_last_error());
    return st;
}

cg_status_t cg_hvd_execute(cg_hvd_core_t *core)
{
    cg_status_t st = CG_OK;

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
            cg_hvd_req_complete(core, e->local, CG_ERR_MISMATCH, e->err);
            e->done = true;
            continue;
        }
        switch (e->w.type) {
        case CG_HVD_ALLREDUCE:
            st = cg__allreduce(core, i);
            break;
        case CG_HVD_BROADCAST:
            st = cg__broadcast(core, e);
            break;
        default:
            st = cg__allgather(core, e);
            break;
        }
        e->done = true;
        if (st != CG_OK && cg_comm_broken(core->comm))
            break;
        st = CG_OK;
    }
    for (size_t i = 0; i < core->ready_len; i++)
        cg_hvd_entry_free(core, core->ready[i]);
    core->ready_len = 0;
    return st;
}
