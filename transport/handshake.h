/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The connection handshake: a fixed 32-byte header (explicit little-endian
 * encoding) plus a bounded payload, exchanged once over a fresh socket. The
 * connector sends first; the acceptor validates (magic, version, cookie,
 * kind, bounds) and answers with its own header+payload, or the caller
 * closes. A named state table drives a non-blocking exchange under a
 * deadline. Used by tcp.c (data sockets), the UCX backend (its worker
 * address rides in the payload) and bootstrap.
 * Layer: transport; calls transport/sock and core/base only.
 *
 * Wire header (offsets in bytes, all little-endian):
 *   0 magic "CGHS" (0x53484743)   4 version u16   6 kind u16
 *   8 cookie u64                 16 rank i32     20 sock_index u16
 *  22 nsocks u16                 24 conn_id u32  28 payload_len u32
 */
#ifndef CG_TRANSPORT_HANDSHAKE_H
#define CG_TRANSPORT_HANDSHAKE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "collguard/status.h"
#include "core/base/log.h"

#define CG_HS_MAGIC 0x53484743u /* "CGHS" as bytes on the wire */
#define CG_HS_VERSION 1
#define CG_HS_HDR_SIZE 32
#define CG_HS_PAYLOAD_MAX 4096
#define CG_HS_NSOCKS_MAX 64

/* What a connection is for; the acceptor refuses any other kind. */
typedef enum {
    CG_HS_KIND_TCP_DATA = 1,  /* TCP transport data socket i of n */
    CG_HS_KIND_UCX_CTRL = 2,  /* UCX backend: worker address + liveness */
    CG_HS_KIND_BOOTSTRAP = 3, /* rendezvous store */
    CG_HS_KIND_MAX = 3
} cg_hs_kind_t;

typedef struct cg_hs_hdr {
    uint16_t version;
    uint16_t kind;
    uint64_t cookie;
    int32_t rank;
    uint16_t sock_index;  /* < nsocks */
    uint16_t nsocks;      /* 1 .. CG_HS_NSOCKS_MAX */
    uint32_t conn_id;     /* groups the sockets of one connection */
    uint32_t payload_len; /* <= CG_HS_PAYLOAD_MAX */
} cg_hs_hdr_t;

/* Pure encode/decode (no I/O). decode checks everything the header alone
 * can tell: length, magic, version, kind range, nsocks/sock_index and
 * payload bounds; CG_ERR_HANDSHAKE with the reason in cg_last_error(). */
void cg_hs_encode(const cg_hs_hdr_t *hdr, uint8_t out[CG_HS_HDR_SIZE]);
cg_status_t cg_hs_decode(const uint8_t *buf, size_t len, cg_hs_hdr_t *hdr_p);
/* The peer-dependent checks: kind and job cookie. */
cg_status_t cg_hs_check(const cg_hs_hdr_t *hdr, uint16_t kind,
                        uint64_t cookie);

typedef enum {
    CG_HS_CONNECTOR = 0,
    CG_HS_ACCEPTOR = 1
} cg_hs_role_t;

/* States, in the order the table runs them. */
typedef enum {
    CG_HS_ST_CONNECTING = 0, /* connector: TCP connect pending */
    CG_HS_ST_SEND,           /* our header + payload going out */
    CG_HS_ST_RECV_HDR,       /* peer's fixed header coming in */
    CG_HS_ST_RECV_PAYLOAD,   /* peer's payload coming in */
    CG_HS_ST_DONE,
    CG_HS_ST_FAILED,
    CG_HS_ST_COUNT
} cg_hs_state_t;

/* One exchange; embed it in the owning object (no allocation inside). */
typedef struct cg_hs {
    int fd;
    cg_hs_role_t role;
    cg_hs_state_t state;
    cg_status_t status;     /* of a FAILED exchange */
    uint64_t deadline_ns;   /* CLOCK_MONOTONIC, cg_now_ns() based */
    cg_hs_hdr_t local;      /* our header (acceptor: conn_id, sock_index
                               and nsocks are echoed from the peer) */
    const void *local_payload; /* caller-owned, local.payload_len bytes */
    uint8_t local_wire[CG_HS_HDR_SIZE];
    size_t sent;            /* of header + payload */
    uint8_t peer_wire[CG_HS_HDR_SIZE];
    size_t hdr_got;
    cg_hs_hdr_t peer;       /* valid from RECV_PAYLOAD on */
    uint8_t peer_payload[CG_HS_PAYLOAD_MAX];
    size_t payload_got;
    /* Acceptor, optional (cg_hs_init clears it; set it after): runs once
     * the peer's header and payload passed the checks, before the answer
     * goes out, so what it sets up exists before the peer's exchange ends;
     * an error fails the exchange unanswered. */
    cg_status_t (*before_answer)(struct cg_hs *hs, void *arg);
    void *before_answer_arg;
} cg_hs_t;

/* Prepares an exchange over fd (connector: fd from cg_sock_connect_start,
 * connect may still be pending; acceptor: an accepted socket). The peer
 * must present local->kind and local->cookie. local_payload must stay valid
 * until the exchange ends. */
void cg_hs_init(cg_hs_t *hs, cg_hs_role_t role, int fd,
                const cg_hs_hdr_t *local, const void *local_payload,
                uint64_t deadline_ns);
/* Moves the exchange as far as it can without blocking. CG_OK when done,
 * CG_INPROGRESS when waiting on the socket, else the failure:
 * CG_ERR_HANDSHAKE (protocol violation or peer closed mid-exchange),
 * CG_ERR_TIMEOUT (deadline), CG_ERR_UNREACHABLE (connect refused),
 * CG_ERR_PEER_RESET / CG_ERR_IO; cg_last_error() says why. A failed
 * exchange stays failed; the caller closes fd. */
cg_status_t cg_hs_progress(cg_hs_t *hs);
/* POLLIN or POLLOUT: what the current state waits for. */
short cg_hs_poll_events(const cg_hs_t *hs);
/* Blocks in poll() until done or the deadline. */
cg_status_t cg_hs_run(cg_hs_t *hs);
/* "connecting", "send", "recv_hdr", ... */
const char *cg_hs_state_name(cg_hs_state_t state);

/* A listener's refusal lines, rate-limited: up to CG_HS_LOG_BURST lines a
 * window of CG_HS_LOG_WINDOW_NS, then one line a window counting the
 * refusals not written (a flood of strangers would otherwise write a line
 * each). Zero-initialised. */
#define CG_HS_LOG_BURST 16u
#define CG_HS_LOG_WINDOW_NS 1000000000ull
typedef struct cg_hs_limit {
    uint64_t window_ns;     /* start of the current window */
    unsigned logged;        /* lines written in it */
    unsigned held;          /* refusals not written in it */
    uint64_t total;         /* refusals counted, written or not */
} cg_hs_limit_t;
/* Counts a refusal; true: write its line now. */
bool cg_hs_limit_take(cg_hs_limit_t *lim, const cg_log_t *log,
                      const char *where);
/* Writes the count of refusals held back once their window is over
 * (force: now, e.g. when the listener closes). */
void cg_hs_limit_flush(cg_hs_limit_t *lim, const cg_log_t *log,
                       const char *where, bool force);

#endif
