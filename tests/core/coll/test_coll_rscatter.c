/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cg_reduce_scatterv (core/coll/coll_rscatter.c) across forked ranks on
 * loopback: blocks that are not a multiple of the piece, more rounds than
 * lanes, empty blocks, odd counts of f16/bf16, several dtypes and ops
 * with prescale and postscale, in place and out of place, and memory
 * pressure mid-run (a small chunk, failing allocations on some ranks
 * only, calls that alternate sizes so scratch is reallocated). Each rank's
 * block must hold the bits of the documented order (block b reduced in
 * ring order from rank b+1, each rank's input first: `mine op partial`),
 * computed here block-wise with the library's kernels; everything else in
 * the buffers must be untouched. Argument errors, ranks that disagree on
 * the counts, and a killed rank fail with messages that say so.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cg_build.h"
#include "core/reduce/reduce.h"
#include "tests/core/util/coll_job.h"

#define RS_MAXR 4
#define RS_SETS 2

typedef struct rs_case {
    int size;
    size_t counts[RS_SETS][RS_MAXR]; /* elements per rank; set it % nsets */
    int nsets;
    cg_dtype_t dt;
    cg_redop_t op;
    double pre, post;
    int inplace; /* 0, 1, or 2: alternating */
    int iters;
} rs_case_t;

static uint64_t rs_hash(uint64_t x)
{
    x ^= x >> 31;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 29;
    x *= 0x94d049bb133111ebull;
    return x ^ (x >> 32);
}

/* Rank r's element i (of the whole input) in iteration it: floats of
 * mixed magnitudes (sums round, so the order shows in the bits) with some
 * +0 and -0 (min and max keep their second operand on ties); integers of
 * any bits (they wrap), odd for prod. */
static void rs_value(cg_dtype_t dt, cg_redop_t op, int r, size_t i, int it,
                     void *out)
{
    uint64_t h = rs_hash((uint64_t)i * 0x9e3779b97f4a7c15ull +
                         (uint64_t)r * 1000003u + (uint64_t)it * 7919u);
    int zero = (h & 15) == 0;
    double v = ((double)(h >> 11) / 9007199254740992.0 - 0.5) *
               (double)(1u << (h >> 4 & 7));
    uint16_t half;

    switch (dt) {
    case CG_DTYPE_F32: *(float *)out = zero ? (r & 1 ? -0.0f : 0.0f)
                                            : (float)v; break;
    case CG_DTYPE_F64: *(double *)out = zero ? (r & 1 ? -0.0 : 0.0) : v;
        break;
    case CG_DTYPE_F16: /* exponents 10..21: about 2^-5 .. 2^6 */
        half = (uint16_t)((h >> 20 & 0x8000) | (10 + h % 12) << 10 |
                          (h >> 30 & 0x3ff));
        *(uint16_t *)out = zero ? (uint16_t)(r & 1 ? 0x8000 : 0) : half;
        break;
    case CG_DTYPE_BF16: /* exponents 122..133 */
        half = (uint16_t)((h >> 20 & 0x8000) | (122 + h % 12) << 7 |
                          (h >> 30 & 0x7f));
        *(uint16_t *)out = zero ? (uint16_t)(r & 1 ? 0x8000 : 0) : half;
        break;
    default:
        h = op == CG_OP_PROD ? (h & 7) | 1 : h;
        memcpy(out, &h, cg_dtype_size(dt)); /* low bytes (little endian) */
        break;
    }
}

static void rs_fill(const rs_case_t *c, int r, size_t from, size_t n, int it,
                    uint8_t *out)
{
    size_t el = cg_dtype_size(c->dt);
    for (size_t i = 0; i < n; i++)
        rs_value(c->dt, c->op, r, from + i, it, out + i * el);
}

/* Block b's reference over n ranks: prescaled input of rank b+1, then
 * each next rank's prescaled input op the partial, then average and
 * postscale. */
static void rs_reference(const rs_case_t *c, int n, int b, size_t off,
                         size_t len, int it, uint8_t *ref)
{
    size_t el = cg_dtype_size(c->dt);
    uint8_t *x = malloc(len * el + 1), *tmp = malloc(len * el + 1);

    rs_fill(c, (b + 1) % n, off, len, it, x);
    cg_scale_copy(ref, x, len, c->dt, c->pre);
    for (int k = 2; k <= n; k++) {
        rs_fill(c, (b + k) % n, off, len, it, x);
        if (c->pre == 1.0) {
            cg_reduce3(tmp, x, ref, len, c->dt, c->op);
        } else {
            cg_scale_copy(tmp, x, len, c->dt, c->pre);
            cg_reduce(tmp, ref, len, c->dt, c->op);
        }
        memcpy(ref, tmp, len * el);
    }
    cg_reduce_post(ref, len, c->dt, c->op, n, c->post);
    free(x);
    free(tmp);
}

/* The first element of got[0, n) that differs from want, or -1. */
static long rs_diff(const uint8_t *got, const uint8_t *want, size_t n,
                    size_t el)
{
    for (size_t i = 0; i < n; i++)
        if (memcmp(got + i * el, want + i * el, el) != 0)
            return (long)i;
    return -1;
}

static int rs_fail(coll_rank_t *cr, int it, const char *what, long at)
{
    cr->rep->status = CG_ERR_INTERNAL;
    snprintf(cr->rep->msg, sizeof(cr->rep->msg), "iteration %d: %s differs "
             "at element %ld", it, what, at);
    return 1;
}

/* One call of iteration it; 0 when every byte is as it must be. */
static int rs_one(coll_rank_t *cr, const rs_case_t *c, int it)
{
    const size_t *counts = c->counts[it % c->nsets];
    size_t el = cg_dtype_size(c->dt), total = 0, off = 0, len;
    int me = cr->rank, inplace = c->inplace == 2 ? it % 2 : c->inplace;
    uint8_t *in, *orig, *recv, *ref, *out;
    long at = -1;

    for (int r = 0; r < c->size; r++) {
        off += r < me ? counts[r] : 0;
        total += counts[r];
    }
    len = counts[me];
    in = malloc(total * el + 1);
    orig = malloc(total * el + 1);
    recv = malloc(len * el + 64);
    ref = malloc(len * el + 1);
    rs_fill(c, me, 0, total, it, in);
    memcpy(orig, in, total * el);
    memset(recv, 0xa5, len * el + 64);
    rs_reference(c, c->size, me, off, len, it, ref);
    out = inplace ? in + off * el : recv;
    double t0 = coll_now_s();
    cg_status_t st = cg_reduce_scatterv(cr->comm, in, out, counts, c->dt,
                                        c->op, c->pre, c->post);
    coll_report(cr, st, t0);
    if (st == CG_OK) {
        if ((at = rs_diff(out, ref, len, el)) >= 0)
            rs_fail(cr, it, "the block", at);
        else if (inplace && ((at = rs_diff(in, orig, off, el)) >= 0 ||
                             (at = rs_diff(in + (off + len) * el,
                                           orig + (off + len) * el,
                                           total - off - len, el)) >= 0))
            rs_fail(cr, it, "the input outside the block", at);
        else if (!inplace && (at = rs_diff(in, orig, total, el)) >= 0)
            rs_fail(cr, it, "the send buffer", at);
        else if (!inplace)
            for (int k = 0; k < 64 && at < 0; k++)
                at = recv[len * el + k] != 0xa5 ? k : -1;
        if (at >= 0 && cr->rep->status == CG_OK)
            rs_fail(cr, it, "the bytes past the block", at);
    }
    free(in);
    free(orig);
    free(recv);
    free(ref);
    return cr->rep->status != CG_OK;
}

static void body_rs(coll_rank_t *cr, void *arg)
{
    const rs_case_t *c = arg;
    cg_governor_snapshot_t snap;

    for (int it = 0; it < c->iters; it++) {
        if (rs_one(cr, c, it) != 0)
            return;
        cr->rep->iters = it + 1;
    }
    cg_governor_snapshot(cr->ctx->gov, &snap);
    snprintf(cr->rep->msg, sizeof(cr->rep->msg), "allocation failures %llu",
             (unsigned long long)snap.alloc_failures);
}

/* Runs c on its ranks with algo's settings; *fails_p (may be NULL): the
 * allocation failures each rank recovered from, summed. */
static void check_case(const rs_case_t *c, const char *algo, int *fails_p)
{
    int status[RS_MAXR], fails = 0;
    coll_report_t *rep = coll_job_run(c->size, "10s", algo, body_rs,
                                      (void *)c, coll_scaled_s(60), status);

    for (int r = 0; r < c->size; r++) {
        cr_assert_eq(rep[r].status, CG_OK, "%d ranks, %s/%s, %s, rank %d: "
                     "%s: %s", c->size, cg_dtype_name(c->dt),
                     cg_redop_name(c->op), algo, r,
                     cg_status_name(rep[r].status), rep[r].msg);
        cr_assert_eq(rep[r].iters, c->iters, "rank %d: %d of %d done", r,
                     rep[r].iters, c->iters);
        fails += atoi(rep[r].msg + strlen("allocation failures "));
    }
    if (fails_p != NULL)
        *fails_p = fails;
    coll_job_free(rep, c->size);
}

Test(coll_rscatter, two_ranks_blocks_not_a_multiple_of_the_piece,
     .timeout = 120)
{
    /* f32 pieces of 64 KiB (16384 elements): 1, 5 and 19 rounds (more than
     * the lanes), last pieces short. */
    rs_case_t c = {2, {{70001, 300007}, {16385, 5}}, 2, CG_DTYPE_F32,
                   CG_OP_SUM, 1.0, 1.0, 2, 4};
    check_case(&c, "auto", NULL);
    c.op = CG_OP_MIN;
    check_case(&c, "auto", NULL);
}

Test(coll_rscatter, three_and_four_ranks_with_empty_blocks, .timeout = 120)
{
    rs_case_t c = {3, {{0, 5, 0}, {0, 0, 1}}, 2, CG_DTYPE_I32, CG_OP_SUM,
                   1.0, 1.0, 2, 4};
    check_case(&c, "auto", NULL);
    c = (rs_case_t){4, {{123457, 0, 1, 65536 * 3 + 7}, {3, 2, 1, 0}}, 2,
                    CG_DTYPE_F64, CG_OP_AVG, 0.5, 3.0, 2, 4};
    check_case(&c, "auto", NULL);
    /* One rank holds everything. */
    c = (rs_case_t){3, {{0, (1u << 20) + 3, 0}}, 1, CG_DTYPE_U8, CG_OP_MAX,
                    1.0, 1.0, 2, 2};
    check_case(&c, "auto", NULL);
}

Test(coll_rscatter, odd_counts_of_half_precision, .timeout = 120)
{
    rs_case_t c = {3, {{33333, 33335, 1}, {1, 77777, 3}}, 2, CG_DTYPE_F16,
                   CG_OP_SUM, 1.0, 1.0, 2, 4};
    check_case(&c, "auto", NULL);
    c.dt = CG_DTYPE_BF16;
    c.op = CG_OP_MAX;
    check_case(&c, "auto", NULL);
    c.size = 2;
    c.op = CG_OP_AVG;
    c.pre = 0.25;
    check_case(&c, "auto", NULL);
}

Test(coll_rscatter, dtypes_and_ops_with_scales, .timeout = 180)
{
    static const struct { cg_dtype_t dt; cg_redop_t op; double pre, post; }
    v[] = {{CG_DTYPE_I8, CG_OP_PROD, 1, 1}, {CG_DTYPE_U16, CG_OP_MAX, 1, 1},
           {CG_DTYPE_I64, CG_OP_SUM, 1, 1}, {CG_DTYPE_U64, CG_OP_MIN, 1, 1},
           {CG_DTYPE_I32, CG_OP_AVG, 3, 2}, {CG_DTYPE_F32, CG_OP_PROD, 1, 1},
           {CG_DTYPE_F32, CG_OP_AVG, 0.5, 3}, {CG_DTYPE_F64, CG_OP_MIN, 2, 1},
           {CG_DTYPE_F16, CG_OP_MIN, 1, 0.5}};
    for (size_t k = 0; k < sizeof(v) / sizeof(v[0]); k++) {
        rs_case_t c = {3, {{40001, 40000, 39999}, {7, 0, 100003}}, 2, v[k].dt,
                       v[k].op, v[k].pre, v[k].post, 2, 2};
        check_case(&c, "auto", NULL);
    }
}

Test(coll_rscatter, pressure_mid_run_gives_the_same_bits, .timeout = 180)
{
    /* Calls alternate between large and small blocks, so the kept scratch
     * is reallocated again and again while allocations fail: on every
     * rank, on one rank only (the others keep their lanes), and with
     * each rank a different chunk and chunk floor (4 KiB pieces: the
     * smallest floor of all ranks). */
    rs_case_t c = {3, {{300001, 299999, 300000}, {1001, 3, 2000}}, 2,
                   CG_DTYPE_F32, CG_OP_SUM, 1.0, 1.0, 2, 6};
    int fails;

    check_case(&c, "auto CG_CHUNK_SIZE=96K CG_CHUNK_MIN=64K CG_FAULT_ALLOC=3",
               &fails);
    cr_assert(fails > 0, "no allocation failed");
    check_case(&c, "auto CG_CHUNK_SIZE=128K @1:CG_FAULT_ALLOC=2", &fails);
    cr_assert(fails > 0, "no allocation failed");
    c.dt = CG_DTYPE_BF16;
    c.op = CG_OP_MAX;
    c.pre = 2.0;
    check_case(&c, "auto @0:CG_CHUNK_MIN=4K @0:CG_CHUNK_SIZE=64K "
               "@2:CG_CHUNK_SIZE=256K @2:CG_FAULT_ALLOC=2", &fails);
    cr_assert(fails > 0, "no allocation failed");
}

#if CG_HAVE_UCX
Test(coll_rscatter, over_ucx_partials_are_not_overwritten_while_sent,
     .timeout = 120)
{
    /* UCX reads large sends from the sender's memory while the receiver
     * takes them, so a partial reused too early shows in the bits. */
    rs_case_t c = {3, {{500001, 499999, 500000}, {70001, 3, 200000}}, 2,
                   CG_DTYPE_F32, CG_OP_SUM, 1.0, 1.0, 2, 4};
    check_case(&c, "auto CG_TRANSPORT=ucx", NULL);
    c.size = 2;
    c.pre = 0.5; /* sends from prescaled partials */
    check_case(&c, "auto CG_TRANSPORT=ucx", NULL);
    c.size = 4;
    c.dt = CG_DTYPE_F64;
    c.counts[0][3] = 400003;
    c.counts[1][3] = 0;
    check_case(&c, "auto CG_TRANSPORT=ucx @3:CG_CHUNK_SIZE=64K", NULL);
}
#endif

static void body_badargs(coll_rank_t *cr, void *arg)
{
    size_t counts[2] = {4, 4}, huge[2] = {SIZE_MAX / 2, SIZE_MAX / 2};
    float in[8] = {1, 2, 3, 4, 5, 6, 7, 8}, out[4] = {0};
    char msg[4][256];
    cg_status_t st[4];

    (void)arg;
    st[0] = cg_reduce_scatterv(cr->comm, in, NULL, counts, CG_DTYPE_F32,
                               CG_OP_SUM, 1, 1);
    snprintf(msg[0], sizeof(msg[0]), "%s", cg_last_error());
    st[1] = cg_reduce_scatterv(cr->comm, in, out, NULL, CG_DTYPE_F32,
                               CG_OP_SUM, 1, 1);
    snprintf(msg[1], sizeof(msg[1]), "%s", cg_last_error());
    st[2] = cg_reduce_scatterv(cr->comm, in, out, huge, CG_DTYPE_F32,
                               CG_OP_SUM, 1, 1);
    snprintf(msg[2], sizeof(msg[2]), "%s", cg_last_error());
    st[3] = cg_reduce_scatterv(cr->comm, in, out, counts, CG_DTYPE_F32,
                               CG_OP_SUM, INFINITY, 1);
    snprintf(msg[3], sizeof(msg[3]), "%s", cg_last_error());
    coll_report(cr, st[0], coll_now_s());
    snprintf(cr->rep->msg, sizeof(cr->rep->msg), "%s", msg[0]);
    if (st[1] != CG_ERR_INVALID_PARAM || !strstr(msg[1], "counts is NULL") ||
        st[2] != CG_ERR_INVALID_PARAM || !strstr(msg[2], "overflow") ||
        st[3] != CG_ERR_INVALID_PARAM || !strstr(msg[3], "finite"))
        snprintf(cr->rep->msg, sizeof(cr->rep->msg), "%.160s | %.160s | "
                 "%.160s", msg[1], msg[2], msg[3]);
    /* The group still works after rejected arguments. */
    cr->rep->iters = cg_reduce_scatterv(cr->comm, in, out, counts,
                                        CG_DTYPE_F32, CG_OP_SUM, 1, 1) ==
                         CG_OK &&
                     out[0] == 2 * in[cr->rank * 4];
}

Test(coll_rscatter, bad_arguments_are_rejected_before_any_transfer,
     .timeout = 60)
{
    coll_check_refused(body_badargs, CG_ERR_INVALID_PARAM,
                       "reduce-scatter: recvbuf is NULL");
}

/* Rank 0 says blocks of 8 and 4 elements, rank 1 of 4 and 8: each
 * receives fewer bytes than its block needs. */
static void body_disagree(coll_rank_t *cr, void *arg)
{
    size_t counts[2] = {cr->rank == 0 ? 8 : 4, cr->rank == 0 ? 4 : 8};
    float in[12] = {0}, out[8];

    (void)arg;
    double t0 = coll_now_s();
    coll_report(cr, cg_reduce_scatterv(cr->comm, in, out, counts,
                                       CG_DTYPE_F32, CG_OP_SUM, 1, 1), t0);
}

Test(coll_rscatter, ranks_that_disagree_on_the_counts_fail, .timeout = 60)
{
    int status[2];
    coll_report_t *rep = coll_job_run(2, "5s", "auto", body_disagree, NULL,
                                      coll_scaled_s(30), status);

    for (int r = 0; r < 2; r++) {
        cr_assert_eq(rep[r].status, CG_ERR_MISMATCH, "rank %d: %s: %s", r,
                     cg_status_name(rep[r].status), rep[r].msg);
        cr_assert(strstr(rep[r].msg, "disagree on counts") != NULL,
                  "rank %d: %s", r, rep[r].msg);
    }
    coll_job_free(rep, 2);
}

/* Rank 2 dies (SIGKILL) before its 3rd reduce-scatter of 3 x 1 MiB. */
static void body_victim(coll_rank_t *cr, void *arg)
{
    size_t counts[3] = {1u << 18, 1u << 18, 1u << 18};
    float *in = calloc(3u << 18, sizeof(float)), *out = malloc(1u << 20);

    for (int it = 0; it < 1000; it++) {
        if (cr->rank == 2 && it == 2)
            raise(*(int *)arg);
        double t0 = coll_now_s();
        cg_status_t st = cg_reduce_scatterv(cr->comm, in, out, counts,
                                            CG_DTYPE_F32, CG_OP_SUM, 1, 1);
        if (st != CG_OK) {
            coll_report(cr, st, t0);
            break;
        }
        cr->rep->iters = it + 1;
    }
    free(in);
    free(out);
}

Test(coll_rscatter, killed_rank_fails_the_others_naming_it, .timeout = 60)
{
    coll_check_victim(body_victim, "auto", SIGKILL, 2.0, 2,
                      "reduce-scatter");
}
