/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Glue between the Horovod shim's core and the metrics file: the core's
 * configuration, rank and probe go into core/observe/metrics.c, its published
 * counters (cg_hvd_core_stats) come out in every write. Layer: core/engine;
 * calls core/observe/metrics.h and the core's stats.
 */
#include "core/engine/hvd_metrics.h"

#include <string.h>
#include <time.h>

#include "core/observe/metrics.h"

static uint64_t cg__metrics_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

cg_status_t cg_hvd_metrics_start(cg_hvd_core_t *core)
{
    const cg_config_t *cfg = &core->ctx->cfg;
    cg_metrics_params_t mp = {cfg->metrics_file, core->rank,
                              cfg->metrics_period_ns, core->gov,
                              core->ctx->probe.name, core->log};
    cg_status_t st;

    if (cfg->metrics_file[0] == '\0')
        return CG_OK;
    st = cg_metrics_create(&mp, &core->metrics);
    if (st != CG_OK)
        return st;
    cg_info(core->log, "metrics file %s, rewritten every %.3gs",
            cg_metrics_path(core->metrics), cfg->metrics_period_ns / 1e9);
    if (core->rank == 0 && core->size > 1 &&
        strstr(cfg->metrics_file, "%r") == NULL)
        cg_warn(core->log, "CG_METRICS_FILE %s has no %%r: ranks that share "
                "a host overwrite each other's file; put %%r (the rank) in "
                "the name", cfg->metrics_file);
    return CG_OK;
}

void cg_hvd_metrics_tick(cg_hvd_core_t *core)
{
    cg_hvd_stats_t stats;
    uint64_t now;

    if (core->metrics == NULL)
        return;
    now = cg__metrics_now_ns();
    if (!cg_metrics_due(core->metrics, now))
        return;
    cg_hvd_core_stats(core, &stats);
    (void)cg_metrics_write(core->metrics, &stats, now); /* warns itself */
}

void cg_hvd_metrics_stop(cg_hvd_core_t *core, bool final_write)
{
    cg_hvd_stats_t stats;

    if (core->metrics == NULL)
        return;
    if (final_write) {
        cg_hvd_core_stats(core, &stats);
        (void)cg_metrics_write(core->metrics, &stats, cg__metrics_now_ns());
    }
    cg_metrics_destroy(core->metrics);
    core->metrics = NULL;
}
