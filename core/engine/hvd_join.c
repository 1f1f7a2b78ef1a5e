/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Horovod's join in the shim's core: a rank out of data enqueues a join
 * record; once it arrived (in the records round, so every rank learns it
 * in the same cycle and in the same order), every name the other ranks
 * all announced is ready: an allreduce runs with this rank's part a
 * stand-in request of zeros, any other operation fails on the ranks that
 * enqueued it (Horovod: not supported with join). The response cache is
 * left alone while a rank is joined (its waiting requests go to the
 * records round), and when every rank has joined the joins complete with
 * the last rank to join. Background thread, except the enqueue and the
 * result. Layer: core/engine; calls the governor.
 */
#include <ctype.h>
#include <stdio.h>
#include <string.h>

#include "core/base/error.h"
#include "core/engine/hvd_core.h"

cg_status_t cg_hvd_enqueue_join(cg_hvd_core_h core, int32_t process_set,
                                cg_hvd_req_h *req_p)
{
    cg_hvd_tensor_t t;
    cg_hvd_wire_t w;
    cg_status_t st = cg_hvd_route_id(&core, process_set, "join");

    if (st != CG_OK)
        return st;
    if (core == NULL)
        return cg_error_set(CG_ERR_NOT_INITIALIZED, "join: the collective "
                            "core is NULL (cg_hvd_core_create first)");
    memset(&t, 0, sizeof(t));
    memset(&w, 0, sizeof(w));
    t.name = CG_HVD_JOIN_NAME;
    snprintf(w.name, sizeof(w.name), "%s", CG_HVD_JOIN_NAME);
    w.type = CG_HVD_WIRE_JOIN;
    w.dtype = CG_DTYPE_U8;
    w.ndim = 1; /* no elements */
    w.device = -1;
    w.prescale = w.postscale = 1.0;
    return cg_hvd_enqueue(core, &t, (cg_hvd_op_type_t)CG_HVD_WIRE_JOIN, &w,
                          req_p);
}

cg_status_t cg_hvd_join_result(cg_hvd_req_h req, int *last_rank_p)
{
    if (req == NULL || last_rank_p == NULL || !cg_hvd_poll(req) ||
        req->w.type != CG_HVD_WIRE_JOIN || req->status != CG_OK)
        return cg_error_set(CG_ERR_INVALID_PARAM, "cg_hvd_join_result: not "
                            "a successfully completed join");
    *last_rank_p = (int)req->gather_dim0;
    return CG_OK;
}

static bool cg__is_joined(const cg_hvd_core_t *core, int rank)
{
    return (core->joined[rank / 64] >> (rank % 64)) & 1u;
}

void cg_hvd_join_announce(cg_hvd_core_t *core, int rank,
                          struct cg_hvd_req *req)
{
    if (req != NULL)
        core->join_req = req;
    if (cg__is_joined(core, rank)) /* a second join of that rank */
        return;
    core->joined[rank / 64] |= 1ull << (rank % 64);
    core->n_joined++;
    core->last_joined = rank;
}

/* Every rank announced e or has joined. */
static bool cg__covered(const cg_hvd_core_t *core, const cg_hvd_entry_t *e)
{
    for (int r = 0; r < core->size; r++)
        if (!((e->ranks[r / 64] >> (r % 64)) & 1u) && !cg__is_joined(core, r))
            return false;
    return true;
}

/* The first round with a rank joined: requests waiting on cache bits go
 * to the next records round (lookups are off while a rank is joined). */
static cg_status_t cg__unpend_cache(cg_hvd_core_t *core)
{
    cg_hvd_cache_t *c = &core->cache;
    cg_status_t st = CG_OK;

    for (uint32_t i = 0; c->npending > 0 && i < c->hw && st == CG_OK; i++) {
        cg_hvd_slot_t *s = cg_hvd_cache_slot(c, i);
        if (s->pending == NULL)
            continue;
        st = cg_hvd_reqv_push(core, &core->redo, cg_hvd_cache_unpend(c, s));
    }
    return st;
}

/* e is ready with some ranks joined: what this rank does with it. */
static cg_status_t cg__ready(cg_hvd_core_t *core, cg_hvd_entry_t *e)
{
    const char *what = cg_hvd_type_name(e->w.type);

    if (!e->failed && e->w.type != CG_HVD_ALLREDUCE) {
        e->failed = true;
        snprintf(e->err, sizeof(e->err), "%s of tensor '%s': %c%s is not "
                 "supported with join at this time (rank %d has joined)",
                 what, e->w.name, toupper((unsigned char)what[0]), what + 1,
                 cg_hvd_job_rank_of(core, core->last_joined));
        if (e->w.type == CG_HVD_ALLGATHER)
            snprintf(e->err + strlen(e->err), sizeof(e->err) - strlen(e->err),
                     "; specify sparse_as_dense=True if using "
                     "DistributedOptimizer");
    } else if (!e->failed && e->w.device >= 0) {
        e->failed = true;
        snprintf(e->err, sizeof(e->err), "allreduce of CUDA tensor '%s': a "
                 "joined rank cannot contribute zeros in CUDA memory (join "
                 "is supported for host tensors only)", e->w.name);
    }
    if (e->local == NULL && !e->failed) {
        cg_status_t st = cg_hvd_req_stand_in(core, &e->w, &e->local);
        if (st != CG_OK)
            return st;
    }
    return cg_hvd_ready_push(core, e);
}

/* Every rank joined: the joins complete with the last one, and the state
 * starts over (a job may join again, say each epoch). */
static void cg__all_joined(cg_hvd_core_t *core)
{
    struct cg_hvd_req *req = core->join_req;
    int last = cg_hvd_job_rank_of(core, core->last_joined);

    if (req != NULL) {
        req->gather_dim0 = last;
        CG_HVD_FOR(it, &req->followers)
            cg_list_entry(it, struct cg_hvd_req, follow_link)->gather_dim0 =
                last;
        cg_hvd_req_complete(core, req, CG_OK, NULL);
    }
    cg_debug(core->log, "join: every rank joined, the last was rank %d",
             last);
    memset(core->joined, 0, (size_t)(core->size + 63) / 64 * sizeof(uint64_t));
    core->n_joined = 0;
    core->last_joined = -1;
    core->join_req = NULL;
}

cg_status_t cg_hvd_join_round(cg_hvd_core_t *core, int joined_before)
{
    cg_status_t st = CG_OK;

    if (core->n_joined == 0)
        return CG_OK;
    if (joined_before == 0)
        st = cg__unpend_cache(core);
    CG_HVD_FOR(it, &core->table) {
        cg_hvd_entry_t *e = cg_list_entry(it, cg_hvd_entry_t, link);
        if (st != CG_OK)
            break;
        if (e->count < core->size && cg__covered(core, e))
            st = cg__ready(core, e);
    }
    if (st == CG_OK && core->n_joined == core->size)
        cg__all_joined(core);
    return st;
}
