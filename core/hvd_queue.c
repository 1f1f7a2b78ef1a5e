/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The framework-facing half of the Horovod shim's core: enqueue (checks,
 * the non-leaf broadcast rule, duplicate names by CG_DUPLICATE_POLICY),
 * the inbox and registry under the core's lock, and poll / wait / error /
 * release of requests. Completion is called from the background thread.
 * Layer: core; calls the governor for request memory.
 */
#include <stdio.h>
#include <string.h>

#include "core/base/error.h"
#include "core/hvd_core.h"

static const char *const cg__type_names[] = {"allreduce", "broadcast",
                                             "allgather"};

/* Horovod's text for a name already being processed. */
#define CG__DUP_TEXT                                                          \
    "Requested to allreduce, allgather, or broadcast a tensor with the same " \
    "name as another tensor that is currently being processed.  If you "     \
    "want to request another tensor, use a different tensor name."

uint64_t cg_hvd_name_hash(const char *name)
{
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (; *name != '\0'; name++)
        h = (h ^ (unsigned char)*name) * 1099511628211ull;
    return h;
}

size_t cg_hvd_wire_count(const cg_hvd_wire_t *w)
{
    size_t n = 1;
    for (int d = 0; d < w->ndim; d++)
        n *= (size_t)w->shape[d];
    return n;
}

static cg_status_t cg__check_tensor(const cg_hvd_core_t *core,
                                    const cg_hvd_tensor_t *t,
                                    cg_hvd_op_type_t type, cg_hvd_wire_t *w)
{
    const char *what = cg__type_names[type];
    size_t len;

    if (core == NULL)
        return cg_error_set(CG_ERR_NOT_INITIALIZED, "%s: the collective core "
                            "is NULL (cg_hvd_core_create first)", what);
    if (t == NULL || t->name == NULL)
        return cg_error_set(CG_ERR_INVALID_PARAM, "%s: tensor or its name is "
                            "NULL", what);
    len = strlen(t->name);
    if (len == 0 || len >= CG_HVD_NAME_MAX)
        return cg_error_set(CG_ERR_INVALID_PARAM, "%s of tensor '%.40s...': "
                            "name length %zu, allowed 1 to %d", what, t->name,
                            len, CG_HVD_NAME_MAX - 1);
    if (cg_dtype_size(t->dtype) == 0)
        return cg_error_set(CG_ERR_INVALID_PARAM, "%s of tensor '%s': unknown "
                            "dtype %d", what, t->name, (int)t->dtype);
    if (t->ndim < 0 || t->ndim > CG_HVD_NDIM_MAX)
        return cg_error_set(CG_ERR_INVALID_PARAM, "%s of tensor '%s': ndim %d, "
                            "allowed 0 to %d", what, t->name, t->ndim,
                            CG_HVD_NDIM_MAX);
    memset(w, 0, sizeof(*w));
    w->device = (t->field_mask & CG_HVD_TENSOR_FIELD_DEVICE) ? t->device : -1;
    if (w->device >= 0)
        return cg_error_set(CG_ERR_UNSUPPORTED, "%s of tensor '%s': it is on "
                            "CUDA device %d; the shim core takes host memory "
                            "only for now (copy it to the CPU first)", what,
                            t->name, w->device);
    memcpy(w->name, t->name, len + 1);
    w->type = (int32_t)type;
    w->dtype = (int32_t)t->dtype;
    w->ndim = t->ndim;
    w->prescale = w->postscale = 1.0;
    for (int d = 0; d < t->ndim; d++) {
        if (t->shape[d] < 0)
            return cg_error_set(CG_ERR_INVALID_PARAM, "%s of tensor '%s': "
                                "dimension %d is %lld", what, t->name, d,
                                (long long)t->shape[d]);
        w->shape[d] = t->shape[d];
    }
    if (cg_hvd_wire_count(w) > 0 &&
        (t->input == NULL || (type != CG_HVD_ALLGATHER && t->output == NULL)))
        return cg_error_set(CG_ERR_INVALID_PARAM, "%s of tensor '%s': input "
                            "or output buffer is NULL", what, t->name);
    return CG_OK;
}

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

    if (core->dup_policy == CG_DUP_POLICY_ERROR ||
        !cg__same_request(prim, req))
        return cg_error_set(CG_ERR_INVALID_PARAM, "%s (tensor '%s'%s)",
                            CG__DUP_TEXT, req->w.name,
                            core->dup_policy == CG_DUP_POLICY_ERROR
                                ? ", CG_DUPLICATE_POLICY=error"
                                : ": a different buffer, size or op");
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

static cg_status_t cg__enqueue(cg_hvd_core_t *core, const cg_hvd_tensor_t *t,
                               cg_hvd_op_type_t type, const cg_hvd_wire_t *w,
                               cg_hvd_req_h *req_p)
{
    struct cg_hvd_req *req, *prim;
    cg_status_t st;

    if (req_p == NULL)
        return cg_error_set(CG_ERR_INVALID_PARAM, "%s of tensor '%s': req_p "
                            "is NULL", cg__type_names[type], w->name);
    st = cg_governor_alloc(core->gov, CG_MEM_CAT_CONTROL, sizeof(*req),
                           (void **)&req);
    if (st != CG_OK)
        return st;
    memset(req, 0, sizeof(*req));
    cg_list_init(&req->link);
    cg_list_init(&req->reg_link);
    cg_list_init(&req->followers);
    cg_list_init(&req->follow_link);
    req->core = core;
    req->gov = core->gov;
    req->w = *w;
    req->input = t->input;
    req->output = type == CG_HVD_ALLGATHER ? NULL : t->output;
    req->count = cg_hvd_wire_count(w);
    req->hash = cg_hvd_name_hash(w->name);

    pthread_mutex_lock(&core->lock);
    if (core->dead) {
        st = cg_error_set(core->dead_status, "%s of tensor '%s': the "
                          "collective core has stopped: %s",
                          cg__type_names[type], w->name, core->dead_msg);
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
    cg_list_push(&core->inbox, &req->link);
out:
    pthread_mutex_unlock(&core->lock);
    *req_p = req;
    return CG_OK;

err_unlock:
    pthread_mutex_unlock(&core->lock);
    cg_governor_free(core->gov, CG_MEM_CAT_CONTROL, req, sizeof(*req));
    return st;
}

cg_status_t cg_hvd_enqueue_allreduce(cg_hvd_core_h core,
                                     const cg_hvd_tensor_t *t, cg_redop_t op,
                                     double prescale, double postscale,
                                     cg_hvd_req_h *req_p)
{
    cg_hvd_wire_t w;
    cg_status_t st = cg__check_tensor(core, t, CG_HVD_ALLREDUCE, &w);

    if (st != CG_OK)
        return st;
    if (op < 0 || op >= CG_OP_COUNT || op == CG_OP_ADASUM)
        return cg_error_set(CG_ERR_INVALID_PARAM, "allreduce of tensor '%s': "
                            "op %s (%d) is not supported (sum, prod, max, "
                            "min, average)", t->name, cg_redop_name(op),
                            (int)op);
    w.op = (int32_t)op;
    w.prescale = prescale;
    w.postscale = postscale;
    return cg__enqueue(core, t, CG_HVD_ALLREDUCE, &w, req_p);
}

cg_status_t cg_hvd_enqueue_broadcast(cg_hvd_core_h core,
                                     const cg_hvd_tensor_t *t, int root,
                                     cg_hvd_req_h *req_p)
{
    cg_hvd_wire_t w;
    cg_status_t st = cg__check_tensor(core, t, CG_HVD_BROADCAST, &w);

    if (st != CG_OK)
        return st;
    if ((t->flags & CG_HVD_REQUIRES_GRAD) && !(t->flags & CG_HVD_IS_LEAF))
        return cg_error_set(CG_ERR_INVALID_PARAM, "broadcast of tensor '%s': "
                            "it requires grad and is not a leaf (it has a "
                            "grad_fn), so broadcasting it would build autograd "
                            "graph; broadcast the leaf tensor instead, or "
                            ".detach() it first", t->name);
    if (root < 0 || root >= core->size)
        return cg_error_set(CG_ERR_INVALID_PARAM, "broadcast of tensor '%s': "
                            "root rank %d, the job has ranks 0 to %d",
                            t->name, root, core->size - 1);
    w.root = root;
    return cg__enqueue(core, t, CG_HVD_BROADCAST, &w, req_p);
}

cg_status_t cg_hvd_enqueue_allgather(cg_hvd_core_h core,
                                     const cg_hvd_tensor_t *t,
                                     cg_hvd_req_h *req_p)
{
    cg_hvd_wire_t w;
    cg_status_t st = cg__check_tensor(core, t, CG_HVD_ALLGATHER, &w);

    if (st != CG_OK)
        return st;
    if (t->ndim == 0)
        return cg_error_set(CG_ERR_INVALID_PARAM, "allgather of tensor '%s': "
                            "a scalar has no first dimension to gather along",
                            t->name);
    return cg__enqueue(core, t, CG_HVD_ALLGATHER, &w, req_p);
}

/* Under the lock: one request done; frees it if already released. */
static void cg__finish(struct cg_hvd_req *req, cg_status_t st,
                       const char *msg)
{
    req->status = st;
    snprintf(req->err, sizeof(req->err), "%s", msg != NULL ? msg : "");
    if (req->released) {
        cg_governor_free(req->gov, CG_MEM_CAT_STAGING, req->gather,
                         req->gather_bytes);
        cg_governor_free(req->gov, CG_MEM_CAT_CONTROL, req, sizeof(*req));
        return;
    }
    atomic_store_explicit(&req->done, 1, memory_order_release);
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
}

void cg_hvd_req_complete(cg_hvd_core_t *core, struct cg_hvd_req *req,
                         cg_status_t st, const char *msg)
{
    pthread_mutex_lock(&core->lock);
    cg_hvd_stats_publish(core); /* counted before completion: seen by then */
    cg_list_del(&req->link);
    cg_list_del(&req->reg_link);
    while (!cg_list_empty(&req->followers)) {
        struct cg_hvd_req *f = cg_list_entry(req->followers.next,
                                             struct cg_hvd_req, follow_link);
        cg_list_del(&f->follow_link);
        cg__finish(f, st, msg);
    }
    cg__finish(req, st, msg);
    if (core->waiters > 0)
        pthread_cond_broadcast(&core->done_cond);
    pthread_mutex_unlock(&core->lock);
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
    return atomic_load_explicit(&req->done, memory_order_acquire);
}

cg_status_t cg_hvd_wait(cg_hvd_req_h req)
{
    cg_hvd_core_t *core = req->core;

    if (!cg_hvd_poll(req)) {
        pthread_mutex_lock(&core->lock);
        core->waiters++;
        while (!atomic_load_explicit(&req->done, memory_order_acquire))
            pthread_cond_wait(&core->done_cond, &core->lock);
        core->waiters--;
        pthread_mutex_unlock(&core->lock);
    }
    return req->status;
}

const char *cg_hvd_error(cg_hvd_req_h req)
{
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
    if (req == NULL)
        return;
    if (!cg_hvd_poll(req)) {
        cg_hvd_core_t *core = req->core;
        pthread_mutex_lock(&core->lock);
        if (!atomic_load_explicit(&req->done, memory_order_acquire)) {
            req->released = true; /* freed by cg__finish */
            pthread_mutex_unlock(&core->lock);
            return;
        }
        pthread_mutex_unlock(&core->lock);
    }
    cg_governor_free(req->gov, CG_MEM_CAT_STAGING, req->gather,
                     req->gather_bytes);
    cg_governor_free(req->gov, CG_MEM_CAT_CONTROL, req, sizeof(*req));
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
