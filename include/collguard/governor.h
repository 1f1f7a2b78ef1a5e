/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Public view of the memory governor: categories of accounted memory,
 * pressure levels, and a snapshot of the governor's current decisions
 * (budget, buffer sizes, pressure, accounting) that tools and frontends read.
 */
#ifndef COLLGUARD_GOVERNOR_H
#define COLLGUARD_GOVERNOR_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The categories of accounted memory, 0 to 4, with their names:
 * X(enumerator, name).
 *   fusion        fusion buffers
 *   ring          collective pipeline / ring chunks
 *   staging       staging copies, unexpected messages
 *   registration  registered / pinned regions
 *   control       library bookkeeping structures */
#define CG_MEM_CAT_MAP(X)                          \
    X(CG_MEM_CAT_FUSION, "fusion")                 \
    X(CG_MEM_CAT_RING, "ring")                     \
    X(CG_MEM_CAT_STAGING, "staging")               \
    X(CG_MEM_CAT_REGISTRATION, "registration")     \
    X(CG_MEM_CAT_CONTROL, "control")

typedef enum {
#define CG__MEM_CAT_ENUM(e, s) e,
    CG_MEM_CAT_MAP(CG__MEM_CAT_ENUM)
#undef CG__MEM_CAT_ENUM
    CG_MEM_CAT_COUNT
} cg_mem_cat_t;

/* The pressure levels, 0 to 2, with their names: X(enumerator, name). */
#define CG_PRESSURE_MAP(X)              \
    X(CG_PRESSURE_OK, "ok")             \
    X(CG_PRESSURE_WARN, "warn")         \
    X(CG_PRESSURE_CRITICAL, "critical")

typedef enum {
#define CG__PRESSURE_ENUM(e, s) e,
    CG_PRESSURE_MAP(CG__PRESSURE_ENUM)
#undef CG__PRESSURE_ENUM
} cg_pressure_t;

typedef enum {
    CG_MEM_KIND_HOST = 0, /* pageable host memory (probe: MemAvailable/cgroup) */
    CG_MEM_KIND_DEVICE = 1 /* GPU memory of the current device (cudaMemGetInfo) */
} cg_mem_kind_t;

typedef struct cg_governor_snapshot {
    cg_mem_kind_t kind;
    uint64_t free_bytes;       /* from the last probe sample */
    uint64_t total_bytes;
    uint64_t reserve_bytes;    /* resolved CG_MEM_RESERVE */
    uint64_t budget_bytes;     /* max(0, free - reserve) * fraction */
    uint64_t fusion_bytes;     /* fusion buffer size the governor allows now */
    uint64_t chunk_bytes;      /* pipeline chunk size now */
    uint64_t nccl_buffsize;    /* NCCL_BUFFSIZE it would export */
    cg_pressure_t pressure;
    double oom_eta_s;          /* projected seconds to OOM; <0 if none */
    uint64_t current_bytes[CG_MEM_CAT_COUNT];
    uint64_t peak_bytes[CG_MEM_CAT_COUNT];
    uint64_t alloc_failures;   /* real or injected, all recovered or reported */
    uint64_t early_warnings;
    uint64_t degrades;         /* samples or allocation failures that
                                  shrank the chunk or fusion size */
    int device;                /* CUDA ordinal of the memory; -1: host */
    double early_warning_age_s; /* seconds since the last early warning; <0
                                 * if none was raised */
    /* Of current_bytes / peak_bytes, what is GPU memory (the rest is host
     * memory: malloc'd or pinned). */
    uint64_t device_current_bytes[CG_MEM_CAT_COUNT];
    uint64_t device_peak_bytes[CG_MEM_CAT_COUNT];
} cg_governor_snapshot_t;

#ifdef __cplusplus
}
#endif
#endif
