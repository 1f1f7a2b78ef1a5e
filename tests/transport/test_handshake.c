/* SPDX-License-Identifier: Apache-2.0 */
/* Units for transport/handshake.c and transport/tcp_wire.c: header
 * encode/decode with every bad case, the exchange state machine over a
 * socketpair, message headers, stripe slicing and listen handles. */
#include <criterion/criterion.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/base/error.h"
#include "transport/handshake.h"
#include "transport/sock.h"
#include "transport/tcp_wire.h"

static cg_hs_hdr_t good_hdr(void)
{
    cg_hs_hdr_t h = {.version = CG_HS_VERSION, .kind = CG_HS_KIND_UCX_CTRL,
                     .cookie = 0x1122334455667788ull, .rank = -1,
                     .sock_index = 2, .nsocks = 4, .conn_id = 0xdeadbeef,
                     .payload_len = 77};
    return h;
}

Test(handshake, encode_decode_round_trip_is_little_endian)
{
    cg_hs_hdr_t h = good_hdr(), d;
    uint8_t w[CG_HS_HDR_SIZE];

    cg_hs_encode(&h, w);
    cr_assert_eq(memcmp(w, "CGHS", 4), 0, "magic bytes %02x %02x", w[0], w[1]);
    cr_assert_eq(w[8], 0x88, "cookie low byte first, got 0x%02x", w[8]);
    cr_assert_eq(cg_hs_decode(w, sizeof(w), &d), CG_OK, "%s", cg_last_error());
    cr_assert_eq(d.cookie, h.cookie);
    cr_assert_eq(d.rank, -1, "rank %d", d.rank);
    cr_assert_eq(d.sock_index, 2);
    cr_assert_eq(d.nsocks, 4);
    cr_assert_eq(d.conn_id, 0xdeadbeef);
    cr_assert_eq(d.payload_len, 77);
    cr_assert_eq(cg_hs_check(&d, CG_HS_KIND_UCX_CTRL, h.cookie), CG_OK);
}

/* Encodes good_hdr, lets mutate patch the bytes, expects the reason. */
static void expect_bad(void (*mutate)(uint8_t *w), size_t len,
                       const char *reason)
{
    cg_hs_hdr_t h = good_hdr(), d;
    uint8_t w[CG_HS_HDR_SIZE];

    cg_hs_encode(&h, w);
    if (mutate != NULL)
        mutate(w);
    cr_assert_eq(cg_hs_decode(w, len, &d), CG_ERR_HANDSHAKE, "accepted");
    cr_assert(strstr(cg_last_error(), reason) != NULL, "'%s' lacks '%s'",
              cg_last_error(), reason);
}

static void bad_magic(uint8_t *w) { w[0] = 'X'; }
static void bad_version(uint8_t *w) { w[4] = 7; }
static void bad_kind0(uint8_t *w) { w[6] = 0; }
static void bad_kind9(uint8_t *w) { w[6] = 9; }
static void bad_nsocks0(uint8_t *w) { w[22] = 0; }
static void bad_nsocks65(uint8_t *w) { w[22] = 65; }
static void bad_index(uint8_t *w) { w[20] = 4; }
static void bad_payload(uint8_t *w) { w[28] = 0x40; w[29] = 0x42; w[30] = 0x0f; }

Test(handshake, every_malformed_header_is_refused_with_reason)
{
    expect_bad(NULL, 5, "truncated header: 5 of 32 bytes");
    expect_bad(bad_magic, CG_HS_HDR_SIZE, "bad magic 0x53484758");
    expect_bad(bad_version, CG_HS_HDR_SIZE, "version 7, expected 1");
    expect_bad(bad_kind0, CG_HS_HDR_SIZE, "unknown kind 0");
    expect_bad(bad_kind9, CG_HS_HDR_SIZE, "unknown kind 9");
    expect_bad(bad_nsocks0, CG_HS_HDR_SIZE, "nsocks 0 out of range");
    expect_bad(bad_nsocks65, CG_HS_HDR_SIZE, "nsocks 65 out of range");
    expect_bad(bad_index, CG_HS_HDR_SIZE, "socket index 4 not below");
    expect_bad(bad_payload, CG_HS_HDR_SIZE,
               "payload length 1000000 exceeds 4096");
}

Test(handshake, wrong_kind_or_cookie_is_refused)
{
    cg_hs_hdr_t h = good_hdr();

    cr_assert_eq(cg_hs_check(&h, CG_HS_KIND_TCP_DATA, h.cookie),
                 CG_ERR_HANDSHAKE);
    cr_assert(strstr(cg_last_error(), "kind 2, expected 1") != NULL, "%s",
              cg_last_error());
    cr_assert_eq(cg_hs_check(&h, h.kind, 42), CG_ERR_HANDSHAKE);
    cr_assert(strstr(cg_last_error(), "cookie mismatch") != NULL, "%s",
              cg_last_error());
    /* The expected cookie (42 = 0x2a) is the job's secret: not told. */
    cr_assert(strstr(cg_last_error(), "000000000000002a") == NULL, "%s",
              cg_last_error());
}

/* Runs connector (fd a) and acceptor (fd b) alternately until both end. */
static void run_both(cg_hs_t *c, cg_hs_t *a, cg_status_t *sc, cg_status_t *sa)
{
    *sc = *sa = CG_INPROGRESS;
    for (int i = 0; i < 100000 && (*sc == CG_INPROGRESS ||
                                   *sa == CG_INPROGRESS); i++) {
        if (*sc == CG_INPROGRESS)
            *sc = cg_hs_progress(c);
        if (*sa == CG_INPROGRESS)
            *sa = cg_hs_progress(a);
        if (*sa != CG_INPROGRESS && *sa != CG_OK)
            shutdown(a->fd, SHUT_RDWR); /* the acceptor's caller closes */
    }
}

Test(handshake, exchange_carries_payloads_both_ways)
{
    cg_hs_hdr_t lc = good_hdr(), la = {.kind = CG_HS_KIND_UCX_CTRL,
                                       .cookie = lc.cookie, .rank = 3,
                                       .payload_len = 5};
    cg_hs_t c, a;
    cg_status_t sc, sa;
    char pc[77];
    int sv[2];

    memset(pc, 'c', sizeof(pc));
    cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv), 0);
    cg_hs_init(&c, CG_HS_CONNECTOR, sv[0], &lc, pc, cg_deadline_ns(5e9));
    cg_hs_init(&a, CG_HS_ACCEPTOR, sv[1], &la, "hello", cg_deadline_ns(5e9));
    run_both(&c, &a, &sc, &sa);
    cr_assert_eq(sc, CG_OK, "connector: %s", cg_last_error());
    cr_assert_eq(sa, CG_OK, "acceptor: %s", cg_last_error());
    cr_assert_eq(a.peer.payload_len, 77);
    cr_assert_eq(memcmp(a.peer_payload, pc, 77), 0);
    cr_assert_eq(c.peer.rank, 3, "acceptor rank %d", c.peer.rank);
    cr_assert_eq(memcmp(c.peer_payload, "hello", 5), 0);
    cr_assert_eq(a.local.conn_id, lc.conn_id, "conn id not echoed");
    close(sv[0]);
    close(sv[1]);
}

Test(handshake, cookie_mismatch_fails_both_sides)
{
    cg_hs_hdr_t lc = good_hdr(), la = good_hdr();
    cg_hs_t c, a;
    cg_status_t sc, sa;
    char pc[77] = {0};
    int sv[2];

    la.cookie ^= 1;
    la.payload_len = 0;
    cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv), 0);
    cg_hs_init(&c, CG_HS_CONNECTOR, sv[0], &lc, pc, cg_deadline_ns(5e9));
    cg_hs_init(&a, CG_HS_ACCEPTOR, sv[1], &la, NULL, cg_deadline_ns(5e9));
    run_both(&c, &a, &sc, &sa);
    cr_assert_eq(sa, CG_ERR_HANDSHAKE, "acceptor %s", cg_status_name(sa));
    cr_assert_eq(sc, CG_ERR_HANDSHAKE, "connector %s", cg_status_name(sc));
    cr_assert(strstr(cg_last_error(), "peer closed after 0 of 32") != NULL,
              "%s", cg_last_error());
    cr_assert_eq(cg_hs_progress(&c), CG_ERR_HANDSHAKE, "failed stays failed");
    close(sv[0]);
    close(sv[1]);
}

/* The acceptor's before_answer hook: the connector must not have the
 * answer yet when it runs (what it sets up must exist before the peer's
 * exchange can end), and its error fails the exchange unanswered. */
static cg_hs_t *hook_connector;
static int hook_calls, hook_late;

static cg_status_t hook(cg_hs_t *hs, void *arg)
{
    hook_calls++;
    if (hs->sent != 0 || cg_hs_progress(hook_connector) != CG_INPROGRESS)
        hook_late = 1;
    if (arg != NULL)
        return cg_error_set(CG_ERR_UNREACHABLE, "hook says no");
    return CG_OK;
}

Test(handshake, before_answer_runs_before_the_connector_can_finish)
{
    for (int fail = 0; fail < 2; fail++) {
        cg_hs_hdr_t lc = good_hdr(), la = {.kind = CG_HS_KIND_UCX_CTRL,
                                           .cookie = lc.cookie};
        cg_hs_t c, a;
        cg_status_t sc, sa;
        char pc[77] = {0};
        int sv[2];

        cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv),
                     0);
        cg_hs_init(&c, CG_HS_CONNECTOR, sv[0], &lc, pc, cg_deadline_ns(5e9));
        cg_hs_init(&a, CG_HS_ACCEPTOR, sv[1], &la, NULL, cg_deadline_ns(5e9));
        a.before_answer = hook;
        a.before_answer_arg = fail ? &a : NULL;
        hook_connector = &c;
        hook_calls = hook_late = 0;
        run_both(&c, &a, &sc, &sa);
        cr_assert_eq(hook_calls, 1, "hook ran %d times", hook_calls);
        cr_assert_eq(hook_late, 0, "hook ran after the answer went out");
        if (!fail) {
            cr_assert_eq(sc, CG_OK, "connector: %s", cg_status_name(sc));
            cr_assert_eq(sa, CG_OK, "acceptor: %s", cg_status_name(sa));
        } else {
            cr_assert_eq(sa, CG_ERR_UNREACHABLE, "acceptor %s",
                         cg_status_name(sa));
            cr_assert_eq(sc, CG_ERR_HANDSHAKE, "connector %s",
                         cg_status_name(sc));
            cr_assert(strstr(cg_last_error(), "peer closed after 0 of 32") !=
                          NULL, "%s", cg_last_error());
        }
        close(sv[0]);
        close(sv[1]);
    }
}

Test(handshake, silent_peer_times_out_in_recv_hdr)
{
    cg_hs_hdr_t la = good_hdr();
    cg_hs_t a;
    cg_status_t st;
    int sv[2];

    cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv), 0);
    cg_hs_init(&a, CG_HS_ACCEPTOR, sv[1], &la, NULL, cg_deadline_ns(50e6));
    st = cg_hs_run(&a);
    cr_assert_eq(st, CG_ERR_TIMEOUT, "got %s", cg_status_name(st));
    cr_assert(strstr(cg_last_error(), "recv_hdr") != NULL, "%s",
              cg_last_error());
    close(sv[0]);
    close(sv[1]);
}

Test(tcp_wire, message_header_round_trip_and_bounds)
{
    cg_tcp_msg_hdr_t h = {.tag = 0xfeedf00d, .len = (4ull << 30) + 1}, d;
    uint8_t w[CG_TCP_MSG_HDR_SIZE];

    cg_tcp_msg_encode(&h, w);
    cr_assert_eq(cg_tcp_msg_decode(w, sizeof(w), &d), CG_OK);
    cr_assert_eq(d.tag, h.tag);
    cr_assert_eq(d.len, h.len, "len %llu", (unsigned long long)d.len);
    cr_assert_eq(cg_tcp_msg_decode(w, 15, &d), CG_ERR_IO);
    w[15] = 0x01; /* 2^56 + ... > 1 TiB */
    cr_assert_eq(cg_tcp_msg_decode(w, sizeof(w), &d), CG_ERR_IO);
    cr_assert(strstr(cg_last_error(), "exceeds the limit") != NULL);
    w[15] = 0;
    w[5] ^= 0xff;
    cr_assert_eq(cg_tcp_msg_decode(w, sizeof(w), &d), CG_ERR_IO);
    cr_assert(strstr(cg_last_error(), "marker") != NULL);
}

Test(tcp_wire, slices_are_contiguous_and_cover_the_message)
{
    static const uint64_t lens[] = {0, 1, 262143, 262144, 1000003,
                                    (4ull << 30) + 1};
    for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++)
        for (int n = 1; n <= 5; n++) {
            uint64_t next = 0, off, slen;
            for (int k = 0; k < n; k++) {
                cg_tcp_slice(lens[i], n, k, &off, &slen);
                if (slen > 0)
                    cr_assert_eq(off, next, "len %llu n %d k %d off %llu",
                                 (unsigned long long)lens[i], n, k,
                                 (unsigned long long)off);
                next += slen;
            }
            cr_assert_eq(next, lens[i], "len %llu n %d covered %llu",
                         (unsigned long long)lens[i], n,
                         (unsigned long long)next);
        }
}

Test(tcp_wire, listen_handle_round_trip_and_foreign_handle)
{
    cg_sockaddr_t a, b;
    uint8_t h[128];
    char s1[CG_SOCKADDR_STRLEN], s2[CG_SOCKADDR_STRLEN];

    cr_assert_eq(cg_sock_resolve("127.0.0.1", 31337, &a), CG_OK);
    cg_tcp_handle_encode(&a, h, sizeof(h));
    cr_assert_eq(cg_tcp_handle_decode(h, sizeof(h), &b), CG_OK);
    cr_assert_str_eq(cg_sockaddr_str(&b, s2, sizeof(s2)),
                     cg_sockaddr_str(&a, s1, sizeof(s1)));
    h[0] = 'U';
    cr_assert_eq(cg_tcp_handle_decode(h, sizeof(h), &b), CG_ERR_INVALID_PARAM);
    cr_assert(strstr(cg_last_error(), "CG_TRANSPORT") != NULL);
}
