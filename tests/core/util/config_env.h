/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Configuration from a fake environment, for the tests of config rows: a
 * NULL-terminated list of "NAME=value" strings read by cg_config_load.
 */
#ifndef CG_TEST_CONFIG_ENV_H
#define CG_TEST_CONFIG_ENV_H

#include "core/config/config.h"

/* cg_config_load over env (also its list of names), logging nowhere. */
cg_status_t tc_config_load(cg_config_t *cfg, const char *const *env);

#endif
