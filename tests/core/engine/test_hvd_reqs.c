/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The shim core's request life (core/engine/hvd_queue.c) across forked ranks:
 * released requests are reused by later enqueues (steps of hundreds of
 * handles allocate nothing once warm), a request released while pending
 * is recycled when it completes, requests outlive a destroyed core,
 * threads waiting on different requests of one fused group all wake, and
 * a wait busy-polls for CG_SPIN_TIME before it sleeps (off on too few
 * CPUs, and less and less while its spins keep missing).
 */
#include <criterion/criterion.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/engine/hvd_core.h"
#include "tests/core/util/test_hvd_util.h"

enum { N = 600, C = 16 };

static uint64_t req_allocs(cg_hvd_core_t *core, size_t *nfree_p)
{
    uint64_t n;

    pthread_mutex_lock(&core->lock);
    n = core->req_allocs;
    if (nfree_p != NULL)
        *nfree_p = core->req_nfree;
    pthread_mutex_unlock(&core->lock);
    return n;
}

/* Enqueues tensors first..first+n-1 named "<prefix><k>" (x[k][i] = rank +
 * k + step); waits and checks them unless wait is 0. */
static int step(hj_rank_t *self, const char *prefix, int first, int n,
                int stepno, int wait, float (*x)[C], cg_hvd_req_h *req)
{
    for (int k = first; k < first + n; k++) {
        char name[32];
        for (int i = 0; i < C; i++)
            x[k][i] = (float)(self->rank + k + stepno);
        snprintf(name, sizeof(name), "%s%d", prefix, k);
        cg_hvd_tensor_t t = {.name = name, .dtype = CG_DTYPE_F32, .ndim = 1,
                             .shape = {C}, .input = x[k], .output = x[k]};
        HJ_CHECK(self, cg_hvd_enqueue_allreduce(self->core, &t, CG_OP_SUM,
                                                1.0, 1.0, &req[k]) == CG_OK,
                 "enqueue %s: %s", name, cg_last_error());
    }
    for (int k = first; wait && k < first + n; k++) {
        float want = (float)(2 * (k + stepno) + 1);
        HJ_CHECK(self, cg_hvd_wait(req[k]) == CG_OK, "%s%d: %s", prefix, k,
                 cg_hvd_error(req[k]));
        HJ_CHECK(self, x[k][C - 1] == want, "step %d %s%d = %g, want %g",
                 stepno, prefix, k, x[k][C - 1], want);
    }
    return 0;
}

/* Three steps of N handles in flight at once: only the first allocates. */
static int body_reuse(hj_rank_t *self)
{
    static float x[N][C];
    static cg_hvd_req_h req[N];
    uint64_t after_first = 0;

    for (int s = 0; s < 3; s++) {
        if (step(self, "grad.", 0, N, s, 1, x, req) != 0)
            return 1;
        for (int k = 0; k < N; k++)
            cg_hvd_release(req[k]);
        if (s == 0)
            after_first = req_allocs(self->core, NULL);
    }
    self->hash = req_allocs(self->core, NULL);
    HJ_CHECK(self, after_first == N, "first step allocated %llu requests, "
             "want %d", (unsigned long long)after_first, N);
    return 0;
}

Test(hvd_reqs, requests_are_reused_across_steps, .timeout = 60)
{
    const char *env[] = {"HOROVOD_CYCLE_TIME=5", NULL};
    hj_rank_t *rep = hj_run(2, env, body_reuse, NULL);
    hj_assert_passed(rep, 2);
    for (int r = 0; r < 2; r++)
        cr_assert_eq(rep[r].hash, N, "rank %d: %llu requests allocated over "
                     "3 steps of %d handles, want %d", r,
                     (unsigned long long)rep[r].hash, N, N);
    hj_free(rep, 2);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Released while pending: kept when it completes, reused by the next step. */
static int body_release_pending(hj_rank_t *self)
{
    enum { M = 200 };
    static float x[2 * M][C];
    static cg_hvd_req_h req[2 * M];
    double end = now_s() + 10;
    size_t kept = 0;

    if (step(self, "early.", 0, M, 0, 0, x, req) != 0)
        return 1;
    for (int k = 0; k < M; k++)
        cg_hvd_release(req[k]);
    while (req_allocs(self->core, &kept) > 0 && kept < M && now_s() < end)
        usleep(1000);
    HJ_CHECK(self, kept == M, "%zu of %d requests released while pending "
             "were kept after they completed", kept, M);
    if (step(self, "late.", M, M, 1, 1, x, req) != 0)
        return 1;
    for (int k = M; k < 2 * M; k++)
        cg_hvd_release(req[k]);
    HJ_CHECK(self, req_allocs(self->core, NULL) == M, "%llu requests "
             "allocated, want %d (the second step reuses the first's)",
             (unsigned long long)req_allocs(self->core, NULL), M);
    return 0;
}

Test(hvd_reqs, request_released_while_pending_is_reused, .timeout = 60)
{
    hj_rank_t *rep = hj_run(2, NULL, body_release_pending, NULL);
    hj_assert_passed(rep, 2);
    hj_free(rep, 2);
}

/* Done and pending requests stay readable after cg_hvd_core_destroy and
 * are released afterwards (ASan: no use after free, no leak). */
static int body_outlive(hj_rank_t *self)
{
    enum { M = 50 };
    static float x[M + 1][C];
    static cg_hvd_req_h req[M + 1];
    int pending = self->rank == 0;

    if (step(self, "kept.", 0, M, 0, 1, x, req) != 0)
        return 1;
    if (pending && step(self, "only.rank0.", M, 1, 0, 0, x, req) != 0)
        return 1;
    cg_hvd_core_stats(self->core, &self->stats);
    cg_hvd_core_destroy(self->core);
    self->destroyed = 1;
    for (int k = 0; k < M; k++) {
        HJ_CHECK(self, cg_hvd_wait(req[k]) == CG_OK && !*cg_hvd_error(req[k]),
                 "kept.%d after destroy: '%s'", k, cg_hvd_error(req[k]));
        cg_hvd_release(req[k]);
    }
    if (pending) {
        cg_status_t st = cg_hvd_wait(req[M]);
        HJ_CHECK(self, st == CG_ERR_CANCELED, "pending request: %s, want "
                 "CG_ERR_CANCELED", cg_status_name(st));
        HJ_CHECK(self, strstr(cg_hvd_error(req[M]), "shut down") != NULL,
                 "pending request's error: '%s'", cg_hvd_error(req[M]));
        cg_hvd_release(req[M]);
    }
    return 0;
}

Test(hvd_reqs, requests_outlive_the_core, .timeout = 60)
{
    hj_rank_t *rep = hj_run(2, NULL, body_outlive, NULL);
    hj_assert_passed(rep, 2);
    hj_free(rep, 2);
}

typedef struct waiter {
    cg_hvd_req_h *req;
    int first, failed;
} waiter_t;

static void *waiter_main(void *arg)
{
    waiter_t *w = arg;

    for (int k = w->first; k < N; k += 4)
        if (cg_hvd_wait(w->req[k]) != CG_OK)
            w->failed++;
    return NULL;
}

/* Four threads block on different requests of one fused group (a long
 * cycle): completion wakes each of them, none is lost. */
static int body_waiters(hj_rank_t *self)
{
    static float x[N][C];
    static cg_hvd_req_h req[N];
    waiter_t w[4];
    pthread_t th[4];

    if (step(self, "w.", 0, N, 0, 0, x, req) != 0)
        return 1;
    for (int i = 0; i < 4; i++) {
        w[i] = (waiter_t){req, i, 0};
        pthread_create(&th[i], NULL, waiter_main, &w[i]);
    }
    for (int i = 0; i < 4; i++) {
        pthread_join(th[i], NULL);
        HJ_CHECK(self, w[i].failed == 0, "thread %d: %d requests failed", i,
                 w[i].failed);
    }
    for (int k = 0; k < N; k++) {
        HJ_CHECK(self, x[k][0] == (float)(2 * k + 1), "w.%d = %g", k,
                 x[k][0]);
        cg_hvd_release(req[k]);
    }
    return 0;
}

Test(hvd_reqs, threads_waiting_on_one_group_all_wake, .timeout = 60)
{
    const char *env[] = {"HOROVOD_CYCLE_TIME=100", NULL};
    hj_rank_t *rep = hj_run(2, env, body_waiters, NULL);
    hj_assert_passed(rep, 2);
    hj_free(rep, 2);
}

/* One tensor at a time, enqueued and waited on at once (each wait finds
 * it pending: the cycle starts only for a waiter or after 1 s); the
 * core's wait counters come back in the report. */
static int body_one_by_one(hj_rank_t *self)
{
    float x[C];

    for (int k = 0; k < 40; k++) {
        cg_hvd_req_h req;
        for (int i = 0; i < C; i++)
            x[i] = (float)(self->rank + k);
        cg_hvd_tensor_t t = {.name = "spin.t", .dtype = CG_DTYPE_F32,
                             .ndim = 1, .shape = {C}, .input = x,
                             .output = x};
        HJ_CHECK(self, cg_hvd_enqueue_allreduce(self->core, &t, CG_OP_SUM,
                                                1.0, 1.0, &req) == CG_OK,
                 "enqueue: %s", cg_last_error());
        HJ_CHECK(self, cg_hvd_wait(req) == CG_OK, "%d: %s", k,
                 cg_hvd_error(req));
        HJ_CHECK(self, x[C - 1] == (float)(self->size * k +
                                           self->size * (self->size - 1) / 2),
                 "step %d: %g", k, x[C - 1]);
        cg_hvd_release(req);
    }
    return 0;
}

static int cpus_allowed(void)
{
    cpu_set_t set;
    return sched_getaffinity(0, sizeof(set), &set) == 0 ? CPU_COUNT(&set) : 0;
}

/* A long spin (10 s, far beyond a 64-byte allreduce) on one rank: no wait
 * sleeps, unless this machine gives the test a single CPU, where the core
 * turns spinning off and every wait sleeps. */
Test(hvd_reqs, a_wait_within_the_spin_never_sleeps, .timeout = 60)
{
    const char *env[] = {"HOROVOD_CYCLE_TIME=1000", "CG_SPIN_TIME=10s", NULL};
    hj_rank_t *rep = hj_run(1, env, body_one_by_one, NULL);
    const cg_hvd_stats_t *s = &rep[0].stats;

    hj_assert_passed(rep, 1);
    cr_assert_gt(s->waits, 0, "no wait found its request pending");
    if (cpus_allowed() >= 2) {
        cr_assert_eq(s->spin_ns, 10000000000ull, "spin_ns %llu",
                     (unsigned long long)s->spin_ns);
        cr_assert_eq(s->wait_sleeps, 0, "%llu of %llu waits slept",
                     (unsigned long long)s->wait_sleeps,
                     (unsigned long long)s->waits);
    } else {
        cr_assert_eq(s->spin_ns, 0);
        cr_assert_eq(s->wait_sleeps, s->waits);
    }
    hj_free(rep, 1);
}

/* CG_SPIN_TIME=0: every wait that finds its request pending sleeps. */
Test(hvd_reqs, spin_off_every_pending_wait_sleeps, .timeout = 60)
{
    const char *env[] = {"HOROVOD_CYCLE_TIME=1000", "CG_SPIN_TIME=0", NULL};
    hj_rank_t *rep = hj_run(2, env, body_one_by_one, NULL);

    hj_assert_passed(rep, 2);
    for (int r = 0; r < 2; r++) {
        cr_assert_eq(rep[r].stats.spin_ns, 0);
        cr_assert_gt(rep[r].stats.waits, 0, "rank %d", r);
        cr_assert_eq(rep[r].stats.wait_sleeps, rep[r].stats.waits,
                     "rank %d: %llu of %llu waits slept", r,
                     (unsigned long long)rep[r].stats.wait_sleeps,
                     (unsigned long long)rep[r].stats.waits);
    }
    hj_free(rep, 2);
}

/* Ranks bound to one CPU each, or more ranks than half this host's CPUs
 * when unbound: the core turns CG_SPIN_TIME off (a spinning waiter would
 * take the CPU from the thread it waits for); results stay right. */
Test(hvd_reqs, spin_is_off_when_cpus_are_too_few, .timeout = 60)
{
    const char *env[] = {"CG_SPIN_TIME=10s", NULL};
    int cpus = cpus_allowed();
    bool bound = cpus < sysconf(_SC_NPROCESSORS_ONLN);
    bool on = bound ? cpus >= 2 : cpus >= 2 * 2;
    hj_rank_t *rep;
    cpu_set_t one;

    /* As this test runs (on the 2-CPU CI machine: off), two ranks. */
    rep = hj_run(2, env, body_one_by_one, NULL);
    hj_assert_passed(rep, 2);
    for (int r = 0; r < 2; r++)
        cr_assert_eq(rep[r].stats.spin_ns, on ? 10000000000ull : 0,
                     "rank %d of 2 on %d CPUs (%s): spin_ns %llu", r, cpus,
                     bound ? "bound" : "unbound",
                     (unsigned long long)rep[r].stats.spin_ns);
    hj_free(rep, 2);
    /* Bound to one CPU (the forked ranks inherit it). */
    CPU_ZERO(&one);
    CPU_SET(sched_getcpu() >= 0 ? sched_getcpu() : 0, &one);
    cr_assert_eq(sched_setaffinity(0, sizeof(one), &one), 0);
    rep = hj_run(2, env, body_one_by_one, NULL);
    hj_assert_passed(rep, 2);
    for (int r = 0; r < 2; r++) {
        cr_assert_eq(rep[r].stats.spin_ns, 0, "rank %d bound to 1 CPU", r);
        cr_assert_eq(rep[r].stats.wait_sleeps, rep[r].stats.waits);
    }
    hj_free(rep, 2);
}

/* 64 waits, each on a 16 MiB allreduce out of place (on one rank a copy
 * of 16 MiB: far longer than a 100 us spin): the spins miss, the budget
 * halves down to nothing and only every 8th wait tries a whole spin. */
static int body_long_ops(hj_rank_t *self)
{
    size_t n = (16u << 20) / sizeof(float);
    float *x = calloc(n, sizeof(float)), *y = calloc(n, sizeof(float));

    HJ_CHECK(self, x != NULL && y != NULL, "calloc");
    for (int k = 0; k < 64; k++) {
        cg_hvd_req_h req;
        x[0] = (float)k;
        cg_hvd_tensor_t t = {.name = "spin.big", .dtype = CG_DTYPE_F32,
                             .ndim = 1, .shape = {(int64_t)n}, .input = x,
                             .output = y};
        HJ_CHECK(self, cg_hvd_enqueue_allreduce(self->core, &t, CG_OP_SUM,
                                                1.0, 1.0, &req) == CG_OK,
                 "enqueue: %s", cg_last_error());
        HJ_CHECK(self, cg_hvd_wait(req) == CG_OK, "%d: %s", k,
                 cg_hvd_error(req));
        HJ_CHECK(self, y[0] == (float)k, "step %d: %g", k, y[0]);
        cg_hvd_release(req);
    }
    free(x);
    free(y);
    return 0;
}

Test(hvd_reqs, spins_that_keep_missing_poll_less, .timeout = 120)
{
    /* The cycle starts only for a waiter (1 s window): each wait finds
     * its copy not begun. */
    const char *env[] = {"CG_SPIN_TIME=100us", "CG_FUSION_THRESHOLD=0",
                         "HOROVOD_CYCLE_TIME=1000", NULL};
    hj_rank_t *rep = hj_run(1, env, body_long_ops, NULL);
    const cg_hvd_stats_t *s = &rep[0].stats;
    uint64_t hits = s->waits - s->wait_sleeps;

    hj_assert_passed(rep, 1);
    cr_assert_eq(s->waits, 64, "%llu", (unsigned long long)s->waits);
    if (cpus_allowed() >= 2) {
        /* 100, 50, 25, 12.5, 6.25 us, then 0 but a whole one in 8: 5 + 8.
         * A spin can hit only when its thread lost the CPU for the whole
         * copy (a loaded machine); each hit restarts the halving. */
        cr_assert_leq(hits, 8, "%llu of 64 waits saw their 16 MiB copy "
                      "done within 100 us", (unsigned long long)hits);
        cr_assert(s->wait_spins > 0 && s->wait_spins <= 14 + 5 * hits,
                  "%llu of %llu waits spun (%llu hits)",
                  (unsigned long long)s->wait_spins,
                  (unsigned long long)s->waits, (unsigned long long)hits);
    }
    hj_free(rep, 1);
}
