/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ncclTuner_v5_t, frozen (the tuner NCCL 2.28 probes first), with the
 * algorithm and protocol indices of the cost table and the tuner constants
 * struct as NCCL 2.28's core declares it (seven arrays, the last one the
 * per-channel NVLS tree bandwidths). The cost table is a
 * float[numAlgo][numProto] (row = algorithm) passed as float**; a cell of
 * NCCL_ALGO_PROTO_IGNORE is unavailable, the smallest other cell wins.
 * Do not edit. Layer: plugin/nccl.
 */
#ifndef CG_NCCL_TUNER_V5_H
#define CG_NCCL_TUNER_V5_H

#include "plugin/nccl/nccl_types.h"

#define NCCL_ALGO_UNDEF -1
#define NCCL_ALGO_TREE 0
#define NCCL_ALGO_RING 1
#define NCCL_ALGO_COLLNET_DIRECT 2
#define NCCL_ALGO_COLLNET_CHAIN 3
#define NCCL_ALGO_NVLS 4
#define NCCL_ALGO_NVLS_TREE 5
#define NCCL_ALGO_PAT 6
#define NCCL_NUM_ALGORITHMS_V5 7

#define NCCL_PROTO_UNDEF -1
#define NCCL_PROTO_LL 0
#define NCCL_PROTO_LL128 1
#define NCCL_PROTO_SIMPLE 2
#define NCCL_NUM_PROTOCOLS_V5 3

#define NCCL_ALGO_PROTO_IGNORE -1.0f

#define NCCL_NUM_HW_LINKS_V5 3     /* NVLink, PCI, network */
#define NCCL_NUM_COMPCAPS_V5 4     /* Volta, Ampere, Hopper, Blackwell */
#define NCCL_NUM_TUNING_SCALES_V5 3 /* 1, 2, 4 nodes */

typedef struct {
    int nNvlDomains;
    int minRanksPerNvlDomain;
    int maxRanksPerNvlDomain;
} ncclNvlDomainInfo_v5_t;

typedef struct {
    double baseLatencies[NCCL_NUM_ALGORITHMS_V5][NCCL_NUM_PROTOCOLS_V5];
    double hwLatencies[NCCL_NUM_HW_LINKS_V5][NCCL_NUM_ALGORITHMS_V5]
                      [NCCL_NUM_PROTOCOLS_V5];
    double llMaxBws[NCCL_NUM_COMPCAPS_V5][NCCL_NUM_TUNING_SCALES_V5];
    double perChMaxRingLL128Bws[NCCL_NUM_COMPCAPS_V5]
                               [NCCL_NUM_TUNING_SCALES_V5];
    double perChMaxTreeLL128Bws[NCCL_NUM_COMPCAPS_V5]
                               [NCCL_NUM_TUNING_SCALES_V5];
    double perChMaxTreeBws[NCCL_NUM_COMPCAPS_V5][NCCL_NUM_TUNING_SCALES_V5];
    double perChMaxNVLSTreeBws[NCCL_NUM_COMPCAPS_V5]
                              [NCCL_NUM_TUNING_SCALES_V5];
} ncclTunerConstants_v5_t;

typedef struct {
    const char *name;
    ncclResult_t (*init)(void **ctx, uint64_t commId, size_t nRanks,
                         size_t nNodes, ncclDebugLogger_t logFunction,
                         ncclNvlDomainInfo_v5_t *nvlDomainInfo,
                         ncclTunerConstants_v5_t *constants);
    /* nChannels comes in 0; left 0 keeps NCCL's choice. */
    ncclResult_t (*getCollInfo)(void *ctx, ncclFunc_t collType,
                                size_t nBytes, int numPipeOps,
                                float **collCostTable, int numAlgo,
                                int numProto, int regBuff, int *nChannels);
    ncclResult_t (*finalize)(void *ctx);
} ncclTuner_v5_t;

#endif
