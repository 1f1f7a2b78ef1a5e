/* SPDX-License-Identifier: Apache-2.0 */
/*
 * np_flood's clock (np_flood.c): monotonic, in milliseconds. The control
 * pipes between the victim, the stranger and the peer go through xfer
 * (harness_check.c).
 */
#include <time.h>

#include "np_flood.h"

int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

