/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cg_reduce_scatterv: the ring reduce-scatter over rank-1 -> rank ->
 * rank+1 with a block per rank of any size (the Horovod shim's
 * reducescatter: each rank keeps its rows of the reduced tensor). Blocks
 * are walked in rounds of one piece each (CG_COLL_SMALL_BYTES, the same
 * cut on every rank); in round j, step s, rank r sends piece j of block
 * r-1-s (its own prescaled input at step 0, else the partial it reduced
 * last step) and receives the partial of block r-2-s, reduces its own
 * input into it and, at the last step, lands block r's final piece in
 * recvbuf. Two scratch pieces (CG_MEM_CAT_RING, the communicator's).
 * Layer: core/coll; calls coll_xfer, reduce, comm.
 */
#include <math.h>
#include <string.h>

#include "core/base/error.h"
#include "core/coll/coll.h"
#include "core/coll/coll_impl.h"
#include "core/reduce/reduce.h"

typedef struct cg__rs {
    cg__coll_op_t *op;
    const uint8_t *send;
    uint8_t *recv;
    const size_t *counts;
    size_t *displ;     /* element offset of each block in send */
    size_t el, piece;  /* element bytes; piece elements */
    cg_dtype_t dt;
    cg_redop_t redop;
    double prescale;
    uint8_t *rbuf, *abuf; /* received partial; partial to send */
    int n, r;
} cg__rs_t;

static int cg__mod(int a, int n)
{
    return ((a % n) + n) % n;
}

/* Elements of block b's piece j (0 past its end). */
static size_t cg__piece_len(const cg__rs_t *rs, int b, size_t j)
{
    size_t at = j * rs->piece, cnt = rs->counts[b];

    if (at >= cnt)
        return 0;
    return cnt - at < rs->piece ? cnt - at : rs->piece;
}

/* out[0, len) = prescale * (this rank's input of block b at piece j),
 * op in when `in` is not NULL. out may be that input itself (in place). */
static void cg__own(const cg__rs_t *rs, int b, size_t j, size_t len,
                    uint8_t *out, const uint8_t *in)
{
    const uint8_t *mine = rs->send + (rs->displ[b] + j * rs->piece) * rs->el;

    if (rs->prescale == 1.0 && in != NULL) {
        cg_reduce3(out, mine, in, len, rs->dt, rs->redop);
        return;
    }
    if (out == mine)
        cg_scale(out, len, rs->dt, rs->prescale);
    else
        cg_scale_copy(out, mine, len, rs->dt, rs->prescale);
    if (in != NULL)
        cg_reduce(out, in, len, rs->dt, rs->redop);
}

/* Round j of the ring: n-1 steps on piece j of every block. */
static cg_status_t cg__round(cg__rs_t *rs, size_t j)
{
    int n = rs->n, r = rs->r, left = cg__mod(r - 1, n), right = (r + 1) % n;
    int sb = cg__mod(r - 1, n);
    size_t slen = cg__piece_len(rs, sb, j);
    const uint8_t *sbuf = rs->abuf;
    cg_status_t st;

    if (slen > 0 && rs->prescale == 1.0)
        sbuf = rs->send + (rs->displ[sb] + j * rs->piece) * rs->el;
    else if (slen > 0)
        cg__own(rs, sb, j, slen, rs->abuf, NULL);
    for (int s = 0; s < n - 1; s++) {
        int rb = cg__mod(r - 2 - s, n);
        size_t rlen = cg__piece_len(rs, rb, j);
        uint8_t *out = s == n - 2 ? rs->recv + j * rs->piece * rs->el
                                  : rs->abuf;
        st = cg__coll_sendrecv(rs->op, slen > 0 ? right : -1, sbuf,
                               slen * rs->el, rlen > 0 ? left : -1, rs->rbuf,
                               rlen * rs->el, CG_COMM_TAG_DATA, NULL);
        if (st != CG_OK)
            return st;
        if (rlen > 0)
            cg__own(rs, rb, j, rlen, out, rs->rbuf);
        sbuf = rs->abuf; /* next: the partial just reduced */
        slen = rlen;
    }
    return CG_OK;
}

static cg_status_t cg__rs_check(const cg_comm_t *comm, const void *sendbuf,
                                const void *recvbuf, const size_t *counts,
                                cg_dtype_t dt, cg_redop_t op, double prescale,
                                double postscale, size_t *total_p)
{
    size_t total = 0;
    cg_status_t st;

    if (comm == NULL || counts == NULL)
        return cg_error_set(CG_ERR_INVALID_PARAM, "reduce-scatter: %s is "
                            "NULL", comm == NULL ? "comm" : "counts");
    st = cg_reduce_check(dt, op);
    if (st != CG_OK)
        return st;
    for (int b = 0; b < cg_comm_size(comm); b++)
        if (__builtin_add_overflow(total, counts[b], &total) ||
            total > SIZE_MAX / cg_dtype_size(dt))
            return cg_error_set(CG_ERR_INVALID_PARAM, "reduce-scatter: the "
                                "blocks' %s elements overflow size_t",
                                cg_dtype_name(dt));
    if ((total > 0 && sendbuf == NULL) ||
        (counts[cg_comm_rank(comm)] > 0 && recvbuf == NULL))
        return cg_error_set(CG_ERR_INVALID_PARAM, "reduce-scatter: %s is "
                            "NULL with %zu elements", sendbuf == NULL
                            ? "sendbuf" : "recvbuf", total);
    if (!isfinite(prescale) || !isfinite(postscale))
        return cg_error_set(CG_ERR_INVALID_PARAM, "reduce-scatter: prescale "
                            "%g and postscale %g must be finite", prescale,
                            postscale);
    *total_p = total;
    return CG_OK;
}

/* Two scratch pieces (floor = piece: every rank cuts alike). */
static cg_status_t cg__rs_buffers(cg__rs_t *rs, cg_comm_t *comm)
{
    size_t bytes = rs->piece * rs->el, got;
    void *p;
    cg_status_t st;

    st = cg_comm_scratch(comm, CG_COLL_SCRATCH_RS, bytes, bytes, bytes,
                         rs->el, &p, &got);
    if (st != CG_OK)
        return st;
    rs->rbuf = p;
    st = cg_comm_scratch(comm, CG_COLL_SCRATCH_RS + 1, bytes, bytes, bytes,
                         rs->el, &p, &got);
    rs->abuf = p;
    return st;
}

cg_status_t cg_reduce_scatterv(cg_comm_t *comm, const void *sendbuf,
                               void *recvbuf, const size_t *counts,
                               cg_dtype_t dt, cg_redop_t op, double prescale,
                               double postscale)
{
    cg__coll_op_t cop;
    cg__rs_t rs;
    size_t total = 0, rounds = 0, *displ, dlen;
    cg_status_t st = cg__rs_check(comm, sendbuf, recvbuf, counts, dt, op,
                                  prescale, postscale, &total);

    if (st != CG_OK)
        return st;
    st = cg__coll_op_begin(&cop, comm, "reduce-scatter");
    if (st != CG_OK || total == 0)
        return st;
    dlen = (size_t)cg_comm_size(comm) * sizeof(size_t);
    st = cg_governor_alloc(cg_comm_governor(comm), CG_MEM_CAT_CONTROL, dlen,
                           (void **)&displ);
    if (st != CG_OK) /* the others must not wait for this rank */
        return cg__coll_abort(&cop, st);
    memset(&rs, 0, sizeof(rs));
    rs.op = &cop;
    rs.send = sendbuf;
    rs.recv = recvbuf;
    rs.counts = counts;
    rs.displ = displ;
    rs.el = cg_dtype_size(dt);
    rs.piece = CG_COLL_SMALL_BYTES / rs.el;
    rs.dt = dt;
    rs.redop = op;
    rs.prescale = prescale;
    rs.n = cg_comm_size(comm);
    rs.r = cg_comm_rank(comm);
    for (int b = 0; b < rs.n; b++) {
        displ[b] = b == 0 ? 0 : displ[b - 1] + counts[b - 1];
        size_t nr = (counts[b] + rs.piece - 1) / rs.piece;
        rounds = nr > rounds ? nr : rounds;
    }
    if (rs.n == 1) {
        if (counts[0] > 0)
            cg__own(&rs, 0, 0, counts[0], rs.recv, NULL); /* whole block */
    } else {
        st = cg__rs_buffers(&rs, comm);
        for (size_t j = 0; j < rounds && st == CG_OK; j++)
            st = cg__round(&rs, j);
    }
    cg_governor_free(cg_comm_governor(comm), CG_MEM_CAT_CONTROL, displ, dlen);
    if (st != CG_OK)
        return cg__coll_abort(&cop, st);
    return cg_reduce_post(recvbuf, counts[rs.r], dt, op, rs.n, postscale);
}
