/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Helpers for the bootstrap tests: fake environments, free ports, forked
 * ranks reporting through MAP_SHARED memory, and the standard exchange.
 */
#include "tests/transport/bootstrap_test_util.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "transport/sock.h"

void bs_env_set(bs_env_t *e, const char *name, const char *fmt, ...)
{
    va_list ap;
    int i;

    for (i = 0; i < e->n && strcmp(e->name[i], name) != 0; i++)
        ;
    if (i == e->n && e->n < BS_ENV_MAX)
        e->name[e->n++] = name;
    if (i >= BS_ENV_MAX)
        return;
    va_start(ap, fmt);
    vsnprintf(e->value[i], sizeof(e->value[i]), fmt, ap);
    va_end(ap);
}

const char *bs_getenv(void *arg, const char *name)
{
    const bs_env_t *e = arg;

    for (int i = 0; i < e->n; i++) {
        if (strcmp(e->name[i], name) == 0)
            return e->value[i];
    }
    return NULL;
}

void bs_env_style(bs_env_t *e, bs_style_t style, int rank, int size,
                  int port)
{
    switch (style) {
    case BS_STYLE_HOROVOD:
        bs_env_set(e, "HOROVOD_RANK", "%d", rank);
        bs_env_set(e, "HOROVOD_SIZE", "%d", size);
        bs_env_set(e, "HOROVOD_LOCAL_RANK", "%d", rank);
        bs_env_set(e, "HOROVOD_LOCAL_SIZE", "%d", size);
        bs_env_set(e, "HOROVOD_CROSS_RANK", "0");
        bs_env_set(e, "HOROVOD_CROSS_SIZE", "1");
        bs_env_set(e, "HOROVOD_GLOO_RENDEZVOUS_ADDR", "127.0.0.1");
        bs_env_set(e, "HOROVOD_GLOO_RENDEZVOUS_PORT", "%d", port - 1);
        break;
    case BS_STYLE_TORCHRUN: /* two "nodes": local rank = rank % 2 */
        bs_env_set(e, "RANK", "%d", rank);
        bs_env_set(e, "WORLD_SIZE", "%d", size);
        bs_env_set(e, "LOCAL_RANK", "%d", rank % 2);
        bs_env_set(e, "LOCAL_WORLD_SIZE", "%d", size < 2 ? 1 : 2);
        bs_env_set(e, "MASTER_ADDR", "127.0.0.1");
        bs_env_set(e, "MASTER_PORT", "%d", port - 1);
        break;
    case BS_STYLE_LAUNCHER:
        bs_env_set(e, "CG_RUN_RANK", "%d", rank);
        bs_env_set(e, "CG_RUN_SIZE", "%d", size);
        bs_env_set(e, "CG_RUN_LOCAL_RANK", "%d", rank);
        bs_env_set(e, "CG_RUN_LOCAL_SIZE", "%d", size);
        bs_env_set(e, "CG_RUN_RENDEZVOUS", "127.0.0.1:%d", port);
        bs_env_set(e, "CG_RUN_SECRET", "test-secret");
        break;
    case BS_STYLE_OMPI_ENV:
        bs_env_set(e, "OMPI_COMM_WORLD_RANK", "%d", rank);
        bs_env_set(e, "OMPI_COMM_WORLD_SIZE", "%d", size);
        bs_env_set(e, "OMPI_COMM_WORLD_LOCAL_RANK", "%d", rank);
        bs_env_set(e, "OMPI_COMM_WORLD_LOCAL_SIZE", "%d", size);
        bs_env_set(e, "CG_RUN_RENDEZVOUS", "127.0.0.1:%d", port);
        break;
    }
}

int bs_free_port(void)
{
    struct sockaddr_in a = {.sin_family = AF_INET};
    socklen_t len = sizeof(a);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    int port = -1;

    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0 &&
        getsockname(fd, (struct sockaddr *)&a, &len) == 0)
        port = ntohs(a.sin_port);
    if (fd >= 0)
        close(fd);
    return port;
}

static void bs_note(bs_report_t *rep, cg_status_t status, uint64_t t0)
{
    if (rep->status != CG_OK)
        return;
    rep->status = status;
    rep->elapsed_s = (double)(cg_now_ns() - t0) / 1e9;
    snprintf(rep->msg, sizeof(rep->msg), "%s", cg_last_error());
}

int bs_exchange(cg_bootstrap_t *bs, bs_report_t *rep)
{
    int rank = cg_bootstrap_rank(bs), size = cg_bootstrap_size(bs);
    uint8_t blob[128], *all = calloc((size_t)size, sizeof(blob));
    uint64_t cookie = cg_bootstrap_cookie(bs), *cookies;
    uint8_t msg[64];
    uint64_t t0 = cg_now_ns();
    int bad = 0;

    cookies = calloc((size_t)size, sizeof(*cookies));
    tp_fill(blob, sizeof(blob), (uint32_t)rank * 7919u + 1);
    bs_note(rep, cg_bootstrap_allgather(bs, blob, all, sizeof(blob)), t0);
    for (int r = 0; r < size && rep->status == CG_OK; r++)
        bad |= tp_check(all + (size_t)r * sizeof(blob), sizeof(blob),
                        (uint32_t)r * 7919u + 1) != (size_t)-1;
    if (rep->status == CG_OK)
        bs_note(rep, cg_bootstrap_allgather(bs, &cookie, cookies,
                                            sizeof(cookie)), t0);
    for (int r = 0; r < size && rep->status == CG_OK; r++)
        bad |= (cookies[r] != cookie || cookie == 0);
    memset(msg, 0, sizeof(msg));
    if (rank == size - 1)
        tp_fill(msg, sizeof(msg), 4242);
    if (rep->status == CG_OK)
        bs_note(rep, cg_bootstrap_bcast(bs, msg, sizeof(msg), size - 1), t0);
    if (rep->status == CG_OK)
        bad |= tp_check(msg, sizeof(msg), 4242) != (size_t)-1;
    if (rep->status == CG_OK)
        bs_note(rep, cg_bootstrap_barrier(bs), t0);
    rep->cookie = cookie;
    if (rep->status == CG_OK)
        rep->elapsed_s = (double)(cg_now_ns() - t0) / 1e9;
    free(cookies);
    free(all);
    if (bad)
        snprintf(rep->msg, sizeof(rep->msg), "wrong data in the exchange");
    return (rep->status != CG_OK || bad) ? 1 : 0;
}

void bs_job_init(bs_job_t *job, int size, bs_style_t style)
{
    memset(job, 0, sizeof(*job));
    job->size = size;
    job->style = style;
    job->port = bs_free_port();
    job->timeout_ms = 10000;
    job->die_rank = job->absent_rank = job->odd_rank = job->dup_rank = -1;
    job->late_rank = -1;
    job->rep = mmap(NULL, (size_t)(size + 1) * sizeof(bs_report_t),
                    PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
}

void bs_job_fini(bs_job_t *job)
{
    munmap(job->rep, (size_t)(job->size + 1) * sizeof(bs_report_t));
}

static int bs_rank_main(const bs_job_t *job, int rank, bs_report_t *rep)
{
    cg_bootstrap_params_t p;
    cg_bootstrap_t *bs = NULL;
    tp_mem_t mem;
    bs_env_t env = {0};
    uint64_t t0 = cg_now_ns();
    int rc;

    memset(&p, 0, sizeof(p));
    bs_env_style(&env, job->style, rank, job->size, job->port);
    p.timeout_ns = tp_scaled_ns(job->timeout_ms);
    p.getenv_fn = bs_getenv;
    p.getenv_arg = &env;
    p.mpi = CG_BOOTSTRAP_MPI_OFF;
    memset(&mem, 0, sizeof(mem));
    p.mem = tp_mem_ops(&mem);
    rep->ran = 1;
    rep->rank = rank;
    bs_note(rep, cg_bootstrap_create(&p, &bs), t0);
    if (rep->status != CG_OK)
        return tp_mem_live(&mem) == 0 ? 2 : 3;
    rep->size = cg_bootstrap_size(bs);
    rep->local_rank = cg_bootstrap_env(bs)->local_rank;
    rep->cross_rank = cg_bootstrap_env(bs)->cross_rank;
    rep->cross_size = cg_bootstrap_env(bs)->cross_size;
    rep->source = (int)cg_bootstrap_env(bs)->source;
    if (rank == job->die_rank)
        raise(SIGKILL);
    if (rank == job->odd_rank) {
        uint8_t b[128] = {0};
        bs_note(rep, cg_bootstrap_bcast(bs, b, sizeof(b), 0), cg_now_ns());
        rc = 1;
    } else {
        rc = bs_exchange(bs, rep);
    }
    cg_bootstrap_destroy(bs);
    return (tp_mem_live(&mem) != 0) ? 3 : rc;
}

static pid_t bs_fork_rank(const bs_job_t *job, int r, bs_report_t *rep)
{
    pid_t pid;

    if (r == job->absent_rank)
        return -1;
    pid = fork();
    if (pid == 0)
        _exit(bs_rank_main(job, r, rep));
    return pid;
}

int bs_job_run(bs_job_t *job, uint64_t wait_ms)
{
    struct timespec ts = {job->late_ms / 1000,
                          (job->late_ms % 1000) * 1000000L};
    pid_t pids[65];
    int ok = 0, n = job->size < 64 ? job->size : 64;

    for (int r = 0; r < n; r++) {
        pids[r] = (r == job->late_rank) ? -1
                  : bs_fork_rank(job, r, &job->rep[r]);
        if (r == 0 && job->after_rank0 != NULL)
            job->after_rank0(job);
    }
    pids[n] = (job->dup_rank < 0) ? -1
              : bs_fork_rank(job, job->dup_rank, &job->rep[job->size]);
    if (job->late_rank >= 0 && job->late_rank < n) {
        nanosleep(&ts, NULL);
        pids[job->late_rank] = bs_fork_rank(job, job->late_rank,
                                            &job->rep[job->late_rank]);
    }
    for (int r = 0; r <= n; r++) {
        if (pids[r] > 0)
            ok += (tp_reap(pids[r], wait_ms) == 0);
    }
    return ok;
}
