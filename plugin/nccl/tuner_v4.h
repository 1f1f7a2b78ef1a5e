/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ncclTuner_v4_t, frozen: init without commId, NVLink domains or
 * constants (context last); getCollInfo as v5; destroy. Layer: plugin/nccl.
 */
#ifndef CG_NCCL_TUNER_V4_H
#define CG_NCCL_TUNER_V4_H

#include "plugin/nccl/nccl_types.h"

typedef struct {
    const char *name;
    ncclResult_t (*init)(size_t nRanks, size_t nNodes,
                         ncclDebugLogger_t logFunction, void **ctx);
    ncclResult_t (*getCollInfo)(void *ctx, ncclFunc_t collType,
                                size_t nBytes, int numPipeOps,
                                float **collCostTable, int numAlgo,
                                int numProto, int regBuff, int *nChannels);
    ncclResult_t (*destroy)(void *ctx);
} ncclTuner_v4_t;

#endif
