/* SPDX-License-Identifier: Apache-2.0 */
/* Units for core/governor/governor_alloc.c: exact and shrinking allocations, a queue
 * of 100 items that survives CG_FAULT_ALLOC=3 and a backend that runs out
 * of memory without dropping one, the floor-failure message, and the
 * cg_mem_ops_t view. Scripted probe and fake clock (tests/core/util/gov_fake.h). */
#include <pthread.h>
#include <stdio.h>

#include "tests/core/util/gov_fake.h"

TestSuite(gov_alloc, .init = gov_fake_init, .fini = gov_fake_fini,
          .timeout = 10);

Test(gov_alloc, shrink_gets_want_when_memory_allows)
{
    cg_config_t cfg;
    cg_governor_t *gov;
    void *p = NULL;
    size_t got = 0;
    cg_status_t st;

    fake_config(&cfg);
    gov = fake_governor(&cfg);
    st = cg_governor_alloc_shrink(gov, CG_MEM_CAT_FUSION, 8 * MiB, 1 * MiB,
                                  4 * KiB, "CG_FUSION_MIN", &p, &got);
    cr_assert_eq(st, CG_OK, "%s", cg_last_error());
    cr_assert_eq(got, 8 * MiB, "got %zu", got);
    cr_assert_eq(fake.events[CG_GOV_EVENT_ALLOC_RETRY], 0);
    memset(p, 0xab, got);
    cg_governor_free(gov, CG_MEM_CAT_FUSION, p, got);
    fake_destroy(gov);
}

Test(gov_alloc, shrink_halves_in_multiples_of_align_and_degrades_chunk)
{
    cg_config_t cfg;
    cg_governor_t *gov;
    void *p = NULL;
    size_t got = 0;
    cg_status_t st;

    fake_config(&cfg);
    gov = fake_governor(&cfg);
    fake.capacity = fake.live + 3 * MiB; /* 12M and 6M fail, 3M does not */
    st = cg_governor_alloc_shrink(gov, CG_MEM_CAT_RING, 12 * MiB + 12 * KiB,
                                  64 * KiB, 12 * KiB, "CG_CHUNK_MIN", &p,
                                  &got);
    cr_assert_eq(st, CG_OK, "%s", cg_last_error());
    /* 12M+12K fails; halves rounded down to 12K multiples: 6M fails, 3M */
    cr_assert_eq(got, 3 * MiB, "got %zu", got);
    cr_assert_eq(got % (12 * KiB), 0, "got %zu", got);
    cr_assert_eq(fake.events[CG_GOV_EVENT_ALLOC_RETRY], 2, "got %d",
                 fake.events[CG_GOV_EVENT_ALLOC_RETRY]);
    cr_assert_eq(fake.last[0].old_size, 12 * MiB + 12 * KiB);
    cr_assert_eq(fake.last[0].cat, CG_MEM_CAT_RING);
    cr_assert_eq(cg_governor_chunk_size(gov), 1 * MiB, "two failures: "
                 "4M -> 1M, got %llu",
                 (unsigned long long)cg_governor_chunk_size(gov));
    cg_governor_free(gov, CG_MEM_CAT_RING, p, got);
    fake_destroy(gov);
}

/* A queue of 100 items of 256 KiB .. 4 MiB, at most 4 in flight, against a
 * backend with 6 MiB and every 3rd buffer allocation failing. When even the
 * floor fails, the queue completes its oldest item and retries, as the
 * background thread does: nothing is ever dropped. */
Test(gov_alloc, queue_of_100_survives_fault_injection_and_a_full_backend)
{
    enum { N = 100, INFLIGHT = 4 };
    struct { void *p; size_t got; } fly[INFLIGHT];
    int head = 0, count = 0, done = 0, waits = 0;
    cg_governor_snapshot_t s;
    cg_config_t cfg;
    cg_governor_t *gov;

    fake_config(&cfg);
    cfg.fault_alloc = 3;
    gov = fake_governor(&cfg);
    fake.capacity = fake.live + 6 * MiB;
    for (int i = 0; i < N; i++) {
        size_t want = (size_t)(i * 37 % 16 + 1) * 256 * KiB, got = 0;
        void *p = NULL;
        cg_status_t st;

        while ((st = cg_governor_alloc_shrink(gov, CG_MEM_CAT_FUSION, want,
                                              64 * KiB, 4 * KiB,
                                              "CG_FUSION_MIN", &p, &got)) ==
                   CG_ERR_NO_MEMORY && count > 0) {
            cg_governor_free(gov, CG_MEM_CAT_FUSION, fly[head].p,
                             fly[head].got);
            head = (head + 1) % INFLIGHT;
            count--;
            done++;
            waits++;
        }
        cr_assert_eq(st, CG_OK, "item %d: %s", i, cg_last_error());
        cr_assert(got >= 64 * KiB && got <= want, "item %d: got %zu of %zu",
                  i, got, want);
        memset(p, i, got);
        if (count == INFLIGHT) {
            cg_governor_free(gov, CG_MEM_CAT_FUSION, fly[head].p,
                             fly[head].got);
            head = (head + 1) % INFLIGHT;
            count--;
            done++;
        }
        fly[(head + count) % INFLIGHT].p = p;
        fly[(head + count) % INFLIGHT].got = got;
        count++;
    }
    for (; count > 0; count--, done++, head = (head + 1) % INFLIGHT)
        cg_governor_free(gov, CG_MEM_CAT_FUSION, fly[head].p, fly[head].got);
    cg_governor_snapshot(gov, &s);
    cr_assert_eq(done, N, "processed %d of %d", done, N);
    cr_assert_eq(s.current_bytes[CG_MEM_CAT_FUSION], 0);
    cr_assert_leq(s.peak_bytes[CG_MEM_CAT_FUSION], 6 * MiB, "peak %llu",
                  (unsigned long long)s.peak_bytes[CG_MEM_CAT_FUSION]);
    cr_assert_gt(s.alloc_failures, 33, "injected alone fail 1 in 3: %llu",
                 (unsigned long long)s.alloc_failures);
    cr_assert_gt(fake.backend_fails, 0, "backend never ran out");
    cr_log_info("failures %llu (backend %llu), queue waits %d",
                (unsigned long long)s.alloc_failures,
                (unsigned long long)fake.backend_fails, waits);
    fake_destroy(gov);
}

Test(gov_alloc, floor_failure_says_needed_free_reserve_and_what_to_lower)
{
    cg_config_t cfg;
    cg_governor_t *gov;
    void *p = NULL;
    size_t got = 0;
    cg_status_t st;

    cg_config_defaults(&cfg);
    cfg.mem_reserve = cfg_share(0.05); /* 5% of 24 GiB = 1.2 GiB */
    fake.total = 24 * GiB;
    fake.free = 300 * MiB;
    gov = fake_governor(&cfg);
    fake.capacity = fake.live + 512 * KiB;
    st = cg_governor_alloc_shrink(gov, CG_MEM_CAT_FUSION, 64 * MiB, 1 * MiB,
                                  0, "CG_FUSION_MIN", &p, &got);
    cr_assert_eq(st, CG_ERR_NO_MEMORY, "got %s", cg_status_name(st));
    cr_assert_null(p);
    cr_assert_str_eq(cg_last_error(),
                     "fusion buffer: needed 1 MiB (CG_FUSION_MIN), free 300 "
                     "MiB, reserve 1.20 GiB, budget 0 B; lower CG_FUSION_MIN "
                     "or CG_MEM_RESERVE");
    /* 64M 32M 16M 8M 4M 2M 1M 1M: 8 tries, 7 retries */
    cr_assert_eq(fake.backend_fails, 8, "got %llu",
                 (unsigned long long)fake.backend_fails);
    cr_assert_eq(fake.events[CG_GOV_EVENT_ALLOC_RETRY], 7);
    fake_destroy(gov);
}

Test(gov_alloc, floor_failure_without_a_reserve_names_only_the_floor)
{
    cg_config_t cfg;
    cg_governor_t *gov;
    void *p = NULL;
    size_t got = 0;

    cg_config_defaults(&cfg); /* CG_MEM_RESERVE 0: nothing to lower there */
    fake.total = 24 * GiB;
    fake.free = 300 * MiB;
    gov = fake_governor(&cfg);
    fake.capacity = fake.live + 512 * KiB;
    cr_assert_eq(cg_governor_alloc_shrink(gov, CG_MEM_CAT_FUSION, 4 * MiB,
                                          1 * MiB, 0, "CG_FUSION_MIN", &p,
                                          &got),
                 CG_ERR_NO_MEMORY);
    cr_assert_str_eq(cg_last_error(),
                     "fusion buffer: needed 1 MiB (CG_FUSION_MIN), free 300 "
                     "MiB, reserve 0 B, budget 75 MiB; lower CG_FUSION_MIN");
    fake_destroy(gov);
}

Test(gov_alloc, fault_every_allocation_fails_even_the_floor)
{
    cg_config_t cfg;
    cg_governor_t *gov;
    void *p = NULL;
    size_t got = 0;
    cg_status_t st;

    fake_config(&cfg);
    cfg.fault_alloc = 1;
    gov = fake_governor(&cfg); /* CONTROL (the ring) is never injected */
    st = cg_governor_alloc_shrink(gov, CG_MEM_CAT_STAGING, 256 * KiB,
                                  64 * KiB, 0, NULL, &p, &got);
    cr_assert_eq(st, CG_ERR_NO_MEMORY, "got %s", cg_status_name(st));
    cr_assert(strstr(cg_last_error(), "staging buffer: needed 64 KiB "
                     "(floor)") != NULL, "message: %s", cg_last_error());
    st = cg_governor_alloc(gov, CG_MEM_CAT_CONTROL, 100, &p);
    cr_assert_eq(st, CG_OK, "control: %s", cg_last_error());
    cg_governor_free(gov, CG_MEM_CAT_CONTROL, p, 100);
    fake_destroy(gov);
}

Test(gov_alloc, mem_ops_view_is_accounted_and_injected)
{
    cg_governor_snapshot_t s;
    cg_config_t cfg;
    cg_governor_t *gov;
    cg_mem_ops_t ops;
    void *a, *b, *c;

    fake_config(&cfg);
    cfg.fault_alloc = 2;
    gov = fake_governor(&cfg);
    ops = cg_governor_mem_ops(gov);
    a = cg_mem_alloc(&ops, CG_MEM_CAT_STAGING, 1000);
    b = cg_mem_alloc(&ops, CG_MEM_CAT_STAGING, 2000); /* 2nd: injected */
    c = cg_mem_alloc(&ops, CG_MEM_CAT_REGISTRATION, 3000);
    cr_assert_not_null(a);
    cr_assert_null(b);
    cr_assert(strstr(cg_last_error(), "CG_FAULT_ALLOC=2") != NULL,
              "message: %s", cg_last_error());
    cr_assert_not_null(c);
    cg_governor_snapshot(gov, &s);
    cr_assert_eq(s.current_bytes[CG_MEM_CAT_STAGING], 1000);
    cr_assert_eq(s.current_bytes[CG_MEM_CAT_REGISTRATION], 3000);
    cr_assert_eq(s.alloc_failures, 1);
    cg_mem_free(&ops, CG_MEM_CAT_STAGING, a, 1000);
    cg_mem_free(&ops, CG_MEM_CAT_REGISTRATION, c, 3000);
    cg_mem_free(&ops, CG_MEM_CAT_STAGING, NULL, 5); /* no-op */
    fake_destroy(gov);
}

Test(gov_alloc, bad_arguments_are_refused)
{
    cg_config_t cfg;
    cg_governor_t *gov;
    void *p = NULL;
    size_t got;

    fake_config(&cfg);
    gov = fake_governor(&cfg);
    cr_assert_eq(cg_governor_alloc(gov, CG_MEM_CAT_FUSION, 0, &p),
                 CG_ERR_INVALID_PARAM);
    cr_assert_eq(cg_governor_alloc(gov, CG_MEM_CAT_COUNT, 8, &p),
                 CG_ERR_INVALID_PARAM);
    cr_assert_eq(cg_governor_alloc_shrink(gov, CG_MEM_CAT_FUSION, 8, 8, 0,
                                          NULL, &p, NULL),
                 CG_ERR_INVALID_PARAM);
    cr_assert_eq(cg_governor_alloc_shrink(gov, CG_MEM_CAT_FUSION, 8, 8, 0,
                                          NULL, NULL, &got),
                 CG_ERR_INVALID_PARAM);
    cr_assert_null(p);
    fake_destroy(gov);
}

typedef struct worker {
    cg_governor_t *gov;
    int ok;
} worker_t;

static void *alloc_worker(void *arg)
{
    worker_t *w = arg;

    for (int i = 0; i < 2000; i++) {
        void *p = NULL;
        size_t got = 0;
        /* Other threads' attempts interleave with this one's, so the
         * injected failures may land on both floor tries: retry, as the
         * queue does, until it is had. */
        while (cg_governor_alloc_shrink(w->gov, CG_MEM_CAT_RING,
                                        (size_t)(i % 7 + 1) * 4096, 4096,
                                        4096, "CG_CHUNK_MIN", &p,
                                        &got) != CG_OK)
            ;
        memset(p, 1, got);
        cg_governor_free(w->gov, CG_MEM_CAT_RING, p, got);
        w->ok++;
    }
    return NULL;
}

/* Allocation from several threads while the background thread samples: the
 * host backend and no event callback (the fakes are single-threaded). */
Test(gov_alloc, threads_allocate_while_the_governor_samples)
{
    cg_governor_params_t p;
    cg_governor_snapshot_t s;
    cg_governor_t *gov = NULL;
    worker_t w[3];
    pthread_t t[3];
    cg_config_t cfg;

    fake_config(&cfg);
    cfg.fault_alloc = 4;
    fake_params(&p, &cfg);
    p.backend.alloc = NULL;
    p.event_cb = NULL;
    cr_assert_eq(cg_governor_create(&p, &gov), CG_OK, "%s", cg_last_error());
    for (int i = 0; i < 3; i++) {
        w[i] = (worker_t){gov, 0};
        pthread_create(&t[i], NULL, alloc_worker, &w[i]);
    }
    for (int i = 0; i < 200; i++) /* the probe reads fake.free: racy but */
        cg_governor_sample(gov);   /* only this thread writes it */
    for (int i = 0; i < 3; i++) {
        pthread_join(t[i], NULL);
        cr_assert_eq(w[i].ok, 2000, "worker %d: %d of 2000", i, w[i].ok);
    }
    cg_governor_snapshot(gov, &s);
    cr_assert_eq(s.current_bytes[CG_MEM_CAT_RING], 0);
    cr_assert_gt(s.alloc_failures, 0);
    fake_destroy(gov);
}

static void capture_line(void *arg, cg_log_level_t level, const char *line)
{
    char *buf = arg;
    (void)level;
    snprintf(buf, 256, "%s", line);
}

Test(gov_alloc, destroy_warns_when_buffers_are_still_live)
{
    cg_governor_params_t p;
    cg_governor_t *gov = NULL;
    char line[256] = "";
    cg_config_t cfg;
    cg_log_t log;
    void *buf = NULL;

    cg_log_init(&log, CG_LOG_WARN, 0);
    cg_log_set_sink(&log, capture_line, line);
    fake_config(&cfg);
    fake_params(&p, &cfg);
    p.log = &log;
    cr_assert_eq(cg_governor_create(&p, &gov), CG_OK, "%s", cg_last_error());
    cr_assert_eq(cg_governor_alloc(gov, CG_MEM_CAT_FUSION, 3 * MiB, &buf),
                 CG_OK, "%s", cg_last_error());
    cg_governor_destroy(gov); /* the buffer was never freed */
    cr_assert(strstr(line, "3 MiB of fusion memory still allocated") != NULL,
              "line: '%s'", line);
    fake_free(&fake, buf, 3 * MiB); /* hand it back for the .fini check */
}
