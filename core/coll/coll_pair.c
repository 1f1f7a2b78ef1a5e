/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Two-rank AllReduce (recursive doubling's one step, pipelined): both
 * ranks send their whole buffer in fixed pieces and reduce each piece of
 * the partner's as it lands, lower rank's data first, so both end with the
 * same bits. Pieces are min(CG_COLL_SMALL_BYTES, the smallest CG_CHUNK_MIN
 * of the two ranks), known to both without asking; two receive slots (the
 * communicator's scratch, CG_MEM_CAT_RING) keep one piece landing while
 * the previous one is reduced, and sends run ahead. One message exchange
 * deep instead of the ring's two: faster up to ~128 KiB (in place, a
 * piece is overwritten only once its own send is done).
 * Layer: core/coll; calls coll_xfer, reduce, comm.
 */
#include <string.h>

#include "core/base/error.h"
#include "core/coll/coll_impl.h"
#include "core/reduce/reduce.h"

#define CG__PAIR_SLOTS 2
#define CG__PAIR_SENDS 16
#define CG__X_SEND CG__PAIR_SLOTS

typedef struct cg__pair {
    cg__coll_op_t *op;
    const uint8_t *send;
    uint8_t *recv;
    size_t bytes, piece, npieces, el;
    cg_dtype_t dt;
    cg_redop_t redop;
    double postscale;
    bool peer_lower;
    void *slot[CG__PAIR_SLOTS];
    size_t posted, done;  /* receives posted, pieces reduced */
    size_t sent, sdone;   /* sends posted, sends finished (in order) */
} cg__pair_t;

static size_t cg__pair_len(const cg__pair_t *p, size_t k)
{
    size_t off = k * p->piece;
    return p->bytes - off < p->piece ? p->bytes - off : p->piece;
}

/* recv[k] = lower op higher, then the average and postscale. In place the
 * higher rank reduces into the slot and copies back (the kernels write
 * only their first operand's place). */
static cg_status_t cg__pair_reduce(cg__pair_t *p, size_t k, void *tmp)
{
    size_t off = k * p->piece, len = cg__pair_len(p, k), n = len / p->el;
    uint8_t *out = p->recv + off;
    const uint8_t *mine = p->send + off;

    if (mine != out)
        cg_reduce3(out, p->peer_lower ? tmp : mine, p->peer_lower ? mine : tmp,
                   n, p->dt, p->redop);
    else if (p->peer_lower) {
        cg_reduce(tmp, out, n, p->dt, p->redop);
        memcpy(out, tmp, len);
    } else {
        cg_reduce(out, tmp, n, p->dt, p->redop);
    }
    return cg_reduce_post(out, n, p->dt, p->redop, 2, p->postscale);
}

/* Posts what may be posted: receives into idle slots, sends ahead. */
static cg_status_t cg__pair_post(cg__pair_t *p, int peer)
{
    cg__coll_op_t *op = p->op;
    cg_status_t st;

    while (p->posted < p->npieces && p->posted - p->done < CG__PAIR_SLOTS) {
        size_t k = p->posted;
        st = cg__xfer_post(op, &op->x[k % CG__PAIR_SLOTS], false, peer,
                           p->slot[k % CG__PAIR_SLOTS], cg__pair_len(p, k),
                           CG_COMM_TAG_RD);
        if (st != CG_OK)
            return st;
        p->posted++;
    }
    while (p->sent < p->npieces && p->sent - p->sdone < CG__PAIR_SENDS) {
        size_t k = p->sent;
        st = cg__xfer_post(op, &op->x[CG__X_SEND + k % CG__PAIR_SENDS], true,
                           peer, (void *)(p->send + k * p->piece),
                           cg__pair_len(p, k), CG_COMM_TAG_RD);
        if (st != CG_OK)
            return st;
        p->sent++;
    }
    return CG_OK;
}

/* Reaps finished sends (in order) and the next piece, if it landed; in
 * place a piece is overwritten only once its own send is done. */
static cg_status_t cg__pair_reap(cg__pair_t *p, bool *progress)
{
    cg__coll_op_t *op = p->op;
    cg__xfer_t *x;
    cg_status_t st;

    while (p->sdone < p->sent) {
        x = &op->x[CG__X_SEND + p->sdone % CG__PAIR_SENDS];
        if ((st = cg__xfer_test(op, x)) == CG_INPROGRESS)
            break;
        if (st != CG_OK)
            return st;
        p->sdone++;
        *progress = true;
    }
    while (p->done < p->posted &&
           (p->send != p->recv || p->sdone > p->done)) {
        x = &op->x[p->done % CG__PAIR_SLOTS];
        if ((st = cg__xfer_test(op, x)) == CG_INPROGRESS)
            break;
        if (st != CG_OK)
            return st;
        st = cg__pair_reduce(p, p->done, p->slot[p->done % CG__PAIR_SLOTS]);
        if (st != CG_OK)
            return st;
        p->done++;
        *progress = true;
    }
    return CG_OK;
}

static cg_status_t cg__pair_run(cg__pair_t *p, int peer)
{
    cg__coll_op_t *op = p->op;
    cg_status_t st = CG_OK;

    while (p->done < p->npieces || p->sdone < p->npieces) {
        bool progress = false;
        st = cg__pair_post(p, peer);
        if (st == CG_OK)
            st = cg__pair_reap(p, &progress);
        if (st != CG_OK)
            return st;
        if (!progress) {
            const cg__xfer_t *w = p->done < p->posted
                                     ? &op->x[p->done % CG__PAIR_SLOTS]
                                     : &op->x[CG__X_SEND +
                                              p->sdone % CG__PAIR_SENDS];
            st = cg__coll_idle(op, w);
            if (st != CG_OK)
                return st;
        }
    }
    return CG_OK;
}

cg_status_t cg__pair_allreduce(cg__coll_op_t *op, const void *sendbuf,
                               void *recvbuf, size_t count, cg_dtype_t dt,
                               cg_redop_t redop, double postscale)
{
    cg_comm_t *comm = op->comm;
    int r = cg_comm_rank(comm);
    cg__pair_t p = {.op = op, .send = sendbuf, .recv = recvbuf, .dt = dt,
                    .redop = redop, .postscale = postscale,
                    .el = cg_dtype_size(dt), .peer_lower = r == 1};
    size_t piece = (size_t)cg_comm_chunk_min_all(comm), cap, max;
    cg_status_t st = CG_OK;

    p.bytes = count * p.el;
    piece = piece < CG_COLL_SMALL_BYTES ? piece : CG_COLL_SMALL_BYTES;
    piece -= piece % p.el;
    p.piece = piece < p.el ? p.el : piece;
    p.npieces = (p.bytes + p.piece - 1) / p.piece;
    piece = p.bytes < p.piece ? p.bytes : p.piece;
    max = (size_t)cg_governor_chunk_size(cg_comm_governor(comm));
    max = max > piece ? max : piece;
    for (size_t i = 0; i < CG__PAIR_SLOTS && i < p.npieces && st == CG_OK;
         i++)
        st = cg_comm_scratch(comm, CG_COLL_SCRATCH_RING + (int)i, piece,
                             piece, max, p.el, &p.slot[i], &cap);
    if (st == CG_OK)
        st = cg__pair_run(&p, 1 - r);
    if (st != CG_OK)
        return cg__coll_abort(op, st);
    return CG_OK;
}
