/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Backends of the Horovod shim's core: who moves the bytes of a fused
 * buffer once negotiation has decided what runs. COLLGUARD (the engine's
 * own ring and trees over transport/), MPI (MPI_Allreduce / MPI_Bcast on
 * the buffer) and NCCL (ncclAllReduce / ncclBroadcast on a dedicated
 * stream). HOROVOD_CPU_OPERATIONS picks the backend for host tensors,
 * HOROVOD_GPU_OPERATIONS the one for CUDA tensors. Every backend runs
 * on the background thread only, one call at a time, in the order every
 * rank shares. Layer: core.
 */
#ifndef CG_CORE_HVD_BACKEND_H
#define CG_CORE_HVD_BACKEND_H

#include <stddef.h>

#include "collguard/status.h"
#include "collguard/types.h"

typedef enum {
    CG_BACKEND_COLLGUARD = 0,
    CG_BACKEND_MPI = 1,
    CG_BACKEND_NCCL = 2
} cg_backend_kind_t;

/* Where a backend's buffers live. */
typedef enum {
    CG_BACKEND_MEM_HOST = 0,
    CG_BACKEND_MEM_CUDA = 1
} cg_backend_mem_t;

typedef struct cg_backend cg_backend_t;

typedef struct cg_backend_ops {
    const char *name;           /* "collguard", "mpi", "nccl" */
    /* Timeline activity names: "COLLGUARD_ALLREDUCE", "MPI_BCAST", ... */
    const char *allreduce_activity;
    const char *broadcast_activity;
    /* output = postscale * op over ranks of (prescale * input); in place
     * when send == recv. Buffers live where `mem` says. */
    cg_status_t (*allreduce)(cg_backend_t *be, const void *send, void *recv,
                             size_t count, cg_dtype_t dt, cg_redop_t op,
                             double prescale, double postscale,
                             cg_backend_mem_t mem);
    cg_status_t (*broadcast)(cg_backend_t *be, void *buf, size_t count,
                             cg_dtype_t dt, int root, cg_backend_mem_t mem);
    void (*destroy)(cg_backend_t *be);
} cg_backend_ops_t;

/* Every backend object starts with this header. */
struct cg_backend {
    const cg_backend_ops_t *ops;
    cg_backend_kind_t kind;
};

#endif
