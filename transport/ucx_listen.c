/* SPDX-License-Identifier: Apache-2.0 */
/*
 * UCX backend listeners: the listening control socket (its packed address
 * is the listen handle), accepting sockets, running the acceptor side of
 * the handshake for each, dropping bad peers with a log line while serving
 * the rest, and handing handshaked conns to cg_tp_accept. Layer: transport;
 * calls UCX, transport/sock, transport/handshake and core/base only.
 */
#include "transport/ucx_impl.h"

#include <string.h>

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
    l->super.ops = &cg__ucx_ops;
    l->super.tp = super;
    cg_list_init(&l->pending);
    cg_list_init(&l->ready);
    st = cg_sock_listen(&addr, 128, &l->fd, &l->addr);
    if (st != CG_OK) {
        cg_mem_free(&tp->super.params.mem, CG_MEM_CAT_CONTROL, l,
                    sizeof(*l));
        return st;
    }
    memset(handle_p, 0, sizeof(*handle_p));
    cg__ucx_put32(handle_p->bytes, CG_UCX_HANDLE_MAGIC);
    cg_sockaddr_pack(&l->addr, handle_p->bytes + 4);
    cg__ucx_epoll_add(tp, l->fd);
    cg_list_push(&tp->listeners, &l->link);
    cg_debug(tp->log, "ucx: listening on %s",
             cg_sockaddr_str(&l->addr, str, sizeof(str)));
    *listener_p = &l->super;
    return CG_OK;
}

static void cg__ucx_listener_accept_new(cg__ucx_listener_t *l)
{
    cg__ucx_tp_t *tp = (cg__ucx_tp_t *)l->super.tp;
    cg__ucx_conn_t *conn;
    cg_status_t st;
    int fd;

    while (l->npending < CG_UCX_PENDING_MAX) {
        st = cg_sock_accept(l->fd, &fd, NULL);
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
        cg_list_push(&l->pending, &conn->link);
        l->npending++;
    }
}

void cg__ucx_listener_progress(cg__ucx_listener_t *l)
{
    cg__ucx_tp_t *tp = (cg__ucx_tp_t *)l->super.tp;
    cg_list_t *link, *next;
    cg_status_t st;

    cg__ucx_listener_accept_new(l);
    for (link = l->pending.next; link != &l->pending; link = next) {
        cg__ucx_conn_t *conn = cg_list_entry(link, cg__ucx_conn_t, link);
        next = link->next;
        st = cg_hs_progress(&conn->hs);
        if (st == CG_INPROGRESS)
            continue;
        l->npending--;
        cg_list_del(&conn->link);
        if (st == CG_OK)
            st = cg__ucx_conn_establish(conn);
        if (st != CG_OK) {
            cg_warn(tp->log, "ucx: refused connection %u (peer rank %d): %s",
                    conn->id, (int)conn->hs.peer.rank, cg_last_error());
            cg__ucx_conn_free(conn);
            continue;
        }
        cg_list_push(&l->ready, &conn->link);
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

    while (!cg_list_empty(&l->pending))
        cg__ucx_conn_free(cg_list_entry(l->pending.next, cg__ucx_conn_t, link));
    while (!cg_list_empty(&l->ready))
        cg__ucx_conn_close(
            &cg_list_entry(l->ready.next, cg__ucx_conn_t, link)->super);
    cg__ucx_epoll_del(tp, l->fd);
    cg_sock_close(l->fd);
    cg_list_del(&l->link);
    cg_mem_free(&tp->super.params.mem, CG_MEM_CAT_CONTROL, l, sizeof(*l));
}
