/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The bootstrap's MPI source, used under mpirun when MPI is built in: a
 * private duplicate of MPI_COMM_WORLD (errors returned, never fatal), cross
 * rank/size from a split by local rank, and the collectives as MPI
 * non-blocking collectives tested until done or the timeout.
 * MPI lifetime: initialized here only if nobody did; then finalized at
 * process exit (atexit), never at destroy, because MPI cannot be
 * initialized twice and a bootstrap may be created again. MPI that the
 * application initialized is never finalized here.
 * Layer: transport; calls MPI and core/base.
 */
#include "transport/bootstrap_impl.h"

#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/base/error.h"
#include "transport/sock.h"

/* Test a request this long before sleeping between tests. */
#define CG__BS_MPI_SPIN_NS (1000000ull)
#define CG__BS_MPI_NAP_NS (100000L)

struct cg__bs_mpi {
    MPI_Comm comm;
    cg_mem_ops_t mem;
    uint64_t timeout_ns;
    unsigned calls;
};

static cg_status_t cg__bs_mpi_err(int rc, const char *what)
{
    char text[MPI_MAX_ERROR_STRING] = "";
    int len = 0;

    MPI_Error_string(rc, text, &len);
    return cg_error_set(CG_ERR_IO, "%s failed: %s (MPI error %d)", what, text,
                        rc);
}

/* Registered only when this file initialized MPI. */
static void cg__bs_mpi_atexit(void)
{
    int finalized = 1;

    MPI_Finalized(&finalized);
    if (!finalized)
        MPI_Finalize();
}

static cg_status_t cg__bs_mpi_init(const cg_log_t *log)
{
    int inited = 0, finalized = 0, provided = 0, rc;

    MPI_Initialized(&inited);
    MPI_Finalized(&finalized);
    if (finalized)
        return cg_error_set(CG_ERR_NOT_INITIALIZED,
                            "MPI was already finalized in this process; the "
                            "bootstrap cannot use it (MPI cannot be "
                            "initialized twice)");
    if (inited)
        return CG_OK;
    rc = MPI_Init_thread(NULL, NULL, MPI_THREAD_MULTIPLE, &provided);
    if (rc != MPI_SUCCESS)
        return cg__bs_mpi_err(rc, "MPI_Init_thread");
    if (atexit(cg__bs_mpi_atexit) != 0)
        cg_warn(log, "atexit failed: MPI will not be finalized at exit");
    cg_debug(log, "bootstrap initialized MPI (thread level %d)", provided);
    return CG_OK;
}

/* Waits for req until done or the timeout. */
static cg_status_t cg__bs_mpi_wait(cg__bs_mpi_t *mpi, MPI_Request *req,
                                   const char *what)
{
    uint64_t start = cg_now_ns();
    uint64_t deadline = cg_deadline_ns(mpi->timeout_ns);
    struct timespec nap = {0, CG__BS_MPI_NAP_NS};
    int done = 0, rc;

    for (;;) {
        rc = MPI_Test(req, &done, MPI_STATUS_IGNORE);
        if (rc != MPI_SUCCESS)
            return cg__bs_mpi_err(rc, what);
        if (done)
            return CG_OK;
        uint64_t now = cg_now_ns();
        if (now >= deadline)
            return cg_error_set(CG_ERR_TIMEOUT,
                                "MPI %s (call %u) did not complete within "
                                "%.1f s: a rank is stuck outside the "
                                "bootstrap or dead (MPI does not say which)",
                                what, mpi->calls,
                                (double)mpi->timeout_ns / 1e9);
        if (now - start > CG__BS_MPI_SPIN_NS)
            nanosleep(&nap, NULL);
    }
}

cg_status_t cg__bs_mpi_collective(cg__bs_mpi_t *mpi, cg_rdv_op_t op,
                                  int root, const void *mine, void *out,
                                  size_t len)
{
    MPI_Request req = MPI_REQUEST_NULL;
    int rank = 0, rc = MPI_SUCCESS;

    mpi->calls++;
    MPI_Comm_rank(mpi->comm, &rank);
    switch (op) {
    case CG_RDV_OP_ALLGATHER:
        memmove((char *)out + (size_t)rank * len, mine, len);
        rc = MPI_Iallgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, out, (int)len,
                            MPI_BYTE, mpi->comm, &req);
        break;
    case CG_RDV_OP_BCAST:
        if (rank == root && out != mine)
            memmove(out, mine, len);
        rc = MPI_Ibcast(out, (int)len, MPI_BYTE, root, mpi->comm, &req);
        break;
    case CG_RDV_OP_BARRIER:
        rc = MPI_Ibarrier(mpi->comm, &req);
        break;
    default:
        return cg_error_set(CG_ERR_INVALID_PARAM, "MPI bootstrap: op %d",
                            (int)op);
    }
    if (rc != MPI_SUCCESS)
        return cg__bs_mpi_err(rc, cg_rdv_op_name(op));
    return cg__bs_mpi_wait(mpi, &req, cg_rdv_op_name(op));
}

/* Rank and size must be what mpirun's environment said. */
static cg_status_t cg__bs_mpi_layout(cg__bs_mpi_t *mpi,
                                     cg_bootstrap_env_t *env)
{
    MPI_Comm cross;
    int rank, size, rc;

    MPI_Comm_rank(mpi->comm, &rank);
    MPI_Comm_size(mpi->comm, &size);
    if (rank != env->rank || size != env->size)
        return cg_error_set(CG_ERR_CONFIG,
                            "OMPI_COMM_WORLD_RANK=%d OMPI_COMM_WORLD_SIZE=%d "
                            "but MPI_COMM_WORLD has rank %d of %d (stale "
                            "OMPI_* variables?)", env->rank, env->size, rank,
                            size);
    rc = MPI_Comm_split(mpi->comm, env->local_rank, rank, &cross);
    if (rc != MPI_SUCCESS)
        return cg__bs_mpi_err(rc, "MPI_Comm_split by local rank");
    MPI_Comm_rank(cross, &env->cross_rank);
    MPI_Comm_size(cross, &env->cross_size);
    MPI_Comm_free(&cross);
    return CG_OK;
}

cg_status_t cg__bs_mpi_create(const cg_bootstrap_params_t *params,
                              cg_bootstrap_env_t *env, uint64_t *cookie_p,
                              cg__bs_mpi_t **mpi_p)
{
    uint64_t cookie = *cookie_p;
    cg__bs_mpi_t *mpi;
    cg_status_t status;
    int rc;

    status = cg__bs_mpi_init(params->log);
    if (status != CG_OK)
        return status;
    mpi = cg_mem_alloc(&params->mem, CG_MEM_CAT_CONTROL, sizeof(*mpi));
    if (mpi == NULL)
        return CG_ERR_NO_MEMORY;
    memset(mpi, 0, sizeof(*mpi));
    mpi->mem = params->mem;
    mpi->timeout_ns = params->timeout_ns;
    rc = MPI_Comm_dup(MPI_COMM_WORLD, &mpi->comm);
    if (rc != MPI_SUCCESS) {
        status = cg__bs_mpi_err(rc, "MPI_Comm_dup(MPI_COMM_WORLD)");
        goto err_free;
    }
    MPI_Comm_set_errhandler(mpi->comm, MPI_ERRORS_RETURN);
    status = cg__bs_mpi_layout(mpi, env);
    if (status == CG_OK)
        status = cg__bs_mpi_collective(mpi, CG_RDV_OP_BCAST, 0, &cookie,
                                       &cookie, sizeof(cookie));
    if (status != CG_OK)
        goto err_comm;
    *cookie_p = cookie;
    *mpi_p = mpi;
    return CG_OK;

err_comm:
    MPI_Comm_free(&mpi->comm);
err_free:
    cg_mem_free(&params->mem, CG_MEM_CAT_CONTROL, mpi, sizeof(*mpi));
    return status;
}

void cg__bs_mpi_destroy(cg__bs_mpi_t *mpi)
{
    int finalized = 0;
    cg_mem_ops_t mem;

    if (mpi == NULL)
        return;
    MPI_Finalized(&finalized);
    if (!finalized)
        MPI_Comm_free(&mpi->comm);
    mem = mpi->mem;
    cg_mem_free(&mem, CG_MEM_CAT_CONTROL, mpi, sizeof(*mpi));
}
