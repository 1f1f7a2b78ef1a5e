/* SPDX-License-Identifier: Apache-2.0 */
/*
 * NCCL's communicator cost before it is made (core/backend/nccl_cost.c):
 * the fixed cost alone without peers on this host, receive buffers per
 * channel and connection with them, CG_NCCL_COST over everything, and
 * fewer channels or a smaller NCCL_BUFFSIZE costing less.
 */
#include <criterion/criterion.h>

#include "core/backend/nccl_cost.h"

Test(nccl_cost, fixed_cost_without_peers_on_this_host)
{
    cg_nccl_cost_in_t in = {.buffsize = 4u << 20, .channels = 32};

    cr_assert_eq(cg_nccl_cost_estimate(&in), CG_NCCL_FIXED_BYTES);
    cr_assert_eq(CG_NCCL_FIXED_BYTES, 494ull << 20);
}

Test(nccl_cost, receive_buffers_of_each_channel_with_local_peers)
{
    cg_nccl_cost_in_t in = {.buffsize = 4u << 20, .local_peers = 7};
    uint64_t per = (4u << 20) + 524288 + 4915200;

    cr_assert_eq(cg_nccl_cost_estimate(&in),
                 CG_NCCL_FIXED_BYTES + 16 * 2 * per); /* 16 channels */
    in.channels = 4;
    cr_assert_eq(cg_nccl_cost_estimate(&in), CG_NCCL_FIXED_BYTES + 4 * 2 * per);
    in.buffsize = 256u << 10;
    cr_assert_eq(cg_nccl_cost_estimate(&in),
                 CG_NCCL_FIXED_BYTES + 4 * 2 * ((256u << 10) + 524288 + 4915200));
}

Test(nccl_cost, a_measured_figure_replaces_the_estimate)
{
    cg_nccl_cost_in_t in = {.override_bytes = 300u << 20,
                            .buffsize = 4u << 20, .local_peers = 3};

    cr_assert_eq(cg_nccl_cost_estimate(&in), 300u << 20);
}
