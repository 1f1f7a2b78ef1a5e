/* SPDX-License-Identifier: Apache-2.0 */
/*
 * collguard makes no CUDA context before the first CUDA tensor, and then
 * only on that tensor's GPU. Each rank (1 rank, or under collguard-run /
 * mpirun) creates the library and the Horovod shim's core with the default
 * CG_MEM_PROBE=auto, runs host allreduces, and checks with the driver API
 * (cuDevicePrimaryCtxGetState, which creates nothing) that no GPU has a
 * context of this process; then it puts a tensor on GPU local_rank % GPUs
 * (as a Horovod script does after hvd.init()), allreduces it there and
 * checks that this GPU alone has a context and that the governor's probe
 * reads it. Exit 0: as promised; 1: a context where none may be, or a
 * wrong result; 77: no CUDA device (skipped).
 *   cuda_context_check            (or collguard-run -np N cuda_context_check)
 */
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collguard/hvd.h"
#include "core/context.h"

typedef int (*cu_init_fn)(unsigned int);
typedef int (*cu_count_fn)(int *);
typedef int (*cu_get_fn)(int *, int);
typedef int (*cu_state_fn)(int, unsigned int *, int *);

static struct {
    cu_init_fn init;
    cu_count_fn count;
    cu_get_fn get;
    cu_state_fn state;
} cu;

/* Bit d set: GPU d has an active primary context of this process. */
static unsigned active_mask(int ndev)
{
    unsigned mask = 0;

    for (int d = 0; d < ndev && d < 32; d++) {
        int dev, on = 0;
        unsigned int flags;
        if (cu.get(&dev, d) == 0 && cu.state(dev, &flags, &on) == 0 && on)
            mask |= 1u << d;
    }
    return mask;
}

static int host_allreduces(cg_hvd_core_h core, int rank, int size)
{
    float x[4][256];
    cg_hvd_req_h req[4];

    for (int t = 0; t < 4; t++) {
        char name[32];
        snprintf(name, sizeof(name), "host.%d", t);
        for (int i = 0; i < 256; i++)
            x[t][i] = (float)(rank + t + i);
        cg_hvd_tensor_t ten = {.name = name, .dtype = CG_DTYPE_F32,
                               .ndim = 1, .shape = {256}, .input = x[t],
                               .output = x[t]};
        if (cg_hvd_enqueue_allreduce(core, &ten, CG_OP_SUM, 1.0, 1.0,
                                     &req[t]) != CG_OK)
            return 1;
    }
    for (int t = 0; t < 4; t++) {
        if (cg_hvd_wait(req[t]) != CG_OK) {
            fprintf(stderr, "host allreduce: %s\n", cg_hvd_error(req[t]));
            return 1;
        }
        cg_hvd_release(req[t]);
        /* sum over ranks of rank + t + i */
        float want = (float)(size * (size - 1) / 2 + size * (t + 7));
        if (x[t][7] != want) {
            fprintf(stderr, "host allreduce: %g, want %g\n", x[t][7], want);
            return 1;
        }
    }
    return 0;
}

static int device_allreduce(cg_hvd_core_h core, int dev, int rank, int size)
{
    float h[1024], *d = NULL;
    cg_hvd_req_h req;
    int bad = 0;

    for (int i = 0; i < 1024; i++)
        h[i] = (float)(rank + i);
    if (cudaSetDevice(dev) != cudaSuccess ||
        cudaMalloc((void **)&d, sizeof(h)) != cudaSuccess ||
        cudaMemcpy(d, h, sizeof(h), cudaMemcpyHostToDevice) != cudaSuccess ||
        cudaDeviceSynchronize() != cudaSuccess)
        return 1;
    cg_hvd_tensor_t ten = {.field_mask = CG_HVD_TENSOR_FIELD_DEVICE,
                           .name = "gpu.0", .dtype = CG_DTYPE_F32, .ndim = 1,
                           .shape = {1024}, .input = d, .output = d,
                           .device = dev};
    if (cg_hvd_enqueue_allreduce(core, &ten, CG_OP_SUM, 1.0, 1.0, &req) !=
        CG_OK) {
        fprintf(stderr, "device allreduce: %s\n", cg_last_error());
        return 1;
    }
    if (cg_hvd_wait(req) != CG_OK) {
        fprintf(stderr, "device allreduce: %s\n", cg_hvd_error(req));
        cg_hvd_release(req);
        return 1;
    }
    cg_hvd_release(req);
    if (cudaMemcpy(h, d, sizeof(h), cudaMemcpyDeviceToHost) != cudaSuccess)
        return 1;
    for (int i = 0; i < 1024; i++)
        bad += h[i] != (float)(size * (size - 1) / 2 + size * i);
    cudaFree(d);
    return bad != 0;
}

int main(void)
{
    void *lib = dlopen("libcuda.so.1", RTLD_NOW);
    int ndev = 0, rc = 0;
    cg_ctx_h ctx;
    cg_hvd_core_h core;

    if (lib != NULL) {
        cu.init = (cu_init_fn)dlsym(lib, "cuInit");
        cu.count = (cu_count_fn)dlsym(lib, "cuDeviceGetCount");
        cu.get = (cu_get_fn)dlsym(lib, "cuDeviceGet");
        cu.state = (cu_state_fn)dlsym(lib, "cuDevicePrimaryCtxGetState");
    }
    if (lib == NULL || cu.init == NULL || cu.count == NULL ||
        cu.get == NULL || cu.state == NULL || cu.init(0) != 0 ||
        cu.count(&ndev) != 0 || ndev == 0) {
        printf("no CUDA device: skipped\n");
        return 77;
    }
    cg_ctx_params_t cp = {.field_mask = CG_CTX_PARAM_BOOTSTRAP,
                          .bootstrap = 1};
    if (cg_ctx_create(&cp, &ctx) != CG_OK ||
        cg_hvd_core_create(ctx, &core) != CG_OK) {
        fprintf(stderr, "init: %s\n", cg_last_error());
        return 1;
    }
    int rank = cg_hvd_core_rank(core), size = cg_hvd_core_size(core);
    int local = cg_bootstrap_env(ctx->bs)->local_rank, dev = local % ndev;
    rc |= host_allreduces(core, rank, size);
    unsigned m = active_mask(ndev);
    printf("rank %d: after init and host allreduces: contexts on GPUs 0x%x "
           "(want 0x0), probe %s reading by %s\n",
           rank, m, ctx->probe.name, cg_cuda_probe_source(ctx->cuda_probe));
    rc |= m != 0;
    rc |= device_allreduce(core, dev, rank, size);
    m = active_mask(ndev);
    uint64_t f = 0, t = 0;
    cg_status_t st = ctx->probe.read(ctx->probe.arg, &f, &t);
    printf("rank %d: after an allreduce on GPU %d: contexts 0x%x (want "
           "0x%x), probe reads %.1f of %.1f GiB by %s\n",
           rank, dev, m, 1u << dev, (double)f / (1 << 30),
           (double)t / (1 << 30), cg_cuda_probe_source(ctx->cuda_probe));
    rc |= m != (1u << dev) || st != CG_OK;
    cg_hvd_core_destroy(core);
    cg_ctx_destroy(ctx);
    printf("rank %d: %s\n", rank, rc ? "FAILED" : "ok");
    return rc ? 1 : 0;
}
