/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Horovod's C ABI as libcollguard_hvd.so exports it: the names, C
 * signatures and return conventions of horovod/common/operations.h, which
 * Horovod's Python HorovodBasics calls through ctypes (no restype: every
 * return is read as a C int). For C callers and the tests; Python needs
 * no header. Layer: plugin.
 */
#ifndef CG_PLUGIN_HVD_ABI_H
#define CG_PLUGIN_HVD_ABI_H

#include <stdbool.h>

#include "collguard/hvd.h"

#define CG_HVD_EXPORT __attribute__((visibility("default")))

#ifdef __cplusplus
extern "C" {
#endif

/* Process-set error codes, Horovod's values. */
CG_HVD_EXPORT extern const int HOROVOD_PROCESS_SET_ERROR_INIT;        /* -1 */
CG_HVD_EXPORT extern const int HOROVOD_PROCESS_SET_ERROR_DYNAMIC;     /* -2 */
CG_HVD_EXPORT extern const int HOROVOD_PROCESS_SET_ERROR_UNKNOWN_SET; /* -3 */
CG_HVD_EXPORT extern const int HOROVOD_PROCESS_SET_ERROR_FOREIGN_SET; /* -4 */
CG_HVD_EXPORT extern const int HOROVOD_PROCESS_SET_ERROR_SHUTDOWN;    /* -5 */
CG_HVD_EXPORT extern const int HOROVOD_PROCESS_SET_ERROR_EXISTING_SET; /* -6 */

/* Collective over every launched rank. ranks (nranks > 0): the launched
 * ranks that form Horovod's world, in Horovod rank order; NULL or 0: all.
 * process_set_ranks/sizes: num_process_sets lists registered as ids 1..
 * (a duplicate or the whole world is skipped, as Horovod). Returns false,
 * with the reason logged, on bad arguments, disagreement between ranks, a
 * bootstrap failure, or for a launched rank not in ranks. Returns true at
 * once when already initialized. */
CG_HVD_EXPORT bool horovod_init(const int *ranks, int nranks,
                                const int *process_set_ranks,
                                const int *process_set_sizes,
                                int num_process_sets);
CG_HVD_EXPORT void horovod_shutdown(void);
CG_HVD_EXPORT int horovod_is_initialized(void);

/* Horovod's codes. start: -1 not initialized, -2 timeline not enabled
 * (HOROVOD_TIMELINE unset at init; set it to DYNAMIC to only trace
 * between start and stop), else 1: rank 0 writes file_name from now on
 * (a file it cannot create is logged). stop: -1 not initialized, else 1
 * (also when no timeline runs). Call both on every rank. */
CG_HVD_EXPORT int horovod_start_timeline(const char *file_name,
                                         bool mark_cycles);
CG_HVD_EXPORT int horovod_stop_timeline(void);

/* The collective core horovod_init started (collguard/hvd.h: enqueue,
 * poll, wait), or NULL before init, after shutdown, or when init was
 * given a rank list other than every launched rank in order. Valid until
 * horovod_shutdown. */
CG_HVD_EXPORT cg_hvd_core_h cg_hvd_global_core(void);
/* The context horovod_init created (cg_ctx_governor_snapshot: the memory
 * governor collguard.torch reports), or NULL when not initialized. Valid
 * until horovod_shutdown. */
CG_HVD_EXPORT cg_ctx_h cg_hvd_global_ctx(void);

/* -1 before horovod_init. */
CG_HVD_EXPORT int horovod_rank(void);
CG_HVD_EXPORT int horovod_local_rank(void);
CG_HVD_EXPORT int horovod_cross_rank(void);
CG_HVD_EXPORT int horovod_size(void);
CG_HVD_EXPORT int horovod_local_size(void);
CG_HVD_EXPORT int horovod_cross_size(void);
CG_HVD_EXPORT bool horovod_is_homogeneous(void);
/* -1 before init or when the bootstrap is not MPI; else 0/1. */
CG_HVD_EXPORT int horovod_mpi_threads_supported(void);

CG_HVD_EXPORT bool horovod_mpi_enabled(void);
CG_HVD_EXPORT bool horovod_mpi_built(void);
CG_HVD_EXPORT bool horovod_gloo_enabled(void);
CG_HVD_EXPORT bool horovod_gloo_built(void);
/* NCCL_VERSION_CODE when built with NCCL, else 0. */
CG_HVD_EXPORT int horovod_nccl_built(void);
CG_HVD_EXPORT bool horovod_ddl_built(void);
CG_HVD_EXPORT bool horovod_ccl_built(void);
CG_HVD_EXPORT bool horovod_cuda_built(void);
CG_HVD_EXPORT bool horovod_rocm_built(void);

/* Horovod's ReduceOp values: average 0, sum 1, adasum 2, min 3, max 4,
 * product 5. Callable before init. */
CG_HVD_EXPORT int horovod_reduce_op_average(void);
CG_HVD_EXPORT int horovod_reduce_op_sum(void);
CG_HVD_EXPORT int horovod_reduce_op_adasum(void);
CG_HVD_EXPORT int horovod_reduce_op_min(void);
CG_HVD_EXPORT int horovod_reduce_op_max(void);
CG_HVD_EXPORT int horovod_reduce_op_product(void);

/* Collective (every rank of the world, same ranks): the new id, or -1 not
 * initialized, -2 dynamic process sets not enabled
 * (HOROVOD_DYNAMIC_PROCESS_SETS=1), -3 bad or disagreeing rank lists
 * (logged), -5 the job's bootstrap failed, -6 a set with these ranks
 * exists. */
CG_HVD_EXPORT int horovod_add_process_set(const int *ranks, int nranks);
/* Collective: the id, or -1, -2, -3 (unknown id, id 0 or disagreeing ids),
 * -5 as above. */
CG_HVD_EXPORT int horovod_remove_process_set(int process_set_id);
/* -1 not initialized, -3 unknown set, -4 this process is not in it. */
CG_HVD_EXPORT int horovod_process_set_rank(int process_set_id);
CG_HVD_EXPORT int horovod_process_set_size(int process_set_id);
/* 0/1, or -1, -3. */
CG_HVD_EXPORT int horovod_process_set_included(int process_set_id);
/* Counts set 0 even before init, as Horovod. */
CG_HVD_EXPORT int horovod_number_of_process_sets(void);
/* ids_prealloc: horovod_number_of_process_sets() ints, registration
 * order. */
CG_HVD_EXPORT void horovod_process_set_ids(int *ids_prealloc);
/* ranks_prealloc: horovod_process_set_size(id) ints, ascending. 0, or -1,
 * -3. */
CG_HVD_EXPORT int horovod_process_set_ranks(int id, int *ranks_prealloc);

#ifdef __cplusplus
}
#endif
#endif
