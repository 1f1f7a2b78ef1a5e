/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Join in the Horovod shim's core (core/engine/hvd_join.c) across 2 and 3
 * forked ranks: rank r runs r + 1 steps of two fused allreduces (Sum and
 * Average, the same names every step, so the response cache is in play)
 * and joins; every result equals the reference in which joined ranks add
 * zeros, and every rank's join returns the last rank to join. Also a join
 * with nothing to do, a barrier-like allreduce after it, a second epoch,
 * a broadcast refused while a rank is joined, and a join on a process
 * set.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "tests/core/util/test_hvd_util.h"

#define JN_N 29

static const char *const jn_env[] = {"HOROVOD_CYCLE_TIME=2", NULL};

static float jn_value(int r, int step, int k, int i)
{
    return (float)((r + 1) * 64 + step * 8 + k * 4 + i % 3);
}

static int jn_join(hj_rank_t *self, int32_t set, int *last_p)
{
    cg_hvd_req_h req;

    HJ_CHECK(self, cg_hvd_enqueue_join(self->core, set, &req) == CG_OK,
             "join: %s", cg_last_error());
    HJ_CHECK(self, cg_hvd_wait(req) == CG_OK, "join: %s", cg_hvd_error(req));
    HJ_CHECK(self, cg_hvd_join_result(req, last_p) == CG_OK, "result: %s",
             cg_last_error());
    cg_hvd_release(req);
    return 0;
}

/* Steps of the epoch: rank r runs r + 1 + shift of them, then joins. */
static int jn_epoch(hj_rank_t *self, int shift, int *last_p)
{
    int steps = self->rank + 1 + shift;
    float in[2][JN_N], out[2][JN_N];
    cg_hvd_req_h req[2];
    const char *names[2] = {"sum", "avg"};
    const cg_redop_t ops[2] = {CG_OP_SUM, CG_OP_AVG};

    for (int s = 0; s < steps; s++) {
        for (int k = 0; k < 2; k++) {
            for (int i = 0; i < JN_N; i++)
                in[k][i] = jn_value(self->rank, s, k, i);
            cg_hvd_tensor_t t = {.name = names[k], .dtype = CG_DTYPE_F32,
                                 .ndim = 1, .shape = {JN_N},
                                 .input = in[k], .output = out[k]};
            HJ_CHECK(self, cg_hvd_enqueue_allreduce(self->core, &t, ops[k],
                                                    1, 1, &req[k]) == CG_OK,
                     "step %d %s: %s", s, names[k], cg_last_error());
        }
        for (int k = 0; k < 2; k++) {
            HJ_CHECK(self, cg_hvd_wait(req[k]) == CG_OK, "step %d %s: %s", s,
                     names[k], cg_hvd_error(req[k]));
            cg_hvd_release(req[k]);
            for (int i = 0; i < JN_N; i++) {
                float want = 0;
                /* Ranks still working at step s; the others add zeros. */
                for (int r = 0; r < self->size; r++)
                    if (s < r + 1 + shift)
                        want += jn_value(r, s, k, i);
                if (ops[k] == CG_OP_AVG)
                    want /= (float)self->size;
                HJ_CHECK(self, out[k][i] == want, "step %d %s element %d is "
                         "%g, want %g", s, names[k], i, out[k][i], want);
            }
        }
    }
    return jn_join(self, 0, last_p);
}

/* A one-element sum every rank enqueues: the barrier of the Python face. */
static int jn_barrier(hj_rank_t *self, const char *name)
{
    int32_t one = 1;
    cg_hvd_req_h req;
    cg_hvd_tensor_t t = {.name = name, .dtype = CG_DTYPE_I32, .ndim = 0,
                         .input = &one, .output = &one};

    HJ_CHECK(self, cg_hvd_enqueue_allreduce(self->core, &t, CG_OP_SUM, 1, 1,
                                            &req) == CG_OK &&
                       cg_hvd_wait(req) == CG_OK,
             "%s: %s / %s", name, cg_last_error(), cg_hvd_error(req));
    cg_hvd_release(req);
    HJ_CHECK(self, one == self->size, "%s: %d, want %d", name, (int)one,
             self->size);
    return 0;
}

static int body_uneven(hj_rank_t *self)
{
    int last = -2;

    for (int epoch = 0; epoch < 2; epoch++) {
        if (jn_epoch(self, epoch, &last) != 0)
            return 1;
        /* The rank with the most steps is the last to join. */
        HJ_CHECK(self, last == self->size - 1, "epoch %d: join returned %d, "
                 "want %d", epoch, last, self->size - 1);
        if (jn_barrier(self, epoch ? "barrier.2" : "barrier.1") != 0)
            return 1;
    }
    return 0;
}

Test(hvd_join, uneven_work_at_2_ranks, .timeout = 60)
{
    hj_rank_t *rep = hj_run(2, jn_env, body_uneven, NULL);

    hj_assert_passed(rep, 2);
    hj_free(rep, 2);
}

Test(hvd_join, uneven_work_at_3_ranks, .timeout = 60)
{
    hj_rank_t *rep = hj_run(3, jn_env, body_uneven, NULL);

    hj_assert_passed(rep, 3);
    /* Joined ranks ran cache-free rounds: names went through records. */
    for (int r = 0; r < 3; r++)
        cr_assert(rep[r].stats.full_rounds > 0, "rank %d", r);
    hj_free(rep, 3);
}

static int body_nothing(hj_rank_t *self)
{
    int last = -2;

    if (jn_join(self, 0, &last) != 0)
        return 1;
    HJ_CHECK(self, last >= 0 && last < self->size, "join returned %d", last);
    self->hash = (uint64_t)last;
    return jn_barrier(self, "after");
}

Test(hvd_join, with_nothing_to_do_every_rank_gets_the_same_last_rank,
     .timeout = 60)
{
    hj_rank_t *rep = hj_run(3, jn_env, body_nothing, NULL);

    hj_assert_passed(rep, 3);
    for (int r = 1; r < 3; r++)
        cr_assert_eq(rep[r].hash, rep[0].hash, "rank %d: last %llu, rank 0: "
                     "%llu", r, (unsigned long long)rep[r].hash,
                     (unsigned long long)rep[0].hash);
    hj_free(rep, 3);
}

/* Rank 0 joins at once; rank 1 broadcasts (refused: rank 0 joined),
 * allreduces (rank 0 adds zeros), then joins. */
static int body_broadcast(hj_rank_t *self)
{
    float x[JN_N];
    char msg[512];
    cg_hvd_req_h req;
    int last = -2;
    cg_status_t st;

    if (self->rank == 1) {
        for (int i = 0; i < JN_N; i++)
            x[i] = jn_value(1, 0, 0, i);
        cg_hvd_tensor_t t = {.name = "bc", .dtype = CG_DTYPE_F32, .ndim = 1,
                             .shape = {JN_N}, .input = x, .output = x};
        st = cg_hvd_enqueue_broadcast(self->core, &t, 1, &req);
        st = hj_settle(st, &req, msg, sizeof(msg));
        HJ_CHECK(self, st == CG_ERR_MISMATCH &&
                           strstr(msg, "Broadcast is not supported with join")
                               != NULL,
                 "broadcast while rank 0 joined: %s (%s)",
                 cg_status_name(st), msg);
        t.name = "ar";
        HJ_CHECK(self, cg_hvd_enqueue_allreduce(self->core, &t, CG_OP_SUM, 1,
                                                1, &req) == CG_OK &&
                           cg_hvd_wait(req) == CG_OK,
                 "allreduce: %s", cg_hvd_error(req));
        cg_hvd_release(req);
        HJ_CHECK(self, x[3] == jn_value(1, 0, 0, 3), "allreduce: %g", x[3]);
    }
    if (jn_join(self, 0, &last) != 0)
        return 1;
    HJ_CHECK(self, last == 1, "join returned %d, want 1", last);
    return 0;
}

Test(hvd_join, broadcast_while_a_rank_is_joined_fails_and_allreduce_runs,
     .timeout = 60)
{
    hj_rank_t *rep = hj_run(2, jn_env, body_broadcast, NULL);

    hj_assert_passed(rep, 2);
    hj_free(rep, 2);
}

/* Join on set {1, 2}: rank 1 joins at once, rank 2 allreduces with rank
 * 1's zeros; rank 0 is not in it. Last: job rank 2. */
static int body_set(hj_rank_t *self)
{
    const int b[2] = {1, 2};
    float x[JN_N];
    cg_hvd_req_h req;
    int last = -2;

    HJ_CHECK(self, cg_hvd_process_set_add(self->core, 4, b, 2) == CG_OK,
             "add: %s", cg_last_error());
    if (self->rank == 0)
        return 0;
    if (self->rank == 2) {
        for (int i = 0; i < JN_N; i++)
            x[i] = jn_value(2, 0, 0, i);
        cg_hvd_tensor_t t = {.field_mask = CG_HVD_TENSOR_FIELD_PROCESS_SET,
                             .name = "ar", .dtype = CG_DTYPE_F32, .ndim = 1,
                             .shape = {JN_N}, .input = x, .output = x,
                             .process_set = 4};
        HJ_CHECK(self, cg_hvd_enqueue_allreduce(self->core, &t, CG_OP_SUM, 1,
                                                1, &req) == CG_OK &&
                           cg_hvd_wait(req) == CG_OK,
                 "allreduce: %s", cg_hvd_error(req));
        cg_hvd_release(req);
        HJ_CHECK(self, x[5] == jn_value(2, 0, 0, 5), "allreduce: %g", x[5]);
    }
    if (jn_join(self, 4, &last) != 0)
        return 1;
    HJ_CHECK(self, last == 2, "join returned %d, want job rank 2", last);
    return 0;
}

Test(hvd_join, on_a_process_set, .timeout = 60)
{
    hj_rank_t *rep = hj_run(3, jn_env, body_set, NULL);

    hj_assert_passed(rep, 3);
    hj_free(rep, 3);
}
