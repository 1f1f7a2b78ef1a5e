/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The NCCL types every plugin version shares, declared from the facts of
 * NCCL 2.28's headers (result codes, the logger callback and its levels and
 * subsystem flags, the profiler callback, collective kinds, the network
 * offload handle) so the plugins never include nccl.h and never link
 * libnccl. Values are ABI: never change one. Layer: plugin/nccl.
 */
#ifndef CG_NCCL_TYPES_H
#define CG_NCCL_TYPES_H

#include <stddef.h>
#include <stdint.h>

typedef enum {
    ncclSuccess = 0,
    ncclUnhandledCudaError = 1,
    ncclSystemError = 2,
    ncclInternalError = 3,
    ncclInvalidArgument = 4,
    ncclInvalidUsage = 5,
    ncclRemoteError = 6,
    ncclInProgress = 7,
    ncclNumResults = 8
} ncclResult_t;

/* Levels of NCCL_DEBUG. */
typedef enum {
    NCCL_LOG_NONE = 0,
    NCCL_LOG_VERSION = 1,
    NCCL_LOG_WARN = 2,
    NCCL_LOG_INFO = 3,
    NCCL_LOG_ABORT = 4,
    NCCL_LOG_TRACE = 5
} ncclDebugLogLevel;

/* Subsystem bits of NCCL_DEBUG_SUBSYS (the ones the plugins log under). */
#define NCCL_INIT 0x1
#define NCCL_COLL 0x2
#define NCCL_NET 0x10
#define NCCL_TUNING 0x40
#define NCCL_ENV 0x80
#define NCCL_ALLOC 0x100
#define NCCL_REG 0x2000

typedef void (*ncclDebugLogger_t)(ncclDebugLogLevel level, unsigned long flags,
                                  const char *file, int line,
                                  const char *fmt, ...);

/* Network event hook of NCCL's profiler (the plugins never call it). */
typedef ncclResult_t (*ncclProfilerCallback_t)(void **eHandle, int type,
                                               void *pHandle,
                                               int64_t pluginId,
                                               void *extData);

/* Collective kinds a tuner is asked about. */
typedef enum {
    ncclFuncBroadcast = 0,
    ncclFuncReduce = 1,
    ncclFuncAllGather = 2,
    ncclFuncReduceScatter = 3,
    ncclFuncAllReduce = 4,
    ncclFuncSendRecv = 5,
    ncclFuncSend = 6,
    ncclFuncRecv = 7,
    ncclFuncAlltoAll = 8,
    ncclFuncScatter = 9,
    ncclFuncGather = 10,
    ncclNumFuncs = 11
} ncclFunc_t;

/* Network offload: the plugins are host-driven (NCCL_NET_DEVICE_HOST). */
typedef enum {
    NCCL_NET_DEVICE_HOST = 0,
    NCCL_NET_DEVICE_UNPACK = 1,
    NCCL_NET_DEVICE_GIN_PROXY = 2,
    NCCL_NET_DEVICE_GIN_GDAKI = 3
} ncclNetDeviceType;

#define NCCL_NET_DEVICE_INVALID_VERSION 0x0

/* One layout from v7 through v11 (NCCL aliases the versions). */
typedef struct {
    ncclNetDeviceType netDeviceType;
    int netDeviceVersion;
    void *handle;
    size_t size;
    int needsProxyProgress;
} ncclNetDeviceHandle_v7_t;
typedef ncclNetDeviceHandle_v7_t ncclNetDeviceHandle_v8_t;
typedef ncclNetDeviceHandle_v7_t ncclNetDeviceHandle_v9_t;
typedef ncclNetDeviceHandle_v7_t ncclNetDeviceHandle_v10_t;
typedef ncclNetDeviceHandle_v7_t ncclNetDeviceHandle_v11_t;

/* Bounds NCCL holds a net plugin to. */
#define NCCL_NET_HANDLE_MAXSIZE 128
#define NCCL_NET_MAX_REQUESTS 32       /* in flight per comm */
#define NCCL_NET_MAX_DEVS_PER_NIC 4    /* physical devices in a virtual one */
#define NCCL_MAX_NET_SIZE_BYTES (1ull << 40) /* maxP2pBytes/maxCollBytes cap */
#define NCCL_PTR_HOST 0x1
#define NCCL_PTR_CUDA 0x2
#define NCCL_PTR_DMABUF 0x4

#endif
