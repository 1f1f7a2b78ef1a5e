/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Internal to the collectives: one running operation (its communicator,
 * tag base and a pool of transfers) and the transfer helpers every
 * algorithm uses (post, test, wait, abort), which turn a transport failure
 * into an error naming the operation, the peer rank and the cause, and
 * bound a silent peer by CG_TIMEOUT; and the staging of an in-place
 * operation (cg_allreduce_staged). Layer: core/coll; calls transport.h.
 */
#ifndef CG_CORE_COLL_IMPL_H
#define CG_CORE_COLL_IMPL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "collguard/types.h"
#include "core/base/clock.h"
#include "core/coll/coll.h"
#include "core/coll/comm.h"

/* Transfers one operation may have outstanding at once. */
#define CG_COLL_XFER_MAX 48
/* Auto choice: recursive doubling / binomial tree up to this many bytes;
 * also the piece size of recursive doubling on larger messages. */
#define CG_COLL_SMALL_BYTES (64u << 10)
/* Two ranks: the pipelined pair exchange up to this many bytes (auto;
 * above, the ring, whose in-place form waits on nothing of its own). */
#define CG_COLL_PAIR_BYTES (128u << 10)
/* The communicator's scratch buffers (cg_comm_scratch): the ring's two
 * receive slots, then recursive doubling's partner buffer. */
#define CG_COLL_SCRATCH_RING 0
#define CG_COLL_SCRATCH_RD 2
/* The shared-memory AllReduce's partial results (more than two ranks). */
#define CG_COLL_SCRATCH_SHM 3
/* The ring reduce-scatter's receive slots and partial results
 * (coll_rscatter.c): CG_COLL_SCRATCH_RS and CG_COLL_SCRATCH_RS + 1. */
#define CG_COLL_SCRATCH_RS 4

typedef struct cg__xfer {
    cg_tp_req_t *req; /* NULL when idle or finished */
    int peer;
    bool send;
    size_t len;       /* posted length */
    size_t got;       /* bytes moved, once finished */
} cg__xfer_t;

typedef struct cg__coll_op {
    cg_comm_t *comm;
    const char *name;  /* "allreduce", "broadcast" */
    uint32_t tag_base;
    uint64_t last_ns;  /* last time a transfer finished */
    int idle_spins;
    int fail_peer;     /* peer of the first failed transfer, or -1 */
    cg__xfer_t x[CG_COLL_XFER_MAX];
} cg__coll_op_t;

/* Begins an operation on comm (fails at once on a broken group). */
cg_status_t cg__coll_op_begin(cg__coll_op_t *op, cg_comm_t *comm,
                              const char *name);
/* Posts a send (or receive of capacity len) of kind to/from peer. */
cg_status_t cg__xfer_post(cg__coll_op_t *op, cg__xfer_t *x, bool send, int peer,
                          void *buf, size_t len, cg_comm_tag_kind_t kind);
/* CG_OK once finished (x->req NULL, x->got set), CG_INPROGRESS, or the
 * failure with cg_last_error() naming the peer. Idle x: CG_OK. */
cg_status_t cg__xfer_test(cg__coll_op_t *op, cg__xfer_t *x);
/* Drives the transport once; yields the CPU after a while without
 * progress; CG_ERR_TIMEOUT naming x's peer after CG_TIMEOUT of silence. */
cg_status_t cg__coll_idle(cg__coll_op_t *op, const cg__xfer_t *x);
/* Test until finished. */
cg_status_t cg__xfer_wait(cg__coll_op_t *op, cg__xfer_t *x);
/* Exchange: send slen bytes to speer and receive up to rlen from rpeer;
 * *got_p (may be NULL) the bytes received. Either peer < 0: skipped. */
cg_status_t cg__coll_sendrecv(cg__coll_op_t *op, int speer, const void *sbuf,
                              size_t slen, int rpeer, void *rbuf, size_t rlen,
                              cg_comm_tag_kind_t kind, size_t *got_p);
/* After a failure: breaks the group (closing its connections, so waiting
 * peers fail at once) and reaps every outstanding transfer of op, keeping
 * the first error's message. Returns st. */
cg_status_t cg__coll_abort(cg__coll_op_t *op, cg_status_t st);

/* An in-place operation's staging (cg_allreduce_staged): the caller's
 * stage with the prescale applied to each filled range. NULL where the
 * buffer is already whole. */
typedef struct cg__coll_staging {
    const cg_coll_stage_t *stage; /* stage->segs: see cg_ring_seg */
    uint8_t *base;
    cg_dtype_t dt;
    double prescale;
} cg__coll_staging_t;

/* buf[off, off + len) (p = base + off) filled / drained; no-ops without
 * staging or for len 0. cg__coll_fill_to: the input bytes [off, off + len)
 * prescaled into dst (sg not NULL). */
void cg__coll_fill_to(const cg__coll_staging_t *sg, size_t off, size_t len,
                      void *dst);
void cg__coll_fill(const cg__coll_staging_t *sg, const void *p, size_t len);
/* Whether ranges reduced into are reduced from the input by the stage
 * (cg_coll_stage_t.reduce_in, prescale 1) rather than filled first. */
bool cg__coll_reduces_in(const cg__coll_staging_t *sg);
/* p[0, len) = input op piece through the stage (cg__coll_reduces_in). */
void cg__coll_reduce_in(const cg__coll_staging_t *sg, void *p, size_t len,
                        const void *piece);
void cg__coll_drain(const cg__coll_staging_t *sg, const void *p, size_t len);
/* The same with the collective's memory given apart from the offset
 * (shared-memory slots): the result bytes [off, off + len) from src; dst
 * = the input there op piece (cg__coll_reduces_in). sg not NULL. */
void cg__coll_drain_from(const cg__coll_staging_t *sg, size_t off, size_t len,
                         const void *src);
void cg__coll_reduce_in_to(const cg__coll_staging_t *sg, size_t off,
                           size_t len, const void *piece, void *dst);

/* Ring AllReduce of sendbuf into recvbuf (the same pointer: in place);
 * recursive doubling likewise (out of place, its first step reduces
 * straight from sendbuf). Inputs already prescaled; both
 * apply the average and postscale. On failure both have aborted op. */
cg_status_t cg__ring_allreduce(cg__coll_op_t *op, const void *sendbuf,
                               void *recvbuf, size_t count, cg_dtype_t dt,
                               cg_redop_t op_kind, double postscale,
                               const cg__coll_staging_t *sg);
cg_status_t cg__rd_allreduce(cg__coll_op_t *op, const void *sendbuf,
                             void *recvbuf, size_t count, cg_dtype_t dt,
                             cg_redop_t op_kind, double postscale);

/* Through the communicator's shared memory (cg_comm_shm not NULL; see
 * coll_shm.c); in or out of place, or staged in place (sg); same contract
 * as the ring, whose bits it gives. Does not abort op itself. */
cg_status_t cg__shm_allreduce(cg__coll_op_t *op, const void *sendbuf,
                              void *recvbuf, size_t count, cg_dtype_t dt,
                              cg_redop_t op_kind, double postscale,
                              const cg__coll_staging_t *sg);

/* Two ranks only: recursive doubling's single exchange, pipelined in
 * pieces (coll_pair.c); same contract as the two above. */
cg_status_t cg__pair_allreduce(cg__coll_op_t *op, const void *sendbuf,
                               void *recvbuf, size_t count, cg_dtype_t dt,
                               cg_redop_t op_kind, double postscale);

#endif
