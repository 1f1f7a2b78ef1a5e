/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Horovod's C ABI (Face 1 of libcollguard_hvd.so): the functions Horovod's
 * Python HorovodBasics calls through ctypes, with Horovod's names,
 * signatures, return values and error codes, over collguard's context and
 * bootstrap. The ABI has no handle, so the initialized instance hangs off
 * one file-scope pointer, cg__hvd: the shim's only global, NULL when not
 * initialized; all state lives in the struct it points to. As in Horovod,
 * init, shutdown and process-set changes belong to one thread at a time.
 * Layer: plugin; calls plugin/hvd_init, plugin/hvd_process_sets.
 */
#include "plugin/hvd_abi.h"

#include <string.h>

#include "cg_build.h"
#include "core/base/error.h"
#include "plugin/hvd_impl.h"

#if CG_HAVE_MPI
#include <mpi.h>
#endif
#if CG_HAVE_NCCL
#include <nccl.h>
#endif

static cg__hvd_t *cg__hvd;

const int HOROVOD_PROCESS_SET_ERROR_INIT = CG_HVD_PS_ERR_INIT;
const int HOROVOD_PROCESS_SET_ERROR_DYNAMIC = CG_HVD_PS_ERR_DYNAMIC;
const int HOROVOD_PROCESS_SET_ERROR_UNKNOWN_SET = CG_HVD_PS_ERR_UNKNOWN_SET;
const int HOROVOD_PROCESS_SET_ERROR_FOREIGN_SET = CG_HVD_PS_ERR_FOREIGN_SET;
const int HOROVOD_PROCESS_SET_ERROR_SHUTDOWN = CG_HVD_PS_ERR_SHUTDOWN;
const int HOROVOD_PROCESS_SET_ERROR_EXISTING_SET = CG_HVD_PS_ERR_EXISTING_SET;

bool horovod_init(const int *ranks, int nranks, const int *process_set_ranks,
                  const int *process_set_sizes, int num_process_sets)
{
    cg__hvd_t *h;

    if (cg__hvd != NULL)
        return true;
    if (cg__hvd_create(ranks, nranks, process_set_ranks, process_set_sizes,
                       num_process_sets, &h) != CG_OK)
        return false;
    cg__hvd = h;
    return true;
}

void horovod_shutdown(void)
{
    cg__hvd_t *h = cg__hvd;

    cg__hvd = NULL;
    cg__hvd_destroy(h);
}

int horovod_is_initialized(void)
{
    return cg__hvd != NULL;
}

/* Horovod's codes: -1 not initialized, -2 HOROVOD_TIMELINE unset at
 * init, else 1 (a file rank 0 cannot create is logged, as Horovod). */
int horovod_start_timeline(const char *file_name, bool mark_cycles)
{
    if (cg__hvd == NULL)
        return -1;
    if (cg__hvd->ctx->cfg.timeline[0] == '\0')
        return -2;
    if (cg__hvd->core == NULL) {
        cg_warn(cg__hvd->log, "horovod_start_timeline: no collective core "
                "(horovod_init was given a rank list), nothing to record");
        return 1;
    }
    if (cg_hvd_timeline_start(cg__hvd->core, file_name, mark_cycles) !=
        CG_OK)
        cg_error(cg__hvd->log, "horovod_start_timeline: %s",
                 cg_last_error());
    return 1;
}

/* -1 not initialized, else 1 (also when no timeline runs, as Horovod). */
int horovod_stop_timeline(void)
{
    if (cg__hvd == NULL)
        return -1;
    if (cg__hvd->core != NULL)
        (void)cg_hvd_timeline_stop(cg__hvd->core);
    return 1;
}

cg_hvd_core_h cg_hvd_global_core(void)
{
    return (cg__hvd == NULL) ? NULL : cg__hvd->core;
}

cg_ctx_h cg_hvd_global_ctx(void)
{
    return (cg__hvd == NULL) ? NULL : cg__hvd->ctx;
}

#define CG__HVD_GETTER(fn, field)                                            \
    int fn(void)                                                             \
    {                                                                        \
        return (cg__hvd == NULL) ? -1 : cg__hvd->field;                      \
    }

CG__HVD_GETTER(horovod_rank, rank)
CG__HVD_GETTER(horovod_local_rank, local_rank)
CG__HVD_GETTER(horovod_cross_rank, cross_rank)
CG__HVD_GETTER(horovod_size, size)
CG__HVD_GETTER(horovod_local_size, local_size)
CG__HVD_GETTER(horovod_cross_size, cross_size)

bool horovod_is_homogeneous(void)
{
    return cg__hvd != NULL && cg__hvd->homogeneous;
}

bool horovod_mpi_enabled(void)
{
    return cg__hvd != NULL &&
           cg_bootstrap_env(cg__hvd->bs)->source == CG_BOOTSTRAP_SRC_MPI;
}

int horovod_mpi_threads_supported(void)
{
    if (!horovod_mpi_enabled())
        return -1;
#if CG_HAVE_MPI
    {
        int provided = MPI_THREAD_SINGLE;

        if (MPI_Query_thread(&provided) != MPI_SUCCESS)
            return -1;
        return provided == MPI_THREAD_MULTIPLE;
    }
#else
    return -1;
#endif
}

bool horovod_mpi_built(void)
{
    return CG_HAVE_MPI != 0;
}

bool horovod_gloo_enabled(void)
{
    return false;
}

bool horovod_gloo_built(void)
{
    return false;
}

int horovod_nccl_built(void)
{
#if CG_HAVE_NCCL
    return NCCL_VERSION_CODE;
#else
    return 0;
#endif
}

bool horovod_ddl_built(void)
{
    return false;
}

bool horovod_ccl_built(void)
{
    return false;
}

bool horovod_cuda_built(void)
{
    return CG_HAVE_CUDA != 0;
}

bool horovod_rocm_built(void)
{
    return false;
}

/* Horovod's ReduceOp enum (common.h). */
int horovod_reduce_op_average(void) { return 0; }
int horovod_reduce_op_sum(void) { return 1; }
int horovod_reduce_op_adasum(void) { return 2; }
int horovod_reduce_op_min(void) { return 3; }
int horovod_reduce_op_max(void) { return 4; }
int horovod_reduce_op_product(void) { return 5; }

/* The checks Horovod makes before a process-set change. */
static int cg__hvd_can_change(const char *fn)
{
    if (cg__hvd == NULL)
        return CG_HVD_PS_ERR_INIT;
    if (!cg__hvd->dynamic) {
        cg_warn(cg__hvd->log, "%s: set HOROVOD_DYNAMIC_PROCESS_SETS=1 "
                "before horovod_init to add or remove process sets", fn);
        return CG_HVD_PS_ERR_DYNAMIC;
    }
    if (!cg__hvd->whole_job) {
        cg_warn(cg__hvd->log, "%s: not supported when horovod_init was "
                "given a subset (%d of %d) of the launched ranks", fn,
                cg__hvd->size, cg_bootstrap_size(cg__hvd->bs));
        return CG_HVD_PS_ERR_DYNAMIC;
    }
    return 0;
}

int horovod_add_process_set(const int *ranks, int nranks)
{
    int err = cg__hvd_can_change("horovod_add_process_set");

    return (err != 0) ? err : cg__hvd_psets_add(cg__hvd, ranks, nranks);
}

int horovod_remove_process_set(int process_set_id)
{
    int err = cg__hvd_can_change("horovod_remove_process_set");

    return (err != 0) ? err : cg__hvd_psets_remove(cg__hvd, process_set_id);
}

/* Set 0 answers like horovod_rank/size even before init, as Horovod. */
int horovod_process_set_rank(int process_set_id)
{
    const cg__hvd_pset_t *ps;

    if (process_set_id == 0)
        return horovod_rank();
    if (cg__hvd == NULL)
        return CG_HVD_PS_ERR_INIT;
    ps = cg__hvd_psets_find(cg__hvd, process_set_id);
    if (ps == NULL)
        return CG_HVD_PS_ERR_UNKNOWN_SET;
    return (ps->rank >= 0) ? ps->rank : CG_HVD_PS_ERR_FOREIGN_SET;
}

int horovod_process_set_size(int process_set_id)
{
    const cg__hvd_pset_t *ps;

    if (process_set_id == 0)
        return horovod_size();
    if (cg__hvd == NULL)
        return CG_HVD_PS_ERR_INIT;
    ps = cg__hvd_psets_find(cg__hvd, process_set_id);
    return (ps == NULL) ? CG_HVD_PS_ERR_UNKNOWN_SET : ps->size;
}

int horovod_process_set_included(int process_set_id)
{
    const cg__hvd_pset_t *ps;

    if (process_set_id == 0)
        return 1;
    if (cg__hvd == NULL)
        return CG_HVD_PS_ERR_INIT;
    ps = cg__hvd_psets_find(cg__hvd, process_set_id);
    return (ps == NULL) ? CG_HVD_PS_ERR_UNKNOWN_SET : (ps->rank >= 0);
}

int horovod_number_of_process_sets(void)
{
    return (cg__hvd == NULL) ? 1 : cg__hvd->ps.count;
}

void horovod_process_set_ids(int *ids_prealloc)
{
    if (ids_prealloc == NULL)
        return;
    if (cg__hvd == NULL) {
        ids_prealloc[0] = 0;
        return;
    }
    for (int i = 0; i < cg__hvd->ps.count; i++)
        ids_prealloc[i] = cg__hvd->ps.sets[i].id;
}

int horovod_process_set_ranks(int id, int *ranks_prealloc)
{
    const cg__hvd_pset_t *ps;

    if (cg__hvd == NULL)
        return CG_HVD_PS_ERR_INIT;
    ps = cg__hvd_psets_find(cg__hvd, id);
    if (ps == NULL)
        return CG_HVD_PS_ERR_UNKNOWN_SET;
    if (ranks_prealloc != NULL)
        memcpy(ranks_prealloc, ps->ranks, (size_t)ps->size * sizeof(int));
    return 0;
}
