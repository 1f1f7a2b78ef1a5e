/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cg_allgatherv (core/coll/coll_allgather.c) across forked ranks on loopback:
 * ragged blocks on 2, 3 and 4 ranks, zero-size blocks, one rank with
 * everything, 1 byte to several MiB (many pieces per block), in place and
 * out of place, every byte checked on every rank; argument errors; a
 * killed or silent (stopped) rank fails the operation on the others
 * within CG_TIMEOUT, naming it.
 */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "tests/core/util/coll_job.h"

#define AG_MAXR 4

typedef struct ag_case {
    int size;
    size_t bytes[AG_MAXR];
    int inplace;
    int iters; /* alternating contents, to catch stale bytes */
} ag_case_t;

static uint8_t ag_byte(int rank, size_t i, int it)
{
    return (uint8_t)(rank * 131 + (int)(i * 7) + (int)(i >> 9) + it * 17);
}

/* Fills, gathers and checks; the first bad byte in the report. */
static void body_gather(coll_rank_t *cr, void *arg)
{
    const ag_case_t *c = arg;
    size_t total = 0, mine = 0, off;
    uint8_t *recv, *send;

    for (int r = 0; r < c->size; r++) {
        mine = r < cr->rank ? mine + c->bytes[r] : mine;
        total += c->bytes[r];
    }
    recv = malloc(total + 1);
    send = malloc(c->bytes[cr->rank] + 1);
    for (int it = 0; it < c->iters && cr->rep->status == CG_OK; it++) {
        uint8_t *src = c->inplace ? recv + mine : send;
        memset(recv, 0xee, total);
        for (size_t i = 0; i < c->bytes[cr->rank]; i++)
            src[i] = ag_byte(cr->rank, i, it);
        double t0 = coll_now_s();
        cr->rep->status = cg_allgatherv(cr->comm, src, recv, c->bytes);
        cr->rep->elapsed_s = coll_now_s() - t0;
        snprintf(cr->rep->msg, sizeof(cr->rep->msg), "%s", cg_last_error());
        off = 0;
        for (int r = 0; r < c->size && cr->rep->status == CG_OK; r++) {
            for (size_t i = 0; i < c->bytes[r]; i++) {
                if (recv[off + i] == ag_byte(r, i, it))
                    continue;
                cr->rep->status = CG_ERR_INTERNAL;
                snprintf(cr->rep->msg, sizeof(cr->rep->msg), "iteration %d "
                         "block %d byte %zu is 0x%02x, want 0x%02x", it, r,
                         i, recv[off + i], ag_byte(r, i, it));
                break;
            }
            off += c->bytes[r];
        }
        cr->rep->iters = it + (cr->rep->status == CG_OK);
    }
    free(recv);
    free(send);
}

static void check_case(ag_case_t c)
{
    int status[AG_MAXR];
    coll_report_t *rep = coll_job_run(c.size, "10s", "auto", body_gather,
                                      &c, coll_scaled_s(30), status);
    for (int r = 0; r < c.size; r++) {
        cr_assert_eq(rep[r].status, CG_OK, "%d ranks, %s, rank %d: %s: %s",
                     c.size, c.inplace ? "in place" : "out of place", r,
                     cg_status_name(rep[r].status), rep[r].msg);
        cr_assert_eq(rep[r].iters, c.iters, "rank %d: %d of %d done", r,
                     rep[r].iters, c.iters);
    }
    coll_job_free(rep, c.size);
}

Test(coll_allgather, two_ranks_ragged_in_and_out_of_place, .timeout = 60)
{
    check_case((ag_case_t){2, {1, 70001}, 0, 3});
    check_case((ag_case_t){2, {(3u << 20) + 5, 0}, 1, 2});
}

Test(coll_allgather, three_ranks_zero_blocks_and_one_rank_with_everything,
     .timeout = 60)
{
    check_case((ag_case_t){3, {0, 0, 0}, 0, 2});
    check_case((ag_case_t){3, {0, (2u << 20) + 3, 0}, 1, 2});
    check_case((ag_case_t){3, {0, 0, 1}, 0, 2});
    check_case((ag_case_t){3, {5, 0, 1u << 20}, 1, 2});
}

Test(coll_allgather, four_ranks_from_one_byte_to_megabytes, .timeout = 60)
{
    /* Several pieces per block, with short last pieces: every rank
     * forwards pieces of three others. */
    check_case((ag_case_t){4, {1, (5u << 20) + 1, 0, 700001}, 0, 2});
    check_case((ag_case_t){4, {1u << 20, 3, (1u << 20) + 17, 0}, 1, 2});
    check_case((ag_case_t){4, {1, 2, 3, 4}, 1, 3});
}

static void body_badargs(coll_rank_t *cr, void *arg)
{
    size_t bytes[2] = {4, 4};
    uint8_t buf[8] = {0};
    (void)arg;
    cr->rep->status = cg_allgatherv(cr->comm, buf, NULL, bytes);
    snprintf(cr->rep->msg, sizeof(cr->rep->msg), "%s", cg_last_error());
    if (cg_allgatherv(cr->comm, buf, buf, NULL) != CG_ERR_INVALID_PARAM)
        cr->rep->status = CG_ERR_INTERNAL;
    /* The group still works after rejected arguments. */
    buf[cr->rank * 4] = (uint8_t)(cr->rank + 1);
    cr->rep->iters = cg_allgatherv(cr->comm, buf + cr->rank * 4, buf,
                                   bytes) == CG_OK && buf[0] == 1 &&
                     buf[4] == 2;
}

Test(coll_allgather, bad_arguments_are_rejected_before_any_transfer,
     .timeout = 60)
{
    coll_check_refused(body_badargs, CG_ERR_INVALID_PARAM, "recvbuf");
}

/* Rank 2 dies (SIGKILL) or goes silent (SIGSTOP) before its 3rd
 * allgather of 1 MiB blocks. */
static void body_victim(coll_rank_t *cr, void *arg)
{
    size_t bytes[3] = {1u << 20, 1u << 20, 1u << 20};
    uint8_t *buf = calloc(3, 1u << 20);
    for (int it = 0; it < 1000; it++) {
        if (cr->rank == 2 && it == 2)
            raise(*(int *)arg);
        double t0 = coll_now_s();
        cg_status_t st = cg_allgatherv(cr->comm, buf + (cr->rank << 20),
                                       buf, bytes);
        if (st != CG_OK) {
            coll_report(cr, st, t0);
            break;
        }
        cr->rep->iters = it + 1;
    }
    free(buf);
}

/* The live ranks fail the 3rd allgather within limit_s, naming rank 2. */
static void check_victim(int sig, double limit_s)
{
    coll_check_victim(body_victim, "auto", sig, limit_s, 2, "allgather");
}

Test(coll_allgather, killed_rank_fails_the_others_naming_it, .timeout = 60)
{
    check_victim(SIGKILL, 2.0);
}

Test(coll_allgather, silent_rank_fails_the_others_within_the_timeout,
     .timeout = 60)
{
    check_victim(SIGSTOP, 2.0 + 2.0); /* CG_TIMEOUT 2s, plus slack */
}
