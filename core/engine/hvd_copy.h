/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The one place tensor bytes enter a fusion (or gather) buffer, and the
 * one place they leave it: a host memcpy, or the GPU data path's
 * asynchronous copy for a tensor in CUDA memory (e->w.device >= 0; the
 * caller syncs once per group, cg_hvd_gpu_sync). Used by fusion
 * (hvd_fusion.c) and the fused allgather (hvd_gather.c).
 * Layer: core/engine; calls the GPU data path (core/backend/hvd_gpu.h).
 */
#ifndef CG_CORE_ENGINE_HVD_COPY_H
#define CG_CORE_ENGINE_HVD_COPY_H

#include <string.h>

#include "core/backend/hvd_gpu.h"
#include "core/engine/hvd_core.h"

static inline void cg_hvd_copy_in(cg_hvd_core_t *core, const cg_hvd_entry_t *e,
                                  void *dst, const void *src, size_t bytes)
{
    if (e->w.device >= 0)
        cg_hvd_gpu_copy_in(core->gpu, dst, src, bytes);
    else
        memcpy(dst, src, bytes);
}

static inline cg_status_t cg_hvd_copy_out(cg_hvd_core_t *core,
                                          const cg_hvd_entry_t *e, void *dst,
                                          const void *src, size_t bytes)
{
    if (e->w.device >= 0)
        return cg_hvd_gpu_copy_out(core->gpu, dst, src, bytes);
    memcpy(dst, src, bytes);
    return CG_OK;
}

#endif
