/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Dynamic process sets through Horovod's C ABI with three forked ranks:
 * add, ids, ranks, included, rank, remove and id reuse, and Horovod's
 * error codes (-2 not dynamic, -3 unknown or bad, -4 foreign, -6 existing)
 * agreed on every rank, and -5 when a peer is gone.
 */
#include <criterion/criterion.h>

#include "tests/plugin/hvd_test_util.h"

static int add_and_query(hvd_rank_t *self)
{
    const int ranks[] = {2, 0};
    int ids[2] = {0}, got[2] = {0};

    HVD_CHECK(self, horovod_init(NULL, 0, NULL, NULL, 0), "init failed");
    HVD_CHECK_EQ(self, horovod_add_process_set(ranks, 2), 1);
    HVD_CHECK_EQ(self, horovod_number_of_process_sets(), 2);
    horovod_process_set_ids(ids);
    HVD_CHECK(self, ids[0] == 0 && ids[1] == 1, "ids %d %d", ids[0], ids[1]);
    HVD_CHECK_EQ(self, horovod_process_set_size(1), 2);
    HVD_CHECK_EQ(self, horovod_process_set_ranks(1, got), 0);
    HVD_CHECK(self, got[0] == 0 && got[1] == 2, "ranks %d %d", got[0],
              got[1]);
    HVD_CHECK_EQ(self, horovod_process_set_included(1), self->rank != 1);
    HVD_CHECK_EQ(self, horovod_process_set_rank(1),
                 self->rank == 1 ? -4 : self->rank / 2);
    HVD_CHECK_EQ(self, horovod_process_set_rank(9), -3);
    HVD_CHECK_EQ(self, horovod_process_set_size(9), -3);
    HVD_CHECK_EQ(self, horovod_process_set_included(9), -3);
    HVD_CHECK_EQ(self, horovod_process_set_ranks(9, got), -3);
    horovod_shutdown();
    return 0;
}

Test(hvd_process_sets, add_then_query_ids_ranks_and_membership,
     .timeout = 30)
{
    hvd_job_t job;

    hvd_job_init(&job, 3, HVD_LAUNCH_CG_RUN);
    job.env[0] = "HOROVOD_DYNAMIC_PROCESS_SETS=1";
    hvd_assert_all_passed(&job, hvd_job_run(&job, add_and_query));
    hvd_job_fini(&job);
}

static int existing_sets(hvd_rank_t *self)
{
    const int a[] = {0, 1}, a_rev[] = {1, 0}, world[] = {0, 1, 2};

    HVD_CHECK(self, horovod_init(NULL, 0, NULL, NULL, 0), "init failed");
    HVD_CHECK_EQ(self, horovod_add_process_set(a, 2), 1);
    HVD_CHECK_EQ(self, horovod_add_process_set(a_rev, 2), -6);
    HVD_CHECK_EQ(self, horovod_add_process_set(world, 3), -6);
    HVD_CHECK_EQ(self, horovod_add_process_set(NULL, 0), -6);
    HVD_CHECK_EQ(self, horovod_number_of_process_sets(), 2);
    horovod_shutdown();
    return 0;
}

Test(hvd_process_sets, same_ranks_again_is_existing_set, .timeout = 30)
{
    hvd_job_t job;

    hvd_job_init(&job, 3, HVD_LAUNCH_CG_RUN);
    job.env[0] = "HOROVOD_DYNAMIC_PROCESS_SETS=1";
    hvd_assert_all_passed(&job, hvd_job_run(&job, existing_sets));
    hvd_job_fini(&job);
}

static int remove_and_reuse(hvd_rank_t *self)
{
    const int a[] = {0}, b[] = {1, 2}, c[] = {0, 2};
    int ids[3] = {0};

    HVD_CHECK(self, horovod_init(NULL, 0, NULL, NULL, 0), "init failed");
    HVD_CHECK_EQ(self, horovod_add_process_set(a, 1), 1);
    HVD_CHECK_EQ(self, horovod_add_process_set(b, 2), 2);
    HVD_CHECK_EQ(self, horovod_remove_process_set(1), 1);
    HVD_CHECK_EQ(self, horovod_process_set_size(1), -3);
    HVD_CHECK_EQ(self, horovod_remove_process_set(1), -3);
    HVD_CHECK_EQ(self, horovod_remove_process_set(0), -3);
    /* The removed id comes back first; ids stay in registration order. */
    HVD_CHECK_EQ(self, horovod_add_process_set(c, 2), 1);
    HVD_CHECK_EQ(self, horovod_number_of_process_sets(), 3);
    horovod_process_set_ids(ids);
    HVD_CHECK(self, ids[0] == 0 && ids[1] == 2 && ids[2] == 1,
              "ids %d %d %d", ids[0], ids[1], ids[2]);
    HVD_CHECK_EQ(self, horovod_add_process_set(a, 1), 3);
    horovod_shutdown();
    return 0;
}

Test(hvd_process_sets, remove_frees_the_id_for_reuse, .timeout = 30)
{
    hvd_job_t job;

    hvd_job_init(&job, 3, HVD_LAUNCH_CG_RUN);
    job.env[0] = "HOROVOD_DYNAMIC_PROCESS_SETS=1";
    job.env[1] = "CG_LOG_LEVEL=none";
    hvd_assert_all_passed(&job, hvd_job_run(&job, remove_and_reuse));
    hvd_job_fini(&job);
}

static int not_dynamic(hvd_rank_t *self)
{
    const int a[] = {0, 1};

    HVD_CHECK(self, horovod_init(NULL, 0, NULL, NULL, 0), "init failed");
    HVD_CHECK_EQ(self, horovod_add_process_set(a, 2), -2);
    HVD_CHECK_EQ(self, horovod_remove_process_set(1), -2);
    HVD_CHECK_EQ(self, horovod_number_of_process_sets(), 1);
    horovod_shutdown();
    return 0;
}

Test(hvd_process_sets, without_dynamic_env_changes_are_minus_two,
     .timeout = 30)
{
    hvd_job_t job;

    hvd_job_init(&job, 2, HVD_LAUNCH_CG_RUN);
    job.env[0] = "CG_LOG_LEVEL=none";
    hvd_assert_all_passed(&job, hvd_job_run(&job, not_dynamic));
    hvd_job_fini(&job);
}

/* Bad lists on one or all ranks and disagreeing lists give -3 on every
 * rank; the job goes on and the next good add gets id 1. */
static int bad_lists(hvd_rank_t *self)
{
    const int far[] = {0, 5}, dup[] = {1, 1}, a[] = {0, 1}, b[] = {0, 2};
    const int *mine = (self->rank == 1) ? b : a;

    HVD_CHECK(self, horovod_init(NULL, 0, NULL, NULL, 0), "init failed");
    HVD_CHECK_EQ(self, horovod_add_process_set(a, -1), -3);
    HVD_CHECK_EQ(self, horovod_add_process_set(NULL, 2), -3);
    HVD_CHECK_EQ(self, horovod_add_process_set(far, 2), -3);
    HVD_CHECK_EQ(self, horovod_add_process_set(dup, 2), -3);
    HVD_CHECK_EQ(self, horovod_add_process_set(self->rank ? a : far, 2),
                 -3);
    HVD_CHECK_EQ(self, horovod_add_process_set(mine, 2), -3);
    HVD_CHECK_EQ(self, horovod_remove_process_set(self->rank), -3);
    HVD_CHECK_EQ(self, horovod_number_of_process_sets(), 1);
    HVD_CHECK_EQ(self, horovod_add_process_set(a, 2), 1);
    horovod_shutdown();
    return 0;
}

Test(hvd_process_sets, bad_or_disagreeing_lists_fail_on_every_rank,
     .timeout = 30)
{
    hvd_job_t job;

    hvd_job_init(&job, 3, HVD_LAUNCH_CG_RUN);
    job.env[0] = "HOROVOD_DYNAMIC_PROCESS_SETS=1";
    job.env[1] = "CG_LOG_LEVEL=none";
    hvd_assert_all_passed(&job, hvd_job_run(&job, bad_lists));
    hvd_job_fini(&job);
}

/* Rank 1 leaves right after init: rank 0's add finds the peer gone within
 * CG_TIMEOUT and answers -5 (shutting down), not a hang; shutdown works. */
static int peer_gone(hvd_rank_t *self)
{
    const int a[] = {0};

    HVD_CHECK(self, horovod_init(NULL, 0, NULL, NULL, 0), "init failed");
    if (self->rank == 1) {
        horovod_shutdown();
        return 0;
    }
    HVD_CHECK_EQ(self, horovod_add_process_set(a, 1), -5);
    HVD_CHECK_EQ(self, horovod_add_process_set(a, 1), -5);
    HVD_CHECK_EQ(self, horovod_number_of_process_sets(), 1);
    horovod_shutdown();
    HVD_CHECK_EQ(self, horovod_is_initialized(), 0);
    return 0;
}

Test(hvd_process_sets, peer_gone_gives_shutdown_code, .timeout = 30)
{
    hvd_job_t job;

    hvd_job_init(&job, 2, HVD_LAUNCH_CG_RUN);
    job.env[0] = "HOROVOD_DYNAMIC_PROCESS_SETS=1";
    job.env[1] = "CG_LOG_LEVEL=none";
    hvd_assert_all_passed(&job, hvd_job_run(&job, peer_gone));
    hvd_job_fini(&job);
}
