/* SPDX-License-Identifier: Apache-2.0 */
/* Units for core/governor/oom_watch.c: slope and time-to-OOM on synthetic rising,
 * falling, flat and noisy series (100 ms samples, 5 s window), the once-per-
 * window rate limit, and the ring's window and capacity. */
#include <criterion/criterion.h>

#include "core/governor/oom_watch.h"

#define MS 1000000ull
#define MiB (1ull << 20)
#define GiB (1ull << 30)
#define WINDOW (5000 * MS)

typedef struct watch {
    cg_oom_sample_t ring[CG_OOM_RING_MAX];
    cg_oom_watch_t w;
} watch_t;

static void watch_init(watch_t *wt)
{
    cg_oom_watch_init(&wt->w, wt->ring, cg_oom_watch_capacity(WINDOW,
                                                              100 * MS),
                      WINDOW);
}

static double noise(uint32_t *seed, double amp)
{
    *seed = *seed * 1664525u + 1013904223u;
    return ((double)(*seed >> 8) / (double)(1u << 24) * 2.0 - 1.0) * amp;
}

Test(oom_watch, rising_series_projects_free_over_slope)
{
    watch_t wt;
    double slope = 0, eta;

    watch_init(&wt);
    for (int i = 0; i < 20; i++) /* +100 MiB every 100 ms: 1000 MiB/s */
        cg_oom_watch_add(&wt.w, (uint64_t)i * 100 * MS, 4 * GiB + i * 100 * MiB);
    cr_assert(cg_oom_watch_slope(&wt.w, &slope));
    cr_assert_float_eq(slope, 1000.0 * MiB, 1e-3 * MiB, "slope %g MiB/s",
                       slope / MiB);
    eta = cg_oom_watch_eta(&wt.w, 3 * GiB);
    cr_assert_float_eq(eta, 3.072, 1e-6, "eta %g s", eta);
    cr_assert(cg_oom_watch_check(&wt.w, eta, 1900 * MS), "inside 5 s");
    eta = cg_oom_watch_eta(&wt.w, 6 * GiB); /* 6.1 s: outside the window */
    cr_assert_not(cg_oom_watch_check(&wt.w, eta, 2000 * MS), "eta %g", eta);
}

Test(oom_watch, falling_and_flat_series_project_nothing)
{
    watch_t up, flat;
    double eta;

    watch_init(&up);
    watch_init(&flat);
    for (int i = 0; i < 30; i++) {
        cg_oom_watch_add(&up.w, (uint64_t)i * 100 * MS,
                         8 * GiB - (uint64_t)i * 50 * MiB);
        cg_oom_watch_add(&flat.w, (uint64_t)i * 100 * MS, 5 * GiB);
    }
    eta = cg_oom_watch_eta(&up.w, 1 * MiB);
    cr_assert(eta < 0, "falling: eta %g", eta);
    eta = cg_oom_watch_eta(&flat.w, 1 * MiB);
    cr_assert(eta < 0, "flat: eta %g", eta);
    cr_assert_not(cg_oom_watch_check(&flat.w, eta, 3000 * MS));
}

Test(oom_watch, noise_on_a_flat_series_raises_no_warning)
{
    uint32_t seed = 99u;
    watch_t wt;
    int warnings = 0;

    watch_init(&wt);
    /* 8 GiB used +-200 MiB of noise, 4 GiB free, 60 s of samples */
    for (uint64_t i = 0; i < 600; i++) {
        uint64_t t = i * 100 * MS;
        cg_oom_watch_add(&wt.w, t, (uint64_t)((double)(8 * GiB) +
                                              noise(&seed, 200.0 * MiB)));
        warnings += cg_oom_watch_check(&wt.w, cg_oom_watch_eta(&wt.w,
                                                               4 * GiB), t);
    }
    cr_assert_eq(warnings, 0, "%d false warnings", warnings);
}

Test(oom_watch, noise_on_a_rising_series_still_warns_near_the_truth)
{
    uint32_t seed = 7u;
    watch_t wt;
    double eta = -1;

    watch_init(&wt);
    /* 500 MiB/s growth, +-100 MiB noise, 2 GiB free: truth 4.1 s */
    for (uint64_t i = 0; i < 50; i++)
        cg_oom_watch_add(&wt.w, i * 100 * MS,
                         (uint64_t)((double)(4 * GiB) + i * 50.0 * MiB +
                                    noise(&seed, 100.0 * MiB)));
    eta = cg_oom_watch_eta(&wt.w, 2 * GiB);
    cr_assert(eta > 4.096 * 0.9 && eta < 4.096 * 1.1, "eta %g s", eta);
    cr_assert(cg_oom_watch_check(&wt.w, eta, 4900 * MS));
}

Test(oom_watch, a_persisting_projection_warns_once_per_window)
{
    watch_t wt;
    int warnings = 0, first = -1;

    watch_init(&wt);
    /* 512 MiB/s with 1 GiB free: eta 2 s for 10 s of samples */
    for (int i = 0; i <= 100; i++) {
        uint64_t t = (uint64_t)i * 100 * MS;
        cg_oom_watch_add(&wt.w, t, 2 * GiB + (uint64_t)i * 512 * MiB / 10);
        if (cg_oom_watch_check(&wt.w, cg_oom_watch_eta(&wt.w, 1 * GiB), t)) {
            warnings++;
            first = first < 0 ? i : first;
        }
    }
    /* first at the 5th sample (0.4 s), again at 5.4 s; 10.4 s is past */
    cr_assert_eq(first, CG_OOM_MIN_SAMPLES - 1, "first at sample %d", first);
    cr_assert_eq(warnings, 2, "%d warnings in 10 s", warnings);
    /* it clears, then comes back: warns at once */
    cr_assert_not(cg_oom_watch_check(&wt.w, -1.0, 10100 * MS));
    cr_assert(cg_oom_watch_check(&wt.w, 1.0, 10200 * MS));
}

Test(oom_watch, only_the_window_counts)
{
    watch_t wt;
    double slope = 0;

    watch_init(&wt);
    /* 20 s of steep growth, then 5.1 s flat: the old slope is gone */
    for (int i = 0; i < 200; i++)
        cg_oom_watch_add(&wt.w, (uint64_t)i * 100 * MS,
                         (uint64_t)i * 100 * MiB);
    for (int i = 200; i <= 251; i++)
        cg_oom_watch_add(&wt.w, (uint64_t)i * 100 * MS, 199 * 100 * MiB);
    cr_assert_eq(wt.w.count, 51, "count %u", wt.w.count);
    cr_assert(cg_oom_watch_slope(&wt.w, &slope));
    cr_assert_float_eq(slope, 0.0, 1e-9, "slope %g", slope);
}

Test(oom_watch, capacity_follows_window_over_interval_within_bounds)
{
    cr_assert_eq(cg_oom_watch_capacity(WINDOW, 100 * MS), 51);
    cr_assert_eq(cg_oom_watch_capacity(WINDOW, 1 * MS), CG_OOM_RING_MAX);
    cr_assert_eq(cg_oom_watch_capacity(1000 * MS, 1000 * MS),
                 CG_OOM_MIN_SAMPLES);
}

Test(oom_watch, too_few_samples_give_no_slope)
{
    watch_t wt;
    double slope = 0;

    watch_init(&wt);
    for (int i = 0; i < CG_OOM_MIN_SAMPLES - 1; i++)
        cg_oom_watch_add(&wt.w, (uint64_t)i * 100 * MS, (uint64_t)i * GiB);
    cr_assert_not(cg_oom_watch_slope(&wt.w, &slope));
    cr_assert(cg_oom_watch_eta(&wt.w, 1) < 0);
}

Test(oom_watch, rise_then_release_projects_nothing)
{
    watch_t wt;
    double slope = 0, eta;

    watch_init(&wt);
    /* 4 s of +100 MiB per sample, then the ballast is released at once. */
    for (int i = 0; i < 40; i++)
        cg_oom_watch_add(&wt.w, (uint64_t)i * 100 * MS,
                         2 * GiB + (uint64_t)i * 100 * MiB);
    for (int i = 40; i < 43; i++)
        cg_oom_watch_add(&wt.w, (uint64_t)i * 100 * MS, 2 * GiB);
    cr_assert(cg_oom_watch_slope(&wt.w, &slope));
    cr_assert_gt(slope, 0.0, "the fitted slope is still rising: %g", slope);
    eta = cg_oom_watch_eta(&wt.w, 1 * GiB);
    cr_assert_lt(eta, 0.0, "released memory must not project an OOM: %g s",
                 eta);
}
