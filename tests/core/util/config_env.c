/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Configuration from a fake environment, for the tests of config rows
 * (see config_env.h).
 */
#include "tests/core/util/config_env.h"

#include <string.h>

#include "core/base/log.h"

cg_status_t tc_config_load(cg_config_t *cfg, const char *const *env)
{
    cg_log_t log;

    cg_log_init(&log, CG_LOG_NONE, -1);
    return cg_config_load(cfg, cg_config_list_getenv, (void *)env, env, &log);
}
