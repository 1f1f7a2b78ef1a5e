/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Memory probes: where the governor learns free and total bytes. The host
 * probe reads /proc/meminfo MemAvailable bounded by the cgroup v2 limit
 * (memory.max - memory.current) when one is set; the CUDA probe reads the
 * device this rank will use without ever creating a CUDA context (NVML,
 * or the driver inside an existing context; see probe_cuda.c; built only
 * when CUDA is found; CG_ERR_NO_DEVICE at run time without a GPU). Tests inject
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
    /* CG_MEM_KIND_DEVICE: the CUDA ordinal read now (it follows the
     * rank's first CUDA tensor); NULL: none (-1). */
    int (*device)(void *arg);
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
/* Number of CUDA devices this process sees (0 without a driver or GPU);
 * asks the driver, creates no context. */
int cg_cuda_device_count(void);
/* The driver's CUDA version (12040 = 12.4), 0 without a driver. */
int cg_cuda_driver_version(void);

/* The CUDA probe's state: which device it reads and how. */
typedef struct cg_cuda_probe cg_cuda_probe_t;

/* Fills probe for the device this rank will use (see set_device and
 * set_local_rank; until either, device 0); *cp_p owns the state (free it
 * with cg_cuda_probe_destroy after the last reading). CG_ERR_NO_DEVICE
 * when no GPU is usable, CG_ERR_UNSUPPORTED when built without CUDA. */
cg_status_t cg_cuda_probe_create(cg_cuda_probe_t **cp_p,
                                 cg_mem_probe_t *probe_p);
void cg_cuda_probe_destroy(cg_cuda_probe_t *cp);
/* Any thread: the CUDA ordinal the rank's tensors are on (the first CUDA
 * tensor's); before it, the probe reads local_rank % devices. NULL cp is a
 * no-op. */
void cg_cuda_probe_set_device(cg_cuda_probe_t *cp, int device);
void cg_cuda_probe_set_local_rank(cg_cuda_probe_t *cp, int local_rank);
/* The device a probe reads: `device` when >= 0 (-1 if not below ndev),
 * else local_rank % ndev; -1 when ndev <= 0. */
int cg_cuda_probe_pick(int device, int local_rank, int ndev);
/* How the last reading was made: "nvml", "context" (the driver inside an
 * already active context) or "total" (no context yet: free = total). */
const char *cg_cuda_probe_source(cg_cuda_probe_t *cp);

#endif
