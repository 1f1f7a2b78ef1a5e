/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Collectives across forked ranks on loopback: prescale and postscale,
 * in place with uneven segments, the two-rank pair exchange and shared
 * memory (exact in and out of place, more pieces than sends in flight,
 * many rounds), argument errors, and failures: a killed rank and a
 * silent (stopped) rank fail the operation on the live ranks within
 * CG_TIMEOUT, naming the peer, over the ring and shared memory; a rank
 * that timed out on a live peer listens for its goodbye. Bulk correctness (rank counts,
 * sizes, dtypes, ops, roots, transports) runs through the perf tools.
 */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/core/util/coll_job.h"

/* x_r[i] = r + i % 4; allreduce sum with prescale 0.5, postscale 3. */
static void body_scale(coll_rank_t *cr, void *arg)
{
    size_t n = *(size_t *)arg;
    float *in = malloc(n * sizeof(float)), *out = malloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++)
        in[i] = (float)(cr->rank + (int)(i % 4));
    coll_report(cr, cg_allreduce(cr->comm, in, out, n, CG_DTYPE_F32, CG_OP_SUM,
                            0.5, 3.0), coll_now_s());
    for (size_t i = 0; i < n && cr->rep->status == CG_OK; i++) {
        float want = 3.0f * 0.5f * (float)(3 + 3 * (int)(i % 4));
        if (out[i] != want || in[i] != (float)(cr->rank + (int)(i % 4))) {
            cr->rep->status = CG_ERR_INTERNAL;
            snprintf(cr->rep->msg, sizeof(cr->rep->msg), "element %zu is %g, "
                     "want %g (input now %g)", i, out[i], want, in[i]);
        }
    }
}

Test(coll, prescale_and_postscale_scale_every_rank, .timeout = 60)
{
    size_t counts[] = {5, 40000}; /* recursive doubling, then ring */
    int status[3];
    for (int c = 0; c < 2; c++) {
        coll_report_t *rep = coll_job_run(3, "10s", "auto", body_scale, &counts[c],
                                          coll_scaled_s(30), status);
        for (int r = 0; r < 3; r++)
            cr_assert_eq(rep[r].status, CG_OK, "count %zu rank %d: %s: %s",
                         counts[c], r, cg_status_name(rep[r].status),
                         rep[r].msg);
        coll_job_free(rep, 3);
    }
}

/* In place, count 7 over 4 ranks (segments 2,2,2,1), int32 max. */
static void body_inplace(coll_rank_t *cr, void *arg)
{
    int32_t buf[7];
    (void)arg;
    for (int i = 0; i < 7; i++)
        buf[i] = (cr->rank * 5 + i * 3) % 7 - 3;
    coll_report(cr, cg_allreduce(cr->comm, buf, buf, 7, CG_DTYPE_I32, CG_OP_MAX,
                            1.0, 1.0), coll_now_s());
    for (int i = 0; i < 7 && cr->rep->status == CG_OK; i++) {
        int32_t want = -100;
        for (int r = 0; r < cr->size; r++)
            want = (r * 5 + i * 3) % 7 - 3 > want ? (r * 5 + i * 3) % 7 - 3
                                                  : want;
        if (buf[i] != want) {
            cr->rep->status = CG_ERR_INTERNAL;
            snprintf(cr->rep->msg, sizeof(cr->rep->msg), "element %d is %d, "
                     "want %d", i, buf[i], want);
        }
    }
}

/* In place, the ring's extra memory is bounded by the chunk, not by the
 * message: a 16 MiB allreduce may hold at most two receive slots of one
 * chunk each plus recursive doubling's 64 KiB (CG_MEM_CAT_RING peak). */
#define BIG_COUNT (4u << 20) /* f32: 16 MiB */
static void body_bounded(coll_rank_t *cr, void *arg)
{
    float *buf = malloc(BIG_COUNT * sizeof(float));
    cg_governor_snapshot_t snap;
    uint64_t bound;
    (void)arg;
    if (buf == NULL) {
        cr->rep->status = CG_ERR_NO_MEMORY;
        return;
    }
    for (uint32_t i = 0; i < BIG_COUNT; i++)
        buf[i] = (float)((i + (uint32_t)cr->rank) % 13);
    coll_report(cr, cg_allreduce(cr->comm, buf, buf, BIG_COUNT, CG_DTYPE_F32,
                            CG_OP_SUM, 1.0, 1.0), coll_now_s());
    for (uint32_t i = 0; i < BIG_COUNT && cr->rep->status == CG_OK; i++) {
        float want = 0;
        for (int r = 0; r < cr->size; r++)
            want += (float)((i + (uint32_t)r) % 13);
        if (buf[i] != want) {
            cr->rep->status = CG_ERR_INTERNAL;
            snprintf(cr->rep->msg, sizeof(cr->rep->msg), "element %u is %g, "
                     "want %g", i, buf[i], want);
        }
    }
    cg_governor_snapshot(cr->ctx->gov, &snap);
    bound = 2 * cr->ctx->cfg.chunk_size + 65536;
    if (cr->rep->status == CG_OK &&
        (snap.peak_bytes[CG_MEM_CAT_RING] > bound ||
         snap.peak_bytes[CG_MEM_CAT_RING] == 0)) {
        cr->rep->status = CG_ERR_INTERNAL;
        snprintf(cr->rep->msg, sizeof(cr->rep->msg), "ring memory peaked at "
                 "%llu bytes for a 16 MiB in-place allreduce; the bound is "
                 "%llu (2 chunks + 64 KiB)",
                 (unsigned long long)snap.peak_bytes[CG_MEM_CAT_RING],
                 (unsigned long long)bound);
    }
    free(buf);
}

Test(coll, in_place_ring_memory_is_bounded_by_the_chunk, .timeout = 120)
{
    int status[3];
    coll_report_t *rep = coll_job_run(3, "20s", "ring", body_bounded, NULL,
                                      coll_scaled_s(90), status);
    for (int r = 0; r < 3; r++)
        cr_assert_eq(rep[r].status, CG_OK, "rank %d: %s: %s", r,
                     cg_status_name(rep[r].status), rep[r].msg);
    coll_job_free(rep, 3);
}

Test(coll, in_place_ring_with_uneven_segments, .timeout = 60)
{
    int status[4];
    coll_report_t *rep = coll_job_run(4, "10s", "ring", body_inplace, NULL,
                                      coll_scaled_s(30), status);
    for (int r = 0; r < 4; r++)
        cr_assert_eq(rep[r].status, CG_OK, "rank %d: %s: %s", r,
                     cg_status_name(rep[r].status), rep[r].msg);
    coll_job_free(rep, 4);
}

static void body_badargs(coll_rank_t *cr, void *arg)
{
    float x = 1;
    (void)arg;
    coll_report(cr, cg_allreduce(cr->comm, &x, &x, 1, CG_DTYPE_F32, CG_OP_ADASUM,
                            1.0, 1.0), coll_now_s());
    if (cg_broadcast(cr->comm, &x, 1, CG_DTYPE_F32, cr->size) !=
            CG_ERR_INVALID_PARAM ||
        strstr(cg_last_error(), "root") == NULL)
        cr->rep->status = CG_ERR_INTERNAL;
    /* The group still works after rejected arguments. */
    cr->rep->iters = cg_allreduce(cr->comm, &x, &x, 1, CG_DTYPE_F32,
                                  CG_OP_SUM, 1.0, 1.0) == CG_OK && x == 2;
}

Test(coll, bad_arguments_are_rejected_before_any_transfer, .timeout = 60)
{
    coll_check_refused(body_badargs, CG_ERR_UNSUPPORTED, "adasum");
}

/* Rank 2 dies (SIGKILL) or goes silent (SIGSTOP) before its 4th
 * allreduce; the others must fail that allreduce, naming rank 2. */
static void body_victim(coll_rank_t *cr, void *arg)
{
    int sig = *(int *)arg;
    size_t n = 1 << 20;
    float *buf = calloc(n, sizeof(float));
    for (int it = 0; it < 1000; it++) {
        if (cr->rank == 2 && it == 3)
            raise(sig);
        double t0 = coll_now_s();
        cg_status_t st = cg_allreduce(cr->comm, buf, buf, n, CG_DTYPE_F32,
                                      CG_OP_SUM, 1.0, 1.0);
        if (st != CG_OK) {
            coll_report(cr, st, t0);
            return;
        }
        cr->rep->iters = it + 1;
    }
}

static void check_victim(int sig, double limit_s)
{
    coll_check_victim(body_victim, "ring", sig, limit_s, 3, "allreduce");
    coll_check_victim(body_victim, "shm", sig, limit_s, 3, "allreduce");
}

Test(coll, killed_rank_fails_the_others_naming_it, .timeout = 60)
{
    check_victim(SIGKILL, 2.0);
}

Test(coll, silent_rank_fails_the_others_within_the_timeout, .timeout = 60)
{
    check_victim(SIGSTOP, 2.0 + 2.0);
}

/* Rank 0 timed out on rank 1, which is alive: it listens up to 250 ms
 * for rank 1's goodbye (cg_comm_heard_goodbye). *arg: rank 1 gives up
 * 150 ms in, naming itself with CG_ERR_TIMEOUT (1), or stays silent (0).
 * Rank 0 reports CG_OK when it heard the goodbye, iters = the culprit. */
static void body_goodbye(coll_rank_t *cr, void *arg)
{
    int culprit = -1;
    cg_status_t why = CG_OK;
    double t0 = coll_now_s();

    if (cr->rank == 1) {
        usleep(150000);
        if (*(int *)arg)
            cg_comm_fail_blame(cr->comm, 1, CG_ERR_TIMEOUT);
        usleep(600000); /* alive while rank 0 listens */
        return;
    }
    bool heard = cg_comm_heard_goodbye(cr->comm, 1, &culprit, &why);
    cr->rep->elapsed_s = coll_now_s() - t0;
    cr->rep->status = heard && why == CG_ERR_TIMEOUT ? CG_OK : CG_ERR_IO;
    cr->rep->iters = culprit;
    cg_comm_fail(cr->comm); /* reaps a goodbye receive left posted */
}

Test(coll, timed_out_rank_listens_for_a_live_peers_goodbye, .timeout = 60)
{
    int status[2], send = 1;
    coll_report_t *rep = coll_job_run(2, "5s", "ring", body_goodbye, &send,
                                      coll_scaled_s(30), status);

    cr_assert_eq(rep[0].status, CG_OK, "rank 0 did not hear rank 1's "
                 "goodbye (returned after %.3f s)", rep[0].elapsed_s);
    cr_assert_eq(rep[0].iters, 1, "culprit %d", rep[0].iters);
    coll_job_free(rep, 2);
    send = 0;
    rep = coll_job_run(2, "5s", "ring", body_goodbye, &send,
                       coll_scaled_s(30), status);
    cr_assert_eq(rep[0].status, CG_ERR_IO, "heard a goodbye never sent");
    cr_assert_geq(rep[0].elapsed_s, 0.24, "listened only %.3f s",
                  rep[0].elapsed_s);
    cr_assert_lt(rep[0].elapsed_s, coll_scaled_s(1.0), "listened %.3f s",
                 rep[0].elapsed_s);
    coll_job_free(rep, 2);
}

/* Two ranks, the pipelined pair exchange: x_r[i] = (r + 1) * (i % 1000)
 * + it, allreduce sum alternating out of place and in place; integer
 * values, so every element must be exact on every iteration. */
typedef struct pair_arg {
    size_t count;
    int iters;
} pair_arg_t;

static void body_pair(coll_rank_t *cr, void *arg)
{
    const pair_arg_t *a = arg;
    float *in = malloc(a->count * sizeof(float));
    float *out = malloc(a->count * sizeof(float));
    for (int it = 0; it < a->iters && cr->rep->status == CG_OK; it++) {
        float *dst = it % 2 ? in : out;
        for (size_t i = 0; i < a->count; i++)
            in[i] = (float)((cr->rank + 1) * (int)(i % 1000) + it);
        coll_report(cr, cg_allreduce(cr->comm, in, dst, a->count, CG_DTYPE_F32,
                                CG_OP_SUM, 1.0, 1.0), coll_now_s());
        for (size_t i = 0; i < a->count && cr->rep->status == CG_OK; i++) {
            float want = (float)(3 * (int)(i % 1000) + 2 * it);
            if (dst[i] != want) {
                cr->rep->status = CG_ERR_INTERNAL;
                snprintf(cr->rep->msg, sizeof(cr->rep->msg), "iteration %d "
                         "element %zu is %g, want %g", it, i, dst[i], want);
            }
        }
        cr->rep->iters = it + (cr->rep->status == CG_OK);
    }
    free(in);
    free(out);
}

static void check_pair(const char *algo, pair_arg_t a)
{
    int status[2];
    coll_report_t *rep = coll_job_run(2, "10s", algo, body_pair, &a,
                                      coll_scaled_s(30), status);
    for (int r = 0; r < 2; r++) {
        cr_assert_eq(rep[r].status, CG_OK, "count %zu rank %d: %s: %s",
                     a.count, r, cg_status_name(rep[r].status), rep[r].msg);
        cr_assert_eq(rep[r].iters, a.iters, "count %zu rank %d: %d done",
                     a.count, r, rep[r].iters);
    }
    coll_job_free(rep, 2);
}

Test(coll, two_ranks_pair_exchange_is_exact_in_and_out_of_place,
     .timeout = 60)
{
    check_pair("rd", (pair_arg_t){30001, 12}); /* 2 pieces, one short */
    check_pair("rd", (pair_arg_t){3, 4});
    check_pair("shm", (pair_arg_t){30001, 12}); /* shared memory too */
    check_pair("shm CG_SHM_SLOT=64K", (pair_arg_t){1000001, 4});
}

Test(coll, two_ranks_pair_exchange_with_more_pieces_than_sends_in_flight,
     .timeout = 60)
{
    check_pair("rd", (pair_arg_t){1000001, 4}); /* 62 pieces */
}

/* Two ranks in the pair exchange; rank 1 dies before its 3rd one. */
static void body_pair_victim(coll_rank_t *cr, void *arg)
{
    size_t n = 50000;
    float *buf = calloc(n, sizeof(float));
    (void)arg;
    for (int it = 0; it < 1000; it++) {
        if (cr->rank == 1 && it == 2)
            raise(SIGKILL);
        double t0 = coll_now_s();
        cg_status_t st = cg_allreduce(cr->comm, buf, buf, n, CG_DTYPE_F32,
                                      CG_OP_SUM, 1.0, 1.0);
        if (st != CG_OK) {
            coll_report(cr, st, t0);
            break;
        }
        cr->rep->iters = it + 1;
    }
    free(buf);
}

Test(coll, two_ranks_pair_exchange_fails_naming_a_killed_peer,
     .timeout = 60)
{
    int status[2];
    coll_report_t *rep = coll_job_run(2, "2s", "rd", body_pair_victim,
                                      NULL, coll_scaled_s(30), status);
    cr_assert(WIFSIGNALED(status[1]), "rank 1 status 0x%x", status[1]);
    cr_assert_eq(rep[0].iters, 2, "rank 0 completed %d", rep[0].iters);
    cr_assert(CG_STATUS_IS_PEER_FAILURE(rep[0].status), "rank 0: %s: %s",
              cg_status_name(rep[0].status), rep[0].msg);
    cr_assert(rep[0].elapsed_s < coll_scaled_s(2.0), "failed after %.2fs",
              rep[0].elapsed_s);
    cr_assert(strstr(rep[0].msg, "rank 1") != NULL, "message: %s",
              rep[0].msg);
    coll_job_free(rep, 2);
}
