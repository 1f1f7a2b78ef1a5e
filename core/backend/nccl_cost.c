/* SPDX-License-Identifier: Apache-2.0 */
/*
 * NCCL's communicator cost in device memory, before it is made
 * (nccl_cost.h). Layer: core/backend; calls nothing.
 */
#include "core/backend/nccl_cost.h"

uint64_t cg_nccl_cost_estimate(const cg_nccl_cost_in_t *in)
{
    uint64_t per_conn, channels;

    if (in->override_bytes > 0)
        return in->override_bytes;
    if (in->local_peers <= 0) /* peers over the network: host buffers */
        return CG_NCCL_FIXED_BYTES;
    channels = in->channels > 0 ? (uint64_t)in->channels
                                : CG_NCCL_DEFAULT_CHANNELS;
    per_conn = in->buffsize + CG_NCCL_LL_BYTES + CG_NCCL_LL128_BYTES;
    return CG_NCCL_FIXED_BYTES +
           channels * CG_NCCL_CONNS_PER_CHANNEL * per_conn;
}
