/* SPDX-License-Identifier: Apache-2.0 */
/*
 * CG_CTX_PARAM_PROBE (core/context.c): the application's probe sees the
 * built-in probe's reading first, what it reports is what the governor
 * decides by, an error it returns fails the sample with a message naming
 * the parameter, and a missing function is refused.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "collguard/collguard.h"

#define GiB (1ull << 30)

static const char *const host_env[] = {"CG_MEM_PROBE=host",
                                       "CG_LOG_LEVEL=none",
                                       "CG_MEM_RESERVE=1G", NULL};

typedef struct {
    int calls;
    uint64_t seen_free, seen_total; /* the built-in reading last seen */
    uint64_t report_free, report_total;
    cg_status_t status;
} probe_state_t;

static cg_status_t app_probe(void *arg, uint64_t *free_p, uint64_t *total_p)
{
    probe_state_t *p = arg;
    p->calls++;
    p->seen_free = *free_p;
    p->seen_total = *total_p;
    if (p->status != CG_OK)
        return p->status;
    *free_p = p->report_free;
    *total_p = p->report_total;
    return CG_OK;
}

static cg_status_t make(probe_state_t *p, cg_mem_probe_fn fn, cg_ctx_h *ctx)
{
    cg_ctx_params_t cp = {.field_mask = CG_CTX_PARAM_ENV | CG_CTX_PARAM_PROBE,
                          .env = host_env, .probe_fn = fn, .probe_arg = p};
    return cg_ctx_create(&cp, ctx);
}

Test(context_probe, governor_decides_by_what_the_application_reports)
{
    probe_state_t p = {.report_free = 1 * GiB, .report_total = 16 * GiB};
    cg_governor_snapshot_t s;
    cg_ctx_h ctx;

    cr_assert_eq(make(&p, app_probe, &ctx), CG_OK, "%s", cg_last_error());
    cr_assert_eq(cg_ctx_governor_snapshot(ctx, &s), CG_OK, "%s",
                 cg_last_error());
    cr_assert_eq(s.free_bytes, 1 * GiB, "free %llu",
                 (unsigned long long)s.free_bytes);
    cr_assert_eq(s.total_bytes, 16 * GiB, "total %llu",
                 (unsigned long long)s.total_bytes);
    /* 1 GiB free: below CG_PRESSURE_WARN (2 GiB). */
    cr_assert_eq(s.pressure, CG_PRESSURE_WARN, "pressure %d", s.pressure);
    /* budget = max(0, free - reserve) * fraction = 0 */
    cr_assert_eq(s.budget_bytes, 0, "budget %llu",
                 (unsigned long long)s.budget_bytes);
    cr_assert_geq(p.calls, 2, "calls %d", p.calls);
    cg_ctx_destroy(ctx);
}

Test(context_probe, sees_the_host_reading_first)
{
    probe_state_t p = {.report_free = 2 * GiB, .report_total = 16 * GiB};
    cg_ctx_h ctx;

    cr_assert_eq(make(&p, app_probe, &ctx), CG_OK, "%s", cg_last_error());
    cr_assert_gt(p.seen_total, 0, "the built-in reading was not passed in");
    cr_assert_leq(p.seen_free, p.seen_total, "free %llu > total %llu",
                  (unsigned long long)p.seen_free,
                  (unsigned long long)p.seen_total);
    cr_assert_neq(p.seen_total, 16 * GiB, "saw its own report, not the "
                  "host's");
    cg_ctx_destroy(ctx);
}

Test(context_probe, an_error_fails_the_sample_and_names_the_parameter)
{
    probe_state_t p = {.status = CG_ERR_IO};
    cg_ctx_h ctx = NULL;
    cg_status_t st = make(&p, app_probe, &ctx);

    cr_assert_eq(st, CG_ERR_IO, "create: %s", cg_status_name(st));
    cr_assert_not_null(strstr(cg_last_error(), "CG_CTX_PARAM_PROBE"), "%s",
                       cg_last_error());
    cr_assert_null(ctx, "no context on failure");
}

Test(context_probe, missing_function_is_refused)
{
    probe_state_t p = {0};
    cg_ctx_h ctx = NULL;
    cg_status_t st = make(&p, NULL, &ctx);

    cr_assert_eq(st, CG_ERR_INVALID_PARAM, "create: %s", cg_status_name(st));
    cr_assert_not_null(strstr(cg_last_error(), "probe_fn is NULL"), "%s",
                       cg_last_error());
}
