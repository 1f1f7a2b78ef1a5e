/* SPDX-License-Identifier: Apache-2.0 */
/*
 * NCCL's buffer variables from the governor (core/backend/nccl_env.c):
 * NCCL_BUFFSIZE is the governor's choice unless the user set it (then the
 * user's value is kept and the log says what collguard would have
 * chosen); under pressure a channel cap and, at critical, NVLS off, each
 * also kept when the user set it. A fake environment and a scripted probe;
 * no NCCL needed.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "core/backend/nccl_env.h"
#include "tests/core/util/gov_fake.h"

typedef struct {
    const char *name[8];
    char value[8][64];
    int n, sets;
} fake_env_t;

static const char *env_get(void *arg, const char *name)
{
    fake_env_t *e = arg;
    for (int i = 0; i < e->n; i++)
        if (strcmp(e->name[i], name) == 0)
            return e->value[i];
    return NULL;
}

static int env_set(void *arg, const char *name, const char *value)
{
    fake_env_t *e = arg;
    e->name[e->n] = name;
    snprintf(e->value[e->n++], sizeof(e->value[0]), "%s", value);
    e->sets++;
    return 0;
}

static char logged[4096];

static void sink(void *arg, cg_log_level_t level, const char *line)
{
    (void)arg;
    (void)level;
    strncat(logged, line, sizeof(logged) - strlen(logged) - 2);
    strcat(logged, "\n");
}

/* free_b: what the probe reads at the governor's creation; at_export:
 * what it reads when the variables are decided (0: the same). */
static int run_at(uint64_t free_b, uint64_t at_export, fake_env_t *e,
                  cg_nccl_env_item_t *items, uint64_t *chosen)
{
    cg_config_t cfg;
    cg_log_t log;
    cg_governor_t *gov;
    cg_governor_snapshot_t s;
    cg_nccl_env_ops_t ops = {env_get, env_set, e};
    int n;

    fake_config(&cfg);
    fake.free = free_b;
    fake.total = 16 * GiB;
    gov = fake_governor(&cfg);
    cg_governor_snapshot(gov, &s);
    *chosen = s.nccl_buffsize;
    if (at_export != 0)
        fake.free = at_export;
    cg_log_init(&log, CG_LOG_INFO, 0);
    cg_log_set_sink(&log, sink, NULL);
    logged[0] = '\0';
    n = cg_nccl_env_export(gov, &cfg, &log, &ops, items);
    if (at_export != 0) {
        cg_governor_snapshot(gov, &s);
        *chosen = s.nccl_buffsize;
    }
    fake_destroy(gov);
    return n;
}

static int run(uint64_t free_b, fake_env_t *e, cg_nccl_env_item_t *items,
               uint64_t *chosen)
{
    return run_at(free_b, 0, e, items, chosen);
}

Test(nccl_env, the_governors_buffsize_is_exported_when_the_user_set_none)
{
    fake_env_t e = {0};
    cg_nccl_env_item_t it[CG_NCCL_ENV_MAX];
    uint64_t chosen;
    char want[32];

    int n = run(12 * GiB, &e, it, &chosen);
    snprintf(want, sizeof(want), "%llu", (unsigned long long)chosen);
    cr_assert_eq(n, 1, "no pressure: NCCL_BUFFSIZE only, got %d", n);
    cr_assert_str_eq(it[0].name, "NCCL_BUFFSIZE");
    cr_assert_not(it[0].kept);
    cr_assert_str_eq(it[0].value, want);
    cr_assert_eq(e.sets, 1);
    cr_assert_str_eq(env_get(&e, "NCCL_BUFFSIZE"), want);
    cr_assert(strstr(logged, "NCCL_BUFFSIZE") && strstr(logged, "exported"),
              "%s", logged);
}

Test(nccl_env, a_users_buffsize_is_kept_and_logged)
{
    fake_env_t e = {.name = {"NCCL_BUFFSIZE"}, .value = {"1048576"}, .n = 1};
    cg_nccl_env_item_t it[CG_NCCL_ENV_MAX];
    uint64_t chosen;
    char want[160];

    int n = run(12 * GiB, &e, it, &chosen);
    cr_assert_eq(n, 1);
    cr_assert(it[0].kept);
    cr_assert_str_eq(it[0].user, "1048576");
    cr_assert_eq(e.sets, 0, "the user's value was overwritten");
    cr_assert_str_eq(env_get(&e, "NCCL_BUFFSIZE"), "1048576");
    snprintf(want, sizeof(want), "NCCL_BUFFSIZE 1048576 from the environment "
             "kept (collguard would choose %llu",
             (unsigned long long)chosen);
    cr_assert(strstr(logged, want) != NULL, "want '%s' in: %s", want, logged);
}

Test(nccl_env, critical_pressure_caps_channels_and_turns_nvls_off)
{
    fake_env_t e = {0};
    cg_nccl_env_item_t it[CG_NCCL_ENV_MAX];
    uint64_t chosen;

    /* 400 MiB free: below CG_PRESSURE_CRITICAL's 512 MiB. */
    int n = run(400 * MiB, &e, it, &chosen);
    cr_assert_eq(n, 3, "got %d decisions", n);
    cr_assert_str_eq(it[1].name, "NCCL_MAX_NCHANNELS");
    cr_assert_str_eq(env_get(&e, "NCCL_MAX_NCHANNELS"), "2");
    cr_assert_str_eq(it[2].name, "NCCL_NVLS_ENABLE");
    cr_assert_str_eq(env_get(&e, "NCCL_NVLS_ENABLE"), "0");
    cr_assert_lt(chosen, 4 * MiB, "a squeezed budget, a smaller buffer");
}

Test(nccl_env, warn_pressure_caps_channels_at_four)
{
    fake_env_t e = {0};
    cg_nccl_env_item_t it[CG_NCCL_ENV_MAX];
    uint64_t chosen;

    /* 1.1 GiB free: between CRITICAL's 512 MiB and WARN's 2 GiB. */
    int n = run(GiB + 100 * MiB, &e, it, &chosen);
    cr_assert_eq(n, 2, "got %d decisions", n);
    cr_assert_str_eq(env_get(&e, "NCCL_MAX_NCHANNELS"), "4");
    cr_assert_null(env_get(&e, "NCCL_NVLS_ENABLE"));
}

Test(nccl_env, a_users_cta_cap_means_no_channel_cap)
{
    fake_env_t e = {.name = {"NCCL_MAX_CTAS", "NCCL_NVLS_ENABLE"},
                    .value = {"8", "1"}, .n = 2};
    cg_nccl_env_item_t it[CG_NCCL_ENV_MAX];
    uint64_t chosen;

    int n = run(400 * MiB, &e, it, &chosen); /* CRITICAL */
    cr_assert_eq(n, 2, "NCCL_BUFFSIZE and NVLS only, got %d", n);
    cr_assert_str_eq(it[1].name, "NCCL_NVLS_ENABLE");
    cr_assert(it[1].kept);
    cr_assert_str_eq(env_get(&e, "NCCL_NVLS_ENABLE"), "1");
    cr_assert_null(env_get(&e, "NCCL_MAX_NCHANNELS"));
}

Test(nccl_env, decided_from_a_fresh_sample_not_the_last_tick)
{
    fake_env_t e = {0};
    cg_nccl_env_item_t it[CG_NCCL_ENV_MAX];
    uint64_t chosen;
    char want[32];

    /* 12 GiB free when the governor last sampled, 400 MiB (CRITICAL) when
     * the communicator is made, before any tick: the squeeze decides. */
    int n = run_at(12 * GiB, 400 * MiB, &e, it, &chosen);
    cr_assert_eq(n, 3, "a stale sample decided: %d decisions", n);
    cr_assert_str_eq(env_get(&e, "NCCL_MAX_NCHANNELS"), "2");
    snprintf(want, sizeof(want), "%llu", (unsigned long long)chosen);
    cr_assert_str_eq(env_get(&e, "NCCL_BUFFSIZE"), want);
    cr_assert_lt(chosen, 4 * MiB);
}
