/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The staging pipeline of the Horovod shim's CUDA path: two pinned slots
 * of the same size, device-to-host copies on the core's stream and
 * host-to-device copies on a second one, and per slot an event for its
 * last copy in and its last copy out, so a host collective on one slot
 * overlaps the copies of the chunks before and after it
 * (hvd_gpu_stage.c drives it; hvd_gpu_slots.c owns the slots' memory and
 * asks cg__gpu_pipe_idle before it frees them). Set up at the first
 * staged collective; where that fails (no pinned memory for the second
 * slot, no stream) the collectives stage chunk by chunk as before.
 * Background thread only.
 * Layer: core/backend; calls the CUDA runtime (only when CG_HAVE_CUDA).
 */
#include "core/backend/hvd_gpu_impl.h"

#include <time.h>

#include "core/base/clock.h"
#include "core/base/error.h"

#if CG_HAVE_CUDA
#include <cuda_runtime_api.h>

static cg_status_t cg__cuda_fail(cg_hvd_gpu_t *gpu, const char *what,
                                 cudaError_t err)
{
    (void)cudaGetLastError();
    return cg_error_set(CG_ERR_INTERNAL, "CUDA device %d: %s: %s",
                        atomic_load(&gpu->device), what,
                        cudaGetErrorString(err));
}

static bool cg__setup(cg_hvd_gpu_t *gpu)
{
    cudaStream_t s;
    cudaEvent_t ev;
    cudaError_t err;

    err = cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    if (err != cudaSuccess) {
        (void)cudaGetLastError();
        cg_info(gpu->log, "staging pipeline off: no second stream (%s)",
                cudaGetErrorString(err));
        return false;
    }
    gpu->stream_out = s;
    for (int i = 0; i < 4; i++) {
        err = cudaEventCreateWithFlags(&ev, cudaEventDisableTiming);
        if (err != cudaSuccess) {
            (void)cudaGetLastError();
            cg_info(gpu->log, "staging pipeline off: no CUDA event (%s)",
                    cudaGetErrorString(err));
            return false;
        }
        if (i < 2)
            gpu->ev_in[i] = ev;
        else
            gpu->ev_out[i - 2] = ev;
    }
    return true;
}

bool cg__gpu_pipe_ready(cg_hvd_gpu_t *gpu)
{
    if (!atomic_load(&gpu->pipelining) || gpu->stage == NULL || gpu->stage2 == NULL)
        return false;
    if (gpu->pipe_state == 0) {
        gpu->pipe_state = cg__setup(gpu) ? 1 : -1;
        if (gpu->pipe_state < 0)
            cg__gpu_pipe_destroy(gpu);
    }
    return gpu->pipe_state > 0;
}

void *cg__gpu_pipe_slot(const cg_hvd_gpu_t *gpu, int slot)
{
    return slot == 0 ? gpu->stage : gpu->stage2;
}

cg_status_t cg__gpu_pipe_in(cg_hvd_gpu_t *gpu, int slot, const void *src,
                            size_t bytes)
{
    cudaStream_t s = (cudaStream_t)gpu->stream;
    cudaError_t err;

    /* The slot's bytes must have left for the device before new ones
     * land in it (an event never recorded is complete). */
    err = cudaStreamWaitEvent(s, (cudaEvent_t)gpu->ev_out[slot], 0);
    if (err == cudaSuccess)
        err = cudaMemcpyAsync(cg__gpu_pipe_slot(gpu, slot), src, bytes,
                              cudaMemcpyDeviceToHost, s);
    if (err == cudaSuccess)
        err = cudaEventRecord((cudaEvent_t)gpu->ev_in[slot], s);
    return err == cudaSuccess ? CG_OK
                              : cg__cuda_fail(gpu, "staging copy to the "
                                              "host", err);
}

cg_status_t cg__gpu_pipe_out(cg_hvd_gpu_t *gpu, int slot, void *dst,
                             size_t bytes)
{
    cudaStream_t s = (cudaStream_t)gpu->stream_out;
    cudaError_t err;

    err = cudaMemcpyAsync(dst, cg__gpu_pipe_slot(gpu, slot), bytes,
                          cudaMemcpyHostToDevice, s);
    if (err == cudaSuccess)
        err = cudaEventRecord((cudaEvent_t)gpu->ev_out[slot], s);
    return err == cudaSuccess ? CG_OK
                              : cg__cuda_fail(gpu, "staging copy to the "
                                              "device", err);
}

cg_status_t cg__gpu_poll(cg_hvd_gpu_t *gpu, bool is_event, void *h,
                         const char *what)
{
    uint64_t t0 = cg_now_ns(), t;
    struct timespec nap = {0, 20000};
    cudaError_t err;

    for (;;) {
        err = is_event ? cudaEventQuery((cudaEvent_t)h)
                       : cudaStreamQuery((cudaStream_t)h);
        if (err != cudaErrorNotReady)
            break;
        t = cg_now_ns() - t0;
        if (t > gpu->timeout_ns)
            return cg_error_set(CG_ERR_TIMEOUT, "CUDA %s on device %d did "
                                "not finish within CG_TIMEOUT (%.1f s)", what,
                                atomic_load(&gpu->device),
                                gpu->timeout_ns / 1e9);
        if (t > CG_HVD_GPU_SPIN_NS) /* short copies: spin, no sleep */
            nanosleep(&nap, NULL);
    }
    if (err == cudaSuccess)
        return CG_OK;
    (void)cudaGetLastError();
    return cg_error_set(CG_ERR_INTERNAL, "CUDA %s on device %d failed: %s",
                        what, atomic_load(&gpu->device),
                        cudaGetErrorString(err));
}

cg_status_t cg__gpu_pipe_wait(cg_hvd_gpu_t *gpu, int slot, bool in)
{
    return cg__gpu_poll(gpu, true,
                        in ? gpu->ev_in[slot] : gpu->ev_out[slot],
                        in ? "staging copy to the host"
                           : "staging copy to the device");
}

cg_status_t cg__gpu_pipe_end(cg_hvd_gpu_t *gpu)
{
    cg_status_t a = cg__gpu_poll(gpu, false, gpu->stream, "staging copies"),
                b = cg__gpu_poll(gpu, false, gpu->stream_out,
                                 "staging copies");
    return a != CG_OK ? a : b;
}

/* True when the stream h (NULL: none made) has nothing queued. */
static bool cg__stream_idle(void *h)
{
    cudaError_t err;

    if (h == NULL)
        return true;
    err = cudaStreamQuery((cudaStream_t)h);
    if (err != cudaSuccess && err != cudaErrorNotReady)
        (void)cudaGetLastError(); /* a failed copy: its collective said so */
    return err != cudaErrorNotReady;
}

bool cg__gpu_pipe_idle(cg_hvd_gpu_t *gpu)
{
    /* Batched copies never touch a slot (hvd_gpu.c, cg__batchable). */
    return cg__stream_idle(gpu->stream) && cg__stream_idle(gpu->stream_out);
}

void cg__gpu_pipe_destroy(cg_hvd_gpu_t *gpu)
{
    if (gpu->stream_out != NULL) {
        (void)cudaStreamSynchronize((cudaStream_t)gpu->stream_out);
        (void)cudaStreamDestroy((cudaStream_t)gpu->stream_out);
        gpu->stream_out = NULL;
    }
    for (int i = 0; i < 2; i++) {
        if (gpu->ev_in[i] != NULL)
            (void)cudaEventDestroy((cudaEvent_t)gpu->ev_in[i]);
        if (gpu->ev_out[i] != NULL)
            (void)cudaEventDestroy((cudaEvent_t)gpu->ev_out[i]);
        gpu->ev_in[i] = gpu->ev_out[i] = NULL;
    }
}

#else /* !CG_HAVE_CUDA: nothing is ever staged */

bool cg__gpu_pipe_ready(cg_hvd_gpu_t *gpu)
{
    (void)gpu;
    return false;
}

void *cg__gpu_pipe_slot(const cg_hvd_gpu_t *gpu, int slot)
{
    (void)gpu;
    (void)slot;
    return NULL;
}

cg_status_t cg__gpu_pipe_in(cg_hvd_gpu_t *gpu, int slot, const void *src,
                            size_t bytes)
{
    (void)slot;
    (void)src;
    (void)bytes;
    (void)gpu;
    return cg_error_set(CG_ERR_UNSUPPORTED, "collguard was built without "
                        "CUDA");
}

cg_status_t cg__gpu_pipe_out(cg_hvd_gpu_t *gpu, int slot, void *dst,
                             size_t bytes)
{
    (void)slot;
    (void)dst;
    (void)bytes;
    (void)gpu;
    return cg_error_set(CG_ERR_UNSUPPORTED, "collguard was built without "
                        "CUDA");
}

cg_status_t cg__gpu_pipe_wait(cg_hvd_gpu_t *gpu, int slot, bool in)
{
    (void)slot;
    (void)in;
    (void)gpu;
    return cg_error_set(CG_ERR_UNSUPPORTED, "collguard was built without "
                        "CUDA");
}

cg_status_t cg__gpu_pipe_end(cg_hvd_gpu_t *gpu)
{
    (void)gpu;
    return CG_OK;
}

bool cg__gpu_pipe_idle(cg_hvd_gpu_t *gpu)
{
    (void)gpu;
    return true;
}

void cg__gpu_pipe_destroy(cg_hvd_gpu_t *gpu)
{
    (void)gpu;
}

#endif
