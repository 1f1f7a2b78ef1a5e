/* SPDX-License-Identifier: Apache-2.0 */
/* Helpers for transport tests; see tp_test_util.h. Tests may malloc. */
#include "tp_test_util.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "transport/sock.h"

/* Each block carries its size and category before the user part. */
#define TP_MEM_HDR 32

static void *tp__alloc(void *arg, cg_mem_cat_t cat, size_t size)
{
    tp_mem_t *m = arg;
    uint8_t *p;

    if (size > SIZE_MAX - TP_MEM_HDR)
        return NULL;
    p = malloc(size + TP_MEM_HDR);
    if (p == NULL)
        return NULL;
    memcpy(p, &size, sizeof(size));
    memcpy(p + sizeof(size), &cat, sizeof(cat));
    m->live[cat] += size;
    if (m->live[cat] > m->peak[cat])
        m->peak[cat] = m->live[cat];
    m->allocs++;
    return p + TP_MEM_HDR;
}

static void tp__free(void *arg, cg_mem_cat_t cat, void *ptr, size_t size)
{
    tp_mem_t *m = arg;
    uint8_t *p = (uint8_t *)ptr - TP_MEM_HDR;
    size_t real;
    cg_mem_cat_t real_cat;

    memcpy(&real, p, sizeof(real));
    memcpy(&real_cat, p + sizeof(real), sizeof(real_cat));
    if (real != size || real_cat != cat || m->live[cat] < size)
        m->bad_frees++;
    m->live[cat] -= (m->live[cat] < size) ? m->live[cat] : size;
    m->frees++;
    free(p);
}

cg_mem_ops_t tp_mem_ops(tp_mem_t *m)
{
    cg_mem_ops_t ops = {.alloc = tp__alloc, .free = tp__free, .arg = m};
    return ops;
}

size_t tp_mem_live(const tp_mem_t *m)
{
    size_t sum = 0;
    for (int i = 0; i < CG_MEM_CAT_COUNT; i++)
        sum += m->live[i];
    return sum;
}

uint64_t tp_scaled_ns(uint64_t base_ms)
{
    const char *s = getenv("CG_TEST_TIMEOUT_MULTIPLIER");
    double mult = (s != NULL) ? atof(s) : 1.0;
    if (mult < 1.0)
        mult = 1.0;
    return (uint64_t)((double)base_ms * mult * 1e6);
}

static void tp__sink(void *arg, cg_log_level_t level, const char *line)
{
    tp_logcap_t *c = arg;
    size_t used = strlen(c->text);

    (void)level;
    c->lines++;
    snprintf(c->text + used, sizeof(c->text) - used, "%s\n", line);
}

void tp_logcap_init(tp_logcap_t *c)
{
    memset(c, 0, sizeof(*c));
    cg_log_init(&c->log, CG_LOG_WARN, 0);
    cg_log_set_sink(&c->log, tp__sink, c);
}

cg_transport_t *tp_make(tp_mem_t *m, int nsocks, uint64_t timeout_ms,
                        uint64_t cookie, int rank)
{
    return tp_make_log(m, nsocks, timeout_ms, cookie, rank, NULL);
}

cg_transport_t *tp_make_log(tp_mem_t *m, int nsocks, uint64_t timeout_ms,
                            uint64_t cookie, int rank, const cg_log_t *log)
{
    cg_transport_params_t p;
    cg_transport_t *tp = NULL;

    memset(&p, 0, sizeof(p));
    p.kind = CG_TRANSPORT_SOCKET;
    p.cookie = cookie;
    p.rank = rank;
    p.timeout_ns = tp_scaled_ns(timeout_ms ? timeout_ms : 5000);
    p.ifname = "lo";
    p.nsocks = nsocks;
    p.log = log;
    p.mem = tp_mem_ops(m);
    if (cg_transport_create(&p, &tp) != CG_OK) {
        fprintf(stderr, "cg_transport_create: %s\n", cg_last_error());
        return NULL;
    }
    return tp;
}

cg_status_t tp_accept(cg_transport_t *tp, cg_tp_listener_t *l,
                      cg_tp_conn_t **conn_p, uint64_t timeout_ms)
{
    uint64_t end = cg_now_ns() + tp_scaled_ns(timeout_ms);
    cg_status_t st;

    while ((st = cg_tp_accept(l, conn_p)) == CG_INPROGRESS) {
        if (cg_now_ns() > end)
            return CG_ERR_TIMEOUT;
        cg_tp_progress(tp);
        usleep(200);
    }
    return st;
}

cg_status_t tp_connect(cg_transport_t *tp, const cg_tp_handle_t *h,
                       cg_tp_conn_t **conn_p, uint64_t timeout_ms)
{
    uint64_t end = cg_now_ns() + tp_scaled_ns(timeout_ms);
    cg_status_t st = cg_tp_connect(tp, h, conn_p);

    if (st != CG_OK)
        return st;
    while ((st = cg_tp_conn_ready(*conn_p)) == CG_INPROGRESS) {
        if (cg_now_ns() > end)
            return CG_ERR_TIMEOUT;
        usleep(200);
    }
    return st;
}

static uint8_t tp__byte(size_t i, uint32_t seed)
{
    uint64_t x = (uint64_t)i * 0x9e3779b97f4a7c15ull + seed;
    return (uint8_t)((x >> 29) ^ (x >> 7) ^ i);
}

void tp_fill(void *buf, size_t len, uint32_t seed)
{
    uint8_t *p = buf;
    for (size_t i = 0; i < len; i++)
        p[i] = tp__byte(i, seed);
}

size_t tp_check(const void *buf, size_t len, uint32_t seed)
{
    const uint8_t *p = buf;
    for (size_t i = 0; i < len; i++)
        if (p[i] != tp__byte(i, seed))
            return i;
    return (size_t)-1;
}

pid_t tp_fork(int (*fn)(void *arg), void *arg)
{
    pid_t pid = fork();
    if (pid == 0) {
        int rc = fn(arg);
        fflush(stderr);
        _exit(rc);
    }
    return pid;
}

int tp_reap(pid_t pid, uint64_t timeout_ms)
{
    uint64_t end = cg_now_ns() + tp_scaled_ns(timeout_ms);
    int status;

    for (;;) {
        pid_t r = waitpid(pid, &status, WNOHANG);
        if (r == pid)
            break;
        if (r < 0)
            return -1;
        if (cg_now_ns() > end) {
            kill(pid, SIGKILL);
            waitpid(pid, &status, 0);
            return -1;
        }
        usleep(1000);
    }
    if (WIFEXITED(status))
        return WEXITSTATUS(status);
    return 128 + WTERMSIG(status);
}

cg_status_t tp_pair_start(tp_pair_t *p, int nsocks, uint64_t timeout_ms,
                          int (*child)(void *arg), void *arg)
{
    return tp_pair_start_log(p, nsocks, timeout_ms, child, arg, NULL);
}

cg_status_t tp_pair_start_log(tp_pair_t *p, int nsocks, uint64_t timeout_ms,
                              int (*child)(void *arg), void *arg,
                              const cg_log_t *log)
{
    cg_status_t st;

    memset(p, 0, sizeof(*p));
    p->nsocks = nsocks;
    p->timeout_ms = timeout_ms;
    p->arg = arg;
    p->child = -1;
    p->tp = tp_make_log(&p->mem, nsocks, timeout_ms, TP_COOKIE, 0, log);
    if (p->tp == NULL)
        return CG_ERR_INTERNAL;
    st = cg_tp_listen(p->tp, &p->h, &p->l);
    if (st != CG_OK)
        return st;
    p->child = tp_fork(child, p);
    if (p->child < 0)
        return CG_ERR_INTERNAL;
    return tp_accept(p->tp, p->l, &p->conn, 10000);
}

int tp_pair_finish(tp_pair_t *p)
{
    int rc = (p->child > 0) ? tp_reap(p->child, 60000) : -1;

    cg_tp_conn_close(p->conn);
    cg_tp_listener_close(p->l);
    cg_transport_destroy(p->tp);
    return rc;
}

int tp_peer_open(tp_peer_t *c, const tp_pair_t *p)
{
    cg_status_t st;

    memset(c, 0, sizeof(*c));
    c->tp = tp_make(&c->mem, p->nsocks, p->timeout_ms, TP_COOKIE, 1);
    if (c->tp == NULL)
        return 1;
    st = tp_connect(c->tp, &p->h, &c->conn, 10000);
    if (st != CG_OK) {
        fprintf(stderr, "child: connect: %s: %s\n", cg_status_name(st),
                cg_last_error());
        return 1;
    }
    return 0;
}

int tp_peer_close(tp_peer_t *c)
{
    cg_tp_conn_close(c->conn);
    cg_transport_destroy(c->tp);
    if (tp_mem_live(&c->mem) != 0 || c->mem.bad_frees != 0) {
        fprintf(stderr, "child: %zu bytes leaked, %zu bad frees\n",
                tp_mem_live(&c->mem), c->mem.bad_frees);
        return 1;
    }
    return 0;
}

int tp_wait_expect(cg_tp_req_t *req, cg_status_t want, size_t want_size)
{
    size_t size = (size_t)-1;
    cg_status_t st = cg_tp_wait(req, &size);

    if (st != want) {
        fprintf(stderr, "wait: %s (%s), expected %s\n", cg_status_name(st),
                cg_last_error(), cg_status_name(want));
        return 1;
    }
    if (st == CG_OK && size != want_size) {
        fprintf(stderr, "wait: size %zu, expected %zu\n", size, want_size);
        return 1;
    }
    return 0;
}
