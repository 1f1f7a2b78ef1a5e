/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The data path: isend, irecv (1..CG_NP_MAX_RECVS grouped receives that
 * complete together, each slot reporting its own size), test, iflush.
 * Up to NCCL_NET_MAX_REQUESTS requests per comm; past that isend/irecv
 * return a NULL request ("try again"), never an error. Posts and the test
 * of a pending request take the comm's lane lock. A post ends at once the
 * transport parts that finished inside it (an eager send, a receive of a
 * message already there), without driving the transport; when all did,
 * the request is DONE and its test takes no lock. A test drives the
 * transport once at most, however many receives it groups. A post's
 * registration handles are checked under the lane lock: the one the comm
 * accepted last by its slot's generation (one load), others in the
 * handle table, which makes them the one remembered.
 * Layer: plugin/nccl; calls transport/.
 */
#include <string.h>

#include "core/base/error.h"
#include "plugin/nccl/np_impl.h"

_Static_assert((NCCL_NET_MAX_REQUESTS & (NCCL_NET_MAX_REQUESTS - 1)) == 0,
               "request indices wrap with a mask");

/* A free request of comm, lane lock held: its index, fields reset, state
 * still FREE until cg__np_req_publish. -1 when all are in flight. Looks
 * at the one after the last taken first: in order, that one is free. */
static inline int cg__np_req_take(cg__np_comm_t *comm)
{
    for (int k = 0; k < NCCL_NET_MAX_REQUESTS; k++) {
        int idx = (comm->next_req + k) & (NCCL_NET_MAX_REQUESTS - 1);
        cg__np_req_t *r = &comm->reqs[idx];
        unsigned gen;

        if (atomic_load_explicit(&r->state, memory_order_acquire) !=
            CG_NP_RQ_FREE)
            continue;
        comm->next_req = (idx + 1) & (NCCL_NET_MAX_REQUESTS - 1);
        gen = atomic_load_explicit(&r->gen, memory_order_relaxed);
        atomic_store_explicit(&r->gen, (uint8_t)((gen + 1) & 0x7f),
                              memory_order_relaxed);
        r->failed = false;
        r->status = CG_OK;
        return idx;
    }
    return -1;
}

__attribute__((cold, noinline)) static void
cg__np_part_failed(const cg__np_comm_t *comm, cg__np_req_t *r,
                   cg_status_t st)
{
    if (r->failed)
        return;
    r->failed = true;
    r->status = st;
    cg_warn(&cg__np.log, "net plugin %s: %s request failed: %s", CG_NP_NAME,
            comm->kind == CG_NP_SEND ? "send" : "recv", cg_last_error());
}

/* Tests part i of r (lane lock held), which drives the transport one
 * round if the part is pending; ends it if finished. 1 while pending. */
static inline int cg__np_part_test(const cg__np_comm_t *comm,
                                   cg__np_req_t *r, int i)
{
    size_t got = 0;
    cg_status_t st = cg_tp_test(r->tp[i], &got);

    if (st == CG_INPROGRESS)
        return 1;
    r->tp[i] = NULL;
    r->size[i] = got;
    if (st != CG_OK)
        cg__np_part_failed(comm, r, st);
    return 0;
}

/* Ends the parts of r that finished (lane lock held); the number still
 * pending. With drive, the first part still pending is tested, which
 * drives the lane's transport one round; the others are only looked at. */
static int cg__np_req_collect(const cg__np_comm_t *comm, cg__np_req_t *r,
                              bool drive)
{
    int pending = 0;

    for (int i = 0; i < r->n; i++) {
        if (r->tp[i] == NULL)
            continue;
        if (!cg_tp_done(r->tp[i])) {
            if (!drive) {
                pending++;
                continue;
            }
            drive = false; /* this test drives the transport */
        }
        pending += cg__np_part_test(comm, r, i);
    }
    return pending;
}

/* After the post of request idx (lane lock held): ends the parts that
 * finished inside it and publishes the request, DONE or BUSY; its id. */
static inline void *cg__np_req_publish(const void *comm_id,
                                       cg__np_comm_t *comm, int idx)
{
    cg__np_req_t *r = &comm->reqs[idx];
    int pending = r->n > 1 ? cg__np_req_collect(comm, r, false)
                  : cg_tp_done(r->tp[0]) ? cg__np_part_test(comm, r, 0)
                                         : 1;

    atomic_store_explicit(&r->state, pending ? CG_NP_RQ_BUSY : CG_NP_RQ_DONE,
                          memory_order_release);
    return cg__np_req_id(comm_id, idx,
                         atomic_load_explicit(&r->gen, memory_order_relaxed));
}

/* Reports a request whose parts have all finished, and frees it: the
 * fields are read before the release that lets a post take it again. */
static ncclResult_t cg__np_req_end(cg__np_req_t *r, int *done, int *sizes)
{
    cg_status_t status = r->failed ? r->status : CG_OK;

    if (status == CG_OK && sizes != NULL)
        for (int i = 0; i < r->n; i++)
            sizes[i] = (int)r->size[i];
    atomic_store_explicit(&r->state, CG_NP_RQ_FREE, memory_order_release);
    if (status != CG_OK)
        return cg__np_result(status);
    *done = 1;
    return ncclSuccess;
}

/* A registration not the one comm last accepted (lane lock held): the
 * full lookup; when live, it becomes the one remembered, with its id's
 * generation: while its slot's word holds that generation the
 * registration is live (cg__np_id_live's test), so a deregMr after the
 * lookup only makes the next recheck fail over to here. */
__attribute__((noinline)) static int cg__np_mr_accept(cg__np_comm_t *comm,
                                                    const void *mhandle)
{
    uint64_t v = (uint64_t)(uintptr_t)mhandle;

    if (cg__np_lookup(mhandle, CG_NP_MR) == NULL)
        return 0;
    comm->mr_id = mhandle;
    comm->mr_gen_p = &cg__np.slots[cg__np_id_slot(v)].gen;
    comm->mr_gen = cg__np_id_gen(v);
    return 1;
}

/* Whether mhandle may be posted on comm (lane lock held): NULL, or a live
 * registration. The one comm accepted last costs two compares and the
 * load of its generation word. */
static inline int cg__np_mr_ok(cg__np_comm_t *comm, const void *mhandle)
{
    if (mhandle == NULL)
        return 1;
    if (mhandle == comm->mr_id &&
        (atomic_load_explicit(comm->mr_gen_p, memory_order_acquire) &
         CG_NP_GEN_MASK) == comm->mr_gen)
        return 1;
    return cg__np_mr_accept(comm, mhandle);
}

ncclResult_t cg__np_isend(void *send, void *data, size_t size, int tag,
                         void *mhandle, void *phandle, void **request)
{
    cg__np_comm_t *comm = cg__np_lookup(send, CG_NP_SEND);
    cg__np_req_t *r;
    cg_status_t st;
    int idx;

    (void)phandle;
    if (request == NULL)
        return ncclInvalidArgument;
    *request = NULL;
    if (comm == NULL || !comm->ready || (data == NULL && size > 0))
        return ncclInvalidArgument;
    if (size > CG_NP_MAX_BYTES) {
        cg_warn(&cg__np.log, "net plugin %s: isend of %zu bytes exceeds "
                "maxP2pBytes %llu", CG_NP_NAME, size, CG_NP_MAX_BYTES);
        return ncclInvalidArgument;
    }
    cg__np_lock(&comm->lane->lock);
    if (!cg__np_mr_ok(comm, mhandle)) {
        cg__np_unlock(&comm->lane->lock);
        return ncclInvalidArgument;
    }
    idx = cg__np_req_take(comm);
    if (idx < 0) {
        cg__np_unlock(&comm->lane->lock);
        return ncclSuccess; /* 32 in flight: NCCL tries again */
    }
    r = &comm->reqs[idx];
    r->n = 1;
    r->size[0] = 0;
    st = cg_tp_isend(comm->conn, data, size, (uint32_t)tag, &r->tp[0]);
    if (st == CG_OK)
        *request = cg__np_req_publish(send, comm, idx);
    cg__np_unlock(&comm->lane->lock);
    if (st != CG_OK) {
        cg_warn(&cg__np.log, "net plugin %s: isend failed: %s", CG_NP_NAME,
                cg_last_error());
        return cg__np_result(st);
    }
    return ncclSuccess;
}

ncclResult_t cg__np_irecv(void *recv, int n, void **data, size_t *sizes,
                         int *tags, void **mhandles, void **phandles,
                         void **request)
{
    cg__np_comm_t *comm = cg__np_lookup(recv, CG_NP_RECV);
    cg_status_t st = CG_OK;
    cg__np_req_t *r;
    int idx, i;

    (void)phandles;
    if (request == NULL)
        return ncclInvalidArgument;
    *request = NULL;
    if (comm == NULL || n < 1 || n > CG_NP_MAX_RECVS || data == NULL ||
        sizes == NULL || tags == NULL)
        return ncclInvalidArgument;
    cg__np_lock(&comm->lane->lock);
    for (i = 0; i < n; i++)
        if (sizes[i] > CG_NP_MAX_BYTES || (data[i] == NULL && sizes[i] > 0) ||
            (mhandles != NULL && !cg__np_mr_ok(comm, mhandles[i]))) {
            cg__np_unlock(&comm->lane->lock);
            return ncclInvalidArgument;
        }
    idx = cg__np_req_take(comm);
    if (idx < 0) {
        cg__np_unlock(&comm->lane->lock);
        return ncclSuccess;
    }
    r = &comm->reqs[idx];
    r->n = n;
    for (i = 0; i < n && st == CG_OK; i++) {
        r->size[i] = 0;
        r->tp[i] = NULL;
        st = cg_tp_irecv(comm->conn, data[i], sizes[i], (uint32_t)tags[i],
                         &r->tp[i]);
    }
    /* On failure the receives already posted stay with the conn (its
     * close cancels them) and the request stays free. */
    if (st == CG_OK)
        *request = cg__np_req_publish(recv, comm, idx);
    cg__np_unlock(&comm->lane->lock);
    if (st != CG_OK) {
        cg_warn(&cg__np.log, "net plugin %s: irecv failed: %s", CG_NP_NAME,
                cg_last_error());
        return cg__np_result(st);
    }
    return ncclSuccess;
}

ncclResult_t cg__np_iflush(void *recv, int n, void **data, int *sizes,
                          void **mhandles, void **request)
{
    (void)n;
    (void)data;
    (void)sizes;
    (void)mhandles;
    if (request == NULL)
        return ncclInvalidArgument;
    *request = NULL;
    /* Host memory only: nothing to make visible to a GPU. */
    return cg__np_lookup(recv, CG_NP_RECV) != NULL ? ncclSuccess
                                                  : ncclInvalidArgument;
}

ncclResult_t cg__np_test(void *request, int *done, int *sizes)
{
    cg__np_comm_t *comm;
    cg__np_req_t *r;
    int idx, state, pending;
    ncclResult_t res;

    if (done == NULL)
        return ncclInvalidArgument;
    *done = 0;
    comm = cg__np_req_lookup(request, &idx, &state);
    if (comm == NULL)
        return ncclInvalidArgument;
    r = &comm->reqs[idx];
    if (state == CG_NP_RQ_DONE) /* no transport part left: no lock */
        return cg__np_req_end(r, done, sizes);
    cg__np_lock(&comm->lane->lock);
    /* A second thread's test of the same request may have ended it. */
    if (atomic_load_explicit(&r->state, memory_order_relaxed) !=
            CG_NP_RQ_BUSY ||
        atomic_load_explicit(&r->gen, memory_order_relaxed) !=
            ((uintptr_t)request & 0x7fu)) {
        cg__np_unlock(&comm->lane->lock);
        return ncclInvalidArgument;
    }
    /* One part (BUSY: still pending): its test drives the transport. */
    pending = r->n > 1 ? cg__np_req_collect(comm, r, true)
                       : cg__np_part_test(comm, r, 0);
    res = pending > 0 ? ncclSuccess : cg__np_req_end(r, done, sizes);
    cg__np_unlock(&comm->lane->lock);
    return res;
}
