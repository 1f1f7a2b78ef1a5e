/* SPDX-License-Identifier: Apache-2.0 */
/*
 * np_harness's receiving process (np_harness.c's pair run, the parent):
 * the main comm's listen and accept, grouped receives, 32 in flight, a
 * second thread registering, listening and accepting on the lane the
 * data's comm shares while data moves, truncated receives, bad use and
 * stale registrations, four comms accepted at once, close with nothing
 * sent.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness_check.h"
#include "np_harness.h"

/* ---- the receiver (parent) ---- */

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

void receiver(np_drv_t *d, int fd)
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
