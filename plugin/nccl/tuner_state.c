/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The tuner plugin's one state struct: set up by the first communicator's
 * init (configuration, the governor over the GPU when libcuda is loaded
 * and a context is current, else over host memory, the CSV rules), kept
 * while contexts live, torn down by the last finalize or at unload. No
 * thread is started. Logging goes to NCCL's logger (TUNING subsystem).
 * Init fails a communicator (NCCL 2.28 fails its creation when the tuner's
 * init does) only when there is no memory for a context: a rules file
 * that cannot be read or does not parse is ignored whole, and any other
 * setup failure (a bad CG_* value, CG_MEM_PROBE=cuda without a CUDA
 * context) leaves the tuner a pass-through until the last finalize, each
 * with a WARN saying why.
 * Layer: plugin/nccl; calls the governor and core/base.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/error.h"
#include "plugin/nccl/tuner_impl.h"

cg__tn_state_t cg__tn = {.lock = PTHREAD_MUTEX_INITIALIZER};

/* Lines go to NCCL's logger under TUNING as the message with its file and
 * line (NCCL writes its own prefix). */
static void cg__tn_sink(void *arg, cg_log_level_t level, const char *file,
                        int line, const char *msg)
{
    ncclDebugLogger_t logger = cg__tn.logger;

    (void)arg;
    if (logger == NULL)
        return; /* installed only with a logger */
    logger(level <= CG_LOG_WARN ? NCCL_LOG_WARN
           : level == CG_LOG_INFO ? NCCL_LOG_INFO : NCCL_LOG_TRACE,
           NCCL_TUNING, file, line, "%s", msg);
}

static void cg__tn_teardown(void)
{
    cg_governor_destroy(cg__tn.gov);
    cg__tn.gov = NULL;
    cg_cudrv_probe_cleanup(&cg__tn.drv);
    free(cg__tn.rules);
    cg__tn.rules = NULL;
    cg__tn.nrules = 0;
    cg__tn.users = 0;
    cg__tn.passthrough = false;
}

static cg_status_t cg__tn_setup(ncclDebugLogger_t logger)
{
    cg_governor_params_t gp;
    cg_status_t st;

    cg__tn.logger = logger;
    cg_config_defaults(&cg__tn.cfg);
    cg_log_init(&cg__tn.log, logger != NULL ? CG_LOG_INFO : CG_LOG_WARN, -1);
    if (logger != NULL) /* else collguard's own lines on stderr */
        cg_log_set_msg_sink(&cg__tn.log, cg__tn_sink, NULL);
    st = cg_config_load(&cg__tn.cfg, NULL, NULL, NULL, &cg__tn.log);
    if (st != CG_OK)
        return st;
    if (cg__tn.cfg.set_by_user[CG_CFG_LOG_LEVEL] || logger == NULL)
        cg__tn.log.level = cg__tn.cfg.log_level;
    /* NCCL's channel buffers live on the GPU: watch it when we can. */
    if (cg__tn.cfg.mem_probe == CG_MEM_PROBE_HOST ||
        cg_cudrv_probe_init(&cg__tn.drv, &cg__tn.probe) != CG_OK) {
        if (cg__tn.cfg.mem_probe == CG_MEM_PROBE_CUDA)
            return cg_error_set(CG_ERR_NO_DEVICE, "CG_MEM_PROBE=cuda but "
                                "no CUDA context is current in NCCL's "
                                "thread");
        cg_host_probe_init(&cg__tn.host_probe, &cg__tn.probe);
    }
    memset(&gp, 0, sizeof(gp));
    gp.cfg = &cg__tn.cfg;
    gp.probe = cg__tn.probe;
    gp.log = &cg__tn.log;
    st = cg_governor_create(&gp, &cg__tn.gov);
    if (st != CG_OK)
        return st;
    cg__tn.last_level = cg_governor_pressure(cg__tn.gov);
    if (cg__tn.cfg.tuner_rules[0] != '\0') {
        st = cg__tn_rules_load(cg__tn.cfg.tuner_rules, &cg__tn.log,
                              &cg__tn.rules, &cg__tn.nrules);
        if (st != CG_OK)
            cg_warn(&cg__tn.log, "tuner plugin %s: rules file "
                    "(CG_TUNER_RULES / NCCL_TUNER_CONFIG_FILE) ignored: %s; "
                    "running without rules", CG_TN_NAME, cg_last_error());
    }
    cg_info(&cg__tn.log, "tuner plugin %s: probe %s, pressure %d, %d "
            "rule(s), channel caps %d (warn) %d (critical; 0: NCCL's)", CG_TN_NAME,
            cg__tn.probe.name, (int)cg__tn.last_level, cg__tn.nrules,
            cg__tn.cfg.tuner_channels_warn,
            cg__tn.cfg.tuner_channels_critical);
    return CG_OK;
}

ncclResult_t cg__tn_init(size_t nranks, size_t nnodes,
                        ncclDebugLogger_t logger, void **ctx_p)
{
    cg__tn_ctx_t *ctx;
    cg_status_t st;

    if (ctx_p == NULL)
        return ncclInvalidArgument;
    *ctx_p = NULL;
    ctx = calloc(1, sizeof(*ctx));
    if (ctx == NULL)
        return ncclSystemError;
    ctx->nranks = nranks;
    ctx->nnodes = nnodes;
    pthread_mutex_lock(&cg__tn.lock);
    if (cg__tn.users == 0) {
        st = cg__tn_setup(logger);
        if (st != CG_OK) {
            cg_warn(&cg__tn.log, "tuner plugin %s: %s; running as a "
                    "pass-through (NCCL's algorithm, protocol and channel "
                    "choices untouched)", CG_TN_NAME, cg_last_error());
            cg__tn_teardown();
            cg__tn.passthrough = true;
        }
    }
    cg__tn.users++;
    pthread_mutex_unlock(&cg__tn.lock);
    *ctx_p = ctx;
    return ncclSuccess;
}

ncclResult_t cg__tn_finalize(void *ctx)
{
    if (ctx == NULL)
        return ncclInvalidArgument;
    pthread_mutex_lock(&cg__tn.lock);
    if (cg__tn.users == 0) {
        pthread_mutex_unlock(&cg__tn.lock);
        return ncclInvalidUsage;
    }
    if (--cg__tn.users == 0)
        cg__tn_teardown();
    pthread_mutex_unlock(&cg__tn.lock);
    free(ctx);
    return ncclSuccess;
}

cg_pressure_t cg__tn_pressure(void)
{
    cg_pressure_t level;

    pthread_mutex_lock(&cg__tn.lock);
    if (cg__tn.gov == NULL) {
        pthread_mutex_unlock(&cg__tn.lock);
        return CG_PRESSURE_OK;
    }
    cg_governor_tick(cg__tn.gov); /* a failed read keeps the last sample */
    level = cg_governor_pressure(cg__tn.gov);
    if (level != cg__tn.last_level) {
        cg_info(&cg__tn.log, "tuner plugin %s: memory pressure %d -> %d; "
                "channel cap %d (0: NCCL's)", CG_TN_NAME, (int)cg__tn.last_level,
                (int)level,
                level == CG_PRESSURE_CRITICAL ? cg__tn.cfg.tuner_channels_critical
                : level == CG_PRESSURE_WARN   ? cg__tn.cfg.tuner_channels_warn
                                              : 0);
        cg__tn.last_level = level;
    }
    pthread_mutex_unlock(&cg__tn.lock);
    return level;
}

__attribute__((destructor)) static void cg__tn_unload(void)
{
    pthread_mutex_lock(&cg__tn.lock);
    if (cg__tn.users > 0)
        cg__tn_teardown();
    pthread_mutex_unlock(&cg__tn.lock);
}
