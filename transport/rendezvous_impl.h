/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Internals shared by rendezvous.c (setup: serve, dial),
 * rendezvous_coll.c (the collectives) and rendezvous_wire.c (frames).
 * Private to the rendezvous.
 * Layer: transport.
 */
#ifndef CG_TRANSPORT_RENDEZVOUS_IMPL_H
#define CG_TRANSPORT_RENDEZVOUS_IMPL_H

#include <stdbool.h>
#include <stdint.h>

#include "transport/rendezvous.h"

#define CG__RDV_MAGIC 0x53424743u /* "CGBS" as bytes on the wire */
#define CG__RDV_HDR_SIZE 24
#define CG__RDV_TEXT_MAX 512

typedef struct cg__rdv_frame {
    uint16_t op;
    uint32_t seq;
    int32_t root; /* ABORT: the failing status */
    uint64_t len;
} cg__rdv_frame_t;

/* Rank 0's receive state for one peer during a collective. */
typedef struct cg__rdv_rx {
    uint8_t hdr[CG__RDV_HDR_SIZE];
    size_t hdr_got;
    size_t body_len;
    size_t body_got;
    bool done;
} cg__rdv_rx_t;

struct cg_rdv {
    cg_rdv_params_t p;
    char host[256];
    char where[320];     /* "127.0.0.1:4242 (MASTER_ADDR)" for messages */
    int fd;              /* rank > 0: the socket to rank 0 */
    int *fds;            /* rank 0: fds[r] for r >= 1, -1 when closed */
    cg__rdv_rx_t *rx;    /* rank 0: per-peer receive state */
    uint32_t seq;        /* collectives run so far */
    uint64_t cookie;
};

/* Explicit little-endian integers on the wire. */
static inline void cg__rdv_put32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static inline void cg__rdv_put64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static inline uint32_t cg__rdv_get32(const uint8_t *p)
{
    uint32_t v = 0;
    for (int i = 0; i < 4; i++)
        v |= (uint32_t)p[i] << (8 * i);
    return v;
}

static inline uint64_t cg__rdv_get64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v |= (uint64_t)p[i] << (8 * i);
    return v;
}

void cg__rdv_encode(const cg__rdv_frame_t *f, uint8_t out[CG__RDV_HDR_SIZE]);
/* Checks magic, op range and flags. CG_ERR_HANDSHAKE on garbage. */
cg_status_t cg__rdv_decode(const uint8_t in[CG__RDV_HDR_SIZE],
                           cg__rdv_frame_t *f_p);
/* Header + body, blocking until sent or the deadline. */
cg_status_t cg__rdv_send(int fd, const cg__rdv_frame_t *f, const void *body,
                         size_t body_len, uint64_t deadline_ns);
/* Rank > 0: the next frame from rank 0, which must be op (or ABORT, which
 * turns into rank 0's error) with sequence seq and len, its body
 * (body_len bytes) into body. */
cg_status_t cg__rdv_recv(cg_rdv_t *rdv, cg_rdv_op_t op, uint32_t seq,
                         uint64_t len, void *body, size_t body_len,
                         uint64_t deadline_ns);
/* Rank > 0, after a failed send: rank 0's ABORT when one is already
 * waiting on the socket (its status; cg_last_error() says why), else
 * CG_OK. */
cg_status_t cg__rdv_abort_pending(cg_rdv_t *rdv, cg_rdv_op_t op,
                                  uint32_t seq);
/* Rank 0: best-effort ABORT with status and text to every open peer. */
void cg__rdv_abort_all(cg_rdv_t *rdv, cg_status_t status, const char *text);
/* Rank > 0 waits this much longer than rank 0, so rank 0's verdict (which
 * rank is missing) arrives before a follower's own timeout. */
uint64_t cg__rdv_follower_deadline(const cg_rdv_t *rdv);

/* Formats the ranks 1..size-1 for which missing(rdv, r) holds as "2, 5, 7"
 * (the first 16, then "and N more") into list, for timeout messages. */
void cg__rdv_format_ranks(const cg_rdv_t *rdv,
                          bool (*missing)(const cg_rdv_t *rdv, int r),
                          char *list, size_t len);

#endif
