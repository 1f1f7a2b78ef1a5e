/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Transfer helpers of the collectives: post, test and wait on transport
 * requests with deterministic tags, a no-progress bound of CG_TIMEOUT, and
 * the abort path that breaks the group and reaps what is outstanding.
 * Every error names the operation, the peer rank and the cause.
 * Layer: core/coll; calls transport/transport.h and core/comm.
 */
#include "core/coll/coll_impl.h"

#include <sched.h>
#include <stdio.h>
#include <string.h>

#include "core/base/error.h"

/* Busy polls before the first sched_yield(): oversubscribed ranks must
 * let their peers run, dedicated ones should not sleep. */
#define CG__COLL_SPINS 64

cg_status_t cg__coll_op_begin(cg__coll_op_t *op, cg_comm_t *comm,
                              const char *name)
{
    memset(op, 0, sizeof(*op));
    op->comm = comm;
    op->name = name;
    op->last_ns = cg_now_ns();
    op->fail_peer = -1;
    return cg_comm_begin(comm, &op->tag_base);
}

static cg_status_t cg__xfer_error(cg__coll_op_t *op, const cg__xfer_t *x,
                                  cg_status_t st)
{
    char cause[256];

    snprintf(cause, sizeof(cause), "%s", cg_last_error()[0]
                                             ? cg_last_error()
                                             : cg_status_string(st));
    if (op->fail_peer < 0)
        op->fail_peer = x->peer;
    return cg_error_set(st, "%s: %s of %zu bytes %s rank %d failed on rank "
                        "%d: %s", op->name, x->send ? "send" : "receive",
                        x->len, x->send ? "to" : "from", x->peer,
                        cg_comm_rank(op->comm), cause);
}

cg_status_t cg__xfer_post(cg__coll_op_t *op, cg__xfer_t *x, bool send, int peer,
                          void *buf, size_t len, cg_comm_tag_kind_t kind)
{
    cg_tp_conn_t *conn = cg_comm_conn(op->comm, peer);
    uint32_t tag = op->tag_base | (uint32_t)kind;
    cg_status_t st;

    x->peer = peer;
    x->send = send;
    x->len = len;
    x->got = 0;
    x->req = NULL;
    if (conn == NULL)
        return cg__xfer_error(op, x, CG_ERR_PEER_RESET);
    st = send ? cg_tp_isend(conn, buf, len, tag, &x->req)
              : cg_tp_irecv(conn, buf, len, tag, &x->req);
    if (st != CG_OK) {
        x->req = NULL;
        return cg__xfer_error(op, x, st);
    }
    return CG_OK;
}

cg_status_t cg__xfer_test(cg__coll_op_t *op, cg__xfer_t *x)
{
    cg_status_t st;

    if (x->req == NULL)
        return CG_OK;
    st = cg_tp_test(x->req, &x->got);
    if (st == CG_INPROGRESS)
        return st;
    x->req = NULL;
    if (st != CG_OK)
        return cg__xfer_error(op, x, st);
    op->last_ns = cg_now_ns();
    op->idle_spins = 0;
    return CG_OK;
}

cg_status_t cg__coll_idle(cg__coll_op_t *op, const cg__xfer_t *x)
{
    uint64_t timeout = cg_comm_timeout_ns(op->comm);
    cg_status_t st = cg_tp_progress(cg_comm_transport(op->comm));

    if (st != CG_OK && st != CG_INPROGRESS && x != NULL)
        return cg__xfer_error(op, x, st);
    if (++op->idle_spins < CG__COLL_SPINS)
        return CG_OK;
    if (x != NULL && cg_now_ns() - op->last_ns > timeout) {
        cg_error_set(CG_ERR_TIMEOUT, "no progress for %.1fs (CG_TIMEOUT)",
                     timeout / 1e9);
        return cg__xfer_error(op, x, CG_ERR_TIMEOUT);
    }
    sched_yield();
    return CG_OK;
}

cg_status_t cg__xfer_wait(cg__coll_op_t *op, cg__xfer_t *x)
{
    cg_status_t st;

    while ((st = cg__xfer_test(op, x)) == CG_INPROGRESS) {
        st = cg__coll_idle(op, x);
        if (st != CG_OK)
            return st;
    }
    return st;
}

cg_status_t cg__coll_sendrecv(cg__coll_op_t *op, int speer, const void *sbuf,
                              size_t slen, int rpeer, void *rbuf, size_t rlen,
                              cg_comm_tag_kind_t kind, size_t *got_p)
{
    cg__xfer_t *r = &op->x[0], *s = &op->x[1];
    cg_status_t st;

    if (rpeer >= 0) {
        st = cg__xfer_post(op, r, false, rpeer, rbuf, rlen, kind);
        if (st != CG_OK)
            return st;
    }
    if (speer >= 0) {
        st = cg__xfer_post(op, s, true, speer, (void *)sbuf, slen, kind);
        if (st != CG_OK)
            return st;
    }
    st = cg__xfer_wait(op, r);
    if (st == CG_OK)
        st = cg__xfer_wait(op, s);
    if (st == CG_OK && got_p != NULL)
        *got_p = r->got;
    return st;
}

cg_status_t cg__coll_abort(cg__coll_op_t *op, cg_status_t st)
{
    int culprit = op->fail_peer, named;
    cg_status_t why = st, said;
    char msg[640];
    int len;

    len = snprintf(msg, sizeof(msg), "%s", cg_last_error());
    /* A peer that gave up before us names the rank that really failed. */
    if (culprit >= 0 &&
        cg_comm_heard_goodbye(op->comm, culprit, &named, &said) &&
        len >= 0 && (size_t)len < sizeof(msg)) {
        if (named == culprit)
            snprintf(msg + len, sizeof(msg) - (size_t)len,
                     " (rank %d gave up on the group: it failed itself)",
                     culprit);
        else
            snprintf(msg + len, sizeof(msg) - (size_t)len,
                     " (rank %d gave up on the group after rank %d failed: "
                     "%s)", culprit, named, cg_status_name(said));
        culprit = named;
        why = said;
    }
    if (culprit < 0)
        culprit = cg_comm_rank(op->comm);
    cg_error(cg_comm_log(op->comm), "%s", msg);
    cg_comm_fail_blame(op->comm, culprit, why);
    for (int i = 0; i < CG_COLL_XFER_MAX; i++) {
        cg__xfer_t *x = &op->x[i];
        if (x->req != NULL)
            while (cg_tp_test(x->req, NULL) == CG_INPROGRESS)
                cg_tp_progress(cg_comm_transport(op->comm));
        x->req = NULL;
    }
    return cg_error_set(st, "%s", msg);
}
