/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The monotonic clock every layer times with (deadlines, timeouts,
 * statistics) and the CPU's pause hint for busy-poll loops. Layer:
 * core/base; calls nothing of collguard's.
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

/* One iteration of a busy-poll loop: tells the core it spins (a sibling
 * hyper-thread gets the pipeline, the loop's exit costs no mispredict
 * storm). */
static inline void cg_cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

#endif
