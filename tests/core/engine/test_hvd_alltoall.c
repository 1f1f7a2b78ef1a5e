/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Alltoall in the Horovod shim's core (core/engine/hvd_alltoall.c,
 * core/coll/coll_alltoall.c) across forked ranks, 2 and 3 of them: uneven
 * splits (zero rows included) of 1-, 2- and 3-D tensors of every dtype
 * against a reference, the equal split, blocks of many transfer pieces,
 * mismatched dtype and trailing shape failing on every rank with the core
 * going on, and bad splits refused at enqueue.
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "tests/core/util/test_hvd_util.h"

#define AT_NDT 10

static const cg_dtype_t at_dts[AT_NDT] = {
    CG_DTYPE_U8, CG_DTYPE_I8, CG_DTYPE_I32, CG_DTYPE_I64,
    CG_DTYPE_F16, CG_DTYPE_F32, CG_DTYPE_F64, CG_DTYPE_BF16,
    CG_DTYPE_I16, CG_DTYPE_U16};

/* The element (row, col) that rank src sends rank dst, as a byte pattern
 * that every dtype carries exactly: its bits are compared, not values. */
static uint8_t at_byte(int src, int dst, int64_t row, int64_t b)
{
    return (uint8_t)(src * 37 + dst * 11 + row * 5 + b * 3 + 1);
}

/* Rows rank src sends rank dst in the uneven case (0 included). */
static int64_t at_rows(int src, int dst, int big)
{
    return big ? 1000 + src * 7 + dst : (src + 2 * dst) % 3;
}

typedef struct at_case {
    int dims;  /* 1-3 */
    int big;   /* rows of 3 KiB: blocks of several 512 KiB pieces */
    int equal; /* NULL splits */
} at_case_t;

static int at_one(hj_rank_t *self, const at_case_t *c, cg_dtype_t dt, int k)
{
    int n = self->size, me = self->rank;
    int64_t shape[3] = {0, c->big ? 768 : 3, 2}, splits[8], d0 = 0, want0 = 0;
    size_t el = cg_dtype_size(dt), row = el;
    char name[64];
    const void *data;
    const int64_t *rsp;
    int64_t dim0;
    cg_hvd_req_h req;

    for (int d = 1; d < c->dims; d++)
        row *= (size_t)shape[d];
    for (int r = 0; r < n; r++) {
        splits[r] = c->equal ? 2 : at_rows(me, r, c->big);
        d0 += splits[r];
        want0 += c->equal ? 2 : at_rows(r, me, c->big);
    }
    shape[0] = d0;
    uint8_t *in = malloc((size_t)d0 * row + 1);
    for (int r = 0, at = 0; r < n; r++)
        for (int64_t i = 0; i < splits[r]; i++, at++)
            for (size_t b = 0; b < row; b++)
                in[(size_t)at * row + b] = at_byte(me, r, i, (int64_t)b);
    snprintf(name, sizeof(name), "a2a.%d.%s", k, cg_dtype_name(dt));
    cg_hvd_tensor_t t = {.name = name, .dtype = dt, .ndim = c->dims,
                         .input = in};
    memcpy(t.shape, shape, sizeof(shape));
    HJ_CHECK(self, cg_hvd_enqueue_alltoall(self->core, &t,
                                           c->equal ? NULL : splits,
                                           &req) == CG_OK,
             "enqueue %s: %s", name, cg_last_error());
    HJ_CHECK(self, cg_hvd_wait(req) == CG_OK, "%s: %s", name,
             cg_hvd_error(req));
    HJ_CHECK(self, cg_hvd_alltoall_result(req, &data, &dim0, &rsp) == CG_OK,
             "%s result: %s", name, cg_last_error());
    HJ_CHECK(self, dim0 == want0, "%s: %lld rows, want %lld", name,
             (long long)dim0, (long long)want0);
    const uint8_t *out = data;
    for (int r = 0; r < n; r++) {
        int64_t got = c->equal ? 2 : at_rows(r, me, c->big);
        HJ_CHECK(self, rsp[r] == got, "%s: %lld rows from rank %d, want "
                 "%lld", name, (long long)rsp[r], r, (long long)got);
        for (int64_t i = 0; i < got; i++, out += row)
            for (size_t b = 0; b < row; b++)
                HJ_CHECK(self, out[b] == at_byte(r, me, i, (int64_t)b),
                         "%s: rank %d's row %lld byte %zu", name, r,
                         (long long)i, b);
    }
    cg_hvd_release(req);
    free(in);
    return 0;
}

static int body_alltoall(hj_rank_t *self)
{
    const at_case_t *c = self->arg;

    for (int k = 0; k < (c->big ? 1 : AT_NDT); k++)
        if (at_one(self, c, c->big ? CG_DTYPE_F32 : at_dts[k], k) != 0)
            return 1;
    return 0;
}

static void at_run(int size, at_case_t *c)
{
    hj_rank_t *rep = hj_run(size, NULL, body_alltoall, c);

    hj_assert_passed(rep, size);
    for (int r = 0; r < size; r++)
        cr_assert_eq(rep[r].stats.alltoall_calls,
                     (uint64_t)(c->big ? 1 : AT_NDT), "rank %d: %llu calls",
                     r, (unsigned long long)rep[r].stats.alltoall_calls);
    hj_free(rep, size);
}

Test(hvd_alltoall, uneven_splits_1_2_3_dims_every_dtype, .timeout = 90)
{
    for (int size = 2; size <= 3; size++)
        for (int dims = 1; dims <= 3; dims++)
            at_run(size, &(at_case_t){dims, 0, 0});
}

Test(hvd_alltoall, equal_split_without_splits, .timeout = 60)
{
    at_run(3, &(at_case_t){2, 0, 1});
}

Test(hvd_alltoall, blocks_of_many_pieces, .timeout = 90)
{
    at_run(3, &(at_case_t){2, 1, 0});
    at_run(2, &(at_case_t){2, 1, 0});
}

/* Rank 1 differs in `what`; every rank fails, then an alltoall works. */
static int body_mismatch(hj_rank_t *self)
{
    const char *what = self->arg;
    float in[24] = {0};
    int64_t cols = self->rank == 1 && strcmp(what, "shape") == 0 ? 4 : 3;
    cg_dtype_t dt = self->rank == 1 && strcmp(what, "dtype") == 0
                        ? CG_DTYPE_I32
                        : CG_DTYPE_F32;
    cg_hvd_tensor_t t = {.name = "a2a.bad", .dtype = dt, .ndim = 2,
                         .shape = {2 * self->size, cols}, .input = in};
    cg_hvd_req_h req;
    char msg[512];
    cg_status_t st;

    st = cg_hvd_enqueue_alltoall(self->core, &t, NULL, &req);
    st = hj_settle(st, &req, msg, sizeof(msg));
    HJ_CHECK(self, st == CG_ERR_MISMATCH, "status %s: %s",
             cg_status_string(st), msg);
    at_case_t c = {1, 0, 0};
    if (at_one(self, &c, CG_DTYPE_F32, 99) != 0)
        return 1;
    snprintf(self->msg, sizeof(self->msg), "%s", msg); /* checked after */
    return 0;
}

static void at_mismatch(int size, const char *what, const char *text)
{
    hj_rank_t *rep = hj_run(size, NULL, body_mismatch, (void *)what);

    hj_assert_passed(rep, size);
    hj_assert_msgs(rep, size, text);
    hj_assert_msgs(rep, size, "a2a.bad");
    hj_free(rep, size);
}

Test(hvd_alltoall, mismatched_dtype_fails_on_every_rank, .timeout = 60)
{
    at_mismatch(2, "dtype", "alltoall of tensor 'a2a.bad': mismatched dtype");
    at_mismatch(3, "dtype", "mismatched dtype");
}

Test(hvd_alltoall, mismatched_trailing_shape_fails_on_every_rank,
     .timeout = 60)
{
    at_mismatch(3, "shape", "mismatched shape (dimensions after the first)");
}

static int body_refused(hj_rank_t *self)
{
    float x[8] = {0};
    int64_t bad_sum[3] = {1, 1, 1}, negative[3] = {4, -1, 1};
    cg_hvd_req_h req;
    cg_hvd_tensor_t t = {.name = "a2a.ref", .dtype = CG_DTYPE_F32,
                         .ndim = 1, .shape = {4}, .input = x};
    cg_hvd_tensor_t s = {.name = "a2a.scalar", .dtype = CG_DTYPE_F32,
                         .ndim = 0, .input = x};

    HJ_CHECK(self, cg_hvd_enqueue_alltoall(self->core, &t, bad_sum, &req) ==
                       CG_ERR_INVALID_PARAM &&
                   strstr(cg_last_error(), "sum to 3") != NULL,
             "sum: %s", cg_last_error());
    HJ_CHECK(self, cg_hvd_enqueue_alltoall(self->core, &t, negative, &req) ==
                       CG_ERR_INVALID_PARAM &&
                   strstr(cg_last_error(), "splits[1] is -1") != NULL,
             "negative: %s", cg_last_error());
    HJ_CHECK(self, cg_hvd_enqueue_alltoall(self->core, &t, NULL, &req) ==
                       CG_ERR_INVALID_PARAM &&
                   strstr(cg_last_error(), "not a multiple") != NULL,
             "equal split of 4 rows over 3: %s", cg_last_error());
    HJ_CHECK(self, cg_hvd_enqueue_alltoall(self->core, &s, NULL, &req) ==
                       CG_ERR_INVALID_PARAM &&
                   strstr(cg_last_error(), "scalar") != NULL,
             "scalar: %s", cg_last_error());
    return 0;
}

Test(hvd_alltoall, bad_splits_are_refused_at_enqueue, .timeout = 60)
{
    hj_rank_t *rep = hj_run(3, NULL, body_refused, NULL);

    hj_assert_passed(rep, 3);
    hj_free(rep, 3);
}
