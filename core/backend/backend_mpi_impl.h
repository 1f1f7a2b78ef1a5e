/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Internals of the Horovod shim's MPI backend: the backend object that
 * backend_mpi.c creates and frees, and the collectives and the MPI error
 * text that backend_mpi_coll.c gives it.
 * Layer: core/backend; internal to the backend_mpi*.c files.
 */
#ifndef CG_CORE_BACKEND_BACKEND_MPI_IMPL_H
#define CG_CORE_BACKEND_BACKEND_MPI_IMPL_H

#include <mpi.h>

#include "core/backend/hvd_backend.h"

typedef struct cg__be_mpi {
    cg_backend_t super;
    cg_governor_t *gov;
    const cg_log_t *log;
    MPI_Comm comm;
    int size;
    int *rcounts; /* size ints: MPI_Reduce_scatter's receive counts */
    int *a2a;     /* 4 x size ints: MPI_Alltoallv's counts, displs */
    MPI_Op uops[CG_DTYPE_COUNT][CG_OP_COUNT]; /* MPI_OP_NULL: predefined */
} cg__be_mpi_t;

/* backend_mpi_coll.c: the ops table's collectives. */
cg_status_t cg__mpibe_allreduce(cg_backend_t *super, const void *send,
                                void *recv, size_t count, cg_dtype_t dt,
                                cg_redop_t op, double prescale,
                                double postscale, cg_backend_mem_t mem);
cg_status_t cg__mpibe_broadcast(cg_backend_t *super, void *buf, size_t count,
                                cg_dtype_t dt, int root,
                                cg_backend_mem_t mem);
cg_status_t cg__mpibe_reducescatter(cg_backend_t *super, const void *send,
                                    void *recv, const size_t *counts,
                                    cg_dtype_t dt, cg_redop_t op,
                                    double prescale, double postscale);
cg_status_t cg__mpibe_alltoallv(cg_backend_t *super, const void *send,
                                void *recv, const int64_t *rows, size_t row);
/* MPI's text for rc. */
const char *cg__mpi_text(int rc, char text[MPI_MAX_ERROR_STRING]);

#endif
