/* SPDX-License-Identifier: Apache-2.0 */
/*
 * CUDA memory of the Horovod shim's core: the enqueue-time device check,
 * the governed CUDA fusion buffer (device memory, shrunk on allocation
 * failure, pinned host memory when even CG_FUSION_MIN cannot be had),
 * two pinned staging slots for host backends sized each cycle to the
 * governor's chunk (the chunk they cut at agreed over ranks in
 * negotiation), copies on a dedicated non-blocking stream, and
 * collectives on CUDA buffers (NCCL direct, host backends staged). Built
 * without CUDA, every entry point still exists and device tensors are
 * refused.
 * Background thread only, except cg_hvd_gpu_check. Layer: core/backend.
 */
#ifndef CG_CORE_HVD_GPU_H
#define CG_CORE_HVD_GPU_H

#include <stdbool.h>
#include <stddef.h>

#include "collguard/status.h"
#include "collguard/types.h"
#include "core/backend/hvd_backend.h"

typedef struct cg_hvd_gpu cg_hvd_gpu_t;

/* At core create: the state, no CUDA call yet (a CPU-only job on a GPU
 * node never creates a CUDA context). Memory from gov; cfg gives the
 * timeout, the chunk and fusion floors and the testing switch
 * CG_GPU_STAGE_EMULATE. */
cg_status_t cg_hvd_gpu_create(cg_governor_t *gov, const cg_log_t *log,
                              int rank, const cg_config_t *cfg,
                              cg_hvd_gpu_t **gpu_p);
/* Frees the buffers and the stream. NULL is a no-op. */
void cg_hvd_gpu_destroy(cg_hvd_gpu_t *gpu);

/* Any thread, at enqueue of a tensor on CUDA device `device` (>= 0):
 * CG_OK when this build has CUDA, the device exists and it is the one
 * device this process uses (the first CUDA tensor picks it); otherwise
 * CG_ERR_UNSUPPORTED (built without CUDA), CG_ERR_NO_DEVICE (no usable
 * GPU) or CG_ERR_INVALID_PARAM, with what/name in the message. */
cg_status_t cg_hvd_gpu_check(cg_hvd_gpu_t *gpu, const char *what,
                             const char *name, int device);

/* Batched copies so far: kernel launches and the copies they made. */
void cg_hvd_gpu_batch_stats(const cg_hvd_gpu_t *gpu, uint64_t *launches,
                            uint64_t *copies);
/* NCCL allreduces queued behind the fusion copies so far (statistics). */
uint64_t cg_hvd_gpu_queued(const cg_hvd_gpu_t *gpu);
/* Staged collectives that ran through the two-slot pipeline. */
uint64_t cg_hvd_gpu_pipelined(const cg_hvd_gpu_t *gpu);
/* Turns the pipeline on or off from now on (stage_bench alternates the
 * two in one run); CG_GPU_STAGE_PIPELINE sets it at creation. */
void cg_hvd_gpu_set_pipelining(cg_hvd_gpu_t *gpu, bool on);

/* True once a CUDA tensor was enqueued on this rank. */
bool cg_hvd_gpu_active(const cg_hvd_gpu_t *gpu);

/* Before negotiation, with the host fusion size `want` of this cycle:
 * when active, makes sure the stream exists and the CUDA fusion buffer
 * holds up to `want` bytes, and returns its size (0: none could be had);
 * when not active, returns want. The cycle offers min(host, this). */
size_t cg_hvd_gpu_prepare(cg_hvd_gpu_t *gpu, size_t want);
/* Before negotiation, after cg_hvd_gpu_prepare (every request of the
 * cycle is in the owned list, nothing of the last cycle in flight):
 * where this rank stages CUDA tensors through a host backend (`staged`:
 * the core's CUDA backend is COLLGUARD or MPI, and a CUDA tensor was
 * enqueued; or CG_GPU_STAGE_EMULATE), sizes its two staging slots to the
 * governor's chunk (made, or made anew when that chunk moved and no
 * copy runs: smaller frees pinned memory under pressure, larger regrows
 * it; down to CG_CHUNK_MIN on allocation failure) and returns what each
 * slot holds, this rank's staging offer (0: no slot could be had; the
 * reason is logged once and kept for the collectives' errors). A rank
 * that stages nothing returns SIZE_MAX (no constraint); slots it made
 * for its own use are still fitted. */
size_t cg_hvd_gpu_stage_prepare(cg_hvd_gpu_t *gpu, bool staged);
/* After the full round: the chunk every rank agreed on (the least offer)
 * and the lowest rank that offered it. The staged collectives cut at it
 * until the next agreement; 0 fails them on every rank alike, naming
 * that rank; SIZE_MAX (no rank stages) fails them as a broken invariant. */
void cg_hvd_gpu_stage_agree(cg_hvd_gpu_t *gpu, size_t chunk, int rank);
/* Bytes each staging slot of this rank holds (0: none). */
size_t cg_hvd_gpu_stage_slot(const cg_hvd_gpu_t *gpu);

/* The CUDA fusion buffer (device memory, or pinned host memory after a
 * fallback; either is usable by CUDA copies and NCCL). */
void *cg_hvd_gpu_fbuf(const cg_hvd_gpu_t *gpu);
size_t cg_hvd_gpu_fbuf_len(const cg_hvd_gpu_t *gpu);

/* Queues a copy of bytes on the stream (any direction: cudaMemcpyDefault). */
cg_status_t cg_hvd_gpu_copy(cg_hvd_gpu_t *gpu, void *dst, const void *src,
                            size_t bytes);
/* Waits for the queued copies (bounded by CG_TIMEOUT). */
cg_status_t cg_hvd_gpu_sync(cg_hvd_gpu_t *gpu);
/* The fusion code's copies of CUDA tensors. Into the CUDA fusion buffer
 * the copy is queued (the collective waits for it); anywhere else it is
 * waited for at once. A failure is kept and returned by the next
 * collective (cg_hvd_gpu_allreduce/_broadcast), which marks its backend
 * broken: a rank whose CUDA copies fail cannot keep in step. */
void cg_hvd_gpu_copy_in(cg_hvd_gpu_t *gpu, void *dst, const void *src,
                        size_t bytes);
/* The failure cg_hvd_gpu_copy_in kept (its message in cg_last_error()),
 * or CG_OK: for callers that run no GPU collective after their copies
 * (allgather). */
cg_status_t cg_hvd_gpu_copy_status(const cg_hvd_gpu_t *gpu);
/* Out of the fusion buffer into a tensor: queued; the caller waits with
 * cg_hvd_gpu_sync before completing the requests. The status of queueing
 * the copy (or of a kept failure). */
cg_status_t cg_hvd_gpu_copy_out(cg_hvd_gpu_t *gpu, void *dst,
                                const void *src, size_t bytes);

/* A collective on CUDA buffers through backend be: NCCL runs on them;
 * host backends (COLLGUARD, MPI) run chunk by chunk (the agreed chunk,
 * cg_hvd_gpu_stage_agree, the same on every rank) through the staging
 * slots, or straight on the pinned fusion buffer. */
cg_status_t cg_hvd_gpu_allreduce(cg_hvd_gpu_t *gpu, cg_backend_t *be,
                                 const void *send, void *recv, size_t count,
                                 cg_dtype_t dt, cg_redop_t op,
                                 double prescale, double postscale);
/* The same, but where the NCCL backend applies the factors itself its
 * allreduce is only queued on the copies' stream (behind the copies into
 * the fusion buffer): the caller queues the copies out and waits for all
 * with cg_hvd_gpu_sync, also when something failed in between. Elsewhere
 * it has finished on return, as cg_hvd_gpu_allreduce. */
cg_status_t cg_hvd_gpu_allreduce_queued(cg_hvd_gpu_t *gpu, cg_backend_t *be,
                                        const void *send, void *recv,
                                        size_t count, cg_dtype_t dt,
                                        cg_redop_t op, double prescale,
                                        double postscale);
cg_status_t cg_hvd_gpu_broadcast(cg_hvd_gpu_t *gpu, cg_backend_t *be,
                                 void *buf, size_t count, cg_dtype_t dt,
                                 int root);

/* buf[i] *= factor by the host kernels' rules (core/reduce/reduce.h), through
 * the staging slots (this rank's chunk: nothing crosses ranks): for the
 * NCCL backend where NCCL has no exact op. */
cg_status_t cg_hvd_gpu_host_scale(cg_hvd_gpu_t *gpu, void *buf,
                                  size_t count, cg_dtype_t dt, double factor);

/* The CUDA device this process uses (-1 before the first CUDA tensor). */
int cg_hvd_gpu_device(const cg_hvd_gpu_t *gpu);

/* True when the NCCL backend applies prescale/postscale of (dt, op)
 * itself (floats with sum or average, folded into one NCCL op); for the
 * other pairs cg_hvd_gpu_allreduce scales on the host around it. */
bool cg_backend_nccl_scales(cg_dtype_t dt, cg_redop_t op, int nranks);

#endif
