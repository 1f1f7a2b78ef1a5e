/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Environment detection (transport/bootstrap_env.c) with fake
 * environments: each launcher's variables, the order between launchers,
 * rendezvous addresses and ports, and malformed values named in errors.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "cg_build.h"
#include "core/base/error.h"
#include "transport/bootstrap.h"

#define ENV_MAX 24

typedef struct fake_env {
    const char *kv[ENV_MAX][2];
} fake_env_t;

static const char *fake_getenv(void *arg, const char *name)
{
    const fake_env_t *e = arg;
    for (int i = 0; i < ENV_MAX && e->kv[i][0] != NULL; i++) {
        if (strcmp(e->kv[i][0], name) == 0)
            return e->kv[i][1];
    }
    return NULL;
}

static cg_status_t detect(const fake_env_t *e, cg_bootstrap_env_t *out)
{
    memset(out, 0xa5, sizeof(*out));
    return cg_bootstrap_detect(fake_getenv, (void *)e, CG_BOOTSTRAP_MPI_OFF,
                               out);
}

#define HOROVOD_VARS(rank)                                                    \
    {"HOROVOD_RANK", rank}, {"HOROVOD_SIZE", "4"},                            \
    {"HOROVOD_LOCAL_RANK", "1"}, {"HOROVOD_LOCAL_SIZE", "2"},                 \
    {"HOROVOD_CROSS_RANK", "1"}, {"HOROVOD_CROSS_SIZE", "2"},                 \
    {"HOROVOD_GLOO_RENDEZVOUS_ADDR", "10.1.2.3"},                             \
    {"HOROVOD_GLOO_RENDEZVOUS_PORT", "5000"}

#define TORCH_VARS(rank, size)                                                \
    {"RANK", rank}, {"WORLD_SIZE", size}, {"LOCAL_RANK", "0"},                \
    {"LOCAL_WORLD_SIZE", "1"}, {"MASTER_ADDR", "node0"},                      \
    {"MASTER_PORT", "29500"}

Test(bootstrap_env, no_launcher_is_a_single_rank)
{
    fake_env_t e = {{{NULL, NULL}}};
    cg_bootstrap_env_t env;

    cr_assert_eq(detect(&e, &env), CG_OK, "%s", cg_last_error());
    cr_assert_eq(env.source, CG_BOOTSTRAP_SRC_SINGLE, "got %d", env.source);
    cr_assert_eq(env.rank, 0, "got %d", env.rank);
    cr_assert_eq(env.size, 1, "got %d", env.size);
    cr_assert_eq(env.local_size, 1, "got %d", env.local_size);
    cr_assert_eq(env.cross_size, 1, "got %d", env.cross_size);
}

Test(bootstrap_env, horovod_vars_and_port_plus_one)
{
    fake_env_t e = {{HOROVOD_VARS("3")}};
    cg_bootstrap_env_t env;

    cr_assert_eq(detect(&e, &env), CG_OK, "%s", cg_last_error());
    cr_assert_eq(env.source, CG_BOOTSTRAP_SRC_HOROVOD, "got %d", env.source);
    cr_assert_eq(env.rank, 3, "got %d", env.rank);
    cr_assert_eq(env.size, 4, "got %d", env.size);
    cr_assert_eq(env.local_rank, 1, "got %d", env.local_rank);
    cr_assert_eq(env.cross_rank, 1, "got %d", env.cross_rank);
    cr_assert_eq(env.cross_size, 2, "got %d", env.cross_size);
    cr_assert_str_eq(env.host, "10.1.2.3");
    cr_assert_eq(env.port, 5001, "got %d", env.port);
    cr_assert_str_eq(env.addr_from, "HOROVOD_GLOO_RENDEZVOUS_ADDR, "
                     "HOROVOD_GLOO_RENDEZVOUS_PORT + 1");
    cr_assert(!env.have_secret);
}

Test(bootstrap_env, torchrun_vars_master_port_plus_one)
{
    fake_env_t e = {{TORCH_VARS("2", "8")}};
    cg_bootstrap_env_t env;

    cr_assert_eq(detect(&e, &env), CG_OK, "%s", cg_last_error());
    cr_assert_eq(env.source, CG_BOOTSTRAP_SRC_TORCHRUN, "got %d", env.source);
    cr_assert_eq(env.rank, 2, "got %d", env.rank);
    cr_assert_eq(env.size, 8, "got %d", env.size);
    cr_assert_str_eq(env.host, "node0");
    cr_assert_eq(env.port, 29501, "got %d", env.port);
    cr_assert_eq(env.cross_rank, -1, "cross is derived later, got %d",
                 env.cross_rank);
}

Test(bootstrap_env, rendezvous_variable_overrides_master_addr)
{
    fake_env_t e = {{TORCH_VARS("1", "2"),
                     {"CG_RUN_RENDEZVOUS", "[::1]:7000"}}};
    cg_bootstrap_env_t env;

    cr_assert_eq(detect(&e, &env), CG_OK, "%s", cg_last_error());
    cr_assert_str_eq(env.host, "::1");
    cr_assert_eq(env.port, 7000, "got %d", env.port);
    cr_assert_str_eq(env.addr_from, "CG_RUN_RENDEZVOUS");
}

Test(bootstrap_env, launcher_vars_with_secret)
{
    fake_env_t e = {{{"CG_RUN_RANK", "1"}, {"CG_RUN_SIZE", "2"},
                     {"CG_RUN_LOCAL_RANK", "1"}, {"CG_RUN_LOCAL_SIZE", "2"},
                     {"CG_RUN_CROSS_RANK", "0"}, {"CG_RUN_CROSS_SIZE", "1"},
                     {"CG_RUN_RENDEZVOUS", "127.0.0.1:4000"},
                     {"CG_RUN_SECRET", "0123abcd"}}};
    cg_bootstrap_env_t env, again;

    cr_assert_eq(detect(&e, &env), CG_OK, "%s", cg_last_error());
    cr_assert_eq(env.source, CG_BOOTSTRAP_SRC_LAUNCHER, "got %d", env.source);
    cr_assert_eq(env.rank, 1, "got %d", env.rank);
    cr_assert_eq(env.port, 4000, "got %d", env.port);
    cr_assert(env.have_secret);
    cr_assert_neq(env.secret_hash, 0);
    cr_assert_eq(detect(&e, &again), CG_OK);
    cr_assert_eq(again.secret_hash, env.secret_hash,
                 "same secret, same hash: 0x%llx vs 0x%llx",
                 (unsigned long long)again.secret_hash,
                 (unsigned long long)env.secret_hash);
}

Test(bootstrap_env, horovod_wins_over_torchrun)
{
    fake_env_t e = {{TORCH_VARS("0", "8"), HOROVOD_VARS("2")}};
    cg_bootstrap_env_t env;

    cr_assert_eq(detect(&e, &env), CG_OK, "%s", cg_last_error());
    cr_assert_eq(env.source, CG_BOOTSTRAP_SRC_HOROVOD, "got %s",
                 cg_bootstrap_src_name(env.source));
    cr_assert_eq(env.rank, 2, "got %d", env.rank);
}

Test(bootstrap_env, ompi_without_mpi_needs_rendezvous)
{
    fake_env_t e = {{{"OMPI_COMM_WORLD_RANK", "0"},
                     {"OMPI_COMM_WORLD_SIZE", "2"},
                     {"OMPI_COMM_WORLD_LOCAL_RANK", "0"},
                     {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"}}};
    cg_bootstrap_env_t env;

    cr_assert_eq(detect(&e, &env), CG_ERR_CONFIG);
    cr_assert(strstr(cg_last_error(), "CG_RUN_RENDEZVOUS") != NULL, "got %s",
              cg_last_error());
    e.kv[4][0] = "CG_RUN_RENDEZVOUS";
    e.kv[4][1] = "127.0.0.1:6000";
    cr_assert_eq(detect(&e, &env), CG_OK, "%s", cg_last_error());
    cr_assert_eq(env.source, CG_BOOTSTRAP_SRC_OMPI_ENV, "got %d", env.source);
    cr_assert_eq(env.port, 6000, "got %d", env.port);
}

Test(bootstrap_env, ompi_with_mpi_built_uses_mpi)
{
    fake_env_t e = {{{"OMPI_COMM_WORLD_RANK", "1"},
                     {"OMPI_COMM_WORLD_SIZE", "3"},
                     {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
                     {"OMPI_COMM_WORLD_LOCAL_SIZE", "3"}}};
    cg_bootstrap_env_t env;
    cg_status_t st = cg_bootstrap_detect(fake_getenv, &e,
                                         CG_BOOTSTRAP_MPI_AUTO, &env);

    if (CG_HAVE_MPI) {
        cr_assert_eq(st, CG_OK, "%s", cg_last_error());
        cr_assert_eq(env.source, CG_BOOTSTRAP_SRC_MPI, "got %d", env.source);
        cr_assert_eq(env.rank, 1, "got %d", env.rank);
    } else {
        cr_assert_eq(st, CG_ERR_CONFIG, "got %d", st);
    }
}
