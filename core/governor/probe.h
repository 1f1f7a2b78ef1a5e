/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Memory probes: where the governor learns free and total bytes. The host
 * probe reads /proc/meminfo MemAvailable bounded by the cgroup v2 limit
 * (memory.max - memory.current) when one is set; the CUDA probe calls
 * cudaMemGetInfo on the current device (built only when CUDA is found;
 * reports CG_ERR_NO_DEVICE at run time when no GPU is usable). Tests inject
 * a fake probe through the same struct. Layer: core/governor.
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
    int device;         /* CG_MEM_KIND_DEVICE: the CUDA ordinal */
} cg_mem_probe_t;

/* Paths are injectable for tests; NULL selects the real files (zero the
 * struct for the real probe). The caller
 * keeps hp alive as long as the probe is used (probe.arg points to it). */
typedef struct cg_host_probe {
    const char *meminfo_path;  /* default /proc/meminfo */
    /* cgroup v2 directory of this process; default: cgroup_root followed by
     * the path of the "0::<path>" line of proc_cgroup_path. */
    const char *cgroup_dir;
    const char *cgroup_root;      /* default /sys/fs/cgroup */
    const char *proc_cgroup_path; /* default /proc/self/cgroup */
} cg_host_probe_t;

void cg_host_probe_init(cg_host_probe_t *hp, cg_mem_probe_t *probe_p);

/* Reads MemAvailable/MemTotal and bounds them by the cgroup v2 limits of
 * the process's cgroup and of its ancestors up to cgroup_root: for each
 * memory.max that is not "max", free = min(free, max - memory.current) and
 * total = min(total, max). No cgroup v2 memory files (cgroup v1, or none):
 * /proc/meminfo alone. arg is a cg_host_probe_t. Exposed for
 * collguard-info and tests. */
cg_status_t cg_host_probe_read(void *arg, uint64_t *free_p, uint64_t *total_p);

/* True when this build has the CUDA probe. */
int cg_cuda_probe_built(void);
/* Number of usable CUDA devices now (0 without a driver or GPU). */
int cg_cuda_device_count(void);
/* Fills probe for the current CUDA device; CG_ERR_NO_DEVICE when none is
 * usable, CG_ERR_UNSUPPORTED when built without CUDA. */
cg_status_t cg_cuda_probe_init(cg_mem_probe_t *probe_p);

#endif
