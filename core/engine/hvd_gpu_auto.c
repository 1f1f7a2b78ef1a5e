/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The parameters the core's backends are made from, and AUTO's backend
 * for CUDA tensors (HOROVOD_GPU_OPERATIONS unset, NCCL
 * built in), chosen once per core at its first CUDA allreduce or
 * broadcast, which every rank reaches at the same ready entry: this
 * rank's estimate of NCCL's communicator (core/backend/nccl_cost.h)
 * against its governor budget, sampled now that the probe watches the
 * tensor's GPU; every rank agrees (the smallest budget, NCCL only where
 * it fits on all). Then NCCL's communicator is made and used once; where
 * that fails for memory on any rank, every rank drops it and stages
 * through COLLGUARD instead (counted: nccl_fallbacks). Rank 0 logs the
 * choice and its reason once, at info.
 * Layer: core/engine; calls core/backend and core/coll.
 */
#include <stdlib.h>
#include <string.h>

#include "core/backend/hvd_backend.h"
#include "core/backend/nccl_cost.h"
#include "core/base/error.h"
#include "core/base/parse.h"
#include "core/engine/hvd_core.h"

void cg_hvd_backend_params(cg_hvd_core_t *core, cg_backend_mem_t mem,
                           const char *var, cg_backend_params_t *p)
{
    *p = (cg_backend_params_t){core->gov, core->log, &core->ctx->cfg,
                               core->bs, core->comm, core->rank, core->size,
                               mem, var, core->set_ranks, core->set_id};
}

/* This rank's estimate, from the variables NCCL will read. */
static uint64_t cg__estimate(cg_hvd_core_t *core)
{
    const cg_bootstrap_env_t *env = cg_bootstrap_env(core->bs);
    const char *user = getenv("NCCL_BUFFSIZE");
    const char *ch = getenv("NCCL_MAX_NCHANNELS");
    cg_nccl_cost_in_t in = {
        .override_bytes = core->ctx->cfg.nccl_cost,
        .buffsize = cg_governor_nccl_buffsize(core->gov),
        .local_peers = env != NULL && env->local_size > 1
                           ? env->local_size - 1 : 0};
    uint64_t v;

    if (user != NULL && cg_parse_size(user, &v) == CG_OK)
        in.buffsize = v;
    if (ch != NULL)
        in.channels = atoi(ch);
    else if (cg_governor_pressure(core->gov) != CG_PRESSURE_OK)
        in.channels = cg_governor_pressure(core->gov) ==
                              CG_PRESSURE_CRITICAL ? 2 : 4; /* nccl_env.c */
    return cg_nccl_cost_estimate(&in);
}

/* The COLLGUARD backend for CUDA tensors: the host one where it is
 * COLLGUARD too. */
static cg_status_t cg__collguard(cg_hvd_core_t *core)
{
    cg_backend_params_t p;

    if (core->be_cpu->ops->kind == CG_BACKEND_COLLGUARD) {
        core->be_gpu = core->be_cpu;
        return CG_OK;
    }
    cg_hvd_backend_params(core, CG_BACKEND_MEM_CUDA, "HOROVOD_GPU_OPERATIONS",
                          &p);
    return cg_backend_create(CG_BACKEND_COLLGUARD, &p, &core->be_gpu);
}

/* NCCL made and used once on every rank, or on none: outcome[0] some rank
 * failed for memory, outcome[1] some rank failed otherwise. */
static cg_status_t cg__nccl(cg_hvd_core_t *core, int64_t outcome[2],
                            char *why, size_t len)
{
    cg_backend_params_t p;
    cg_backend_t *be = NULL;
    uint64_t took = 0;
    int64_t mine[2] = {0, 0};
    cg_status_t st, agreed;

    cg_hvd_backend_params(core, CG_BACKEND_MEM_CUDA, "HOROVOD_GPU_OPERATIONS",
                          &p);
    st = cg_backend_create(CG_BACKEND_NCCL, &p, &be);
    if (st == CG_OK)
        st = cg_backend_start(be, &took);
    if (st != CG_OK) {
        mine[st == CG_ERR_NO_MEMORY ? 0 : 1] = 1;
        snprintf(why, len, "%s", cg_last_error());
        cg_warn(core->log, "nccl communicator on this rank: %s", why);
    }
    agreed = cg_allreduce(core->comm, mine, outcome, 2, CG_DTYPE_I64,
                          CG_OP_MAX, 1.0, 1.0);
    if (agreed != CG_OK) {
        cg_backend_destroy(be);
        return agreed;
    }
    if (outcome[0] == 0 && outcome[1] == 0) {
        core->be_gpu = be;
        core->tstats.nccl_create_bytes = took;
        return CG_OK;
    }
    if (outcome[0] == 0) { /* not memory: NCCL's failure stands */
        if (be != NULL)
            be->broken = true;
        core->be_gpu = be;
        return st != CG_OK ? st
                           : cg_error_set(CG_ERR_PEER_RESET, "nccl: the "
                                          "communicator failed on another "
                                          "rank (see its log)");
    }
    if (be != NULL)
        be->broken = true; /* aborts rather than finalizes with peers */
    cg_backend_destroy(be);
    return CG_OK;
}

cg_status_t cg_hvd_gpu_auto_settle(cg_hvd_core_t *core)
{
    char b[3][32], why[512] = "";
    uint64_t est, budget;
    int64_t mine[2], all[2], outcome[2] = {0, 0};
    cg_status_t st;
    bool nccl;

    if (cg_governor_sample(core->gov) != CG_OK)
        cg_warn(core->log, "AUTO: memory sample failed (%s); the last one "
                "counts", cg_last_error());
    est = cg__estimate(core);
    budget = cg_governor_budget(core->gov);
    mine[0] = est <= budget;
    mine[1] = (int64_t)(budget > INT64_MAX ? INT64_MAX : budget);
    st = cg_allreduce(core->comm, mine, all, 2, CG_DTYPE_I64, CG_OP_MIN, 1.0,
                      1.0);
    if (st != CG_OK)
        return st;
    core->gpu_auto = false;
    core->tstats.nccl_estimate_bytes = est;
    core->tstats.nccl_budget_bytes = (uint64_t)all[1];
    cg_format_size(est, b[0], sizeof(b[0]));
    cg_format_size((uint64_t)all[1], b[1], sizeof(b[1]));
    nccl = all[0] == 1;
    if (nccl) {
        st = cg__nccl(core, outcome, why, sizeof(why));
        if (st != CG_OK || core->be_gpu != NULL) {
            core->tstats.gpu_backend = CG_BACKEND_NCCL;
            if (st == CG_OK)
                cg_log_at(core->log, core->rank == 0 ? CG_LOG_INFO : CG_LOG_DEBUG,
                       "CUDA tensors: NCCL backend (AUTO: NCCL's "
                       "communicator, estimated %s here, fits the smallest "
                       "budget of any rank, %s; its creation took %s)",
                       b[0], b[1],
                       cg_format_size(core->tstats.nccl_create_bytes, b[2],
                                      sizeof(b[2])));
            return st;
        }
        core->tstats.nccl_fallbacks++;
    }
    st = cg__collguard(core);
    if (st != CG_OK)
        return st;
    core->tstats.gpu_backend = CG_BACKEND_COLLGUARD;
    if (nccl)
        cg_log_at(core->log, core->rank == 0 ? CG_LOG_INFO : CG_LOG_DEBUG,
               "CUDA tensors: COLLGUARD backend, host-staged (AUTO: NCCL's "
               "communicator failed for memory on %s; every rank falls "
               "back)", why[0] ? "this rank and maybe others" : "another rank");
    else
        cg_log_at(core->log, core->rank == 0 ? CG_LOG_INFO : CG_LOG_DEBUG,
               "CUDA tensors: COLLGUARD backend, host-staged (AUTO: NCCL's "
               "communicator, estimated %s here, exceeds the smallest budget "
               "of any rank, %s; CG_NCCL_COST sets the figure, "
               "HOROVOD_GPU_OPERATIONS=NCCL forces NCCL)", b[0], b[1]);
    return CG_OK;
}
