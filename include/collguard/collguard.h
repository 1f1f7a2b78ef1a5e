/* SPDX-License-Identifier: Apache-2.0 */
/*
 * collguard's public C API: version and build features, and the library
 * context (one per process instance: configuration, logging, governor).
 * Thread-safe: cg_version, cg_build_*, cg_status_*, cg_last_error; a
 * context's calls belong to one thread at a time unless stated.
 */
#ifndef COLLGUARD_H
#define COLLGUARD_H

#include <stdint.h>

#include "collguard/api.h"
#include "collguard/governor.h"
#include "collguard/log.h"
#include "collguard/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct cg_ctx *cg_ctx_h;

/* "0.1.0" */
CG_API const char *cg_version(void);

typedef enum {
    CG_FEATURE_CUDA = 1u << 0,
    CG_FEATURE_NCCL = 1u << 1,
    CG_FEATURE_MPI = 1u << 2,
    CG_FEATURE_UCX = 1u << 3
} cg_feature_t;

/* Bit set of cg_feature_t compiled into this library. */
CG_API unsigned cg_build_features(void);

enum {
    CG_CTX_PARAM_LOG_SINK = 1u << 0, /* log_sink, log_sink_arg */
    CG_CTX_PARAM_ENV = 1u << 1,      /* env: use instead of the process env */
    CG_CTX_PARAM_RANK = 1u << 2,     /* rank: log prefix before bootstrap */
    CG_CTX_PARAM_BOOTSTRAP = 1u << 3, /* bootstrap: join the job at create */
    CG_CTX_PARAM_PROBE = 1u << 4      /* probe_fn, probe_arg */
};

/* An application's view of the memory the governor watches. Called at each
 * governor sample (from the calling thread of cg_ctx_create and
 * cg_ctx_governor_snapshot, and from the Horovod shim's background thread:
 * it must be thread-safe) with *free_p and *total_p already holding what
 * the built-in probe (CG_MEM_PROBE) read; it may change them and returns
 * CG_OK, or an error status that fails that sample. Frameworks with a
 * caching allocator can report the memory they can really use (add what
 * the cache holds unused, subtract what they are about to take). */
typedef cg_status_t (*cg_mem_probe_fn)(void *arg, uint64_t *free_p,
                                       uint64_t *total_p);

typedef struct cg_ctx_params {
    uint64_t field_mask;          /* which fields below are set */
    cg_log_sink_fn log_sink;
    void *log_sink_arg;
    const char *const *env;       /* NULL-terminated "NAME=value" list */
    int rank;
    /* Non-zero: cg_ctx_create also bootstraps (rank, size, local and cross
     * layout from mpirun, Horovod, torchrun or collguard-run), blocking
     * until every rank arrived or CG_TIMEOUT passed; the log then carries
     * the bootstrap's rank. */
    int bootstrap;
    cg_mem_probe_fn probe_fn; /* CG_CTX_PARAM_PROBE: adjusts every sample */
    void *probe_arg;
} cg_ctx_params_t;

/* Reads the configuration (CG_*, and the HOROVOD_ / NCCL_ aliases), sets up
 * logging and the memory governor. CG_ERR_CONFIG for a malformed variable,
 * with cg_last_error() naming it and the accepted form. */
CG_API cg_status_t cg_ctx_create(const cg_ctx_params_t *params,
                                 cg_ctx_h *ctx_p);
CG_API void cg_ctx_destroy(cg_ctx_h ctx);

/* Samples free memory now and reports the governor's decisions. */
CG_API cg_status_t cg_ctx_governor_snapshot(cg_ctx_h ctx,
                                            cg_governor_snapshot_t *snap);
/* Sets every peak of the snapshot (peak_bytes, device_peak_bytes) to the
 * current bytes, so later snapshots report the peak since this call. */
CG_API cg_status_t cg_ctx_governor_reset_peaks(cg_ctx_h ctx);

#ifdef __cplusplus
}
#endif
#endif
