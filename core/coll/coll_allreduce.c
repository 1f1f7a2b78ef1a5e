/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cg_allreduce: argument checks, prescale, the choice between ring and
 * recursive doubling (by size, or CG_ALGO), and recursive doubling itself
 * with the standard fold-in of the ranks beyond the largest power of two.
 * Recursive doubling works on pieces of CG_COLL_SMALL_BYTES (a constant,
 * so the same on every rank) and always reduces the lower rank's data
 * first, so partners end with the same bits; its partner buffer is the
 * communicator's scratch. Staged allreduces (cg_allreduce_staged) go to
 * the ring piece by piece, to the others whole (the staging helpers are
 * in coll_stage.c). Layer: core/coll; calls coll_xfer, coll_stage,
 * coll_ring, coll_pair, coll_shm, reduce, comm.
 */
#include <math.h>
#include <string.h>

#include "core/base/error.h"
#include "core/coll/coll.h"
#include "core/coll/coll_impl.h"
#include "core/reduce/reduce.h"

/* Whether an AllReduce of this many bytes goes through shared memory
 * (CG_ALGO auto or shm, every rank on this host): always up to
 * CG_COLL_SMALL_BYTES, above unless measured slower (or not yet measured,
 * see cg__shm_calibrate). */
static bool cg__use_shm(const cg_comm_t *comm, size_t bytes)
{
    return cg_comm_shm(comm) != NULL &&
           (bytes <= CG_COLL_SMALL_BYTES || cg_comm_shm_large(comm) != 0);
}

cg_coll_algo_t cg_allreduce_algo(const cg_comm_t *comm, size_t bytes)
{
    if (cg__use_shm(comm, bytes))
        return CG_COLL_ALGO_SHM;
    switch (cg_comm_algo(comm)) {
    case CG_COLL_ALGO_RING:
    case CG_COLL_ALGO_RD:
        return cg_comm_algo(comm);
    case CG_COLL_ALGO_AUTO:
    case CG_COLL_ALGO_SHM:
        break;
    }
    if (cg_comm_size(comm) == 2)
        return bytes <= CG_COLL_PAIR_BYTES ? CG_COLL_ALGO_RD
                                           : CG_COLL_ALGO_RING;
    return bytes <= CG_COLL_SMALL_BYTES ? CG_COLL_ALGO_RD : CG_COLL_ALGO_RING;
}

/* Real rank of a rank in the power-of-two group (rem ranks folded). */
static int cg__rd_real(int nr, int rem)
{
    return nr < rem ? nr * 2 + 1 : nr + rem;
}

/* Recursive doubling on one piece: *cur holds this rank's partial result
 * (first the caller's send buffer, then piece itself); each exchange
 * leaves lower op higher in piece, so partners end with the same bits.
 * Out of place, the first step reduces straight from the send buffer
 * into piece (no copy first). */
static void cg__rd_combine(uint8_t *piece, const uint8_t **cur, void *tmp,
                           size_t len, size_t el, cg_dtype_t dt,
                           cg_redop_t op, bool peer_lower)
{
    if (*cur != piece)
        cg_reduce3(piece, peer_lower ? tmp : *cur, peer_lower ? *cur : tmp,
                   len / el, dt, op);
    else if (peer_lower) {
        cg_reduce(tmp, piece, len / el, dt, op);
        memcpy(piece, tmp, len);
    } else {
        cg_reduce(piece, tmp, len / el, dt, op);
    }
    *cur = piece;
}

static cg_status_t cg__rd_piece(cg__coll_op_t *op, const uint8_t *src,
                                uint8_t *piece, void *tmp, size_t len,
                                cg_dtype_t dt, cg_redop_t redop,
                                double postscale)
{
    int n = cg_comm_size(op->comm), r = cg_comm_rank(op->comm);
    int p = 1, rem, nr;
    size_t el = cg_dtype_size(dt);
    const uint8_t *cur = src;
    cg_status_t st = CG_OK;

    while (p * 2 <= n)
        p *= 2;
    rem = n - p;
    nr = r < 2 * rem ? (r % 2 ? r / 2 : -1) : r - rem;
    if (r < 2 * rem && nr < 0)
        st = cg__coll_sendrecv(op, r + 1, cur, len, -1, NULL, 0,
                               CG_COMM_TAG_RD, NULL);
    else if (r < 2 * rem)
        st = cg__coll_sendrecv(op, -1, NULL, 0, r - 1, tmp, len,
                               CG_COMM_TAG_RD, NULL);
    if (st != CG_OK)
        return st;
    if (r < 2 * rem && nr >= 0)
        cg__rd_combine(piece, &cur, tmp, len, el, dt, redop, true);
    for (int mask = 1; nr >= 0 && mask < p; mask <<= 1) {
        int peer = cg__rd_real(nr ^ mask, rem);
        st = cg__coll_sendrecv(op, peer, cur, len, peer, tmp, len,
                               CG_COMM_TAG_RD, NULL);
        if (st != CG_OK)
            return st;
        cg__rd_combine(piece, &cur, tmp, len, el, dt, redop, peer < r);
    }
    if (nr >= 0) {
        st = cg_reduce_post(piece, len / el, dt, redop, n, postscale);
        if (st != CG_OK)
            return st;
    }
    if (r < 2 * rem)
        st = nr >= 0 ? cg__coll_sendrecv(op, r - 1, piece, len, -1, NULL, 0,
                                         CG_COMM_TAG_RD, NULL)
                     : cg__coll_sendrecv(op, -1, NULL, 0, r + 1, piece, len,
                                         CG_COMM_TAG_RD, NULL);
    return st;
}

cg_status_t cg__rd_allreduce(cg__coll_op_t *op, const void *sendbuf,
                             void *recvbuf, size_t count, cg_dtype_t dt,
                             cg_redop_t redop, double postscale)
{
    size_t el = cg_dtype_size(dt), bytes = count * el;
    size_t piece = CG_COLL_SMALL_BYTES / el * el, want, got;
    cg_status_t st;
    void *tmp;

    want = bytes < piece ? bytes : piece;
    st = cg_comm_scratch(op->comm, CG_COLL_SCRATCH_RD, want, want, piece, el,
                         &tmp, &got);
    if (st != CG_OK)
        return cg__coll_abort(op, st);
    for (size_t off = 0; off < bytes && st == CG_OK; off += want) {
        size_t len = bytes - off < want ? bytes - off : want;
        st = cg__rd_piece(op, (const uint8_t *)sendbuf + off,
                          (uint8_t *)recvbuf + off, tmp, len, dt, redop,
                          postscale);
    }
    if (st != CG_OK)
        st = cg__coll_abort(op, st);
    return st;
}

static cg_status_t cg__allreduce_check(const cg_comm_t *comm,
                                       const void *sendbuf,
                                       const void *recvbuf, size_t count,
                                       cg_dtype_t dt, cg_redop_t op,
                                       double prescale, double postscale)
{
    cg_status_t st;

    if (comm == NULL)
        return cg_error_set(CG_ERR_INVALID_PARAM, "allreduce: comm is NULL");
    st = cg_reduce_check(dt, op);
    if (st != CG_OK)
        return st;
    if (count > 0 && (sendbuf == NULL || recvbuf == NULL))
        return cg_error_set(CG_ERR_INVALID_PARAM, "allreduce: %s is NULL "
                            "with count %zu", sendbuf == NULL ? "sendbuf"
                            : "recvbuf", count);
    if (count > SIZE_MAX / cg_dtype_size(dt))
        return cg_error_set(CG_ERR_INVALID_PARAM, "allreduce: count %zu of "
                            "%s overflows size_t", count, cg_dtype_name(dt));
    if (!isfinite(prescale) || !isfinite(postscale))
        return cg_error_set(CG_ERR_INVALID_PARAM, "allreduce: prescale %g "
                            "and postscale %g must be finite", prescale,
                            postscale);
    return CG_OK;
}

static cg_status_t cg__allreduce_run(cg_comm_t *comm, const void *sendbuf,
                                     void *recvbuf, size_t count,
                                     cg_dtype_t dt, cg_redop_t op,
                                     double prescale, double postscale,
                                     const cg__coll_staging_t *sg);

/* Shared memory is not faster everywhere for large messages: on a 16-core
 * Intel host it ran 1.3-2.9x the ring's speed at 64 KiB-64 MiB, on a
 * 2-core AMD virtual machine 0.25-1x, varying from run to run. So the
 * first AllReduce above CG_COLL_SMALL_BYTES on a communicator with shared
 * memory (CG_ALGO=auto, CG_SHM_CALIBRATE=1) first times both on 1 MiB:
 * four back to back each, after one to warm up, their mean (how they run
 * in a job: a best single time hid a slow steady state); the slowest
 * rank's means decide (an allreduce MAX, so every rank decides alike).
 * Both give the same bits, so the choice changes speed only. */
#define CG__CAL_BYTES (1u << 20)
#define CG__CAL_TRIES 4

static cg_status_t cg__shm_calibrate(cg_comm_t *comm)
{
    size_t count = CG__CAL_BYTES / sizeof(float);
    cg_governor_t *gov = cg_comm_governor(comm);
    uint64_t best[2] = {0, 0}; /* mean ns: [0] transport, [1] shm */
    cg_status_t st;
    float *buf;

    st = cg_governor_alloc(gov, CG_MEM_CAT_CONTROL, CG__CAL_BYTES,
                           (void **)&buf);
    if (st != CG_OK)
        return st;
    for (size_t i = 0; i < count; i++)
        buf[i] = (float)(i % 100) * 0.37f;
    /* The transport first: measured right after shared memory it ran up
     * to 2x slower on a 2-core host. */
    for (int shm = 0; shm <= 1 && st == CG_OK; shm++) {
        uint64_t t0 = 0;
        cg_comm_set_shm_large(comm, shm);
        for (int i = 0; i <= CG__CAL_TRIES && st == CG_OK; i++) {
            if (i == 1)
                t0 = cg_now_ns(); /* the first one warms up */
            st = cg__allreduce_run(comm, buf, buf, count, CG_DTYPE_F32,
                                   CG_OP_SUM, 1.0, 1.0, NULL);
        }
        best[shm] = (cg_now_ns() - t0) / CG__CAL_TRIES;
    }
    cg_governor_free(gov, CG_MEM_CAT_CONTROL, buf, CG__CAL_BYTES);
    cg_comm_set_shm_large(comm, 1); /* the agreement itself: 16 bytes */
    if (st == CG_OK)
        st = cg__allreduce_run(comm, best, best, 2, CG_DTYPE_U64, CG_OP_MAX,
                               1.0, 1.0, NULL);
    if (st != CG_OK) {
        cg_comm_set_shm_large(comm, -1);
        return st;
    }
    cg_comm_set_shm_large(comm, best[1] <= best[0]);
    cg_info(cg_comm_log(comm), "allreduce above %u bytes through %s (1 MiB: "
            "shared memory %.0f us, transport %.0f us; CG_SHM_CALIBRATE)",
            CG_COLL_SMALL_BYTES, best[1] <= best[0] ? "shared memory"
                                                   : "the transport",
            best[1] / 1e3, best[0] / 1e3);
    return CG_OK;
}

/* The algorithm on the checked arguments; sg: staged in place (only the
 * ring stages piece by piece; the others take the whole buffer first). */
static cg_status_t cg__allreduce_run(cg_comm_t *comm, const void *sendbuf,
                                     void *recvbuf, size_t count,
                                     cg_dtype_t dt, cg_redop_t op,
                                     double prescale, double postscale,
                                     const cg__coll_staging_t *sg)
{
    size_t bytes = count * cg_dtype_size(dt);
    cg__coll_op_t op_on_stack, *cop = &op_on_stack;
    bool ring;
    cg_status_t st;

    if (cg_comm_shm(comm) != NULL && bytes > CG_COLL_SMALL_BYTES &&
        cg_comm_shm_large(comm) < 0) {
        st = cg__shm_calibrate(comm);
        if (st != CG_OK)
            return st;
    }
    st = cg__coll_op_begin(cop, comm, "allreduce");
    if (st != CG_OK || count == 0)
        return st;
    /* Unstaged: every algorithm starts from the prescaled input in recv
     * (staged, the ranges are prescaled as they are filled). */
    if (sg == NULL && prescale != 1.0) {
        if (sendbuf == recvbuf)
            cg_scale(recvbuf, count, dt, prescale);
        else
            cg_scale_copy(recvbuf, sendbuf, count, dt, prescale);
        sendbuf = recvbuf;
    }
    if (cg__use_shm(comm, bytes)) {
        st = cg__shm_allreduce(cop, sendbuf, recvbuf, count, dt, op,
                               postscale, sg);
        return st == CG_OK ? st : cg__coll_abort(cop, st);
    }
    ring = cg_comm_size(comm) > 1 &&
           cg_allreduce_algo(comm, bytes) == CG_COLL_ALGO_RING;
    /* Caller's segments: the ring whatever the size (two ranks need not:
     * every algorithm adds two values the same way). */
    if (sg != NULL && sg->stage->segs != NULL && cg_comm_size(comm) > 2)
        ring = true;
    if (sg != NULL && !ring)
        cg__coll_fill(sg, recvbuf, bytes); /* prescaled there */
    if (sg != NULL && ring) {
        st = cg__ring_allreduce(cop, sendbuf, recvbuf, count, dt, op,
                                postscale, sg);
        return st;
    }
    if (cg_comm_size(comm) == 1) {
        if (sendbuf != recvbuf)
            memcpy(recvbuf, sendbuf, bytes);
        st = cg_reduce_post(recvbuf, count, dt, op, 1, postscale);
    } else if (cg_allreduce_algo(comm, bytes) == CG_COLL_ALGO_RD) {
        st = cg_comm_size(comm) == 2
                 ? cg__pair_allreduce(cop, sendbuf, recvbuf, count, dt, op,
                                      postscale)
                 : cg__rd_allreduce(cop, sendbuf, recvbuf, count, dt, op,
                                    postscale);
    } else {
        st = cg__ring_allreduce(cop, sendbuf, recvbuf, count, dt, op,
                                postscale, NULL);
    }
    if (st == CG_OK)
        cg__coll_drain(sg, recvbuf, bytes);
    return st;
}

cg_status_t cg_allreduce(cg_comm_t *comm, const void *sendbuf, void *recvbuf,
                         size_t count, cg_dtype_t dt, cg_redop_t op,
                         double prescale, double postscale)
{
    cg_status_t st = cg__allreduce_check(comm, sendbuf, recvbuf, count, dt,
                                         op, prescale, postscale);

    if (st != CG_OK)
        return st;
    return cg__allreduce_run(comm, sendbuf, recvbuf, count, dt, op, prescale,
                             postscale, NULL);
}

cg_status_t cg_allreduce_staged(cg_comm_t *comm, void *buf, size_t count,
                                cg_dtype_t dt, cg_redop_t op,
                                double prescale, double postscale,
                                const cg_coll_stage_t *stage)
{
    cg__coll_staging_t sg = {stage, buf, dt, prescale};
    cg_status_t st = cg__allreduce_check(comm, buf, buf, count, dt, op,
                                         prescale, postscale);

    if (st != CG_OK)
        return st;
    if (stage == NULL || stage->fill == NULL || stage->drain == NULL)
        return cg_error_set(CG_ERR_INVALID_PARAM, "allreduce: staged without "
                            "fill and drain functions");
    if (stage->segs != NULL) {
        size_t sum = 0;
        for (int r = 0; r < cg_comm_size(comm); r++)
            sum += stage->segs[r];
        if (sum != count)
            return cg_error_set(CG_ERR_INVALID_PARAM, "allreduce: staged "
                                "segments sum to %zu elements, count is %zu",
                                sum, count);
    }
    return cg__allreduce_run(comm, buf, buf, count, dt, op, prescale,
                             postscale, &sg);
}
