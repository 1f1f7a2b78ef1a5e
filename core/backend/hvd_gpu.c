/* SPDX-License-Identifier: Apache-2.0 */
/*
 * CUDA memory of the Horovod shim's core: the device check at enqueue,
 * the lazily started device state (cudaSetDevice, a non-blocking stream),
 * the governed CUDA fusion buffer (cudaMalloc through the governor's
 * accounting, shrink-and-retry to CG_FUSION_MIN, then pinned host memory
 * allocated once and kept), copies, and whether this rank stages and
 * where its staging slots' memory comes from (the slots themselves are
 * hvd_gpu_slots.c's, the staged collectives hvd_gpu_stage.c's). Layer:
 * core/backend; calls the governor and the CUDA runtime (only when
 * CG_HAVE_CUDA).
 */
#include "core/backend/hvd_gpu_impl.h"

#include <string.h>
#include <time.h>

#include "core/base/clock.h"
#include "core/base/error.h"
#include "core/base/parse.h"
#include "core/governor/probe.h"

cg_status_t cg_hvd_gpu_create(cg_governor_t *gov, const cg_log_t *log,
                              int rank, const cg_config_t *cfg,
                              cg_hvd_gpu_t **gpu_p)
{
    cg_hvd_gpu_t *gpu;
    cg_status_t st;

    st = cg_governor_alloc(gov, CG_MEM_CAT_CONTROL, sizeof(*gpu),
                           (void **)&gpu);
    if (st != CG_OK)
        return st;
    memset(gpu, 0, sizeof(*gpu));
    gpu->gov = gov;
    gpu->log = log;
    gpu->rank = rank;
    gpu->timeout_ns = cfg->timeout_ns;
    gpu->chunk_min = (size_t)cfg->chunk_min;
    gpu->fusion_min = cfg->fusion_min;
    gpu->emulate = cfg->gpu_stage_emulate;
    gpu->fault_staging = cfg->fault_staging;
    gpu->agreed = SIZE_MAX; /* nothing agreed before the first round */
    gpu->agreed_rank = -1;
    gpu->batching = cfg->gpu_batch_copies;
    atomic_init(&gpu->pipelining, cfg->gpu_stage_pipeline);
    atomic_init(&gpu->device, -1);
    atomic_init(&gpu->ndev, -1);
    *gpu_p = gpu;
    return CG_OK;
}

void cg_hvd_gpu_batch_stats(const cg_hvd_gpu_t *gpu, uint64_t *launches,
                            uint64_t *copies)
{
    *launches = gpu->launches;
    *copies = gpu->batched;
}

uint64_t cg_hvd_gpu_queued(const cg_hvd_gpu_t *gpu)
{
    return gpu->queued_ops;
}

uint64_t cg_hvd_gpu_pipelined(const cg_hvd_gpu_t *gpu)
{
    return gpu->pipelined;
}

void cg_hvd_gpu_set_pipelining(cg_hvd_gpu_t *gpu, bool on)
{
    atomic_store(&gpu->pipelining, on);
}

bool cg_hvd_gpu_active(const cg_hvd_gpu_t *gpu)
{
    return atomic_load(&((cg_hvd_gpu_t *)gpu)->device) >= 0;
}

int cg_hvd_gpu_device(const cg_hvd_gpu_t *gpu)
{
    return atomic_load(&((cg_hvd_gpu_t *)gpu)->device);
}

void *cg_hvd_gpu_fbuf(const cg_hvd_gpu_t *gpu)
{
    return gpu->fbuf;
}

size_t cg_hvd_gpu_fbuf_len(const cg_hvd_gpu_t *gpu)
{
    return gpu->fbuf_len;
}

/* True when p lies in [base, base + len). */
static bool cg__in(const void *p, const void *base, size_t len)
{
    const char *c = p, *b = base;
    return b != NULL && c >= b && c < b + len;
}

bool cg__hvd_gpu_host_ptr(const cg_hvd_gpu_t *gpu, const void *p)
{
    return cg__in(p, gpu->pbuf, gpu->pbuf_len);
}

#if CG_HAVE_CUDA
#include <cuda_runtime_api.h>

static void *cg__dev_alloc(void *arg, size_t size)
{
    void *p = NULL;
    (void)arg;
    if (cudaMalloc(&p, size) != cudaSuccess) {
        (void)cudaGetLastError(); /* out of memory is not sticky */
        return NULL;
    }
    return p;
}

static void cg__dev_free(void *arg, void *ptr, size_t size)
{
    (void)arg;
    (void)size;
    (void)cudaFree(ptr);
}

static void *cg__pinned_alloc(void *arg, size_t size)
{
    void *p = NULL;
    (void)arg;
    if (cudaMallocHost(&p, size) != cudaSuccess) {
        (void)cudaGetLastError();
        return NULL;
    }
    return p;
}

static void cg__pinned_free(void *arg, void *ptr, size_t size)
{
    (void)arg;
    (void)size;
    (void)cudaFreeHost(ptr);
}

#if !CG_HAVE_CUDA_KERNELS
/* Built without CUDA's compiler: the queued copies one by one. */
cg_status_t cg__gpu_batch_launch(const cg__gpu_batch_t *b, void *stream)
{
    for (int i = 0; i < b->n; i++)
        if (cudaMemcpyAsync(b->c[i].dst, b->c[i].src, b->c[i].len,
                            cudaMemcpyDefault,
                            (cudaStream_t)stream) != cudaSuccess)
            return CG_ERR_INTERNAL;
    return CG_OK;
}
#endif

static const cg_mem_backend_t cg__dev_backend = {cg__dev_alloc, cg__dev_free,
                                                 NULL, 1};
static const cg_mem_backend_t cg__pinned_backend = {cg__pinned_alloc,
                                                    cg__pinned_free, NULL, 0};

/* Where staging slots come from: pinned memory once CUDA runs here; the
 * governor's own otherwise (CG_GPU_STAGE_EMULATE without CUDA tensors). */
static const cg_mem_backend_t *cg__slot_mem(const cg_hvd_gpu_t *gpu)
{
    return gpu->stream != NULL ? &cg__pinned_backend : NULL;
}

cg_status_t cg_hvd_gpu_check(cg_hvd_gpu_t *gpu, const char *what,
                             const char *name, int device)
{
    int n = atomic_load(&gpu->ndev), expect = -1;

    if (n < 0) {
        n = cg_cuda_device_count();
        atomic_store(&gpu->ndev, n);
    }
    if (n == 0)
        return cg_error_set(CG_ERR_NO_DEVICE, "%s of tensor '%s': it is on "
                            "CUDA device %d, but this process sees no usable "
                            "CUDA device (no driver, no GPU, or "
                            "CUDA_VISIBLE_DEVICES hides them)", what, name,
                            device);
    if (device >= n)
        return cg_error_set(CG_ERR_INVALID_PARAM, "%s of tensor '%s': CUDA "
                            "device %d, but this process sees %d device(s), "
                            "0 to %d", what, name, device, n, n - 1);
    if (!atomic_compare_exchange_strong(&gpu->device, &expect, device) &&
        expect != device)
        return cg_error_set(CG_ERR_INVALID_PARAM, "%s of tensor '%s': CUDA "
                            "device %d, but this rank already uses device %d "
                            "(one GPU per rank: start one rank per GPU)",
                            what, name, device, expect);
    return CG_OK;
}

/* Background thread: the device and the stream, once. */
cg_status_t cg__hvd_gpu_start(cg_hvd_gpu_t *gpu)
{
    int dev = atomic_load(&gpu->device);
    cudaStream_t s;
    cudaError_t err;

    if (gpu->stream != NULL)
        return CG_OK;
    if (dev < 0)
        return cg_error_set(CG_ERR_INVALID_PARAM, "CUDA collective before "
                            "any CUDA tensor was enqueued");
    err = cudaSetDevice(dev);
    if (err == cudaSuccess)
        err = cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    if (err != cudaSuccess) {
        (void)cudaGetLastError();
        return cg_error_set(CG_ERR_NO_DEVICE, "CUDA device %d: cannot start "
                            "it (cudaSetDevice / cudaStreamCreate: %s)", dev,
                            cudaGetErrorString(err));
    }
    gpu->stream = s;
    cg_info(gpu->log, "CUDA device %d: stream ready for the shim's copies",
            dev);
    return CG_OK;
}

static void cg__free_dbuf(cg_hvd_gpu_t *gpu)
{
    /* Queued copies may still name it (a group that failed half way). */
    (void)cg_hvd_gpu_sync(gpu);
    cg_governor_free_on(gpu->gov, &cg__dev_backend, CG_MEM_CAT_FUSION,
                        gpu->dbuf, gpu->dbuf_len);
    gpu->dbuf = NULL;
    gpu->dbuf_len = 0;
}

/* Device memory for want bytes, down to CG_FUSION_MIN; else the pinned
 * buffer, allocated the first time and kept (cudaMallocHost is slow). */
static void cg__alloc_fbuf(cg_hvd_gpu_t *gpu, size_t want)
{
    size_t floor = gpu->fusion_min < want ? gpu->fusion_min : want, got;
    char b[3][32];
    void *p;

    if (cg_governor_alloc_shrink_on(gpu->gov, &cg__dev_backend,
                                    CG_MEM_CAT_FUSION, want, floor,
                                    CG_HVD_GPU_ALIGN, "CG_FUSION_MIN", &p,
                                    &got) == CG_OK) {
        gpu->dbuf = p;
        gpu->dbuf_len = got;
        gpu->fbuf = p;
        gpu->fbuf_len = got;
        return;
    }
    if (gpu->pbuf == NULL &&
        cg_governor_alloc_shrink_on(gpu->gov, &cg__pinned_backend,
                                    CG_MEM_CAT_FUSION, want, floor,
                                    CG_HVD_GPU_ALIGN, "CG_FUSION_MIN", &p,
                                    &got) == CG_OK) {
        gpu->pbuf = p;
        gpu->pbuf_len = got;
        cg_warn(gpu->log, "CUDA fusion buffer: no device memory for %s "
                "(floor %s, CG_FUSION_MIN); using %s of pinned host memory "
                "instead (slower; kept until shutdown)",
                cg_format_size(want, b[0], sizeof(b[0])),
                cg_format_size(floor, b[1], sizeof(b[1])),
                cg_format_size(got, b[2], sizeof(b[2])));
    }
    if (gpu->pbuf == NULL) {
        cg_warn(gpu->log, "no CUDA fusion buffer this cycle (neither device "
                "nor pinned memory): %s; CUDA tensors are reduced one by "
                "one", cg_last_error());
        return;
    }
    gpu->fbuf = gpu->pbuf;
    gpu->fbuf_len = gpu->pbuf_len < want ? gpu->pbuf_len : want;
}

size_t cg_hvd_gpu_prepare(cg_hvd_gpu_t *gpu, size_t want)
{
    if (!cg_hvd_gpu_active(gpu))
        return want;
    if (want == 0)
        return 0;
    if (cg__hvd_gpu_start(gpu) != CG_OK) {
        cg_error(gpu->log, "%s", cg_last_error());
        return 0;
    }
    if (want == gpu->want && gpu->fbuf != NULL)
        return gpu->fbuf_len;
    cg__free_dbuf(gpu);
    gpu->fbuf = NULL;
    gpu->fbuf_len = 0;
    gpu->want = want;
    cg__alloc_fbuf(gpu, want);
    return gpu->fbuf_len;
}

/* A copy the batch may take: a tensor (device memory, never one of the
 * pinned host buffers) into or out of the device fusion buffer. The
 * copies of one batch run at once, in no order: a tensor's bytes go to
 * or come from a region of the fusion buffer no other copy of the
 * phase touches, while copies through the staging buffer reuse it chunk
 * after chunk and must keep their order. */
static bool cg__batchable(const cg_hvd_gpu_t *gpu, const void *dst,
                          const void *src)
{
    const void *other;

    if (cg__in(dst, gpu->dbuf, gpu->dbuf_len))
        other = src;
    else if (cg__in(src, gpu->dbuf, gpu->dbuf_len))
        other = dst;
    else
        return false;
    return !cg__in(other, gpu->dbuf, gpu->dbuf_len) &&
           !cg__in(other, gpu->stage, gpu->stage_len) &&
           !cg__in(other, gpu->pbuf, gpu->pbuf_len);
}

/* Launches the queued copies (before anything else runs on the stream,
 * so the stream's order is the order the copies were asked in). */
static cg_status_t cg__flush_batch(cg_hvd_gpu_t *gpu)
{
    int n = gpu->batch.n;
    cg_status_t st;

    if (n == 0)
        return CG_OK;
    st = cg__gpu_batch_launch(&gpu->batch, gpu->stream);
    gpu->batch.n = 0;
    if (st != CG_OK) {
        cudaError_t err = cudaGetLastError();
        return cg_error_set(CG_ERR_INTERNAL, "CUDA device %d: the batched "
                            "copy of %d tensors did not launch: %s",
                            cg_hvd_gpu_device(gpu), n,
                            cudaGetErrorString(err));
    }
    gpu->launches++;
    gpu->batched += (uint64_t)n;
    return CG_OK;
}

cg_status_t cg_hvd_gpu_copy(cg_hvd_gpu_t *gpu, void *dst, const void *src,
                            size_t bytes)
{
    cudaError_t err;
    cg_status_t st = cg__hvd_gpu_start(gpu);

    if (st != CG_OK || bytes == 0)
        return st;
    /* A tensor into or out of the device fusion buffer: queued, so a
     * step's thousand small copies are one kernel launch. */
    if (gpu->batching && bytes <= CG__GPU_BATCH_BYTES &&
        cg__batchable(gpu, dst, src)) {
        if (gpu->batch.n == CG__GPU_BATCH_MAX &&
            (st = cg__flush_batch(gpu)) != CG_OK)
            return st;
        gpu->batch.c[gpu->batch.n++] = (cg__gpu_copy_t){src, dst, bytes};
        return CG_OK;
    }
    st = cg__flush_batch(gpu);
    if (st != CG_OK)
        return st;
    err = cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault,
                          (cudaStream_t)gpu->stream);
    if (err != cudaSuccess) {
        (void)cudaGetLastError();
        return cg_error_set(CG_ERR_INTERNAL, "cudaMemcpyAsync of %zu bytes "
                            "(%p -> %p): %s", bytes, src, dst,
                            cudaGetErrorString(err));
    }
    return CG_OK;
}

cg_status_t cg__hvd_gpu_flush(cg_hvd_gpu_t *gpu)
{
    return cg__flush_batch(gpu);
}

cg_status_t cg_hvd_gpu_sync(cg_hvd_gpu_t *gpu)
{
    cg_backend_t *be = gpu->queued;
    cg_status_t st, w;

    if (gpu->stream == NULL)
        return CG_OK;
    st = cg__flush_batch(gpu);
    /* Even when the copies did not launch: the queued allreduce may still
     * read the buffers the caller is about to reuse. */
    gpu->queued = NULL;
    w = be != NULL ? be->ops->stream_wait(be, gpu->stream, "ncclAllReduce "
                                          "and the fusion copies")
                   : cg__gpu_poll(gpu, false, gpu->stream, "copies");
    return st != CG_OK ? st : w;
}

void cg_hvd_gpu_destroy(cg_hvd_gpu_t *gpu)
{
    if (gpu == NULL)
        return;
    cg__gpu_pipe_destroy(gpu);
    if (gpu->stream != NULL) {
        (void)cg_hvd_gpu_sync(gpu);
        (void)cudaStreamDestroy((cudaStream_t)gpu->stream);
        gpu->stream = NULL; /* cg__free_dbuf's sync: nothing left */
    }
    cg__free_dbuf(gpu);
    cg_governor_free_on(gpu->gov, &cg__pinned_backend, CG_MEM_CAT_FUSION,
                        gpu->pbuf, gpu->pbuf_len);
    cg__hvd_gpu_slots_free(gpu);
    cg_governor_free(gpu->gov, CG_MEM_CAT_CONTROL, gpu, sizeof(*gpu));
}

#else /* !CG_HAVE_CUDA */

cg_status_t cg_hvd_gpu_check(cg_hvd_gpu_t *gpu, const char *what,
                             const char *name, int device)
{
    (void)gpu;
    return cg_error_set(CG_ERR_UNSUPPORTED, "%s of tensor '%s': it is on "
                        "CUDA device %d, but collguard was built without "
                        "CUDA (rebuild with the CUDA toolkit, or copy the "
                        "tensor to the CPU first)", what, name, device);
}

cg_status_t cg__hvd_gpu_start(cg_hvd_gpu_t *gpu)
{
    (void)gpu;
    return cg_error_set(CG_ERR_UNSUPPORTED, "collguard was built without "
                        "CUDA");
}

size_t cg_hvd_gpu_prepare(cg_hvd_gpu_t *gpu, size_t want)
{
    (void)gpu;
    return want;
}

static const cg_mem_backend_t *cg__slot_mem(const cg_hvd_gpu_t *gpu)
{
    (void)gpu;
    return NULL;
}

cg_status_t cg_hvd_gpu_copy(cg_hvd_gpu_t *gpu, void *dst, const void *src,
                            size_t bytes)
{
    (void)dst;
    (void)src;
    (void)bytes;
    return cg__hvd_gpu_start(gpu);
}

cg_status_t cg_hvd_gpu_sync(cg_hvd_gpu_t *gpu)
{
    (void)gpu;
    return CG_OK;
}

cg_status_t cg__hvd_gpu_flush(cg_hvd_gpu_t *gpu)
{
    (void)gpu;
    return CG_OK;
}

void cg_hvd_gpu_destroy(cg_hvd_gpu_t *gpu)
{
    if (gpu == NULL)
        return;
    cg__hvd_gpu_slots_free(gpu); /* CG_GPU_STAGE_EMULATE's */
    cg_governor_free(gpu->gov, CG_MEM_CAT_CONTROL, gpu, sizeof(*gpu));
}

#endif

size_t cg_hvd_gpu_stage_prepare(cg_hvd_gpu_t *gpu, bool staged)
{
    bool active = cg_hvd_gpu_active(gpu);
    bool offers = gpu->emulate || (staged && active);
    size_t held;

    if (!offers && gpu->stage == NULL)
        return SIZE_MAX; /* stages nothing: no constraint */
    if (active && cg__hvd_gpu_start(gpu) != CG_OK) {
        cg__hvd_gpu_slots_unusable(gpu);
        held = 0;
    } else {
        held = cg__hvd_gpu_slots_fit(gpu, cg__slot_mem(gpu));
    }
    return offers ? held : SIZE_MAX;
}

cg_status_t cg__hvd_gpu_stage_ensure(cg_hvd_gpu_t *gpu)
{
    return cg__hvd_gpu_slots_make(gpu, cg__slot_mem(gpu));
}
