/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The framework-facing half of the Horovod shim's core: enqueue (of a
 * tensor hvd_check.c checked; duplicate names by CG_DUPLICATE_POLICY;
 * each op's own checks and its process-set route are hvd_ops.c's,
 * hvd_rscatter.c's, hvd_group.c's and hvd_alltoall.c's),
 * the inbox and registry under the core's lock, and poll / wait / error /
 * release of requests, which are kept for reuse (the per-tensor path
 * allocates nothing once warm). Completion is called from the background
 * thread and wakes only threads waiting on what it completed.
 * Layer: core/engine; calls the governor for request memory.
 */
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "core/base/clock.h"
#include "core/base/error.h"
#include "core/engine/hvd_core.h"


/* Horovod's text for a name already being processed. */
#define CG__DUP_TEXT                                                          \
    "Requested to allreduce, allgather, or broadcast a tensor with the same " \
    "name as another tensor that is currently being processed.  If you "     \
    "want to request another tensor, use a different tensor name."

static bool cg__same_request(const struct cg_hvd_req *a,
                             const struct cg_hvd_req *b)
{
    return a->w.type == b->w.type && a->input == b->input &&
           a->output == b->output && a->count == b->count &&
           a->w.dtype == b->w.dtype && a->w.op == b->w.op &&
           a->w.root == b->w.root && a->w.prescale == b->w.prescale &&
           a->w.postscale == b->w.postscale;
}

/* Under the lock: a duplicate of a name in flight. */
static cg_status_t cg__duplicate(cg_hvd_core_t *core, struct cg_hvd_req *prim,
                                 struct cg_hvd_req *req)
{
    cg_hvd_name_t *n;
    /* Grouped and alltoall requests complete on their own terms. */
    bool own = req->w.group_n > 0 || prim->w.group_n > 0 ||
               req->w.type == CG_HVD_ALLTOALL;

    if (core->dup_policy == CG_DUP_POLICY_ERROR || own ||
        !cg__same_request(prim, req)) {
        core->stats.duplicates_refused++;
        return cg_error_set(CG_ERR_INVALID_PARAM, "%s (tensor '%s'%s)",
                            CG__DUP_TEXT, req->w.name,
                            core->dup_policy == CG_DUP_POLICY_ERROR
                                ? ", CG_DUPLICATE_POLICY=error"
                            : own ? ": a grouped or alltoall request is "
                                    "never coalesced"
                                  : ": a different buffer, size or op");
    }
    cg_list_push(&prim->followers, &req->follow_link);
    core->stats.duplicates++;
    CG_HVD_FOR(it, &core->warned)
        if (strcmp(cg_list_entry(it, cg_hvd_name_t, link)->name,
                   req->w.name) == 0)
            return CG_OK;
    if (cg_governor_alloc(core->gov, CG_MEM_CAT_CONTROL, sizeof(*n),
                          (void **)&n) == CG_OK) {
        memcpy(n->name, req->w.name, sizeof(n->name));
        cg_list_push(&core->warned, &n->link);
    }
    cg_warn(core->log, "tensor '%s' enqueued again while in flight (a hook "
            "registered twice?); coalesced: reduced once, both requests "
            "complete", req->w.name);
    return CG_OK;
}

/* Keeps at most this many released requests for reuse (~1 KiB each). */
#define CG__REQ_KEEP 8192

void cg_hvd_queue_init(cg_hvd_core_t *core)
{
    cg_list_init(&core->req_live);
    cg_list_init(&core->req_free);
    core->req_nfree = 0;
}

static void cg__req_free(cg_governor_t *gov, struct cg_hvd_req *req)
{
    cg_governor_free(gov, CG_MEM_CAT_STAGING, req->gather, req->gather_bytes);
    cg_governor_free(gov, CG_MEM_CAT_CONTROL, req->a2a, req->a2a_bytes);
    cg_governor_free(gov, CG_MEM_CAT_CONTROL, req, sizeof(*req));
}

/* Under the lock: a released request leaves the live list and is kept for
 * the next enqueue, or freed beyond CG__REQ_KEEP. */
static void cg__req_recycle(cg_hvd_core_t *core, struct cg_hvd_req *req)
{
    cg_list_del(&req->live_link);
    if (core->req_nfree >= CG__REQ_KEEP) {
        cg__req_free(core->gov, req);
        return;
    }
    cg_governor_free(core->gov, CG_MEM_CAT_STAGING, req->gather,
                     req->gather_bytes);
    cg_governor_free(core->gov, CG_MEM_CAT_CONTROL, req->a2a, req->a2a_bytes);
    req->gather = NULL; /* kept: only the request itself */
    req->a2a = NULL;
    cg_list_push(&core->req_free, &req->live_link);
    core->req_nfree++;
}

/* Locks the core and returns a request for w: a kept one, else a new one
 * from the governor (the lock is dropped while allocating), cleared but
 * for its message, holding w. Unlocked on failure. */
static cg_status_t cg__req_get_locked(cg_hvd_core_t *core,
                                      const cg_hvd_wire_t *w,
                                      struct cg_hvd_req **req_p)
{
    struct cg_hvd_req *req = NULL;
    cg_status_t st;

    pthread_mutex_lock(&core->lock);
    if (!cg_list_empty(&core->req_free)) {
        req = cg_list_entry(core->req_free.next, struct cg_hvd_req,
                            live_link);
        cg_list_del(&req->live_link);
        core->req_nfree--;
        /* The next enqueue's request: its lines were last written by the
         * background thread; fetch them for writing while this one runs. */
        if (!cg_list_empty(&core->req_free)) {
            char *next = (char *)cg_list_entry(core->req_free.next,
                                               struct cg_hvd_req, live_link);
            for (size_t l = 0; l < offsetof(struct cg_hvd_req, err); l += 64)
                __builtin_prefetch(next + l, 1);
        }
    } else {
        pthread_mutex_unlock(&core->lock);
        st = cg_governor_alloc(core->gov, CG_MEM_CAT_CONTROL, sizeof(*req),
                               (void **)&req);
        if (st != CG_OK)
            return st;
        pthread_mutex_lock(&core->lock);
        core->req_allocs++;
    }
    /* Cleared around the wire, which is copied whole. */
    memset(req, 0, offsetof(struct cg_hvd_req, w));
    req->w = *w;
    memset((char *)req + offsetof(struct cg_hvd_req, input), 0,
           offsetof(struct cg_hvd_req, err) -
               offsetof(struct cg_hvd_req, input));
    req->err[0] = '\0';
    *req_p = req;
    return CG_OK;
}

_Static_assert(offsetof(struct cg_hvd_req, input) ==
                   offsetof(struct cg_hvd_req, w) + sizeof(cg_hvd_wire_t),
               "the request's wire must be followed by input");

void cg_hvd_queue_fini(cg_hvd_core_t *core)
{
    pthread_mutex_lock(&core->lock);
    while (!cg_list_empty(&core->req_live)) {
        struct cg_hvd_req *req = cg_list_entry(core->req_live.next,
                                               struct cg_hvd_req, live_link);
        cg_list_del(&req->live_link);
        req->core = NULL; /* cg_hvd_release frees it alone */
    }
    while (!cg_list_empty(&core->req_free)) {
        struct cg_hvd_req *req = cg_list_entry(core->req_free.next,
                                               struct cg_hvd_req, live_link);
        cg_list_del(&req->live_link);
        cg__req_free(core->gov, req);
    }
    core->req_nfree = 0;
    pthread_mutex_unlock(&core->lock);
}

cg_status_t cg_hvd_enqueue(cg_hvd_core_t *core, const cg_hvd_tensor_t *t,
                           cg_hvd_op_type_t type, const cg_hvd_wire_t *w,
                           cg_hvd_req_h *req_p)
{
    return cg_hvd_enqueue_to(core, t, type, w, NULL, req_p);
}

cg_status_t cg_hvd_enqueue_to(cg_hvd_core_t *core, const cg_hvd_tensor_t *t,
                              cg_hvd_op_type_t type, const cg_hvd_wire_t *w,
                              cg_list_t *batch, cg_hvd_req_h *req_p)
{
    struct cg_hvd_req *req, *prim;
    uint64_t hash;
    cg_status_t st;

    if (req_p == NULL)
        return cg_error_set(CG_ERR_INVALID_PARAM, "%s of tensor '%s': req_p "
                            "is NULL", cg_hvd_type_name(type), w->name);
    hash = cg_hvd_name_hash(w->name);

    st = cg__req_get_locked(core, w, &req); /* one lock per enqueue */
    if (st != CG_OK)
        return st;
    cg_list_init(&req->link);
    cg_list_init(&req->reg_link);
    cg_list_init(&req->followers);
    cg_list_init(&req->follow_link);
    req->core = core;
    req->gov = core->gov;
    req->input = t->input;
    req->output = type == CG_HVD_ALLGATHER ? NULL : t->output;
    req->count = cg_hvd_wire_count(w);
    req->hash = hash;

    if (core->dead) {
        st = cg_error_set(core->dead_status, "%s of tensor '%s': the "
                          "collective core has stopped: %s",
                          cg_hvd_type_name(type), w->name, core->dead_msg);
        goto err_unlock;
    }
    CG_HVD_FOR(it, &core->registry[CG_HVD_BUCKET(req->hash)]) {
        prim = cg_list_entry(it, struct cg_hvd_req, reg_link);
        if (prim->hash == req->hash && strcmp(prim->w.name, w->name) == 0) {
            st = cg__duplicate(core, prim, req);
            if (st != CG_OK)
                goto err_unlock;
            goto out;
        }
    }
    cg_list_push(&core->registry[CG_HVD_BUCKET(req->hash)], &req->reg_link);
    if (batch != NULL) {
        cg_list_push(batch, &req->link);
    } else {
        cg_list_push(&core->inbox, &req->link);
        core->inbox_len++;
    }
out:
    cg_list_push(&core->req_live, &req->live_link);
    pthread_mutex_unlock(&core->lock);
    *req_p = req;
    return CG_OK;

err_unlock:
    cg_list_push(&core->req_live, &req->live_link);
    cg__req_recycle(core, req);
    pthread_mutex_unlock(&core->lock);
    return st;
}

cg_status_t cg_hvd_req_stand_in(cg_hvd_core_t *core, const cg_hvd_wire_t *w,
                                struct cg_hvd_req **req_p)
{
    size_t count = cg_hvd_wire_count(w);
    size_t bytes = count * cg_dtype_size((cg_dtype_t)w->dtype);
    struct cg_hvd_req *req;
    void *zeros = NULL;
    cg_status_t st = CG_OK;

    if (bytes > 0)
        st = cg_governor_alloc(core->gov, CG_MEM_CAT_STAGING, bytes, &zeros);
    if (st == CG_OK)
        st = cg__req_get_locked(core, w, &req);
    if (st != CG_OK) {
        cg_governor_free(core->gov, CG_MEM_CAT_STAGING, zeros, bytes);
        return st;
    }
    if (bytes > 0)
        memset(zeros, 0, bytes);
    cg_list_init(&req->reg_link);
    cg_list_init(&req->followers);
    cg_list_init(&req->follow_link);
    req->core = core;
    req->gov = core->gov;
    req->input = zeros;
    req->output = zeros;
    req->count = count;
    req->hash = cg_hvd_name_hash(w->name);
    req->gather = zeros; /* freed with the request */
    req->gather_bytes = bytes;
    req->released = true; /* recycled once completed */
    cg_list_push(&core->owned, &req->link); /* failed with the rest */
    cg_list_push(&core->req_live, &req->live_link);
    pthread_mutex_unlock(&core->lock);
    *req_p = req;
    return CG_OK;
}

static bool cg__req_finish(cg_hvd_core_t *core, struct cg_hvd_req *req,
                           cg_status_t st, const char *msg);

/* Under the lock: a grouped request's completion, held until its
 * group's last member arrives; then every member is finished with the
 * group's status, the first failure of any (true: wake a waiter). */
static bool cg__group_arrive(cg_hvd_core_t *core, struct cg_hvd_req *req,
                             cg_status_t st, const char *msg)
{
    cg_hvd_group_t *g = req->grp;
    bool wake = false;

    if (st != CG_OK && g->st == CG_OK) {
        g->st = st;
        snprintf(g->err, sizeof(g->err), "%s",
                 msg != NULL ? msg : cg_status_string(st));
    }
    if (--g->left > 0)
        return false;
    /* Last to first: whoever sees member 0 done (the handle mpi_lib_v2
     * polls) sees every member done. */
    for (int i = g->n - 1; i >= 0; i--) {
        struct cg_hvd_req *m = g->members[i];
        m->grp = NULL;
        wake |= cg__req_finish(core, m, g->st,
                               g->st == CG_OK ? NULL : g->err);
    }
    cg_governor_free(core->gov, CG_MEM_CAT_CONTROL, g,
                     sizeof(*g) + (size_t)g->n * sizeof(void *));
    return wake;
}

/* Under the lock: one request done (a grouped one once its group is),
 * recycled if already released; true when a thread waits on it. */
static bool cg__finish(cg_hvd_core_t *core, struct cg_hvd_req *req,
                       cg_status_t st, const char *msg)
{
    if (req->grp != NULL)
        return cg__group_arrive(core, req, st, msg);
    return cg__req_finish(core, req, st, msg);
}

static bool cg__req_finish(cg_hvd_core_t *core, struct cg_hvd_req *req,
                           cg_status_t st, const char *msg)
{
    size_t len;

    req->status = st;
    if (msg != NULL) { /* else still empty since the enqueue */
        len = strnlen(msg, sizeof(req->err) - 1);
        memcpy(req->err, msg, len);
        req->err[len] = '\0';
    }
    if (req->released) {
        cg__req_recycle(core, req);
        return false;
    }
    atomic_store_explicit(&req->done, 1, memory_order_release);
    if (req->waiters == 0)
        return false;
    /* Its waiters stop counting now, not when they get the lock back: a
     * cycle that starts in between must not see them as still waiting
     * (it would hurry into an empty negotiation round). */
    core->waiters -= req->waiters;
    req->waiters = 0;
    return true;
}

void cg_hvd_stats_publish(cg_hvd_core_t *core)
{
    const cg_hvd_stats_t *t = &core->tstats;
    cg_hvd_stats_t *s = &core->stats;

    s->cycles = t->cycles;
    s->allreduce_calls = t->allreduce_calls;
    s->allreduce_tensors = t->allreduce_tensors;
    s->fused_calls = t->fused_calls;
    s->max_fused_tensors = t->max_fused_tensors;
    s->mismatches = t->mismatches;
    s->fusion_bytes = t->fusion_bytes;
    s->fused_bytes = t->fused_bytes;
    s->allgather_calls = t->allgather_calls;
    s->allgather_tensors = t->allgather_tensors;
    s->negotiate_ns = t->negotiate_ns;
    s->execute_ns = t->execute_ns;
    s->broadcast_calls = t->broadcast_calls;
    s->allreduce_bytes = t->allreduce_bytes;
    s->broadcast_bytes = t->broadcast_bytes;
    s->allgather_bytes = t->allgather_bytes;
    s->reducescatter_calls = t->reducescatter_calls;
    s->reducescatter_tensors = t->reducescatter_tensors;
    s->reducescatter_bytes = t->reducescatter_bytes;
    s->alltoall_calls = t->alltoall_calls;
    s->alltoall_bytes = t->alltoall_bytes;
    s->stage_chunk_bytes = t->stage_chunk_bytes;
    s->stage_slot_bytes = t->stage_slot_bytes;
    s->gpu_backend = t->gpu_backend;
    s->nccl_estimate_bytes = t->nccl_estimate_bytes;
    s->nccl_budget_bytes = t->nccl_budget_bytes;
    s->nccl_create_bytes = t->nccl_create_bytes;
    s->nccl_fallbacks = t->nccl_fallbacks;
    memcpy(s->op_count, t->op_count, sizeof(s->op_count));
    memcpy(s->op_ns, t->op_ns, sizeof(s->op_ns));
    memcpy(s->op_bucket, t->op_bucket, sizeof(s->op_bucket));
}

void cg_hvd_complete_begin(cg_hvd_core_t *core)
{
    pthread_mutex_lock(&core->lock);
    cg_hvd_stats_publish(core); /* counted before completion: seen by then */
}

void cg_hvd_req_complete_locked(cg_hvd_core_t *core, struct cg_hvd_req *req,
                                cg_status_t st, const char *msg)
{
    bool wake = false;

    cg_list_del(&req->link);
    cg_list_del(&req->reg_link);
    while (!cg_list_empty(&req->followers)) {
        struct cg_hvd_req *f = cg_list_entry(req->followers.next,
                                             struct cg_hvd_req, follow_link);
        cg_list_del(&f->follow_link);
        wake |= cg__finish(core, f, st, msg);
    }
    wake |= cg__finish(core, req, st, msg);
    core->req_wake |= wake;
}

void cg_hvd_complete_end(cg_hvd_core_t *core)
{
    /* Waking only for a request someone waits on, once per batch: a
     * waiter is not woken (and the lock not ping-ponged) for each of a
     * fused group's tensors. */
    if (core->req_wake)
        pthread_cond_broadcast(&core->done_cond);
    core->req_wake = false;
    pthread_mutex_unlock(&core->lock);
}

void cg_hvd_req_complete(cg_hvd_core_t *core, struct cg_hvd_req *req,
                         cg_status_t st, const char *msg)
{
    cg_hvd_complete_begin(core);
    cg_hvd_req_complete_locked(core, req, st, msg);
    cg_hvd_complete_end(core);
}

void cg_hvd_fail_all(cg_hvd_core_t *core, cg_status_t st, const char *msg)
{
    cg_list_t *lists[2] = {&core->inbox, &core->owned};

    for (int i = 0; i < 2; i++)
        while (!cg_list_empty(lists[i]))
            cg_hvd_req_complete(core,
                                cg_list_entry(lists[i]->next,
                                              struct cg_hvd_req, link),
                                st, msg);
}

int cg_hvd_poll(cg_hvd_req_h req)
{
    return req == NULL || atomic_load_explicit(&req->done,
                                               memory_order_acquire);
}

/* Busy-polls req's completion for up to spin_ns; true once it is done. */
static bool cg__spin_done(struct cg_hvd_req *req, uint64_t spin_ns)
{
    uint64_t t_end = cg_now_ns() + spin_ns;

    do {
        for (int i = 0; i < 64; i++) { /* the clock read costs ~20ns */
            if (atomic_load_explicit(&req->done, memory_order_acquire))
                return true;
            cg_cpu_relax();
        }
    } while (cg_now_ns() < t_end);
    return atomic_load_explicit(&req->done, memory_order_acquire) != 0;
}

cg_status_t cg_hvd_wait(cg_hvd_req_h req)
{
    cg_hvd_core_t *core;
    uint64_t spin;
    bool hit;

    if (req == NULL)
        return cg_error_set(CG_ERR_INVALID_PARAM, "cg_hvd_wait: the request "
                            "is NULL (did its enqueue fail?)");
    core = req->core;
    if (cg_hvd_poll(req))
        return req->status;
    pthread_mutex_lock(&core->lock);
    if (!atomic_load_explicit(&req->done, memory_order_acquire)) {
        /* The cycle may start now instead of at its next tick: a thread
         * busy-polling the kick sees it, a sleeping one is signalled. */
        if (core->waiters++ == 0) {
            atomic_fetch_add_explicit(&core->kick, 1, memory_order_relaxed);
            pthread_cond_signal(&core->wake_cond);
        }
        req->waiters++; /* both taken back by cg__finish */
        core->stats.waits++;
        spin = cg_hvd_spin_take(&core->wait_spin, core->spin_ns);
        if (spin > 0) {
            /* Short collectives end within CG_SPIN_TIME: polled without
             * the lock, no futex wake-up on the way back. */
            core->stats.wait_spins++;
            pthread_mutex_unlock(&core->lock);
            hit = cg__spin_done(req, spin);
            cg_hvd_spin_result(&core->wait_spin, core->spin_ns, hit);
            if (hit)
                return req->status;
            pthread_mutex_lock(&core->lock);
        }
        if (!atomic_load_explicit(&req->done, memory_order_acquire))
            core->stats.wait_sleeps++;
        while (!atomic_load_explicit(&req->done, memory_order_acquire))
            pthread_cond_wait(&core->done_cond, &core->lock);
    }
    pthread_mutex_unlock(&core->lock);
    return req->status;
}

const char *cg_hvd_error(cg_hvd_req_h req)
{
    if (req == NULL)
        return "the request is NULL (did its enqueue fail?)";
    return cg_hvd_poll(req) ? req->err : "";
}

cg_status_t cg_hvd_allgather_result(cg_hvd_req_h req, const void **data_p,
                                    int64_t *first_dim_p)
{
    if (req == NULL || !cg_hvd_poll(req) || req->w.type != CG_HVD_ALLGATHER ||
        req->status != CG_OK)
        return cg_error_set(CG_ERR_INVALID_PARAM, "cg_hvd_allgather_result: "
                            "not a successfully completed allgather");
    *data_p = req->gather;
    *first_dim_p = req->gather_dim0;
    return CG_OK;
}

void cg_hvd_release(cg_hvd_req_h req)
{
    cg_hvd_core_t *core;

    if (req == NULL)
        return;
    core = req->core;
    if (core == NULL) { /* outlived its core (cg_hvd_queue_fini) */
        cg__req_free(req->gov, req);
        return;
    }
    pthread_mutex_lock(&core->lock);
    /* Callers wait on and release requests in the order they enqueued
     * them: the next one's first lines (written by the background thread
     * on completion) are fetched while this one is done with. */
    if (req->live_link.next != &core->req_live) {
        char *next = (char *)cg_list_entry(req->live_link.next,
                                           struct cg_hvd_req, live_link);
        __builtin_prefetch(next);
        __builtin_prefetch(next + 64);
    }
    if (atomic_load_explicit(&req->done, memory_order_acquire))
        cg__req_recycle(core, req);
    else
        req->released = true; /* recycled by cg__finish */
    pthread_mutex_unlock(&core->lock);
}

void cg_hvd_core_stats(cg_hvd_core_h core, cg_hvd_stats_t *stats)
{
    pthread_mutex_lock(&core->lock);
    *stats = core->stats;
    pthread_mutex_unlock(&core->lock);
}

int cg_hvd_core_rank(cg_hvd_core_h core)
{
    return core->rank;
}

int cg_hvd_core_size(cg_hvd_core_h core)
{
    return core->size;
}
