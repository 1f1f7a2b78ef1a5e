/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ncclNetPlugin_v9 over v11: init with the logger only, connect without a
 * config, isend/irecv without profiler handles. Adapters only.
 * Layer: plugin/nccl.
 */
#include "plugin/nccl/net_v9.h"
#include "plugin/nccl/np_impl.h"
#include "plugin/nccl/np_export.h"

static ncclResult_t cg__np_init_v9(ncclDebugLogger_t logger)
{
    return cg__np_init(logger, true);
}

static ncclResult_t cg__np_props_v9(int dev, ncclNetProperties_v9_t *p)
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

static ncclResult_t cg__np_listen_v9(int dev, void *handle, void **listen)
{
    return cg__np_listen(NULL, dev, handle, listen);
}

static ncclResult_t cg__np_connect_v9(int dev, void *handle, void **send,
                                      ncclNetDeviceHandle_v9_t **dc)
{
    return cg__np_connect(NULL, dev, handle, send, dc);
}

static ncclResult_t cg__np_isend_v9(void *send, void *data, size_t size,
                                    int tag, void *mhandle, void **request)
{
    return cg__np_isend(send, data, size, tag, mhandle, NULL, request);
}

static ncclResult_t cg__np_irecv_v9(void *recv, int n, void **data,
                                    size_t *sizes, int *tags,
                                    void **mhandles, void **request)
{
    return cg__np_irecv(recv, n, data, sizes, tags, mhandles, NULL, request);
}

CG_NCCL_EXPORT ncclNet_v9_t ncclNetPlugin_v9 = {
    .name = CG_NP_NAME,
    .init = cg__np_init_v9,
    .devices = cg__np_devices,
    .getProperties = cg__np_props_v9,
    .listen = cg__np_listen_v9,
    .connect = cg__np_connect_v9,
    .accept = cg__np_accept,
    .regMr = cg__np_reg_mr,
    .regMrDmaBuf = cg__np_reg_mr_dmabuf,
    .deregMr = cg__np_dereg_mr,
    .isend = cg__np_isend_v9,
    .irecv = cg__np_irecv_v9,
    .iflush = cg__np_iflush,
    .test = cg__np_test,
    .closeSend = cg__np_close_send,
    .closeRecv = cg__np_close_recv,
    .closeListen = cg__np_close_listen,
    .getDeviceMr = NULL,
    .irecvConsumed = NULL,
    .makeVDevice = NULL,
};
