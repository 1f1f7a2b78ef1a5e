/* SPDX-License-Identifier: Apache-2.0 */
/* Units for core/governor/pressure.c: immediate entry, no flapping on noise around
 * either threshold, recovery only with margin held for the dwell time,
 * CRITICAL stepping to WARN on its own margin, thresholds replaced without
 * losing the level. The machine counts free bytes; most scenarios are
 * written as shares of a total of 1e6 bytes (F(0.10) = 100000): warn 10%,
 * critical 5%, hysteresis 2%, dwell 1 s, samples every 100 ms. */
#include <criterion/criterion.h>

#include "core/governor/pressure.h"

#define MS 1000000ull
#define MiB (1ull << 20)
#define GiB (1ull << 30)

/* Free bytes of a share f of a 1e6-byte total. */
#define F(f) ((uint64_t)((f) * 1e6 + 0.5))

/* Deterministic noise in [-amp, +amp] (a small LCG; no libc state). */
static double noise(uint32_t *seed, double amp)
{
    *seed = *seed * 1664525u + 1013904223u;
    return ((double)(*seed >> 8) / (double)(1u << 24) * 2.0 - 1.0) * amp;
}

static cg_pressure_fsm_t fsm_default(void)
{
    cg_pressure_fsm_t f;
    cg_pressure_init(&f, F(0.10), F(0.05), F(0.02), 1000 * MS);
    return f;
}

/* Feeds a series around center with noise and counts level changes. */
static int transitions(cg_pressure_fsm_t *f, double center, double amp,
                       int n, uint32_t seed, cg_pressure_t *last_p)
{
    cg_pressure_t prev = f->level;
    int changes = 0;

    for (int i = 0; i < n; i++) {
        cg_pressure_t l = cg_pressure_update(f, F(center + noise(&seed, amp)),
                                             (uint64_t)i * 100 * MS);
        changes += l != prev;
        prev = l;
    }
    *last_p = prev;
    return changes;
}

Test(pressure, levels_are_entered_at_once)
{
    cg_pressure_fsm_t f = fsm_default();

    cr_assert_eq(cg_pressure_update(&f, F(0.50), 0), CG_PRESSURE_OK);
    cr_assert_eq(cg_pressure_update(&f, F(0.0999), 1), CG_PRESSURE_WARN);
    cr_assert_eq(cg_pressure_update(&f, F(0.0499), 2), CG_PRESSURE_CRITICAL);
    f = fsm_default();
    cr_assert_eq(cg_pressure_update(&f, F(0.01), 0), CG_PRESSURE_CRITICAL,
                 "ok straight to critical");
    cr_assert_str_eq(cg_pressure_name(CG_PRESSURE_WARN), "warn");
}

Test(pressure, noise_around_the_warn_threshold_does_not_flap)
{
    cg_pressure_fsm_t f = fsm_default();
    cg_pressure_t last;
    /* +-1.5% around 10%, below the 2% hysteresis: one entry, no exit */
    int n = transitions(&f, 0.10, 0.015, 1000, 12345u, &last);

    cr_assert_eq(n, 1, "%d level changes in 1000 noisy samples", n);
    cr_assert_eq(last, CG_PRESSURE_WARN, "ended at %s",
                 cg_pressure_name(last));
}

Test(pressure, noise_around_the_critical_threshold_does_not_flap)
{
    cg_pressure_fsm_t f = fsm_default();
    cg_pressure_t last;
    int n = transitions(&f, 0.05, 0.015, 1000, 777u, &last);

    /* first dip lands in WARN or CRITICAL; then only CRITICAL, never out */
    cr_assert_leq(n, 2, "%d level changes in 1000 noisy samples", n);
    cr_assert_eq(last, CG_PRESSURE_CRITICAL, "ended at %s",
                 cg_pressure_name(last));
}

Test(pressure, noise_wider_than_the_margin_but_faster_than_the_dwell)
{
    cg_pressure_fsm_t f = fsm_default();
    cg_pressure_t last;
    /* +-4% around 11%: often above 12%, but dips below 10% come more
     * often than once a second, so WARN holds */
    int n = transitions(&f, 0.11, 0.04, 1000, 4242u, &last);

    cr_assert_eq(n, 1, "%d level changes", n);
    cr_assert_eq(last, CG_PRESSURE_WARN);
}

Test(pressure, recovery_needs_the_margin)
{
    cg_pressure_fsm_t f = fsm_default();
    uint64_t t = 0;

    cg_pressure_update(&f, F(0.08), t);
    /* 11.9%: above the threshold, inside the margin, for a minute */
    for (int i = 0; i < 600; i++)
        cr_assert_eq(cg_pressure_update(&f, F(0.119), t += 100 * MS),
                     CG_PRESSURE_WARN, "sample %d", i);
}

Test(pressure, recovery_needs_the_dwell_and_a_dip_restarts_it)
{
    cg_pressure_fsm_t f = fsm_default();
    uint64_t t = 0;

    cg_pressure_update(&f, F(0.08), t);
    for (int i = 0; i < 5; i++) /* 0.0 .. 0.4 s above the margin */
        cr_assert_eq(cg_pressure_update(&f, F(0.125), t += 100 * MS),
                     CG_PRESSURE_WARN);
    cr_assert_eq(cg_pressure_update(&f, F(0.115), t += 100 * MS),
                 CG_PRESSURE_WARN, "inside the margin: dwell restarts");
    cr_assert_eq(cg_pressure_update(&f, F(0.125), t += 100 * MS),
                 CG_PRESSURE_WARN);
    uint64_t since = t;
    while (t - since < 1000 * MS - 100 * MS)
        cr_assert_eq(cg_pressure_update(&f, F(0.125), t += 100 * MS),
                     CG_PRESSURE_WARN, "at %llu ms",
                     (unsigned long long)((t - since) / MS));
    cr_assert_eq(cg_pressure_update(&f, F(0.125), t += 100 * MS),
                 CG_PRESSURE_OK, "after exactly the 1 s dwell");
}

Test(pressure, critical_steps_down_to_warn_on_its_own_margin)
{
    cg_pressure_fsm_t f = fsm_default();
    uint64_t t = 0;

    cg_pressure_update(&f, F(0.03), t);
    /* 8%: past critical + 2%, still under warn */
    for (int i = 0; i < 10; i++)
        cr_assert_eq(cg_pressure_update(&f, F(0.08), t += 100 * MS),
                     CG_PRESSURE_CRITICAL, "dwell sample %d", i);
    cr_assert_eq(cg_pressure_update(&f, F(0.08), t += 100 * MS),
                 CG_PRESSURE_WARN);
    /* then to OK on the warn margin, a full dwell later */
    for (int i = 0; i < 10; i++)
        cr_assert_eq(cg_pressure_update(&f, F(0.30), t += 100 * MS),
                     CG_PRESSURE_WARN, "dwell sample %d", i);
    cr_assert_eq(cg_pressure_update(&f, F(0.30), t += 100 * MS),
                 CG_PRESSURE_OK);
}

Test(pressure, zero_dwell_recovers_on_the_first_sample_past_the_margin)
{
    cg_pressure_fsm_t f;

    cg_pressure_init(&f, F(0.10), F(0.05), F(0.02), 0);
    cg_pressure_update(&f, F(0.01), 0);
    cr_assert_eq(cg_pressure_update(&f, F(0.119), 1), CG_PRESSURE_WARN);
    cr_assert_eq(cg_pressure_update(&f, F(0.121), 2), CG_PRESSURE_OK);
}

Test(pressure, byte_thresholds_do_not_wrap_below_the_hysteresis)
{
    cg_pressure_fsm_t f;
    uint64_t t = 0;

    cg_pressure_init(&f, 2 * GiB, 512 * MiB, 256 * MiB, 0);
    cr_assert_eq(cg_pressure_update(&f, 100 * MiB, t), CG_PRESSURE_CRITICAL);
    /* free below the hysteresis itself: no exit (free - 256 MiB < 0) */
    cr_assert_eq(cg_pressure_update(&f, 0, t += 100 * MS),
                 CG_PRESSURE_CRITICAL);
    cr_assert_eq(cg_pressure_update(&f, 767 * MiB, t += 100 * MS),
                 CG_PRESSURE_CRITICAL, "inside critical's margin");
    cr_assert_eq(cg_pressure_update(&f, 768 * MiB, t += 100 * MS),
                 CG_PRESSURE_WARN, "critical + hysteresis reached");
    cr_assert_eq(cg_pressure_update(&f, 2 * GiB + 255 * MiB, t += 100 * MS),
                 CG_PRESSURE_WARN, "inside warn's margin");
    cr_assert_eq(cg_pressure_update(&f, 2 * GiB + 256 * MiB, t += 100 * MS),
                 CG_PRESSURE_OK);
}

Test(pressure, new_thresholds_keep_the_level_and_the_dwell)
{
    cg_pressure_fsm_t f = fsm_default();
    uint64_t t = 0;

    cg_pressure_update(&f, F(0.08), t);
    for (int i = 0; i < 5; i++) /* half the dwell past warn + 2% */
        cg_pressure_update(&f, F(0.125), t += 100 * MS);
    /* the same thresholds again (the governor resolves them every
     * sample): the level and the dwell already served are kept */
    cg_pressure_set_thresholds(&f, F(0.10), F(0.05), F(0.02));
    cr_assert_eq(f.level, CG_PRESSURE_WARN);
    for (int i = 0; i < 4; i++)
        cr_assert_eq(cg_pressure_update(&f, F(0.125), t += 100 * MS),
                     CG_PRESSURE_WARN, "sample %d", i);
    cr_assert_eq(cg_pressure_update(&f, F(0.125), t += 100 * MS),
                 CG_PRESSURE_WARN);
    cr_assert_eq(cg_pressure_update(&f, F(0.125), t += 100 * MS),
                 CG_PRESSURE_OK, "1 s after the margin was first reached");
}
