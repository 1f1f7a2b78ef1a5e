/* SPDX-License-Identifier: Apache-2.0 */
/*
 * UCX backend requests: tag sends and receives (the 64-bit UCP tag is the
 * receiver's conn id over the 32-bit user tag, matched with a full mask),
 * their small request objects (allocated through params.mem, CONTROL), the
 * UCX completion callbacks, and UCX's status codes in collguard's (test(),
 * which drives progress, is in ucx.c). A request the user has seen fail
 * may still be owned by UCX for a while; it is freed when both are done.
 * Layer: transport; calls UCX and core/base only.
 */
#include "transport/ucx_impl.h"

#include <string.h>

#include "core/base/error.h"

cg_status_t cg__ucx_status(ucs_status_t status)
{
    switch (status) {
    case UCS_OK:
        return CG_OK;
    case UCS_INPROGRESS:
        return CG_INPROGRESS;
    case UCS_ERR_MESSAGE_TRUNCATED:
        return CG_ERR_TRUNCATED;
    case UCS_ERR_CANCELED:
        return CG_ERR_CANCELED;
    case UCS_ERR_NO_MEMORY:
        return CG_ERR_NO_MEMORY;
    case UCS_ERR_TIMED_OUT:
    case UCS_ERR_ENDPOINT_TIMEOUT:
        return CG_ERR_TIMEOUT;
    case UCS_ERR_UNREACHABLE:
        return CG_ERR_UNREACHABLE;
    case UCS_ERR_CONNECTION_RESET:
    case UCS_ERR_REJECTED:
        return CG_ERR_PEER_RESET;
    case UCS_ERR_INVALID_PARAM:
        return CG_ERR_INVALID_PARAM;
    default:
        return CG_ERR_IO;
    }
}

static cg__ucx_req_t *cg__ucx_req_new(cg__ucx_conn_t *conn, unsigned flags)
{
    cg__ucx_tp_t *tp = (cg__ucx_tp_t *)conn->super.tp;
    cg__ucx_req_t *req;

    if (!cg_list_empty(&tp->req_cache)) {
        req = cg_list_entry(tp->req_cache.next, cg__ucx_req_t, link);
        cg_list_del(&req->link);
        tp->ncached--;
    } else {
        req = cg_mem_alloc(&tp->super.params.mem, CG_MEM_CAT_CONTROL,
                           sizeof(*req));
        if (req == NULL)
            return NULL;
    }
    memset(req, 0, sizeof(*req));
    req->super.ops = tp->super.ops; /* cg__ucx_ops, from ucx.c */
    req->tp = tp;
    req->conn = conn;
    req->status = CG_INPROGRESS;
    req->flags = flags;
    cg_list_init(&req->link);
    return req;
}

void cg__ucx_req_free(cg__ucx_req_t *req)
{
    cg__ucx_tp_t *tp = req->tp;

    cg_list_del(&req->link);
    if (tp->ncached < CG_UCX_REQ_CACHE && tp->worker != NULL) {
        cg_list_push(&tp->req_cache, &req->link);
        tp->ncached++;
        return;
    }
    cg_mem_free(&tp->super.params.mem, CG_MEM_CAT_CONTROL, req, sizeof(*req));
}

/* Frees the cached request objects (transport teardown). */
void cg__ucx_req_cache_drain(cg__ucx_tp_t *tp)
{
    while (!cg_list_empty(&tp->req_cache)) {
        cg_list_t *l = tp->req_cache.next;
        cg_list_del(l);
        cg_mem_free(&tp->super.params.mem, CG_MEM_CAT_CONTROL,
                    cg_list_entry(l, cg__ucx_req_t, link),
                    sizeof(cg__ucx_req_t));
    }
    tp->ncached = 0;
}

/* Adds a request whose UCX part is live to its conn's pending list. */
static void cg__ucx_req_pend(cg__ucx_req_t *req)
{
    cg__ucx_conn_t *conn = req->conn;

    if (cg_list_empty(&conn->reqs))
        conn->last_activity_ns = 0; /* the next sweep stamps it */
    conn->pending_bytes += req->len;
    if (!(req->flags & CG_UCX_REQ_RECV))
        req->tp->nsends++;
    cg_list_push(&conn->reqs, &req->link);
}

/* Takes a pending request off its conn. */
static void cg__ucx_req_unpend(cg__ucx_req_t *req)
{
    cg_list_del(&req->link);
    if (req->conn != NULL) {
        req->conn->pending_bytes -= req->len;
        if (!(req->flags & CG_UCX_REQ_RECV))
            req->tp->nsends--;
        req->conn = NULL;
    }
}

int cg__ucx_req_finish(cg__ucx_req_t *req, cg_status_t status)
{
    void *ucp = req->ucp;

    cg__ucx_req_unpend(req);
    req->status = status;
    req->length = 0;
    if (ucp == NULL)
        return 0;
    cg_list_push(&req->tp->zombies, &req->link);
    /* A receive still in the expected queue is taken back (its callback
     * may run right here); a send, and a receive already matched to a
     * rendezvous, end with their endpoint's close (cg__ucx_conn_close),
     * except a rendezvous send to a dead peer, which UCX 1.13 keeps until
     * the worker is destroyed. Cancel is a no-op where unsupported. The
     * request is not RELEASED, so the callback leaves it allocated and
     * req->ucp says whether UCX still holds it. */
    ucp_request_cancel(req->tp->worker, ucp);
    return req->ucp != NULL;
}

/* The status of a transfer UCX ended with us. A transfer fails (other
 * than by truncation or lack of memory) only when its connection broke:
 * without peer error handling UCX reports a dead peer as whatever the
 * transfer hit (an I/O error when a CMA read finds the process gone), so
 * the request gets a peer-failure status and the conn is failed by the
 * next sweep (never from inside a UCX callback). */
static cg_status_t cg__ucx_req_status(cg__ucx_conn_t *conn, ucs_status_t us)
{
    cg_status_t st = cg__ucx_status(us);

    if (us == UCS_OK || us == UCS_ERR_MESSAGE_TRUNCATED ||
        us == UCS_ERR_NO_MEMORY)
        return st;
    if (conn != NULL && conn->ep_error == UCS_OK) {
        conn->ep_error = us;
        ((cg__ucx_tp_t *)conn->super.tp)->sweep_now = 1;
    }
    return CG_STATUS_IS_PEER_FAILURE(st) ? st : CG_ERR_PEER_RESET;
}

/* Completion from UCX, for a request pending or already failed. */
static void cg__ucx_req_done(cg__ucx_req_t *req, ucs_status_t us,
                             size_t length)
{
    cg__ucx_conn_t *conn = req->conn;

    req->ucp = NULL;
    if (req->status != CG_INPROGRESS) {
        cg_list_del(&req->link); /* from tp->zombies */
        if (req->flags & CG_UCX_REQ_RELEASED)
            cg__ucx_req_free(req);
        return;
    }
    cg__ucx_req_unpend(req);
    req->status = cg__ucx_req_status(conn, us);
    req->length = (us == UCS_OK) ? length : 0;
    /* Read from the memory of a sender that has disowned it since? Then
     * the data may be anything; the sweep fails the conn on the notice. */
    if (us == UCS_OK && (req->flags & CG_UCX_REQ_RECV) && conn != NULL &&
        cg__ucx_mode_abandoned(conn, length)) {
        req->status = CG_ERR_PEER_RESET;
        req->length = 0;
        req->tp->sweep_now = 1;
    }
    if (conn != NULL)
        conn->last_activity_ns = 0; /* the next sweep stamps it */
}

/* After a post that returned a request: UCX may already have completed
 * it, callback and ucp_request_free included, before returning (a
 * receive matching a rendezvous from a peer that died, seen under load):
 * then req is final and r is gone; else r is the live request. */
static void cg__ucx_req_kept(cg__ucx_req_t *req, void *r)
{
    if (req->status == CG_INPROGRESS)
        req->ucp = r;
}

static void cg__ucx_send_cb(void *request, ucs_status_t status,
                            void *user_data)
{
    cg__ucx_req_t *req = user_data;

    ucp_request_free(request);
    cg__ucx_req_done(req, status, req->len);
}

static void cg__ucx_recv_cb(void *request, ucs_status_t status,
                            const ucp_tag_recv_info_t *info, void *user_data)
{
    ucp_request_free(request);
    cg__ucx_req_done(user_data, status, info != NULL ? info->length : 0);
}

/* Posts one send on a ready conn. CG_OK when posted (or already done). */
static cg_status_t cg__ucx_post_send(cg__ucx_req_t *req)
{
    cg__ucx_conn_t *conn = req->conn;
    ucp_request_param_t p = {0};
    void *r;

    p.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
    p.cb.send = cg__ucx_send_cb;
    p.user_data = req;
    /* Pending before the post: its callback may run inside it. */
    cg__ucx_req_pend(req);
    r = ucp_tag_send_nbx(conn->ep, req->buf, req->len,
                         cg__ucx_tag(conn->peer_id, req->tag), &p);
    if (UCS_PTR_IS_PTR(r)) {
        cg__ucx_req_kept(req, r);
        return CG_OK;
    }
    cg__ucx_req_unpend(req);
    if (r == NULL) {
        req->status = CG_OK;
        req->length = req->len;
        return CG_OK;
    }
    return cg_error_set(cg__ucx_status(UCS_PTR_STATUS(r)), "ucx: send of "
                        "%zu bytes with tag %u to rank %d failed: %s",
                        req->len, req->tag, conn->super.peer_rank,
                        ucs_status_string(UCS_PTR_STATUS(r)));
}

void cg__ucx_req_post_queued(cg__ucx_conn_t *conn)
{
    cg_list_t all;
    cg_status_t st;

    /* Move everything aside, then re-add in order: receives as they were,
     * queued sends posted now. */
    cg_list_init(&all);
    if (cg_list_empty(&conn->reqs))
        return;
    all.next = conn->reqs.next;
    all.prev = conn->reqs.prev;
    all.next->prev = &all;
    all.prev->next = &all;
    cg_list_init(&conn->reqs);
    conn->pending_bytes = 0;
    while (!cg_list_empty(&all)) {
        cg__ucx_req_t *req = cg_list_entry(all.next, cg__ucx_req_t, link);
        cg_list_del(&req->link);
        if (!(req->flags & CG_UCX_REQ_QUEUED)) {
            cg__ucx_req_pend(req);
            continue;
        }
        req->flags &= ~CG_UCX_REQ_QUEUED;
        req->tp->nsends--; /* counted when queued; post counts it again */
        st = cg__ucx_post_send(req);
        if (st != CG_OK) {
            req->conn = NULL;
            req->status = st;
        }
    }
}

cg_status_t cg__ucx_isend(cg_tp_conn_t *super, const void *buf, size_t len,
                          uint32_t tag, cg_tp_req_t **req_p)
{
    cg__ucx_conn_t *conn = (cg__ucx_conn_t *)super;
    cg__ucx_req_t *req;
    cg_status_t st;

    if (conn->state == CG_UCX_CONN_FAILED)
        return cg_error_set(conn->status, "ucx: send on failed connection "
                            "%u to rank %d: %s", conn->id,
                            conn->super.peer_rank, conn->why);
    req = cg__ucx_req_new(conn, 0);
    if (req == NULL)
        return cg_error_set(CG_ERR_NO_MEMORY, "ucx: cannot allocate a send "
                            "request");
    req->buf = buf;
    req->len = len;
    req->tag = tag;
    if (conn->state == CG_UCX_CONN_HANDSHAKE) {
        req->flags |= CG_UCX_REQ_QUEUED;
        cg__ucx_req_pend(req);
        *req_p = &req->super;
        return CG_OK;
    }
    st = cg__ucx_post_send(req);
    if (st != CG_OK) {
        cg__ucx_req_free(req);
        return st;
    }
    *req_p = &req->super;
    return CG_OK;
}

/* Posts a receive on the worker; req->status is final if it completed at
 * once. Any other error is returned. */
static cg_status_t cg__ucx_post_recv(cg__ucx_req_t *req, void *buf, size_t cap)
{
    cg__ucx_conn_t *conn = req->conn;
    ucp_tag_recv_info_t info = {0};
    ucp_request_param_t p = {0};
    ucs_status_t us;
    void *r;

    ucp_tag_recv_info_t arrived = {0};
    ucp_tag_t tag = cg__ucx_tag(conn->id, req->tag);

    /* UCX 1.13 leaves recv_info.tag_info unfilled when a receive matches a
     * message that has already arrived and completes at once (the size came
     * back 0: test_ucx.c recv_of_arrived_message_reports_size). Such a
     * message is visible to a probe, which tells its length. */
    (void)ucp_tag_probe_nb(req->tp->worker, tag, UINT64_MAX, 0, &arrived);
    p.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA |
                     UCP_OP_ATTR_FIELD_RECV_INFO;
    p.cb.recv = cg__ucx_recv_cb;
    p.user_data = req;
    p.recv_info.tag_info = &info;
    /* Pending before the post: its callback may run inside it. */
    cg__ucx_req_pend(req);
    r = ucp_tag_recv_nbx(req->tp->worker, buf, cap, tag, UINT64_MAX, &p);
    if (UCS_PTR_IS_PTR(r)) {
        cg__ucx_req_kept(req, r);
        return CG_OK;
    }
    cg__ucx_req_unpend(req);
    us = UCS_PTR_STATUS(r);
    if (us != UCS_OK && us != UCS_ERR_MESSAGE_TRUNCATED)
        return cg_error_set(cg__ucx_status(us), "ucx: receive of up to %zu "
                            "bytes with tag %u from rank %d failed: %s", cap,
                            req->tag, conn->super.peer_rank,
                            ucs_status_string(us));
    req->conn = NULL;
    req->status = cg__ucx_status(us);
    if (us == UCS_OK && info.length == 0 && arrived.length <= cap)
        info.length = arrived.length;
    req->length = (us == UCS_OK) ? info.length : 0;
    return CG_OK;
}

cg_status_t cg__ucx_irecv(cg_tp_conn_t *super, void *buf, size_t cap,
                          uint32_t tag, cg_tp_req_t **req_p)
{
    cg__ucx_conn_t *conn = (cg__ucx_conn_t *)super;
    cg__ucx_tp_t *tp = (cg__ucx_tp_t *)super->tp;
    ucp_tag_recv_info_t info;
    cg__ucx_req_t *req;
    cg_status_t st;

    /* A failed conn still delivers what arrived before it failed. */
    if (conn->state == CG_UCX_CONN_FAILED &&
        ucp_tag_probe_nb(tp->worker, cg__ucx_tag(conn->id, tag), UINT64_MAX,
                         0, &info) == NULL)
        return cg_error_set(conn->status, "ucx: receive on failed "
                            "connection %u to rank %d: %s", conn->id,
                            conn->super.peer_rank, conn->why);
    req = cg__ucx_req_new(conn, CG_UCX_REQ_RECV);
    if (req == NULL)
        return cg_error_set(CG_ERR_NO_MEMORY, "ucx: cannot allocate a "
                            "receive request");
    req->tag = tag;
    req->len = cap;
    st = cg__ucx_post_recv(req, buf, cap);
    if (st != CG_OK) {
        cg__ucx_req_free(req);
        return st;
    }
    if (conn->state == CG_UCX_CONN_FAILED && req->status == CG_INPROGRESS) {
        /* Its data would have to come from the dead peer. */
        if (cg__ucx_req_finish(req, conn->status))
            req->flags |= CG_UCX_REQ_RELEASED; /* freed when UCX ends it */
        else
            cg__ucx_req_free(req);
        return cg_error_set(conn->status, "ucx: receive on failed "
                            "connection %u to rank %d: %s", conn->id,
                            conn->super.peer_rank, conn->why);
    }
    *req_p = &req->super;
    return CG_OK;
}

int cg__ucx_done(const cg_tp_req_t *super)
{
    return ((const cg__ucx_req_t *)super)->status != CG_INPROGRESS;
}

