/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Scenarios of the UCX transport (transport/ucx*.c) between two forked
 * processes on loopback: matching and ordering, sizes, many requests in
 * flight, truncation, close and cancel. Each runs twice: under UCX's own
 * transport choice (suite "ucx") and with UCX_TLS=tcp (suite "ucx_tcp").
 * Peer failures and bad peers are in test_ucx_fault.c.
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/clock.h"
#include "tests/transport/test_ucx_util.h"

static void tu_use_tcp(void)
{
    setenv("UCX_TLS", "tcp", 1);
}

/* Defines Test(ucx, name) and Test(ucx_tcp, name) around one scenario. */
#define UCX_SCENARIO(name, secs)                                             \
    static void sc_##name(void);                                             \
    Test(ucx, name, .timeout = (secs)) { sc_##name(); }                      \
    Test(ucx_tcp, name, .init = tu_use_tcp, .timeout = (secs))               \
    {                                                                        \
        sc_##name();                                                         \
    }                                                                        \
    static void sc_##name(void)

#define TAG_SYNC 0xfffffff0u

/* Both sides: a 0-byte exchange, so neither closes while the other still
 * has requests pending. */
static cg_status_t barrier(cg_tp_conn_t *conn)
{
    cg_tp_req_t *s, *r;
    cg_status_t st;

    st = cg_tp_irecv(conn, NULL, 0, TAG_SYNC, &r);
    if (st != CG_OK)
        return st;
    st = cg_tp_isend(conn, NULL, 0, TAG_SYNC, &s);
    if (st != CG_OK)
        return st;
    st = cg_tp_wait(s, NULL);
    cg_status_t st2 = cg_tp_wait(r, NULL);
    return st != CG_OK ? st : st2;
}

static void finish_parent(tu_pair_t *p)
{
    cg_status_t st = barrier(p->conn);
    cr_assert_eq(st, CG_OK, "barrier: %s (%s)", cg_status_name(st),
                 cg_last_error());
    pid_t child = p->child;
    tu_pair_close(p);
    for (int c = 0; c < CG_MEM_CAT_COUNT; c++)
        cr_assert_eq(p->mem.live[c], 0, "category %d: %lld bytes live", c,
                     (long long)p->mem.live[c]);
    int rc = tu_wait_child(child, 20);
    cr_assert_eq(rc, 0, "child exit status %d", rc);
}

static void finish_child(tu_pair_t *p)
{
    cg_status_t st = barrier(p->conn);
    TU_CHECK(st == CG_OK, "barrier: %s", cg_status_name(st));
    tu_pair_close(p); /* exits */
}

static tu_pair_t *open_pair(tu_pair_t *p)
{
    cg_status_t st = tu_pair_open(p, 10);
    if (!p->is_child)
        cr_assert_eq(st, CG_OK, "pair: %s (%s)", cg_status_name(st),
                     cg_last_error());
    return p;
}

UCX_SCENARIO(order_per_tag, 30)
{
    enum { N = 200 };
    tu_pair_t p;
    uint32_t v[N];
    cg_tp_req_t *r[N];
    cg_status_t st[N];
    size_t sz[N];

    open_pair(&p);
    if (p.is_child) {
        for (uint32_t i = 0; i < N; i++) {
            v[i] = i;
            TU_CHECK(cg_tp_isend(p.conn, &v[i], 4, 7 + i % 2, &r[i]) == CG_OK,
                     "isend %u", i);
        }
        TU_CHECK(tu_wait_all(r, N, st, sz, 10) == 0, "sends pending");
        finish_child(&p);
    }
    /* Tag 8 first: different tags may complete in any order. */
    for (int i = 0; i < N; i++)
        cg_tp_irecv(p.conn, &v[i], 4, 7 + (i < N / 2), &r[i]);
    cr_assert_eq(tu_wait_all(r, N, st, sz, 10), 0, "receives pending");
    for (int i = 0; i < N / 2; i++) {
        cr_assert_eq(st[i], CG_OK, "recv %d: %s", i, cg_status_name(st[i]));
        cr_assert_eq(v[i], 2u * i + 1, "tag 8 #%d carried %u", i, v[i]);
        cr_assert_eq(v[N / 2 + i], 2u * i, "tag 7 #%d carried %u", i,
                     v[N / 2 + i]);
    }
    finish_parent(&p);
}

UCX_SCENARIO(zero_byte, 30)
{
    tu_pair_t p;
    cg_tp_req_t *r[3];
    cg_status_t st[3];
    size_t sz[3] = {99, 99, 99};
    char buf[16];

    open_pair(&p);
    if (p.is_child) {
        for (int i = 0; i < 3; i++)
            TU_CHECK(cg_tp_isend(p.conn, NULL, 0, 5, &r[i]) == CG_OK, "isend");
        TU_CHECK(tu_wait_all(r, 3, st, sz, 10) == 0, "sends pending");
        TU_CHECK(st[0] == CG_OK && sz[0] == 0, "send size %zu", sz[0]);
        finish_child(&p);
    }
    cg_tp_irecv(p.conn, NULL, 0, 5, &r[0]);
    cg_tp_irecv(p.conn, buf, sizeof(buf), 5, &r[1]);
    cg_tp_irecv(p.conn, buf, 1, 5, &r[2]);
    cr_assert_eq(tu_wait_all(r, 3, st, sz, 10), 0, "receives pending");
    for (int i = 0; i < 3; i++) {
        cr_assert_eq(st[i], CG_OK, "recv %d: %s", i, cg_status_name(st[i]));
        cr_assert_eq(sz[i], 0, "recv %d got %zu bytes", i, sz[i]);
    }
    finish_parent(&p);
}

static const size_t mixed[] = {1, 7, 8, 93, 4096, 8257, 65536 + 3,
                               (1u << 20) + 1, 8u << 20};
#define NMIXED (sizeof(mixed) / sizeof(mixed[0]))

UCX_SCENARIO(mixed_sizes, 30)
{
    tu_pair_t p;
    void *b[NMIXED];
    cg_tp_req_t *r[NMIXED];
    cg_status_t st[NMIXED];
    size_t sz[NMIXED];

    open_pair(&p);
    for (size_t i = 0; i < NMIXED; i++) {
        b[i] = malloc(mixed[i]);
        if (p.is_child)
            tu_fill(b[i], mixed[i], (uint32_t)i);
        else
            memset(b[i], 0xee, mixed[i]);
    }
    for (size_t i = 0; i < NMIXED; i++) {
        cg_status_t s = p.is_child
            ? cg_tp_isend(p.conn, b[i], mixed[i], 3, &r[i])
            : cg_tp_irecv(p.conn, b[i], mixed[i], 3, &r[i]);
        if (p.is_child)
            TU_CHECK(s == CG_OK, "isend %zu", i);
        else
            cr_assert_eq(s, CG_OK, "irecv %zu: %s", i, cg_last_error());
    }
    int left = tu_wait_all(r, NMIXED, st, sz, 20);
    if (p.is_child) {
        TU_CHECK(left == 0, "%d sends pending", left);
        finish_child(&p);
    }
    cr_assert_eq(left, 0, "%d receives pending", left);
    for (size_t i = 0; i < NMIXED; i++) {
        cr_assert_eq(st[i], CG_OK, "recv %zu: %s", i, cg_status_name(st[i]));
        cr_assert_eq(sz[i], mixed[i], "recv %zu: %zu bytes", i, sz[i]);
        long bad = tu_check(b[i], mixed[i], (uint32_t)i);
        cr_assert_eq(bad, -1, "size %zu differs at byte %ld", mixed[i], bad);
        free(b[i]);
    }
    finish_parent(&p);
}

UCX_SCENARIO(thousand_in_flight, 60)
{
    enum { N = 1000, LEN = 1024 };
    tu_pair_t p;
    static char buf[N][LEN];
    static cg_tp_req_t *r[N];
    static cg_status_t st[N];
    static size_t sz[N];

    open_pair(&p);
    for (int i = 0; i < N; i++) {
        if (p.is_child) {
            tu_fill(buf[i], LEN, (uint32_t)i);
            TU_CHECK(cg_tp_isend(p.conn, buf[i], LEN, (uint32_t)(i % 4),
                                 &r[i]) == CG_OK, "isend %d", i);
        } else {
            cr_assert_eq(cg_tp_irecv(p.conn, buf[i], LEN, (uint32_t)(i % 4),
                                     &r[i]), CG_OK, "irecv %d", i);
        }
    }
    int left = tu_wait_all(r, N, st, sz, 30);
    if (p.is_child) {
        TU_CHECK(left == 0, "%d sends pending", left);
        finish_child(&p);
    }
    cr_assert_eq(left, 0, "%d of %d receives pending", left, N);
    for (int i = 0; i < N; i++) {
        cr_assert_eq(st[i], CG_OK, "recv %d: %s", i, cg_status_name(st[i]));
        cr_assert_eq(tu_check(buf[i], LEN, (uint32_t)i), -1,
                     "recv %d has another message's bytes", i);
    }
    finish_parent(&p);
}

UCX_SCENARIO(bidirectional, 60)
{
    enum { N = 32, LEN = 256 * 1024 };
    tu_pair_t p;
    cg_tp_req_t *r[2 * N];
    cg_status_t st[2 * N];
    size_t sz[2 * N];
    char *out = malloc((size_t)N * LEN), *in = malloc((size_t)N * LEN);

    open_pair(&p);
    uint32_t me = (uint32_t)p.is_child, peer = 1 - me;
    for (int i = 0; i < N; i++) {
        tu_fill(out + (size_t)i * LEN, LEN, me * 1000 + (uint32_t)i);
        cg_tp_irecv(p.conn, in + (size_t)i * LEN, LEN, 1, &r[2 * i]);
        cg_tp_isend(p.conn, out + (size_t)i * LEN, LEN, 1, &r[2 * i + 1]);
    }
    int left = tu_wait_all(r, 2 * N, st, sz, 30);
    int bad = 0;
    for (int i = 0; i < N && left == 0; i++) {
        if (st[2 * i] != CG_OK || st[2 * i + 1] != CG_OK ||
            tu_check(in + (size_t)i * LEN, LEN, peer * 1000 + (uint32_t)i) >= 0)
            bad++;
    }
    free(out);
    free(in);
    if (p.is_child) {
        TU_CHECK(left == 0 && bad == 0, "left %d bad %d", left, bad);
        finish_child(&p);
    }
    cr_assert_eq(left, 0, "%d requests pending", left);
    cr_assert_eq(bad, 0, "%d of %d exchanges failed or corrupt", bad, N);
    finish_parent(&p);
}

/* A message that arrived before its receive was posted completes the
 * receive at once: the received size must still be reported. */
UCX_SCENARIO(recv_of_arrived_message_reports_size, 30)
{
    static const size_t len[3] = {8, 100, 3000};
    tu_pair_t p;
    cg_tp_req_t *r[3];
    cg_status_t st[3];
    size_t sz[3];
    char *b = malloc(3 * 4096);

    open_pair(&p);
    if (p.is_child) {
        for (int i = 0; i < 3; i++) {
            tu_fill(b + i * 4096, len[i], 7);
            TU_CHECK(cg_tp_isend(p.conn, b + i * 4096, len[i], 6, &r[i]) ==
                         CG_OK, "isend");
        }
        TU_CHECK(tu_wait_all(r, 3, st, sz, 10) == 0, "sends pending");
        free(b);
        finish_child(&p);
    }
    /* Let the messages arrive unexpected before posting the receives. */
    for (int i = 0; i < 2000; i++) {
        cg_tp_progress(p.tp);
        usleep(100);
    }
    for (int i = 0; i < 3; i++)
        cr_assert_eq(cg_tp_irecv(p.conn, b + i * 4096, 4096, 6, &r[i]), CG_OK);
    cr_assert_eq(tu_wait_all(r, 3, st, sz, 10), 0, "receives pending");
    for (int i = 0; i < 3; i++) {
        cr_assert_eq(st[i], CG_OK, "recv %d: %s", i, cg_status_name(st[i]));
        cr_assert_eq(sz[i], len[i], "recv %d: reported %zu bytes, sent %zu",
                     i, sz[i], len[i]);
        cr_assert_eq(tu_check(b + i * 4096, len[i], 7), -1, "recv %d data", i);
    }
    free(b);
    finish_parent(&p);
}

UCX_SCENARIO(recv_larger_than_message, 30)
{
    static const size_t len[2] = {100, (1u << 20) + 5};
    tu_pair_t p;
    cg_tp_req_t *r[2];
    cg_status_t st[2];
    size_t sz[2];
    char *b[2] = {malloc(4096), malloc(2u << 20)};

    open_pair(&p);
    if (p.is_child) {
        for (int i = 0; i < 2; i++) {
            tu_fill(b[i], len[i], 9);
            TU_CHECK(cg_tp_isend(p.conn, b[i], len[i], 4, &r[i]) == CG_OK,
                     "isend");
        }
        TU_CHECK(tu_wait_all(r, 2, st, sz, 10) == 0, "sends pending");
        finish_child(&p);
    }
    cg_tp_irecv(p.conn, b[0], 4096, 4, &r[0]);
    cg_tp_irecv(p.conn, b[1], 2u << 20, 4, &r[1]);
    cr_assert_eq(tu_wait_all(r, 2, st, sz, 10), 0, "receives pending");
    for (int i = 0; i < 2; i++) {
        cr_assert_eq(st[i], CG_OK, "recv %d: %s", i, cg_status_name(st[i]));
        cr_assert_eq(sz[i], len[i], "recv %d reports %zu bytes, sent %zu", i,
                     sz[i], len[i]);
        cr_assert_eq(tu_check(b[i], len[i], 9), -1, "recv %d corrupt", i);
    }
    free(b[0]);
    free(b[1]);
    finish_parent(&p);
}

UCX_SCENARIO(truncation, 30)
{
    static const size_t len[3] = {200, 1u << 20, 64};
    tu_pair_t p;
    cg_tp_req_t *r[3];
    cg_status_t st[3];
    size_t sz[3];
    char *b = malloc(1u << 20);

    open_pair(&p);
    if (p.is_child) {
        tu_fill(b, 1u << 20, 1);
        for (int i = 0; i < 3; i++)
            TU_CHECK(cg_tp_isend(p.conn, b, len[i], 6, &r[i]) == CG_OK,
                     "isend");
        TU_CHECK(tu_wait_all(r, 3, st, sz, 10) == 0, "sends pending");
        finish_child(&p);
    }
    cg_tp_irecv(p.conn, b, 100, 6, &r[0]);
    cg_tp_irecv(p.conn, b, 65536, 6, &r[1]);
    cg_tp_irecv(p.conn, b, 64, 6, &r[2]); /* the connection still works */
    cr_assert_eq(tu_wait_all(r, 3, st, sz, 10), 0, "receives pending");
    cr_assert_eq(st[0], CG_ERR_TRUNCATED, "eager: %s", cg_status_name(st[0]));
    cr_assert_eq(st[1], CG_ERR_TRUNCATED, "rndv: %s", cg_status_name(st[1]));
    cr_assert_eq(st[2], CG_OK, "after: %s", cg_status_name(st[2]));
    cr_assert_eq(sz[2], 64, "after: %zu bytes", sz[2]);
    cr_assert_eq(tu_check(b, 64, 1), -1, "after: corrupt");
    free(b);
    finish_parent(&p);
}

UCX_SCENARIO(send_before_ready_is_queued, 30)
{
    tu_mem_t mem = {0};
    cg_log_t log;
    cg_transport_params_t prm = tu_params(&mem, &log, 0, TU_COOKIE,
                                          tu_timeout_ns(10));
    cg_transport_t *tp;
    cg_tp_listener_t *l;
    cg_tp_conn_t *a, *c;
    cg_tp_handle_t h;
    cg_tp_req_t *r[4];
    cg_status_t st[4];
    size_t sz[4];
    uint64_t x[2] = {42, 43}, got[2] = {0, 0};

    cr_assert_eq(cg_transport_create(&prm, &tp), CG_OK, "%s", cg_last_error());
    cr_assert_eq(cg_tp_listen(tp, &h, &l), CG_OK, "%s", cg_last_error());
    cr_assert_eq(cg_tp_connect(tp, &h, &c), CG_OK, "%s", cg_last_error());
    for (int i = 0; i < 2; i++)
        cr_assert_eq(cg_tp_isend(c, &x[i], 8, 1, &r[i]), CG_OK, "%s",
                     cg_last_error());
    cr_assert_eq(tu_accept(l, &a, 10), CG_OK, "%s", cg_last_error());
    cr_assert_eq(cg_tp_conn_peer_rank(a), 0, "peer rank %d",
                 cg_tp_conn_peer_rank(a));
    for (int i = 0; i < 2; i++)
        cg_tp_irecv(a, &got[i], 8, 1, &r[2 + i]);
    cr_assert_eq(tu_wait_all(r, 4, st, sz, 10), 0, "requests pending");
    for (int i = 0; i < 4; i++)
        cr_assert_eq(st[i], CG_OK, "req %d: %s", i, cg_status_name(st[i]));
    cr_assert_eq(got[0], 42, "first queued send, got %llu",
                 (unsigned long long)got[0]);
    cr_assert_eq(got[1], 43, "second queued send, got %llu",
                 (unsigned long long)got[1]);
    cg_tp_conn_close(a);
    cg_tp_conn_close(c);
    cg_tp_listener_close(l);
    cg_transport_destroy(tp);
    cr_assert_eq(mem.live[CG_MEM_CAT_CONTROL], 0, "%lld bytes live",
                 (long long)mem.live[CG_MEM_CAT_CONTROL]);
}

UCX_SCENARIO(close_cancels_pending, 30)
{
    tu_pair_t p;
    cg_tp_req_t *r;
    char buf[64];

    open_pair(&p);
    if (p.is_child) {
        /* Post, tell the parent, then see its close as a reset. */
        TU_CHECK(cg_tp_irecv(p.conn, buf, sizeof(buf), 2, &r) == CG_OK,
                 "irecv");
        TU_CHECK(barrier(p.conn) == CG_OK, "barrier");
        cg_status_t st = cg_tp_wait(r, NULL);
        TU_CHECK(st == CG_ERR_PEER_RESET, "got %s", cg_status_name(st));
        tu_pair_close(&p);
    }
    cr_assert_eq(barrier(p.conn), CG_OK, "barrier: %s", cg_last_error());
    cr_assert_eq(cg_tp_irecv(p.conn, buf, sizeof(buf), 2, &r), CG_OK, "irecv");
    cr_assert_eq(cg_tp_test(r, NULL), CG_INPROGRESS, "nothing was sent");
    cg_tp_conn_close(p.conn);
    p.conn = NULL;
    cg_status_t st = cg_tp_test(r, NULL);
    cr_assert_eq(st, CG_ERR_CANCELED, "after close: %s", cg_status_name(st));
    pid_t child = p.child;
    tu_pair_close(&p);
    cr_assert_eq(p.mem.live[CG_MEM_CAT_CONTROL], 0, "%lld bytes live",
                 (long long)p.mem.live[CG_MEM_CAT_CONTROL]);
    int rc = tu_wait_child(child, 20);
    cr_assert_eq(rc, 0, "child exit status %d", rc);
}

/* cg_tp_done only looks: a receive whose message has had time to arrive
 * stays not done while nothing drives the transport; progress makes it
 * done, and its test then ends it with the size. A first round trip
 * wires the endpoints up, so that "go" leaves inside its isend. */
UCX_SCENARIO(done_looks_without_progress, 30)
{
    tu_pair_t p;
    cg_tp_req_t *r, *s;
    char b[8] = {0}, go = 'g';
    size_t sz = 0;

    open_pair(&p);
    if (p.is_child) {
        TU_CHECK(barrier(p.conn) == CG_OK, "barrier");
        TU_CHECK(cg_tp_irecv(p.conn, &go, 1, 2, &r) == CG_OK, "irecv");
        TU_CHECK(cg_tp_wait(r, NULL) == CG_OK, "go");
        tu_fill(b, sizeof(b), 3);
        TU_CHECK(cg_tp_isend(p.conn, b, sizeof(b), 1, &s) == CG_OK, "isend");
        TU_CHECK(cg_tp_wait(s, NULL) == CG_OK, "send");
        finish_child(&p);
    }
    cr_assert_eq(barrier(p.conn), CG_OK, "barrier: %s", cg_last_error());
    cr_assert_eq(cg_tp_irecv(p.conn, b, sizeof(b), 1, &r), CG_OK);
    cr_assert_eq(cg_tp_done(r), 0, "done before anything was sent");
    cr_assert_eq(cg_tp_isend(p.conn, &go, 1, 2, &s), CG_OK);
    usleep((useconds_t)(200000 * tu_scale())); /* no progress meanwhile */
    cr_assert_eq(cg_tp_done(r), 0, "done without progress");
    uint64_t end = cg_now_ns() + tu_timeout_ns(10);
    while (!cg_tp_done(r) && cg_now_ns() < end)
        cg_tp_progress(p.tp);
    cr_assert_eq(cg_tp_done(r), 1, "not done after progress");
    cr_assert_eq(cg_tp_test(r, &sz), CG_OK, "%s", cg_last_error());
    cr_assert_eq(sz, sizeof(b), "size %zu", sz);
    cr_assert_eq(tu_check(b, sizeof(b), 3), -1, "data");
    cr_assert_eq(cg_tp_wait(s, NULL), CG_OK);
    finish_parent(&p);
}

/* One message of 4 GiB + 1 byte (sizes past 32 bits); shared memory only,
 * skipped when the host cannot give each process the buffer. */
Test(ucx, long_4gib_plus_one, .timeout = 90)
{
    const size_t len = (4ull << 30) + 1;
    char *b = malloc(len);
    tu_pair_t p;
    cg_tp_req_t *r;
    size_t got = 0;

    if (b == NULL)
        cr_skip_test("cannot allocate %zu bytes", len);
    tu_pair_open(&p, 30);
    if (p.is_child) {
        tu_fill(b, len, 4);
        TU_CHECK(cg_tp_isend(p.conn, b, len, 1, &r) == CG_OK, "isend");
        cg_status_t st = cg_tp_wait(r, &got);
        TU_CHECK(st == CG_OK && got == len, "send: %s, %zu bytes",
                 cg_status_name(st), got);
        finish_child(&p);
    }
    cr_assert_not_null(p.conn, "pair: %s", cg_last_error());
    cr_assert_eq(cg_tp_irecv(p.conn, b, len, 1, &r), CG_OK, "irecv");
    cg_status_t st = cg_tp_wait(r, &got);
    cr_assert_eq(st, CG_OK, "recv: %s (%s)", cg_status_name(st),
                 cg_last_error());
    cr_assert_eq(got, len, "received %zu bytes of %zu", got, len);
    long bad = tu_check(b, len, 4);
    cr_assert_eq(bad, -1, "first wrong byte at %ld", bad);
    free(b);
    finish_parent(&p);
}
