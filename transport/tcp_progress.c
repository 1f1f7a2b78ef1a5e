/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Socket progress of the TCP transport: non-blocking vectored sends of the
 * queued fragments, receives into the posted fragments (socket 0 through a
 * read-ahead buffer that parses headers and small payloads with one
 * syscall for many messages, large payloads straight into the user buffer),
 * the no-progress timeout, and the poll events each socket waits for.
 * Layer: transport; calls transport/sock, tcp_wire and core/base only.
 */
#include <string.h>
#include <sys/uio.h>

#include "core/base/error.h"
#include "transport/tcp_impl.h"

#define CG_TCP_IOV_MAX 64

/* Sends as much of socket i's queue as the kernel takes. */
static cg_status_t cg__tcp_sock_tx(cg__tcp_conn_t *conn, cg__tcp_sock_t *s,
                                   bool *moved)
{
    while (!cg_list_empty(&s->txq)) {
        struct iovec iov[CG_TCP_IOV_MAX];
        size_t want = 0, sent = 0;
        int n = 0;
        for (cg_list_t *e = s->txq.next;
             e != &s->txq && n + 2 <= CG_TCP_IOV_MAX; e = e->next) {
            cg__tcp_frag_t *f = cg_list_entry(e, cg__tcp_frag_t, link);
            if (f->done < f->hdr_len) {
                iov[n].iov_base = f->hdr + f->done;
                iov[n++].iov_len = f->hdr_len - f->done;
                if (f->len > 0) {
                    iov[n].iov_base = f->buf;
                    iov[n++].iov_len = f->len;
                }
            } else {
                iov[n].iov_base = f->buf + (f->done - f->hdr_len);
                iov[n++].iov_len = f->len - (f->done - f->hdr_len);
            }
            want += f->hdr_len + f->len - f->done;
        }
        cg_status_t status = cg_sock_sendv_some(s->fd, iov, n, &sent);
        if (status != CG_OK)
            return status;
        if (sent == 0)
            return CG_OK;
        *moved = true;
        conn->last_ns = cg_now_ns();
        size_t left = sent;
        while (left > 0) {
            cg__tcp_frag_t *f = cg_list_entry(s->txq.next, cg__tcp_frag_t,
                                                link);
            size_t rest = f->hdr_len + f->len - f->done;
            size_t take = (left < rest) ? left : rest;
            f->done += take;
            left -= take;
            if (f->done == f->hdr_len + f->len)
                cg__tcp_frag_done(f);
        }
        if (sent < want)
            return CG_OK;
    }
    return CG_OK;
}

/* Sends only (the eager path of a new send): no receive syscalls. */
void cg__tcp_conn_tx(cg__tcp_conn_t *conn)
{
    cg_status_t status = CG_OK;
    bool moved = false;

    for (int i = 0; i < conn->nsocks && status == CG_OK; i++)
        if (!cg_list_empty(&conn->socks[i].txq))
            status = cg__tcp_sock_tx(conn, &conn->socks[i], &moved);
    if (status != CG_OK)
        cg__tcp_conn_fail(conn, status);
}

/* Receives straight from socket s into the fragment f (or drains it
 * through the scratch buffer). *stop when the socket had no more. */
static cg_status_t cg__tcp_rx_direct(cg__tcp_conn_t *conn, cg__tcp_sock_t *s,
                                     cg__tcp_frag_t *f, bool *moved,
                                     bool *stop)
{
    size_t want = f->len - f->done, got = 0;
    uint8_t *dst = (f->buf != NULL) ? f->buf + f->done : conn->scratch;
    cg_status_t status;
    int eof;

    if (f->buf == NULL && want > CG_TCP_SCRATCH)
        want = CG_TCP_SCRATCH;
    status = cg_sock_recv_avail(s->fd, dst, want, &got, &eof);
    if (status != CG_OK)
        return status;
    if (got > 0) {
        *moved = true;
        conn->last_ns = cg_now_ns();
        f->done += got;
        if (f->done == f->len)
            cg__tcp_frag_done(f);
    }
    s->eof = (eof != 0);
    *stop = (got < want) || s->eof;
    return CG_OK;
}

/* Parses what the read-ahead buffer holds: fills the head fragment, or
 * decodes and places the next header. *need_more when it ran dry. */
static cg_status_t cg__tcp_rx0_parse(cg__tcp_conn_t *conn, bool *need_more)
{
    cg__tcp_sock_t *s = &conn->socks[0];
    size_t avail = conn->rb_len - conn->rb_off;
    cg_tcp_msg_hdr_t hdr;
    cg_status_t status;

    *need_more = false;
    if (!cg_list_empty(&s->rxq)) {
        cg__tcp_frag_t *f = cg_list_entry(s->rxq.next, cg__tcp_frag_t, link);
        size_t take = f->len - f->done;
        if (avail == 0) {
            *need_more = true;
            return CG_OK;
        }
        take = (take < avail) ? take : avail;
        if (f->buf != NULL)
            memcpy(f->buf + f->done, conn->rbuf + conn->rb_off, take);
        f->done += take;
        conn->rb_off += take;
        if (f->done == f->len)
            cg__tcp_frag_done(f);
        return CG_OK;
    }
    if (avail < CG_TCP_MSG_HDR_SIZE) {
        *need_more = true;
        return CG_OK;
    }
    status = cg_tcp_msg_decode(conn->rbuf + conn->rb_off, avail, &hdr);
    if (status != CG_OK)
        return status;
    conn->rb_off += CG_TCP_MSG_HDR_SIZE;
    if (cg__tcp_place(conn, &hdr) == CG_INPROGRESS) {
        conn->held = true;
        conn->held_hdr = hdr;
    }
    return CG_OK;
}

/* Socket 0: headers and small payloads through the read-ahead buffer
 * (one recv for many small messages); a large remainder goes straight to
 * the user's buffer once the read-ahead is empty. */
static cg_status_t cg__tcp_rx0(cg__tcp_conn_t *conn, bool *moved)
{
    cg__tcp_sock_t *s = &conn->socks[0];
    cg_status_t status;
    bool need_more, stop = false;

    if (conn->held) {
        if (!cg_list_empty(&s->rxq) ||
            cg__tcp_place(conn, &conn->held_hdr) == CG_INPROGRESS)
            return CG_OK;
        conn->held = false;
    }
    while (!conn->held && !stop) {
        status = cg__tcp_rx0_parse(conn, &need_more);
        if (status == CG_OK && need_more && s->eof)
            break; /* nothing more will come on socket 0 */
        if (status != CG_OK)
            return status;
        if (!need_more)
            continue;
        if (!cg_list_empty(&s->rxq) && conn->rb_off == conn->rb_len) {
            cg__tcp_frag_t *f = cg_list_entry(s->rxq.next, cg__tcp_frag_t,
                                                link);
            if (f->len - f->done >= CG_TCP_RBUF / 2) {
                status = cg__tcp_rx_direct(conn, s, f, moved, &stop);
                if (status != CG_OK)
                    return status;
                continue;
            }
        }
        size_t avail = conn->rb_len - conn->rb_off, got = 0;
        int eof;
        memmove(conn->rbuf, conn->rbuf + conn->rb_off, avail);
        conn->rb_off = 0;
        conn->rb_len = avail;
        status = cg_sock_recv_avail(s->fd, conn->rbuf + avail,
                                    CG_TCP_RBUF - avail, &got, &eof);
        if (status != CG_OK)
            return status;
        if (got > 0) {
            *moved = true;
            conn->last_ns = cg_now_ns();
            conn->rb_len += got;
        }
        s->eof = (eof != 0);
        stop = (got == 0);
    }
    return CG_OK;
}

/* Receives into socket i's queue; socket 0 also reads headers. */
static cg_status_t cg__tcp_sock_rx(cg__tcp_conn_t *conn, int i, bool *moved)
{
    cg__tcp_sock_t *s = &conn->socks[i];
    cg_status_t status;
    bool stop = false;

    if (i == 0)
        return cg__tcp_rx0(conn, moved);
    while (!stop && !s->eof && !cg_list_empty(&s->rxq)) {
        status = cg__tcp_rx_direct(conn, s,
                                   cg_list_entry(s->rxq.next,
                                                    cg__tcp_frag_t, link),
                                   moved, &stop);
        if (status != CG_OK)
            return status;
    }
    return CG_OK;
}

/* The peer closed some sockets (an orderly EOF): the connection fails
 * once a closed socket still owes bytes, or once socket 0 (headers) is
 * closed and everything that did arrive has been placed. */
static cg_status_t cg__tcp_check_eof(cg__tcp_conn_t *conn)
{
    bool drained = !conn->held;

    for (int i = 0; i < conn->nsocks; i++) {
        const cg__tcp_sock_t *s = &conn->socks[i];
        if (s->eof && !cg_list_empty(&s->rxq))
            return cg_error_set(CG_ERR_PEER_RESET,
                                "peer closed socket %d of %d in the middle "
                                "of a message", i, conn->nsocks);
        drained = drained && cg_list_empty(&s->rxq);
    }
    if (conn->socks[0].eof && drained)
        return cg_error_set(CG_ERR_PEER_RESET,
                            "connection closed by peer");
    return CG_OK;
}

cg_status_t cg__tcp_conn_io(cg__tcp_conn_t *conn)
{
    cg_status_t status = CG_OK;
    bool moved = false;

    if (conn->state != CG_TCP_CONN_READY)
        return CG_OK;
    for (int i = 0; i < conn->nsocks && status == CG_OK; i++) {
        status = cg__tcp_sock_tx(conn, &conn->socks[i], &moved);
        if (status == CG_OK)
            status = cg__tcp_sock_rx(conn, i, &moved);
    }
    if (status == CG_OK)
        status = cg__tcp_check_eof(conn);
    if (status != CG_OK) {
        cg__tcp_conn_fail(conn, status);
        return status;
    }
    if (!moved && cg__tcp_conn_busy(conn) &&
        cg_now_ns() - conn->last_ns > conn->tp->super.params.timeout_ns) {
        status = cg_error_set(
            CG_ERR_TIMEOUT,
            "no byte moved on the connection to rank %d for %.1f s with "
            "requests pending: peer hung or stopped (timeout CG_TIMEOUT)",
            conn->super.peer_rank,
            (double)conn->tp->super.params.timeout_ns / 1e9);
        cg__tcp_conn_fail(conn, status);
    }
    return status;
}

short cg__tcp_sock_events(const cg__tcp_conn_t *conn, int i)
{
    const cg__tcp_sock_t *s = &conn->socks[i];
    short ev = 0;

    if (conn->state == CG_TCP_CONN_CONNECTING)
        return s->hs_done ? 0 : cg_hs_poll_events(&s->hs);
    if (conn->state != CG_TCP_CONN_READY)
        return 0;
    if (!cg_list_empty(&s->txq))
        ev |= POLLOUT;
    if (!s->eof && (!cg_list_empty(&s->rxq) || (i == 0 && !conn->held)))
        ev |= POLLIN;
    return ev;
}
