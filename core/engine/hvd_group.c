/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Grouped operations of the Horovod shim's core (Horovod's grouped_*):
 * the enqueue of n members as one batch (all or nothing, handed to the
 * cycle in one move, so every rank announces a group whole in one records
 * round and no member is ready anywhere before all are), the group's
 * checks before a ready list runs (a failed member fails the group); its
 * completion (no member done before all are) is hvd_queue.c's. A group
 * runs on one process set, routed once (its members must all name it).
 * Batches
 * (cg_hvd_batch_*) also carry alltoall's request. Layer: core/engine; calls hvd_queue.c and the governor.
 */
#include <stdio.h>
#include <string.h>

#include "core/base/error.h"
#include "core/engine/hvd_core.h"

void cg_hvd_batch_commit(cg_hvd_core_t *core, cg_list_t *batch, size_t n,
                         uint64_t groups)
{
    pthread_mutex_lock(&core->lock);
    core->stats.grouped_calls += groups;
    if (core->dead) { /* the cycle will not fail them: fail them here */
        while (!cg_list_empty(batch))
            cg_hvd_req_complete_locked(core,
                                       cg_list_entry(batch->next,
                                                     struct cg_hvd_req, link),
                                       core->dead_status, core->dead_msg);
        pthread_mutex_unlock(&core->lock);
        return;
    }
    cg_list_splice_tail(&core->inbox, batch);
    core->inbox_len += n;
    pthread_mutex_unlock(&core->lock);
}

void cg_hvd_batch_abort(cg_hvd_core_t *core, cg_list_t *batch,
                        cg_status_t st, const char *msg)
{
    while (!cg_list_empty(batch)) {
        struct cg_hvd_req *req = cg_list_entry(batch->next, struct cg_hvd_req,
                                               link);
        cg_hvd_req_complete(core, req, st, msg);
        cg_hvd_release(req);
    }
}

/* The group's digest: its size and its members' names in order. */
static uint64_t cg__key(const cg_hvd_tensor_t *ts, int n)
{
    uint64_t h = 1469598103934665603ull ^ (uint64_t)n; /* FNV-1a */

    for (int i = 0; i < n; i++)
        for (const char *c = ts[i].name;; c++) {
            h = (h ^ (unsigned char)*c) * 1099511628211ull;
            if (*c == '\0')
                break;
        }
    return h;
}

/* The process set a member names (0: none, the global one). */
static int32_t cg__set_of(const cg_hvd_tensor_t *t)
{
    return (t->field_mask & CG_HVD_TENSOR_FIELD_PROCESS_SET) != 0
               ? t->process_set
               : 0;
}

/* One route for the whole group: every member must name the same set,
 * and *core_p becomes that set's core (hvd_sets.c). */
static cg_status_t cg__route(cg_hvd_core_t **core_p,
                             const cg_hvd_tensor_t *ts, int n,
                             const char *what)
{
    char where[64];
    int32_t set = cg__set_of(&ts[0]);

    for (int i = 1; i < n; i++)
        if (cg__set_of(&ts[i]) != set)
            return cg_error_set(CG_ERR_INVALID_PARAM, "grouped %s: member "
                                "%d ('%s') is on process set %d, member 0 "
                                "('%s') on process set %d; a group runs on "
                                "one process set", what, i,
                                ts[i].name != NULL ? ts[i].name : "(null)",
                                (int)cg__set_of(&ts[i]),
                                ts[0].name != NULL ? ts[0].name : "(null)",
                                (int)set);
    snprintf(where, sizeof(where), "grouped %s", what);
    return cg_hvd_route_id(core_p, set, where);
}

/* Member i's wire, by the single-tensor call's checks. */
static cg_status_t cg__wire(cg_hvd_core_t *core, cg_hvd_op_type_t type,
                            const cg_hvd_tensor_t *t, cg_redop_t op,
                            double prescale, double postscale,
                            cg_hvd_wire_t *w)
{
    switch (type) {
    case CG_HVD_ALLREDUCE:
        return cg_hvd_allreduce_wire(core, t, op, prescale, postscale, w);
    case CG_HVD_ALLGATHER:
        return cg_hvd_allgather_wire(core, t, w);
    default:
        return cg_hvd_reducescatter_wire(core, t, op, prescale, postscale, w);
    }
}

static cg_status_t cg__grouped(cg_hvd_core_t *core, cg_hvd_op_type_t type,
                               const cg_hvd_tensor_t *ts, int n,
                               cg_redop_t op, double prescale,
                               double postscale, cg_hvd_req_h *reqs)
{
    const char *what = cg_hvd_type_name(type);
    size_t gbytes = sizeof(cg_hvd_group_t) + (size_t)n * sizeof(void *);
    uint64_t key;
    cg_hvd_group_t *g;
    cg_hvd_wire_t w;
    cg_list_t batch;
    char msg[512];
    cg_status_t st;

    if (core == NULL || ts == NULL || reqs == NULL)
        return cg_error_set(core == NULL ? CG_ERR_NOT_INITIALIZED
                                         : CG_ERR_INVALID_PARAM,
                            "grouped %s: core, tensors or requests NULL",
                            what);
    if (n < 1 || n > CG_HVD_GROUP_MAX)
        return cg_error_set(CG_ERR_INVALID_PARAM, "grouped %s: %d tensors, "
                            "allowed 1 to %d", what, n, CG_HVD_GROUP_MAX);
    st = cg__route(&core, ts, n, what);
    if (st != CG_OK)
        return st;
    for (int i = 0; i < n; i++) { /* every member valid before any goes */
        st = cg__wire(core, type, &ts[i], op, prescale, postscale, &w);
        if (st != CG_OK)
            return st;
    }
    st = cg_governor_alloc(core->gov, CG_MEM_CAT_CONTROL, gbytes,
                           (void **)&g);
    if (st != CG_OK)
        return st;
    key = cg__key(ts, n);
    cg_list_init(&batch);
    for (int i = 0; i < n; i++) {
        st = cg__wire(core, type, &ts[i], op, prescale, postscale, &w);
        w.group_n = n;
        w.group_at = i;
        w.group_key = key;
        if (st == CG_OK)
            st = cg_hvd_enqueue_to(core, &ts[i], type, &w, &batch,
                                   &g->members[i]);
        if (st != CG_OK) {
            snprintf(msg, sizeof(msg), "grouped %s: member %d of %d: %s",
                     what, i, n, cg_last_error());
            cg_hvd_batch_abort(core, &batch, st, msg);
            cg_governor_free(core->gov, CG_MEM_CAT_CONTROL, g, gbytes);
            return cg_error_set(st, "%s", msg);
        }
    }
    g->n = g->left = n;
    g->st = CG_OK;
    g->err[0] = '\0';
    for (int i = 0; i < n; i++) {
        g->members[i]->grp = g;
        reqs[i] = g->members[i];
    }
    cg_hvd_batch_commit(core, &batch, (size_t)n, 1);
    return CG_OK;
}

cg_status_t cg_hvd_enqueue_grouped_allreduce(cg_hvd_core_h core,
                                             const cg_hvd_tensor_t *ts, int n,
                                             cg_redop_t op, double prescale,
                                             double postscale,
                                             cg_hvd_req_h *reqs)
{
    return cg__grouped(core, CG_HVD_ALLREDUCE, ts, n, op, prescale,
                       postscale, reqs);
}

cg_status_t cg_hvd_enqueue_grouped_allgather(cg_hvd_core_h core,
                                             const cg_hvd_tensor_t *ts, int n,
                                             cg_hvd_req_h *reqs)
{
    return cg__grouped(core, CG_HVD_ALLGATHER, ts, n, CG_OP_SUM, 1.0, 1.0,
                       reqs);
}

cg_status_t cg_hvd_enqueue_grouped_reducescatter(cg_hvd_core_h core,
                                                 const cg_hvd_tensor_t *ts,
                                                 int n, cg_redop_t op,
                                                 double prescale,
                                                 double postscale,
                                                 cg_hvd_req_h *reqs)
{
    return cg__grouped(core, CG_HVD_REDUCESCATTER, ts, n, op, prescale,
                       postscale, reqs);
}

/* Fails ready[i, j) (one group) with text; members already failed keep
 * their own. */
static void cg__fail_run(cg_hvd_core_t *core, size_t i, size_t j,
                         const char *text)
{
    for (size_t k = i; k < j; k++) {
        cg_hvd_entry_t *e = core->ready[k];
        if (e->failed)
            continue;
        e->failed = true;
        snprintf(e->err, sizeof(e->err), "%s", text);
    }
}

void cg_hvd_group_check(cg_hvd_core_t *core)
{
    char text[512];

    /* A group is announced whole by every rank, so its members become
     * ready in one round, one after the other. */
    for (size_t i = 0, j; i < core->ready_len; i = j) {
        const cg_hvd_entry_t *head = core->ready[i], *bad = NULL;
        j = i + 1;
        if (head->w.group_n == 0)
            continue;
        bad = head->failed ? head : NULL;
        while (j < core->ready_len && core->ready[j]->w.group_n > 0 &&
               core->ready[j]->w.group_key == head->w.group_key) {
            if (bad == NULL && core->ready[j]->failed)
                bad = core->ready[j];
            j++;
        }
        if (bad != NULL) {
            snprintf(text, sizeof(text), "%s", bad->err);
            cg__fail_run(core, i, j, text);
        } else if (j - i != (size_t)head->w.group_n) {
            snprintf(text, sizeof(text), "grouped %s of tensor '%s': %zu "
                     "of the group's %d members are ready together "
                     "(internal error); the group fails",
                     cg_hvd_type_name(head->w.type), head->w.name, j - i,
                     head->w.group_n);
            cg__fail_run(core, i, j, text);
        }
    }
}
