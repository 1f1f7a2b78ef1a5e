/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Internal objects of the TCP transport (tcp.c, tcp_conn.c, tcp_io.c):
 * transport, listener, connection, socket, request, fragment, and the small
 * intrusive list they are chained with. Every object is allocated through
 * params.mem (CONTROL; unexpected payloads STAGING).
 * Layer: transport; internal to the tcp_*.c files.
 */
#ifndef CG_TRANSPORT_TCP_IMPL_H
#define CG_TRANSPORT_TCP_IMPL_H

#include <net/if.h>
#include <poll.h>
#include <stdbool.h>
#include <stddef.h>

#include "core/base/list.h"
#include "transport/handshake.h"
#include "transport/sock.h"
#include "transport/tcp_wire.h"
#include "transport/transport_impl.h"

/* Unexpected (not yet received) bytes buffered per connection; beyond it
 * reading pauses on that connection until a matching receive is posted. */
#define CG_TCP_UNEXP_MAX (64ull << 20)
/* Accepted sockets still in their handshake, per listener; when all are
 * taken, a new one evicts the oldest (tcp_conn.c). */
#define CG_TCP_PENDING_MAX 256
/* A handshake younger than this is never evicted: a real peer's header
 * gets that long to arrive, while a flood waits in the backlog. */
#define CG_TCP_EVICT_GRACE_NS (50ull * 1000000ull)
/* The listen backlog (the kernel caps it at net.core.somaxconn): a flood
 * waits there instead of overflowing it, which would delay a real peer's
 * connect by the kernel's SYN retransmits (1 s, 3 s, ...). */
#define CG_TCP_BACKLOG 4096
/* Bytes of payload a discarded (truncated) message is drained through. */
#define CG_TCP_SCRATCH 16384
/* Socket 0's read-ahead: headers and small payloads, many per recv. */
#define CG_TCP_RBUF 65536
/* tcp_cache.c: staging buffers of up to CG_TCP_STAGE_BIG bytes come in
 * power-of-two classes from CG_TCP_STAGE_MIN (so at most twice the
 * message); free ones are kept for reuse up to CG_TCP_STAGE_CACHE bytes
 * per transport, and up to CG_TCP_REQ_CACHE request objects. */
#define CG_TCP_STAGE_MIN 64
#define CG_TCP_STAGE_CLASSES 15 /* 64 B .. 1 MiB */
#define CG_TCP_STAGE_BIG ((size_t)CG_TCP_STAGE_MIN << (CG_TCP_STAGE_CLASSES - 1))
#define CG_TCP_STAGE_CACHE (8u << 20)
#define CG_TCP_REQ_CACHE 64

typedef enum {
    CG_TCP_REQ_SEND,
    CG_TCP_REQ_RECV,
    CG_TCP_REQ_UNEXP /* an unexpected message buffered in STAGING */
} cg__tcp_req_kind_t;

struct cg__tcp_req;

/* A contiguous piece of one message on one socket. */
typedef struct cg__tcp_frag {
    cg_list_t link;     /* in its socket's txq or rxq */
    struct cg__tcp_req *req; /* owner: SEND, RECV or UNEXP */
    uint8_t *buf;           /* NULL: drain into the conn's scratch */
    size_t len;
    size_t done;            /* bytes moved, header included (tx) */
    uint8_t hdr[CG_TCP_MSG_HDR_SIZE];
    size_t hdr_len;         /* tx only: 0, or the header sent first */
} cg__tcp_frag_t;

typedef struct cg__tcp_req {
    cg_tp_req_t super;
    cg_list_t link;     /* SEND/RECV: conn->active, then tp->done;
                               UNEXP: conn->unexp for its whole life */
    cg_list_t plink;    /* conn->posted while an unmatched recv */
    struct cg__tcp_tp *tp;
    struct cg__tcp_conn *conn; /* NULL once finished */
    cg__tcp_req_kind_t kind;
    cg_status_t status;     /* CG_INPROGRESS until finished */
    uint32_t tag;
    uint8_t *buf;           /* user buffer, or the STAGING copy (UNEXP) */
    size_t cap;             /* recv capacity / send length */
    size_t len;             /* message length once known */
    int frags_left;
    struct cg__tcp_req *match; /* UNEXP <-> RECV still arriving */
    bool matched;           /* UNEXP handed to a receive (match) */
    bool orphan;            /* UNEXP nobody will read: freed when drained
                               (a truncated receive's payload) */
    size_t alloc_size;
    int nfrags;
    cg__tcp_frag_t frags[];
} cg__tcp_req_t;

typedef struct cg__tcp_sock {
    int fd;
    cg_list_t txq;
    cg_list_t rxq;
    cg_hs_t hs;             /* connector side, while connecting */
    bool hs_done;
    bool eof;               /* the peer closed this socket (orderly) */
} cg__tcp_sock_t;

typedef enum {
    CG_TCP_CONN_CONNECTING, /* connector: handshakes running */
    CG_TCP_CONN_FORMING,    /* acceptor: waiting for all nsocks sockets */
    CG_TCP_CONN_READY,
    CG_TCP_CONN_FAILED
} cg__tcp_conn_state_t;

typedef struct cg__tcp_conn {
    cg_tp_conn_t super;
    cg_list_t link;     /* tp->conns, or listener forming/ready */
    struct cg__tcp_tp *tp;
    cg__tcp_conn_state_t state;
    cg_status_t error;      /* of a FAILED conn */
    uint32_t conn_id;
    int nsocks;
    int nsocks_done;        /* handshakes completed */
    cg__tcp_sock_t *socks;
    cg_sockaddr_t peer;
    cg_list_t active;   /* unfinished SEND and matched RECV requests */
    cg_list_t posted;   /* unmatched RECV, posting order */
    cg_list_t unexp;    /* UNEXP, arrival order */
    size_t unexp_bytes;
    bool held;              /* held_hdr read but not yet placeable */
    cg_tcp_msg_hdr_t held_hdr;
    uint64_t last_ns;       /* last byte moved, or first request posted */
    uint64_t deadline_ns;   /* CONNECTING / FORMING bound */
    char reason[192];       /* why a FAILED conn failed */
    uint8_t scratch[CG_TCP_SCRATCH];
    size_t rb_off, rb_len;  /* unparsed bytes: rbuf[rb_off .. rb_len) */
    uint8_t rbuf[CG_TCP_RBUF];
} cg__tcp_conn_t;

typedef struct cg__tcp_pend {
    cg_list_t link;
    int fd;
    cg_sockaddr_t peer;
    uint64_t born_ns;       /* accepted at */
    cg_hs_t hs;
} cg__tcp_pend_t;

typedef struct cg__listener {
    cg_tp_listener_t super;
    cg_list_t link;     /* tp->listeners */
    int fd;
    cg_sockaddr_t addr;
    cg_list_t pending;  /* cg__tcp_pend_t, oldest first */
    int npending;
    cg_hs_limit_t refusals; /* rate limit of the refusal lines */
    char where[96];         /* "listener on ADDR", for those lines */
    cg_list_t forming;  /* cg__tcp_conn_t, FORMING */
    cg_list_t ready;    /* cg__tcp_conn_t, READY, not yet accepted */
} cg__tcp_listener_t;

typedef struct cg__tcp_tp {
    cg_transport_t super;
    cg_list_t conns;
    cg_list_t listeners;
    cg_list_t done;     /* finished requests not yet tested */
    cg_sockaddr_t bind_addr;
    char ifname[IF_NAMESIZE];
    uint32_t conn_seq;
    struct pollfd *pfds;    /* cg_tp_wait's poll set */
    size_t pfds_cap;
    void *stage_free[CG_TCP_STAGE_CLASSES]; /* free staging, per class */
    size_t stage_cached;    /* bytes in stage_free */
    cg_list_t req_cache;    /* free request objects of req_size bytes */
    int nreq_cached;
    size_t req_size;        /* a request with params.nsocks fragments */
} cg__tcp_tp_t;

/* Allocation through params.mem (inline: every tcp_*.c file allocates,
 * and none calls tcp.c, the top of them). */
static inline void *cg__tcp_alloc(cg__tcp_tp_t *tp, cg_mem_cat_t cat,
                                  size_t size)
{
    return cg_mem_alloc(&tp->super.params.mem, cat, size);
}

static inline void cg__tcp_free(cg__tcp_tp_t *tp, cg_mem_cat_t cat,
                                void *ptr, size_t size)
{
    cg_mem_free(&tp->super.params.mem, cat, ptr, size);
}

/* tcp_cache.c: reuse of staging buffers and request objects. A staging
 * buffer is got and put with the message's length (> 0). */
void *cg__tcp_stage_get(cg__tcp_tp_t *tp, size_t len);
void cg__tcp_stage_put(cg__tcp_tp_t *tp, void *buf, size_t len);
void *cg__tcp_req_get(cg__tcp_tp_t *tp, size_t size);
void cg__tcp_req_put(cg__tcp_tp_t *tp, cg__tcp_req_t *req);
/* Frees everything cached (destroy). */
void cg__tcp_cache_drain(cg__tcp_tp_t *tp);

/* tcp_progress.c: socket progress on READY conns. */
cg_status_t cg__tcp_conn_io(cg__tcp_conn_t *conn);
/* Sends only (the eager path of a new send). */
void cg__tcp_conn_tx(cg__tcp_conn_t *conn);
/* Poll events the conn's socket i waits for. */
short cg__tcp_sock_events(const cg__tcp_conn_t *conn, int i);

/* tcp_io.c: requests and matching. */
/* Places an incoming header: a posted receive, else a new UNEXP;
 * CG_INPROGRESS when it cannot be placed yet (bound or memory). */
cg_status_t cg__tcp_place(cg__tcp_conn_t *conn, const cg_tcp_msg_hdr_t *hdr);
/* A fragment moved all its bytes: unlink it, maybe finish its owner. */
void cg__tcp_frag_done(cg__tcp_frag_t *frag);
/* Queues a send; the caller (tcp.c) sends it eagerly with cg__tcp_conn_tx
 * on a READY conn. */
cg_status_t cg__tcp_post_send(cg__tcp_conn_t *conn, const void *buf,
                              size_t len, uint32_t tag, cg__tcp_req_t **req_p);
cg_status_t cg__tcp_post_recv(cg__tcp_conn_t *conn, void *buf, size_t cap,
                              uint32_t tag, cg__tcp_req_t **req_p);
/* Finishes req with status: moves it to tp->done (user requests) or frees
 * it (UNEXP). */
void cg__tcp_req_finish(cg__tcp_req_t *req, cg_status_t status);
void cg__tcp_req_free(cg__tcp_req_t *req);
bool cg__tcp_conn_busy(const cg__tcp_conn_t *conn);

/* Fails every request on conn with status, closes nothing; logs once. */
void cg__tcp_conn_fail(cg__tcp_conn_t *conn, cg_status_t status);

/* tcp_conn.c: connection lifecycle. */
cg_status_t cg__tcp_conn_progress(cg__tcp_conn_t *conn);
cg_status_t cg__tcp_listener_progress(cg__tcp_listener_t *l);
cg_status_t cg__tcp_connect(cg_transport_t *super, const cg_tp_handle_t *handle,
                            cg_tp_conn_t **conn_p);
cg_status_t cg__tcp_listen(cg_transport_t *super, cg_tp_handle_t *handle_p,
                           cg_tp_listener_t **listener_p);
cg_status_t cg__tcp_accept(cg_tp_listener_t *super, cg_tp_conn_t **conn_p);
void cg__tcp_listener_close(cg_tp_listener_t *super);
void cg__tcp_conn_destroy(cg__tcp_conn_t *conn, cg_status_t status);

extern const cg_transport_ops_t cg__tcp_ops;

#endif
