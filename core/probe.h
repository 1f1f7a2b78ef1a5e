/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Memory probes: where the governor learns free and total bytes. The host
 * probe reads /proc/meminfo MemAvailable bounded by the cgroup v2 limit
 * (memory.max - memory.current) when one is set; the CUDA probe calls
 * cudaMemGetInfo on the current device (built only when CUDA is found;
 * reports CG_ERR_NO_DEVICE at run time when no GPU is usable). Tests inject
 * a fake probe through the same struct. Layer: core.
 */
#ifndef CG_CORE_PROBE_H
#define CG_CORE_PROBE_H

#include <stdint.h>

#include "collguard/governor.h"
#include "collguard/status.h"

typedef struct cg_mem_probe {
    const char *name;   /* "host", "cuda", "fake" */
    cg_mem_kind_t kind;
    cg_status_t (*read)(void *arg, uint64_t *free_p, uint64_t *total_p);
    void *arg;
} cg_mem_probe_t;

/* Paths are injectable for tests; NULL selects the real files. */
typedef struct cg_host_probe {
    const char *meminfo_path;  /* default /proc/meminfo */
    const char *cgroup_dir;    /* default: this process's cgroup v2 dir */
} cg_host_probe_t;

void cg_host_probe_init(cg_host_probe_t *hp, cg_mem_probe_t *probe_p);

/* Reads MemAvailable/MemTotal and the cgroup bounds, whichever is tighter.
 * Exposed for collguard-info and tests. */
cg_status_t cg_host_probe_read(void *arg, uint64_t *free_p, uint64_t *total_p);

/* True when this build has the CUDA probe. */
int cg_cuda_probe_built(void);
/* Number of usable CUDA devices now (0 without a driver or GPU). */
int cg_cuda_device_count(void);
/* Fills probe for the current CUDA device; CG_ERR_NO_DEVICE when none is
 * usable, CG_ERR_UNSUPPORTED when built without CUDA. */
cg_status_t cg_cuda_probe_init(cg_mem_probe_t *probe_p);

#endif
