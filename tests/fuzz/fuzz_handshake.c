/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer target for everything the transports decode from the wire: the
 * handshake header, the TCP message header and the listen handle (decode ->
 * encode must round-trip), and the acceptor's handshake state machine fed
 * the input through a socketpair. Built only with clang (tests/fuzz).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "transport/handshake.h"
#include "transport/sock.h"
#include "transport/tcp_wire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void fuzz_decoders(const uint8_t *data, size_t size)
{
    uint8_t again[CG_HS_HDR_SIZE];
    cg_tcp_msg_hdr_t m;
    cg_sockaddr_t a;
    cg_hs_hdr_t h;
    char str[CG_SOCKADDR_STRLEN];

    if (cg_hs_decode(data, size, &h) == CG_OK) {
        cg_hs_encode(&h, again);
        if (memcmp(again, data, CG_HS_HDR_SIZE) != 0)
            abort(); /* decode accepted what encode would not produce */
        (void)cg_hs_check(&h, CG_HS_KIND_TCP_DATA, 0);
    }
    if (cg_tcp_msg_decode(data, size, &m) == CG_OK) {
        cg_tcp_msg_encode(&m, again);
        if (memcmp(again, data, CG_TCP_MSG_HDR_SIZE) != 0 ||
            m.len > CG_TCP_MSG_MAX)
            abort();
    }
    if (cg_tcp_handle_decode(data, size, &a) == CG_OK)
        cg_sockaddr_str(&a, str, sizeof(str));
}

/* The acceptor reads the input as a peer's bytes, then the peer closes. */
static void fuzz_acceptor(const uint8_t *data, size_t size)
{
    cg_hs_hdr_t local = {.kind = CG_HS_KIND_TCP_DATA, .cookie = 0};
    cg_status_t st;
    cg_hs_t *hs;
    int sv[2];

    if (size > 8192 ||
        socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv) != 0)
        return;
    hs = malloc(sizeof(*hs));
    if (hs == NULL || write(sv[0], data, size) != (ssize_t)size) {
        free(hs);
        close(sv[0]);
        close(sv[1]);
        return;
    }
    shutdown(sv[0], SHUT_WR);
    cg_hs_init(hs, CG_HS_ACCEPTOR, sv[1], &local, NULL,
               cg_deadline_ns(1000000000ull));
    st = cg_hs_run(hs);
    if (st == CG_OK && (hs->peer.payload_len > CG_HS_PAYLOAD_MAX ||
                        hs->peer.cookie != 0))
        abort();
    free(hs);
    close(sv[0]);
    close(sv[1]);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_decoders(data, size);
    fuzz_acceptor(data, size);
    return 0;
}
