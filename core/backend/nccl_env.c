/* SPDX-License-Identifier: Apache-2.0 */
/*
 * NCCL's buffer variables from the governor (nccl_env.h): decided at the
 * NCCL backend's communicator creation, before NCCL's first call. Built
 * with or without NCCL, so its tests run everywhere.
 * Layer: core/backend; calls the governor.
 */
#include "core/backend/nccl_env.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/parse.h"

static const char *cg__proc_get(void *arg, const char *name)
{
    (void)arg;
    return getenv(name);
}

static int cg__proc_set(void *arg, const char *name, const char *value)
{
    (void)arg;
    return setenv(name, value, 0);
}

/* Exports one variable unless the user set it; logs what and why. */
static void cg__export(const cg_log_t *log, const cg_nccl_env_ops_t *ops,
                       cg_nccl_env_item_t *it, const char *name,
                       const char *value, const char *why)
{
    const char *user = ops->get(ops->arg, name);

    it->name = name;
    snprintf(it->value, sizeof(it->value), "%s", value);
    it->user = user;
    it->kept = user != NULL;
    if (user != NULL) {
        cg_info(log, "%s %s from the environment kept (collguard would "
                "choose %s: %s)", name, user, value, why);
        return;
    }
    if (ops->set(ops->arg, name, value) != 0) {
        cg_warn(log, "setenv %s: %m", name);
        return;
    }
    cg_info(log, "%s %s exported for NCCL: %s", name, value, why);
}

int cg_nccl_env_export(cg_governor_t *gov, const cg_config_t *cfg,
                       const cg_log_t *log, const cg_nccl_env_ops_t *ops,
                       cg_nccl_env_item_t items[CG_NCCL_ENV_MAX])
{
    const cg_nccl_env_ops_t proc = {cg__proc_get, cg__proc_set, NULL};
    cg_pressure_t level;
    char val[32], b[2][32], why[160];
    int n = 0;

    /* A fresh sample: the probe may have moved to this rank's GPU since
     * the last tick, and these values hold for the communicator's life. */
    if (cg_governor_sample(gov) != CG_OK)
        cg_warn(log, "NCCL's buffer variables from the last memory sample: "
                "sampling now failed: %s", cg_last_error());
    level = cg_governor_pressure(gov);
    if (ops == NULL)
        ops = &proc;
    snprintf(val, sizeof(val), "%llu",
             (unsigned long long)cg_governor_nccl_buffsize(gov));
    snprintf(why, sizeof(why), "governor budget %s, pressure %s, cap "
             "CG_NCCL_BUFFSIZE %s",
             cg_format_size(cg_governor_budget(gov), b[0], sizeof(b[0])),
             cg_pressure_name(level),
             cg_format_size(cfg->nccl_buffsize, b[1], sizeof(b[1])));
    cg__export(log, ops, &items[n++], "NCCL_BUFFSIZE", val, why);
    if (level == CG_PRESSURE_OK)
        return n;
    /* Fewer channels: fewer per-peer buffers of NCCL_BUFFSIZE each. */
    if (ops->get(ops->arg, "NCCL_MAX_CTAS") == NULL)
        cg__export(log, ops, &items[n++], "NCCL_MAX_NCHANNELS",
                   level == CG_PRESSURE_CRITICAL ? "2" : "4",
                   level == CG_PRESSURE_CRITICAL
                       ? "memory pressure critical at communicator creation"
                       : "memory pressure warn at communicator creation");
    /* NVLink SHARP buffers are the largest of NCCL's optional ones. */
    if (level == CG_PRESSURE_CRITICAL)
        cg__export(log, ops, &items[n++], "NCCL_NVLS_ENABLE", "0",
                   "memory pressure critical at communicator creation");
    return n;
}
