/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Ring AllReduce: reduce-scatter then all-gather over the ring
 * rank-1 -> rank -> rank+1. The reduce-scatter streams each step's segment
 * in pieces whose size the receiver picks (its current governor chunk,
 * re-read before every piece) and announces with a credit, so a chunk that
 * shrinks mid-operation on any rank never changes what is reduced with
 * what: each element is reduced once per step, in ring order, whatever
 * the piece boundaries. Pieces no larger than every rank's CG_CHUNK_MIN
 * (exchanged at create) need no credit: both sides cut them alike and
 * every slot holds one whatever the pressure; over UCX pieces are capped
 * there, since a credit costs more than a larger piece gains. Two receive
 * slots per rank (the communicator's scratch buffers, CG_MEM_CAT_RING,
 * kept between operations) keep one piece landing while the previous one
 * is reduced. The all-gather's first step rides on the last
 * reduce-scatter step (each reduced piece of the rank's own segment goes
 * right at once, in pieces fixed by count and rank count); all-gather
 * pieces land straight in the result. Staged (cg_allreduce_staged), a
 * range is filled right before this rank first reads it (its first send,
 * or the reduction into it) and drained once final, piece by piece.
 * Layer: core/coll; calls coll_xfer, reduce, governor, comm.
 */
#include <string.h>

#include "core/base/error.h"
#include "core/coll/coll_impl.h"
#include "core/reduce/reduce.h"

/* Receive slots; transfers of the op: slots' data and credits first. */
#define CG__RING_SLOTS 2
#define CG__RING_SENDS 16
/* Pieces of a step: a segment's eighth, kept within 64..128 KiB. Small
 * pieces stay in cache between their arrival and their reduction and keep
 * both ranks busy (measured on 2 ranks over UCX shm: 64 KiB..128 KiB
 * pieces beat 512 KiB..2 MiB ones by 2-3x at 4-64 MiB). Over sockets each
 * message costs a few microseconds of system calls: a segment's quarter,
 * at least 128 KiB, measured better there. */
#define CG__RING_PIPE 8
#define CG__RING_PIECE_MIN (64u << 10)
#define CG__RING_PIECE_MAX (128u << 10)
#define CG__RING_SOCK_PIPE 4
#define CG__RING_SOCK_PIECE_MIN (128u << 10)
#define CG__X_RDATA 0
#define CG__X_RCREDIT (CG__X_RDATA + CG__RING_SLOTS)
#define CG__X_SCREDIT (CG__X_RCREDIT + CG__RING_SLOTS)
#define CG__X_SDATA (CG__X_SCREDIT + 1)
#define CG__AG_RECVS 4
#define CG__AG_SENDS 16
#define CG__X_AGR (CG__X_SDATA + CG__RING_SENDS)
#define CG__X_AGS (CG__X_AGR + CG__AG_RECVS)

typedef struct cg__ring_slot {
    void *buf;
    size_t cap;       /* allocated bytes */
    size_t off, len;  /* piece of the segment in flight; len 0: idle */
    uint64_t credit;  /* the size announced, kept until its send is done */
} cg__ring_slot_t;

typedef struct cg__ring {
    cg__coll_op_t *op;
    cg_governor_t *gov;
    int left, right;
    size_t el;             /* element bytes */
    cg_dtype_t dt;
    cg_redop_t redop;
    cg__ring_slot_t slot[CG__RING_SLOTS];
    uint64_t credit_in;    /* the credit being received from right */
    size_t floor;          /* smallest slot the governor may give */
    size_t ag_piece;       /* all-gather piece: from count and n only */
    bool sock;             /* over sockets: larger pieces */
    size_t fixed_max;      /* pieces up to this fit every rank's slots */
    const cg__coll_staging_t *sg; /* in place, filled / drained by range */
} cg__ring_t;

/* One reduce-scatter step: send src[0..slen) to the right in the pieces
 * the right asks for, and receive rlen bytes from the left, reducing each
 * piece as dst = piece op local (piece holds the ranks before this one). */
typedef struct cg__ring_step {
    const uint8_t *src;
    bool src_fill; /* src is first read here: filled piece by piece */
    size_t slen, credited, sent_idx, send_head;
    uint8_t *dst;
    const uint8_t *local;
    size_t rlen, posted, done;
    size_t piece; /* largest piece wanted, chunk permitting */
    /* Pieces of exactly piece bytes (the last one shorter), known to both
     * sides without credits: piece <= every rank's CG_CHUNK_MIN, so every
     * slot holds one whatever the pressure. */
    bool fixed;
    bool credit_posted;
    /* Last step only: the all-gather's first step rides along. dst's
     * reduced prefix is post-processed and sent right in fixed pieces of
     * ag_piece bytes; the left's segment lands in ag_in the same way. */
    bool ag;
    size_t ag_piece;
    size_t ag_sent, ag_sent_idx, ag_send_head;
    uint8_t *ag_in;
    size_t ag_in_len, ag_posted, ag_posted_idx, ag_done_idx;
    int nranks;
    double postscale;
} cg__ring_step_t;

/* This operation's segment s (the caller's segments when staged with
 * them). */
static void cg__ring_seg(const cg__ring_t *ring, size_t count, int s,
                         size_t *off, size_t *cnt)
{
    const size_t *segs = ring->sg != NULL ? ring->sg->stage->segs : NULL;

    cg_ring_seg(segs, count, cg_comm_size(ring->op->comm), s, off, cnt);
}

/* Piece size for a segment of len bytes (whole elements): see
 * CG__RING_PIPE. Depends only on len and the transport, the same on every
 * rank. */
static size_t cg__ring_piece(const cg__ring_t *ring, size_t len)
{
    size_t piece;

    if (ring->sock) {
        piece = len / CG__RING_SOCK_PIPE;
        piece = piece < CG__RING_SOCK_PIECE_MIN ? CG__RING_SOCK_PIECE_MIN
                                                : piece;
    } else {
        piece = len / CG__RING_PIPE;
        piece = piece < CG__RING_PIECE_MIN ? CG__RING_PIECE_MIN : piece;
        piece = piece > CG__RING_PIECE_MAX ? CG__RING_PIECE_MAX : piece;
    }
    piece -= piece % ring->el;
    return piece < ring->el ? ring->el : piece;
}

static size_t cg__ring_chunk(const cg__ring_t *ring)
{
    size_t c = (size_t)cg_governor_chunk_size(ring->gov);
    c -= c % ring->el;
    return c < ring->el ? ring->el : c;
}

/* Slot i is the communicator's scratch buffer i, kept from one operation
 * to the next: reused when it holds at least want bytes and at most the
 * chunk, else reallocated (want bytes, shrinking to the floor). */
static cg_status_t cg__ring_slot_get(cg__ring_t *ring, int i, size_t want)
{
    cg__ring_slot_t *s = &ring->slot[i];
    size_t floor = ring->floor < want ? ring->floor : want;
    size_t max = cg__ring_chunk(ring);

    s->buf = NULL;
    s->cap = 0;
    return cg_comm_scratch(ring->op->comm, CG_COLL_SCRATCH_RING + i, want,
                           floor, max > want ? max : want, ring->el,
                           &s->buf, &s->cap);
}

/* An idle slot follows the chunk down (memory is given back at once) and
 * never above what it has. */
static cg_status_t cg__ring_slot_fit(cg__ring_t *ring, int i, size_t chunk)
{
    cg__ring_slot_t *s = &ring->slot[i];

    if (chunk >= s->cap / 2 || s->cap <= ring->floor)
        return CG_OK;
    return cg__ring_slot_get(ring, i, chunk);
}

/* Receiver side: post a receive and its credit into every idle slot. */
static cg_status_t cg__ring_post_recvs(cg__ring_t *ring, cg__ring_step_t *st)
{
    cg__coll_op_t *op = ring->op;
    cg_status_t status;

    for (int i = 0; i < CG__RING_SLOTS && st->posted < st->rlen; i++) {
        cg__ring_slot_t *s = &ring->slot[i];
        size_t chunk = cg__ring_chunk(ring), len;
        if (s->len != 0 || op->x[CG__X_RCREDIT + i].req != NULL)
            continue;
        status = cg__ring_slot_fit(ring, i, chunk);
        if (status != CG_OK)
            return status;
        len = st->rlen - st->posted;
        len = len < st->piece ? len : st->piece;
        if (st->fixed && len > s->cap)
            return cg_error_set(CG_ERR_INTERNAL, "%s: piece of %zu bytes "
                                "over a %zu-byte slot", op->name, len,
                                s->cap);
        len = len < chunk ? len : chunk;
        len = len < s->cap ? len : s->cap;
        s->off = st->posted;
        s->len = len;
        s->credit = len;
        /* Staged (in place): each step reduces into a segment this rank
         * has not read yet; its bytes are filled while the piece is on
         * its way, unless the stage reduces straight from its input. */
        if (!cg__coll_reduces_in(ring->sg))
            cg__coll_fill(ring->sg, st->dst + s->off, len);
        status = cg__xfer_post(op, &op->x[CG__X_RDATA + i], false, ring->left,
                               s->buf, len, CG_COMM_TAG_DATA);
        if (status == CG_OK && !st->fixed)
            status = cg__xfer_post(op, &op->x[CG__X_RCREDIT + i], true,
                                   ring->left, &s->credit, sizeof(s->credit),
                                   CG_COMM_TAG_CREDIT);
        if (status != CG_OK)
            return status;
        st->posted += len;
    }
    return CG_OK;
}

/* Receiver side: reduce every piece that landed, as dst = local op piece
 * (in place: cg_reduce(dst, piece); out of place: cg_reduce3(dst, local,
 * piece)), so both give the same bits. Piece sizes are fixed by the
 * credits, so received sizes are not re-checked (a longer message fails in
 * the transport as CG_ERR_TRUNCATED). */
static cg_status_t cg__ring_reap_recvs(cg__ring_t *ring, cg__ring_step_t *st)
{
    cg__coll_op_t *op = ring->op;
    cg_status_t status;

    for (int i = 0; i < CG__RING_SLOTS; i++) {
        cg__ring_slot_t *s = &ring->slot[i];
        cg__xfer_t *x = &op->x[CG__X_RDATA + i];
        if (s->len == 0 || x->req == NULL)
            continue;
        status = cg__xfer_test(op, x);
        if (status == CG_INPROGRESS)
            continue;
        if (status != CG_OK)
            return status;
        if (cg__coll_reduces_in(ring->sg))
            cg__coll_reduce_in(ring->sg, st->dst + s->off, s->len, s->buf);
        else if (st->dst == st->local)
            cg_reduce(st->dst + s->off, s->buf, s->len / ring->el, ring->dt,
                      ring->redop);
        else
            cg_reduce3(st->dst + s->off, st->local + s->off, s->buf,
                       s->len / ring->el, ring->dt, ring->redop);
        if (st->ag) {
            status = cg_reduce_post(st->dst + s->off, s->len / ring->el,
                                    ring->dt, ring->redop, st->nranks,
                                    st->postscale);
            if (status != CG_OK)
                return status;
        }
        st->done += s->len;
        s->len = 0;
    }
    for (int i = 0; i < CG__RING_SLOTS; i++) {
        status = cg__xfer_test(op, &op->x[CG__X_RCREDIT + i]);
        if (status != CG_OK && status != CG_INPROGRESS)
            return status;
    }
    return CG_OK;
}

/* Sender side: turn each credit into a send of that many bytes. */
static cg_status_t cg__ring_sends(cg__ring_t *ring, cg__ring_step_t *st)
{
    cg__coll_op_t *op = ring->op;
    cg__xfer_t *cx = &op->x[CG__X_SCREDIT];
    cg_status_t status;

    while (st->sent_idx > st->send_head) {
        status = cg__xfer_test(op, &op->x[CG__X_SDATA +
                                         st->send_head % CG__RING_SENDS]);
        if (status == CG_INPROGRESS)
            break;
        if (status != CG_OK)
            return status;
        st->send_head++;
    }
    while (st->fixed && st->credited < st->slen &&
           st->sent_idx - st->send_head < CG__RING_SENDS) {
        size_t len = st->slen - st->credited;
        len = len < st->piece ? len : st->piece;
        if (st->src_fill)
            cg__coll_fill(ring->sg, st->src + st->credited, len);
        status = cg__xfer_post(op, &op->x[CG__X_SDATA +
                                         st->sent_idx % CG__RING_SENDS],
                               true, ring->right,
                               (void *)(st->src + st->credited), len,
                               CG_COMM_TAG_DATA);
        if (status != CG_OK)
            return status;
        st->sent_idx++;
        st->credited += len;
    }
    if (st->fixed)
        return CG_OK;
    if (st->credit_posted) {
        status = cg__xfer_test(op, cx);
        if (status != CG_OK)
            return status; /* CG_INPROGRESS included */
        if (ring->credit_in == 0 ||
            ring->credit_in > st->slen - st->credited)
            return cg_error_set(CG_ERR_MISMATCH, "%s: rank %d asked for %llu "
                                "bytes with %zu left to send; the ranks "
                                "disagree on count or dtype", op->name,
                                ring->right,
                                (unsigned long long)ring->credit_in,
                                st->slen - st->credited);
        if (st->sent_idx - st->send_head == CG__RING_SENDS)
            return CG_INPROGRESS; /* every send slot busy: retry later */
        if (st->src_fill)
            cg__coll_fill(ring->sg, st->src + st->credited,
                          (size_t)ring->credit_in);
        status = cg__xfer_post(op, &op->x[CG__X_SDATA +
                                         st->sent_idx % CG__RING_SENDS],
                               true, ring->right,
                               (void *)(st->src + st->credited),
                               (size_t)ring->credit_in, CG_COMM_TAG_DATA);
        if (status != CG_OK)
            return status;
        st->sent_idx++;
        st->credited += (size_t)ring->credit_in;
        st->credit_posted = false;
    }
    if (!st->credit_posted && st->credited < st->slen) {
        status = cg__xfer_post(op, cx, false, ring->right, &ring->credit_in,
                               sizeof(ring->credit_in), CG_COMM_TAG_CREDIT);
        if (status != CG_OK)
            return status;
        st->credit_posted = true;
    }
    return CG_OK;
}

/* Bytes of dst reduced without a gap: up to the first piece in flight. */
static size_t cg__ring_prefix(const cg__ring_t *ring,
                              const cg__ring_step_t *st)
{
    size_t prefix = st->posted;
    for (int i = 0; i < CG__RING_SLOTS; i++)
        if (ring->slot[i].len != 0 && ring->slot[i].off < prefix)
            prefix = ring->slot[i].off;
    return prefix;
}

/* The fused all-gather step: sends of the reduced prefix, receives posted
 * ahead, both reaped in order. */
static cg_status_t cg__ring_gather(cg__ring_t *ring, cg__ring_step_t *st)
{
    cg__coll_op_t *op = ring->op;
    size_t prefix = cg__ring_prefix(ring, st), len;
    cg_status_t status;
    cg__xfer_t *x;

    while (st->ag_send_head < st->ag_sent_idx) {
        x = &op->x[CG__X_AGS + st->ag_send_head % CG__AG_SENDS];
        if ((status = cg__xfer_test(op, x)) == CG_INPROGRESS)
            break;
        if (status != CG_OK)
            return status;
        st->ag_send_head++;
    }
    while (st->ag_sent < st->rlen &&
           st->ag_sent_idx - st->ag_send_head < CG__AG_SENDS) {
        len = st->rlen - st->ag_sent;
        len = len < st->ag_piece ? len : st->ag_piece;
        if (st->ag_sent + len > prefix)
            break;
        x = &op->x[CG__X_AGS + st->ag_sent_idx % CG__AG_SENDS];
        status = cg__xfer_post(op, x, true, ring->right, st->dst + st->ag_sent,
                               len, CG_COMM_TAG_GATHER);
        if (status != CG_OK)
            return status;
        cg__coll_drain(ring->sg, st->dst + st->ag_sent, len); /* final */
        st->ag_sent += len;
        st->ag_sent_idx++;
    }
    while (st->ag_done_idx < st->ag_posted_idx) {
        size_t off = st->ag_done_idx * st->ag_piece;
        x = &op->x[CG__X_AGR + st->ag_done_idx % CG__AG_RECVS];
        if ((status = cg__xfer_test(op, x)) == CG_INPROGRESS)
            break;
        if (status != CG_OK)
            return status;
        len = st->ag_in_len - off;
        cg__coll_drain(ring->sg, st->ag_in + off,
                       len < st->ag_piece ? len : st->ag_piece);
        st->ag_done_idx++;
    }
    while (st->ag_posted < st->ag_in_len &&
           st->ag_posted_idx - st->ag_done_idx < CG__AG_RECVS) {
        len = st->ag_in_len - st->ag_posted;
        len = len < st->ag_piece ? len : st->ag_piece;
        x = &op->x[CG__X_AGR + st->ag_posted_idx % CG__AG_RECVS];
        status = cg__xfer_post(op, x, false, ring->left,
                               st->ag_in + st->ag_posted, len,
                               CG_COMM_TAG_GATHER);
        if (status != CG_OK)
            return status;
        st->ag_posted += len;
        st->ag_posted_idx++;
    }
    return CG_OK;
}

static bool cg__ring_step_done(const cg__ring_t *ring,
                               const cg__ring_step_t *st)
{
    const cg__coll_op_t *op = ring->op;

    if (st->done < st->rlen || st->credited < st->slen ||
        st->send_head < st->sent_idx)
        return false;
    if (st->ag && (st->ag_sent < st->rlen ||
                   st->ag_send_head < st->ag_sent_idx ||
                   st->ag_posted < st->ag_in_len ||
                   st->ag_done_idx < st->ag_posted_idx))
        return false;
    for (int i = 0; i < CG__RING_SLOTS; i++)
        if (op->x[CG__X_RCREDIT + i].req != NULL)
            return false;
    return true;
}

static cg_status_t cg__ring_step(cg__ring_t *ring, cg__ring_step_t *st)
{
    cg__coll_op_t *op = ring->op;
    cg_status_t status;

    while (!cg__ring_step_done(ring, st)) {
        size_t before = st->done + st->credited + st->send_head +
                        st->ag_send_head + st->ag_done_idx;
        status = cg__ring_post_recvs(ring, st);
        if (status == CG_OK)
            status = cg__ring_reap_recvs(ring, st);
        if (status == CG_OK)
            status = cg__ring_sends(ring, st);
        if ((status == CG_OK || status == CG_INPROGRESS) && st->ag)
            status = cg__ring_gather(ring, st);
        if (status != CG_OK && status != CG_INPROGRESS)
            return status;
        if (st->done + st->credited + st->send_head + st->ag_send_head +
                st->ag_done_idx == before) {
            const cg__xfer_t *w = st->done < st->rlen ? &op->x[CG__X_RDATA]
                                 : st->fixed ? &op->x[CG__X_SDATA +
                                                      st->send_head %
                                                          CG__RING_SENDS]
                                             : &op->x[CG__X_SCREDIT];
            status = cg__coll_idle(op, w);
            if (status != CG_OK)
                return status;
        }
    }
    return CG_OK;
}

/* Reduce-scatter; its last step also runs the all-gather's first step
 * (the segment this rank owns goes right as soon as it is final). */
static cg_status_t cg__ring_reduce_scatter(cg__ring_t *ring,
                                           const uint8_t *send, uint8_t *recv,
                                           size_t count, double postscale)
{
    int n = cg_comm_size(ring->op->comm), r = cg_comm_rank(ring->op->comm);
    cg_status_t status;

    for (int s = 0; s < n - 1; s++) {
        size_t soff, scnt, roff, rcnt;
        cg__ring_seg(ring, count, ((r - s) % n + n) % n, &soff, &scnt);
        cg__ring_seg(ring, count, ((r - s - 1) % n + n) % n, &roff,
                     &rcnt);
        cg__ring_step_t st = {
            .src = (s == 0 ? send : recv) + soff * ring->el,
            .src_fill = s == 0,
            .slen = scnt * ring->el,
            .dst = recv + roff * ring->el,
            .local = send + roff * ring->el,
            .rlen = rcnt * ring->el,
        };
        /* Several pieces, so a transfer overlaps the reduction of the
         * piece before it; the governor's chunk may cut them smaller. */
        st.piece = cg__ring_piece(ring, st.rlen);
        if (st.piece <= ring->fixed_max) {
            st.fixed = true;
        } else if (!ring->sock && ring->fixed_max >= CG__RING_PIECE_MIN) {
            /* Over UCX a credit costs more than the larger piece gains
             * (sockets buffer what arrives unasked: credits there). */
            st.piece = ring->fixed_max;
            st.fixed = true;
        }
        if (s == n - 2) {
            size_t ioff, icnt;
            cg__ring_seg(ring, count, r, &ioff, &icnt);
            st.ag = true;
            st.ag_piece = ring->ag_piece;
            st.ag_in = recv + ioff * ring->el;
            st.ag_in_len = icnt * ring->el;
            st.nranks = n;
            st.postscale = postscale;
        }
        status = cg__ring_step(ring, &st);
        if (status != CG_OK)
            return status;
    }
    return CG_OK;
}

static cg_status_t cg__ring_all_gather(cg__ring_t *ring, uint8_t *buf,
                                       size_t count)
{
    cg__coll_op_t *op = ring->op;
    int n = cg_comm_size(op->comm), r = cg_comm_rank(op->comm);
    cg_status_t status;

    for (int s = 1; s < n - 1; s++) {
        size_t soff, scnt, roff, rcnt;
        cg__ring_seg(ring, count, ((r + 1 - s) % n + n) % n, &soff, &scnt);
        cg__ring_seg(ring, count, ((r - s) % n + n) % n, &roff, &rcnt);
        status = cg__coll_sendrecv(op, ring->right, buf + soff * ring->el,
                                   scnt * ring->el, ring->left,
                                   buf + roff * ring->el, rcnt * ring->el,
                                   CG_COMM_TAG_GATHER, NULL);
        if (status != CG_OK)
            return status;
        cg__coll_drain(ring->sg, buf + roff * ring->el, rcnt * ring->el);
    }
    return CG_OK;
}

cg_status_t cg__ring_allreduce(cg__coll_op_t *op, const void *sendbuf,
                               void *recvbuf, size_t count, cg_dtype_t dt,
                               cg_redop_t op_kind, double postscale,
                               const cg__coll_staging_t *sg)
{
    int n = cg_comm_size(op->comm), r = cg_comm_rank(op->comm);
    cg__ring_t ring = {.op = op, .gov = cg_comm_governor(op->comm),
                       .left = (r + n - 1) % n, .right = (r + 1) % n,
                       .el = cg_dtype_size(dt), .dt = dt, .redop = op_kind,
                       .sg = sg};
    size_t seg_max = 0, off, cnt;
    size_t chunk = cg__ring_chunk(&ring), piece_max;
    cg_status_t status = CG_OK;

    for (int s = 0; s < n; s++) {
        cg__ring_seg(&ring, count, s, &off, &cnt);
        seg_max = cnt * ring.el > seg_max ? cnt * ring.el : seg_max;
    }

    ring.sock = cg_transport_kind(cg_comm_transport(op->comm)) ==
                CG_TRANSPORT_SOCKET;
    ring.ag_piece = cg__ring_piece(&ring, seg_max);
    /* No piece is larger than this (see cg__ring_reduce_scatter). */
    piece_max = ring.ag_piece < seg_max ? ring.ag_piece : seg_max;
    ring.floor = (size_t)cg_comm_chunk_min(op->comm);
    ring.floor -= ring.floor % ring.el;
    ring.floor = ring.floor < ring.el ? ring.el : ring.floor;
    ring.fixed_max = (size_t)cg_comm_chunk_min_all(op->comm);
    ring.fixed_max -= ring.fixed_max % ring.el;
    for (int i = 0; seg_max > 0 && i < CG__RING_SLOTS && status == CG_OK;
         i++)
        status = cg__ring_slot_get(&ring, i,
                                   chunk < piece_max ? chunk : piece_max);
    if (status == CG_OK)
        status = cg__ring_reduce_scatter(&ring, sendbuf, recvbuf, count,
                                         postscale);
    if (status != CG_OK)
        return cg__coll_abort(op, status);
    status = cg__ring_all_gather(&ring, recvbuf, count);
    if (status != CG_OK)
        return cg__coll_abort(op, status);
    return CG_OK;
}
