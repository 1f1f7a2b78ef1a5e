/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Process sets in the Horovod shim's core (core/engine/hvd_sets.c and the
 * routing of every enqueue) across 3 forked ranks: two ranks run
 * allreduce, broadcast, allgather and reducescatter on a set of their own
 * against a reference while the third works on a set of one and waits
 * for them (so the set's collectives cannot have needed it), overlapping
 * sets with the same tensor names, the errors of non-members, unknown
 * ids and foreign roots, grouped allreduce and alltoall on a set (one
 * route per group, members on two sets refused), and add / remove (again,
 * mismatched arguments,
 * a request pending at removal).
 */
#include <criterion/criterion.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "tests/core/util/test_hvd_util.h"

#define PS_N 37 /* elements of each tensor */

static const char *const ps_env[] = {"HOROVOD_CYCLE_TIME=2", NULL};

/* Rank r's element i of tensor k: small integers, exact in f32. */
static float ps_value(int r, int k, int i)
{
    return (float)((r + 1) * 100 + k * 10 + i % 7);
}

static cg_hvd_tensor_t ps_tensor(const char *name, int32_t set, int64_t n,
                                 const void *in, void *out)
{
    cg_hvd_tensor_t t = {.field_mask = CG_HVD_TENSOR_FIELD_PROCESS_SET,
                         .name = name, .dtype = CG_DTYPE_F32, .ndim = 1,
                         .shape = {n}, .input = in, .output = out,
                         .process_set = set};
    return t;
}

/* Allreduce (sum) of tensor k on set `set` of members[0..m-1]; checks
 * every element against the members' sum. */
static int ps_allreduce(hj_rank_t *self, int32_t set, const int *members,
                        int m, int k, const char *name)
{
    float in[PS_N], out[PS_N];
    cg_hvd_req_h req;

    for (int i = 0; i < PS_N; i++)
        in[i] = ps_value(self->rank, k, i);
    cg_hvd_tensor_t t = ps_tensor(name, set, PS_N, in, out);
    HJ_CHECK(self, cg_hvd_enqueue_allreduce(self->core, &t, CG_OP_SUM, 1, 1,
                                            &req) == CG_OK,
             "%s on set %d: %s", name, set, cg_last_error());
    HJ_CHECK(self, cg_hvd_wait(req) == CG_OK, "%s: %s", name,
             cg_hvd_error(req));
    cg_hvd_release(req);
    for (int i = 0; i < PS_N; i++) {
        float want = 0;
        for (int j = 0; j < m; j++)
            want += ps_value(members[j], k, i);
        HJ_CHECK(self, out[i] == want, "%s on set %d: element %d is %g, "
                 "want %g", name, set, i, out[i], want);
    }
    return 0;
}

/* Broadcast from job rank 1, allgather of r + 1 rows per member and a
 * reducescatter of 5 rows, all on set 1 = {0, 1}. */
static int ps_members_ops(hj_rank_t *self)
{
    const int members[2] = {0, 1};
    float b[PS_N], g[3], rs_in[5], rs_out[3];
    const void *data;
    int64_t dim0, start, rows;
    cg_hvd_req_h req;

    for (int i = 0; i < PS_N; i++)
        b[i] = ps_value(self->rank, 0, i);
    cg_hvd_tensor_t t = ps_tensor("bc", 1, PS_N, b, b);
    HJ_CHECK(self, cg_hvd_enqueue_broadcast(self->core, &t, 1, &req) ==
                       CG_OK && cg_hvd_wait(req) == CG_OK,
             "broadcast on set 1: %s / %s", cg_last_error(),
             cg_hvd_error(req));
    cg_hvd_release(req);
    for (int i = 0; i < PS_N; i++)
        HJ_CHECK(self, b[i] == ps_value(1, 0, i), "broadcast element %d is "
                 "%g, want rank 1's %g", i, b[i], ps_value(1, 0, i));
    for (int i = 0; i <= self->rank; i++)
        g[i] = ps_value(self->rank, 1, i);
    t = ps_tensor("ag", 1, self->rank + 1, g, NULL);
    HJ_CHECK(self, cg_hvd_enqueue_allgather(self->core, &t, &req) == CG_OK &&
                       cg_hvd_wait(req) == CG_OK,
             "allgather on set 1: %s / %s", cg_last_error(),
             cg_hvd_error(req));
    HJ_CHECK(self, cg_hvd_allgather_result(req, &data, &dim0) == CG_OK &&
                 dim0 == 3, "allgather: first dimension %lld, want 1 + 2",
             (long long)dim0);
    const float *gd = data;
    HJ_CHECK(self, gd[0] == ps_value(0, 1, 0) && gd[1] == ps_value(1, 1, 0) &&
                 gd[2] == ps_value(1, 1, 1),
             "allgather: %g %g %g, want ranks 0, 1, 1 in order", gd[0], gd[1],
             gd[2]);
    cg_hvd_release(req);
    for (int i = 0; i < 5; i++)
        rs_in[i] = ps_value(self->rank, 2, i);
    t = ps_tensor("rs", 1, 5, rs_in, rs_out);
    HJ_CHECK(self, cg_hvd_enqueue_reducescatter(self->core, &t, CG_OP_SUM, 1,
                                                1, &req) == CG_OK &&
                       cg_hvd_wait(req) == CG_OK,
             "reducescatter on set 1: %s / %s", cg_last_error(),
             cg_hvd_error(req));
    cg_hvd_release(req);
    cg_hvd_reducescatter_rows(5, 2, self->rank, &start, &rows);
    HJ_CHECK(self, rows == 3 - self->rank, "reducescatter: %lld rows",
             (long long)rows);
    for (int64_t i = 0; i < rows; i++)
        HJ_CHECK(self, rs_out[i] == ps_value(0, 2, (int)(start + i)) +
                                        ps_value(1, 2, (int)(start + i)),
                 "reducescatter row %lld is %g", (long long)i, rs_out[i]);
    return ps_allreduce(self, 1, members, 2, 3, "ar");
}

static int body_two_of_three(hj_rank_t *self)
{
    atomic_int *done = self->arg; /* shared across the forked ranks */
    const int set1[2] = {0, 1}, set2[1] = {2};
    const int all[3] = {0, 1, 2};

    HJ_CHECK(self, cg_hvd_process_set_add(self->core, 1, set1, 2) == CG_OK,
             "add {0, 1}: %s", cg_last_error());
    HJ_CHECK(self, cg_hvd_process_set_add(self->core, 2, set2, 1) == CG_OK,
             "add {2}: %s", cg_last_error());
    if (self->rank < 2) {
        for (int step = 0; step < 3; step++)
            if (ps_members_ops(self) != 0)
                return 1;
        atomic_fetch_add(done, 1);
    } else {
        /* Its own work on a set of one, then it waits for the others: the
         * set's collectives ran without this rank. */
        for (int step = 0; step < 3; step++)
            if (ps_allreduce(self, 2, set2, 1, step, "ar") != 0)
                return 1;
        for (int i = 0; i < 20000 && atomic_load(done) < 2; i++)
            usleep(1000);
        HJ_CHECK(self, atomic_load(done) == 2, "the members of set 1 did "
                 "not finish while rank 2 worked alone");
    }
    return ps_allreduce(self, 0, all, 3, 4, "global");
}

Test(hvd_psets, two_of_three_run_collectives_while_the_third_works_alone,
     .timeout = 60)
{
    atomic_int *done = mmap(NULL, sizeof(*done), PROT_READ | PROT_WRITE,
                            MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    hj_rank_t *rep;

    atomic_init(done, 0);
    rep = hj_run(3, ps_env, body_two_of_three, done);
    hj_assert_passed(rep, 3);
    /* The global core ran the last allreduce only. */
    for (int r = 0; r < 3; r++)
        cr_assert_eq(rep[r].stats.allreduce_tensors, 1, "rank %d: %llu", r,
                     (unsigned long long)rep[r].stats.allreduce_tensors);
    hj_free(rep, 3);
    munmap(done, sizeof(*done));
}

/* Sets {0, 1} and {1, 2}: rank 1 has allreduces of the same names in
 * flight on both at once. */
static int body_overlap(hj_rank_t *self)
{
    const int a[2] = {0, 1}, b[2] = {1, 2};
    float in[2][PS_N], out[2][PS_N];
    cg_hvd_req_h req[2];
    int32_t mine[2];
    int n = 0;

    HJ_CHECK(self, cg_hvd_process_set_add(self->core, 1, a, 2) == CG_OK &&
                       cg_hvd_process_set_add(self->core, 2, b, 2) == CG_OK,
             "add: %s", cg_last_error());
    if (self->rank <= 1)
        mine[n++] = 1;
    if (self->rank >= 1)
        mine[n++] = 2;
    for (int step = 0; step < 5; step++) {
        for (int j = 0; j < n; j++) {
            for (int i = 0; i < PS_N; i++)
                in[j][i] = ps_value(self->rank, step + (int)mine[j], i);
            cg_hvd_tensor_t t = ps_tensor("grad", mine[j], PS_N, in[j],
                                          out[j]);
            HJ_CHECK(self, cg_hvd_enqueue_allreduce(self->core, &t,
                                                    CG_OP_SUM, 1, 1,
                                                    &req[j]) == CG_OK,
                     "grad on set %d: %s", mine[j], cg_last_error());
        }
        for (int j = 0; j < n; j++) {
            const int *m = mine[j] == 1 ? a : b;
            HJ_CHECK(self, cg_hvd_wait(req[j]) == CG_OK, "set %d: %s",
                     mine[j], cg_hvd_error(req[j]));
            cg_hvd_release(req[j]);
            for (int i = 0; i < PS_N; i++) {
                float want = ps_value(m[0], step + (int)mine[j], i) +
                             ps_value(m[1], step + (int)mine[j], i);
                HJ_CHECK(self, out[j][i] == want, "set %d step %d element "
                         "%d is %g, want %g", mine[j], step, i, out[j][i],
                         want);
            }
        }
    }
    return 0;
}

Test(hvd_psets, overlapping_sets_run_the_same_names_side_by_side,
     .timeout = 60)
{
    hj_rank_t *rep = hj_run(3, ps_env, body_overlap, NULL);

    hj_assert_passed(rep, 3);
    hj_free(rep, 3);
}

static int body_errors(hj_rank_t *self)
{
    const int a[2] = {0, 1};
    float x[PS_N] = {0};
    cg_hvd_req_h req;

    HJ_CHECK(self, cg_hvd_process_set_add(self->core, 1, a, 2) == CG_OK,
             "add: %s", cg_last_error());
    cg_hvd_tensor_t t = ps_tensor("x", 7, PS_N, x, x);
    HJ_CHECK(self, cg_hvd_enqueue_allreduce(self->core, &t, CG_OP_SUM, 1, 1,
                                            &req) == CG_ERR_INVALID_PARAM &&
                       strstr(cg_last_error(), "process set 7 does not "
                              "exist") != NULL,
             "unknown id: %s", cg_last_error());
    t.process_set = 1;
    if (self->rank == 2) {
        HJ_CHECK(self, cg_hvd_enqueue_allreduce(self->core, &t, CG_OP_SUM, 1,
                                                1, &req) ==
                               CG_ERR_INVALID_PARAM &&
                           strstr(cg_last_error(), "rank 2 is not a member "
                                  "of process set 1 (ranks 0, 1)") != NULL,
                 "non-member: %s", cg_last_error());
        HJ_CHECK(self, cg_hvd_enqueue_join(self->core, 1, &req) ==
                           CG_ERR_INVALID_PARAM,
                 "join by a non-member: %s", cg_last_error());
    } else {
        HJ_CHECK(self, cg_hvd_enqueue_broadcast(self->core, &t, 2, &req) ==
                               CG_ERR_INVALID_PARAM &&
                           strstr(cg_last_error(), "root rank 2 is not a "
                                  "member of process set 1") != NULL,
                 "foreign root: %s", cg_last_error());
    }
    return 0;
}

Test(hvd_psets, non_members_unknown_ids_and_foreign_roots_are_refused,
     .timeout = 60)
{
    hj_rank_t *rep = hj_run(3, ps_env, body_errors, NULL);

    hj_assert_passed(rep, 3);
    hj_free(rep, 3);
}

static int body_add_remove(hj_rank_t *self)
{
    const int a[2] = {0, 1}, b[2] = {1, 2}, odd[2] = {0, 2};
    float x[PS_N] = {0};
    cg_hvd_req_h req, lonely = NULL;
    cg_status_t st;

    HJ_CHECK(self, cg_hvd_process_set_add(self->core, 1, a, 2) == CG_OK,
             "add: %s", cg_last_error());
    if (self->rank < 2 && ps_allreduce(self, 1, a, 2, 0, "ar") != 0)
        return 1;
    /* A name only rank 0 enqueues: pending when the set goes. */
    cg_hvd_tensor_t t = ps_tensor("lonely", 1, PS_N, x, x);
    if (self->rank == 0)
        HJ_CHECK(self, cg_hvd_enqueue_allreduce(self->core, &t, CG_OP_SUM, 1,
                                                1, &lonely) == CG_OK,
                 "lonely: %s", cg_last_error());
    HJ_CHECK(self, cg_hvd_process_set_remove(self->core, 1) == CG_OK,
             "remove: %s", cg_last_error());
    if (lonely != NULL) {
        HJ_CHECK(self, cg_hvd_wait(lonely) == CG_ERR_CANCELED &&
                           strstr(cg_hvd_error(lonely), "process set 1 was "
                                  "removed") != NULL,
                 "pending at removal: %s", cg_hvd_error(lonely));
        cg_hvd_release(lonely);
    }
    t.name = "after";
    HJ_CHECK(self, cg_hvd_enqueue_allreduce(self->core, &t, CG_OP_SUM, 1, 1,
                                            &req) == CG_ERR_INVALID_PARAM,
             "removed id accepted: %s", cg_last_error());
    HJ_CHECK(self, cg_hvd_process_set_remove(self->core, 1) ==
                       CG_ERR_INVALID_PARAM,
             "removed twice: %s", cg_last_error());
    /* The id again, other members. */
    HJ_CHECK(self, cg_hvd_process_set_add(self->core, 1, b, 2) == CG_OK,
             "add again: %s", cg_last_error());
    if (self->rank > 0 && ps_allreduce(self, 1, b, 2, 1, "ar") != 0)
        return 1;
    /* Rank 2 asks for other ranks: refused on every rank. */
    st = cg_hvd_process_set_add(self->core, 3, self->rank == 2 ? odd : a, 2);
    HJ_CHECK(self, st == CG_ERR_MISMATCH &&
                       strstr(cg_last_error(), "rank 2 passed other") != NULL,
             "mismatched add: %s (%s)", cg_status_name(st), cg_last_error());
    HJ_CHECK(self, cg_hvd_process_set_add(self->core, 1, a, 2) ==
                       CG_ERR_INVALID_PARAM &&
                   strstr(cg_last_error(), "id is in use") != NULL,
             "id in use: %s", cg_last_error());
    return 0;
}

Test(hvd_psets, add_remove_add_again_and_mismatched_adds, .timeout = 60)
{
    hj_rank_t *rep = hj_run(3, ps_env, body_add_remove, NULL);

    hj_assert_passed(rep, 3);
    hj_free(rep, 3);
}

/* Grouped allreduce (3 members, sum) and alltoall with splits on set 1 =
 * {0, 1}, each against a reference computed here. */
#define PS_G 3
static int ps_grouped_and_alltoall(hj_rank_t *self, int step)
{
    float in[PS_G][PS_N], out[PS_G][PS_N], a2a_in[6];
    char names[PS_G][32];
    cg_hvd_tensor_t ts[PS_G];
    cg_hvd_req_h reqs[PS_G], req;
    const int64_t *rsplits;
    const void *data;
    int64_t dim0;
    /* Set rank s sends s + 1 rows to set rank 0, 2 to set rank 1. */
    const int64_t splits[2] = {self->rank + 1, 2};

    for (int g = 0; g < PS_G; g++) {
        snprintf(names[g], sizeof(names[g]), "grp.%d", g);
        for (int i = 0; i < PS_N; i++)
            in[g][i] = ps_value(self->rank, step + g, i);
        ts[g] = ps_tensor(names[g], 1, PS_N, in[g], out[g]);
    }
    HJ_CHECK(self, cg_hvd_enqueue_grouped_allreduce(self->core, ts, PS_G,
                                                    CG_OP_SUM, 1, 1, reqs) ==
                       CG_OK,
             "grouped allreduce on set 1: %s", cg_last_error());
    for (int g = 0; g < PS_G; g++) {
        HJ_CHECK(self, cg_hvd_wait(reqs[g]) == CG_OK, "member %d: %s", g,
                 cg_hvd_error(reqs[g]));
        cg_hvd_release(reqs[g]);
        for (int i = 0; i < PS_N; i++) {
            float want = ps_value(0, step + g, i) + ps_value(1, step + g, i);
            HJ_CHECK(self, out[g][i] == want, "member %d element %d is %g, "
                     "want %g", g, i, out[g][i], want);
        }
    }
    for (int i = 0; i < self->rank + 3; i++)
        a2a_in[i] = ps_value(self->rank, step, i);
    cg_hvd_tensor_t t = ps_tensor("a2a", 1, self->rank + 3, a2a_in, NULL);
    HJ_CHECK(self, cg_hvd_enqueue_alltoall(self->core, &t, splits, &req) ==
                       CG_OK && cg_hvd_wait(req) == CG_OK,
             "alltoall on set 1: %s / %s", cg_last_error(),
             cg_hvd_error(req));
    HJ_CHECK(self, cg_hvd_alltoall_result(req, &data, &dim0, &rsplits) ==
                 CG_OK, "alltoall result: %s", cg_last_error());
    /* Set rank 0 gets 1 row from 0 and 2 from 1; set rank 1 gets 2 rows
     * from each: rows [off_s, off_s + n) of member s's input. */
    const float *got = data;
    int64_t want_dim0 = self->rank == 0 ? 3 : 4, k = 0;
    HJ_CHECK(self, dim0 == want_dim0, "alltoall: %lld rows, want %lld",
             (long long)dim0, (long long)want_dim0);
    for (int s = 0; s < 2; s++) {
        int64_t n = self->rank == 0 ? s + 1 : 2;
        int64_t off = self->rank == 0 ? 0 : s + 1;
        HJ_CHECK(self, rsplits[s] == n, "alltoall: %lld rows from set rank "
                 "%d, want %lld", (long long)rsplits[s], s, (long long)n);
        for (int64_t i = 0; i < n; i++, k++)
            HJ_CHECK(self, got[k] == ps_value(s, step, (int)(off + i)),
                     "alltoall row %lld is %g, want member %d's row %lld",
                     (long long)k, got[k], s, (long long)(off + i));
    }
    cg_hvd_release(req);
    return 0;
}

static int body_grouped_alltoall(hj_rank_t *self)
{
    atomic_int *done = self->arg;
    const int set1[2] = {0, 1}, set2[1] = {2}, all[3] = {0, 1, 2};
    float x[PS_N] = {0}, y[PS_N];
    cg_hvd_tensor_t ts[2];
    cg_hvd_req_h reqs[2], req;

    HJ_CHECK(self, cg_hvd_process_set_add(self->core, 1, set1, 2) == CG_OK &&
                       cg_hvd_process_set_add(self->core, 2, set2, 1) ==
                           CG_OK,
             "add: %s", cg_last_error());
    /* A group names one set: members on two are refused, no request. */
    ts[0] = ps_tensor("mixed.0", self->rank < 2 ? 1 : 2, PS_N, x, y);
    ts[1] = ps_tensor("mixed.1", 0, PS_N, x, y);
    HJ_CHECK(self, cg_hvd_enqueue_grouped_allreduce(self->core, ts, 2,
                                                    CG_OP_SUM, 1, 1, reqs) ==
                           CG_ERR_INVALID_PARAM &&
                       strstr(cg_last_error(), "a group runs on one process "
                              "set") != NULL,
             "mixed group: %s", cg_last_error());
    if (self->rank < 2) {
        for (int step = 0; step < 3; step++)
            if (ps_grouped_and_alltoall(self, step) != 0)
                return 1;
        atomic_fetch_add(done, 1);
    } else {
        /* Not a member of set 1: refused at the enqueue. */
        ts[0] = ps_tensor("grp.0", 1, PS_N, x, y);
        ts[1] = ps_tensor("grp.1", 1, PS_N, x, y);
        HJ_CHECK(self, cg_hvd_enqueue_grouped_allreduce(self->core, ts, 2,
                                                        CG_OP_SUM, 1, 1,
                                                        reqs) ==
                               CG_ERR_INVALID_PARAM &&
                           strstr(cg_last_error(), "not a member") != NULL,
                 "grouped by a non-member: %s", cg_last_error());
        cg_hvd_tensor_t t = ps_tensor("a2a", 1, 2, x, NULL);
        HJ_CHECK(self, cg_hvd_enqueue_alltoall(self->core, &t, NULL, &req) ==
                               CG_ERR_INVALID_PARAM &&
                           strstr(cg_last_error(), "not a member") != NULL,
                 "alltoall by a non-member: %s", cg_last_error());
        /* Its own set of one: a grouped allreduce and an equal alltoall. */
        ts[0] = ps_tensor("solo.0", 2, PS_N, x, y);
        HJ_CHECK(self, cg_hvd_enqueue_grouped_allreduce(self->core, ts, 1,
                                                        CG_OP_SUM, 1, 1,
                                                        reqs) == CG_OK &&
                           cg_hvd_wait(reqs[0]) == CG_OK,
                 "grouped on a set of one: %s", cg_last_error());
        cg_hvd_release(reqs[0]);
        for (int i = 0; i < 20000 && atomic_load(done) < 2; i++)
            usleep(1000);
        HJ_CHECK(self, atomic_load(done) == 2, "the members of set 1 did "
                 "not finish while rank 2 worked alone");
    }
    return ps_allreduce(self, 0, all, 3, 4, "global");
}

Test(hvd_psets, grouped_allreduce_and_alltoall_on_two_of_three,
     .timeout = 60)
{
    atomic_int *done = mmap(NULL, sizeof(*done), PROT_READ | PROT_WRITE,
                            MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    hj_rank_t *rep;

    atomic_init(done, 0);
    rep = hj_run(3, ps_env, body_grouped_alltoall, done);
    hj_assert_passed(rep, 3);
    for (int r = 0; r < 3; r++) /* the global core: the last one only */
        cr_assert_eq(rep[r].stats.grouped_calls, 0, "rank %d: %llu", r,
                     (unsigned long long)rep[r].stats.grouped_calls);
    hj_free(rep, 3);
    munmap(done, sizeof(*done));
}
