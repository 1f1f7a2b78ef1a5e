/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Helpers for the UCX transport scenarios (see test_ucx_util.h): counting
 * allocator, scaled bounds, a forked accept/connect pair over loopback.
 */
#include "tests/transport/test_ucx_util.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>

static void *tu__alloc(void *arg, cg_mem_cat_t cat, size_t size)
{
    tu_mem_t *mem = arg;
    void *p = malloc(size > 0 ? size : 1);

    if (p != NULL) {
        mem->live[cat] += (int64_t)size;
        mem->allocs++;
    }
    return p;
}

static void tu__free(void *arg, cg_mem_cat_t cat, void *ptr, size_t size)
{
    tu_mem_t *mem = arg;

    mem->live[cat] -= (int64_t)size;
    free(ptr);
}

cg_mem_ops_t tu_mem_ops(tu_mem_t *mem)
{
    cg_mem_ops_t ops = {.alloc = tu__alloc, .free = tu__free, .arg = mem};
    return ops;
}

double tu_scale(void)
{
    const char *s = getenv("CG_TEST_TIMEOUT_MULTIPLIER");
    double v = (s != NULL) ? strtod(s, NULL) : 1.0;

    return (v >= 1.0) ? v : 1.0;
}

uint64_t tu_timeout_ns(double seconds)
{
    return (uint64_t)(seconds * tu_scale() * 1e9);
}

static uint64_t tu__now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

cg_transport_params_t tu_params(tu_mem_t *mem, cg_log_t *log, int rank,
                                uint64_t cookie, uint64_t timeout_ns)
{
    cg_transport_params_t p;

    memset(&p, 0, sizeof(p));
    cg_log_init(log, CG_LOG_WARN, rank);
    p.kind = CG_TRANSPORT_UCX;
    p.cookie = cookie;
    p.rank = rank;
    p.timeout_ns = timeout_ns;
    p.ifname = "lo";
    p.nsocks = 1;
    /* The UCX tests run the zero-copy shared-memory mode (the one with more
     * to get wrong) unless CG_TEST_UCX_SHM_ZCOPY=0 asks for peer mode. */
    p.ucx_shm_zcopy = getenv("CG_TEST_UCX_SHM_ZCOPY") == NULL ||
                      strcmp(getenv("CG_TEST_UCX_SHM_ZCOPY"), "0") != 0;
    p.log = log;
    p.mem = tu_mem_ops(mem);
    return p;
}

cg_status_t tu_accept(cg_tp_listener_t *l, cg_tp_conn_t **conn_p,
                      double seconds)
{
    uint64_t end = tu__now() + tu_timeout_ns(seconds);
    cg_status_t st;

    while ((st = cg_tp_accept(l, conn_p)) == CG_INPROGRESS) {
        if (tu__now() > end)
            return CG_ERR_TIMEOUT;
        usleep(100);
    }
    return st;
}

cg_status_t tu_ready(cg_tp_conn_t *conn, double seconds)
{
    uint64_t end = tu__now() + tu_timeout_ns(seconds);
    cg_status_t st;

    while ((st = cg_tp_conn_ready(conn)) == CG_INPROGRESS) {
        if (tu__now() > end)
            return CG_ERR_TIMEOUT;
        usleep(100);
    }
    return st;
}

static void tu__child_connect(tu_pair_t *p, int rfd, double timeout_s)
{
    struct pollfd pfd = {.fd = rfd, .events = POLLIN};
    cg_transport_params_t params;
    cg_tp_handle_t h;
    cg_status_t st;

    TU_CHECK(poll(&pfd, 1, (int)(10000 * tu_scale())) == 1, "no handle");
    TU_CHECK(read(rfd, &h, sizeof(h)) == (ssize_t)sizeof(h), "short read");
    close(rfd);
    params = tu_params(&p->mem, &p->log, 1, TU_COOKIE,
                       tu_timeout_ns(timeout_s));
    st = cg_transport_create(&params, &p->tp);
    TU_CHECK(st == CG_OK, "create: %s", cg_last_error());
    st = cg_tp_connect(p->tp, &h, &p->conn);
    TU_CHECK(st == CG_OK, "connect: %s", cg_last_error());
    st = tu_ready(p->conn, 10);
    TU_CHECK(st == CG_OK, "ready: %s (%s)", cg_status_name(st),
             cg_last_error());
}

cg_status_t tu_pair_open(tu_pair_t *p, double timeout_s)
{
    cg_transport_params_t params;
    cg_tp_handle_t h;
    cg_status_t st;
    int fds[2];

    memset(p, 0, sizeof(*p));
    if (pipe(fds) != 0)
        return CG_ERR_IO;
    p->child = fork();
    if (p->child < 0)
        return CG_ERR_IO;
    if (p->child == 0) {
        p->is_child = 1;
        close(fds[1]);
        tu__child_connect(p, fds[0], timeout_s);
        return CG_OK;
    }
    close(fds[0]);
    params = tu_params(&p->mem, &p->log, 0, TU_COOKIE,
                       tu_timeout_ns(timeout_s));
    st = cg_transport_create(&params, &p->tp);
    if (st == CG_OK)
        st = cg_tp_listen(p->tp, &h, &p->listener);
    if (st == CG_OK && write(fds[1], &h, sizeof(h)) != (ssize_t)sizeof(h))
        st = CG_ERR_IO;
    close(fds[1]);
    if (st == CG_OK)
        st = tu_accept(p->listener, &p->conn, 10);
    return st;
}

void tu_pair_close(tu_pair_t *p)
{
    int c;

    cg_tp_conn_close(p->conn);
    cg_tp_listener_close(p->listener);
    cg_transport_destroy(p->tp);
    p->conn = NULL;
    p->listener = NULL;
    p->tp = NULL;
    if (!p->is_child)
        return;
    for (c = 0; c < CG_MEM_CAT_COUNT; c++)
        TU_CHECK(p->mem.live[c] == 0, "category %d: %lld bytes live", c,
                 (long long)p->mem.live[c]);
    _exit(0);
}

int tu_wait_child(pid_t child, double seconds)
{
    uint64_t end = tu__now() + tu_timeout_ns(seconds);
    int status;
    pid_t r;

    for (;;) {
        r = waitpid(child, &status, WNOHANG);
        if (r == child)
            break;
        if (r < 0 && errno != EINTR)
            return -1000;
        if (tu__now() > end) {
            kill(child, SIGKILL);
            waitpid(child, &status, 0);
            return -999;
        }
        usleep(1000);
    }
    if (WIFEXITED(status))
        return WEXITSTATUS(status);
    return -WTERMSIG(status);
}

int tu_wait_all(cg_tp_req_t **reqs, int n, cg_status_t *st, size_t *sizes,
                double seconds)
{
    uint64_t end = tu__now() + tu_timeout_ns(seconds);
    int left = n, i;

    for (i = 0; i < n; i++)
        st[i] = CG_INPROGRESS;
    while (left > 0 && tu__now() <= end) {
        for (i = 0; i < n; i++) {
            if (st[i] != CG_INPROGRESS)
                continue;
            st[i] = cg_tp_test(reqs[i], &sizes[i]);
            if (st[i] != CG_INPROGRESS)
                left--;
        }
    }
    return left;
}

void tu_fill(void *buf, size_t len, uint32_t seed)
{
    uint64_t *w = buf;
    uint8_t *b = buf;
    size_t i, nw = len / 8;

    for (i = 0; i < nw; i++)
        w[i] = (i + 1) * 0x9e3779b97f4a7c15ull ^ seed;
    for (i = nw * 8; i < len; i++)
        b[i] = (uint8_t)(i ^ seed);
}

long tu_check(const void *buf, size_t len, uint32_t seed)
{
    const uint64_t *w = buf;
    const uint8_t *b = buf;
    size_t i, nw = len / 8;

    for (i = 0; i < nw; i++) {
        if (w[i] != ((i + 1) * 0x9e3779b97f4a7c15ull ^ seed))
            return (long)(i * 8);
    }
    for (i = nw * 8; i < len; i++) {
        if (b[i] != (uint8_t)(i ^ seed))
            return (long)i;
    }
    return -1;
}
