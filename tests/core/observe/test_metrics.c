/* SPDX-License-Identifier: Apache-2.0 */
/*
 * core/observe/metrics.c: the Prometheus text (every family once, with HELP and
 * TYPE, a rank label on every series, escaped label values, the shim's
 * counters only when given), the snprintf-style length, the path template,
 * the start-time directory check, the period, and the atomic rewrite that
 * survives a directory that disappears and comes back.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/observe/metrics.h"
#include "tests/core/util/gov_fake.h"

TestSuite(metrics, .init = gov_fake_init, .fini = gov_fake_fini,
          .timeout = 30);

static char tmpl[] = "/tmp/cg_metrics_XXXXXX";

static const char *tmpdir(void)
{
    cr_assert_not_null(mkdtemp(tmpl), "mkdtemp failed");
    return tmpl;
}

static cg_governor_snapshot_t snap_example(void)
{
    cg_governor_snapshot_t s = {0};
    s.free_bytes = 3 * GiB;
    s.total_bytes = 16 * GiB;
    s.budget_bytes = 123456789;
    s.pressure = CG_PRESSURE_WARN;
    s.oom_eta_s = -1.0;
    s.current_bytes[CG_MEM_CAT_FUSION] = 1 * MiB;
    s.peak_bytes[CG_MEM_CAT_RING] = 7;
    return s;
}

static size_t count(const char *hay, const char *needle)
{
    size_t n = 0;
    for (const char *p = strstr(hay, needle); p; p = strstr(p + 1, needle))
        n++;
    return n;
}

Test(metrics, every_family_once_with_rank_label)
{
    cg_governor_snapshot_t s = snap_example();
    cg_hvd_stats_t st = {.cycles = 42, .fused_bytes = 4096};
    static char buf[32768];
    size_t need = cg_metrics_format(buf, sizeof(buf), 3, "host", &s, &st);

    cr_assert_eq(need, strlen(buf) + 1, "need %zu, text %zu", need,
                 strlen(buf));
    cr_assert(strstr(buf, "collguard_governor_budget_bytes{rank=\"3\"} "
                          "123456789\n"), "%s", buf);
    cr_assert(strstr(buf, "collguard_governor_pressure_level{rank=\"3\"} 1\n"));
    cr_assert(strstr(buf, "collguard_memory_current_bytes{rank=\"3\","
                          "category=\"fusion\"} 1048576\n"));
    cr_assert(strstr(buf, "collguard_memory_peak_bytes{rank=\"3\","
                          "category=\"ring\"} 7\n"));
    cr_assert(strstr(buf, "collguard_hvd_cycles_total{rank=\"3\"} 42\n"));
    cr_assert(strstr(buf, "collguard_hvd_fused_bytes_total{rank=\"3\"} "
                          "4096\n"));
    /* One TYPE per family; every sample line carries the rank. */
    cr_assert_eq(count(buf, "# TYPE collguard_memory_peak_bytes "), 1);
    cr_assert_eq(count(buf, "# HELP "), count(buf, "# TYPE "), "HELP %zu "
                 "TYPE %zu", count(buf, "# HELP "), count(buf, "# TYPE "));
    cr_assert_eq(count(buf, "{rank=\"3\""), count(buf, "\n") -
                 2 * count(buf, "# TYPE "), "series without a rank label");
}

Test(metrics, no_shim_counters_without_stats)
{
    cg_governor_snapshot_t s = snap_example();
    static char buf[32768];

    cg_metrics_format(buf, sizeof(buf), 0, "host", &s, NULL);
    cr_assert_null(strstr(buf, "collguard_hvd_"), "%s", buf);
    cr_assert_not_null(strstr(buf, "collguard_memory_free_bytes{rank=\"0\"} "
                                   "3221225472\n"), "%s", buf);
}

Test(metrics, short_buffer_reports_the_length_needed)
{
    cg_governor_snapshot_t s = snap_example();
    char small[40];
    static char big[32768];
    size_t need = cg_metrics_format(small, sizeof(small), 0, "host", &s,
                                    NULL);
    size_t full = cg_metrics_format(big, sizeof(big), 0, "host", &s, NULL);

    cr_assert_eq(need, full, "short %zu, full %zu", need, full);
    cr_assert_lt(strlen(small), sizeof(small), "not terminated");
    cr_assert_eq(strncmp(small, big, strlen(small)), 0, "prefix differs");
}

Test(metrics, label_values_are_escaped)
{
    cg_governor_snapshot_t s = snap_example();
    static char buf[32768];

    cg_metrics_format(buf, sizeof(buf), 0, "a\"b\\c\nd", &s, NULL);
    cr_assert_not_null(strstr(buf, "memory=\"a\\\"b\\\\c\\nd\"} 1\n"), "%s",
                       buf);
}

static cg_metrics_t *make(cg_governor_t *gov, const char *tpl, int rank,
                          cg_status_t want)
{
    cg_metrics_params_t p = {tpl, rank, 100 * MS, gov, "fake", NULL};
    cg_metrics_t *m = NULL;
    cg_status_t st = cg_metrics_create(&p, &m);

    cr_assert_eq(st, want, "create(%s): %s: %s", tpl, cg_status_name(st),
                 cg_last_error());
    return m;
}

Test(metrics, path_template_takes_the_rank)
{
    cg_config_t cfg;
    fake_config(&cfg);
    fake.free = 8 * GiB;
    fake.total = 16 * GiB;
    cg_governor_t *gov = fake_governor(&cfg);
    char tpl[128], want[128];

    snprintf(tpl, sizeof(tpl), "%s/m.%%r.100%%%%.prom", tmpdir());
    snprintf(want, sizeof(want), "%s/m.7.100%%.prom", tmpl);
    cg_metrics_t *m = make(gov, tpl, 7, CG_OK);
    cr_assert_str_eq(cg_metrics_path(m), want);
    cg_metrics_destroy(m);
    rmdir(tmpl);
    fake_destroy(gov);
}

Test(metrics, bad_template_or_directory_is_a_config_error)
{
    cg_config_t cfg;
    fake_config(&cfg);
    fake.free = 8 * GiB;
    fake.total = 16 * GiB;
    cg_governor_t *gov = fake_governor(&cfg);

    make(gov, "/tmp/m.%x.prom", 0, CG_ERR_CONFIG);
    cr_assert(strstr(cg_last_error(), "CG_METRICS_FILE") &&
              strstr(cg_last_error(), "%r is the rank"), "%s",
              cg_last_error());
    make(gov, "/nonexistent/dir/m.prom", 0, CG_ERR_CONFIG);
    cr_assert(strstr(cg_last_error(), "/nonexistent/dir/m.prom.tmp.") &&
              strstr(cg_last_error(), "No such file"), "%s",
              cg_last_error());
    fake_destroy(gov);
}

Test(metrics, write_is_due_once_per_period)
{
    cg_config_t cfg;
    fake_config(&cfg);
    fake.free = 8 * GiB;
    fake.total = 16 * GiB;
    cg_governor_t *gov = fake_governor(&cfg);
    char tpl[128];

    snprintf(tpl, sizeof(tpl), "%s/m.prom", tmpdir());
    cg_metrics_t *m = make(gov, tpl, 0, CG_OK);
    cr_assert(cg_metrics_due(m, 5 * MS), "first write not due");
    cr_assert_eq(cg_metrics_write(m, NULL, 5 * MS), CG_OK, "%s",
                 cg_last_error());
    cr_assert_not(cg_metrics_due(m, 104 * MS), "due before the period");
    cr_assert(cg_metrics_due(m, 105 * MS), "not due after the period");
    cg_metrics_destroy(m);
    unlink(tpl);
    rmdir(tmpl);
    fake_destroy(gov);
}

Test(metrics, rewrite_is_atomic_and_survives_a_lost_directory)
{
    cg_config_t cfg;
    fake_config(&cfg);
    fake.free = 8 * GiB;
    fake.total = 16 * GiB;
    cg_governor_t *gov = fake_governor(&cfg);
    char tpl[128], line[128];
    cg_hvd_stats_t st = {.cycles = 9};

    snprintf(tpl, sizeof(tpl), "%s/m.prom", tmpdir());
    cg_metrics_t *m = make(gov, tpl, 0, CG_OK);
    cr_assert_eq(cg_metrics_write(m, &st, 1), CG_OK, "%s", cg_last_error());
    cr_assert_neq(access(tpl, R_OK), -1, "%s not written", tpl);
    cr_assert_eq(unlink(tpl), 0);
    cr_assert_eq(rmdir(tmpl), 0, "a temporary file was left behind");
    cr_assert_eq(cg_metrics_write(m, &st, 2), CG_ERR_IO, "lost dir: %s",
                 cg_last_error());
    cr_assert_eq(mkdir(tmpl, 0700), 0);
    cr_assert_eq(cg_metrics_write(m, &st, 3), CG_OK, "%s", cg_last_error());
    FILE *f = fopen(tpl, "r");
    cr_assert_not_null(f);
    cr_assert_not_null(fgets(line, sizeof(line), f));
    fclose(f);
    cr_assert_eq(strncmp(line, "# HELP collguard_info ", 22), 0, "%s", line);
    cg_metrics_destroy(m);
    unlink(tpl);
    rmdir(tmpl);
    fake_destroy(gov);
}

static const char *env_of(void *arg, const char *name)
{
    const char *const *kv = arg;
    for (; kv[0] != NULL; kv += 2)
        if (strcmp(kv[0], name) == 0)
            return kv[1];
    return NULL;
}

Test(metrics, config_rows_parse_and_bound)
{
    static char longpath[300];
    const char *ok[] = {"CG_METRICS_FILE", "/x/m.%r.prom",
                        "CG_METRICS_PERIOD", "2", NULL};
    const char *fast[] = {"CG_METRICS_PERIOD", "5ms", NULL};
    const char *too_long[] = {"CG_METRICS_FILE", longpath, NULL};
    cg_config_t cfg;

    cr_assert_eq(cg_config_load(&cfg, env_of, ok, NULL, NULL), CG_OK, "%s",
                 cg_last_error());
    cr_assert_str_eq(cfg.metrics_file, "/x/m.%r.prom");
    cr_assert_eq(cfg.metrics_period_ns, 2000000000ull, "period %llu",
                 (unsigned long long)cfg.metrics_period_ns);
    cr_assert_eq(cg_config_load(&cfg, env_of, fast, NULL, NULL),
                 CG_ERR_CONFIG, "5ms accepted");
    cr_assert(strstr(cg_last_error(), "CG_METRICS_PERIOD"), "%s",
              cg_last_error());
    memset(longpath, 'a', 256);
    cr_assert_eq(cg_config_load(&cfg, env_of, too_long, NULL, NULL),
                 CG_ERR_CONFIG, "256 characters accepted");
    cr_assert(strstr(cg_last_error(), "at most 255 characters"), "%s",
              cg_last_error());
    cg_config_defaults(&cfg);
    cr_assert_str_eq(cfg.metrics_file, "", "default not empty");
}
