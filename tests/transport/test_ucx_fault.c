/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Failure scenarios of the UCX transport (transport/ucx*.c) between forked
 * processes on loopback: a peer SIGKILLed mid-transfer, a peer that goes
 * silent (SIGSTOP), raw sockets that fail the handshake while a good peer
 * connects, and a peer with the wrong job cookie. Nothing may hang: every
 * wait is bounded by the transport's timeout plus a margin.
 */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>

#include "tests/transport/test_ucx_util.h"
#include "transport/ucx_impl.h" /* handle layout: magic, packed address */

static double now_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void tu_use_tcp(void)
{
    setenv("UCX_TLS", "tcp", 1);
}

static cg_status_t sync0(cg_tp_conn_t *conn)
{
    cg_tp_req_t *s, *r;
    cg_status_t st = cg_tp_irecv(conn, NULL, 0, 77, &r);

    if (st == CG_OK)
        st = cg_tp_isend(conn, NULL, 0, 77, &s);
    if (st == CG_OK)
        st = cg_tp_wait(s, NULL);
    return st == CG_OK ? cg_tp_wait(r, NULL) : st;
}

#define BIG (256u << 20)

static void killed_mid_transfer(void)
{
    tu_pair_t p;
    cg_tp_req_t *r[3], *late;
    cg_status_t st[3];
    size_t sz[3];
    char *big = malloc(BIG), small[8];

    cr_assert_not_null(big);
    tu_pair_open(&p, 2);
    if (p.is_child) {
        memset(big, 1, BIG);
        TU_CHECK(sync0(p.conn) == CG_OK, "sync");
        TU_CHECK(cg_tp_isend(p.conn, big, BIG, 1, &r[0]) == CG_OK, "isend");
        for (int i = 0; i < 20; i++)
            cg_tp_progress(p.tp);
        raise(SIGKILL);
    }
    cr_assert_not_null(p.conn, "pair: %s", cg_last_error());
    cg_tp_irecv(p.conn, big, BIG, 1, &r[0]);   /* the child's, cut short */
    cg_tp_irecv(p.conn, small, 8, 2, &r[1]);   /* never sent */
    cg_tp_isend(p.conn, big, 64u << 20, 9, &r[2]); /* never received */
    cr_assert_eq(sync0(p.conn), CG_OK, "sync: %s", cg_last_error());
    double t0 = now_s();
    int left = tu_wait_all(r, 3, st, sz, 2 + 1);
    double took = now_s() - t0;
    cr_assert_eq(left, 0, "%d requests still pending after %.1f s", left, took);
    cr_assert(st[0] == CG_OK || CG_STATUS_IS_PEER_FAILURE(st[0]),
              "big recv: %s", cg_status_name(st[0]));
    for (int i = 1; i < 3; i++)
        cr_assert(CG_STATUS_IS_PEER_FAILURE(st[i]), "req %d: %s", i,
                  cg_status_name(st[i]));
    cr_assert_lt(took, 2.0 * tu_scale(), "failures took %.2f s", took);
    cg_status_t s = cg_tp_isend(p.conn, small, 8, 3, &late);
    cr_assert(CG_STATUS_IS_PEER_FAILURE(s), "new send: %s", cg_status_name(s));
    int rc = tu_wait_child(p.child, 10);
    cr_assert_eq(rc, -SIGKILL, "child status %d", rc);
    tu_pair_close(&p);
    cr_assert_eq(p.mem.live[CG_MEM_CAT_CONTROL], 0, "%lld bytes live",
                 (long long)p.mem.live[CG_MEM_CAT_CONTROL]);
    free(big);
}

Test(ucx_fault, peer_killed_mid_transfer, .timeout = 30)
{
    killed_mid_transfer();
}

Test(ucx_fault_tcp, peer_killed_mid_transfer, .init = tu_use_tcp,
     .timeout = 30)
{
    killed_mid_transfer();
}

Test(ucx_fault, silent_peer_times_out, .timeout = 30)
{
    tu_pair_t p;
    cg_tp_req_t *r;
    char buf[8];

    tu_pair_open(&p, 1);
    if (p.is_child) {
        TU_CHECK(sync0(p.conn) == CG_OK, "sync");
        raise(SIGSTOP); /* alive, sockets open, never answers */
        _exit(0);
    }
    cr_assert_not_null(p.conn, "pair: %s", cg_last_error());
    cr_assert_eq(sync0(p.conn), CG_OK, "sync: %s", cg_last_error());
    cr_assert_eq(cg_tp_irecv(p.conn, buf, 8, 1, &r), CG_OK, "irecv");
    double t0 = now_s();
    cg_status_t st = cg_tp_wait(r, NULL);
    double took = now_s() - t0;
    kill(p.child, SIGKILL);
    cr_assert_eq(st, CG_ERR_TIMEOUT, "wait: %s", cg_status_name(st));
    cr_assert_geq(took, 0.9, "timed out after only %.2f s", took);
    cr_assert_lt(took, 1.0 * tu_scale() + 1.0, "timed out after %.2f s", took);
    tu_wait_child(p.child, 10);
    tu_pair_close(&p);
    cr_assert_eq(p.mem.live[CG_MEM_CAT_CONTROL], 0, "%lld bytes live",
                 (long long)p.mem.live[CG_MEM_CAT_CONTROL]);
}

/* A peer cut off mid-rendezvous (alive, sockets open, never progressing
 * again: the partitioned rank of the netns test): this side's receive
 * matches the peer's rendezvous announcement only after the peer stopped,
 * so it can neither complete nor be canceled. Closing the conn must force
 * its endpoint (a graceful close waits on the transfer, is parked after
 * CG_UCX_CLOSE_WAIT_NS, and ucp_worker_destroy then aborts on the
 * endpoint's live request: UCX 1.13's "proto_reqs" assertion); the
 * receive ends canceled and nothing is left allocated. */
Test(ucx_fault_tcp, close_with_matched_rendezvous_from_stalled_peer,
     .init = tu_use_tcp, .timeout = 30)
{
    const size_t len = 4u << 20; /* far above the rendezvous threshold */
    char *big = malloc(len);
    ucp_tag_recv_info_t info;
    cg_status_t st = CG_ERR_IO, before = CG_ERR_IO;
    double took = 0;
    int stopped, arrived = 0;
    tu_pair_t p;
    cg_tp_req_t *r;

    cr_assert_not_null(big);
    tu_pair_open(&p, 5);
    if (p.is_child) {
        cg_tp_req_t *s;
        memset(big, 1, len);
        TU_CHECK(sync0(p.conn) == CG_OK, "sync");
        TU_CHECK(cg_tp_isend(p.conn, big, len, 1, &s) == CG_OK, "isend");
        for (double end = now_s() + 0.1; now_s() < end;)
            cg_tp_progress(p.tp);
        raise(SIGSTOP); /* its rendezvous announced, never served */
        _exit(0);
    }
    cr_assert_not_null(p.conn, "pair: %s", cg_last_error());
    /* The child is killed before any check can end this process. */
    cg_status_t sync = sync0(p.conn);
    cg__ucx_tp_t *tp = (cg__ucx_tp_t *)p.tp;
    uint64_t tag = cg__ucx_tag(((cg__ucx_conn_t *)p.conn)->id, 1);
    /* Progress (no receive posted: the announcement waits unexpected)
     * until the child has stopped and its announcement is here. */
    stopped = 0;
    for (double end = now_s() + 2 * tu_scale();
         sync == CG_OK && !(arrived && stopped) && now_s() < end;) {
        int ws;
        cg_tp_progress(p.tp);
        stopped = stopped || waitpid(p.child, &ws, WNOHANG | WUNTRACED) ==
                                 p.child;
        arrived = ucp_tag_probe_nb(tp->worker, tag, UINT64_MAX, 0, &info) !=
                  NULL;
    }
    if (arrived && cg_tp_irecv(p.conn, big, len, 1, &r) == CG_OK) {
        for (double end = now_s() + 0.1; now_s() < end;)
            cg_tp_progress(p.tp);
        before = cg_tp_test(r, NULL);
        double t0 = now_s();
        cg_tp_conn_close(p.conn);
        p.conn = NULL;
        took = now_s() - t0;
        if (before == CG_INPROGRESS)
            st = cg_tp_test(r, NULL);
    }
    tu_pair_close(&p); /* destroys the worker: aborted here before */
    kill(p.child, SIGKILL);
    tu_wait_child(p.child, 10);
    cr_assert_eq(sync, CG_OK, "sync: %s", cg_status_name(sync));
    cr_assert(stopped, "the child did not stop");
    cr_assert(arrived, "the announcement did not arrive");
    cr_log_info("announced %zu bytes", info.length);
    cr_assert_eq(before, CG_INPROGRESS, "the receive before the close: %s",
                 cg_status_name(before));
    cr_assert_eq(st, CG_ERR_CANCELED, "the receive after the close: %s",
                 cg_status_name(st));
    /* Forced, not parked: a parked close waits CG_UCX_CLOSE_WAIT_NS. */
    cr_assert_lt(took, 0.15, "close took %.2f s", took);
    cr_assert_eq(p.mem.live[CG_MEM_CAT_CONTROL], 0, "%lld bytes live",
                 (long long)p.mem.live[CG_MEM_CAT_CONTROL]);
    free(big);
}

/* A raw TCP client of the listener, sending len bytes of hello. */
static int raw_peer(const cg_tp_handle_t *h, const void *hello, size_t len)
{
    cg_sockaddr_t a;
    int fd;

    cr_assert_eq(cg_sockaddr_unpack(h->bytes + 4, &a), CG_OK, "unpack");
    cr_assert_eq(cg_sock_connect_start(&a, &fd), CG_OK, "%s", cg_last_error());
    while (cg_sock_connect_check(fd) == CG_INPROGRESS)
        usleep(100);
    if (len > 0)
        cr_assert_eq(cg_sock_send_all(fd, hello, len, cg_deadline_ns(1e9)),
                     CG_OK, "%s", cg_last_error());
    return fd;
}

/* The listener closes a refused peer: it reads EOF (or a reset). */
static int closed_by_listener(cg_tp_listener_t *l, int fd)
{
    uint8_t b[64];
    size_t got = 0;
    cg_tp_conn_t *c;

    for (int i = 0; i < 20000; i++) {
        cr_assert_eq(cg_tp_accept(l, &c), CG_INPROGRESS, "bad peer accepted");
        if (cg_sock_recv_some(fd, b, sizeof(b), &got) != CG_OK)
            return 1;
        usleep(100);
    }
    return 0;
}

/* Keeps the listener served (nothing may be accepted) until pid exits;
 * its exit status. */
static int serve_until_exit(cg_tp_listener_t *l, pid_t pid)
{
    cg_tp_conn_t *c;
    int status;

    for (int i = 0; i < 100000; i++) {
        cr_assert_eq(cg_tp_accept(l, &c), CG_INPROGRESS, "bad peer accepted");
        if (waitpid(pid, &status, WNOHANG) == pid)
            return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
        usleep(100);
    }
    kill(pid, SIGKILL);
    return tu_wait_child(pid, 5);
}

/* Forks a connector before any UCX exists in this process (UCX state
 * does not survive fork). It reads the handle from the returned pipe,
 * connects with cookie and exits 0 when conn_ready gives expect (and,
 * when connected, it receives 7). */
static pid_t connector(uint64_t cookie, cg_status_t expect, int *wfd_p)
{
    int fds[2];
    cr_assert_eq(pipe(fds), 0, "pipe");
    pid_t pid = fork();
    if (pid != 0) {
        close(fds[0]);
        *wfd_p = fds[1];
        return pid;
    }
    close(fds[1]);
    tu_pair_t p = {.is_child = 1};
    cg_tp_handle_t h;
    cg_tp_req_t *r;
    uint64_t v = 0;
    TU_CHECK(read(fds[0], &h, sizeof(h)) == (ssize_t)sizeof(h), "handle");
    cg_transport_params_t prm = tu_params(&p.mem, &p.log, 1, cookie,
                                          tu_timeout_ns(5));
    TU_CHECK(cg_transport_create(&prm, &p.tp) == CG_OK, "create");
    TU_CHECK(cg_tp_connect(p.tp, &h, &p.conn) == CG_OK, "connect");
    cg_status_t st = tu_ready(p.conn, 10);
    TU_CHECK(st == expect, "ready: %s", cg_status_name(st));
    if (st == CG_OK) {
        TU_CHECK(cg_tp_irecv(p.conn, &v, 8, 1, &r) == CG_OK, "irecv");
        TU_CHECK(cg_tp_wait(r, NULL) == CG_OK && v == 7, "got %llu",
                 (unsigned long long)v);
        TU_CHECK(sync0(p.conn) == CG_OK, "sync");
    }
    tu_pair_close(&p); /* exits */
    return 0;
}

static void give_handle(int wfd, const cg_tp_handle_t *h)
{
    cr_assert_eq(write(wfd, h, sizeof(*h)), (ssize_t)sizeof(*h), "write");
    close(wfd);
}

Test(ucx_fault, bad_handshakes_refused_good_peer_served, .timeout = 30)
{
    tu_mem_t mem = {0};
    cg_log_t log;
    cg_transport_params_t prm = tu_params(&mem, &log, 0, TU_COOKIE,
                                          tu_timeout_ns(5));
    cg_hs_hdr_t hdr = {.version = CG_HS_VERSION, .kind = CG_HS_KIND_UCX_CTRL,
                       .cookie = TU_COOKIE ^ 1, .nsocks = 1, .conn_id = 9};
    uint8_t wire[CG_HS_HDR_SIZE];
    cg_transport_t *tp;
    cg_tp_listener_t *l;
    cg_tp_conn_t *c;
    cg_tp_handle_t h;
    cg_tp_req_t *r;
    uint64_t v = 7;

    int bad_w, good_w;
    pid_t bad = connector(TU_COOKIE ^ 2, CG_ERR_HANDSHAKE, &bad_w);
    pid_t good = connector(TU_COOKIE, CG_OK, &good_w);
    log.level = CG_LOG_ERROR; /* the refusals are expected */
    cr_assert_eq(cg_transport_create(&prm, &tp), CG_OK, "%s", cg_last_error());
    cr_assert_eq(cg_tp_listen(tp, &h, &l), CG_OK, "%s", cg_last_error());
    cg_hs_encode(&hdr, wire);
    int silent = raw_peer(&h, NULL, 0); /* holds a handshake slot */
    int junk = raw_peer(&h, "GET / HTTP/1.0\r\n\r\n0123456789abcdef", 34);
    int wrong = raw_peer(&h, wire, sizeof(wire));
    give_handle(bad_w, &h);
    cr_assert(closed_by_listener(l, junk), "junk peer not closed");
    cr_assert(closed_by_listener(l, wrong), "wrong cookie not closed");
    int rc = serve_until_exit(l, bad);
    cr_assert_eq(rc, 0, "bad-cookie connector exit status %d", rc);
    give_handle(good_w, &h);
    cr_assert_eq(tu_accept(l, &c, 10), CG_OK, "good peer: %s", cg_last_error());
    cr_assert_eq(cg_tp_conn_peer_rank(c), 1, "rank %d",
                 cg_tp_conn_peer_rank(c));
    cr_assert_eq(cg_tp_isend(c, &v, 8, 1, &r), CG_OK, "isend");
    cr_assert_eq(cg_tp_wait(r, NULL), CG_OK, "send: %s", cg_last_error());
    cr_assert_eq(sync0(c), CG_OK, "sync: %s", cg_last_error());
    cr_assert_eq(tu_wait_child(good, 10), 0, "good connector failed");
    cg_sock_close(silent);
    cg_sock_close(junk);
    cg_sock_close(wrong);
    cg_tp_conn_close(c);
    cg_tp_listener_close(l);
    cg_transport_destroy(tp);
    cr_assert_eq(mem.live[CG_MEM_CAT_CONTROL], 0, "%lld bytes live",
                 (long long)mem.live[CG_MEM_CAT_CONTROL]);
}

/* A peer with the job's cookie whose endpoint cannot be made (here: a
 * payload of another layout; in CI: a peer that closed at once, its
 * worker's shared memory gone) is reported by accept, not dropped while
 * accept waits for it; and it gets no answer, since the answer completes
 * its connect. Once, the acceptor answered first and then dropped the
 * conn: the peer's connect returned, and the accept spun forever. */
Test(ucx_fault, peer_without_endpoint_fails_accept, .timeout = 30)
{
    tu_mem_t mem = {0};
    cg_log_t log;
    cg_transport_params_t prm = tu_params(&mem, &log, 0, TU_COOKIE,
                                          tu_timeout_ns(5));
    cg_hs_hdr_t hdr = {.version = CG_HS_VERSION, .kind = CG_HS_KIND_UCX_CTRL,
                       .cookie = TU_COOKIE, .rank = 4, .nsocks = 1,
                       .conn_id = 9, .payload_len = CG_UCX_PREFIX_SIZE + 8};
    uint8_t wire[CG_HS_HDR_SIZE + CG_UCX_PREFIX_SIZE + 8] = {0};
    cg_transport_t *tp;
    cg_tp_listener_t *l;
    cg_tp_conn_t *c = NULL;
    cg_tp_handle_t h;
    uint8_t b[64];
    size_t got = 0;
    cg_status_t st;

    log.level = CG_LOG_ERROR; /* the failure's warning is expected */
    cr_assert_eq(cg_transport_create(&prm, &tp), CG_OK, "%s", cg_last_error());
    cr_assert_eq(cg_tp_listen(tp, &h, &l), CG_OK, "%s", cg_last_error());
    cg_hs_encode(&hdr, wire);
    int fd = raw_peer(&h, wire, sizeof(wire));
    st = tu_accept(l, &c, 5);
    cr_assert_eq(st, CG_ERR_HANDSHAKE, "accept: %s (%s)", cg_status_name(st),
                 cg_last_error());
    cr_assert_null(c);
    cr_assert(strstr(cg_last_error(), "rank 4") != NULL &&
                  strstr(cg_last_error(), "layout") != NULL,
              "%s", cg_last_error());
    cr_assert_eq(cg_tp_accept(l, &c), CG_INPROGRESS, "reported twice");
    for (int i = 0; i < 1000; i++) {
        st = cg_sock_recv_some(fd, b, sizeof(b), &got);
        if (st != CG_OK || got > 0)
            break;
        usleep(1000);
    }
    cr_assert_eq(got, 0, "the peer got %zu bytes of an answer", got);
    cr_assert_neq(st, CG_OK, "the peer's socket was left open");
    cg_sock_close(fd);
    cg_tp_listener_close(l);
    cg_transport_destroy(tp);
    cr_assert_eq(mem.live[CG_MEM_CAT_CONTROL], 0, "%lld bytes live",
                 (long long)mem.live[CG_MEM_CAT_CONTROL]);
}
