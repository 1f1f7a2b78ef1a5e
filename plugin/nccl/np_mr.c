/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Memory registration: the transport needs none for host memory, so a
 * registration is a record, but its bytes are accounted in the governor's
 * REGISTRATION category (current and peak, CG_FAULT_ALLOC applies), and a
 * registration that would take the category past the governor's budget is
 * refused with ncclSystemError and a logged reason. CUDA pointers are
 * refused: ptrSupport is host only. Layer: plugin/nccl; calls the governor.
 */
#include <stdlib.h>

#include "core/base/error.h"
#include "core/base/parse.h"
#include "plugin/nccl/np_impl.h"

/* The governor's raw allocator for registrations: the record is what is
 * allocated; the bytes accounted are the registered region's. */
static void *cg__np_mr_rec_alloc(void *arg, size_t size)
{
    (void)arg;
    (void)size;
    return calloc(1, sizeof(cg__np_mr_t));
}

static void cg__np_mr_rec_free(void *arg, void *ptr, size_t size)
{
    (void)arg;
    (void)size;
    free(ptr);
}

static const cg_mem_backend_t cg__np_mr_backend = {
    cg__np_mr_rec_alloc, cg__np_mr_rec_free, NULL, 0};

static int cg__np_comm_ok(void *comm)
{
    return cg__np_lookup(comm, CG_NP_SEND) != NULL ||
           cg__np_lookup(comm, CG_NP_RECV) != NULL;
}

ncclResult_t cg__np_reg_mr(void *comm, void *data, size_t size, int type,
                          void **mhandle)
{
    char b1[32], b2[32], b3[32];
    uint64_t reg, budget;
    cg__np_mr_t *mr = NULL;
    cg_status_t st;
    size_t got;

    if (mhandle == NULL)
        return ncclInvalidArgument;
    *mhandle = NULL;
    if (!cg__np_comm_ok(comm) || data == NULL || size == 0)
        return ncclInvalidArgument;
    if (type != NCCL_PTR_HOST) {
        cg_warn(&cg__np.log, "net plugin %s: regMr of type %d refused: "
                "only host memory (NCCL_PTR_HOST)", CG_NP_NAME, type);
        return ncclInvalidArgument;
    }
    pthread_mutex_lock(&cg__np.lock);
    cg_governor_tick(cg__np.gov);
    budget = cg_governor_budget(cg__np.gov);
    {
        cg_governor_snapshot_t snap;
        cg_governor_snapshot(cg__np.gov, &snap);
        reg = snap.current_bytes[CG_MEM_CAT_REGISTRATION];
    }
    if (reg + size > budget) {
        pthread_mutex_unlock(&cg__np.lock);
        cg_warn(&cg__np.log, "net plugin %s: regMr of %s refused: %s "
                "already registered and the governor's budget is %s "
                "(raise CG_MEM_FRACTION or lower CG_MEM_RESERVE)",
                CG_NP_NAME, cg_format_size(size, b1, sizeof(b1)),
                cg_format_size(reg, b2, sizeof(b2)),
                cg_format_size(budget, b3, sizeof(b3)));
        return ncclSystemError;
    }
    st = cg_governor_alloc_shrink_on(cg__np.gov, &cg__np_mr_backend,
                                     CG_MEM_CAT_REGISTRATION, size, size, 1,
                                     "CG_MEM_FRACTION", (void **)&mr, &got);
    pthread_mutex_unlock(&cg__np.lock);
    if (st != CG_OK) {
        cg_warn(&cg__np.log, "net plugin %s: regMr of %s refused: %s",
                CG_NP_NAME, cg_format_size(size, b1, sizeof(b1)),
                cg_last_error());
        return ncclSystemError;
    }
    mr->data = data;
    mr->size = size;
    mr->type = type;
    *mhandle = cg__np_slot_alloc(CG_NP_MR, mr);
    if (*mhandle == NULL) {
        cg__np_mr_free(mr);
        return ncclSystemError;
    }
    return ncclSuccess;
}

ncclResult_t cg__np_reg_mr_dmabuf(void *comm, void *data, size_t size,
                                 int type, uint64_t offset, int fd,
                                 void **mhandle)
{
    (void)offset;
    (void)fd; /* host memory needs no dma-buf */
    return cg__np_reg_mr(comm, data, size, type, mhandle);
}

void cg__np_mr_free(cg__np_mr_t *mr)
{
    cg_governor_free_on(cg__np.gov, &cg__np_mr_backend,
                        CG_MEM_CAT_REGISTRATION, mr, mr->size);
}

ncclResult_t cg__np_dereg_mr(void *comm, void *mhandle)
{
    cg__np_mr_t *mr = cg__np_lookup(mhandle, CG_NP_MR);

    (void)comm; /* a registration is not tied to its comm */
    if (mr == NULL) {
        cg_warn(&cg__np.log, "net plugin %s: deregMr of an unknown handle "
                "%p", CG_NP_NAME, mhandle);
        return ncclInvalidArgument;
    }
    /* The release moves the slot's generation on: a comm that remembers
     * this handle (np_data.c) refuses it from here on. */
    cg__np_slot_release(mhandle);
    cg__np_mr_free(mr);
    return ncclSuccess;
}
