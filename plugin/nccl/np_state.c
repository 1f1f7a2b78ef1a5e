/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The life of the net plugin's one state struct (np_global.c defines it):
 * init (v11: once per NCCL communicator, counted; v10 and older: once per
 * load, idempotent), finalize (the last v11 context tears down; NULL is
 * accepted, as 2.28 calls it after a failed init), teardown at unload (no
 * thread of ours exists, so none can outlive it: the handle table's sweep
 * gets the frees of np_conn.c and np_mr.c), logging into NCCL's logger.
 * Layer: plugin/nccl; calls the governor, transport/ and core/base.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/error.h"
#include "plugin/nccl/np_impl.h"

/* collguard's lines go to NCCL's logger under the NET subsystem, as the
 * message with its file and line: NCCL writes its own prefix, and filters
 * by NCCL_DEBUG and NCCL_DEBUG_SUBSYS. */
static void cg__np_sink(void *arg, cg_log_level_t level, const char *file,
                        int line, const char *msg)
{
    ncclDebugLogger_t logger = cg__np.logger;
    ncclDebugLogLevel nl = NCCL_LOG_TRACE;

    (void)arg;
    if (logger == NULL)
        return; /* installed only with a logger */
    if (level <= CG_LOG_WARN)
        nl = NCCL_LOG_WARN;
    else if (level == CG_LOG_INFO)
        nl = NCCL_LOG_INFO;
    logger(nl, NCCL_NET, file, line, "%s", msg);
}

/* What the handle table's sweep frees each kind with: the table is below
 * the comms and registrations it holds, and calls none of their files. */
static const cg__np_frees_t cg__np_frees = {
    .comm = cg__np_comm_free,
    .listen = cg__np_listen_free,
    .mr = cg__np_mr_free,
};

static void cg__np_teardown(void)
{
    cg__np_table_sweep(&cg__np_frees);
    free(cg__np.slots);
    cg__np.slots = NULL;
    cg_governor_destroy(cg__np.gov);
    cg__np.gov = NULL;
    cg__np.ndevs = 0;
    cg__np.users = 0;
    cg__np.legacy = false;
}

static cg_status_t cg__np_setup(ncclDebugLogger_t logger)
{
    cg_governor_params_t gp;
    cg_status_t st;

    cg__np.logger = logger;
    cg_config_defaults(&cg__np.cfg);
    /* NCCL filters what it prints: hand it info lines unless the user
     * chose a level. */
    cg_log_init(&cg__np.log, logger != NULL ? CG_LOG_INFO : CG_LOG_WARN, -1);
    if (logger != NULL) /* else collguard's own lines on stderr */
        cg_log_set_msg_sink(&cg__np.log, cg__np_sink, NULL);
    st = cg_config_load(&cg__np.cfg, NULL, NULL, NULL, &cg__np.log);
    if (st != CG_OK)
        return st;
    if (cg__np.cfg.set_by_user[CG_CFG_LOG_LEVEL] || logger == NULL)
        cg__np.log.level = cg__np.cfg.log_level;
    /* Registered buffers are host memory (ptrSupport is host only). */
    cg_host_probe_init(&cg__np.host_probe, &cg__np.probe);
    memset(&gp, 0, sizeof(gp));
    gp.cfg = &cg__np.cfg;
    gp.probe = cg__np.probe;
    gp.log = &cg__np.log;
    st = cg_governor_create(&gp, &cg__np.gov);
    if (st != CG_OK)
        return st;
    cg__np.mem = cg_governor_mem_ops(cg__np.gov);
    cg__np.slots = calloc(CG_NP_SLOTS, sizeof(cg__np_slot_t));
    if (cg__np.slots == NULL)
        return cg_error_set(CG_ERR_NO_MEMORY, "no memory for %u handle "
                            "slots", CG_NP_SLOTS);
    for (uint32_t i = 0; i < CG_NP_SLOTS; i++)
        cg__np.slots[i].next_free = i + 1;
    /* Slot 0 is never handed out, so no id is 0. */
    cg__np.free_head = 1;
    cg__np.nlive = 0;
    st = cg__np_devs_scan(&cg__np);
    if (st != CG_OK)
        return st;
    cg_info(&cg__np.log, "net plugin %s: %d device(s), transport %s "
            "(built: %s)", CG_NP_NAME, cg__np.ndevs,
            cg__np.cfg.transport == CG_TRANSPORT_SOCKET ? "socket" :
            cg__np.cfg.transport == CG_TRANSPORT_UCX ? "ucx" : "auto",
            cg_transport_built());
    return CG_OK;
}

ncclResult_t cg__np_init(ncclDebugLogger_t logger, bool legacy)
{
    ncclResult_t res = ncclSuccess;
    cg_status_t st;

    pthread_mutex_lock(&cg__np.lock);
    if (legacy && cg__np.legacy)
        goto out; /* v10 and older: NCCL may init again; once is enough */
    if (cg__np.users == 0) {
        st = cg__np_setup(logger);
        if (st != CG_OK) {
            cg_error(&cg__np.log, "net plugin %s: init failed: %s",
                     CG_NP_NAME, cg_last_error());
            cg__np_teardown();
            res = cg__np_result(st);
            goto out;
        }
    }
    cg__np.users++;
    cg__np.legacy = cg__np.legacy || legacy;
out:
    pthread_mutex_unlock(&cg__np.lock);
    return res;
}

ncclResult_t cg__np_finalize(void *ctx)
{
    ncclResult_t res = ncclSuccess;

    if (ctx == NULL)
        return ncclSuccess;
    pthread_mutex_lock(&cg__np.lock);
    if (ctx != &cg__np.ctx_token || cg__np.users == 0 ||
        (cg__np.legacy && cg__np.users == 1)) {
        res = ncclInvalidArgument;
    } else if (--cg__np.users == 0) {
        if (cg__np.nlive > 0)
            cg_warn(&cg__np.log, "net plugin %s: finalize with %u objects "
                    "still open; closing them", CG_NP_NAME, cg__np.nlive);
        cg__np_teardown();
    }
    pthread_mutex_unlock(&cg__np.lock);
    return res;
}

/* dlclose of the last reference: whatever NCCL left open goes now. */
__attribute__((destructor)) static void cg__np_unload(void)
{
    pthread_mutex_lock(&cg__np.lock);
    if (cg__np.users > 0)
        cg__np_teardown();
    pthread_mutex_unlock(&cg__np.lock);
}
