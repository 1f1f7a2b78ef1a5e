/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Helpers for the UCX transport scenarios: a counting cg_mem_ops_t, bounded
 * waits scaled by CG_TEST_TIMEOUT_MULTIPLIER, and a forked pair of
 * processes joined by one connection over loopback (the parent accepts,
 * the child connects). Checks in the child exit with a message, since only
 * the parent reports to Criterion.
 */
#ifndef CG_TEST_UCX_UTIL_H
#define CG_TEST_UCX_UTIL_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/types.h>
#include <unistd.h>

#include "transport/transport.h"

typedef struct tu_mem {
    int64_t live[CG_MEM_CAT_COUNT];
    uint64_t allocs;
} tu_mem_t;

typedef struct tu_pair {
    int is_child;
    pid_t child;
    tu_mem_t mem;
    cg_log_t log;
    cg_transport_t *tp;
    cg_tp_listener_t *listener;
    cg_tp_conn_t *conn;
} tu_pair_t;

#define TU_COOKIE 0xc011a9e5d00dull

/* In a forked child: exit 1 with the location when cond is false. */
#define TU_CHECK(cond, ...)                                                  \
    do {                                                                     \
        if (!(cond)) {                                                       \
            fprintf(stderr, "child %s:%d: check '%s' failed: ", __FILE__,    \
                    __LINE__, #cond);                                        \
            fprintf(stderr, __VA_ARGS__);                                    \
            fprintf(stderr, "\n");                                           \
            _exit(1);                                                        \
        }                                                                    \
    } while (0)

cg_mem_ops_t tu_mem_ops(tu_mem_t *mem);
/* CG_TEST_TIMEOUT_MULTIPLIER (>= 1). */
double tu_scale(void);
uint64_t tu_timeout_ns(double seconds);
cg_transport_params_t tu_params(tu_mem_t *mem, cg_log_t *log, int rank,
                                uint64_t cookie, uint64_t timeout_ns);
/* Accept or connect with a bound; CG_OK or the error. */
cg_status_t tu_accept(cg_tp_listener_t *l, cg_tp_conn_t **conn_p,
                      double seconds);
cg_status_t tu_ready(cg_tp_conn_t *conn, double seconds);
/* Forks; returns in both processes with a ready connection (check
 * p->is_child). Parent: CG_OK or the error; a failing child exits. */
cg_status_t tu_pair_open(tu_pair_t *p, double timeout_s);
/* Closes everything; the child exits 0 if no memory is left live. */
void tu_pair_close(tu_pair_t *p);
/* Waits for the child with a bound; its exit status, or -signal. */
int tu_wait_child(pid_t child, double seconds);
/* Tests every request until all are done or the bound passes; statuses
 * and sizes are written per request. Returns how many are still pending. */
int tu_wait_all(cg_tp_req_t **reqs, int n, cg_status_t *st, size_t *sizes,
                double seconds);
void tu_fill(void *buf, size_t len, uint32_t seed);
/* Index of the first byte that differs from tu_fill's pattern, or -1. */
long tu_check(const void *buf, size_t len, uint32_t seed);

#endif
