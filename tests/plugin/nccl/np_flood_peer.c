/* SPDX-License-Identifier: Apache-2.0 */
/*
 * np_flood's genuine peer (np_flood.c), a process that loads the plugin
 * itself (v11): a comm connected before the flood and one during it, a
 * message on each and one more on the first.
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness_check.h"
#include "np_flood.h"

/* ---- the genuine peer ---- */

static void *connect_poll(np_drv_t *d, unsigned char *h)
{
    void *sc = NULL;
    for (int64_t t0 = now_ms(); sc == NULL && now_ms() - t0 < 20000;) {
        if (np_connect(d, 0, h, &sc) != ncclSuccess)
            return NULL;
        if (sc == NULL)
            usleep(100);
    }
    return sc;
}

static ncclResult_t wait_req(np_drv_t *d, void *req, int *size)
{
    int done = 0;
    ncclResult_t r;
    for (int64_t t0 = now_ms(); now_ms() - t0 < 20000;) {
        r = np_test(d, req, &done, size);
        if (r != ncclSuccess || done)
            return r;
    }
    return ncclInternalError;
}

static void send_msg(np_drv_t *d, void *sc, char *buf, int seed)
{
    void *mh = NULL, *req = NULL;
    int got = -1;

    for (int i = 0; i < MSG; i++)
        buf[i] = (char)(seed + i);
    OK(np_reg(d, sc, buf, MSG, &mh));
    OK(np_isend(d, sc, buf, MSG, seed, mh, &req));
    CHECK(req != NULL);
    if (req != NULL)
        OK(wait_req(d, req, &got));
    OK(np_dereg(d, sc, mh));
}

void peer(int ctl, const char *lib)
{
    unsigned char h[H], h2[H];
    static char buf[MSG];
    void *sc1, *sc2;
    np_drv_t d;
    int64_t ms;
    char c;

    g_who = "peer";
    if (np_drv_open(&d, lib, 11) != 0)
        exit(2);
    OK(np_init(&d));
    xfer(ctl, h, H, 0);
    memcpy(h2, h, H);
    sc1 = connect_poll(&d, h);    /* before the flood */
    CHECK(sc1 != NULL);
    if (sc1 != NULL)
        send_msg(&d, sc1, buf, 1);
    xfer(ctl, &c, 1, 1);
    xfer(ctl, &c, 1, 0);          /* the flood is up */
    ms = now_ms();
    sc2 = connect_poll(&d, h2);
    ms = now_ms() - ms;
    CHECK(sc2 != NULL);
    if (sc2 != NULL)
        send_msg(&d, sc2, buf, 2);
    if (sc1 != NULL)
        send_msg(&d, sc1, buf, 3); /* the old comm still works */
    xfer(ctl, &ms, sizeof(ms), 1);
    xfer(ctl, &c, 1, 0);
    if (sc1 != NULL)
        OK(np_close_send(&d, sc1));
    if (sc2 != NULL)
        OK(np_close_send(&d, sc2));
    OK(np_finalize(&d));
    np_drv_close(&d);
    exit(g_fail);
}
