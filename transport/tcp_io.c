/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Requests of the TCP transport: posting sends and receives, tag matching
 * in posting order, unexpected messages (buffered in STAGING up to
 * CG_TCP_UNEXP_MAX per connection, then reading pauses), the split of each
 * message into per-socket fragments, request completion, and a failed
 * connection's end of its requests (cg__tcp_conn_fail, so no file below
 * tcp_conn.c calls it). The socket progress that moves the fragments
 * lives in tcp_progress.c; requests and staging buffers are recycled
 * through tcp_cache.c.
 * Layer: transport; calls transport/sock, tcp_wire and core/base only.
 */
#include <stdio.h>
#include <string.h>

#include "core/base/error.h"
#include "transport/tcp_impl.h"

static cg__tcp_req_t *cg__tcp_req_new(cg__tcp_conn_t *conn,
                                      cg__tcp_req_kind_t kind, uint32_t tag,
                                      void *buf, size_t cap)
{
    size_t size = sizeof(cg__tcp_req_t) +
                  (size_t)conn->nsocks * sizeof(cg__tcp_frag_t);
    cg__tcp_req_t *req = cg__tcp_req_get(conn->tp, size);

    if (req == NULL)
        return NULL;
    memset(req, 0, sizeof(*req));
    req->super.ops = conn->tp->super.ops; /* cg__tcp_ops, from tcp.c */
    cg_list_init(&req->link);
    cg_list_init(&req->plink);
    req->tp = conn->tp;
    req->conn = conn;
    req->kind = kind;
    req->status = CG_INPROGRESS;
    req->tag = tag;
    req->buf = buf;
    req->cap = cap;
    req->alloc_size = size;
    req->nfrags = conn->nsocks;
    return req;
}

void cg__tcp_req_free(cg__tcp_req_t *req)
{
    cg__tcp_tp_t *tp = req->tp;

    cg_list_del(&req->link);
    cg_list_del(&req->plink);
    if (req->kind == CG_TCP_REQ_UNEXP && req->buf != NULL) {
        cg__tcp_stage_put(tp, req->buf, req->len);
        if (req->conn != NULL)
            req->conn->unexp_bytes -= req->len;
    }
    cg__tcp_req_put(tp, req);
}

void cg__tcp_req_finish(cg__tcp_req_t *req, cg_status_t status)
{
    cg_list_del(&req->link);
    cg_list_del(&req->plink);
    req->status = status;
    req->conn = NULL;
    if (req->match != NULL) {
        req->match->match = NULL;
        req->match->orphan = true;
        req->match = NULL;
    }
    cg_list_push(&req->tp->done, &req->link);
}

bool cg__tcp_conn_busy(const cg__tcp_conn_t *conn)
{
    return !cg_list_empty(&conn->active);
}

void cg__tcp_conn_fail(cg__tcp_conn_t *conn, cg_status_t status)
{
    char str[CG_SOCKADDR_STRLEN];

    if (conn->state == CG_TCP_CONN_FAILED)
        return;
    snprintf(conn->reason, sizeof(conn->reason), "%s", cg_last_error());
    /* A peer leaving while nothing is pending is an ordinary shutdown. */
    if (status != CG_ERR_CANCELED)
        cg_log_at(conn->tp->super.params.log,
                  cg__tcp_conn_busy(conn) ? CG_LOG_WARN : CG_LOG_DEBUG,
                  "connection to rank %d at %s failed: %s",
                  conn->super.peer_rank,
                  cg_sockaddr_str(&conn->peer, str, sizeof(str)),
                  conn->reason);
    conn->state = CG_TCP_CONN_FAILED;
    conn->error = status;
    conn->held = false;
    for (int i = 0; i < conn->nsocks; i++) {
        while (!cg_list_empty(&conn->socks[i].txq))
            cg_list_del(conn->socks[i].txq.next);
        while (!cg_list_empty(&conn->socks[i].rxq))
            cg_list_del(conn->socks[i].rxq.next);
    }
    while (!cg_list_empty(&conn->active))
        cg__tcp_req_finish(cg_list_entry(conn->active.next, cg__tcp_req_t,
                                           link), status);
    /* Keep only complete, unclaimed messages: a later receive gets them. */
    for (cg_list_t *e = conn->unexp.next, *n; e != &conn->unexp; e = n) {
        cg__tcp_req_t *u = cg_list_entry(e, cg__tcp_req_t, link);
        n = e->next;
        if (u->frags_left > 0 || u->orphan || u->matched)
            cg__tcp_req_free(u);
    }
}

static void cg__tcp_touch_if_idle(cg__tcp_conn_t *conn)
{
    if (!cg__tcp_conn_busy(conn))
        conn->last_ns = cg_now_ns();
}

/* All bytes of an UNEXP are in: hand them to its receive, or keep them. */
static void cg__tcp_unexp_arrived(cg__tcp_req_t *u)
{
    cg__tcp_req_t *recv = u->match;

    if (u->orphan) {
        cg__tcp_req_free(u);
    } else if (recv != NULL) {
        if (u->len > 0)
            memcpy(recv->buf, u->buf, u->len);
        recv->len = u->len;
        recv->match = NULL;
        cg__tcp_req_finish(recv, CG_OK);
        cg__tcp_req_free(u);
    }
}

void cg__tcp_frag_done(cg__tcp_frag_t *frag)
{
    cg__tcp_req_t *req = frag->req;

    cg_list_del(&frag->link);
    if (--req->frags_left > 0)
        return;
    if (req->kind == CG_TCP_REQ_UNEXP)
        cg__tcp_unexp_arrived(req);
    else
        cg__tcp_req_finish(req, CG_OK);
}

/* Queues the receive fragments of a len-byte message into base (NULL:
 * drain) on every socket, owned by req. */
static void cg__tcp_rx_frags(cg__tcp_conn_t *conn, cg__tcp_req_t *req,
                             uint8_t *base, uint64_t len)
{
    for (int k = 0; k < conn->nsocks; k++) {
        uint64_t off, slen;
        cg_tcp_slice(len, conn->nsocks, k, &off, &slen);
        if (slen == 0)
            continue;
        cg__tcp_frag_t *f = &req->frags[k];
        memset(f, 0, sizeof(*f));
        f->req = req;
        f->buf = (base != NULL) ? base + off : NULL;
        f->len = (size_t)slen;
        req->frags_left++;
        cg_list_push(&conn->socks[k].rxq, &f->link);
    }
}

/* A UNEXP with no buffer that drains a message nobody will read. */
static cg_status_t cg__tcp_drain(cg__tcp_conn_t *conn, uint32_t tag,
                                 uint64_t len)
{
    cg__tcp_req_t *u;

    if (len == 0)
        return CG_OK;
    u = cg__tcp_req_new(conn, CG_TCP_REQ_UNEXP, tag, NULL, 0);
    if (u == NULL)
        return cg_error_set(CG_ERR_NO_MEMORY, "no memory to drain a "
                            "truncated message of %llu bytes",
                            (unsigned long long)len);
    u->orphan = true;
    u->len = (size_t)len;
    cg_list_push(&conn->unexp, &u->link);
    cg__tcp_rx_frags(conn, u, NULL, len);
    return CG_OK;
}

/* Matches an incoming header to the posted receive recv. */
static cg_status_t cg__tcp_match(cg__tcp_conn_t *conn, cg__tcp_req_t *recv,
                                 const cg_tcp_msg_hdr_t *hdr)
{
    cg_list_del(&recv->plink);
    recv->len = (size_t)hdr->len;
    if (hdr->len > recv->cap) {
        cg__tcp_req_finish(recv, CG_ERR_TRUNCATED);
        return cg__tcp_drain(conn, hdr->tag, hdr->len);
    }
    if (hdr->len == 0) {
        cg__tcp_req_finish(recv, CG_OK);
        return CG_OK;
    }
    cg__tcp_rx_frags(conn, recv, recv->buf, hdr->len);
    return CG_OK;
}

/* Places an incoming header: a posted receive, else a new UNEXP. Returns
 * CG_INPROGRESS when it cannot be placed yet (budget or memory). */
cg_status_t cg__tcp_place(cg__tcp_conn_t *conn, const cg_tcp_msg_hdr_t *hdr)
{
    cg__tcp_req_t *u;

    for (cg_list_t *e = conn->posted.next; e != &conn->posted;
         e = e->next) {
        cg__tcp_req_t *r = cg_list_entry(e, cg__tcp_req_t, plink);
        if (r->tag == hdr->tag)
            return cg__tcp_match(conn, r, hdr);
    }
    if (hdr->len > CG_TCP_UNEXP_MAX - conn->unexp_bytes)
        return CG_INPROGRESS;
    u = cg__tcp_req_new(conn, CG_TCP_REQ_UNEXP, hdr->tag, NULL, 0);
    if (u == NULL)
        return CG_INPROGRESS;
    if (hdr->len > 0) {
        u->buf = cg__tcp_stage_get(conn->tp, (size_t)hdr->len);
        if (u->buf == NULL) {
            cg__tcp_req_free(u);
            return CG_INPROGRESS;
        }
    }
    u->len = (size_t)hdr->len;
    conn->unexp_bytes += u->len;
    cg_list_push(&conn->unexp, &u->link);
    cg__tcp_rx_frags(conn, u, u->buf, hdr->len);
    return CG_OK;
}

cg_status_t cg__tcp_post_send(cg__tcp_conn_t *conn, const void *buf,
                              size_t len, uint32_t tag, cg__tcp_req_t **req_p)
{
    cg_tcp_msg_hdr_t hdr = {.tag = tag, .len = len};
    cg__tcp_req_t *req;

    if (conn->state == CG_TCP_CONN_FAILED)
        return cg_error_set(conn->error, "send on a failed connection: %s",
                            cg_status_string(conn->error));
    req = cg__tcp_req_new(conn, CG_TCP_REQ_SEND, tag, (void *)buf, len);
    if (req == NULL)
        return cg_error_set(CG_ERR_NO_MEMORY, "no memory for a send request");
    req->len = len;
    for (int k = 0; k < conn->nsocks; k++) {
        uint64_t off, slen;
        cg_tcp_slice(len, conn->nsocks, k, &off, &slen);
        if (k > 0 && slen == 0)
            continue;
        cg__tcp_frag_t *f = &req->frags[k];
        memset(f, 0, sizeof(*f));
        f->req = req;
        f->buf = (uint8_t *)buf + off;
        f->len = (size_t)slen;
        if (k == 0) {
            cg_tcp_msg_encode(&hdr, f->hdr);
            f->hdr_len = CG_TCP_MSG_HDR_SIZE;
        }
        req->frags_left++;
        cg_list_push(&conn->socks[k].txq, &f->link);
    }
    cg__tcp_touch_if_idle(conn);
    cg_list_push(&conn->active, &req->link);
    *req_p = req;
    return CG_OK; /* the caller sends eagerly (tcp_progress.c is above) */
}

/* A receive meets an already-arrived (maybe still arriving) UNEXP. */
static void cg__tcp_take_unexp(cg__tcp_req_t *recv, cg__tcp_req_t *u)
{
    bool arrived = (u->frags_left == 0);

    recv->len = u->len;
    if (u->len > recv->cap) {
        cg__tcp_req_finish(recv, CG_ERR_TRUNCATED);
        if (arrived)
            cg__tcp_req_free(u);
        else
            u->orphan = true;
        return;
    }
    u->matched = true;
    u->match = recv;
    if (arrived)
        cg__tcp_unexp_arrived(u);
    else
        recv->match = u;
}

cg_status_t cg__tcp_post_recv(cg__tcp_conn_t *conn, void *buf, size_t cap,
                              uint32_t tag, cg__tcp_req_t **req_p)
{
    cg__tcp_req_t *req, *u = NULL;
    cg_status_t status;

    for (cg_list_t *e = conn->unexp.next; e != &conn->unexp;
         e = e->next) {
        cg__tcp_req_t *c = cg_list_entry(e, cg__tcp_req_t, link);
        if (!c->matched && !c->orphan && c->tag == tag) {
            u = c;
            break;
        }
    }
    if (conn->state == CG_TCP_CONN_FAILED &&
        (u == NULL || u->frags_left > 0))
        return cg_error_set(conn->error, "receive on a failed connection: "
                            "%s", cg_status_string(conn->error));
    req = cg__tcp_req_new(conn, CG_TCP_REQ_RECV, tag, buf, cap);
    if (req == NULL)
        return cg_error_set(CG_ERR_NO_MEMORY, "no memory for a receive "
                            "request");
    cg__tcp_touch_if_idle(conn);
    cg_list_push(&conn->active, &req->link);
    *req_p = req;
    if (u != NULL) {
        cg__tcp_take_unexp(req, u);
        return CG_OK;
    }
    if (conn->held && conn->held_hdr.tag == tag) {
        conn->held = false;
        status = cg__tcp_match(conn, req, &conn->held_hdr);
        if (status != CG_OK)
            cg__tcp_conn_fail(conn, status);
        return CG_OK;
    }
    cg_list_push(&conn->posted, &req->plink);
    return CG_OK;
}

