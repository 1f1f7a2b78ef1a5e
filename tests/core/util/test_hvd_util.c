/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Forked jobs for the Horovod shim core tests (see test_hvd_util.h).
 */
#include "tests/core/util/test_hvd_util.h"

#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tests/transport/bootstrap_test_util.h"

uint64_t hj_hash(uint64_t h, const void *p, size_t len)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < len; i++)
        h = (h ^ b[i]) * 1099511628211ull;
    return h;
}

cg_status_t hj_settle(cg_status_t st, const cg_hvd_req_h *req_p, char *msg,
                      size_t len)
{
    snprintf(msg, len, "%s", cg_last_error());
    if (st == CG_OK) {
        st = cg_hvd_wait(*req_p);
        snprintf(msg, len, "%s", cg_hvd_error(*req_p));
        cg_hvd_release(*req_p);
    }
    return st;
}

static double hj_now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* hj_run_mem's probe: the scenario's reading, whatever the host has. */
static cg_status_t hj_probe(void *arg, uint64_t *free_p, uint64_t *total_p)
{
    hj_rank_t *self = arg;

    *free_p = *total_p = atomic_load(&self->mem_bytes);
    return CG_OK;
}

static int hj_rank_main(hj_rank_t *self, const char *const *extra, int port,
                        int probed)
{
    static const char *const base[] = {"CG_TRANSPORT=socket",
                                       "CG_SOCKET_IFNAME=lo",
                                       "CG_LOG_LEVEL=none", "CG_TIMEOUT=10s"};
    char vars[BS_ENV_MAX][160];
    const char *env[BS_ENV_MAX + 16];
    bs_env_t e = {0};
    cg_ctx_h ctx;
    int n = 0, rc;
    char level[64];

    bs_env_style(&e, BS_STYLE_LAUNCHER, self->rank, self->size, port);

    /* CG_TEST_HVD_LOG=<level> shows the ranks' log (debugging). */
    if (getenv("CG_TEST_HVD_LOG") != NULL) {
        snprintf(level, sizeof(level), "CG_LOG_LEVEL=%s",
                 getenv("CG_TEST_HVD_LOG"));
        env[n++] = level;
    }
    /* The first of a name wins: the scenario's variables come first;
     * "@R:NAME=value" is for rank R only. */
    for (int i = 0; extra != NULL && extra[i] != NULL && i < 12; i++) {
        const char *v = extra[i];
        if (v[0] == '@') {
            char *end;
            long r = strtol(v + 1, &end, 10);
            if (*end != ':' || r != self->rank)
                continue;
            v = end + 1;
        }
        env[n++] = v;
    }
    for (int i = 0; i < e.n; i++) {
        snprintf(vars[i], sizeof(vars[i]), "%s=%s", e.name[i], e.value[i]);
        env[n++] = vars[i];
    }
    for (int i = 0; i < 4; i++)
        env[n++] = base[i];
    env[n] = NULL;
    cg_ctx_params_t cp = {.field_mask = CG_CTX_PARAM_ENV |
                                        CG_CTX_PARAM_BOOTSTRAP,
                          .env = env, .bootstrap = 1};
    if (probed) {
        cp.field_mask |= CG_CTX_PARAM_PROBE;
        cp.probe_fn = hj_probe;
        cp.probe_arg = self;
    }
    HJ_CHECK(self, cg_ctx_create(&cp, &ctx) == CG_OK, "ctx: %s",
             cg_last_error());
    HJ_CHECK(self, cg_hvd_core_create(ctx, &self->core) == CG_OK,
             "core: %s", cg_last_error());
    rc = 0;
    if (self->failed_line == 0)
        rc = self->fn(self);
    if (!self->destroyed) {
        cg_hvd_core_stats(self->core, &self->stats);
        cg_hvd_core_destroy(self->core);
    }
    cg_ctx_destroy(ctx);
    return rc;
}

static hj_rank_t *hj_start(int size, const char *const *env, hj_fn fn,
                           void *arg, int probed, uint64_t mem_bytes)
{
    size_t len = (size_t)size * sizeof(hj_rank_t);
    hj_rank_t *rep = mmap(NULL, len, PROT_READ | PROT_WRITE,
                          MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    const char *m = getenv("CG_TEST_TIMEOUT_MULTIPLIER");
    double end = hj_now_s() + 20.0 * (m != NULL && atof(m) > 0 ? atof(m) : 1);
    int port = bs_free_port(), left = size;
    pid_t pids[HJ_MAX];

    memset(rep, 0, len);
    for (int r = 0; r < size; r++) {
        rep[r].rank = r;
        rep[r].size = size;
        rep[r].fn = fn;
        rep[r].arg = arg;
        atomic_store(&rep[r].mem_bytes, mem_bytes);
        pids[r] = fork();
        if (pids[r] == 0)
            _exit(hj_rank_main(&rep[r], env, port, probed));
    }
    while (left > 0) {
        for (int r = 0; r < size; r++) {
            int st;
            if (pids[r] != 0 && waitpid(pids[r], &st, WNOHANG) == pids[r]) {
                if (!(WIFEXITED(st) && WEXITSTATUS(st) == 0) &&
                    rep[r].failed_line == 0) {
                    rep[r].failed_line = -1;
                    snprintf(rep[r].msg, sizeof(rep[r].msg), "rank exited "
                             "with wait status 0x%x", st);
                }
                pids[r] = 0;
                left--;
            }
        }
        if (hj_now_s() > end)
            for (int r = 0; r < size; r++)
                if (pids[r] != 0)
                    kill(pids[r], SIGKILL);
        usleep(2000);
    }
    return rep;
}

hj_rank_t *hj_run(int size, const char *const *env, hj_fn fn, void *arg)
{
    return hj_start(size, env, fn, arg, 0, 0);
}

hj_rank_t *hj_run_mem(int size, const char *const *env, hj_fn fn, void *arg,
                      uint64_t mem_bytes)
{
    return hj_start(size, env, fn, arg, 1, mem_bytes);
}

void hj_free(hj_rank_t *rep, int size)
{
    munmap(rep, (size_t)size * sizeof(hj_rank_t));
}
