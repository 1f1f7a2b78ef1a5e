/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What NCCL's communicator costs in device memory, estimated before it
 * is made, so that AUTO (HOROVOD_GPU_OPERATIONS unset) can leave NCCL out
 * where it would not fit the governor's budget: NCCL's fixed cost on a
 * GPU (its kernels, work queues and proxy state; measured), plus the
 * receive buffers of each channel's connections to the ranks of this host
 * (P2P/SHM buffers live on the receiving GPU: one NCCL_BUFFSIZE for the
 * Simple protocol, and NCCL's fixed LL and LL128 sizes). CG_NCCL_COST
 * replaces the estimate with a measured figure. Pure arithmetic, so its
 * tests need no GPU. Layer: core/backend.
 */
#ifndef CG_CORE_BACKEND_NCCL_COST_H
#define CG_CORE_BACKEND_NCCL_COST_H

#include <stdint.h>

/* NCCL 2.28.3 on one H100 80GB (CUDA 13.0), one rank, the driver's free
 * memory before and after the communicator's creation and first
 * allreduce (integration/gpu/memguard, 2026-12-06): 494 MiB. */
#define CG_NCCL_FIXED_BYTES (494ull << 20)
/* NCCL's per-connection LL and LL128 buffers at their defaults (NCCL's
 * device.h: 8 lines x 512 threads x 8 steps x 16 B; 120 x 640 x 8 x 8 B). */
#define CG_NCCL_LL_BYTES 524288ull
#define CG_NCCL_LL128_BYTES 4915200ull
/* Channels assumed when NCCL_MAX_NCHANNELS is unset and the host has
 * other ranks (NCCL picks by topology; NVLink hosts use 16 and more). */
#define CG_NCCL_DEFAULT_CHANNELS 16
/* Receive-buffer sets per channel with peers on this host: the ring's
 * one and a tree's. */
#define CG_NCCL_CONNS_PER_CHANNEL 2

typedef struct cg_nccl_cost_in {
    uint64_t override_bytes; /* CG_NCCL_COST; 0: estimate */
    uint64_t buffsize;       /* the NCCL_BUFFSIZE NCCL will read */
    int channels;            /* the NCCL_MAX_NCHANNELS it will read; 0: unset */
    int local_peers;         /* other ranks on this host */
} cg_nccl_cost_in_t;

/* Bytes of device memory NCCL's communicator is expected to take. */
uint64_t cg_nccl_cost_estimate(const cg_nccl_cost_in_t *in);

#endif
