/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Horovod's C ABI in libcollguard_hvd.so: answers before init, reduce op
 * codes, build flags, and horovod_init's world with forked ranks (one
 * host, two "nodes", no launcher, init/shutdown/init, timeline codes).
 */
#include <criterion/criterion.h>

#include "cg_build.h"
#include "tests/plugin/hvd_test_util.h"

Test(hvd_basics, queries_before_init_return_minus_one)
{
    int ids[2] = {-7, -7};

    cr_assert_eq(horovod_is_initialized(), 0, "got %d",
                 horovod_is_initialized());
    cr_assert_eq(horovod_rank(), -1, "rank %d", horovod_rank());
    cr_assert_eq(horovod_local_rank(), -1, "got %d", horovod_local_rank());
    cr_assert_eq(horovod_cross_rank(), -1, "got %d", horovod_cross_rank());
    cr_assert_eq(horovod_size(), -1, "got %d", horovod_size());
    cr_assert_eq(horovod_local_size(), -1, "got %d", horovod_local_size());
    cr_assert_eq(horovod_cross_size(), -1, "got %d", horovod_cross_size());
    cr_assert_eq(horovod_mpi_threads_supported(), -1, "got %d",
                 horovod_mpi_threads_supported());
    cr_assert_eq(horovod_start_timeline("t.json", false), -1, "start");
    cr_assert_eq(horovod_stop_timeline(), -1, "got %d",
                 horovod_stop_timeline());
    /* Process sets: set 0 exists before init, as in Horovod. */
    cr_assert_eq(horovod_number_of_process_sets(), 1, "got %d",
                 horovod_number_of_process_sets());
    horovod_process_set_ids(ids);
    cr_assert_eq(ids[0], 0, "ids[0] %d", ids[0]);
    cr_assert_eq(horovod_process_set_included(0), 1, "included(0)");
    cr_assert_eq(horovod_process_set_rank(0), -1, "rank(0)");
    cr_assert_eq(horovod_process_set_size(1), -1, "size(1)");
    cr_assert_eq(horovod_process_set_ranks(0, ids), -1, "ranks(0)");
    cr_assert_eq(horovod_add_process_set(ids, 1), -1, "add");
    cr_assert_eq(horovod_remove_process_set(1), -1, "remove");
}

Test(hvd_basics, reduce_op_codes_match_horovod)
{
    cr_assert_eq(horovod_reduce_op_average(), 0, "got %d",
                 horovod_reduce_op_average());
    cr_assert_eq(horovod_reduce_op_sum(), 1, "got %d",
                 horovod_reduce_op_sum());
    cr_assert_eq(horovod_reduce_op_adasum(), 2, "got %d",
                 horovod_reduce_op_adasum());
    cr_assert_eq(horovod_reduce_op_min(), 3, "got %d",
                 horovod_reduce_op_min());
    cr_assert_eq(horovod_reduce_op_max(), 4, "got %d",
                 horovod_reduce_op_max());
    cr_assert_eq(horovod_reduce_op_product(), 5, "got %d",
                 horovod_reduce_op_product());
}

Test(hvd_basics, built_flags_follow_the_build)
{
    int nccl = horovod_nccl_built();

    cr_assert_eq(horovod_mpi_built(), CG_HAVE_MPI != 0, "mpi_built");
    cr_assert_eq(horovod_cuda_built(), CG_HAVE_CUDA != 0, "cuda_built");
    /* NCCL_VERSION_CODE: major * 10000 + minor * 100 + patch from 2.9. */
    if (CG_HAVE_NCCL)
        cr_assert(nccl >= 20900 && nccl < 40000, "nccl_built %d", nccl);
    else
        cr_assert_eq(nccl, 0, "nccl_built %d", nccl);
    cr_assert_eq(horovod_gloo_built(), false, "gloo_built");
    cr_assert_eq(horovod_gloo_enabled(), false, "gloo_enabled");
    cr_assert_eq(horovod_ddl_built(), false, "ddl_built");
    cr_assert_eq(horovod_ccl_built(), false, "ccl_built");
    cr_assert_eq(horovod_rocm_built(), false, "rocm_built");
    cr_assert_eq(horovod_mpi_enabled(), false, "mpi_enabled before init");
}

static int layout_one_host(hvd_rank_t *self)
{
    HVD_CHECK(self, horovod_init(NULL, 0, NULL, NULL, 0), "init failed");
    HVD_CHECK_EQ(self, horovod_is_initialized(), 1);
    HVD_CHECK_EQ(self, horovod_rank(), self->rank);
    HVD_CHECK_EQ(self, horovod_size(), self->size);
    HVD_CHECK_EQ(self, horovod_local_rank(), self->rank);
    HVD_CHECK_EQ(self, horovod_local_size(), self->size);
    HVD_CHECK_EQ(self, horovod_cross_rank(), 0);
    HVD_CHECK_EQ(self, horovod_cross_size(), 1);
    HVD_CHECK_EQ(self, horovod_is_homogeneous(), 1);
    HVD_CHECK_EQ(self, horovod_mpi_enabled(), 0);
    HVD_CHECK_EQ(self, horovod_mpi_threads_supported(), -1);
    HVD_CHECK_EQ(self, horovod_process_set_rank(0), self->rank);
    HVD_CHECK_EQ(self, horovod_process_set_size(0), self->size);
    /* No timeline configured: start -2, stop 1, as Horovod. */
    HVD_CHECK_EQ(self, horovod_start_timeline("/tmp/x.json", true), -2);
    HVD_CHECK_EQ(self, horovod_stop_timeline(), 1);
    horovod_shutdown();
    HVD_CHECK_EQ(self, horovod_rank(), -1);
    return 0;
}

Test(hvd_basics, init_lays_out_three_ranks_on_one_host, .timeout = 30)
{
    hvd_job_t job;

    hvd_job_init(&job, 3, HVD_LAUNCH_CG_RUN);
    hvd_assert_all_passed(&job, hvd_job_run(&job, layout_one_host));
    hvd_job_fini(&job);
}

static int layout_two_nodes(hvd_rank_t *self)
{
    HVD_CHECK(self, horovod_init(NULL, 0, NULL, NULL, 0), "init failed");
    HVD_CHECK_EQ(self, horovod_rank(), self->rank);
    HVD_CHECK_EQ(self, horovod_local_rank(), self->rank % 2);
    HVD_CHECK_EQ(self, horovod_local_size(), 2);
    HVD_CHECK_EQ(self, horovod_cross_rank(), self->rank / 2);
    HVD_CHECK_EQ(self, horovod_cross_size(), 2);
    HVD_CHECK_EQ(self, horovod_is_homogeneous(), 1);
    horovod_shutdown();
    return 0;
}

Test(hvd_basics, init_lays_out_two_nodes_of_two, .timeout = 30)
{
    hvd_job_t job;

    hvd_job_init(&job, 4, HVD_LAUNCH_TORCHRUN);
    hvd_assert_all_passed(&job, hvd_job_run(&job, layout_two_nodes));
    hvd_job_fini(&job);
}

static int init_shutdown_init(hvd_rank_t *self)
{
    for (int round = 0; round < 3; round++) {
        HVD_CHECK(self, horovod_init(NULL, 0, NULL, NULL, 0),
                  "init %d failed", round);
        /* A second init while initialized is a no-op returning true. */
        HVD_CHECK(self, horovod_init(NULL, 0, NULL, NULL, 0),
                  "repeated init %d failed", round);
        HVD_CHECK_EQ(self, horovod_rank(), self->rank);
        HVD_CHECK_EQ(self, horovod_size(), self->size);
        horovod_shutdown();
        HVD_CHECK_EQ(self, horovod_is_initialized(), 0);
        HVD_CHECK_EQ(self, horovod_size(), -1);
        horovod_shutdown(); /* twice is harmless */
    }
    return 0;
}

Test(hvd_basics, init_shutdown_init_three_times, .timeout = 40)
{
    hvd_job_t job;

    hvd_job_init(&job, 3, HVD_LAUNCH_CG_RUN);
    hvd_assert_all_passed(&job, hvd_job_run(&job, init_shutdown_init));
    hvd_job_fini(&job);
}

static int single_process(hvd_rank_t *self)
{
    const int me[] = {0};

    HVD_CHECK(self, horovod_init(NULL, 0, NULL, NULL, 0), "init failed");
    HVD_CHECK_EQ(self, horovod_rank(), 0);
    HVD_CHECK_EQ(self, horovod_size(), 1);
    HVD_CHECK_EQ(self, horovod_local_size(), 1);
    HVD_CHECK_EQ(self, horovod_cross_size(), 1);
    HVD_CHECK_EQ(self, horovod_add_process_set(me, 1), -6); /* the world */
    horovod_shutdown();
    return 0;
}

Test(hvd_basics, without_launcher_is_rank_0_of_1, .timeout = 30)
{
    hvd_job_t job;

    hvd_job_init(&job, 1, HVD_LAUNCH_NONE);
    job.env[0] = "HOROVOD_DYNAMIC_PROCESS_SETS=1";
    hvd_assert_all_passed(&job, hvd_job_run(&job, single_process));
    hvd_job_fini(&job);
}
