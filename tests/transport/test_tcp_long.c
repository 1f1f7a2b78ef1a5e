/* SPDX-License-Identifier: Apache-2.0 */
/* The long TCP transport scenario: one message of 4 GiB + 1 byte between
 * two processes (size_t lengths end to end). Skips when the 2 x 4 GiB
 * buffers cannot be had. Named long_ so CI can filter it. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/mman.h>

#include "tp_test_util.h"
#include "transport/sock.h"

#define HUGE_LEN ((4ull << 30) + 1)

static uint8_t *map_huge(void)
{
    uint8_t *b = mmap(NULL, HUGE_LEN, PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE |
                      MAP_POPULATE, -1, 0);
    if (b == MAP_FAILED)
        return NULL;
    madvise(b, HUGE_LEN, MADV_HUGEPAGE); /* page faults are slow in VMs */
    return b;
}

/* Sets one byte per page (to its page number) and the last byte. */
static void mark(uint8_t *b)
{
    for (size_t i = 0; i < HUGE_LEN - 1; i += 4096)
        b[i] = (uint8_t)(i >> 12);
    b[HUGE_LEN - 1] = 0xa5;
}

static size_t first_unmarked(const uint8_t *b)
{
    for (size_t i = 0; i < HUGE_LEN - 1; i += 4096)
        if (b[i] != (uint8_t)(i >> 12))
            return i;
    return b[HUGE_LEN - 1] == 0xa5 ? (size_t)-1 : HUGE_LEN - 1;
}

static int child_huge(void *arg)
{
    cg_tp_req_t *r;
    tp_peer_t c;
    uint8_t *b;

    TP_CHECK(tp_peer_open(&c, arg) == 0, "open");
    b = map_huge();
    TP_CHECK(b != NULL, "cannot map 4 GiB + 1 to send");
    mark(b);
    TP_CHECK(cg_tp_isend(c.conn, b, HUGE_LEN, 1, &r) == CG_OK, "isend");
    TP_CHECK(tp_wait_expect(r, CG_OK, HUGE_LEN) == 0, "send");
    munmap(b, HUGE_LEN);
    return tp_peer_close(&c);
}

Test(tcp_long, long_message_of_4gib_plus_one_byte, .timeout = 120)
{
    cg_tp_req_t *r;
    tp_pair_t p;
    size_t size = 0;
    uint64_t t0;
    uint8_t *b;

    cr_assert_eq(tp_pair_start(&p, 2, 0, child_huge, NULL), CG_OK);
    b = map_huge();
    if (b == NULL) {
        kill(p.child, SIGKILL);
        tp_pair_finish(&p);
        cr_skip_test("cannot map 4 GiB + 1 for the receive buffer");
    }
    cr_assert_eq(cg_tp_irecv(p.conn, b, HUGE_LEN, 1, &r), CG_OK);
    t0 = cg_now_ns();
    cr_assert_eq(cg_tp_wait(r, &size), CG_OK, "%s", cg_last_error());
    cr_log_info("4 GiB + 1 in %.2f s", (double)(cg_now_ns() - t0) / 1e9);
    cr_assert_eq(size, HUGE_LEN, "size %zu", size);
    cr_assert_eq(first_unmarked(b), (size_t)-1, "wrong byte at %zu",
                 first_unmarked(b));
    cr_assert_eq(tp_pair_finish(&p), 0);
    cr_assert_eq(tp_mem_live(&p.mem), 0);
    munmap(b, HUGE_LEN);
}
