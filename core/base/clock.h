/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The monotonic clock every layer times with (deadlines, timeouts,
 * statistics). Layer: core/base; calls nothing of collguard's.
 */
#ifndef CG_BASE_CLOCK_H
#define CG_BASE_CLOCK_H

#include <stdint.h>
#include <time.h>

/* CLOCK_MONOTONIC in nanoseconds. */
static inline uint64_t cg_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

#endif
