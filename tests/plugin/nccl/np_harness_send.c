/* SPDX-License-Identifier: Apache-2.0 */
/*
 * np_harness's sending process (np_harness.c's pair run, the child): a
 * stranger's and a foreign handle's connects refused, the main comm's
 * connect, grouped sends in reverse tag order, 32 in flight, 200 sends of
 * 1 MiB, truncating sends and stale registrations, four comms connecting
 * at once, close with nothing sent.
 */
#include <stdlib.h>
#include <string.h>

#include "harness_check.h"
#include "np_harness.h"

/* ---- the sender (child) ---- */

void sender(np_drv_t *d, int fd)
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
