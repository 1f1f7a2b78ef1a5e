/* SPDX-License-Identifier: Apache-2.0 */
/*
 * How much of a host-staged CUDA AllReduce (HOROVOD_GPU_OPERATIONS=
 * COLLGUARD or MPI) the staging pipeline hides. For each size, alternating
 * in one run: the staged AllReduce of one CUDA float32 tensor through the
 * shim with the two-slot pipeline and without it (one chunk at a time);
 * the same AllReduce of a host tensor; and the copies alone (device to
 * pinned host and back, chunk by chunk at the staging chunk the ranks
 * agreed on, each waited for, as the unpipelined path makes them). Prints the median milliseconds of each,
 * the speed-up of the pipeline, and what it hid (unpipelined - pipelined)
 * against the copies' time. Every result is checked.
 *   stage_bench [-i iterations] [MiB ...]   (under collguard-run -np N)
 * Exit 0: results right; 1: wrong; 77: no CUDA device.
 */
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "collguard/hvd.h"
#include "integration/gpu/bench_stats.h"
#include "core/backend/hvd_gpu.h"
#include "core/context.h"
#include "core/engine/hvd_core.h"

#define MAXS 8
#define MAXI 64

static int cuda_ok(cudaError_t err, const char *what)
{
    if (err == cudaSuccess)
        return 1;
    fprintf(stderr, "stage_bench: %s: %s\n", what, cudaGetErrorString(err));
    return 0;
}

/* One allreduce (sum) of buf through the shim; ms, or -1 on failure. */
static double allreduce(cg_hvd_core_h core, void *buf, size_t n, int device,
                        const char *name)
{
    cg_hvd_tensor_t t = {.name = name, .dtype = CG_DTYPE_F32, .ndim = 1,
                         .shape = {(int64_t)n}, .input = buf, .output = buf,
                         .device = -1};
    cg_hvd_req_h req;
    double t0;
    cg_status_t st;

    if (device >= 0) {
        t.field_mask = CG_HVD_TENSOR_FIELD_DEVICE;
        t.device = device;
    }
    t0 = now_ms();
    st = cg_hvd_enqueue_allreduce(core, &t, CG_OP_SUM, 1.0, 1.0, &req);
    if (st == CG_OK)
        st = cg_hvd_wait(req);
    if (st != CG_OK) {
        fprintf(stderr, "stage_bench: %s: %s\n", name, cg_last_error());
        return -1;
    }
    cg_hvd_release(req);
    return now_ms() - t0;
}

/* The copies the unpipelined path makes: chunk to host, wait, back,
 * wait. */
static double copies(void *dev, void *pinned, size_t bytes, size_t chunk)
{
    double t0 = now_ms();
    for (size_t off = 0; off < bytes; off += chunk) {
        size_t n = bytes - off < chunk ? bytes - off : chunk;
        if (!cuda_ok(cudaMemcpy(pinned, (char *)dev + off, n,
                                cudaMemcpyDeviceToHost), "D2H") ||
            !cuda_ok(cudaMemcpy((char *)dev + off, pinned, n,
                                cudaMemcpyHostToDevice), "H2D"))
            return -1;
    }
    return now_ms() - t0;
}

/* The staging chunk the last staged AllReduce cut at (CG_CHUNK_SIZE
 * before any was agreed): the copies alone are cut alike. */
static size_t agreed_chunk(cg_hvd_core_h core, cg_ctx_h ctx)
{
    cg_hvd_stats_t st;

    cg_hvd_core_stats(core, &st);
    return st.stage_chunk_bytes > 0 &&
                   st.stage_chunk_bytes <= ctx->cfg.chunk_size
               ? (size_t)st.stage_chunk_bytes
               : (size_t)ctx->cfg.chunk_size;
}

int main(int argc, char **argv)
{
    cg_ctx_params_t cp = {.field_mask = CG_CTX_PARAM_BOOTSTRAP,
                          .bootstrap = 1};
    size_t mib[MAXS] = {16, 64, 256};
    int nsizes = 3, iters = 10, opt, ndev = 0, device = 0, rank, size;
    int wrong = 0;
    cg_hvd_core_h core;
    cg_ctx_h ctx;

    while ((opt = getopt(argc, argv, "i:")) != -1)
        if (opt == 'i')
            iters = atoi(optarg);
    if (iters < 1 || iters > MAXI) {
        fprintf(stderr, "stage_bench: -i 1..%d\n", MAXI);
        return 2;
    }
    if (optind < argc) {
        nsizes = 0;
        for (; optind < argc && nsizes < MAXS; optind++)
            mib[nsizes++] = (size_t)atol(argv[optind]);
    }
    if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
        printf("stage_bench: no CUDA device; skipped\n");
        return 77;
    }
    if (getenv("CG_RUN_LOCAL_RANK") != NULL)
        device = atoi(getenv("CG_RUN_LOCAL_RANK")) % ndev;
    if (!cuda_ok(cudaSetDevice(device), "cudaSetDevice"))
        return 2;
    if (cg_ctx_create(&cp, &ctx) != CG_OK ||
        cg_hvd_core_create(ctx, &core) != CG_OK) {
        fprintf(stderr, "stage_bench: %s\n", cg_last_error());
        return 1;
    }
    rank = cg_hvd_core_rank(core);
    size = cg_hvd_core_size(core);
    if (rank == 0)
        printf("staged CUDA AllReduce, %d ranks, backend %s, pipeline %s, "
               "chunk at most %llu bytes, median of %d\n%6s %12s %13s %8s %10s "
               "%13s %9s %12s\n",
               size, getenv("HOROVOD_GPU_OPERATIONS") ? getenv(
                   "HOROVOD_GPU_OPERATIONS") : "AUTO", "on and off",
               (unsigned long long)ctx->cfg.chunk_size, iters, "MiB",
               "pipelined_ms", "one_chunk_ms", "speedup", "copies_ms",
               "collective_ms", "hidden_ms", "hidden/copy");
    for (int s = 0; s < nsizes && !wrong; s++) {
        size_t n = mib[s] << 18, bytes = n * sizeof(float);
        double ts[MAXI], to[MAXI], tc[MAXI], tk[MAXI];
        float *host = malloc(bytes), *dev = NULL;
        void *pinned = NULL;
        char name[64];

        if (host == NULL ||
            !cuda_ok(cudaMalloc((void **)&dev, bytes), "cudaMalloc") ||
            !cuda_ok(cudaMallocHost(&pinned, ctx->cfg.chunk_size),
                     "cudaMallocHost")) {
            wrong = 1;
            break;
        }
        for (int i = 0; i < 2 * (iters + 1) && !wrong; i++) {
            int on = i % 2 == 0, it = i / 2;
            double a, b = 0, c = 0;
            /* rank + 1 everywhere: the sum is size*(size+1)/2. */
            for (size_t k = 0; k < n; k++)
                host[k] = (float)(rank + 1);
            if (!cuda_ok(cudaMemcpy(dev, host, bytes,
                                    cudaMemcpyHostToDevice), "fill") ||
                !cuda_ok(cudaDeviceSynchronize(), "fill")) {
                wrong = 1;
                break;
            }
            cg_hvd_gpu_set_pipelining(core->gpu, on);
            snprintf(name, sizeof(name), "staged.%d.%d", s, i);
            a = allreduce(core, dev, n, device, name);
            if (on) {
                snprintf(name, sizeof(name), "host.%d.%d", s, i);
                b = allreduce(core, host, n, -1, name);
                c = copies(dev, pinned, bytes, agreed_chunk(core, ctx));
            }
            if (a < 0 || b < 0 || c < 0) {
                wrong = 1;
                break;
            }
            if (it > 0 && on) { /* the first round is a warm-up */
                ts[it - 1] = a;
                tc[it - 1] = b;
                tk[it - 1] = c;
            } else if (it > 0) {
                to[it - 1] = a;
            }
            /* Check the staged result (the copies wrote it back). */
            if (!cuda_ok(cudaMemcpy(host, dev, bytes,
                                    cudaMemcpyDeviceToHost), "check"))
                wrong = 1;
            for (size_t k = 0; k < n && !wrong; k++)
                if (host[k] != (float)(size * (size + 1) / 2)) {
                    fprintf(stderr, "stage_bench: rank %d: %zu MiB element "
                            "%zu is %g, not %d (pipeline %s)\n", rank,
                            mib[s], k, (double)host[k],
                            size * (size + 1) / 2, on ? "on" : "off");
                    wrong = 1;
                }
        }
        if (!wrong && rank == 0) {
            double a = median(ts, iters), o = median(to, iters),
                   b = median(tc, iters), c = median(tk, iters);
            printf("%6zu %12.2f %13.2f %7.2fx %10.2f %13.2f %9.2f %12.2f\n",
                   mib[s], a, o, o / a, c, b, o - a,
                   c > 0 ? (o - a) / c : 0);
        }
        cudaFree(dev);
        cudaFreeHost(pinned);
        free(host);
    }
    if (rank == 0)
        printf("pipelined staged collectives on rank 0: %llu, agreed "
               "staging chunk %zu bytes\n",
               (unsigned long long)cg_hvd_gpu_pipelined(core->gpu),
               agreed_chunk(core, ctx));
    cg_hvd_core_destroy(core);
    cg_ctx_destroy(ctx);
    return wrong;
}
