/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Internals of the UCX backend, shared by ucx.c (context, worker, progress,
 * wait), ucx_conn.c (control socket, handshake, endpoints, liveness),
 * ucx_listen.c (listeners, accept side), ucx_mode.c (endpoint error mode)
 * and ucx_req.c (tag send/receive and request lifetime). They call only
 * downward: ucx.c over ucx_listen.c over ucx_conn.c over ucx_req.c over
 * ucx_mode.c (ucx.c's ops reach the others as conn->super.ops). Layer: transport;
 * calls UCX, transport/sock, transport/handshake and core/base only.
 */
#ifndef CG_TRANSPORT_UCX_IMPL_H
#define CG_TRANSPORT_UCX_IMPL_H

#include <stddef.h>
#include <stdint.h>

#include <ucp/api/ucp.h>

#include "core/base/list.h"
#include "transport/handshake.h"
#include "transport/sock.h"
#include "transport/transport_impl.h"

/* Handle layout: magic, then the packed control-socket address. */
#define CG_UCX_HANDLE_MAGIC 0x31585543u /* "CUX1" */
/* Handshake payload: our conn id (u32 little-endian), flags (u32, below),
 * a host key (ucx_mode.c), then the worker address. */
#define CG_UCX_HOST_KEY_SIZE 16
#define CG_UCX_PREFIX_SIZE (4 + 4 + CG_UCX_HOST_KEY_SIZE)
/* The flags word: a marker in the upper 24 bits (a peer of an older
 * layout fails the handshake instead of being misread), flags below.
 * CG_UCX_HS_SHM: this side's UCX context offers sysv or posix. */
#define CG_UCX_HS_MARK 0x58554300u /* "\0CUX" */
#define CG_UCX_HS_SHM 1u
/* Handshakes a listener runs at once; when all are taken, a new
 * connection evicts the oldest (ucx_listen.c). */
#define CG_UCX_PENDING_MAX 64
/* A handshake younger than this is never evicted (see tcp_impl.h). */
#define CG_UCX_EVICT_GRACE_NS (50ull * 1000000ull)
/* The listen backlog: a flood waits there rather than overflowing it. */
#define CG_UCX_BACKLOG 4096
/* How often progress looks at control sockets, timeouts and listeners. */
#define CG_UCX_SWEEP_NS 1000000ull
/* Progress rounds between clock reads. */
#define CG_UCX_CLOCK_ROUNDS 32u
/* Finished request objects kept for reuse. */
#define CG_UCX_REQ_CACHE 64u
/* The timeout grows by the pending bytes at this rate (bytes per second),
 * so one huge message on a slow link is not mistaken for a silent peer. */
#define CG_UCX_MIN_BPS 100000000ull

typedef struct cg__ucx_tp {
    cg_transport_t super;
    const cg_log_t *log;
    char ifname[256];         /* copy of params.ifname */
    ucp_context_h context;
    ucp_worker_h worker;
    ucp_address_t *addr;
    size_t addr_len;
    int shm;                  /* the context offers sysv or posix */
    uint8_t host_key[CG_UCX_HOST_KEY_SIZE];
    int efd;                  /* worker wakeup fd */
    int epfd;                 /* efd, live conns' control sockets, listeners */
    uint32_t next_conn_id;
    uint64_t next_sweep_ns;
    unsigned rounds;          /* progress rounds, paces clock reads */
    int sweep_now;            /* an error callback or a wakeup asks for one */
    unsigned nhs;             /* handshakes running (connect or accept side) */
    unsigned nsends;          /* send requests pending in UCX */
    cg_list_t conns;      /* conns handed to the user */
    cg_list_t listeners;
    cg_list_t zombies;    /* reqs done for the user, UCX part still live */
    cg_list_t closing;    /* closed conns whose endpoint close is pending */
    cg_list_t req_cache;  /* free request objects, up to REQ_CACHE */
    unsigned ncached;
} cg__ucx_tp_t;

typedef enum {
    CG_UCX_CONN_HANDSHAKE = 0,
    CG_UCX_CONN_READY,
    CG_UCX_CONN_FAILED
} cg__ucx_conn_state_t;

typedef struct cg__ucx_listener cg__ucx_listener_t;

typedef struct cg__ucx_conn {
    cg_tp_conn_t super;
    cg_list_t link;       /* tp->conns, listener lists or tp->closing */
    cg__ucx_conn_state_t state;
    cg_status_t status;       /* why it failed */
    char why[160];            /* detail of the failure, for cg_last_error() */
    ucs_status_t ep_error;    /* set by the UCX error handler */
    int fd;                   /* control socket; -1 once closed */
    int in_epoll;
    uint64_t born_ns;         /* listener side: accepted at */
    cg_sockaddr_t from;       /* listener side: the peer's address */
    uint32_t id;              /* ours: high tag bits of what we receive */
    uint32_t peer_id;         /* the peer's: high tag bits of what we send */
    ucp_ep_h ep;
    int err_none;             /* ep without UCX error handling (shm only) */
    int no_ep;                /* accept side: a peer that passed the
                               * handshake checks, its ep not made (why) */
    size_t rndv_min;          /* smallest rendezvous message (err_none) */
    void *close_req;          /* endpoint close in flight */
    uint64_t last_activity_ns;  /* 0: just now, the sweep stamps it */
    uint64_t pending_bytes;   /* sizes of the requests in reqs */
    cg_list_t reqs;       /* requests pending for the user, in order */
    cg__ucx_listener_t *listener; /* accept side, until handed out */
    size_t alloc_size;
    cg_hs_t hs;
    uint8_t payload[];        /* see CG_UCX_PREFIX_SIZE */
} cg__ucx_conn_t;

struct cg__ucx_listener {
    cg_tp_listener_t super;
    cg_list_t link;       /* tp->listeners */
    int fd;
    cg_sockaddr_t addr;
    cg_list_t pending;    /* conns in handshake, oldest first */
    cg_list_t ready;      /* handshaked conns waiting for accept */
    unsigned npending;
    cg_hs_limit_t refusals; /* rate limit of the refusal lines */
    char where[96];       /* "ucx: listener on ADDR", for those lines */
};

enum {
    CG_UCX_REQ_RECV = 1u << 0,
    CG_UCX_REQ_QUEUED = 1u << 1,   /* send waiting for the handshake */
    CG_UCX_REQ_RELEASED = 1u << 2  /* the user has seen its final status */
};

typedef struct cg__ucx_req {
    cg_tp_req_t super;
    cg_list_t link;       /* conn->reqs while pending, then tp->zombies
                                 while only the UCX part lives */
    cg__ucx_tp_t *tp;
    cg__ucx_conn_t *conn;      /* while pending */
    void *ucp;                /* live UCX request */
    cg_status_t status;
    size_t length;
    unsigned flags;
    const void *buf;          /* a queued send */
    size_t len;
    uint32_t tag;
} cg__ucx_req_t;

extern const cg_transport_ops_t cg__ucx_ops;

static inline uint64_t cg__ucx_tag(uint32_t conn_id, uint32_t tag)
{
    return ((uint64_t)conn_id << 32) | tag;
}

/* ucx.c, the top of the ucx_*.c files (none calls it): the ops, and
 * what drives progress. */
/* One round of worker progress, handshakes and (when due) the sweep;
 * returns the number of UCX events. */
unsigned cg__ucx_progress(cg__ucx_tp_t *tp);
cg_status_t cg__ucx_wait(cg_tp_req_t *req, size_t *size_p);
cg_status_t cg__ucx_conn_ready(cg_tp_conn_t *conn);
cg_status_t cg__ucx_test(cg_tp_req_t *req, size_t *size_p);

static inline void cg__ucx_put32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
    p[2] = (uint8_t)(v >> 16);
    p[3] = (uint8_t)(v >> 24);
}

/* ucx_conn.c */
/* The control sockets, listeners and the worker's fd in tp's epoll set. */
void cg__ucx_epoll_add(cg__ucx_tp_t *tp, int fd);
void cg__ucx_epoll_del(cg__ucx_tp_t *tp, int fd);
/* A conn over fd (connected or accepted) with its handshake prepared. */
cg__ucx_conn_t *cg__ucx_conn_new(cg__ucx_tp_t *tp, int fd, cg_hs_role_t role);
/* Closes fd and frees, whatever the state (no endpoint may be left). */
void cg__ucx_conn_free(cg__ucx_conn_t *conn);
/* After a completed handshake: peer id and address, endpoint; READY. */
cg_status_t cg__ucx_conn_establish(cg__ucx_conn_t *conn);
cg_status_t cg__ucx_connect(cg_transport_t *tp, const cg_tp_handle_t *handle,
                            cg_tp_conn_t **conn_p);
void cg__ucx_conn_close(cg_tp_conn_t *conn);
/* Moves a connector's handshake on; fails the conn on error. */
void cg__ucx_conn_hs_progress(cg__ucx_conn_t *conn);
/* Liveness and timeout checks of one handed-out conn. */
void cg__ucx_conn_sweep(cg__ucx_conn_t *conn, uint64_t now);
/* Fails every pending request with status and makes new ones fail. */
void cg__ucx_conn_fail(cg__ucx_conn_t *conn, cg_status_t status,
                       const char *why);
/* A closed conn whose endpoint close finished is freed; returns 1 then. */
int cg__ucx_conn_reap(cg__ucx_conn_t *conn);

/* ucx_mode.c */
/* Reads the host key and whether the context offers shared memory. */
void cg__ucx_mode_init(cg__ucx_tp_t *tp);
/* Writes flags and host key (CG_UCX_PREFIX_SIZE - 4 bytes); their size. */
size_t cg__ucx_mode_pack(const cg__ucx_tp_t *tp, uint8_t *p);
/* 1 when the peer's packed flags word carries the marker. */
int cg__ucx_mode_valid(const uint8_t *peer);
/* 1 when the peer (its packed flags and key) shares this host and both
 * offer shared memory: try an endpoint without UCX error handling. */
int cg__ucx_mode_want_none(const cg__ucx_tp_t *tp, const uint8_t *peer);
/* 1 when every lane of ep is a shared-memory transport; else 0 with the
 * first other transport's name in tl. Also the smallest message ep sends
 * by rendezvous. */
int cg__ucx_ep_shm_only(cg__ucx_tp_t *tp, ucp_ep_h ep, char *tl, size_t len,
                        size_t *rndv_min_p);
/* Before a conn without UCX error handling fails or closes with sends in
 * flight: tells the peer on the control socket that their buffers are
 * disowned. */
void cg__ucx_mode_abandon(cg__ucx_conn_t *conn);
/* After a receive of length completed on conn: 1 when the peer disowned
 * its sends (the data may come from a reused buffer). */
int cg__ucx_mode_abandoned(const cg__ucx_conn_t *conn, size_t length);

/* ucx_listen.c */
cg_status_t cg__ucx_listen(cg_transport_t *tp, cg_tp_handle_t *handle_p,
                           cg_tp_listener_t **listener_p);
cg_status_t cg__ucx_accept(cg_tp_listener_t *listener, cg_tp_conn_t **conn_p);
void cg__ucx_listener_close(cg_tp_listener_t *listener);
void cg__ucx_listener_progress(cg__ucx_listener_t *l);

/* ucx_req.c */
cg_status_t cg__ucx_status(ucs_status_t status);
cg_status_t cg__ucx_isend(cg_tp_conn_t *conn, const void *buf, size_t len,
                          uint32_t tag, cg_tp_req_t **req_p);
cg_status_t cg__ucx_irecv(cg_tp_conn_t *conn, void *buf, size_t cap,
                          uint32_t tag, cg_tp_req_t **req_p);
int cg__ucx_done(const cg_tp_req_t *req);
/* Posts the sends queued before the handshake finished, in order. */
void cg__ucx_req_post_queued(cg__ucx_conn_t *conn);
/* Ends a pending request (not yet RELEASED) with status; 1 when its UCX
 * part lives on after the cancel (a send, or a receive matched to a
 * rendezvous), see cg__ucx_conn_close. */
int cg__ucx_req_finish(cg__ucx_req_t *req, cg_status_t status);
/* Frees a request regardless of state (kept for reuse while the worker
 * lives). */
void cg__ucx_req_free(cg__ucx_req_t *req);
void cg__ucx_req_cache_drain(cg__ucx_tp_t *tp);

#endif
