/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer target for the TCP rendezvous wire (transport/rendezvous_*.c):
 * the frame decoder (decode -> encode must round-trip), then one
 * collective with the input as the peer's bytes through a socketpair:
 * rank 0 gathering a follower's frame and part, or a follower reading
 * rank 0's answer (an ABORT's status and text included). Input: byte 0
 * picks the side and the collective, byte 1 its length; the rest is what
 * the peer sent before it closed. Built only with clang (tests/fuzz).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "transport/rendezvous_impl.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void *cg__fz_alloc(void *arg, cg_mem_cat_t cat, size_t size)
{
    (void)arg;
    (void)cat;
    return malloc(size);
}

static void cg__fz_free(void *arg, cg_mem_cat_t cat, void *p, size_t size)
{
    (void)arg;
    (void)cat;
    (void)size;
    free(p);
}

static void cg__fz_decode(const uint8_t *data, size_t size)
{
    uint8_t again[CG__RDV_HDR_SIZE];
    cg__rdv_frame_t f;

    if (size < CG__RDV_HDR_SIZE || cg__rdv_decode(data, &f) != CG_OK)
        return;
    if (f.op == 0 || f.op > CG_RDV_OP_MAX)
        abort(); /* decode accepted an op the rendezvous does not have */
    cg__rdv_encode(&f, again);
    if (memcmp(again, data, CG__RDV_HDR_SIZE) != 0)
        abort(); /* decode accepted what encode would not produce */
}

/* One collective of a 2-rank rendezvous whose other rank is the input. */
static void cg__fz_collective(uint8_t mode, uint8_t len8, const uint8_t *peer,
                              size_t peer_len)
{
    static const cg_rdv_op_t ops[] = {CG_RDV_OP_ALLGATHER, CG_RDV_OP_BCAST,
                                      CG_RDV_OP_BARRIER};
    cg_rdv_op_t op = ops[(mode >> 1) % 3];
    int rank = mode & 1, root = (mode >> 3) & 1, fds[2] = {-1, -1}, sv[2];
    size_t len = op == CG_RDV_OP_BARRIER ? 0 : len8 % 64;
    uint8_t mine[64] = {0}, out[128];
    cg__rdv_rx_t rx[2];
    cg_rdv_t rdv;
    cg_status_t st;

    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv) != 0)
        return;
    if (write(sv[0], peer, peer_len) != (ssize_t)peer_len) {
        close(sv[0]);
        close(sv[1]);
        return;
    }
    shutdown(sv[0], SHUT_WR);
    memset(&rdv, 0, sizeof(rdv));
    rdv.p = (cg_rdv_params_t){.rank = rank, .size = 2, .host = "fuzz",
                              .timeout_ns = 200ull * 1000000ull,
                              .mem = {cg__fz_alloc, cg__fz_free, NULL},
                              .listen_fd = -1};
    snprintf(rdv.where, sizeof(rdv.where), "fuzz:0 (socketpair)");
    rdv.fd = rank == 0 ? -1 : sv[1];
    fds[1] = rank == 0 ? sv[1] : -1;
    rdv.fds = rank == 0 ? fds : NULL;
    rdv.rx = rank == 0 ? rx : NULL;
    st = cg_rdv_collective(&rdv, op, root, mine, out, len);
    if (st == CG_OK && rank == 0 && rx[1].body_got != rx[1].body_len)
        abort(); /* rank 0 answered before the part arrived */
    close(sv[0]);
    close(sv[1]);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    cg__fz_decode(data, size);
    if (size >= 2 && size <= 4096)
        cg__fz_collective(data[0], data[1], data + 2, size - 2);
    return 0;
}
