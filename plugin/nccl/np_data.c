/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The data path: isend, irecv (1..CG_NP_MAX_RECVS grouped receives that
 * complete together, each slot reporting its own size), test, iflush.
 * Up to NCCL_NET_MAX_REQUESTS requests per comm; past that isend/irecv
 * return a NULL request ("try again"), never an error. Only the comm's
 * lane lock is taken. Layer: plugin/nccl; calls transport/.
 */
#include <string.h>

#include "core/base/error.h"
#include "plugin/nccl/np_impl.h"

static int cg__np_req_take(cg__np_comm_t *comm)
{
    int idx;

    if (comm->free_mask == 0)
        return -1;
    idx = __builtin_ctz(comm->free_mask);
    comm->free_mask &= ~(1u << idx);
    cg__np_req_t *r = &comm->reqs[idx];
    r->gen = (uint8_t)((r->gen + 1) & 0x7f);
    r->used = true;
    r->failed = false;
    r->status = CG_OK;
    return idx;
}

static void cg__np_req_put(cg__np_comm_t *comm, int idx)
{
    comm->reqs[idx].used = false;
    comm->free_mask |= 1u << idx;
}

static int cg__np_mr_ok(void *mhandle)
{
    return mhandle == NULL || cg__np_lookup(mhandle, CG_NP_MR) != NULL;
}

ncclResult_t cg__np_isend(void *send, void *data, size_t size, int tag,
                         void *mhandle, void *phandle, void **request)
{
    cg__np_comm_t *comm = cg__np_lookup(send, CG_NP_SEND);
    cg__np_req_t *r;
    cg_status_t st;
    int idx;

    (void)phandle;
    if (request == NULL)
        return ncclInvalidArgument;
    *request = NULL;
    if (comm == NULL || !comm->ready || !cg__np_mr_ok(mhandle) ||
        (data == NULL && size > 0))
        return ncclInvalidArgument;
    if (size > CG_NP_MAX_BYTES) {
        cg_warn(&cg__np.log, "net plugin %s: isend of %zu bytes exceeds "
                "maxP2pBytes %llu", CG_NP_NAME, size, CG_NP_MAX_BYTES);
        return ncclInvalidArgument;
    }
    pthread_mutex_lock(&comm->lane->lock);
    idx = cg__np_req_take(comm);
    if (idx < 0) {
        pthread_mutex_unlock(&comm->lane->lock);
        return ncclSuccess; /* 32 in flight: NCCL tries again */
    }
    r = &comm->reqs[idx];
    r->n = 1;
    r->size[0] = 0;
    st = cg_tp_isend(comm->conn, data, size, (uint32_t)tag, &r->tp[0]);
    if (st != CG_OK)
        cg__np_req_put(comm, idx);
    pthread_mutex_unlock(&comm->lane->lock);
    if (st != CG_OK) {
        cg_warn(&cg__np.log, "net plugin %s: isend failed: %s", CG_NP_NAME,
                cg_last_error());
        return cg__np_result(st);
    }
    *request = cg__np_req_id(comm, idx);
    return ncclSuccess;
}

ncclResult_t cg__np_irecv(void *recv, int n, void **data, size_t *sizes,
                         int *tags, void **mhandles, void **phandles,
                         void **request)
{
    cg__np_comm_t *comm = cg__np_lookup(recv, CG_NP_RECV);
    cg_status_t st = CG_OK;
    cg__np_req_t *r;
    int idx, i;

    (void)phandles;
    if (request == NULL)
        return ncclInvalidArgument;
    *request = NULL;
    if (comm == NULL || n < 1 || n > CG_NP_MAX_RECVS || data == NULL ||
        sizes == NULL || tags == NULL)
        return ncclInvalidArgument;
    for (i = 0; i < n; i++)
        if ((mhandles != NULL && !cg__np_mr_ok(mhandles[i])) ||
            sizes[i] > CG_NP_MAX_BYTES || (data[i] == NULL && sizes[i] > 0))
            return ncclInvalidArgument;
    pthread_mutex_lock(&comm->lane->lock);
    idx = cg__np_req_take(comm);
    if (idx < 0) {
        pthread_mutex_unlock(&comm->lane->lock);
        return ncclSuccess;
    }
    r = &comm->reqs[idx];
    r->n = n;
    for (i = 0; i < n && st == CG_OK; i++) {
        r->size[i] = 0;
        r->tp[i] = NULL;
        st = cg_tp_irecv(comm->conn, data[i], sizes[i], (uint32_t)tags[i],
                         &r->tp[i]);
    }
    if (st != CG_OK) {
        /* The receives already posted stay with the conn (its close
         * cancels them); this request is done with. */
        cg__np_req_put(comm, idx);
    }
    pthread_mutex_unlock(&comm->lane->lock);
    if (st != CG_OK) {
        cg_warn(&cg__np.log, "net plugin %s: irecv failed: %s", CG_NP_NAME,
                cg_last_error());
        return cg__np_result(st);
    }
    *request = cg__np_req_id(comm, idx);
    return ncclSuccess;
}

ncclResult_t cg__np_iflush(void *recv, int n, void **data, int *sizes,
                          void **mhandles, void **request)
{
    (void)n;
    (void)data;
    (void)sizes;
    (void)mhandles;
    if (request == NULL)
        return ncclInvalidArgument;
    *request = NULL;
    /* Host memory only: nothing to make visible to a GPU. */
    return cg__np_lookup(recv, CG_NP_RECV) != NULL ? ncclSuccess
                                                  : ncclInvalidArgument;
}

ncclResult_t cg__np_test(void *request, int *done, int *sizes)
{
    cg__np_comm_t *comm;
    cg__np_req_t *r;
    int idx, pending = 0;
    cg_status_t status;

    if (done == NULL)
        return ncclInvalidArgument;
    *done = 0;
    comm = cg__np_req_lookup(request, &idx);
    if (comm == NULL)
        return ncclInvalidArgument;
    r = &comm->reqs[idx];
    pthread_mutex_lock(&comm->lane->lock);
    for (int i = 0; i < r->n; i++) {
        size_t got = 0;
        if (r->tp[i] == NULL)
            continue;
        cg_status_t st = cg_tp_test(r->tp[i], &got);
        if (st == CG_INPROGRESS) {
            pending++;
            continue;
        }
        r->tp[i] = NULL;
        r->size[i] = got;
        if (st != CG_OK && !r->failed) {
            r->failed = true;
            r->status = st;
            cg_warn(&cg__np.log, "net plugin %s: %s request failed: %s",
                    CG_NP_NAME, comm->kind == CG_NP_SEND ? "send" : "recv",
                    cg_last_error());
        }
    }
    if (pending > 0) {
        pthread_mutex_unlock(&comm->lane->lock);
        return ncclSuccess;
    }
    status = r->failed ? r->status : CG_OK;
    if (status == CG_OK && sizes != NULL)
        for (int i = 0; i < r->n; i++)
            sizes[i] = (int)r->size[i];
    cg__np_req_put(comm, idx);
    pthread_mutex_unlock(&comm->lane->lock);
    if (status != CG_OK)
        return cg__np_result(status);
    *done = 1;
    return ncclSuccess;
}
