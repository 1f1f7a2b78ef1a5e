/* SPDX-License-Identifier: Apache-2.0 */
/* Units for core/governor/governor.c's degradation: exact chunk and fusion
 * sizes step by step through WARN, CRITICAL and recovery (a level caps the
 * sizes at target / 2 or target / 4, it does not halve them again at every
 * sample), the events and their order, early warning degrading ahead of
 * pressure, and allocation failures regrowing one doubling per sample.
 * Scripted probe and fake clock (tests/core/util/gov_fake.h). */
#include "tests/core/util/gov_fake.h"

TestSuite(degrade, .init = gov_fake_init, .fini = gov_fake_fini,
          .timeout = 10);

/* 16 GiB total, no reserve, all of it budget: the budget-derived sizes stay
 * at the caps (chunk 4 MiB, fusion 128 MiB) even at 3% free, so only
 * pressure moves them. Thresholds as shares of total here: warn 10%,
 * critical 5%, hysteresis 2%; dwell 1s. */
static cg_governor_t *degrade_governor(void)
{
    cg_config_t cfg;

    fake_config(&cfg);
    cfg.mem_reserve = cfg_bytes(0);
    cfg.mem_fraction = 1.0;
    cfg.pressure_warn = cfg_share(0.10);
    cfg.pressure_critical = cfg_share(0.05);
    cfg.pressure_hysteresis = cfg_share(0.02);
    fake.total = 16 * GiB;
    fake.free = 8 * GiB;
    return fake_governor(&cfg);
}

#define PCT(p) (16 * GiB * (p) / 100)

static void expect_sizes(cg_governor_t *gov, uint64_t chunk, uint64_t fusion,
                         const char *what, int i)
{
    cr_assert_eq(cg_governor_chunk_size(gov), chunk, "%s %d: chunk %llu",
                 what, i, (unsigned long long)cg_governor_chunk_size(gov));
    cr_assert_eq(cg_governor_fusion_size(gov), fusion, "%s %d: fusion %llu",
                 what, i, (unsigned long long)cg_governor_fusion_size(gov));
}

Test(degrade, warn_critical_and_recovery_exact_steps)
{
    static const struct { uint64_t free, chunk, fusion; cg_pressure_t lvl; }
    steps[] = {
        {PCT(8), 2 * MiB, 64 * MiB, CG_PRESSURE_WARN},
        {PCT(8), 2 * MiB, 64 * MiB, CG_PRESSURE_WARN},
        {PCT(3), 1 * MiB, 32 * MiB, CG_PRESSURE_CRITICAL},
        {PCT(3), 1 * MiB, 32 * MiB, CG_PRESSURE_CRITICAL},
        {PCT(3), 1 * MiB, 32 * MiB, CG_PRESSURE_CRITICAL},
    };
    static const uint64_t grow[][2] = {{2 * MiB, 64 * MiB},
                                       {4 * MiB, 128 * MiB},
                                       {4 * MiB, 128 * MiB}};
    cg_governor_t *gov = degrade_governor();

    expect_sizes(gov, 4 * MiB, 128 * MiB, "create", 0);
    for (int i = 0; i < (int)(sizeof(steps) / sizeof(steps[0])); i++) {
        fake_step(gov, steps[i].free, 100 * MS);
        cr_assert_eq(cg_governor_pressure(gov), steps[i].lvl, "step %d", i);
        expect_sizes(gov, steps[i].chunk, steps[i].fusion, "step", i);
    }
    /* 20% free: past both margins, but CRITICAL holds for the 1s dwell */
    for (int i = 0; i < 10; i++) {
        fake_step(gov, PCT(20), 100 * MS);
        cr_assert_eq(cg_governor_pressure(gov), CG_PRESSURE_CRITICAL,
                     "dwell sample %d", i);
        expect_sizes(gov, 1 * MiB, 32 * MiB, "dwell", i);
    }
    for (int i = 0; i < (int)(sizeof(grow) / sizeof(grow[0])); i++) {
        fake_step(gov, PCT(20), 100 * MS);
        cr_assert_eq(cg_governor_pressure(gov), CG_PRESSURE_OK, "grow %d", i);
        expect_sizes(gov, grow[i][0], grow[i][1], "grow", i);
    }
    fake_destroy(gov);
}

Test(degrade, events_report_each_level_and_chunk_change)
{
    static const struct { cg_gov_event_type_t type; uint64_t a, b; } want[] = {
        {CG_GOV_EVENT_PRESSURE, CG_PRESSURE_OK, CG_PRESSURE_WARN},
        {CG_GOV_EVENT_CHUNK, 4 * MiB, 2 * MiB},
        {CG_GOV_EVENT_PRESSURE, CG_PRESSURE_WARN, CG_PRESSURE_CRITICAL},
        {CG_GOV_EVENT_CHUNK, 2 * MiB, 1 * MiB},
        /* still CRITICAL during the dwell: the chunk holds at its cap */
        {CG_GOV_EVENT_PRESSURE, CG_PRESSURE_CRITICAL, CG_PRESSURE_OK},
        {CG_GOV_EVENT_CHUNK, 1 * MiB, 2 * MiB},
        {CG_GOV_EVENT_CHUNK, 2 * MiB, 4 * MiB},
    };
    enum { N = sizeof(want) / sizeof(want[0]) };
    cg_governor_t *gov = degrade_governor();

    fake_step(gov, PCT(8), 100 * MS);
    fake_step(gov, PCT(3), 100 * MS);
    for (int i = 0; i < 12; i++) /* 1 s of dwell, then OK twice */
        fake_step(gov, PCT(50), 100 * MS);
    cr_assert_eq(fake.nlast, N, "got %d events", fake.nlast);
    for (int i = 0; i < N; i++) {
        const cg_gov_event_t *ev = &fake.last[i];
        uint64_t a = ev->type == CG_GOV_EVENT_PRESSURE ? ev->old_level
                                                       : ev->old_size;
        uint64_t b = ev->type == CG_GOV_EVENT_PRESSURE ? ev->new_level
                                                       : ev->new_size;
        cr_assert_eq(ev->type, want[i].type, "event %d: type %d", i,
                     ev->type);
        cr_assert_eq(a, want[i].a, "event %d: old %llu", i,
                     (unsigned long long)a);
        cr_assert_eq(b, want[i].b, "event %d: new %llu", i,
                     (unsigned long long)b);
    }
    cr_assert_eq(fake.last[0].free_bytes, PCT(8));
    cr_assert_eq(fake.last[0].total_bytes, 16 * GiB);
    fake_destroy(gov);
}

Test(degrade, a_shrinking_budget_caps_the_chunk_at_once)
{
    cg_config_t cfg;
    cg_governor_t *gov;

    fake_config(&cfg); /* reserve 1 GiB, fraction 25%, warn below 2 GiB */
    fake.free = 9 * GiB;
    gov = fake_governor(&cfg);
    cr_assert_eq(cg_governor_chunk_size(gov), 4 * MiB);
    /* 1.1 GiB free (WARN): budget 25 MiB makes the chunk's target 1 MiB,
     * and WARN caps it at half that in the same sample */
    fake_step(gov, GiB + 100 * MiB, 100 * MS);
    cr_assert_eq(cg_governor_pressure(gov), CG_PRESSURE_WARN);
    cr_assert_eq(cg_governor_chunk_size(gov), 512 * KiB, "got %llu",
                 (unsigned long long)cg_governor_chunk_size(gov));
    fake_destroy(gov);
}

Test(degrade, early_warning_degrades_before_pressure_and_recovers)
{
    cg_governor_snapshot_t s;
    cg_governor_t *gov = degrade_governor();
    uint64_t free_b = 8 * GiB;
    int i;

    /* used grows 200 MiB per 100 ms (2000 MiB/s): with 7.2 GiB free the
     * projection is under 5 s at the 5th sample, with pressure still OK */
    for (i = 0; i < 4; i++) {
        free_b -= 200 * MiB;
        fake_step(gov, free_b, 100 * MS);
    }
    cg_governor_snapshot(gov, &s);
    cr_assert_eq(s.pressure, CG_PRESSURE_OK);
    cr_assert_eq(s.early_warnings, 1, "got %llu",
                 (unsigned long long)s.early_warnings);
    cr_assert_eq(fake.events[CG_GOV_EVENT_EARLY_WARNING], 1);
    cr_assert_float_eq(s.oom_eta_s, (double)free_b / (2000.0 * MiB), 1e-6,
                       "eta %g", s.oom_eta_s);
    cr_assert_eq(s.chunk_bytes, 2 * MiB, "got %llu",
                 (unsigned long long)s.chunk_bytes);
    /* growth stops; after a whole window of flat samples no projection */
    for (i = 0; i < 60; i++)
        fake_step(gov, free_b, 100 * MS);
    cg_governor_snapshot(gov, &s);
    cr_assert(s.oom_eta_s < 0, "eta %g", s.oom_eta_s);
    cr_assert_eq(s.chunk_bytes, 4 * MiB, "got %llu",
                 (unsigned long long)s.chunk_bytes);
    fake_destroy(gov);
}

/* The defaults on a 141 GiB H200: a WARN that lasts (1 GiB free for 10 s)
 * holds the fusion buffer and chunk at half their targets, far above the
 * floors; CRITICAL (256 MiB free for 5 s) at a quarter; one shrink each. */
Test(degrade, sustained_pressure_holds_the_level_caps_not_the_floors)
{
    cg_governor_snapshot_t s;
    cg_config_t cfg;
    cg_governor_t *gov;

    cg_config_defaults(&cfg);
    fake.total = 141 * GiB;
    fake.free = 8 * GiB;
    gov = fake_governor(&cfg);
    expect_sizes(gov, 4 * MiB, 128 * MiB, "create", 0);
    for (int i = 0; i < 100; i++) { /* target 128 MiB / 4 MiB */
        fake_step(gov, 1 * GiB, 100 * MS);
        cr_assert_eq(cg_governor_pressure(gov), CG_PRESSURE_WARN);
        expect_sizes(gov, 2 * MiB, 64 * MiB, "warn", i);
    }
    for (int i = 0; i < 50; i++) { /* budget 64 MiB: target 32 MiB / 4 MiB */
        fake_step(gov, 256 * MiB, 100 * MS);
        cr_assert_eq(cg_governor_pressure(gov), CG_PRESSURE_CRITICAL);
        expect_sizes(gov, 1 * MiB, 8 * MiB, "critical", i);
    }
    cg_governor_snapshot(gov, &s);
    cr_assert_eq(s.degrades, 2, "samples that shrank a size: %llu",
                 (unsigned long long)s.degrades);
    fake_destroy(gov);
}

/* Back to 8 GiB free: during the 1 s dwell the level is still CRITICAL, but
 * its cap follows the larger budget (128 MiB / 4 = 32 MiB), so the fusion
 * buffer doubles up to it; at OK both double to their targets. */
Test(degrade, recovery_doubles_back_once_per_sample)
{
    static const uint64_t dwell_fusion[] = {16 * MiB, 32 * MiB, 32 * MiB};
    static const uint64_t ok[][2] = {{2 * MiB, 64 * MiB},
                                     {4 * MiB, 128 * MiB},
                                     {4 * MiB, 128 * MiB}};
    cg_config_t cfg;
    cg_governor_t *gov;

    cg_config_defaults(&cfg);
    fake.total = 141 * GiB;
    fake.free = 256 * MiB;
    gov = fake_governor(&cfg);
    expect_sizes(gov, 1 * MiB, 8 * MiB, "create", 0);
    for (int i = 0; i < 10; i++) {
        fake_step(gov, 8 * GiB, 100 * MS);
        cr_assert_eq(cg_governor_pressure(gov), CG_PRESSURE_CRITICAL,
                     "dwell %d", i);
        expect_sizes(gov, 1 * MiB, dwell_fusion[i < 2 ? i : 2], "dwell", i);
    }
    for (int i = 0; i < 3; i++) {
        fake_step(gov, 8 * GiB, 100 * MS);
        cr_assert_eq(cg_governor_pressure(gov), CG_PRESSURE_OK, "ok %d", i);
        expect_sizes(gov, ok[i][0], ok[i][1], "ok", i);
    }
    fake_destroy(gov);
}

/* Two failed tries of one allocation halve chunk and fusion twice; samples
 * then give back one doubling each, at OK up to the targets and under WARN
 * up to the WARN caps, never the whole way at once. */
static void fail_twice(cg_governor_t *gov)
{
    void *p = NULL;
    size_t got = 0;
    uint64_t cap = fake.capacity;

    fake.capacity = fake.live + 1 * MiB; /* 4 MiB and 2 MiB fail */
    cr_assert_eq(cg_governor_alloc_shrink(gov, CG_MEM_CAT_RING, 4 * MiB,
                                          64 * KiB, 0, "CG_CHUNK_MIN", &p,
                                          &got),
                 CG_OK, "%s", cg_last_error());
    cr_assert_eq(got, 1 * MiB, "got %zu", got);
    cg_governor_free(gov, CG_MEM_CAT_RING, p, got);
    fake.capacity = cap;
}

Test(degrade, allocation_failures_regrow_one_doubling_per_sample)
{
    static const uint64_t ok[][2] = {{2 * MiB, 64 * MiB},
                                     {4 * MiB, 128 * MiB}};
    static const uint64_t warn[][2] = {{1 * MiB, 32 * MiB},
                                       {2 * MiB, 64 * MiB},
                                       {2 * MiB, 64 * MiB}};
    cg_governor_snapshot_t s;
    cg_governor_t *gov = degrade_governor();

    fail_twice(gov);
    expect_sizes(gov, 1 * MiB, 32 * MiB, "after failures", 0);
    for (int i = 0; i < 2; i++) {
        fake_step(gov, 8 * GiB, 100 * MS);
        expect_sizes(gov, ok[i][0], ok[i][1], "ok", i);
    }
    fake_step(gov, PCT(8), 100 * MS); /* WARN: caps 2 MiB / 64 MiB */
    expect_sizes(gov, 2 * MiB, 64 * MiB, "warn", 0);
    fail_twice(gov);
    expect_sizes(gov, 512 * KiB, 16 * MiB, "after failures", 1);
    for (int i = 0; i < 3; i++) {
        fake_step(gov, PCT(8), 100 * MS);
        cr_assert_eq(cg_governor_pressure(gov), CG_PRESSURE_WARN);
        expect_sizes(gov, warn[i][0], warn[i][1], "warn", i + 1);
    }
    cg_governor_snapshot(gov, &s);
    cr_assert_eq(s.degrades, 5, "4 failures and 1 WARN sample: %llu",
                 (unsigned long long)s.degrades);
    fake_destroy(gov);
}
