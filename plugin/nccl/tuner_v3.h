/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ncclTuner_v3_t, frozen: as v4 without regBuff. Layer: plugin/nccl.
 */
#ifndef CG_NCCL_TUNER_V3_H
#define CG_NCCL_TUNER_V3_H

#include "plugin/nccl/nccl_types.h"

typedef struct {
    const char *name;
    ncclResult_t (*init)(size_t nRanks, size_t nNodes,
                         ncclDebugLogger_t logFunction, void **ctx);
    ncclResult_t (*getCollInfo)(void *ctx, ncclFunc_t collType,
                                size_t nBytes, int numPipeOps,
                                float **collCostTable, int numAlgo,
                                int numProto, int *nChannels);
    ncclResult_t (*destroy)(void *ctx);
} ncclTuner_v3_t;

#endif
