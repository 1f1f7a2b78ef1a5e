/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The TCP socket transport (CG_TRANSPORT=socket): cg__tcp_ops, the transport
 * object, request completion (test/wait) and the poll loop. Connection setup
 * lives in tcp_conn.c, requests in tcp_io.c, socket progress in
 * tcp_progress.c, wire formats in tcp_wire.c: the files form a DAG (cache,
 * io, progress, conn, this one on top), none calls a file above it.
 * Layer: transport; calls transport/sock, transport/handshake
 * and core/base only.
 *
 * Lifetime rules (consistent with transport.h):
 *  - a request returned by isend/irecv stays valid until cg_tp_test or
 *    cg_tp_wait returns something other than CG_INPROGRESS; it is freed
 *    then, and never before, even when its connection fails or is closed;
 *  - a send's buffer may be reused once its request finished OK; a
 *    receive's buffer holds the message once its request finished OK;
 *  - cg_tp_conn_close finishes the conn's unfinished requests with
 *    CG_ERR_CANCELED (test returns that) and drops buffered unexpected
 *    messages; a failed conn keeps complete unexpected messages, so a
 *    receive posted after the peer sent and left still gets them;
 *  - cg_transport_destroy closes every listener and conn and frees every
 *    request, tested or not: no handle may be used after it.
 * The params' log and mem are used until destroy; ifname only in create.
 *
 * Flow control: a message no posted receive matches is buffered (STAGING)
 * while the connection's unexpected bytes stay within CG_TCP_UNEXP_MAX
 * (64 MiB); one that does not fit pauses reading on that connection until
 * its receive is posted, so messages behind it wait too, and a receive
 * waiting on one of those fails with CG_ERR_TIMEOUT after timeout_ns.
 * Timeout: a conn with unfinished requests on which no byte moved for
 * timeout_ns fails them all with CG_ERR_TIMEOUT (a stopped or hung peer);
 * EOF or reset on any of its sockets fails them with CG_ERR_PEER_RESET.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include "core/base/error.h"
#include "transport/tcp_impl.h"

/* cg_tp_wait spins this long before sleeping in poll(). */
#define CG_TCP_SPIN_NS 50000ull
#define CG_TCP_POLL_MS 100

static cg_status_t cg__tcp_create(const cg_transport_params_t *params,
                                  cg_transport_t **tp_p)
{
    char str[CG_SOCKADDR_STRLEN];
    cg__tcp_tp_t *tp;
    cg_status_t status;

    if (params->nsocks < 1 || params->nsocks > CG_HS_NSOCKS_MAX)
        return cg_error_set(CG_ERR_CONFIG,
                            "CG_SOCKET_NSOCKS %d out of range 1..%d",
                            params->nsocks, CG_HS_NSOCKS_MAX);
    if (params->timeout_ns == 0)
        return cg_error_set(CG_ERR_CONFIG, "CG_TIMEOUT must be above 0");
    tp = cg_mem_alloc(&params->mem, CG_MEM_CAT_CONTROL, sizeof(*tp));
    if (tp == NULL)
        return cg_error_set(CG_ERR_NO_MEMORY, "no memory for the socket "
                            "transport");
    memset(tp, 0, sizeof(*tp));
    tp->super.ops = &cg__tcp_ops;
    tp->super.params = *params;
    tp->super.params.ifname = NULL;
    cg_list_init(&tp->conns);
    cg_list_init(&tp->listeners);
    cg_list_init(&tp->done);
    cg_list_init(&tp->req_cache);
    tp->req_size = sizeof(cg__tcp_req_t) +
                   (size_t)params->nsocks * sizeof(cg__tcp_frag_t);
    status = cg_sock_pick_addr(params->ifname, &tp->bind_addr, tp->ifname,
                               sizeof(tp->ifname));
    if (status != CG_OK)
        goto err_free;
    cg_info(params->log, "socket transport on interface %s address %s "
            "nsocks %d", tp->ifname,
            cg_sockaddr_str(&tp->bind_addr, str, sizeof(str)),
            params->nsocks);
    *tp_p = &tp->super;
    return CG_OK;

err_free:
    cg_mem_free(&params->mem, CG_MEM_CAT_CONTROL, tp, sizeof(*tp));
    return status;
}

static void cg__tcp_destroy(cg_transport_t *super)
{
    cg__tcp_tp_t *tp = (cg__tcp_tp_t *)super;

    while (!cg_list_empty(&tp->listeners))
        cg__tcp_listener_close(&cg_list_entry(
            tp->listeners.next, cg__tcp_listener_t, link)->super);
    while (!cg_list_empty(&tp->conns))
        cg__tcp_conn_destroy(cg_list_entry(tp->conns.next, cg__tcp_conn_t,
                                             link), CG_ERR_CANCELED);
    while (!cg_list_empty(&tp->done))
        cg__tcp_req_free(cg_list_entry(tp->done.next, cg__tcp_req_t, link));
    cg__tcp_cache_drain(tp);
    cg__tcp_free(tp, CG_MEM_CAT_CONTROL, tp->pfds,
                 tp->pfds_cap * (sizeof(struct pollfd) + sizeof(void *)));
    cg__tcp_free(tp, CG_MEM_CAT_CONTROL, tp, sizeof(*tp));
}

static cg_status_t cg__tcp_conn_ready(cg_tp_conn_t *super)
{
    cg__tcp_conn_t *conn = (cg__tcp_conn_t *)super;

    cg__tcp_conn_progress(conn);
    if (conn->state == CG_TCP_CONN_READY)
        return CG_OK;
    if (conn->state == CG_TCP_CONN_FAILED)
        return cg_error_set(conn->error, "%s", conn->reason);
    return CG_INPROGRESS;
}

static void cg__tcp_conn_close(cg_tp_conn_t *super)
{
    cg__tcp_conn_destroy((cg__tcp_conn_t *)super, CG_ERR_CANCELED);
}

static cg_status_t cg__tcp_isend(cg_tp_conn_t *super, const void *buf,
                                 size_t len, uint32_t tag,
                                 cg_tp_req_t **req_p)
{
    cg__tcp_conn_t *conn = (cg__tcp_conn_t *)super;
    cg__tcp_req_t *req;
    cg_status_t status;

    if ((buf == NULL && len > 0) || req_p == NULL)
        return cg_error_set(CG_ERR_INVALID_PARAM,
                            "isend: NULL buffer with %zu bytes or NULL "
                            "request pointer", len);
    status = cg__tcp_post_send(conn, buf, len, tag, &req);
    if (status != CG_OK)
        return status;
    *req_p = &req->super;
    if (conn->state == CG_TCP_CONN_READY)
        cg__tcp_conn_tx(conn); /* eager: most sends leave at once */
    return CG_OK;
}

static cg_status_t cg__tcp_irecv(cg_tp_conn_t *super, void *buf, size_t cap,
                                 uint32_t tag, cg_tp_req_t **req_p)
{
    cg__tcp_req_t *req;
    cg_status_t status;

    if ((buf == NULL && cap > 0) || req_p == NULL)
        return cg_error_set(CG_ERR_INVALID_PARAM,
                            "irecv: NULL buffer with capacity %zu or NULL "
                            "request pointer", cap);
    status = cg__tcp_post_recv((cg__tcp_conn_t *)super, buf, cap, tag, &req);
    if (status == CG_OK)
        *req_p = &req->super;
    return status;
}

/* Drives every connection once (not the listeners). */
static void cg__tcp_progress_conns(cg__tcp_tp_t *tp)
{
    for (cg_list_t *e = tp->conns.next, *n; e != &tp->conns; e = n) {
        n = e->next;
        cg__tcp_conn_progress(cg_list_entry(e, cg__tcp_conn_t, link));
    }
}

static cg_status_t cg__tcp_progress(cg_transport_t *super)
{
    cg__tcp_tp_t *tp = (cg__tcp_tp_t *)super;

    for (cg_list_t *e = tp->listeners.next; e != &tp->listeners;
         e = e->next)
        cg__tcp_listener_progress(cg_list_entry(e, cg__tcp_listener_t,
                                                  link));
    cg__tcp_progress_conns(tp);
    return CG_OK;
}

/* Finished: report and free. */
static cg_status_t cg__tcp_req_report(cg__tcp_req_t *req, size_t *size_p)
{
    cg_status_t status = req->status;

    if (status == CG_OK && size_p != NULL)
        *size_p = req->len;
    else if (status == CG_ERR_TRUNCATED)
        cg_error_set(status, "message of %zu bytes with tag %u does not fit "
                     "the receive buffer of %zu bytes", req->len, req->tag,
                     req->cap);
    else if (status != CG_OK)
        cg_error_set(status, "%s %s (tag %u, %zu bytes)",
                     req->kind == CG_TCP_REQ_SEND ? "send" : "receive",
                     cg_status_string(status), req->tag, req->cap);
    cg__tcp_req_free(req);
    return status;
}

static cg_status_t cg__tcp_test(cg_tp_req_t *super, size_t *size_p)
{
    cg__tcp_req_t *req = (cg__tcp_req_t *)super;

    if (req->status == CG_INPROGRESS)
        cg__tcp_progress_conns(req->tp);
    if (req->status == CG_INPROGRESS)
        return CG_INPROGRESS;
    return cg__tcp_req_report(req, size_p);
}

static int cg__tcp_done(const cg_tp_req_t *super)
{
    return ((const cg__tcp_req_t *)super)->status != CG_INPROGRESS;
}

static cg_status_t cg__tcp_pfds_reserve(cg__tcp_tp_t *tp, size_t n)
{
    size_t unit = sizeof(struct pollfd) + sizeof(void *);
    size_t cap = tp->pfds_cap ? tp->pfds_cap : 16;
    void *p;

    if (n <= tp->pfds_cap)
        return CG_OK;
    while (cap < n)
        cap *= 2;
    p = cg__tcp_alloc(tp, CG_MEM_CAT_CONTROL, cap * unit);
    if (p == NULL)
        return CG_ERR_NO_MEMORY;
    cg__tcp_free(tp, CG_MEM_CAT_CONTROL, tp->pfds, tp->pfds_cap * unit);
    tp->pfds = p;
    tp->pfds_cap = cap;
    return CG_OK;
}

/* A socket poll flagged with an error or hang-up while we are not reading
 * it: find out whether the peer is gone. */
static void cg__tcp_check_hup(cg__tcp_conn_t *conn, int fd)
{
    char byte;
    ssize_t n;

    for (int i = 0; i < conn->nsocks; i++)
        if (conn->socks[i].fd == fd && conn->socks[i].eof)
            return; /* known: cg__tcp_check_eof decides */
    n = recv(fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT);

    if (n == 0)
        cg__tcp_conn_fail(conn, cg_error_set(CG_ERR_PEER_RESET,
                                             "fd %d: connection closed by "
                                             "peer", fd));
    else if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK)
        cg__tcp_conn_fail(conn, cg_error_set(CG_ERR_PEER_RESET,
                                             "fd %d: %m", fd));
}

/* Sleeps in poll() on every socket of the transport, at most ms. */
static void cg__tcp_poll(cg__tcp_tp_t *tp, int ms)
{
    cg__tcp_conn_t **owner;
    size_t n = 0, need = 0;

    for (cg_list_t *e = tp->conns.next; e != &tp->conns; e = e->next)
        need += (size_t)cg_list_entry(e, cg__tcp_conn_t, link)->nsocks;
    for (cg_list_t *e = tp->listeners.next; e != &tp->listeners;
         e = e->next)
        need += 1 + (size_t)cg_list_entry(e, cg__tcp_listener_t,
                                             link)->npending;
    if (cg__tcp_pfds_reserve(tp, need) != CG_OK) {
        poll(NULL, 0, 1); /* no memory for the set: nap briefly */
        return;
    }
    owner = (cg__tcp_conn_t **)(tp->pfds + tp->pfds_cap);
    for (cg_list_t *e = tp->conns.next; e != &tp->conns; e = e->next) {
        cg__tcp_conn_t *c = cg_list_entry(e, cg__tcp_conn_t, link);
        for (int i = 0; i < c->nsocks && c->state != CG_TCP_CONN_FAILED;
             i++) {
            tp->pfds[n] = (struct pollfd){c->socks[i].fd,
                                          cg__tcp_sock_events(c, i), 0};
            owner[n++] = c;
        }
    }
    for (cg_list_t *e = tp->listeners.next; e != &tp->listeners;
         e = e->next) {
        cg__tcp_listener_t *l = cg_list_entry(e, cg__tcp_listener_t, link);
        tp->pfds[n] = (struct pollfd){l->fd, POLLIN, 0};
        owner[n++] = NULL;
        for (cg_list_t *p = l->pending.next; p != &l->pending;
             p = p->next) {
            cg__tcp_pend_t *pd = cg_list_entry(p, cg__tcp_pend_t, link);
            tp->pfds[n] = (struct pollfd){pd->fd,
                                          cg_hs_poll_events(&pd->hs), 0};
            owner[n++] = NULL;
        }
    }
    if (poll(tp->pfds, n, ms) <= 0)
        return;
    for (size_t i = 0; i < n; i++)
        if (owner[i] != NULL && (tp->pfds[i].revents & (POLLERR | POLLHUP)) &&
            !(tp->pfds[i].events & POLLIN))
            cg__tcp_check_hup(owner[i], tp->pfds[i].fd);
}

static cg_status_t cg__tcp_wait(cg_tp_req_t *super, size_t *size_p)
{
    cg__tcp_req_t *req = (cg__tcp_req_t *)super;
    uint64_t spin_end = cg_now_ns() + CG_TCP_SPIN_NS;
    cg_status_t status;

    while ((status = cg__tcp_test(super, size_p)) == CG_INPROGRESS) {
        if (cg_now_ns() < spin_end)
            continue;
        cg__tcp_poll(req->tp, CG_TCP_POLL_MS);
        for (cg_list_t *e = req->tp->listeners.next;
             e != &req->tp->listeners; e = e->next)
            cg__tcp_listener_progress(cg_list_entry(e, cg__tcp_listener_t,
                                                      link));
    }
    return status;
}

const cg_transport_ops_t cg__tcp_ops = {
    .kind = CG_TRANSPORT_SOCKET,
    .create = cg__tcp_create,
    .destroy = cg__tcp_destroy,
    .listen = cg__tcp_listen,
    .accept = cg__tcp_accept,
    .listener_close = cg__tcp_listener_close,
    .connect = cg__tcp_connect,
    .conn_ready = cg__tcp_conn_ready,
    .conn_close = cg__tcp_conn_close,
    .isend = cg__tcp_isend,
    .irecv = cg__tcp_irecv,
    .test = cg__tcp_test,
    .done = cg__tcp_done,
    .wait = cg__tcp_wait,
    .progress = cg__tcp_progress,
};
