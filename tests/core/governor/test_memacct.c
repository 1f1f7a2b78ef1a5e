/* SPDX-License-Identifier: Apache-2.0 */
/* Units for core/governor/memacct.c: current and peak per category, failure and
 * injection counters, CONTROL never injected, the live-bytes warning on
 * cleanup, the default host backend's alignment, counting from many
 * threads at once, the GPU share of a device backend's bytes and peaks
 * reset to the current bytes. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/governor/memacct.h"

typedef struct sink {
    int lines;
    char last[256];
} sink_t;

static void sink_fn(void *arg, cg_log_level_t level, const char *line)
{
    sink_t *s = arg;
    (void)level;
    s->lines++;
    snprintf(s->last, sizeof(s->last), "%s", line);
}

/* A backend whose allocations fail while fail_next > 0. */
static int fail_next;
static void *flaky_alloc(void *arg, size_t size)
{
    (void)arg;
    if (fail_next > 0) {
        fail_next--;
        return NULL;
    }
    return malloc(size);
}
static void flaky_free(void *arg, void *ptr, size_t size)
{
    (void)arg;
    (void)size;
    free(ptr);
}

Test(memacct, current_and_peak_per_category)
{
    cg_memacct_t a;
    void *f1, *f2, *r;

    cg_memacct_init(&a, NULL, 0);
    f1 = cg_memacct_alloc(&a, CG_MEM_CAT_FUSION, 1000, NULL);
    f2 = cg_memacct_alloc(&a, CG_MEM_CAT_FUSION, 3000, NULL);
    r = cg_memacct_alloc(&a, CG_MEM_CAT_RING, 500, NULL);
    cr_assert(f1 && f2 && r);
    cr_assert_eq(cg_memacct_current(&a, CG_MEM_CAT_FUSION), 4000);
    cg_memacct_free(&a, CG_MEM_CAT_FUSION, f2, 3000);
    f2 = cg_memacct_alloc(&a, CG_MEM_CAT_FUSION, 2000, NULL);
    cr_assert_eq(cg_memacct_current(&a, CG_MEM_CAT_FUSION), 3000, "got %llu",
                 (unsigned long long)cg_memacct_current(&a,
                                                        CG_MEM_CAT_FUSION));
    cr_assert_eq(cg_memacct_peak(&a, CG_MEM_CAT_FUSION), 4000);
    cr_assert_eq(cg_memacct_peak(&a, CG_MEM_CAT_RING), 500);
    cr_assert_eq(cg_memacct_peak(&a, CG_MEM_CAT_STAGING), 0);
    cg_memacct_free(&a, CG_MEM_CAT_FUSION, f1, 1000);
    cg_memacct_free(&a, CG_MEM_CAT_FUSION, f2, 2000);
    cg_memacct_free(&a, CG_MEM_CAT_RING, r, 500);
    cg_memacct_free(&a, CG_MEM_CAT_RING, NULL, 500);
    cr_assert_eq(cg_memacct_cleanup(&a, NULL), 0);
    cr_assert_eq(cg_memacct_peak(&a, CG_MEM_CAT_FUSION), 4000);
}

/* A "device" backend over malloc: its bytes count as GPU memory too. */
static const cg_mem_backend_t fake_device = {flaky_alloc, flaky_free, NULL,
                                             1};

Test(memacct, device_bytes_are_split_out_and_peaks_reset_to_current)
{
    cg_memacct_t a;
    void *host, *dev, *dev2;

    cg_memacct_init(&a, NULL, 0);
    host = cg_memacct_alloc(&a, CG_MEM_CAT_FUSION, 1000, NULL);
    dev = cg_memacct_alloc_on(&a, &fake_device, CG_MEM_CAT_FUSION, 3000,
                              NULL);
    dev2 = cg_memacct_alloc_on(&a, &fake_device, CG_MEM_CAT_STAGING, 700,
                               NULL);
    cr_assert(host && dev && dev2);
    cr_assert_eq(cg_memacct_current(&a, CG_MEM_CAT_FUSION), 4000);
    cr_assert_eq(cg_memacct_device_current(&a, CG_MEM_CAT_FUSION), 3000);
    cr_assert_eq(cg_memacct_device_current(&a, CG_MEM_CAT_STAGING), 700);
    cg_memacct_free_on(&a, &fake_device, CG_MEM_CAT_FUSION, dev, 3000);
    cr_assert_eq(cg_memacct_device_current(&a, CG_MEM_CAT_FUSION), 0);
    cr_assert_eq(cg_memacct_device_peak(&a, CG_MEM_CAT_FUSION), 3000);
    cr_assert_eq(cg_memacct_peak(&a, CG_MEM_CAT_FUSION), 4000);

    cg_memacct_reset_peaks(&a);
    cr_assert_eq(cg_memacct_peak(&a, CG_MEM_CAT_FUSION), 1000);
    cr_assert_eq(cg_memacct_device_peak(&a, CG_MEM_CAT_FUSION), 0);
    cr_assert_eq(cg_memacct_device_peak(&a, CG_MEM_CAT_STAGING), 700);
    dev = cg_memacct_alloc_on(&a, &fake_device, CG_MEM_CAT_FUSION, 500,
                              NULL);
    cr_assert_not_null(dev);
    cr_assert_eq(cg_memacct_device_peak(&a, CG_MEM_CAT_FUSION), 500);
    cr_assert_eq(cg_memacct_peak(&a, CG_MEM_CAT_FUSION), 1500);
    cg_memacct_free_on(&a, &fake_device, CG_MEM_CAT_FUSION, dev, 500);
    cg_memacct_free_on(&a, &fake_device, CG_MEM_CAT_STAGING, dev2, 700);
    cg_memacct_free(&a, CG_MEM_CAT_FUSION, host, 1000);
    cr_assert_eq(cg_memacct_cleanup(&a, NULL), 0);
}

Test(memacct, every_nth_buffer_allocation_is_injected_control_never)
{
    cg_memacct_t a;
    void *p[9];
    int inj, injected = 0;

    cg_memacct_init(&a, NULL, 3);
    for (int i = 0; i < 9; i++) {
        void *c = cg_memacct_alloc(&a, CG_MEM_CAT_CONTROL, 16, &inj);
        cr_assert_not_null(c, "control %d injected", i);
        cg_memacct_free(&a, CG_MEM_CAT_CONTROL, c, 16);
        p[i] = cg_memacct_alloc(&a, CG_MEM_CAT_STAGING, 64, &inj);
        cr_assert_eq(p[i] == NULL, inj != 0, "alloc %d", i);
        cr_assert_eq(inj, (i + 1) % 3 == 0, "alloc %d: injected %d", i, inj);
        injected += inj;
    }
    cr_assert_eq(injected, 3);
    cr_assert_eq(cg_memacct_failures(&a), 3);
    cr_assert_eq(cg_memacct_injected(&a), 3);
    cr_assert_eq(cg_memacct_current(&a, CG_MEM_CAT_STAGING), 6 * 64);
    for (int i = 0; i < 9; i++)
        cg_memacct_free(&a, CG_MEM_CAT_STAGING, p[i], 64);
    cr_assert_eq(cg_memacct_cleanup(&a, NULL), 0);
}

Test(memacct, backend_failures_are_counted_not_injected)
{
    cg_mem_backend_t b = {flaky_alloc, flaky_free, NULL, 0};
    cg_memacct_t a;
    int inj = -1;
    void *p;

    cg_memacct_init(&a, &b, 0);
    fail_next = 2;
    cr_assert_null(cg_memacct_alloc(&a, CG_MEM_CAT_RING, 128, &inj));
    cr_assert_eq(inj, 0);
    cr_assert_null(cg_memacct_alloc(&a, CG_MEM_CAT_CONTROL, 128, NULL));
    p = cg_memacct_alloc(&a, CG_MEM_CAT_RING, 128, NULL);
    cr_assert_not_null(p);
    cr_assert_eq(cg_memacct_failures(&a), 2);
    cr_assert_eq(cg_memacct_injected(&a), 0);
    cr_assert_eq(cg_memacct_current(&a, CG_MEM_CAT_RING), 128);
    cg_memacct_free(&a, CG_MEM_CAT_RING, p, 128);
    cr_assert_eq(cg_memacct_cleanup(&a, NULL), 0);
}

Test(memacct, cleanup_warns_about_live_bytes_per_category)
{
    sink_t s = {0, ""};
    cg_memacct_t a;
    cg_log_t log;
    void *p;

    cg_log_init(&log, CG_LOG_WARN, 3);
    cg_log_set_sink(&log, sink_fn, &s);
    cg_memacct_init(&a, NULL, 0);
    p = cg_memacct_alloc(&a, CG_MEM_CAT_REGISTRATION, 2 << 20, NULL);
    cr_assert_eq(cg_memacct_cleanup(&a, &log), 2 << 20);
    cr_assert_eq(s.lines, 1, "got %d lines", s.lines);
    cr_assert(strstr(s.last, "2 MiB of registration memory still "
                     "allocated") != NULL, "line: %s", s.last);
    cg_memacct_free(&a, CG_MEM_CAT_REGISTRATION, p, 2 << 20);
}

Test(memacct, host_backend_aligns_to_64_bytes)
{
    cg_memacct_t a;
    void *p[8];

    cg_memacct_init(&a, NULL, 0);
    for (int i = 0; i < 8; i++) {
        p[i] = cg_memacct_alloc(&a, CG_MEM_CAT_FUSION, 1 + i * 13, NULL);
        cr_assert_eq((uintptr_t)p[i] % CG_MEM_HOST_ALIGN, 0, "%p", p[i]);
    }
    cr_assert_null(cg_memacct_alloc(&a, CG_MEM_CAT_FUSION, 0, NULL),
                   "0 bytes is refused");
    for (int i = 0; i < 8; i++)
        cg_memacct_free(&a, CG_MEM_CAT_FUSION, p[i], 1 + i * 13);
    cr_assert_eq(cg_memacct_cleanup(&a, NULL), 0);
    cr_assert_str_eq(cg_mem_cat_name(CG_MEM_CAT_REGISTRATION),
                     "registration");
}

enum { THREADS = 4, ROUNDS = 20000, HOLD = 4 };

static void *churn(void *arg)
{
    cg_memacct_t *a = arg;
    void *held[HOLD] = {0};

    for (int i = 0; i < ROUNDS; i++) {
        int k = i % HOLD;
        cg_memacct_free(a, CG_MEM_CAT_RING, held[k], 256);
        held[k] = cg_memacct_alloc(a, CG_MEM_CAT_RING, 256, NULL);
    }
    for (int k = 0; k < HOLD; k++)
        cg_memacct_free(a, CG_MEM_CAT_RING, held[k], 256);
    return NULL;
}

Test(memacct, counts_stay_exact_under_concurrent_threads)
{
    pthread_t t[THREADS];
    cg_memacct_t a;

    cg_memacct_init(&a, NULL, 5); /* injected NULLs are freed as no-ops */
    for (int i = 0; i < THREADS; i++)
        pthread_create(&t[i], NULL, churn, &a);
    for (int i = 0; i < THREADS; i++)
        pthread_join(t[i], NULL);
    cr_assert_eq(cg_memacct_current(&a, CG_MEM_CAT_RING), 0, "got %llu",
                 (unsigned long long)cg_memacct_current(&a, CG_MEM_CAT_RING));
    cr_assert_leq(cg_memacct_peak(&a, CG_MEM_CAT_RING), THREADS * HOLD * 256);
    cr_assert_gt(cg_memacct_peak(&a, CG_MEM_CAT_RING), 0);
    cr_assert_eq(cg_memacct_injected(&a), THREADS * ROUNDS / 5, "got %llu",
                 (unsigned long long)cg_memacct_injected(&a));
}
