/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cg_governor_demo: the governor at work on this machine. It watches real
 * host memory through the host probe and withholds a simulated ballast
 * that takes free memory from its starting value down to half of
 * CG_PRESSURE_CRITICAL, holds it there (also when other processes free or
 * take memory meanwhile) and is released, so the demo is safe to run
 * anywhere; it allocates a real fusion buffer of the size the governor
 * allows at every step, and prints one row per step: free memory, budget,
 * pressure, fusion/chunk sizes, projected time to OOM and events.
 * Layer: plugin (a command over core).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collguard/collguard.h"
#include "core/base/parse.h"
#include "core/context.h"

typedef struct {
    cg_mem_probe_t real;
    uint64_t free0;     /* real free memory at the start */
    uint64_t planned;   /* the ballast of this step, against free0 */
    uint64_t ballast;   /* simulated bytes held by "the framework" */
    uint64_t now_ns;    /* simulated clock */
    char events[160];   /* events of the current step */
} cg__demo_t;

static cg_status_t cg__squeezed_read(void *arg, uint64_t *free_p,
                                     uint64_t *total_p)
{
    cg__demo_t *d = arg;
    cg_status_t st = d->real.read(d->real.arg, free_p, total_p);
    uint64_t want = d->free0 - d->planned;

    if (st != CG_OK)
        return st;
    /* The ballast leaves free0 - planned free whatever other processes on
     * the host do meanwhile (nothing withheld while nothing is planned). */
    d->ballast = d->planned > 0 && *free_p > want ? *free_p - want : 0;
    *free_p -= d->ballast;
    return CG_OK;
}

static uint64_t cg__demo_clock(void *arg)
{
    return ((cg__demo_t *)arg)->now_ns;
}

static void cg__demo_event(void *arg, const cg_gov_event_t *ev)
{
    cg__demo_t *d = arg;
    size_t n = strlen(d->events);
    char a[32], b[32];

    switch (ev->type) {
    case CG_GOV_EVENT_PRESSURE:
        snprintf(d->events + n, sizeof(d->events) - n, " pressure:%s->%s",
                 cg_pressure_name(ev->old_level),
                 cg_pressure_name(ev->new_level));
        break;
    case CG_GOV_EVENT_EARLY_WARNING:
        snprintf(d->events + n, sizeof(d->events) - n, " oom-warning(%.1fs)",
                 ev->eta_s);
        break;
    case CG_GOV_EVENT_ALLOC_RETRY:
        snprintf(d->events + n, sizeof(d->events) - n, " alloc-retry:%s->%s",
                 cg_format_size(ev->old_size, a, sizeof(a)),
                 cg_format_size(ev->new_size, b, sizeof(b)));
        break;
    case CG_GOV_EVENT_CHUNK:
        break; /* visible in the chunk column */
    }
}

/* Ballast at step s of n: 0 for the first 15%, a linear rise over 35% to
 * `peak`, a hold for 15%, then released at once. */
static uint64_t cg__ballast(int s, int n, uint64_t peak)
{
    int rise0 = n * 15 / 100, rise1 = n * 50 / 100, hold1 = n * 65 / 100;
    if (s < rise0 || s >= hold1)
        return 0;
    if (s >= rise1)
        return peak;
    return (uint64_t)((double)peak * (s - rise0 + 1) / (rise1 - rise0));
}

int main(int argc, char **argv)
{
    int steps = 60;
    uint64_t step_ns = 200000000ull; /* 200 ms of simulated time per step */
    cg_governor_params_t gp;
    cg_governor_t *gov;
    cg_host_probe_t hp;
    cg__demo_t d;
    cg_ctx_h ctx;
    uint64_t free0, total, peak, low;
    int failures = 0;

    /* Rows and the governor's log lines (stderr) in the order they happen,
     * also when stdout is a pipe or a file. */
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (argc == 3 && strcmp(argv[1], "--steps") == 0)
        steps = atoi(argv[2]);
    if (steps < 10 || steps > 100000) {
        fprintf(stderr, "usage: cg_governor_demo [--steps N>=10]\n");
        return 2;
    }
    if (cg_ctx_create(NULL, &ctx) != CG_OK) {
        fprintf(stderr, "cg_governor_demo: %s\n", cg_last_error());
        return 1;
    }
    memset(&d, 0, sizeof(d));
    memset(&hp, 0, sizeof(hp)); /* real /proc and cgroup paths */
    cg_host_probe_init(&hp, &d.real);
    if (d.real.read(d.real.arg, &free0, &total) != CG_OK) {
        fprintf(stderr, "cg_governor_demo: %s\n", cg_last_error());
        return 1;
    }
    /* Squeeze until half of CG_PRESSURE_CRITICAL is free: past CRITICAL. */
    low = cg_config_resolve_size(&ctx->cfg.pressure_critical, total) / 2;
    peak = free0 > low ? free0 - low : 0;
    d.free0 = free0;

    memset(&gp, 0, sizeof(gp));
    gp.cfg = &ctx->cfg;
    gp.probe = d.real;
    gp.probe.name = "host+simulated ballast";
    gp.probe.read = cg__squeezed_read;
    gp.probe.arg = &d;
    gp.now_ns = cg__demo_clock;
    gp.clock_arg = &d;
    gp.log = &ctx->log;
    gp.event_cb = cg__demo_event;
    gp.event_arg = &d;
    if (cg_governor_create(&gp, &gov) != CG_OK) {
        fprintf(stderr, "cg_governor_demo: %s\n", cg_last_error());
        return 1;
    }

    printf("governor demo: real host memory, simulated ballast, %d steps of "
           "%.0f ms\n", steps, step_ns / 1e6);
    printf("%5s %7s %10s %10s %10s %-8s %10s %10s %8s  %s\n", "step", "t(s)",
           "ballast", "free", "budget", "pressure", "fusion", "chunk",
           "oom-eta", "events");
    for (int s = 0; s < steps; s++) {
        cg_governor_snapshot_t snap;
        char c[6][32], eta[16];
        void *buf = NULL;
        size_t got = 0;

        d.events[0] = '\0';
        d.now_ns += step_ns;
        d.planned = cg__ballast(s, steps, peak);
        if (cg_governor_sample(gov) != CG_OK) {
            fprintf(stderr, "sample: %s\n", cg_last_error());
            failures++;
            break;
        }
        /* A real fusion buffer of the size allowed now, filled and freed. */
        cg_status_t st = cg_governor_alloc_shrink(
            gov, CG_MEM_CAT_FUSION, cg_governor_fusion_size(gov),
            ctx->cfg.fusion_min, 64, "CG_FUSION_MIN", &buf, &got);
        if (st == CG_OK) {
            memset(buf, s & 0xff, got);
            cg_governor_free(gov, CG_MEM_CAT_FUSION, buf, got);
        } else if (cg_governor_fusion_size(gov) > 0) {
            size_t n = strlen(d.events);
            snprintf(d.events + n, sizeof(d.events) - n, " alloc-failed");
            failures++;
        }
        cg_governor_snapshot(gov, &snap);
        if (snap.oom_eta_s >= 0)
            snprintf(eta, sizeof(eta), "%.1fs", snap.oom_eta_s);
        else
            snprintf(eta, sizeof(eta), "-");
        printf("%5d %7.1f %10s %10s %10s %-8s %10s %10s %8s %s\n", s,
               d.now_ns / 1e9, cg_format_size(d.ballast, c[0], 32),
               cg_format_size(snap.free_bytes, c[1], 32),
               cg_format_size(snap.budget_bytes, c[2], 32),
               cg_pressure_name(snap.pressure),
               cg_format_size(snap.fusion_bytes, c[3], 32),
               cg_format_size(snap.chunk_bytes, c[4], 32), eta, d.events);
    }
    {
        cg_governor_snapshot_t snap;
        char p[32];
        cg_governor_snapshot(gov, &snap);
        printf("fusion buffer peak %s; allocation failures survived %llu; "
               "early warnings %llu; live bytes now %llu\n",
               cg_format_size(snap.peak_bytes[CG_MEM_CAT_FUSION], p, 32),
               (unsigned long long)snap.alloc_failures,
               (unsigned long long)snap.early_warnings,
               (unsigned long long)snap.current_bytes[CG_MEM_CAT_FUSION]);
        if (snap.current_bytes[CG_MEM_CAT_FUSION] != 0)
            failures++;
    }
    cg_governor_destroy(gov);
    cg_ctx_destroy(ctx);
    return failures ? 1 : 0;
}
