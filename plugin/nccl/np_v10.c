/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ncclNetPlugin_v10 over v11: init once per load (no finalize in this
 * version: unload tears down), no context in listen/connect, connect's
 * config ignored, properties copied out of v11's. Adapters only.
 * Layer: plugin/nccl.
 */
#include "plugin/nccl/net_v10.h"
#include "plugin/nccl/np_impl.h"
#include "plugin/nccl/np_export.h"

static ncclResult_t cg__np_init_v10(ncclDebugLogger_t logger,
                                    ncclProfilerCallback_t prof)
{
    (void)prof;
    return cg__np_init(logger, true);
}

static ncclResult_t cg__np_props_v10(int dev, ncclNetProperties_v10_t *p)
{
    ncclNetProperties_v11_t q;
    ncclResult_t res;

    if (p == NULL)
        return ncclInvalidArgument;
    res = cg__np_get_properties(dev, &q);
    if (res != ncclSuccess)
        return res;
    p->name = q.name;
    p->pciPath = q.pciPath;
    p->guid = q.guid;
    p->ptrSupport = q.ptrSupport;
    p->regIsGlobal = q.regIsGlobal;
    p->forceFlush = q.forceFlush;
    p->speed = q.speed;
    p->port = q.port;
    p->latency = q.latency;
    p->maxComms = q.maxComms;
    p->maxRecvs = q.maxRecvs;
    p->netDeviceType = q.netDeviceType;
    p->netDeviceVersion = q.netDeviceVersion;
    p->vProps.ndevs = q.vProps.ndevs;
    for (int i = 0; i < NCCL_NET_MAX_DEVS_PER_NIC; i++)
        p->vProps.devs[i] = q.vProps.devs[i];
    p->maxP2pBytes = q.maxP2pBytes;
    p->maxCollBytes = q.maxCollBytes;
    return ncclSuccess;
}

static ncclResult_t cg__np_listen_v10(int dev, void *handle, void **listen)
{
    return cg__np_listen(NULL, dev, handle, listen);
}

static ncclResult_t cg__np_connect_v10(int dev,
                                       ncclNetCommConfig_v10_t *config,
                                       void *handle, void **send,
                                       ncclNetDeviceHandle_v10_t **dc)
{
    (void)config;
    return cg__np_connect(NULL, dev, handle, send, dc);
}

CG_NCCL_EXPORT ncclNet_v10_t ncclNetPlugin_v10 = {
    .name = CG_NP_NAME,
    .init = cg__np_init_v10,
    .devices = cg__np_devices,
    .getProperties = cg__np_props_v10,
    .listen = cg__np_listen_v10,
    .connect = cg__np_connect_v10,
    .accept = cg__np_accept,
    .regMr = cg__np_reg_mr,
    .regMrDmaBuf = cg__np_reg_mr_dmabuf,
    .deregMr = cg__np_dereg_mr,
    .isend = cg__np_isend,
    .irecv = cg__np_irecv,
    .iflush = cg__np_iflush,
    .test = cg__np_test,
    .closeSend = cg__np_close_send,
    .closeRecv = cg__np_close_recv,
    .closeListen = cg__np_close_listen,
    .getDeviceMr = NULL,
    .irecvConsumed = NULL,
    .makeVDevice = NULL,
};
