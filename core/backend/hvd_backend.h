/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Backends of the Horovod shim's core: who moves the bytes of a fused
 * buffer once negotiation has decided what runs. COLLGUARD (the engine's
 * own ring and trees over transport/), MPI (MPI_Allreduce / MPI_Bcast /
 * MPI_Reduce_scatter / MPI_Alltoallv on the buffer) and NCCL (ncclAllReduce / ncclBroadcast on a dedicated
 * stream). HOROVOD_CPU_OPERATIONS picks the backend for host tensors,
 * HOROVOD_GPU_OPERATIONS the one for CUDA tensors. Every backend runs
 * on the background thread only, one call at a time, in the order every
 * rank shares. Layer: core/backend.
 */
#ifndef CG_CORE_HVD_BACKEND_H
#define CG_CORE_HVD_BACKEND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "collguard/status.h"
#include "collguard/types.h"
#include "core/base/log.h"
#include "core/coll/coll.h"
#include "core/coll/comm.h"
#include "core/config/config.h"
#include "core/governor/governor.h"
#include "transport/bootstrap.h"

/* Where a backend's buffers live. */
typedef enum {
    CG_BACKEND_MEM_HOST = 0,
    CG_BACKEND_MEM_CUDA = 1
} cg_backend_mem_t;

typedef struct cg_backend cg_backend_t;

typedef struct cg_backend_ops {
    cg_backend_kind_t kind;     /* COLLGUARD, MPI or NCCL */
    /* Timeline activity names: "COLLGUARD_ALLREDUCE", "MPI_BCAST", ... */
    const char *allreduce_activity;
    const char *broadcast_activity;
    /* output = postscale * op over ranks of (prescale * input); in place
     * when send == recv. Buffers live where `mem` says. Average and the
     * scale factors follow core/reduce/reduce.h's rules (cg_reduce_post), so
     * every backend gives the engine's results where both are exact. */
    cg_status_t (*allreduce)(cg_backend_t *be, const void *send, void *recv,
                             size_t count, cg_dtype_t dt, cg_redop_t op,
                             double prescale, double postscale,
                             cg_backend_mem_t mem);
    cg_status_t (*broadcast)(cg_backend_t *be, void *buf, size_t count,
                             cg_dtype_t dt, int root, cg_backend_mem_t mem);
    /* Optional (NULL: pack, allreduce, unpack): an in-place allreduce of
     * host memory buf whose bytes come from stage->fill as the collective
     * first needs them and go to stage->drain once final (core/coll/coll.h),
     * so the fused tensors are copied while in cache. */
    cg_status_t (*allreduce_staged)(cg_backend_t *be, void *buf,
                                    size_t count, cg_dtype_t dt,
                                    cg_redop_t op, double prescale,
                                    double postscale,
                                    const cg_coll_stage_t *stage);
    /* Optional (NULL: the engine's own cg_reduce_scatterv on the core's
     * communicator): recv (counts[rank] elements of host memory) =
     * this rank's block of postscale * op over ranks of (prescale * send),
     * send holding every rank's block back to back in rank order (counts:
     * the same array on every rank). recv is send plus this rank's block
     * offset (in place: the other blocks of send may be overwritten) or
     * disjoint from send, which is then left untouched. */
    cg_status_t (*reducescatter)(cg_backend_t *be, const void *send,
                                 void *recv, const size_t *counts,
                                 cg_dtype_t dt, cg_redop_t op,
                                 double prescale, double postscale);
    const char *reducescatter_activity;
    /* Optional (NULL: the engine's own cg_alltoallv, a pairwise exchange
     * on the core's communicator): host memory; rows[src * size + dst]
     * is what rank src sends rank dst, in rows of row_bytes (the same
     * matrix on every rank); send holds this rank's blocks back to back
     * in rank order, recv gets every rank's block for it likewise. */
    cg_status_t (*alltoallv)(cg_backend_t *be, const void *send, void *recv,
                             const int64_t *rows, size_t row_bytes);
    const char *alltoall_activity;
    /* Optional, CUDA memory (NULL: allreduce, which waits): the allreduce
     * queued on `stream` (a cudaStream_t) behind what is queued there,
     * not waited for; only where the backend applies prescale/postscale
     * itself. Then stream_wait waits for that stream, watching the
     * backend's communicator (its errors, CG_TIMEOUT), before anything
     * the allreduce touches is reused. */
    cg_status_t (*allreduce_queued)(cg_backend_t *be, const void *send,
                                    void *recv, size_t count, cg_dtype_t dt,
                                    cg_redop_t op, double prescale,
                                    double postscale, void *stream);
    cg_status_t (*stream_wait)(cg_backend_t *be, void *stream,
                               const char *what);
    void (*destroy)(cg_backend_t *be);
} cg_backend_ops_t;

/* Every backend object starts with this header. */
struct cg_backend {
    const cg_backend_ops_t *ops;
    cg_backend_kind_t kind;
    int size; /* ranks of its communicator (set by cg_backend_create) */
    /* Set by the backend when a failed call leaves it unusable (a broken
     * communicator, an MPI error): the core then fails every pending
     * request, as for a broken comm. */
    bool broken;
};

/* What a backend is made from; borrowed, must outlive the backend. Fields
 * may be added (zero-initialise the struct). */
typedef struct cg_backend_params {
    cg_governor_t *gov;      /* the backend object and its buffers */
    const cg_log_t *log;     /* may be NULL */
    const cg_config_t *cfg;
    cg_bootstrap_t *bs;      /* the core's bootstrap (source, rank order) */
    cg_comm_t *comm;         /* the core's communicator (COLLGUARD) */
    int rank, size;          /* the core's, = the bootstrap's */
    cg_backend_mem_t mem;    /* the role: host tensors or CUDA tensors */
    const char *var;         /* the variable that chose it, for messages:
                                "HOROVOD_CPU_OPERATIONS" */
    /* A process set's core: its members' job ranks (size of them,
     * ascending; rank is the index here) and its id. NULL: every rank of
     * the job, rank and size the job's. MPI then runs on a communicator
     * of the members (MPI_Comm_create_group, collective over them only);
     * NCCL on one it makes over comm, as for the whole job. */
    const int *set_ranks;
    int set_id;
} cg_backend_params_t;

/* Collective over the core's ranks (every rank creates the same kinds in
 * the same order). kind CG_BACKEND_AUTO is resolved first. An error names
 * the variable, the value and what to change. */
cg_status_t cg_backend_create(cg_backend_kind_t kind,
                              const cg_backend_params_t *params,
                              cg_backend_t **be_p);
/* NULL is ignored. */
void cg_backend_destroy(cg_backend_t *be);
/* AUTO -> NCCL when the NCCL backend is built in, else COLLGUARD (the
 * engine first weighs NCCL's cost: cg_backend_auto_pending). */
cg_backend_kind_t cg_backend_resolve(cg_backend_kind_t kind);

/* The backends (hvd_backend.c dispatches to them). */
cg_status_t cg_backend_collguard_create(const cg_backend_params_t *params,
                                        cg_backend_t **be_p);
/* backend_mpi.c, built when CG_HAVE_MPI. */
cg_status_t cg_backend_mpi_create(const cg_backend_params_t *params,
                                  cg_backend_t **be_p);
/* backend_nccl.c, built with NCCL; hvd_backend.c calls it when compiled
 * with CG_HVD_NCCL_BACKEND=1 (core/CMakeLists.txt defines it beside the
 * line that adds backend_nccl.c), otherwise NCCL is "not built in". */
cg_status_t cg_backend_nccl_create(const cg_backend_params_t *params,
                                   cg_backend_t **be_p);
/* NCCL's communicator made now and used once; *took_p: the device memory
 * that took (the driver's free memory before and after). A failure for
 * memory is CG_ERR_NO_MEMORY; any failure leaves be broken. */
cg_status_t cg_backend_nccl_start(cg_backend_t *be, uint64_t *took_p);
/* Starts what a backend makes lazily, now: NCCL's communicator (through
 * cg_backend_nccl_start); nothing for the others (*took_p 0). */
cg_status_t cg_backend_start(cg_backend_t *be, uint64_t *took_p);
/* Whether kind AUTO waits for the first CUDA collective to choose
 * (NCCL built in): cg_hvd_gpu_auto_settle in core/engine then decides. */
bool cg_backend_auto_pending(cg_backend_kind_t kind);

#endif
