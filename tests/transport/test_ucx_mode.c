/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The UCX backend's per-connection error mode (transport/ucx_mode.c): peers
 * on one host with shared memory get endpoints without UCX error handling
 * (zero-copy CMA rendezvous), everything else keeps peer error handling;
 * the decision from the handshake's flags and host key; and large messages
 * arriving intact over both kinds of endpoint.
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "tests/transport/test_ucx_util.h"
#include "transport/ucx_impl.h" /* conn->err_none, cg__ucx_mode_* */

#define BIG ((16u << 20) + 3)

static void use_tcp(void)
{
    setenv("UCX_TLS", "tcp", 1);
}

static int err_none(cg_tp_conn_t *conn)
{
    return ((cg__ucx_conn_t *)conn)->err_none;
}

/* Opens a pair, checks the mode on both sides, and moves one BIG message
 * each way, checking every byte. */
static void mode_and_data(int expect_none)
{
    char *buf = malloc(BIG);
    cg_tp_req_t *r;
    size_t got = 0;
    tu_pair_t p;

    cr_assert_not_null(buf);
    tu_pair_open(&p, 5);
    if (p.is_child) {
        TU_CHECK(err_none(p.conn) == expect_none, "child err_none %d",
                 err_none(p.conn));
        TU_CHECK(cg_tp_irecv(p.conn, buf, BIG, 1, &r) == CG_OK, "irecv");
        TU_CHECK(cg_tp_wait(r, &got) == CG_OK && got == BIG, "recv: %s",
                 cg_last_error());
        TU_CHECK(tu_check(buf, BIG, 11) < 0, "bad byte at %ld",
                 tu_check(buf, BIG, 11));
        tu_fill(buf, BIG, 12);
        TU_CHECK(cg_tp_isend(p.conn, buf, BIG, 2, &r) == CG_OK, "isend");
        TU_CHECK(cg_tp_wait(r, NULL) == CG_OK, "send: %s", cg_last_error());
        tu_pair_close(&p);
    }
    cr_assert_not_null(p.conn, "pair: %s", cg_last_error());
    cr_assert_eq(err_none(p.conn), expect_none, "parent err_none %d",
                 err_none(p.conn));
    /* Parsed from UCX's endpoint info; abandon checks start there. */
    size_t rndv_min = ((cg__ucx_conn_t *)p.conn)->rndv_min;
    if (expect_none)
        cr_assert(rndv_min >= 1024 && rndv_min <= BIG, "rendezvous from "
                  "%zu bytes", rndv_min);
    tu_fill(buf, BIG, 11);
    cr_assert_eq(cg_tp_isend(p.conn, buf, BIG, 1, &r), CG_OK, "isend");
    cr_assert_eq(cg_tp_wait(r, NULL), CG_OK, "send: %s", cg_last_error());
    memset(buf, 0, BIG);
    cr_assert_eq(cg_tp_irecv(p.conn, buf, BIG, 2, &r), CG_OK, "irecv");
    cr_assert_eq(cg_tp_wait(r, &got), CG_OK, "recv: %s", cg_last_error());
    cr_assert_eq(got, BIG, "received %zu bytes", got);
    cr_assert_lt(tu_check(buf, BIG, 12), 0, "bad byte at %ld",
                 tu_check(buf, BIG, 12));
    cr_assert_eq(tu_wait_child(p.child, 10), 0, "child failed");
    tu_pair_close(&p);
    free(buf);
}

Test(ucx_mode, same_host_shared_memory_without_ucx_error_handling,
     .timeout = 30)
{
    mode_and_data(1);
}

Test(ucx_mode_tcp, tcp_lanes_keep_peer_error_handling, .init = use_tcp,
     .timeout = 30)
{
    mode_and_data(0);
}

static void zcopy_off(void)
{
    setenv("CG_TEST_UCX_SHM_ZCOPY", "0", 1);
}

/* CG_UCX_SHM_ZCOPY=0 (the default): same host and shared memory, yet
 * every endpoint keeps UCX peer error handling. */
Test(ucx_mode_off, zcopy_off_keeps_peer_error_handling, .init = zcopy_off,
     .timeout = 30)
{
    mode_and_data(0);
}

static void fake_tp(cg__ucx_tp_t *tp, int shm, uint8_t key_byte)
{
    memset(tp, 0, sizeof(*tp));
    tp->shm = shm;
    memset(tp->host_key, key_byte, sizeof(tp->host_key));
}

Test(ucx_mode, decision_needs_shared_memory_and_one_host)
{
    cg__ucx_tp_t a, b;
    uint8_t wire[CG_UCX_PREFIX_SIZE];

    fake_tp(&a, 1, 0x5a);
    fake_tp(&b, 1, 0x5a);
    cr_assert_eq(cg__ucx_mode_pack(&b, wire), CG_UCX_PREFIX_SIZE - 4u,
                 "packed size");
    cr_assert(cg__ucx_mode_valid(wire), "marker missing: %02x%02x%02x%02x",
              wire[0], wire[1], wire[2], wire[3]);
    uint8_t old_layout[CG_UCX_PREFIX_SIZE] = {1, 0, 0x21, 0x35};
    cr_assert(!cg__ucx_mode_valid(old_layout), "worker address bytes taken "
              "for a flags word");
    cr_assert_eq(cg__ucx_mode_want_none(&a, wire), 1, "same host, shm");
    fake_tp(&b, 1, 0x5b); /* another host */
    cg__ucx_mode_pack(&b, wire);
    cr_assert_eq(cg__ucx_mode_want_none(&a, wire), 0, "other host");
    fake_tp(&b, 0, 0x5a); /* peer without shared memory */
    cg__ucx_mode_pack(&b, wire);
    cr_assert_eq(cg__ucx_mode_want_none(&a, wire), 0, "peer without shm");
    fake_tp(&a, 0, 0x5a); /* we without shared memory */
    fake_tp(&b, 1, 0x5a);
    cg__ucx_mode_pack(&b, wire);
    cr_assert_eq(cg__ucx_mode_want_none(&a, wire), 0, "we without shm");
    fake_tp(&a, 1, 0); /* unknown host key never matches */
    fake_tp(&b, 1, 0);
    cg__ucx_mode_pack(&b, wire);
    cr_assert_eq(cg__ucx_mode_want_none(&a, wire), 0, "unknown host key");
}
