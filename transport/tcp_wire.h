/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The TCP transport's wire formats, as pure functions (no I/O, no state) so
 * the fuzzer and units can reach them: the 16-byte message header, the
 * split of a large message into per-socket slices, and the 128-byte listen
 * handle. Layer: transport; calls transport/sock and core/base only.
 *
 * Message header (little-endian): 0 tag u32, 4 marker u32 "CGMS",
 * 8 length u64 (<= CG_TCP_MSG_MAX). The header and the whole payload of a
 * small message, or slice 0 of a striped one, travel on socket 0; slice k
 * of a striped message on socket k. Headers are strictly ordered.
 *
 * Listen handle: 0 'T', 1 handle version, 2..3 zero, 4..27 packed sockaddr
 * (cg_sockaddr_pack), the rest zero.
 */
#ifndef CG_TRANSPORT_TCP_WIRE_H
#define CG_TRANSPORT_TCP_WIRE_H

#include <stddef.h>
#include <stdint.h>

#include "collguard/status.h"
#include "transport/sock.h"

#define CG_TCP_MSG_HDR_SIZE 16
#define CG_TCP_MSG_MARKER 0x534d4743u /* "CGMS" */
#define CG_TCP_MSG_MAX (1ull << 40)   /* 1 TiB: larger is corruption */
/* Messages at least this large are striped across the sockets. */
#define CG_TCP_STRIPE_MIN (256u << 10)
#define CG_TCP_STRIPE_ALIGN 4096u

#define CG_TCP_HANDLE_MAGIC 'T'
#define CG_TCP_HANDLE_VERSION 1

typedef struct cg_tcp_msg_hdr {
    uint32_t tag;
    uint64_t len;
} cg_tcp_msg_hdr_t;

void cg_tcp_msg_encode(const cg_tcp_msg_hdr_t *hdr,
                       uint8_t out[CG_TCP_MSG_HDR_SIZE]);
/* CG_ERR_IO with the reason when the marker or the length is invalid. */
cg_status_t cg_tcp_msg_decode(const uint8_t *buf, size_t len,
                              cg_tcp_msg_hdr_t *hdr_p);

/* Slice k (0 <= k < nsocks) of a message of len bytes: offset and length
 * (possibly 0). Slices are contiguous, in order, and cover [0, len). */
void cg_tcp_slice(uint64_t len, int nsocks, int k, uint64_t *off_p,
                  uint64_t *slen_p);

void cg_tcp_handle_encode(const cg_sockaddr_t *addr, uint8_t *out,
                          size_t out_len);
cg_status_t cg_tcp_handle_decode(const uint8_t *in, size_t in_len,
                                 cg_sockaddr_t *addr_p);

#endif
