/* SPDX-License-Identifier: Apache-2.0 */
/*
 * UCX backend listeners: the listening control socket (its packed address
 * is the listen handle), accepting sockets, running the acceptor side of
 * the handshake for each, dropping bad peers with a log line while serving
 * the rest, and handing handshaked conns to cg_tp_accept. Layer: transport;
 * calls UCX, transport/sock, transport/handshake and core/base only.
 */
#include "transport/ucx_impl.h"

#include <stdio.h>
#include <string.h>

#include "core/base/clock.h"
#include "core/base/error.h"

cg_status_t cg__ucx_listen(cg_transport_t *super, cg_tp_handle_t *handle_p,
                           cg_tp_listener_t **listener_p)
{
    cg__ucx_tp_t *tp = (cg__ucx_tp_t *)super;
    cg__ucx_listener_t *l;
    cg_sockaddr_t addr;
    char str[CG_SOCKADDR_STRLEN];
    cg_status_t st;

    st = cg_sock_pick_addr(tp->ifname, &addr, NULL, 0);
    if (st != CG_OK)
        return st;
    l = cg_mem_alloc(&tp->super.params.mem, CG_MEM_CAT_CONTROL, sizeof(*l));
    if (l == NULL)
        return cg_error_set(CG_ERR_NO_MEMORY, "ucx: cannot allocate a "
                            "listener");
    memset(l, 0, sizeof(*l));
    l->super.ops = super->ops;
    l->super.tp = super;
    cg_list_init(&l->pending);
    cg_list_init(&l->ready);
    st = cg_sock_listen(&addr, CG_UCX_BACKLOG, &l->fd, &l->addr);
    if (st != CG_OK) {
        cg_mem_free(&tp->super.params.mem, CG_MEM_CAT_CONTROL, l,
                    sizeof(*l));
        return st;
    }
    memset(handle_p, 0, sizeof(*handle_p));
    cg__ucx_put32(handle_p->bytes, CG_UCX_HANDLE_MAGIC);
    cg_sockaddr_pack(&l->addr, handle_p->bytes + 4);
    snprintf(l->where, sizeof(l->where), "ucx: listener on %s",
             cg_sockaddr_str(&l->addr, str, sizeof(str)));
    cg__ucx_epoll_add(tp, l->fd);
    cg_list_push(&tp->listeners, &l->link);
    cg_debug(tp->log, "ucx: listening on %s",
             cg_sockaddr_str(&l->addr, str, sizeof(str)));
    *listener_p = &l->super;
    return CG_OK;
}

/* Drops a conn that has not been handed out: one whose endpoint exists
 * (made before the answer, see ucx_conn.c) closes it, in the background
 * if need be. */
static void cg__ucx_conn_drop(cg__ucx_conn_t *conn)
{
    if (conn->ep != NULL || conn->close_req != NULL)
        cg__ucx_conn_close(&conn->super);
    else
        cg__ucx_conn_free(conn);
}

/* One handshake step of a pending conn; true when it left the list
 * (ready for accept, or refused and freed). A peer that passed the checks
 * but whose endpoint could not be made is handed to accept failed, so the
 * accept reports it instead of waiting for a connection that came. */
static bool cg__ucx_pend_step(cg__ucx_listener_t *l, cg__ucx_conn_t *conn)
{
    cg__ucx_tp_t *tp = (cg__ucx_tp_t *)l->super.tp;
    char str[CG_SOCKADDR_STRLEN];
    cg_status_t st = cg_hs_progress(&conn->hs);

    if (st == CG_INPROGRESS)
        return false;
    l->npending--;
    cg_list_del(&conn->link);
    if (st == CG_OK)
        st = cg__ucx_conn_establish(conn);
    if (st == CG_OK) {
        cg_list_push(&l->ready, &conn->link);
        return true;
    }
    if (conn->no_ep) {
        char why[sizeof(conn->why)];
        snprintf(why, sizeof(why), "%s", conn->why);
        cg_warn(tp->log, "%s: connection %u from %s (peer rank %d) passed "
                "the handshake checks but failed: %s", l->where, conn->id,
                cg_sockaddr_str(&conn->from, str, sizeof(str)),
                (int)conn->hs.peer.rank, why);
        cg__ucx_conn_fail(conn, st, why);
        cg_list_push(&l->ready, &conn->link);
        return true;
    }
    if (cg_hs_limit_take(&l->refusals, tp->log, l->where))
        cg_warn(tp->log, "%s: refused connection %u from %s (peer rank "
                "%d): %s", l->where, conn->id,
                cg_sockaddr_str(&conn->from, str, sizeof(str)),
                (int)conn->hs.peer.rank, cg_last_error());
    cg__ucx_conn_drop(conn);
    return true;
}

/* Every handshake slot is taken: free the oldest, after one last step
 * (its header may just have arrived), unless it is younger than
 * CG_UCX_EVICT_GRACE_NS (false: leave new connections in the backlog for
 * now). A real peer sends its header as soon as it is connected, so the
 * conn that has waited longest is the likeliest stranger that says
 * nothing; without this, strangers holding every slot kept the job's own
 * connections in the kernel's backlog until their handshakes timed out
 * (CG_TIMEOUT). */
static bool cg__ucx_make_room(cg__ucx_listener_t *l)
{
    cg__ucx_tp_t *tp = (cg__ucx_tp_t *)l->super.tp;
    cg__ucx_conn_t *conn = cg_list_entry(l->pending.next, cg__ucx_conn_t,
                                         link);
    uint64_t age = cg_now_ns() - conn->born_ns;
    char str[CG_SOCKADDR_STRLEN];

    if (cg__ucx_pend_step(l, conn))
        return true;
    if (age < CG_UCX_EVICT_GRACE_NS)
        return false;
    if (cg_hs_limit_take(&l->refusals, tp->log, l->where))
        cg_warn(tp->log, "%s: dropped connection from %s: no handshake "
                "after %.2f s while more connections wait (%d handshakes "
                "at most)", l->where,
                cg_sockaddr_str(&conn->from, str, sizeof(str)),
                (double)age / 1e9, CG_UCX_PENDING_MAX);
    l->npending--;
    cg__ucx_conn_drop(conn);
    return true;
}

/* Accepts what the backlog holds, up to CG_UCX_PENDING_MAX a call; a conn
 * accepted in this call is never evicted in it (the grace). */
static void cg__ucx_listener_accept_new(cg__ucx_listener_t *l)
{
    cg__ucx_tp_t *tp = (cg__ucx_tp_t *)l->super.tp;
    cg__ucx_conn_t *conn;
    cg_sockaddr_t from;
    cg_status_t st;
    int fd;

    for (int n = 0; n < CG_UCX_PENDING_MAX; n++) {
        if (l->npending >= CG_UCX_PENDING_MAX && !cg__ucx_make_room(l))
            return;
        st = cg_sock_accept(l->fd, &fd, &from);
        if (st == CG_INPROGRESS)
            return;
        if (st != CG_OK) {
            cg_warn(tp->log, "ucx: accept failed: %s", cg_last_error());
            return;
        }
        conn = cg__ucx_conn_new(tp, fd, CG_HS_ACCEPTOR);
        if (conn == NULL) {
            cg_warn(tp->log, "ucx: no memory for an incoming connection; "
                    "dropped it");
            cg_sock_close(fd);
            return;
        }
        conn->listener = l;
        conn->born_ns = cg_now_ns();
        conn->from = from;
        cg_list_push(&l->pending, &conn->link);
        l->npending++;
    }
}

void cg__ucx_listener_progress(cg__ucx_listener_t *l)
{
    cg__ucx_tp_t *tp = (cg__ucx_tp_t *)l->super.tp;
    cg_list_t *link, *next;

    cg_hs_limit_flush(&l->refusals, tp->log, l->where, false);
    cg__ucx_listener_accept_new(l);
    for (link = l->pending.next; link != &l->pending; link = next) {
        next = link->next;
        cg__ucx_pend_step(l, cg_list_entry(link, cg__ucx_conn_t, link));
    }
}

cg_status_t cg__ucx_accept(cg_tp_listener_t *super, cg_tp_conn_t **conn_p)
{
    cg__ucx_listener_t *l = (cg__ucx_listener_t *)super;
    cg__ucx_tp_t *tp = (cg__ucx_tp_t *)super->tp;
    cg__ucx_conn_t *conn;

    ucp_worker_progress(tp->worker);
    cg__ucx_listener_progress(l);
    if (cg_list_empty(&l->ready))
        return CG_INPROGRESS;
    conn = cg_list_entry(l->ready.next, cg__ucx_conn_t, link);
    cg_list_del(&conn->link);
    conn->listener = NULL;
    if (conn->state == CG_UCX_CONN_FAILED) {
        cg_status_t st = cg_error_set(conn->status, "%s: connection %u from "
                                      "rank %d failed: %s", l->where,
                                      conn->id, (int)conn->hs.peer.rank,
                                      conn->why);
        cg__ucx_conn_drop(conn);
        return st;
    }
    cg_list_push(&tp->conns, &conn->link);
    cg__ucx_epoll_add(tp, conn->fd);
    conn->in_epoll = 1;
    cg_debug(tp->log, "ucx: accepted connection %u from rank %d (peer conn "
             "%u, %s)", conn->id, conn->super.peer_rank, conn->peer_id,
             conn->err_none ? "shared memory, control socket watches the "
             "peer" : "ucx peer error handling");
    *conn_p = &conn->super;
    return CG_OK;
}

void cg__ucx_listener_close(cg_tp_listener_t *super)
{
    cg__ucx_listener_t *l = (cg__ucx_listener_t *)super;
    cg__ucx_tp_t *tp = (cg__ucx_tp_t *)super->tp;

    cg_hs_limit_flush(&l->refusals, tp->log, l->where, true);
    while (!cg_list_empty(&l->pending))
        cg__ucx_conn_drop(cg_list_entry(l->pending.next, cg__ucx_conn_t, link));
    while (!cg_list_empty(&l->ready))
        cg__ucx_conn_close(
            &cg_list_entry(l->ready.next, cg__ucx_conn_t, link)->super);
    cg__ucx_epoll_del(tp, l->fd);
    cg_sock_close(l->fd);
    cg_list_del(&l->link);
    cg_mem_free(&tp->super.params.mem, CG_MEM_CAT_CONTROL, l, sizeof(*l));
}
