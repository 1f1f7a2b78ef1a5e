/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The batched copies of the shim's CUDA path, between hvd_gpu.c (which
 * queues them) and hvd_gpu_batch.cu (the kernel): plain C, so the CUDA
 * compiler reads it too. Layer: core/backend.
 */
#ifndef CG_CORE_BACKEND_HVD_GPU_BATCH_IMPL_H
#define CG_CORE_BACKEND_HVD_GPU_BATCH_IMPL_H

#include <stddef.h>

#include "collguard/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Copies of at most CG__GPU_BATCH_BYTES between device buffers are
 * batched (a kernel's block copies one); larger ones, and any that touch
 * pinned host memory, go to the copy engine (cudaMemcpyAsync). */
#define CG__GPU_BATCH_MAX 1024
#define CG__GPU_BATCH_BYTES (256u << 10)

typedef struct cg__gpu_copy {
    const void *src;
    void *dst;
    size_t len;
} cg__gpu_copy_t;

/* Passed by value as the kernel's parameter (24 KiB + 8 B). */
typedef struct cg__gpu_batch {
    cg__gpu_copy_t c[CG__GPU_BATCH_MAX];
    int n;
} cg__gpu_batch_t;

/* hvd_gpu_batch.cu: one kernel making b's copies on stream (a
 * cudaStream_t); CG_ERR_INTERNAL when the launch fails. */
cg_status_t cg__gpu_batch_launch(const cg__gpu_batch_t *b, void *stream);

#ifdef __cplusplus
}
#endif
#endif
