/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Reducescatter in the Horovod shim's core (core/engine/hvd_rscatter.c,
 * core/coll/coll_rscatter.c) across forked ranks, 2 and 3 of them: first
 * dimensions that do not divide by the rank count (and smaller than it:
 * some ranks get no rows), f32 / i32 / f64, fused into one collective per
 * dtype, alone with fusion off, a tensor over the fusion threshold whose
 * blocks take many ring pieces, Average with prescale and postscale,
 * Horovod's split of the first dimension, and mismatched shapes, dtypes
 * and ops failing on every rank with the core going on. Every element of
 * every output is checked against a reference on every rank.
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "tests/core/util/test_hvd_util.h"

#define RT_MAX 40
#define RT_COLS 3
#define RT_BIG_ROWS 40001 /* 480 KB of f32: several 64 KiB ring pieces */

typedef struct rt_case {
    int nt;          /* tensors */
    int mixed;       /* k % 3: f32, i32, f64; else all f32 */
    int big;         /* index of the large tensor (-1: none) */
    cg_redop_t op;
    double pre, post;
} rt_case_t;

static int64_t rt_rows(const rt_case_t *c, int k)
{
    return k == c->big ? RT_BIG_ROWS : (k * 5) % 8; /* 0..7 rows */
}

static cg_dtype_t rt_dtype(const rt_case_t *c, int k)
{
    static const cg_dtype_t dts[3] = {CG_DTYPE_F32, CG_DTYPE_I32,
                                      CG_DTYPE_F64};
    return c->mixed ? dts[k % 3] : CG_DTYPE_F32;
}

/* Rank r's element i of tensor k: small integers, exact in every dtype
 * after the sums and power-of-two scales used here. */
static int64_t rt_value(int r, int k, int64_t i)
{
    return (r + 1) * 16 + k * 4 + i % 5 - 40;
}

static void rt_put(void *buf, cg_dtype_t dt, int64_t i, double v)
{
    if (dt == CG_DTYPE_F32)
        ((float *)buf)[i] = (float)v;
    else if (dt == CG_DTYPE_I32)
        ((int32_t *)buf)[i] = (int32_t)v;
    else
        ((double *)buf)[i] = v;
}

static double rt_get(const void *buf, cg_dtype_t dt, int64_t i)
{
    if (dt == CG_DTYPE_F32)
        return ((const float *)buf)[i];
    if (dt == CG_DTYPE_I32)
        return ((const int32_t *)buf)[i];
    return ((const double *)buf)[i];
}

/* The reference: post * (sum over ranks of pre * x), / size for Average. */
static double rt_want(const rt_case_t *c, int size, int k, int64_t i)
{
    double s = 0;

    for (int r = 0; r < size; r++)
        s += c->pre * (double)rt_value(r, k, i);
    if (c->op == CG_OP_AVG)
        s /= size;
    return s * c->post;
}

static int rt_check(hj_rank_t *self, const rt_case_t *c, int k,
                    const void *out)
{
    int64_t start, rows;
    cg_dtype_t dt = rt_dtype(c, k);

    cg_hvd_reducescatter_rows(rt_rows(c, k), self->size, self->rank, &start,
                              &rows);
    for (int64_t i = 0; i < rows * RT_COLS; i++) {
        int64_t g = start * RT_COLS + i; /* element of the whole tensor */
        double got = rt_get(out, dt, i), want = rt_want(c, self->size, k, g);
        HJ_CHECK(self, got == want, "tensor %d (%s) element %lld (global "
                 "%lld) is %.17g, want %.17g", k, cg_dtype_name(dt),
                 (long long)i, (long long)g, got, want);
    }
    return 0;
}

/* A warm-up allreduce puts the ranks in step (cycle 300 ms), so the
 * reducescatters enqueued next land in the same cycle. */
static int rt_warm(hj_rank_t *self)
{
    float w = 1;
    cg_hvd_req_h req;
    cg_hvd_tensor_t t = {.name = "warmup", .dtype = CG_DTYPE_F32, .ndim = 1,
                         .shape = {1}, .input = &w, .output = &w};

    HJ_CHECK(self, cg_hvd_enqueue_allreduce(self->core, &t, CG_OP_SUM, 1, 1,
                                            &req) == CG_OK &&
                       cg_hvd_wait(req) == CG_OK,
             "warm-up: %s", cg_last_error());
    cg_hvd_release(req);
    return 0;
}

static int body_rscatter(hj_rank_t *self)
{
    const rt_case_t *c = self->arg;
    static void *in[RT_MAX], *out[RT_MAX];
    cg_hvd_req_h req[RT_MAX];
    char names[RT_MAX][32];

    if (rt_warm(self) != 0)
        return 1;
    for (int k = 0; k < c->nt; k++) {
        int64_t n = rt_rows(c, k) * RT_COLS;
        cg_dtype_t dt = rt_dtype(c, k);
        in[k] = malloc((size_t)(n + 1) * 8);
        out[k] = malloc((size_t)(n + 1) * 8);
        for (int64_t i = 0; i < n; i++)
            rt_put(in[k], dt, i, (double)rt_value(self->rank, k, i));
        snprintf(names[k], sizeof(names[k]), "rs.%02d", k);
        cg_hvd_tensor_t t = {.name = names[k], .dtype = dt, .ndim = 2,
                             .shape = {rt_rows(c, k), RT_COLS},
                             .input = in[k], .output = out[k]};
        HJ_CHECK(self, cg_hvd_enqueue_reducescatter(self->core, &t, c->op,
                                                    c->pre, c->post,
                                                    &req[k]) == CG_OK,
                 "enqueue %s: %s", names[k], cg_last_error());
    }
    for (int k = 0; k < c->nt; k++) {
        HJ_CHECK(self, cg_hvd_wait(req[k]) == CG_OK, "%s: %s", names[k],
                 cg_hvd_error(req[k]));
        if (rt_check(self, c, k, out[k]) != 0)
            return 1;
        cg_hvd_release(req[k]);
        free(in[k]);
        free(out[k]);
    }
    return 0;
}

/* Runs the case; every rank must pass and count the same collectives. */
static hj_rank_t *rt_run(int size, const char *const *env, rt_case_t *c)
{
    hj_rank_t *rep = hj_run(size, env, body_rscatter, c);

    hj_assert_passed(rep, size);
    for (int r = 0; r < size; r++) {
        cr_assert_eq(rep[r].stats.reducescatter_tensors, (uint64_t)c->nt,
                     "rank %d: %llu tensors", r,
                     (unsigned long long)rep[r].stats.reducescatter_tensors);
        cr_assert_eq(rep[r].stats.reducescatter_calls,
                     rep[0].stats.reducescatter_calls,
                     "rank %d: %llu calls, rank 0 %llu", r,
                     (unsigned long long)rep[r].stats.reducescatter_calls,
                     (unsigned long long)rep[0].stats.reducescatter_calls);
    }
    return rep;
}

Test(hvd_rscatter, rows_split_as_horovod)
{
    int64_t s, n;

    /* 7 rows over 3 ranks: 3, 2, 2 (the first 7 % 3 ranks one more). */
    cg_hvd_reducescatter_rows(7, 3, 0, &s, &n);
    cr_assert(s == 0 && n == 3, "rank 0: %lld + %lld", (long long)s,
              (long long)n);
    cg_hvd_reducescatter_rows(7, 3, 1, &s, &n);
    cr_assert(s == 3 && n == 2, "rank 1: %lld + %lld", (long long)s,
              (long long)n);
    cg_hvd_reducescatter_rows(7, 3, 2, &s, &n);
    cr_assert(s == 5 && n == 2, "rank 2: %lld + %lld", (long long)s,
              (long long)n);
    cg_hvd_reducescatter_rows(1, 3, 2, &s, &n);
    cr_assert(s == 1 && n == 0, "1 row, rank 2: %lld + %lld", (long long)s,
              (long long)n);
}

Test(hvd_rscatter, uneven_tensors_of_three_dtypes_fuse_at_3_ranks,
     .timeout = 60)
{
    const char *env[] = {"HOROVOD_CYCLE_TIME=300", NULL};
    rt_case_t c = {30, 1, -1, CG_OP_SUM, 1.0, 1.0};
    hj_rank_t *rep = rt_run(3, env, &c);

    cr_assert(rep[0].stats.reducescatter_calls >= 3 &&
                  rep[0].stats.reducescatter_calls <= 6,
              "30 reducescatters of three dtypes in %llu calls",
              (unsigned long long)rep[0].stats.reducescatter_calls);
    hj_free(rep, 3);
}

Test(hvd_rscatter, uneven_tensors_fuse_at_2_ranks, .timeout = 60)
{
    const char *env[] = {"HOROVOD_CYCLE_TIME=300", NULL};
    rt_case_t c = {20, 0, -1, CG_OP_SUM, 1.0, 1.0};
    hj_rank_t *rep = rt_run(2, env, &c);

    cr_assert(rep[0].stats.reducescatter_calls <= 2, "%llu calls",
              (unsigned long long)rep[0].stats.reducescatter_calls);
    hj_free(rep, 2);
}

Test(hvd_rscatter, fusion_off_runs_each_alone, .timeout = 60)
{
    const char *env[] = {"HOROVOD_CYCLE_TIME=300",
                         "HOROVOD_FUSION_THRESHOLD=0", NULL};
    rt_case_t c = {12, 1, -1, CG_OP_SUM, 1.0, 1.0};
    hj_rank_t *rep = rt_run(3, env, &c);

    cr_assert_eq(rep[0].stats.reducescatter_calls, 12, "%llu calls",
                 (unsigned long long)rep[0].stats.reducescatter_calls);
    hj_free(rep, 3);
}

Test(hvd_rscatter, average_with_prescale_and_postscale, .timeout = 60)
{
    const char *env[] = {"HOROVOD_CYCLE_TIME=300", NULL};
    /* Integers too: 2x summed over 2 ranks is even, halved exactly. */
    rt_case_t c = {9, 1, -1, CG_OP_AVG, 2.0, 4.0};
    hj_rank_t *rep = rt_run(2, env, &c);

    hj_free(rep, 2);
    /* f32 over 3 ranks: sums of multiples of 3 times 0.25 / 3 round to
     * the exact quarter in f32. */
    c.mixed = 0;
    c.pre = 3.0;
    c.post = 0.25;
    rep = rt_run(3, env, &c);
    hj_free(rep, 3);
}

Test(hvd_rscatter, tensor_over_the_threshold_runs_alone_in_pieces,
     .timeout = 90)
{
    const char *env[] = {"HOROVOD_CYCLE_TIME=300",
                         "CG_FUSION_THRESHOLD=64KiB", NULL};
    rt_case_t c = {9, 0, 4, CG_OP_SUM, 2.0, 1.0};
    hj_rank_t *rep = rt_run(3, env, &c);

    cr_assert(rep[0].stats.reducescatter_calls >= 3, "%llu calls",
              (unsigned long long)rep[0].stats.reducescatter_calls);
    hj_free(rep, 3);
    rep = rt_run(2, env, &c);
    hj_free(rep, 2);
}

/* Mismatches: rank 1 differs in `what`; every rank must fail with the
 * text, and a reducescatter after it must still work. */
static int body_mismatch(hj_rank_t *self)
{
    const char *what = self->arg;
    float in[12], out[12];
    int64_t rows = 4;
    cg_dtype_t dt = CG_DTYPE_F32;
    cg_redop_t op = CG_OP_SUM;
    cg_hvd_req_h req;
    cg_status_t st;

    for (int i = 0; i < 12; i++)
        in[i] = (float)(self->rank + i);
    if (self->rank == 1 && strcmp(what, "shape") == 0)
        rows = 3;
    if (self->rank == 1 && strcmp(what, "dtype") == 0)
        dt = CG_DTYPE_I32;
    if (self->rank == 1 && strcmp(what, "op") == 0)
        op = CG_OP_AVG;
    cg_hvd_tensor_t t = {.name = "rs.bad", .dtype = dt, .ndim = 2,
                         .shape = {rows, 3}, .input = in, .output = out};
    char msg[512], after[512];
    st = cg_hvd_enqueue_reducescatter(self->core, &t, op, 1, 1, &req);
    st = hj_settle(st, &req, msg, sizeof(msg));
    HJ_CHECK(self, st == CG_ERR_MISMATCH, "status %s: %s",
             cg_status_string(st), msg);
    cg_hvd_tensor_t ok = {.name = "rs.after", .dtype = CG_DTYPE_F32,
                          .ndim = 1, .shape = {12}, .input = in,
                          .output = out};
    st = cg_hvd_enqueue_reducescatter(self->core, &ok, CG_OP_SUM, 1, 1, &req);
    st = hj_settle(st, &req, after, sizeof(after));
    HJ_CHECK(self, st == CG_OK, "after the mismatch: %s", after);
    int64_t start, n;
    cg_hvd_reducescatter_rows(12, self->size, self->rank, &start, &n);
    for (int64_t i = 0; i < n; i++) {
        float want = 0;
        for (int r = 0; r < self->size; r++)
            want += (float)(r + start + i);
        HJ_CHECK(self, out[i] == want, "after: element %lld is %g, want %g",
                 (long long)i, out[i], want);
    }
    snprintf(self->msg, sizeof(self->msg), "%s", msg); /* checked after */
    return 0;
}

static void rt_mismatch(int size, const char *what, const char *text)
{
    hj_rank_t *rep = hj_run(size, NULL, body_mismatch, (void *)what);

    hj_assert_passed(rep, size);
    hj_assert_msgs(rep, size, text);
    hj_assert_msgs(rep, size, "rs.bad");
    hj_free(rep, size);
}

Test(hvd_rscatter, mismatched_shape_fails_on_every_rank, .timeout = 60)
{
    rt_mismatch(2, "shape", "reducescatter of tensor 'rs.bad': mismatched "
                "shape");
    rt_mismatch(3, "shape", "mismatched shape");
}

Test(hvd_rscatter, mismatched_dtype_fails_on_every_rank, .timeout = 60)
{
    rt_mismatch(3, "dtype", "mismatched dtype");
}

Test(hvd_rscatter, mismatched_op_fails_on_every_rank, .timeout = 60)
{
    rt_mismatch(2, "op", "mismatched op");
}

/* Refused at enqueue, on every rank alike (no collective runs). */
static int body_refused(hj_rank_t *self)
{
    float x[4] = {0}, y[4];
    cg_hvd_req_h req;
    cg_hvd_tensor_t s = {.name = "rs.scalar", .dtype = CG_DTYPE_F32,
                         .ndim = 0, .input = x, .output = y};
    cg_hvd_tensor_t t = {.name = "rs.max", .dtype = CG_DTYPE_F32, .ndim = 1,
                         .shape = {4}, .input = x, .output = y};
    cg_hvd_tensor_t o = {.name = "rs.overlap", .dtype = CG_DTYPE_F32,
                         .ndim = 1, .shape = {4}, .input = x, .output = x};

    HJ_CHECK(self, cg_hvd_enqueue_reducescatter(self->core, &s, CG_OP_SUM, 1,
                                                1, &req) ==
                       CG_ERR_INVALID_PARAM &&
                   strstr(cg_last_error(), "scalar") != NULL,
             "scalar: %s", cg_last_error());
    HJ_CHECK(self, cg_hvd_enqueue_reducescatter(self->core, &t, CG_OP_MAX, 1,
                                                1, &req) ==
                       CG_ERR_INVALID_PARAM &&
                   strstr(cg_last_error(), "not supported") != NULL,
             "max: %s", cg_last_error());
    HJ_CHECK(self, cg_hvd_enqueue_reducescatter(self->core, &o, CG_OP_SUM, 1,
                                                1, &req) ==
                       CG_ERR_INVALID_PARAM &&
                   strstr(cg_last_error(), "overlaps") != NULL,
             "overlap: %s", cg_last_error());
    return 0;
}

Test(hvd_rscatter, scalars_other_ops_and_overlap_are_refused, .timeout = 60)
{
    hj_rank_t *rep = hj_run(2, NULL, body_refused, NULL);

    hj_assert_passed(rep, 2);
    hj_free(rep, 2);
}
