/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The Horovod shim core's enqueue API across forked ranks: every reduction
 * op, prescale/postscale in place, many asynchronous requests (poll sees
 * work pending), fusion of 200 small tensors, broadcast and allgather with
 * a first dimension that differs per rank.
 */
#include <criterion/criterion.h>
#include <pthread.h>
#include <string.h>

#include "tests/core/util/test_hvd_util.h"

static cg_hvd_tensor_t ten(const char *name, cg_dtype_t dt, int64_t n,
                           const void *in, void *out)
{
    cg_hvd_tensor_t t = {.name = name, .dtype = dt, .ndim = 1,
                         .shape = {n}, .input = in, .output = out};
    return t;
}

/* x_r[i] = r + 1 + i % 3 (small integers: every op is exact in f32). */
static int body_ops(hj_rank_t *self)
{
    static const cg_redop_t ops[] = {CG_OP_SUM, CG_OP_AVG, CG_OP_MIN,
                                     CG_OP_MAX, CG_OP_PROD};
    float in[5][6], out[5][6];
    cg_hvd_req_h req[5];
    char names[5][32];

    for (int k = 0; k < 5; k++) {
        for (int i = 0; i < 6; i++)
            in[k][i] = (float)(self->rank + 1 + i % 3);
        snprintf(names[k], sizeof(names[k]), "grad.%s", cg_redop_name(ops[k]));
        cg_hvd_tensor_t t = ten(names[k], CG_DTYPE_F32, 6, in[k], out[k]);
        HJ_CHECK(self, cg_hvd_enqueue_allreduce(self->core, &t, ops[k], 1.0,
                                                1.0, &req[k]) == CG_OK,
                 "enqueue %s: %s", names[k], cg_last_error());
    }
    for (int k = 0; k < 5; k++) {
        HJ_CHECK(self, cg_hvd_wait(req[k]) == CG_OK, "%s: %s", names[k],
                 cg_hvd_error(req[k]));
        for (int i = 0; i < 6; i++) {
            float b = (float)(1 + i % 3), s = 0, p = 1;
            for (int r = 0; r < self->size; r++)
                s += b + (float)r, p *= b + (float)r;
            float want[5] = {s, s / (float)self->size, b,
                             b + (float)(self->size - 1), p};
            HJ_CHECK(self, out[k][i] == want[k], "%s[%d] = %g, want %g",
                     names[k], i, out[k][i], want[k]);
        }
        cg_hvd_release(req[k]);
    }
    return 0;
}

Test(hvd_queue, every_op_matches_the_reference, .timeout = 60)
{
    hj_rank_t *rep = hj_run(3, NULL, body_ops, NULL);
    hj_assert_passed(rep, 3);
    hj_free(rep, 3);
}

/* In place f64 with prescale 0.5 and postscale 4: out = 2 * sum. */
static int body_scale(hj_rank_t *self)
{
    double x[1000];
    cg_hvd_req_h req;

    for (int i = 0; i < 1000; i++)
        x[i] = self->rank * 10 + i;
    cg_hvd_tensor_t t = ten("w.inplace", CG_DTYPE_F64, 1000, x, x);
    HJ_CHECK(self, cg_hvd_enqueue_allreduce(self->core, &t, CG_OP_SUM, 0.5,
                                            4.0, &req) == CG_OK,
             "enqueue: %s", cg_last_error());
    HJ_CHECK(self, cg_hvd_wait(req) == CG_OK, "wait: %s", cg_hvd_error(req));
    for (int i = 0; i < 1000; i++) {
        double want = 2.0 * (10.0 * self->size * (self->size - 1) / 2 +
                             (double)i * self->size);
        HJ_CHECK(self, x[i] == want, "x[%d] = %.17g, want %.17g", i, x[i],
                 want);
    }
    cg_hvd_release(req);
    return 0;
}

Test(hvd_queue, prescale_and_postscale_in_place, .timeout = 60)
{
    hj_rank_t *rep = hj_run(2, NULL, body_scale, NULL);
    hj_assert_passed(rep, 2);
    hj_free(rep, 2);
}

/* 50 requests enqueued at once; poll sees pending work, then wait all. */
static int body_async(hj_rank_t *self)
{
    enum { N = 50, C = 257 };
    static int32_t buf[N][C];
    cg_hvd_req_h req[N];
    int pending_seen = 0;

    for (int k = 0; k < N; k++) {
        char name[32];
        for (int i = 0; i < C; i++)
            buf[k][i] = k * 1000 + i + self->rank;
        snprintf(name, sizeof(name), "async.%d", k);
        cg_hvd_tensor_t t = ten(name, CG_DTYPE_I32, C, buf[k], buf[k]);
        HJ_CHECK(self, cg_hvd_enqueue_allreduce(self->core, &t, CG_OP_SUM,
                                                1.0, 1.0, &req[k]) == CG_OK,
                 "enqueue %s: %s", name, cg_last_error());
        pending_seen += !cg_hvd_poll(req[k]);
    }
    HJ_CHECK(self, pending_seen > 0, "poll never reported pending work");
    for (int k = N - 1; k >= 0; k--) {
        HJ_CHECK(self, cg_hvd_wait(req[k]) == CG_OK, "async.%d: %s", k,
                 cg_hvd_error(req[k]));
        HJ_CHECK(self, cg_hvd_poll(req[k]), "done but poll says pending");
        int32_t want = 2 * (k * 1000 + 7) + 1;
        HJ_CHECK(self, buf[k][7] == want, "async.%d[7] = %d, want %d", k,
                 buf[k][7], want);
        cg_hvd_release(req[k]);
    }
    return 0;
}

Test(hvd_queue, many_async_requests_poll_then_wait_all, .timeout = 60)
{
    const char *env[] = {"HOROVOD_CYCLE_TIME=20", NULL};
    hj_rank_t *rep = hj_run(2, env, body_async, NULL);
    hj_assert_passed(rep, 2);
    hj_free(rep, 2);
}

/* 200 tensors of 64 floats in one burst: fused, > 1 tensor per call. */
static int body_fusion(hj_rank_t *self)
{
    enum { N = 200, C = 64 };
    static float buf[N][C];
    cg_hvd_req_h req[N];

    for (int k = 0; k < N; k++) {
        char name[32];
        for (int i = 0; i < C; i++)
            buf[k][i] = (float)(k + i + self->rank);
        snprintf(name, sizeof(name), "layer%d.grad", k);
        cg_hvd_tensor_t t = ten(name, CG_DTYPE_F32, C, buf[k], buf[k]);
        HJ_CHECK(self, cg_hvd_enqueue_allreduce(self->core, &t, CG_OP_SUM,
                                                1.0, 1.0, &req[k]) == CG_OK,
                 "enqueue %s: %s", name, cg_last_error());
    }
    for (int k = 0; k < N; k++) {
        HJ_CHECK(self, cg_hvd_wait(req[k]) == CG_OK, "layer%d: %s", k,
                 cg_hvd_error(req[k]));
        HJ_CHECK(self, buf[k][3] == (float)(2 * (k + 3) + 1),
                 "layer%d[3] = %g", k, buf[k][3]);
        cg_hvd_release(req[k]);
    }
    cg_hvd_core_stats(self->core, &self->stats);
    return 0;
}

Test(hvd_queue, fusion_packs_200_small_tensors, .timeout = 60)
{
    const char *env[] = {"HOROVOD_CYCLE_TIME=50", NULL};
    hj_rank_t *rep = hj_run(2, env, body_fusion, NULL);
    hj_assert_passed(rep, 2);
    cg_hvd_stats_t *s = &rep[0].stats;
    cr_log_info("%llu tensors in %llu calls over %llu cycles, largest group "
                "%llu", (unsigned long long)s->allreduce_tensors,
                (unsigned long long)s->allreduce_calls,
                (unsigned long long)s->cycles,
                (unsigned long long)s->max_fused_tensors);
    cr_assert_eq(s->allreduce_tensors, 200, "tensors %llu",
                 (unsigned long long)s->allreduce_tensors);
    cr_assert_gt(s->allreduce_tensors, 4 * s->allreduce_calls,
                 "%llu tensors in %llu calls (largest group %llu)",
                 (unsigned long long)s->allreduce_tensors,
                 (unsigned long long)s->allreduce_calls,
                 (unsigned long long)s->max_fused_tensors);
    hj_free(rep, 2);
}

/* Broadcast out of place from rank 1; allgather of rank + 1 rows of 2. */
static int body_bcast_gather(hj_rank_t *self)
{
    int64_t src[4] = {self->rank, 7, 8, 9}, dst[4] = {0};
    int16_t rows[2 * 3];
    cg_hvd_req_h rb, rg;
    const void *data;
    int64_t dim0;

    cg_hvd_tensor_t tb = ten("bcast.w", CG_DTYPE_I64, 4, src, dst);
    HJ_CHECK(self, cg_hvd_enqueue_broadcast(self->core, &tb, 1, &rb) == CG_OK,
             "broadcast: %s", cg_last_error());
    for (int i = 0; i < 2 * (self->rank + 1); i++)
        rows[i] = (int16_t)(self->rank * 100 + i);
    /* f16 elements: allgather moves the bits as they are. */
    cg_hvd_tensor_t tg = {.name = "metrics", .dtype = CG_DTYPE_F16,
                          .ndim = 2, .shape = {self->rank + 1, 2},
                          .input = rows};
    HJ_CHECK(self, cg_hvd_enqueue_allgather(self->core, &tg, &rg) == CG_OK,
             "allgather: %s", cg_last_error());
    HJ_CHECK(self, cg_hvd_wait(rb) == CG_OK, "bcast: %s", cg_hvd_error(rb));
    HJ_CHECK(self, dst[0] == 1 && dst[3] == 9, "dst = %lld..%lld",
             (long long)dst[0], (long long)dst[3]);
    HJ_CHECK(self, cg_hvd_wait(rg) == CG_OK, "gather: %s", cg_hvd_error(rg));
    HJ_CHECK(self, cg_hvd_allgather_result(rg, &data, &dim0) == CG_OK, "%s",
             cg_last_error());
    HJ_CHECK(self, dim0 == 6, "first dimension %lld, want 6", (long long)dim0);
    const int16_t *g = data;
    for (int r = 0, k = 0; r < self->size; r++)
        for (int i = 0; i < 2 * (r + 1); i++, k++)
            HJ_CHECK(self, g[k] == r * 100 + i, "gathered[%d] = %d, want %d",
                     k, g[k], r * 100 + i);
    cg_hvd_release(rb);
    cg_hvd_release(rg);
    return 0;
}

Test(hvd_queue, broadcast_and_ragged_allgather, .timeout = 60)
{
    hj_rank_t *rep = hj_run(3, NULL, body_bcast_gather, NULL);
    hj_assert_passed(rep, 3);
    hj_free(rep, 3);
}

/* Four framework threads enqueue 50 tensors each at the same time. */
typedef struct thr_arg {
    hj_rank_t *self;
    int tid, bad;
    int32_t buf[50][8];
} thr_arg_t;

static void *thr_enqueue(void *p)
{
    thr_arg_t *a = p;
    cg_hvd_req_h req[50];

    for (int k = 0; k < 50; k++) {
        char name[32];
        for (int i = 0; i < 8; i++)
            a->buf[k][i] = a->tid * 100 + k + a->self->rank;
        snprintf(name, sizeof(name), "t%d.g%d", a->tid, k);
        cg_hvd_tensor_t t = ten(name, CG_DTYPE_I32, 8, a->buf[k], a->buf[k]);
        if (cg_hvd_enqueue_allreduce(a->self->core, &t, CG_OP_MAX, 1, 1,
                                     &req[k]) != CG_OK)
            req[k] = NULL, a->bad++;
    }
    for (int k = 0; k < 50; k++) {
        if (req[k] == NULL)
            continue;
        a->bad += cg_hvd_wait(req[k]) != CG_OK ||
                  a->buf[k][5] != a->tid * 100 + k + a->self->size - 1;
        cg_hvd_release(req[k]);
    }
    return NULL;
}

static int body_threads(hj_rank_t *self)
{
    static thr_arg_t args[4];
    pthread_t th[4];

    for (int t = 0; t < 4; t++) {
        args[t] = (thr_arg_t){.self = self, .tid = t};
        pthread_create(&th[t], NULL, thr_enqueue, &args[t]);
    }
    for (int t = 0; t < 4; t++) {
        pthread_join(th[t], NULL);
        HJ_CHECK(self, args[t].bad == 0, "thread %d: %d requests failed or "
                 "wrong", t, args[t].bad);
    }
    return 0;
}

Test(hvd_queue, enqueue_from_four_threads, .timeout = 60)
{
    hj_rank_t *rep = hj_run(2, NULL, body_threads, NULL);
    hj_assert_passed(rep, 2);
    hj_free(rep, 2);
}
