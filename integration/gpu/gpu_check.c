/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The GPU correctness suite of the Horovod shim (issue 14), through
 * include/collguard/hvd.h on CUDA tensors (filled and read back with
 * cudaMemcpy, no kernels): allreduce of every dtype x op (prescale and
 * postscale, in place and out of place), broadcast from every root,
 * allgather with uneven first dimensions (one rank empty), reducescatter
 * (sum, average) with dim0 not divisible by the ranks, from 1 element to
 * 9 MiB (several staging chunks, each at most CG_CHUNK_SIZE) at odd
 * sizes; fused steps of 200 small tensors of mixed sizes; a squeeze
 * phase mid-run (the same mixed step plain, under a cudaMalloc ballast,
 * after freeing it: the same bits each time); under CG_FAULT_ALLOC, the
 * governor's allocation failures must be non-zero. The staging chunk of
 * CUDA tensors on COLLGUARD and MPI (or under CG_GPU_STAGE_EMULATE): after
 * the allreduce cases, under the ballast and after it, every rank must
 * report the same agreed chunk, the least any staging rank's slots hold,
 * each slot its governor's chunk (so ranks may run with different
 * CG_CHUNK_SIZE: gpu_check.sh's chunk-per-rank runs give each rank its own
 * through rank_env.sh, and must print the plain run's digest). Where a
 * rank's slots are refused (CG_FAULT_STAGING=1 on it), only the no-slot
 * cases run: a staged CUDA allreduce and broadcast must fail on every rank
 * with CG_ERR_NO_MEMORY naming that rank, and the core must go on.
 * Inputs are small integers, different on every rank, exact in every
 * dtype and in every sum, product and average made here (1, 2 or 4
 * ranks), so each element is compared exactly with a host reference;
 * outputs are poisoned (each dtype's largest value, and a guard after
 * every tensor) before each step. A dtype x op the backend refuses
 * cleanly (CG_ERR_UNSUPPORTED with a message) is reported "refused".
 * Rank 0 prints one row per case (the verdict agreed over the ranks), the
 * digest of every rank's outputs (gpu_check.sh compares it across runs)
 * and "gpu_check: N cases, M wrong, K refused".
 * Exit 0: all right; 1: a wrong element, a failed request, a setup
 * error; 77: no CUDA device (CUDA mode).
 *   gpu_check         CUDA tensors, the backend HOROVOD_GPU_OPERATIONS
 *                     picks; rank i uses GPU (local rank i) % GPUs
 *   gpu_check --host  the same cases on host tensors (the backend
 *                     HOROVOD_CPU_OPERATIONS picks), no CUDA call
 * 1 rank, or under collguard-run -np N / mpirun (N <= 4).
 * CG_TEST_SQUEEZE_LEAVE=<MiB> (default 256): device memory the ballast
 * leaves free. CG_TEST_CORRUPT_CASE=<k>: case k's first output element
 * flips a bit after it came back (the checks' own test: 1 wrong).
 * This file holds main (setup, the suite's order, the governor's fault
 * check, the digests); the values, verdicts, steps, case sets, staging
 * checks and squeeze are gpu_check_*.c, under gpu_check_impl.h.
 */
#include <cuda_runtime_api.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "integration/gpu/gpu_check_impl.h"
#include "integration/gpu/launcher_gpu.h"

/* Under CG_FAULT_ALLOC=N the governor must have failed allocations (else
 * the faulted run tested nothing more than the plain one). */
static void fault_check(gc_t *g)
{
    const char *v = getenv("CG_FAULT_ALLOC");
    cg_governor_snapshot_t snap;
    outcome_t o;

    memset(&o, 0, sizeof(o));
    if (cg_ctx_governor_snapshot(g->ctx, &snap) != CG_OK)
        gc_fatal("governor snapshot: %s", cg_last_error());
    if (g->rank == 0)
        printf("governor: alloc_failures %llu, degrades %llu, fusion peak "
               "%llu (device %llu), staging peak %llu\n",
               (unsigned long long)snap.alloc_failures,
               (unsigned long long)snap.degrades,
               (unsigned long long)snap.peak_bytes[CG_MEM_CAT_FUSION],
               (unsigned long long)snap.device_peak_bytes[CG_MEM_CAT_FUSION],
               (unsigned long long)snap.peak_bytes[CG_MEM_CAT_STAGING]);
    if (v == NULL || strtol(v, NULL, 10) <= 0)
        return;
    o.elems = (size_t)snap.alloc_failures;
    if (snap.alloc_failures == 0)
        gc_note(&o, V_WRONG, "CG_FAULT_ALLOC=%s but no allocation failed", v);
    gc_report(g, "fault-alloc-failures", "-", "-", &o, 0);
}

/* Rank 0 prints every rank's digest (one allgather of a u64). */
static void print_digests(gc_t *g)
{
    uint64_t d = g->digest;
    cg_hvd_tensor_t t = {.name = "gc.digest", .dtype = CG_DTYPE_U64,
                         .ndim = 1, .shape = {1}, .input = &d,
                         .flags = CG_HVD_IS_LEAF, .device = -1};
    const void *data;
    int64_t rows;
    cg_hvd_req_h req;
    uint64_t x;

    if (cg_hvd_enqueue_allgather(g->core, &t, &req) != CG_OK)
        gc_fatal("digest: %s", cg_last_error());
    if (cg_hvd_wait(req) != CG_OK ||
        cg_hvd_allgather_result(req, &data, &rows) != CG_OK ||
        rows != g->size)
        gc_fatal("digest: %s", cg_hvd_error(req));
    if (g->rank == 0) {
        printf("gpu_check digest:");
        for (int r = 0; r < g->size; r++) {
            memcpy(&x, (const char *)data + 8 * (size_t)r, 8);
            printf(" %016llx", (unsigned long long)x);
        }
        printf("\n");
    }
    cg_hvd_release(req);
}

int main(int argc, char **argv)
{
    cg_ctx_params_t cp = {.field_mask = CG_CTX_PARAM_BOOTSTRAP,
                          .bootstrap = 1};
    gc_t g = {.device = 0, .digest = 0xcbf29ce484222325ull, .corrupt = -1};
    int host = argc > 1 && strcmp(argv[1], "--host") == 0, ndev = 0;
    const char *be;

    if (argc > 2 || (argc == 2 && !host))
        gc_fatal("usage: gpu_check [--host]");
    for (int d = 0; d < gc_ndtypes; d++)
        if (el_size(gc_dtypes[d]) != cg_dtype_size(gc_dtypes[d]))
            gc_fatal("test bug: el_size(%s)", cg_dtype_name(gc_dtypes[d]));
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (getenv("CG_TEST_CORRUPT_CASE") != NULL)
        g.corrupt = atoi(getenv("CG_TEST_CORRUPT_CASE"));
    if (host) {
        g.device = -1;
        be = getenv("HOROVOD_CPU_OPERATIONS");
        be = getenv("CG_CPU_OPERATIONS") ? getenv("CG_CPU_OPERATIONS") : be;
        g.backend = be != NULL ? be : "COLLGUARD";
    } else {
        if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
            printf("gpu_check: no CUDA device; skipped\n");
            return 77;
        }
        g.device = launcher_gpu(ndev);
        gc_cuda_or_die(cudaSetDevice(g.device), "cudaSetDevice");
        gc_cuda_or_die(cudaFree(NULL), "CUDA context");
        be = getenv("HOROVOD_GPU_OPERATIONS");
        be = getenv("CG_GPU_OPERATIONS") ? getenv("CG_GPU_OPERATIONS") : be;
        g.backend = be != NULL ? be : "AUTO";
    }
    if (cg_ctx_create(&cp, &g.ctx) != CG_OK ||
        cg_hvd_core_create(g.ctx, &g.core) != CG_OK)
        gc_fatal("%s", cg_last_error());
    g.rank = cg_hvd_core_rank(g.core);
    g.size = cg_hvd_core_size(g.core);
    if (g.size > MAX_RANKS)
        gc_fatal("%d ranks: the inputs stay exact up to %d", g.size,
                 MAX_RANKS);
    g.dev_in = gc_arena(&g);
    g.dev_out = gc_arena(&g);
    g.h_in = malloc(ARENA);
    g.h_out = malloc(ARENA);
    g.c_in = malloc(ARENA);
    g.c_out = malloc(ARENA);
    if (!g.h_in || !g.h_out || !g.c_in || !g.c_out)
        gc_fatal("out of host memory");
    if (g.rank == 0)
        printf("%-9s %5s  %-22s %-5s %-8s %9s  %-7s %9s\n", "backend",
               "ranks", "case", "dtype", "op", "elements", "check", "ms");

    if (!gc_no_slot_cases(&g)) {
        gc_allreduce_cases(&g);
        gc_stage_chunk_check(&g, "stage-chunk");
        gc_broadcast_cases(&g);
        gc_allgather_cases(&g);
        gc_reducescatter_cases(&g);
        gc_fused_cases(&g);
        gc_squeeze(&g);
        fault_check(&g);
    }
    print_digests(&g);
    if (g.rank == 0)
        printf("gpu_check: %d cases, %d wrong, %d refused\n", g.cases,
               g.wrong, g.refused);

    cg_hvd_core_destroy(g.core);
    cg_ctx_destroy(g.ctx);
    if (g.device >= 0) {
        gc_cuda_or_die(cudaFree(g.dev_in), "cudaFree");
        gc_cuda_or_die(cudaFree(g.dev_out), "cudaFree");
    } else {
        free(g.dev_in);
        free(g.dev_out);
    }
    free(g.h_in);
    free(g.h_out);
    free(g.c_in);
    free(g.c_out);
    return g.wrong ? 1 : 0;
}
