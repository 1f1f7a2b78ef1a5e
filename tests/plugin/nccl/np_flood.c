/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Fault matrix row 7 on the net plugin's listen comm (the long-lived
 * listen port of a job):
 *   np_flood LIB        (CG_TRANSPORT, CG_TIMEOUT from the environment)
 * Three processes: the victim (this one: the plugin's listen and accept,
 * v11), a stranger (forked, raw sockets only) and a genuine peer (forked,
 * loads the plugin itself and connects). The stranger opens FLOOD TCP
 * connections to the listen address and leaves them idle, then sends
 * garbage, a wrong cookie, a truncated header and an oversized payload
 * length on connections of their own. Checked: no stranger becomes a
 * comm; every probe is closed without an answer (the truncated one within
 * CG_TIMEOUT); a genuine connect/accept made during the flood completes
 * within CONNECT_BOUND_MS and carries a message, and so does a comm made
 * before it; the refusals are logged, rate-limited; descriptors
 * (/proc/self/fd), malloc'd bytes (mallinfo2: what the governor's CONTROL
 * category allocates lives there) and RSS are measured before, during and
 * after, bounded during and released once the idle connections time out
 * or close. Prints FLOOD lines with the figures. Exit 0 when every check
 * held.
 */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "harness_check.h"
#include "np_drv.h"

#define H NCCL_NET_HANDLE_MAXSIZE
#define FLOOD 1000
#define CONNECT_BOUND_MS 2000
#define MSG 4096
#define TPH 24 /* the transport's handle in the plugin's (np_impl.h) */


static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void xfer(int fd, void *buf, size_t n, int out)
{
    size_t done = 0;
    while (done < n) {
        ssize_t k = out ? write(fd, (char *)buf + done, n - done)
                        : read(fd, (char *)buf + done, n - done);
        if (k <= 0) {
            fprintf(stderr, "[%s] control pipe broke\n", g_who);
            exit(2);
        }
        done += (size_t)k;
    }
}

/* ---- measurements of this process ---- */

typedef struct usage { long fds; long rss_kib; long heap_kib; } usage_t;

static usage_t usage_now(void)
{
    usage_t u = {0, 0, 0};
    DIR *d = opendir("/proc/self/fd");
    struct dirent *e;
    char line[256];
    FILE *f;

    if (d != NULL) {
        while ((e = readdir(d)) != NULL)
            if (e->d_name[0] != '.')
                u.fds++;
        closedir(d);
        u.fds--; /* the directory's own descriptor */
    }
    f = fopen("/proc/self/status", "r");
    if (f != NULL) {
        while (fgets(line, sizeof(line), f) != NULL)
            if (sscanf(line, "VmRSS: %ld", &u.rss_kib) == 1)
                break;
        fclose(f);
    }
    struct mallinfo2 mi = mallinfo2();
    u.heap_kib = (long)((mi.uordblks + mi.hblkhd) / 1024);
    return u;
}

static void usage_max(usage_t *m, usage_t u)
{
    if (u.fds > m->fds) m->fds = u.fds;
    if (u.rss_kib > m->rss_kib) m->rss_kib = u.rss_kib;
    if (u.heap_kib > m->heap_kib) m->heap_kib = u.heap_kib;
}

/* ---- the plugin's log ---- */

static int g_refusal_lines, g_evict_lines, g_summary_lines;
static long g_summarised;
static int g_cookie_lines, g_payload_lines, g_trunc_lines, g_garbage_lines;
static int g_printed;

static void log_sink(int level, const char *line)
{
    const char *m;

    if (level > NCCL_LOG_WARN)
        return;
    if ((m = strstr(line, " more connections refused in ")) != NULL) {
        g_summary_lines++;
        while (m > line && m[-1] >= '0' && m[-1] <= '9')
            m--;
        g_summarised += strtol(m, NULL, 10);
    } else if (strstr(line, "dropping connection from") != NULL ||
               strstr(line, "dropped connection from") != NULL ||
               strstr(line, "refused connection") != NULL) {
        g_refusal_lines++;
        if (strstr(line, "while more connections wait") != NULL)
            g_evict_lines++;
        g_cookie_lines += strstr(line, "cookie mismatch") != NULL;
        g_payload_lines += strstr(line, "payload length") != NULL;
        g_trunc_lines += strstr(line, "timed out") != NULL;
        g_garbage_lines += strstr(line, "bad magic") != NULL;
    } else {
        return;
    }
    if (g_printed++ < 6 || strstr(line, "more connections") != NULL)
        printf("  log: %s\n", line);
}

/* ---- the stranger ---- */

enum { P_GARBAGE, P_COOKIE, P_TRUNC, P_OVERSIZED, NPROBES };
static const char *const probe_name[NPROBES] = {
    "garbage", "wrong-cookie", "truncated-header", "oversized-length"};

/* Round 0 before the flood (their reasons fit in the log's burst), round
 * 1 once the flood is up (refused even while every slot is taken). */
typedef struct probe {
    int fd;
    int64_t sent;
    int64_t closed_ms;       /* after it was sent; -1: never, -2: no send */
    int answered;            /* bytes the listener sent back */
} probe_t;

typedef struct report {
    int opened;              /* flood connections established */
    probe_t pr[2][NPROBES];
} report_t;

static void put_hdr(uint8_t *b, uint16_t kind, uint64_t cookie,
                    uint32_t payload_len)
{
    memset(b, 0, 32);
    memcpy(b, "CGHS", 4);
    b[4] = 1;                          /* version */
    b[6] = (uint8_t)kind;
    for (int i = 0; i < 8; i++)
        b[8 + i] = (uint8_t)(cookie >> (8 * i));
    b[22] = 1;                         /* nsocks */
    b[24] = 7;                         /* conn_id */
    for (int i = 0; i < 4; i++)
        b[28 + i] = (uint8_t)(payload_len >> (8 * i));
}

static int dial(const struct sockaddr_in *sa, int nonblock)
{
    int fd = socket(AF_INET, SOCK_STREAM | (nonblock ? SOCK_NONBLOCK : 0), 0);
    if (fd < 0)
        return -1;
    if (connect(fd, (const struct sockaddr *)sa, sizeof(*sa)) != 0 &&
        errno != EINPROGRESS) {
        close(fd);
        return -1;
    }
    return fd;
}

static void probe_send(const struct sockaddr_in *sa, uint16_t kind, int i,
                       probe_t *pr)
{
    uint8_t data[512];
    size_t len;

    pr->fd = dial(sa, 0);
    switch (i) {
    case P_GARBAGE:
        for (size_t k = 0; k < sizeof(data); k++)
            data[k] = (uint8_t)(k * 131 + 7);
        len = sizeof(data);
        break;
    case P_COOKIE:
        put_hdr(data, kind, 0x1234567890abcdefull, 0);
        len = 32;
        break;
    case P_TRUNC:
        put_hdr(data, kind, 0, 0);
        len = 13;
        break;
    default:
        put_hdr(data, kind, 0, 0xfffffff0u);
        len = 32;
    }
    pr->sent = now_ms();
    pr->closed_ms = -1;
    if (pr->fd < 0 ||
        send(pr->fd, data, len, MSG_NOSIGNAL) != (ssize_t)len)
        pr->closed_ms = -2;
}

/* Waits until the listener closes the probe's socket (EOF or reset). */
static void probe_wait(probe_t *pr, int limit_ms)
{
    char buf[256];

    while (pr->closed_ms == -1 && now_ms() - pr->sent < limit_ms) {
        struct pollfd p = {pr->fd, POLLIN, 0};
        if (poll(&p, 1, 50) <= 0)
            continue;
        ssize_t k = recv(pr->fd, buf, sizeof(buf), MSG_DONTWAIT);
        if (k > 0)
            pr->answered += (int)k;
        else if (k == 0 || (errno != EAGAIN && errno != EINTR))
            pr->closed_ms = now_ms() - pr->sent;
    }
}

static void stranger(int ctl, int ucx, int timeout_ms)
{
    static int held[FLOOD];
    static struct pollfd p[FLOOD];
    unsigned char h[H];
    const uint8_t *pk = h + TPH + 4; /* packed: family, 0, port, address */
    struct sockaddr_in sa;
    report_t r;
    uint16_t kind = ucx ? 2 : 1;   /* the listener's own handshake kind */
    char c;

    g_who = "stranger";
    memset(&r, 0, sizeof(r));
    xfer(ctl, h, H, 0);
    if (pk[0] != 4) {
        fprintf(stderr, "[stranger] not an IPv4 listen address\n");
        exit(2);
    }
    memset(&sa, 0, sizeof(sa));
    sa.sin_family = AF_INET;
    sa.sin_port = htons((uint16_t)(pk[2] << 8 | pk[3]));
    memcpy(&sa.sin_addr, pk + 4, 4);

    for (int i = 0; i < NPROBES; i++)
        probe_send(&sa, kind, i, &r.pr[0][i]);
    for (int i = 0; i < NPROBES; i++)
        if (i != P_TRUNC)
            probe_wait(&r.pr[0][i], 2000);
    for (int i = 0; i < FLOOD; i++)
        held[i] = dial(&sa, 1);
    /* Established within 1.5 s (the rest retry their SYN in the kernel). */
    for (int64_t t0 = now_ms(); now_ms() - t0 < 1500;) {
        int n = 0;
        for (int i = 0; i < FLOOD; i++)
            p[i] = (struct pollfd){held[i], POLLOUT, 0};
        if (poll(p, FLOOD, 100) < 0)
            break;
        for (int i = 0; i < FLOOD; i++)
            n += (p[i].revents & POLLOUT) != 0;
        r.opened = n;
        if (n == FLOOD)
            break;
    }
    for (int i = 0; i < NPROBES; i++)
        probe_send(&sa, kind, i, &r.pr[1][i]);
    for (int k = 0; k < 2; k++)
        for (int i = 0; i < NPROBES; i++)
            if (i != P_TRUNC)
                probe_wait(&r.pr[k][i], 2000);
    xfer(ctl, &r, sizeof(r), 1); /* the genuine peer connects now */
    for (int k = 0; k < 2; k++)
        probe_wait(&r.pr[k][P_TRUNC], timeout_ms + 2000);
    xfer(ctl, &r, sizeof(r), 1);
    xfer(ctl, &c, 1, 0);          /* hold the flood until told */
    for (int i = 0; i < FLOOD; i++)
        if (held[i] >= 0)
            close(held[i]);
    for (int k = 0; k < 2; k++)
        for (int i = 0; i < NPROBES; i++)
            if (r.pr[k][i].fd >= 0)
                close(r.pr[k][i].fd);
    xfer(ctl, &c, 1, 1);
    exit(0);
}

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

static void peer(int ctl, const char *lib)
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

/* ---- the victim ---- */

static np_drv_t g_d;
static void *g_listen;
static int g_strangers_accepted;
static usage_t g_peak;
static int64_t g_last_sample;

/* One round of NCCL's accept polling; samples usage every 10 ms. */
static void *accept_round(void)
{
    void *rc = NULL;

    OK(np_accept(&g_d, g_listen, &rc));
    if (now_ms() - g_last_sample >= 10) {
        usage_max(&g_peak, usage_now());
        g_last_sample = now_ms();
    }
    if (rc == NULL)
        usleep(200);
    return rc;
}

static void recv_msg(void *rc, char *buf, int seed)
{
    void *mh = NULL, *req = NULL, *p = buf;
    size_t sz = MSG;
    int tag = seed, got = -1;

    memset(buf, 0, MSG);
    OK(np_reg(&g_d, rc, buf, MSG, &mh));
    OK(np_irecv(&g_d, rc, 1, &p, &sz, &tag, &mh, &req));
    CHECK(req != NULL);
    if (req != NULL) {
        for (int64_t t0 = now_ms(); now_ms() - t0 < 20000;) {
            int done = 0;
            if (np_test(&g_d, req, &done, &got) != ncclSuccess || done)
                break;
            accept_round(); /* NCCL's service thread keeps polling */
        }
    }
    CHECK(got == MSG);
    for (int i = 0; i < MSG; i++)
        if (buf[i] != (char)(seed + i)) {
            CHECK(!"payload");
            break;
        }
    OK(np_dereg(&g_d, rc, mh));
}

/* Polls accept for ms; a comm that appears is a stranger's. */
static void poll_for(int64_t ms)
{
    for (int64_t t0 = now_ms(); now_ms() - t0 < ms;) {
        void *rc = accept_round();
        if (rc != NULL) {
            g_strangers_accepted++;
            np_close_recv(&g_d, rc);
        }
    }
}

/* Polls accept until the stranger's report comes. */
static void wait_report(int fd, report_t *r)
{
    for (int64_t t0 = now_ms(); now_ms() - t0 < 30000;) {
        struct pollfd p = {fd, POLLIN, 0};
        if (poll(&p, 1, 0) == 1) {
            xfer(fd, r, sizeof(*r), 0);
            return;
        }
        poll_for(5);
    }
    CHECK(!"the stranger's report in time");
    exit(1);
}

static void print_usage(const char *what, usage_t u, usage_t base)
{
    printf("FLOOD usage %-22s fds %ld (%+ld)  malloc %ld KiB (%+ld)  "
           "RSS %ld KiB (%+ld)\n", what, u.fds, u.fds - base.fds, u.heap_kib,
           u.heap_kib - base.heap_kib, u.rss_kib, u.rss_kib - base.rss_kib);
}

int main(int argc, char **argv)
{
    const char *tpn = getenv("CG_TRANSPORT");
    const char *tos = getenv("CG_TIMEOUT");
    int ucx = tpn != NULL && strcmp(tpn, "ucx") == 0;
    int timeout_ms = tos != NULL ? atoi(tos) * 1000 : 30000;
    int pending_max = ucx ? 64 : 256; /* CG_UCX/TCP_PENDING_MAX */
    int sctl[2], pctl[2], status;
    pid_t spid, ppid;
    unsigned char h[H];
    static char buf[MSG];
    void *rc1 = NULL, *rc2 = NULL;
    usage_t base, during, timed, after;
    report_t r;
    int64_t t0, accept_ms, connect_ms = -1, flood_ms;
    char c = 'g';

    g_who = "victim";
    if (argc != 2) {
        fprintf(stderr, "usage: np_flood LIB\n");
        return 2;
    }
    if (timeout_ms < 1000 || timeout_ms > 10000) {
        fprintf(stderr, "np_flood: set CG_TIMEOUT to 1s..10s\n");
        return 2;
    }
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, sctl) != 0 ||
        socketpair(AF_UNIX, SOCK_STREAM, 0, pctl) != 0)
        return 2;
    fflush(stdout);
    if ((spid = fork()) == 0) {
        close(sctl[0]);
        close(pctl[0]);
        close(pctl[1]);
        stranger(sctl[1], ucx, timeout_ms);
    }
    if ((ppid = fork()) == 0) {
        close(pctl[0]);
        close(sctl[0]);
        close(sctl[1]);
        peer(pctl[1], argv[1]);
    }
    close(sctl[1]);
    close(pctl[1]);

    np_drv_log_sink = log_sink;
    if (np_drv_open(&g_d, argv[1], 11) != 0)
        return 2;
    OK(np_init(&g_d));
    OK(np_listen(&g_d, 0, h, &g_listen));
    CHECK(g_listen != NULL);
    printf("FLOOD transport %s, CG_TIMEOUT %d s, %d idle connections, "
           "handshakes at most %d\n", ucx ? "ucx" : "socket",
           timeout_ms / 1000, FLOOD, pending_max);

    /* A comm made before the flood, and the baseline with it. */
    xfer(pctl[0], h, H, 1);
    for (t0 = now_ms(); rc1 == NULL && now_ms() - t0 < 20000;)
        rc1 = accept_round();
    CHECK(rc1 != NULL);
    if (rc1 != NULL)
        recv_msg(rc1, buf, 1);
    xfer(pctl[0], &c, 1, 0);
    base = usage_now();
    g_peak = base;
    print_usage("before", base, base);

    /* The flood and the probes, accept polled all along. */
    xfer(sctl[0], h, H, 1);
    t0 = now_ms();
    wait_report(sctl[0], &r);
    flood_ms = now_ms() - t0;
    printf("FLOOD %d of %d idle connections established within 1.5 s; "
           "probes sent and answered after %lld ms\n", r.opened, FLOOD,
           (long long)flood_ms);
    /* A genuine connect/accept during the flood, and the older comm. */
    xfer(pctl[0], &c, 1, 1);
    t0 = now_ms();
    while (rc2 == NULL && now_ms() - t0 < 20000)
        rc2 = accept_round();
    accept_ms = now_ms() - t0;
    CHECK(rc2 != NULL);
    if (rc2 != NULL) {
        recv_msg(rc2, buf, 2);
        OK(np_close_recv(&g_d, rc2)); /* the baseline has no rc2 */
    }
    if (rc1 != NULL)
        recv_msg(rc1, buf, 3);
    xfer(pctl[0], &connect_ms, sizeof(connect_ms), 0);
    printf("FLOOD genuine connect during the flood: connected in %lld ms, "
           "accepted in %lld ms (bound %d ms); a message on it and on the "
           "comm made before: exact\n", (long long)connect_ms,
           (long long)accept_ms, CONNECT_BOUND_MS);
    CHECK(connect_ms >= 0 && connect_ms < CONNECT_BOUND_MS);
    CHECK(accept_ms < CONNECT_BOUND_MS);
    /* The truncated headers: timed out or evicted. */
    wait_report(sctl[0], &r);
    for (int k = 0; k < 2; k++)
        for (int i = 0; i < NPROBES; i++) {
            const probe_t *pr = &r.pr[k][i];
            printf("FLOOD probe %-16s %s the flood: closed by the listener "
                   "after %lld ms, %d bytes answered\n", probe_name[i],
                   k ? "during" : "before", (long long)pr->closed_ms,
                   pr->answered);
            CHECK(pr->closed_ms >= 0);
            CHECK(pr->answered == 0);
            /* During the flood a probe waits its turn in the backlog, as
             * a genuine peer does: the same bound. */
            CHECK(pr->closed_ms < (i == P_TRUNC ? timeout_ms + 1000
                                   : k ? CONNECT_BOUND_MS : 1000));
        }

    during = g_peak;
    print_usage("peak during flood", during, base);

    /* The flood held past CG_TIMEOUT: its handshakes time out. */
    poll_for(timeout_ms + 1000);
    timed = usage_now();
    print_usage("flood held, +TIMEOUT+1s", timed, base);
    usage_max(&during, g_peak);

    /* The stranger closes everything. */
    xfer(sctl[0], &c, 1, 1);
    xfer(sctl[0], &c, 1, 0);
    poll_for(1000);
    after = usage_now();
    usage_max(&during, g_peak);
    print_usage("flood closed, +1s", after, base);
    print_usage("peak, all phases", during, base);

    xfer(pctl[0], &c, 1, 1);
    waitpid(ppid, &status, 0);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    waitpid(spid, &status, 0);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    if (rc1 != NULL)
        OK(np_close_recv(&g_d, rc1));
    OK(np_close_listen(&g_d, g_listen)); /* flushes the held count */

    printf("FLOOD refusals logged: %d lines (%d evictions, %d cookie, %d "
           "payload length, %d bad magic, %d timed out) + %d summary lines "
           "counting %ld more = %ld refused\n", g_refusal_lines,
           g_evict_lines, g_cookie_lines, g_payload_lines, g_garbage_lines,
           g_trunc_lines, g_summary_lines, g_summarised,
           g_refusal_lines + g_summarised);
    CHECK(g_strangers_accepted == 0);
    /* Bounds: the handshake slots and their sockets, no more. */
    CHECK(during.fds <= base.fds + pending_max + 8);
    CHECK(after.fds <= base.fds);
    /* mallinfo2 reads 0 where a sanitizer replaces malloc; there RSS
     * measures its quarantine of freed blocks too, so neither is bounded. */
    if (base.heap_kib > 0) {
        CHECK(during.heap_kib <= base.heap_kib + pending_max * 8 + 1024);
        CHECK(after.heap_kib <= base.heap_kib + 256);
        CHECK(during.rss_kib <= base.rss_kib + 16384);
    }
    /* Every probe refused, with its reason; every stranger that was
     * accepted refused once (evicted, timed out or closed); the lines
     * rate-limited (16 a second, and a count). */
    CHECK(g_cookie_lines >= 1 && g_payload_lines >= 1 &&
          g_garbage_lines >= 1);
    CHECK(r.opened > pending_max); /* else the flood tested nothing */
    CHECK(g_evict_lines >= 1);
    CHECK(g_refusal_lines + g_summarised >= pending_max + 2 * NPROBES);
    CHECK(g_refusal_lines + g_summarised <= FLOOD + 2 * NPROBES);
    CHECK(g_summary_lines >= 1);
    CHECK(g_refusal_lines <= 16 * (int)((now_ms() - t0) / 1000 + 4));
    OK(np_finalize(&g_d));
    np_drv_close(&g_d);
    printf("FLOOD %s\n", g_fail ? "FAILED" : "ok");
    return g_fail;
}
