/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Peer death in the middle of rendezvous-sized streams over the UCX
 * transport (transport/ucx*.c), repeated: the peer is SIGKILLed at a
 * different moment each round while it sends or receives 4 MiB messages,
 * over shared memory (CMA zero copy) and over UCX's TCP lanes; a peer
 * that is stopped past the timeout, failed, then resumed must fail too and
 * exit cleanly; and a receiver must never take data from a send its sender
 * gave up on (the buffer is the user's again). Nothing may hang, crash or
 * leak control memory.
 */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>

#include "tests/transport/test_ucx_util.h"

#define MSG (4u << 20)
#define WINDOW 4
#define ROUNDS 6

static double now_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void use_tcp(void)
{
    setenv("UCX_TLS", "tcp", 1);
}

/* The stream each side runs: WINDOW sends (or receives) of MSG bytes kept
 * posted until one fails. */
typedef struct stream {
    cg_tp_conn_t *c;
    int send;
    char *bufs;
    int nlive;
    cg_tp_req_t *r[WINDOW];
    cg_status_t st[WINDOW];
    int live[WINDOW];
    unsigned long done;      /* transfers that completed */
    cg_status_t fail;        /* first failure, CG_OK if none */
    double fail_at;
} stream_t;

static cg_status_t post(cg_tp_conn_t *c, int send, char *buf, cg_tp_req_t **r)
{
    return send ? cg_tp_isend(c, buf, MSG, 5, r)
                : cg_tp_irecv(c, buf, MSG, 5, r);
}

static void stream_post(stream_t *s, int i)
{
    s->st[i] = post(s->c, s->send, s->bufs + (size_t)i * MSG, &s->r[i]);
    s->live[i] = s->st[i] == CG_OK;
    s->nlive += s->live[i];
    if (!s->live[i] && s->fail == CG_OK) {
        s->fail = s->st[i];
        s->fail_at = now_s();
    }
}

static void stream_start(stream_t *s, cg_tp_conn_t *c, int send, char *bufs)
{
    memset(s, 0, sizeof(*s));
    s->c = c;
    s->send = send;
    s->bufs = bufs;
    s->fail = CG_OK;
    for (int i = 0; i < WINDOW; i++)
        stream_post(s, i);
}

/* Tests and reposts until every request ended after a failure or the
 * deadline passes; kill_at > 0: SIGKILL victim at that time. */
static void stream_loop(stream_t *s, pid_t victim, double kill_at,
                        double deadline)
{
    size_t sz;

    while (s->nlive > 0 && now_s() < deadline) {
        if (victim > 0 && kill_at > 0 && now_s() >= kill_at) {
            kill(victim, SIGKILL);
            kill_at = 0;
        }
        for (int i = 0; i < WINDOW; i++) {
            if (!s->live[i])
                continue;
            cg_status_t st = cg_tp_test(s->r[i], &sz);
            if (st == CG_INPROGRESS)
                continue;
            s->live[i] = 0;
            s->nlive--;
            if (st != CG_OK && s->fail == CG_OK) {
                s->fail = st;
                s->fail_at = now_s();
            }
            if (st == CG_OK)
                s->done++;
            if (st == CG_OK && s->fail == CG_OK)
                stream_post(s, i);
        }
    }
}

/* One round: the child streams (sends when parent_sends is 0) until it is
 * killed; the parent streams the other way and kills it after delay_s.
 * Every parent request must end, with a peer failure, soon after. */
static void kill_round(int parent_sends, double delay_s)
{
    char *bufs = malloc((size_t)WINDOW * MSG);
    tu_pair_t p;
    stream_t s;

    cr_assert_not_null(bufs);
    memset(bufs, 3, (size_t)WINDOW * MSG);
    tu_pair_open(&p, 1);
    if (p.is_child) {
        stream_start(&s, p.conn, !parent_sends, bufs);
        stream_loop(&s, 0, 0, now_s() + 30);
        _exit(9); /* the parent kills it before this */
    }
    cr_assert_not_null(p.conn, "pair: %s", cg_last_error());
    p.log.level = CG_LOG_ERROR; /* the failures are expected */
    double t0 = now_s();
    stream_start(&s, p.conn, parent_sends, bufs);
    stream_loop(&s, p.child, t0 + delay_s, t0 + delay_s + 3.0 * tu_scale());
    double took = s.fail_at - (t0 + delay_s);
    int rc = tu_wait_child(p.child, 10);
    cr_assert_eq(rc, -SIGKILL, "child status %d", rc);
    cr_assert(CG_STATUS_IS_PEER_FAILURE(s.fail), "after %lu transfers the "
              "stream ended with %s", s.done, cg_status_name(s.fail));
    for (int i = 0; i < WINDOW; i++)
        cr_assert(!s.live[i], "request %d still pending %.1f s after the "
                  "kill", i, now_s() - (t0 + delay_s));
    cr_assert_lt(took, 2.0 * tu_scale(), "failure seen %.2f s after the "
                 "kill", took);
    cg_tp_req_t *late;
    cg_status_t st = cg_tp_isend(p.conn, bufs, 8, 6, &late);
    cr_assert(CG_STATUS_IS_PEER_FAILURE(st), "new send: %s",
              cg_status_name(st));
    tu_pair_close(&p);
    cr_assert_eq(p.mem.live[CG_MEM_CAT_CONTROL], 0, "%lld bytes live",
                 (long long)p.mem.live[CG_MEM_CAT_CONTROL]);
    free(bufs);
}

/* Kill moments spread over the first ~40 ms: before the first transfer,
 * during the first rendezvous, and mid-stream. */
static void kill_rounds(int parent_sends)
{
    for (int i = 0; i < ROUNDS; i++)
        kill_round(parent_sends, 0.007 * i);
}

Test(ucx_kill, sender_killed_mid_stream, .timeout = 60)
{
    kill_rounds(0);
}

Test(ucx_kill, receiver_killed_mid_stream, .timeout = 60)
{
    kill_rounds(1);
}

Test(ucx_kill_tcp, sender_killed_mid_stream, .init = use_tcp, .timeout = 60)
{
    kill_rounds(0);
}

Test(ucx_kill_tcp, receiver_killed_mid_stream, .init = use_tcp,
     .timeout = 60)
{
    kill_rounds(1);
}

/* The child streams to the parent; the parent stops it, fails the conn on
 * its timeout and closes it, then resumes the child, whose requests must
 * all fail with a peer failure (not crash, not hang) before it exits. */
static void stopped_then_resumed(int parent_sends)
{
    char *bufs = malloc((size_t)WINDOW * MSG);
    tu_pair_t p;
    stream_t s;

    cr_assert_not_null(bufs);
    tu_pair_open(&p, 1);
    if (p.is_child) {
        p.log.level = CG_LOG_ERROR;
        stream_start(&s, p.conn, !parent_sends, bufs);
        stream_loop(&s, 0, 0, now_s() + 20 * tu_scale());
        TU_CHECK(CG_STATUS_IS_PEER_FAILURE(s.fail), "child stream ended "
                 "with %s after %lu transfers", cg_status_name(s.fail),
                 s.done);
        for (int i = 0; i < WINDOW; i++)
            TU_CHECK(!s.live[i], "child request %d pending", i);
        tu_pair_close(&p); /* exits 0 when nothing leaked */
    }
    cr_assert_not_null(p.conn, "pair: %s", cg_last_error());
    p.log.level = CG_LOG_ERROR;
    double t0 = now_s();
    /* Let the stream run, stop the child mid-transfer, wait out the
     * timeout on the parent's side. */
    stream_start(&s, p.conn, parent_sends, bufs);
    stream_loop(&s, 0, 0, t0 + 0.05);
    kill(p.child, SIGSTOP);
    stream_loop(&s, 0, 0, now_s() + 4.0 * tu_scale());
    cr_assert(CG_STATUS_IS_PEER_FAILURE(s.fail), "parent stream ended with "
              "%s after %lu transfers", cg_status_name(s.fail), s.done);
    cr_assert_eq(s.nlive, 0, "%d parent requests still pending", s.nlive);
    cg_tp_conn_close(p.conn);
    p.conn = NULL;
    kill(p.child, SIGCONT);
    int rc = tu_wait_child(p.child, 10);
    cr_assert_eq(rc, 0, "resumed child exit status %d", rc);
    tu_pair_close(&p);
    cr_assert_eq(p.mem.live[CG_MEM_CAT_CONTROL], 0, "%lld bytes live",
                 (long long)p.mem.live[CG_MEM_CAT_CONTROL]);
    free(bufs);
}

Test(ucx_kill, stopped_sender_failed_then_resumed, .timeout = 60)
{
    stopped_then_resumed(0);
}

Test(ucx_kill, stopped_receiver_failed_then_resumed, .timeout = 60)
{
    stopped_then_resumed(1);
}

Test(ucx_kill_tcp, stopped_sender_failed_then_resumed, .init = use_tcp,
     .timeout = 60)
{
    stopped_then_resumed(0);
}

/* The child is stopped while the parent's rendezvous send to it is in
 * flight; the parent closes the connection (the send ends CANCELED and the
 * buffer is the user's again) and overwrites the buffer, then resumes the
 * child. Its receive may fail or deliver the original bytes, never the
 * overwritten ones (a zero-copy read of the sender's memory after the
 * close would). */
static void abandoned_send(void)
{
    char *buf = malloc(MSG);
    cg_tp_req_t *r;
    size_t got = 0;
    tu_pair_t p;

    cr_assert_not_null(buf);
    tu_pair_open(&p, 5);
    if (p.is_child) {
        p.log.level = CG_LOG_ERROR;
        memset(buf, 0, MSG);
        cg_tp_req_t *ready;
        TU_CHECK(cg_tp_irecv(p.conn, buf, MSG, 1, &r) == CG_OK, "irecv");
        TU_CHECK(cg_tp_wait(r, NULL) == CG_OK, "first: %s", cg_last_error());
        memset(buf, 0, MSG);
        TU_CHECK(cg_tp_irecv(p.conn, buf, MSG, 1, &r) == CG_OK, "irecv");
        TU_CHECK(cg_tp_isend(p.conn, NULL, 0, 2, &ready) == CG_OK, "isend");
        TU_CHECK(cg_tp_wait(ready, NULL) == CG_OK, "ready: %s",
                 cg_last_error());
        raise(SIGSTOP);
        cg_status_t st = cg_tp_wait(r, &got);
        TU_CHECK(st != CG_OK || tu_check(buf, MSG, 21) < 0, "received %zu "
                 "bytes of an abandoned send, bad byte at %ld", got,
                 tu_check(buf, MSG, 21));
        tu_pair_close(&p); /* exits 0 when nothing leaked */
    }
    cr_assert_not_null(p.conn, "pair: %s", cg_last_error());
    p.log.level = CG_LOG_ERROR;
    /* A first message wires the endpoint up both ways (before that UCX
     * holds a rendezvous until the peer answers). */
    tu_fill(buf, MSG, 20);
    cr_assert_eq(cg_tp_isend(p.conn, buf, MSG, 1, &r), CG_OK, "isend");
    cr_assert_eq(cg_tp_wait(r, NULL), CG_OK, "first: %s", cg_last_error());
    cr_assert_eq(cg_tp_irecv(p.conn, NULL, 0, 2, &r), CG_OK, "irecv");
    cr_assert_eq(cg_tp_wait(r, NULL), CG_OK, "child ready: %s",
                 cg_last_error());
    int status;
    cr_assert_eq(waitpid(p.child, &status, WUNTRACED), p.child, "waitpid");
    cr_assert(WIFSTOPPED(status), "child status 0x%x", status);
    tu_fill(buf, MSG, 21);
    cr_assert_eq(cg_tp_isend(p.conn, buf, MSG, 1, &r), CG_OK, "isend");
    for (int i = 0; i < 100; i++)
        cg_tp_progress(p.tp);
    cg_tp_conn_close(p.conn); /* the send ends CANCELED */
    p.conn = NULL;
    tu_fill(buf, MSG, 22);    /* the user reuses its buffer */
    kill(p.child, SIGCONT);
    int rc = tu_wait_child(p.child, 10);
    cr_assert_eq(rc, 0, "resumed child exit status %d", rc);
    tu_pair_close(&p);
    free(buf);
}

Test(ucx_kill, abandoned_send_never_delivers_reused_buffer, .timeout = 60)
{
    for (int i = 0; i < 3; i++)
        abandoned_send();
}
