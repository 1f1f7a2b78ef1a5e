/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A step of N small CUDA float32 tensors (default 1000 x 4 KiB) through the
 * Horovod shim (HOROVOD_GPU_OPERATIONS=NCCL by default), beside NCCL itself
 * in the same processes: N ncclAllReduce calls on one stream, and one
 * ncclAllReduce of the fused size; then one tensor of the fused size
 * through the shim against that one NCCL call, alternating, P pairs
 * (default 500): the median of the pairs' differences is the shim's cost
 * per fused op beyond NCCL's own (with its 10th and 90th percentiles). In place by default; with -o every output is
 * a buffer of its own (shim and NCCL alike): on one rank NCCL's in-place
 * AllReduce moves nothing, its out-of-place one copies, which is the
 * work a step of several ranks has besides the network. One rank, or
 * several under collguard-run or mpirun (rank i on GPU local rank % GPUs;
 * NCCL's unique id travels by the shim's broadcast; ranks sharing a GPU
 * need an NCCL_HOSTID each, as integration/gpu/multigpu.sh gives them).
 * Prints median milliseconds of each, the ratios, the batched-copy kernel
 * launches and the NCCL calls queued behind the copies per step, and what
 * one sample of the governor's CUDA probe costs against a step and over
 * its CG_PROBE_INTERVAL. Every tensor of the last step, and the last fused
 * tensor, is checked against its expected sum.
 *   gpu_step_bench [-n tensors] [-s bytes] [-i steps] [-w warmup]
 *                  [-p pairs] [-o]
 * Exit 0: results right; 1: wrong; 77: no CUDA device.
 */
#include <cuda_runtime_api.h>
#include <nccl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "collguard/hvd.h"
#include "integration/gpu/bench_stats.h"
#include "integration/gpu/launcher_gpu.h"
#include "core/context.h"
#include "core/backend/hvd_gpu.h"
#include "core/engine/hvd_core.h"

#define CK(x)                                                                 \
    do {                                                                      \
        if ((x) != 0) {                                                       \
            fprintf(stderr, "%s failed\n", #x);                              \
            return 1;                                                         \
        }                                                                     \
    } while (0)

/* One shim step: every tensor enqueued, then every one waited for;
 * milliseconds, or a negative value on an error (reported). */
static double shim_step(cg_hvd_core_h core, int n, float **in, float **out,
                        size_t count, int gpu, cg_hvd_req_h *req)
{
    char name[32];
    double t0 = now_ms();

    for (int i = 0; i < n; i++) {
        snprintf(name, sizeof(name), "g%zu.%d", count, i);
        cg_hvd_tensor_t ten = {.field_mask = CG_HVD_TENSOR_FIELD_DEVICE,
                               .name = name, .dtype = CG_DTYPE_F32,
                               .ndim = 1, .shape = {(int64_t)count},
                               .input = in[i], .output = out[i],
                               .device = gpu};
        if (cg_hvd_enqueue_allreduce(core, &ten, CG_OP_SUM, 1.0, 1.0,
                                     &req[i]) != CG_OK) {
            fprintf(stderr, "enqueue: %s\n", cg_last_error());
            return -1;
        }
    }
    for (int i = 0; i < n; i++) {
        if (cg_hvd_wait(req[i]) != CG_OK) {
            fprintf(stderr, "wait: %s\n", cg_hvd_error(req[i]));
            return -1;
        }
        cg_hvd_release(req[i]);
    }
    return now_ms() - t0;
}

/* Fills n device tensors with element k of tensor i = i + k % 7. */
static int fill(float **dev, int n, size_t count, float *host)
{
    for (int i = 0; i < n; i++) {
        for (size_t k = 0; k < count; k++)
            host[k] = (float)(i + k % 7);
        if (cudaMemcpy(dev[i], host, count * sizeof(float),
                       cudaMemcpyHostToDevice) != cudaSuccess)
            return -1;
    }
    /* A cudaMemcpy from pageable memory may return before its bytes land
     * (hvd.h: inputs ready at enqueue). */
    return cudaDeviceSynchronize() == cudaSuccess ? 0 : -1;
}

/* Elements of the n tensors that are not size x their fill value. */
static int check(float **dev, int n, size_t count, float *host, int size)
{
    int bad = 0;

    for (int i = 0; i < n; i++) {
        if (cudaMemcpy(host, dev[i], count * sizeof(float),
                       cudaMemcpyDeviceToHost) != cudaSuccess)
            return (int)count;
        for (size_t k = 0; k < count; k++)
            bad += host[k] != (float)size * (float)(i + k % 7);
    }
    return bad;
}

int main(int argc, char **argv)
{
    int n = 1000, steps = 30, warm = 5, pairs = 500, opt, ndev = 0;
    size_t bytes = 4096;
    bool oop = false;

    while ((opt = getopt(argc, argv, "n:s:i:w:p:o")) != -1) {
        switch (opt) {
        case 'n': n = atoi(optarg); break;
        case 's': bytes = (size_t)atol(optarg); break;
        case 'i': steps = atoi(optarg); break;
        case 'w': warm = atoi(optarg); break;
        case 'p': pairs = atoi(optarg); break;
        case 'o': oop = true; break;
        default:
            fprintf(stderr, "usage: %s [-n tensors] [-s bytes] [-i steps] "
                    "[-w warmup] [-p pairs] [-o]\n", argv[0]);
            return 2;
        }
    }
    if (n < 1 || steps < 1 || warm < 0 || pairs < 1 ||
        bytes < sizeof(float)) {
        fprintf(stderr, "need -n >= 1, -i >= 1, -w >= 0, -p >= 1, -s >= 4\n");
        return 2;
    }
    if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
        printf("no CUDA device: skipped\n");
        return 77;
    }
    setenv("HOROVOD_GPU_OPERATIONS", getenv("HOROVOD_GPU_OPERATIONS")
                                         ? getenv("HOROVOD_GPU_OPERATIONS")
                                         : "NCCL", 1);
    size_t count = bytes / sizeof(float), total = (size_t)n * bytes;
    size_t fcount = total / sizeof(float);
    float **dev = calloc((size_t)n, sizeof(*dev)), *fused, *host;
    float **out = calloc((size_t)n, sizeof(*out)), *fout;
    double *t = calloc((size_t)(steps + warm), sizeof(*t));
    double *ps = calloc((size_t)pairs, sizeof(*ps));
    double *pn = calloc((size_t)pairs, sizeof(*pn));
    double *pd = calloc((size_t)pairs, sizeof(*pd));
    double *pp = calloc((size_t)pairs, sizeof(*pp));
    host = malloc(total);
    int gpu = launcher_gpu(ndev);
    CK(cudaSetDevice(gpu));
    for (int i = 0; i < n; i++) {
        CK(cudaMalloc((void **)&dev[i], bytes));
        out[i] = dev[i];
        if (oop)
            CK(cudaMalloc((void **)&out[i], bytes));
    }
    CK(cudaMalloc((void **)&fused, total));
    fout = fused;
    if (oop)
        CK(cudaMalloc((void **)&fout, total));

    cg_ctx_params_t cp = {.field_mask = CG_CTX_PARAM_BOOTSTRAP,
                          .bootstrap = 1};
    cg_ctx_h ctx;
    cg_hvd_core_h core;
    if (cg_ctx_create(&cp, &ctx) != CG_OK ||
        cg_hvd_core_create(ctx, &core) != CG_OK) {
        fprintf(stderr, "init: %s\n", cg_last_error());
        return 1;
    }
    int rank = cg_hvd_core_rank(core), size = cg_hvd_core_size(core);
    cg_hvd_req_h *req = calloc((size_t)n, sizeof(*req));
    uint64_t l0 = 0, c0 = 0, q0 = 0, l1, c1, q1;
    int bad = 0;

    /* The shim: the step of n tensors; the last step's inputs known (in
     * place, each step's output is the next one's input). */
    for (int s = 0; s < warm + steps; s++) {
        if (s == warm) {
            cg_hvd_gpu_batch_stats(core->gpu, &l0, &c0);
            q0 = cg_hvd_gpu_queued(core->gpu);
        }
        if (s == warm + steps - 1)
            CK(fill(dev, n, count, host));
        if ((t[s] = shim_step(core, n, dev, out, count, gpu, req)) < 0)
            return 1;
    }
    cg_hvd_gpu_batch_stats(core->gpu, &l1, &c1);
    q1 = cg_hvd_gpu_queued(core->gpu);
    bad += check(out, n, count, host, size);
    double shim = median(t + warm, steps);

    /* The governor's probe: what one sample costs. */
    uint64_t f, tot;
    double p0 = now_ms();
    for (int i = 0; i < 1000; i++)
        (void)ctx->probe.read(ctx->probe.arg, &f, &tot);
    double probe_us = (now_ms() - p0); /* ms per 1000 = us per sample */

    /* NCCL itself, in the same process and on the same device. */
    ncclComm_t nc;
    ncclUniqueId id;
    cudaStream_t st;
    cg_hvd_req_h idreq;
    if (rank == 0)
        CK(ncclGetUniqueId(&id));
    cg_hvd_tensor_t idt = {.name = "nccl.id", .dtype = CG_DTYPE_U8,
                           .ndim = 1, .shape = {(int64_t)sizeof(id)},
                           .input = &id, .output = &id,
                           .flags = CG_HVD_IS_LEAF};
    if (cg_hvd_enqueue_broadcast(core, &idt, 0, &idreq) != CG_OK ||
        cg_hvd_wait(idreq) != CG_OK) {
        fprintf(stderr, "broadcast of NCCL's id: %s\n", cg_last_error());
        return 1;
    }
    cg_hvd_release(idreq);
    CK(ncclCommInitRank(&nc, size, id, rank));
    CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    /* The ranks start together (NCCL's first call also connects). */
    CK(ncclAllReduce(fused, fout, 1, ncclFloat, ncclSum, nc, st));
    CK(cudaStreamSynchronize(st));
    for (int s = 0; s < warm + steps; s++) {
        double t0 = now_ms();
        for (int i = 0; i < n; i++)
            CK(ncclAllReduce(dev[i], out[i], count, ncclFloat, ncclSum, nc,
                             st));
        CK(cudaStreamSynchronize(st));
        t[s] = now_ms() - t0;
    }
    double calls = median(t + warm, steps);
    for (int s = 0; s < warm + steps; s++) {
        double t0 = now_ms();
        CK(ncclAllReduce(fused, fout, fcount, ncclFloat, ncclSum, nc, st));
        CK(cudaStreamSynchronize(st));
        t[s] = now_ms() - t0;
    }
    double one = median(t + warm, steps);

    /* One tensor of the fused size through the shim, as its own fused op,
     * then one ncclAllReduce of it, then the same completion polled
     * (cudaStreamQuery) as the shim's thread polls it: pairs in turn, so
     * both see the same state of the host; the background thread's time
     * in the shim's ops from the core's stats. */
    cg_hvd_stats_t k0, k1;
    for (int s = -warm; s < pairs; s++) {
        double t0, t1, t2;
        cudaError_t q;
        if (s == 0)
            cg_hvd_core_stats(core, &k0);
        if (s == pairs - 1)
            CK(fill(&fused, 1, fcount, host));
        if ((t0 = shim_step(core, 1, &fused, &fout, fcount, gpu, req)) < 0)
            return 1;
        if (s == pairs - 1) {
            cg_hvd_core_stats(core, &k1);
            bad += check(&fout, 1, fcount, host, size);
        }
        t1 = now_ms();
        CK(ncclAllReduce(fused, fout, fcount, ncclFloat, ncclSum, nc, st));
        CK(cudaStreamSynchronize(st));
        t2 = now_ms();
        CK(ncclAllReduce(fused, fout, fcount, ncclFloat, ncclSum, nc, st));
        while ((q = cudaStreamQuery(st)) == cudaErrorNotReady)
            ;
        CK(q);
        if (s < 0)
            continue;
        ps[s] = t0;
        pn[s] = t2 - t1;
        pp[s] = now_ms() - t2;
        pd[s] = t0 - (t2 - t1);
    }
    double shim1 = median(ps, pairs), one1 = median(pn, pairs);
    double polled = median(pp, pairs), extra = median(pd, pairs);
    double extra10 = pd[pairs / 10], extra90 = pd[pairs - 1 - pairs / 10];
    double neg1 = (double)(k1.negotiate_ns - k0.negotiate_ns) / pairs / 1e3;
    double exe1 = (double)(k1.execute_ns - k0.execute_ns) / pairs / 1e3;
    double slept = k1.waits > k0.waits
                       ? (double)(k1.wait_sleeps - k0.wait_sleeps) /
                             (double)(k1.waits - k0.waits)
                       : 0.0;
    ncclCommDestroy(nc);

    if (rank != 0)
        goto done;
    printf("# gpu step: %d rank(s), %d CUDA f32 tensors x %zu B (%.2f MiB), "
           "%s, backend %s, batched copies %s, %d steps (+%d warm-up), "
           "medians\n",
           size, n, bytes, total / 1048576.0, oop ? "out of place" : "in place",
           getenv("HOROVOD_GPU_OPERATIONS"),
           ctx->cfg.gpu_batch_copies ? "on" : "off", steps, warm);
    printf("shim fused step           %8.3f ms\n", shim);
    printf("%d x ncclAllReduce      %8.3f ms   (shim %.2fx faster)\n", n,
           calls, calls / shim);
    printf("1 x ncclAllReduce fused   %8.3f ms\n", one);
    printf("shim, 1 tensor fused size %8.3f ms   (paired with NCCL's call "
           "%.3f ms, %.3f ms polled; %d pairs)\n", shim1, one1, polled, pairs);
    printf("shim beyond NCCL's call: %.1f us per fused op (one tensor; "
           "median of the pairs, p10 %.1f, p90 %.1f; target < 5 us); the "
           "step %.3f us per tensor beyond one fused call\n", extra * 1e3,
           extra10 * 1e3, extra90 * 1e3, (shim - one) * 1e3 / n);
    printf("  in it, the background thread per fused op (means): negotiate "
           "%.1f us, execute %.1f us (NCCL's call and its wait included); "
           "waits that slept: %.0f%% (CG_SPIN_TIME %.0f us)\n", neg1, exe1,
           slept * 100, k1.spin_ns / 1e3);
    printf("batched-copy kernels: %.1f launches and %.0f copies per step; "
           "NCCL calls queued behind the copies: %.1f per step\n",
           (double)(l1 - l0) / steps, (double)(c1 - c0) / steps,
           (double)(q1 - q0) / steps);
    printf("probe sample (%s): %.2f us = %.3f%% of a step, %.4f%% of its "
           "%.0f ms CG_PROBE_INTERVAL\n",
           cg_cuda_probe_source(ctx->cuda_probe), probe_us,
           probe_us / (shim * 1e3) * 100,
           probe_us / (ctx->cfg.probe_interval_ns / 1e3) * 100,
           ctx->cfg.probe_interval_ns / 1e6);
    printf("# results: %s\n", bad ? "WRONG" : "all elements exact");
done:
    if (bad)
        fprintf(stderr, "rank %d: %d elements wrong\n", rank, bad);
    cg_hvd_core_destroy(core);
    cg_ctx_destroy(ctx);
    return bad ? 1 : 0;
}
