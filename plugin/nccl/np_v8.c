/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ncclNetPlugin_v8 over v11: int
 * sizes in isend/irecv (a negative one is refused), the v8 properties.
 * Adapters only. Layer: plugin/nccl.
 */
#include "plugin/nccl/net_v8.h"
#include "plugin/nccl/np_impl.h"
#include "plugin/nccl/np_export.h"

static ncclResult_t cg__np_init_v8(ncclDebugLogger_t logger)
{
    return cg__np_init(logger, true);
}

static ncclResult_t cg__np_props_v8(int dev, ncclNetProperties_v8_t *p)
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
    p->speed = q.speed;
    p->port = q.port;
    p->latency = q.latency;
    p->maxComms = q.maxComms;
    p->maxRecvs = q.maxRecvs;
    p->netDeviceType = q.netDeviceType;
    p->netDeviceVersion = q.netDeviceVersion;
    return ncclSuccess;
}

static ncclResult_t cg__np_listen_v8(int dev, void *handle, void **listen)
{
    return cg__np_listen(NULL, dev, handle, listen);
}

static ncclResult_t cg__np_connect_v8(int dev, void *handle, void **send,
                                      ncclNetDeviceHandle_v8_t **dc)
{
    return cg__np_connect(NULL, dev, handle, send, dc);
}

static ncclResult_t cg__np_isend_v8(void *send, void *data, int size,
                                    int tag, void *mhandle, void **request)
{
    if (size < 0) {
        if (request != NULL)
            *request = NULL;
        return ncclInvalidArgument;
    }
    return cg__np_isend(send, data, (size_t)size, tag, mhandle, NULL,
                       request);
}

static ncclResult_t cg__np_irecv_v8(void *recv, int n, void **data,
                                    int *sizes, int *tags, void **mhandles,
                                    void **request)
{
    size_t wide[CG_NP_MAX_RECVS];

    if (request != NULL)
        *request = NULL;
    if (request == NULL || sizes == NULL || n < 1 || n > CG_NP_MAX_RECVS)
        return ncclInvalidArgument;
    for (int i = 0; i < n; i++) {
        if (sizes[i] < 0)
            return ncclInvalidArgument;
        wide[i] = (size_t)sizes[i];
    }
    return cg__np_irecv(recv, n, data, wide, tags, mhandles, NULL, request);
}

CG_NCCL_EXPORT ncclNet_v8_t ncclNetPlugin_v8 = {
    .name = CG_NP_NAME,
    .init = cg__np_init_v8,
    .devices = cg__np_devices,
    .getProperties = cg__np_props_v8,
    .listen = cg__np_listen_v8,
    .connect = cg__np_connect_v8,
    .accept = cg__np_accept,
    .regMr = cg__np_reg_mr,
    .regMrDmaBuf = cg__np_reg_mr_dmabuf,
    .deregMr = cg__np_dereg_mr,
    .isend = cg__np_isend_v8,
    .irecv = cg__np_irecv_v8,
    .iflush = cg__np_iflush,
    .test = cg__np_test,
    .closeSend = cg__np_close_send,
    .closeRecv = cg__np_close_recv,
    .closeListen = cg__np_close_listen,
    .getDeviceMr = NULL,
    .irecvConsumed = NULL,
};
