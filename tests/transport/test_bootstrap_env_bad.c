/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Malformed launcher environments: every error is CG_ERR_CONFIG and names
 * the variable (and value) the user has to fix.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "core/base/error.h"
#include "transport/bootstrap.h"

#define ENV_MAX 16

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

/* Detection must fail with CG_ERR_CONFIG and a message holding each of
 * the given words. */
static void expect_bad(const fake_env_t *e, const char *w1, const char *w2)
{
    cg_bootstrap_env_t env;
    cg_status_t st = cg_bootstrap_detect(fake_getenv, (void *)e,
                                         CG_BOOTSTRAP_MPI_OFF, &env);

    cr_assert_eq(st, CG_ERR_CONFIG, "got %s (%s)", cg_status_name(st),
                 cg_last_error());
    cr_assert(strstr(cg_last_error(), w1) != NULL, "'%s' not in: %s", w1,
              cg_last_error());
    cr_assert(w2 == NULL || strstr(cg_last_error(), w2) != NULL,
              "'%s' not in: %s", w2, cg_last_error());
}

#define TORCH_BASE(rank, size)                                                \
    {"RANK", rank}, {"WORLD_SIZE", size}, {"LOCAL_RANK", "0"},                \
    {"LOCAL_WORLD_SIZE", "1"}, {"MASTER_ADDR", "127.0.0.1"}

Test(bootstrap_env_bad, rank_not_a_number)
{
    fake_env_t e = {{TORCH_BASE("abc", "4"), {"MASTER_PORT", "29500"}}};
    expect_bad(&e, "RANK='abc'", "not an integer");
}

Test(bootstrap_env_bad, rank_not_below_size)
{
    fake_env_t e = {{TORCH_BASE("4", "4"), {"MASTER_PORT", "29500"}}};
    expect_bad(&e, "RANK=4", "WORLD_SIZE=4");
}

Test(bootstrap_env_bad, size_zero)
{
    fake_env_t e = {{TORCH_BASE("0", "0"), {"MASTER_PORT", "29500"}}};
    expect_bad(&e, "WORLD_SIZE='0'", NULL);
}

Test(bootstrap_env_bad, missing_partner_variable)
{
    fake_env_t e = {{{"HOROVOD_RANK", "1"}}};
    expect_bad(&e, "HOROVOD_SIZE is missing", NULL);
}

Test(bootstrap_env_bad, missing_local_size)
{
    fake_env_t e = {{{"CG_RUN_RANK", "0"}, {"CG_RUN_SIZE", "2"},
                     {"CG_RUN_LOCAL_RANK", "0"},
                     {"CG_RUN_RENDEZVOUS", "127.0.0.1:4000"}}};
    expect_bad(&e, "CG_RUN_LOCAL_SIZE", "missing");
}

Test(bootstrap_env_bad, half_a_cross_pair)
{
    fake_env_t e = {{{"HOROVOD_RANK", "0"}, {"HOROVOD_SIZE", "1"},
                     {"HOROVOD_LOCAL_RANK", "0"}, {"HOROVOD_LOCAL_SIZE", "1"},
                     {"HOROVOD_CROSS_RANK", "0"}}};
    expect_bad(&e, "HOROVOD_CROSS_SIZE", "missing");
}

Test(bootstrap_env_bad, missing_master_port)
{
    fake_env_t e = {{TORCH_BASE("1", "2")}};
    expect_bad(&e, "MASTER_PORT is missing", "CG_RUN_RENDEZVOUS");
}

Test(bootstrap_env_bad, master_port_leaves_no_room_for_ours)
{
    fake_env_t e = {{TORCH_BASE("1", "2"), {"MASTER_PORT", "65535"}}};
    expect_bad(&e, "MASTER_PORT='65535'", "1..65534");
}

Test(bootstrap_env_bad, rendezvous_without_port)
{
    fake_env_t e = {{TORCH_BASE("1", "2"), {"MASTER_PORT", "29500"},
                     {"CG_RUN_RENDEZVOUS", "localhost"}}};
    expect_bad(&e, "CG_RUN_RENDEZVOUS='localhost'", "host:port");
}

Test(bootstrap_env_bad, launcher_needs_rendezvous)
{
    fake_env_t e = {{{"CG_RUN_RANK", "0"}, {"CG_RUN_SIZE", "2"},
                     {"CG_RUN_LOCAL_RANK", "0"}, {"CG_RUN_LOCAL_SIZE", "2"}}};
    expect_bad(&e, "CG_RUN_RENDEZVOUS", "CG_RUN_SIZE=2");
}

Test(bootstrap_env_bad, local_rank_not_below_local_size)
{
    fake_env_t e = {{{"RANK", "1"}, {"WORLD_SIZE", "4"}, {"LOCAL_RANK", "2"},
                     {"LOCAL_WORLD_SIZE", "2"}, {"MASTER_ADDR", "h"},
                     {"MASTER_PORT", "29500"}}};
    expect_bad(&e, "LOCAL_RANK=2", "LOCAL_WORLD_SIZE=2");
}
