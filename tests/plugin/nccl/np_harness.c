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
 * saying where. The pair's two processes are np_harness_recv.c and
 * np_harness_send.c; the watchdog and the polling np_harness_util.c.
 */
#include <dlfcn.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness_check.h"
#include "np_harness.h"
#include "plugin/nccl/tuner_v5.h"

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
