/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The TCP rendezvous: a star of sockets around rank 0. Rank 0 listens on
 * the rendezvous address and accepts size-1 ranks (each through the common
 * handshake, kind BOOTSTRAP, the job id in the cookie field); strangers are
 * dropped and the store serves on. The connections stay open: every
 * collective is "all send their part to rank 0, rank 0 answers everyone".
 * Layer: transport; calls transport/sock, transport/handshake, core/base.
 *
 * Frames after the handshake (24-byte header, little-endian):
 *   0 magic "CGBS" u32   4 op u16   6 flags u16 (0)   8 seq u32
 *  12 root/status i32   16 len u64 (the collective's per-rank length)
 * followed by the rank's contribution (to rank 0) or the result (from it).
 * An ABORT frame carries the failing status and up to 512 bytes of text.
 */
#ifndef CG_TRANSPORT_RENDEZVOUS_H
#define CG_TRANSPORT_RENDEZVOUS_H

#include <stddef.h>
#include <stdint.h>

#include "collguard/status.h"
#include "core/base/log.h"
#include "core/base/mem.h"

typedef enum {
    CG_RDV_OP_START = 1,     /* rank 0 -> all: everyone arrived; cookie */
    CG_RDV_OP_ALLGATHER = 2,
    CG_RDV_OP_BCAST = 3,
    CG_RDV_OP_BARRIER = 4,
    CG_RDV_OP_ABORT = 5,     /* rank 0 -> all: the job failed; why */
    CG_RDV_OP_MAX = 5
} cg_rdv_op_t;

typedef struct cg_rdv_params {
    int rank, size;
    const char *host;      /* rendezvous host (rank 0 binds it) */
    int port;
    const char *addr_from; /* for messages: the variable it came from */
    uint64_t job_id;       /* handshake cookie: peers with another refused */
    uint64_t cookie;       /* rank 0: handed to every rank in START */
    uint64_t timeout_ns;
    const cg_log_t *log;
    cg_mem_ops_t mem;
    /* Rank 0: a socket already listening on the port (inherited from
     * collguard-run; used and kept open, never closed here), or -1. */
    int listen_fd;
} cg_rdv_params_t;

typedef struct cg_rdv cg_rdv_t;

/* Rank 0 serves until all ranks arrived; others dial (retrying while rank
 * 0 is not listening yet) and wait for START. Bounded by timeout_ns. */
cg_status_t cg_rdv_create(const cg_rdv_params_t *params, cg_rdv_t **rdv_p);
/* Rank 0 sends ABORT to the ranks still connected if the job failed. */
void cg_rdv_destroy(cg_rdv_t *rdv);
uint64_t cg_rdv_cookie(const cg_rdv_t *rdv);

/* One collective; the caller (bootstrap.c) has checked op, root and the
 * length limits. mine: this rank's contribution (allgather: len bytes;
 * bcast: len bytes at root, ignored elsewhere; barrier: none). out:
 * allgather size*len, bcast len (may alias mine), barrier none. */
cg_status_t cg_rdv_collective(cg_rdv_t *rdv, cg_rdv_op_t op, int root,
                              const void *mine, void *out, size_t len);
const char *cg_rdv_op_name(cg_rdv_op_t op);

#endif
