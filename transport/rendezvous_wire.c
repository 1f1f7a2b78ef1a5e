/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The rendezvous wire: the ops' names, frame encoding and checks, blocking
 * send, the follower's receive of rank 0's answer (an ABORT turns into rank
 * 0's error), and rank 0's best-effort ABORT to every rank. Below
 * rendezvous.c and rendezvous_coll.c, which call it; it calls neither.
 * Layer: transport; calls transport/sock and core/base.
 */
#include "transport/rendezvous_impl.h"

#include <stdio.h>
#include <string.h>

#include "core/base/error.h"
#include "transport/sock.h"

const char *cg_rdv_op_name(cg_rdv_op_t op)
{
    switch (op) {
    case CG_RDV_OP_START: return "start";
    case CG_RDV_OP_ALLGATHER: return "allgather";
    case CG_RDV_OP_BCAST: return "bcast";
    case CG_RDV_OP_BARRIER: return "barrier";
    case CG_RDV_OP_ABORT: return "abort";
    }
    return "unknown";
}

void cg__rdv_encode(const cg__rdv_frame_t *f, uint8_t out[CG__RDV_HDR_SIZE])
{
    cg__rdv_put32(out, CG__RDV_MAGIC);
    out[4] = (uint8_t)f->op;
    out[5] = (uint8_t)(f->op >> 8);
    out[6] = out[7] = 0;
    cg__rdv_put32(out + 8, f->seq);
    cg__rdv_put32(out + 12, (uint32_t)f->root);
    cg__rdv_put64(out + 16, f->len);
}

cg_status_t cg__rdv_decode(const uint8_t in[CG__RDV_HDR_SIZE],
                           cg__rdv_frame_t *f_p)
{
    cg__rdv_frame_t f;
    uint32_t magic = cg__rdv_get32(in);

    if (magic != CG__RDV_MAGIC)
        return cg_error_set(CG_ERR_HANDSHAKE,
                            "bad frame magic 0x%08x, expected 0x%08x", magic,
                            CG__RDV_MAGIC);
    f.op = (uint16_t)(in[4] | (in[5] << 8));
    if (f.op == 0 || f.op > CG_RDV_OP_MAX || in[6] != 0 || in[7] != 0)
        return cg_error_set(CG_ERR_HANDSHAKE,
                            "bad frame: op %u (1..%d), flags 0x%02x%02x",
                            f.op, CG_RDV_OP_MAX, in[7], in[6]);
    f.seq = cg__rdv_get32(in + 8);
    f.root = (int32_t)cg__rdv_get32(in + 12);
    f.len = cg__rdv_get64(in + 16);
    *f_p = f;
    return CG_OK;
}

cg_status_t cg__rdv_send(int fd, const cg__rdv_frame_t *f, const void *body,
                         size_t body_len, uint64_t deadline_ns)
{
    uint8_t hdr[CG__RDV_HDR_SIZE];
    cg_status_t status;

    cg__rdv_encode(f, hdr);
    status = cg_sock_send_all(fd, hdr, sizeof(hdr), deadline_ns);
    if (status == CG_OK && body_len > 0)
        status = cg_sock_send_all(fd, body, body_len, deadline_ns);
    return status;
}

void cg__rdv_abort_all(cg_rdv_t *rdv, cg_status_t status, const char *text)
{
    cg__rdv_frame_t f = {CG_RDV_OP_ABORT, rdv->seq, (int32_t)status, 0};
    uint64_t deadline = cg_deadline_ns(100ull * 1000000ull);
    size_t len = strnlen(text, CG__RDV_TEXT_MAX);

    f.len = len;
    for (int r = 1; r < rdv->p.size; r++) {
        if (rdv->fds[r] >= 0)
            cg__rdv_send(rdv->fds[r], &f, text, len, deadline);
    }
}

uint64_t cg__rdv_follower_deadline(const cg_rdv_t *rdv)
{
    uint64_t t = rdv->p.timeout_ns;
    return cg_deadline_ns(t > UINT64_MAX / 2 ? t : t + t / 4);
}

/* The rest of an ABORT frame f: rank 0's status and reason. */
static cg_status_t cg__rdv_aborted(cg_rdv_t *rdv, const cg__rdv_frame_t *f,
                                   cg_rdv_op_t op, uint32_t seq,
                                   uint64_t deadline_ns)
{
    char text[CG__RDV_TEXT_MAX + 1];
    size_t tlen = f->len < CG__RDV_TEXT_MAX ? (size_t)f->len
                                            : CG__RDV_TEXT_MAX;
    cg_status_t status;

    status = cg_sock_recv_all(rdv->fd, text, tlen, deadline_ns);
    text[status == CG_OK ? tlen : 0] = '\0';
    status = (f->root < 0 && f->root > -200) ? (cg_status_t)f->root
                                             : CG_ERR_PEER_RESET;
    return cg_error_set(status, "rank 0 ended the bootstrap during %s (call "
                        "%u): %s", cg_rdv_op_name(op), seq, text);
}

cg_status_t cg__rdv_abort_pending(cg_rdv_t *rdv, cg_rdv_op_t op,
                                  uint32_t seq)
{
    uint64_t deadline = cg_deadline_ns(100ull * 1000000ull);
    uint8_t hdr[CG__RDV_HDR_SIZE];
    cg__rdv_frame_t f;

    if (cg_sock_recv_all(rdv->fd, hdr, sizeof(hdr), deadline) != CG_OK ||
        cg__rdv_decode(hdr, &f) != CG_OK || f.op != CG_RDV_OP_ABORT)
        return CG_OK;
    return cg__rdv_aborted(rdv, &f, op, seq, deadline);
}

cg_status_t cg__rdv_recv(cg_rdv_t *rdv, cg_rdv_op_t op, uint32_t seq,
                         uint64_t len, void *body, size_t body_len,
                         uint64_t deadline_ns)
{
    uint8_t hdr[CG__RDV_HDR_SIZE];
    char why[CG__RDV_TEXT_MAX];
    cg__rdv_frame_t f;
    cg_status_t status;

    status = cg_sock_recv_all(rdv->fd, hdr, sizeof(hdr), deadline_ns);
    if (status == CG_OK)
        status = cg__rdv_decode(hdr, &f);
    if (status != CG_OK)
        goto err_lost;
    if (f.op == CG_RDV_OP_ABORT)
        return cg__rdv_aborted(rdv, &f, op, seq, deadline_ns);
    if (f.op != op || f.seq != seq || f.len != len)
        return cg_error_set(CG_ERR_MISMATCH,
                            "rank 0 answered %s call %u with len %llu, rank "
                            "%d expected %s call %u with len %llu",
                            cg_rdv_op_name((cg_rdv_op_t)f.op), f.seq,
                            (unsigned long long)f.len, rdv->p.rank,
                            cg_rdv_op_name(op), seq, (unsigned long long)len);
    status = cg_sock_recv_all(rdv->fd, body, body_len, deadline_ns);
    if (status != CG_OK)
        goto err_lost;
    return CG_OK;

err_lost:
    snprintf(why, sizeof(why), "%s", cg_last_error());
    if (status == CG_ERR_TIMEOUT)
        return cg_error_set(status, "rank %d: %s (call %u) got no answer "
                            "from rank 0 at %s within %.1f s: %s",
                            rdv->p.rank, cg_rdv_op_name(op), seq, rdv->where,
                            (double)rdv->p.timeout_ns / 1e9, why);
    return cg_error_set(status, "rank %d lost rank 0 at %s during %s (call "
                        "%u): %s", rdv->p.rank, rdv->where,
                        cg_rdv_op_name(op), seq, why);
}

void cg__rdv_format_ranks(const cg_rdv_t *rdv,
                          bool (*missing)(const cg_rdv_t *rdv, int r),
                          char *list, size_t len)
{
    size_t off = 0;
    int listed = 0;

    list[0] = '\0';
    for (int r = 1; r < rdv->p.size; r++) {
        if (!missing(rdv, r))
            continue;
        if (listed < 16 && off < len)
            off += (size_t)snprintf(list + off, len - off, "%s%d",
                                    listed ? ", " : "", r);
        listed++;
    }
    if (listed > 16 && off < len)
        snprintf(list + off, len - off, " and %d more", listed - 16);
}
