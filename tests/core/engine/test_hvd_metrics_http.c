/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The metrics endpoint during a job of forked ranks (core/engine/
 * hvd_metrics.c over core/observe/metrics_http.c): each rank serves on
 * CG_METRICS_PORT + its local rank and is scraped while its core runs by
 * curl and by Python's urllib (tests/plugin/prom_scrape.py, which parses
 * every line strictly and checks the counters this scenario caused); a
 * port in use and a port out of range are logged once, naming the
 * variable, and the job goes on without that rank's endpoint.
 */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "tests/core/util/test_hvd_util.h"

static char dir[] = "/tmp/cg_hvd_mhttp_XXXXXX";

/* A listening loopback socket on port (-1 when it is taken). */
static int listen_on(int port)
{
    struct sockaddr_in sa = {.sin_family = AF_INET,
                             .sin_port = htons((uint16_t)port)};
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;

    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    /* As the endpoint does: a connection in TIME_WAIT does not block. */
    (void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 ||
        listen(fd, 4) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

/* A base port with base and base + 1 free now. */
static int two_free_ports(void)
{
    for (int tries = 0; tries < 50; tries++) {
        int base = 20000 + (int)(((unsigned)getpid() * 7919u +
                                  (unsigned)tries * 104729u) % 40000u);
        int a = listen_on(base), b = a >= 0 ? listen_on(base + 1) : -1;
        if (a >= 0)
            close(a);
        if (b >= 0) {
            close(b);
            return base;
        }
    }
    cr_assert_fail("no two free consecutive ports");
    return 0;
}

static int base_port;

static cg_status_t run(hj_rank_t *self, const char *name, int type,
                       int64_t n, uint32_t flags, char *msg)
{
    static float x[64], out[64];
    cg_hvd_tensor_t t = {.name = name, .dtype = CG_DTYPE_F32, .ndim = 1,
                         .shape = {n}, .input = x, .output = out,
                         .device = -1, .flags = flags};
    cg_hvd_req_h req = NULL;
    cg_status_t st;

    if (type == CG_HVD_ALLREDUCE)
        st = cg_hvd_enqueue_allreduce(self->core, &t, CG_OP_SUM, 1.0, 1.0,
                                      &req);
    else if (type == CG_HVD_BROADCAST)
        st = cg_hvd_enqueue_broadcast(self->core, &t, 0, &req);
    else
        st = cg_hvd_enqueue_allgather(self->core, &t, &req);
    return hj_settle(st, &req, msg, 256);
}

static int body_scraped(hj_rank_t *self)
{
    char msg[256], cmd[1024], url[64], file[96];
    cg_hvd_tensor_t d = {.name = "d", .dtype = CG_DTYPE_F32, .ndim = 1,
                         .shape = {16}, .device = -1};
    float dx[16] = {0}, dy[16];
    cg_hvd_req_h req, req2;
    int r = self->rank;

    for (int i = 0; i < 3; i++)
        HJ_CHECK(self, run(self, i == 0 ? "a" : i == 1 ? "b" : "c",
                           CG_HVD_ALLREDUCE, 16, 0, msg) == CG_OK, "%s", msg);
    HJ_CHECK(self, run(self, "p", CG_HVD_BROADCAST, 8, 0, msg) == CG_OK,
             "%s", msg);
    HJ_CHECK(self, run(self, "g", CG_HVD_ALLGATHER, 2, 0, msg) == CG_OK,
             "%s", msg);
    HJ_CHECK(self, run(self, "nl", CG_HVD_BROADCAST, 8,
                       CG_HVD_REQUIRES_GRAD, msg) == CG_ERR_INVALID_PARAM,
             "a non-leaf broadcast was not refused");
    /* A second enqueue of "d" in flight with another size: refused. */
    d.input = dx;
    d.output = dy;
    HJ_CHECK(self, cg_hvd_enqueue_allreduce(self->core, &d, CG_OP_SUM, 1.0,
                                            1.0, &req) == CG_OK, "enqueue d");
    d.shape[0] = 8;
    HJ_CHECK(self, cg_hvd_enqueue_allreduce(self->core, &d, CG_OP_SUM, 1.0,
                                            1.0, &req2) ==
                       CG_ERR_INVALID_PARAM, "a different duplicate taken");
    HJ_CHECK(self, cg_hvd_wait(req) == CG_OK, "%s", cg_hvd_error(req));
    cg_hvd_release(req);

    snprintf(url, sizeof(url), "http://127.0.0.1:%d/metrics", base_port + r);
    snprintf(file, sizeof(file), "%s/curl.%d.txt", dir, r);
    snprintf(cmd, sizeof(cmd), "curl -sf --max-time 10 -o %s %s", file, url);
    HJ_CHECK(self, system(cmd) == 0, "%.900s failed", cmd);
    snprintf(cmd, sizeof(cmd),
             "/usr/bin/python3 %s %s --curl-body %s --expect "
             "'collguard_hvd_op_bytes_total{rank=\"%d\",op=\"allreduce\"}=256' "
             "'collguard_hvd_op_bytes_total{rank=\"%d\",op=\"broadcast\"}=32' "
             "'collguard_hvd_op_bytes_total{rank=\"%d\",op=\"allgather\"}=16' "
             "'collguard_hvd_op_duration_seconds_count{rank=\"%d\","
             "op=\"allreduce\"}=4' "
             "'collguard_hvd_op_duration_seconds_count{rank=\"%d\","
             "op=\"broadcast\"}=1' "
             "'collguard_hvd_nonleaf_broadcasts_rejected_total{rank=\"%d\"}=1' "
             "'collguard_hvd_duplicates_refused_total{rank=\"%d\"}=1' "
             "'collguard_hvd_cycles_total{rank=\"%d\"}=>0'",
             CG_PROM_SCRAPE, url, file, r, r, r, r, r, r, r, r);
    HJ_CHECK(self, system(cmd) == 0, "the urllib scrape failed: %.900s", cmd);
    /* Neither core ends before both ranks scraped. */
    HJ_CHECK(self, run(self, "end", CG_HVD_ALLREDUCE, 1, 0, msg) == CG_OK,
             "%s", msg);
    return 0;
}

Test(hvd_metrics_http, scraped_by_curl_and_urllib_during_a_job,
     .timeout = 90)
{
    char port[48];
    const char *env[] = {port, NULL};

    cr_assert_not_null(mkdtemp(dir));
    base_port = two_free_ports();
    snprintf(port, sizeof(port), "CG_METRICS_PORT=%d", base_port);
    hj_rank_t *rep = hj_run(2, env, body_scraped, NULL);
    hj_assert_passed(rep, 2);
    hj_free(rep, 2);
    for (int r = 0; r < 2; r++) {
        char p[128];
        snprintf(p, sizeof(p), "%s/curl.%d.txt", dir, r);
        cr_assert_eq(unlink(p), 0, "rank %d's scrape %s missing", r, p);
    }
    cr_assert_eq(rmdir(dir), 0);
}

/* The job runs; `serving` (a rank) answers on its port. */
static int body_goes_on(hj_rank_t *self)
{
    char msg[256], cmd[160];
    int serving = *(int *)self->arg;

    HJ_CHECK(self, run(self, "a", CG_HVD_ALLREDUCE, 16, 0, msg) == CG_OK,
             "%s", msg);
    if (self->rank == serving) {
        snprintf(cmd, sizeof(cmd), "curl -sf --max-time 10 -o /dev/null "
                 "http://127.0.0.1:%d/metrics", base_port + self->rank);
        HJ_CHECK(self, system(cmd) == 0, "%.900s failed", cmd);
    }
    HJ_CHECK(self, run(self, "end", CG_HVD_ALLREDUCE, 1, 0, msg) == CG_OK,
             "%s", msg);
    return 0;
}

/* Runs the 2-rank job with the ranks' stderr in a file; returns how many
 * lines of it hold both texts. */
static int job_log_count(const char *port_var, int serving, const char *a,
                         const char *b)
{
    char log[] = "/tmp/cg_hvd_mhttp_log_XXXXXX", line[1024];
    const char *env[] = {port_var, "CG_LOG_LEVEL=error", NULL};
    int fd = mkstemp(log), saved = dup(2), n = 0;
    FILE *f;

    cr_assert(fd >= 0 && saved >= 0);
    fflush(stderr);
    dup2(fd, 2);
    hj_rank_t *rep = hj_run(2, env, body_goes_on, &serving);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    close(fd);
    hj_assert_passed(rep, 2);
    hj_free(rep, 2);
    f = fopen(log, "r");
    cr_assert_not_null(f);
    while (fgets(line, sizeof(line), f) != NULL)
        n += strstr(line, a) != NULL && strstr(line, b) != NULL;
    fclose(f);
    unlink(log);
    return n;
}

Test(hvd_metrics_http, port_in_use_is_logged_once_and_the_job_goes_on,
     .timeout = 90)
{
    char var[48], want[80];
    int fd;

    base_port = two_free_ports();
    fd = listen_on(base_port); /* rank 0's port is taken */
    cr_assert(fd >= 0);
    snprintf(var, sizeof(var), "CG_METRICS_PORT=%d", base_port);
    snprintf(want, sizeof(want), "CG_METRICS_PORT=%d: cannot listen on "
             "127.0.0.1:%d", base_port, base_port);
    cr_assert_eq(job_log_count(var, 1, want, "training goes on without "
                               "the metrics endpoint"), 1,
                 "want one error line naming %s", want);
    close(fd);
}

Test(hvd_metrics_http, port_out_of_range_is_logged_once_and_the_job_goes_on,
     .timeout = 90)
{
    int fd = listen_on(65535);

    if (fd < 0)
        cr_skip_test("port 65535 is in use on this host");
    close(fd);
    base_port = 65535; /* rank 0 serves on 65535, rank 1 would need 65536 */
    cr_assert_eq(job_log_count("CG_METRICS_PORT=65535", 0,
                               "CG_METRICS_PORT=65535: local rank 1 would "
                               "listen on port 65536",
                               "training goes on"), 1);
}
