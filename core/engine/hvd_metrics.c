/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Glue between the Horovod shim's core and the metrics sinks: the core's
 * configuration, rank and probe go into core/observe/metrics.c (the file)
 * and core/observe/metrics_http.c (the endpoint), its published counters
 * (cg_hvd_core_stats) come out in every write and every scrape; and the
 * collective latency histogram the execution path feeds. Layer:
 * core/engine; calls core/observe's metrics headers and the core's stats.
 */
#include "core/engine/hvd_metrics.h"

#include <string.h>
#include <time.h>

#include "core/observe/metrics.h"
#include "core/observe/metrics_http.h"

static uint64_t cg__metrics_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* The endpoint's counters, on its thread (cg_hvd_core_stats locks). */
static void cg__http_stats(void *arg, cg_hvd_stats_t *stats)
{
    cg_hvd_core_stats(arg, stats);
}

/* CG_METRICS_PORT: an endpoint that cannot start is logged once, at
 * error level, and the job goes on without it (a port is a property of
 * the host at that moment, often of one rank only). */
static void cg__http_start(cg_hvd_core_t *core)
{
    const cg_config_t *cfg = &core->ctx->cfg;
    const cg_bootstrap_env_t *env = cg_bootstrap_env(core->ctx->bs);
    cg_metrics_http_params_t hp = {
        .addr = cfg->metrics_addr, .port_base = cfg->metrics_port,
        .local_rank = env != NULL ? env->local_rank : 0, .rank = core->rank,
        .gov = core->gov, .probe_name = core->ctx->probe.name,
        .stats_fn = cg__http_stats, .stats_arg = core, .log = core->log};

    if (cfg->metrics_port == 0)
        return;
    if (cg_metrics_http_create(&hp, &core->metrics_http) != CG_OK) {
        cg_error(core->log, "%s; training goes on without the metrics "
                 "endpoint", cg_last_error());
        core->metrics_http = NULL;
        return;
    }
    cg_info(core->log, "metrics endpoint http://%s:%d/metrics",
            cfg->metrics_addr, cg_metrics_http_port(core->metrics_http));
}

cg_status_t cg_hvd_metrics_start(cg_hvd_core_t *core)
{
    const cg_config_t *cfg = &core->ctx->cfg;
    cg_metrics_params_t mp = {cfg->metrics_file, core->rank,
                              cfg->metrics_period_ns, core->gov,
                              core->ctx->probe.name, core->log};
    cg_status_t st;

    if (cfg->metrics_file[0] != '\0') {
        st = cg_metrics_create(&mp, &core->metrics);
        if (st != CG_OK)
            return st;
        cg_info(core->log, "metrics file %s, rewritten every %.3gs",
                cg_metrics_path(core->metrics), cfg->metrics_period_ns / 1e9);
        if (core->rank == 0 && core->size > 1 &&
            strstr(cfg->metrics_file, "%r") == NULL)
            cg_warn(core->log, "CG_METRICS_FILE %s has no %%r: ranks that "
                    "share a host overwrite each other's file; put %%r (the "
                    "rank) in the name", cfg->metrics_file);
    }
    cg__http_start(core);
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

void cg_hvd_metrics_op(cg_hvd_core_t *core, int type, uint64_t ns)
{
    static const double le[CG_HVD_OP_BUCKETS] = CG_HVD_OP_BUCKET_BOUNDS_S;
    cg_hvd_stats_t *t = &core->tstats;
    double s = (double)ns / 1e9;
    int b = 0;

    if (type < 0 || type >= CG_HVD_OP_TYPES)
        return;
    while (b < CG_HVD_OP_BUCKETS && s > le[b])
        b++;
    t->op_bucket[type][b]++;
    t->op_count[type]++;
    t->op_ns[type] += ns;
}

void cg_hvd_metrics_stop(cg_hvd_core_t *core, bool final_write)
{
    cg_hvd_stats_t stats;

    cg_metrics_http_destroy(core->metrics_http); /* joins its thread */
    core->metrics_http = NULL;
    if (core->metrics == NULL)
        return;
    if (final_write) {
        cg_hvd_core_stats(core, &stats);
        (void)cg_metrics_write(core->metrics, &stats, cg__metrics_now_ns());
    }
    cg_metrics_destroy(core->metrics);
    core->metrics = NULL;
}
