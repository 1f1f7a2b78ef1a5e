/* SPDX-License-Identifier: Apache-2.0 */
/* Units for core/config/ and core/base/parse.c: defaults, good and bad
 * values, aliases, unknown-name suggestions. */
#include <criterion/criterion.h>
#include <string.h>

#include "core/base/error.h"
#include "core/base/parse.h"
#include "core/config/config.h"
#include "tests/core/util/config_env.h"

Test(config, defaults_parse_and_are_documented)
{
    const char *env[] = {NULL};
    cg_config_t cfg;
    cr_assert_eq(tc_config_load(&cfg, env), CG_OK);
    cr_assert_eq(cfg.fusion_threshold, 128ull << 20);
    cr_assert_eq(cfg.chunk_size, 4ull << 20);
    cr_assert_eq(cfg.chunk_min, 64ull << 10);
    /* no reserve; pressure by absolute headroom, whatever the total */
    cr_assert_eq(cg_config_resolve_size(&cfg.mem_reserve, 141ull << 30), 0);
    cr_assert_eq(cg_config_resolve_size(&cfg.pressure_warn, 141ull << 30),
                 2ull << 30);
    cr_assert_eq(cg_config_resolve_size(&cfg.pressure_critical, 16ull << 30),
                 512ull << 20);
    cr_assert_eq(cg_config_resolve_size(&cfg.pressure_hysteresis, 1ull << 40),
                 256ull << 20);
    cr_assert_float_eq(cfg.mem_fraction, 0.25, 1e-12);
    cr_assert_eq(cfg.timeout_ns, 30000000000ull);
    cr_assert_eq(cfg.oom_window_ns, 5000000000ull);
    cr_assert_eq(cfg.log_level, CG_LOG_WARN);
    for (int i = 0; i < CG_CFG_COUNT; i++)
        cr_assert_not(cfg.set_by_user[i], "%s", cg_config_name(i));
}

Test(config, sizes_in_every_accepted_form)
{
    static const struct { const char *s; uint64_t v; } ok[] = {
        {"0", 0}, {"1048576", 1048576}, {"4M", 4 << 20}, {"4m", 4 << 20},
        {"64MiB", 64 << 20}, {"64MB", 64 << 20}, {"1G", 1ull << 30},
        {"1.5G", 3ull << 29}, {"512 KiB", 512 << 10}, {"2T", 2ull << 40},
        {"7B", 7}};
    for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
        uint64_t v = 1;
        cr_assert(cg_parse_size(ok[i].s, &v), "'%s' rejected", ok[i].s);
        cr_assert_eq(v, ok[i].v, "'%s' -> %llu", ok[i].s,
                     (unsigned long long)v);
    }
}

Test(config, bad_sizes_are_rejected)
{
    static const char *bad[] = {"", "abc", "-1", "+4M", "1e99", "4X",
                                "4MiBs", "1.5", "0x10", "inf", "nan",
                                "99999999999T", "4 M M"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        uint64_t v;
        cr_assert_not(cg_parse_size(bad[i], &v), "'%s' accepted", bad[i]);
    }
}

Test(config, malformed_value_names_variable_and_form)
{
    const char *env[] = {"CG_MEM_RESERVE=abc", NULL};
    cg_config_t cfg;
    cr_assert_eq(tc_config_load(&cfg, env), CG_ERR_CONFIG);
    cr_assert(strstr(cg_last_error(), "CG_MEM_RESERVE") != NULL, "%s",
              cg_last_error());
    cr_assert(strstr(cg_last_error(), "'abc'") != NULL, "%s", cg_last_error());
    cr_assert(strstr(cg_last_error(), "percentage") != NULL, "%s",
              cg_last_error());
}

Test(config, negative_and_huge_are_errors_not_defaults)
{
    const char *neg[] = {"CG_CHUNK_SIZE=-4M", NULL};
    const char *huge[] = {"HOROVOD_FUSION_THRESHOLD=1e99", NULL};
    cg_config_t cfg;
    cr_assert_eq(tc_config_load(&cfg, neg), CG_ERR_CONFIG);
    cr_assert(strstr(cg_last_error(), "CG_CHUNK_SIZE") != NULL);
    cr_assert_eq(tc_config_load(&cfg, huge), CG_ERR_CONFIG);
    cr_assert(strstr(cg_last_error(), "HOROVOD_FUSION_THRESHOLD") != NULL,
              "%s", cg_last_error());
}

Test(config, horovod_and_nccl_aliases)
{
    const char *env[] = {"HOROVOD_FUSION_THRESHOLD=67108864",
                         "NCCL_BUFFSIZE=2M", NULL};
    cg_config_t cfg;
    cr_assert_eq(tc_config_load(&cfg, env), CG_OK);
    cr_assert_eq(cfg.fusion_threshold, 64ull << 20);
    cr_assert_eq(cfg.nccl_buffsize, 2ull << 20);
    cr_assert(cfg.set_by_user[CG_CFG_FUSION_THRESHOLD]);
    cr_assert(cfg.set_by_user[CG_CFG_NCCL_BUFFSIZE]);
}

Test(config, cg_name_wins_over_alias)
{
    const char *env[] = {"CG_FUSION_THRESHOLD=0",
                         "HOROVOD_FUSION_THRESHOLD=64M", NULL};
    cg_config_t cfg;
    cr_assert_eq(tc_config_load(&cfg, env), CG_OK);
    cr_assert_eq(cfg.fusion_threshold, 0);
}

Test(config, reserve_as_size_or_percentage)
{
    const char *pct[] = {"CG_MEM_RESERVE=10%", NULL};
    const char *abs[] = {"CG_MEM_RESERVE=2GiB", NULL};
    cg_config_t cfg;
    cr_assert_eq(tc_config_load(&cfg, pct), CG_OK);
    cr_assert_eq(cg_config_resolve_size(&cfg.mem_reserve, 1000), 100);
    cr_assert_eq(tc_config_load(&cfg, abs), CG_OK);
    cr_assert_eq(cg_config_resolve_size(&cfg.mem_reserve, 1000), 2ull << 30);
}

Test(config, fractions_and_durations)
{
    const char *env[] = {"CG_MEM_FRACTION=0.5", "CG_OOM_WINDOW=2500ms",
                         "CG_PROBE_INTERVAL=20", "CG_TIMEOUT=1", NULL};
    cg_config_t cfg;
    cr_assert_eq(tc_config_load(&cfg, env), CG_OK);
    cr_assert_float_eq(cfg.mem_fraction, 0.5, 1e-12);
    cr_assert_eq(cfg.oom_window_ns, 2500000000ull);
    cr_assert_eq(cfg.probe_interval_ns, 20000000ull); /* bare ms */
    cr_assert_eq(cfg.timeout_ns, 1000000000ull);      /* bare s */
    const char *over[] = {"CG_MEM_FRACTION=150%", NULL};
    cr_assert_eq(tc_config_load(&cfg, over), CG_ERR_CONFIG);
    const char *tiny[] = {"CG_TIMEOUT=10ms", NULL};
    cr_assert_eq(tc_config_load(&cfg, tiny), CG_ERR_CONFIG);
    cr_assert(strstr(cg_last_error(), "at least 1s") != NULL);
}

Test(config, enums_accept_names_only)
{
    const char *ok[] = {"CG_TRANSPORT=SOCKET", "CG_LOG_LEVEL=debug", NULL};
    const char *bad[] = {"CG_TRANSPORT=tcpp", NULL};
    cg_config_t cfg;
    cr_assert_eq(tc_config_load(&cfg, ok), CG_OK);
    cr_assert_eq(cfg.transport, CG_TRANSPORT_SOCKET);
    cr_assert_eq(cfg.log_level, CG_LOG_DEBUG);
    cr_assert_eq(tc_config_load(&cfg, bad), CG_ERR_CONFIG);
    cr_assert(strstr(cg_last_error(), "one of auto, ucx, socket") != NULL,
              "%s", cg_last_error());
}

Test(config, integer_bounds)
{
    const char *bad[] = {"CG_SOCKET_NSOCKS=0", NULL};
    const char *ok[] = {"CG_SOCKET_NSOCKS=4", "CG_FAULT_ALLOC=3", NULL};
    cg_config_t cfg;
    cr_assert_eq(tc_config_load(&cfg, bad), CG_ERR_CONFIG);
    cr_assert(strstr(cg_last_error(), "from 1 to 16") != NULL);
    cr_assert_eq(tc_config_load(&cfg, ok), CG_OK);
    cr_assert_eq(cfg.socket_nsocks, 4);
    cr_assert_eq(cfg.fault_alloc, 3);
}

Test(config, inconsistent_thresholds_rejected)
{
    const char *env[] = {"CG_PRESSURE_WARN=5%", "CG_PRESSURE_CRITICAL=10%",
                         NULL};
    const char *sizes[] = {"CG_PRESSURE_CRITICAL=3G", NULL}; /* warn 2 GiB */
    cg_config_t cfg;
    cr_assert_eq(tc_config_load(&cfg, env), CG_ERR_CONFIG);
    cr_assert_str_eq(cg_last_error(), "CG_PRESSURE_CRITICAL (10%) must not "
                     "exceed CG_PRESSURE_WARN (5%)");
    cr_assert_eq(tc_config_load(&cfg, sizes), CG_ERR_CONFIG);
    cr_assert_str_eq(cg_last_error(), "CG_PRESSURE_CRITICAL (3 GiB) must not "
                     "exceed CG_PRESSURE_WARN (2 GiB)");
}

Test(config, pressure_thresholds_as_size_or_percentage)
{
    const char *env[] = {"CG_PRESSURE_WARN=10%", "CG_PRESSURE_CRITICAL=1G",
                         "CG_PRESSURE_HYSTERESIS=64MiB", NULL};
    const char *bare[] = {"CG_PRESSURE_WARN=0.1", NULL};
    cg_config_t cfg;

    cr_assert_eq(tc_config_load(&cfg, env), CG_OK, "%s", cg_last_error());
    cr_assert_eq(cg_config_resolve_size(&cfg.pressure_warn, 1000), 100);
    cr_assert_eq(cg_config_resolve_size(&cfg.pressure_critical, 1000),
                 1ull << 30);
    cr_assert_eq(cg_config_resolve_size(&cfg.pressure_hysteresis, 1000),
                 64ull << 20);
    cr_assert(cfg.set_by_user[CG_CFG_PRESSURE_WARN]);
    /* loaded although 1 GiB exceeds 10% of a total under 10 GiB: a size
     * and a share compare only against a total, which the governor does
     * at its first reading (tests/core/governor/test_governor.c) */
    /* a bare fraction is no longer a share: an error, not 0 bytes */
    cr_assert_eq(tc_config_load(&cfg, bare), CG_ERR_CONFIG);
    cr_assert(strstr(cg_last_error(), "for CG_PRESSURE_WARN: expected a size "
                     "(512M, 1GiB) or a percentage of total memory (5%)"),
              "%s", cg_last_error());
}

Test(config, unknown_names_get_suggestions)
{
    cr_assert_str_eq(cg_config_suggest("CG_MEM_RESERV"), "CG_MEM_RESERVE");
    cr_assert_str_eq(cg_config_suggest("CG_CHUNKSIZE"), "CG_CHUNK_SIZE");
    cr_assert_null(cg_config_suggest("CG_SOMETHING_ELSE_ENTIRELY"));
}

Test(error, wrapping_the_last_error_keeps_it_intact)
{
    cg_error_set(CG_ERR_IO, "inner cause %d", 42);
    cr_assert_eq(cg_error_set(CG_ERR_CONFIG, "outer: %s", cg_last_error()),
                 CG_ERR_CONFIG);
    cr_assert_str_eq(cg_last_error(), "outer: inner cause 42");
    cr_assert_str_eq(cg_status_name(CG_ERR_TIMEOUT), "CG_ERR_TIMEOUT");
    cr_assert_str_eq(cg_status_string(CG_ERR_PEER_RESET),
                     "connection closed or reset by peer");
    cr_assert(CG_STATUS_IS_PEER_FAILURE(CG_ERR_HANDSHAKE));
    cr_assert_not(CG_STATUS_IS_PEER_FAILURE(CG_ERR_CONFIG));
}
