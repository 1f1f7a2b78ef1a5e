/* SPDX-License-Identifier: Apache-2.0 */
/*
 * One rank of a real job checking the shim's backends (not Criterion: it
 * runs under a launcher). Modes:
 *   compare  (mpirun): the same tensors through HOROVOD_CPU_OPERATIONS=
 *            COLLGUARD, then =MPI: every allreduce (f32, f64, i32, f16,
 *            bf16 x sum, average, min, max, prod x two scalings x fused,
 *            unfused, in place) and broadcast from every root must give
 *            the same bits, and exact cases the reference; a ragged
 *            allgather works under both.
 *   refused  (collguard-run): =MPI must fail at core create, saying why.
 *   error    (mpirun): the 3rd MPI_Allreduce returns MPI_ERR_OTHER on
 *            every rank: that tensor fails with MPI's text, every pending
 *            one fails, later enqueues fail at once, destroy still works.
 *   bench [steps [block]] (mpirun): 1000 x 4 KiB fused allreduces per
 *            step, COLLGUARD vs MPI (test_hvd_backend_bench.c).
 * MPI_Allreduce and MPI_Bcast are counted through MPI's profiling
 * interface, so the MPI pass is proven to run on MPI and the COLLGUARD
 * pass not. Prints one summary line on rank 0; exit 1 at a failure.
 */
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collguard/collguard.h"
#include "collguard/hvd.h"
#include "core/context.h"
#include "tests/core/backend/test_hvd_backend_job.h"

#define N_AR HB_NAR
#ifndef HB_PIECES
#define HB_PIECES 0
#endif

/* Calls this process made (the shim's background thread; read after the
 * core is destroyed, i.e. after the thread was joined). */
static unsigned long hb_n_allreduce, hb_n_bcast;
/* Mode error: this MPI_Allreduce call (1-based) fails; 0: none. */
static unsigned long hb_fail_at;

int MPI_Allreduce(const void *send, void *recv, int count, MPI_Datatype dt,
                  MPI_Op op, MPI_Comm comm)
{
    if (++hb_n_allreduce == hb_fail_at)
        return MPI_ERR_OTHER;
    return PMPI_Allreduce(send, recv, count, dt, op, comm);
}

int MPI_Bcast(void *buf, int count, MPI_Datatype dt, int root, MPI_Comm comm)
{
    hb_n_bcast++;
    return PMPI_Bcast(buf, count, dt, root, comm);
}

static unsigned long hb_n_rscatter; /* MPI_Reduce_scatter + MPI_Reduce */

int MPI_Reduce_scatter(const void *send, void *recv, const int counts[],
                       MPI_Datatype dt, MPI_Op op, MPI_Comm comm)
{
    hb_n_rscatter++;
    return PMPI_Reduce_scatter(send, recv, counts, dt, op, comm);
}

int MPI_Reduce(const void *send, void *recv, int count, MPI_Datatype dt,
               MPI_Op op, int root, MPI_Comm comm)
{
    hb_n_rscatter++;
    return PMPI_Reduce(send, recv, count, dt, op, root, comm);
}

/* Reducescatters on the host backend: 8 small ones (fused in the 64K
 * buffer) and one of 9001 x 2 f32 (alone), Sum and Average, prescale 1
 * and 2; rank r's element i is r + i % 5. Every element checked. */
#define HB_RS 10
static int hb_run_reducescatter(hb_job_t *job)
{
    static float in[HB_RS][18002], out[HB_RS][18002];
    cg_hvd_req_h req[HB_RS];
    char name[32];

    for (int k = 0; k < HB_RS; k++) {
        int64_t rows = k == HB_RS - 1 ? 9001 : k % 7 + job->size - 1;
        for (int64_t i = 0; i < rows * 2; i++)
            in[k][i] = (float)(job->rank + i % 5);
        snprintf(name, sizeof(name), "rs.%d", k);
        cg_hvd_tensor_t t = {.name = name, .dtype = CG_DTYPE_F32, .ndim = 2,
                             .shape = {rows, 2}, .input = in[k],
                             .output = out[k]};
        if (cg_hvd_enqueue_reducescatter(job->core, &t,
                                         k % 2 ? CG_OP_AVG : CG_OP_SUM,
                                         k % 3 ? 1.0 : 2.0, 1.0,
                                         &req[k]) != CG_OK) {
            fprintf(stderr, "rank %d: %s: %s\n", job->rank, name,
                    cg_last_error());
            return 1;
        }
    }
    for (int k = 0; k < HB_RS; k++) {
        int64_t rows = k == HB_RS - 1 ? 9001 : k % 7 + job->size - 1;
        int64_t start, mine;
        if (cg_hvd_wait(req[k]) != CG_OK) {
            fprintf(stderr, "rank %d: rs.%d: %s\n", job->rank, k,
                    cg_hvd_error(req[k]));
            return 1;
        }
        cg_hvd_release(req[k]);
        cg_hvd_reducescatter_rows(rows, job->size, job->rank, &start, &mine);
        for (int64_t i = 0; i < mine * 2; i++) {
            double want = 0;
            for (int r = 0; r < job->size; r++)
                want += (k % 3 ? 1.0 : 2.0) * (r + (start * 2 + i) % 5);
            if (k % 2)
                want /= job->size;
            if (fabs(out[k][i] - want) > 1e-5 * fabs(want)) {
                fprintf(stderr, "rank %d: rs.%d[%lld] = %g, want %g\n",
                        job->rank, k, (long long)i, out[k][i], want);
                return 1;
            }
        }
    }
    return 0;
}

static int hb_run_allreduces(hb_job_t *job, hb_result_t *res)
{
    cg_hvd_req_h req[N_AR];
    hb_tensor_t *t = res->ar;
    int n = 0;

    for (int d = 0; d < HB_NDT; d++)
        for (int o = 0; o < HB_NOPS; o++)
            for (int s = 0; s < 2; s++)
                for (int k = 0; k < 4; k++, n++) {
                    hb_tensor_init(&t[n], job, d, o, s, k);
                    if (hb_enqueue_allreduce(job, &t[n], &req[n]) != 0)
                        return 1;
                }
    for (int i = 0; i < n; i++)
        if (hb_wait(job, &t[i], req[i]) != 0)
            return 1;
    return 0;
}

static int hb_run_broadcasts(hb_job_t *job, hb_result_t *res)
{
    cg_hvd_req_h req[HB_NDT * HB_RANKS_MAX];
    int n = 0;

    for (int d = 0; d < HB_NDT; d++)
        for (int root = 0; root < job->size; root++, n++) {
            hb_bcast_init(&res->bc[n], job, d, root);
            if (hb_enqueue_broadcast(job, &res->bc[n], &req[n]) != 0)
                return 1;
        }
    for (int i = 0; i < n; i++)
        if (hb_wait(job, &res->bc[i], req[i]) != 0)
            return 1;
    res->n_bc = n;
    return 0;
}

/* Rank r gives r + 1 rows of 3 values 10 r + j; allgather runs on the
 * engine whatever the backends. */
static int hb_run_allgather(hb_job_t *job)
{
    float in[HB_RANKS_MAX * 3];
    const float *got;
    cg_hvd_req_h req;
    int64_t dim0 = 0;
    int n = 0;

    for (int j = 0; j < (job->rank + 1) * 3; j++)
        in[j] = (float)(10 * job->rank + j);
    cg_hvd_tensor_t t = {.name = "gather", .dtype = CG_DTYPE_F32, .ndim = 2,
                         .shape = {job->rank + 1, 3}, .input = in};
    if (cg_hvd_enqueue_allgather(job->core, &t, &req) != CG_OK ||
        cg_hvd_wait(req) != CG_OK ||
        cg_hvd_allgather_result(req, (const void **)&got, &dim0) != CG_OK) {
        fprintf(stderr, "rank %d: allgather: %s\n", job->rank,
                cg_last_error());
        return 1;
    }
    for (int r = 0; r < job->size; r++)
        for (int j = 0; j < (r + 1) * 3; j++, n++)
            if (got[n] != (float)(10 * r + j)) {
                fprintf(stderr, "rank %d: gathered[%d] = %g, want %d\n",
                        job->rank, n, got[n], 10 * r + j);
                cg_hvd_release(req);
                return 1;
            }
    cg_hvd_release(req);
    return dim0 == (int64_t)job->size * (job->size + 1) / 2 ? 0 : 1;
}

static int hb_pass(const char *backend, hb_result_t *res)
{
    const char *vars[] = {backend, "CG_FUSION_THRESHOLD=64K", NULL};
    hb_job_t job;
    int rc;

    if (hb_job_start(&job, vars) != 0)
        return 1;
    res->rank = job.rank;
    res->size = job.size;
    hb_n_allreduce = hb_n_bcast = hb_n_rscatter = 0;
    rc = hb_run_allreduces(&job, res);
    if (rc == 0) {
        /* Not counted as allreduces: the MPI backend's one-int agreement
         * on the memory for a prescaled reducescatter input. */
        unsigned long ar = hb_n_allreduce;
        rc = hb_run_reducescatter(&job);
        hb_n_allreduce = ar;
    }
    if (rc == 0)
        rc = hb_run_broadcasts(&job, res);
    if (rc == 0)
        rc = hb_run_allgather(&job);
    cg_hvd_core_stats(job.core, &res->stats);
    hb_job_stop(&job);
    res->mpi_allreduces = hb_n_allreduce;
    res->mpi_bcasts = hb_n_bcast;
    res->mpi_rscatters = hb_n_rscatter;
    return rc;
}

static int hb_compare(void)
{
    static hb_result_t a, b;
    int rc;

    rc = hb_pass("CG_CPU_OPERATIONS=COLLGUARD", &a);
    if (rc == 0)
        rc = hb_pass("HOROVOD_CPU_OPERATIONS=mpi", &b);
    if (rc == 0)
        rc = hb_same(a.ar, b.ar, N_AR, "allreduce");
    if (rc == 0)
        rc = hb_same(a.bc, b.bc, a.n_bc, "broadcast");
    /* Built with a small CG_MPI_PIECE_MAX, large tensors take several
     * MPI calls each. */
    if (rc == 0 && (a.mpi_allreduces != 0 || a.mpi_bcasts != 0 ||
                    (HB_PIECES ? b.mpi_allreduces <= b.stats.allreduce_calls
                               : b.mpi_allreduces != b.stats.allreduce_calls) ||
                    (HB_PIECES ? b.mpi_bcasts <= (unsigned long)b.n_bc
                               : b.mpi_bcasts != (unsigned long)b.n_bc))) {
        fprintf(stderr, "rank %d: MPI_Allreduce / MPI_Bcast calls: "
                "COLLGUARD pass %lu / %lu (want 0 / 0), MPI pass %lu / %lu "
                "(want %s%llu / %s%d)\n", a.rank, a.mpi_allreduces,
                a.mpi_bcasts, b.mpi_allreduces, b.mpi_bcasts,
                HB_PIECES ? "more than " : "",
                (unsigned long long)b.stats.allreduce_calls,
                HB_PIECES ? "more than " : "", b.n_bc);
        rc = 1;
    }
    /* Reducescatters reach MPI in the MPI pass only (MPI_Reduce pieces in
     * the small-piece build), fused in both. */
    if (rc == 0 && (a.mpi_rscatters != 0 || b.mpi_rscatters == 0 ||
                    b.stats.reducescatter_calls >= HB_RS ||
                    a.stats.reducescatter_calls >= HB_RS)) {
        fprintf(stderr, "rank %d: reducescatter: MPI calls %lu / %lu "
                "(COLLGUARD / MPI pass), engine calls %llu / %llu for %d "
                "tensors\n", a.rank, a.mpi_rscatters, b.mpi_rscatters,
                (unsigned long long)a.stats.reducescatter_calls,
                (unsigned long long)b.stats.reducescatter_calls, HB_RS);
        rc = 1;
    }
    if (rc == 0 && (b.stats.fused_calls == 0 ||
                    b.stats.max_fused_tensors < 3)) {
        fprintf(stderr, "rank %d: the MPI pass fused nothing: %llu fused "
                "calls, at most %llu tensors\n", a.rank,
                (unsigned long long)b.stats.fused_calls,
                (unsigned long long)b.stats.max_fused_tensors);
        rc = 1;
    }
    if (rc == 0 && a.rank == 0)
        printf("hvd_backend compare: %d allreduces and %d broadcasts "
               "bit-identical COLLGUARD vs MPI on %d ranks (MPI: %llu calls, "
               "%llu fused, up to %llu tensors in one)\n", N_AR, a.n_bc,
               a.size, (unsigned long long)b.mpi_allreduces,
               (unsigned long long)b.stats.fused_calls,
               (unsigned long long)b.stats.max_fused_tensors);
    hb_result_free(&a);
    hb_result_free(&b);
    return rc;
}

/* 6 unfused tensors; the 3rd MPI call fails on every rank. */
static int hb_error(void)
{
    const char *vars[] = {"CG_CPU_OPERATIONS=MPI", "CG_FUSION_THRESHOLD=0",
                          NULL};
    float x[6][8] = {{0}};
    cg_hvd_req_h req[7];
    int ok = 0, first = 0, pending = 0, rc = 0;
    char name[16];
    hb_job_t job;

    if (hb_job_start(&job, vars) != 0)
        return 1;
    hb_n_allreduce = 0;
    hb_fail_at = 3;
    for (int k = 0; k < 6; k++) {
        snprintf(name, sizeof(name), "t%d", k);
        cg_hvd_tensor_t t = {.name = name, .dtype = CG_DTYPE_F32, .ndim = 1,
                             .shape = {8}, .input = x[k], .output = x[k]};
        if (cg_hvd_enqueue_allreduce(job.core, &t, CG_OP_SUM, 1, 1,
                                     &req[k]) != CG_OK)
            return 1;
    }
    for (int k = 0; k < 6; k++) {
        const char *why;
        ok += cg_hvd_wait(req[k]) == CG_OK;
        why = cg_hvd_error(req[k]);
        first += strncmp(why, "MPI_Allreduce of 8 f32 failed: MPI_ERR_OTHER",
                         44) == 0;
        pending += strncmp(why, "collective failed, the job cannot continue",
                           42) == 0 && strstr(why, "MPI_ERR_OTHER") != NULL;
        if (job.rank == 0 && why[0] != '\0')
            printf("t%d failed: %s\n", k, why);
        cg_hvd_release(req[k]);
    }
    cg_hvd_tensor_t t = {.name = "late", .dtype = CG_DTYPE_F32, .ndim = 1,
                         .shape = {8}, .input = x[0], .output = x[0]};
    if (ok != 2 || first != 1 || pending != 3 ||
        cg_hvd_enqueue_allreduce(job.core, &t, CG_OP_SUM, 1, 1, &req[6]) ==
            CG_OK) {
        fprintf(stderr, "rank %d: %d tensors passed (want 2), %d failed "
                "with MPI's error (want 1), %d as pending after it (want "
                "3); or a later enqueue succeeded\n", job.rank, ok, first,
                pending);
        rc = 1;
    }
    hb_job_stop(&job);
    return rc;
}

/* HOROVOD_*_OPERATIONS=MPI without mpirun: core create says why. */
static int hb_refused_one(const char *var, const char *name)
{
    const char *vars[] = {var, "CG_TRANSPORT=socket", "CG_SOCKET_IFNAME=lo",
                          NULL};
    cg_ctx_params_t cp = {.field_mask = CG_CTX_PARAM_ENV |
                                        CG_CTX_PARAM_BOOTSTRAP,
                          .bootstrap = 1};
    extern char **environ;
    const char *env[256];
    int n = 0, rc = 1;
    cg_ctx_h ctx;
    cg_hvd_core_h core;
    cg_status_t st;

    for (int i = 0; vars[i] != NULL; i++)
        env[n++] = vars[i];
    for (int i = 0; environ[i] != NULL && n < 255; i++)
        env[n++] = environ[i];
    env[n] = NULL;
    cp.env = env;
    if (cg_ctx_create(&cp, &ctx) != CG_OK) {
        fprintf(stderr, "context: %s\n", cg_last_error());
        return 1;
    }
    st = cg_hvd_core_create(ctx, &core);
    if (st == CG_OK) {
        fprintf(stderr, "%s: core create succeeded without mpirun\n", var);
        cg_hvd_core_destroy(core);
    } else if (st != CG_ERR_UNSUPPORTED ||
               strstr(cg_last_error(), "needs a launch by mpirun") == NULL ||
               strstr(cg_last_error(), name) == NULL) {
        fprintf(stderr, "%s: core create gave %s: %s\n", var,
                cg_status_string(st), cg_last_error());
    } else {
        if (cg_bootstrap_rank(ctx->bs) == 0)
            printf("%s refused: %s\n", var, cg_last_error());
        rc = 0;
    }
    cg_ctx_destroy(ctx);
    return rc;
}

int hb_refused(void)
{
    if (hb_refused_one("CG_CPU_OPERATIONS=MPI", "HOROVOD_CPU_OPERATIONS"))
        return 1;
    return hb_refused_one("HOROVOD_GPU_OPERATIONS=mpi",
                          "HOROVOD_GPU_OPERATIONS");
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "compare";

    if (strcmp(mode, "compare") == 0)
        return hb_compare();
    if (strcmp(mode, "refused") == 0)
        return hb_refused();
    if (strcmp(mode, "error") == 0)
        return hb_error();
    if (strcmp(mode, "bench") == 0)
        return hb_bench(argc > 2 ? atoi(argv[2]) : 40,
                        argc > 3 ? atoi(argv[3]) : 10);
    fprintf(stderr, "usage: %s compare|refused|error|bench [steps [block]]"
            "\n", argv[0]);
    return 2;
}
