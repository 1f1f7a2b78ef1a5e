/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The variables NCCL reads once, at its first call, that the governor
 * chooses: NCCL_BUFFSIZE from the budget and, under pressure, a channel
 * cap (NCCL_MAX_NCHANNELS; 4 at warn, 2 at critical, unless NCCL_MAX_CTAS
 * is set) and NCCL_NVLS_ENABLE=0 at critical. A variable the user set is
 * kept and logged with what collguard would have chosen. The environment
 * is reached through an ops pair so tests need no NCCL and no real
 * environment. Layer: core/backend; calls the governor.
 */
#ifndef CG_CORE_BACKEND_NCCL_ENV_H
#define CG_CORE_BACKEND_NCCL_ENV_H

#include <stdbool.h>

#include "core/base/log.h"
#include "core/config/config.h"
#include "core/governor/governor.h"

typedef struct cg_nccl_env_ops {
    const char *(*get)(void *arg, const char *name);
    int (*set)(void *arg, const char *name, const char *value); /* 0: ok */
    void *arg;
} cg_nccl_env_ops_t;

/* One decision: exported (kept false) or the user's value kept. */
typedef struct cg_nccl_env_item {
    const char *name;
    char value[32];     /* what collguard chose */
    const char *user;   /* the user's value when kept, else NULL */
    bool kept;
} cg_nccl_env_item_t;

#define CG_NCCL_ENV_MAX 3

/* Decides and exports (ops NULL: the process environment, getenv and
 * setenv without overwriting); items[] receives each decision in order
 * (NCCL_BUFFSIZE first). Returns how many. */
int cg_nccl_env_export(cg_governor_t *gov, const cg_config_t *cfg,
                       const cg_log_t *log, const cg_nccl_env_ops_t *ops,
                       cg_nccl_env_item_t items[CG_NCCL_ENV_MAX]);

#endif
