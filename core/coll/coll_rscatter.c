/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cg_reduce_scatterv: the ring reduce-scatter over rank-1 -> rank ->
 * rank+1 with a block per rank of any size (the Horovod shim's
 * reducescatter: each rank keeps its rows of the reduced tensor). Blocks
 * are cut into rounds of one piece each (cg__rs_piece: the same cut on
 * every rank); in round j, step s, rank r sends piece j of block r-1-s
 * (its own prescaled input at step 0, else the partial it reduced last
 * step) and receives the partial of block r-2-s, reduces its own input
 * into it and, at the last step, lands block r's final piece in recvbuf.
 * Pipelined: up to CG__RS_LANES rounds run at once, each on a lane of its
 * own (a receive slot and two partials, so a step's reduction overlaps
 * the send of the step before and the other lanes' transfers), round j's
 * messages on channel j % CG__RS_LANES (a tag kind of its own). Lanes
 * come from the communicator's scratch (CG_MEM_CAT_RING); a rank short of
 * memory runs fewer (down to one lane of one slot and one partial) without
 * telling the others, since each channel's messages stay in round order.
 * Layer: core/coll; calls coll_xfer, reduce, comm.
 */
#include <math.h>
#include <string.h>

#include "core/base/error.h"
#include "core/coll/coll.h"
#include "core/coll/coll_impl.h"
#include "core/reduce/reduce.h"

/* Rounds in flight at most, and channels: round j on tag kind
 * CG_COMM_TAG_RS + j % CG__RS_LANES on every rank. */
#define CG__RS_LANES 4
/* Pieces: the largest block's eighth, within 64..128 KiB, and never above
 * the smallest CG_CHUNK_MIN of all ranks (exchanged at create), so every
 * rank cuts alike whatever its governor's chunk (as the AllReduce ring's
 * fixed pieces). */
#define CG__RS_PIPE 8
#define CG__RS_PIECE_MIN (64u << 10)
#define CG__RS_PIECE_MAX (128u << 10)
/* Partials per lane (more than two ranks): two, so a step's reduction need
 * not wait for the send of the partial reduced the step before. */
#define CG__RS_PARTS 2

typedef struct cg__rs_lane {
    uint8_t *slot;                    /* the partial received */
    uint8_t *part[CG__RS_PARTS];      /* partials to send; NULL: none */
    cg__xfer_t *part_rd[CG__RS_PARTS]; /* the send reading each, or NULL */
    cg__xfer_t *rx, *sx[2];           /* sends alternate: sx[nsent % 2] */
    size_t nsent;
    size_t j;        /* round */
    int s;           /* step */
    int q;           /* partial step s's send reads (-1: the input) */
    bool active;     /* round j runs */
    bool sent;       /* step s's send posted (or empty) */
    bool posted;     /* step s's receive posted (or empty) */
} cg__rs_lane_t;

typedef struct cg__rs {
    cg__coll_op_t *op;
    const uint8_t *send;
    uint8_t *recv;
    const size_t *counts;
    size_t *displ;     /* element offset of each block in send */
    size_t el, piece;  /* element bytes; piece elements */
    size_t rounds, next; /* rounds; the next one to start */
    cg_dtype_t dt;
    cg_redop_t redop;
    double prescale;
    int n, r, nlanes;
    bool busy[CG__RS_LANES]; /* a round of this channel runs here */
    cg__rs_lane_t lane[CG__RS_LANES];
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

/* CG_OK once partial q is read by no send in flight, else CG_INPROGRESS
 * (or the failure of that send). */
static cg_status_t cg__rs_part_free(cg__rs_t *rs, cg__rs_lane_t *ln, int q)
{
    cg_status_t st;

    if (ln->part_rd[q] == NULL)
        return CG_OK;
    st = cg__xfer_test(rs->op, ln->part_rd[q]);
    if (st == CG_OK)
        ln->part_rd[q] = NULL;
    return st;
}

/* Step s's send: block sb's piece, from the input (step 0, prescale 1),
 * the input prescaled into partial 0 (step 0), or the partial reduced
 * last step. CG_INPROGRESS: a send or partial still busy, retry. */
static cg_status_t cg__rs_send(cg__rs_t *rs, cg__rs_lane_t *ln, int sb,
                               size_t len, cg_comm_tag_kind_t kind)
{
    cg__xfer_t *x = ln->sx[ln->nsent % 2];
    const uint8_t *src;
    cg_status_t st = cg__xfer_test(rs->op, x);
    int q = ln->s > 0 ? ln->q : -1;

    if (st != CG_OK)
        return st;
    for (int i = 0; i < CG__RS_PARTS; i++)
        if (ln->part_rd[i] == x) /* its send is done */
            ln->part_rd[i] = NULL;
    if (q >= 0) {
        src = ln->part[q];
    } else if (rs->prescale == 1.0) {
        src = rs->send + (rs->displ[sb] + ln->j * rs->piece) * rs->el;
    } else {
        q = 0;
        if ((st = cg__rs_part_free(rs, ln, q)) != CG_OK)
            return st;
        cg__own(rs, sb, ln->j, len, ln->part[q], NULL);
        src = ln->part[q];
    }
    st = cg__xfer_post(rs->op, x, true, cg__mod(rs->r + 1, rs->n),
                       (void *)src, len * rs->el, kind);
    if (st != CG_OK)
        return st;
    ln->nsent++;
    ln->q = q;
    if (q >= 0)
        ln->part_rd[q] = x;
    return CG_OK;
}

/* The end of step s: its piece landed (rlen elements of block rb);
 * reduces it into a free partial, or at the last step into recvbuf. */
static cg_status_t cg__rs_reduce(cg__rs_t *rs, cg__rs_lane_t *ln, int rb,
                                 size_t rlen)
{
    bool last = ln->s == rs->n - 2;
    uint8_t *out = rs->recv + ln->j * rs->piece * rs->el;
    int q = 0;
    cg_status_t st;

    if (rlen > 0 && ln->rx->got != rlen * rs->el)
        return cg_error_set(CG_ERR_MISMATCH, "reduce-scatter: rank %d "
                            "sent %zu bytes of block %d's piece %zu where "
                            "rank %d expects %zu; the ranks disagree on "
                            "counts or dtype", cg__mod(rs->r - 1, rs->n),
                            ln->rx->got, rb, ln->j, rs->r, rlen * rs->el);
    if (!last) {
        /* The partial step s's send does not read, if there are two. */
        q = ln->part[1] != NULL && ln->q == 0 ? 1 : 0;
        if ((st = cg__rs_part_free(rs, ln, q)) != CG_OK)
            return st;
        out = ln->part[q];
    }
    if (rlen > 0)
        cg__own(rs, rb, ln->j, rlen, out, ln->slot);
    ln->q = q; /* step s+1 sends it */
    return CG_OK;
}

/* Drives one lane as far as it goes without waiting: starts the next
 * round when its channel is free, posts each step's send and receive,
 * reduces what landed. Errors only; waiting is CG_OK. */
static cg_status_t cg__rs_lane(cg__rs_t *rs, cg__rs_lane_t *ln,
                               bool *progress)
{
    cg_status_t st;

    for (;;) {
        if (!ln->active) {
            if (rs->next >= rs->rounds || rs->busy[rs->next % CG__RS_LANES])
                return CG_OK;
            ln->j = rs->next++;
            rs->busy[ln->j % CG__RS_LANES] = true;
            ln->active = true;
            ln->s = 0;
            ln->q = -1;
            ln->sent = ln->posted = false;
        }
        cg_comm_tag_kind_t kind = (cg_comm_tag_kind_t)(CG_COMM_TAG_RS +
                                                       ln->j % CG__RS_LANES);
        int sb = cg__mod(rs->r - 1 - ln->s, rs->n);
        int rb = cg__mod(rs->r - 2 - ln->s, rs->n);
        size_t slen = cg__piece_len(rs, sb, ln->j);
        size_t rlen = cg__piece_len(rs, rb, ln->j);
        if (!ln->posted) { /* the slot is free: its last piece reduced */
            st = rlen > 0 ? cg__xfer_post(rs->op, ln->rx, false,
                                          cg__mod(rs->r - 1, rs->n),
                                          ln->slot, rlen * rs->el, kind)
                          : CG_OK;
            if (st != CG_OK)
                return st;
            ln->posted = true;
            *progress = true;
        }
        if (!ln->sent) {
            st = slen > 0 ? cg__rs_send(rs, ln, sb, slen, kind) : CG_OK;
            if (st != CG_OK)
                return st == CG_INPROGRESS ? CG_OK : st;
            ln->sent = true;
            *progress = true;
        }
        st = cg__xfer_test(rs->op, ln->rx); /* CG_OK when idle */
        if (st == CG_OK)
            st = cg__rs_reduce(rs, ln, rb, rlen);
        if (st != CG_OK)
            return st == CG_INPROGRESS ? CG_OK : st;
        *progress = true;
        if (ln->s == rs->n - 2) { /* the round is done here */
            ln->active = false;
            rs->busy[ln->j % CG__RS_LANES] = false;
        } else {
            ln->s++;
            ln->sent = ln->posted = false;
        }
    }
}

/* A transfer still in flight (to name its peer on a timeout). */
static const cg__xfer_t *cg__rs_waiting(const cg__rs_t *rs)
{
    for (int i = 0; i < rs->nlanes; i++)
        if (rs->lane[i].rx->req != NULL)
            return rs->lane[i].rx;
    for (int i = 0; i < rs->nlanes; i++)
        for (int k = 0; k < 2; k++)
            if (rs->lane[i].sx[k]->req != NULL)
                return rs->lane[i].sx[k];
    return NULL;
}

static cg_status_t cg__rs_run(cg__rs_t *rs)
{
    cg_status_t st;
    bool active = true;

    while (active || rs->next < rs->rounds) {
        bool progress = false;
        active = false;
        for (int i = 0; i < rs->nlanes; i++) {
            if ((st = cg__rs_lane(rs, &rs->lane[i], &progress)) != CG_OK)
                return st;
            active = active || rs->lane[i].active;
        }
        if (!progress && (st = cg__coll_idle(rs->op, cg__rs_waiting(rs))) !=
                             CG_OK)
            return st;
    }
    for (int i = 0; i < rs->nlanes; i++)
        for (int k = 0; k < 2; k++)
            if ((st = cg__xfer_wait(rs->op, rs->lane[i].sx[k])) != CG_OK)
                return st;
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

/* Piece elements for blocks of at most maxblk elements: depends on the
 * counts, the dtype and the smallest CG_CHUNK_MIN only (every rank alike). */
static size_t cg__rs_piece(const cg__rs_t *rs, const cg_comm_t *comm,
                           size_t maxblk)
{
    size_t bytes = maxblk * rs->el / CG__RS_PIPE;
    size_t cap = (size_t)cg_comm_chunk_min_all(comm);

    bytes = bytes < CG__RS_PIECE_MIN ? CG__RS_PIECE_MIN : bytes;
    bytes = bytes > CG__RS_PIECE_MAX ? CG__RS_PIECE_MAX : bytes;
    bytes = bytes < cap ? bytes : cap;
    bytes = bytes < maxblk * rs->el ? bytes : maxblk * rs->el;
    return bytes / rs->el > 0 ? bytes / rs->el : 1;
}

/* The lanes' buffers: receive slots (scratch CG_COLL_SCRATCH_RS) and
 * partials (CG_COLL_SCRATCH_RS + 1), together at most two governor chunks
 * (or one lane), each allocation shrinking to one piece on failure (then
 * fewer lanes, or a lane with one partial whose reductions wait for its
 * sends). Partials only where a send is not the input itself. */
static cg_status_t cg__rs_lanes(cg__rs_t *rs, cg_comm_t *comm)
{
    size_t pb = rs->piece * rs->el, chunk, want, max, nslots, nparts = 0;
    size_t per = rs->n > 2 ? CG__RS_PARTS : rs->prescale != 1.0 ? 1 : 0;
    size_t lanes = rs->rounds < CG__RS_LANES ? rs->rounds : CG__RS_LANES;
    uint8_t *slots, *parts = NULL;
    cg_status_t st;
    void *p;

    chunk = (size_t)cg_governor_chunk_size(cg_comm_governor(comm));
    if (lanes > 2 * chunk / ((1 + per) * pb))
        lanes = 2 * chunk / ((1 + per) * pb) > 0 ? 2 * chunk / ((1 + per) * pb)
                                                 : 1;
    want = lanes * pb;
    max = 2 * chunk / (1 + per) > want ? 2 * chunk / (1 + per) : want;
    st = cg_comm_scratch(comm, CG_COLL_SCRATCH_RS, want, pb, max, rs->el, &p,
                         &nslots);
    if (st != CG_OK)
        return st;
    slots = p;
    nslots /= pb;
    if (per > 0) {
        want = lanes * per * pb;
        max = 2 * chunk * per / (1 + per) > want ? 2 * chunk * per / (1 + per)
                                                 : want;
        st = cg_comm_scratch(comm, CG_COLL_SCRATCH_RS + 1, want, pb, max,
                             rs->el, &p, &nparts);
        if (st != CG_OK)
            return st;
        parts = p;
        nparts /= pb;
        lanes = nparts < lanes ? nparts : lanes;
    }
    lanes = nslots < lanes ? nslots : lanes;
    rs->nlanes = (int)lanes;
    for (size_t i = 0, k = 0; i < lanes; i++) {
        cg__rs_lane_t *ln = &rs->lane[i];
        /* Each lane one partial, then a second one while there are more. */
        size_t mine = per == 0 ? 0 : 1 + (per > 1 && nparts - lanes > i);
        memset(ln, 0, sizeof(*ln));
        ln->slot = slots + i * pb;
        for (size_t m = 0; m < mine; m++)
            ln->part[m] = parts + k++ * pb;
        ln->rx = &rs->op->x[3 * i];
        ln->sx[0] = &rs->op->x[3 * i + 1];
        ln->sx[1] = &rs->op->x[3 * i + 2];
    }
    return CG_OK;
}

cg_status_t cg_reduce_scatterv(cg_comm_t *comm, const void *sendbuf,
                               void *recvbuf, const size_t *counts,
                               cg_dtype_t dt, cg_redop_t op, double prescale,
                               double postscale)
{
    cg__coll_op_t cop;
    cg__rs_t rs;
    size_t total = 0, maxblk = 0, *displ, dlen;
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
    rs.dt = dt;
    rs.redop = op;
    rs.prescale = prescale;
    rs.n = cg_comm_size(comm);
    rs.r = cg_comm_rank(comm);
    for (int b = 0; b < rs.n; b++) {
        displ[b] = b == 0 ? 0 : displ[b - 1] + counts[b - 1];
        maxblk = counts[b] > maxblk ? counts[b] : maxblk;
    }
    rs.piece = cg__rs_piece(&rs, comm, maxblk);
    rs.rounds = (maxblk + rs.piece - 1) / rs.piece;
    if (rs.n == 1) {
        if (counts[0] > 0)
            cg__own(&rs, 0, 0, counts[0], rs.recv, NULL); /* whole block */
    } else {
        st = cg__rs_lanes(&rs, comm);
        if (st == CG_OK)
            st = cg__rs_run(&rs);
    }
    cg_governor_free(cg_comm_governor(comm), CG_MEM_CAT_CONTROL, displ, dlen);
    if (st != CG_OK)
        return cg__coll_abort(&cop, st);
    return cg_reduce_post(recvbuf, counts[rs.r], dt, op, rs.n, postscale);
}
