/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Helpers for the Horovod ABI tests: a job of forked ranks on 127.0.0.1,
 * each given a launcher's environment (collguard-run's CG_RUN_* or
 * torchrun's two-"node" layout) and extra variables, running one scenario
 * function and reporting through shared memory. Only libc and the ABI of
 * libcollguard_hvd.so are used, so no second copy of collguard's
 * internals sits beside the library's.
 */
#ifndef CG_HVD_TEST_UTIL_H
#define CG_HVD_TEST_UTIL_H

#include <stdint.h>
#include <stdio.h>

#include "plugin/hvd_abi.h"

#define HVD_JOB_MAX 8
#define HVD_ENV_MAX 8

typedef enum {
    HVD_LAUNCH_CG_RUN,   /* one host, local rank = rank */
    HVD_LAUNCH_TORCHRUN, /* two "nodes": local rank = rank % 2 */
    HVD_LAUNCH_NONE      /* no launcher variables at all */
} hvd_launch_t;

/* What one rank sees and reports. */
typedef struct hvd_rank {
    int rank, size;      /* in the launched job */
    void *arg;
    int failed_line;     /* 0: passed */
    char msg[256];
} hvd_rank_t;

typedef int (*hvd_rank_fn)(hvd_rank_t *self);

typedef struct hvd_job {
    int size;
    hvd_launch_t launch;
    const char *env[HVD_ENV_MAX]; /* extra "NAME=value", NULL-terminated */
    void *arg;
    hvd_rank_t *rep;              /* shared with the ranks */
    int exit_code[HVD_JOB_MAX];
} hvd_job_t;

void hvd_job_init(hvd_job_t *job, int size, hvd_launch_t launch);
/* Forks the ranks, runs fn in each and waits (at most 20 s, scaled by
 * CG_TEST_TIMEOUT_MULTIPLIER). Returns how many ranks passed. */
int hvd_job_run(hvd_job_t *job, hvd_rank_fn fn);
void hvd_job_fini(hvd_job_t *job);

/* In a rank: record the first failure and leave the scenario. */
#define HVD_CHECK(self, cond, ...)                                           \
    do {                                                                     \
        if (!(cond)) {                                                       \
            (self)->failed_line = __LINE__;                                  \
            snprintf((self)->msg, sizeof((self)->msg), __VA_ARGS__);         \
            return 1;                                                        \
        }                                                                    \
    } while (0)

#define HVD_CHECK_EQ(self, got, want)                                        \
    HVD_CHECK(self, (got) == (want), "%s = %d, expected %d", #got,           \
              (int)(got), (int)(want))

/* Every rank of job passed; prints each failure. */
#define hvd_assert_all_passed(job, passed)                                   \
    do {                                                                     \
        int passed_ = (passed); /* once, first: it may run the job */        \
        for (int r_ = 0; r_ < (job)->size; r_++)                             \
            cr_expect_eq((job)->rep[r_].failed_line, 0,                      \
                         "rank %d, line %d: %s (exit %d)", r_,               \
                         (job)->rep[r_].failed_line, (job)->rep[r_].msg,     \
                         (job)->exit_code[r_]);                              \
        cr_assert_eq(passed_, (job)->size, "%d of %d ranks passed", passed_, \
                     (job)->size);                                           \
    } while (0)

#endif
