/* SPDX-License-Identifier: Apache-2.0 */
/*
 * AllReduce through the communicator's shared memory (core/coll/shm.h), for
 * ranks on one host. The buffer is cut into the ring's segments (or the
 * caller's, cg_coll_stage_t.segs), each segment into rounds of a slot's
 * n-th; in each round every rank copies its inputs for the segments it
 * does not own into its slot, the owner of segment g (rank g - 1, as in
 * the ring) reduces g straight from its peers' slots in the ring's order
 * (x_g, then x_g+1 op that, ..., its own input last, read from its
 * memory), writes the result into its slot and its output, and every rank
 * copies the other owners' results out. So each element has the bits of
 * the ring, the data crosses between processes once, with no messages,
 * and the staged form fills straight from the caller's tensors into the
 * slot and drains straight back. Two slots per rank let one round's
 * copies overlap the next round's. Layer: core/coll; calls shm, reduce, comm.
 */
#include <string.h>

#include "core/base/error.h"
#include "core/coll/coll_impl.h"
#include "core/reduce/reduce.h"
#include "core/coll/shm.h"

/* Sub-pieces of the owner's reduction (see cg__reduce). */
#define CG__SHM_SUB (16u << 10)

typedef struct cg__shm_ar {
    cg__coll_op_t *op;
    cg_shm_t *shm;
    const uint8_t *send;
    uint8_t *recv;
    const cg__coll_staging_t *sg;
    const size_t *segs;
    size_t count, el, q;  /* q: bytes of a segment's piece per round */
    cg_dtype_t dt;
    cg_redop_t redop;
    int n, r;
    double postscale;
    uint8_t *tmp;         /* more than two ranks: the chain's other half */
    size_t tmp_cap;
} cg__shm_ar_t;

/* Round t's piece of segment s: byte offset in the buffer and length. */
static size_t cg__piece(const cg__shm_ar_t *a, int s, uint64_t t,
                        size_t *off_p)
{
    size_t off, cnt, at = (size_t)t * (a->q / a->el);

    cg_ring_seg(a->segs, a->count, a->n, s, &off, &cnt);
    *off_p = (off + at) * a->el;
    if (at >= cnt)
        return 0;
    cnt -= at;
    return (cnt < a->q / a->el ? cnt : a->q / a->el) * a->el;
}

/* dst = this rank's input bytes [off, off + len) (prescaled). */
static void cg__in(const cg__shm_ar_t *a, size_t off, size_t len, void *dst)
{
    if (a->sg != NULL)
        cg__coll_fill_to(a->sg, off, len, dst);
    else
        memcpy(dst, a->send + off, len);
}

/* dst = this rank's input [off, off + len) op piece (the ring's last
 * step: local op what came from the left). */
static void cg__own(const cg__shm_ar_t *a, size_t off, size_t len,
                    const void *piece, void *dst)
{
    if (cg__coll_reduces_in(a->sg)) {
        cg__coll_reduce_in_to(a->sg, off, len, piece, dst);
    } else if (a->sg != NULL) {
        cg__coll_fill_to(a->sg, off, len, dst);
        cg_reduce(dst, piece, len / a->el, a->dt, a->redop);
    } else {
        cg_reduce3(dst, a->send + off, piece, len / a->el, a->dt, a->redop);
    }
}

/* The result bytes [off, off + len), now in src, to this rank's output. */
static void cg__out(const cg__shm_ar_t *a, size_t off, size_t len,
                    const void *src)
{
    if (a->sg != NULL)
        cg__coll_drain_from(a->sg, off, len, src);
    else
        memcpy(a->recv + off, src, len);
}

/* Segment g's piece at [off, off + len) in the ring's order, into res (in
 * this rank's slot), then averaged / postscaled and copied out, in
 * sub-pieces that stay in the core's first-level caches between the three
 * steps. With more than two ranks, acc_0 = x_g in rank g's slot and acc_k
 * = x_(g+k) op acc_(k-1), alternating between res and tmp so that
 * acc_(n-2) is in tmp and the last step (own input op acc) writes res. */
static cg_status_t cg__reduce(cg__shm_ar_t *a, int b, int g, size_t off,
                              size_t len, uint8_t *res)
{
    size_t pos = (size_t)g * a->q, sub = a->n > 2 ? a->tmp_cap : CG__SHM_SUB;
    cg_status_t st = CG_OK;

    for (size_t at = 0; at < len && st == CG_OK; at += sub) {
        size_t l = len - at < sub ? len - at : sub;
        const uint8_t *acc = cg_shm_slot(a->shm, g, b) + pos + at;
        for (int k = 1; k <= a->n - 2; k++) {
            int q = (g + k) % a->n;
            uint8_t *out = (a->n - 2 - k) % 2 == 0 ? a->tmp : res + at;
            cg_reduce3(out, cg_shm_slot(a->shm, q, b) + pos + at, acc,
                       l / a->el, a->dt, a->redop);
            acc = out;
        }
        cg__own(a, off + at, l, acc, res + at);
        st = cg_reduce_post(res + at, l / a->el, a->dt, a->redop, a->n,
                            a->postscale);
        if (st == CG_OK)
            cg__out(a, off + at, l, res + at);
    }
    return st;
}

/* The first round: every rank runs the same operation (rank q's
 * description is readable once its inputs are posted). */
static cg_status_t cg__check(cg__shm_ar_t *a, uint64_t round, int b)
{
    cg_shm_desc_t d, mine;
    cg_status_t st;

    cg_shm_desc_get(a->shm, a->r, b, &mine);
    for (int q = 0; q < a->n; q++) {
        if (q == a->r)
            continue;
        st = cg_shm_wait(a->shm, q, CG_SHM_IN, round + 1, a->op->name);
        if (st != CG_OK)
            return st;
        cg_shm_desc_get(a->shm, q, b, &d);
        if (d.round != mine.round || d.count != mine.count ||
            d.dtype != mine.dtype || d.op != mine.op)
            return cg_error_set(CG_ERR_MISMATCH, "%s: rank %d has %llu "
                                "elements of %s (op %u), rank %d has %llu "
                                "of %s (op %u); every rank must call with "
                                "the same count, dtype and op",
                                a->op->name, a->r,
                                (unsigned long long)mine.count,
                                cg_dtype_name((cg_dtype_t)mine.dtype),
                                mine.op, q, (unsigned long long)d.count,
                                cg_dtype_name((cg_dtype_t)d.dtype), d.op);
    }
    return CG_OK;
}

/* One round on slot b: inputs in, own segment reduced, results out. */
static cg_status_t cg__round(cg__shm_ar_t *a, uint64_t t)
{
    cg_shm_t *shm = a->shm;
    uint64_t round = cg_shm_round(shm);
    int b = (int)(round & 1), g = (a->r + 1) % a->n;
    uint8_t *mine = cg_shm_slot(shm, a->r, b);
    const char *name = a->op->name;
    size_t off, len;
    cg_status_t st;

    /* The slot was last used two rounds ago: every reader done with it. */
    for (int q = 0; round >= 2 && q < a->n; q++)
        if (q != a->r &&
            (st = cg_shm_wait(shm, q, CG_SHM_FIN, round - 1, name)) != CG_OK)
            return st;
    for (int s = 0; s < a->n; s++)
        if (s != g && (len = cg__piece(a, s, t, &off)) > 0)
            cg__in(a, off, len, mine + (size_t)s * a->q);
    if (t == 0) {
        cg_shm_desc_t d = {round, a->count, (uint32_t)a->dt,
                           (uint32_t)a->redop};
        cg_shm_desc_set(shm, b, &d);
    }
    cg_shm_post(shm, CG_SHM_IN, round + 1);
    if (t == 0 && (st = cg__check(a, round, b)) != CG_OK)
        return st;
    if ((len = cg__piece(a, g, t, &off)) > 0) {
        for (int q = 0; q < a->n; q++)
            if (q != a->r && (st = cg_shm_wait(shm, q, CG_SHM_IN, round + 1,
                                               name)) != CG_OK)
                return st;
        st = cg__reduce(a, b, g, off, len, mine + (size_t)g * a->q);
        if (st != CG_OK)
            return st;
    }
    cg_shm_post(shm, CG_SHM_RES, round + 1);
    for (int q = 0; q < a->n; q++) {
        int h = (q + 1) % a->n;
        if (q == a->r || (len = cg__piece(a, h, t, &off)) == 0)
            continue;
        st = cg_shm_wait(shm, q, CG_SHM_RES, round + 1, name);
        if (st != CG_OK)
            return st;
        cg__out(a, off, len, cg_shm_slot(shm, q, b) + (size_t)h * a->q);
    }
    cg_shm_post(shm, CG_SHM_FIN, round + 1);
    cg_shm_next_round(shm);
    return CG_OK;
}

cg_status_t cg__shm_allreduce(cg__coll_op_t *op, const void *sendbuf,
                              void *recvbuf, size_t count, cg_dtype_t dt,
                              cg_redop_t op_kind, double postscale,
                              const cg__coll_staging_t *sg)
{
    cg_comm_t *comm = op->comm;
    cg__shm_ar_t a = {
        .op = op, .shm = cg_comm_shm(comm), .send = sendbuf,
        .recv = recvbuf, .sg = sg,
        .segs = sg != NULL ? sg->stage->segs : NULL, .count = count,
        .el = cg_dtype_size(dt), .dt = dt, .redop = op_kind,
        .n = cg_comm_size(comm), .r = cg_comm_rank(comm),
        .postscale = postscale};
    size_t most = 0, off, cnt;
    uint64_t rounds;
    cg_status_t st = CG_OK;
    void *tmp;

    /* Pieces of whole 64-byte lines, so every dtype divides them. */
    a.q = cg_shm_slot_bytes(a.shm) / (size_t)a.n / 64 * 64;
    for (int s = 0; s < a.n; s++) {
        cg_ring_seg(a.segs, count, a.n, s, &off, &cnt);
        most = cnt > most ? cnt : most;
    }
    rounds = (most + a.q / a.el - 1) / (a.q / a.el);
    if (a.n > 2) {
        size_t want = a.q < CG__SHM_SUB ? a.q : CG__SHM_SUB;
        st = cg_comm_scratch(comm, CG_COLL_SCRATCH_SHM, want, 4096, want, 64,
                             &tmp, &a.tmp_cap);
        a.tmp = tmp;
    }
    for (uint64_t t = 0; t < rounds && st == CG_OK; t++)
        st = cg__round(&a, t);
    return st;
}
