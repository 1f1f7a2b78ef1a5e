/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The shim's backend choice: CG_CPU_OPERATIONS / CG_GPU_OPERATIONS (and
 * their HOROVOD_* aliases) parsed in any case, Horovod's other values
 * refused with the accepted ones, the kinds' names, and across forked
 * ranks (collguard-run's variables): COLLGUARD for both kinds runs, MPI is
 * refused at core create with the reason. The MPI backend's results are
 * checked under mpirun (test_hvd_backend_mpi.c).
 */
#include <criterion/criterion.h>
#include <string.h>

#include "cg_build.h"
#include "core/base/error.h"
#include "core/config/config.h"
#include "core/backend/hvd_backend.h"
#include "tests/core/util/config_env.h"
#include "tests/core/util/test_hvd_util.h"

Test(hvd_backend_config, defaults_are_collguard_and_auto)
{
    const char *env[] = {NULL};
    cg_config_t cfg;

    cr_assert_eq(tc_config_load(&cfg, env), CG_OK, "%s", cg_last_error());
    cr_assert_eq(cfg.cpu_operations, CG_BACKEND_COLLGUARD, "got %d",
                 cfg.cpu_operations);
    cr_assert_eq(cfg.gpu_operations, CG_BACKEND_AUTO, "got %d",
                 cfg.gpu_operations);
    cr_assert(!cfg.set_by_user[CG_CFG_CPU_OPERATIONS]);
}

Test(hvd_backend_config, horovod_names_in_any_case)
{
    const char *env[] = {"HOROVOD_CPU_OPERATIONS=mpi",
                         "HOROVOD_GPU_OPERATIONS=Nccl", NULL};
    const char *env2[] = {"CG_CPU_OPERATIONS=CollGuard",
                          "HOROVOD_CPU_OPERATIONS=MPI",
                          "CG_GPU_OPERATIONS=MPI", NULL};
    cg_config_t cfg;

    cr_assert_eq(tc_config_load(&cfg, env), CG_OK, "%s", cg_last_error());
    cr_assert_eq(cfg.cpu_operations, CG_BACKEND_MPI, "got %d",
                 cfg.cpu_operations);
    cr_assert_eq(cfg.gpu_operations, CG_BACKEND_NCCL, "got %d",
                 cfg.gpu_operations);
    cr_assert(cfg.set_by_user[CG_CFG_GPU_OPERATIONS]);
    /* The CG_ name wins over the Horovod alias. */
    cr_assert_eq(tc_config_load(&cfg, env2), CG_OK, "%s", cg_last_error());
    cr_assert_eq(cfg.cpu_operations, CG_BACKEND_COLLGUARD, "got %d",
                 cfg.cpu_operations);
    cr_assert_eq(cfg.gpu_operations, CG_BACKEND_MPI, "got %d",
                 cfg.gpu_operations);
}

Test(hvd_backend_config, gloo_is_refused_with_the_accepted_values)
{
    const char *env[] = {"HOROVOD_CPU_OPERATIONS=GLOO", NULL};
    const char *env2[] = {"HOROVOD_GPU_OPERATIONS=ccl", NULL};
    cg_config_t cfg;

    cr_assert_eq(tc_config_load(&cfg, env), CG_ERR_CONFIG);
    cr_assert_str_eq(cg_last_error(), "invalid value 'GLOO' for "
                     "HOROVOD_CPU_OPERATIONS: expected one of COLLGUARD, "
                     "MPI");
    cr_assert_eq(tc_config_load(&cfg, env2), CG_ERR_CONFIG);
    cr_assert_str_eq(cg_last_error(), "invalid value 'ccl' for "
                     "HOROVOD_GPU_OPERATIONS: expected one of COLLGUARD, "
                     "MPI, NCCL, AUTO");
}

Test(hvd_backend_config, kind_names_and_auto)
{
    cg_backend_kind_t a = cg_backend_resolve(CG_BACKEND_AUTO);

    cr_assert_str_eq(cg_backend_kind_name(CG_BACKEND_COLLGUARD), "COLLGUARD");
    cr_assert_str_eq(cg_backend_kind_name(CG_BACKEND_MPI), "MPI");
    cr_assert_str_eq(cg_backend_kind_name(CG_BACKEND_NCCL), "NCCL");
    cr_assert(a == CG_BACKEND_NCCL || a == CG_BACKEND_COLLGUARD, "got %s",
              cg_backend_kind_name(a));
    if (!CG_HAVE_NCCL)
        cr_assert_eq(a, CG_BACKEND_COLLGUARD, "got %s",
                     cg_backend_kind_name(a));
    cr_assert_eq(cg_backend_resolve(CG_BACKEND_MPI), CG_BACKEND_MPI);
}

/* 3 x 1000 i32 summed, fused with a small one: exact everywhere. */
static int body_sum(hj_rank_t *self)
{
    int32_t x[1000], y[4];
    cg_hvd_req_h req[2];

    for (int i = 0; i < 1000; i++)
        x[i] = self->rank * 1000 + i;
    for (int i = 0; i < 4; i++)
        y[i] = self->rank - i;
    cg_hvd_tensor_t t = {.name = "x", .dtype = CG_DTYPE_I32, .ndim = 1,
                         .shape = {1000}, .input = x, .output = x};
    cg_hvd_tensor_t u = {.name = "y", .dtype = CG_DTYPE_I32, .ndim = 1,
                         .shape = {4}, .input = y, .output = y};
    HJ_CHECK(self, cg_hvd_enqueue_allreduce(self->core, &t, CG_OP_SUM, 1, 1,
                                            &req[0]) == CG_OK &&
             cg_hvd_enqueue_allreduce(self->core, &u, CG_OP_SUM, 1, 1,
                                      &req[1]) == CG_OK,
             "enqueue: %s", cg_last_error());
    for (int k = 0; k < 2; k++) {
        HJ_CHECK(self, cg_hvd_wait(req[k]) == CG_OK, "wait: %s",
                 cg_hvd_error(req[k]));
        cg_hvd_release(req[k]);
    }
    for (int i = 0; i < 1000; i++)
        HJ_CHECK(self, x[i] == 3000 + 3 * i, "x[%d] = %d, want %d", i, x[i],
                 3000 + 3 * i);
    for (int i = 0; i < 4; i++)
        HJ_CHECK(self, y[i] == 3 - 3 * i, "y[%d] = %d, want %d", i, y[i],
                 3 - 3 * i);
    return 0;
}

Test(hvd_backend, collguard_for_both_kinds_runs, .timeout = 60)
{
    const char *env[] = {"HOROVOD_CPU_OPERATIONS=collguard",
                         "HOROVOD_GPU_OPERATIONS=COLLGUARD", NULL};
    hj_rank_t *rep = hj_run(3, env, body_sum, NULL);

    hj_assert_passed(rep, 3);
    cr_assert_eq(rep[0].stats.allreduce_tensors, 2, "got %llu",
                 (unsigned long long)rep[0].stats.allreduce_tensors);
    hj_free(rep, 3);
}

static int body_never(hj_rank_t *self)
{
    HJ_CHECK(self, 0, "core create succeeded");
    return 1;
}

/* Every rank fails at core create with msg naming the reason. */
static void expect_refused(const char *const *env, const char *var)
{
    const char *why = CG_HAVE_MPI ? "needs a launch by mpirun: this job "
                                    "was started by collguard-run"
                                  : "built without MPI";
    hj_rank_t *rep = hj_run(2, env, body_never, NULL);

    for (int r = 0; r < 2; r++) {
        cr_assert_neq(rep[r].failed_line, 0, "rank %d passed", r);
        cr_assert(strstr(rep[r].msg, why) != NULL &&
                  strstr(rep[r].msg, var) != NULL,
                  "rank %d: '%s' lacks '%s' or '%s'", r, rep[r].msg, why,
                  var);
    }
    hj_free(rep, 2);
}

Test(hvd_backend, cpu_mpi_without_mpirun_is_refused, .timeout = 60)
{
    const char *env[] = {"HOROVOD_CPU_OPERATIONS=MPI", NULL};
    expect_refused(env, "HOROVOD_CPU_OPERATIONS=MPI");
}

Test(hvd_backend, gpu_mpi_without_mpirun_is_refused, .timeout = 60)
{
    const char *env[] = {"HOROVOD_GPU_OPERATIONS=mpi", NULL};
    expect_refused(env, "HOROVOD_GPU_OPERATIONS=MPI");
}
