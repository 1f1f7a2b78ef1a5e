/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Helpers of test_hvd_backend_mpi.c: a job (context bootstrapped from the
 * launcher's variables plus the scenario's, and a shim core), tensors with
 * exact inputs, the reference check of exact results, and the comparison
 * of two passes.
 */
#ifndef CG_TEST_HVD_BACKEND_JOB_H
#define CG_TEST_HVD_BACKEND_JOB_H

#include <stdbool.h>
#include <stddef.h>

#include "collguard/collguard.h"
#include "collguard/hvd.h"

#define HB_NDT 6
#define HB_NOPS 5
#define HB_RANKS_MAX 8
#define HB_NAR (HB_NDT * HB_NOPS * 2 * 4)

typedef struct hb_job {
    cg_ctx_h ctx;
    cg_hvd_core_h core;
    int rank, size;
    const char **env;
} hb_job_t;

typedef struct hb_tensor {
    char name[64];
    cg_dtype_t dt;
    cg_redop_t op;
    double pre, post;
    size_t count;
    void *in, *out; /* out == in: in place */
    int root;       /* broadcast; -1 for allreduce */
    bool exact;     /* compared with the reference too */
} hb_tensor_t;

typedef struct hb_result {
    int rank, size;
    hb_tensor_t ar[HB_NAR];
    hb_tensor_t bc[HB_NDT * HB_RANKS_MAX];
    int n_bc;
    cg_hvd_stats_t stats;
    unsigned long mpi_allreduces, mpi_bcasts; /* MPI calls of the pass */
    unsigned long mpi_rscatters;  /* MPI_Reduce_scatter + MPI_Reduce */
} hb_result_t;

/* vars: the scenario's "NAME=value" (NULL-terminated); they win. */
int hb_job_start(hb_job_t *job, const char *const *vars);
void hb_job_stop(hb_job_t *job);

/* Allreduce tensor of dtype index d, op index o, scaling s (0: 1 and 1,
 * 1: prescale 0.5, postscale 4), kind k (0-2 small, fused; 3 larger than
 * the 64 KiB fusion buffer; odd k in place). */
void hb_tensor_init(hb_tensor_t *t, const hb_job_t *job, int d, int o, int s,
                    int k);
void hb_bcast_init(hb_tensor_t *t, const hb_job_t *job, int d, int root);
int hb_enqueue_allreduce(hb_job_t *job, hb_tensor_t *t, cg_hvd_req_h *req_p);
int hb_enqueue_broadcast(hb_job_t *job, hb_tensor_t *t, cg_hvd_req_h *req_p);
/* Waits, releases, checks exact results against the reference. */
int hb_wait(hb_job_t *job, hb_tensor_t *t, cg_hvd_req_h req);
/* 0 when every tensor's output bits are the same in a and b. */
int hb_same(const hb_tensor_t *a, const hb_tensor_t *b, int n,
            const char *what);
void hb_result_free(hb_result_t *res);

int hb_refused(void);
/* steps in alternating blocks of `block` per backend (0: 10). */
int hb_bench(int steps, int block);

#endif
