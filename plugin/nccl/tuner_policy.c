/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ncclTunerPlugin_v5 and the policy every version runs on NCCL's cost
 * table, a float[numAlgo][numProto] (row = algorithm; a cell of
 * NCCL_ALGO_PROTO_IGNORE is unavailable; the cheapest cell wins):
 *  1. the first CSV rule that matches makes its cell the cheapest (0) when
 *     NCCL offers that cell, and sets its channel count (undone where
 *     pressure then masks the cell);
 *  2. under governor pressure fewer cells stay available, since NCCL
 *     connects an algorithm's buffers only when it first picks it: WARN
 *     keeps Ring and Tree, CRITICAL keeps Ring/Simple (else the cheapest
 *     cell still offered); a restriction that would leave no cell is not
 *     applied; nChannels is capped only where CG_TUNER_CHANNELS_WARN/
 *     _CRITICAL ask (default not: NCCL connects every channel of a
 *     communicator when an algorithm first runs, so a cap per collective
 *     saves no memory and costs bandwidth; measured on one H200).
 * Errors only for a real bug (NULL table or context): an error fails the
 * collective in NCCL. Layer: plugin/nccl.
 */
#include "plugin/nccl/np_export.h"
#include "plugin/nccl/tuner_impl.h"

static int cg__tn_keep(cg_pressure_t level, int a, int p)
{
    if (level == CG_PRESSURE_WARN)
        return a == NCCL_ALGO_RING || a == NCCL_ALGO_TREE;
    return a == NCCL_ALGO_RING && p == NCCL_PROTO_SIMPLE;
}

/* Marks every cell level does not keep unavailable, unless no kept cell
 * is available; CRITICAL without Ring/Simple keeps the cheapest cell. */
static void cg__tn_restrict(float *t, int na, int np, cg_pressure_t level)
{
    int kept = 0, best = -1;

    for (int a = 0; a < na; a++)
        for (int p = 0; p < np; p++) {
            float c = t[a * np + p];
            if (c == NCCL_ALGO_PROTO_IGNORE)
                continue;
            if (cg__tn_keep(level, a, p))
                kept++;
            if (best < 0 || c < t[best])
                best = a * np + p;
        }
    if (best < 0)
        return; /* nothing offered: nothing to restrict */
    for (int i = 0; i < na * np; i++) {
        if (t[i] == NCCL_ALGO_PROTO_IGNORE)
            continue;
        if (kept > 0 ? !cg__tn_keep(level, i / np, i % np)
                     : (level == CG_PRESSURE_CRITICAL && i != best))
            t[i] = NCCL_ALGO_PROTO_IGNORE;
    }
}

ncclResult_t cg__tn_get_coll_info(void *ctx, ncclFunc_t coll, size_t nbytes,
                                 int num_pipe_ops, float **table,
                                 int num_algo, int num_proto, int reg_buff,
                                 int *nchannels)
{
    const cg__tn_ctx_t *c = ctx;
    float *t = (float *)table;
    const cg__tn_rule_t *rule;
    cg_pressure_t level;
    int cap = 0, cell = -1, nch0;

    (void)num_pipe_ops;
    (void)reg_buff;
    if (c == NULL || t == NULL || nchannels == NULL || num_algo < 1 ||
        num_proto < 1)
        return ncclInvalidArgument;
    if (cg__tn.passthrough)
        return ncclSuccess; /* setup failed (logged at init) */
    nch0 = *nchannels;
    rule = cg__tn_rules_match(cg__tn.rules, cg__tn.nrules, (int)coll, nbytes,
                             c->nnodes, c->nranks);
    if (rule != NULL && rule->algo < num_algo && rule->proto < num_proto &&
        t[rule->algo * num_proto + rule->proto] != NCCL_ALGO_PROTO_IGNORE) {
        cell = rule->algo * num_proto + rule->proto;
        t[cell] = 0.0f;
        if (rule->channels > 0)
            *nchannels = rule->channels;
    }
    level = cg__tn_pressure();
    if (level == CG_PRESSURE_OK)
        return ncclSuccess;
    cg__tn_restrict(t, num_algo, num_proto, level);
    /* A rule's channel count was chosen for its cell: where pressure
     * masked that cell, NCCL's count goes with the cell NCCL now picks. */
    if (cell >= 0 && t[cell] == NCCL_ALGO_PROTO_IGNORE)
        *nchannels = nch0;
    cap = level == CG_PRESSURE_CRITICAL ? cg__tn.cfg.tuner_channels_critical
                                        : cg__tn.cfg.tuner_channels_warn;
    if (cap > 0 && (*nchannels <= 0 || *nchannels > cap))
        *nchannels = cap;
    return ncclSuccess;
}

static ncclResult_t cg__tn_init_v5(void **ctx, uint64_t commId,
                                   size_t nRanks, size_t nNodes,
                                   ncclDebugLogger_t logger,
                                   ncclNvlDomainInfo_v5_t *nvl,
                                   ncclTunerConstants_v5_t *constants)
{
    (void)commId;
    (void)nvl;
    (void)constants; /* NCCL's model stays NCCL's: we only mask cells */
    return cg__tn_init(nRanks, nNodes, logger, ctx);
}

CG_NCCL_EXPORT ncclTuner_v5_t ncclTunerPlugin_v5 = {
    .name = CG_TN_NAME,
    .init = cg__tn_init_v5,
    .getCollInfo = cg__tn_get_coll_info,
    .finalize = cg__tn_finalize,
};
