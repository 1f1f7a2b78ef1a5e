/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cg_broadcast from any root: a binomial tree for small messages (log2 n
 * rounds of whole-buffer sends) and a pipelined chain for large ones
 * (root -> root+1 -> ... in pieces of CG__CHAIN_PIECE bytes; each rank
 * keeps receives posted ahead and forwards a piece as soon as it landed,
 * with several sends in flight). Pieces land straight in the caller's
 * buffer, so no memory is allocated for data and the governor's chunk
 * does not bound them. Layer: core/coll; calls coll_xfer.
 */
#include <string.h>

#include "core/base/error.h"
#include "core/coll/coll.h"
#include "core/coll/coll_impl.h"

/* Chain pieces: a constant, so every rank cuts the buffer the same way
 * without telling the others; receives posted ahead and sends in flight. */
#define CG__CHAIN_PIECE (512u << 10)
#define CG__CHAIN_RECVS 4
#define CG__CHAIN_SENDS 8

cg_bcast_algo_t cg_broadcast_algo(const cg_comm_t *comm, size_t bytes)
{
    switch (cg_comm_algo(comm)) {
    case CG_COLL_ALGO_RING:
        return CG_BCAST_CHAIN;
    case CG_COLL_ALGO_RD:
        return CG_BCAST_TREE;
    case CG_COLL_ALGO_AUTO:
    case CG_COLL_ALGO_SHM: /* AllReduce only: broadcast by size */
        break;
    }
    return bytes <= CG_COLL_SMALL_BYTES ? CG_BCAST_TREE : CG_BCAST_CHAIN;
}

static cg_status_t cg__bcast_tree(cg__coll_op_t *op, void *buf, size_t bytes,
                                  int root)
{
    int n = cg_comm_size(op->comm), r = cg_comm_rank(op->comm);
    int vr = (r - root + n) % n, mask = 1;
    cg_status_t st;

    /* Receive from the parent: vr with its lowest set bit cleared. */
    while (mask < n && !(vr & mask))
        mask <<= 1;
    if (vr != 0) {
        st = cg__coll_sendrecv(op, -1, NULL, 0, (vr - mask + root) % n, buf,
                               bytes, CG_COMM_TAG_BCAST, NULL);
        if (st != CG_OK)
            return st;
    }
    /* Children: vr + m for every m below the parent's bit. */
    for (mask >>= 1; mask > 0; mask >>= 1) {
        if (vr + mask >= n)
            continue;
        st = cg__coll_sendrecv(op, (vr + mask + root) % n, buf, bytes, -1,
                               NULL, 0, CG_COMM_TAG_BCAST, NULL);
        if (st != CG_OK)
            return st;
    }
    return CG_OK;
}

/* Chain piece i (of CG__CHAIN_PIECE bytes, the last one shorter): its
 * receive lives in x[i % RECVS], its send in x[RECVS + i % SENDS]. */
static cg_status_t cg__bcast_chain(cg__coll_op_t *op, uint8_t *buf,
                                   size_t bytes, size_t el, int root)
{
    int n = cg_comm_size(op->comm), r = cg_comm_rank(op->comm);
    int vr = (r - root + n) % n, prev = (r + n - 1) % n, next = (r + 1) % n;
    size_t piece = CG__CHAIN_PIECE / el * el;
    size_t npieces = (bytes + piece - 1) / piece, posted = 0, sent = 0;
    cg_status_t st;

    for (size_t i = 0; i < npieces; i++) {
        size_t off = i * piece, len = bytes - off < piece ? bytes - off : piece;
        /* Keep CG__CHAIN_RECVS receives posted ahead. */
        for (; vr != 0 && posted < npieces && posted < i + CG__CHAIN_RECVS;
             posted++) {
            size_t o = posted * piece;
            st = cg__xfer_post(op, &op->x[posted % CG__CHAIN_RECVS], false,
                               prev, buf + o,
                               bytes - o < piece ? bytes - o : piece,
                               CG_COMM_TAG_BCAST);
            if (st != CG_OK)
                return st;
        }
        if (vr != 0) {
            st = cg__xfer_wait(op, &op->x[i % CG__CHAIN_RECVS]);
            if (st != CG_OK)
                return st;
        }
        if (vr == n - 1)
            continue;
        if (i >= CG__CHAIN_SENDS) {
            st = cg__xfer_wait(op, &op->x[CG__CHAIN_RECVS +
                                         (i - CG__CHAIN_SENDS) %
                                             CG__CHAIN_SENDS]);
            if (st != CG_OK)
                return st;
        }
        st = cg__xfer_post(op, &op->x[CG__CHAIN_RECVS + i % CG__CHAIN_SENDS],
                           true, next, buf + off, len, CG_COMM_TAG_BCAST);
        if (st != CG_OK)
            return st;
        sent = i + 1;
    }
    for (size_t i = sent > CG__CHAIN_SENDS ? sent - CG__CHAIN_SENDS : 0;
         i < sent; i++) {
        st = cg__xfer_wait(op, &op->x[CG__CHAIN_RECVS + i % CG__CHAIN_SENDS]);
        if (st != CG_OK)
            return st;
    }
    return CG_OK;
}

cg_status_t cg_broadcast(cg_comm_t *comm, void *buf, size_t count,
                         cg_dtype_t dt, int root)
{
    size_t el = cg_dtype_size(dt), bytes = count * el;
    cg__coll_op_t op_on_stack, *cop = &op_on_stack;
    cg_status_t st;

    if (comm == NULL || el == 0)
        return cg_error_set(CG_ERR_INVALID_PARAM, "broadcast: %s",
                            comm == NULL ? "comm is NULL" : "unknown dtype");
    if (root < 0 || root >= cg_comm_size(comm))
        return cg_error_set(CG_ERR_INVALID_PARAM, "broadcast: root %d out of "
                            "range 0..%d", root, cg_comm_size(comm) - 1);
    if (count > 0 && buf == NULL)
        return cg_error_set(CG_ERR_INVALID_PARAM, "broadcast: buf is NULL "
                            "with count %zu", count);
    st = cg__coll_op_begin(cop, comm, "broadcast");
    if (st == CG_OK && count > 0 && cg_comm_size(comm) > 1) {
        if (cg_broadcast_algo(comm, bytes) == CG_BCAST_TREE)
            st = cg__bcast_tree(cop, buf, bytes, root);
        else
            st = cg__bcast_chain(cop, buf, bytes, el, root);
        if (st != CG_OK)
            st = cg__coll_abort(cop, st);
    }
    return st;
}
