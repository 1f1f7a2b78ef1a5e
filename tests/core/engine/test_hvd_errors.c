/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The Horovod shim core's failure rules across forked ranks: mismatches
 * fail the op on every rank and training continues, duplicate names are
 * coalesced or rejected by CG_DUPLICATE_POLICY, a non-leaf broadcast is
 * rejected at enqueue, a shutdown fails pending requests without a hang,
 * and allocation faults with a tiny fusion buffer give the same bits.
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "tests/core/util/test_hvd_util.h"

static cg_hvd_tensor_t ten(const char *name, cg_dtype_t dt, int64_t n,
                           const void *in, void *out)
{
    cg_hvd_tensor_t t = {.name = name, .dtype = dt, .ndim = 1,
                         .shape = {n}, .input = in, .output = out};
    return t;
}

static cg_status_t allreduce_wait(hj_rank_t *self, cg_hvd_tensor_t *t,
                                  char *err, size_t len)
{
    cg_hvd_req_h req;
    cg_status_t st = cg_hvd_enqueue_allreduce(self->core, t, CG_OP_SUM, 1.0,
                                              1.0, &req);
    if (st != CG_OK) {
        snprintf(err, len, "enqueue: %s", cg_last_error());
        return st;
    }
    st = cg_hvd_wait(req);
    snprintf(err, len, "%s", cg_hvd_error(req));
    cg_hvd_release(req);
    return st;
}

/* Rank 1 sends 5 elements where rank 0 sends 4, then f64 against f32;
 * both fail on both ranks; a matching op afterwards succeeds. */
static int body_mismatch(hj_rank_t *self)
{
    float a[5] = {1, 2, 3, 4, 5}, f = 1;
    double d = 1;
    char err[512];

    cg_hvd_tensor_t t = ten("fc.weight", CG_DTYPE_F32, 4 + self->rank, a, a);
    HJ_CHECK(self, allreduce_wait(self, &t, err, sizeof(err)) ==
                       CG_ERR_MISMATCH, "shape mismatch not failed: %s", err);
    HJ_CHECK(self, strstr(err, "fc.weight") && strstr(err, "rank 0 has [4]") &&
                       strstr(err, "rank 1 has [5]"), "message: %s", err);
    t = self->rank ? ten("fc.bias", CG_DTYPE_F64, 1, &d, &d)
                   : ten("fc.bias", CG_DTYPE_F32, 1, &f, &f);
    HJ_CHECK(self, allreduce_wait(self, &t, err, sizeof(err)) ==
                       CG_ERR_MISMATCH, "dtype mismatch not failed: %s", err);
    HJ_CHECK(self, strstr(err, "f32") && strstr(err, "f64"), "message: %s",
             err);
    t = ten("fc.weight", CG_DTYPE_F32, 4, a, a); /* the name is free again */
    HJ_CHECK(self, allreduce_wait(self, &t, err, sizeof(err)) == CG_OK,
             "training did not continue: %s", err);
    HJ_CHECK(self, a[3] == 8.0f, "a[3] = %g, want 8", a[3]);
    cg_hvd_core_stats(self->core, &self->stats);
    return 0;
}

Test(hvd_errors, mismatch_fails_every_rank_and_training_continues,
     .timeout = 60)
{
    hj_rank_t *rep = hj_run(2, NULL, body_mismatch, NULL);
    hj_assert_passed(rep, 2);
    cr_assert_eq(rep[1].stats.mismatches, 2, "mismatches %llu",
                 (unsigned long long)rep[1].stats.mismatches);
    hj_free(rep, 2);
}

/* The same name, buffer, size and op twice (a hook registered twice). */
static int body_dup(hj_rank_t *self)
{
    int64_t x[16], other[16];
    cg_hvd_req_h r1, r2;

    for (int i = 0; i < 16; i++)
        x[i] = i + 1;
    cg_hvd_tensor_t t = ten("dup.grad", CG_DTYPE_I64, 16, x, x);
    HJ_CHECK(self, cg_hvd_enqueue_allreduce(self->core, &t, CG_OP_SUM, 1, 1,
                                            &r1) == CG_OK, "%s",
             cg_last_error());
    cg_status_t st = cg_hvd_enqueue_allreduce(self->core, &t, CG_OP_SUM, 1,
                                              1, &r2);
    if (*(int *)self->arg == 1) { /* CG_DUPLICATE_POLICY=error */
        HJ_CHECK(self, st == CG_ERR_INVALID_PARAM &&
                           strstr(cg_last_error(), "same name"),
                 "second enqueue: %d %s", st, cg_last_error());
    } else {
        HJ_CHECK(self, st == CG_OK, "coalesce: %s", cg_last_error());
        cg_hvd_tensor_t t2 = ten("dup.grad", CG_DTYPE_I64, 16, other, other);
        cg_hvd_req_h r3;
        st = cg_hvd_enqueue_allreduce(self->core, &t2, CG_OP_SUM, 1, 1, &r3);
        HJ_CHECK(self, st == CG_ERR_INVALID_PARAM &&
                           strstr(cg_last_error(), "currently being processed"),
                 "different buffer: %d %s", st, cg_last_error());
        HJ_CHECK(self, cg_hvd_wait(r2) == CG_OK, "%s", cg_hvd_error(r2));
        cg_hvd_release(r2);
    }
    HJ_CHECK(self, cg_hvd_wait(r1) == CG_OK, "%s", cg_hvd_error(r1));
    HJ_CHECK(self, x[5] == 12, "x[5] = %lld, want 12 (reduced once)",
             (long long)x[5]);
    cg_hvd_release(r1);
    cg_hvd_core_stats(self->core, &self->stats);
    return 0;
}

Test(hvd_errors, duplicate_is_coalesced_once, .timeout = 60)
{
    const char *env[] = {"HOROVOD_CYCLE_TIME=50", NULL};
    int policy = 0;
    hj_rank_t *rep = hj_run(2, env, body_dup, &policy);
    hj_assert_passed(rep, 2);
    cr_assert_eq(rep[0].stats.duplicates, 1, "duplicates %llu",
                 (unsigned long long)rep[0].stats.duplicates);
    cr_assert_eq(rep[0].stats.allreduce_tensors, 1, "reduced %llu times",
                 (unsigned long long)rep[0].stats.allreduce_tensors);
    hj_free(rep, 2);
}

Test(hvd_errors, duplicate_policy_error_rejects, .timeout = 60)
{
    const char *env[] = {"HOROVOD_CYCLE_TIME=50", "CG_DUPLICATE_POLICY=error",
                         NULL};
    int policy = 1;
    hj_rank_t *rep = hj_run(2, env, body_dup, &policy);
    hj_assert_passed(rep, 2);
    cr_assert_eq(rep[0].stats.duplicates, 0, "duplicates %llu",
                 (unsigned long long)rep[0].stats.duplicates);
    hj_free(rep, 2);
}

static int body_nonleaf(hj_rank_t *self)
{
    float w[3] = {1, 2, 3};
    cg_hvd_req_h req;
    cg_status_t st;

    cg_hvd_tensor_t t = ten("model.norm.scaled", CG_DTYPE_F32, 3, w, w);
    t.flags = CG_HVD_REQUIRES_GRAD;
    HJ_CHECK(self, cg_hvd_enqueue_broadcast(self->core, &t, 0, &req) ==
                       CG_ERR_INVALID_PARAM, "non-leaf accepted");
    HJ_CHECK(self, strstr(cg_last_error(), "model.norm.scaled") &&
                       strstr(cg_last_error(), ".detach()"),
             "message: %s", cg_last_error());
    t.field_mask = CG_HVD_TENSOR_FIELD_DEVICE; /* a CUDA tensor */
    t.device = 0;
    t.flags = CG_HVD_REQUIRES_GRAD | CG_HVD_IS_LEAF;
    st = cg_hvd_enqueue_broadcast(self->core, &t, 0, &req);
    /* no CUDA built: unsupported; built, but no GPU here: no device */
    HJ_CHECK(self, (st == CG_ERR_UNSUPPORTED || st == CG_ERR_NO_DEVICE) &&
                       strstr(cg_last_error(), "CUDA"),
             "device tensor: %s", cg_last_error());
    t.device = -1; /* host, said explicitly */
    w[0] = (float)(10 + self->rank);
    HJ_CHECK(self, cg_hvd_enqueue_broadcast(self->core, &t, 0, &req) == CG_OK,
             "leaf rejected: %s", cg_last_error());
    HJ_CHECK(self, cg_hvd_wait(req) == CG_OK, "%s", cg_hvd_error(req));
    HJ_CHECK(self, w[0] == 10.0f, "w[0] = %g, want 10", w[0]);
    cg_hvd_release(req);
    return 0;
}

Test(hvd_errors, non_leaf_and_device_tensors_are_rejected_at_enqueue,
     .timeout = 60)
{
    hj_rank_t *rep = hj_run(2, NULL, body_nonleaf, NULL);
    hj_assert_passed(rep, 2);
    hj_free(rep, 2);
}

/* Each rank enqueues a name the other never does; rank 0 shuts down. */
static int body_shutdown(hj_rank_t *self)
{
    float x[4] = {0};
    cg_hvd_req_h req;
    cg_status_t st;

    cg_hvd_tensor_t t = ten(self->rank ? "only.r1" : "only.r0", CG_DTYPE_F32,
                            4, x, x);
    st = cg_hvd_enqueue_allreduce(self->core, &t, CG_OP_SUM, 1, 1, &req);
    /* Rank 0 may have shut down before rank 1 got here (a loaded host):
     * then rank 1's core has stopped already and refuses the enqueue with
     * the same reason. */
    if (self->rank == 1 && st == CG_ERR_CANCELED) {
        HJ_CHECK(self, strstr(cg_last_error(), "shut down") != NULL,
                 "refused enqueue: %s", cg_last_error());
        return 0;
    }
    HJ_CHECK(self, st == CG_OK, "%s", cg_last_error());
    if (self->rank == 0) {
        cg_hvd_core_destroy(self->core);
        self->destroyed = 1;
    }
    st = cg_hvd_wait(req);
    HJ_CHECK(self, st == CG_ERR_CANCELED, "wait: %s: %s", cg_status_name(st),
             cg_hvd_error(req));
    HJ_CHECK(self, strstr(cg_hvd_error(req), "rank 0") ||
                       strstr(cg_hvd_error(req), "shut down"),
             "message: %s", cg_hvd_error(req));
    cg_hvd_release(req);
    if (self->rank == 1) { /* its core stopped too: enqueue fails at once */
        st = cg_hvd_enqueue_allreduce(self->core, &t, CG_OP_SUM, 1, 1, &req);
        HJ_CHECK(self, st == CG_ERR_CANCELED, "late enqueue: %s",
                 cg_status_name(st));
    }
    return 0;
}

Test(hvd_errors, shutdown_fails_pending_requests_without_a_hang,
     .timeout = 60)
{
    hj_rank_t *rep = hj_run(2, NULL, body_shutdown, NULL);
    hj_assert_passed(rep, 2);
    hj_free(rep, 2);
}

/* Two rounds of 60 tensors of pseudo-random floats and sizes (the faults
 * of the first round shrink the governor's fusion size, so the second
 * round's buffer is smaller); a digest of every result. */
static int body_pressure(hj_rank_t *self)
{
    enum { N = 60 };
    float *buf[N];
    cg_hvd_req_h req[N];
    unsigned seed = 12345u + (unsigned)self->rank;
    uint64_t h = 1469598103934665603ull;

    for (int round = 0; round < 2; round++) {
        for (int k = 0; k < N; k++) {
            size_t n = 1 + (size_t)(k * 977 % 3000);
            char name[32];
            buf[k] = malloc(n * sizeof(float));
            for (size_t i = 0; i < n; i++)
                buf[k][i] = (float)rand_r(&seed) / (float)RAND_MAX - 0.5f;
            snprintf(name, sizeof(name), "p.%d", k);
            cg_hvd_tensor_t t = ten(name, CG_DTYPE_F32, (int64_t)n, buf[k],
                                    buf[k]);
            HJ_CHECK(self, cg_hvd_enqueue_allreduce(
                               self->core, &t, k % 2 ? CG_OP_AVG : CG_OP_SUM,
                               0.5, 3.0, &req[k]) == CG_OK,
                     "%s: %s", name, cg_last_error());
        }
        for (int k = 0; k < N; k++) {
            HJ_CHECK(self, cg_hvd_wait(req[k]) == CG_OK, "p.%d: %s", k,
                     cg_hvd_error(req[k]));
            h = hj_hash(h, buf[k],
                        (1 + (size_t)(k * 977 % 3000)) * sizeof(float));
            cg_hvd_release(req[k]);
            free(buf[k]);
        }
    }
    self->hash = h;
    cg_hvd_core_stats(self->core, &self->stats);
    return 0;
}

/* The same job plain and squeezed (every 2nd buffer allocation fails, a
 * 64 KiB fusion threshold and a 4 KiB floor): the same bits on every rank. */
static void pressure_pair(int size, const char *algo)
{
    const char *squeezed[] = {"CG_FAULT_ALLOC=2", "CG_FUSION_THRESHOLD=64KiB",
                              "CG_FUSION_MIN=4KiB", "HOROVOD_CYCLE_TIME=20",
                              algo, NULL};
    const char *plain[] = {"HOROVOD_CYCLE_TIME=20", algo, NULL};
    hj_rank_t *a = hj_run(size, plain, body_pressure, NULL);
    hj_rank_t *b = hj_run(size, squeezed, body_pressure, NULL);

    hj_assert_passed(a, size);
    hj_assert_passed(b, size);
    cr_log_info("%d ranks %s: plain %llu calls, fusion %llu bytes; squeezed "
                "%llu calls, fusion %llu bytes", size, algo,
                (unsigned long long)a[0].stats.allreduce_calls,
                (unsigned long long)a[0].stats.fusion_bytes,
                (unsigned long long)b[0].stats.allreduce_calls,
                (unsigned long long)b[0].stats.fusion_bytes);
    for (int r = 0; r < size; r++)
        cr_assert_eq(a[r].hash, b[r].hash, "rank %d: digest %llx vs %llx", r,
                     (unsigned long long)a[r].hash,
                     (unsigned long long)b[r].hash);
    cr_assert_lt(b[0].stats.fusion_bytes, 65536, "fusion buffer %llu",
                 (unsigned long long)b[0].stats.fusion_bytes);
    cr_assert_gt(b[0].stats.allreduce_calls, a[0].stats.allreduce_calls,
                 "squeezed run made %llu calls, plain %llu",
                 (unsigned long long)b[0].stats.allreduce_calls,
                 (unsigned long long)a[0].stats.allreduce_calls);
    hj_free(a, size);
    hj_free(b, size);
}

Test(hvd_errors, alloc_faults_and_small_fusion_give_the_same_bits,
     .timeout = 60)
{
    pressure_pair(2, "CG_ALGO=auto");
}

/* More than 2 ranks: the ring's summation order of an element depends on
 * its segment, so the shim lays fused tensors out segment by segment (each
 * cut as if alone) and runs tensors alone on the same segments: the bits
 * do not depend on what was fused with what. */
Test(hvd_errors, three_and_four_ranks_same_bits_with_the_ring,
     .timeout = 120)
{
    pressure_pair(3, "CG_ALGO=auto");
    pressure_pair(4, "CG_ALGO=auto");
}

/* Rank 1's third collective breaks its backend (CG_FAULT_COLLECTIVE, as an
 * MPI or NCCL error would): every rank's third step fails well within
 * CG_TIMEOUT (10 s here), rank 1 naming the fault, the others the peer
 * whose connection closed; no rank hangs. */
static int body_backend_breaks(hj_rank_t *self)
{
    float x[1024];
    struct timespec t0, t1;

    for (int step = 1; step <= 5; step++) {
        cg_hvd_tensor_t t = ten("grad", CG_DTYPE_F32, 1024, x, x);
        cg_hvd_req_h req;
        cg_status_t st;
        char msg[512];
        for (int i = 0; i < 1024; i++)
            x[i] = (float)(self->rank + i);
        clock_gettime(CLOCK_MONOTONIC, &t0);
        st = hj_settle(cg_hvd_enqueue_allreduce(self->core, &t, CG_OP_SUM, 1,
                                                1, &req),
                       &req, msg, sizeof(msg));
        clock_gettime(CLOCK_MONOTONIC, &t1);
        HJ_CHECK(self, (st == CG_OK) == (step < 3), "step %d: %s: %s", step,
                 cg_status_name(st), msg);
        HJ_CHECK(self, t1.tv_sec - t0.tv_sec < 4, "step %d took %ld s: %s",
                 step, (long)(t1.tv_sec - t0.tv_sec), msg);
        if (step == 3) /* the others: a transport or shared-memory peer */
            HJ_CHECK(self, self->rank == 1
                               ? strstr(msg, "CG_FAULT_COLLECTIVE") != NULL
                               : strstr(msg, "from rank") != NULL ||
                                     strstr(msg, "failed its part") != NULL,
                     "step 3: %s", msg);
        if (step == 3 && self->rank == 1) /* alive, silent: only breaking */
            sleep(5);                     /* the group frees the others */
    }
    return 0;
}

Test(hvd_errors, a_broken_backend_on_one_rank_fails_every_rank_at_once,
     .timeout = 60)
{
    const char *env[] = {"@1:CG_FAULT_COLLECTIVE=3", NULL};
    hj_rank_t *rep = hj_run(3, env, body_backend_breaks, NULL);
    hj_assert_passed(rep, 3);
    hj_free(rep, 3);
}
