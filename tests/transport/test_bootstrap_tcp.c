/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The TCP rendezvous with real forked ranks on 127.0.0.1, one launcher
 * style per test (Horovod, torchrun, collguard-run, mpirun without MPI),
 * and a single process without any launcher.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "core/base/error.h"
#include "tests/transport/bootstrap_test_util.h"

/* Every rank ran the exchange and agreed on one nonzero cookie. */
static void expect_all_ok(const bs_job_t *job, int ok)
{
    for (int r = 0; r < job->size; r++)
        cr_expect_eq(job->rep[r].status, CG_OK, "rank %d: %s: %s", r,
                     cg_status_name((cg_status_t)job->rep[r].status),
                     job->rep[r].msg);
    cr_assert_eq(ok, job->size, "%d of %d ranks exited 0", ok, job->size);
    for (int r = 0; r < job->size; r++) {
        cr_assert_eq(job->rep[r].cookie, job->rep[0].cookie,
                     "rank %d cookie 0x%llx, rank 0 0x%llx", r,
                     (unsigned long long)job->rep[r].cookie,
                     (unsigned long long)job->rep[0].cookie);
        cr_assert_eq(job->rep[r].size, job->size, "rank %d size %d", r,
                     job->rep[r].size);
    }
}

Test(bootstrap_tcp, horovod_three_ranks, .timeout = 30)
{
    bs_job_t job;

    bs_job_init(&job, 3, BS_STYLE_HOROVOD);
    expect_all_ok(&job, bs_job_run(&job, 20000));
    for (int r = 0; r < 3; r++) {
        cr_assert_eq(job.rep[r].source, CG_BOOTSTRAP_SRC_HOROVOD,
                     "rank %d source %d", r, job.rep[r].source);
        cr_assert_eq(job.rep[r].cross_size, 1, "rank %d cross size %d", r,
                     job.rep[r].cross_size);
    }
    bs_job_fini(&job);
}

Test(bootstrap_tcp, torchrun_four_ranks_derive_cross, .timeout = 30)
{
    bs_job_t job;

    bs_job_init(&job, 4, BS_STYLE_TORCHRUN);
    expect_all_ok(&job, bs_job_run(&job, 20000));
    /* local rank = rank % 2: two "nodes" of two, cross = rank / 2. */
    for (int r = 0; r < 4; r++) {
        cr_assert_eq(job.rep[r].source, CG_BOOTSTRAP_SRC_TORCHRUN,
                     "rank %d source %d", r, job.rep[r].source);
        cr_assert_eq(job.rep[r].cross_rank, r / 2, "rank %d cross rank %d",
                     r, job.rep[r].cross_rank);
        cr_assert_eq(job.rep[r].cross_size, 2, "rank %d cross size %d", r,
                     job.rep[r].cross_size);
    }
    bs_job_fini(&job);
}

Test(bootstrap_tcp, launcher_vars_cookie_from_secret, .timeout = 30)
{
    bs_job_t job, again;

    bs_job_init(&job, 2, BS_STYLE_LAUNCHER);
    expect_all_ok(&job, bs_job_run(&job, 20000));
    bs_job_init(&again, 2, BS_STYLE_LAUNCHER);
    expect_all_ok(&again, bs_job_run(&again, 20000));
    cr_assert_eq(job.rep[0].cookie, again.rep[0].cookie,
                 "same CG_RUN_SECRET, cookies 0x%llx and 0x%llx",
                 (unsigned long long)job.rep[0].cookie,
                 (unsigned long long)again.rep[0].cookie);
    bs_job_fini(&again);
    bs_job_fini(&job);
}

Test(bootstrap_tcp, ompi_env_without_mpi, .timeout = 30)
{
    bs_job_t job;

    bs_job_init(&job, 3, BS_STYLE_OMPI_ENV);
    expect_all_ok(&job, bs_job_run(&job, 20000));
    cr_assert_eq(job.rep[1].source, CG_BOOTSTRAP_SRC_OMPI_ENV, "source %d",
                 job.rep[1].source);
    cr_assert_eq(job.rep[2].cross_size, 1, "one host: cross size %d",
                 job.rep[2].cross_size);
    bs_job_fini(&job);
}

Test(bootstrap_tcp, rank_zero_starts_late, .timeout = 30)
{
    bs_job_t job;

    /* Ranks > 0 dial first and retry until rank 0 listens. */
    bs_job_init(&job, 3, BS_STYLE_TORCHRUN);
    job.late_rank = 0;
    job.late_ms = 700;
    expect_all_ok(&job, bs_job_run(&job, 20000));
    bs_job_fini(&job);
}

Test(bootstrap_tcp, single_process_without_launcher)
{
    bs_env_t env = {0};
    cg_bootstrap_params_t p = {.timeout_ns = tp_scaled_ns(2000),
                               .getenv_fn = bs_getenv, .getenv_arg = &env};
    tp_mem_t mem = {0};
    cg_bootstrap_t *bs;
    uint8_t blob[16] = {1, 2, 3}, all[16] = {0};

    p.mem = tp_mem_ops(&mem);
    cr_assert_eq(cg_bootstrap_create(&p, &bs), CG_OK, "%s", cg_last_error());
    cr_assert_eq(cg_bootstrap_size(bs), 1, "size %d", cg_bootstrap_size(bs));
    cr_assert_neq(cg_bootstrap_cookie(bs), 0);
    cr_assert_eq(cg_bootstrap_allgather(bs, blob, all, sizeof(blob)), CG_OK);
    cr_assert_eq(memcmp(blob, all, sizeof(blob)), 0);
    cr_assert_eq(cg_bootstrap_bcast(bs, blob, sizeof(blob), 0), CG_OK);
    cr_assert_eq(cg_bootstrap_barrier(bs), CG_OK);
    cr_assert_eq(cg_bootstrap_bcast(bs, blob, sizeof(blob), 1),
                 CG_ERR_INVALID_PARAM, "root 1 of 1: %s", cg_last_error());
    cg_bootstrap_destroy(bs);
    cr_assert_eq(tp_mem_live(&mem), 0, "leaked %zu bytes",
                 tp_mem_live(&mem));
}
