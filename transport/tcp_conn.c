/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Connection lifecycle of the TCP transport: connecting (nsocks sockets,
 * each with its own handshake), listening and accepting (handshakes of
 * many peers run concurrently; sockets of one connection are grouped by
 * connection id; bad peers are dropped with a logged reason) and
 * destroying connections (failing one is tcp_io.c's: its requests end).
 * Layer: transport; calls transport/sock,
 * transport/handshake, tcp_wire and core/base only.
 */
#include <stdio.h>
#include <string.h>
#include <sys/random.h>

#include "core/base/clock.h"
#include "core/base/error.h"
#include "transport/tcp_impl.h"

static cg__tcp_conn_t *cg__tcp_conn_new(cg__tcp_tp_t *tp, int nsocks,
                                        const cg_sockaddr_t *peer)
{
    size_t socks_size = (size_t)nsocks * sizeof(cg__tcp_sock_t);
    cg__tcp_conn_t *conn;

    conn = cg__tcp_alloc(tp, CG_MEM_CAT_CONTROL, sizeof(*conn));
    if (conn == NULL)
        return NULL;
    memset(conn, 0, sizeof(*conn));
    conn->socks = cg__tcp_alloc(tp, CG_MEM_CAT_CONTROL, socks_size);
    if (conn->socks == NULL) {
        cg__tcp_free(tp, CG_MEM_CAT_CONTROL, conn, sizeof(*conn));
        return NULL;
    }
    memset(conn->socks, 0, socks_size);
    for (int i = 0; i < nsocks; i++) {
        conn->socks[i].fd = -1;
        cg_list_init(&conn->socks[i].txq);
        cg_list_init(&conn->socks[i].rxq);
    }
    conn->super.ops = tp->super.ops; /* cg__tcp_ops, from tcp.c */
    conn->super.tp = &tp->super;
    conn->super.peer_rank = -1;
    conn->tp = tp;
    conn->nsocks = nsocks;
    conn->peer = *peer;
    conn->error = CG_OK;
    cg_list_init(&conn->link);
    cg_list_init(&conn->active);
    cg_list_init(&conn->posted);
    cg_list_init(&conn->unexp);
    conn->deadline_ns = cg_deadline_ns(tp->super.params.timeout_ns);
    return conn;
}

void cg__tcp_conn_destroy(cg__tcp_conn_t *conn, cg_status_t status)
{
    cg__tcp_tp_t *tp = conn->tp;

    cg__tcp_conn_fail(conn, status);
    while (!cg_list_empty(&conn->unexp))
        cg__tcp_req_free(cg_list_entry(conn->unexp.next, cg__tcp_req_t,
                                         link));
    for (int i = 0; i < conn->nsocks; i++)
        cg_sock_close(conn->socks[i].fd);
    cg_list_del(&conn->link);
    cg__tcp_free(tp, CG_MEM_CAT_CONTROL, conn->socks,
                 (size_t)conn->nsocks * sizeof(cg__tcp_sock_t));
    cg__tcp_free(tp, CG_MEM_CAT_CONTROL, conn, sizeof(*conn));
}

static cg_status_t cg__tcp_connect_progress(cg__tcp_conn_t *conn)
{
    cg_status_t status;

    for (int i = 0; i < conn->nsocks; i++) {
        cg__tcp_sock_t *s = &conn->socks[i];
        if (s->hs_done)
            continue;
        status = cg_hs_progress(&s->hs);
        if (status == CG_INPROGRESS)
            continue;
        if (status != CG_OK) {
            char str[CG_SOCKADDR_STRLEN], why[160];
            snprintf(why, sizeof(why), "%s", cg_last_error());
            status = cg_error_set(status, "connect to %s socket %d of %d: "
                                  "%s", cg_sockaddr_str(&conn->peer, str,
                                                        sizeof(str)),
                                  i, conn->nsocks, why);
            cg__tcp_conn_fail(conn, status);
            return status;
        }
        s->hs_done = true;
        conn->nsocks_done++;
        conn->super.peer_rank = s->hs.peer.rank;
    }
    if (conn->nsocks_done < conn->nsocks)
        return CG_INPROGRESS;
    conn->state = CG_TCP_CONN_READY;
    conn->last_ns = cg_now_ns();
    return CG_OK;
}

cg_status_t cg__tcp_conn_progress(cg__tcp_conn_t *conn)
{
    cg_status_t status;

    if (conn->state == CG_TCP_CONN_CONNECTING) {
        status = cg__tcp_connect_progress(conn);
        if (status != CG_OK)
            return status;
    }
    if (conn->state == CG_TCP_CONN_READY)
        return cg__tcp_conn_io(conn);
    return (conn->state == CG_TCP_CONN_FAILED) ? conn->error : CG_OK;
}

cg_status_t cg__tcp_connect(cg_transport_t *super, const cg_tp_handle_t *handle,
                            cg_tp_conn_t **conn_p)
{
    cg__tcp_tp_t *tp = (cg__tcp_tp_t *)super;
    const cg_transport_params_t *params = &super->params;
    cg_hs_hdr_t local;
    cg_sockaddr_t addr;
    cg__tcp_conn_t *conn;
    cg_status_t status;
    uint32_t rnd = 0;

    status = cg_tcp_handle_decode(handle->bytes, sizeof(handle->bytes),
                                  &addr);
    if (status != CG_OK)
        return status;
    conn = cg__tcp_conn_new(tp, params->nsocks, &addr);
    if (conn == NULL)
        return cg_error_set(CG_ERR_NO_MEMORY, "no memory for a connection");
    if (getrandom(&rnd, sizeof(rnd), GRND_NONBLOCK) != sizeof(rnd))
        rnd = (uint32_t)cg_now_ns();
    conn->conn_id = rnd ^ (tp->conn_seq++ * 2654435761u);
    conn->state = CG_TCP_CONN_CONNECTING;
    memset(&local, 0, sizeof(local));
    local.kind = CG_HS_KIND_TCP_DATA;
    local.cookie = params->cookie;
    local.rank = params->rank;
    local.nsocks = (uint16_t)conn->nsocks;
    local.conn_id = conn->conn_id;
    for (int i = 0; i < conn->nsocks; i++) {
        status = cg_sock_connect_start(&addr, &conn->socks[i].fd);
        if (status != CG_OK)
            goto err_destroy;
        cg_sock_tune(conn->socks[i].fd, params->timeout_ns);
        local.sock_index = (uint16_t)i;
        cg_hs_init(&conn->socks[i].hs, CG_HS_CONNECTOR, conn->socks[i].fd,
                   &local, NULL, conn->deadline_ns);
    }
    cg_list_push(&tp->conns, &conn->link);
    *conn_p = &conn->super;
    return CG_OK;

err_destroy:
    conn->state = CG_TCP_CONN_FAILED; /* quiet: the caller gets status */
    cg__tcp_conn_destroy(conn, status);
    return status;
}

cg_status_t cg__tcp_listen(cg_transport_t *super, cg_tp_handle_t *handle_p,
                           cg_tp_listener_t **listener_p)
{
    cg__tcp_tp_t *tp = (cg__tcp_tp_t *)super;
    char str[CG_SOCKADDR_STRLEN];
    cg__tcp_listener_t *l;
    cg_status_t status;

    l = cg__tcp_alloc(tp, CG_MEM_CAT_CONTROL, sizeof(*l));
    if (l == NULL)
        return cg_error_set(CG_ERR_NO_MEMORY, "no memory for a listener");
    memset(l, 0, sizeof(*l));
    status = cg_sock_listen(&tp->bind_addr, CG_TCP_BACKLOG, &l->fd,
                            &l->addr);
    if (status != CG_OK)
        goto err_free;
    l->super.ops = super->ops;
    l->super.tp = super;
    cg_list_init(&l->pending);
    cg_list_init(&l->forming);
    cg_list_init(&l->ready);
    snprintf(l->where, sizeof(l->where), "listener on %s",
             cg_sockaddr_str(&l->addr, str, sizeof(str)));
    cg_list_push(&tp->listeners, &l->link);
    cg_tcp_handle_encode(&l->addr, handle_p->bytes, sizeof(handle_p->bytes));
    cg_debug(super->params.log, "listening on %s interface %s",
             cg_sockaddr_str(&l->addr, str, sizeof(str)), tp->ifname);
    *listener_p = &l->super;
    return CG_OK;

err_free:
    cg__tcp_free(tp, CG_MEM_CAT_CONTROL, l, sizeof(*l));
    return status;
}

static void cg__tcp_pend_free(cg__tcp_listener_t *l, cg__tcp_pend_t *p,
                              bool close_fd)
{
    if (close_fd)
        cg_sock_close(p->fd);
    cg_list_del(&p->link);
    l->npending--;
    cg__tcp_free((cg__tcp_tp_t *)l->super.tp, CG_MEM_CAT_CONTROL, p,
                 sizeof(*p));
}

static bool cg__tcp_same_host(const cg_sockaddr_t *a, const cg_sockaddr_t *b)
{
    if (a->u.sa.sa_family != b->u.sa.sa_family)
        return false;
    if (a->u.sa.sa_family == AF_INET)
        return a->u.in.sin_addr.s_addr == b->u.in.sin_addr.s_addr;
    return memcmp(&a->u.in6.sin6_addr, &b->u.in6.sin6_addr, 16) == 0;
}

/* A socket passed its handshake: add it to its connection. */
static void cg__tcp_attach(cg__tcp_listener_t *l, cg__tcp_pend_t *p)
{
    cg__tcp_tp_t *tp = (cg__tcp_tp_t *)l->super.tp;
    const cg_log_t *log = tp->super.params.log;
    const cg_hs_hdr_t *h = &p->hs.peer;
    char str[CG_SOCKADDR_STRLEN];
    cg__tcp_conn_t *conn = NULL;

    for (cg_list_t *e = l->forming.next; e != &l->forming; e = e->next) {
        cg__tcp_conn_t *c = cg_list_entry(e, cg__tcp_conn_t, link);
        if (c->conn_id == h->conn_id && c->super.peer_rank == h->rank &&
            c->nsocks == h->nsocks && cg__tcp_same_host(&c->peer, &p->peer)) {
            conn = c;
            break;
        }
    }
    if (conn == NULL) {
        conn = cg__tcp_conn_new(tp, h->nsocks, &p->peer);
        if (conn == NULL) {
            cg_warn(log, "dropping connection from %s: no memory (%s)",
                    cg_sockaddr_str(&p->peer, str, sizeof(str)),
                    cg_last_error());
            cg__tcp_pend_free(l, p, true);
            return;
        }
        conn->state = CG_TCP_CONN_FORMING;
        conn->conn_id = h->conn_id;
        conn->super.peer_rank = h->rank;
        cg_list_push(&l->forming, &conn->link);
    }
    if (conn->socks[h->sock_index].fd >= 0) {
        cg_warn(log, "dropping duplicate socket %u of connection %u from %s",
                h->sock_index, h->conn_id,
                cg_sockaddr_str(&p->peer, str, sizeof(str)));
        cg__tcp_pend_free(l, p, true);
        return;
    }
    conn->socks[h->sock_index].fd = p->fd;
    conn->socks[h->sock_index].hs_done = true;
    cg_sock_tune(p->fd, tp->super.params.timeout_ns);
    cg__tcp_pend_free(l, p, false);
    if (++conn->nsocks_done == conn->nsocks) {
        cg_list_del(&conn->link);
        conn->state = CG_TCP_CONN_READY;
        conn->last_ns = cg_now_ns();
        cg_list_push(&l->ready, &conn->link);
    }
}

/* One handshake step of a pending socket; true when it left the list
 * (joined its connection, or refused and closed). */
static bool cg__tcp_pend_step(cg__tcp_listener_t *l, cg__tcp_pend_t *p)
{
    const cg_log_t *log = l->super.tp->params.log;
    char str[CG_SOCKADDR_STRLEN];
    cg_status_t status = cg_hs_progress(&p->hs);

    if (status == CG_INPROGRESS)
        return false;
    if (status == CG_OK) {
        cg__tcp_attach(l, p);
        return true;
    }
    if (cg_hs_limit_take(&l->refusals, log, l->where))
        cg_warn(log, "%s: dropping connection from %s: handshake failed: %s",
                l->where, cg_sockaddr_str(&p->peer, str, sizeof(str)),
                cg_last_error());
    cg__tcp_pend_free(l, p, true);
    return true;
}

/* Every handshake slot is taken: free the oldest, unless it is younger
 * than CG_TCP_EVICT_GRACE_NS (false: leave new connections in the
 * backlog for now). A real peer sends its header as soon as it is
 * connected, so the socket that has waited longest is the likeliest
 * stranger that says nothing; without this, strangers holding every slot
 * kept the job's own connections in the kernel's backlog until their
 * handshakes timed out (CG_TIMEOUT). It gets one last step first, in case
 * its header has just arrived. */
static bool cg__tcp_make_room(cg__tcp_listener_t *l)
{
    const cg_log_t *log = l->super.tp->params.log;
    cg__tcp_pend_t *p = cg_list_entry(l->pending.next, cg__tcp_pend_t, link);
    uint64_t age = cg_now_ns() - p->born_ns;
    char str[CG_SOCKADDR_STRLEN];

    if (cg__tcp_pend_step(l, p))
        return true;
    if (age < CG_TCP_EVICT_GRACE_NS)
        return false;
    if (cg_hs_limit_take(&l->refusals, log, l->where))
        cg_warn(log, "%s: dropping connection from %s: no handshake after "
                "%.2f s while more connections wait (%d handshakes at most)",
                l->where, cg_sockaddr_str(&p->peer, str, sizeof(str)),
                (double)age / 1e9, CG_TCP_PENDING_MAX);
    cg__tcp_pend_free(l, p, true);
    return true;
}

/* Accepts what the backlog holds, up to CG_TCP_PENDING_MAX a call; a
 * socket accepted in this call is never evicted in it (the grace), so each
 * gets its handshake step in cg__tcp_listener_progress. */
static void cg__tcp_accept_new(cg__tcp_listener_t *l)
{
    cg__tcp_tp_t *tp = (cg__tcp_tp_t *)l->super.tp;
    const cg_transport_params_t *params = &tp->super.params;
    cg_sockaddr_t peer;
    cg_hs_hdr_t local;
    cg__tcp_pend_t *p;
    int fd;

    memset(&local, 0, sizeof(local));
    local.kind = CG_HS_KIND_TCP_DATA;
    local.cookie = params->cookie;
    local.rank = params->rank;
    for (int n = 0; n < CG_TCP_PENDING_MAX; n++) {
        if (l->npending >= CG_TCP_PENDING_MAX && !cg__tcp_make_room(l))
            return;
        cg_status_t status = cg_sock_accept(l->fd, &fd, &peer);
        if (status == CG_INPROGRESS)
            return;
        if (status != CG_OK) {
            cg_warn(params->log, "%s", cg_last_error());
            return;
        }
        p = cg__tcp_alloc(tp, CG_MEM_CAT_CONTROL, sizeof(*p));
        if (p == NULL) {
            cg_warn(params->log, "dropping an incoming connection: no "
                    "memory for its handshake");
            cg_sock_close(fd);
            return;
        }
        p->fd = fd;
        p->peer = peer;
        p->born_ns = cg_now_ns();
        cg_hs_init(&p->hs, CG_HS_ACCEPTOR, fd, &local, NULL,
                   cg_deadline_ns(params->timeout_ns));
        cg_list_push(&l->pending, &p->link);
        l->npending++;
    }
}

cg_status_t cg__tcp_listener_progress(cg__tcp_listener_t *l)
{
    cg__tcp_tp_t *tp = (cg__tcp_tp_t *)l->super.tp;
    const cg_log_t *log = tp->super.params.log;
    char str[CG_SOCKADDR_STRLEN];
    uint64_t now;

    cg_hs_limit_flush(&l->refusals, log, l->where, false);
    cg__tcp_accept_new(l);
    for (cg_list_t *e = l->pending.next, *n; e != &l->pending; e = n) {
        n = e->next;
        cg__tcp_pend_step(l, cg_list_entry(e, cg__tcp_pend_t, link));
    }
    now = cg_now_ns();
    for (cg_list_t *e = l->forming.next, *n; e != &l->forming; e = n) {
        cg__tcp_conn_t *c = cg_list_entry(e, cg__tcp_conn_t, link);
        n = e->next;
        if (now < c->deadline_ns)
            continue;
        cg_warn(log, "dropping connection %u from %s: %d of %d sockets "
                "arrived in time", c->conn_id,
                cg_sockaddr_str(&c->peer, str, sizeof(str)), c->nsocks_done,
                c->nsocks);
        c->state = CG_TCP_CONN_FAILED;
        cg__tcp_conn_destroy(c, CG_ERR_TIMEOUT);
    }
    return CG_OK;
}

cg_status_t cg__tcp_accept(cg_tp_listener_t *super, cg_tp_conn_t **conn_p)
{
    cg__tcp_listener_t *l = (cg__tcp_listener_t *)super;
    cg__tcp_tp_t *tp = (cg__tcp_tp_t *)super->tp;
    cg__tcp_conn_t *conn;

    cg__tcp_listener_progress(l);
    if (cg_list_empty(&l->ready))
        return CG_INPROGRESS;
    conn = cg_list_entry(l->ready.next, cg__tcp_conn_t, link);
    cg_list_del(&conn->link);
    cg_list_push(&tp->conns, &conn->link);
    *conn_p = &conn->super;
    return CG_OK;
}

void cg__tcp_listener_close(cg_tp_listener_t *super)
{
    cg__tcp_listener_t *l = (cg__tcp_listener_t *)super;
    cg__tcp_tp_t *tp = (cg__tcp_tp_t *)super->tp;

    cg_hs_limit_flush(&l->refusals, tp->super.params.log, l->where, true);
    cg_sock_close(l->fd);
    while (!cg_list_empty(&l->pending))
        cg__tcp_pend_free(l, cg_list_entry(l->pending.next, cg__tcp_pend_t,
                                              link), true);
    while (!cg_list_empty(&l->forming))
        cg__tcp_conn_destroy(cg_list_entry(l->forming.next, cg__tcp_conn_t,
                                             link), CG_ERR_CANCELED);
    while (!cg_list_empty(&l->ready))
        cg__tcp_conn_destroy(cg_list_entry(l->ready.next, cg__tcp_conn_t,
                                             link), CG_ERR_CANCELED);
    cg_list_del(&l->link);
    cg__tcp_free(tp, CG_MEM_CAT_CONTROL, l, sizeof(*l));
}
