/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer target for every parser of an environment value: the strict
 * parsers of core/base/parse.c, the configuration table's load
 * (core/config/: every field, its aliases, the cross-field rules, the
 * unknown-name suggestion, the printout of what was parsed) and the
 * bootstrap's launcher detection (transport/bootstrap_env.c).
 * Input: lines; a line whose first byte is below 0x80 sets the table's
 * variable number byte % CG_CFG_COUNT to the rest of the line, any other
 * line is taken whole as "NAME=value" (aliases, launcher variables).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/parse.h"
#include "core/config/config.h"
#include "transport/bootstrap.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CG__FZ_VARS 24

static void cg__fz_die(const char *what, const char *value)
{
    fprintf(stderr, "fuzz_config: %s ('%s')\n", what, value);
    abort();
}

/* Each strict parser on one value; what they accept must hold. */
static void cg__fz_parsers(const char *v)
{
    uint64_t u;
    int64_t i;
    double d;
    bool b;
    char buf[32];

    if (cg_parse_size(v, &u))
        cg_format_size(u, buf, sizeof(buf));
    if (cg_parse_fraction(v, &d) && !(d >= 0.0 && d <= 1.0))
        cg__fz_die("fraction outside [0, 1]", v);
    (void)cg_parse_duration(v, 1000000ull, &u);
    (void)cg_parse_bool(v, &b);
    if (cg_parse_int(v, -5, 77, &i) && (i < -5 || i > 77))
        cg__fz_die("integer outside its range", v);
    if (cg_parse_int(v, INT64_MIN, INT64_MAX, &i))
        snprintf(buf, sizeof(buf), "%lld", (long long)i);
}

static void cg__fz_bootstrap(char **env)
{
    cg_bootstrap_env_t e;
    cg_status_t st = cg_bootstrap_detect(cg_config_list_getenv, env,
                                         CG_BOOTSTRAP_MPI_OFF, &e);

    if (st != CG_OK && st != CG_ERR_CONFIG)
        cg__fz_die("bootstrap detection: neither OK nor CONFIG", "");
    if (st == CG_OK &&
        (e.size < 1 || e.size > CG_BOOTSTRAP_SIZE_MAX || e.rank < 0 ||
         e.rank >= e.size || e.local_rank < 0 ||
         e.local_rank >= e.local_size || e.local_size > e.size ||
         memchr(e.host, '\0', sizeof(e.host)) == NULL ||
         (e.size > 1 && (e.port < 1 || e.port > 65535))))
        cg__fz_die("bootstrap detection accepted an impossible job", e.host);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *copy = malloc(size + 1), *env[CG__FZ_VARS + 1], *line, *save;
    int n = 0;
    cg_config_t cfg;
    cg_status_t st;
    FILE *out;

    if (copy == NULL)
        return 0;
    memcpy(copy, data, size);
    copy[size] = '\0';
    for (line = strtok_r(copy, "\n", &save); line != NULL && n < CG__FZ_VARS;
         line = strtok_r(NULL, "\n", &save)) {
        unsigned char sel = (unsigned char)line[0];
        const char *name = cg_config_name((cg_config_id_t)(sel % CG_CFG_COUNT));
        char *value = line + 1;

        if (sel >= 0x80) {
            env[n] = strdup(value);
            value = strchr(value, '=') ? strchr(value, '=') + 1 : value;
        } else if ((env[n] = malloc(strlen(name) + strlen(value) + 2)) != NULL) {
            sprintf(env[n], "%s=%s", name, value);
        }
        if (env[n] == NULL)
            break;
        n++;
        cg__fz_parsers(value);
    }
    env[n] = NULL;
    st = cg_config_load(&cfg, cg_config_list_getenv, env,
                        (const char *const *)env, NULL);
    if (st != CG_OK && st != CG_ERR_CONFIG)
        cg__fz_die("config load: neither OK nor CONFIG", "");
    if (st == CG_OK && (out = fopen("/dev/null", "w")) != NULL) {
        cg_config_print(&cfg, out, false);
        fclose(out);
    }
    cg__fz_bootstrap(env);
    for (int i = 0; i < n; i++)
        free(env[i]);
    free(copy);
    return 0;
}
