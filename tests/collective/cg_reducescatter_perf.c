/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cg_reducescatter_perf: ReduceScatter bandwidth and correctness in
 * nccl-tests' format (size: the whole input; busbw = algbw * (n-1)/n),
 * over cg_reduce_scatterv. Blocks are ragged when the count does not
 * divide by the rank count (the first count % n ranks one element more,
 * as Horovod splits rows; fewer elements than ranks: empty blocks). In
 * place, the result lands at this rank's offset in the input. Under
 * mpirun with MPI built in, Open MPI's MPI_Reduce_scatter_block (ragged:
 * MPI_Reduce_scatter) on the same buffers is timed in the same run beside
 * each column, with the ratio; -B mpi runs it alone instead. The check
 * recomputes every element of the buffer: the block from the per-rank
 * patterns in double (not the library's kernels), and everything else as
 * it was before the call.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "cg_build.h"
#include "core/coll/coll.h"
#include "tests/collective/perf_common.h"
#if CG_HAVE_MPI
#include <mpi.h>
#endif

static double rs_bus(int n) { return n > 1 ? (double)(n - 1) / n : 0.0; }

static const char *rs_algo(const cg_comm_t *comm, size_t bytes)
{
    (void)comm;
    (void)bytes;
    return "ring";
}

/* Rank r's block of count elements: its offset and length (elements). */
static void rs_block(size_t count, int n, int r, size_t *off, size_t *len)
{
    size_t base = count / (size_t)n, rem = count % (size_t)n;
    size_t ur = (size_t)r;

    *off = ur * base + (ur < rem ? ur : rem);
    *len = base + (ur < rem ? 1 : 0);
}

#if CG_HAVE_MPI
/* MPI_Reduce_scatter_block (MPI_Reduce_scatter for ragged blocks); in
 * place the result lands at the buffer's start, as MPI defines it. */
static int rs_mpi(perf_job_t *job, const perf_opts_t *o, void *send,
                  void *recv, size_t count, int root)
{
    static const MPI_Datatype types[CG_DTYPE_COUNT] = {
        [CG_DTYPE_I8] = MPI_INT8_T, [CG_DTYPE_U8] = MPI_UINT8_T,
        [CG_DTYPE_I16] = MPI_INT16_T, [CG_DTYPE_U16] = MPI_UINT16_T,
        [CG_DTYPE_I32] = MPI_INT32_T, [CG_DTYPE_U32] = MPI_UINT32_T,
        [CG_DTYPE_I64] = MPI_INT64_T, [CG_DTYPE_U64] = MPI_UINT64_T,
        [CG_DTYPE_F32] = MPI_FLOAT, [CG_DTYPE_F64] = MPI_DOUBLE};
    MPI_Op op = o->op == CG_OP_SUM ? MPI_SUM : o->op == CG_OP_PROD ? MPI_PROD
              : o->op == CG_OP_MIN ? MPI_MIN : MPI_MAX;
    MPI_Datatype t = types[o->dt];
    const void *in = send == recv ? MPI_IN_PLACE : send;
    size_t off, len;
    int *cnt, rc;

    (void)root;
    if (t == 0 || o->op == CG_OP_AVG || count > 0x7fffffff)
        return PERF_ANCHOR_NA;
    if (count % (size_t)job->size == 0)
        return MPI_Reduce_scatter_block(in, recv, (int)(count / job->size), t,
                                        op, MPI_COMM_WORLD) == MPI_SUCCESS
                   ? 0 : 3;
    cnt = malloc(sizeof(int) * (size_t)job->size);
    if (cnt == NULL)
        return 2;
    for (int r = 0; r < job->size; r++) {
        rs_block(count, job->size, r, &off, &len);
        cnt[r] = (int)len;
    }
    rc = MPI_Reduce_scatter(in, recv, cnt, t, op, MPI_COMM_WORLD);
    free(cnt);
    return rc == MPI_SUCCESS ? 0 : 3;
}

static bool rs_mpi_ready(const perf_job_t *job)
{
    int on = 0, size = 0;

    if (MPI_Initialized(&on) != MPI_SUCCESS || !on)
        return false;
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    return size == job->size;
}
#endif

static int rs_run(perf_job_t *job, const perf_opts_t *o, void *send,
                  void *recv, size_t count, int root)
{
    size_t el = cg_dtype_size(o->dt), off, len, *counts;
    cg_status_t st;

    if (o->mpi) {
#if CG_HAVE_MPI
        int rc = rs_mpi(job, o, send, recv, count, root);
        if (rc == PERF_ANCHOR_NA)
            fprintf(stderr, "-B mpi: %s/%s or count %zu not supported by "
                    "MPI\n", cg_dtype_name(o->dt), cg_redop_name(o->op),
                    count);
        return rc == PERF_ANCHOR_NA ? 2 : rc;
#else
        fprintf(stderr, "-B mpi: this build has no MPI\n");
        return 2;
#endif
    }
    (void)root;
    counts = malloc(sizeof(size_t) * (size_t)job->size);
    if (counts == NULL)
        return 2;
    for (int r = 0; r < job->size; r++)
        rs_block(count, job->size, r, &off, &counts[r]);
    rs_block(count, job->size, job->rank, &off, &len);
    st = cg_reduce_scatterv(job->comm, send,
                            send == recv ? (char *)recv + off * el : recv,
                            counts, o->dt, o->op, 1.0, 1.0);
    free(counts);
    if (st != CG_OK) {
        fprintf(stderr, "rank %d: cg_reduce_scatterv: %s: %s\n", job->rank,
                cg_status_name(st), cg_last_error());
        return 3;
    }
    return 0;
}

static void rs_fill(const perf_job_t *job, const perf_opts_t *o, void *send,
                    void *recv, size_t count, int root)
{
    (void)root;
    for (size_t i = 0; i < count; i++)
        perf_store(o->dt, send, i, perf_pattern(o, job->rank, i));
    if (recv != send)
        for (size_t i = 0; i < count; i++)
            perf_store(o->dt, recv, i, 99);
}

/* Element i of the buffer after the call: the reduction inside this
 * rank's block (at its offset in place, at 0 out of place or from MPI),
 * elsewhere what the fill left (MPI in place: not checked, NaN). */
static double rs_expect(const perf_job_t *job, const perf_opts_t *o,
                        size_t i, int root)
{
    size_t off, len, at;

    (void)root;
    rs_block(job->count, job->size, job->rank, &off, &len);
    at = job->inplace && !o->mpi ? off : 0;
    if (i >= at && i < at + len)
        return perf_reduce_expect(job, o, off + i - at);
    if (job->inplace && o->mpi)
        return NAN;
    return job->inplace ? perf_as_type(o->dt, perf_pattern(o, job->rank, i))
                        : 99;
}

int main(int argc, char **argv)
{
    perf_coll_t coll = {"cg_reducescatter_perf", false, rs_bus, rs_run,
                        rs_fill, rs_expect, perf_reduce_tolerance, rs_algo,
                        NULL, NULL, NULL};
#if CG_HAVE_MPI
    coll.anchor_name = "MPI_Reduce_scatter_block";
    coll.anchor = rs_mpi;
    coll.anchor_ready = rs_mpi_ready;
#endif
    return perf_main(&coll, argc, argv);
}
