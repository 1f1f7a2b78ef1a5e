/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Status code strings (from CG_STATUS_MAP) and the thread-local detail
 * message behind cg_last_error(). Part of core/base; calls nothing.
 */
#include "core/base/error.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static _Thread_local char cg__last_error[512];

const char *cg_status_string(cg_status_t status)
{
    switch (status) {
#define CG__STATUS_TEXT(name, value, text) case name: return text;
        CG_STATUS_MAP(CG__STATUS_TEXT)
#undef CG__STATUS_TEXT
    }
    return "unknown status";
}

const char *cg_status_name(cg_status_t status)
{
    switch (status) {
#define CG__STATUS_NAME(name, value, text) case name: return #name;
        CG_STATUS_MAP(CG__STATUS_NAME)
#undef CG__STATUS_NAME
    }
    return "CG_STATUS_UNKNOWN";
}

const char *cg_last_error(void)
{
    return cg__last_error;
}

cg_status_t cg_error_set(cg_status_t status, const char *fmt, ...)
{
    /* Formatted aside first: callers wrap the previous detail by passing
     * cg_last_error() as an argument, which must not overlap the output. */
    char buf[sizeof(cg__last_error)];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    memcpy(cg__last_error, buf, sizeof(buf));
    return status;
}

void cg_error_clear(void)
{
    cg__last_error[0] = '\0';
}
