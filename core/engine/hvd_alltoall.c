/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Alltoall in the Horovod shim's core (Horovod's alltoall with splits):
 * its enqueue (splits checked and kept on the request, the request handed
 * to the cycle only once they are) and its execution, one tensor at a
 * time as Horovod runs it: the ranks all-gather their splits (the matrix
 * of rows every rank sends every other), each allocates its result
 * (governed staging memory, plus a host copy of a CUDA input) and one
 * small allreduce agrees that every rank could, so a rank without memory
 * fails the tensor on every rank and the job goes on; then the rows move
 * on the host backend's alltoallv (MPI_Alltoallv) or the engine's
 * pairwise exchange (cg_alltoallv; CUDA tensors always), all among the
 * members of t's process set (routed at the enqueue: splits, ranks and
 * the backend's communicator are the set's). Background
 * thread only, but the enqueue. Layer: core/engine; calls core/coll/coll.h,
 * the backends, the GPU data path's copies (hvd_copy.h) and the governor.
 */
#include <stdio.h>
#include <string.h>

#include "core/base/clock.h"
#include "core/base/error.h"
#include "core/backend/hvd_gpu.h"
#include "core/engine/hvd_copy.h"
#include "core/engine/hvd_core.h"
#include "core/engine/hvd_metrics.h"
#include "core/engine/hvd_timeline.h"

#define CG__A2A_ACTIVITY "COLLGUARD_ALLTOALL"

/* The splits a request sends (size of them): given, or an equal split. */
static cg_status_t cg__splits(const cg_hvd_core_t *core,
                              const cg_hvd_tensor_t *t, const int64_t *splits,
                              int64_t *out)
{
    int64_t d0 = t->shape[0], sum = 0;
    int n = core->size;

    if (splits == NULL) {
        if (d0 % n != 0)
            return cg_error_set(CG_ERR_INVALID_PARAM, "alltoall of tensor "
                                "'%s': its first dimension %lld is not a "
                                "multiple of the %d ranks (no splits given: "
                                "an equal split)", t->name, (long long)d0, n);
        for (int r = 0; r < n; r++)
            out[r] = d0 / n;
        return CG_OK;
    }
    for (int r = 0; r < n; r++) {
        if (splits[r] < 0 || splits[r] > d0 - sum)
            return cg_error_set(CG_ERR_INVALID_PARAM, "alltoall of tensor "
                                "'%s': splits[%d] is %lld; the splits must "
                                "be >= 0 and sum to the first dimension "
                                "%lld", t->name, r, (long long)splits[r],
                                (long long)d0);
        sum += splits[r];
        out[r] = splits[r];
    }
    if (sum != d0)
        return cg_error_set(CG_ERR_INVALID_PARAM, "alltoall of tensor '%s': "
                            "the splits sum to %lld, the first dimension is "
                            "%lld", t->name, (long long)sum, (long long)d0);
    return CG_OK;
}

cg_status_t cg_hvd_enqueue_alltoall(cg_hvd_core_h core,
                                    const cg_hvd_tensor_t *t,
                                    const int64_t *splits,
                                    cg_hvd_req_h *req_p)
{
    cg_hvd_wire_t w;
    cg_hvd_req_h req;
    cg_list_t batch;
    int64_t *a2a;
    size_t bytes;
    cg_status_t st = cg_hvd_route(&core, t, "alltoall");

    if (st == CG_OK)
        st = cg_hvd_check_tensor(core, t, CG_HVD_ALLTOALL, &w);
    if (st != CG_OK)
        return st;
    if (t->ndim == 0)
        return cg_error_set(CG_ERR_INVALID_PARAM, "alltoall of tensor '%s': "
                            "a scalar has no first dimension to split",
                            t->name);
    bytes = (size_t)core->size * 2 * sizeof(int64_t);
    st = cg_governor_alloc(core->gov, CG_MEM_CAT_CONTROL, bytes,
                           (void **)&a2a);
    if (st != CG_OK)
        return st;
    st = cg__splits(core, t, splits, a2a);
    cg_list_init(&batch);
    if (st == CG_OK)
        st = cg_hvd_enqueue_to(core, t, CG_HVD_ALLTOALL, &w, &batch, &req);
    if (st != CG_OK) {
        cg_governor_free(core->gov, CG_MEM_CAT_CONTROL, a2a, bytes);
        return st;
    }
    req->a2a = a2a; /* before the cycle can see the request */
    req->a2a_bytes = bytes;
    cg_hvd_batch_commit(core, &batch, 1, 0);
    *req_p = req;
    return CG_OK;
}

cg_status_t cg_hvd_alltoall_result(cg_hvd_req_h req, const void **data_p,
                                   int64_t *first_dim_p,
                                   const int64_t **recv_splits_p)
{
    if (req == NULL || !cg_hvd_poll(req) || req->w.type != CG_HVD_ALLTOALL ||
        req->status != CG_OK || req->a2a == NULL)
        return cg_error_set(CG_ERR_INVALID_PARAM, "cg_hvd_alltoall_result: "
                            "not a successfully completed alltoall");
    *data_p = req->gather;
    *first_dim_p = req->gather_dim0;
    *recv_splits_p = req->a2a + req->a2a_bytes / sizeof(int64_t) / 2;
    return CG_OK;
}

/* What one alltoall needs while it runs (control memory). */
typedef struct cg__a2a {
    int64_t *rows;       /* size x size: rows[src * size + dst] */
    size_t *sbytes, *rbytes, *blocks; /* size each */
    size_t len;          /* of the allocation rows starts */
    const void *send;    /* the input, or its host copy (CUDA) */
    void *stage;         /* that copy; NULL for host tensors */
    size_t stage_bytes, row, out_rows;
} cg__a2a_t;

/* Bytes of one first-dimension row; false when it overflows. */
static bool cg__row(const cg_hvd_entry_t *e, size_t *row_p)
{
    size_t row = cg_dtype_size((cg_dtype_t)e->w.dtype);

    for (int d = 1; d < e->w.ndim; d++)
        if (__builtin_mul_overflow(row, (size_t)e->w.shape[d], &row))
            return false;
    *row_p = row;
    return true;
}

/* The splits matrix, gathered: every rank's row of it. A rank that has
 * no memory for it breaks the group, so the others fail instead of
 * waiting. */
static cg_status_t cg__matrix(cg_hvd_core_t *core, cg_hvd_entry_t *e,
                              cg__a2a_t *a)
{
    size_t n = (size_t)core->size;
    char why[256];
    cg_status_t st;

    a->len = n * n * sizeof(int64_t) + 3 * n * sizeof(size_t);
    st = cg_governor_alloc(core->gov, CG_MEM_CAT_CONTROL, a->len,
                           (void **)&a->rows);
    if (st != CG_OK) {
        snprintf(why, sizeof(why), "%s", cg_last_error());
        a->rows = NULL;
        cg_comm_fail(core->comm);
        return cg_error_set(st, "alltoall of tensor '%s': no memory for the "
                            "%zu x %zu splits: %s", e->w.name, n, n, why);
    }
    a->sbytes = (size_t *)(a->rows + n * n);
    a->rbytes = a->sbytes + n;
    a->blocks = a->rbytes + n;
    for (size_t r = 0; r < n; r++)
        a->blocks[r] = n * sizeof(int64_t);
    memcpy(a->rows + (size_t)core->rank * n, e->local->a2a,
           n * sizeof(int64_t));
    return cg_allgatherv(core->comm, a->rows + (size_t)core->rank * n,
                         a->rows, a->blocks);
}

/* This rank's memory for the result (and a CUDA input's host copy),
 * then every rank's verdict: all go on, or every rank fails the tensor
 * (CG_ERR_NO_MEMORY naming the last rank that could not) and the comm
 * stays usable. */
static cg_status_t cg__alloc(cg_hvd_core_t *core, cg_hvd_entry_t *e,
                             cg__a2a_t *a)
{
    struct cg_hvd_req *req = e->local;
    size_t n = (size_t)core->size, me = (size_t)core->rank, out = 0;
    int64_t bad;
    char why[256] = "";
    cg_status_t st = CG_OK;

    for (size_t r = 0; r < n; r++) {
        a->sbytes[r] = (size_t)a->rows[me * n + r] * a->row;
        a->rbytes[r] = (size_t)a->rows[r * n + me] * a->row;
        a->out_rows += (size_t)a->rows[r * n + me];
        if (__builtin_add_overflow(out, a->rbytes[r], &out))
            st = cg_error_set(CG_ERR_NO_MEMORY, "the result is larger than "
                              "the address space");
    }
    if (st == CG_OK && out > 0)
        st = cg_governor_alloc(core->gov, CG_MEM_CAT_STAGING, out,
                               &req->gather);
    if (st == CG_OK)
        req->gather_bytes = out;
    else
        req->gather = NULL;
    a->stage_bytes = req->count * cg_dtype_size((cg_dtype_t)e->w.dtype);
    if (st == CG_OK && e->w.device >= 0 && a->stage_bytes > 0) {
        st = cg_governor_alloc(core->gov, CG_MEM_CAT_STAGING, a->stage_bytes,
                               &a->stage);
        if (st != CG_OK)
            a->stage = NULL;
    }
    if (st != CG_OK)
        snprintf(why, sizeof(why), "%s", cg_last_error());
    bad = st == CG_OK ? 0 : core->rank + 1;
    st = cg_allreduce(core->comm, &bad, &bad, 1, CG_DTYPE_I64, CG_OP_MAX, 1.0,
                      1.0);
    if (st != CG_OK)
        return st;
    if (bad == 0)
        return CG_OK;
    cg_governor_free(core->gov, CG_MEM_CAT_STAGING, req->gather,
                     req->gather_bytes);
    req->gather = NULL;
    req->gather_bytes = 0;
    return cg_error_set(CG_ERR_NO_MEMORY, "alltoall of tensor '%s': rank %d "
                        "has no memory for its %zu-byte result%s%s",
                        e->w.name, (int)bad - 1, out,
                        why[0] != '\0' ? ": " : "", why);
}

/* The rows moved: host tensors by the host backend where it has an
 * alltoall, else (and CUDA tensors, copied to the host first) on the
 * engine's pairwise exchange. */
static cg_status_t cg__exchange(cg_hvd_core_t *core, cg_hvd_entry_t *e,
                                cg__a2a_t *a, const char **activity_p)
{
    struct cg_hvd_req *req = e->local;
    cg_backend_t *be = core->be_cpu;
    char why[256];
    cg_status_t st;

    a->send = req->input;
    if (a->stage != NULL) {
        cg_hvd_copy_in(core, e, a->stage, req->input, a->stage_bytes);
        if ((st = cg_hvd_gpu_copy_status(core->gpu)) != CG_OK) {
            snprintf(why, sizeof(why), "%s", cg_last_error());
            cg_comm_fail(core->comm); /* the others must not wait for us */
            return cg_error_set(st, "alltoall of tensor '%s': copying this "
                                "rank's input off device %d failed: %s",
                                e->w.name, cg_hvd_gpu_device(core->gpu),
                                why);
        }
        a->send = a->stage;
    }
    if (e->w.device < 0 && be != NULL && be->ops->alltoallv != NULL) {
        *activity_p = be->ops->alltoall_activity;
        return be->ops->alltoallv(be, a->send, req->gather, a->rows, a->row);
    }
    *activity_p = CG__A2A_ACTIVITY;
    return cg_alltoallv(core->comm, a->send, a->sbytes, req->gather,
                        a->rbytes);
}

cg_status_t cg_hvd_alltoall_run(cg_hvd_core_t *core, size_t i)
{
    cg_hvd_entry_t *e = core->ready[i];
    struct cg_hvd_req *req = e->local;
    uint64_t tl_t0 = cg_hvd_tl_now(core), t0 = cg_now_ns();
    const char *activity = CG__A2A_ACTIVITY;
    size_t n = (size_t)core->size;
    cg__a2a_t a = {0};
    cg_status_t st;

    if (!cg__row(e, &a.row)) /* agreed shapes: every rank alike */
        st = cg_error_set(CG_ERR_INVALID_PARAM, "alltoall of tensor '%s': "
                          "a row is larger than the address space",
                          e->w.name);
    else if ((st = cg__matrix(core, e, &a)) == CG_OK &&
             (st = cg__alloc(core, e, &a)) == CG_OK)
        st = cg__exchange(core, e, &a, &activity);
    if (st == CG_OK) {
        for (size_t r = 0; r < n; r++)
            req->a2a[n + r] = a.rows[r * n + (size_t)core->rank];
        req->gather_dim0 = (int64_t)a.out_rows;
    }
    if (a.rows != NULL) {
        core->tstats.alltoall_calls++;
        core->tstats.alltoall_bytes +=
            req->count * cg_dtype_size((cg_dtype_t)e->w.dtype);
        cg_hvd_metrics_op(core, CG_HVD_ALLTOALL, cg_now_ns() - t0);
        cg_hvd_tl_single(core, e, tl_t0, activity);
    }
    cg_governor_free(core->gov, CG_MEM_CAT_STAGING, a.stage, a.stage_bytes);
    cg_governor_free(core->gov, CG_MEM_CAT_CONTROL, a.rows, a.len);
    e->done = true;
    cg_hvd_req_complete(core, req, st, st == CG_OK ? NULL : cg_last_error());
    return st;
}
