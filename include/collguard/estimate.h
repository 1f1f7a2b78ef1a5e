/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The memory estimate of data-parallel training per rank (what
 * `collguard-info --estimate` prints, and what the Python face's
 * estimate_memory will call): parameters, gradients, optimizer state,
 * collguard's fusion and staging buffers, NCCL's buffers and fixed cost,
 * against the memory of one device; and the largest fusion threshold and
 * NCCL_BUFFSIZE that fit. Activations are not estimated. Pure: no probe,
 * no allocation. Thread-safe.
 */
#ifndef COLLGUARD_ESTIMATE_H
#define COLLGUARD_ESTIMATE_H

#include <stdint.h>

#include "collguard/api.h"
#include "collguard/collguard.h"
#include "collguard/status.h"
#include "collguard/types.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Optimizer state per parameter, in the optimizer's dtype: sgd none,
 * momentum one buffer, adam and adamw two (exp_avg, exp_avg_sq). */
#define CG_EST_OPTIMIZER_MAP(X)                                               \
    X(CG_EST_SGD, "sgd")                                                      \
    X(CG_EST_MOMENTUM, "momentum")                                            \
    X(CG_EST_ADAM, "adam")                                                    \
    X(CG_EST_ADAMW, "adamw")
/* none: weights, gradients and optimizer state in the parameter dtype;
 * fp16/bf16: weights and gradients in that dtype plus fp32 master weights
 * and fp32 optimizer state (Apex O2 / DeepSpeed style). */
#define CG_EST_MIXED_MAP(X)                                                   \
    X(CG_EST_MIXED_NONE, "none")                                              \
    X(CG_EST_MIXED_FP16, "fp16")                                              \
    X(CG_EST_MIXED_BF16, "bf16")
/* nccl: device fusion buffer, NCCL's buffers and fixed cost; collguard and
 * mpi: device fusion buffer and a host staging buffer of the same size. */
#define CG_EST_BACKEND_MAP(X)                                                 \
    X(CG_EST_BACKEND_NCCL, "nccl")                                            \
    X(CG_EST_BACKEND_COLLGUARD, "collguard")                                  \
    X(CG_EST_BACKEND_MPI, "mpi")

#define CG__EST_ITEM(e, s) e,
typedef enum { CG_EST_OPTIMIZER_MAP(CG__EST_ITEM) } cg_est_optimizer_t;
typedef enum { CG_EST_MIXED_MAP(CG__EST_ITEM) } cg_est_mixed_t;
typedef enum { CG_EST_BACKEND_MAP(CG__EST_ITEM) } cg_est_backend_t;
#undef CG__EST_ITEM

/* NCCL's device memory per communicator at creation, whatever
 * NCCL_BUFFSIZE is (measured: a 1-rank communicator on an H200). */
#define CG_EST_NCCL_FIXED_BYTES (580ull << 20)
/* NCCL buffers per rank: NCCL_BUFFSIZE x up to 32 channels x 2
 * directions (the governor's model of NCCL_BUFFSIZE). */
#define CG_EST_NCCL_BUFFERS 64ull

typedef struct cg_estimate_params {
    uint64_t params;              /* parameter count (> 0) */
    cg_dtype_t dtype;             /* f32, f16, bf16 or f64 */
    cg_est_optimizer_t optimizer;
    cg_est_mixed_t mixed;         /* needs dtype f32 (the master dtype) */
    int ranks;                    /* >= 1 */
    cg_est_backend_t backend;
    uint64_t free_bytes, total_bytes; /* the device's memory now */
    uint64_t reserve_bytes;       /* CG_MEM_RESERVE, resolved */
    uint64_t fusion_threshold;    /* CG_FUSION_THRESHOLD (0: fusion off) */
    uint64_t fusion_min;          /* CG_FUSION_MIN */
    uint64_t nccl_buffsize;       /* NCCL_BUFFSIZE cap */
    uint64_t nccl_buffsize_min;   /* CG_NCCL_BUFFSIZE_MIN */
} cg_estimate_params_t;

typedef struct cg_estimate {
    uint64_t param_bytes;       /* the weights as the model holds them */
    uint64_t grad_bytes;
    uint64_t master_bytes;      /* fp32 master weights (mixed precision) */
    uint64_t optimizer_bytes;
    uint64_t model_bytes;       /* the four above */
    uint64_t fusion_bytes;      /* device fusion buffer (the threshold) */
    uint64_t staging_host_bytes; /* host staging (collguard, mpi) */
    uint64_t nccl_buffer_bytes; /* 64 x NCCL_BUFFSIZE (more than 1 rank) */
    uint64_t nccl_fixed_bytes;  /* CG_EST_NCCL_FIXED_BYTES (nccl) */
    uint64_t device_bytes;      /* all of the above on the device */
    int fits;                   /* device_bytes <= free - reserve */
    int64_t headroom_bytes;     /* free - reserve - device_bytes */
    /* Largest power-of-two sizes that fit beside the model state (0: none
     * fits above its floor; NCCL_BUFFSIZE 0 also for other backends):
     * NCCL_BUFFSIZE first, up to its cap, with the fusion floor kept
     * free; then the fusion threshold, up to CG_FUSION_THRESHOLD. */
    uint64_t fusion_fit;
    uint64_t nccl_buffsize_fit;
} cg_estimate_t;

/* CG_ERR_INVALID_PARAM (text in cg_last_error()) for a zero parameter
 * count, ranks < 1, a dtype other than f16/bf16/f32/f64, mixed precision
 * over a parameter dtype other than f32, or a value out of its list. */
CG_API cg_status_t cg_estimate(const cg_estimate_params_t *params,
                               cg_estimate_t *est);
/* The configured caps and floors of a context (CG_MEM_RESERVE resolved
 * against params->total_bytes, so set that first; CG_FUSION_THRESHOLD,
 * CG_FUSION_MIN, NCCL_BUFFSIZE, CG_NCCL_BUFFSIZE_MIN) into params, as
 * collguard-info --estimate and collguard.torch.estimate_memory use them. */
CG_API cg_status_t cg_ctx_estimate_params(cg_ctx_h ctx,
                                          cg_estimate_params_t *params);
/* Name lookups of the three lists ("adamw" -> CG_EST_ADAMW); -1 when
 * the name is not in the list. */
CG_API int cg_est_optimizer_parse(const char *name);
CG_API int cg_est_mixed_parse(const char *name);
CG_API int cg_est_backend_parse(const char *name);

#ifdef __cplusplus
}
#endif
#endif
