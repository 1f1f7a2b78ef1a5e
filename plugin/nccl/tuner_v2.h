/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ncclTuner_v2_t, frozen: no cost table; the tuner names one algorithm
 * and protocol (NCCL_ALGO_UNDEF/NCCL_PROTO_UNDEF: NCCL decides) given
 * whether CollNet and NVLS are supported. Layer: plugin/nccl.
 */
#ifndef CG_NCCL_TUNER_V2_H
#define CG_NCCL_TUNER_V2_H

#include "plugin/nccl/nccl_types.h"

typedef struct {
    const char *name;
    ncclResult_t (*init)(size_t nRanks, size_t nNodes,
                         ncclDebugLogger_t logFunction, void **ctx);
    ncclResult_t (*getCollInfo)(void *ctx, ncclFunc_t collType,
                                size_t nBytes, int collNetSupport,
                                int nvlsSupport, int numPipeOps,
                                int *algorithm, int *protocol,
                                int *nChannels);
    ncclResult_t (*destroy)(void *ctx);
} ncclTuner_v2_t;

#endif
