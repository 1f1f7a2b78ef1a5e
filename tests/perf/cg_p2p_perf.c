/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cg_p2p_perf: point-to-point bandwidth (a stream of sends with a window
 * of them outstanding, then a 1-byte ack) and ping-pong latency (half the
 * round trip) over a collguard transport (-t socket|ucx), between two
 * processes: this one listens and fork()s the peer, which connects over
 * loopback. Sends and receives use separate buffers, as ucx_perftest.
 * Prints one row per size: bytes, GB/s (1e9 bytes/s), MiB/s, one-way usec.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/base/parse.h"
#include "transport/sock.h"
#include "transport/transport.h"

#define TAG_DATA 1
#define TAG_ACK 2
#define TAG_PING 3
#define WINDOW_MAX 1024

typedef struct perf_opts {
    cg_transport_kind_t kind;
    uint64_t min_size, max_size;
    unsigned factor;
    int window;
    int nsocks;
    double budget_bytes; /* per size and test */
    int lat_iters;
    int bw_only, lat_only;
} perf_opts_t;

static void *perf_alloc(void *arg, cg_mem_cat_t cat, size_t size)
{
    (void)arg;
    (void)cat;
    return malloc(size);
}

static void perf_free(void *arg, cg_mem_cat_t cat, void *ptr, size_t size)
{
    (void)arg;
    (void)cat;
    (void)size;
    free(ptr);
}

static cg_transport_t *perf_transport(const perf_opts_t *o, int rank)
{
    cg_transport_params_t p = {
        .kind = o->kind, .cookie = 0x9e7f, .rank = rank,
        .timeout_ns = 60000000000ull, .ifname = "lo", .nsocks = o->nsocks,
        .log = NULL, .mem = {perf_alloc, perf_free, NULL},
        .ucx_shm_zcopy = getenv("CG_UCX_SHM_ZCOPY") != NULL &&
                         strcmp(getenv("CG_UCX_SHM_ZCOPY"), "1") == 0};
    cg_transport_t *tp;

    if (cg_transport_create(&p, &tp) != CG_OK) {
        fprintf(stderr, "cg_p2p_perf: %s\n", cg_last_error());
        exit(2);
    }
    return tp;
}

static void must(cg_status_t st, const char *what)
{
    if (st != CG_OK && st != CG_INPROGRESS) {
        fprintf(stderr, "cg_p2p_perf: %s: %s: %s\n", what, cg_status_name(st),
                cg_last_error());
        exit(3);
    }
}

static void xfer(cg_tp_conn_t *c, int send, void *buf, size_t len, int tag)
{
    cg_tp_req_t *r;
    must(send ? cg_tp_isend(c, buf, len, (uint32_t)tag, &r)
              : cg_tp_irecv(c, buf, len, (uint32_t)tag, &r), "post");
    must(cg_tp_wait(r, NULL), "wait");
}

static int bw_iters(const perf_opts_t *o, size_t size)
{
    double n = o->budget_bytes / (double)(size ? size : 1);
    return n < 8 ? 8 : n > 200000 ? 200000 : (int)n;
}

static int window_for(const perf_opts_t *o, size_t size)
{
    /* Keep a window's bytes in flight below 1 GiB. */
    size_t w = (size_t)o->window;
    while (w > 1 && w * size > (1ull << 30))
        w /= 2;
    return (int)w;
}

/* Streams iters messages keeping window of them outstanding (as
 * ucx_perftest tag_bw does), then a 1-byte ack. Returns seconds on rank 0
 * (timed after a warm-up tenth), 0 on rank 1. */
static double run_bw(cg_tp_conn_t *c, int rank, void *buf, size_t size,
                     int window, int iters)
{
    cg_tp_req_t *r[WINDOW_MAX];
    int warm = iters / 10 + 1, n = warm + iters;
    uint64_t t0 = 0;
    char ack = 0;

    for (int i = 0; i < n; i++) {
        if (i == warm) {
            for (int k = i - window < 0 ? 0 : i - window; k < i; k++)
                must(cg_tp_wait(r[k % window], NULL), "wait");
            xfer(c, rank == 1, &ack, 1, TAG_ACK);
            t0 = cg_now_ns();
        } else if (i >= window && (i < warm || i - window >= warm)) {
            must(cg_tp_wait(r[i % window], NULL), "wait");
        }
        must(rank == 0 ? cg_tp_isend(c, buf, size, TAG_DATA, &r[i % window])
                       : cg_tp_irecv(c, buf, size, TAG_DATA, &r[i % window]),
             "post");
    }
    for (int k = (n - window < warm) ? warm : n - window; k < n; k++)
        must(cg_tp_wait(r[k % window], NULL), "wait");
    xfer(c, rank == 1, &ack, 1, TAG_ACK);
    return rank == 0 ? (double)(cg_now_ns() - t0) / 1e9 : 0;
}

static double run_lat(cg_tp_conn_t *c, int rank, void *sbuf, void *rbuf,
                      size_t size, int iters)
{
    int warm = iters / 10 + 1;
    uint64_t t0 = 0;

    for (int it = 0; it < warm + iters; it++) {
        if (it == warm)
            t0 = cg_now_ns();
        xfer(c, rank == 0, rank == 0 ? sbuf : rbuf, size, TAG_PING);
        xfer(c, rank == 1, rank == 1 ? sbuf : rbuf, size, TAG_PING);
    }
    return (double)(cg_now_ns() - t0) / 1e9;
}

static void run(const perf_opts_t *o, cg_tp_conn_t *c, int rank)
{
    /* Separate send and receive buffers, touched before use, as
     * ucx_perftest has: sending from the buffer a receive just wrote would
     * time cache-line transfers between the cores, not the transport. */
    size_t cap = o->max_size ? o->max_size : 1;
    char *sbuf = malloc(cap), *rbuf = malloc(cap);

    if (sbuf == NULL || rbuf == NULL) {
        fprintf(stderr, "cg_p2p_perf: cannot allocate 2 x %zu bytes\n", cap);
        exit(2);
    }
    memset(sbuf, 1, cap);
    memset(rbuf, 0, cap);

    if (rank == 0)
        printf("%12s %10s %10s %10s\n", "bytes", "bw_GBps", "bw_MiBps",
               "lat_us");
    for (uint64_t s = o->min_size; s <= o->max_size; s *= o->factor) {
        int window = window_for(o, s), bw_n = bw_iters(o, s);
        int lat_n = o->lat_iters;
        double bw = 0, lat = 0, t;
        if (s * (uint64_t)lat_n > (uint64_t)o->budget_bytes)
            lat_n = (int)(o->budget_bytes / (double)s) + 3;
        if (!o->lat_only) {
            t = run_bw(c, rank, rank == 0 ? sbuf : rbuf, s, window, bw_n);
            bw = t > 0 ? (double)s * bw_n / t : 0;
        }
        if (!o->bw_only) {
            t = run_lat(c, rank, sbuf, rbuf, s, lat_n);
            lat = t / lat_n / 2 * 1e6;
        }
        if (rank == 0) {
            printf("%12llu %10.3f %10.1f %10.2f\n", (unsigned long long)s,
                   bw / 1e9, bw / (1 << 20), lat);
            fflush(stdout);
        }
        if (s == 0)
            break;
    }
    free(sbuf);
    free(rbuf);
}

static void usage(void)
{
    fprintf(stderr,
            "usage: cg_p2p_perf [-t socket|ucx] [-b min] [-e max] [-f factor]\n"
            "                   [-w window] [-s nsocks] [-B bytes_per_size]\n"
            "                   [-l lat_iters] [-m bw|lat|both]\n"
            "  sizes accept suffixes (8, 4K, 256M); defaults 8 .. 256M x2,\n"
            "  window 32, nsocks 1, 256M per size, 2000 latency iterations\n");
    exit(1);
}

static uint64_t size_arg(const char *s)
{
    uint64_t v;
    if (!cg_parse_size(s, &v)) {
        fprintf(stderr, "cg_p2p_perf: bad size '%s' (e.g. 8, 4K, 256M)\n", s);
        exit(1);
    }
    return v;
}

int main(int argc, char **argv)
{
    perf_opts_t o = {CG_TRANSPORT_SOCKET, 8, 256u << 20, 2, 32, 1,
                     256.0 * (1 << 20), 2000, 0, 0};
    cg_tp_listener_t *l;
    cg_tp_handle_t h;
    cg_tp_conn_t *c;
    cg_transport_t *tp;
    int opt, status = 0;
    pid_t pid;

    while ((opt = getopt(argc, argv, "t:b:e:f:w:s:B:l:m:h")) != -1) {
        switch (opt) {
        case 't':
            if (strcmp(optarg, "ucx") == 0)
                o.kind = CG_TRANSPORT_UCX;
            else if (strcmp(optarg, "socket") != 0)
                usage();
            break;
        case 'b': o.min_size = size_arg(optarg); break;
        case 'e': o.max_size = size_arg(optarg); break;
        case 'f': o.factor = (unsigned)atoi(optarg); break;
        case 'w': o.window = atoi(optarg); break;
        case 's': o.nsocks = atoi(optarg); break;
        case 'B': o.budget_bytes = (double)size_arg(optarg); break;
        case 'l': o.lat_iters = atoi(optarg); break;
        case 'm':
            o.bw_only = strcmp(optarg, "bw") == 0;
            o.lat_only = strcmp(optarg, "lat") == 0;
            break;
        default: usage();
        }
    }
    if (o.factor < 2 || o.window < 1 || o.window > WINDOW_MAX ||
        o.lat_iters < 1 || o.min_size > o.max_size)
        usage();
    /* Fork before any transport exists: UCX state does not survive fork
     * (its async thread stays behind), so the peer gets the handle through
     * a pipe. */
    int hpipe[2];
    if (pipe(hpipe) != 0) {
        perror("cg_p2p_perf: pipe");
        return 2;
    }
    fflush(stdout);
    pid = fork();
    if (pid == 0) {
        close(hpipe[1]);
        if (read(hpipe[0], &h, sizeof(h)) != (ssize_t)sizeof(h))
            _exit(5);
        cg_transport_t *tp1 = perf_transport(&o, 1);
        must(cg_tp_connect(tp1, &h, &c), "connect");
        while (cg_tp_conn_ready(c) == CG_INPROGRESS)
            cg_tp_progress(tp1);
        must(cg_tp_conn_ready(c), "connect");
        run(&o, c, 1);
        cg_tp_conn_close(c);
        cg_transport_destroy(tp1);
        _exit(0);
    }
    close(hpipe[0]);
    tp = perf_transport(&o, 0);
    must(cg_tp_listen(tp, &h, &l), "listen");
    printf("# cg_p2p_perf transport %s nsocks %d window %d\n",
           cg_transport_name(tp), o.nsocks, o.window);
    fflush(stdout);
    if (write(hpipe[1], &h, sizeof(h)) != (ssize_t)sizeof(h)) {
        perror("cg_p2p_perf: write");
        return 2;
    }
    close(hpipe[1]);
    while (cg_tp_accept(l, &c) == CG_INPROGRESS)
        cg_tp_progress(tp);
    run(&o, c, 0);
    waitpid(pid, &status, 0);
    cg_tp_conn_close(c);
    cg_tp_listener_close(l);
    cg_transport_destroy(tp);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 4;
}
