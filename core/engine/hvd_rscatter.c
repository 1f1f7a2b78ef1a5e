/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Reducescatter in the Horovod shim's core: its enqueue (checks beyond
 * hvd_check.c's common ones) and its execution. Each rank keeps its rows
 * of the reduced tensor (Horovod's split of the first dimension,
 * cg_hvd_reducescatter_rows). Ready reducescatters of one device, dtype,
 * op and scales whose inputs fit the agreed fusion capacity together are
 * packed rank-major into the host fusion buffer (rank r's rows of each
 * tensor in ready order, then rank r+1's), reduce-scattered once in place
 * and this rank's block cut into the outputs, as Horovod fuses them. A
 * tensor alone goes from its input straight to its output. Host tensors
 * run on the host backend's reducescatter (COLLGUARD's ring, MPI's
 * MPI_Reduce_scatter); CUDA tensors are staged through host memory and
 * run on the engine's ring over core->comm, whose failure protocol
 * (cg_comm_fail) stops the other ranks when one cannot stage. Background
 * thread only. Layer: core/engine; calls core/coll/coll.h, the backends,
 * the GPU data path's copies (hvd_copy.h) and the governor.
 */
#include <stdio.h>
#include <string.h>

#include "core/base/clock.h"
#include "core/base/error.h"
#include "core/backend/hvd_gpu.h"
#include "core/engine/hvd_copy.h"
#include "core/engine/hvd_core.h"
#include "core/engine/hvd_metrics.h"
#include "core/engine/hvd_timeline.h"

#define CG__RS_ACTIVITY "COLLGUARD_REDUCESCATTER"

void cg_hvd_reducescatter_rows(int64_t dim0, int size, int rank,
                               int64_t *start_p, int64_t *rows_p)
{
    int64_t base = dim0 / size, extra = dim0 % size;

    *rows_p = base + (rank < extra ? 1 : 0);
    *start_p = rank * base + (rank < extra ? rank : extra);
}

cg_status_t cg_hvd_reducescatter_wire(cg_hvd_core_t *core,
                                      const cg_hvd_tensor_t *t, cg_redop_t op,
                                      double prescale, double postscale,
                                      cg_hvd_wire_t *w)
{
    int64_t start, rows;
    size_t el, out_bytes, in_bytes;
    cg_status_t st = cg_hvd_check_tensor(core, t, CG_HVD_REDUCESCATTER, w);

    if (st != CG_OK)
        return st;
    if (t->ndim == 0)
        return cg_error_set(CG_ERR_INVALID_PARAM, "reducescatter of tensor "
                            "'%s': a scalar has no first dimension to "
                            "scatter along", t->name);
    if (op != CG_OP_SUM && op != CG_OP_AVG)
        return cg_error_set(CG_ERR_INVALID_PARAM, "reducescatter of tensor "
                            "'%s': op %s (%d) is not supported (sum, "
                            "average)", t->name, cg_redop_name(op), (int)op);
    cg_hvd_reducescatter_rows(t->shape[0], core->size, core->rank, &start,
                              &rows);
    el = cg_dtype_size(t->dtype);
    in_bytes = cg_hvd_wire_count(w) * el;
    out_bytes = t->shape[0] > 0 ? in_bytes / (size_t)t->shape[0] *
                                      (size_t)rows : 0;
    if (out_bytes > 0 && t->output == NULL)
        return cg_error_set(CG_ERR_INVALID_PARAM, "reducescatter of tensor "
                            "'%s': output buffer is NULL (this rank's slice "
                            "has %lld rows)", t->name, (long long)rows);
    if (out_bytes > 0 && (char *)t->output < (const char *)t->input +
                                                 in_bytes &&
        (const char *)t->input < (char *)t->output + out_bytes)
        return cg_error_set(CG_ERR_INVALID_PARAM, "reducescatter of tensor "
                            "'%s': the output overlaps the input", t->name);
    w->op = (int32_t)op;
    w->prescale = prescale;
    w->postscale = postscale;
    return CG_OK;
}

cg_status_t cg_hvd_enqueue_reducescatter(cg_hvd_core_h core,
                                         const cg_hvd_tensor_t *t,
                                         cg_redop_t op, double prescale,
                                         double postscale,
                                         cg_hvd_req_h *req_p)
{
    cg_hvd_wire_t w;
    cg_status_t st = cg_hvd_route(&core, t, "reducescatter");

    if (st == CG_OK)
        st = cg_hvd_reducescatter_wire(core, t, op, prescale, postscale,
                                       &w);

    if (st != CG_OK)
        return st;
    return cg_hvd_enqueue(core, t, CG_HVD_REDUCESCATTER, &w, req_p);
}

/* Bytes of one first-dimension row of e. */
static size_t cg__row_bytes(const cg_hvd_entry_t *e)
{
    size_t row = cg_dtype_size((cg_dtype_t)e->w.dtype);

    for (int d = 1; d < e->w.ndim; d++)
        row *= (size_t)e->w.shape[d];
    return row;
}

/* Rank r's rows of e, as byte offset into the input and length. */
static void cg__slice(const cg_hvd_core_t *core, const cg_hvd_entry_t *e,
                      int r, size_t *off_p, size_t *len_p)
{
    int64_t start, rows;
    size_t row = cg__row_bytes(e);

    cg_hvd_reducescatter_rows(e->w.shape[0], core->size, r, &start, &rows);
    *off_p = (size_t)start * row;
    *len_p = (size_t)rows * row;
}

static size_t cg__in_bytes(const cg_hvd_entry_t *e)
{
    return cg_hvd_wire_count(&e->w) * cg_dtype_size((cg_dtype_t)e->w.dtype);
}

static bool cg__fusable(const cg_hvd_entry_t *a, const cg_hvd_entry_t *b)
{
    return !b->done && !b->failed && b->w.type == CG_HVD_REDUCESCATTER &&
           a->w.device == b->w.device && a->w.dtype == b->w.dtype &&
           a->w.op == b->w.op && a->w.prescale == b->w.prescale &&
           a->w.postscale == b->w.postscale;
}

/* Marks ready[i] and the reducescatters after it that fit the capacity
 * with it as group `group` (agreed sizes and capacity: the same choice on
 * every rank). Returns the members; *fused_p false when the head runs
 * alone (fusion off, or larger than the buffer). */
static size_t cg__group(cg_hvd_core_t *core, size_t i, int group,
                        bool *fused_p)
{
    cg_hvd_entry_t *head = core->ready[i];
    size_t cap = 0, used = 0, n = 0;

    if (core->fbuf != NULL)
        cap = core->fusion_cap < core->fbuf_len ? core->fusion_cap
                                                : core->fbuf_len;
    *fused_p = cg__in_bytes(head) <= cap && cg__in_bytes(head) > 0;
    if (!*fused_p) {
        head->group = group;
        return 1;
    }
    for (size_t j = i; j < core->ready_len; j++) {
        cg_hvd_entry_t *e = core->ready[j];
        size_t bytes = cg__in_bytes(e);
        if (!cg__fusable(head, e) || bytes > cap - used)
            continue;
        e->group = group;
        used += bytes;
        n++;
    }
    return n;
}

/* After a CUDA tensor's input was copied to the host: a failed copy
 * breaks the group (the others would reduce bytes never written). */
static cg_status_t cg__copied(cg_hvd_core_t *core, const cg_hvd_entry_t *e)
{
    char why[256];
    cg_status_t st;

    if (e->w.device < 0 || (st = cg_hvd_gpu_copy_status(core->gpu)) == CG_OK)
        return CG_OK;
    snprintf(why, sizeof(why), "%s", cg_last_error());
    cg_comm_fail(core->comm);
    return cg_error_set(st, "reducescatter of tensor '%s': copying this "
                        "rank's input off device %d failed: %s", e->w.name,
                        cg_hvd_gpu_device(core->gpu), why);
}

/* The collective: host tensors on the host backend, CUDA tensors (staged
 * in host memory) on the engine's ring. */
static cg_status_t cg__run(cg_hvd_core_t *core, const cg_hvd_entry_t *e,
                           const void *send, void *recv)
{
    cg_backend_t *be = core->be_cpu;
    const size_t *counts = core->rs_counts;
    cg_dtype_t dt = (cg_dtype_t)e->w.dtype;
    cg_redop_t op = (cg_redop_t)e->w.op;

    if (e->w.device < 0 && be != NULL && be->ops->reducescatter != NULL)
        return be->ops->reducescatter(be, send, recv, counts, dt, op,
                                      e->w.prescale, e->w.postscale);
    return cg_reduce_scatterv(core->comm, send, recv, counts, dt, op,
                              e->w.prescale, e->w.postscale);
}

static const char *cg__activity(const cg_hvd_core_t *core,
                                const cg_hvd_entry_t *e)
{
    if (e->w.device < 0 && core->be_cpu != NULL &&
        core->be_cpu->ops->reducescatter != NULL)
        return core->be_cpu->ops->reducescatter_activity;
    return CG__RS_ACTIVITY;
}

/* This rank's offset, in bytes, of its block in core->rs_counts' layout. */
static size_t cg__mine_at(const cg_hvd_core_t *core, size_t el)
{
    size_t at = 0;

    for (int r = 0; r < core->rank; r++)
        at += core->rs_counts[r] * el;
    return at;
}

/* The group packed rank-major in the fusion buffer, reduce-scattered in
 * place, this rank's block cut into the members' outputs. */
static cg_status_t cg__fused(cg_hvd_core_t *core, size_t i, int group,
                             uint64_t tl_t0)
{
    cg_hvd_entry_t *head = core->ready[i];
    size_t el = cg_dtype_size((cg_dtype_t)head->w.dtype), pos = 0, mine;
    char *fbuf = core->fbuf;
    cg_status_t st;

    for (int r = 0; r < core->size; r++) {
        core->rs_counts[r] = 0;
        for (size_t j = i; j < core->ready_len; j++) {
            cg_hvd_entry_t *e = core->ready[j];
            size_t off, len;
            if (e->w.type != CG_HVD_REDUCESCATTER || e->group != group)
                continue;
            cg__slice(core, e, r, &off, &len);
            if (len > 0)
                cg_hvd_copy_in(core, e, fbuf + pos,
                               (const char *)e->local->input + off, len);
            pos += len;
            core->rs_counts[r] += len / el;
        }
    }
    st = cg__copied(core, head);
    if (st != CG_OK)
        return st;
    cg_hvd_tl_fused(core, i, group, CG_HVD_TL_PACKED, tl_t0,
                    cg__activity(core, head));
    mine = cg__mine_at(core, el);
    st = cg__run(core, head, fbuf, fbuf + mine);
    cg_hvd_tl_fused(core, i, group, CG_HVD_TL_REDUCED, 0, NULL);
    for (size_t j = i; j < core->ready_len && st == CG_OK; j++) {
        cg_hvd_entry_t *e = core->ready[j];
        size_t off, len;
        if (e->w.type != CG_HVD_REDUCESCATTER || e->group != group)
            continue;
        cg__slice(core, e, core->rank, &off, &len);
        if (len > 0)
            st = cg_hvd_copy_out(core, e, e->local->output, fbuf + mine,
                                 len);
        mine += len;
    }
    if (st == CG_OK && head->w.device >= 0) /* CUDA copies: wait once */
        st = cg_hvd_gpu_sync(core->gpu);
    return st;
}

/* A CUDA tensor alone: its whole input staged in governed host memory. */
/* A CUDA tensor too large to fuse, staged whole on the host. The staging
 * memory is tried twice (an injected fault passes the second time), then
 * every rank's verdict is agreed: where one rank has none, every rank
 * fails this tensor (*soft_p: the comm stays usable, the job goes on). */
static cg_status_t cg__alone_cuda(cg_hvd_core_t *core, cg_hvd_entry_t *e,
                                  bool *soft_p)
{
    size_t bytes = cg__in_bytes(e), el = cg_dtype_size(e->w.dtype), off, len;
    char why[256] = "";
    void *stage = NULL;
    int64_t bad;
    cg_status_t st;

    st = cg_governor_alloc(core->gov, CG_MEM_CAT_STAGING, bytes, &stage);
    if (st != CG_OK)
        st = cg_governor_alloc(core->gov, CG_MEM_CAT_STAGING, bytes, &stage);
    if (st != CG_OK) {
        snprintf(why, sizeof(why), "%s", cg_last_error());
        stage = NULL;
    }
    bad = st == CG_OK ? 0 : core->rank + 1;
    st = cg_allreduce(core->comm, &bad, &bad, 1, CG_DTYPE_I64, CG_OP_MAX, 1.0,
                      1.0);
    if (st != CG_OK || bad != 0) {
        cg_governor_free(core->gov, CG_MEM_CAT_STAGING, stage, bytes);
        if (st != CG_OK)
            return st;
        *soft_p = true;
        return cg_error_set(CG_ERR_NO_MEMORY, "reducescatter of tensor "
                            "'%s': rank %d has no host memory to stage its "
                            "%zu bytes%s%s", e->w.name, (int)bad - 1, bytes,
                            why[0] != '\0' ? ": " : "", why);
    }
    cg_hvd_copy_in(core, e, stage, e->local->input, bytes);
    st = cg__copied(core, e);
    cg__slice(core, e, core->rank, &off, &len);
    if (st == CG_OK)
        st = cg_reduce_scatterv(core->comm, stage,
                                (char *)stage + cg__mine_at(core, el),
                                core->rs_counts, e->w.dtype, e->w.op,
                                e->w.prescale, e->w.postscale);
    if (st == CG_OK && len > 0)
        st = cg_hvd_copy_out(core, e, e->local->output,
                             (char *)stage + cg__mine_at(core, el), len);
    if (st == CG_OK)
        st = cg_hvd_gpu_sync(core->gpu);
    cg_governor_free(core->gov, CG_MEM_CAT_STAGING, stage, bytes);
    return st;
}

static cg_status_t cg__alone(cg_hvd_core_t *core, cg_hvd_entry_t *e,
                             bool *soft_p)
{
    size_t el = cg_dtype_size((cg_dtype_t)e->w.dtype), off, len;

    for (int r = 0; r < core->size; r++) {
        cg__slice(core, e, r, &off, &len);
        core->rs_counts[r] = len / el;
    }
    if (cg__in_bytes(e) == 0)
        return CG_OK; /* nothing on any rank: every rank agrees */
    if (e->w.device >= 0)
        return cg__alone_cuda(core, e, soft_p);
    return cg__run(core, e, e->local->input, e->local->output);
}

/* Completes the group's requests: one lock and one wake-up for all. */
static void cg__complete(cg_hvd_core_t *core, size_t i, int group,
                         cg_status_t st)
{
    const char *msg = st == CG_OK ? NULL : cg_last_error();

    cg_hvd_complete_begin(core);
    for (size_t j = i; j < core->ready_len; j++) {
        cg_hvd_entry_t *e = core->ready[j];
        if (e->group != group || e->w.type != CG_HVD_REDUCESCATTER)
            continue;
        e->done = true;
        cg_hvd_req_complete_locked(core, e->local, st, msg);
    }
    cg_hvd_complete_end(core);
}

cg_status_t cg_hvd_reducescatter_run(cg_hvd_core_t *core, size_t i)
{
    cg_hvd_entry_t *head = core->ready[i];
    uint64_t tl_t0 = cg_hvd_tl_now(core), t0 = cg_now_ns();
    int group = (int)i + 1;
    bool fused, soft = false;
    size_t n = cg__group(core, i, group, &fused);
    cg_status_t st;

    st = fused ? cg__fused(core, i, group, tl_t0)
               : cg__alone(core, head, &soft);
    core->tstats.reducescatter_calls++;
    core->tstats.reducescatter_tensors += n;
    for (size_t j = i; j < core->ready_len; j++)
        if (core->ready[j]->group == group &&
            core->ready[j]->w.type == CG_HVD_REDUCESCATTER)
            core->tstats.reducescatter_bytes += cg__in_bytes(core->ready[j]);
    cg_hvd_metrics_op(core, CG_HVD_REDUCESCATTER, cg_now_ns() - t0);
    if (!fused)
        cg_hvd_tl_single(core, head, tl_t0, cg__activity(core, head));
    cg__complete(core, i, group, st);
    if (fused)
        cg_hvd_tl_fused(core, i, group, CG_HVD_TL_DONE, 0, NULL);
    return soft ? CG_OK : st; /* a tensor every rank failed: go on */
}
