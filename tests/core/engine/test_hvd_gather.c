/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Fused allgather in the Horovod shim's core (core/engine/hvd_gather.c) across
 * forked ranks: 50 ragged allgathers (some ranks give no rows) of two
 * dtypes fuse into one collective per dtype; with fusion off each is its
 * own; a tensor larger than the fusion threshold is gathered alone
 * between two fused groups; injected allocation faults are retried; a
 * result no rank can allocate fails every rank instead of hanging one; a
 * result larger than the address space fails alone and the core goes on;
 * the timeline shows the fused tensors in one COLLGUARD_ALLGATHER span
 * (gather_timeline_check.py); allgathers fused in a cycle that also
 * carries an allreduce after them. Every element is checked on every rank.
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "tests/core/util/test_hvd_util.h"

#define GT_MAX 64
#define GT_COLS 4
/* Rows of the large tensor (plus the rank): 320 KB of f32 per rank. */
#define GT_BIG_ROWS 20000

typedef struct gt_case {
    int nt;    /* tensors */
    int mixed; /* odd tensors i64, even ones f32 */
    int big;   /* index of the large tensor (-1: none) */
    int allreduce; /* an allreduce enqueued after the allgathers */
} gt_case_t;

static int64_t gt_rows(const gt_case_t *c, int r, int k)
{
    return k == c->big ? GT_BIG_ROWS + r : (r + k) % 3;
}

static cg_dtype_t gt_dtype(const gt_case_t *c, int k)
{
    return c->mixed && k % 2 ? CG_DTYPE_I64 : CG_DTYPE_F32;
}

/* Element i of rank r's tensor k: names its origin, exact in f32. */
static int64_t gt_value(int r, int k, int64_t i)
{
    return r * 100000 + k * 1000 + i % 1000;
}

static void gt_fill(void *buf, cg_dtype_t dt, int r, int k, int64_t n)
{
    for (int64_t i = 0; i < n; i++) {
        if (dt == CG_DTYPE_F32)
            ((float *)buf)[i] = (float)gt_value(r, k, i);
        else
            ((int64_t *)buf)[i] = gt_value(r, k, i);
    }
}

/* Tensor k's gathered result against every rank's rows. */
static int gt_check(hj_rank_t *self, const gt_case_t *c, int k,
                    cg_hvd_req_h req)
{
    const void *data;
    int64_t dim0, want0 = 0, at = 0;
    cg_dtype_t dt = gt_dtype(c, k);

    HJ_CHECK(self, cg_hvd_wait(req) == CG_OK, "tensor %d: %s", k,
             cg_hvd_error(req));
    HJ_CHECK(self, cg_hvd_allgather_result(req, &data, &dim0) == CG_OK,
             "tensor %d: %s", k, cg_last_error());
    for (int r = 0; r < self->size; r++)
        want0 += gt_rows(c, r, k);
    HJ_CHECK(self, dim0 == want0, "tensor %d: first dimension %lld, want "
             "%lld", k, (long long)dim0, (long long)want0);
    for (int r = 0; r < self->size; r++) {
        for (int64_t i = 0; i < gt_rows(c, r, k) * GT_COLS; i++, at++) {
            int64_t got = dt == CG_DTYPE_F32
                              ? (int64_t)((const float *)data)[at]
                              : ((const int64_t *)data)[at];
            HJ_CHECK(self, got == gt_value(r, k, i), "tensor %d element "
                     "%lld (rank %d's %lld) is %lld, want %lld", k,
                     (long long)at, r, (long long)i, (long long)got,
                     (long long)gt_value(r, k, i));
        }
    }
    return 0;
}

/* A warm-up allreduce puts the ranks in step (HOROVOD_CYCLE_TIME 300 ms),
 * so every allgather enqueued next lands in the same cycle. */
static int body_gather(hj_rank_t *self)
{
    const gt_case_t *c = self->arg;
    static void *in[GT_MAX];
    cg_hvd_req_h req[GT_MAX], warm;
    char names[GT_MAX][32];
    float w = 1;
    cg_hvd_tensor_t tw = {.name = "warmup", .dtype = CG_DTYPE_F32,
                          .ndim = 1, .shape = {1}, .input = &w, .output = &w};

    HJ_CHECK(self, cg_hvd_enqueue_allreduce(self->core, &tw, CG_OP_SUM, 1, 1,
                                            &warm) == CG_OK &&
                       cg_hvd_wait(warm) == CG_OK,
             "warm-up: %s", cg_last_error());
    cg_hvd_release(warm);
    for (int k = 0; k < c->nt; k++) {
        int64_t rows = gt_rows(c, self->rank, k);
        cg_dtype_t dt = gt_dtype(c, k);
        in[k] = malloc((size_t)(rows * GT_COLS + 1) * 8);
        gt_fill(in[k], dt, self->rank, k, rows * GT_COLS);
        snprintf(names[k], sizeof(names[k]), "gath.%02d", k);
        cg_hvd_tensor_t t = {.name = names[k], .dtype = dt, .ndim = 2,
                             .shape = {rows, GT_COLS}, .input = in[k]};
        HJ_CHECK(self, cg_hvd_enqueue_allgather(self->core, &t, &req[k]) ==
                           CG_OK,
                 "enqueue %s: %s", names[k], cg_last_error());
    }
    if (c->allreduce) {
        cg_hvd_tensor_t ts = {.name = "after.gathers", .dtype = CG_DTYPE_F32,
                              .ndim = 1, .shape = {1}, .input = &w,
                              .output = &w};
        HJ_CHECK(self, cg_hvd_enqueue_allreduce(self->core, &ts, CG_OP_SUM, 1,
                                                1, &warm) == CG_OK,
                 "enqueue after.gathers: %s", cg_last_error());
    }
    for (int k = 0; k < c->nt; k++) {
        if (gt_check(self, c, k, req[k]) != 0)
            return 1;
        cg_hvd_release(req[k]);
        free(in[k]);
    }
    if (c->allreduce) {
        HJ_CHECK(self, cg_hvd_wait(warm) == CG_OK, "after.gathers: %s",
                 cg_hvd_error(warm));
        cg_hvd_release(warm);
        HJ_CHECK(self, w == (float)(self->size * self->size),
                 "after.gathers is %g, want %d", w, self->size * self->size);
    }
    return 0;
}

/* Runs the case; every rank must pass and count the same collectives. */
static hj_rank_t *gt_run(int size, const char *const *env, gt_case_t *c)
{
    hj_rank_t *rep = hj_run(size, env, body_gather, c);
    hj_assert_passed(rep, size);
    for (int r = 0; r < size; r++) {
        cr_assert_eq(rep[r].stats.allgather_tensors, (uint64_t)c->nt,
                     "rank %d: %llu tensors gathered", r,
                     (unsigned long long)rep[r].stats.allgather_tensors);
        cr_assert_eq(rep[r].stats.allgather_calls, rep[0].stats.allgather_calls,
                     "rank %d: %llu calls, rank 0 %llu", r,
                     (unsigned long long)rep[r].stats.allgather_calls,
                     (unsigned long long)rep[0].stats.allgather_calls);
    }
    return rep;
}

Test(hvd_gather, ragged_allgathers_of_two_dtypes_fuse_into_two_calls,
     .timeout = 60)
{
    const char *env[] = {"HOROVOD_CYCLE_TIME=300", NULL};
    gt_case_t c = {50, 1, -1, 0};
    hj_rank_t *rep = gt_run(3, env, &c);
    cr_assert(rep[0].stats.allgather_calls >= 2 &&
                  rep[0].stats.allgather_calls <= 3,
              "50 allgathers of two dtypes in %llu calls",
              (unsigned long long)rep[0].stats.allgather_calls);
    hj_free(rep, 3);
}

Test(hvd_gather, allgathers_fuse_beside_an_allreduce_of_the_same_cycle,
     .timeout = 60)
{
    const char *env[] = {"HOROVOD_CYCLE_TIME=300", NULL};
    gt_case_t c = {8, 0, -1, 1};
    hj_rank_t *rep = gt_run(2, env, &c);
    cr_assert_eq(rep[0].stats.allgather_calls, 1, "%llu calls",
                 (unsigned long long)rep[0].stats.allgather_calls);
    hj_free(rep, 2);
}

Test(hvd_gather, fusion_off_gathers_each_tensor_alone, .timeout = 60)
{
    const char *env[] = {"HOROVOD_CYCLE_TIME=300",
                         "HOROVOD_FUSION_THRESHOLD=0", NULL};
    gt_case_t c = {50, 1, -1, 0};
    hj_rank_t *rep = gt_run(3, env, &c);
    cr_assert_eq(rep[0].stats.allgather_calls, 50, "%llu calls",
                 (unsigned long long)rep[0].stats.allgather_calls);
    hj_free(rep, 3);
}

Test(hvd_gather, tensor_over_the_threshold_runs_alone_between_groups,
     .timeout = 60)
{
    /* 10 small, one of ~960 KB gathered, 10 small; threshold 64 KiB. */
    const char *env[] = {"HOROVOD_CYCLE_TIME=300",
                         "CG_FUSION_THRESHOLD=64KiB", NULL};
    gt_case_t c = {21, 0, 10, 0};
    hj_rank_t *rep = gt_run(3, env, &c);
    cr_assert_eq(rep[0].stats.allgather_calls, 3, "%llu calls, want 2 fused "
                 "groups and the large tensor alone",
                 (unsigned long long)rep[0].stats.allgather_calls);
    hj_free(rep, 3);
}

Test(hvd_gather, injected_allocation_faults_are_retried, .timeout = 60)
{
    const char *env[] = {"HOROVOD_CYCLE_TIME=300", "CG_FAULT_ALLOC=2", NULL};
    gt_case_t c = {21, 1, 4, 0};
    hj_rank_t *rep = gt_run(2, env, &c);
    cr_assert_geq(rep[0].stats.allgather_calls, 2, "%llu calls",
                  (unsigned long long)rep[0].stats.allgather_calls);
    hj_free(rep, 2);
}

Test(hvd_gather, timeline_shows_one_span_per_fused_group, .timeout = 60)
{
    char path[128], tl[160], cmd[512];
    snprintf(path, sizeof(path), "/tmp/cg_gather_tl_%d.json", (int)getpid());
    snprintf(tl, sizeof(tl), "HOROVOD_TIMELINE=%s", path);
    const char *env[] = {"HOROVOD_CYCLE_TIME=300", tl, NULL};
    gt_case_t c = {20, 1, -1, 0}; /* f32 and i64: two groups */
    hj_rank_t *rep = gt_run(2, env, &c);
    cr_assert_eq(rep[0].stats.allgather_calls, 2, "%llu calls",
                 (unsigned long long)rep[0].stats.allgather_calls);
    hj_free(rep, 2);
    snprintf(cmd, sizeof(cmd), "/usr/bin/python3 %s %s 20 gath. 2 >&2",
             CG_GATHER_TL_CHECK, path);
    int rc = system(cmd);
    unlink(path);
    cr_assert_eq(rc, 0, "gather_timeline_check.py failed (status %d)", rc);
}

/* Rank 0 gives 16 rows of 1 TiB (never read: the 16 TiB result cannot be
 * allocated first): every rank fails it naming the tensor and the sizes
 * instead of waiting for the others (under ASan, allocator_may_return_null
 * comes from ctest). */
static int body_no_memory(hj_rank_t *self)
{
    uint8_t never_read[8] = {0};
    cg_hvd_req_h req;
    cg_hvd_tensor_t t = {.name = "gath.nomem", .dtype = CG_DTYPE_U8,
                         .ndim = 3, .shape = {self->rank == 0 ? 16 : 0,
                                              1 << 20, 1 << 20},
                         .input = never_read};
    cg_status_t st;

    HJ_CHECK(self, cg_hvd_enqueue_allgather(self->core, &t, &req) == CG_OK,
             "enqueue: %s", cg_last_error());
    st = cg_hvd_wait(req);
    snprintf(self->msg, sizeof(self->msg), "%s", cg_hvd_error(req));
    HJ_CHECK(self, st == CG_ERR_NO_MEMORY, "status %s: %s",
             cg_status_name(st), cg_hvd_error(req));
    cg_hvd_release(req);
    return 0;
}

Test(hvd_gather, result_that_cannot_be_allocated_fails_every_rank,
     .timeout = 60)
{
    hj_rank_t *rep = hj_run(3, NULL, body_no_memory, NULL);
    hj_assert_passed(rep, 3);
    hj_assert_msgs(rep, 3, "allgather of tensor 'gath.nomem': no memory for "
                           "the 16 x 1099511627776-byte result");
    hj_free(rep, 3);
}

/* Rows of 2^62 x 2^62 f32: the result size overflows; every rank fails
 * that tensor alone, without a collective, and the core goes on. */
static int body_overflow(hj_rank_t *self)
{
    float row[GT_COLS] = {1, 2, 3, (float)self->rank};
    cg_hvd_req_h bad, good;
    cg_hvd_tensor_t tb = {.name = "gath.huge", .dtype = CG_DTYPE_F32,
                          .ndim = 3, .shape = {1, 1ll << 62, 1ll << 62},
                          .input = row};
    cg_hvd_tensor_t tg = {.name = "gath.next", .dtype = CG_DTYPE_F32,
                          .ndim = 2, .shape = {1, GT_COLS}, .input = row};
    const void *data;
    int64_t dim0;

    HJ_CHECK(self, cg_hvd_enqueue_allgather(self->core, &tb, &bad) == CG_OK,
             "enqueue: %s", cg_last_error());
    HJ_CHECK(self, cg_hvd_wait(bad) == CG_ERR_INVALID_PARAM, "status: %s",
             cg_hvd_error(bad));
    snprintf(self->msg, sizeof(self->msg), "%s", cg_hvd_error(bad));
    cg_hvd_release(bad);
    HJ_CHECK(self, cg_hvd_enqueue_allgather(self->core, &tg, &good) == CG_OK &&
                       cg_hvd_wait(good) == CG_OK &&
                       cg_hvd_allgather_result(good, &data, &dim0) == CG_OK,
             "the next allgather: %s", cg_hvd_error(good));
    HJ_CHECK(self, dim0 == self->size &&
                       ((const float *)data)[GT_COLS * 2 - 1] == 1.0f,
             "the next allgather: %lld rows", (long long)dim0);
    cg_hvd_release(good);
    return 0;
}

Test(hvd_gather, result_larger_than_the_address_space_fails_alone,
     .timeout = 60)
{
    hj_rank_t *rep = hj_run(2, NULL, body_overflow, NULL);
    hj_assert_passed(rep, 2);
    hj_assert_msgs(rep, 2, "allgather of tensor 'gath.huge': its result (the "
                           "first dimensions of 2 ranks, rows of "
                           "[4611686018427387904, 4611686018427387904] f32) "
                           "is larger than the address space");
    hj_free(rep, 2);
}

/* Only rank 1 cannot allocate (every buffer allocation fails there: its
 * first collective, the negotiation, cannot get a ring chunk): it fails
 * saying which buffer, and the other ranks, already waiting on it, fail at
 * once naming it instead of waiting CG_TIMEOUT. */
static int body_one_rank_no_memory(hj_rank_t *self)
{
    float row[GT_COLS] = {1, 2, 3, (float)self->rank};
    cg_hvd_tensor_t t = {.name = "gath.r1nomem", .dtype = CG_DTYPE_F32,
                         .ndim = 2, .shape = {1, GT_COLS}, .input = row};
    struct timespec t0, t1;
    cg_hvd_req_h req;
    cg_status_t st;
    char msg[512];

    clock_gettime(CLOCK_MONOTONIC, &t0);
    /* The core may have stopped before the enqueue (its first cycle runs
     * at create): then the enqueue fails with the same message. */
    st = hj_settle(cg_hvd_enqueue_allgather(self->core, &t, &req), &req, msg,
                   sizeof(msg));
    clock_gettime(CLOCK_MONOTONIC, &t1);
    HJ_CHECK(self, st != CG_OK, "rank %d: the allgather succeeded",
             self->rank);
    HJ_CHECK(self, t1.tv_sec - t0.tv_sec < 4, "failed after %ld s (CG_TIMEOUT "
             "is 10 s): %s", (long)(t1.tv_sec - t0.tv_sec), msg);
    snprintf(self->msg, sizeof(self->msg), "%s", msg);
    return 0;
}

Test(hvd_gather, one_rank_without_memory_fails_every_rank_at_once,
     .timeout = 60)
{
    const char *env[] = {"@1:CG_FAULT_ALLOC=1", NULL};
    hj_rank_t *rep = hj_run(3, env, body_one_rank_no_memory, NULL);
    hj_assert_passed(rep, 3);
    cr_assert(strstr(rep[1].msg, "needed") != NULL, "rank 1: %s",
              rep[1].msg);
    for (int r = 0; r < 3; r += 2)
        cr_assert(strstr(rep[r].msg, "rank 1") != NULL, "rank %d: %s", r,
                  rep[r].msg);
    hj_free(rep, 3);
}
