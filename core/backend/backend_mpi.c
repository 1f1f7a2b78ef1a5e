/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The MPI backend of the Horovod shim (built with MPI), made and freed:
 * MPI checked to be initialised, threaded enough (MPI_THREAD_MULTIPLE)
 * and spanning the core's ranks in order; its communicator, a duplicate
 * of MPI_COMM_WORLD or a process set's communicator of its members, with
 * errors returned, not fatal; and the user-defined MPI ops that call
 * cg_reduce where MPI has no type (f16, bf16) or other NaN/-0 rules (f32
 * and f64 min/max). The collectives of its ops table are
 * backend_mpi_coll.c's. Layer: core/backend; calls MPI,
 * core/reduce/reduce.h, governor.
 */
#include <mpi.h>
#include <string.h>

#include "core/base/error.h"
#include "core/backend/backend_mpi_impl.h"
#include "core/reduce/reduce.h"

/* MPI's contract: inout[i] = in[i] op inout[i]; commutative, so the
 * engine's inout op in gives the same value. */
#define CG__MPI_UFN(name, DT, OP)                                             \
    static void cg__mpi_##name(void *in, void *inout, int *len,              \
                               MPI_Datatype *type)                           \
    {                                                                         \
        (void)type;                                                           \
        cg_reduce(inout, in, (size_t)*len, DT, OP);                           \
    }

CG__MPI_UFN(f16_sum, CG_DTYPE_F16, CG_OP_SUM)
CG__MPI_UFN(f16_prod, CG_DTYPE_F16, CG_OP_PROD)
CG__MPI_UFN(f16_min, CG_DTYPE_F16, CG_OP_MIN)
CG__MPI_UFN(f16_max, CG_DTYPE_F16, CG_OP_MAX)
CG__MPI_UFN(bf16_sum, CG_DTYPE_BF16, CG_OP_SUM)
CG__MPI_UFN(bf16_prod, CG_DTYPE_BF16, CG_OP_PROD)
CG__MPI_UFN(bf16_min, CG_DTYPE_BF16, CG_OP_MIN)
CG__MPI_UFN(bf16_max, CG_DTYPE_BF16, CG_OP_MAX)
CG__MPI_UFN(f32_min, CG_DTYPE_F32, CG_OP_MIN)
CG__MPI_UFN(f32_max, CG_DTYPE_F32, CG_OP_MAX)
CG__MPI_UFN(f64_min, CG_DTYPE_F64, CG_OP_MIN)
CG__MPI_UFN(f64_max, CG_DTYPE_F64, CG_OP_MAX)

static const struct {
    cg_dtype_t dt;
    cg_redop_t op;
    MPI_User_function *fn;
} cg__mpi_ufns[] = {
    {CG_DTYPE_F16, CG_OP_SUM, cg__mpi_f16_sum},
    {CG_DTYPE_F16, CG_OP_PROD, cg__mpi_f16_prod},
    {CG_DTYPE_F16, CG_OP_MIN, cg__mpi_f16_min},
    {CG_DTYPE_F16, CG_OP_MAX, cg__mpi_f16_max},
    {CG_DTYPE_BF16, CG_OP_SUM, cg__mpi_bf16_sum},
    {CG_DTYPE_BF16, CG_OP_PROD, cg__mpi_bf16_prod},
    {CG_DTYPE_BF16, CG_OP_MIN, cg__mpi_bf16_min},
    {CG_DTYPE_BF16, CG_OP_MAX, cg__mpi_bf16_max},
    {CG_DTYPE_F32, CG_OP_MIN, cg__mpi_f32_min},
    {CG_DTYPE_F32, CG_OP_MAX, cg__mpi_f32_max},
    {CG_DTYPE_F64, CG_OP_MIN, cg__mpi_f64_min},
    {CG_DTYPE_F64, CG_OP_MAX, cg__mpi_f64_max},
};
#define CG__MPI_NUFNS (sizeof(cg__mpi_ufns) / sizeof(cg__mpi_ufns[0]))

/* Frees what create made; MPI already finalized (by the application,
 * or at exit) has freed it all itself. */
static void cg__mpibe_free(cg__be_mpi_t *be)
{
    int finalized = 1;

    MPI_Finalized(&finalized);
    for (int d = 0; d < CG_DTYPE_COUNT && !finalized; d++)
        for (int o = 0; o < CG_OP_COUNT; o++)
            if (be->uops[d][o] != MPI_OP_NULL)
                MPI_Op_free(&be->uops[d][o]);
    if (!finalized && be->comm != MPI_COMM_NULL)
        MPI_Comm_free(&be->comm);
    cg_governor_free(be->gov, CG_MEM_CAT_CONTROL, be->rcounts,
                     (size_t)be->size * sizeof(int));
    cg_governor_free(be->gov, CG_MEM_CAT_CONTROL, be->a2a,
                     (size_t)be->size * 4 * sizeof(int));
    cg_governor_free(be->gov, CG_MEM_CAT_CONTROL, be, sizeof(*be));
}

static void cg__mpibe_destroy(cg_backend_t *super)
{
    cg__mpibe_free((cg__be_mpi_t *)super);
}

static const cg_backend_ops_t cg__mpibe_ops = {
    .kind = CG_BACKEND_MPI,
    .allreduce_activity = "MPI_ALLREDUCE",
    .broadcast_activity = "MPI_BCAST",
    .allreduce = cg__mpibe_allreduce,
    .broadcast = cg__mpibe_broadcast,
    .reducescatter = cg__mpibe_reducescatter,
    .reducescatter_activity = "MPI_REDUCESCATTER",
    .alltoallv = cg__mpibe_alltoallv,
    .alltoall_activity = "MPI_ALLTOALL",
    .destroy = cg__mpibe_destroy,
};

static const char *cg__mpi_thread_name(int level)
{
    switch (level) {
    case MPI_THREAD_SINGLE:
        return "MPI_THREAD_SINGLE";
    case MPI_THREAD_FUNNELED:
        return "MPI_THREAD_FUNNELED";
    case MPI_THREAD_SERIALIZED:
        return "MPI_THREAD_SERIALIZED";
    default:
        return "MPI_THREAD_MULTIPLE";
    }
}

/* MPI is initialised, threaded enough, and its world is the core's. */
static cg_status_t cg__mpi_check(const cg_backend_params_t *p)
{
    const char *src = cg_bootstrap_src_name(cg_bootstrap_env(p->bs)->source);
    int inited = 0, finalized = 0, level = 0, wsize = 0, wrank = 0;

    MPI_Initialized(&inited);
    MPI_Finalized(&finalized);
    if (!inited || finalized)
        return cg_error_set(CG_ERR_UNSUPPORTED, "%s=MPI needs a launch by "
                            "mpirun: this job was started by %s and MPI is "
                            "%s; launch it with mpirun or choose %s="
                            "COLLGUARD", p->var, src,
                            finalized ? "finalized" : "not initialized",
                            p->var);
    MPI_Query_thread(&level);
    if (level < MPI_THREAD_MULTIPLE)
        return cg_error_set(CG_ERR_UNSUPPORTED, "%s=MPI needs MPI "
                            "initialized with MPI_THREAD_MULTIPLE (the "
                            "shim's background thread calls MPI while other "
                            "threads may), but this MPI provides %s; call "
                            "MPI_Init_thread with MPI_THREAD_MULTIPLE (or let "
                            "collguard initialize MPI) or choose %s="
                            "COLLGUARD", p->var, cg__mpi_thread_name(level),
                            p->var);
    MPI_Comm_size(MPI_COMM_WORLD, &wsize);
    MPI_Comm_rank(MPI_COMM_WORLD, &wrank);
    if (p->set_ranks != NULL) { /* a process set: MPI over the members */
        if (wsize <= p->set_ranks[p->size - 1] ||
            wrank != p->set_ranks[p->rank])
            return cg_error_set(CG_ERR_UNSUPPORTED, "%s=MPI on process set "
                                "%d: MPI_COMM_WORLD has this process as rank "
                                "%d of %d, but the set has it as job rank %d; "
                                "MPI must span the job's ranks in order",
                                p->var, p->set_id, wrank, wsize,
                                p->set_ranks[p->rank]);
        return CG_OK;
    }
    if (wsize != p->size || wrank != p->rank)
        return cg_error_set(CG_ERR_UNSUPPORTED, "%s=MPI: MPI_COMM_WORLD has "
                            "this process as rank %d of %d, but the job "
                            "(bootstrap %s) as rank %d of %d; MPI must span "
                            "exactly the job's ranks in the same order",
                            p->var, wrank, wsize, src, p->rank, p->size);
    return CG_OK;
}

/* The backend's communicator: a duplicate of MPI_COMM_WORLD, or for a
 * process set one of its members (collective over them alone, so ranks
 * outside the set never call it), tagged with the set's id. */
static int cg__mpi_comm(const cg_backend_params_t *p, MPI_Comm *comm_p,
                        const char **what_p)
{
    MPI_Group world, group;
    int rc;

    if (p->set_ranks == NULL) {
        *what_p = "MPI_Comm_dup";
        return MPI_Comm_dup(MPI_COMM_WORLD, comm_p);
    }
    *what_p = "MPI_Comm_create_group";
    rc = MPI_Comm_group(MPI_COMM_WORLD, &world);
    if (rc != MPI_SUCCESS)
        return rc;
    rc = MPI_Group_incl(world, p->size, p->set_ranks, &group);
    if (rc == MPI_SUCCESS) {
        rc = MPI_Comm_create_group(MPI_COMM_WORLD, group, p->set_id, comm_p);
        MPI_Group_free(&group);
    }
    MPI_Group_free(&world);
    return rc;
}

cg_status_t cg_backend_mpi_create(const cg_backend_params_t *params,
                                  cg_backend_t **be_p)
{
    char text[MPI_MAX_ERROR_STRING];
    const char *what;
    cg__be_mpi_t *be;
    cg_status_t st;
    int rc;

    st = cg__mpi_check(params);
    if (st != CG_OK)
        return st;
    st = cg_governor_alloc(params->gov, CG_MEM_CAT_CONTROL, sizeof(*be),
                           (void **)&be);
    if (st != CG_OK)
        return st;
    memset(be, 0, sizeof(*be));
    be->super.ops = &cg__mpibe_ops;
    be->super.kind = CG_BACKEND_MPI;
    be->gov = params->gov;
    be->log = params->log;
    be->size = params->size;
    be->comm = MPI_COMM_NULL;
    for (int d = 0; d < CG_DTYPE_COUNT; d++)
        for (int o = 0; o < CG_OP_COUNT; o++)
            be->uops[d][o] = MPI_OP_NULL;
    st = cg_governor_alloc(params->gov, CG_MEM_CAT_CONTROL,
                           (size_t)be->size * sizeof(int),
                           (void **)&be->rcounts);
    if (st == CG_OK)
        st = cg_governor_alloc(params->gov, CG_MEM_CAT_CONTROL,
                               (size_t)be->size * 4 * sizeof(int),
                               (void **)&be->a2a);
    if (st != CG_OK)
        goto err_free;
    rc = cg__mpi_comm(params, &be->comm, &what);
    if (rc == MPI_SUCCESS) {
        what = "MPI_Comm_set_errhandler";
        rc = MPI_Comm_set_errhandler(be->comm, MPI_ERRORS_RETURN);
    }
    for (size_t i = 0; i < CG__MPI_NUFNS && rc == MPI_SUCCESS; i++) {
        what = "MPI_Op_create";
        rc = MPI_Op_create(cg__mpi_ufns[i].fn, 1,
                           &be->uops[cg__mpi_ufns[i].dt][cg__mpi_ufns[i].op]);
    }
    if (rc != MPI_SUCCESS) {
        st = cg_error_set(CG_ERR_IO, "%s=MPI: %s failed: %s (MPI error %d)",
                          params->var, what, cg__mpi_text(rc, text), rc);
        goto err_free;
    }
    cg_debug(params->log, "mpi backend on %s, %d ranks",
             params->set_ranks != NULL ? "a process set's communicator"
                                       : "a duplicate of MPI_COMM_WORLD",
             be->size);
    *be_p = &be->super;
    return CG_OK;

err_free:
    cg__mpibe_free(be);
    return st;
}
