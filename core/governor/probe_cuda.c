/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The CUDA memory probe: cudaMemGetInfo on the device that was current at
 * init (about 6.6 us a call, so the governor samples it on a timer). Built
 * against the CUDA runtime only when CG_HAVE_CUDA; without a driver or GPU
 * it reports CG_ERR_NO_DEVICE quietly, without CUDA built CG_ERR_UNSUPPORTED.
 * Layer: core/governor; calls core/base (error) and the CUDA runtime.
 */
#include "core/governor/probe.h"

#include <stdint.h>

#include "cg_build.h"
#include "core/base/error.h"

#if CG_HAVE_CUDA
#include <cuda_runtime_api.h>

int cg_cuda_probe_built(void)
{
    return 1;
}

int cg_cuda_device_count(void)
{
    int n = 0;

    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        (void)cudaGetLastError(); /* no driver or GPU: not sticky, clear */
        return 0;
    }
    return n;
}

/* arg carries the device ordinal chosen at init. Reads it without changing
 * the calling thread's current device for long. */
static cg_status_t cg__cuda_probe_read(void *arg, uint64_t *free_p,
                                       uint64_t *total_p)
{
    int dev = (int)(intptr_t)arg, cur = -1;
    size_t free_b = 0, total_b = 0;
    cudaError_t err;

    err = cudaGetDevice(&cur);
    if (err == cudaSuccess && cur != dev)
        err = cudaSetDevice(dev);
    if (err == cudaSuccess)
        err = cudaMemGetInfo(&free_b, &total_b);
    if (cur >= 0 && cur != dev)
        (void)cudaSetDevice(cur);
    if (err != cudaSuccess) {
        (void)cudaGetLastError();
        return cg_error_set(CG_ERR_NO_DEVICE, "cuda memory probe: "
                            "cudaMemGetInfo on device %d failed: %s", dev,
                            cudaGetErrorString(err));
    }
    *free_p = free_b;
    *total_p = total_b;
    return CG_OK;
}

cg_status_t cg_cuda_probe_init(cg_mem_probe_t *probe_p)
{
    int dev = -1;
    cudaError_t err;

    if (cg_cuda_device_count() == 0)
        return cg_error_set(CG_ERR_NO_DEVICE, "cuda memory probe: no usable "
                            "CUDA device (no driver or no GPU); use "
                            "CG_MEM_PROBE=host");
    err = cudaGetDevice(&dev);
    if (err != cudaSuccess) {
        (void)cudaGetLastError();
        return cg_error_set(CG_ERR_NO_DEVICE, "cuda memory probe: "
                            "cudaGetDevice failed: %s",
                            cudaGetErrorString(err));
    }
    probe_p->name = "cuda";
    probe_p->kind = CG_MEM_KIND_DEVICE;
    probe_p->device = dev;
    probe_p->read = cg__cuda_probe_read;
    probe_p->arg = (void *)(intptr_t)dev;
    return CG_OK;
}

#else /* !CG_HAVE_CUDA */

int cg_cuda_probe_built(void)
{
    return 0;
}

int cg_cuda_device_count(void)
{
    return 0;
}

cg_status_t cg_cuda_probe_init(cg_mem_probe_t *probe_p)
{
    (void)probe_p;
    return cg_error_set(CG_ERR_UNSUPPORTED, "cuda memory probe: collguard "
                        "was built without CUDA; use CG_MEM_PROBE=host");
}

#endif
