/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cg_allgather_perf: AllGather bandwidth and correctness in nccl-tests'
 * format (size: the gathered result; busbw = algbw * (n-1)/n), over
 * cg_allgatherv (-B collguard) or MPI_Allgatherv on the same buffers (-B
 * mpi, under mpirun). Blocks are ragged when the count does not divide by
 * the rank count (the first count % n ranks give one element more); in
 * place, each rank's block already sits at its offset in the result.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cg_build.h"
#include "core/coll/coll.h"
#include "tests/collective/perf_common.h"
#if CG_HAVE_MPI
#include <mpi.h>
#endif

static double ag_bus(int n) { return n > 1 ? (double)(n - 1) / n : 0.0; }

static const char *ag_algo(const cg_comm_t *comm, size_t bytes)
{
    (void)comm;
    (void)bytes;
    return "ring";
}

/* Rank r's block of count elements: its offset and length (elements). */
static void ag_block(size_t count, int n, int r, size_t *off, size_t *len)
{
    size_t base = count / (size_t)n, rem = count % (size_t)n;
    size_t ur = (size_t)r;

    *off = ur * base + (ur < rem ? ur : rem);
    *len = base + (ur < rem ? 1 : 0);
}

#if CG_HAVE_MPI
static int ag_mpi(const perf_job_t *job, size_t el, const void *send,
                  void *recv, size_t count)
{
    int *cnt = malloc(2 * sizeof(int) * (size_t)job->size), *dsp, rc;
    size_t off, len;

    if (cnt == NULL || count * el > 0x7fffffff) {
        free(cnt);
        fprintf(stderr, "-B mpi: %zu elements not supported by MPI\n", count);
        return 2;
    }
    dsp = cnt + job->size;
    for (int r = 0; r < job->size; r++) {
        ag_block(count, job->size, r, &off, &len);
        cnt[r] = (int)(len * el);
        dsp[r] = (int)(off * el);
    }
    ag_block(count, job->size, job->rank, &off, &len);
    rc = MPI_Allgatherv(send == recv ? MPI_IN_PLACE : send, (int)(len * el),
                        MPI_BYTE, recv, cnt, dsp, MPI_BYTE, MPI_COMM_WORLD);
    free(cnt);
    return rc == MPI_SUCCESS ? 0 : 3;
}
#endif

static int ag_run(perf_job_t *job, const perf_opts_t *o, void *send,
                  void *recv, size_t count, int root)
{
    size_t el = cg_dtype_size(o->dt), off, len, *bytes;
    cg_status_t st;

    (void)root;
    if (o->mpi) {
#if CG_HAVE_MPI
        return ag_mpi(job, el, send, recv, count);
#else
        fprintf(stderr, "-B mpi: this build has no MPI\n");
        return 2;
#endif
    }
    bytes = malloc(sizeof(size_t) * (size_t)job->size);
    if (bytes == NULL)
        return 2;
    for (int r = 0; r < job->size; r++) {
        ag_block(count, job->size, r, &off, &len);
        bytes[r] = len * el;
    }
    ag_block(count, job->size, job->rank, &off, &len);
    st = cg_allgatherv(job->comm,
                       send == recv ? (char *)recv + off * el : send, recv,
                       bytes);
    free(bytes);
    if (st != CG_OK) {
        fprintf(stderr, "rank %d: cg_allgatherv: %s: %s\n", job->rank,
                cg_status_name(st), cg_last_error());
        return 3;
    }
    return 0;
}

static void ag_fill(const perf_job_t *job, const perf_opts_t *o, void *send,
                    void *recv, size_t count, int root)
{
    size_t off, len;

    (void)root;
    ag_block(count, job->size, job->rank, &off, &len);
    for (size_t i = 0; i < count; i++)
        perf_store(o->dt, recv, i, 99);
    for (size_t i = 0; i < len; i++)
        perf_store(o->dt, send == recv ? (char *)recv +
                                             off * cg_dtype_size(o->dt)
                                       : send,
                   i, perf_pattern(o, job->rank, off + i));
}

static double ag_expect(const perf_job_t *job, const perf_opts_t *o,
                        size_t i, int root)
{
    size_t off, len;
    int r = 0;

    (void)root;
    /* The block holding element i, and the pattern of its rank there. */
    for (ag_block(job->count, job->size, r, &off, &len); i >= off + len;
         ag_block(job->count, job->size, r, &off, &len))
        r++;
    return perf_as_type(o->dt, perf_pattern(o, r, i));
}

int main(int argc, char **argv)
{
    const perf_coll_t coll = {"cg_allgather_perf", false, ag_bus, ag_run,
                              ag_fill, ag_expect, NULL, ag_algo, NULL, NULL,
                              NULL};
    return perf_main(&coll, argc, argv);
}
