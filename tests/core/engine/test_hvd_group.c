/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Grouped operations in the Horovod shim's core (core/engine/hvd_group.c)
 * across forked ranks, 2 and 3 of them: grouped allreduce, allgather and
 * reducescatter of every reducible dtype (i32, i64, f16, f32, f64, bf16)
 * against a reference, members of one dtype fused into one collective,
 * every member done once one is, a group held whole while one rank is
 * late (other work going on), a member that mismatches failing the whole
 * group on every rank with training going on, a group shaped differently
 * on another rank failing, and refusal at enqueue leaving nothing behind.
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tests/core/util/test_hvd_util.h"

#define GT_N 7 /* one member per dtype */
#define GT_STEPS 3

static const cg_dtype_t gt_dts[GT_N] = {CG_DTYPE_I32, CG_DTYPE_I64,
                                        CG_DTYPE_F16, CG_DTYPE_F32,
                                        CG_DTYPE_F64, CG_DTYPE_BF16,
                                        CG_DTYPE_I16};

/* f16 / bf16 bits of small integers (exact in both). */
static uint16_t gt_f16(int v)
{
    float f = (float)v;
    uint32_t b;
    int e;
    uint32_t m, s = v < 0 ? 0x8000u : 0;

    if (v == 0)
        return 0;
    memcpy(&b, &f, 4);
    e = (int)((b >> 23) & 0xff) - 127 + 15;
    m = (b >> 13) & 0x3ff;
    return (uint16_t)(s | (uint32_t)e << 10 | m);
}

static double gt_from_f16(uint16_t h)
{
    int e = (h >> 10) & 0x1f;
    double m = (double)(h & 0x3ff) / 1024.0;

    if (e == 0 && (h & 0x3ff) == 0)
        return (h & 0x8000) ? -0.0 : 0.0;
    double v = (1.0 + m) * (double)(1 << e) / (double)(1 << 15);
    return (h & 0x8000) ? -v : v;
}

static void gt_put(void *buf, cg_dtype_t dt, int64_t i, int v)
{
    float f = (float)v;
    uint32_t b;

    switch (dt) {
    case CG_DTYPE_I32: ((int32_t *)buf)[i] = v; break;
    case CG_DTYPE_I64: ((int64_t *)buf)[i] = v; break;
    case CG_DTYPE_I16: ((int16_t *)buf)[i] = (int16_t)v; break;
    case CG_DTYPE_F16: ((uint16_t *)buf)[i] = gt_f16(v); break;
    case CG_DTYPE_F32: ((float *)buf)[i] = f; break;
    case CG_DTYPE_F64: ((double *)buf)[i] = v; break;
    default:
        memcpy(&b, &f, 4);
        ((uint16_t *)buf)[i] = (uint16_t)(b >> 16);
    }
}

static double gt_get(const void *buf, cg_dtype_t dt, int64_t i)
{
    uint32_t b;
    float f;

    switch (dt) {
    case CG_DTYPE_I32: return ((const int32_t *)buf)[i];
    case CG_DTYPE_I64: return (double)((const int64_t *)buf)[i];
    case CG_DTYPE_I16: return ((const int16_t *)buf)[i];
    case CG_DTYPE_F16: return gt_from_f16(((const uint16_t *)buf)[i]);
    case CG_DTYPE_F32: return ((const float *)buf)[i];
    case CG_DTYPE_F64: return ((const double *)buf)[i];
    default:
        b = (uint32_t)((const uint16_t *)buf)[i] << 16;
        memcpy(&f, &b, 4);
        return f;
    }
}

/* Rank r's element i of member k at step s: a small integer. */
static int gt_value(int r, int k, int s, int64_t i)
{
    return (r + 1) * 3 + k - s + (int)(i % 7) - 10;
}

/* Member k's shape: 1-3 dimensions, first dimension `d0`. */
static int gt_shape(int k, int64_t d0, int64_t *shape)
{
    int nd = 1 + k % 3;

    shape[0] = d0;
    shape[1] = 3;
    shape[2] = 2;
    return nd;
}

static int64_t gt_count(int nd, const int64_t *shape)
{
    int64_t c = 1;

    for (int d = 0; d < nd; d++)
        c *= shape[d];
    return c;
}

/* Every member's request is done once member 0 is (all complete in one
 * move). */
static int gt_all_done(hj_rank_t *self, cg_hvd_req_h *req, int n)
{
    HJ_CHECK(self, cg_hvd_wait(req[0]) == CG_OK, "member 0: %s",
             cg_hvd_error(req[0]));
    for (int k = 1; k < n; k++)
        HJ_CHECK(self, cg_hvd_poll(req[k]), "member %d not done when "
                 "member 0 is", k);
    for (int k = 0; k < n; k++)
        HJ_CHECK(self, cg_hvd_wait(req[k]) == CG_OK, "member %d: %s", k,
                 cg_hvd_error(req[k]));
    return 0;
}

static int body_allreduce(hj_rank_t *self)
{
    void *in[GT_N], *out[GT_N];
    cg_hvd_tensor_t ts[GT_N];
    cg_hvd_req_h req[GT_N];
    char names[GT_N][32];

    for (int s = 0; s < GT_STEPS; s++) {
        for (int k = 0; k < GT_N; k++) {
            cg_hvd_tensor_t *t = &ts[k];
            memset(t, 0, sizeof(*t));
            snprintf(names[k], sizeof(names[k]), "g.ar.%d", k);
            t->name = names[k];
            t->dtype = gt_dts[k];
            t->ndim = gt_shape(k, 5 + k, t->shape);
            int64_t c = gt_count(t->ndim, t->shape);
            in[k] = malloc((size_t)c * 8);
            out[k] = (k & 1) ? in[k] : malloc((size_t)c * 8);
            for (int64_t i = 0; i < c; i++)
                gt_put(in[k], gt_dts[k], i, gt_value(self->rank, k, s, i));
            t->input = in[k];
            t->output = out[k];
        }
        HJ_CHECK(self, cg_hvd_enqueue_grouped_allreduce(
                           self->core, ts, GT_N, CG_OP_SUM, 1.0, 1.0, req) ==
                           CG_OK,
                 "enqueue: %s", cg_last_error());
        if (gt_all_done(self, req, GT_N) != 0)
            return 1;
        for (int k = 0; k < GT_N; k++) {
            int64_t c = gt_count(ts[k].ndim, ts[k].shape);
            for (int64_t i = 0; i < c; i++) {
                double want = 0;
                for (int r = 0; r < self->size; r++)
                    want += gt_value(r, k, s, i);
                HJ_CHECK(self, gt_get(out[k], gt_dts[k], i) == want,
                         "step %d member %d (%s) element %lld: %g, want %g",
                         s, k, cg_dtype_name(gt_dts[k]), (long long)i,
                         gt_get(out[k], gt_dts[k], i), want);
            }
            cg_hvd_release(req[k]);
            if (out[k] != in[k])
                free(out[k]);
            free(in[k]);
        }
    }
    return 0;
}

Test(hvd_group, allreduce_every_dtype_against_reference, .timeout = 60)
{
    for (int size = 2; size <= 3; size++) {
        hj_rank_t *rep = hj_run(size, NULL, body_allreduce, NULL);

        hj_assert_passed(rep, size);
        for (int r = 0; r < size; r++)
            cr_assert_eq(rep[r].stats.grouped_calls, GT_STEPS,
                         "rank %d: %llu groups", r,
                         (unsigned long long)rep[r].stats.grouped_calls);
        hj_free(rep, size);
    }
}

/* Allgather (first dimension k + rank + 1: ragged) and reducescatter
 * (first dimension 7: uneven over the ranks) of every dtype. */
static int body_gather_scatter(hj_rank_t *self)
{
    void *in[GT_N], *ag_in[GT_N], *out[GT_N];
    cg_hvd_tensor_t rs[GT_N], ag[GT_N];
    cg_hvd_req_h rq[GT_N], aq[GT_N];
    char rn[GT_N][32], an[GT_N][32];

    for (int k = 0; k < GT_N; k++) {
        memset(&rs[k], 0, sizeof(rs[k]));
        memset(&ag[k], 0, sizeof(ag[k]));
        snprintf(rn[k], sizeof(rn[k]), "g.rs.%d", k);
        snprintf(an[k], sizeof(an[k]), "g.ag.%d", k);
        rs[k].name = rn[k];
        ag[k].name = an[k];
        rs[k].dtype = ag[k].dtype = gt_dts[k];
        rs[k].ndim = gt_shape(k, 7, rs[k].shape);
        ag[k].ndim = gt_shape(k, k + self->rank + 1, ag[k].shape);
        int64_t c = gt_count(rs[k].ndim, rs[k].shape);
        int64_t ca = gt_count(ag[k].ndim, ag[k].shape);
        in[k] = malloc((size_t)c * 8);
        out[k] = malloc((size_t)c * 8);
        ag_in[k] = malloc((size_t)ca * 8);
        for (int64_t i = 0; i < c; i++)
            gt_put(in[k], gt_dts[k], i, gt_value(self->rank, k, 0, i));
        for (int64_t i = 0; i < ca; i++)
            gt_put(ag_in[k], gt_dts[k], i, gt_value(self->rank, k, 1, i));
        rs[k].input = in[k];
        rs[k].output = out[k];
        ag[k].input = ag_in[k];
    }
    HJ_CHECK(self, cg_hvd_enqueue_grouped_reducescatter(
                       self->core, rs, GT_N, CG_OP_SUM, 1.0, 1.0, rq) ==
                       CG_OK,
             "reducescatter: %s", cg_last_error());
    HJ_CHECK(self, cg_hvd_enqueue_grouped_allgather(self->core, ag, GT_N,
                                                    aq) == CG_OK,
             "allgather: %s", cg_last_error());
    if (gt_all_done(self, rq, GT_N) != 0 || gt_all_done(self, aq, GT_N) != 0)
        return 1;
    for (int k = 0; k < GT_N; k++) {
        int64_t start, rows, per = gt_count(rs[k].ndim, rs[k].shape) / 7;
        const void *data;
        int64_t dim0, at = 0;
        cg_hvd_reducescatter_rows(7, self->size, self->rank, &start, &rows);
        for (int64_t i = 0; i < rows * per; i++) {
            double want = 0;
            for (int r = 0; r < self->size; r++)
                want += gt_value(r, k, 0, start * per + i);
            HJ_CHECK(self, gt_get(out[k], gt_dts[k], i) == want,
                     "reducescatter member %d element %lld: %g, want %g", k,
                     (long long)i, gt_get(out[k], gt_dts[k], i), want);
        }
        HJ_CHECK(self, cg_hvd_allgather_result(aq[k], &data, &dim0) == CG_OK,
                 "allgather result %d: %s", k, cg_last_error());
        per = gt_count(ag[k].ndim, ag[k].shape) / ag[k].shape[0];
        for (int r = 0; r < self->size; r++) {
            for (int64_t i = 0; i < (k + r + 1) * per; i++, at++)
                HJ_CHECK(self, gt_get(data, gt_dts[k], at) ==
                                   gt_value(r, k, 1, i),
                         "allgather member %d rank %d element %lld", k, r,
                         (long long)i);
        }
        HJ_CHECK(self, at == dim0 * per, "allgather member %d: %lld rows",
                 k, (long long)dim0);
        cg_hvd_release(rq[k]);
        cg_hvd_release(aq[k]);
        free(in[k]);
        free(out[k]);
        free(ag_in[k]);
    }
    return 0;
}

Test(hvd_group, allgather_and_reducescatter_every_dtype, .timeout = 60)
{
    for (int size = 2; size <= 3; size++) {
        hj_rank_t *rep = hj_run(size, NULL, body_gather_scatter, NULL);

        hj_assert_passed(rep, size);
        hj_free(rep, size);
    }
}

static double gt_now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Rank 1 enqueues the group 0.6 s late; a tensor alone enqueued by both
 * at once completes meanwhile, but no member of the group does on rank 0
 * until rank 1 has it; then all 8 complete together, fused in one call. */
static int body_late(hj_rank_t *self)
{
    float x[8][4], solo = 1;
    cg_hvd_tensor_t ts[8];
    cg_hvd_req_h req[8], sreq;
    char names[8][16];
    cg_hvd_stats_t before, after;
    cg_hvd_tensor_t st = {.name = "g.solo", .dtype = CG_DTYPE_F32, .ndim = 0,
                          .input = &solo, .output = &solo};
    double t0;

    for (int k = 0; k < 8; k++) {
        snprintf(names[k], sizeof(names[k]), "g.late.%d", k);
        for (int i = 0; i < 4; i++)
            x[k][i] = (float)(self->rank + k + i);
        ts[k] = (cg_hvd_tensor_t){.name = names[k], .dtype = CG_DTYPE_F32,
                                  .ndim = 1, .shape = {4}, .input = x[k],
                                  .output = x[k]};
    }
    cg_hvd_core_stats(self->core, &before);
    t0 = gt_now();
    if (self->rank != 1)
        HJ_CHECK(self, cg_hvd_enqueue_grouped_allreduce(
                           self->core, ts, 8, CG_OP_SUM, 1, 1, req) == CG_OK,
                 "enqueue: %s", cg_last_error());
    HJ_CHECK(self, cg_hvd_enqueue_allreduce(self->core, &st, CG_OP_SUM, 1, 1,
                                            &sreq) == CG_OK &&
                       cg_hvd_wait(sreq) == CG_OK,
             "solo: %s", cg_last_error());
    cg_hvd_release(sreq);
    HJ_CHECK(self, solo == (float)self->size, "solo is %g", solo);
    if (self->rank == 1) {
        while (gt_now() - t0 < 0.6)
            nanosleep(&(struct timespec){0, 10000000}, NULL);
        HJ_CHECK(self, cg_hvd_enqueue_grouped_allreduce(
                           self->core, ts, 8, CG_OP_SUM, 1, 1, req) == CG_OK,
                 "enqueue: %s", cg_last_error());
    } else {
        while (gt_now() - t0 < 0.4) {
            for (int k = 0; k < 8; k++)
                HJ_CHECK(self, !cg_hvd_poll(req[k]), "member %d done after "
                         "%.3f s, before rank 1 enqueued the group", k,
                         gt_now() - t0);
            nanosleep(&(struct timespec){0, 5000000}, NULL);
        }
    }
    if (gt_all_done(self, req, 8) != 0)
        return 1;
    /* Rank 1 enqueued 0.6 s after its own t0; the ranks' t0 differ by
     * how the solo allreduce ended on each (a few ms, more under load),
     * so 0.5 s here. */
    HJ_CHECK(self, self->rank == 1 || gt_now() - t0 >= 0.5, "done after "
             "%.3f s", gt_now() - t0);
    for (int k = 0; k < 8; k++) {
        for (int i = 0; i < 4; i++) {
            float want = 0;
            for (int r = 0; r < self->size; r++)
                want += (float)(r + k + i);
            HJ_CHECK(self, x[k][i] == want, "member %d: %g, want %g", k,
                     x[k][i], want);
        }
        cg_hvd_release(req[k]);
    }
    cg_hvd_core_stats(self->core, &after);
    HJ_CHECK(self, after.allreduce_calls - before.allreduce_calls == 2 &&
                       after.max_fused_tensors >= 8,
             "%llu calls (solo + the group fused), at most %llu fused",
             (unsigned long long)(after.allreduce_calls -
                                  before.allreduce_calls),
             (unsigned long long)after.max_fused_tensors);
    return 0;
}

Test(hvd_group, late_rank_holds_the_group_whole_and_it_fuses, .timeout = 60)
{
    for (int size = 2; size <= 3; size++) {
        hj_rank_t *rep = hj_run(size, NULL, body_late, NULL);

        hj_assert_passed(rep, size);
        hj_free(rep, size);
    }
}

/* Rank 1's member 2 differs (`what`: dtype, or the group's order): every
 * member fails on every rank with the text, then training goes on. */
static int body_mismatch(hj_rank_t *self)
{
    const char *what = self->arg;
    float x[4][3], y[3] = {1, 2, 3};
    int32_t xi[3] = {0};
    cg_hvd_tensor_t ts[4];
    cg_hvd_req_h req[4];
    char names[4][16], msg[512];
    bool swap = self->rank == 1 && strcmp(what, "order") == 0;

    for (int k = 0; k < 4; k++) {
        snprintf(names[k], sizeof(names[k]), "g.bad.%d", k);
        ts[swap ? 3 - k : k] = (cg_hvd_tensor_t){
            .name = names[k], .dtype = CG_DTYPE_F32, .ndim = 1,
            .shape = {3}, .input = x[k], .output = x[k]};
    }
    if (self->rank == 1 && strcmp(what, "dtype") == 0) {
        ts[2].dtype = CG_DTYPE_I32;
        ts[2].input = ts[2].output = xi;
    }
    HJ_CHECK(self, cg_hvd_enqueue_grouped_allreduce(self->core, ts, 4,
                                                    CG_OP_SUM, 1, 1, req) ==
                       CG_OK,
             "enqueue: %s", cg_last_error());
    for (int k = 0; k < 4; k++) {
        HJ_CHECK(self, cg_hvd_wait(req[k]) == CG_ERR_MISMATCH,
                 "member %d: %s", k, cg_hvd_error(req[k]));
        HJ_CHECK(self, k == 0 || strcmp(cg_hvd_error(req[k]),
                                        cg_hvd_error(req[0])) == 0,
                 "member %d says '%s', member 0 '%s'", k,
                 cg_hvd_error(req[k]), cg_hvd_error(req[0]));
    }
    snprintf(msg, sizeof(msg), "%s", cg_hvd_error(req[0]));
    for (int k = 0; k < 4; k++)
        cg_hvd_release(req[k]);
    cg_hvd_tensor_t ok = {.name = "g.after", .dtype = CG_DTYPE_F32,
                          .ndim = 1, .shape = {3}, .input = y, .output = y};
    HJ_CHECK(self, cg_hvd_enqueue_grouped_allreduce(self->core, &ok, 1,
                                                    CG_OP_SUM, 1, 1, req) ==
                           CG_OK &&
                       cg_hvd_wait(req[0]) == CG_OK,
             "after: %s", cg_last_error());
    cg_hvd_release(req[0]);
    HJ_CHECK(self, y[2] == 3.0f * (float)self->size, "after: %g", y[2]);
    snprintf(self->msg, sizeof(self->msg), "%s", msg); /* checked after */
    return 0;
}

static void gt_mismatch(int size, const char *what, const char *text)
{
    hj_rank_t *rep = hj_run(size, NULL, body_mismatch, (void *)what);

    hj_assert_passed(rep, size);
    hj_assert_msgs(rep, size, text);
    hj_free(rep, size);
}

Test(hvd_group, mismatched_member_fails_the_group_everywhere, .timeout = 60)
{
    gt_mismatch(2, "dtype", "tensor 'g.bad.2': mismatched dtype");
    gt_mismatch(3, "dtype", "mismatched dtype");
}

Test(hvd_group, group_in_another_order_fails_everywhere, .timeout = 60)
{
    gt_mismatch(2, "order", "mismatched group");
    gt_mismatch(3, "order", "mismatched group");
}

/* A bad member refuses the whole group: no request, no name left in
 * flight (the same names go through next), duplicate names refused. */
static int body_refused(hj_rank_t *self)
{
    float x[2][4] = {{1, 2, 3, 4}, {5, 6, 7, 8}}, y[2][4], s = 1;
    cg_hvd_req_h req[2] = {NULL, NULL};
    cg_hvd_tensor_t ts[2] = {
        {.name = "g.ref.0", .dtype = CG_DTYPE_F32, .ndim = 1, .shape = {4},
         .input = x[0], .output = y[0]},
        {.name = "g.ref.1", .dtype = CG_DTYPE_F32, .ndim = 0, .input = &s,
         .output = &s}};

    HJ_CHECK(self, cg_hvd_enqueue_grouped_reducescatter(
                       self->core, ts, 2, CG_OP_SUM, 1, 1, req) ==
                       CG_ERR_INVALID_PARAM &&
                   strstr(cg_last_error(), "scalar") != NULL &&
                   req[0] == NULL,
             "scalar member: %s", cg_last_error());
    ts[1] = ts[0];
    ts[1].input = x[1];
    ts[1].output = y[1];
    HJ_CHECK(self, cg_hvd_enqueue_grouped_reducescatter(
                       self->core, ts, 2, CG_OP_SUM, 1, 1, req) ==
                       CG_ERR_INVALID_PARAM &&
                   strstr(cg_last_error(), "member 1 of 2") != NULL,
             "duplicate name: %s", cg_last_error());
    HJ_CHECK(self, cg_hvd_enqueue_grouped_allreduce(self->core, ts, 0,
                                                    CG_OP_SUM, 1, 1, req) ==
                   CG_ERR_INVALID_PARAM,
             "empty group: %s", cg_last_error());
    ts[1].name = "g.ref.1";
    HJ_CHECK(self, cg_hvd_enqueue_grouped_reducescatter(
                       self->core, ts, 2, CG_OP_SUM, 1, 1, req) == CG_OK,
             "the good group: %s", cg_last_error());
    for (int k = 0; k < 2; k++) {
        HJ_CHECK(self, cg_hvd_wait(req[k]) == CG_OK, "member %d: %s", k,
                 cg_hvd_error(req[k]));
        cg_hvd_release(req[k]);
    }
    return 0;
}

Test(hvd_group, refusal_at_enqueue_is_all_or_nothing, .timeout = 60)
{
    hj_rank_t *rep = hj_run(2, NULL, body_refused, NULL);

    hj_assert_passed(rep, 2);
    hj_free(rep, 2);
}
