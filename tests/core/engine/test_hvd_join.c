/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Join in the Horovod shim's core (core/engine/hvd_join.c) across 2 and 3
 * forked ranks: rank r runs r + 1 steps of two fused allreduces (Sum and
 * Average, the same names every step, so the response cache is in play)
 * and joins; every result equals the reference in which joined ranks add
 * zeros, and every rank's join returns the last rank to join. Also a join
 * with nothing to do, a barrier-like allreduce after it, a second epoch,
 * a broadcast refused while a rank is joined, a join on a process set,
 * grouped allreduces taking zeros from joined ranks, and alltoall and
 * grouped allgather / reducescatter refused while a rank is joined.
 */
#include <criterion/criterion.h>
#include <stdio.h>
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

/* Grouped allreduces with joined ranks: rank r runs r + 1 steps of a
 * group of three Sum members and a group of two Average members, then
 * joins; joined ranks add zeros to every member, as to single
 * allreduces, and each group completes whole. */
#define JN_G 3
static int jn_group(hj_rank_t *self, int s, const char *base, cg_redop_t op,
                    int n)
{
    float in[JN_G][JN_N], out[JN_G][JN_N];
    char names[JN_G][32];
    cg_hvd_tensor_t ts[JN_G];
    cg_hvd_req_h reqs[JN_G];

    for (int k = 0; k < n; k++) {
        snprintf(names[k], sizeof(names[k]), "%s_%dof%d", base, k + 1, n);
        for (int i = 0; i < JN_N; i++)
            in[k][i] = jn_value(self->rank, s, k, i);
        ts[k] = (cg_hvd_tensor_t){.name = names[k], .dtype = CG_DTYPE_F32,
                                  .ndim = 1, .shape = {JN_N},
                                  .input = in[k], .output = out[k]};
    }
    HJ_CHECK(self, cg_hvd_enqueue_grouped_allreduce(self->core, ts, n, op, 1,
                                                    1, reqs) == CG_OK,
             "step %d %s: %s", s, base, cg_last_error());
    for (int k = 0; k < n; k++) {
        HJ_CHECK(self, cg_hvd_wait(reqs[k]) == CG_OK, "step %d %s: %s", s,
                 names[k], cg_hvd_error(reqs[k]));
        cg_hvd_release(reqs[k]);
        for (int i = 0; i < JN_N; i++) {
            float want = 0;
            for (int r = 0; r < self->size; r++)
                if (s < r + 1) /* still working; joined ranks add 0 */
                    want += jn_value(r, s, k, i);
            if (op == CG_OP_AVG)
                want /= (float)self->size;
            HJ_CHECK(self, out[k][i] == want, "step %d %s element %d is %g, "
                     "want %g", s, names[k], i, out[k][i], want);
        }
    }
    return 0;
}

static int body_grouped(hj_rank_t *self)
{
    int last = -2;

    for (int s = 0; s < self->rank + 1; s++)
        if (jn_group(self, s, "gsum", CG_OP_SUM, 3) != 0 ||
            jn_group(self, s, "gavg", CG_OP_AVG, 2) != 0)
            return 1;
    if (jn_join(self, 0, &last) != 0)
        return 1;
    HJ_CHECK(self, last == self->size - 1, "join returned %d, want %d", last,
             self->size - 1);
    return jn_barrier(self, "after");
}

Test(hvd_join, grouped_allreduce_takes_zeros_from_joined_ranks,
     .timeout = 60)
{
    hj_rank_t *rep = hj_run(3, jn_env, body_grouped, NULL);

    hj_assert_passed(rep, 3);
    hj_free(rep, 3);
}

/* Every member of the group fails with text (Horovod's refusal). */
static int jn_refused_group(hj_rank_t *self, cg_hvd_op_type_t type,
                            const char *text)
{
    float in[2][6], out[2][6];
    cg_hvd_tensor_t ts[2];
    cg_hvd_req_h reqs[2];
    const char *names[2] = {"gr_1of2", "gr_2of2"};
    const char *what = type == CG_HVD_ALLGATHER ? "allgather"
                                                : "reducescatter";
    cg_status_t st;

    for (int k = 0; k < 2; k++) {
        for (int i = 0; i < 6; i++)
            in[k][i] = (float)i;
        ts[k] = (cg_hvd_tensor_t){.name = names[k], .dtype = CG_DTYPE_F32,
                                  .ndim = 1, .shape = {6}, .input = in[k],
                                  .output = out[k]};
    }
    st = type == CG_HVD_ALLGATHER
             ? cg_hvd_enqueue_grouped_allgather(self->core, ts, 2, reqs)
             : cg_hvd_enqueue_grouped_reducescatter(self->core, ts, 2,
                                                    CG_OP_SUM, 1, 1, reqs);
    HJ_CHECK(self, st == CG_OK, "grouped %s: %s", what,
             cg_last_error());
    for (int k = 0; k < 2; k++) {
        st = cg_hvd_wait(reqs[k]);
        HJ_CHECK(self, st == CG_ERR_MISMATCH &&
                           strstr(cg_hvd_error(reqs[k]), text) != NULL,
                 "grouped %s member %d while rank 0 joined: %s (%s)",
                 what, k, cg_status_name(st),
                 cg_hvd_error(reqs[k]));
        cg_hvd_release(reqs[k]);
    }
    return 0;
}

/* Rank 0 joins at once; ranks 1 and 2 see alltoall and grouped allgather
 * and reducescatter refused (Horovod: not supported with join), then a
 * grouped allreduce runs with rank 0's zeros, then they join. */
static int body_refused(hj_rank_t *self)
{
    float x[6] = {1, 2, 3, 4, 5, 6};
    char msg[512];
    cg_hvd_req_h req;
    int last = -2;
    cg_status_t st;

    if (self->rank > 0) {
        cg_hvd_tensor_t t = {.name = "a2a", .dtype = CG_DTYPE_F32,
                             .ndim = 1, .shape = {6}, .input = x};
        st = cg_hvd_enqueue_alltoall(self->core, &t, NULL, &req);
        st = hj_settle(st, &req, msg, sizeof(msg));
        HJ_CHECK(self, st == CG_ERR_MISMATCH &&
                           strstr(msg, "Alltoall is not supported with join")
                               != NULL,
                 "alltoall while rank 0 joined: %s (%s)",
                 cg_status_name(st), msg);
        if (jn_refused_group(self, CG_HVD_ALLGATHER,
                             "Allgather is not supported with join") != 0 ||
            jn_refused_group(self, CG_HVD_REDUCESCATTER,
                             "Reducescatter is not supported with join") !=
                0)
            return 1;
        /* Steps 0 and 1 of jn_group's reference: ranks 1 and 2 work, rank
         * 0 (s >= 1) adds zeros. */
        if (jn_group(self, 1, "gsum", CG_OP_SUM, 3) != 0)
            return 1;
    }
    if (jn_join(self, 0, &last) != 0)
        return 1;
    HJ_CHECK(self, last == 1 || last == 2, "join returned %d", last);
    return 0;
}

Test(hvd_join, alltoall_and_grouped_allgather_reducescatter_are_refused,
     .timeout = 60)
{
    hj_rank_t *rep = hj_run(3, jn_env, body_refused, NULL);

    hj_assert_passed(rep, 3);
    hj_free(rep, 3);
}
