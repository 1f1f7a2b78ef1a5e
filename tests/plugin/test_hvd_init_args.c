/* SPDX-License-Identifier: Apache-2.0 */
/*
 * horovod_init's arguments with forked ranks: a subset of the launched
 * ranks as the world, process sets given at init, and bad or disagreeing
 * arguments, which fail init on every rank (and leave it retryable).
 */
#include <criterion/criterion.h>

#include "tests/plugin/hvd_test_util.h"

/* Launched ranks 2 and 0 form the world, in that order; rank 1 is out. */
static int subset_world(hvd_rank_t *self)
{
    const int ranks[] = {2, 0};
    bool ok = horovod_init(ranks, 2, NULL, NULL, 0);

    if (self->rank == 1) {
        HVD_CHECK(self, !ok, "a rank outside the list initialized");
        HVD_CHECK_EQ(self, horovod_is_initialized(), 0);
        return 0;
    }
    HVD_CHECK(self, ok, "init failed");
    HVD_CHECK_EQ(self, horovod_rank(), self->rank == 2 ? 0 : 1);
    HVD_CHECK_EQ(self, horovod_size(), 2);
    HVD_CHECK_EQ(self, horovod_local_rank(), horovod_rank());
    HVD_CHECK_EQ(self, horovod_local_size(), 2);
    HVD_CHECK_EQ(self, horovod_cross_rank(), 0);
    HVD_CHECK_EQ(self, horovod_cross_size(), 1);
    /* Dynamic sets need every launched rank. */
    HVD_CHECK_EQ(self, horovod_add_process_set(ranks, 1), -2);
    horovod_shutdown();
    return 0;
}

Test(hvd_init_args, subset_of_launched_ranks_is_the_world, .timeout = 30)
{
    hvd_job_t job;

    hvd_job_init(&job, 3, HVD_LAUNCH_CG_RUN);
    job.env[0] = "HOROVOD_DYNAMIC_PROCESS_SETS=1";
    job.env[1] = "CG_LOG_LEVEL=none"; /* rank 1's failure logs by design */
    hvd_assert_all_passed(&job, hvd_job_run(&job, subset_world));
    hvd_job_fini(&job);
}

/* Sets {0,1}, {2,1}, {1,0} (a repeat) and {0,1,2} (the world): ids 1, 2. */
static int sets_at_init(hvd_rank_t *self)
{
    const int ps_ranks[] = {0, 1, 2, 1, 1, 0, 0, 1, 2};
    const int ps_sizes[] = {2, 2, 2, 3};
    int ids[4] = {0}, got[3] = {0};

    HVD_CHECK(self, horovod_init(NULL, 0, ps_ranks, ps_sizes, 4),
              "init failed");
    HVD_CHECK_EQ(self, horovod_number_of_process_sets(), 3);
    horovod_process_set_ids(ids);
    HVD_CHECK(self, ids[0] == 0 && ids[1] == 1 && ids[2] == 2,
              "ids %d %d %d", ids[0], ids[1], ids[2]);
    HVD_CHECK_EQ(self, horovod_process_set_ranks(2, got), 0);
    HVD_CHECK(self, got[0] == 1 && got[1] == 2, "set 2: %d %d", got[0],
              got[1]);
    HVD_CHECK_EQ(self, horovod_process_set_included(1), self->rank < 2);
    HVD_CHECK_EQ(self, horovod_process_set_rank(2),
                 self->rank == 0 ? -4 : self->rank - 1);
    HVD_CHECK_EQ(self, horovod_process_set_ranks(0, got), 0);
    HVD_CHECK(self, got[0] == 0 && got[1] == 1 && got[2] == 2,
              "set 0: %d %d %d", got[0], got[1], got[2]);
    horovod_shutdown();
    HVD_CHECK_EQ(self, horovod_number_of_process_sets(), 1);
    return 0;
}

Test(hvd_init_args, process_sets_given_at_init, .timeout = 30)
{
    hvd_job_t job;

    hvd_job_init(&job, 3, HVD_LAUNCH_CG_RUN);
    hvd_assert_all_passed(&job, hvd_job_run(&job, sets_at_init));
    hvd_job_fini(&job);
}

/* Each bad call fails on every rank, and a good one still works after. */
static int bad_args_fail_everywhere(hvd_rank_t *self)
{
    const int dup[] = {1, 1}, far[] = {0, 3}, bad_set[] = {0, 5};
    const int sizes[] = {2}, neg_size[] = {-1};
    const int mine[] = {self->rank == 1 ? 2 : 1, 0};

    HVD_CHECK(self, !horovod_init(dup, -1, NULL, NULL, 0), "nranks -1");
    HVD_CHECK(self, !horovod_init(NULL, 2, NULL, NULL, 0), "NULL ranks");
    HVD_CHECK(self, !horovod_init(dup, 2, NULL, NULL, 0), "duplicate");
    HVD_CHECK(self, !horovod_init(far, 2, NULL, NULL, 0), "rank 3 of 3");
    HVD_CHECK(self, !horovod_init(NULL, 0, bad_set, sizes, 1), "set rank 5");
    HVD_CHECK(self, !horovod_init(NULL, 0, dup, neg_size, 1), "size -1");
    HVD_CHECK(self, !horovod_init(NULL, 0, NULL, NULL, -1), "-1 sets");
    /* Rank 1 lists {2, 0}, the others {1, 0}: disagreement. */
    HVD_CHECK(self, !horovod_init(mine, 2, NULL, NULL, 0), "disagreement");
    HVD_CHECK_EQ(self, horovod_is_initialized(), 0);
    HVD_CHECK(self, horovod_init(NULL, 0, NULL, NULL, 0), "good init");
    HVD_CHECK_EQ(self, horovod_rank(), self->rank);
    horovod_shutdown();
    return 0;
}

Test(hvd_init_args, bad_or_disagreeing_arguments_fail_on_every_rank,
     .timeout = 30)
{
    hvd_job_t job;

    hvd_job_init(&job, 3, HVD_LAUNCH_CG_RUN);
    job.env[0] = "CG_LOG_LEVEL=none"; /* the failures log by design */
    hvd_assert_all_passed(&job, hvd_job_run(&job, bad_args_fail_everywhere));
    hvd_job_fini(&job);
}
