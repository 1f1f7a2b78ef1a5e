/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The TCP rendezvous under faults, with forked ranks on 127.0.0.1: a rank
 * that never arrives, a rank or rank 0 that dies, ranks that call
 * different collectives, and strangers connecting to the store. Nothing
 * may hang: every rank fails within its timeout and names the cause.
 */
#include <criterion/criterion.h>
#include <string.h>
#include <unistd.h>

#include "core/base/error.h"
#include "tests/transport/bootstrap_test_util.h"
#include "transport/handshake.h"
#include "transport/sock.h"

static void expect_failed(const bs_job_t *job, int r, cg_status_t want,
                          const char *word)
{
    const bs_report_t *rep = &job->rep[r];

    cr_assert(rep->ran, "rank %d did not run", r);
    cr_assert_eq(rep->status, want, "rank %d: got %s (%s), want %s", r,
                 cg_status_name((cg_status_t)rep->status), rep->msg,
                 cg_status_name(want));
    cr_assert(strstr(rep->msg, word) != NULL, "rank %d: '%s' not in: %s", r,
              word, rep->msg);
}

Test(bootstrap_fault, rank_never_arrives_times_out_naming_it, .timeout = 30)
{
    bs_job_t job;

    bs_job_init(&job, 3, BS_STYLE_HOROVOD);
    job.absent_rank = 2;
    job.timeout_ms = 2000;
    cr_assert_eq(bs_job_run(&job, 15000), 0, "no rank may succeed");
    expect_failed(&job, 0, CG_ERR_TIMEOUT, "rank(s) 2 never arrived");
    expect_failed(&job, 1, CG_ERR_TIMEOUT, "rank(s) 2 never arrived");
    cr_assert_lt(job.rep[0].elapsed_s, tp_scaled_ns(2000) / 1e9 + 1.5,
                 "rank 0 took %.2f s", job.rep[0].elapsed_s);
    bs_job_fini(&job);
}

Test(bootstrap_fault, rank_dies_before_allgather, .timeout = 30)
{
    bs_job_t job;

    bs_job_init(&job, 3, BS_STYLE_TORCHRUN);
    job.die_rank = 2;
    job.timeout_ms = 20000;
    cr_assert_eq(bs_job_run(&job, 25000), 0, "no rank may succeed");
    expect_failed(&job, 0, CG_ERR_PEER_RESET, "rank 2 left during allgather");
    expect_failed(&job, 1, CG_ERR_PEER_RESET, "rank 2 left during allgather");
    /* Seen at once, not after the 20 s timeout. */
    cr_assert_lt(job.rep[1].elapsed_s, 5.0, "rank 1 took %.2f s",
                 job.rep[1].elapsed_s);
    bs_job_fini(&job);
}

Test(bootstrap_fault, rank_zero_dies, .timeout = 30)
{
    bs_job_t job;

    bs_job_init(&job, 3, BS_STYLE_LAUNCHER);
    job.die_rank = 0;
    job.timeout_ms = 20000;
    cr_assert_eq(bs_job_run(&job, 25000), 0, "no rank may succeed");
    expect_failed(&job, 1, CG_ERR_PEER_RESET, "lost rank 0");
    expect_failed(&job, 2, CG_ERR_PEER_RESET, "lost rank 0");
    cr_assert_lt(job.rep[2].elapsed_s, 5.0, "rank 2 took %.2f s",
                 job.rep[2].elapsed_s);
    bs_job_fini(&job);
}

Test(bootstrap_fault, different_collectives_are_a_mismatch, .timeout = 30)
{
    bs_job_t job;

    bs_job_init(&job, 3, BS_STYLE_HOROVOD);
    job.odd_rank = 1;
    cr_assert_eq(bs_job_run(&job, 20000), 0, "no rank may succeed");
    expect_failed(&job, 0, CG_ERR_MISMATCH, "rank 1 called bcast");
    expect_failed(&job, 1, CG_ERR_MISMATCH, "rank 1 called bcast");
    expect_failed(&job, 2, CG_ERR_MISMATCH, "rank 1 called bcast");
    bs_job_fini(&job);
}

/* Connects to rank 0's store (retrying until it listens). */
static int dial(int port)
{
    cg_sockaddr_t a;
    int fd = -1;

    cg_sock_resolve("127.0.0.1", port, &a);
    for (int i = 0; i < 200; i++) {
        if (cg_sock_connect_start(&a, &fd) == CG_OK) {
            cg_status_t st;
            while ((st = cg_sock_connect_check(fd)) == CG_INPROGRESS)
                usleep(1000);
            if (st == CG_OK)
                return fd;
            cg_sock_close(fd);
        }
        usleep(20000);
    }
    return -1;
}

/* Garbage, a silent connection and another job's handshake. */
static void strangers(bs_job_t *job)
{
    static const char junk[] = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
    cg_hs_hdr_t h = {.kind = CG_HS_KIND_BOOTSTRAP, .cookie = 42, .rank = 1,
                     .nsocks = 1, .version = CG_HS_VERSION};
    uint8_t wire[CG_HS_HDR_SIZE];
    int *fds = job->arg;

    fds[0] = dial(job->port);
    fds[1] = dial(job->port);
    fds[2] = dial(job->port);
    cg_hs_encode(&h, wire);
    if (fds[0] >= 0)
        cg_sock_send_all(fds[0], junk, sizeof(junk) - 1, cg_deadline_ns(1e9));
    if (fds[2] >= 0)
        cg_sock_send_all(fds[2], wire, sizeof(wire), cg_deadline_ns(1e9));
}

Test(bootstrap_fault, strangers_are_dropped_job_runs, .timeout = 30)
{
    int fds[3] = {-1, -1, -1};
    bs_job_t job;

    bs_job_init(&job, 3, BS_STYLE_TORCHRUN);
    job.after_rank0 = strangers;
    job.arg = fds;
    int ok = bs_job_run(&job, 20000);
    for (int i = 0; i < 3; i++) {
        cr_expect_geq(fds[i], 0, "stranger %d could not connect", i);
        cg_sock_close(fds[i]);
    }
    for (int r = 0; r < 3; r++)
        cr_expect_eq(job.rep[r].status, CG_OK, "rank %d: %s", r,
                     job.rep[r].msg);
    cr_assert_eq(ok, 3, "%d of 3 ranks exited 0", ok);
    bs_job_fini(&job);
}

Test(bootstrap_fault, duplicate_rank_is_refused, .timeout = 30)
{
    bs_job_t job;

    /* Two processes claim rank 1 while rank 0 still waits for rank 2: the
     * first to arrive joins the job, the other is told why it was
     * refused; the job itself completes. */
    bs_job_init(&job, 3, BS_STYLE_LAUNCHER);
    job.dup_rank = 1;
    job.late_rank = 2;
    job.late_ms = 500;
    cr_assert_eq(bs_job_run(&job, 20000), 3, "ranks 0, 2 and one rank 1");
    cr_assert_eq(job.rep[0].status, CG_OK, "rank 0: %s", job.rep[0].msg);
    cr_assert_eq(job.rep[2].status, CG_OK, "rank 2: %s", job.rep[2].msg);
    int loser = (job.rep[1].status == CG_OK) ? 3 : 1;
    expect_failed(&job, loser, CG_ERR_MISMATCH, "rank 1 is already "
                  "connected");
    bs_job_fini(&job);
}
