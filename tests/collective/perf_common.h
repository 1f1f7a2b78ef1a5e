/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Shared part of the cg_*_perf tools (nccl-tests style): options, job
 * setup (context, bootstrap, transport, comm), the size loop with timing
 * and the nccl-tests table (with an anchor timed in the same run where a
 * tool has one), element load/store in double for the independent
 * reference checks, and result hashes.
 * Test code: calls core/ and transport/ directly.
 */
#ifndef CG_PERF_COMMON_H
#define CG_PERF_COMMON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "collguard/collguard.h"
#include "collguard/types.h"
#include "core/coll/comm.h"
#include "core/context.h"
#include "transport/bootstrap.h"

typedef struct perf_opts {
    uint64_t min_bytes, max_bytes;
    uint64_t factor;
    int iters, warmup, check, hash, random;
    cg_dtype_t dt;
    cg_redop_t op;
    int root;            /* -1: every root in turn (broadcast) */
    cg_transport_kind_t tp_kind;
    bool mpi;            /* -B mpi */
    bool anchor;         /* the tool's anchor runs beside (see perf_coll_t) */
} perf_opts_t;

typedef struct perf_job {
    cg_ctx_h ctx;
    cg_bootstrap_t *bs;
    cg_transport_t *tp;
    cg_comm_t *comm;
    int rank, size;
    size_t count;        /* elements of the run being checked (fill) */
    bool inplace;        /* ... and whether it runs in place */
} perf_job_t;

struct perf_coll;
/* One collective on count elements; send == recv is in place. */
typedef int (*perf_run_fn)(perf_job_t *job, const perf_opts_t *o,
                           void *send, void *recv, size_t count, int root);
/* Fills this rank's input for a check run, and the expected value of
 * element i of the result (in double; NaN: not checked). */
typedef void (*perf_fill_fn)(const perf_job_t *job, const perf_opts_t *o,
                             void *send, void *recv, size_t count, int root);
typedef double (*perf_expect_fn)(const perf_job_t *job, const perf_opts_t *o,
                                 size_t i, int root);

typedef struct perf_coll {
    const char *name;   /* "cg_allreduce_perf" */
    bool has_root;
    double (*bus_factor)(int n);
    perf_run_fn run;
    perf_fill_fn fill;
    perf_expect_fn expect;
    double (*tolerance)(const perf_opts_t *o, double expected);
    /* The algorithm for the header; NULL: cg_broadcast_algo with a root,
     * else cg_allreduce_algo. */
    const char *(*algo)(const cg_comm_t *comm, size_t bytes);
    /* NULL, or the anchor timed in the same run beside each collguard
     * column (its time and the ratio anchor time / collguard time), when
     * anchor_ready says it can run here (MPI under mpirun) and -B is
     * collguard. It returns 0, PERF_ANCHOR_NA where it does not support
     * the dtype, op or count (the cells read N/A), or an error code. */
    const char *anchor_name;
    perf_run_fn anchor;
    bool (*anchor_ready)(const perf_job_t *job);
} perf_coll_t;

#define PERF_ANCHOR_NA (-1)

/* Element access in double (exact for the patterns used). */
double perf_load(cg_dtype_t dt, const void *buf, size_t i);
void perf_store(cg_dtype_t dt, void *buf, size_t i, double v);
/* v converted to dt and back (integers wrap as two's complement). */
double perf_as_type(cg_dtype_t dt, double v);
/* The expected result of a reduction over every rank's pattern at element
 * i (plain double loops, op by op; average of integers truncated), and its
 * tolerance: 0, or for the average of floats two units in the last place
 * of the type (the scaling by 1/n rounds). */
double perf_reduce_expect(const perf_job_t *job, const perf_opts_t *o,
                          size_t i);
double perf_reduce_tolerance(const perf_opts_t *o, double want);
/* Small integer pattern of rank r at element i, in 0..10 (unsigned) or
 * -5..5 (signed and floats); random: a deterministic pseudo-random float. */
double perf_pattern(const perf_opts_t *o, int r, size_t i);

/* Parses argv, sets up the job, runs the size loop, prints the table.
 * Returns the process exit code. */
int perf_main(const perf_coll_t *coll, int argc, char **argv);

#endif
