/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ncclNetPlugin_v11: the net plugin, implemented once (np_*.c); the older
 * tables (np_v10.c, np_v9.c, np_v8.c) adapt to it. NCCL 2.28 inits it
 * once per communicator with a context and finalizes each.
 * Layer: plugin/nccl.
 */
#include "plugin/nccl/np_impl.h"
#include "plugin/nccl/np_export.h"

static ncclResult_t cg__np_init_v11(void **ctx, uint64_t commId,
                                    ncclNetCommConfig_v11_t *config,
                                    ncclDebugLogger_t logger,
                                    ncclProfilerCallback_t prof)
{
    ncclResult_t res;

    (void)commId;
    (void)config; /* traffic classes: the transports have none */
    (void)prof;
    if (ctx == NULL)
        return ncclInvalidArgument;
    *ctx = NULL;
    res = cg__np_init(logger, false);
    if (res == ncclSuccess)
        *ctx = &cg__np.ctx_token;
    return res;
}

CG_NCCL_EXPORT ncclNet_v11_t ncclNetPlugin_v11 = {
    .name = CG_NP_NAME,
    .init = cg__np_init_v11,
    .devices = cg__np_devices,
    .getProperties = cg__np_get_properties,
    .listen = cg__np_listen,
    .connect = cg__np_connect,
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
    .getDeviceMr = NULL,   /* host-driven: no device handles */
    .irecvConsumed = NULL, /* nothing to do after a receive */
    .makeVDevice = NULL,   /* one physical device per interface */
    .finalize = cg__np_finalize,
    .setNetAttr = NULL,    /* no per-operation tuning hints */
};
