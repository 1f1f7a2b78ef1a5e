/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Internal error helper: record a detail message for cg_last_error() on the
 * calling thread and hand back the status, so error paths read
 *     return cg_error_set(CG_ERR_CONFIG, "CG_X: bad value '%s'", v);
 * Part of core/base (services under every other layer; calls nothing).
 */
#ifndef CG_BASE_ERROR_H
#define CG_BASE_ERROR_H

#include "collguard/status.h"

cg_status_t cg_error_set(cg_status_t status, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
void cg_error_clear(void);

#endif
