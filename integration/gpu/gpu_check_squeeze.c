/* SPDX-License-Identifier: Apache-2.0 */
/*
 * gpu_check's squeeze (integration/gpu/gpu_check.c): the same mixed step
 * plain, under a cudaMalloc ballast that leaves CG_TEST_SQUEEZE_LEAVE MiB
 * of the GPU free, and after freeing it, the same bits each time, with the
 * staging chunk checked under the ballast and after it (host mode: the
 * plain rows only; CG_FAULT_ALLOC is the squeeze there).
 */
#include <cuda_runtime_api.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "integration/gpu/gpu_check_impl.h"

/* All but leave bytes of this GPU's free memory, in one cudaMalloc
 * (64 MiB less at each failure); NULL when not even 64 MiB is there. */
static void *take_ballast(size_t leave, size_t *held_p)
{
    size_t free_b = 0, total_b = 0, take;
    void *p = NULL;

    *held_p = 0;
    gc_cuda_or_die(cudaMemGetInfo(&free_b, &total_b), "cudaMemGetInfo");
    take = free_b > leave ? (free_b - leave) & ~(((size_t)2 << 20) - 1) : 0;
    for (; take >= ((size_t)64 << 20); take -= (size_t)64 << 20) {
        if (cudaMalloc(&p, take) == cudaSuccess)
            break;
        (void)cudaGetLastError(); /* out of memory is not sticky */
        p = NULL;
    }
    if (p != NULL)
        *held_p = take;
    return p;
}

/* The mixed step: 200 f32 sums, 200 bf16 averages (scaled), a 9 MiB f16
 * sum, 50 reducescatters, 50 allgathers. */
static int squeeze_specs(const gc_t *g, spec_t *sp, uint32_t seed)
{
    int n = 0;

    gc_fused_specs(g, sp + n, FUSED, CG_HVD_ALLREDUCE, CG_DTYPE_F32, CG_OP_SUM,
                   0, seed);
    n += FUSED;
    gc_fused_specs(g, sp + n, FUSED, CG_HVD_ALLREDUCE, CG_DTYPE_BF16,
                   CG_OP_AVG, 1, seed + 1);
    n += FUSED;
    sp[n++] = (spec_t){.type = CG_HVD_ALLREDUCE, .dt = CG_DTYPE_F16,
                       .op = CG_OP_SUM, .pre = 1, .post = 1, .oop = 1,
                       .dim0 = (int64_t)(BIG / 2) + 3, .row = 1,
                       .seed = seed + 2};
    gc_fused_specs(g, sp + n, 50, CG_HVD_REDUCESCATTER, CG_DTYPE_F32,
                   CG_OP_SUM, 0, seed + 3);
    n += 50;
    gc_fused_specs(g, sp + n, 50, CG_HVD_ALLGATHER, CG_DTYPE_I64, CG_OP_SUM, 0,
                   seed + 4);
    n += 50;
    return n;
}

/* One squeeze row: a step of sp whose bits must equal *ref_hash (set by
 * the first call). */
static void squeeze_row(gc_t *g, const char *cname, int tag, const spec_t *sp,
                        int n, uint64_t *ref_hash, int first)
{
    outcome_t o;
    double sec;

    gc_run_step(g, tag, sp, n, &o, &sec);
    if (first)
        *ref_hash = o.hash;
    else if (o.verdict == V_OK && o.hash != *ref_hash)
        gc_note(&o, V_WRONG, "bits differ from the unsqueezed step (%016llx, "
                "want %016llx)", (unsigned long long)o.hash,
             (unsigned long long)*ref_hash);
    g->digest = gc_hash_bytes(g->digest, &o.hash, sizeof(o.hash));
    gc_report(g, cname, "mixed", "mixed", &o, sec * 1e3);
}

void gc_squeeze(gc_t *g)
{
    spec_t sp[MAXT];
    const char *v = getenv("CG_TEST_SQUEEZE_LEAVE");
    long leave_mib = v != NULL ? strtol(v, NULL, 10) : 256;
    int n = squeeze_specs(g, sp, (uint32_t)g->cases), tag = g->cases;
    cg_governor_snapshot_t snap;
    int32_t held[MAX_RANKS] = {0}, dummy = 0;
    uint64_t h0 = 0;
    size_t got = 0;
    void *ballast = NULL;
    struct timespec nap = {0, 300000000}; /* > 2 CG_PROBE_INTERVAL */

    if (leave_mib <= 0)
        gc_fatal("CG_TEST_SQUEEZE_LEAVE=%s: expected MiB > 0", v);
    squeeze_row(g, "squeeze-plain", tag, sp, n, &h0, 1);
    squeeze_row(g, "squeeze-plain-again", tag, sp, n, &h0, 0);
    if (g->device < 0)
        return; /* host mode: CG_FAULT_ALLOC is the squeeze */
    /* In rank order, so ranks sharing a GPU do not race for it. */
    for (int r = 0; r < g->size; r++) {
        if (r == g->rank) {
            ballast = take_ballast((size_t)leave_mib << 20, &got);
            held[r] = (int32_t)(got >> 20);
        }
        if (gc_agree_max(g, &dummy, 1) != 0)
            gc_fatal("rank %d: the core stopped before the ballast", g->rank);
    }
    if (gc_agree_max(g, held, g->size) != 0)
        gc_fatal("rank %d: the core stopped before the ballast", g->rank);
    nanosleep(&nap, NULL); /* the governor samples it */
    cg_ctx_governor_snapshot(g->ctx, &snap);
    if (g->rank == 0) {
        printf("ballast (leave %ld MiB):", leave_mib);
        for (int r = 0; r < g->size; r++)
            printf(" rank %d %d MiB", r, (int)held[r]);
        printf("; rank 0 sees %llu MiB free, pressure %s, fusion %llu, "
               "chunk %llu, alloc_failures %llu\n",
               (unsigned long long)(snap.free_bytes >> 20),
               snap.pressure == CG_PRESSURE_OK     ? "ok"
               : snap.pressure == CG_PRESSURE_WARN ? "warn" : "critical",
               (unsigned long long)snap.fusion_bytes,
               (unsigned long long)snap.chunk_bytes,
               (unsigned long long)snap.alloc_failures);
    }
    squeeze_row(g, "squeeze-ballast", tag, sp, n, &h0, 0);
    squeeze_row(g, "squeeze-ballast-again", tag, sp, n, &h0, 0);
    gc_stage_chunk_check(g, "stage-chunk-ballast");
    if (ballast != NULL)
        gc_cuda_or_die(cudaFree(ballast), "cudaFree (ballast)");
    squeeze_row(g, "squeeze-freed", tag, sp, n, &h0, 0);
    nanosleep(&nap, NULL); /* the governor sees the memory back */
    gc_stage_chunk_check(g, "stage-chunk-freed");
}
