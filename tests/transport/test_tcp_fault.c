/* SPDX-License-Identifier: Apache-2.0 */
/* Fault scenarios for the TCP transport: a peer killed mid-transfer, a
 * stopped (silent) peer, and bad handshakes (wrong cookie, wrong version,
 * garbage, truncated header, connect-and-silent) that the listener drops
 * while it keeps serving good peers. Timeout 2 s (scaled). */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tp_test_util.h"
#include "transport/handshake.h"
#include "transport/sock.h"

#define FAULT_TIMEOUT_MS 2000
#define BIG (256u << 20)

/* Child: announces itself, then sends one big message (parent does not
 * read it, so it stays stuck mid-transfer) and waits. */
static int child_stuck_sender(void *arg)
{
    uint8_t *buf = calloc(1, BIG);
    cg_tp_req_t *r;
    tp_peer_t c;

    TP_CHECK(tp_peer_open(&c, arg) == 0, "open");
    TP_CHECK(cg_tp_isend(c.conn, "go", 3, 1, &r) == CG_OK, "isend");
    TP_CHECK(tp_wait_expect(r, CG_OK, 3) == 0, "send");
    TP_CHECK(cg_tp_isend(c.conn, buf, BIG, 2, &r) == CG_OK, "isend big");
    if (*(const int *)((const tp_pair_t *)arg)->arg == SIGSTOP)
        raise(SIGSTOP);
    cg_tp_wait(r, NULL);
    pause();
    return 0;
}

static void peer_fails_within_timeout(int sig, cg_status_t want)
{
    uint8_t *buf = malloc(BIG);
    char go[8];
    cg_tp_req_t *r, *big;
    tp_pair_t p;
    uint64_t t0, ms;
    cg_status_t st;

    cr_assert_eq(tp_pair_start(&p, 1, FAULT_TIMEOUT_MS, child_stuck_sender,
                               &sig), CG_OK);
    cr_assert_eq(cg_tp_irecv(p.conn, go, sizeof(go), 1, &r), CG_OK);
    cr_assert_eq(tp_wait_expect(r, CG_OK, 3), 0);
    usleep(200000); /* the big message is now partly in flight */
    cr_assert_eq(cg_tp_irecv(p.conn, buf, BIG, 2, &big), CG_OK);
    if (sig == SIGKILL)
        kill(p.child, SIGKILL);
    t0 = cg_now_ns();
    st = cg_tp_wait(big, NULL);
    ms = (cg_now_ns() - t0) / 1000000;
    cr_assert_eq(st, want, "got %s: %s", cg_status_name(st), cg_last_error());
    cr_assert(CG_STATUS_IS_PEER_FAILURE(st));
    cr_assert_leq(ms, tp_scaled_ns(FAULT_TIMEOUT_MS + 1500) / 1000000,
                  "took %llu ms", (unsigned long long)ms);
    kill(p.child, SIGKILL);
    tp_pair_finish(&p);
    cr_assert_eq(tp_mem_live(&p.mem), 0, "leaked %zu", tp_mem_live(&p.mem));
    free(buf);
}

Test(tcp_fault, killed_peer_fails_pending_receive_with_reset, .timeout = 30)
{
    peer_fails_within_timeout(SIGKILL, CG_ERR_PEER_RESET);
}

Test(tcp_fault, stopped_peer_fails_pending_receive_with_timeout,
     .timeout = 30)
{
    peer_fails_within_timeout(SIGSTOP, CG_ERR_TIMEOUT);
}

/* Raw bad peers, then a good one; each bad socket must be closed by the
 * listener (or, for the silent one, left pending without blocking). */
static int raw_connect(const cg_tp_handle_t *h)
{
    cg_sockaddr_t a;
    uint64_t end = cg_deadline_ns(tp_scaled_ns(5000));
    int fd = -1;

    if (cg_sockaddr_unpack(h->bytes + 4, &a) != CG_OK ||
        cg_sock_connect_start(&a, &fd) != CG_OK)
        return -1;
    while (cg_sock_connect_check(fd) == CG_INPROGRESS && cg_now_ns() < end)
        usleep(1000);
    return fd;
}

/* 0 when the listener closed fd (EOF or reset) within the deadline. */
static int closed_by_peer(int fd)
{
    char b[64];
    cg_status_t st;

    st = cg_sock_recv_all(fd, b, sizeof(b),
                          cg_deadline_ns(tp_scaled_ns(FAULT_TIMEOUT_MS + 1000)));
    cg_sock_close(fd);
    return (st == CG_ERR_PEER_RESET) ? 0 : 1;
}

static void hs_header(uint8_t out[CG_HS_HDR_SIZE], uint64_t cookie)
{
    cg_hs_hdr_t h = {.version = CG_HS_VERSION, .kind = CG_HS_KIND_TCP_DATA,
                     .cookie = cookie, .rank = 5, .nsocks = 1, .conn_id = 9};
    cg_hs_encode(&h, out);
}

/* The good peer: connects with the right cookie and sends one message. */
static int child_send_and_close(void *arg)
{
    cg_tp_req_t *r;
    tp_peer_t c;

    TP_CHECK(tp_peer_open(&c, arg) == 0, "open");
    TP_CHECK(cg_tp_isend(c.conn, "good", 5, 6, &r) == CG_OK, "isend");
    TP_CHECK(tp_wait_expect(r, CG_OK, 5) == 0, "send");
    return tp_peer_close(&c);
}

static int child_bad_peers(void *arg)
{
    const tp_pair_t *p = arg;
    uint8_t hdr[CG_HS_HDR_SIZE];
    int fd[5], bad = 0;

    fd[0] = raw_connect(&p->h); /* silent: sends nothing */
    for (int i = 1; i < 5; i++)
        fd[i] = raw_connect(&p->h);
    hs_header(hdr, TP_COOKIE ^ 1); /* wrong cookie */
    cg_sock_send_all(fd[1], hdr, sizeof(hdr), cg_deadline_ns(1000000000));
    hs_header(hdr, TP_COOKIE);
    hdr[4] = 7; /* version 7 */
    cg_sock_send_all(fd[2], hdr, sizeof(hdr), cg_deadline_ns(1000000000));
    cg_sock_send_all(fd[3], "GET / HTTP/1.0\r\n\r\nxxxxxxxxxxxxxxx", 33,
                     cg_deadline_ns(1000000000));
    cg_sock_send_all(fd[4], hdr, 5, cg_deadline_ns(1000000000));
    shutdown(fd[4], SHUT_WR); /* truncated header */
    for (int i = 1; i < 5; i++)
        bad |= closed_by_peer(fd[i]) << i;
    TP_CHECK(bad == 0, "bad peers not refused: mask 0x%x", bad);
    TP_CHECK(child_send_and_close(arg) == 0, "good peer failed");
    TP_CHECK(closed_by_peer(fd[0]) == 0, "silent peer not dropped");
    return 0;
}

Test(tcp_fault, bad_handshakes_are_dropped_and_good_peer_still_served,
     .timeout = 30)
{
    tp_logcap_t cap;
    cg_tp_conn_t *extra;
    cg_tp_req_t *r;
    char buf[8];
    tp_pair_t p;

    tp_logcap_init(&cap);
    cr_assert_eq(tp_pair_start_log(&p, 1, FAULT_TIMEOUT_MS, child_bad_peers,
                                   NULL, &cap.log), CG_OK, "%s", cap.text);
    cr_assert_eq(cg_tp_conn_peer_rank(p.conn), 1, "accepted rank %d",
                 cg_tp_conn_peer_rank(p.conn));
    cr_assert_eq(cg_tp_irecv(p.conn, buf, sizeof(buf), 6, &r), CG_OK);
    cr_assert_eq(tp_wait_expect(r, CG_OK, 5), 0);
    cr_assert_str_eq(buf, "good");
    cr_assert_eq(tp_accept(p.tp, p.l, &extra, FAULT_TIMEOUT_MS + 500),
                 CG_ERR_TIMEOUT, "a bad peer was accepted");
    cr_assert(strstr(cap.text, "cookie mismatch") != NULL, "%s", cap.text);
    cr_assert(strstr(cap.text, "version 7, expected 1") != NULL, "%s",
              cap.text);
    cr_assert(strstr(cap.text, "bad magic") != NULL, "%s", cap.text);
    cr_assert(strstr(cap.text, "peer closed after 5 of 32 bytes") != NULL,
              "%s", cap.text);
    cr_assert(strstr(cap.text, "timed out in state recv_hdr") != NULL, "%s",
              cap.text);
    cr_assert_eq(tp_pair_finish(&p), 0, "child failed");
    cr_assert_eq(tp_mem_live(&p.mem), 0, "leaked %zu", tp_mem_live(&p.mem));
}
