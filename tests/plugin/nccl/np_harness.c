/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The net plugin driven as NCCL drives it, one version per run:
 *   np_harness LIB VERSION
 * Two processes (fork; handles cross a socketpair as NCCL's bootstrap
 * would carry them), each loading the library itself: init, devices,
 * properties, connect/accept polled from one thread, registrations (256
 * MiB on each side; a CUDA pointer refused), grouped receives in reverse
 * tag order, short and 0-byte messages, 32 in flight, several comms
 * connecting at once, a second thread registering, listening and
 * accepting on the listener whose lane the data's comm shares while data
 * moves, a receive posted after its too long message arrived, close with
 * nothing sent, bad use (a request tested again, a deregistered handle
 * posted, also once its slot is reused), a stranger's connect refused;
 * then in one process init/finalize and dlopen/dlclose cycles, and a
 * second dlopen of the library for its tuner table while a message is in
 * flight. Log lines go under NET without collguard's prefix. Exit 0 when
 * every check held. A watchdog bounds every phase (PHASE_S, or
 * NP_HARNESS_PHASE_S seconds): one that overruns prints its name in both
 * processes and exits 3, so a stuck poll loop fails the test in a minute,
 * saying where.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness_check.h"
#include "np_drv.h"
#include "plugin/nccl/tuner_v5.h"

#define H NCCL_NET_HANDLE_MAXSIZE

/* The table slot in a handle id (np_impl.h's layout: bits 12..27), to
 * check that a registration reused a freed one's slot. */
#define ID_SLOT(id) (((uintptr_t)(id) >> 12) & 0xffffu)

/* ---- the watchdog ---- */

#define PHASE_S 60
static const char *volatile g_phase = "start";
static volatile pid_t g_peer; /* the parent's child, killed with it */
static unsigned g_phase_s = PHASE_S;

static void say(const char *s)
{
    ssize_t k = write(2, s, strlen(s));
    (void)k;
}

/* SIGALRM: this process overran its phase; SIGTERM: its parent did. */
static void watchdog(int sig)
{
    say("[");
    say(g_who);
    say(sig == SIGALRM ? "] watchdog: stuck in phase '"
                       : "] watchdog: the other process is stuck; this one "
                         "was in phase '");
    say(g_phase);
    say("'\n");
    if (g_peer > 0)
        kill(g_peer, SIGTERM);
    _exit(3);
}

static void watchdog_arm(void)
{
    const char *e = getenv("NP_HARNESS_PHASE_S");
    if (e != NULL && atoi(e) > 0)
        g_phase_s = (unsigned)atoi(e);
    signal(SIGALRM, watchdog);
    signal(SIGTERM, watchdog);
}

/* A new phase: named for the watchdog, with PHASE_S seconds of its own. */
static void phase(const char *name)
{
    g_phase = name;
    alarm(g_phase_s);
}

static void xfer(int fd, void *buf, size_t n, int out)
{
    size_t done = 0;
    while (done < n) {
        ssize_t k = out ? write(fd, (char *)buf + done, n - done)
                        : read(fd, (char *)buf + done, n - done);
        if (k <= 0) {
            fprintf(stderr, "[%s] bootstrap pipe broke\n", g_who);
            exit(2);
        }
        done += (size_t)k;
    }
}

/* Polls one request to completion. */
static ncclResult_t wait_req(np_drv_t *d, void *req, int *sizes)
{
    int done = 0;
    ncclResult_t r;
    for (long i = 0; i < 200000000L; i++) {
        r = np_test(d, req, &done, sizes);
        if (r != ncclSuccess || done)
            return r;
    }
    return ncclInternalError;
}

/* Connect on one side, accept on the other, each polled. */
static void *do_accept(np_drv_t *d, void *l)
{
    void *rc = NULL;
    for (long i = 0; i < 100000000L && rc == NULL; i++)
        if (np_accept(d, l, &rc) != ncclSuccess)
            return NULL;
    return rc;
}

static void *do_connect(np_drv_t *d, void *h)
{
    void *sc = NULL;
    for (long i = 0; i < 100000000L && sc == NULL; i++)
        if (np_connect(d, 0, h, &sc) != ncclSuccess)
            return NULL;
    return sc;
}

/* ---- the receiver (parent) and the sender (child) ---- */

struct bg {
    np_drv_t *d;
    void *comm, *listen; /* listen: the one comm was accepted from */
    atomic_int stop;
    int iters, bad;
};

/* A second thread, like NCCL's proxy service thread: registers, listens
 * and polls accept on the listener whose lane (transport and lock) the
 * comm shares, while the first one moves data on that comm. */
static void *bg_thread(void *arg)
{
    struct bg *b = arg;
    char *buf = malloc(1 << 20);
    while (!atomic_load(&b->stop)) {
        void *mh = NULL, *l = NULL, *rc = NULL;
        unsigned char h[H];
        ncclNetProperties_v11_t p;
        if (np_accept(b->d, b->listen, &rc) != ncclSuccess || rc != NULL ||
            np_reg(b->d, b->comm, buf, 1 << 20, &mh) != ncclSuccess ||
            np_dereg(b->d, b->comm, mh) != ncclSuccess ||
            np_props(b->d, 0, &p) != ncclSuccess ||
            np_listen(b->d, 0, h, &l) != ncclSuccess ||
            np_close_listen(b->d, l) != ncclSuccess)
            b->bad++;
        b->iters++;
    }
    free(buf);
    return NULL;
}

static void receiver(np_drv_t *d, int fd)
{
    unsigned char h[H];
    void *l, *rc, *mh;
    size_t big = 256u << 20;
    char *buf = malloc(big);

    g_who = "recv";
    phase("main comm: listen/accept");
    /* Main comm. */
    OK(np_listen(d, 0, h, &l));
    xfer(fd, h, H, 1);
    rc = do_accept(d, l);
    CHECK(rc != NULL);
    OK(np_reg(d, rc, buf, big, &mh));

    /* Grouped receives 1..8; the sender sends in reverse tag order, each
     * message shorter than posted, slot 0 of each group 0 bytes. */
    phase("grouped receives");
    for (int n = 1; n <= 8; n++) {
        void *ptrs[8], *mhs[8], *req = NULL;
        size_t sz[8];
        int tags[8], got[8];
        for (int i = 0; i < n; i++) {
            ptrs[i] = buf + (size_t)i * 65536;
            sz[i] = 65536;
            tags[i] = 100 * n + i;
            mhs[i] = mh;
        }
        memset(buf, 0, 8 * 65536);
        OK(np_irecv(d, rc, n, ptrs, sz, tags, mhs, &req));
        CHECK(req != NULL);
        OK(wait_req(d, req, got));
        for (int i = 0; i < n; i++) {
            size_t want = i == 0 ? 0 : (size_t)(1000 * i + n);
            CHECK(got[i] == (int)want);
            for (size_t k = 0; k < want; k++)
                if ((unsigned char)buf[(size_t)i * 65536 + k] !=
                    (unsigned char)(tags[i] + k)) {
                    CHECK(!"payload");
                    break;
                }
        }
    }
    /* 32 in flight: 32 receives posted, the 33rd is "try later". */
    phase("32 in flight");
    {
        void *reqs[33];
        for (int i = 0; i < 32; i++) {
            void *p = buf + (size_t)i * 4096;
            size_t s = 4096;
            int t = 7;
            OK(np_irecv(d, rc, 1, &p, &s, &t, &mh, &reqs[i]));
            CHECK(reqs[i] != NULL);
        }
        void *p = buf;
        size_t s = 4096;
        int t = 7;
        OK(np_irecv(d, rc, 1, &p, &s, &t, &mh, &reqs[32]));
        CHECK(reqs[32] == NULL);
        for (int i = 0; i < 32; i++) {
            int got = -1;
            OK(wait_req(d, reqs[i], &got));
            CHECK(got == 4096);
            CHECK((unsigned char)buf[(size_t)i * 4096] == (unsigned char)i);
        }
        int done = 1;
        CHECK(np_test(d, reqs[0], &done, NULL) == ncclInvalidArgument);
        CHECK(np_test(d, reqs[31], &done, NULL) == ncclInvalidArgument);
        CHECK(done == 0); /* a request is tested done once */
    }
    /* A second thread registers, listens and accepts while data moves. */
    phase("second thread while data moves");
    {
        struct bg b = {d, rc, l, 0, 0, 0};
        pthread_t th;
        pthread_create(&th, NULL, bg_thread, &b);
        for (int i = 0; i < 200; i++) {
            void *p = buf, *req = NULL;
            size_t s = 1 << 20;
            int t = 9, got = 0;
            OK(np_irecv(d, rc, 1, &p, &s, &t, &mh, &req));
            OK(wait_req(d, req, &got));
            CHECK(got == 1 << 20);
        }
        atomic_store(&b.stop, 1);
        pthread_join(th, NULL);
        CHECK(b.bad == 0);
        CHECK(b.iters > 0);
    }
    OK(np_close_listen(d, l)); /* the recv comm keeps working */
    /* A message larger than its receive fails the receive. */
    phase("truncated receives");
    {
        void *p = buf, *req = NULL;
        size_t s = 100;
        int t = 11, got;
        OK(np_irecv(d, rc, 1, &p, &s, &t, &mh, &req));
        ncclResult_t r = wait_req(d, req, &got);
        CHECK(r == ncclInvalidUsage);
    }
    /* The same when the message is already there as the receive is
     * posted (the progress for tag 14 takes tag 15 in too). */
    {
        void *p = buf, *req = NULL;
        size_t s = 64;
        int t = 14, got = -1;
        usleep(50000);
        OK(np_irecv(d, rc, 1, &p, &s, &t, &mh, &req));
        OK(wait_req(d, req, &got));
        CHECK(got == 64);
        s = 100;
        t = 15;
        OK(np_irecv(d, rc, 1, &p, &s, &t, &mh, &req));
        CHECK(wait_req(d, req, &got) == ncclInvalidUsage);
        CHECK(np_test(d, req, &got, NULL) == ncclInvalidArgument);
    }
    /* Bad use. */
    phase("bad use, stale registrations");
    {
        void *req = (void *)0x1234, *junk = (void *)0xdeadbeef;
        int done;
        CHECK(np_dereg(d, rc, junk) == ncclInvalidArgument);
        CHECK(np_test(d, junk, &done, NULL) == ncclInvalidArgument);
        CHECK(np_isend(d, rc, buf, 8, 1, mh, &req) == ncclInvalidArgument);
        CHECK(req == NULL); /* always written */
        /* Device memory: ptrSupport is host only. */
        req = (void *)1;
        np_drv_log_clear();
        CHECK(np_reg_type(d, rc, buf, 4096, NCCL_PTR_CUDA, &req) ==
              ncclInvalidArgument);
        CHECK(req == NULL);
        CHECK(np_drv_log_count(NCCL_LOG_WARN, "only host memory") == 1);
    }
    OK(np_dereg(d, rc, mh));
    CHECK(np_dereg(d, rc, mh) == ncclInvalidArgument);
    /* A comm remembers the registration it last accepted (mh, just
     * above): deregistered, it is refused, and still when a new
     * registration takes its slot; the new one works (tag 999). */
    {
        void *p = buf, *req = (void *)1, *mh2 = NULL, *mhs[2];
        void *ps[2] = {buf, buf + 64};
        size_t s = 64, ss[2] = {64, 64};
        int t = 999, ts[2] = {998, 997}, got = -1;
        CHECK(np_irecv(d, rc, 1, &p, &s, &t, &mh, &req) ==
              ncclInvalidArgument);
        CHECK(req == NULL);
        OK(np_reg(d, rc, buf, 4096, &mh2));
        CHECK(mh2 != NULL && mh2 != mh);
        CHECK(ID_SLOT(mh2) == ID_SLOT(mh)); /* the slot was reused */
        req = (void *)1;
        CHECK(np_irecv(d, rc, 1, &p, &s, &t, &mh, &req) ==
              ncclInvalidArgument);
        CHECK(req == NULL);
        OK(np_irecv(d, rc, 1, &p, &s, &t, &mh2, &req));
        CHECK(req != NULL);
        OK(wait_req(d, req, &got));
        CHECK(got == 64);
        for (int k = 0; k < 64; k++)
            if ((unsigned char)buf[k] != (unsigned char)(999 + k)) {
                CHECK(!"tag 999 data");
                break;
            }
        /* mh2 now remembered: the stale one refused in a group too. */
        mhs[0] = mh2;
        mhs[1] = mh;
        req = (void *)1;
        CHECK(np_irecv(d, rc, 2, ps, ss, ts, mhs, &req) ==
              ncclInvalidArgument);
        CHECK(req == NULL);
        OK(np_dereg(d, rc, mh2));
        req = (void *)1;
        CHECK(np_irecv(d, rc, 1, &p, &s, &t, &mh2, &req) ==
              ncclInvalidArgument);
        CHECK(req == NULL);
    }

    /* Several comms connecting at once, and one stranger. */
    phase("4 comms at once: accept and receive");
    {
        enum { N = 4 };
        void *ls[N], *rcs[N] = {0};
        unsigned char hs[N][H];
        for (int i = 0; i < N; i++) {
            OK(np_listen(d, 0, hs[i], &ls[i]));
            xfer(fd, hs[i], H, 1);
        }
        for (long it = 0; it < 100000000L; it++) {
            int left = 0;
            for (int i = 0; i < N; i++)
                if (rcs[i] == NULL) {
                    OK(np_accept(d, ls[i], &rcs[i]));
                    left += rcs[i] == NULL;
                }
            if (!left)
                break;
        }
        for (int i = 0; i < N; i++) {
            void *p = buf, *req = NULL;
            size_t s = 64;
            int t = 1, got = -1;
            CHECK(rcs[i] != NULL);
            OK(np_irecv(d, rcs[i], 1, &p, &s, &t, NULL, &req));
            OK(wait_req(d, req, &got));
            CHECK(got == 8 && buf[0] == 'A' + i);
            OK(np_close_recv(d, rcs[i]));
            OK(np_close_listen(d, ls[i]));
        }
    }
    /* Close with nothing sent. */
    phase("close with nothing sent: accept");
    {
        void *l2, *r2;
        OK(np_listen(d, 0, h, &l2));
        xfer(fd, h, H, 1);
        r2 = do_accept(d, l2);
        CHECK(r2 != NULL);
        char ready;
        xfer(fd, &ready, 1, 0); /* both ends connected */
        OK(np_close_recv(d, r2));
        OK(np_close_listen(d, l2));
        CHECK(np_close_recv(d, r2) == ncclInvalidArgument);
    }
    char c;
    phase("waiting for the sender to finish");
    xfer(fd, &c, 1, 0); /* the sender is done */
    OK(np_close_recv(d, rc));
    free(buf);
}

static void sender(np_drv_t *d, int fd)
{
    unsigned char h[H];
    void *sc, *mh;
    size_t big = 256u << 20;
    char *buf = malloc(big);

    g_who = "send";
    phase("stranger and foreign handle connects");
    xfer(fd, h, H, 0);
    /* A stranger: the same address without the listener's cookie. */
    {
        unsigned char bad[H];
        void *s2 = NULL;
        ncclResult_t r = ncclSuccess;
        memcpy(bad, h, H);
        bad[8] ^= 0x5a;
        for (long i = 0; i < 100000000L && s2 == NULL && r == ncclSuccess;
             i++)
            r = np_connect(d, 0, bad, &s2);
        CHECK(s2 == NULL);
        CHECK(r == ncclRemoteError);
    }
    /* A foreign handle. */
    {
        unsigned char junk[H];
        void *s2 = (void *)1;
        memset(junk, 0x77, H);
        CHECK(np_connect(d, 0, junk, &s2) == ncclInvalidArgument);
        CHECK(s2 == NULL);
    }
    phase("main comm: connect");
    sc = do_connect(d, h);
    CHECK(sc != NULL);
    phase("grouped sends");
    OK(np_reg(d, sc, buf, big, &mh));
    for (int n = 1; n <= 8; n++)
        for (int i = n - 1; i >= 0; i--) {
            size_t len = i == 0 ? 0 : (size_t)(1000 * i + n);
            void *req = NULL;
            int tag = 100 * n + i, got = -1;
            for (size_t k = 0; k < len; k++)
                buf[k] = (char)(tag + k);
            OK(np_isend(d, sc, buf, len, tag, mh, &req));
            CHECK(req != NULL);
            OK(wait_req(d, req, &got));
            CHECK(got == (int)len);
        }
    phase("32 in flight");
    {
        char *b32 = malloc(32 * 4096);
        void *reqs[32];
        for (int i = 0; i < 32; i++) {
            b32[(size_t)i * 4096] = (char)i;
            OK(np_isend(d, sc, b32 + (size_t)i * 4096, 4096, 7, NULL,
                        &reqs[i]));
            CHECK(reqs[i] != NULL);
        }
        void *extra = (void *)1;
        OK(np_isend(d, sc, b32, 4096, 7, NULL, &extra));
        CHECK(extra == NULL);
        for (int i = 0; i < 32; i++)
            OK(wait_req(d, reqs[i], NULL));
        free(b32);
    }
    phase("200 sends of 1 MiB");
    for (int i = 0; i < 200; i++) {
        void *req = NULL;
        OK(np_isend(d, sc, buf, 1 << 20, 9, mh, &req));
        OK(wait_req(d, req, NULL));
    }
    phase("truncating sends, stale registrations");
    {
        void *req = NULL;
        OK(np_isend(d, sc, buf, 200, 11, mh, &req)); /* 2x the receive */
        wait_req(d, req, NULL); /* the sender may see success */
        OK(np_isend(d, sc, buf, 64, 14, mh, &req));
        OK(wait_req(d, req, NULL));
        OK(np_isend(d, sc, buf, 200, 15, mh, &req)); /* 2x the receive */
        wait_req(d, req, NULL);
        CHECK(np_isend(d, sc, buf, (2ull << 30), 12, mh, &req) ==
              ncclInvalidArgument); /* past maxP2pBytes */
        for (int k = 0; k < 64; k++)
            buf[k] = (char)(999 + k);
        OK(np_isend(d, sc, buf, 64, 999, mh, &req)); /* mh remembered */
        OK(wait_req(d, req, NULL));
    }
    OK(np_dereg(d, sc, mh));
    /* The remembered registration deregistered, then its slot reused. */
    {
        void *req = (void *)1, *mh2 = NULL;
        CHECK(np_isend(d, sc, buf, 8, 996, mh, &req) == ncclInvalidArgument);
        CHECK(req == NULL);
        OK(np_reg(d, sc, buf, 4096, &mh2));
        CHECK(mh2 != NULL && mh2 != mh);
        CHECK(ID_SLOT(mh2) == ID_SLOT(mh));
        req = (void *)1;
        CHECK(np_isend(d, sc, buf, 8, 996, mh, &req) == ncclInvalidArgument);
        CHECK(req == NULL);
        OK(np_dereg(d, sc, mh2));
    }
    {
        enum { N = 4 };
        unsigned char hs[N][H];
        void *scs[N] = {0};
        phase("4 comms at once: connect and send");
        for (int i = 0; i < N; i++)
            xfer(fd, hs[i], H, 0);
        for (long it = 0; it < 100000000L; it++) {
            int left = 0;
            for (int i = 0; i < N; i++)
                if (scs[i] == NULL) {
                    OK(np_connect(d, 0, hs[i], &scs[i]));
                    left += scs[i] == NULL;
                }
            if (!left)
                break;
        }
        for (int i = 0; i < N; i++) {
            void *req = NULL;
            char msg[8] = {(char)('A' + i)};
            OK(np_isend(d, scs[i], msg, 8, 1, NULL, &req));
            OK(wait_req(d, req, NULL));
            OK(np_close_send(d, scs[i]));
            CHECK(np_isend(d, scs[i], msg, 8, 1, NULL, &req) ==
                  ncclInvalidArgument); /* closed comm */
        }
    }
    phase("close with nothing sent: connect");
    {
        void *s2;
        xfer(fd, h, H, 0);
        s2 = do_connect(d, h);
        CHECK(s2 != NULL);
        char ready = 1;
        xfer(fd, &ready, 1, 1);
        OK(np_close_send(d, s2));
    }
    phase("closing the main comm");
    OK(np_close_send(d, sc));
    char c = 1;
    xfer(fd, &c, 1, 1);
    free(buf);
}

static int run_pair(const char *lib, int ver)
{
    int sv[2], status = 0;
    pid_t pid;
    np_drv_t d;

    if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0)
        return 1;
    pid = fork();
    if (pid == 0) {
        g_peer = 0;
        g_who = "send";
        phase("init");
        close(sv[0]);
        if (np_drv_open(&d, lib, ver) != 0)
            _exit(2);
        OK(np_init(&d));
        sender(&d, sv[1]);
        OK(np_finalize(&d));
        CHECK(np_drv_log_bad(NCCL_NET) == 0);
        np_drv_close(&d);
        _exit(g_fail);
    }
    close(sv[1]);
    g_peer = pid;
    g_who = "recv";
    phase("init, devices, properties");
    if (np_drv_open(&d, lib, ver) != 0)
        return 1;
    OK(np_init(&d));
    {
        int n = 0;
        ncclNetProperties_v11_t p;
        OK(np_devices(&d, &n));
        CHECK(n >= 1);
        OK(np_props(&d, 0, &p));
        CHECK(p.name != NULL && p.pciPath == NULL);
        CHECK(p.ptrSupport == NCCL_PTR_HOST);
        CHECK(p.maxRecvs == 8 && p.maxComms > 0 && p.speed > 0);
        CHECK(p.maxP2pBytes > 0 && p.maxP2pBytes <= NCCL_MAX_NET_SIZE_BYTES);
        CHECK(np_props(&d, n, &p) == ncclInvalidArgument);
        /* NP_WANT_DEV: the one device the environment selects. */
        if (getenv("NP_WANT_DEV") != NULL)
            CHECK(n == 1 && p.name != NULL &&
                  strcmp(p.name, getenv("NP_WANT_DEV")) == 0);
    }
    receiver(&d, sv[0]);
    phase("finalize, waiting for the sender to exit");
    OK(np_finalize(&d));
    CHECK(np_drv_log_bad(NCCL_NET) == 0);
    np_drv_close(&d);
    waitpid(pid, &status, 0);
    alarm(0);
    g_peer = 0;
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    return g_fail;
}

/* NCCL's tuner loader dlopens the net plugin library a second time when
 * no tuner library is named: with a message in flight on s -> r, the same
 * library is opened again, its ncclTunerPlugin_v5 used (init, getCollInfo
 * on a flat cost table as NCCL passes it, finalize) and closed; the
 * message and one after it still arrive. */
static void second_dlopen(const char *lib, np_drv_t *d, void *s, void *r)
{
    enum { NA = NCCL_NUM_ALGORITHMS_V5, NP = NCCL_NUM_PROTOCOLS_V5 };
    float cost[NA][NP];
    ncclTunerConstants_v5_t k;
    ncclNvlDomainInfo_v5_t nvl = {1, 8, 8};
    char in[16];
    void *h2, *tctx = NULL, *sreq = NULL, *rreq = NULL;
    ncclTuner_v5_t *t;
    int nch = 0;

    for (int round = 0; round < 2; round++) {
        void *p = in;
        size_t cap = sizeof(in);
        int tag = 40 + round, got = -1;
        memset(in, 0, sizeof(in));
        OK(np_irecv(d, r, 1, &p, &cap, &tag, NULL, &rreq));
        OK(np_isend(d, s, round ? "after" : "again", 6, tag, NULL, &sreq));
        if (round == 0) {
            h2 = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
            CHECK(h2 != NULL && h2 == d->lib); /* the same object */
            t = h2 != NULL ? dlsym(h2, "ncclTunerPlugin_v5") : NULL;
            CHECK(t != NULL);
            if (t != NULL) {
                memset(&k, 0, sizeof(k));
                for (int a = 0; a < NA; a++)
                    for (int q = 0; q < NP; q++)
                        cost[a][q] = 1.0f + (float)(a * NP + q);
                OK(t->init(&tctx, 7, 4, 2, np_drv_logger, &nvl, &k));
                OK(t->getCollInfo(tctx, ncclFuncAllReduce, 1 << 20, 1,
                                  (float **)cost, NA, NP, 0, &nch));
                /* Ring/Simple survives every pressure level. */
                CHECK(cost[NCCL_ALGO_RING][NCCL_PROTO_SIMPLE] !=
                      NCCL_ALGO_PROTO_IGNORE);
                OK(t->finalize(tctx));
            }
            if (h2 != NULL)
                dlclose(h2);
        }
        OK(wait_req(d, sreq, NULL));
        OK(wait_req(d, rreq, &got));
        CHECK(got == 6 && strcmp(in, round ? "after" : "again") == 0);
    }
}

/* One process, one thread: listen, connect and accept alternately, as
 * NCCL may drive both ends; then init/finalize and dlopen/dlclose. */
static int run_single(const char *lib, int ver)
{
    np_drv_t d;

    g_who = "single";
    for (int cycle = 0; cycle < 3; cycle++) {
        unsigned char h[H];
        void *l, *s = NULL, *r = NULL, *req;
        char msg[16] = "hello", in[16] = {0};
        int got = 0;
        phase("single: dlopen");
        if (np_drv_open(&d, lib, ver) != 0)
            return 1;
        for (int k = 0; k < 2; k++) { /* init -> finalize -> init */
            phase("single: init, listen, connect/accept");
            np_drv_log_clear();
            OK(np_init(&d));
            /* Its INFO lines, under NET, without collguard's prefix
             * (v10 and older set up once per load). */
            if (k == 0 || ver == 11) {
                CHECK(np_drv_log_count(NCCL_LOG_INFO, "device(s)") == 1);
                CHECK(np_drv_log_bad(NCCL_NET) == 0);
            }
            if (ver == 11)
                CHECK(((ncclNet_v11_t *)d.table)->finalize(NULL) ==
                      ncclSuccess);
            OK(np_listen(&d, 0, h, &l));
            OK(np_pair(&d, h, l, &s, &r));
            phase("single: send/receive, close, finalize");
            void *p = in;
            size_t cap = sizeof(in);
            int tag = 3;
            OK(np_irecv(&d, r, 1, &p, &cap, &tag, NULL, &req));
            void *sreq;
            OK(np_isend(&d, s, msg, 6, 3, NULL, &sreq));
            OK(wait_req(&d, sreq, NULL));
            OK(wait_req(&d, req, &got));
            CHECK(got == 6 && strcmp(in, "hello") == 0);
            if (cycle == 0 && k == 0)
                second_dlopen(lib, &d, s, r);
            OK(np_close_send(&d, s));
            OK(np_close_recv(&d, r));
            OK(np_close_listen(&d, l));
            s = r = NULL;
            OK(np_finalize(&d));
        }
        phase("single: dlclose");
        np_drv_close(&d);
    }
    return g_fail;
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: np_harness LIB VERSION\n");
        return 2;
    }
    int ver = atoi(argv[2]);
    watchdog_arm();
    int rc = run_single(argv[1], ver);
    rc |= run_pair(argv[1], ver);
    printf("net plugin v%d: %s\n", ver, rc ? "FAILED" : "all checks passed");
    return rc;
}
