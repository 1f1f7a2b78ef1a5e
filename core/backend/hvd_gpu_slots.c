/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The staging slots of the Horovod shim's CUDA path and the chunk staged
 * collectives cut at. At each cycle's start a rank that stages CUDA
 * tensors through a host backend sizes its two slots (pinned,
 * CG_MEM_CAT_STAGING, both the same size) to the governor's chunk,
 * anew when that chunk moved, and offers what one slot holds;
 * negotiation agrees on the least offer over ranks, and every staged
 * collective of the cycle cuts at it, so ranks with different memory
 * (or CG_CHUNK_SIZE) still cut alike. A rank without a slot offers 0 and
 * the staged collectives then fail on every rank with one message.
 * hvd_gpu.c decides whether a rank stages and where the slots' memory
 * comes from. Background thread only. Layer: core/backend; calls the
 * governor and hvd_gpu_pipe.c (whether copies still run).
 */
#include "core/backend/hvd_gpu_impl.h"

#include <stdio.h>

#include "core/base/error.h"
#include "core/base/parse.h"

/* The governor's chunk as a slot size: a multiple of CG_HVD_GPU_ALIGN
 * (so every dtype divides every rank's offer and their minimum). */
static size_t cg__want(const cg_hvd_gpu_t *gpu)
{
    uint64_t c = cg_governor_chunk_size(gpu->gov);

    c -= c % CG_HVD_GPU_ALIGN;
    return c < CG_HVD_GPU_ALIGN ? CG_HVD_GPU_ALIGN : (size_t)c;
}

void cg__hvd_gpu_slots_free(cg_hvd_gpu_t *gpu)
{
    cg_governor_free_on(gpu->gov, gpu->stage_mem, CG_MEM_CAT_STAGING,
                        gpu->stage, gpu->stage_len);
    cg_governor_free_on(gpu->gov, gpu->stage_mem, CG_MEM_CAT_STAGING,
                        gpu->stage2, gpu->stage_len);
    gpu->stage = gpu->stage2 = NULL;
    gpu->stage_len = 0;
}

bool cg__hvd_gpu_stage2_ensure(cg_hvd_gpu_t *gpu)
{
    char b[32];
    size_t got;
    void *p;

    if (gpu->stage2 != NULL || gpu->stage == NULL || gpu->stage2_failed ||
        !atomic_load(&gpu->pipelining))
        return gpu->stage2 != NULL;
    /* Exactly slot 0's size: the pipeline alternates them chunk by chunk. */
    if (cg_governor_alloc_shrink_on(gpu->gov, gpu->stage_mem,
                                    CG_MEM_CAT_STAGING, gpu->stage_len,
                                    gpu->stage_len, CG_HVD_GPU_ALIGN,
                                    "CG_CHUNK_MIN", &p, &got) != CG_OK) {
        cg_info(gpu->log, "staging pipeline off at %s slots: no memory for "
                "its second slot (%s); chunks are staged one at a time",
                cg_format_size(gpu->stage_len, b, sizeof(b)),
                cg_last_error());
        gpu->stage2_failed = true;
        return false;
    }
    gpu->stage2 = p;
    return true;
}

/* Both slots from mem for the governor's chunk want (slot 0 down to
 * CG_CHUNK_MIN), none held before. */
static cg_status_t cg__alloc(cg_hvd_gpu_t *gpu, const cg_mem_backend_t *mem,
                             size_t want)
{
    size_t floor = gpu->chunk_min < want ? gpu->chunk_min : want, got;
    char b[2][32];
    void *p;
    cg_status_t st;

    floor -= floor % CG_HVD_GPU_ALIGN;
    floor = floor < CG_HVD_GPU_ALIGN ? CG_HVD_GPU_ALIGN : floor;
    gpu->stage_want = want;
    gpu->stage2_failed = false;
    if (gpu->fault_staging)
        st = cg_error_set(CG_ERR_NO_MEMORY, "staging buffer: refused "
                          "(CG_FAULT_STAGING=1)");
    else
        st = cg_governor_alloc_shrink_on(gpu->gov, mem, CG_MEM_CAT_STAGING,
                                         want, floor, CG_HVD_GPU_ALIGN,
                                         "CG_CHUNK_MIN", &p, &got);
    if (st != CG_OK) {
        if (!gpu->stage_failed) /* once, not every cycle it stays so */
            cg_error(gpu->log, "rank %d: no staging slot for CUDA tensors: "
                     "%s", gpu->rank, cg_last_error());
        snprintf(gpu->stage_why, sizeof(gpu->stage_why), "%s",
                 cg_last_error());
        gpu->stage_failed = true;
        return cg_error_set(st, "%s", gpu->stage_why);
    }
    if (gpu->stage_failed)
        cg_info(gpu->log, "rank %d: staging slot for CUDA tensors available "
                "again", gpu->rank);
    gpu->stage_failed = false;
    gpu->stage = p;
    gpu->stage_len = got;
    gpu->stage_mem = mem;
    (void)cg__hvd_gpu_stage2_ensure(gpu);
    cg_debug(gpu->log, "staging slots: %s each (governor's chunk %s)%s",
             cg_format_size(got, b[0], sizeof(b[0])),
             cg_format_size(want, b[1], sizeof(b[1])),
             mem == NULL ? " in host memory" : "");
    return CG_OK;
}

size_t cg__hvd_gpu_slots_fit(cg_hvd_gpu_t *gpu, const cg_mem_backend_t *mem)
{
    size_t want = cg__want(gpu);

    if (gpu->stage != NULL && gpu->stage_mem == mem &&
        (want == gpu->stage_want || want == gpu->stage_len)) {
        gpu->stage_want = want;
        (void)cg__hvd_gpu_stage2_ensure(gpu);
        return gpu->stage_len;
    }
    if (gpu->stage == NULL && gpu->stage_failed && want == gpu->stage_want)
        return 0; /* failed at this size: again once the chunk moves */
    if (gpu->stage != NULL && !cg__gpu_pipe_idle(gpu)) {
        /* A failed collective's copies still run: next cycle. */
        cg_debug(gpu->log, "staging slots kept this cycle: copies through "
                 "them still run");
        return gpu->stage_len;
    }
    cg__hvd_gpu_slots_free(gpu);
    return cg__alloc(gpu, mem, want) == CG_OK ? gpu->stage_len : 0;
}

cg_status_t cg__hvd_gpu_slots_make(cg_hvd_gpu_t *gpu,
                                   const cg_mem_backend_t *mem)
{
    char why[256];

    if (gpu->stage != NULL)
        return CG_OK;
    if (cg__alloc(gpu, mem, cg__want(gpu)) == CG_OK)
        return CG_OK;
    snprintf(why, sizeof(why), "%s", cg_last_error());
    return cg_error_set(CG_ERR_NO_MEMORY, "staging slot for CUDA tensors: "
                        "%s", why);
}

void cg__hvd_gpu_slots_unusable(cg_hvd_gpu_t *gpu)
{
    if (!gpu->stage_failed)
        cg_error(gpu->log, "rank %d: no staging slot for CUDA tensors (%s)",
                 gpu->rank, cg_last_error());
    snprintf(gpu->stage_why, sizeof(gpu->stage_why), "%s", cg_last_error());
    gpu->stage_failed = true;
    gpu->stage_want = 0; /* no size tried: the next fit tries */
}

void cg_hvd_gpu_stage_agree(cg_hvd_gpu_t *gpu, size_t chunk, int rank)
{
    gpu->agreed = chunk;
    gpu->agreed_rank = rank;
}

size_t cg_hvd_gpu_stage_slot(const cg_hvd_gpu_t *gpu)
{
    return gpu->stage_len;
}

cg_status_t cg__hvd_gpu_stage_step(const cg_hvd_gpu_t *gpu, size_t dsize,
                                   bool slot, const char *what, size_t *n_p)
{
    size_t c = gpu->agreed;

    if (c == 0)
        return cg_error_set(CG_ERR_NO_MEMORY, "staged %s of CUDA memory: "
                            "rank %d has no staging slot (%s), so the ranks "
                            "have no chunk to cut at; every rank fails it, "
                            "and staged collectives run again once that "
                            "rank has one", what, gpu->agreed_rank,
                            gpu->agreed_rank == gpu->rank
                                ? gpu->stage_why
                                : "it could not allocate even CG_CHUNK_MIN "
                                  "of pinned host memory, or not start its "
                                  "GPU; its log says which");
    if (c == SIZE_MAX)
        return cg_error_set(CG_ERR_INTERNAL, "staged %s of CUDA memory on "
                            "rank %d: no rank offered a staging chunk this "
                            "cycle", what, gpu->rank);
    if (slot && gpu->stage_len < c)
        return cg_error_set(CG_ERR_INTERNAL, "staged %s of CUDA memory on "
                            "rank %d: its staging slot holds %zu bytes, less "
                            "than the chunk the ranks agreed on (%zu)", what,
                            gpu->rank, gpu->stage_len, c);
    *n_p = c / dsize > 0 ? c / dsize : 1;
    return CG_OK;
}
