/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cg_ctx_create/destroy: reads the configuration table from the
 * environment (or a caller-given list), sets up logging, picks the memory
 * probe, creates the governor and, when asked, the bootstrap (whose
 * allocations the governor accounts as CONTROL). Layer: core.
 */
#include "core/context.h"

#include <stdlib.h>
#include <string.h>

#include "collguard/estimate.h"
#include "core/base/error.h"

extern char **environ;

cg_status_t cg_ctx_pick_probe(const cg_config_t *cfg, cg_host_probe_t *hp,
                              cg_cuda_probe_t **cp_p, cg_mem_probe_t *probe_p,
                              const cg_log_t *log)
{
    cg_status_t st;

    *cp_p = NULL;
    switch (cfg->mem_probe) {
    case CG_MEM_PROBE_CUDA:
        st = cg_cuda_probe_create(cp_p, probe_p);
        if (st != CG_OK)
            return cg_error_set(st, "CG_MEM_PROBE=cuda: %s", cg_last_error());
        return CG_OK;
    case CG_MEM_PROBE_AUTO:
        if (cg_cuda_probe_create(cp_p, probe_p) == CG_OK)
            return CG_OK;
        cg_debug(log, "no usable CUDA device; governing host memory");
        break;
    case CG_MEM_PROBE_HOST:
        break;
    }
    cg_host_probe_init(hp, probe_p);
    return CG_OK;
}

/* CG_CTX_PARAM_PROBE: the built-in probe's reading, then the
 * application's adjustment. */
static cg_status_t cg__ctx_user_probe(void *arg, uint64_t *free_p,
                                      uint64_t *total_p)
{
    cg_ctx_h ctx = arg;
    cg_status_t st;

    st = ctx->base_probe.read(ctx->base_probe.arg, free_p, total_p);
    if (st != CG_OK)
        return st;
    st = ctx->user_probe(ctx->user_probe_arg, free_p, total_p);
    if (st != CG_OK)
        return cg_error_set(st, "the application's memory probe "
                            "(CG_CTX_PARAM_PROBE) returned %s",
                            cg_status_string(st));
    return CG_OK;
}

/* The governor's events, to the listener set on the context. */
static void cg__ctx_gov_event(void *arg, const cg_gov_event_t *ev)
{
    cg_ctx_h ctx = arg;
    const cg_ctx_gov_listener_t *l = atomic_load(&ctx->gov_listener);

    if (l != NULL)
        l->cb(l->arg, ev);
}

void cg_ctx_set_gov_listener(cg_ctx_h ctx, const cg_ctx_gov_listener_t *l)
{
    atomic_store(&ctx->gov_listener, l);
}

/* Joins the job: the bootstrap reads the launcher's variables from the same
 * environment as the configuration, waits at most CG_TIMEOUT and allocates
 * through the governor. */
static cg_status_t cg__ctx_bootstrap(cg_ctx_h ctx, const char *const *env)
{
    cg_bootstrap_params_t bp;
    cg_status_t st;

    memset(&bp, 0, sizeof(bp));
    bp.timeout_ns = ctx->cfg.timeout_ns;
    bp.getenv_fn = cg_config_list_getenv;
    bp.getenv_arg = (void *)env;
    bp.mpi = CG_BOOTSTRAP_MPI_AUTO;
    bp.log = &ctx->log;
    bp.mem = cg_governor_mem_ops(ctx->gov);
    st = cg_bootstrap_create(&bp, &ctx->bs);
    if (st != CG_OK)
        return st;
    ctx->log.rank = cg_bootstrap_rank(ctx->bs);
    /* The GPU this rank will use, until its first CUDA tensor says. */
    cg_cuda_probe_set_local_rank(ctx->cuda_probe,
                                 cg_bootstrap_env(ctx->bs)->local_rank);
    return CG_OK;
}

cg_status_t cg_ctx_create(const cg_ctx_params_t *params, cg_ctx_h *ctx_p)
{
    const cg_ctx_params_t none = {0};
    const char *const *env;
    cg_governor_params_t gp;
    cg_status_t st;
    cg_ctx_h ctx;

    if (ctx_p == NULL)
        return cg_error_set(CG_ERR_INVALID_PARAM, "cg_ctx_create: ctx_p is "
                                                  "NULL");
    if (params == NULL)
        params = &none;
    /* The context is the one allocation made before the governor exists. */
    ctx = calloc(1, sizeof(*ctx));
    if (ctx == NULL)
        return cg_error_set(CG_ERR_NO_MEMORY, "cg_ctx_create: out of memory");

    cg_log_init(&ctx->log, CG_LOG_WARN,
                (params->field_mask & CG_CTX_PARAM_RANK) ? params->rank : -1);
    if (params->field_mask & CG_CTX_PARAM_LOG_SINK)
        cg_log_set_sink(&ctx->log, params->log_sink, params->log_sink_arg);

    if (params->field_mask & CG_CTX_PARAM_ENV)
        env = params->env;
    else
        env = (const char *const *)environ;
    if (env == NULL)
        env = (const char *const[]){NULL};
    /* Two passes: the first, silent, finds CG_LOG_LEVEL, so the second
     * reports unknown names and conflicts at the level the user asked for. */
    st = cg_config_load(&ctx->cfg, cg_config_list_getenv, (void *)env, NULL,
                        NULL);
    if (st != CG_OK)
        goto err_free;
    ctx->log.level = ctx->cfg.log_level;
    st = cg_config_load(&ctx->cfg, cg_config_list_getenv, (void *)env, env,
                        &ctx->log);
    if (st != CG_OK)
        goto err_free;

    st = cg_ctx_pick_probe(&ctx->cfg, &ctx->host_probe, &ctx->cuda_probe,
                           &ctx->probe, &ctx->log);
    if (st != CG_OK)
        goto err_free;
    if (params->field_mask & CG_CTX_PARAM_PROBE) {
        if (params->probe_fn == NULL) {
            st = cg_error_set(CG_ERR_INVALID_PARAM, "cg_ctx_create: "
                              "CG_CTX_PARAM_PROBE set but probe_fn is NULL");
            goto err_free;
        }
        ctx->base_probe = ctx->probe;
        ctx->user_probe = params->probe_fn;
        ctx->user_probe_arg = params->probe_arg;
        ctx->probe.read = cg__ctx_user_probe;
        ctx->probe.arg = ctx;
        ctx->probe.name = ctx->probe.kind == CG_MEM_KIND_DEVICE
                              ? "cuda, adjusted by the application"
                              : "host, adjusted by the application";
    }

    memset(&gp, 0, sizeof(gp));
    gp.cfg = &ctx->cfg;
    gp.probe = ctx->probe;
    gp.log = &ctx->log;
    gp.event_cb = cg__ctx_gov_event;
    gp.event_arg = ctx;
    st = cg_governor_create(&gp, &ctx->gov);
    if (st != CG_OK)
        goto err_free;
    if ((params->field_mask & CG_CTX_PARAM_BOOTSTRAP) && params->bootstrap) {
        st = cg__ctx_bootstrap(ctx, env);
        if (st != CG_OK)
            goto err_governor;
    }
    cg_info(&ctx->log, "collguard %s ready: governing %s memory",
            cg_version(), ctx->probe.name);
    *ctx_p = ctx;
    return CG_OK;

err_governor:
    cg_governor_destroy(ctx->gov);
err_free:
    cg_error(&ctx->log, "%s", cg_last_error());
    cg_cuda_probe_destroy(ctx->cuda_probe);
    free(ctx);
    return st;
}

void cg_ctx_destroy(cg_ctx_h ctx)
{
    if (ctx == NULL)
        return;
    cg_bootstrap_destroy(ctx->bs);
    cg_governor_destroy(ctx->gov);
    cg_cuda_probe_destroy(ctx->cuda_probe);
    free(ctx);
}

cg_status_t cg_ctx_governor_snapshot(cg_ctx_h ctx,
                                     cg_governor_snapshot_t *snap)
{
    cg_status_t st;

    if (ctx == NULL || snap == NULL)
        return cg_error_set(CG_ERR_INVALID_PARAM,
                            "cg_ctx_governor_snapshot: NULL argument");
    st = cg_governor_sample(ctx->gov);
    if (st != CG_OK)
        return st;
    cg_governor_snapshot(ctx->gov, snap);
    return CG_OK;
}

cg_status_t cg_ctx_governor_reset_peaks(cg_ctx_h ctx)
{
    if (ctx == NULL)
        return cg_error_set(CG_ERR_INVALID_PARAM,
                            "cg_ctx_governor_reset_peaks: NULL context");
    cg_governor_reset_peaks(ctx->gov);
    return CG_OK;
}

cg_status_t cg_ctx_estimate_params(cg_ctx_h ctx, cg_estimate_params_t *p)
{
    if (ctx == NULL || p == NULL)
        return cg_error_set(CG_ERR_INVALID_PARAM,
                            "cg_ctx_estimate_params: NULL argument");
    p->reserve_bytes = cg_config_resolve_size(&ctx->cfg.mem_reserve,
                                              p->total_bytes);
    p->fusion_threshold = ctx->cfg.fusion_threshold;
    p->fusion_min = ctx->cfg.fusion_min;
    p->nccl_buffsize = ctx->cfg.nccl_buffsize;
    p->nccl_buffsize_min = ctx->cfg.nccl_buffsize_min;
    return CG_OK;
}
