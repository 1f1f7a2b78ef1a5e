/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Allgather in the Horovod shim's core, fused as Horovod fuses it: the
 * ready allgathers of one device and dtype whose whole results fit the
 * agreed fusion capacity together are packed into the host fusion buffer
 * rank-major (rank r's rows of each tensor, in ready order, then rank
 * r+1's), gathered by one cg_allgatherv and cut out into each tensor's
 * result (governed, CG_MEM_CAT_STAGING). A tensor alone, or larger than
 * the capacity, is gathered straight into its result. Always on the
 * engine over core->comm, whatever the backends: its failure protocol
 * (cg_comm_fail closes every connection) lets a rank that cannot allocate
 * a result stop the others instead of leaving them in a collective that
 * never ends. Background thread only. Layer: core/engine; calls core/coll/coll.h,
 * the governor and the fusion code's copies (hvd_fusion.c).
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

#define CG__GATHER_ACTIVITY "COLLGUARD_ALLGATHER"
/* Attempts at a result buffer: a transient (injected) failure is retried;
 * a persistent one breaks the group, since every rank must join. */
#define CG__GATHER_ALLOC_TRIES 3

/* Bytes of one first-dimension row of e. */
static size_t cg__row_bytes(const cg_hvd_entry_t *e)
{
    size_t row = cg_dtype_size((cg_dtype_t)e->w.dtype);

    for (int d = 1; d < e->w.ndim; d++)
        row *= (size_t)e->w.shape[d];
    return row;
}

static int64_t cg__dim0_sum(const cg_hvd_core_t *core,
                            const cg_hvd_entry_t *e)
{
    int64_t dim0 = 0;

    for (int r = 0; r < core->size; r++)
        dim0 += e->dim0[r];
    return dim0;
}

/* The bytes of e's gathered result; false when they, a row or the summed
 * first dimension overflow (an absurd shape: every rank reaches the same
 * verdict from the agreed shapes). Checked before any size is used. */
static bool cg__result_bytes(const cg_hvd_core_t *core,
                             const cg_hvd_entry_t *e, size_t *bytes_p)
{
    size_t row = cg_dtype_size((cg_dtype_t)e->w.dtype), rows = 0;

    for (int d = 1; d < e->w.ndim; d++)
        if (__builtin_mul_overflow(row, (size_t)e->w.shape[d], &row))
            return false;
    for (int r = 0; r < core->size; r++)
        if (__builtin_add_overflow(rows, (size_t)e->dim0[r], &rows))
            return false;
    return rows <= INT64_MAX && !__builtin_mul_overflow(rows, row, bytes_p);
}

/* Fails e alone on every rank (no collective, the comm stays usable). */
static cg_status_t cg__too_large(const cg_hvd_core_t *core,
                                 const cg_hvd_entry_t *e)
{
    char shape[128];
    size_t n = 0;

    shape[0] = '\0';
    for (int d = 1; d < e->w.ndim && n < sizeof(shape); d++)
        n += (size_t)snprintf(shape + n, sizeof(shape) - n, "%s%lld",
                              d > 1 ? ", " : "", (long long)e->w.shape[d]);
    return cg_error_set(CG_ERR_INVALID_PARAM, "allgather of tensor '%s': "
                        "its result (the first dimensions of %d ranks, "
                        "rows of [%s] %s) is larger than the address space",
                        e->w.name, core->size, shape,
                        cg_dtype_name((cg_dtype_t)e->w.dtype));
}

static bool cg__fusable(const cg_hvd_entry_t *a, const cg_hvd_entry_t *b)
{
    return !b->done && !b->failed && b->w.type == CG_HVD_ALLGATHER &&
           a->w.device == b->w.device && a->w.dtype == b->w.dtype;
}

/* The host fusion buffer's agreed capacity (0: fusion off this cycle). */
static size_t cg__capacity(const cg_hvd_core_t *core)
{
    if (core->fbuf == NULL)
        return 0;
    return core->fusion_cap < core->fbuf_len ? core->fusion_cap
                                             : core->fbuf_len;
}

/* Marks ready[i] and the allgathers after it that fit the capacity with
 * it as group `group` (the same choice on every rank: sizes, dtypes and
 * the capacity are agreed); the group stops at the first that does not
 * fit. Returns the members (1 with fusion off). */
static size_t cg__group(cg_hvd_core_t *core, size_t i, int group)
{
    cg_hvd_entry_t *head = core->ready[i];
    size_t cap = cg__capacity(core), used = 0, n = 0;

    if (cap == 0) {
        head->group = group;
        return 1;
    }
    for (size_t j = i; j < core->ready_len; j++) {
        cg_hvd_entry_t *e = core->ready[j];
        size_t bytes;
        if (!cg__fusable(head, e) || !cg__result_bytes(core, e, &bytes))
            continue;
        if (bytes > cap - used && n > 0)
            break;
        e->group = group;
        used += bytes;
        n++;
        if (used > cap) /* the head alone is larger: gathered alone */
            break;
    }
    return n;
}

/* Every member's result buffer and the block sizes; on failure the
 * group is broken (the others fail instead of waiting) and the error
 * names the tensor and the sizes. */
static cg_status_t cg__alloc(cg_hvd_core_t *core, size_t i, int group,
                             size_t **blocks_p)
{
    size_t blen = (size_t)core->size * sizeof(size_t);
    cg_status_t st = CG_OK;
    char why[256];

    for (size_t j = i; j < core->ready_len && st == CG_OK; j++) {
        cg_hvd_entry_t *e = core->ready[j];
        struct cg_hvd_req *req = e->local;
        int64_t dim0;
        if (e->group != group)
            continue;
        dim0 = cg__dim0_sum(core, e);
        req->gather_bytes = (size_t)dim0 * cg__row_bytes(e);
        for (int a = 0; a < CG__GATHER_ALLOC_TRIES && req->gather_bytes > 0 &&
                        req->gather == NULL; a++)
            st = cg_governor_alloc(core->gov, CG_MEM_CAT_STAGING,
                                   req->gather_bytes, &req->gather);
        if (st == CG_OK)
            continue;
        snprintf(why, sizeof(why), "%s", cg_last_error());
        req->gather_bytes = 0;
        cg_comm_fail(core->comm);
        return cg_error_set(st, "allgather of tensor '%s': no memory for "
                            "the %lld x %zu-byte result: %s", e->w.name,
                            (long long)dim0, cg__row_bytes(e), why);
    }
    st = cg_governor_alloc(core->gov, CG_MEM_CAT_CONTROL, blen,
                           (void **)blocks_p);
    if (st != CG_OK) {
        snprintf(why, sizeof(why), "%s", cg_last_error());
        cg_comm_fail(core->comm);
        return cg_error_set(st, "allgather of tensor '%s': no memory for "
                            "the %d block sizes: %s",
                            core->ready[i]->w.name, core->size, why);
    }
    return CG_OK;
}

/* After this rank's rows of CUDA tensors were copied in: a failed copy
 * breaks the group (the others would otherwise gather rows never
 * written), as a failed CUDA copy breaks the GPU backend for allreduce. */
static cg_status_t cg__rows_copied(cg_hvd_core_t *core,
                                   const cg_hvd_entry_t *e)
{
    char why[256];
    cg_status_t st;

    if (e->w.device < 0 || (st = cg_hvd_gpu_copy_status(core->gpu)) == CG_OK)
        return CG_OK;
    snprintf(why, sizeof(why), "%s", cg_last_error());
    cg_comm_fail(core->comm);
    return cg_error_set(st, "allgather of tensor '%s': copying this rank's "
                        "rows off device %d failed: %s", e->w.name,
                        cg_hvd_gpu_device(core->gpu), why);
}

/* One tensor straight into its result (this rank's rows copied in first
 * for CUDA tensors, sent from the input for host ones). */
static cg_status_t cg__gather_alone(cg_hvd_core_t *core, cg_hvd_entry_t *e,
                                    size_t *blocks)
{
    struct cg_hvd_req *req = e->local;
    size_t row = cg__row_bytes(e), off = 0;
    const void *send = req->input;
    cg_status_t st;

    for (int r = 0; r < core->size; r++) {
        blocks[r] = (size_t)e->dim0[r] * row;
        off += r < core->rank ? blocks[r] : 0;
    }
    if (e->w.device >= 0 && blocks[core->rank] > 0) {
        send = (char *)req->gather + off;
        cg_hvd_copy_in(core, e, (void *)send, req->input,
                       blocks[core->rank]);
        st = cg__rows_copied(core, e);
        if (st != CG_OK)
            return st;
    }
    return cg_allgatherv(core->comm, send, req->gather, blocks);
}

/* The group packed rank-major in the fusion buffer, gathered in place,
 * then each rank's block cut into the members' results. */
static cg_status_t cg__gather_fused(cg_hvd_core_t *core, size_t i,
                                    int group, size_t *blocks,
                                    uint64_t tl_t0)
{
    char *fbuf = core->fbuf;
    size_t off = 0, pos;
    cg_status_t st;

    for (int r = 0; r < core->size; r++) {
        blocks[r] = 0;
        for (size_t j = i; j < core->ready_len; j++) {
            cg_hvd_entry_t *e = core->ready[j];
            if (e->w.type == CG_HVD_ALLGATHER && e->group == group)
                blocks[r] += (size_t)e->dim0[r] * cg__row_bytes(e);
        }
        off += r < core->rank ? blocks[r] : 0;
    }
    pos = off;
    for (size_t j = i; j < core->ready_len; j++) {
        cg_hvd_entry_t *e = core->ready[j];
        size_t len;
        if (e->w.type != CG_HVD_ALLGATHER || e->group != group)
            continue; /* other entries of the cycle have no dim0 */
        len = (size_t)e->dim0[core->rank] * cg__row_bytes(e);
        if (len > 0)
            cg_hvd_copy_in(core, e, fbuf + pos, e->local->input, len);
        pos += len;
        e->foff = 0; /* bytes of its result filled so far */
    }
    st = cg__rows_copied(core, core->ready[i]);
    if (st != CG_OK)
        return st;
    cg_hvd_tl_fused(core, i, group, CG_HVD_TL_PACKED, tl_t0,
                    CG__GATHER_ACTIVITY);
    st = cg_allgatherv(core->comm, fbuf + off, fbuf, blocks);
    cg_hvd_tl_fused(core, i, group, CG_HVD_TL_REDUCED, 0, NULL);
    pos = 0;
    for (int r = 0; r < core->size && st == CG_OK; r++) {
        for (size_t j = i; j < core->ready_len; j++) {
            cg_hvd_entry_t *e = core->ready[j];
            size_t len;
            if (e->w.type != CG_HVD_ALLGATHER || e->group != group)
                continue;
            len = (size_t)e->dim0[r] * cg__row_bytes(e);
            if (len == 0)
                continue;
            memcpy((char *)e->local->gather + e->foff, fbuf + pos, len);
            e->foff += len;
            pos += len;
        }
    }
    return st;
}

/* Completes the group's requests: one lock and one wake-up for all. */
static void cg__complete(cg_hvd_core_t *core, size_t i, int group,
                         cg_status_t st)
{
    const char *msg = st == CG_OK ? NULL : cg_last_error();

    cg_hvd_complete_begin(core);
    for (size_t j = i; j < core->ready_len; j++) {
        cg_hvd_entry_t *e = core->ready[j];
        if (e->group != group)
            continue;
        e->done = true;
        e->local->gather_dim0 = st == CG_OK ? cg__dim0_sum(core, e) : 0;
        cg_hvd_req_complete_locked(core, e->local, st, msg);
    }
    cg_hvd_complete_end(core);
}

cg_status_t cg_hvd_allgather_run(cg_hvd_core_t *core, size_t i)
{
    cg_hvd_entry_t *head = core->ready[i];
    uint64_t tl_t0 = cg_hvd_tl_now(core), t0 = cg_now_ns();
    int group = (int)i + 1;
    size_t *blocks = NULL, n, bytes;
    cg_status_t st;
    bool issued;

    if (!cg__result_bytes(core, head, &bytes)) {
        st = cg__too_large(core, head);
        head->group = group;
        cg__complete(core, i, group, st);
        return st;
    }
    n = cg__group(core, i, group);
    st = cg__alloc(core, i, group, &blocks);
    issued = st == CG_OK; /* a collective ran (every rank alike) */

    if (issued && n == 1)
        st = cg__gather_alone(core, head, blocks);
    else if (issued)
        st = cg__gather_fused(core, i, group, blocks, tl_t0);
    if (issued) {
        core->tstats.allgather_calls++;
        core->tstats.allgather_tensors += n;
        for (size_t j = i; j < core->ready_len; j++) {
            size_t b;
            if (core->ready[j]->group == group &&
                cg__result_bytes(core, core->ready[j], &b))
                core->tstats.allgather_bytes += b;
        }
        cg_hvd_metrics_op(core, CG_HVD_ALLGATHER, cg_now_ns() - t0);
    }
    if (issued && n == 1)
        cg_hvd_tl_single(core, head, tl_t0, CG__GATHER_ACTIVITY);
    cg__complete(core, i, group, st);
    if (issued && n > 1)
        cg_hvd_tl_fused(core, i, group, CG_HVD_TL_DONE, 0, NULL);
    cg_governor_free(core->gov, CG_MEM_CAT_CONTROL, blocks,
                     (size_t)core->size * sizeof(size_t));
    return st;
}
