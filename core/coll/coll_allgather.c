/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cg_allgatherv: a ring (rank-1 -> rank -> rank+1) that streams blocks of
 * any size, zero included, straight into the caller's buffer. Each rank
 * sends its own block, then forwards every block it receives except the
 * last, piece by piece as soon as the piece landed, so a block crosses
 * the ring pipelined instead of step by step. No memory is allocated.
 * Layer: core/coll; calls coll_xfer and comm.
 */
#include <string.h>

#include "core/base/error.h"
#include "core/coll/coll.h"
#include "core/coll/coll_impl.h"

/* Pieces: fixed by the transport, so both ends of a link cut a block
 * alike without telling each other. Over UCX small pieces stay in cache
 * between landing and being forwarded (as the ring allreduce's); over
 * sockets each message costs system calls, so pieces are larger. Receives
 * posted ahead and sends in flight. */
#define CG__AG_PIECE (128u << 10)
#define CG__AG_SOCK_PIECE (512u << 10)
#define CG__AG_RECVS 4
#define CG__AG_SENDS 8
#define CG__AG_X_SEND CG__AG_RECVS

/* A walk over the pieces of blocks first, first-1, ... (nblocks of them,
 * rank order descending, wrapping), skipping empty blocks. */
typedef struct cg__ag_cursor {
    const size_t *bytes;
    size_t piece;
    int n;
    int blk;        /* block of the next piece */
    int left;       /* blocks not yet finished, blk included */
    size_t blk_off; /* offset of blk in the receive buffer */
    size_t pos;     /* next piece's offset within blk */
} cg__ag_cursor_t;

static size_t cg__ag_offset(const size_t *bytes, int blk)
{
    size_t off = 0;

    for (int r = 0; r < blk; r++)
        off += bytes[r];
    return off;
}

static void cg__ag_cursor_init(cg__ag_cursor_t *c, const size_t *bytes,
                               size_t piece, int n, int first, int nblocks)
{
    *c = (cg__ag_cursor_t){.bytes = bytes, .piece = piece, .n = n,
                           .blk = first,
                           .left = nblocks,
                           .blk_off = cg__ag_offset(bytes, first)};
}

/* The next piece (offset in the receive buffer, length); false when the
 * walk is over. */
static bool cg__ag_next(cg__ag_cursor_t *c, size_t *off_p, size_t *len_p)
{
    while (c->left > 0 && c->pos == c->bytes[c->blk]) {
        /* To the block before: its offset is this one's minus its size;
         * below block 0 the walk wraps to the last block. */
        c->left--;
        c->pos = 0;
        if (c->blk == 0) {
            c->blk = c->n - 1;
            c->blk_off = cg__ag_offset(c->bytes, c->blk);
        } else {
            c->blk--;
            c->blk_off -= c->bytes[c->blk];
        }
    }
    if (c->left == 0)
        return false;
    *off_p = c->blk_off + c->pos;
    *len_p = c->bytes[c->blk] - c->pos < c->piece
                 ? c->bytes[c->blk] - c->pos
                 : c->piece;
    c->pos += *len_p;
    return true;
}

/* Pieces in nblocks blocks from first downwards. */
static size_t cg__ag_pieces(const size_t *bytes, size_t piece, int n,
                            int first, int nblocks)
{
    size_t count = 0;

    for (int k = 0; k < nblocks; k++) {
        int b = ((first - k) % n + n) % n;
        count += (bytes[b] + piece - 1) / piece;
    }
    return count;
}

typedef struct cg__ag {
    cg__coll_op_t *op;
    uint8_t *recv;
    const uint8_t *own;     /* this rank's block as sent (sendbuf) */
    size_t own_off;         /* its place in recv */
    int left, right;
    cg__ag_cursor_t rcur, scur;
    size_t nrecv, nsend, own_pieces;
    size_t piece;
    size_t own_len, own_copied; /* out of place: copy of own into recv */
    size_t rposted, rdone, sposted, sdone;
} cg__ag_t;

static cg_status_t cg__ag_post_recvs(cg__ag_t *ag)
{
    size_t off, len;
    cg_status_t st;

    while (ag->rposted < ag->nrecv &&
           ag->rposted - ag->rdone < CG__AG_RECVS &&
           cg__ag_next(&ag->rcur, &off, &len)) {
        st = cg__xfer_post(ag->op, &ag->op->x[ag->rposted % CG__AG_RECVS],
                           false, ag->left, ag->recv + off, len,
                           CG_COMM_TAG_GATHER);
        if (st != CG_OK)
            return st;
        ag->rposted++;
    }
    return CG_OK;
}

/* Receives finish in posting order (one link, one tag). */
static cg_status_t cg__ag_reap(cg__ag_t *ag, bool *moved)
{
    cg__coll_op_t *op = ag->op;
    cg_status_t st;

    while (ag->rdone < ag->rposted) {
        cg__xfer_t *x = &op->x[ag->rdone % CG__AG_RECVS];
        if ((st = cg__xfer_test(op, x)) == CG_INPROGRESS)
            break;
        if (st != CG_OK)
            return st;
        if (x->got != x->len)
            return cg_error_set(CG_ERR_MISMATCH, "allgather: rank %d sent "
                                "%zu bytes where rank %d expected %zu; the "
                                "ranks disagree on the block sizes",
                                ag->left, x->got, cg_comm_rank(op->comm),
                                x->len);
        ag->rdone++;
        *moved = true;
    }
    while (ag->sdone < ag->sposted) {
        cg__xfer_t *x = &op->x[CG__AG_X_SEND + ag->sdone % CG__AG_SENDS];
        if ((st = cg__xfer_test(op, x)) == CG_INPROGRESS)
            break;
        if (st != CG_OK)
            return st;
        ag->sdone++;
        *moved = true;
    }
    return CG_OK;
}

/* Sends: the own pieces at once, then receive piece k once it landed
 * (the send walk after the own block replays the receive walk). */
static cg_status_t cg__ag_post_sends(cg__ag_t *ag)
{
    size_t off, len;
    cg_status_t st;

    while (ag->sposted < ag->nsend &&
           ag->sposted - ag->sdone < CG__AG_SENDS &&
           (ag->sposted < ag->own_pieces ||
            ag->sposted - ag->own_pieces < ag->rdone) &&
           cg__ag_next(&ag->scur, &off, &len)) {
        const uint8_t *src = ag->sposted < ag->own_pieces
                                 ? ag->own + (off - ag->own_off)
                                 : ag->recv + off;
        st = cg__xfer_post(ag->op,
                           &ag->op->x[CG__AG_X_SEND +
                                     ag->sposted % CG__AG_SENDS],
                           true, ag->right, (void *)src, len,
                           CG_COMM_TAG_GATHER);
        if (st != CG_OK)
            return st;
        ag->sposted++;
    }
    return CG_OK;
}

/* Out of place, a piece of this rank's block is copied into the result
 * whenever the transfers make no progress (sends read the caller's
 * block, so the copy races nothing); what is left after them, at the end. */
static bool cg__ag_copy_own(cg__ag_t *ag, size_t max)
{
    size_t len = ag->own_len - ag->own_copied;

    if (len == 0)
        return false;
    len = len < max ? len : max;
    memcpy(ag->recv + ag->own_off + ag->own_copied,
           ag->own + ag->own_copied, len);
    ag->own_copied += len;
    return true;
}

static cg_status_t cg__ag_ring(cg__ag_t *ag)
{
    cg__coll_op_t *op = ag->op;
    cg_status_t st;

    while (ag->rdone < ag->nrecv || ag->sdone < ag->nsend) {
        bool moved = false;
        if ((st = cg__ag_post_recvs(ag)) != CG_OK ||
            (st = cg__ag_post_sends(ag)) != CG_OK ||
            (st = cg__ag_reap(ag, &moved)) != CG_OK)
            return st;
        if (!moved && !cg__ag_copy_own(ag, ag->piece)) {
            const cg__xfer_t *w =
                ag->rdone < ag->rposted
                    ? &op->x[ag->rdone % CG__AG_RECVS]
                    : &op->x[CG__AG_X_SEND + ag->sdone % CG__AG_SENDS];
            if ((st = cg__coll_idle(op, w)) != CG_OK)
                return st;
        }
    }
    cg__ag_copy_own(ag, ag->own_len);
    return CG_OK;
}

static cg_status_t cg__ag_check(const cg_comm_t *comm, const void *sendbuf,
                                const void *recvbuf, const size_t *bytes)
{
    size_t total = 0;

    if (comm == NULL || bytes == NULL)
        return cg_error_set(CG_ERR_INVALID_PARAM, "allgather: %s is NULL",
                            comm == NULL ? "comm" : "bytes");
    for (int r = 0; r < cg_comm_size(comm); r++) {
        if (bytes[r] > SIZE_MAX - total)
            return cg_error_set(CG_ERR_INVALID_PARAM, "allgather: the blocks "
                                "add up to more than SIZE_MAX at rank %d", r);
        total += bytes[r];
    }
    if (total > 0 && recvbuf == NULL)
        return cg_error_set(CG_ERR_INVALID_PARAM, "allgather: recvbuf is "
                            "NULL for %zu bytes", total);
    if (bytes[cg_comm_rank(comm)] > 0 && sendbuf == NULL)
        return cg_error_set(CG_ERR_INVALID_PARAM, "allgather: sendbuf is "
                            "NULL for a block of %zu bytes",
                            bytes[cg_comm_rank(comm)]);
    return CG_OK;
}

cg_status_t cg_allgatherv(cg_comm_t *comm, const void *sendbuf,
                          void *recvbuf, const size_t *bytes)
{
    cg__coll_op_t op_on_stack, *cop = &op_on_stack;
    cg_status_t st = cg__ag_check(comm, sendbuf, recvbuf, bytes);
    size_t piece;
    int n, r;
    cg__ag_t ag;

    if (st != CG_OK)
        return st;
    n = cg_comm_size(comm);
    r = cg_comm_rank(comm);
    st = cg__coll_op_begin(cop, comm, "allgather");
    if (st != CG_OK)
        return st;
    ag = (cg__ag_t){.op = cop, .recv = recvbuf, .own = sendbuf,
                    .own_off = cg__ag_offset(bytes, r),
                    .left = (r + n - 1) % n, .right = (r + 1) % n};
    if (n == 1) {
        if (bytes[r] > 0 && ag.own != ag.recv)
            memcpy(ag.recv, ag.own, bytes[r]);
        return CG_OK;
    }
    piece = cg_transport_kind(cg_comm_transport(comm)) == CG_TRANSPORT_SOCKET
                ? CG__AG_SOCK_PIECE
                : CG__AG_PIECE;
    /* Receive blocks r-1 .. r-n+1; send blocks r .. r-n+2. */
    cg__ag_cursor_init(&ag.rcur, bytes, piece, n, ag.left, n - 1);
    cg__ag_cursor_init(&ag.scur, bytes, piece, n, r, n - 1);
    ag.nrecv = cg__ag_pieces(bytes, piece, n, ag.left, n - 1);
    ag.nsend = cg__ag_pieces(bytes, piece, n, r, n - 1);
    ag.own_pieces = cg__ag_pieces(bytes, piece, n, r, 1);
    ag.piece = piece;
    ag.own_len = ag.own != ag.recv + ag.own_off ? bytes[r] : 0;
    st = cg__ag_ring(&ag);
    if (st != CG_OK)
        return cg__coll_abort(cop, st);
    return CG_OK;
}
