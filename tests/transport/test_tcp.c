/* SPDX-License-Identifier: Apache-2.0 */
/* Multi-process scenarios for the TCP transport (transport/tcp*.c) over
 * loopback: the parent listens, a fork()ed child connects. Ordering, sizes,
 * many requests in flight, bidirectional traffic, truncation, striping. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/base/clock.h"
#include "tp_test_util.h"

#define NTAGS 3
#define PER_TAG 20

static size_t msg_size(int i)
{
    static const size_t sizes[] = {1, 7, 4095, 4097, 65537, 262143, 262144,
                                   1000003, (3u << 20) + 5, 0};
    return sizes[i % (int)(sizeof(sizes) / sizeof(sizes[0]))];
}

/* Child: sends PER_TAG messages per tag, tags interleaved. */
static int child_send_tags(void *arg)
{
    tp_peer_t c;
    cg_tp_req_t *reqs[NTAGS * PER_TAG];
    uint8_t *bufs[NTAGS * PER_TAG];

    TP_CHECK(tp_peer_open(&c, arg) == 0, "open");
    for (int i = 0; i < PER_TAG; i++)
        for (int t = 0; t < NTAGS; t++) {
            int k = i * NTAGS + t;
            bufs[k] = malloc(msg_size(i) + 1);
            tp_fill(bufs[k], msg_size(i), (uint32_t)(t * 1000 + i));
            TP_CHECK(cg_tp_isend(c.conn, bufs[k], msg_size(i), (uint32_t)t,
                                 &reqs[k]) == CG_OK, "isend %s", cg_last_error());
        }
    for (int k = 0; k < NTAGS * PER_TAG; k++) {
        TP_CHECK(tp_wait_expect(reqs[k], CG_OK, msg_size(k / NTAGS)) == 0,
                 "send %d", k);
        free(bufs[k]);
    }
    return tp_peer_close(&c);
}

static void recv_tags_and_check(tp_pair_t *p, int nsocks)
{
    cr_assert_eq(tp_pair_start(p, nsocks, 0, child_send_tags, NULL), CG_OK,
                 "%s", cg_last_error());
    for (int t = NTAGS - 1; t >= 0; t--) { /* tags in reverse order */
        for (int i = 0; i < PER_TAG; i++) {
            size_t cap = msg_size(i) + 64, size = 0;
            uint8_t *buf = malloc(cap);
            cg_tp_req_t *req;
            cr_assert_eq(cg_tp_irecv(p->conn, buf, cap, (uint32_t)t, &req),
                         CG_OK);
            cr_assert_eq(cg_tp_wait(req, &size), CG_OK, "%s", cg_last_error());
            cr_assert_eq(size, msg_size(i), "tag %d msg %d: size %zu", t, i,
                         size);
            cr_assert_eq(tp_check(buf, size, (uint32_t)(t * 1000 + i)),
                         (size_t)-1, "tag %d msg %d corrupted", t, i);
            free(buf);
        }
    }
    cr_assert_eq(tp_pair_finish(p), 0, "child failed");
    cr_assert_eq(tp_mem_live(&p->mem), 0, "leaked %zu", tp_mem_live(&p->mem));
    cr_assert_eq(p->mem.bad_frees, 0);
}

Test(tcp, same_tag_messages_arrive_in_posting_order_with_mixed_sizes,
     .timeout = 60)
{
    tp_pair_t p;
    recv_tags_and_check(&p, 1);
}

Test(tcp, four_sockets_stripe_large_messages_intact, .timeout = 60)
{
    tp_pair_t p;
    recv_tags_and_check(&p, 4);
    cr_assert_gt(p.mem.peak[CG_MEM_CAT_CONTROL], 0);
}

/* Child: 0-byte, then 5-byte, then 100-byte messages on tag 9. */
static int child_small(void *arg)
{
    tp_peer_t c;
    cg_tp_req_t *r[3];
    char data[100];

    TP_CHECK(tp_peer_open(&c, arg) == 0, "open");
    tp_fill(data, sizeof(data), 9);
    TP_CHECK(cg_tp_isend(c.conn, NULL, 0, 9, &r[0]) == CG_OK, "isend 0");
    TP_CHECK(cg_tp_isend(c.conn, data, 5, 9, &r[1]) == CG_OK, "isend 5");
    TP_CHECK(cg_tp_isend(c.conn, data, 100, 9, &r[2]) == CG_OK, "isend 100");
    for (int i = 0; i < 3; i++)
        TP_CHECK(tp_wait_expect(r[i], CG_OK, i == 0 ? 0 : i == 1 ? 5 : 100)
                     == 0, "send %d", i);
    return tp_peer_close(&c);
}

Test(tcp, zero_byte_and_oversized_receives_report_actual_size, .timeout = 30)
{
    tp_pair_t p;
    char buf[4096];
    cg_tp_req_t *r[3];
    size_t size = 1;

    cr_assert_eq(tp_pair_start(&p, 1, 0, child_small, NULL), CG_OK);
    cr_assert_eq(cg_tp_irecv(p.conn, NULL, 0, 9, &r[0]), CG_OK);
    cr_assert_eq(cg_tp_irecv(p.conn, buf, sizeof(buf), 9, &r[1]), CG_OK);
    cr_assert_eq(cg_tp_irecv(p.conn, buf + 8, 100, 9, &r[2]), CG_OK);
    cr_assert_eq(cg_tp_wait(r[0], &size), CG_OK, "%s", cg_last_error());
    cr_assert_eq(size, 0, "0-byte message: size %zu", size);
    cr_assert_eq(cg_tp_wait(r[1], &size), CG_OK);
    cr_assert_eq(size, 5, "4096-byte receive of 5: size %zu", size);
    cr_assert_eq(tp_check(buf, 5, 9), (size_t)-1);
    cr_assert_eq(cg_tp_wait(r[2], &size), CG_OK);
    cr_assert_eq(size, 100, "size %zu", size);
    cr_assert_eq(tp_check(buf + 8, 100, 9), (size_t)-1);
    cr_assert_eq(tp_pair_finish(&p), 0);
    cr_assert_eq(tp_mem_live(&p.mem), 0);
}

Test(tcp, message_larger_than_receive_is_truncated_and_stream_recovers,
     .timeout = 30)
{
    tp_pair_t p;
    char buf[64];
    cg_tp_req_t *r[3];
    size_t size = 0;

    cr_assert_eq(tp_pair_start(&p, 1, 0, child_small, NULL), CG_OK);
    cr_assert_eq(cg_tp_irecv(p.conn, buf, 0, 9, &r[0]), CG_OK);
    cr_assert_eq(cg_tp_irecv(p.conn, buf, 4, 9, &r[1]), CG_OK);
    cr_assert_eq(cg_tp_wait(r[0], &size), CG_OK);
    cr_assert_eq(cg_tp_wait(r[1], &size), CG_ERR_TRUNCATED);
    cr_assert(strstr(cg_last_error(), "5 bytes") != NULL, "%s",
              cg_last_error());
    usleep(100000); /* the 100-byte one arrives unexpected */
    cr_assert_eq(cg_tp_irecv(p.conn, buf, sizeof(buf), 9, &r[2]), CG_OK);
    cr_assert_eq(cg_tp_wait(r[2], &size), CG_ERR_TRUNCATED, "%s",
                 cg_last_error());
    cr_assert_eq(tp_pair_finish(&p), 0);
    cr_assert_eq(tp_mem_live(&p.mem), 0, "leaked %zu", tp_mem_live(&p.mem));
}

/* Child: 8 bytes with tag 1 once the parent's 1-byte "go" (tag 2) came. */
static int child_after_go(void *arg)
{
    tp_peer_t c;
    cg_tp_req_t *r;
    char go, data[8];

    TP_CHECK(tp_peer_open(&c, arg) == 0, "open");
    TP_CHECK(cg_tp_irecv(c.conn, &go, 1, 2, &r) == CG_OK, "irecv");
    TP_CHECK(tp_wait_expect(r, CG_OK, 1) == 0, "go");
    tp_fill(data, sizeof(data), 3);
    TP_CHECK(cg_tp_isend(c.conn, data, sizeof(data), 1, &r) == CG_OK, "isend");
    TP_CHECK(tp_wait_expect(r, CG_OK, sizeof(data)) == 0, "send");
    return tp_peer_close(&c);
}

/* cg_tp_done only looks: a receive whose message has had time to arrive
 * stays not done while nothing drives the transport; progress makes it
 * done, and its test then ends it with the size. */
Test(tcp, done_looks_without_progress, .timeout = 30)
{
    tp_pair_t p;
    cg_tp_req_t *r, *s;
    char buf[8], go = 'g';
    size_t size = 0;

    cr_assert_eq(tp_pair_start(&p, 1, 0, child_after_go, NULL), CG_OK);
    cr_assert_eq(cg_tp_irecv(p.conn, buf, sizeof(buf), 1, &r), CG_OK);
    cr_assert_eq(cg_tp_done(r), 0, "done before anything was sent");
    cr_assert_eq(cg_tp_isend(p.conn, &go, 1, 2, &s), CG_OK);
    usleep((useconds_t)(tp_scaled_ns(200) / 1000)); /* no progress */
    cr_assert_eq(cg_tp_done(r), 0, "done without progress");
    uint64_t end = cg_now_ns() + tp_scaled_ns(10000);
    while (!cg_tp_done(r) && cg_now_ns() < end)
        cg_tp_progress(p.tp);
    cr_assert_eq(cg_tp_done(r), 1, "not done after progress");
    cr_assert_eq(cg_tp_test(r, &size), CG_OK, "%s", cg_last_error());
    cr_assert_eq(size, sizeof(buf), "size %zu", size);
    cr_assert_eq(tp_check(buf, size, 3), (size_t)-1);
    cr_assert_eq(cg_tp_wait(s, NULL), CG_OK);
    cr_assert_eq(tp_pair_finish(&p), 0);
    cr_assert_eq(tp_mem_live(&p.mem), 0, "leaked %zu", tp_mem_live(&p.mem));
}

#define NFLIGHT 1000

/* Child: NFLIGHT sends posted at once, then waited. */
static int child_many(void *arg)
{
    uint32_t (*data)[64] = calloc(NFLIGHT, sizeof(*data));
    cg_tp_req_t *r[NFLIGHT];
    tp_peer_t c;

    TP_CHECK(data != NULL && tp_peer_open(&c, arg) == 0, "open");
    for (int i = 0; i < NFLIGHT; i++) {
        data[i][0] = (uint32_t)i;
        TP_CHECK(cg_tp_isend(c.conn, data[i], sizeof(data[i]),
                             (uint32_t)(i % 7), &r[i]) == CG_OK, "isend");
    }
    for (int i = 0; i < NFLIGHT; i++)
        TP_CHECK(tp_wait_expect(r[i], CG_OK, sizeof(data[i])) == 0, "%d", i);
    free(data);
    return tp_peer_close(&c);
}

Test(tcp, thousand_requests_in_flight_complete_in_tag_order, .timeout = 30)
{
    uint32_t (*data)[64] = calloc(NFLIGHT, sizeof(*data));
    cg_tp_req_t *r[NFLIGHT];
    tp_pair_t p;
    size_t size;

    cr_assert_eq(tp_pair_start(&p, 2, 0, child_many, NULL), CG_OK);
    for (int t = 0; t < 7; t++) /* post per tag: i % 7 == t */
        for (int i = t; i < NFLIGHT; i += 7)
            cr_assert_eq(cg_tp_irecv(p.conn, data[i], sizeof(data[i]),
                                     (uint32_t)t, &r[i]), CG_OK);
    for (int i = NFLIGHT - 1; i >= 0; i--) {
        cr_assert_eq(cg_tp_wait(r[i], &size), CG_OK, "%s", cg_last_error());
        cr_assert_eq(data[i][0], (uint32_t)i, "slot %d got message %u", i,
                     data[i][0]);
    }
    cr_assert_eq(tp_pair_finish(&p), 0);
    cr_assert_eq(tp_mem_live(&p.mem), 0);
    free(data);
}

#define NPEERS 4

/* Child k: its own rank (k + 1) and 3 sockets; sends its rank as data. */
static int child_ranked(void *arg)
{
    const tp_pair_t *p = arg;
    int rank = *(const int *)p->arg;
    uint32_t msg[4096];
    cg_tp_req_t *r;
    cg_tp_conn_t *conn;
    tp_mem_t m = {0};
    cg_transport_t *tp = tp_make(&m, 3, 0, TP_COOKIE, rank);

    TP_CHECK(tp != NULL, "transport");
    TP_CHECK(tp_connect(tp, &p->h, &conn, 10000) == CG_OK, "connect: %s",
             cg_last_error());
    for (size_t i = 0; i < 4096; i++)
        msg[i] = (uint32_t)rank;
    TP_CHECK(cg_tp_isend(conn, msg, sizeof(msg), 5, &r) == CG_OK, "isend");
    TP_CHECK(tp_wait_expect(r, CG_OK, sizeof(msg)) == 0, "send");
    cg_tp_conn_close(conn);
    cg_transport_destroy(tp);
    return tp_mem_live(&m) != 0;
}

Test(tcp, concurrent_peers_with_three_sockets_each_are_told_apart,
     .timeout = 60)
{
    int ranks[NPEERS];
    pid_t pids[NPEERS];
    cg_tp_conn_t *conns[NPEERS];
    uint32_t buf[4096];
    tp_pair_t p = {0};
    int seen = 0;

    p.tp = tp_make(&p.mem, 1, 0, TP_COOKIE, 0);
    cr_assert_eq(cg_tp_listen(p.tp, &p.h, &p.l), CG_OK);
    for (int k = 0; k < NPEERS; k++) { /* all connect at once */
        ranks[k] = k + 1;
        p.arg = &ranks[k];
        pids[k] = tp_fork(child_ranked, &p);
    }
    for (int k = 0; k < NPEERS; k++) {
        cg_tp_req_t *r;
        cr_assert_eq(tp_accept(p.tp, p.l, &conns[k], 10000), CG_OK);
        int rank = cg_tp_conn_peer_rank(conns[k]);
        cr_assert(rank >= 1 && rank <= NPEERS, "peer rank %d", rank);
        cr_assert_eq(cg_tp_irecv(conns[k], buf, sizeof(buf), 5, &r), CG_OK);
        cr_assert_eq(tp_wait_expect(r, CG_OK, sizeof(buf)), 0);
        cr_assert_eq(buf[0], (uint32_t)rank, "conn of rank %d got %u", rank,
                     buf[0]);
        cr_assert_eq(buf[4095], (uint32_t)rank);
        seen |= 1 << rank;
    }
    cr_assert_eq(seen, 0x1e, "ranks seen mask 0x%x", seen);
    for (int k = 0; k < NPEERS; k++) {
        cr_assert_eq(tp_reap(pids[k], 10000), 0, "child %d", k);
        cg_tp_conn_close(conns[k]);
    }
    cg_tp_listener_close(p.l);
    cg_transport_destroy(p.tp);
    cr_assert_eq(tp_mem_live(&p.mem), 0);
}
