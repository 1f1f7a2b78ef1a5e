/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A communicator: the ranks of a bootstrap joined by transport connections
 * (one to every peer, set up at create, so rings, trees and recursive
 * doubling all find their partner), a per-operation sequence number that
 * makes tags deterministic, and the failure state of the group.
 * Layer: core/coll; calls transport/ (transport.h, bootstrap.h) and the governor.
 * Threads: one communicator is used by one thread at a time.
 */
#ifndef CG_CORE_COMM_H
#define CG_CORE_COMM_H

#include <stdbool.h>
#include <stdint.h>

#include "collguard/status.h"
#include "core/base/log.h"
#include "core/config/config.h"
#include "core/governor/governor.h"
#include "transport/bootstrap.h"
#include "transport/transport.h"

typedef struct cg_comm cg_comm_t;

typedef struct cg_comm_params {
    cg_bootstrap_t *bs;       /* rank, size, handle exchange; borrowed */
    cg_transport_t *tp;       /* connections are made on it; borrowed */
    cg_governor_t *gov;       /* every buffer; borrowed */
    const cg_config_t *cfg;   /* CG_ALGO, CG_CHUNK_MIN, CG_TIMEOUT */
    const cg_log_t *log;      /* may be NULL */
} cg_comm_params_t;

/* Tag kinds: a tag is (operation sequence << 8) | kind. */
typedef enum {
    CG_COMM_TAG_DATA = 1,   /* ring AllReduce's reduce-scatter pieces */
    CG_COMM_TAG_CREDIT = 2, /* receiver's piece sizes */
    CG_COMM_TAG_GATHER = 3, /* ring all-gather */
    CG_COMM_TAG_RD = 4,     /* recursive doubling and its fold */
    CG_COMM_TAG_BCAST = 5,  /* broadcast chain and tree */
    CG_COMM_TAG_ALLTOALL = 6, /* pairwise exchange (coll_alltoall.c) */
    CG_COMM_TAG_ABORT = 7,    /* the goodbye of cg_comm_fail_blame */
    CG_COMM_TAG_RS = 8        /* ring reduce-scatter: 8 .. 11, one per
                               * channel (coll_rscatter.c) */
} cg_comm_tag_kind_t;

/* Collective over the bootstrap: every rank listens, handles are
 * all-gathered, rank i connects to every j > i and accepts every j < i,
 * all within cfg->timeout_ns. Ranks must agree on CG_ALGO
 * (CG_ERR_MISMATCH naming the rank that differs). */
cg_status_t cg_comm_create(const cg_comm_params_t *params, cg_comm_t **comm_p);
/* Closes every connection; pending peers see a reset. */
void cg_comm_destroy(cg_comm_t *comm);

int cg_comm_rank(const cg_comm_t *comm);
int cg_comm_size(const cg_comm_t *comm);
cg_governor_t *cg_comm_governor(const cg_comm_t *comm);
const cg_log_t *cg_comm_log(const cg_comm_t *comm);
cg_coll_algo_t cg_comm_algo(const cg_comm_t *comm);
uint64_t cg_comm_timeout_ns(const cg_comm_t *comm);
uint64_t cg_comm_chunk_min(const cg_comm_t *comm);
/* The smallest CG_CHUNK_MIN of all ranks (exchanged at create): a piece
 * no larger fits every rank's receive buffers, whatever the pressure. */
uint64_t cg_comm_chunk_min_all(const cg_comm_t *comm);
/* Connection to peer (never self). */
cg_tp_conn_t *cg_comm_conn(const cg_comm_t *comm, int peer);
cg_transport_t *cg_comm_transport(const cg_comm_t *comm);
/* The shared-memory area when every rank is on this host and it was set
 * up (CG_ALGO auto or shm, CG_SHM_SLOT not 0), else NULL. */
struct cg_shm *cg_comm_shm(const cg_comm_t *comm);
/* With shared memory: whether AllReduces above CG_COLL_SMALL_BYTES use it
 * (1), the transport (0), or are not measured yet (-1: CG_ALGO=auto with
 * CG_SHM_CALIBRATE=1 until the first one; see coll_allreduce.c). */
int cg_comm_shm_large(const cg_comm_t *comm);
void cg_comm_set_shm_large(cg_comm_t *comm, int v);

/* Starts a collective: CG_ERR_PEER_RESET at once if an earlier one failed
 * (the group is broken), else the tag base of this operation. */
cg_status_t cg_comm_begin(cg_comm_t *comm, uint32_t *tag_base_p);
/* Marks the group broken after a failed operation and closes every
 * connection (and marks this rank aborted in shared memory), so ranks
 * still waiting on this one fail at once too. Before closing a live
 * connection it sends the peer a goodbye naming culprit, the rank whose
 * failure (status why) broke the group, and waits at most 50 ms for it to
 * leave. Only the first call acts; cg_last_error() is kept.
 * cg_comm_fail: this rank itself is the culprit (a local failure). */
void cg_comm_fail_blame(cg_comm_t *comm, int culprit, cg_status_t why);
void cg_comm_fail(cg_comm_t *comm);
/* Whether peer said goodbye: the culprit it named and the status it saw.
 * A failed connection is read for what arrived before it failed; on a
 * live one (this rank timed out on it) the goodbye is awaited up to
 * 250 ms, since a peer stuck behind a silent rank times out a little
 * earlier. False without a goodbye or after cg_comm_fail*; call
 * cg_comm_fail_blame next. cg_last_error() is kept. */
bool cg_comm_heard_goodbye(cg_comm_t *comm, int peer, int *culprit_p,
                           cg_status_t *why_p);
bool cg_comm_broken(const cg_comm_t *comm);

/* Scratch buffers a communicator keeps from one collective to the next
 * (CG_MEM_CAT_RING, accounted while kept, freed by cg_comm_destroy), so a
 * collective in the steady state allocates nothing: a fresh allocation
 * costs page faults on every operation (2 x 128 KiB: ~30x the time of
 * touching them). Index 0..CG_COMM_SCRATCH-1; one user at a time. */
#define CG_COMM_SCRATCH 6
/* The buffer of index idx with a capacity in [want, max] if the kept one
 * fits; otherwise the kept one is freed and a new one of want bytes
 * allocated, shrinking to floor (multiples of align) on failure, as
 * cg_governor_alloc_shrink with floor_var CG_CHUNK_MIN. */
cg_status_t cg_comm_scratch(cg_comm_t *comm, int idx, size_t want,
                            size_t floor, size_t max, size_t align,
                            void **buf_p, size_t *cap_p);

#endif
