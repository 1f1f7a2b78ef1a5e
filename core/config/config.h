/* SPDX-License-Identifier: Apache-2.0 */
/*
 * collguard's configuration: one table of fields (name, aliases, type,
 * default, documentation), parsed from the environment into cg_config_t.
 * Defaults pass through the same parsers as user values. A malformed value
 * is an error naming the variable and the accepted form; an unknown CG_*
 * variable draws a warning with the nearest known name.
 * The rows: config_table.c; reading them: config_load.c; one value by its
 * type: config_value.c; the listing: config_print.c.
 * Layer: core/config; calls core/base only.
 */
#ifndef CG_CORE_CONFIG_H
#define CG_CORE_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "collguard/status.h"
#include "core/base/log.h"
#include "core/base/enum.h"

/* The choices of the table's enum variables, one name list each
 * (core/base/enum.h); the names are what the variables accept (any case). */

/* CG_MEM_PROBE: auto (CUDA when a GPU is usable, else host), host, cuda. */
#define CG_MEM_PROBE_MAP(X)      \
    X(CG_MEM_PROBE_AUTO, "auto") \
    X(CG_MEM_PROBE_HOST, "host") \
    X(CG_MEM_PROBE_CUDA, "cuda")
typedef enum { CG_MEM_PROBE_MAP(CG_ENUM_ITEM) } cg_mem_probe_kind_t;
CG_ENUM_NAME_FN(cg_mem_probe_name, cg_mem_probe_kind_t, CG_MEM_PROBE_MAP)

/* CG_ALGO: how collectives pick their algorithm. auto: by message size;
 * ring: ring AllReduce, pipelined chain Broadcast; rd: recursive doubling,
 * binomial-tree Broadcast; shm: shared-memory AllReduce (all ranks on one
 * host). cg_allreduce_algo answers with one of RING, RD, SHM. */
#define CG_COLL_ALGO_MAP(X)      \
    X(CG_COLL_ALGO_AUTO, "auto") \
    X(CG_COLL_ALGO_RING, "ring") \
    X(CG_COLL_ALGO_RD, "rd")     \
    X(CG_COLL_ALGO_SHM, "shm")
typedef enum { CG_COLL_ALGO_MAP(CG_ENUM_ITEM) } cg_coll_algo_t;
CG_ENUM_NAME_FN(cg_coll_algo_name, cg_coll_algo_t, CG_COLL_ALGO_MAP)

/* CG_DUPLICATE_POLICY: a second enqueue of a name in flight. coalesce:
 * same buffer, size, op: reduce once; error: always Horovod's ValueError. */
#define CG_DUP_POLICY_MAP(X)              \
    X(CG_DUP_POLICY_COALESCE, "coalesce") \
    X(CG_DUP_POLICY_ERROR, "error")
typedef enum { CG_DUP_POLICY_MAP(CG_ENUM_ITEM) } cg_dup_policy_t;

/* CG_CPU_OPERATIONS / CG_GPU_OPERATIONS (HOROVOD_*): the shim's backend
 * (core/backend/hvd_backend.h). AUTO (CUDA tensors only): NCCL when its
 * backend is built in, else COLLGUARD. The host variable accepts the
 * kinds before CG_BACKEND_NCCL. */
#define CG_BACKEND_KIND_MAP(X)              \
    X(CG_BACKEND_COLLGUARD, "COLLGUARD")    \
    X(CG_BACKEND_MPI, "MPI")                \
    X(CG_BACKEND_NCCL, "NCCL")              \
    X(CG_BACKEND_AUTO, "AUTO")
typedef enum { CG_BACKEND_KIND_MAP(CG_ENUM_ITEM) } cg_backend_kind_t;
CG_ENUM_NAME_FN(cg_backend_kind_name, cg_backend_kind_t, CG_BACKEND_KIND_MAP)

/* A size that may also be given as a fraction of total memory ("5%"). */
typedef struct {
    uint64_t bytes;
    double fraction; /* >= 0: fraction of total; < 0: use bytes */
} cg_size_or_frac_t;

typedef enum {
    CG_CFG_LOG_LEVEL,
    CG_CFG_MEM_PROBE,
    CG_CFG_MEM_RESERVE,
    CG_CFG_MEM_FRACTION,
    CG_CFG_FUSION_THRESHOLD,
    CG_CFG_FUSION_MIN,
    CG_CFG_CHUNK_SIZE,
    CG_CFG_CHUNK_MIN,
    CG_CFG_NCCL_BUFFSIZE,
    CG_CFG_NCCL_BUFFSIZE_MIN,
    CG_CFG_PRESSURE_WARN,
    CG_CFG_PRESSURE_CRITICAL,
    CG_CFG_PRESSURE_HYSTERESIS,
    CG_CFG_PRESSURE_DWELL,
    CG_CFG_PROBE_INTERVAL,
    CG_CFG_OOM_WINDOW,
    CG_CFG_FAULT_ALLOC,
    CG_CFG_FAULT_COLLECTIVE,
    CG_CFG_FAULT_STAGING,
    CG_CFG_TRANSPORT,
    CG_CFG_TIMEOUT,
    CG_CFG_SOCKET_IFNAME,
    CG_CFG_SOCKET_NSOCKS,
    CG_CFG_UCX_SHM_ZCOPY,
    CG_CFG_GPU_BATCH_COPIES,
    CG_CFG_GPU_STAGE_PIPELINE,
    CG_CFG_GPU_STAGE_EMULATE,
    CG_CFG_ALGO,
    CG_CFG_SHM_SLOT,
    CG_CFG_SHM_CALIBRATE,
    CG_CFG_DYNAMIC_PROCESS_SETS,
    CG_CFG_CYCLE_TIME,
    CG_CFG_SPIN_TIME,
    CG_CFG_DUPLICATE_POLICY,
    CG_CFG_CACHE_CAPACITY,
    CG_CFG_STALL_CHECK_TIME,
    CG_CFG_STALL_SHUTDOWN_TIME,
    CG_CFG_STALL_CHECK_DISABLE,
    CG_CFG_METRICS_FILE,
    CG_CFG_METRICS_PERIOD,
    CG_CFG_METRICS_PORT,
    CG_CFG_METRICS_ADDR,
    CG_CFG_CPU_OPERATIONS,
    CG_CFG_GPU_OPERATIONS,
    CG_CFG_NCCL_COST,
    CG_CFG_FAULT_NCCL_INIT,
    CG_CFG_TIMELINE,
    CG_CFG_TIMELINE_MARK_CYCLES,
    CG_CFG_TIMELINE_COUNTER_PERIOD,
    CG_CFG_TUNER_RULES,
    CG_CFG_TUNER_CHANNELS_WARN,
    CG_CFG_TUNER_CHANNELS_CRITICAL,
    CG_CFG_COUNT
} cg_config_id_t;

typedef struct cg_config {
    cg_log_level_t log_level;
    cg_mem_probe_kind_t mem_probe;
    cg_size_or_frac_t mem_reserve;
    double mem_fraction;
    uint64_t fusion_threshold;   /* 0 disables fusion */
    uint64_t fusion_min;
    uint64_t chunk_size;
    uint64_t chunk_min;
    uint64_t nccl_buffsize;
    uint64_t nccl_buffsize_min;
    cg_size_or_frac_t pressure_warn;       /* free below this: WARN */
    cg_size_or_frac_t pressure_critical;   /* free below this: CRITICAL */
    cg_size_or_frac_t pressure_hysteresis; /* rise this far to recover */
    uint64_t pressure_dwell_ns;  /* and stay there this long */
    uint64_t probe_interval_ns;
    uint64_t oom_window_ns;
    uint64_t fault_alloc;        /* fail every Nth buffer allocation; 0 off */
    int fault_collective;        /* shim: this rank's Nth collective breaks
                                    its backend; 0 off */
    bool fault_staging;          /* shim: no staging slot on this rank */
    bool fault_nccl_init;        /* shim: NCCL's creation fails as OOM */
    uint64_t nccl_cost;          /* AUTO: NCCL's cost; 0: estimated */
    cg_transport_kind_t transport;
    uint64_t timeout_ns;
    char socket_ifname[64];
    int socket_nsocks;
    bool ucx_shm_zcopy;          /* UCX endpoints on one host: zero copy */
    bool gpu_batch_copies;       /* CUDA fusion copies in one kernel */
    bool gpu_stage_pipeline;     /* staged CUDA collectives over 2 slots */
    bool gpu_stage_emulate;      /* testing: staging slots without a GPU */
    cg_coll_algo_t algo;         /* collective algorithm choice */
    uint64_t shm_slot;           /* shared-memory slot bytes; 0: no shm */
    bool shm_calibrate;          /* large AllReduce: shm only if faster */
    int dynamic_process_sets;    /* Horovod ABI: add/remove allowed */
    uint64_t cycle_time_ns;      /* Horovod shim: background cycle */
    uint64_t spin_time_ns;       /* Horovod shim: busy-poll before sleeping */
    cg_dup_policy_t duplicate_policy;
    int cache_capacity;          /* Horovod shim: response cache slots */
    uint64_t stall_check_ns;     /* stall warning after this long */
    uint64_t stall_shutdown_ns;  /* 0: never shut down on a stall */
    bool stall_check_disable;
    char metrics_file[256];      /* Prometheus textfile; "": none */
    uint64_t metrics_period_ns;  /* how often it is rewritten */
    int metrics_port;            /* HTTP endpoint base port; 0: none */
    char metrics_addr[64];       /* address it listens on */
    cg_backend_kind_t cpu_operations; /* host tensors */
    cg_backend_kind_t gpu_operations; /* CUDA tensors */
    char timeline[1024];         /* Chrome trace path, "DYNAMIC" or "" */
    bool timeline_mark_cycles;   /* CYCLE_START instants */
    uint64_t timeline_counter_period_ns; /* counter events; 0: per cycle */
    char tuner_rules[1024];      /* NCCL tuner plugin: CSV rules; "": none */
    int tuner_channels_warn;     /* NCCL tuner: channel cap at WARN */
    int tuner_channels_critical; /* NCCL tuner: channel cap at CRITICAL */
    /* Which fields were set from the environment (by name or alias). */
    bool set_by_user[CG_CFG_COUNT];
} cg_config_t;

/* Looks up one environment variable; NULL if unset. */
typedef const char *(*cg_getenv_fn)(void *arg, const char *name);

/* cg_getenv_fn over arg, a NULL-terminated "NAME=value" list. */
const char *cg_config_list_getenv(void *arg, const char *name);

/* Fills every field from its documented default. Cannot fail. */
void cg_config_defaults(cg_config_t *cfg);

/* Reads the table's variables through getenv (NULL: the process
 * environment). env_names, when not NULL, is the NULL-terminated list of
 * all variable names present ("NAME=value" or "NAME"), used to warn about
 * unknown CG_* names with a suggestion. On a malformed value returns
 * CG_ERR_CONFIG with cg_last_error() naming the variable, the value and the
 * accepted form; cfg is then left with defaults for the remaining fields. */
cg_status_t cg_config_load(cg_config_t *cfg, cg_getenv_fn getenv_fn,
                           void *getenv_arg, const char *const *env_names,
                           const cg_log_t *log);

/* Resolves a size-or-fraction against a total. */
uint64_t cg_config_resolve_size(const cg_size_or_frac_t *v, uint64_t total);

/* Writes a size-or-fraction as it is given ("5%", "512 MiB"); returns buf. */
const char *cg_config_format_size(const cg_size_or_frac_t *v, char *buf,
                                  size_t len);

/* Name of the variable for a field ("CG_MEM_RESERVE"). */
const char *cg_config_name(cg_config_id_t id);

/* Prints every field: name, current value, default, doc. markdown selects
 * the table of docs/configuration.md. */
void cg_config_print(const cg_config_t *cfg, FILE *out, bool markdown);

/* Nearest known variable name to an unknown one, or NULL if none close. */
const char *cg_config_suggest(const char *unknown);

#endif
