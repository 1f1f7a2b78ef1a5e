/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The clock and the median the GPU benchmarks (gpu_step_bench.c,
 * stage_bench.c) time with: milliseconds on the monotonic clock, and the
 * median of n samples (sorted in place). Header-only. Layer: integration.
 */
#ifndef CG_INTEGRATION_GPU_BENCH_STATS_H
#define CG_INTEGRATION_GPU_BENCH_STATS_H

#include <stdlib.h>
#include <time.h>

static inline double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static inline int bench_cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static inline double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof(*v), bench_cmp);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

#endif
