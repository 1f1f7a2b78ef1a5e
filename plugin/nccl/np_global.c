/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The net plugin's one state struct (cg__np) and the mapping of collguard
 * status codes to ncclResult_t: what every np_*.c file reads. The bottom
 * of plugin/nccl's np_ files: calls none of them (np_state.c holds the
 * struct's life). Layer: plugin/nccl; calls nothing.
 */
#include "plugin/nccl/np_impl.h"

cg__np_state_t cg__np = {.lock = PTHREAD_MUTEX_INITIALIZER};

ncclResult_t cg__np_result(cg_status_t st)
{
    switch (st) {
    case CG_OK:
        return ncclSuccess;
    case CG_ERR_INVALID_PARAM:
    case CG_ERR_NOT_FOUND:
        return ncclInvalidArgument;
    case CG_ERR_TRUNCATED:
    case CG_ERR_NOT_INITIALIZED:
        return ncclInvalidUsage;
    case CG_ERR_TIMEOUT:
    case CG_ERR_PEER_RESET:
    case CG_ERR_HANDSHAKE:
    case CG_ERR_UNREACHABLE:
    case CG_ERR_CANCELED:
        return ncclRemoteError;
    case CG_ERR_INTERNAL:
        return ncclInternalError;
    default:
        return ncclSystemError;
    }
}
