/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cg_allreduce_staged across forked ranks on loopback: every byte is
 * filled exactly once before it is drained exactly once, and the drained
 * result is bit-identical to cg_allreduce in place on the same data
 * (non-integer floats, so a changed reduction order would show), for the
 * ring (uneven segments, pieces, prescale), shared memory (rounds of
 * small slots) and recursive doubling, 2-4 ranks, also with the stage
 * reducing from its input; with caller
 * segments (several tensors laid out segment by segment), each tensor
 * comes out with the bits of cg_allreduce on that tensor alone; a staged
 * call without callbacks, or with segments that do not sum to the count,
 * is refused.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "core/reduce/reduce.h"
#include "tests/core/util/coll_job.h"

typedef struct staged_arg {
    size_t count;
    double prescale;
    bool reduce_in; /* the stage reduces from its input (no fill there) */
} staged_arg_t;

/* The caller's side: src filled from, dst drained to, a count per byte. */
typedef struct stage_state {
    const uint8_t *src;
    uint8_t *buf, *dst;
    uint8_t *filled, *drained;
    int bad; /* a byte filled twice, or drained before its fill / twice */
} stage_state_t;

static void st_fill(void *arg, size_t off, size_t len, void *to)
{
    stage_state_t *s = arg;
    for (size_t i = off; i < off + len; i++)
        s->bad |= s->filled[i]++ != 0;
    memcpy(to, s->src + off, len);
}

/* buf = src op piece (f32 sum): the reduced-into bytes count as filled. */
static void st_reduce_in(void *arg, size_t off, size_t len,
                         const void *piece, void *to)
{
    stage_state_t *s = arg;
    for (size_t i = off; i < off + len; i++)
        s->bad |= s->filled[i]++ != 0;
    cg_reduce3(to, s->src + off, piece, len / sizeof(float), CG_DTYPE_F32,
               CG_OP_SUM);
}

static void st_drain(void *arg, size_t off, size_t len, const void *from)
{
    stage_state_t *s = arg;
    for (size_t i = off; i < off + len; i++)
        s->bad |= s->drained[i]++ != 0 || s->filled[i] != 1;
    memcpy(s->dst + off, from, len);
}

static void fail(coll_rank_t *cr, cg_status_t st, const char *fmt, size_t a,
                 double b, double c)
{
    cr->rep->status = st;
    snprintf(cr->rep->msg, sizeof(cr->rep->msg), fmt, a, b, c);
}

static void body_staged(coll_rank_t *cr, void *arg)
{
    const staged_arg_t *a = arg;
    size_t n = a->count, bytes = n * sizeof(float);
    float *src = malloc(bytes), *ref = malloc(bytes), *dst = malloc(bytes);
    uint8_t *buf = malloc(bytes), *marks = calloc(2, bytes);
    stage_state_t s = {(const uint8_t *)src, buf, (uint8_t *)dst, marks,
                       marks + bytes, 0};
    cg_coll_stage_t stage = {st_fill, st_drain, &s, NULL,
                             a->reduce_in ? st_reduce_in : NULL};
    cg_status_t st;

    for (size_t i = 0; i < n; i++)
        src[i] = (float)sin((double)i * 0.37 + cr->rank * 1.7) * 1e3f;
    memcpy(ref, src, bytes);
    memset(buf, 0xa5, bytes);
    st = cg_allreduce_staged(cr->comm, buf, n, CG_DTYPE_F32, CG_OP_SUM,
                             a->prescale, 0.25, &stage);
    if (st == CG_OK)
        st = cg_allreduce(cr->comm, ref, ref, n, CG_DTYPE_F32, CG_OP_SUM,
                          a->prescale, 0.25);
    if (st != CG_OK) {
        fail(cr, st, "count %zu (%g, %g): allreduce failed", n, a->prescale,
             0);
        snprintf(cr->rep->msg, sizeof(cr->rep->msg), "%s", cg_last_error());
    }
    for (size_t i = 0; i < bytes && cr->rep->status == CG_OK; i++)
        if (marks[i] != 1 || marks[bytes + i] != 1 || s.bad)
            fail(cr, CG_ERR_INTERNAL, "byte %zu filled %g times, drained %g "
                 "times (each must be once, fill first)", i, marks[i],
                 marks[bytes + i]);
    for (size_t i = 0; i < n && cr->rep->status == CG_OK; i++)
        if (memcmp(&dst[i], &ref[i], sizeof(float)) != 0)
            fail(cr, CG_ERR_INTERNAL, "element %zu is %.9g, in-place "
                 "cg_allreduce gave %.9g", i, dst[i], ref[i]);
    free(src);
    free(ref);
    free(dst);
    free(buf);
    free(marks);
}

static void run_in(int size, const char *algo, size_t count,
                   double prescale, bool reduce_in)
{
    staged_arg_t a = {count, prescale, reduce_in};
    int status[4];
    coll_report_t *rep = coll_job_run(size, "20s", algo, body_staged, &a,
                                      coll_scaled_s(60), status);
    for (int r = 0; r < size; r++)
        cr_assert_eq(rep[r].status, CG_OK, "%d ranks, %s, count %zu, "
                     "prescale %g, reduce_in %d, rank %d: %s: %s", size,
                     algo, count, prescale, reduce_in, r,
                     cg_status_name(rep[r].status), rep[r].msg);
    coll_job_free(rep, size);
}

static void run(int size, const char *algo, size_t count, double prescale)
{
    run_in(size, algo, count, prescale, false);
}

Test(coll_staged, ring_fills_and_drains_each_byte_once_bit_identical,
     .timeout = 120)
{
    run(2, "ring", (1u << 20) + 3, 1.0); /* 4 MiB: pieces, two ranks */
    run(3, "ring", 40001, 0.5);          /* uneven segments, prescale */
    run(4, "ring", 7, 1.0);              /* a segment of one element */
}

/* Through shared memory: filled straight into the slots and drained
 * from them (the staging buffer is never touched), in rounds. */
Test(coll_staged, shared_memory_fills_and_drains_each_byte_once,
     .timeout = 120)
{
    run(2, "shm", (1u << 20) + 3, 1.0);
    run(3, "shm CG_SHM_SLOT=64K", 40001, 0.5);
    run(4, "shm", 7, 1.0);
    run_in(2, "shm CG_SHM_SLOT=64K", (1u << 18) + 1, 1.0, true);
    run_in(3, "shm", 40001, 1.0, true);
    run_in(4, "shm CG_SHM_SLOT=64K", 4099, 0.5, true);
}

/* Reducing straight from the input (prescale 1; with 0.5 the ring must
 * fall back to fill): the same bits, every byte taken and drained once. */
Test(coll_staged, reduce_from_input_gives_the_same_bits, .timeout = 120)
{
    run_in(2, "ring", (1u << 20) + 3, 1.0, true);
    run_in(3, "ring", 40001, 1.0, true);
    run_in(4, "ring", 4099, 0.5, true);
}

Test(coll_staged, small_messages_fill_whole_then_drain, .timeout = 60)
{
    run(2, "rd", 1000, 0.5);   /* the pair exchange */
    run(3, "rd", 5000, 1.0);   /* recursive doubling */
}

/* After the refusal, the group still works (iters 1). */
static void still_works(coll_rank_t *cr)
{
    float y = 1;
    cr->rep->iters = cg_allreduce(cr->comm, &y, &y, 1, CG_DTYPE_F32,
                                  CG_OP_SUM, 1.0, 1.0) == CG_OK && y == 2;
}

static void body_nocallbacks(coll_rank_t *cr, void *arg)
{
    float x = 1;
    cg_coll_stage_t empty = {NULL, NULL, NULL, NULL, NULL};
    (void)arg;
    coll_report(cr, cg_allreduce_staged(cr->comm, &x, 1, CG_DTYPE_F32,
                                        CG_OP_SUM, 1.0, 1.0, &empty),
                coll_now_s());
    still_works(cr);
}

Test(coll_staged, missing_callbacks_are_refused, .timeout = 60)
{
    coll_check_refused(body_nocallbacks, CG_ERR_INVALID_PARAM,
                       "fill and drain");
}

/* Three tensors of awkward sizes laid out segment by segment (ring
 * segment r holds each tensor's r-th part, cut as cg_ring_seg cuts it):
 * each result must equal, bit for bit, the ring (CG_ALGO=ring) on that
 * tensor alone. Without the segments the 5-element tensor differs. */
#define SEG_T 3
static const size_t seg_counts[SEG_T] = {10007, 333, 5};

static void body_segments(coll_rank_t *cr, void *arg)
{
    int n = cr->size;
    size_t total = 0, segs[8] = {0}, off, cnt, at = 0;
    float *t[SEG_T], *packed, *buf;
    stage_state_t s;
    uint8_t *marks;
    cg_coll_stage_t stage = {st_fill, st_drain, &s, segs, NULL};
    cg_status_t st = CG_OK;
    (void)arg;

    for (int k = 0; k < SEG_T; k++)
        total += seg_counts[k];
    packed = malloc(total * sizeof(float));
    buf = malloc(total * sizeof(float));
    marks = calloc(2, total * sizeof(float));
    s = (stage_state_t){(const uint8_t *)packed, (uint8_t *)buf,
                        (uint8_t *)packed, marks, marks + total * 4, 0};
    for (int k = 0; k < SEG_T; k++) {
        t[k] = malloc(seg_counts[k] * sizeof(float));
        for (size_t i = 0; i < seg_counts[k]; i++)
            t[k][i] = (float)cos((double)i * 0.11 + k + cr->rank * 2.3) * 7e2f;
    }
    for (int r = 0; r < n; r++)
        for (int k = 0; k < SEG_T; k++) {
            cg_ring_seg(NULL, seg_counts[k], n, r, &off, &cnt);
            memcpy(packed + at, t[k] + off, cnt * sizeof(float));
            at += cnt;
            segs[r] += cnt;
        }
    st = cg_allreduce_staged(cr->comm, buf, total, CG_DTYPE_F32, CG_OP_SUM,
                             1.0, 1.0, &stage); /* drains into packed */
    for (int k = 0; k < SEG_T && st == CG_OK; k++)
        st = cg_allreduce(cr->comm, t[k], t[k], seg_counts[k], CG_DTYPE_F32,
                          CG_OP_SUM, 1.0, 1.0);
    if (st != CG_OK) {
        cr->rep->status = st;
        snprintf(cr->rep->msg, sizeof(cr->rep->msg), "%s", cg_last_error());
    }
    at = 0;
    for (int r = 0; r < n && cr->rep->status == CG_OK; r++)
        for (int k = 0; k < SEG_T && cr->rep->status == CG_OK; k++) {
            cg_ring_seg(NULL, seg_counts[k], n, r, &off, &cnt);
            for (size_t i = 0; i < cnt; i++)
                if (memcmp(&packed[at + i], &t[k][off + i], 4) != 0)
                    fail(cr, CG_ERR_INTERNAL, "element %zu of tensor %g is "
                         "%.9g fused", off + i, k, packed[at + i]);
            at += cnt;
        }
    for (int k = 0; k < SEG_T; k++)
        free(t[k]);
    free(packed);
    free(buf);
    free(marks);
}

Test(coll_staged, caller_segments_give_each_tensor_its_own_bits,
     .timeout = 120)
{
    for (int size = 3; size <= 4; size++) {
        int status[4];
        coll_report_t *rep = coll_job_run(size, "20s", "ring", body_segments,
                                          NULL, coll_scaled_s(60), status);
        for (int r = 0; r < size; r++)
            cr_assert_eq(rep[r].status, CG_OK, "%d ranks, rank %d: %s: %s",
                         size, r, cg_status_name(rep[r].status), rep[r].msg);
        coll_job_free(rep, size);
        rep = coll_job_run(size, "20s", "shm CG_SHM_SLOT=64K", body_segments,
                           NULL, coll_scaled_s(60), status);
        for (int r = 0; r < size; r++)
            cr_assert_eq(rep[r].status, CG_OK, "%d ranks, rank %d: %s: %s",
                         size, r, cg_status_name(rep[r].status), rep[r].msg);
        coll_job_free(rep, size);
    }
}

static void body_badsegs(coll_rank_t *cr, void *arg)
{
    float x[4] = {1, 2, 3, 4};
    size_t segs[2] = {1, 2}; /* sums to 3, count is 4 */
    cg_coll_stage_t stage = {st_fill, st_drain, NULL, segs, NULL};
    (void)arg;
    coll_report(cr, cg_allreduce_staged(cr->comm, x, 4, CG_DTYPE_F32,
                                        CG_OP_SUM, 1.0, 1.0, &stage),
                coll_now_s());
    still_works(cr);
}

Test(coll_staged, segments_must_sum_to_the_count, .timeout = 60)
{
    coll_check_refused(body_badsegs, CG_ERR_INVALID_PARAM, "sum to 3");
}
