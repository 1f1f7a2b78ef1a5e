/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Internal objects of the NCCL tuner plugin (tuner_*.c): the library's one
 * tuner state (config, governor, rules), a context per communicator, the
 * rule table from CSV, and the cost-table policy every version runs.
 * Layer: plugin/nccl; calls the governor and core/base.
 */
#ifndef CG_PLUGIN_NCCL_TUNER_IMPL_H
#define CG_PLUGIN_NCCL_TUNER_IMPL_H

#include <pthread.h>
#include <stdbool.h>

#include "core/base/log.h"
#include "core/config/config.h"
#include "core/governor/governor.h"
#include "plugin/nccl/probe_cudrv.h"
#include "plugin/nccl/tuner_v5.h"

#define CG_TN_NAME "collguard"

typedef struct cg__tn_rule {
    int coll;              /* ncclFunc_t */
    uint64_t min_bytes, max_bytes; /* inclusive */
    int algo, proto;       /* NCCL_ALGO_*, NCCL_PROTO_* */
    int channels;          /* -1: NCCL's */
    long nnodes, nranks;   /* -1: any */
} cg__tn_rule_t;

typedef struct cg__tn_state {
    pthread_mutex_t lock;
    int users;             /* live contexts */
    ncclDebugLogger_t logger;
    cg_log_t log;
    cg_config_t cfg;
    cg_host_probe_t host_probe;
    cg_cudrv_probe_t drv;
    cg_mem_probe_t probe;
    cg_governor_t *gov;
    cg_pressure_t last_level;
    cg__tn_rule_t *rules;
    int nrules;
    bool passthrough;      /* setup failed: NCCL's choices left alone */
} cg__tn_state_t;

typedef struct cg__tn_ctx {
    size_t nranks, nnodes;
} cg__tn_ctx_t;

extern cg__tn_state_t cg__tn;

/* tuner_state.c */
ncclResult_t cg__tn_init(size_t nranks, size_t nnodes,
                        ncclDebugLogger_t logger, void **ctx_p);
ncclResult_t cg__tn_finalize(void *ctx);
/* The governor's level now (sampled when CG_PROBE_INTERVAL passed). */
cg_pressure_t cg__tn_pressure(void);

/* tuner_rules.c: parses path (CSV), all or nothing: CG_ERR_IO when the
 * file cannot be read, CG_ERR_CONFIG naming file and line for the first
 * line that does not parse; *rules_p and *n_p set only on CG_OK. */
cg_status_t cg__tn_rules_load(const char *path, const cg_log_t *log,
                             cg__tn_rule_t **rules_p, int *n_p);
const cg__tn_rule_t *cg__tn_rules_match(const cg__tn_rule_t *rules, int n,
                                      int coll, size_t nbytes, size_t nnodes,
                                      size_t nranks);

/* tuner_policy.c: the policy on a float[numAlgo][numProto] cost table. */
ncclResult_t cg__tn_get_coll_info(void *ctx, ncclFunc_t coll, size_t nbytes,
                                 int num_pipe_ops, float **table,
                                 int num_algo, int num_proto, int reg_buff,
                                 int *nchannels);

#endif
