/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The Horovod shim's core, as a C API: framework threads enqueue named
 * collectives on host buffers and get a request back; a background thread
 * negotiates across ranks which names are ready everywhere, fuses ready
 * allreduces (and allgathers, reducescatters) into a governed fusion
 * buffer and completes the requests. Grouped operations are negotiated,
 * run and completed as one unit; alltoall exchanges rows by splits.
 * The CPython module mpi_lib_v2 is a thin layer over these calls.
 * Collectives may run on process sets (subsets of the ranks, each with
 * its own communicator) and a rank out of data may join.
 * Thread-safe: every call here except cg_hvd_core_create/_destroy and
 * cg_hvd_process_set_add/_remove, which are collective over the ranks
 * and belong to one thread.
 */
#ifndef COLLGUARD_HVD_H
#define COLLGUARD_HVD_H

#include <stdint.h>

#include "collguard/api.h"
#include "collguard/collguard.h"
#include "collguard/status.h"
#include "collguard/types.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct cg_hvd_core *cg_hvd_core_h;
typedef struct cg_hvd_req *cg_hvd_req_h;

#define CG_HVD_NAME_MAX 200 /* bytes of a tensor name, NUL included */
#define CG_HVD_NDIM_MAX 8

typedef enum {
    CG_HVD_ALLREDUCE = 0,
    CG_HVD_BROADCAST = 1,
    CG_HVD_ALLGATHER = 2,
    CG_HVD_REDUCESCATTER = 3,
    CG_HVD_ALLTOALL = 4
} cg_hvd_op_type_t;
#define CG_HVD_OP_TYPES 5 /* entries of the per-op arrays in the stats */

enum {
    CG_HVD_REQUIRES_GRAD = 1u << 0, /* tensor.requires_grad */
    CG_HVD_IS_LEAF = 1u << 1        /* tensor.is_leaf (no grad_fn) */
};

/* Optional fields of cg_hvd_tensor_t (its field_mask). */
enum {
    CG_HVD_TENSOR_FIELD_DEVICE = 1u << 0,     /* device is set */
    CG_HVD_TENSOR_FIELD_PROCESS_SET = 1u << 1 /* process_set is set */
};

/* A named tensor. ndim 0 is a scalar (one element). output may equal
 * input (in place); allgather ignores output (see cg_hvd_allgather_result).
 * Both buffers must stay valid until the request is done. */
typedef struct cg_hvd_tensor {
    uint64_t field_mask; /* CG_HVD_TENSOR_FIELD_*; 0: host memory */
    const char *name;
    cg_dtype_t dtype;
    int ndim;
    int64_t shape[CG_HVD_NDIM_MAX];
    const void *input;
    void *output;
    unsigned flags; /* CG_HVD_REQUIRES_GRAD | CG_HVD_IS_LEAF */
    /* -1: host memory (the default); >= 0: device memory of that CUDA
     * device (one device per rank). Refused at enqueue with
     * CG_ERR_UNSUPPORTED in a build without CUDA, CG_ERR_NO_DEVICE where
     * no GPU is usable. The input must be ready at enqueue (synchronise
     * the stream that produced it: the shim copies on a non-blocking
     * stream of its own, which nothing orders after the default stream;
     * a cudaMemcpy from pageable host memory may return before its bytes
     * have landed, so synchronise after it too); the output is ready once
     * done. */
    int device;
    /* The process set the collective runs on (cg_hvd_process_set_add):
     * only its members negotiate and move the tensor, on the set's own
     * communicator. 0, or the field not set: every rank. An unknown id,
     * or a set this rank is not a member of, is CG_ERR_INVALID_PARAM at
     * enqueue. Every enqueue (and cg_hvd_enqueue_join) takes it. */
    int32_t process_set;
} cg_hvd_tensor_t;

/* Upper bounds, in seconds, of the collective latency histogram's
 * buckets (cg_hvd_stats_t.op_bucket), as an initialiser list. */
#define CG_HVD_OP_BUCKETS 16
#define CG_HVD_OP_BUCKET_BOUNDS_S                                             \
    {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,  \
     0.25, 0.5, 1.0, 2.5, 5.0, 10.0}

/* Counters of a core since create (read with cg_hvd_core_stats). */
typedef struct cg_hvd_stats {
    uint64_t cycles;             /* negotiation rounds run */
    uint64_t allreduce_calls;    /* collectives issued for allreduces */
    uint64_t allreduce_tensors;  /* tensors those calls completed */
    uint64_t fused_calls;        /* calls that carried > 1 tensor */
    uint64_t max_fused_tensors;  /* most tensors in one call */
    uint64_t duplicates;         /* enqueues coalesced onto a name */
    uint64_t mismatches;         /* names failed by cross-rank validation */
    uint64_t fusion_bytes;       /* fusion buffer agreed in the last cycle */
    uint64_t fused_bytes;        /* bytes the fused_calls carried */
    uint64_t cache_hits;         /* requests negotiated by a cache bit */
    uint64_t full_rounds;        /* cycles that exchanged request records */
    uint64_t stalls_warned;      /* stall warnings (rank 0 logs them) */
    uint64_t allgather_calls;    /* collectives issued for allgathers */
    uint64_t allgather_tensors;  /* tensors those calls completed */
    /* Background thread time, ns, added at the end of each cycle: agreeing
     * on what is ready (negotiation, response cache, stall checks) and
     * running it (copies, collectives, completion). */
    uint64_t negotiate_ns;
    uint64_t execute_ns;
    uint64_t broadcast_calls;    /* collectives issued for broadcasts */
    /* Payload bytes of this rank's tensors: allreduced, broadcast (the
     * tensor's size on every rank) and gathered (the whole result). */
    uint64_t allreduce_bytes, broadcast_bytes, allgather_bytes;
    uint64_t duplicates_refused; /* second enqueues of a name in flight
                                  * refused (policy error or different
                                  * request); coalesced: duplicates */
    uint64_t nonleaf_rejected;   /* broadcasts refused: grad, not a leaf */
    /* Collective latency by op (index cg_hvd_op_type_t): one fused group, a
     * tensor alone, a broadcast, a fused allgather or reducescatter, from the start of its
     * copies to its completion. op_bucket[op][b]: ops that took at most
     * CG_HVD_OP_BUCKET_BOUNDS_S[b] seconds and more than the bound before
     * (not cumulative); the last holds those above every bound. */
    uint64_t op_count[CG_HVD_OP_TYPES];
    uint64_t op_ns[CG_HVD_OP_TYPES];
    uint64_t op_bucket[CG_HVD_OP_TYPES][CG_HVD_OP_BUCKETS + 1];
    uint64_t reducescatter_calls;   /* collectives issued for them */
    uint64_t reducescatter_tensors; /* tensors those calls completed */
    uint64_t reducescatter_bytes;   /* input bytes of this rank's tensors */
    uint64_t grouped_calls;         /* groups enqueued (any op) */
    uint64_t alltoall_calls;        /* alltoalls run (one collective each) */
    uint64_t alltoall_bytes;        /* input bytes of this rank's tensors */
    /* CUDA tensors on COLLGUARD and MPI are staged through host memory in
     * chunks of stage_chunk_bytes, agreed in the last full negotiation
     * round as the least any rank's staging slots hold (0: no rank stages
     * CUDA tensors, or one has no slot and says so in its log);
     * stage_slot_bytes: what each of this rank's two slots holds. */
    uint64_t stage_chunk_bytes;
    uint64_t stage_slot_bytes;
    /* cg_hvd_wait calls that found their request not yet done, those of
     * them that busy-polled first and those that slept on a condition
     * variable (the rest saw it done while polling); spin_ns: the most a
     * wait polls, CG_SPIN_TIME or 0 where this rank's CPUs are too few
     * (its INFO line says why); spins that keep missing poll less. */
    uint64_t waits;
    uint64_t wait_sleeps;
    uint64_t spin_ns;
    uint64_t wait_spins;
    /* The backend of CUDA tensors: 0 COLLGUARD, 1 MPI, 2 NCCL, 3 not yet
     * chosen (AUTO decides at the first CUDA collective). AUTO weighed
     * nccl_estimate_bytes (this rank's, CG_NCCL_COST) against
     * nccl_budget_bytes (the smallest governor budget of any rank then);
     * nccl_create_bytes: device memory NCCL's creation and first use took
     * here; nccl_fallbacks: creations that failed for memory on some rank,
     * after which every rank stages CUDA tensors through COLLGUARD. */
    uint64_t gpu_backend;
    uint64_t nccl_estimate_bytes;
    uint64_t nccl_budget_bytes;
    uint64_t nccl_create_bytes;
    uint64_t nccl_fallbacks;
} cg_hvd_stats_t;

/* Collective over the ctx's bootstrap (ctx created with
 * CG_CTX_PARAM_BOOTSTRAP): makes the transport (CG_TRANSPORT) and the
 * communicator and starts the background thread (CG_CYCLE_TIME). ctx must
 * outlive the core. */
CG_API cg_status_t cg_hvd_core_create(cg_ctx_h ctx, cg_hvd_core_h *core_p);
/* Stops the cycle on every rank (a rank that destroys its core makes the
 * others stop at their next cycle), fails requests still pending with
 * CG_ERR_CANCELED and frees the core. Requests not yet released stay valid
 * until cg_hvd_release. */
CG_API void cg_hvd_core_destroy(cg_hvd_core_h core);
CG_API void cg_hvd_core_stats(cg_hvd_core_h core, cg_hvd_stats_t *stats);
CG_API int cg_hvd_core_rank(cg_hvd_core_h core);
CG_API int cg_hvd_core_size(cg_hvd_core_h core);

/* The timeline (a Chrome trace JSON file that rank 0 writes; see
 * CG_TIMELINE / HOROVOD_TIMELINE): start writing to path (truncated; the
 * file being written: only mark_cycles changes; another: the current one
 * is closed first), or stop and close it. Call on every rank, as Horovod;
 * ranks other than 0 only check. Any thread. CG_ERR_CONFIG when the core
 * was created without CG_TIMELINE set (DYNAMIC: nothing is written until
 * started); CG_ERR_IO when rank 0 cannot create the file. */
CG_API cg_status_t cg_hvd_timeline_start(cg_hvd_core_h core, const char *path,
                                         int mark_cycles);
CG_API cg_status_t cg_hvd_timeline_stop(cg_hvd_core_h core);

/* output = postscale * op over ranks of (prescale * input). A second
 * enqueue of a name in flight: see CG_DUPLICATE_POLICY. Errors at enqueue
 * (CG_ERR_INVALID_PARAM, text in cg_last_error()) return no request. */
CG_API cg_status_t cg_hvd_enqueue_allreduce(cg_hvd_core_h core,
                                            const cg_hvd_tensor_t *t,
                                            cg_redop_t op, double prescale,
                                            double postscale,
                                            cg_hvd_req_h *req_p);
/* output (input copied first on root when they differ) = root's input.
 * A tensor with CG_HVD_REQUIRES_GRAD and without CG_HVD_IS_LEAF is
 * rejected here. */
CG_API cg_status_t cg_hvd_enqueue_broadcast(cg_hvd_core_h core,
                                            const cg_hvd_tensor_t *t,
                                            int root, cg_hvd_req_h *req_p);
/* Concatenation of every rank's input along the first dimension (which
 * may differ per rank; the others and the dtype must match). */
CG_API cg_status_t cg_hvd_enqueue_allgather(cg_hvd_core_h core,
                                            const cg_hvd_tensor_t *t,
                                            cg_hvd_req_h *req_p);

/* This rank's slice of the reduced tensor, Horovod's split of the first
 * dimension: every rank's input has the same shape [d0, ...]; rank r gets
 * d0 / size rows, the first d0 % size ranks one more, in rank order. The
 * output (shape [rows, ...], see cg_hvd_reducescatter_rows) must not
 * overlap the input and may be NULL when this rank's slice is empty.
 * op CG_OP_SUM or CG_OP_AVG (Horovod's two), with prescale and postscale
 * as allreduce; dtype, shape, op and scales validated across ranks as
 * allreduce's. Fused (rank-major in the fusion buffer) with the other
 * ready reducescatters of the same device, dtype, op and scales. */
CG_API cg_status_t cg_hvd_enqueue_reducescatter(cg_hvd_core_h core,
                                                const cg_hvd_tensor_t *t,
                                                cg_redop_t op, double prescale,
                                                double postscale,
                                                cg_hvd_req_h *req_p);
/* Rank `rank`'s first row and row count of a first dimension of dim0
 * split over `size` ranks (dim0 >= 0, 0 <= rank < size). Pure. */
CG_API void cg_hvd_reducescatter_rows(int64_t dim0, int size, int rank,
                                      int64_t *start_p, int64_t *rows_p);

/* Grouped operations (Horovod's grouped_allreduce, grouped_allgather,
 * grouped_reducescatter): n tensors (1 to CG_HVD_GROUP_MAX, distinct
 * names) enqueued at once, each as the single-tensor call would, with one
 * request each in reqs[0..n). Every member is negotiated in the same
 * round on every rank (none starts before all are ready everywhere), they
 * fuse with each other where their op fuses, and all n requests complete
 * together, with one status: the first failure of any member (its text
 * in cg_hvd_error of every member). A member that mismatches across ranks
 * (including the group itself: size, order, names) fails the whole group
 * on every rank. All or nothing: an error at enqueue returns no request.
 * A member's name already in flight is refused whatever
 * CG_DUPLICATE_POLICY says. Grouped requests bypass the response cache.
 * Every member must name the same process set (else CG_ERR_INVALID_PARAM,
 * no request); the group runs on that set's core. */
#define CG_HVD_GROUP_MAX 65536
CG_API cg_status_t cg_hvd_enqueue_grouped_allreduce(
    cg_hvd_core_h core, const cg_hvd_tensor_t *ts, int n, cg_redop_t op,
    double prescale, double postscale, cg_hvd_req_h *reqs);
CG_API cg_status_t cg_hvd_enqueue_grouped_allgather(cg_hvd_core_h core,
                                                    const cg_hvd_tensor_t *ts,
                                                    int n, cg_hvd_req_h *reqs);
CG_API cg_status_t cg_hvd_enqueue_grouped_reducescatter(
    cg_hvd_core_h core, const cg_hvd_tensor_t *ts, int n, cg_redop_t op,
    double prescale, double postscale, cg_hvd_req_h *reqs);

/* Alltoall (Horovod's): this rank's input rows along the first dimension
 * go, in order, splits[0] rows to rank 0, splits[1] to rank 1, ...
 * (splits: one entry >= 0 per rank of t's process set, summing to
 * shape[0]; NULL: an equal split, shape[0] divisible by the set's size;
 * ranks are the set's); the result is what every rank sent here, in rank
 * order (cg_hvd_alltoall_result). ndim >= 1; the
 * first dimension may differ per rank, dtype and the others must match
 * (else every rank fails it, CG_ERR_MISMATCH). output is ignored. The
 * result (and a staged copy of a CUDA input) is governed memory; a rank
 * that cannot have it fails the tensor on every rank, and the job goes
 * on. Host tensors run on the host backend's alltoallv (COLLGUARD:
 * pairwise exchange, MPI: MPI_Alltoallv), CUDA tensors staged on the
 * engine's own. splits is copied. */
CG_API cg_status_t cg_hvd_enqueue_alltoall(cg_hvd_core_h core,
                                           const cg_hvd_tensor_t *t,
                                           const int64_t *splits,
                                           cg_hvd_req_h *req_p);
/* A done alltoall: the received data (host memory, owned by the request),
 * its first dimension and the rows received from each rank
 * (*recv_splits_p: one entry per rank of the set, owned by the request). Valid
 * until cg_hvd_release. CG_ERR_INVALID_PARAM if not a successfully done
 * alltoall. */
CG_API cg_status_t cg_hvd_alltoall_result(cg_hvd_req_h req,
                                          const void **data_p,
                                          int64_t *first_dim_p,
                                          const int64_t **recv_splits_p);

/* Process sets (Horovod's add_process_set / remove_process_set): both
 * are collective over every rank of the core, which must pass the same
 * arguments (checked: a difference fails the call on every rank with
 * CG_ERR_MISMATCH naming a rank that differs). add registers set `id`
 * (> 0, not in use) of the n ascending, distinct core ranks `ranks`; its
 * members make its bootstrap, communicator and backends among
 * themselves (MPI: a communicator of the members; NCCL: one over them at
 * the first CUDA collective) and a background thread of its own, so a
 * set's collectives never wait on ranks outside it and sets run side by
 * side. Its ranks are the members' order; a broadcast's root is still a
 * core (job) rank, as in Horovod. remove stops the set's thread on every
 * member, fails its pending requests (CG_ERR_CANCELED), frees what it
 * holds and makes the id unknown (it may be added again). The calling
 * thread blocks until every rank is done; not concurrently with each
 * other or cg_hvd_core_destroy. A set's counters are its own (not in
 * cg_hvd_core_stats) and it writes no timeline or metrics. */
CG_API cg_status_t cg_hvd_process_set_add(cg_hvd_core_h core, int32_t id,
                                          const int *ranks, int nranks);
CG_API cg_status_t cg_hvd_process_set_remove(cg_hvd_core_h core,
                                             int32_t id);
/* This rank's rank in process set id and the set's size (id 0: the
 * core's); an unknown id or a set this rank is not in fails as an
 * enqueue on it would (CG_ERR_INVALID_PARAM). */
CG_API cg_status_t cg_hvd_process_set_rank(cg_hvd_core_h core, int32_t id,
                                           int *rank_p, int *size_p);

/* Horovod's join on process set `process_set` (0: every rank): this rank
 * is out of data. Until every member has joined, allreduces the others
 * enqueue complete here without a request, this rank contributing zeros
 * (Average still divides by the set's size), and so do the members of a
 * grouped allreduce (the group completes together as ever); broadcasts,
 * allgathers, reducescatters and alltoalls, grouped or not, the others
 * enqueue while a rank is joined fail on every rank that enqueued them
 * (Horovod: not supported with join; a group fails whole), as do CUDA
 * allreduces. The request completes on every member once all joined;
 * cg_hvd_join_result then gives the last rank to join (a core rank; of
 * ranks joining in one cycle, the highest). Names are not cached while
 * any rank is joined. */
CG_API cg_status_t cg_hvd_enqueue_join(cg_hvd_core_h core,
                                       int32_t process_set,
                                       cg_hvd_req_h *req_p);
CG_API cg_status_t cg_hvd_join_result(cg_hvd_req_h req, int *last_rank_p);

/* Non-zero once the request is done (successfully or not). A NULL
 * request counts as done: cg_hvd_wait returns CG_ERR_INVALID_PARAM for it
 * and cg_hvd_error says it is NULL. */
CG_API int cg_hvd_poll(cg_hvd_req_h req);
/* Blocks until done; the request's status. */
CG_API cg_status_t cg_hvd_wait(cg_hvd_req_h req);
/* Why a done request failed ("" when it succeeded or is pending). Valid
 * until cg_hvd_release. */
CG_API const char *cg_hvd_error(cg_hvd_req_h req);
/* A done allgather: the gathered data (owned by the request) and its
 * first dimension. CG_ERR_INVALID_PARAM if not a done allgather. */
CG_API cg_status_t cg_hvd_allgather_result(cg_hvd_req_h req,
                                           const void **data_p,
                                           int64_t *first_dim_p);
/* Frees the request; a pending one is freed when it completes. */
CG_API void cg_hvd_release(cg_hvd_req_h req);

#ifdef __cplusplus
}
#endif
#endif
