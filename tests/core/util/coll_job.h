/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Forked multi-rank jobs for the collective tests: each rank bootstraps
 * over a loopback rendezvous (collguard-run's variables), creates a
 * context (CG_TIMEOUT from the test), a socket transport (or the one a
 * CG_TRANSPORT setting names) and a communicator, runs the scenario's
 * body and reports into shared memory.
 */
#ifndef CG_TEST_COLL_JOB_H
#define CG_TEST_COLL_JOB_H

#include <stdint.h>

#include "core/coll/coll.h"
#include "core/context.h"

typedef struct coll_report {
    int ran;
    int status;        /* the first failure, or CG_OK */
    double elapsed_s;  /* of the failing call */
    int iters;         /* collectives completed */
    char msg[512];
} coll_report_t;

typedef struct coll_rank {
    int rank, size;
    cg_ctx_h ctx;
    cg_comm_t *comm;
    coll_report_t *rep; /* this rank's */
} coll_rank_t;

typedef void (*coll_body_fn)(coll_rank_t *cr, void *arg);

/* Runs size ranks of body with CG_TIMEOUT=timeout and CG_ALGO=algo
 * (auto, ring, rd, shm; optionally followed by space-separated NAME=value
 * settings, each for one rank only when written @R:NAME=value, e.g.
 * "shm CG_SHM_SLOT=64K @1:CG_SHM_SLOT=0"); returns the shared
 * reports (size entries; coll_job_free them). status_p[r]: waitpid
 * status of rank r. Ranks are killed after wait_s. */
coll_report_t *coll_job_run(int size, const char *timeout, const char *algo,
                            coll_body_fn body,
                            void *arg, double wait_s, int *status_p);
void coll_job_free(coll_report_t *rep, int size);
double coll_now_s(void);
/* base_s scaled by CG_TEST_TIMEOUT_MULTIPLIER. */
double coll_scaled_s(double base_s);

/* Inside a body: records st, the time since t0 and cg_last_error(). */
void coll_report(coll_rank_t *cr, cg_status_t st, double t0);

/* Criterion checks shared by the collective tests. */
/* 2 ranks of body: each reports want with a message holding `text`, and
 * iters == 1 (the body's check that the group still works after). */
void coll_check_refused(coll_body_fn body, cg_status_t want,
                        const char *text);
/* 3 ranks of body with CG_TIMEOUT 2s and algo, rank 2 raising sig (arg = &sig)
 * before its collective number iters + 1: it dies, ranks 0 and 1 complete
 * iters, then fail within limit_s with a peer failure (messages holding
 * `op`), and one of them names rank 2. */
void coll_check_victim(coll_body_fn body, const char *algo, int sig,
                       double limit_s, int iters, const char *op);

#endif
