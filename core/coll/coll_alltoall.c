/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cg_alltoallv: a pairwise exchange. At step k (1 .. size-1) each rank
 * sends its block for rank+k and receives rank-k's block for it, both cut
 * into pieces of a constant size (so both ends cut alike without telling
 * each other) with a window of pieces in flight each way, straight from
 * and into the caller's buffers; its own block is copied. Every step pairs
 * distinct peers, so no rank waits on one that waits on another. No
 * memory is allocated. Layer: core/coll; calls coll_xfer and comm.
 */
#include <string.h>

#include "core/base/error.h"
#include "core/coll/coll.h"
#include "core/coll/coll_impl.h"

#define CG__A2A_PIECE (512u << 10)
#define CG__A2A_WIN 8 /* pieces in flight each way: op->x[0..2*WIN) */

_Static_assert(2 * CG__A2A_WIN <= CG_COLL_XFER_MAX,
               "alltoall's window must fit the operation's transfers");

static size_t cg__pieces(size_t len)
{
    return (len + CG__A2A_PIECE - 1) / CG__A2A_PIECE;
}

static size_t cg__piece_len(size_t len, size_t p)
{
    size_t left = len - p * CG__A2A_PIECE;

    return left < CG__A2A_PIECE ? left : CG__A2A_PIECE;
}

/* One transfer direction of a step: pieces posted and done. */
typedef struct cg__a2a_dir {
    bool send;
    int peer;
    uint8_t *buf;
    size_t len, n, posted, done;
    cg__xfer_t *x; /* CG__A2A_WIN slots */
} cg__a2a_dir_t;

static cg_status_t cg__post(cg__coll_op_t *op, cg__a2a_dir_t *d, bool *moved)
{
    cg_status_t st;

    while (d->posted < d->n && d->posted - d->done < CG__A2A_WIN) {
        st = cg__xfer_post(op, &d->x[d->posted % CG__A2A_WIN], d->send,
                           d->peer, d->buf + d->posted * CG__A2A_PIECE,
                           cg__piece_len(d->len, d->posted),
                           CG_COMM_TAG_ALLTOALL);
        if (st != CG_OK)
            return st;
        d->posted++;
        *moved = true;
    }
    return CG_OK;
}

/* Pieces of one link and tag finish in posting order. */
static cg_status_t cg__reap(cg__coll_op_t *op, cg__a2a_dir_t *d, bool *moved)
{
    cg_status_t st;

    while (d->done < d->posted) {
        cg__xfer_t *x = &d->x[d->done % CG__A2A_WIN];
        if ((st = cg__xfer_test(op, x)) == CG_INPROGRESS)
            return CG_OK;
        if (st != CG_OK)
            return st;
        if (!d->send && x->got != x->len)
            return cg_error_set(CG_ERR_INTERNAL, "alltoall: received %zu "
                                "bytes from rank %d where %zu were due "
                                "(the ranks disagree on the splits)", x->got,
                                d->peer, x->len);
        d->done++;
        *moved = true;
    }
    return CG_OK;
}

static cg_status_t cg__step(cg__coll_op_t *op, cg__a2a_dir_t *s,
                            cg__a2a_dir_t *r)
{
    cg_status_t st = CG_OK;

    s->n = cg__pieces(s->len);
    r->n = cg__pieces(r->len);
    while (st == CG_OK && (s->done < s->n || r->done < r->n)) {
        bool moved = false;
        st = cg__post(op, r, &moved);
        if (st == CG_OK)
            st = cg__post(op, s, &moved);
        if (st == CG_OK)
            st = cg__reap(op, r, &moved);
        if (st == CG_OK)
            st = cg__reap(op, s, &moved);
        if (st == CG_OK && !moved)
            st = cg__coll_idle(op, r->done < r->n
                                       ? &r->x[r->done % CG__A2A_WIN]
                                       : &s->x[s->done % CG__A2A_WIN]);
    }
    return st;
}

static cg_status_t cg__check(const cg_comm_t *comm, const void *sendbuf,
                             const size_t *send_bytes, const void *recvbuf,
                             const size_t *recv_bytes)
{
    size_t sent = 0, got = 0;

    if (comm == NULL || send_bytes == NULL || recv_bytes == NULL)
        return cg_error_set(CG_ERR_INVALID_PARAM, "alltoall: comm or a byte "
                            "count array is NULL");
    for (int r = 0; r < cg_comm_size(comm); r++) {
        if (send_bytes[r] > SIZE_MAX - sent || recv_bytes[r] > SIZE_MAX - got)
            return cg_error_set(CG_ERR_INVALID_PARAM, "alltoall: the blocks "
                                "add up to more than SIZE_MAX at rank %d", r);
        sent += send_bytes[r];
        got += recv_bytes[r];
    }
    if ((sent > 0 && sendbuf == NULL) || (got > 0 && recvbuf == NULL))
        return cg_error_set(CG_ERR_INVALID_PARAM, "alltoall: a buffer is "
                            "NULL for %zu bytes", sendbuf == NULL ? sent : got);
    return CG_OK;
}

cg_status_t cg_alltoallv(cg_comm_t *comm, const void *sendbuf,
                         const size_t *send_bytes, void *recvbuf,
                         const size_t *recv_bytes)
{
    cg__coll_op_t op;
    cg_status_t st = cg__check(comm, sendbuf, send_bytes, recvbuf,
                               recv_bytes);
    size_t soff = 0, roff = 0;
    int n, me;

    if (st != CG_OK)
        return st;
    n = cg_comm_size(comm);
    me = cg_comm_rank(comm);
    st = cg__coll_op_begin(&op, comm, "alltoall");
    if (st != CG_OK)
        return st;
    for (int r = 0; r < me; r++) {
        soff += send_bytes[r];
        roff += recv_bytes[r];
    }
    if (send_bytes[me] > 0)
        memcpy((uint8_t *)recvbuf + roff, (const uint8_t *)sendbuf + soff,
               send_bytes[me]);
    for (int k = 1; k < n; k++) {
        int dst = (me + k) % n, src = (me - k + n) % n;
        cg__a2a_dir_t s = {.send = true, .peer = dst, .x = &op.x[0]};
        cg__a2a_dir_t r = {.send = false, .peer = src,
                           .x = &op.x[CG__A2A_WIN]};
        size_t so = 0, ro = 0;
        for (int q = 0; q < dst; q++)
            so += send_bytes[q];
        for (int q = 0; q < src; q++)
            ro += recv_bytes[q];
        s.buf = (uint8_t *)sendbuf + so;
        s.len = send_bytes[dst];
        r.buf = (uint8_t *)recvbuf + ro;
        r.len = recv_bytes[src];
        st = cg__step(&op, &s, &r);
        if (st != CG_OK)
            return cg__coll_abort(&op, st);
    }
    return CG_OK;
}
