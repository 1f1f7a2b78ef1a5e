/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Pure encoders/decoders of the TCP transport's wire formats: message
 * header, stripe slicing, listen handle. See tcp_wire.h for the layouts.
 * Layer: transport; calls transport/sock and core/base only.
 */
#include "transport/tcp_wire.h"

#include <string.h>

#include "core/base/error.h"

void cg_tcp_msg_encode(const cg_tcp_msg_hdr_t *hdr,
                       uint8_t out[CG_TCP_MSG_HDR_SIZE])
{
    for (int i = 0; i < 4; i++) {
        out[i] = (uint8_t)(hdr->tag >> (8 * i));
        out[4 + i] = (uint8_t)(CG_TCP_MSG_MARKER >> (8 * i));
    }
    for (int i = 0; i < 8; i++)
        out[8 + i] = (uint8_t)(hdr->len >> (8 * i));
}

cg_status_t cg_tcp_msg_decode(const uint8_t *buf, size_t len,
                              cg_tcp_msg_hdr_t *hdr_p)
{
    uint32_t tag = 0, marker = 0;
    uint64_t mlen = 0;

    if (len < CG_TCP_MSG_HDR_SIZE)
        return cg_error_set(CG_ERR_IO, "message header of %zu bytes, "
                            "expected %d", len, CG_TCP_MSG_HDR_SIZE);
    for (int i = 0; i < 4; i++) {
        tag |= (uint32_t)buf[i] << (8 * i);
        marker |= (uint32_t)buf[4 + i] << (8 * i);
    }
    for (int i = 0; i < 8; i++)
        mlen |= (uint64_t)buf[8 + i] << (8 * i);
    if (marker != CG_TCP_MSG_MARKER)
        return cg_error_set(CG_ERR_IO,
                            "message header marker 0x%08x, expected "
                            "0x%08x: stream corrupted", marker,
                            CG_TCP_MSG_MARKER);
    if (mlen > CG_TCP_MSG_MAX)
        return cg_error_set(CG_ERR_IO,
                            "message length %llu exceeds the limit %llu",
                            (unsigned long long)mlen,
                            (unsigned long long)CG_TCP_MSG_MAX);
    hdr_p->tag = tag;
    hdr_p->len = mlen;
    return CG_OK;
}

void cg_tcp_slice(uint64_t len, int nsocks, int k, uint64_t *off_p,
                  uint64_t *slen_p)
{
    uint64_t per, off;

    if (nsocks <= 1 || len < CG_TCP_STRIPE_MIN) {
        *off_p = 0;
        *slen_p = (k == 0) ? len : 0;
        return;
    }
    per = (len + (uint64_t)nsocks - 1) / (uint64_t)nsocks;
    per = (per + CG_TCP_STRIPE_ALIGN - 1) / CG_TCP_STRIPE_ALIGN *
          CG_TCP_STRIPE_ALIGN;
    off = per * (uint64_t)k;
    if (off >= len) {
        *off_p = len;
        *slen_p = 0;
        return;
    }
    *off_p = off;
    *slen_p = (len - off < per) ? len - off : per;
}

void cg_tcp_handle_encode(const cg_sockaddr_t *addr, uint8_t *out,
                          size_t out_len)
{
    memset(out, 0, out_len);
    out[0] = CG_TCP_HANDLE_MAGIC;
    out[1] = CG_TCP_HANDLE_VERSION;
    cg_sockaddr_pack(addr, out + 4);
}

cg_status_t cg_tcp_handle_decode(const uint8_t *in, size_t in_len,
                                 cg_sockaddr_t *addr_p)
{
    if (in_len < 4 + CG_SOCKADDR_PACKED_SIZE)
        return cg_error_set(CG_ERR_INVALID_PARAM,
                            "socket handle of %zu bytes, expected %d", in_len,
                            4 + CG_SOCKADDR_PACKED_SIZE);
    if (in[0] != CG_TCP_HANDLE_MAGIC || in[1] != CG_TCP_HANDLE_VERSION)
        return cg_error_set(CG_ERR_INVALID_PARAM,
                            "not a socket transport handle (bytes 0x%02x "
                            "0x%02x, expected 0x%02x 0x%02x): was it made by "
                            "another transport (CG_TRANSPORT)?", in[0], in[1],
                            CG_TCP_HANDLE_MAGIC, CG_TCP_HANDLE_VERSION);
    return cg_sockaddr_unpack(in + 4, addr_p);
}
