/* SPDX-License-Identifier: Apache-2.0 */
/*
 * UCX backend connections: a TCP control socket per connection carries the
 * handshake (job cookie, rank, conn id and worker address both ways), then
 * stays open as the liveness signal (EOF or reset = the peer is gone); on
 * endpoints without UCX error handling (peers on this host, ucx_mode.c) it
 * is the only one. Connect, endpoint creation, the per-conn sweep
 * (liveness, timeout), failure and close, and the transport's epoll set;
 * listeners are in ucx_listen.c, readiness (which drives progress) in
 * ucx.c.
 * Layer: transport; calls UCX, transport/sock, transport/handshake and
 * core/base only.
 */
#include "transport/ucx_impl.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>

#include "core/base/error.h"

/* Longest a discard waits for its endpoint close. */
#define CG_UCX_CLOSE_NS 2000000000ull
/* Longest cg_tp_conn_close waits for its endpoint flush before parking it
 * (sweeps and destroy finish it): a live peer answers in far less, and a
 * failing group closes every connection, so waiting longer for silent
 * peers would add this much per unreachable peer to the error's delay. */
#define CG_UCX_CLOSE_WAIT_NS 200000000ull
/* Progress rounds that drain data already received from a dead peer. */
#define CG_UCX_DRAIN_ROUNDS 1000

static uint32_t cg__ucx_get32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
           (uint32_t)p[3] << 24;
}

void cg__ucx_epoll_add(cg__ucx_tp_t *tp, int fd)
{
    struct epoll_event ev = {.events = EPOLLIN | EPOLLRDHUP, .data.fd = fd};

    if (epoll_ctl(tp->epfd, EPOLL_CTL_ADD, fd, &ev) != 0)
        cg_warn(tp->log, "ucx: epoll_ctl add fd %d failed: %m (waits will "
                "poll instead of sleeping on it)", fd);
}

void cg__ucx_epoll_del(cg__ucx_tp_t *tp, int fd)
{
    if (epoll_ctl(tp->epfd, EPOLL_CTL_DEL, fd, NULL) != 0)
        cg_debug(tp->log, "ucx: epoll_ctl del fd %d failed: %m", fd);
}

static cg_status_t cg__ucx_conn_before_answer(cg_hs_t *hs, void *arg);

static cg__ucx_tp_t *cg__ucx_conn_tp(const cg__ucx_conn_t *conn)
{
    return (cg__ucx_tp_t *)conn->super.tp;
}

cg__ucx_conn_t *cg__ucx_conn_new(cg__ucx_tp_t *tp, int fd, cg_hs_role_t role)
{
    size_t payload_len = CG_UCX_PREFIX_SIZE + tp->addr_len;
    size_t size = sizeof(cg__ucx_conn_t) + payload_len;
    cg_hs_hdr_t local = {0};
    cg__ucx_conn_t *conn;

    conn = cg_mem_alloc(&tp->super.params.mem, CG_MEM_CAT_CONTROL, size);
    if (conn == NULL)
        return NULL;
    memset(conn, 0, sizeof(*conn));
    conn->super.ops = tp->super.ops; /* cg__ucx_ops, from ucx.c */
    conn->super.tp = &tp->super;
    conn->super.peer_rank = -1;
    conn->alloc_size = size;
    conn->state = CG_UCX_CONN_HANDSHAKE;
    conn->status = CG_INPROGRESS;
    conn->fd = fd;
    if (tp->next_conn_id == 0)
        tp->next_conn_id = 1;
    conn->id = tp->next_conn_id++;
    cg_list_init(&conn->link);
    cg_list_init(&conn->reqs);
    cg__ucx_put32(conn->payload, conn->id);
    cg__ucx_mode_pack(tp, conn->payload + 4);
    memcpy(conn->payload + CG_UCX_PREFIX_SIZE, tp->addr, tp->addr_len);

    local.kind = CG_HS_KIND_UCX_CTRL;
    local.cookie = tp->super.params.cookie;
    local.rank = tp->super.params.rank;
    local.nsocks = 1;
    local.conn_id = conn->id;
    local.payload_len = (uint32_t)payload_len;
    cg_sock_tune(fd, tp->super.params.timeout_ns);
    cg_hs_init(&conn->hs, role, fd, &local, conn->payload,
               cg_deadline_ns(tp->super.params.timeout_ns));
    if (role == CG_HS_ACCEPTOR) {
        conn->hs.before_answer = cg__ucx_conn_before_answer;
        conn->hs.before_answer_arg = conn;
    }
    tp->nhs++;
    return conn;
}

/* Closes the control socket (the liveness monitor) and drops it from the
 * transport's poll set. Idempotent. */
static void cg__ucx_close_ctrl(cg__ucx_tp_t *tp, cg__ucx_conn_t *conn)
{
    if (conn->fd < 0)
        return;
    if (conn->in_epoll)
        cg__ucx_epoll_del(tp, conn->fd);
    conn->in_epoll = 0;
    cg_sock_close(conn->fd);
    conn->fd = -1;
}

void cg__ucx_conn_free(cg__ucx_conn_t *conn)
{
    cg__ucx_tp_t *tp = cg__ucx_conn_tp(conn);

    if (conn->state == CG_UCX_CONN_HANDSHAKE)
        tp->nhs--;
    cg__ucx_close_ctrl(tp, conn);
    cg_list_del(&conn->link);
    cg_mem_free(&tp->super.params.mem, CG_MEM_CAT_CONTROL, conn,
                conn->alloc_size);
}

static void cg__ucx_ep_error(void *arg, ucp_ep_h ep, ucs_status_t status)
{
    cg__ucx_conn_t *conn = arg;

    (void)ep;
    /* Runs inside ucp_worker_progress: only note it; the sweep fails the
     * conn outside UCX. */
    conn->ep_error = status;
    cg__ucx_conn_tp(conn)->sweep_now = 1;
}

static ucs_status_t cg__ucx_ep_create(cg__ucx_conn_t *conn, int none)
{
    cg__ucx_tp_t *tp = cg__ucx_conn_tp(conn);
    ucp_ep_params_t ep = {0};

    ep.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS |
                    UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                    UCP_EP_PARAM_FIELD_ERR_HANDLER;
    ep.address = (const ucp_address_t *)(conn->hs.peer_payload +
                                         CG_UCX_PREFIX_SIZE);
    ep.err_mode = none ? UCP_ERR_HANDLING_MODE_NONE
                       : UCP_ERR_HANDLING_MODE_PEER;
    ep.err_handler.cb = cg__ucx_ep_error;
    ep.err_handler.arg = conn;
    conn->err_none = none;
    return ucp_ep_create(tp->worker, &ep, &conn->ep);
}

/* Drops an endpoint that never carried traffic, waiting a bounded time. */
static void cg__ucx_ep_discard(cg__ucx_conn_t *conn)
{
    cg__ucx_tp_t *tp = cg__ucx_conn_tp(conn);
    ucp_request_param_t p = {0};
    uint64_t deadline = cg_now_ns() + CG_UCX_CLOSE_NS;
    void *r;

    p.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
    p.flags = UCP_EP_CLOSE_FLAG_FORCE;
    r = ucp_ep_close_nbx(conn->ep, &p);
    conn->ep = NULL;
    if (!UCS_PTR_IS_PTR(r))
        return;
    while (ucp_request_check_status(r) == UCS_INPROGRESS &&
           cg_now_ns() < deadline)
        ucp_worker_progress(tp->worker);
    ucp_request_free(r); /* released by UCX when it ends */
}

/* A peer on this host, both offering shared memory: an endpoint without
 * UCX error handling, kept when its lanes are all shared memory (UCX then
 * uses its zero-copy CMA rendezvous); otherwise, and for every other peer,
 * one with peer error handling (see ucx_mode.c). */
static ucs_status_t cg__ucx_conn_make_ep(cg__ucx_conn_t *conn)
{
    cg__ucx_tp_t *tp = cg__ucx_conn_tp(conn);
    char tl[32];
    ucs_status_t us;

    if (!cg__ucx_mode_want_none(tp, conn->hs.peer_payload + 4))
        return cg__ucx_ep_create(conn, 0);
    us = cg__ucx_ep_create(conn, 1);
    if (us != UCS_OK ||
        cg__ucx_ep_shm_only(tp, conn->ep, tl, sizeof(tl), &conn->rndv_min))
        return us;
    cg_warn(tp->log, "ucx: endpoint to rank %d on this host uses transport "
            "%s, not only shared memory; recreating it with peer error "
            "handling (no zero-copy rendezvous)", (int)conn->hs.peer.rank,
            tl);
    cg__ucx_ep_discard(conn);
    return cg__ucx_ep_create(conn, 0);
}

/* The peer's handshake header and payload are in: check the payload, take
 * the peer's id and address, make the ep; the conn's state is left as it
 * is. On failure conn->ep stays NULL. */
static cg_status_t cg__ucx_conn_peer_ep(cg__ucx_conn_t *conn)
{
    const cg_hs_hdr_t *peer = &conn->hs.peer;
    ucs_status_t us;

    if (peer->payload_len <= CG_UCX_PREFIX_SIZE ||
        !cg__ucx_mode_valid(conn->hs.peer_payload + 4))
        return cg_error_set(CG_ERR_HANDSHAKE, "ucx: handshake payload of %u "
                            "bytes from rank %d is not this version's "
                            "layout (conn id, flags, host key, worker "
                            "address); do all ranks run the same collguard?",
                            peer->payload_len, (int)peer->rank);
    conn->peer_id = cg__ucx_get32(conn->hs.peer_payload);
    us = cg__ucx_conn_make_ep(conn);
    if (us != UCS_OK) {
        conn->ep = NULL;
        return cg_error_set(CG_ERR_UNREACHABLE, "ucx: ucp_ep_create to rank "
                            "%d failed: %s", peer->rank,
                            ucs_status_string(us));
    }
    return CG_OK;
}

/* The acceptor's handshake hook: the endpoint is made before the answer
 * goes out. The answer completes the peer's connect, after which the peer
 * may close its conn at once, destroying its worker and the shared memory
 * our endpoint must attach (ucp_ep_create then fails: "shmat ... Invalid
 * argument"), so making it after the answer lost connections that the
 * peer had seen complete. */
static cg_status_t cg__ucx_conn_before_answer(cg_hs_t *hs, void *arg)
{
    cg__ucx_conn_t *conn = arg;
    cg_status_t st;

    (void)hs;
    st = cg__ucx_conn_peer_ep(conn);
    if (st != CG_OK) {
        conn->no_ep = 1;
        snprintf(conn->why, sizeof(conn->why), "%s", cg_last_error());
    }
    return st;
}

/* The handshake is done: make the ep (the acceptor's exists already), and
 * the conn is ready. */
cg_status_t cg__ucx_conn_establish(cg__ucx_conn_t *conn)
{
    cg__ucx_tp_t *tp = cg__ucx_conn_tp(conn);
    cg_status_t st;

    if (conn->ep == NULL) {
        st = cg__ucx_conn_peer_ep(conn);
        if (st != CG_OK)
            return st;
    }
    conn->super.peer_rank = conn->hs.peer.rank;
    conn->state = CG_UCX_CONN_READY;
    conn->status = CG_OK;
    conn->last_activity_ns = 0;
    tp->nhs--;
    return CG_OK;
}

static void cg__ucx_ep_close(cg__ucx_conn_t *conn, int force)
{
    ucp_request_param_t p = {0};
    void *r;

    p.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
    p.flags = force ? UCP_EP_CLOSE_FLAG_FORCE : 0;
    r = ucp_ep_close_nbx(conn->ep, &p);
    conn->ep = NULL;
    if (UCS_PTR_IS_PTR(r))
        conn->close_req = r;
    else if (UCS_PTR_IS_ERR(r))
        cg_debug(cg__ucx_conn_tp(conn)->log, "ucx: closing the endpoint to "
                 "rank %d: %s", conn->super.peer_rank,
                 ucs_status_string(UCS_PTR_STATUS(r)));
}

/* Frees a finished endpoint close request; 1 when none is left. */
static int cg__ucx_close_done(cg__ucx_conn_t *conn)
{
    if (conn->close_req == NULL)
        return 1;
    if (ucp_request_check_status(conn->close_req) == UCS_INPROGRESS)
        return 0;
    ucp_request_free(conn->close_req);
    conn->close_req = NULL;
    return 1;
}

int cg__ucx_conn_reap(cg__ucx_conn_t *conn)
{
    if (!cg__ucx_close_done(conn))
        return 0;
    cg__ucx_conn_free(conn);
    return 1;
}

void cg__ucx_conn_fail(cg__ucx_conn_t *conn, cg_status_t status,
                       const char *why)
{
    cg__ucx_tp_t *tp = cg__ucx_conn_tp(conn);
    int live_sends = 0;

    if (conn->state == CG_UCX_CONN_FAILED)
        return;
    if (conn->state == CG_UCX_CONN_HANDSHAKE)
        tp->nhs--;
    conn->state = CG_UCX_CONN_FAILED;
    conn->status = status;
    snprintf(conn->why, sizeof(conn->why), "%s", why);
    /* A peer that closes while nothing is pending is ordinary. */
    if (cg_list_empty(&conn->reqs))
        cg_debug(tp->log, "ucx: connection %u to rank %d ended: %s",
                 conn->id, conn->super.peer_rank, conn->why);
    else
        cg_warn(tp->log, "ucx: connection %u to rank %d failed: %s",
                conn->id, conn->super.peer_rank, conn->why);
    cg__ucx_mode_abandon(conn);
    while (!cg_list_empty(&conn->reqs)) {
        cg__ucx_req_t *req =
            cg_list_entry(conn->reqs.next, cg__ucx_req_t, link);
        if (!(req->flags & CG_UCX_REQ_RECV) && req->ucp != NULL)
            live_sends = 1;
        cg__ucx_req_finish(req, status);
    }
    /* A force close drops what UCX still queues for the peer; without UCX
     * error handling, forcing it while a finished rendezvous still has its
     * reply queued trips an assertion of UCX 1.13 when the worker is
     * destroyed, so such endpoints close gracefully unless sends are in
     * flight (their close is bounded by the sweep and destroy). */
    if (conn->ep != NULL)
        cg__ucx_ep_close(conn, live_sends || !conn->err_none);
    cg__ucx_close_ctrl(tp, conn);
}

/* Before failing a conn whose peer went away, deliver what already
 * arrived from it. */
static void cg__ucx_drain(cg__ucx_tp_t *tp)
{
    int i;

    for (i = 0; i < CG_UCX_DRAIN_ROUNDS; i++) {
        if (ucp_worker_progress(tp->worker) == 0)
            break;
    }
}

void cg__ucx_conn_sweep(cg__ucx_conn_t *conn, uint64_t now)
{
    cg__ucx_tp_t *tp = cg__ucx_conn_tp(conn);
    uint64_t timeout = tp->super.params.timeout_ns;
    char why[160];
    char byte;
    ssize_t n;

    cg__ucx_close_done(conn);
    if (conn->state != CG_UCX_CONN_READY)
        return;
    if (conn->ep_error != UCS_OK) {
        cg__ucx_drain(tp);
        snprintf(why, sizeof(why), "endpoint error: %s",
                 ucs_status_string(conn->ep_error));
        cg__ucx_conn_fail(conn, CG_ERR_PEER_RESET, why);
        return;
    }
    n = recv(conn->fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK &&
                   errno != EINTR)) {
        if (n == 0)
            snprintf(why, sizeof(why), "peer closed its control socket");
        else
            snprintf(why, sizeof(why), "control socket: %s",
                     strerror(errno));
        cg__ucx_drain(tp);
        cg__ucx_conn_fail(conn, CG_ERR_PEER_RESET, why);
        return;
    }
    if (n > 0) {
        cg__ucx_conn_fail(conn, CG_ERR_PEER_RESET, "the peer gave up its "
                          "sends (it failed or closed the connection)");
        return;
    }
    if (conn->last_activity_ns == 0) {
        conn->last_activity_ns = now;
        return;
    }
    if (timeout == 0 || cg_list_empty(&conn->reqs))
        return;
    timeout += conn->pending_bytes / CG_UCX_MIN_BPS * 1000000000ull;
    if (now - conn->last_activity_ns > timeout) {
        snprintf(why, sizeof(why), "no request completed for %.1f s while "
                 "%llu bytes were pending (CG_TIMEOUT %.1f s)",
                 (double)(now - conn->last_activity_ns) / 1e9,
                 (unsigned long long)conn->pending_bytes,
                 (double)tp->super.params.timeout_ns / 1e9);
        cg__ucx_conn_fail(conn, CG_ERR_TIMEOUT, why);
    }
}

void cg__ucx_conn_hs_progress(cg__ucx_conn_t *conn)
{
    cg__ucx_tp_t *tp = cg__ucx_conn_tp(conn);
    cg_status_t st = cg_hs_progress(&conn->hs);

    if (st == CG_INPROGRESS)
        return;
    if (st == CG_OK)
        st = cg__ucx_conn_establish(conn);
    if (st != CG_OK) {
        cg__ucx_conn_fail(conn, st, cg_last_error());
        return;
    }
    cg__ucx_epoll_add(tp, conn->fd);
    conn->in_epoll = 1;
    cg_debug(tp->log, "ucx: connection %u to rank %d ready (peer conn %u, "
             "%s)", conn->id, conn->super.peer_rank, conn->peer_id,
             conn->err_none ? "shared memory, control socket watches the "
             "peer" : "ucx peer error handling");
    cg__ucx_req_post_queued(conn);
}

cg_status_t cg__ucx_connect(cg_transport_t *super,
                            const cg_tp_handle_t *handle,
                            cg_tp_conn_t **conn_p)
{
    cg__ucx_tp_t *tp = (cg__ucx_tp_t *)super;
    cg_sockaddr_t addr;
    cg__ucx_conn_t *conn;
    cg_status_t st;
    int fd;

    if (cg__ucx_get32(handle->bytes) != CG_UCX_HANDLE_MAGIC)
        return cg_error_set(CG_ERR_INVALID_PARAM, "ucx: connect handle is "
                            "not a UCX listen handle (magic 0x%08x); do both "
                            "sides use the same CG_TRANSPORT?",
                            cg__ucx_get32(handle->bytes));
    st = cg_sockaddr_unpack(handle->bytes + 4, &addr);
    if (st != CG_OK)
        return st;
    st = cg_sock_connect_start(&addr, &fd);
    if (st != CG_OK)
        return st;
    conn = cg__ucx_conn_new(tp, fd, CG_HS_CONNECTOR);
    if (conn == NULL) {
        cg_sock_close(fd);
        return cg_error_set(CG_ERR_NO_MEMORY, "ucx: cannot allocate a "
                            "connection");
    }
    cg_list_push(&tp->conns, &conn->link);
    cg__ucx_conn_hs_progress(conn);
    *conn_p = &conn->super;
    return CG_OK;
}

void cg__ucx_conn_close(cg_tp_conn_t *super)
{
    cg__ucx_conn_t *conn = (cg__ucx_conn_t *)super;
    cg__ucx_tp_t *tp = cg__ucx_conn_tp(conn);
    int live_sends = 0, live_recvs = 0;
    uint64_t deadline;

    cg__ucx_mode_abandon(conn);
    while (!cg_list_empty(&conn->reqs)) {
        cg__ucx_req_t *req =
            cg_list_entry(conn->reqs.next, cg__ucx_req_t, link);
        int recv = (req->flags & CG_UCX_REQ_RECV) != 0;
        if (cg__ucx_req_finish(req, CG_ERR_CANCELED)) {
            if (recv)
                live_recvs = 1;
            else
                live_sends = 1;
        }
    }
    /* Flush what was sent, unless sends are stuck or the peer is gone.
     * With peer error handling, a receive matched to a rendezvous (cancel
     * cannot take it back) is stuck too: a graceful close would wait on
     * it, past CG_UCX_CLOSE_WAIT_NS when the peer is cut off, and
     * ucp_worker_destroy then aborts on the endpoint's live request (UCX
     * 1.13: the "proto_reqs" assertion). Without it (shared memory, see
     * cg__ucx_conn_fail) such a receive completes from this side (CMA)
     * and forcing its endpoint trips another UCX assertion. */
    if (conn->ep != NULL)
        cg__ucx_ep_close(conn, live_sends || (live_recvs && !conn->err_none) ||
                                   conn->state != CG_UCX_CONN_READY);
    deadline = cg_now_ns() + CG_UCX_CLOSE_WAIT_NS;
    while (!cg__ucx_close_done(conn) && cg_now_ns() < deadline)
        ucp_worker_progress(tp->worker);
    cg_list_del(&conn->link);
    if (conn->close_req == NULL) {
        cg__ucx_conn_free(conn);
        return;
    }
    cg_warn(tp->log, "ucx: endpoint to rank %d did not close within %.1f s; "
            "finishing in the background", conn->super.peer_rank,
            CG_UCX_CLOSE_WAIT_NS / 1e9);
    cg__ucx_close_ctrl(tp, conn);
    if (conn->state == CG_UCX_CONN_HANDSHAKE)
        tp->nhs--;
    conn->state = CG_UCX_CONN_FAILED;
    cg_list_push(&tp->closing, &conn->link);
}
