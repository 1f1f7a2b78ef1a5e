/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cg_allreduce_perf: AllReduce bandwidth and correctness in nccl-tests'
 * format (busbw = algbw * 2(n-1)/n), over collguard (-B collguard) or, as
 * the anchor, MPI_Allreduce on the same buffers (-B mpi, under mpirun).
 * The check recomputes every element from the per-rank patterns in double
 * with plain loops (not the library's kernels).
 */
#include <stdio.h>

#include "cg_build.h"
#include "core/coll/coll.h"
#include "tests/collective/perf_common.h"
#if CG_HAVE_MPI
#include <mpi.h>
#endif

static double ar_bus(int n) { return n > 1 ? 2.0 * (n - 1) / n : 0.0; }

#if CG_HAVE_MPI
static int ar_mpi(const perf_opts_t *o, void *send, void *recv, size_t count)
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

    if (t == 0 || o->op == CG_OP_AVG || count > 0x7fffffff) {
        fprintf(stderr, "-B mpi: %s/%s or count %zu not supported by MPI\n",
                cg_dtype_name(o->dt), cg_redop_name(o->op), count);
        return 2;
    }
    return MPI_Allreduce(send == recv ? MPI_IN_PLACE : send, recv,
                         (int)count, t, op, MPI_COMM_WORLD) == MPI_SUCCESS
               ? 0 : 3;
}
#endif

static int ar_run(perf_job_t *job, const perf_opts_t *o, void *send,
                  void *recv, size_t count, int root)
{
    cg_status_t st;

    (void)root;
    if (o->mpi) {
#if CG_HAVE_MPI
        return ar_mpi(o, send, recv, count);
#else
        fprintf(stderr, "-B mpi: this build has no MPI\n");
        return 2;
#endif
    }
    st = cg_allreduce(job->comm, send, recv, count, o->dt, o->op, 1.0, 1.0);
    if (st != CG_OK) {
        fprintf(stderr, "rank %d: cg_allreduce: %s: %s\n", job->rank,
                cg_status_name(st), cg_last_error());
        return 3;
    }
    return 0;
}

static void ar_fill(const perf_job_t *job, const perf_opts_t *o, void *send,
                    void *recv, size_t count, int root)
{
    (void)root;
    for (size_t i = 0; i < count; i++)
        perf_store(o->dt, send, i, perf_pattern(o, job->rank, i));
    if (recv != send)
        for (size_t i = 0; i < count; i++)
            perf_store(o->dt, recv, i, 99);
}

static double ar_expect(const perf_job_t *job, const perf_opts_t *o,
                        size_t i, int root)
{
    (void)root;
    return perf_reduce_expect(job, o, i);
}

int main(int argc, char **argv)
{
    const perf_coll_t coll = {"cg_allreduce_perf", false, ar_bus, ar_run,
                              ar_fill, ar_expect, perf_reduce_tolerance,
                              NULL, NULL, NULL, NULL};
    return perf_main(&coll, argc, argv);
}
