/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The TCP rendezvous, collective half: every rank sends its part to rank 0,
 * which gathers from all peers at once (poll, so a dead rank is seen at
 * once and a slow one is named on timeout), checks that all called the same
 * collective, and answers everyone; on failure it sends ABORT with the
 * reason, so every rank fails with the same cause instead of hanging.
 * Layer: transport; calls transport/sock and core/base.
 */
#include "transport/rendezvous_impl.h"

#include <poll.h>
#include <stdio.h>
#include <string.h>

#include "core/base/error.h"
#include "transport/sock.h"

/* Bytes rank r sends to rank 0 for one collective. */
static size_t cg__rdv_part_len(cg_rdv_op_t op, int root, int r, size_t len)
{
    if (op == CG_RDV_OP_ALLGATHER)
        return len;
    return (op == CG_RDV_OP_BCAST && r == root) ? len : 0;
}

static size_t cg__rdv_result_len(const cg_rdv_t *rdv, cg_rdv_op_t op,
                                 size_t len)
{
    if (op == CG_RDV_OP_ALLGATHER)
        return (size_t)rdv->p.size * len;
    return (op == CG_RDV_OP_BCAST) ? len : 0;
}

/* Rank > 0: send our part, wait for rank 0's answer. */
static cg_status_t cg__rdv_follow(cg_rdv_t *rdv, cg_rdv_op_t op, int root,
                                  const void *mine, void *out, size_t len)
{
    cg__rdv_frame_t f = {(uint16_t)op, rdv->seq, root, len};
    char why[CG__RDV_TEXT_MAX];
    cg_status_t status;

    status = cg__rdv_send(rdv->fd, &f, mine,
                          cg__rdv_part_len(op, root, rdv->p.rank, len),
                          cg_deadline_ns(rdv->p.timeout_ns));
    if (status != CG_OK) {
        snprintf(why, sizeof(why), "%s", cg_last_error());
        cg_status_t aborted = cg__rdv_abort_pending(rdv, op, rdv->seq);
        if (aborted != CG_OK)
            return aborted;
        return cg_error_set(status, "rank %d lost rank 0 at %s during %s "
                            "(call %u): %s", rdv->p.rank, rdv->where,
                            cg_rdv_op_name(op), rdv->seq, why);
    }
    return cg__rdv_recv(rdv, op, rdv->seq, len, out,
                        cg__rdv_result_len(rdv, op, len),
                        cg__rdv_follower_deadline(rdv));
}

static bool cg__rdv_part_missing(const cg_rdv_t *rdv, int r)
{
    return !rdv->rx[r].done;
}

/* Rank 0: CG_ERR_TIMEOUT naming the ranks whose part is missing. */
static cg_status_t cg__rdv_late(cg_rdv_t *rdv, cg_rdv_op_t op)
{
    char list[256];

    cg__rdv_format_ranks(rdv, cg__rdv_part_missing, list, sizeof(list));
    return cg_error_set(CG_ERR_TIMEOUT,
                        "%s (call %u) timed out after %.1f s waiting for "
                        "rank(s) %s", cg_rdv_op_name(op), rdv->seq,
                        (double)rdv->p.timeout_ns / 1e9, list);
}

/* Rank 0: one step of receiving rank r's frame into its place in out. */
static cg_status_t cg__rdv_rx_step(cg_rdv_t *rdv, int r, cg_rdv_op_t op,
                                   int root, uint8_t *out, size_t len)
{
    cg__rdv_rx_t *rx = &rdv->rx[r];
    uint8_t *dst = (op == CG_RDV_OP_ALLGATHER) ? out + (size_t)r * len : out;
    cg__rdv_frame_t f;
    cg_status_t status;

    if (rx->hdr_got < CG__RDV_HDR_SIZE) {
        status = cg_sock_recv_some(rdv->fds[r], rx->hdr + rx->hdr_got,
                                   CG__RDV_HDR_SIZE - rx->hdr_got,
                                   &rx->hdr_got);
        if (status != CG_OK || rx->hdr_got < CG__RDV_HDR_SIZE)
            return status;
        status = cg__rdv_decode(rx->hdr, &f);
        if (status != CG_OK)
            return status;
        if (f.op != op || f.seq != rdv->seq || f.len != len ||
            (op == CG_RDV_OP_BCAST && f.root != root))
            return cg_error_set(CG_ERR_MISMATCH,
                                "rank %d called %s(len %llu, root %d) as "
                                "bootstrap call %u; rank 0 called %s(len "
                                "%zu, root %d) as call %u", r,
                                cg_rdv_op_name((cg_rdv_op_t)f.op),
                                (unsigned long long)f.len, f.root, f.seq,
                                cg_rdv_op_name(op), len, root, rdv->seq);
        rx->body_len = cg__rdv_part_len(op, root, r, len);
    }
    if (rx->body_got < rx->body_len) {
        status = cg_sock_recv_some(rdv->fds[r], dst + rx->body_got,
                                   rx->body_len - rx->body_got,
                                   &rx->body_got);
        if (status != CG_OK)
            return status;
    }
    rx->done = (rx->body_got == rx->body_len);
    return CG_OK;
}

static cg_status_t cg__rdv_gather(cg_rdv_t *rdv, cg_rdv_op_t op, int root,
                                  uint8_t *out, size_t len,
                                  struct pollfd *pfd, int *who)
{
    uint64_t deadline = cg_deadline_ns(rdv->p.timeout_ns);
    char why[CG__RDV_TEXT_MAX];
    int pending = rdv->p.size - 1;
    cg_status_t status;

    memset(rdv->rx, 0, (size_t)rdv->p.size * sizeof(*rdv->rx));
    while (pending > 0) {
        uint64_t now = cg_now_ns(), ms;
        int n = 0;

        if (now >= deadline)
            return cg__rdv_late(rdv, op);
        for (int r = 1; r < rdv->p.size; r++) {
            if (!rdv->rx[r].done) {
                pfd[n] = (struct pollfd){.fd = rdv->fds[r], .events = POLLIN};
                who[n++] = r;
            }
        }
        ms = (deadline - now) / 1000000ull + 1;
        poll(pfd, (nfds_t)n, ms > 1000 ? 1000 : (int)ms);
        for (int i = 0; i < n; i++) {
            if (pfd[i].revents == 0)
                continue;
            status = cg__rdv_rx_step(rdv, who[i], op, root, out, len);
            if (status == CG_ERR_PEER_RESET) {
                snprintf(why, sizeof(why), "%s", cg_last_error());
                return cg_error_set(status, "rank %d left during %s (call "
                                    "%u): the process exited or crashed "
                                    "(%s)", who[i], cg_rdv_op_name(op),
                                    rdv->seq, why);
            }
            if (status != CG_OK)
                return status;
            pending -= rdv->rx[who[i]].done ? 1 : 0;
        }
    }
    return CG_OK;
}

/* Rank 0: gather every part, then answer every rank. */
static cg_status_t cg__rdv_lead(cg_rdv_t *rdv, cg_rdv_op_t op, int root,
                                const void *mine, void *out, size_t len)
{
    size_t n = (size_t)rdv->p.size;
    size_t pfd_size = n * (sizeof(struct pollfd) + sizeof(int));
    cg__rdv_frame_t f = {(uint16_t)op, rdv->seq, root, len};
    char why[CG__RDV_TEXT_MAX];
    struct pollfd *pfd;
    cg_status_t status;
    uint64_t deadline;

    if (cg__rdv_part_len(op, root, 0, len) > 0 && mine != out)
        memmove(out, mine, len);
    pfd = cg_mem_alloc(&rdv->p.mem, CG_MEM_CAT_CONTROL, pfd_size);
    if (pfd == NULL)
        return CG_ERR_NO_MEMORY;
    status = cg__rdv_gather(rdv, op, root, out, len, pfd, (int *)(pfd + n));
    cg_mem_free(&rdv->p.mem, CG_MEM_CAT_CONTROL, pfd, pfd_size);
    deadline = cg_deadline_ns(rdv->p.timeout_ns);
    for (int r = 1; r < rdv->p.size && status == CG_OK; r++) {
        status = cg__rdv_send(rdv->fds[r], &f, out,
                              cg__rdv_result_len(rdv, op, len), deadline);
        if (status != CG_OK) {
            snprintf(why, sizeof(why), "%s", cg_last_error());
            status = cg_error_set(status, "rank %d left during %s (call %u)"
                                  ": %s", r, cg_rdv_op_name(op), rdv->seq,
                                  why);
        }
    }
    if (status != CG_OK) {
        snprintf(why, sizeof(why), "%s", cg_last_error());
        cg__rdv_abort_all(rdv, status, why);
        return cg_error_set(status, "%s", why);
    }
    return CG_OK;
}

cg_status_t cg_rdv_collective(cg_rdv_t *rdv, cg_rdv_op_t op, int root,
                              const void *mine, void *out, size_t len)
{
    if (op != CG_RDV_OP_BCAST)
        root = 0;
    rdv->seq++;
    if (rdv->p.rank == 0)
        return cg__rdv_lead(rdv, op, root, mine, out, len);
    return cg__rdv_follow(rdv, op, root, mine, out, len);
}
