/* SPDX-License-Identifier: Apache-2.0 */
/* Units for core/governor/governor.c: budget and sizing at many free/total points,
 * degradation and recovery step by step, events, the probe timer, early
 * warning wired into sizing, and parameter checks. A scripted probe and a
 * fake clock drive everything (tests/core/util/gov_fake.h). */
#include "tests/core/util/gov_fake.h"

TestSuite(governor, .init = gov_fake_init, .fini = gov_fake_fini,
          .timeout = 10);

typedef struct sizing_case {
    uint64_t free, total;
    double fraction;
    uint64_t budget, fusion, chunk, nccl;
} sizing_case_t;

/* Sizes straight from the budget: pressure levels are switched off here
 * (tests/core/governor/test_governor_degrade.c covers degradation). */
static void check_sizes(const cg_config_t *cfg_in, const sizing_case_t *c)
{
    cg_config_t cfg = *cfg_in;
    cg_governor_snapshot_t s;
    cg_governor_t *gov;

    cfg.pressure_warn = cfg.pressure_critical = cfg_bytes(0);
    fake.free = c->free;
    fake.total = c->total;
    gov = fake_governor(&cfg);
    cg_governor_snapshot(gov, &s);
    cr_expect_eq(s.budget_bytes, c->budget, "free %llu: budget %llu",
                 (unsigned long long)c->free,
                 (unsigned long long)s.budget_bytes);
    cr_expect_eq(s.fusion_bytes, c->fusion, "free %llu: fusion %llu",
                 (unsigned long long)c->free,
                 (unsigned long long)s.fusion_bytes);
    cr_expect_eq(s.chunk_bytes, c->chunk, "free %llu: chunk %llu",
                 (unsigned long long)c->free,
                 (unsigned long long)s.chunk_bytes);
    cr_expect_eq(s.nccl_buffsize, c->nccl, "free %llu: nccl %llu",
                 (unsigned long long)c->free,
                 (unsigned long long)s.nccl_buffsize);
    cr_expect_eq(cg_governor_budget(gov), s.budget_bytes);
    cr_expect_eq(cg_governor_chunk_size(gov), s.chunk_bytes);
    fake_destroy(gov);
}

Test(governor, sizes_follow_the_budget_between_floors_and_caps)
{
    /* reserve 1 GiB, fraction 25%, caps 128M/4M/4M, floors 1M/64K/256K */
    static const sizing_case_t cases[] = {
        {9 * GiB, 16 * GiB, 0.25, 2 * GiB, 128 * MiB, 4 * MiB, 4 * MiB},
        {GiB + 800 * MiB, 16 * GiB, 0.25, 200 * MiB, 64 * MiB, 4 * MiB,
         512 * KiB},
        {GiB + 100 * MiB, 16 * GiB, 0.25, 25 * MiB, 8 * MiB, 1 * MiB,
         256 * KiB},
        {GiB + 64 * MiB, 16 * GiB, 0.25, 16 * MiB, 8 * MiB, 1 * MiB,
         256 * KiB},
        {GiB + 4 * MiB, 16 * GiB, 0.25, 1 * MiB, 1 * MiB, 64 * KiB,
         256 * KiB},
        {GiB + 64 * MiB, 16 * GiB, 1.0, 64 * MiB, 32 * MiB, 4 * MiB,
         256 * KiB},
        {9 * GiB, 16 * GiB, 0.0, 0, 1 * MiB, 64 * KiB, 256 * KiB},
    };
    cg_config_t cfg;

    fake_config(&cfg);
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        cfg.mem_fraction = cases[i].fraction;
        check_sizes(&cfg, &cases[i]);
    }
}

Test(governor, free_below_reserve_gives_zero_budget_and_floors)
{
    static const sizing_case_t c = {512 * MiB, 16 * GiB, 0.25, 0, 1 * MiB,
                                    64 * KiB, 256 * KiB};
    cg_config_t cfg;

    fake_config(&cfg);
    check_sizes(&cfg, &c);
    /* exactly the reserve is still nothing */
    fake.now += MS;
    check_sizes(&cfg, &(sizing_case_t){1 * GiB, 16 * GiB, 0.25, 0, 1 * MiB,
                                       64 * KiB, 256 * KiB});
}

Test(governor, tiny_total_of_64MiB_with_a_share_reserve)
{
    cg_config_t cfg;

    cg_config_defaults(&cfg);
    cfg.mem_reserve = cfg_share(0.05); /* 5% of 64 MiB = 3355443 bytes */
    check_sizes(&cfg, &(sizing_case_t){32 * MiB, 64 * MiB, 0.25, 7549747,
                                       2 * MiB, 256 * KiB, 256 * KiB});
    check_sizes(&cfg, &(sizing_case_t){60 * MiB, 64 * MiB, 0.25, 14889779,
                                       4 * MiB, 512 * KiB, 256 * KiB});
}

Test(governor, huge_totals_are_capped_at_the_requests)
{
    cg_config_t cfg;

    cg_config_defaults(&cfg); /* no reserve: budget = free / 4 */
    check_sizes(&cfg, &(sizing_case_t){120 * GiB, 141 * GiB, 0.25, 30 * GiB,
                                       128 * MiB, 4 * MiB, 4 * MiB});
    cfg.fusion_threshold = 1 * GiB;
    cfg.chunk_size = 64 * MiB;
    cfg.nccl_buffsize = 16 * MiB;
    check_sizes(&cfg, &(sizing_case_t){120 * GiB, 141 * GiB, 0.25, 30 * GiB,
                                       1 * GiB, 64 * MiB, 16 * MiB});
    check_sizes(&cfg, &(sizing_case_t){2 * TiB - 100 * GiB, 2 * TiB, 0.25,
                                       487 * GiB, 1 * GiB, 64 * MiB,
                                       16 * MiB});
    /* a share reserve of a huge total: 5% of 141 GiB = 7.05 GiB */
    cfg.mem_reserve = cfg_share(0.05);
    check_sizes(&cfg, &(sizing_case_t){120 * GiB, 141 * GiB, 0.25,
                                       30319784755ull, 1 * GiB, 64 * MiB,
                                       16 * MiB});
}

Test(governor, fusion_threshold_zero_disables_fusion)
{
    cg_config_t cfg;
    cg_governor_t *gov;

    fake_config(&cfg);
    cfg.fusion_threshold = 0;
    gov = fake_governor(&cfg);
    cr_assert_eq(cg_governor_fusion_size(gov), 0, "got %llu",
                 (unsigned long long)cg_governor_fusion_size(gov));
    fake_step(gov, 16 * GiB / 100, 100 * MS); /* CRITICAL */
    fake_step(gov, 8 * GiB, 100 * MS);
    cr_assert_eq(cg_governor_fusion_size(gov), 0, "got %llu",
                 (unsigned long long)cg_governor_fusion_size(gov));
    fake_destroy(gov);
}

Test(governor, a_request_below_the_floor_wins)
{
    cg_config_t cfg;
    cg_governor_t *gov;

    fake_config(&cfg);
    cfg.fusion_threshold = 256 * KiB; /* floor CG_FUSION_MIN is 1 MiB */
    cfg.chunk_size = 32 * KiB;        /* floor CG_CHUNK_MIN is 64 KiB */
    cfg.chunk_min = 64 * KiB;
    fake.free = 512 * MiB;            /* budget 0 */
    gov = fake_governor(&cfg);
    cr_assert_eq(cg_governor_fusion_size(gov), 256 * KiB, "got %llu",
                 (unsigned long long)cg_governor_fusion_size(gov));
    cr_assert_eq(cg_governor_chunk_size(gov), 32 * KiB, "got %llu",
                 (unsigned long long)cg_governor_chunk_size(gov));
    fake_step(gov, 16 * GiB / 100, 100 * MS); /* CRITICAL: cannot go lower */
    cr_assert_eq(cg_governor_chunk_size(gov), 32 * KiB, "got %llu",
                 (unsigned long long)cg_governor_chunk_size(gov));
    fake_destroy(gov);
}

Test(governor, tick_samples_only_once_per_probe_interval)
{
    cg_config_t cfg;
    cg_governor_t *gov;

    fake_config(&cfg); /* CG_PROBE_INTERVAL 100ms */
    gov = fake_governor(&cfg);
    cr_assert_eq(fake.reads, 1, "create reads once, got %d", fake.reads);
    fake.now += 99 * MS;
    cr_assert_eq(cg_governor_tick(gov), CG_OK);
    cr_assert_eq(fake.reads, 1, "too early, got %d reads", fake.reads);
    fake.now += 1 * MS;
    cr_assert_eq(cg_governor_tick(gov), CG_OK);
    cr_assert_eq(fake.reads, 2, "due, got %d reads", fake.reads);
    for (int i = 0; i < 10; i++) {
        fake.now += 10 * MS;
        cr_assert_eq(cg_governor_tick(gov), CG_OK);
    }
    cr_assert_eq(fake.reads, 3, "one more in 100ms, got %d", fake.reads);
    fake_destroy(gov);
}

Test(governor, failing_probe_fails_create_without_leaking)
{
    cg_governor_params_t p;
    cg_governor_t *gov = NULL;
    cg_config_t cfg;
    cg_status_t st;

    fake_config(&cfg);
    fake_params(&p, &cfg);
    fake.probe_status = CG_ERR_IO;
    st = cg_governor_create(&p, &gov);
    cr_assert_eq(st, CG_ERR_IO, "got %s", cg_status_name(st));
    cr_assert_null(gov);
    cr_assert_eq(fake.live, 0, "leaked %llu", (unsigned long long)fake.live);
}

Test(governor, failing_probe_keeps_the_last_decisions)
{
    cg_governor_snapshot_t before, after;
    cg_config_t cfg;
    cg_governor_t *gov;
    cg_status_t st;

    fake_config(&cfg);
    gov = fake_governor(&cfg);
    cg_governor_snapshot(gov, &before);
    fake.probe_status = CG_ERR_NO_DEVICE;
    fake.free = 1;
    fake.now += 100 * MS;
    st = cg_governor_sample(gov);
    cr_assert_eq(st, CG_ERR_NO_DEVICE, "got %s", cg_status_name(st));
    cg_governor_snapshot(gov, &after);
    cr_assert_eq(after.free_bytes, before.free_bytes, "free %llu",
                 (unsigned long long)after.free_bytes);
    cr_assert_eq(after.chunk_bytes, before.chunk_bytes);
    cr_assert_eq(after.pressure, CG_PRESSURE_OK);
    fake_destroy(gov);
}

Test(governor, bad_parameters_are_refused_with_the_variable_named)
{
    cg_governor_params_t p;
    cg_governor_t *gov = NULL;
    cg_config_t cfg;
    cg_status_t st;

    fake_config(&cfg);
    fake_params(&p, &cfg);
    cfg.pressure_critical = cfg_share(0.2); /* 3.2 GiB of 16: above 2 GiB */
    st = cg_governor_create(&p, &gov);
    cr_assert_eq(st, CG_ERR_CONFIG, "got %s", cg_status_name(st));
    cr_assert_str_eq(cg_last_error(), "CG_PRESSURE_CRITICAL (20% = 3.20 GiB "
                     "of 16 GiB) must not exceed CG_PRESSURE_WARN (2 GiB)");
    cr_assert_null(gov);
    cr_assert_eq(fake.live, 0, "leaked %llu", (unsigned long long)fake.live);
    fake_config(&cfg);
    cfg.mem_fraction = 1.5;
    st = cg_governor_create(&p, &gov);
    cr_assert_eq(st, CG_ERR_CONFIG, "got %s", cg_status_name(st));
    cr_assert(strstr(cg_last_error(), "CG_MEM_FRACTION") != NULL,
              "message: %s", cg_last_error());
    p.cfg = NULL;
    st = cg_governor_create(&p, &gov);
    cr_assert_eq(st, CG_ERR_INVALID_PARAM, "got %s", cg_status_name(st));
    cr_assert_null(gov);
}

Test(governor, snapshot_reports_the_probe_and_the_reserve)
{
    cg_governor_snapshot_t s;
    cg_config_t cfg;
    cg_governor_t *gov;

    cg_config_defaults(&cfg);
    cfg.mem_reserve = cfg_share(0.05);
    fake.free = 10 * GiB;
    fake.total = 20 * GiB;
    gov = fake_governor(&cfg);
    cg_governor_snapshot(gov, &s);
    cr_assert_eq(s.kind, CG_MEM_KIND_HOST);
    cr_assert_eq(s.free_bytes, 10 * GiB);
    cr_assert_eq(s.total_bytes, 20 * GiB);
    cr_assert_eq(s.reserve_bytes, 1 * GiB, "reserve %llu",
                 (unsigned long long)s.reserve_bytes);
    cr_assert_eq(s.pressure, CG_PRESSURE_OK);
    cr_assert(s.oom_eta_s < 0, "eta %g with one sample", s.oom_eta_s);
    cr_assert_eq(s.early_warnings, 0);
    cr_assert_eq(s.alloc_failures, 0);
    cr_assert_gt(s.current_bytes[CG_MEM_CAT_CONTROL], 0, "sample ring");
    fake_destroy(gov);
}

/* The defaults on a 141 GiB H200 at the memory-guard benchmark's free
 * points: no reserve, so the budget is a quarter of free at every point;
 * pressure by absolute headroom (WARN below 2 GiB, CRITICAL below 512 MiB)
 * caps the sizes at target / 2 and target / 4. */
Test(governor, h200_defaults_at_the_benchmark_points)
{
    static const struct {
        uint64_t free;
        cg_pressure_t level;
        uint64_t budget, fusion, chunk;
    } pts[] = {
        {2 * GiB, CG_PRESSURE_OK, 512 * MiB, 128 * MiB, 4 * MiB},
        {1 * GiB, CG_PRESSURE_WARN, 256 * MiB, 64 * MiB, 2 * MiB},
        {512 * MiB, CG_PRESSURE_WARN, 128 * MiB, 32 * MiB, 2 * MiB},
        {256 * MiB, CG_PRESSURE_CRITICAL, 64 * MiB, 8 * MiB, 1 * MiB},
        {64 * MiB, CG_PRESSURE_CRITICAL, 16 * MiB, 2 * MiB, 256 * KiB},
    };
    cg_governor_snapshot_t s;
    cg_config_t cfg;

    cg_config_defaults(&cfg);
    fake.total = 141 * GiB;
    for (size_t i = 0; i < sizeof(pts) / sizeof(pts[0]); i++) {
        cg_governor_t *gov;

        fake.free = pts[i].free;
        gov = fake_governor(&cfg);
        cg_governor_snapshot(gov, &s);
        cr_expect_eq(s.reserve_bytes, 0, "point %zu: reserve %llu", i,
                     (unsigned long long)s.reserve_bytes);
        cr_expect_eq(s.pressure, pts[i].level, "point %zu: %s", i,
                     cg_pressure_name(s.pressure));
        cr_expect_eq(s.budget_bytes, pts[i].budget, "point %zu: budget %llu",
                     i, (unsigned long long)s.budget_bytes);
        cr_expect_eq(s.fusion_bytes, pts[i].fusion, "point %zu: fusion %llu",
                     i, (unsigned long long)s.fusion_bytes);
        cr_expect_eq(s.chunk_bytes, pts[i].chunk, "point %zu: chunk %llu", i,
                     (unsigned long long)s.chunk_bytes);
        fake_destroy(gov);
    }
}

Test(governor, h200_with_256MiB_free_budget_64MiB_fusion_target_32MiB)
{
    cg_config_t cfg;

    /* the targets themselves: pressure off (check_sizes) */
    cg_config_defaults(&cfg);
    check_sizes(&cfg, &(sizing_case_t){256 * MiB, 141 * GiB, 0.25, 64 * MiB,
                                       32 * MiB, 4 * MiB, 256 * KiB});
    /* the old default reserve, 5% of total = 7.05 GiB, left nothing */
    cfg.mem_reserve = cfg_share(0.05);
    check_sizes(&cfg, &(sizing_case_t){256 * MiB, 141 * GiB, 0.25, 0,
                                       1 * MiB, 64 * KiB, 256 * KiB});
}

Test(governor, pressure_thresholds_of_mixed_kinds_are_checked_on_the_total)
{
    cg_governor_params_t p;
    cg_governor_t *gov = NULL;
    cg_config_t cfg;
    cg_status_t st;

    fake_config(&cfg);
    cfg.pressure_warn = cfg_share(0.10);      /* 1.6 GiB of 16 GiB */
    cfg.pressure_critical = cfg_bytes(512 * MiB);
    gov = fake_governor(&cfg);
    fake_step(gov, 1 * GiB, 100 * MS);
    cr_assert_eq(cg_governor_pressure(gov), CG_PRESSURE_WARN);
    fake_step(gov, 500 * MiB, 100 * MS);
    cr_assert_eq(cg_governor_pressure(gov), CG_PRESSURE_CRITICAL);
    fake_destroy(gov);
    /* the same settings on 4 GiB: 10% = 409.60 MiB, below 512 MiB */
    fake.total = 4 * GiB;
    fake.free = 2 * GiB;
    fake_params(&p, &cfg);
    gov = NULL;
    st = cg_governor_create(&p, &gov);
    cr_assert_eq(st, CG_ERR_CONFIG, "got %s", cg_status_name(st));
    cr_assert_str_eq(cg_last_error(), "CG_PRESSURE_CRITICAL (512 MiB) must "
                     "not exceed CG_PRESSURE_WARN (10% = 409.60 MiB of 4 "
                     "GiB)");
    cr_assert_null(gov);
}

Test(governor, share_thresholds_follow_the_total_at_every_sample)
{
    cg_config_t cfg;
    cg_governor_t *gov;

    fake_config(&cfg);
    cfg.mem_reserve = cfg_bytes(0);
    cfg.pressure_warn = cfg_share(0.10);
    cfg.pressure_critical = cfg_share(0.05);
    cfg.pressure_hysteresis = cfg_share(0.02);
    gov = fake_governor(&cfg); /* 8 GiB free of 16 GiB */
    fake_step(gov, 1 * GiB, 100 * MS); /* 6.25%: WARN */
    cr_assert_eq(cg_governor_pressure(gov), CG_PRESSURE_WARN);
    /* a cgroup limit lowered to 4 GiB: 1 GiB is 25%, past warn + 2% */
    fake.total = 4 * GiB;
    for (int i = 0; i <= 10; i++)
        fake_step(gov, 1 * GiB, 100 * MS);
    cr_assert_eq(cg_governor_pressure(gov), CG_PRESSURE_OK);
    fake_destroy(gov);
}
