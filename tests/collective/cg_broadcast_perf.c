/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cg_broadcast_perf: Broadcast bandwidth and correctness in nccl-tests'
 * format (busbw = algbw), over collguard or MPI_Bcast (-B mpi). -r -1 runs
 * every root in turn. cg_broadcast is in place; the out-of-place column
 * copies send to recv on the root first (included in its time).
 */
#include <stdio.h>
#include <string.h>

#include "cg_build.h"
#include "core/coll/coll.h"
#include "tests/collective/perf_common.h"
#if CG_HAVE_MPI
#include <mpi.h>
#endif

static double bc_bus(int n) { (void)n; return 1.0; }

static int bc_run(perf_job_t *job, const perf_opts_t *o, void *send,
                  void *recv, size_t count, int root)
{
    size_t bytes = count * cg_dtype_size(o->dt);
    cg_status_t st;

    if (send != recv && job->rank == root)
        memcpy(recv, send, bytes);
    if (o->mpi) {
#if CG_HAVE_MPI
        if (bytes > 0x7fffffff)
            return 2;
        return MPI_Bcast(recv, (int)bytes, MPI_BYTE, root, MPI_COMM_WORLD) ==
                       MPI_SUCCESS ? 0 : 3;
#else
        fprintf(stderr, "-B mpi: this build has no MPI\n");
        return 2;
#endif
    }
    st = cg_broadcast(job->comm, recv, count, o->dt, root);
    if (st != CG_OK) {
        fprintf(stderr, "rank %d: cg_broadcast: %s: %s\n", job->rank,
                cg_status_name(st), cg_last_error());
        return 3;
    }
    return 0;
}

static void bc_fill(const perf_job_t *job, const perf_opts_t *o, void *send,
                    void *recv, size_t count, int root)
{
    for (size_t i = 0; i < count; i++)
        perf_store(o->dt, send, i, job->rank == root
                                       ? perf_pattern(o, root, i) : 77);
    if (recv != send)
        for (size_t i = 0; i < count; i++)
            perf_store(o->dt, recv, i, 99);
}

static double bc_expect(const perf_job_t *job, const perf_opts_t *o,
                        size_t i, int root)
{
    (void)job;
    return perf_as_type(o->dt, perf_pattern(o, root, i));
}

int main(int argc, char **argv)
{
    const perf_coll_t coll = {"cg_broadcast_perf", true, bc_bus, bc_run,
                              bc_fill, bc_expect, NULL, NULL, NULL, NULL,
                              NULL};
    return perf_main(&coll, argc, argv);
}
