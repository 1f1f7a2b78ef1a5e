/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The transport interface: the only way core/ and plugin/ move bytes.
 * Connections are bidirectional and created from opaque listen handles of
 * at most 128 bytes (they fit NCCL's net handle), so bootstrap and the NCCL
 * plugin can exchange them however they like. Everything is non-blocking:
 * connect and accept are polled until ready, isend/irecv return requests
 * that test/wait complete. Each backend (ucx.c, tcp.c) fills one
 * cg_transport_ops_t; transport.c dispatches, so callers never name one.
 * Layer: transport; calls core/base services only.
 *
 * Semantics every backend keeps:
 *  - tags are 32-bit; per connection, sends and receives with the same tag
 *    match in posting order; different tags may complete in any order;
 *  - a receive may be larger than the message; the received size is
 *    reported; a message larger than its receive is CG_ERR_TRUNCATED;
 *  - messages of 0 bytes to several GiB;
 *  - every connection starts with a handshake (magic, version, job cookie,
 *    sender rank); a peer that fails it is dropped and logged, and the
 *    listener keeps serving;
 *  - a peer that dies or goes silent fails every request on that
 *    connection with a peer-failure status within params.timeout_ns.
 * Threads: one transport instance is used by one thread at a time.
 */
#ifndef CG_TRANSPORT_H
#define CG_TRANSPORT_H

#include <stddef.h>
#include <stdint.h>

#include "collguard/status.h"
#include "core/base/enum.h" /* cg_transport_kind_t */
#include "core/base/log.h"
#include "core/base/mem.h"

#define CG_TP_HANDLE_MAX 128

typedef struct cg_tp_handle {
    uint8_t bytes[CG_TP_HANDLE_MAX];
} cg_tp_handle_t;

typedef struct cg_transport cg_transport_t;
typedef struct cg_tp_listener cg_tp_listener_t;
typedef struct cg_tp_conn cg_tp_conn_t;
typedef struct cg_tp_req cg_tp_req_t;

typedef struct cg_transport_params {
    cg_transport_kind_t kind; /* AUTO: UCX when built in, else socket */
    uint64_t cookie;          /* per-job cookie from bootstrap */
    int rank;                 /* carried in handshakes; -1 if unknown */
    uint64_t timeout_ns;      /* dead-peer detection bound */
    const char *ifname;       /* NCCL_SOCKET_IFNAME syntax; NULL/"" auto */
    int nsocks;               /* sockets per TCP connection, >= 1 */
    const cg_log_t *log;      /* may be NULL */
    cg_mem_ops_t mem;         /* accounted allocator for all buffers */
    /* UCX: 1 lets endpoints to peers on this host go without UCX error
     * handling when all their lanes are shared memory (zero-copy CMA; the
     * control socket watches the peer; see ucx_mode.c); 0: UCX peer
     * error handling on every endpoint. */
    int ucx_shm_zcopy;
} cg_transport_params_t;

cg_status_t cg_transport_create(const cg_transport_params_t *params,
                                cg_transport_t **tp_p);
void cg_transport_destroy(cg_transport_t *tp);
/* CG_TRANSPORT_UCX or CG_TRANSPORT_SOCKET (never AUTO), and its name. */
cg_transport_kind_t cg_transport_kind(const cg_transport_t *tp);
const char *cg_transport_name(const cg_transport_t *tp);
/* Names of the transports compiled into this build, comma-separated. */
const char *cg_transport_built(void);

cg_status_t cg_tp_listen(cg_transport_t *tp, cg_tp_handle_t *handle_p,
                         cg_tp_listener_t **listener_p);
/* CG_OK with a connection whose handshake completed; CG_INPROGRESS when
 * none is ready yet (call again). Bad peers never surface here. */
cg_status_t cg_tp_accept(cg_tp_listener_t *listener, cg_tp_conn_t **conn_p);
void cg_tp_listener_close(cg_tp_listener_t *listener);

/* Starts connecting; *conn_p is valid at once but usable for transfers
 * only after cg_tp_conn_ready() returned CG_OK. Requests posted earlier
 * are queued. */
cg_status_t cg_tp_connect(cg_transport_t *tp, const cg_tp_handle_t *handle,
                          cg_tp_conn_t **conn_p);
/* CG_OK once the handshake completed, CG_INPROGRESS before, or the error
 * that failed it (refused, timed out). */
cg_status_t cg_tp_conn_ready(cg_tp_conn_t *conn);
int cg_tp_conn_peer_rank(const cg_tp_conn_t *conn);
/* Fails outstanding requests with CG_ERR_CANCELED and frees the conn. */
void cg_tp_conn_close(cg_tp_conn_t *conn);

cg_status_t cg_tp_isend(cg_tp_conn_t *conn, const void *buf, size_t len,
                        uint32_t tag, cg_tp_req_t **req_p);
cg_status_t cg_tp_irecv(cg_tp_conn_t *conn, void *buf, size_t cap,
                        uint32_t tag, cg_tp_req_t **req_p);
/* CG_INPROGRESS while pending. Otherwise the request is finished and freed:
 * CG_OK with *size_p (may be NULL) the bytes moved, or the error. */
cg_status_t cg_tp_test(cg_tp_req_t *req, size_t *size_p);
/* 1 when req has finished, so that test ends it at once without driving
 * the transport; 0 while it is pending. Never progresses, never frees. */
int cg_tp_done(const cg_tp_req_t *req);
/* Like test, but blocks (spinning briefly, then sleeping in the kernel)
 * until done; never longer than the dead-peer timeout without progress. */
cg_status_t cg_tp_wait(cg_tp_req_t *req, size_t *size_p);
/* Drives all connections of tp once, without blocking. */
cg_status_t cg_tp_progress(cg_transport_t *tp);

#endif
