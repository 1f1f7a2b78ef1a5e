/* SPDX-License-Identifier: Apache-2.0 */
/* Flow scenarios for the TCP transport (transport/tcp_io.c): simultaneous
 * bidirectional traffic, the unexpected-message bound, cancellation on
 * close, refused connects, a receive posted after the peer left. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tp_test_util.h"

#define BIDIR_N 48
#define BIDIR_SIZE (1u << 20)

/* Both sides: post all receives and sends, then wait for everything. */
static int exchange(cg_tp_conn_t *conn, uint32_t my_seed, uint32_t peer_seed)
{
    uint8_t *tx = malloc((size_t)BIDIR_N * BIDIR_SIZE);
    uint8_t *rx = malloc((size_t)BIDIR_N * BIDIR_SIZE);
    cg_tp_req_t *s[BIDIR_N], *r[BIDIR_N];
    int bad = 0;

    for (int i = 0; i < BIDIR_N; i++) {
        tp_fill(tx + (size_t)i * BIDIR_SIZE, BIDIR_SIZE, my_seed + (uint32_t)i);
        if (cg_tp_isend(conn, tx + (size_t)i * BIDIR_SIZE, BIDIR_SIZE, 3,
                        &s[i]) != CG_OK ||
            cg_tp_irecv(conn, rx + (size_t)i * BIDIR_SIZE, BIDIR_SIZE, 3,
                        &r[i]) != CG_OK)
            return 1;
    }
    for (int i = 0; i < BIDIR_N; i++) {
        bad |= tp_wait_expect(s[i], CG_OK, BIDIR_SIZE);
        bad |= tp_wait_expect(r[i], CG_OK, BIDIR_SIZE);
        bad |= tp_check(rx + (size_t)i * BIDIR_SIZE, BIDIR_SIZE,
                        peer_seed + (uint32_t)i) != (size_t)-1;
    }
    free(tx);
    free(rx);
    return bad;
}

static int child_exchange(void *arg)
{
    tp_peer_t c;

    TP_CHECK(tp_peer_open(&c, arg) == 0, "open");
    TP_CHECK(exchange(c.conn, 2000, 1000) == 0, "child exchange");
    return tp_peer_close(&c);
}

Test(tcp_flow, simultaneous_bidirectional_traffic_does_not_deadlock,
     .timeout = 60)
{
    tp_pair_t p;

    cr_assert_eq(tp_pair_start(&p, 1, 0, child_exchange, NULL), CG_OK);
    cr_assert_eq(exchange(p.conn, 1000, 2000), 0, "parent exchange failed");
    cr_assert_eq(tp_pair_finish(&p), 0, "child failed");
    cr_assert_eq(tp_mem_live(&p.mem), 0);
}

#define UNEXP_N 3
#define UNEXP_SIZE (40u << 20)

static int child_flood(void *arg)
{
    uint8_t *buf = malloc(UNEXP_SIZE);
    cg_tp_req_t *r[UNEXP_N];
    tp_peer_t c;

    TP_CHECK(tp_peer_open(&c, arg) == 0, "open");
    for (int i = 0; i < UNEXP_N; i++) {
        buf[0] = (uint8_t)i;
        TP_CHECK(cg_tp_isend(c.conn, buf, UNEXP_SIZE, 4, &r[i]) == CG_OK,
                 "isend");
        TP_CHECK(tp_wait_expect(r[i], CG_OK, UNEXP_SIZE) == 0, "send %d", i);
    }
    free(buf);
    sleep(1); /* parent reads before we close */
    return tp_peer_close(&c);
}

Test(tcp_flow, unexpected_messages_are_bounded_then_delivered, .timeout = 60)
{
    uint8_t *buf = malloc(UNEXP_SIZE);
    tp_pair_t p;
    cg_tp_req_t *r;

    cr_assert_eq(tp_pair_start(&p, 1, 0, child_flood, NULL), CG_OK);
    for (int i = 0; i < 50; i++) { /* let the sender run ahead */
        cg_tp_progress(p.tp);
        usleep(5000);
    }
    cr_assert_leq(p.mem.peak[CG_MEM_CAT_STAGING], 64u << 20,
                  "staging peak %zu above the 64 MiB bound",
                  p.mem.peak[CG_MEM_CAT_STAGING]);
    cr_assert_eq(p.mem.live[CG_MEM_CAT_STAGING], UNEXP_SIZE, "staging %zu",
                 p.mem.live[CG_MEM_CAT_STAGING]);
    for (int i = 0; i < UNEXP_N; i++) {
        cr_assert_eq(cg_tp_irecv(p.conn, buf, UNEXP_SIZE, 4, &r), CG_OK);
        cr_assert_eq(tp_wait_expect(r, CG_OK, UNEXP_SIZE), 0);
        cr_assert_eq(buf[0], i, "message %d arrived as %d", i, buf[0]);
    }
    cr_assert_eq(p.mem.live[CG_MEM_CAT_STAGING], 0);
    cr_assert_eq(tp_pair_finish(&p), 0);
    cr_assert_eq(tp_mem_live(&p.mem), 0);
    free(buf);
}

static int child_send_and_leave(void *arg)
{
    char msg[] = "last words";
    cg_tp_req_t *r;
    tp_peer_t c;

    TP_CHECK(tp_peer_open(&c, arg) == 0, "open");
    TP_CHECK(cg_tp_isend(c.conn, msg, sizeof(msg), 8, &r) == CG_OK, "isend");
    TP_CHECK(tp_wait_expect(r, CG_OK, sizeof(msg)) == 0, "send");
    return tp_peer_close(&c);
}

Test(tcp_flow, receive_posted_after_peer_left_gets_the_message,
     .timeout = 30)
{
    cg_tp_req_t *r;
    char buf[64];
    tp_pair_t p;

    cr_assert_eq(tp_pair_start(&p, 1, 0, child_send_and_leave, NULL), CG_OK);
    cr_assert_eq(tp_reap(p.child, 10000), 0);
    p.child = -1;
    for (int i = 0; i < 20; i++) { /* reads the message, then EOF */
        cg_tp_progress(p.tp);
        usleep(2000);
    }
    cr_assert_eq(cg_tp_irecv(p.conn, buf, sizeof(buf), 8, &r), CG_OK);
    cr_assert_eq(tp_wait_expect(r, CG_OK, 11), 0);
    cr_assert_str_eq(buf, "last words");
    cr_assert_eq(cg_tp_irecv(p.conn, buf, sizeof(buf), 8, &r),
                 CG_ERR_PEER_RESET, "%s", cg_last_error());
    tp_pair_finish(&p);
    cr_assert_eq(tp_mem_live(&p.mem), 0);
}

Test(tcp_flow, close_cancels_pending_requests, .timeout = 30)
{
    tp_mem_t m = {0};
    cg_transport_t *tp = tp_make(&m, 2, 0, 7, 0);
    cg_tp_listener_t *l;
    cg_tp_conn_t *a, *b;
    cg_tp_handle_t h;
    cg_tp_req_t *r1, *r2;
    char buf[16];

    cr_assert_eq(cg_tp_listen(tp, &h, &l), CG_OK);
    cr_assert_eq(cg_tp_connect(tp, &h, &a), CG_OK);
    cr_assert_eq(tp_accept(tp, l, &b, 5000), CG_OK);
    cr_assert_eq(cg_tp_conn_ready(a), CG_OK, "%s", cg_last_error());
    cr_assert_eq(cg_tp_conn_peer_rank(b), 0);
    cr_assert_eq(cg_tp_irecv(a, buf, sizeof(buf), 1, &r1), CG_OK);
    cr_assert_eq(cg_tp_irecv(a, buf, sizeof(buf), 2, &r2), CG_OK);
    cr_assert_eq(cg_tp_test(r1, NULL), CG_INPROGRESS);
    cg_tp_conn_close(a);
    cr_assert_eq(cg_tp_test(r1, NULL), CG_ERR_CANCELED);
    cr_assert_eq(cg_tp_wait(r2, NULL), CG_ERR_CANCELED);
    cg_tp_conn_close(b);
    cg_tp_listener_close(l);
    cg_transport_destroy(tp);
    cr_assert_eq(tp_mem_live(&m), 0, "leaked %zu", tp_mem_live(&m));
}

Test(tcp_flow, connect_to_closed_listener_is_unreachable, .timeout = 30)
{
    tp_mem_t m = {0};
    cg_transport_t *tp = tp_make(&m, 1, 0, 7, 0);
    cg_tp_listener_t *l;
    cg_tp_conn_t *c;
    cg_tp_handle_t h;
    cg_status_t st;

    cr_assert_eq(cg_tp_listen(tp, &h, &l), CG_OK);
    cg_tp_listener_close(l);
    st = tp_connect(tp, &h, &c, 5000);
    cr_assert_eq(st, CG_ERR_UNREACHABLE, "got %s: %s", cg_status_name(st),
                 cg_last_error());
    if (st != CG_ERR_UNREACHABLE)
        return;
    cg_transport_destroy(tp); /* frees the failed conn too */
    cr_assert_eq(tp_mem_live(&m), 0, "leaked %zu", tp_mem_live(&m));
}

static int child_big_then_small(void *arg)
{
    uint8_t *big = calloc(1, 1u << 20);
    cg_tp_req_t *r[2];
    tp_peer_t c;

    TP_CHECK(tp_peer_open(&c, arg) == 0, "open");
    tp_fill(big, 10, 77);
    TP_CHECK(cg_tp_isend(c.conn, big, 1u << 20, 1, &r[0]) == CG_OK, "isend");
    TP_CHECK(cg_tp_isend(c.conn, big, 10, 1, &r[1]) == CG_OK, "isend");
    TP_CHECK(tp_wait_expect(r[0], CG_OK, 1u << 20) == 0, "send big");
    TP_CHECK(tp_wait_expect(r[1], CG_OK, 10) == 0, "send small");
    free(big);
    return tp_peer_close(&c);
}

Test(tcp_flow, truncated_striped_message_is_drained_on_every_socket,
     .timeout = 30)
{
    char buf[1000];
    cg_tp_req_t *r;
    tp_pair_t p;

    cr_assert_eq(tp_pair_start(&p, 4, 0, child_big_then_small, NULL), CG_OK);
    cr_assert_eq(cg_tp_irecv(p.conn, buf, sizeof(buf), 1, &r), CG_OK);
    cr_assert_eq(cg_tp_wait(r, NULL), CG_ERR_TRUNCATED, "%s", cg_last_error());
    cr_assert(strstr(cg_last_error(), "1048576 bytes") != NULL, "%s",
              cg_last_error());
    cr_assert_eq(cg_tp_irecv(p.conn, buf, sizeof(buf), 1, &r), CG_OK);
    cr_assert_eq(tp_wait_expect(r, CG_OK, 10), 0);
    cr_assert_eq(tp_check(buf, 10, 77), (size_t)-1, "small message corrupt");
    cr_assert_eq(tp_pair_finish(&p), 0);
    cr_assert_eq(tp_mem_live(&p.mem), 0, "leaked %zu", tp_mem_live(&p.mem));
}
