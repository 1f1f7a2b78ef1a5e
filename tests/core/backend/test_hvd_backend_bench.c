/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The backend benchmark of test_hvd_backend_mpi (mode bench, under
 * mpirun): a training-like step (1000 tensors of 4 KiB, f32 sums,
 * enqueued together, fused, waited) through a shim core with
 * HOROVOD_CPU_OPERATIONS=COLLGUARD and one with =MPI, in alternating
 * blocks of `block` steps (default 10; a fresh core per block, one core
 * alive at a time),
 * so both see the same machine load. Rank 0 prints the median, p10 and
 * p90 of each and the ratio of the medians.
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "tests/core/backend/test_hvd_backend_job.h"

#define HB_TENSORS 1000
#define HB_ELEMS 1024 /* 4 KiB of f32 */

static double hb_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int hb_cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* One step on job: every tensor enqueued, then every one waited. */
static int hb_step(hb_job_t *job, float *bufs, cg_hvd_req_h *req)
{
    char name[32];

    for (int k = 0; k < HB_TENSORS; k++) {
        snprintf(name, sizeof(name), "g%d", k);
        cg_hvd_tensor_t t = {.name = name, .dtype = CG_DTYPE_F32, .ndim = 1,
                             .shape = {HB_ELEMS},
                             .input = bufs + (size_t)k * HB_ELEMS,
                             .output = bufs + (size_t)k * HB_ELEMS};
        if (cg_hvd_enqueue_allreduce(job->core, &t, CG_OP_SUM, 1.0, 1.0,
                                     &req[k]) != CG_OK) {
            fprintf(stderr, "enqueue: %s\n", cg_last_error());
            return 1;
        }
    }
    for (int k = 0; k < HB_TENSORS; k++) {
        if (cg_hvd_wait(req[k]) != CG_OK) {
            fprintf(stderr, "step: %s\n", cg_hvd_error(req[k]));
            return 1;
        }
        cg_hvd_release(req[k]);
    }
    return 0;
}

static void hb_print(const char *name, const hb_job_t *job, double *t,
                     int steps)
{
    qsort(t, (size_t)steps, sizeof(double), hb_cmp);
    if (job->rank == 0)
        printf("%-10s %d ranks, step of %d x 4 KiB: median %7.2f ms  p10 "
               "%7.2f  p90 %7.2f  (%4.0f MB/s per rank)\n", name, job->size,
               HB_TENSORS, t[steps / 2] * 1e3, t[steps / 10] * 1e3,
               t[steps * 9 / 10] * 1e3,
               HB_TENSORS * HB_ELEMS * 4.0 / t[steps / 2] / 1e6);
}

/* A fresh core of one kind: 2 warm-up steps, then `n` timed into t. */
static int hb_block(const char *var, int n, float *bufs, cg_hvd_req_h *req,
                    double *t, hb_job_t *job)
{
    const char *vars[] = {var, NULL};
    int rc = 0;

    if (hb_job_start(job, vars) != 0)
        return 1;
    for (int s = -2; s < n && rc == 0; s++) {
        double t0 = hb_now();
        rc = hb_step(job, bufs, req);
        if (s >= 0)
            t[s] = hb_now() - t0;
    }
    hb_job_stop(job);
    return rc;
}

int hb_bench(int steps, int block)
{
    static const char *const vars[2] = {"CG_CPU_OPERATIONS=COLLGUARD",
                                        "CG_CPU_OPERATIONS=MPI"};
    static cg_hvd_req_h req[HB_TENSORS];
    float *bufs = calloc((size_t)HB_TENSORS * HB_ELEMS, sizeof(float));
    double *t[2] = {calloc((size_t)steps + 1, sizeof(double)),
                    calloc((size_t)steps + 1, sizeof(double))};
    hb_job_t job;
    int rc = 0;

    block = block < 1 ? 10 : block > steps ? steps : block;
    steps = steps / block * block;
    for (int s = 0; s < steps && rc == 0; s += block)
        for (int b = 0; b < 2 && rc == 0; b++)
            rc = hb_block(vars[b], block, bufs, req, t[b] + s, &job);
    if (rc == 0) {
        hb_print("COLLGUARD", &job, t[0], steps);
        hb_print("MPI", &job, t[1], steps);
        if (job.rank == 0)
            printf("median step MPI / COLLGUARD: %.2f\n",
                   t[1][steps / 2] / t[0][steps / 2]);
    }
    free(t[0]);
    free(t[1]);
    free(bufs);
    return rc;
}
