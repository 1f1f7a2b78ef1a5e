// SPDX-License-Identifier: Apache-2.0
// The batched copy of the Horovod shim's CUDA path: many small copies
// into or out of the fusion buffer in one kernel launch (one launch costs
// about as much as one cudaMemcpyAsync, so 1000 tensors of a step cost
// one launch instead of 1000). The copies travel as the kernel's
// parameter (up to CG__GPU_BATCH_MAX, within CUDA 12.1's 32 KiB parameter
// space on sm_70 and later); block b copies copy b, with 16-byte loads
// and stores where source, destination and length allow.
// Layer: core/backend; calls the CUDA runtime.
#include <cstdint>

#include <cuda_runtime_api.h>

#include "core/backend/hvd_gpu_batch_impl.h"

namespace {

__global__ void batch_copy(cg__gpu_batch_t b)
{
    const cg__gpu_copy_t c = b.c[blockIdx.x];
    const unsigned char *src = static_cast<const unsigned char *>(c.src);
    unsigned char *dst = static_cast<unsigned char *>(c.dst);
    size_t len = c.len;

    if (((reinterpret_cast<uintptr_t>(src) |
          reinterpret_cast<uintptr_t>(dst)) & 15) == 0) {
        const uint4 *s4 = reinterpret_cast<const uint4 *>(src);
        uint4 *d4 = reinterpret_cast<uint4 *>(dst);
        size_t n4 = len / 16;
        for (size_t i = threadIdx.x; i < n4; i += blockDim.x)
            d4[i] = s4[i];
        for (size_t i = n4 * 16 + threadIdx.x; i < len; i += blockDim.x)
            dst[i] = src[i];
        return;
    }
    for (size_t i = threadIdx.x; i < len; i += blockDim.x)
        dst[i] = src[i];
}

} // namespace

extern "C" cg_status_t cg__gpu_batch_launch(const cg__gpu_batch_t *b,
                                            void *stream)
{
    if (b->n == 0)
        return CG_OK;
    batch_copy<<<b->n, 256, 0, static_cast<cudaStream_t>(stream)>>>(*b);
    cudaError_t err = cudaGetLastError();
    return err == cudaSuccess ? CG_OK : CG_ERR_INTERNAL;
}
