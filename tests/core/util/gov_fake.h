/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Test doubles for the governor's units: a scripted probe (free/total set by
 * the test), a fake clock, a counting backend that can run out of memory
 * (capacity), and an event recorder. One static instance per test process
 * (Criterion runs each test in its own process); gov_fake_fini() checks
 * that every byte handed out by the backend came back.
 */
#ifndef CG_TESTS_GOV_FAKE_H
#define CG_TESTS_GOV_FAKE_H

#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "core/governor/governor.h"

#define KiB (1ull << 10)
#define MiB (1ull << 20)
#define GiB (1ull << 30)
#define TiB (1ull << 40)
#define MS (1000000ull)

typedef struct gov_fake {
    uint64_t free, total;      /* what the probe reports */
    cg_status_t probe_status;  /* CG_OK or the error the probe returns */
    int reads;                 /* probe reads so far */
    uint64_t now;              /* the clock, ns */
    uint64_t live, capacity;   /* backend bytes; capacity 0: unlimited */
    uint64_t backend_fails;
    int events[4];             /* per cg_gov_event_type_t */
    cg_gov_event_t last[256];  /* recorded events, in order */
    int nlast;
} gov_fake_t;

static gov_fake_t fake;

static inline cg_status_t fake_probe_read(void *arg, uint64_t *free_p,
                                   uint64_t *total_p)
{
    gov_fake_t *f = arg;
    f->reads++;
    if (f->probe_status != CG_OK)
        return f->probe_status;
    *free_p = f->free;
    *total_p = f->total;
    return CG_OK;
}

static inline uint64_t fake_now(void *arg)
{
    return ((gov_fake_t *)arg)->now;
}

static inline void *fake_alloc(void *arg, size_t size)
{
    gov_fake_t *f = arg;
    void *p;
    if (f->capacity != 0 && f->live + size > f->capacity) {
        f->backend_fails++;
        return NULL;
    }
    p = malloc(size);
    if (p != NULL)
        f->live += size;
    return p;
}

static inline void fake_free(void *arg, void *ptr, size_t size)
{
    gov_fake_t *f = arg;
    f->live -= size;
    free(ptr);
}

static inline void fake_event(void *arg, const cg_gov_event_t *ev)
{
    gov_fake_t *f = arg;
    f->events[ev->type]++;
    if (f->nlast < (int)(sizeof(f->last) / sizeof(f->last[0])))
        f->last[f->nlast++] = *ev;
}

/* A size-or-share configuration value: bytes, or a share of total. */
static inline cg_size_or_frac_t cfg_bytes(uint64_t bytes)
{
    return (cg_size_or_frac_t){bytes, -1.0};
}

static inline cg_size_or_frac_t cfg_share(double fraction)
{
    return (cg_size_or_frac_t){0, fraction};
}

/* Defaults with round numbers: reserve 1 GiB (bytes, not a share), the
 * rest as cg_config_defaults() (pressure: warn below 2 GiB free, critical
 * below 512 MiB, hysteresis 256 MiB, dwell 1 s). */
static inline void fake_config(cg_config_t *cfg)
{
    cg_config_defaults(cfg);
    cfg->mem_reserve = cfg_bytes(1 * GiB);
}

static inline void fake_params(cg_governor_params_t *p, const cg_config_t *cfg)
{
    memset(p, 0, sizeof(*p));
    p->cfg = cfg;
    p->probe = (cg_mem_probe_t){"fake", CG_MEM_KIND_HOST, fake_probe_read,
                                &fake, NULL};
    p->backend = (cg_mem_backend_t){fake_alloc, fake_free, &fake, 0};
    p->now_ns = fake_now;
    p->clock_arg = &fake;
    p->event_cb = fake_event;
    p->event_arg = &fake;
}

static inline cg_governor_t *fake_governor(const cg_config_t *cfg)
{
    cg_governor_params_t p;
    cg_governor_t *gov = NULL;
    cg_status_t st;

    fake_params(&p, cfg);
    st = cg_governor_create(&p, &gov);
    cr_assert_eq(st, CG_OK, "create: %s: %s", cg_status_name(st),
                 cg_last_error());
    return gov;
}

/* Feeds one probe reading at now += step_ns and samples it. */
static inline void fake_step(cg_governor_t *gov, uint64_t free_b, uint64_t step_ns)
{
    cg_status_t st;
    fake.free = free_b;
    fake.now += step_ns;
    st = cg_governor_sample(gov);
    cr_assert_eq(st, CG_OK, "sample: %s", cg_last_error());
}

/* Asserts no buffer bytes are live, then destroys the governor. */
static inline void fake_destroy(cg_governor_t *gov)
{
    cg_governor_snapshot_t s;
    cg_governor_snapshot(gov, &s);
    for (int c = 0; c < CG_MEM_CAT_CONTROL; c++)
        cr_assert_eq(s.current_bytes[c], 0, "%s: %llu bytes live",
                     cg_mem_cat_name(c),
                     (unsigned long long)s.current_bytes[c]);
    cg_governor_destroy(gov);
}

static inline void gov_fake_init(void)
{
    memset(&fake, 0, sizeof(fake));
    fake.total = 16 * GiB;
    fake.free = 8 * GiB;
    fake.now = 1000 * MS;
}

/* Every byte the backend handed out (governor state, sample ring, buffers)
 * came back. */
static inline void gov_fake_fini(void)
{
    cr_assert_eq(fake.live, 0, "backend: %llu bytes still live",
                 (unsigned long long)fake.live);
}

#endif
