/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ncclTunerPlugin_v4, _v3 and _v2 over v5's policy. v4 and v3 see the
 * same cost table (v3 without regBuff). v2 has no table: the policy runs
 * on a uniform table of the cells NCCL supports (CollNet and NVLS as it
 * says), and a cell comes back only when it is decided (a rule's cell, or
 * the one cell pressure leaves); otherwise NCCL_ALGO_UNDEF lets NCCL
 * choose. Adapters only. Layer: plugin/nccl.
 */
#include "plugin/nccl/np_export.h"
#include "plugin/nccl/tuner_impl.h"
#include "plugin/nccl/tuner_v2.h"
#include "plugin/nccl/tuner_v3.h"
#include "plugin/nccl/tuner_v4.h"

CG_NCCL_EXPORT ncclTuner_v4_t ncclTunerPlugin_v4 = {
    .name = CG_TN_NAME,
    .init = cg__tn_init,
    .getCollInfo = cg__tn_get_coll_info,
    .destroy = cg__tn_finalize,
};

static ncclResult_t cg__tn_coll_v3(void *ctx, ncclFunc_t coll, size_t nbytes,
                                   int num_pipe_ops, float **table,
                                   int num_algo, int num_proto,
                                   int *nchannels)
{
    return cg__tn_get_coll_info(ctx, coll, nbytes, num_pipe_ops, table,
                               num_algo, num_proto, 0, nchannels);
}

CG_NCCL_EXPORT ncclTuner_v3_t ncclTunerPlugin_v3 = {
    .name = CG_TN_NAME,
    .init = cg__tn_init,
    .getCollInfo = cg__tn_coll_v3,
    .destroy = cg__tn_finalize,
};

static ncclResult_t cg__tn_coll_v2(void *ctx, ncclFunc_t coll, size_t nbytes,
                                   int coll_net, int nvls, int num_pipe_ops,
                                   int *algorithm, int *protocol,
                                   int *nchannels)
{
    enum { NA = NCCL_NUM_ALGORITHMS_V5, NP = NCCL_NUM_PROTOCOLS_V5 };
    float t[NA][NP];
    int avail = 0, zero = -1, last = -1;
    ncclResult_t res;

    if (algorithm == NULL || protocol == NULL)
        return ncclInvalidArgument;
    *algorithm = NCCL_ALGO_UNDEF;
    *protocol = NCCL_PROTO_UNDEF;
    for (int a = 0; a < NA; a++)
        for (int p = 0; p < NP; p++) {
            int off = ((a == NCCL_ALGO_COLLNET_DIRECT ||
                        a == NCCL_ALGO_COLLNET_CHAIN) && !coll_net) ||
                      ((a == NCCL_ALGO_NVLS || a == NCCL_ALGO_NVLS_TREE) &&
                       !nvls);
            t[a][p] = off ? NCCL_ALGO_PROTO_IGNORE : 1.0f;
        }
    res = cg__tn_get_coll_info(ctx, coll, nbytes, num_pipe_ops, (float **)t,
                              NA, NP, 0, nchannels);
    if (res != ncclSuccess)
        return res;
    for (int i = 0; i < NA * NP; i++) {
        float c = t[i / NP][i % NP];
        if (c == NCCL_ALGO_PROTO_IGNORE)
            continue;
        avail++;
        last = i;
        if (c == 0.0f && zero < 0)
            zero = i;
    }
    if (zero < 0 && avail == 1)
        zero = last;
    if (zero >= 0) {
        *algorithm = zero / NP;
        *protocol = zero % NP;
    }
    return ncclSuccess;
}

CG_NCCL_EXPORT ncclTuner_v2_t ncclTunerPlugin_v2 = {
    .name = CG_TN_NAME,
    .init = cg__tn_init,
    .getCollInfo = cg__tn_coll_v2,
    .destroy = cg__tn_finalize,
};
