/* SPDX-License-Identifier: Apache-2.0 */
/*
 * GPU smoke test of the Horovod shim's CUDA path, for a machine with a GPU
 * (not part of ctest): every rank enqueues cudaMalloc'd tensors (filled by
 * cudaMemcpy, no kernels) through include/collguard/hvd.h - fused f32 and
 * f16 sums, f32 average, i32 with prescale/postscale, one tensor larger
 * than the fusion buffer, a broadcast - with the backend that
 * HOROVOD_GPU_OPERATIONS picks, checks every element on the host and
 * prints one row per case (ms/step: first enqueue to last completion).
 * Exit 0: all right; 1: a wrong element or a failed request; 77: no CUDA
 * device (skipped). CG_TEST_BALLAST_LEAVE: see ballast().
 * Rank i uses GPU (local rank i) % GPUs.
 *   hvd_gpu_smoke [steps]          (1 rank, or under collguard-run -np N)
 */
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "collguard/hvd.h"
#include "core/reduce/half.h"
#include "integration/gpu/launcher_gpu.h"

#define NT 48             /* tensors of the fused cases */
#define BIG (12u << 20)   /* elements of the large case (48 MiB of f32) */

typedef struct {
    cg_hvd_core_h core;
    int rank, size, steps;
    int device; /* this rank's GPU: local rank modulo the GPUs */
    int wrong;            /* wrong elements over all cases */
} smoke_t;

typedef struct {
    const char *name;
    cg_dtype_t dt;
    cg_hvd_op_type_t type;
    cg_redop_t op;
    double pre, post;
    int ntensors;
    size_t elems;         /* per tensor; 0: varied 1K..64K */
    int oop;              /* out of place: output != input */
} scase_t;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static size_t elems_of(const scase_t *c, int t)
{
    return c->elems ? c->elems : (size_t)1024 << (t % 7);
}

/* Small integers: exact in every dtype used here, and in their sums. */
static double input_value(int rank, int t, size_t i)
{
    return (double)(rank + 1 + (int)((i + (size_t)t) % 7));
}

static double expected(const smoke_t *s, const scase_t *c, int t, size_t i)
{
    double sum = 0;

    if (c->type == CG_HVD_BROADCAST)
        return input_value(s->size - 1, t, i);
    for (int r = 0; r < s->size; r++) {
        double v = input_value(r, t, i) * c->pre;
        if (c->op == CG_OP_MAX)
            sum = r == 0 || v > sum ? v : sum;
        else
            sum += v;
    }
    sum *= c->post;
    return c->op == CG_OP_AVG ? sum / s->size : sum;
}

static void put(cg_dtype_t dt, void *buf, size_t i, double v)
{
    if (dt == CG_DTYPE_F32)
        ((float *)buf)[i] = (float)v;
    else if (dt == CG_DTYPE_F16)
        ((uint16_t *)buf)[i] = cg_f32_to_f16((float)v);
    else
        ((int32_t *)buf)[i] = (int32_t)v;
}

static double get(cg_dtype_t dt, const void *buf, size_t i)
{
    if (dt == CG_DTYPE_F32)
        return ((const float *)buf)[i];
    if (dt == CG_DTYPE_F16)
        return cg_f16_to_f32(((const uint16_t *)buf)[i]);
    return ((const int32_t *)buf)[i];
}

static int check_cuda(cudaError_t err, const char *what)
{
    if (err == cudaSuccess)
        return 0;
    fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(err));
    return 1;
}

/* One step of a case: fill, enqueue all, wait all, check. Returns the
 * wrong elements (failed requests count as every element wrong); adds
 * the time from the first enqueue to the last completion to *time_p. */
static long run_step(smoke_t *s, const scase_t *c, int step, void **dev,
                     void *host, double *time_p)
{
    cg_hvd_req_h req[NT];
    size_t dsize = c->dt == CG_DTYPE_F32 || c->dt == CG_DTYPE_I32 ? 4 : 2;
    long wrong = 0;
    double t0 = 0;

    for (int t = 0; t < c->ntensors; t++) {
        size_t n = elems_of(c, t);
        for (size_t i = 0; i < n; i++)
            put(c->dt, host, i, input_value(s->rank, t, i));
        if (check_cuda(cudaMemcpy(dev[t], host, n * dsize,
                                  cudaMemcpyHostToDevice), "cudaMemcpy H2D"))
            return (long)n;
    }
    /* A cudaMemcpy from pageable memory may return before its bytes land
     * (hvd.h: inputs ready at enqueue). */
    if (check_cuda(cudaDeviceSynchronize(), "cudaDeviceSynchronize"))
        return (long)elems_of(c, 0);
    t0 = now_s();
    for (int t = 0; t < c->ntensors; t++) {
        size_t n = elems_of(c, t);
        char name[64];
        cg_hvd_tensor_t ten = {.field_mask = CG_HVD_TENSOR_FIELD_DEVICE,
                               .name = name, .dtype = c->dt, .ndim = 1,
                               .shape = {(int64_t)n}, .input = dev[t],
                               .output = dev[NT + t], .device = s->device};
        cg_status_t st;

        snprintf(name, sizeof(name), "%s.%d.%d", c->name, step, t);
        st = c->type == CG_HVD_BROADCAST
                 ? cg_hvd_enqueue_broadcast(s->core, &ten, s->size - 1,
                                            &req[t])
                 : cg_hvd_enqueue_allreduce(s->core, &ten, c->op, c->pre,
                                            c->post, &req[t]);
        if (st != CG_OK) {
            fprintf(stderr, "rank %d: enqueue %s: %s\n", s->rank, name,
                    cg_last_error());
            return (long)n;
        }
    }
    for (int t = 0; t < c->ntensors; t++)
        (void)cg_hvd_wait(req[t]);
    *time_p += now_s() - t0;
    for (int t = 0; t < c->ntensors; t++) {
        size_t n = elems_of(c, t);
        if (cg_hvd_wait(req[t]) != CG_OK) {
            fprintf(stderr, "rank %d: %s tensor %d: %s\n", s->rank, c->name,
                    t, cg_hvd_error(req[t]));
            wrong += (long)n;
        } else if (check_cuda(cudaMemcpy(host, dev[NT + t], n * dsize,
                                         cudaMemcpyDeviceToHost),
                              "cudaMemcpy D2H")) {
            wrong += (long)n;
        } else {
            for (size_t i = 0; i < n; i++) {
                double want = expected(s, c, t, i), got = get(c->dt, host, i);
                double tol = c->op == CG_OP_AVG ? 1e-6 * want : 0;
                if (got - want > tol || want - got > tol) {
                    if (wrong++ < 3)
                        fprintf(stderr, "rank %d: %s tensor %d [%zu] = %g, "
                                "want %g\n", s->rank, c->name, t, i, got,
                                want);
                }
            }
        }
        cg_hvd_release(req[t]);
    }
    return wrong;
}

static int run_case(smoke_t *s, const scase_t *c, const char *backend)
{
    size_t dsize = c->dt == CG_DTYPE_F32 || c->dt == CG_DTYPE_I32 ? 4 : 2;
    size_t bytes = 0, maxn = 0;
    void *dev[2 * NT] = {0}, *host; /* inputs, then outputs */
    long wrong = 0;
    double dt = 0;

    for (int t = 0; t < c->ntensors; t++) {
        size_t n = elems_of(c, t);
        bytes += n * dsize;
        maxn = n > maxn ? n : maxn;
        if (check_cuda(cudaMalloc(&dev[t], n * dsize), "cudaMalloc"))
            return 1;
        dev[NT + t] = dev[t];
        if (c->oop && check_cuda(cudaMalloc(&dev[NT + t], n * dsize),
                                 "cudaMalloc"))
            return 1;
    }
    host = malloc(maxn * dsize);
    if (host == NULL)
        return 1;
    /* warm-up: communicator, buffers */
    wrong += run_step(s, c, -1, dev, host, &dt);
    dt = 0;
    for (int step = 0; step < s->steps; step++)
        wrong += run_step(s, c, step, dev, host, &dt);
    dt /= s->steps;
    if (s->rank == 0)
        printf("%-10s %5d  %-16s %7d %12zu  %-5s %9.3f\n", backend, s->size,
               c->name, c->ntensors, bytes, wrong ? "WRONG" : "ok",
               dt * 1e3);
    s->wrong += wrong != 0;
    free(host);
    for (int t = 0; t < c->ntensors; t++) {
        if (dev[NT + t] != dev[t])
            cudaFree(dev[NT + t]);
        cudaFree(dev[t]);
    }
    return 0;
}

#define AR CG_HVD_ALLREDUCE
#define BC CG_HVD_BROADCAST
static const scase_t cases[] = {
    /* name, dtype, type, op, prescale, postscale, tensors, elems, oop */
    {"f32-sum-fused", CG_DTYPE_F32, AR, CG_OP_SUM, 1, 1, NT, 0, 0},
    {"f32-avg-fused", CG_DTYPE_F32, AR, CG_OP_AVG, 1, 1, NT, 0, 0},
    {"f32-sum-pre.5", CG_DTYPE_F32, AR, CG_OP_SUM, 0.5, 4, 8, 0, 0},
    {"f16-sum-fused", CG_DTYPE_F16, AR, CG_OP_SUM, 1, 1, NT, 0, 0},
    {"i32-sum-pre2-post.5", CG_DTYPE_I32, AR, CG_OP_SUM, 2, 0.5, 8, 0, 0},
    {"i32-max", CG_DTYPE_I32, AR, CG_OP_MAX, 1, 1, 8, 0, 0},
    {"f32-sum-48MiB", CG_DTYPE_F32, AR, CG_OP_SUM, 1, 1, 1, BIG, 0},
    {"f32-bcast", CG_DTYPE_F32, BC, CG_OP_SUM, 1, 1, 8, 0, 0},
    {"f32-sum-oop", CG_DTYPE_F32, AR, CG_OP_SUM, 1, 1, NT, 0, 1},
    {"i32-pre3-oop-48MiB", CG_DTYPE_I32, AR, CG_OP_SUM, 3, 1, 1, BIG, 1},
    {"f32-bcast-oop", CG_DTYPE_F32, BC, CG_OP_SUM, 1, 1, 8, 0, 1},
};

/* CG_TEST_BALLAST_LEAVE=<MiB>: takes all device memory but that much
 * (so the CUDA fusion buffer must fall back to pinned host memory when
 * CG_FUSION_MIN is above it). One rank only. Returns what it holds. */
static void *ballast(size_t *held_p)
{
    const char *v = getenv("CG_TEST_BALLAST_LEAVE");
    size_t free_b = 0, total_b = 0, leave, take;
    void *p = NULL;

    *held_p = 0;
    if (v == NULL || cudaMemGetInfo(&free_b, &total_b) != cudaSuccess)
        return NULL;
    leave = (size_t)atol(v) << 20;
    for (take = free_b > leave ? free_b - leave : 0; take >= (64u << 20);
         take -= 64u << 20)
        if (cudaMalloc(&p, take) == cudaSuccess)
            break;
    (void)cudaGetLastError();
    if (p != NULL)
        *held_p = take;
    cudaMemGetInfo(&free_b, &total_b);
    printf("ballast %zu MiB, device memory free now %zu MiB\n",
           *held_p >> 20, free_b >> 20);
    return p;
}

int main(int argc, char **argv)
{
    const char *backend = getenv("HOROVOD_GPU_OPERATIONS");
    cg_ctx_params_t cp = {.field_mask = CG_CTX_PARAM_BOOTSTRAP,
                          .bootstrap = 1};
    cg_governor_snapshot_t snap;
    smoke_t s = {.steps = argc > 1 ? atoi(argv[1]) : 5};
    cg_ctx_h ctx;
    int ndev = 0;
    size_t held;
    void *hold;

    if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
        printf("hvd_gpu_smoke: no CUDA device; skipped\n");
        return 77;
    }
    s.device = launcher_gpu(ndev);
    if (s.steps < 1 || check_cuda(cudaSetDevice(s.device), "cudaSetDevice") ||
        check_cuda(cudaFree(NULL), "CUDA context"))
        return 2;
    hold = ballast(&held);
    if (cg_ctx_create(&cp, &ctx) != CG_OK ||
        cg_hvd_core_create(ctx, &s.core) != CG_OK) {
        fprintf(stderr, "hvd_gpu_smoke: %s\n", cg_last_error());
        return 1;
    }
    s.rank = cg_hvd_core_rank(s.core);
    s.size = cg_hvd_core_size(s.core);
    backend = backend != NULL ? backend : "AUTO";
    if (s.rank == 0)
        printf("%-10s %5s  %-16s %7s %12s  %-5s %9s\n", "backend", "ranks",
               "case", "tensors", "bytes", "check", "ms/step");
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
        if (run_case(&s, &cases[i], backend) != 0)
            s.wrong++;
    cg_ctx_governor_snapshot(ctx, &snap);
    if (s.rank == 0)
        printf("governor: fusion %llu bytes now (peak %llu), staging peak "
               "%llu, nccl_buffsize %llu\n",
               (unsigned long long)snap.current_bytes[CG_MEM_CAT_FUSION],
               (unsigned long long)snap.peak_bytes[CG_MEM_CAT_FUSION],
               (unsigned long long)snap.peak_bytes[CG_MEM_CAT_STAGING],
               (unsigned long long)snap.nccl_buffsize);
    cg_hvd_core_destroy(s.core);
    cg_ctx_destroy(ctx);
    cudaFree(hold);
    if (s.wrong)
        fprintf(stderr, "rank %d: %d case(s) wrong\n", s.rank, s.wrong);
    return s.wrong ? 1 : 0;
}
