/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The shared-memory AllReduce across forked ranks: every element equals,
 * bit for bit, a reference computed here in the ring's order (segment g
 * starts with rank g's value, each next rank reduces its own value with
 * the partial: x_q op acc), which the ring itself must also pass, so the
 * two agree; across dtypes and ops (min of +0/-0 shows the operand
 * order), counts from 1 to several rounds of small slots, in and out of
 * place, 2-4 ranks, many operations back to back. Also: ranks that
 * disagree on the count fail with both values named; one rank with
 * CG_SHM_SLOT=0 turns shared memory off for all; the measured choice for
 * large messages (CG_SHM_CALIBRATE) is the same on every rank; CG_ALGO=shm
 * where it cannot be had fails communicator creation; nothing is left in
 * /dev/shm.
 */
#include <criterion/criterion.h>
#include <dirent.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/reduce/reduce.h"
#include "tests/core/util/coll_job.h"

typedef struct shm_case {
    cg_dtype_t dt;
    cg_redop_t op;
    size_t count;
    bool in_place;
} shm_case_t;

static const shm_case_t cases[] = {
    {CG_DTYPE_F32, CG_OP_SUM, 1, false},
    {CG_DTYPE_F32, CG_OP_SUM, 7, true},
    {CG_DTYPE_F32, CG_OP_SUM, 40001, false},
    {CG_DTYPE_F32, CG_OP_SUM, (1u << 18) + 5, true}, /* several rounds */
    {CG_DTYPE_F64, CG_OP_AVG, 30011, false},
    {CG_DTYPE_F32, CG_OP_MIN, 5003, true},
    {CG_DTYPE_F32, CG_OP_PROD, 2049, false},
    {CG_DTYPE_I32, CG_OP_MAX, 70001, true},
    {CG_DTYPE_U8, CG_OP_SUM, 100003, false},
};
#define NCASES (sizeof(cases) / sizeof(cases[0]))

/* Rank r's element i, written into p as dt. Floats round when summed;
 * every third f32 is a signed zero whose sign depends on the rank. */
static void value(cg_dtype_t dt, int r, size_t i, void *p)
{
    double v = sin((double)i * 0.37 + r * 1.7) * 1e3;
    switch (dt) {
    case CG_DTYPE_F32:
        *(float *)p = i % 3 == 0 ? (r % 2 ? -0.0f : 0.0f) : (float)v;
        break;
    case CG_DTYPE_F64:
        *(double *)p = v;
        break;
    case CG_DTYPE_I32:
        *(int32_t *)p = (int32_t)(v * 1000);
        break;
    default:
        *(uint8_t *)p = (uint8_t)(i * 7 + (size_t)r * 13);
        break;
    }
}

/* The ring's result for element i of n ranks. */
static void reference(const shm_case_t *c, int n, size_t i, void *out)
{
    size_t el = cg_dtype_size(c->dt), off, cnt;
    uint8_t acc[8], x[8], tmp[8];
    int g = 0;

    for (int s = 0; s < n; s++) {
        cg_ring_seg(NULL, c->count, n, s, &off, &cnt);
        if (i >= off && i < off + cnt)
            g = s;
    }
    value(c->dt, g, i, acc);
    for (int k = 1; k < n; k++) {
        value(c->dt, (g + k) % n, i, x);
        cg_reduce3(tmp, x, acc, 1, c->dt, c->op);
        memcpy(acc, tmp, el);
    }
    cg_reduce_post(acc, 1, c->dt, c->op, n, 0.5);
    memcpy(out, acc, el);
}

static void body_bits(coll_rank_t *cr, void *arg)
{
    int rounds = *(int *)arg;
    for (int it = 0; it < rounds && cr->rep->status == CG_OK; it++) {
        for (size_t k = 0; k < NCASES && cr->rep->status == CG_OK; k++) {
            const shm_case_t *c = &cases[k];
            size_t el = cg_dtype_size(c->dt), bytes = c->count * el;
            uint8_t *in = malloc(bytes), *out = malloc(bytes), want[8];
            uint8_t *res = c->in_place ? in : out;
            for (size_t i = 0; i < c->count; i++)
                value(c->dt, cr->rank, i, in + i * el);
            coll_report(cr, cg_allreduce(cr->comm, in, res, c->count, c->dt,
                                         c->op, 1.0, 0.5), coll_now_s());
            for (size_t i = 0; i < c->count && cr->rep->status == CG_OK;
                 i++) {
                reference(c, cr->size, i, want);
                if (memcmp(res + i * el, want, el) != 0) {
                    cr->rep->status = CG_ERR_INTERNAL;
                    snprintf(cr->rep->msg, sizeof(cr->rep->msg),
                             "%s %s count %zu: element %zu differs from "
                             "the ring's order", cg_dtype_name(c->dt),
                             c->op == CG_OP_MIN ? "min" : "op", c->count,
                             i);
                }
            }
            free(in);
            free(out);
        }
        cr->rep->iters = it + (cr->rep->status == CG_OK);
    }
}

static void check_bits(int size, const char *algo, int rounds)
{
    int status[4];
    coll_report_t *rep = coll_job_run(size, "20s", algo, body_bits, &rounds,
                                      coll_scaled_s(90), status);
    for (int r = 0; r < size; r++)
        cr_assert_eq(rep[r].status, CG_OK, "%d ranks, %s, rank %d: %s: %s",
                     size, algo, r, cg_status_name(rep[r].status),
                     rep[r].msg);
    coll_job_free(rep, size);
}

Test(coll_shm, the_ring_and_shared_memory_give_the_reference_bits,
     .timeout = 240)
{
    for (int size = 2; size <= 4; size++) {
        check_bits(size, "ring", 1);
        check_bits(size, "shm", 2);
        check_bits(size, "shm CG_SHM_SLOT=64K", 1); /* many rounds */
    }
}

/* Sizes that change from one call to the next (slot parity, a rank's
 * description overwritten by its next call): 300 calls. */
static void body_many(coll_rank_t *cr, void *arg)
{
    (void)arg;
    for (int it = 0; it < 300 && cr->rep->status == CG_OK; it++) {
        size_t n = (size_t)(it * 7919) % 20000 + 1;
        int32_t *x = malloc(n * sizeof(*x));
        for (size_t i = 0; i < n; i++)
            x[i] = (int32_t)(i + (size_t)it) * (cr->rank + 1);
        coll_report(cr, cg_allreduce(cr->comm, x, x, n, CG_DTYPE_I32,
                                     CG_OP_SUM, 1.0, 1.0), coll_now_s());
        for (size_t i = 0; i < n && cr->rep->status == CG_OK; i++)
            if (x[i] != (int32_t)(i + (size_t)it) * cr->size *
                            (cr->size + 1) / 2) {
                cr->rep->status = CG_ERR_INTERNAL;
                snprintf(cr->rep->msg, sizeof(cr->rep->msg), "call %d "
                         "element %zu is %d", it, i, x[i]);
            }
        free(x);
        cr->rep->iters = it + (cr->rep->status == CG_OK);
    }
}

Test(coll_shm, calls_of_changing_sizes_back_to_back, .timeout = 120)
{
    int status[3];
    coll_report_t *rep = coll_job_run(3, "20s", "shm CG_SHM_SLOT=64K",
                                      body_many, NULL, coll_scaled_s(60),
                                      status);
    for (int r = 0; r < 3; r++) {
        cr_assert_eq(rep[r].status, CG_OK, "rank %d: %s: %s", r,
                     cg_status_name(rep[r].status), rep[r].msg);
        cr_assert_eq(rep[r].iters, 300, "rank %d: %d calls", r,
                     rep[r].iters);
    }
    coll_job_free(rep, 3);
}

/* Rank 1 passes one element more: both fail at once, naming both. */
static void body_mismatch(coll_rank_t *cr, void *arg)
{
    float x[101] = {0};
    (void)arg;
    coll_report(cr, cg_allreduce(cr->comm, x, x, 100 + (size_t)cr->rank,
                                 CG_DTYPE_F32, CG_OP_SUM, 1.0, 1.0),
                coll_now_s());
}

Test(coll_shm, ranks_that_disagree_on_the_count_fail_naming_both,
     .timeout = 60)
{
    int status[2];
    coll_report_t *rep = coll_job_run(2, "10s", "shm", body_mismatch, NULL,
                                      coll_scaled_s(30), status);
    for (int r = 0; r < 2; r++) {
        cr_assert(rep[r].status == CG_ERR_MISMATCH ||
                      CG_STATUS_IS_PEER_FAILURE(rep[r].status),
                  "rank %d: %s: %s", r, cg_status_name(rep[r].status),
                  rep[r].msg);
        cr_assert(rep[r].elapsed_s < coll_scaled_s(1.0), "rank %d after "
                  "%.2fs", r, rep[r].elapsed_s);
    }
    cr_assert(strstr(rep[0].msg, "100 elements") != NULL ||
                  strstr(rep[1].msg, "100 elements") != NULL,
              "'%s' / '%s'", rep[0].msg, rep[1].msg);
    cr_assert(strstr(rep[0].msg, "101") != NULL ||
                  strstr(rep[1].msg, "101") != NULL,
              "'%s' / '%s'", rep[0].msg, rep[1].msg);
    coll_job_free(rep, 2);
}

/* iters: 1 if the algorithm for 1 MiB is want, and a sum is right. */
static void body_algo(coll_rank_t *cr, void *arg)
{
    const char *want = arg;
    double x[1000];
    for (int i = 0; i < 1000; i++)
        x[i] = i + cr->rank;
    coll_report(cr, cg_allreduce(cr->comm, x, x, 1000, CG_DTYPE_F64,
                                 CG_OP_SUM, 1.0, 1.0), coll_now_s());
    cr->rep->iters = strcmp(cg_coll_algo_name(cg_allreduce_algo(cr->comm, 1 << 20)), want) == 0
                     && x[999] == 999.0 * cr->size + cr->size *
                                  (cr->size - 1) / 2.0;
    if (!cr->rep->iters)
        snprintf(cr->rep->msg, sizeof(cr->rep->msg), "algorithm %s, "
                 "x[999] %g",
                 cg_coll_algo_name(cg_allreduce_algo(cr->comm, 1 << 20)), x[999]);
}

static void check_algo(const char *algo, const char *want)
{
    int status[3];
    coll_report_t *rep = coll_job_run(3, "10s", algo, body_algo,
                                      (void *)want, coll_scaled_s(30),
                                      status);
    for (int r = 0; r < 3; r++) {
        cr_assert_eq(rep[r].status, CG_OK, "%s rank %d: %s", algo, r,
                     rep[r].msg);
        cr_assert_eq(rep[r].iters, 1, "%s rank %d: %s", algo, r,
                     rep[r].msg);
    }
    coll_job_free(rep, 3);
}

Test(coll_shm, auto_uses_shared_memory_unless_a_rank_turns_it_off,
     .timeout = 60)
{
    check_algo("auto", "shm"); /* nothing above 64 KiB measured yet */
    check_algo("auto CG_SHM_CALIBRATE=0", "shm");
    check_algo("auto @1:CG_SHM_SLOT=0", "ring");
    check_algo("ring", "ring");
}

/* The first AllReduce above 64 KiB measures shared memory against the
 * ring; every rank must come out with the same choice (iters 1 = the
 * choice for 1 MiB, 2 = for 64 KiB, both after; msg: the choice). */
static void body_calibrate(coll_rank_t *cr, void *arg)
{
    size_t n = 300000; /* 1.2 MB */
    float *x = malloc(n * sizeof(float));
    (void)arg;
    for (size_t i = 0; i < n; i++)
        x[i] = (float)(i % 100) + (float)cr->rank;
    coll_report(cr, cg_allreduce(cr->comm, x, x, n, CG_DTYPE_F32, CG_OP_SUM,
                                 1.0, 1.0), coll_now_s());
    for (size_t i = 0; i < n && cr->rep->status == CG_OK; i++)
        if (x[i] != (float)(3 * (i % 100) + 3)) {
            cr->rep->status = CG_ERR_INTERNAL;
            snprintf(cr->rep->msg, sizeof(cr->rep->msg), "element %zu is "
                     "%g", i, x[i]);
        }
    if (cr->rep->status == CG_OK)
        snprintf(cr->rep->msg, sizeof(cr->rep->msg), "%s %s",
                 cg_coll_algo_name(cg_allreduce_algo(cr->comm, 1 << 20)),
                 cg_coll_algo_name(cg_allreduce_algo(cr->comm, 64 << 10)));
    free(x);
}

Test(coll_shm, the_measured_choice_is_the_same_on_every_rank,
     .timeout = 60)
{
    int status[3];
    coll_report_t *rep = coll_job_run(3, "10s", "auto", body_calibrate,
                                      NULL, coll_scaled_s(30), status);
    for (int r = 0; r < 3; r++) {
        cr_assert_eq(rep[r].status, CG_OK, "rank %d: %s", r, rep[r].msg);
        cr_assert(strcmp(rep[r].msg, "shm shm") == 0 ||
                      strcmp(rep[r].msg, "ring shm") == 0,
                  "rank %d: %s", r, rep[r].msg);
        cr_assert_str_eq(rep[r].msg, rep[0].msg, "rank %d differs", r);
    }
    cr_log_info("measured: %s", rep[0].msg);
    coll_job_free(rep, 3);
}

static void body_none(coll_rank_t *cr, void *arg)
{
    (void)cr, (void)arg;
}

Test(coll_shm, shm_required_where_it_cannot_be_set_up_is_refused,
     .timeout = 60)
{
    int status[2];
    coll_report_t *rep = coll_job_run(2, "10s", "shm @0:CG_SHM_SLOT=0",
                                      body_none, NULL, coll_scaled_s(30),
                                      status);
    for (int r = 0; r < 2; r++) {
        cr_assert_eq(rep[r].status, CG_ERR_CONFIG, "rank %d: %s: %s", r,
                     cg_status_name(rep[r].status), rep[r].msg);
        cr_assert(strstr(rep[r].msg, "CG_SHM_SLOT is 0") != NULL,
                  "rank %d: %s", r, rep[r].msg);
    }
    coll_job_free(rep, 2);
}

/* The collguard-* names in /dev/shm (up to max). */
static int shm_names(char names[][64], int max)
{
    DIR *d = opendir("/dev/shm");
    struct dirent *e;
    int n = 0;
    if (d == NULL)
        return 0;
    while ((e = readdir(d)) != NULL && n < max)
        if (strncmp(e->d_name, "collguard-", 10) == 0)
            snprintf(names[n++], 64, "%.63s", e->d_name);
    closedir(d);
    return n;
}

static bool shm_known(char names[][64], int n, const char *name)
{
    for (int i = 0; i < n; i++)
        if (strcmp(names[i], name) == 0)
            return true;
    return false;
}

Test(coll_shm, nothing_is_left_in_dev_shm, .timeout = 60)
{
    static char before[64][64], after[64][64];
    int nb = shm_names(before, 64), na = 0, rounds = 1;
    bool clean = false;

    check_bits(3, "shm CG_SHM_SLOT=64K", rounds);
    /* Other tests running at once may hold a name for a moment. */
    for (int tries = 0; tries < 20 && !clean; tries++, usleep(100000)) {
        na = shm_names(after, 64);
        clean = true;
        for (int i = 0; i < na; i++)
            clean = clean && shm_known(before, nb, after[i]);
    }
    cr_assert(clean, "%d collguard segment(s) left in /dev/shm, e.g. %s",
              na, na > 0 ? after[0] : "");
}
