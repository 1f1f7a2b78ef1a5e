/* SPDX-License-Identifier: Apache-2.0 */
/* Units for core/governor/governor.c's degradation: exact chunk and fusion sizes
 * step by step through WARN, CRITICAL and recovery, the events and their
 * order, and early warning degrading ahead of pressure. Scripted probe and
 * fake clock (tests/core/util/gov_fake.h). */
#include "tests/core/util/gov_fake.h"

TestSuite(degrade, .init = gov_fake_init, .fini = gov_fake_fini,
          .timeout = 10);

/* 16 GiB total, no reserve, all of it budget: the budget-derived sizes stay
 * at the caps (chunk 4 MiB, fusion 128 MiB) even at 3% free, so only
 * pressure moves them. warn 10%, critical 5%, hysteresis 2%, dwell 1s. */
static cg_governor_t *degrade_governor(void)
{
    cg_config_t cfg;

    fake_config(&cfg);
    cfg.mem_reserve.bytes = 0;
    cfg.mem_fraction = 1.0;
    fake.total = 16 * GiB;
    fake.free = 8 * GiB;
    return fake_governor(&cfg);
}

#define PCT(p) (16 * GiB * (p) / 100)

Test(degrade, warn_critical_and_recovery_exact_steps)
{
    static const struct { uint64_t free, chunk, fusion; cg_pressure_t lvl; }
    steps[] = {
        {PCT(8), 2 * MiB, 64 * MiB, CG_PRESSURE_WARN},
        {PCT(8), 1 * MiB, 32 * MiB, CG_PRESSURE_WARN},
        {PCT(3), 256 * KiB, 8 * MiB, CG_PRESSURE_CRITICAL},
        {PCT(3), 64 * KiB, 2 * MiB, CG_PRESSURE_CRITICAL},
        {PCT(3), 64 * KiB, 1 * MiB, CG_PRESSURE_CRITICAL},
        {PCT(3), 64 * KiB, 1 * MiB, CG_PRESSURE_CRITICAL},
    };
    static const uint64_t grow[] = {128 * KiB, 256 * KiB, 512 * KiB, 1 * MiB,
                                    2 * MiB, 4 * MiB, 4 * MiB};
    cg_governor_t *gov = degrade_governor();

    cr_assert_eq(cg_governor_chunk_size(gov), 4 * MiB);
    cr_assert_eq(cg_governor_fusion_size(gov), 128 * MiB);
    for (size_t i = 0; i < sizeof(steps) / sizeof(steps[0]); i++) {
        fake_step(gov, steps[i].free, 100 * MS);
        cr_assert_eq(cg_governor_pressure(gov), steps[i].lvl, "step %zu", i);
        cr_assert_eq(cg_governor_chunk_size(gov), steps[i].chunk,
                     "step %zu: chunk %llu", i,
                     (unsigned long long)cg_governor_chunk_size(gov));
        cr_assert_eq(cg_governor_fusion_size(gov), steps[i].fusion,
                     "step %zu: fusion %llu", i,
                     (unsigned long long)cg_governor_fusion_size(gov));
    }
    /* 20% free: past both margins, but CRITICAL holds for the 1s dwell */
    for (int i = 0; i < 10; i++) {
        fake_step(gov, PCT(20), 100 * MS);
        cr_assert_eq(cg_governor_pressure(gov), CG_PRESSURE_CRITICAL,
                     "dwell sample %d", i);
        cr_assert_eq(cg_governor_chunk_size(gov), 64 * KiB);
    }
    for (size_t i = 0; i < sizeof(grow) / sizeof(grow[0]); i++) {
        fake_step(gov, PCT(20), 100 * MS);
        cr_assert_eq(cg_governor_pressure(gov), CG_PRESSURE_OK, "grow %zu", i);
        cr_assert_eq(cg_governor_chunk_size(gov), grow[i], "grow %zu: %llu",
                     i, (unsigned long long)cg_governor_chunk_size(gov));
    }
    cr_assert_eq(cg_governor_fusion_size(gov), 128 * MiB, "fusion %llu",
                 (unsigned long long)cg_governor_fusion_size(gov));
    fake_destroy(gov);
}

Test(degrade, events_report_each_level_and_chunk_change)
{
    static const struct { cg_gov_event_type_t type; uint64_t a, b; } want[] = {
        {CG_GOV_EVENT_PRESSURE, CG_PRESSURE_OK, CG_PRESSURE_WARN},
        {CG_GOV_EVENT_CHUNK, 4 * MiB, 2 * MiB},
        {CG_GOV_EVENT_PRESSURE, CG_PRESSURE_WARN, CG_PRESSURE_CRITICAL},
        {CG_GOV_EVENT_CHUNK, 2 * MiB, 512 * KiB},
        /* still CRITICAL during the dwell: keeps halving to the floor */
        {CG_GOV_EVENT_CHUNK, 512 * KiB, 128 * KiB},
        {CG_GOV_EVENT_CHUNK, 128 * KiB, 64 * KiB},
        {CG_GOV_EVENT_PRESSURE, CG_PRESSURE_CRITICAL, CG_PRESSURE_OK},
        {CG_GOV_EVENT_CHUNK, 64 * KiB, 128 * KiB},
    };
    cg_governor_t *gov = degrade_governor();

    fake_step(gov, PCT(8), 100 * MS);
    fake_step(gov, PCT(3), 100 * MS);
    for (int i = 0; i < 11; i++) /* 1 s of dwell, then OK */
        fake_step(gov, PCT(50), 100 * MS);
    cr_assert_eq(fake.nlast, 8, "got %d events", fake.nlast);
    for (int i = 0; i < 8; i++) {
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

    fake_config(&cfg); /* reserve 1 GiB, fraction 25% */
    fake.free = 9 * GiB;
    gov = fake_governor(&cfg);
    cr_assert_eq(cg_governor_chunk_size(gov), 4 * MiB);
    /* 1.1 GiB free (6.9%: WARN): budget 25 MiB caps the chunk at 1 MiB,
     * and the WARN halving takes it to 512 KiB in the same sample */
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
