/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Point-to-point through the NCCL net plugin's API as NCCL's proxy calls
 * it (isend/irecv/test polling, 8 requests in flight) or through the
 * transport directly, same pattern, two processes on this host:
 *   net_plugin_perf plugin LIB | transport | transport1 [min max [iters [lat]]]
 * prints "size MiB/s" lines (4 KiB..64 MiB by 4x, 8 in flight) and a
 * "lat8 usec" line (8-byte ping-pong, one-way). tests/perf/net_plugin.sh
 * runs them and ucx_perftest and prints the ratios. iters fixes the
 * windows of 8 per size (else 512 MiB a size, 4..2000 windows), lat the
 * latency round trips (else 5000; 0: no latency line), so that one size
 * can be counted alone (valgrind --tool=callgrind, perf stat). As NCCL
 * does, the plugin gets its buffer registered (regMr) and each isend and
 * irecv that registration's handle.
 * NCCL's comms go one way each, so a plugin moves a ping-pong over two
 * connections; "transport" does the same (a connection per direction,
 * each on its own transport instance, as the plugin's lanes), so the
 * plugin/transport ratio is the plugin's own cost. "transport1" uses one
 * two-way connection: on TCP the reply then carries the ACK of the
 * request, where one-way connections send a pure ACK segment per message
 * or two (nstat: 15020 segments for 10000 8-byte messages, not 10010).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/base/clock.h"
#include "np_drv.h"
#include "transport/transport.h"

#define WIN 8
#define H NCCL_NET_HANDLE_MAXSIZE

static int g_plugin;
static np_drv_t g_d;
static cg_transport_t *g_tp[2]; /* [0] sends, [1] receives; transport1: [0] */
static int g_one; /* transport1 */

static void *m_alloc(void *a, cg_mem_cat_t c, size_t n)
{ (void)a; (void)c; return malloc(n); }
static void m_free(void *a, cg_mem_cat_t c, void *p, size_t n)
{ (void)a; (void)c; (void)n; free(p); }

static void xfer(int fd, void *b, size_t n, int out)
{
    size_t d = 0;
    while (d < n) {
        ssize_t k = out ? write(fd, (char *)b + d, n - d)
                        : read(fd, (char *)b + d, n - d);
        if (k <= 0) exit(3);
        d += (size_t)k;
    }
}

/* A plugin comm sends or receives, never both: one per direction, each
 * with its registration of the buffer. The transport's connections are
 * two-way: the same one both ways; no registrations. */
typedef struct { void *tx, *rx, *mtx, *mrx; } link_t;

static link_t setup(int fd, int listener, const char *lib)
{
    unsigned char h[H], peer[H];
    link_t k = {NULL, NULL, NULL, NULL};
    if (g_plugin) {
        void *l;
        if (np_drv_open(&g_d, lib, 11) || np_init(&g_d)) exit(4);
        np_listen(&g_d, 0, h, &l);
        xfer(fd, h, H, 1);
        xfer(fd, peer, H, 0);
        while (k.tx == NULL || k.rx == NULL) { /* one thread, both ends */
            if (k.tx == NULL && np_connect(&g_d, 0, peer, &k.tx)) exit(4);
            if (k.rx == NULL && np_accept(&g_d, l, &k.rx)) exit(4);
        }
        np_close_listen(&g_d, l);
        return k;
    }
    cg_transport_params_t p = {0};
    const char *kind = getenv("CG_TRANSPORT");
    cg_tp_listener_t *l;
    cg_tp_handle_t th, ph;
    cg_tp_conn_t *c = NULL, *a = NULL;
    p.kind = kind && strcmp(kind, "socket") == 0 ? CG_TRANSPORT_SOCKET
             : CG_TRANSPORT_AUTO;
    p.cookie = 42; p.rank = listener; p.timeout_ns = 30000000000ull;
    p.ifname = getenv("CG_SOCKET_IFNAME"); p.nsocks = 1;
    p.mem = (cg_mem_ops_t){m_alloc, m_free, NULL};
    for (int i = 0; i < (g_one ? 1 : 2); i++)
        if (cg_transport_create(&p, &g_tp[i]) != CG_OK) exit(4);
    if (g_one) { /* the listener accepts, the other connects */
        if (listener) {
            cg_tp_listen(g_tp[0], &th, &l);
            xfer(fd, th.bytes, H, 1);
            while (cg_tp_accept(l, &a) == CG_INPROGRESS) {}
            k.tx = k.rx = a;
        } else {
            xfer(fd, ph.bytes, H, 0);
            cg_tp_connect(g_tp[0], &ph, &c);
            while (cg_tp_conn_ready(c) == CG_INPROGRESS) {}
            k.tx = k.rx = c;
        }
        return k;
    }
    /* Both listen on the receiving instance and connect from the sending
     * one, polled from one thread, as the plugin does. */
    cg_tp_listen(g_tp[1], &th, &l);
    xfer(fd, th.bytes, H, 1);
    xfer(fd, ph.bytes, H, 0);
    cg_tp_connect(g_tp[0], &ph, &c);
    for (int ready = 0; !ready || a == NULL;) {
        if (!ready) {
            cg_status_t st = cg_tp_conn_ready(c);
            if (st != CG_OK && st != CG_INPROGRESS) exit(4);
            ready = st == CG_OK;
        }
        if (a == NULL) {
            cg_status_t st = cg_tp_accept(l, &a);
            if (st != CG_OK && st != CG_INPROGRESS) exit(4);
        }
    }
    cg_tp_listener_close(l);
    k.tx = c; k.rx = a;
    return k;
}

static void *post(link_t *k, int send, void *buf, size_t n, int tag)
{
    void *r = NULL, *c = send ? k->tx : k->rx;
    if (g_plugin) {
        void *mh = send ? k->mtx : k->mrx;
        ncclResult_t e = send ? np_isend(&g_d, c, buf, n, tag, mh, &r)
                              : np_irecv(&g_d, c, 1, &buf, &n, &tag, &mh, &r);
        if (e != ncclSuccess || r == NULL) {
            fprintf(stderr, "%s: %d\n", send ? "isend" : "irecv", (int)e);
            exit(5);
        }
        return r;
    }
    if (send) cg_tp_isend(c, buf, n, (uint32_t)tag, (cg_tp_req_t **)&r);
    else cg_tp_irecv(c, buf, n, (uint32_t)tag, (cg_tp_req_t **)&r);
    return r;
}

/* 1 when done. */
static int poll_req(void *r)
{
    if (g_plugin) {
        int done = 0, sz;
        ncclResult_t e = np_test(&g_d, r, &done, &sz);
        if (e != ncclSuccess) {
            fprintf(stderr, "test: %d (request %p)\n", (int)e, r);
            exit(5);
        }
        return done;
    }
    cg_status_t st = cg_tp_test(r, NULL);
    if (st != CG_OK && st != CG_INPROGRESS) exit(5);
    return st == CG_OK;
}

static void run(link_t k, int send, char *buf, size_t min, size_t max,
                int fixed, int lat_iters)
{
    for (size_t n = min; n <= max; n *= 4) {
        size_t total = 512u << 20;
        int iters = (int)(total / n / WIN);
        if (iters < 4) iters = 4;
        if (iters > 2000) iters = 2000;
        if (fixed >= 0) iters = fixed;
        uint64_t t0 = cg_now_ns();
        for (int it = 0; it < iters; it++) {
            void *r[WIN];
            for (int i = 0; i < WIN; i++)
                r[i] = post(&k, send, buf + (size_t)i * n, n, 1);
            for (int i = 0; i < WIN; i++)
                while (!poll_req(r[i])) {}
        }
        /* the receiver answers once: the sender's clock then covers all */
        void *ar = post(&k, !send, buf, 1, 2);
        while (!poll_req(ar)) {}
        double s = (double)(cg_now_ns() - t0) / 1e9;
        if (send)
            printf("%zu %.1f\n", n, (double)n * WIN * iters / s / 1048576.0);
    }
    if (lat_iters == 0) return;
    uint64_t t0 = cg_now_ns();
    for (int i = 0; i < lat_iters; i++) {
        for (int j = 0; j < 2; j++) {
            int tx = (j == 0) == send;
            void *r = post(&k, tx, buf, 8, 3);
            while (!poll_req(r)) {}
        }
    }
    if (send)
        printf("lat8 %.2f\n", (double)(cg_now_ns() - t0) / 1e3 / lat_iters / 2);
}

static void reg(link_t *k, char *buf, size_t n)
{
    if (g_plugin && (np_reg(&g_d, k->tx, buf, n, &k->mtx) != ncclSuccess ||
                     np_reg(&g_d, k->rx, buf, n, &k->mrx) != ncclSuccess))
        exit(4);
}

static void teardown(link_t k)
{
    if (g_plugin) {
        np_dereg(&g_d, k.tx, k.mtx);
        np_dereg(&g_d, k.rx, k.mrx);
        np_close_send(&g_d, k.tx);
        np_close_recv(&g_d, k.rx);
        np_finalize(&g_d);
        np_drv_close(&g_d);
    } else {
        for (int i = 0; i < 2; i++) /* closes the connections */
            if (g_tp[i] != NULL) cg_transport_destroy(g_tp[i]);
    }
}

int main(int argc, char **argv)
{
    int sv[2];
    if (argc < 2) return 2;
    g_plugin = strcmp(argv[1], "plugin") == 0;
    g_one = strcmp(argv[1], "transport1") == 0;
    const char *lib = g_plugin ? argv[2] : NULL;
    int a = g_plugin ? 3 : 2;
    size_t min = argc > a ? strtoull(argv[a], NULL, 0) : 4096;
    size_t max = argc > a + 1 ? strtoull(argv[a + 1], NULL, 0) : 64u << 20;
    int fixed = argc > a + 2 ? atoi(argv[a + 2]) : -1;
    int lat = argc > a + 3 ? atoi(argv[a + 3]) : 5000;
    char *buf = malloc(max * WIN);
    memset(buf, 1, max * WIN);
    socketpair(AF_UNIX, SOCK_STREAM, 0, sv);
    pid_t pid = fork();
    if (pid == 0) {
        link_t k = setup(sv[1], 0, lib);
        reg(&k, buf, max * WIN);
        run(k, 1, buf, min, max, fixed, lat);
        fflush(stdout);
        char x; xfer(sv[1], &x, 1, 1);
        _exit(0);
    }
    link_t k = setup(sv[0], 1, lib);
    reg(&k, buf, max * WIN);
    run(k, 0, buf, min, max, fixed, lat);
    char x; xfer(sv[0], &x, 1, 0);
    int st; waitpid(pid, &st, 0);
    teardown(k);
    free(buf);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 1;
}
