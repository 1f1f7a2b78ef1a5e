/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Reading the configuration from the environment: defaults, each row's
 * name and aliases, the error that names a malformed value and its form,
 * the cross-field rules a single row cannot express, and the warning (with
 * the nearest known name) for an unknown CG_* variable.
 * Layer: core/config; calls core/base only.
 */
#include "core/config/config_impl.h"

#include <stdlib.h>
#include <string.h>

#include "core/base/error.h"

void cg_config_defaults(cg_config_t *cfg)
{
    memset(cfg, 0, sizeof(*cfg));
    for (int i = 0; i < CG_CFG_COUNT; i++) {
        const cg__field_t *f = &cg__config_fields[i];
        bool ok = cg__config_parse_field(f, f->defval, cfg);
        (void)ok; /* defaults are tested to parse (tests/core/config/) */
    }
}

static const char *cg__process_getenv(void *arg, const char *name)
{
    (void)arg;
    return getenv(name);
}

/* Cross-field rules a single field cannot express. */
static cg_status_t cg__config_check(const cg_config_t *cfg)
{
    const cg_size_or_frac_t *crit = &cfg->pressure_critical,
                            *warn = &cfg->pressure_warn;

    /* Of one kind they compare here; a size against a share only against
     * a total, which the governor checks at its first reading. */
    if ((crit->fraction >= 0.0) == (warn->fraction >= 0.0) &&
        (crit->fraction >= 0.0 ? crit->fraction > warn->fraction
                               : crit->bytes > warn->bytes)) {
        char c[32], w[32];
        return cg_error_set(CG_ERR_CONFIG,
                            "CG_PRESSURE_CRITICAL (%s) must not exceed "
                            "CG_PRESSURE_WARN (%s)",
                            cg_config_format_size(crit, c, sizeof(c)),
                            cg_config_format_size(warn, w, sizeof(w)));
    }
    if (cfg->timeout_ns < 1000000000ull)
        return cg_error_set(CG_ERR_CONFIG,
                            "CG_TIMEOUT must be at least 1s (got %.3fs)",
                            cfg->timeout_ns / 1e9);
    if (cfg->probe_interval_ns == 0)
        return cg_error_set(CG_ERR_CONFIG, "CG_PROBE_INTERVAL must be > 0");
    if (cfg->stall_check_ns < 1000000ull)
        return cg_error_set(CG_ERR_CONFIG, "CG_STALL_CHECK_TIME (or "
                            "HOROVOD_STALL_CHECK_TIME_SECONDS) must be at "
                            "least 1ms (got %.3fms); CG_STALL_CHECK_DISABLE=1 "
                            "turns the check off", cfg->stall_check_ns / 1e6);
    if (cfg->metrics_period_ns < 10000000ull)
        return cg_error_set(CG_ERR_CONFIG, "CG_METRICS_PERIOD must be at "
                            "least 10ms (got %.3fms)",
                            cfg->metrics_period_ns / 1e6);
    if (cfg->oom_window_ns < cfg->probe_interval_ns)
        return cg_error_set(CG_ERR_CONFIG,
                            "CG_OOM_WINDOW must be at least "
                            "CG_PROBE_INTERVAL");
    if (cfg->shm_slot != 0 &&
        (cfg->shm_slot < (64u << 10) || cfg->shm_slot > (1ull << 30)))
        return cg_error_set(CG_ERR_CONFIG, "CG_SHM_SLOT must be 0 (off) or "
                            "64KiB..1GiB (got %llu bytes)",
                            (unsigned long long)cfg->shm_slot);
    if (cfg->chunk_min == 0 || cfg->chunk_size < cfg->chunk_min)
        return cg_error_set(CG_ERR_CONFIG,
                            "CG_CHUNK_MIN must be > 0 and at most "
                            "CG_CHUNK_SIZE");
    if (cfg->nccl_buffsize_min == 0 ||
        cfg->nccl_buffsize < cfg->nccl_buffsize_min)
        return cg_error_set(CG_ERR_CONFIG,
                            "CG_NCCL_BUFFSIZE_MIN must be > 0 and at most "
                            "NCCL_BUFFSIZE");
    return CG_OK;
}

static void cg__warn_unknown(const char *const *env_names, const cg_log_t *log)
{
    for (const char *const *e = env_names; *e != NULL; e++) {
        char name[128];
        size_t n = strcspn(*e, "=");
        if (strncmp(*e, "CG_", 3) != 0 || n >= sizeof(name))
            continue;
        memcpy(name, *e, n);
        name[n] = '\0';
        bool known = false;
        for (int i = 0; i < CG_CFG_COUNT && !known; i++)
            known = strcmp(cg__config_fields[i].name, name) == 0;
        /* CG_TEST_* belong to the tests, CG_RUN_* to the launcher. */
        if (known || strncmp(name, "CG_TEST_", 8) == 0 ||
            strncmp(name, "CG_RUN_", 7) == 0)
            continue;
        const char *s = cg_config_suggest(name);
        if (s != NULL)
            cg_warn(log, "unknown variable %s ignored; did you mean %s?", name,
                    s);
        else
            cg_warn(log, "unknown variable %s ignored (collguard-info -c "
                         "lists them all)",
                    name);
    }
}

cg_status_t cg_config_load(cg_config_t *cfg, cg_getenv_fn getenv_fn,
                           void *getenv_arg, const char *const *env_names,
                           const cg_log_t *log)
{
    if (getenv_fn == NULL)
        getenv_fn = cg__process_getenv;
    cg_config_defaults(cfg);

    for (int i = 0; i < CG_CFG_COUNT; i++) {
        const cg__field_t *f = &cg__config_fields[i];
        const char *used = f->name, *value = getenv_fn(getenv_arg, f->name);

        for (int a = 0; a < 2 && f->aliases[a] != NULL; a++) {
            const char *av = getenv_fn(getenv_arg, f->aliases[a]);
            if (av == NULL)
                continue;
            if (value == NULL) {
                used = f->aliases[a];
                value = av;
            } else if (strcmp(av, value) != 0) {
                cg_warn(log, "%s=%s and %s=%s both set; using %s", used, value,
                        f->aliases[a], av, used);
            }
        }
        if (value == NULL)
            continue;
        if (!cg__config_parse_field(f, value, cfg)) {
            char form[160];
            cg_status_t st = cg_error_set(
                CG_ERR_CONFIG, "invalid value '%s' for %s: expected %s", value,
                used, cg__config_accepted_form(f, form, sizeof(form)));
            cg_error(log, "%s", cg_last_error());
            cg__config_parse_field(f, f->defval, cfg);
            return st;
        }
        cfg->set_by_user[i] = true;
    }
    if (env_names != NULL)
        cg__warn_unknown(env_names, log);
    cg_status_t st = cg__config_check(cfg);
    if (st != CG_OK)
        cg_error(log, "%s", cg_last_error());
    return st;
}

const char *cg_config_list_getenv(void *arg, const char *name)
{
    const char *const *env = arg;
    size_t n = strlen(name);

    for (; *env != NULL; env++)
        if (strncmp(*env, name, n) == 0 && (*env)[n] == '=')
            return *env + n + 1;
    return NULL;
}

/* Levenshtein distance, small strings only. */
static unsigned cg__edit_distance(const char *a, const char *b)
{
    unsigned row[64], la = (unsigned)strlen(a), lb = (unsigned)strlen(b);
    if (la >= 63 || lb >= 63)
        return 99;
    for (unsigned j = 0; j <= lb; j++)
        row[j] = j;
    for (unsigned i = 1; i <= la; i++) {
        unsigned prev = row[0];
        row[0] = i;
        for (unsigned j = 1; j <= lb; j++) {
            unsigned cur = row[j];
            unsigned sub = prev + (a[i - 1] != b[j - 1]);
            unsigned m = row[j] + 1 < row[j - 1] + 1 ? row[j] + 1
                                                     : row[j - 1] + 1;
            row[j] = sub < m ? sub : m;
            prev = cur;
        }
    }
    return row[lb];
}

const char *cg_config_suggest(const char *unknown)
{
    const char *best = NULL;
    unsigned best_d = 4; /* suggest only close names */
    for (int i = 0; i < CG_CFG_COUNT; i++) {
        unsigned d = cg__edit_distance(unknown, cg__config_fields[i].name);
        if (d < best_d) {
            best_d = d;
            best = cg__config_fields[i].name;
        }
    }
    return best;
}
