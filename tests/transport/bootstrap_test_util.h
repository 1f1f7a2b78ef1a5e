/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Helpers for the bootstrap tests: a fake environment behind the injected
 * getenv, per-launcher environment builders, a free loopback port, forked
 * ranks that report through shared memory, and the standard exchange
 * (allgather, bcast, barrier with checked contents) every job runs.
 */
#ifndef CG_BOOTSTRAP_TEST_UTIL_H
#define CG_BOOTSTRAP_TEST_UTIL_H

#include <stdint.h>

#include "tests/transport/tp_test_util.h"
#include "transport/bootstrap.h"

#define BS_ENV_MAX 32

typedef struct bs_env {
    int n;
    const char *name[BS_ENV_MAX];
    char value[BS_ENV_MAX][128];
} bs_env_t;

void bs_env_set(bs_env_t *e, const char *name, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
const char *bs_getenv(void *arg, const char *name);

typedef enum {
    BS_STYLE_HOROVOD,
    BS_STYLE_TORCHRUN,
    BS_STYLE_LAUNCHER,
    BS_STYLE_OMPI_ENV
} bs_style_t;

/* The variables launcher style sets for rank of size, rendezvous on
 * 127.0.0.1 (Horovod and torchrun get port - 1: the store adds 1). */
void bs_env_style(bs_env_t *e, bs_style_t style, int rank, int size,
                  int port);

/* A port that is free on 127.0.0.1 right now. */
int bs_free_port(void);

/* What a forked rank reports to the parent. */
typedef struct bs_report {
    int ran;
    int status;        /* first failure, or CG_OK */
    uint64_t cookie;
    int rank, size, local_rank, cross_rank, cross_size, source;
    double elapsed_s;  /* of the failing (or last) call */
    char msg[512];
} bs_report_t;

struct bs_job;
typedef struct bs_job {
    int size;
    bs_style_t style;
    int port;
    uint64_t timeout_ms;   /* scaled by CG_TEST_TIMEOUT_MULTIPLIER */
    int die_rank;          /* this rank SIGKILLs itself after create; -1 */
    int absent_rank;       /* this rank is never started; -1 */
    int odd_rank;          /* this rank calls bcast instead; -1 */
    int dup_rank;          /* a second process claims this rank; -1.
                              It reports in rep[size]. */
    int late_rank;         /* starts late_ms after the others; -1 */
    int late_ms;
    /* Runs in the parent after rank 0 was forked, before the others. */
    void (*after_rank0)(struct bs_job *job);
    void *arg;
    bs_report_t *rep;      /* shared: size + 1 entries */
} bs_job_t;

/* Defaults: no faults, 10 s timeout, a fresh port, shared reports. */
void bs_job_init(bs_job_t *job, int size, bs_style_t style);
/* Forks the ranks, each running the standard exchange; waits at most
 * wait_ms (then kills). Returns the number of ranks that exited 0. */
int bs_job_run(bs_job_t *job, uint64_t wait_ms);
void bs_job_fini(bs_job_t *job);

/* The standard exchange on a created bootstrap: allgather of rank-tagged
 * 128-byte blobs, of cookies and local ranks (all checked), bcast from the
 * last rank, barrier. Fills rep; 0 when all went right. */
int bs_exchange(cg_bootstrap_t *bs, bs_report_t *rep);

#endif
