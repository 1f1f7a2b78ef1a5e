/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Forked jobs for the Horovod shim core tests: each rank gets collguard-run's
 * variables for a loopback rendezvous plus the scenario's extra variables,
 * creates a bootstrapped context and a cg_hvd core, runs the scenario and
 * reports through shared memory (a failure line and text, a result hash,
 * the core's stats). hj_run_mem also hands each rank's governor a memory
 * reading the scenario sets.
 */
#ifndef CG_TEST_HVD_UTIL_H
#define CG_TEST_HVD_UTIL_H

#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "collguard/hvd.h"

#define HJ_MAX 8

typedef struct hj_rank hj_rank_t;
typedef int (*hj_fn)(hj_rank_t *self);

struct hj_rank {
    int rank, size;
    cg_hvd_core_h core;
    hj_fn fn;
    void *arg;       /* the scenario's input (the parent's, after fork) */
    int failed_line; /* 0: passed */
    char msg[1024];
    uint64_t hash;   /* scenario-defined result digest */
    cg_hvd_stats_t stats;
    int destroyed;   /* the scenario destroyed the core itself */
    /* hj_run_mem: the bytes free (and total) this rank's governor reads at
     * its next sample (the scenario may change its own at any time). */
    _Atomic uint64_t mem_bytes;
};

/* Runs size ranks of fn with the extra "NAME=value" variables (NULL-
 * terminated, may be NULL; "@R:NAME=value" sets it on rank R only);
 * returns shared reports (hj_free them).
 * Ranks still running after 20 s (scaled) are killed. */
hj_rank_t *hj_run(int size, const char *const *env, hj_fn fn, void *arg);
/* The same, each rank's governor reading mem_bytes free of mem_bytes
 * total (no memory in use, so no slope and no early warning) from its
 * rank's report, mem_bytes at the start (CG_CTX_PARAM_PROBE). */
hj_rank_t *hj_run_mem(int size, const char *const *env, hj_fn fn, void *arg,
                      uint64_t mem_bytes);
void hj_free(hj_rank_t *rep, int size);
uint64_t hj_hash(uint64_t h, const void *p, size_t len);
/* The outcome of an enqueue that returned st (*req_p set on CG_OK): waits
 * for and releases the request; msg gets the enqueue's cg_last_error() or
 * the request's error text. */
cg_status_t hj_settle(cg_status_t st, const cg_hvd_req_h *req_p, char *msg,
                      size_t len);

#define HJ_CHECK(self, cond, ...)                                            \
    do {                                                                     \
        if (!(cond)) {                                                       \
            (self)->failed_line = __LINE__;                                  \
            snprintf((self)->msg, sizeof((self)->msg), __VA_ARGS__);         \
            return 1;                                                        \
        }                                                                    \
    } while (0)

#define hj_assert_passed(rep, size)                                          \
    do {                                                                     \
        for (int r_ = 0; r_ < (size); r_++)                                  \
            cr_assert_eq((rep)[r_].failed_line, 0, "rank %d, line %d: %s",   \
                         r_, (rep)[r_].failed_line, (rep)[r_].msg);          \
    } while (0)

/* Every rank's msg holds text. */
#define hj_assert_msgs(rep, size, text)                                      \
    do {                                                                     \
        for (int r_ = 0; r_ < (size); r_++)                                  \
            cr_assert(strstr((rep)[r_].msg, (text)) != NULL, "rank %d: %s",  \
                      r_, (rep)[r_].msg);                                    \
    } while (0)

#endif
