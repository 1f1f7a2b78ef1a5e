/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Forked multi-rank jobs for the collective tests and the checks they
 * share (see coll_job.h).
 */
#include "tests/core/util/coll_job.h"

#include <criterion/criterion.h>

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tests/transport/bootstrap_test_util.h"

double coll_now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

double coll_scaled_s(double base_s)
{
    const char *m = getenv("CG_TEST_TIMEOUT_MULTIPLIER");
    double f = m != NULL ? atof(m) : 1.0;
    return base_s * (f > 0 ? f : 1.0);
}

static int coll_setup(coll_rank_t *cr, const char *timeout,
                      const char *algo, int port)
{
    char tvar[64], avar[64], extra[256], *save = NULL, *tok;
    const char *env[16] = {tvar, avar, "CG_LOG_LEVEL=none"};
    cg_ctx_params_t cp = {.field_mask = CG_CTX_PARAM_ENV, .env = env};
    cg_bootstrap_params_t bp = {0};
    cg_transport_params_t tp = {0};
    cg_bootstrap_t *bs;
    cg_transport_t *t;
    bs_env_t e = {0};
    cg_status_t st;
    int n = 3;

    snprintf(tvar, sizeof(tvar), "CG_TIMEOUT=%s", timeout);
    snprintf(extra, sizeof(extra), "%s", algo);
    tok = strtok_r(extra, " ", &save);
    snprintf(avar, sizeof(avar), "CG_ALGO=%s", tok != NULL ? tok : "auto");
    while ((tok = strtok_r(NULL, " ", &save)) != NULL && n < 15) {
        if (tok[0] == '@') { /* @R:NAME=value: rank R only */
            if (atoi(tok + 1) != cr->rank || strchr(tok, ':') == NULL)
                continue;
            tok = strchr(tok, ':') + 1;
        }
        env[n++] = tok;
    }
    env[n] = NULL;
    bs_env_style(&e, BS_STYLE_LAUNCHER, cr->rank, cr->size, port);
    if ((st = cg_ctx_create(&cp, &cr->ctx)) != CG_OK)
        return st;
    bp.timeout_ns = cr->ctx->cfg.timeout_ns * 5;
    bp.getenv_fn = bs_getenv;
    bp.getenv_arg = &e;
    bp.mem = cg_governor_mem_ops(cr->ctx->gov);
    if ((st = cg_bootstrap_create(&bp, &bs)) != CG_OK)
        return st;
    /* Sockets unless the settings name a transport (CG_TRANSPORT=ucx). */
    tp = (cg_transport_params_t){cr->ctx->cfg.set_by_user[CG_CFG_TRANSPORT]
                                     ? cr->ctx->cfg.transport
                                     : CG_TRANSPORT_SOCKET,
                                 cg_bootstrap_cookie(bs),
                                 cr->rank, cr->ctx->cfg.timeout_ns, "lo", 1,
                                 NULL, cg_governor_mem_ops(cr->ctx->gov), 0};
    if ((st = cg_transport_create(&tp, &t)) != CG_OK)
        return st;
    cg_comm_params_t p = {bs, t, cr->ctx->gov, &cr->ctx->cfg, NULL};
    return cg_comm_create(&p, &cr->comm);
}

coll_report_t *coll_job_run(int size, const char *timeout, const char *algo,
                            coll_body_fn body,
                            void *arg, double wait_s, int *status_p)
{
    size_t len = (size_t)size * sizeof(coll_report_t);
    coll_report_t *rep = mmap(NULL, len, PROT_READ | PROT_WRITE,
                              MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    int port = bs_free_port();
    pid_t pids[16];
    double end;

    memset(rep, 0, len);
    for (int r = 0; r < size; r++) {
        pids[r] = fork();
        if (pids[r] == 0) {
            coll_rank_t cr = {.rank = r, .size = size, .rep = &rep[r]};
            cg_status_t st = coll_setup(&cr, timeout, algo, port);
            rep[r].ran = 1;
            if (st != CG_OK) {
                rep[r].status = st;
                snprintf(rep[r].msg, sizeof(rep[r].msg), "setup: %s",
                         cg_last_error());
                _exit(1);
            }
            body(&cr, arg);
            _exit(0); /* the job ends with the process; no teardown */
        }
    }
    /* Reap; a rank that stopped itself (SIGSTOP) is killed once every
     * other rank has ended, anything left after wait_s too. */
    end = coll_now_s() + wait_s;
    for (int left = size, stopped = 0; left > 0; usleep(5000)) {
        for (int r = 0; r < size; r++) {
            int st;
            if (pids[r] == 0 || waitpid(pids[r], &st, WNOHANG | WUNTRACED) !=
                                    pids[r])
                continue;
            if (WIFSTOPPED(st)) {
                stopped++;
                continue;
            }
            status_p[r] = st;
            pids[r] = 0;
            left--;
        }
        for (int r = 0; r < size; r++)
            if (pids[r] != 0 && (left == stopped || coll_now_s() > end))
                kill(pids[r], SIGKILL);
        if (left == stopped)
            stopped = 0;
    }
    return rep;
}

void coll_job_free(coll_report_t *rep, int size)
{
    munmap(rep, (size_t)size * sizeof(coll_report_t));
}

void coll_report(coll_rank_t *cr, cg_status_t st, double t0)
{
    cr->rep->status = st;
    cr->rep->elapsed_s = coll_now_s() - t0;
    snprintf(cr->rep->msg, sizeof(cr->rep->msg), "%s", cg_last_error());
}

void coll_check_refused(coll_body_fn body, cg_status_t want,
                        const char *text)
{
    int status[2];
    coll_report_t *rep = coll_job_run(2, "10s", "auto", body, NULL,
                                      coll_scaled_s(30), status);
    for (int r = 0; r < 2; r++) {
        cr_assert_eq(rep[r].status, want, "rank %d: %s: %s", r,
                     cg_status_name(rep[r].status), rep[r].msg);
        cr_assert(strstr(rep[r].msg, text) != NULL, "message: %s",
                  rep[r].msg);
        cr_assert_eq(rep[r].iters, 1, "rank %d: no collective after the "
                     "errors", r);
    }
    coll_job_free(rep, 2);
}

void coll_check_victim(coll_body_fn body, const char *algo, int sig,
                       double limit_s, int iters, const char *op)
{
    int status[3];
    coll_report_t *rep = coll_job_run(3, "2s", algo, body, &sig,
                                      coll_scaled_s(30), status);
    cr_assert(WIFSIGNALED(status[2]), "rank 2 status 0x%x", status[2]);
    cr_log_info("rank 0 after %.2fs: %s", rep[0].elapsed_s, rep[0].msg);
    cr_log_info("rank 1 after %.2fs: %s", rep[1].elapsed_s, rep[1].msg);
    for (int r = 0; r < 2; r++) {
        cr_assert_eq(rep[r].iters, iters, "rank %d completed %d", r,
                     rep[r].iters);
        cr_assert(CG_STATUS_IS_PEER_FAILURE(rep[r].status),
                  "rank %d: %s: %s", r, cg_status_name(rep[r].status),
                  rep[r].msg);
        cr_assert(rep[r].elapsed_s < coll_scaled_s(limit_s),
                  "rank %d failed after %.2fs", r, rep[r].elapsed_s);
        cr_assert(strstr(rep[r].msg, op) != NULL, "message: %s",
                  rep[r].msg);
    }
    cr_assert(strstr(rep[0].msg, "rank 2") || strstr(rep[1].msg, "rank 2"),
              "no message names rank 2: '%s' / '%s'", rep[0].msg,
              rep[1].msg);
    coll_job_free(rep, 3);
}
