/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Communicator setup and teardown: listen, all-gather the listen handles
 * through the bootstrap, connect to every peer (lower rank dials), check
 * that the ranks agree on the algorithm knob, and keep the group's failure
 * state (with the goodbye that tells the peers which rank broke it), and
 * the scratch buffers kept between collectives. Layer: core/coll;
 * calls transport/ (transport.h, bootstrap.h) and the governor (CONTROL
 * memory; RING for scratch).
 */
#include "core/coll/comm.h"

#include <sched.h>
#include <stdio.h>
#include <string.h>

#include "core/base/clock.h"
#include "core/base/error.h"
#include "core/coll/shm.h"

struct cg_comm {
    int rank, size;
    cg_transport_t *tp;
    cg_governor_t *gov;
    const cg_log_t *log;
    cg_coll_algo_t algo;
    uint64_t chunk_min;
    uint64_t chunk_min_all; /* the smallest CG_CHUNK_MIN of all ranks */
    uint64_t timeout_ns;
    uint32_t seq;
    bool broken;
    cg_tp_conn_t **conns; /* [size]; NULL for self and after a failure */
    cg_tp_req_t *bye_req; /* a goodbye receive still posted (see below) */
    uint8_t bye_buf[8];   /* ...and its buffer, which must outlive it */
    cg_shm_t *shm;        /* every rank on this host: shared memory */
    int shm_large;        /* see cg_comm_shm_large */
    struct {
        void *buf;
        size_t cap;
    } scratch[CG_COMM_SCRATCH]; /* kept between collectives */
};

/* What every rank must agree on, checked at create. */
typedef struct cg__comm_agree {
    uint32_t algo;
    uint32_t size;
    uint64_t chunk_min; /* not checked: the smallest is kept */
} cg__comm_agree_t;

static void cg__comm_close_all(cg_comm_t *comm)
{
    for (int i = 0; i < comm->size; i++) {
        if (comm->conns[i] != NULL)
            cg_tp_conn_close(comm->conns[i]);
        comm->conns[i] = NULL;
    }
}

static cg_status_t cg__comm_agree(cg_comm_t *comm, cg_bootstrap_t *bs)
{
    size_t len = (size_t)comm->size * sizeof(cg__comm_agree_t);
    cg__comm_agree_t mine = {(uint32_t)comm->algo, (uint32_t)comm->size,
                             comm->chunk_min};
    cg__comm_agree_t *all;
    cg_status_t st;

    st = cg_governor_alloc(comm->gov, CG_MEM_CAT_CONTROL, len, (void **)&all);
    if (st != CG_OK)
        return st;
    st = cg_bootstrap_allgather(bs, &mine, all, sizeof(mine));
    comm->chunk_min_all = comm->chunk_min;
    for (int r = 0; st == CG_OK && r < comm->size; r++) {
        if (all[r].chunk_min < comm->chunk_min_all)
            comm->chunk_min_all = all[r].chunk_min;
        if (all[r].algo != mine.algo)
            st = cg_error_set(CG_ERR_MISMATCH,
                              "CG_ALGO differs across ranks: rank %d uses "
                              "value %u, rank %d uses %u; set the same "
                              "CG_ALGO on every rank",
                              r, all[r].algo, comm->rank, mine.algo);
    }
    cg_governor_free(comm->gov, CG_MEM_CAT_CONTROL, all, len);
    return st;
}

/* Accepts one connection if one is ready; it must come from a lower rank
 * not yet connected. */
static cg_status_t cg__comm_accept(cg_comm_t *comm, cg_tp_listener_t *l,
                                   int *accepted)
{
    cg_tp_conn_t *conn;
    cg_status_t st = cg_tp_accept(l, &conn);
    int peer;

    if (st != CG_OK)
        return st;
    peer = cg_tp_conn_peer_rank(conn);
    if (peer < 0 || peer >= comm->rank || comm->conns[peer] != NULL) {
        cg_tp_conn_close(conn);
        return cg_error_set(CG_ERR_HANDSHAKE,
                            "comm: rank %d accepted a connection claiming "
                            "rank %d (expected a rank below %d, once)",
                            comm->rank, peer, comm->rank);
    }
    comm->conns[peer] = conn;
    (*accepted)++;
    return CG_OK;
}

/* Polls connects and accepts until every peer is connected. */
static cg_status_t cg__comm_connect_all(cg_comm_t *comm, cg_tp_listener_t *l,
                                        const cg_tp_handle_t *handles)
{
    uint64_t deadline = cg_now_ns() + comm->timeout_ns;
    int ready = 0, accepted = 0, want_ready = comm->size - 1 - comm->rank;
    cg_status_t st;

    for (int j = comm->rank + 1; j < comm->size; j++) {
        st = cg_tp_connect(comm->tp, &handles[j], &comm->conns[j]);
        if (st != CG_OK)
            return st;
    }
    while (ready < want_ready || accepted < comm->rank) {
        cg_tp_progress(comm->tp);
        ready = 0;
        for (int j = comm->rank + 1; j < comm->size; j++) {
            st = cg_tp_conn_ready(comm->conns[j]);
            if (st == CG_OK)
                ready++;
            else if (st != CG_INPROGRESS)
                return cg_error_set(st, "comm: connecting rank %d to rank "
                                    "%d failed: %s", comm->rank, j,
                                    cg_last_error());
        }
        if (accepted < comm->rank) {
            st = cg__comm_accept(comm, l, &accepted);
            if (st != CG_OK && st != CG_INPROGRESS)
                return st;
        }
        if (cg_now_ns() > deadline)
            return cg_error_set(CG_ERR_TIMEOUT,
                                "comm: rank %d connected to %d of %d peers "
                                "within CG_TIMEOUT (%.1fs)", comm->rank,
                                ready + accepted, comm->size - 1,
                                comm->timeout_ns / 1e9);
        sched_yield();
    }
    return CG_OK;
}

static cg_status_t cg__comm_wire(cg_comm_t *comm, cg_bootstrap_t *bs)
{
    size_t hlen = (size_t)comm->size * sizeof(cg_tp_handle_t);
    cg_tp_handle_t mine, *all;
    cg_tp_listener_t *l;
    cg_status_t st;

    memset(&mine, 0, sizeof(mine));
    st = cg_tp_listen(comm->tp, &mine, &l);
    if (st != CG_OK)
        return st;
    st = cg_governor_alloc(comm->gov, CG_MEM_CAT_CONTROL, hlen,
                           (void **)&all);
    if (st != CG_OK)
        goto err_listener;
    st = cg_bootstrap_allgather(bs, &mine, all, sizeof(mine));
    if (st != CG_OK)
        goto err_handles;
    st = cg__comm_connect_all(comm, l, all);
    if (st != CG_OK)
        goto err_handles;
    /* No rank closes its listener while a lower rank may still dial. */
    st = cg_bootstrap_barrier(bs);
err_handles:
    cg_governor_free(comm->gov, CG_MEM_CAT_CONTROL, all, hlen);
err_listener:
    cg_tp_listener_close(l);
    return st;
}

cg_status_t cg_comm_create(const cg_comm_params_t *params, cg_comm_t **comm_p)
{
    cg_comm_t *comm;
    cg_status_t st;
    size_t clen;

    if (params == NULL || comm_p == NULL || params->bs == NULL ||
        params->tp == NULL || params->gov == NULL || params->cfg == NULL)
        return cg_error_set(CG_ERR_INVALID_PARAM,
                            "cg_comm_create: params, bs, tp, gov, cfg and "
                            "comm_p are required");
    st = cg_governor_alloc(params->gov, CG_MEM_CAT_CONTROL, sizeof(*comm),
                           (void **)&comm);
    if (st != CG_OK)
        return st;
    memset(comm, 0, sizeof(*comm));
    comm->rank = cg_bootstrap_rank(params->bs);
    comm->size = cg_bootstrap_size(params->bs);
    comm->tp = params->tp;
    comm->gov = params->gov;
    comm->log = params->log;
    comm->algo = params->cfg->algo;
    comm->chunk_min = params->cfg->chunk_min;
    comm->timeout_ns = params->cfg->timeout_ns;
    clen = (size_t)comm->size * sizeof(cg_tp_conn_t *);
    st = cg_governor_alloc(comm->gov, CG_MEM_CAT_CONTROL, clen,
                           (void **)&comm->conns);
    if (st != CG_OK)
        goto err_comm;
    memset(comm->conns, 0, clen);
    st = cg__comm_agree(comm, params->bs);
    if (st != CG_OK)
        goto err_conns;
    st = cg__comm_wire(comm, params->bs);
    if (st != CG_OK)
        goto err_close;
    if (comm->algo == CG_COLL_ALGO_AUTO || comm->algo == CG_COLL_ALGO_SHM) {
        cg_shm_params_t sp = {params->bs, comm->gov, comm->log,
                              params->cfg->shm_slot,
                              comm->algo == CG_COLL_ALGO_SHM,
                              comm->timeout_ns};
        st = cg_shm_create(&sp, &comm->shm);
        if (st != CG_OK)
            goto err_close;
        comm->shm_large = comm->algo == CG_COLL_ALGO_AUTO &&
                                  params->cfg->shm_calibrate
                              ? -1
                              : 1;
    }
    cg_debug(comm->log, "comm rank %d of %d connected over %s",
             comm->rank, comm->size, cg_transport_name(comm->tp));
    *comm_p = comm;
    return CG_OK;

err_close:
    cg__comm_close_all(comm);
err_conns:
    cg_governor_free(comm->gov, CG_MEM_CAT_CONTROL, comm->conns, clen);
err_comm:
    cg_governor_free(params->gov, CG_MEM_CAT_CONTROL, comm, sizeof(*comm));
    return st;
}

void cg_comm_destroy(cg_comm_t *comm)
{
    cg_governor_t *gov;

    if (comm == NULL)
        return;
    gov = comm->gov;
    cg__comm_close_all(comm);
    /* A goodbye receive left posted (no cg_comm_fail_blame since): the
     * close canceled it; reap it, its request is ours to free. */
    while (comm->bye_req != NULL &&
           cg_tp_test(comm->bye_req, NULL) == CG_INPROGRESS)
        cg_tp_progress(comm->tp);
    comm->bye_req = NULL;
    cg_shm_destroy(comm->shm);
    for (int i = 0; i < CG_COMM_SCRATCH; i++)
        cg_governor_free(gov, CG_MEM_CAT_RING, comm->scratch[i].buf,
                         comm->scratch[i].cap);
    cg_governor_free(gov, CG_MEM_CAT_CONTROL, comm->conns,
                     (size_t)comm->size * sizeof(cg_tp_conn_t *));
    cg_governor_free(gov, CG_MEM_CAT_CONTROL, comm, sizeof(*comm));
}

int cg_comm_rank(const cg_comm_t *comm) { return comm->rank; }
int cg_comm_size(const cg_comm_t *comm) { return comm->size; }
cg_governor_t *cg_comm_governor(const cg_comm_t *comm) { return comm->gov; }
const cg_log_t *cg_comm_log(const cg_comm_t *comm) { return comm->log; }
cg_coll_algo_t cg_comm_algo(const cg_comm_t *comm) { return comm->algo; }
uint64_t cg_comm_timeout_ns(const cg_comm_t *comm)
{
    return comm->timeout_ns;
}
uint64_t cg_comm_chunk_min(const cg_comm_t *comm) { return comm->chunk_min; }
uint64_t cg_comm_chunk_min_all(const cg_comm_t *comm)
{
    return comm->chunk_min_all;
}
cg_tp_conn_t *cg_comm_conn(const cg_comm_t *comm, int peer)
{
    return comm->conns[peer];
}
cg_transport_t *cg_comm_transport(const cg_comm_t *comm) { return comm->tp; }
cg_shm_t *cg_comm_shm(const cg_comm_t *comm) { return comm->shm; }
int cg_comm_shm_large(const cg_comm_t *comm) { return comm->shm_large; }
void cg_comm_set_shm_large(cg_comm_t *comm, int v) { comm->shm_large = v; }

cg_status_t cg_comm_begin(cg_comm_t *comm, uint32_t *tag_base_p)
{
    if (comm->broken)
        return cg_error_set(CG_ERR_PEER_RESET,
                            "comm: an earlier collective failed on rank %d; "
                            "the group is broken, create a new one",
                            comm->rank);
    *tag_base_p = (comm->seq & 0xffffffu) << 8;
    comm->seq++;
    return CG_OK;
}

/* The goodbye: sequence 0 with a kind no collective uses, so it never
 * matches a collective's receive; 8 bytes, the culprit and the status seen
 * (little-endian). A peer's socket may be full of our collective's bytes:
 * waiting for it to leave is bounded. */
#define CG__COMM_BYE_TAG ((uint32_t)CG_COMM_TAG_ABORT)
#define CG__COMM_BYE_SIZE 8
#define CG__COMM_BYE_NS (50ull * 1000000ull)
/* How long a rank that timed out on a live peer listens for its goodbye:
 * a peer stuck behind a silent rank timed out a little earlier, on the
 * same CG_TIMEOUT, so its goodbye is already under way. */
#define CG__COMM_BYE_WAIT_NS (250ull * 1000000ull)
#define CG__COMM_BYE_BATCH 64

static void cg__comm_put32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static uint32_t cg__comm_get32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
           (uint32_t)p[3] << 24;
}

/* Peers [first, first + BATCH): the goodbye to each live one, a bounded
 * wait for it to leave, then the close (which cancels what did not). */
static void cg__comm_bye_close(cg_comm_t *comm, int first, const uint8_t *msg,
                               uint64_t deadline)
{
    int end = first + CG__COMM_BYE_BATCH < comm->size
                  ? first + CG__COMM_BYE_BATCH : comm->size;
    cg_tp_req_t *reqs[CG__COMM_BYE_BATCH];
    int n = 0;

    for (int p = first; p < end; p++) {
        cg_tp_conn_t *conn = comm->conns[p];
        if (conn != NULL && cg_tp_conn_ready(conn) == CG_OK &&
            cg_tp_isend(conn, msg, CG__COMM_BYE_SIZE, CG__COMM_BYE_TAG,
                        &reqs[n]) == CG_OK)
            n++;
    }
    for (int i = 0; i < n; i++) {
        while (reqs[i] != NULL && cg_now_ns() < deadline) {
            if (cg_tp_test(reqs[i], NULL) != CG_INPROGRESS)
                reqs[i] = NULL;
            else
                cg_tp_progress(comm->tp);
        }
    }
    for (int p = first; p < end; p++) {
        if (comm->conns[p] != NULL)
            cg_tp_conn_close(comm->conns[p]);
        comm->conns[p] = NULL;
    }
    for (int i = 0; i < n; i++) {
        while (reqs[i] != NULL && cg_tp_test(reqs[i], NULL) == CG_INPROGRESS)
            cg_tp_progress(comm->tp);
    }
}

void cg_comm_fail_blame(cg_comm_t *comm, int culprit, cg_status_t why)
{
    uint8_t msg[CG__COMM_BYE_SIZE];
    uint64_t deadline = cg_now_ns() + CG__COMM_BYE_NS;
    char keep[512];

    if (comm->broken)
        return;
    comm->broken = true;
    cg_shm_abort(comm->shm);
    snprintf(keep, sizeof(keep), "%s", cg_last_error());
    cg__comm_put32(msg, (uint32_t)culprit);
    cg__comm_put32(msg + 4, (uint32_t)why);
    for (int first = 0; first < comm->size; first += CG__COMM_BYE_BATCH)
        cg__comm_bye_close(comm, first, msg, deadline);
    /* The close canceled a goodbye receive still waiting: reap it. */
    while (comm->bye_req != NULL &&
           cg_tp_test(comm->bye_req, NULL) == CG_INPROGRESS)
        cg_tp_progress(comm->tp);
    comm->bye_req = NULL;
    cg_error_set(CG_OK, "%s", keep);
}

void cg_comm_fail(cg_comm_t *comm)
{
    cg_comm_fail_blame(comm, comm->rank, CG_OK);
}

bool cg_comm_heard_goodbye(cg_comm_t *comm, int peer, int *culprit_p,
                           cg_status_t *why_p)
{
    cg_tp_conn_t *conn = comm->conns[peer];
    uint8_t *msg = comm->bye_buf;
    uint64_t deadline = cg_now_ns() + CG__COMM_BYE_WAIT_NS;
    cg_tp_req_t *req;
    cg_status_t st;
    size_t got = 0;
    char keep[512];
    bool live;

    if (conn == NULL || comm->broken || comm->bye_req != NULL)
        return false;
    snprintf(keep, sizeof(keep), "%s", cg_last_error());
    st = cg_tp_conn_ready(conn);
    live = (st == CG_OK);
    /* A failed connection delivers what arrived before it failed; a live
     * one (this rank timed out on it) is listened to for a while. */
    st = (st == CG_INPROGRESS)
             ? CG_ERR_PEER_RESET
             : cg_tp_irecv(conn, msg, CG__COMM_BYE_SIZE, CG__COMM_BYE_TAG,
                           &req);
    /* The test's status is kept apart from the post's, so a receive still
     * in progress is waited for until the deadline (then kept), never
     * dropped while posted. */
    while (st == CG_OK) {
        cg_status_t ts = cg_tp_test(req, &got);
        if (ts != CG_INPROGRESS) {
            st = ts;
            break;
        }
        if (!live || cg_now_ns() < deadline) {
            cg_tp_progress(comm->tp);
            continue;
        }
        comm->bye_req = req; /* cg_comm_fail_blame reaps it */
        st = CG_INPROGRESS;
    }
    cg_error_set(CG_OK, "%s", keep);
    if (st != CG_OK || got != CG__COMM_BYE_SIZE)
        return false;
    *culprit_p = (int)cg__comm_get32(msg);
    *why_p = (cg_status_t)(int32_t)cg__comm_get32(msg + 4);
    return *culprit_p >= 0 && *culprit_p < comm->size;
}

bool cg_comm_broken(const cg_comm_t *comm) { return comm->broken; }

cg_status_t cg_comm_scratch(cg_comm_t *comm, int idx, size_t want,
                            size_t floor, size_t max, size_t align,
                            void **buf_p, size_t *cap_p)
{
    void *buf;
    size_t cap;
    cg_status_t st;

    if (idx < 0 || idx >= CG_COMM_SCRATCH)
        return cg_error_set(CG_ERR_INVALID_PARAM, "comm: scratch index %d "
                            "out of range 0..%d", idx, CG_COMM_SCRATCH - 1);
    buf = comm->scratch[idx].buf;
    cap = comm->scratch[idx].cap;
    if (buf == NULL || cap < want || cap > max) {
        cg_governor_free(comm->gov, CG_MEM_CAT_RING, buf, cap);
        comm->scratch[idx].buf = NULL;
        comm->scratch[idx].cap = 0;
        st = cg_governor_alloc_shrink(comm->gov, CG_MEM_CAT_RING, want, floor,
                                      align, "CG_CHUNK_MIN", &buf, &cap);
        if (st != CG_OK)
            return st;
        comm->scratch[idx].buf = buf;
        comm->scratch[idx].cap = cap;
    }
    *buf_p = buf;
    *cap_p = cap;
    return CG_OK;
}
