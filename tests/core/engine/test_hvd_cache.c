/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The response cache of the Horovod shim core across forked ranks: steady
 * state negotiates by cache bits only (no records round), a cached name
 * whose shape changes on one rank fails on every rank and works again
 * after, a small capacity with more names than slots stays correct (also
 * when a name some rank waits on is evicted), allgather or a disabled
 * cache never hit, a stop reaches ranks waiting on bits, and the cost of
 * 1000 cached names with and without the cache (printed).
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tests/core/util/test_hvd_util.h"

#define NAMES 64

/* One step: `n` allreduces (SUM, i32) named "<prefix>.<k>", k from `rot`
 * on cyclically, each of `len` elements, x[i] = rank * 1000 + step * 10 +
 * k + i; checks every result. */
static int step(hj_rank_t *self, const char *prefix, int n, int rot,
                int len, int s)
{
    int32_t in[NAMES][16], out[NAMES][16];
    cg_hvd_req_h req[NAMES];
    char names[NAMES][32];

    for (int j = 0; j < n; j++) {
        int k = (j + rot) % n;
        cg_hvd_tensor_t t = {.name = names[k], .dtype = CG_DTYPE_I32,
                             .ndim = 1, .shape = {len}, .input = in[k],
                             .output = out[k]};
        snprintf(names[k], sizeof(names[k]), "%s.%d", prefix, k);
        for (int i = 0; i < len; i++)
            in[k][i] = self->rank * 1000 + s * 10 + k + i;
        HJ_CHECK(self, cg_hvd_enqueue_allreduce(self->core, &t, CG_OP_SUM,
                                                1.0, 1.0, &req[k]) == CG_OK,
                 "step %d: enqueue %s: %s", s, names[k], cg_last_error());
    }
    for (int k = 0; k < n; k++) {
        HJ_CHECK(self, cg_hvd_wait(req[k]) == CG_OK, "step %d: %s: %s", s,
                 names[k], cg_hvd_error(req[k]));
        for (int i = 0; i < len; i++) {
            int32_t want = 1000 * self->size * (self->size - 1) / 2 +
                           self->size * (s * 10 + k + i);
            HJ_CHECK(self, out[k][i] == want, "step %d: %s[%d] = %d, want "
                     "%d", s, names[k], i, out[k][i], want);
        }
        cg_hvd_release(req[k]);
    }
    return 0;
}

/* 50 names for 20 steps: from step 2 on, no records round, 50 hits each. */
static int body_steady(hj_rank_t *self)
{
    cg_hvd_stats_t st0, st;

    if (step(self, "grad", 50, 0, 16, 0) != 0)
        return 1;
    cg_hvd_core_stats(self->core, &st0);
    HJ_CHECK(self, st0.full_rounds >= 1, "full_rounds %llu after step 1",
             (unsigned long long)st0.full_rounds);
    for (int s = 1; s < 20; s++) {
        if (step(self, "grad", 50, s % 7, 16, s) != 0)
            return 1;
        cg_hvd_core_stats(self->core, &st);
        HJ_CHECK(self, st.full_rounds == st0.full_rounds, "step %d: "
                 "full_rounds %llu, was %llu after step 1", s + 1,
                 (unsigned long long)st.full_rounds,
                 (unsigned long long)st0.full_rounds);
        HJ_CHECK(self, st.cache_hits == st0.cache_hits + 50ull * s,
                 "step %d: cache_hits %llu, want %llu", s + 1,
                 (unsigned long long)st.cache_hits,
                 (unsigned long long)(st0.cache_hits + 50ull * s));
    }
    return 0;
}

Test(hvd_cache, steady_state_negotiates_by_bits_only, .timeout = 60)
{
    hj_rank_t *rep = hj_run(2, NULL, body_steady, NULL);
    hj_assert_passed(rep, 2);
    cr_assert_eq(rep[0].stats.cache_hits, 950, "rank 0 cache_hits %llu",
                 (unsigned long long)rep[0].stats.cache_hits);
    hj_free(rep, 2);
}

/* One allreduce of 'w' with this rank's shape; its status. */
static cg_status_t one(hj_rank_t *self, int64_t n, char *err, size_t len)
{
    float in[8] = {0}, out[8];
    cg_hvd_req_h req;
    cg_hvd_tensor_t t = {.name = "w", .dtype = CG_DTYPE_F32, .ndim = 1,
                         .shape = {n}, .input = in, .output = out};
    cg_status_t st;

    for (int i = 0; i < 8; i++)
        in[i] = (float)(self->rank + i);
    if (cg_hvd_enqueue_allreduce(self->core, &t, CG_OP_SUM, 1.0, 1.0,
                                 &req) != CG_OK) {
        snprintf(err, len, "enqueue: %s", cg_last_error());
        return CG_ERR_INTERNAL;
    }
    st = cg_hvd_wait(req);
    snprintf(err, len, "%s", cg_hvd_error(req));
    if (st == CG_OK && out[3] != (float)(self->size * 3 + self->size *
                                         (self->size - 1) / 2))
        st = CG_ERR_INTERNAL, snprintf(err, len, "w[3] = %g", out[3]);
    cg_hvd_release(req);
    return st;
}

static int body_shape_change(hj_rank_t *self)
{
    char err[512];
    cg_status_t st;

    for (int s = 0; s < 3; s++) /* cached after the first */
        HJ_CHECK(self, (st = one(self, 4, err, sizeof(err))) == CG_OK,
                 "step %d: %s (%s)", s, cg_status_string(st), err);
    st = one(self, self->rank == 1 ? 5 : 4, err, sizeof(err));
    HJ_CHECK(self, st == CG_ERR_MISMATCH, "changed shape: %s (%s)",
             cg_status_string(st), err);
    HJ_CHECK(self, strstr(err, "mismatched shape") != NULL &&
                       strstr(err, "[5]") != NULL && strstr(err, "[4]"),
             "message: %s", err);
    for (int s = 0; s < 3; s++)
        HJ_CHECK(self, (st = one(self, 4, err, sizeof(err))) == CG_OK,
                 "after the mismatch, step %d: %s (%s)", s,
                 cg_status_string(st), err);
    return 0;
}

Test(hvd_cache, changed_shape_fails_everywhere_then_recovers, .timeout = 60)
{
    hj_rank_t *rep = hj_run(2, NULL, body_shape_change, NULL);
    hj_assert_passed(rep, 2);
    for (int r = 0; r < 2; r++)
        cr_assert_eq(rep[r].stats.mismatches, 1, "rank %d mismatches %llu",
                     r, (unsigned long long)rep[r].stats.mismatches);
    cr_assert_geq(rep[0].stats.cache_hits, 4, "cache_hits %llu",
                  (unsigned long long)rep[0].stats.cache_hits);
    hj_free(rep, 2);
}

/* 10 names through 4 slots, in a rotating order: evictions every step. */
static int body_small(hj_rank_t *self)
{
    for (int s = 0; s < 12; s++)
        if (step(self, "small", 10, (s * 3) % 10, 4, s) != 0)
            return 1;
    return 0;
}

Test(hvd_cache, capacity_smaller_than_the_names_stays_correct, .timeout = 60)
{
    static const char *const env[] = {"HOROVOD_CACHE_CAPACITY=4", NULL};
    hj_rank_t *rep = hj_run(3, env, body_small, NULL);
    hj_assert_passed(rep, 3);
    cr_assert_lt(rep[0].stats.cache_hits, 120, "cache_hits %llu of 120",
                 (unsigned long long)rep[0].stats.cache_hits);
    hj_free(rep, 3);
}

static int body_disabled(hj_rank_t *self)
{
    for (int s = 0; s < 5; s++)
        if (step(self, "nocache", 8, 0, 4, s) != 0)
            return 1;
    return 0;
}

Test(hvd_cache, capacity_zero_disables_the_cache, .timeout = 60)
{
    static const char *const env[] = {"CG_CACHE_CAPACITY=0", NULL};
    hj_rank_t *rep = hj_run(2, env, body_disabled, NULL);
    hj_assert_passed(rep, 2);
    cr_assert_eq(rep[0].stats.cache_hits, 0, "cache_hits %llu",
                 (unsigned long long)rep[0].stats.cache_hits);
    cr_assert_geq(rep[0].stats.full_rounds, 5, "full_rounds %llu",
                  (unsigned long long)rep[0].stats.full_rounds);
    hj_free(rep, 2);
}

/* Allgather of 'g' (first dimension rank + 1) and broadcast of 'b' from
 * rank 1, five times: broadcasts hit the cache, allgathers never do. */
static int body_gather(hj_rank_t *self)
{
    int64_t in[4] = {7, 7, 7, 7}, bin[3], bout[3];
    const void *data;
    int64_t dim0;

    for (int s = 0; s < 5; s++) {
        cg_hvd_tensor_t g = {.name = "g", .dtype = CG_DTYPE_I64, .ndim = 1,
                             .shape = {self->rank + 1}, .input = in};
        cg_hvd_tensor_t b = {.name = "b", .dtype = CG_DTYPE_I64, .ndim = 1,
                             .shape = {3}, .input = bin, .output = bout};
        cg_hvd_req_h rg, rb;
        for (int i = 0; i < 3; i++)
            bin[i] = self->rank * 100 + s * 10 + i;
        HJ_CHECK(self, cg_hvd_enqueue_allgather(self->core, &g, &rg) ==
                           CG_OK && cg_hvd_enqueue_broadcast(self->core, &b,
                           1, &rb) == CG_OK, "enqueue: %s", cg_last_error());
        HJ_CHECK(self, cg_hvd_wait(rg) == CG_OK && cg_hvd_wait(rb) == CG_OK,
                 "step %d: %s %s", s, cg_hvd_error(rg), cg_hvd_error(rb));
        HJ_CHECK(self, cg_hvd_allgather_result(rg, &data, &dim0) == CG_OK &&
                           dim0 == 3, "step %d: dim0 %lld", s,
                 (long long)dim0);
        HJ_CHECK(self, bout[2] == 100 + s * 10 + 2, "step %d: b[2] = %lld",
                 s, (long long)bout[2]);
        cg_hvd_release(rg);
        cg_hvd_release(rb);
    }
    return 0;
}

Test(hvd_cache, broadcast_hits_and_allgather_never, .timeout = 60)
{
    hj_rank_t *rep = hj_run(2, NULL, body_gather, NULL);
    hj_assert_passed(rep, 2);
    cr_assert_eq(rep[0].stats.cache_hits, 4, "cache_hits %llu (4 "
                 "broadcasts after the first)",
                 (unsigned long long)rep[0].stats.cache_hits);
    cr_assert_geq(rep[0].stats.full_rounds, 5, "full_rounds %llu",
                  (unsigned long long)rep[0].stats.full_rounds);
    hj_free(rep, 2);
}

/* 1000 tensors of 4 KiB for 10 steps after a warm-up, 50 ms cycles (so
 * a step's names meet in one cycle): the same results with and without
 * the cache, no records round with it; the times are printed only. */
#define BIG 1000
#define BIG_LEN 1024

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int body_cost(hj_rank_t *self)
{
    float *buf = malloc((size_t)BIG * BIG_LEN * sizeof(float));
    cg_hvd_req_h *req = malloc(BIG * sizeof(*req));
    cg_hvd_stats_t a, b;
    double t0 = 0;

    HJ_CHECK(self, buf != NULL && req != NULL, "malloc");
    for (int s = 0; s < 11; s++) {
        if (s == 1) {
            cg_hvd_core_stats(self->core, &a);
            t0 = now_s();
        }
        for (int k = 0; k < BIG; k++) {
            char name[32];
            float *x = buf + (size_t)k * BIG_LEN;
            cg_hvd_tensor_t t = {.name = name, .dtype = CG_DTYPE_F32,
                                 .ndim = 1, .shape = {BIG_LEN}, .input = x,
                                 .output = x};
            snprintf(name, sizeof(name), "layer%d.grad", k);
            x[0] = (float)(k + s);
            HJ_CHECK(self, cg_hvd_enqueue_allreduce(self->core, &t,
                                                    CG_OP_SUM, 1.0, 1.0,
                                                    &req[k]) == CG_OK,
                     "enqueue: %s", cg_last_error());
        }
        for (int k = 0; k < BIG; k++) {
            HJ_CHECK(self, cg_hvd_wait(req[k]) == CG_OK, "%s",
                     cg_hvd_error(req[k]));
            self->hash = hj_hash(self->hash, buf + (size_t)k * BIG_LEN,
                                 sizeof(float));
            cg_hvd_release(req[k]);
        }
    }
    cg_hvd_core_stats(self->core, &b);
    HJ_CHECK(self, *(const int *)self->arg == 0 || b.full_rounds ==
                       a.full_rounds, "%llu records rounds after step 1",
             (unsigned long long)(b.full_rounds - a.full_rounds));
    snprintf(self->msg, sizeof(self->msg), "%.2f ms/step, %.1f cycles/step, "
             "%llu records rounds, %llu cache hits in 10 steps",
             (now_s() - t0) * 100.0, (double)(b.cycles - a.cycles) / 10,
             (unsigned long long)(b.full_rounds - a.full_rounds),
             (unsigned long long)(b.cache_hits - a.cache_hits));
    free(buf);
    free(req);
    return 0;
}

Test(hvd_cache, cost_of_1000_cached_names, .timeout = 120)
{
    static const char *const on[] = {"CG_CYCLE_TIME=50ms", NULL};
    static const char *const off[] = {"CG_CYCLE_TIME=50ms",
                                      "CG_CACHE_CAPACITY=0", NULL};
    static const int cached = 1, uncached = 0;
    hj_rank_t *c = hj_run(2, on, body_cost, (void *)&cached);
    hj_rank_t *n = hj_run(2, off, body_cost, (void *)&uncached);

    cr_assert_eq(c[0].failed_line + n[0].failed_line, 0, "%s / %s",
                 c[0].msg, n[0].msg);
    cr_assert_eq(c[0].hash, n[0].hash, "results differ with the cache");
    cr_assert_eq(c[0].hash, c[1].hash, "ranks differ");

    cr_log_info("2 ranks, 1000 x 4 KiB: cache on: %s; cache off: %s",
                c[0].msg, n[0].msg);
    hj_free(c, 2);
    hj_free(n, 2);
}

/* 'w' is cached; then rank 1 waits on its bit while rank 0 destroys its
 * core: the stop crosses the quiet bit-vector cycle and rank 1's request
 * fails, naming rank 0. */
static int body_stop(hj_rank_t *self)
{
    char err[512];
    float x[4] = {0};
    cg_hvd_tensor_t t = {.name = "w", .dtype = CG_DTYPE_F32, .ndim = 1,
                         .shape = {4}, .input = x, .output = x};
    cg_hvd_req_h req;
    cg_status_t st;

    HJ_CHECK(self, (st = one(self, 4, err, sizeof(err))) == CG_OK,
             "first round: %s (%s)", cg_status_string(st), err);
    if (self->rank == 0) {
        cg_hvd_core_destroy(self->core);
        self->destroyed = 1;
        return 0;
    }
    st = cg_hvd_enqueue_allreduce(self->core, &t, CG_OP_SUM, 1.0, 1.0,
                                  &req);
    if (st == CG_OK) { /* else the stop came first: enqueue says so */
        st = cg_hvd_wait(req);
        snprintf(err, sizeof(err), "%s", cg_hvd_error(req));
        cg_hvd_release(req);
    } else {
        snprintf(err, sizeof(err), "%s", cg_last_error());
    }
    HJ_CHECK(self, st == CG_ERR_CANCELED && strstr(err, "rank 0") != NULL,
             "rank 1: %s (%s)", cg_status_string(st), err);
    return 0;
}

Test(hvd_cache, a_stop_reaches_ranks_waiting_on_cache_bits, .timeout = 60)
{
    hj_rank_t *rep = hj_run(2, NULL, body_stop, NULL);
    hj_assert_passed(rep, 2);
    hj_free(rep, 2);
}

/* Capacity 2: 'a' and 'b' cached; rank 0 waits on 'a''s bit while both
 * ranks run 'c' and 'd', whose insertion evicts 'a' (least recently
 * used): rank 0's 'a' goes back to a record and completes once rank 1
 * enqueues it. */
static cg_hvd_req_h start(hj_rank_t *self, const char *name, int32_t *x)
{
    cg_hvd_tensor_t t = {.name = name, .dtype = CG_DTYPE_I32, .ndim = 1,
                         .shape = {2}, .input = x, .output = x};
    cg_hvd_req_h req = NULL;

    x[0] = self->rank + 1;
    x[1] = name[0];
    if (cg_hvd_enqueue_allreduce(self->core, &t, CG_OP_SUM, 1.0, 1.0, &req)
        != CG_OK)
        return NULL;
    return req;
}

/* Waits for the allreduce of `name` started into x: [1 + 2, 2 * name[0]]. */
static int finish(hj_rank_t *self, cg_hvd_req_h req, const int32_t *x,
                  const char *name)
{
    HJ_CHECK(self, req != NULL && cg_hvd_wait(req) == CG_OK, "%s: %s", name,
             req != NULL ? cg_hvd_error(req) : cg_last_error());
    HJ_CHECK(self, x[0] == 3 && x[1] == 2 * name[0], "%s: got %d %d, want "
             "3 %d", name, x[0], x[1], 2 * name[0]);
    cg_hvd_release(req);
    return 0;
}

static int body_evict_pending(hj_rank_t *self)
{
    int32_t a[2], b[2], c[2], d[2];
    cg_hvd_req_h ra = NULL;

    if (finish(self, start(self, "a", a), a, "a") ||
        finish(self, start(self, "b", b), b, "b"))
        return 1;
    if (self->rank == 0)
        ra = start(self, "a", a);
    if (finish(self, start(self, "c", c), c, "c") ||
        finish(self, start(self, "d", d), d, "d"))
        return 1;
    if (self->rank == 1)
        ra = start(self, "a", a);
    return finish(self, ra, a, "a");
}

Test(hvd_cache, a_waiting_name_evicted_by_lru_still_completes,
     .timeout = 60)
{
    static const char *const env[] = {"CG_CACHE_CAPACITY=2", NULL};
    hj_rank_t *rep = hj_run(2, env, body_evict_pending, NULL);
    hj_assert_passed(rep, 2);
    cr_assert_eq(rep[0].stats.cache_hits, 0, "cache_hits %llu: 'a' should "
                 "have left the cache while rank 0 waited on it",
                 (unsigned long long)rep[0].stats.cache_hits);
    hj_free(rep, 2);
}
