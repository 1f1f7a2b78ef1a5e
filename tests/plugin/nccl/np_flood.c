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
 * The stranger is np_flood_stranger.c, the genuine peer np_flood_peer.c;
 * this file is the victim: its log, its measurements, its checks.
 */
#include <dirent.h>
#include <malloc.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness_check.h"
#include "np_flood.h"

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

static const char *const probe_name[NPROBES] = {
    "garbage", "wrong-cookie", "truncated-header", "oversized-length"};

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
