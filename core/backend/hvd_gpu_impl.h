/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The CUDA state of the Horovod shim's core, shared by hvd_gpu.c (device,
 * stream, buffers, copies), hvd_gpu_batch.cu (many small copies in one
 * kernel), hvd_gpu_slots.c (the staging slots and the agreed chunk),
 * hvd_gpu_pipe.c (the two-slot staging pipeline) and hvd_gpu_stage.c
 * (collectives staged through pinned host memory).
 * Private to those files and backend_nccl.c.
 * Layer: core/backend.
 */
#ifndef CG_CORE_HVD_GPU_IMPL_H
#define CG_CORE_HVD_GPU_IMPL_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "cg_build.h"
#include "core/base/log.h"
#include "core/governor/governor.h"
#include "core/backend/hvd_gpu.h"
#include "core/backend/hvd_gpu_batch_impl.h"

#define CG_HVD_GPU_ALIGN 256 /* cudaMalloc's own alignment */
/* Waits on the GPU poll without sleeping this long first (a sleep costs
 * ~60 us of timer slack, more than most copies take). */
#define CG_HVD_GPU_SPIN_NS 200000ull

struct cg_hvd_gpu {
    cg_governor_t *gov;
    const cg_log_t *log;
    int rank;
    uint64_t timeout_ns;  /* CG_TIMEOUT */
    size_t chunk_min;     /* CG_CHUNK_MIN: the staging slots' floor */
    size_t fusion_min;    /* CG_FUSION_MIN */
    bool emulate;         /* CG_GPU_STAGE_EMULATE: slots offered without
                           * CUDA tensors (testing) */
    bool fault_staging;   /* CG_FAULT_STAGING: slots refused (testing) */
    atomic_int device;    /* -1 until the first CUDA tensor picks it */
    atomic_int ndev;      /* devices seen (-1: not asked yet) */

    /* Background thread only. */
    void *stream;         /* cudaStream_t, non-blocking */
    void *fbuf;           /* the CUDA fusion buffer: dbuf or pbuf */
    size_t fbuf_len;
    size_t want;          /* the size asked when fbuf was chosen */
    void *dbuf;           /* device memory (CG_MEM_CAT_FUSION) */
    size_t dbuf_len;
    void *pbuf;           /* pinned fallback (FUSION), kept once made */
    size_t pbuf_len;
    /* The staging slots (hvd_gpu_slots.c), CG_MEM_CAT_STAGING: sized at
     * cycle start to the governor's chunk, both stage_len bytes, from
     * stage_mem (pinned; the governor's own allocator where no CUDA
     * stream exists, as under CG_GPU_STAGE_EMULATE). */
    void *stage;          /* slot 0 */
    size_t stage_len;
    const cg_mem_backend_t *stage_mem;
    size_t stage_want;    /* the governor's chunk they were sized for (or
                           * failed at: tried again once it moves) */
    bool stage_failed;    /* no slot could be had at stage_want */
    bool stage2_failed;   /* no second slot of this size: not again */
    char stage_why[256];  /* why stage_failed */
    /* The chunk every rank agreed on in the last full round (the least
     * slot offered; SIZE_MAX: no rank stages, 0: agreed_rank has no slot):
     * every staged collective of the cycle cuts at it. */
    size_t agreed;
    int agreed_rank;
    /* The staging pipeline (hvd_gpu_pipe.c): a second slot, a stream for
     * host-to-device copies beside `stream` (device-to-host), and per
     * slot the events of its last copy in and out. */
    atomic_bool pipelining; /* CG_GPU_STAGE_PIPELINE (a benchmark may flip it) */
    int pipe_state;       /* 0 not tried, 1 ready, -1 unavailable */
    void *stage2;         /* slot 1, stage_len bytes */
    void *stream_out;
    void *ev_in[2], *ev_out[2];
    uint64_t pipelined;   /* collectives staged through the pipeline */
    cg_status_t failed;   /* first failed copy (CG_OK: none) */
    char failed_msg[256];
    bool batching;        /* CG_GPU_BATCH_COPIES (and a kernel built) */
    uint64_t launches;    /* batched-copy kernels launched */
    uint64_t batched;     /* copies they made */
    cg__gpu_batch_t batch; /* copies queued, launched at the next flush */
    /* The backend whose allreduce is queued on `stream` behind the
     * fusion copies (NULL: none); cg_hvd_gpu_sync waits through it. */
    cg_backend_t *queued;
    uint64_t queued_ops;  /* allreduces queued so (statistics) */
};

/* Sets the device and creates the stream the first time. */
cg_status_t cg__hvd_gpu_start(cg_hvd_gpu_t *gpu);
/* Launches the queued batch of copies on `stream` (hvd_gpu.c). */
cg_status_t cg__hvd_gpu_flush(cg_hvd_gpu_t *gpu);
/* True when p lies in the pinned fallback buffer (host-accessible). */
bool cg__hvd_gpu_host_ptr(const cg_hvd_gpu_t *gpu, const void *p);

/* Slot 0 for a collective of this rank alone (the NCCL backend's host
 * scaling): the slots sized at cycle start, else made now at the
 * governor's chunk. */
cg_status_t cg__hvd_gpu_stage_ensure(cg_hvd_gpu_t *gpu);

/* hvd_gpu_slots.c, slots from mem (pinned, or NULL: the governor's own).
 * Fit: kept while they suit the governor's chunk, made anew once it moved
 * and no copy runs (not again at a chunk they failed at); returns what
 * slot 0 holds (0: none). Make: made at the governor's chunk when there
 * are none. Unusable: this rank cannot have slots now (its GPU did not
 * start; cg_last_error() says why), kept for the collectives' errors. */
size_t cg__hvd_gpu_slots_fit(cg_hvd_gpu_t *gpu, const cg_mem_backend_t *mem);
cg_status_t cg__hvd_gpu_slots_make(cg_hvd_gpu_t *gpu,
                                   const cg_mem_backend_t *mem);
void cg__hvd_gpu_slots_unusable(cg_hvd_gpu_t *gpu);
/* The pipeline's second slot (stage_len bytes, from stage_mem), made
 * when missing unless that failed at this size; false when there is none
 * (the first slot must exist). */
bool cg__hvd_gpu_stage2_ensure(cg_hvd_gpu_t *gpu);
/* The agreed chunk in elements of dsize for a staged `what` every rank
 * cuts alike (*n_p, at least one), or the error every rank returns alike
 * (a rank with no slot, no chunk agreed); `slot`: this rank stages
 * through its slots (not the pinned fusion buffer), which must hold the
 * chunk. */
cg_status_t cg__hvd_gpu_stage_step(const cg_hvd_gpu_t *gpu, size_t dsize,
                                   bool slot, const char *what, size_t *n_p);
/* Frees both slots (at destroy). */
void cg__hvd_gpu_slots_free(cg_hvd_gpu_t *gpu);

/* hvd_gpu_pipe.c. The pipeline of a staged collective: chunk i+1 copied
 * to the host (slot (i+1)&1, on `stream`) while the host works on chunk
 * i in slot i&1, and chunk i copied back (on stream_out) while the host
 * works on chunk i+1. Background thread only. */
/* True when the pipeline can be used (the second slot allocated, and the
 * stream and events, set up the first time); false: stage chunk by
 * chunk. */
bool cg__gpu_pipe_ready(cg_hvd_gpu_t *gpu);
void *cg__gpu_pipe_slot(const cg_hvd_gpu_t *gpu, int slot);
/* Device to slot, after the slot's last copy out has finished. */
cg_status_t cg__gpu_pipe_in(cg_hvd_gpu_t *gpu, int slot, const void *src,
                            size_t bytes);
/* Slot to device. */
cg_status_t cg__gpu_pipe_out(cg_hvd_gpu_t *gpu, int slot, void *dst,
                             size_t bytes);
/* Host waits for the slot's last copy in (in) or out (!in). */
cg_status_t cg__gpu_pipe_wait(cg_hvd_gpu_t *gpu, int slot, bool in);
/* Host waits for both streams. */
cg_status_t cg__gpu_pipe_end(cg_hvd_gpu_t *gpu);
/* True when no copy is queued or running on either stream (asked, not
 * waited for): the slots may be freed. */
bool cg__gpu_pipe_idle(cg_hvd_gpu_t *gpu);
/* Waits for h, a cudaStream_t or (is_event) a cudaEvent_t: spins
 * CG_HVD_GPU_SPIN_NS, then naps, up to CG_TIMEOUT; errors say "CUDA
 * <what> on device N ...". cg_hvd_gpu_sync waits its stream with it. */
cg_status_t cg__gpu_poll(cg_hvd_gpu_t *gpu, bool is_event, void *h,
                         const char *what);
void cg__gpu_pipe_destroy(cg_hvd_gpu_t *gpu);


#endif
