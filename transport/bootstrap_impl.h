/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The bootstrap's private interface to its MPI source (bootstrap_mpi.c,
 * built only with MPI), which bootstrap.c calls, and the two calls
 * bootstrap_group.c builds a group's bootstrap with. Layer: transport.
 */
#ifndef CG_TRANSPORT_BOOTSTRAP_IMPL_H
#define CG_TRANSPORT_BOOTSTRAP_IMPL_H

#include "transport/bootstrap.h"
#include "transport/rendezvous.h"

typedef struct cg__bs_mpi cg__bs_mpi_t;

/* Initializes MPI when nobody did (and then finalizes it at exit), checks
 * rank and size against env, fills env's cross rank/size from a split and
 * agrees on the cookie (rank 0's, broadcast). */
cg_status_t cg__bs_mpi_create(const cg_bootstrap_params_t *params,
                              cg_bootstrap_env_t *env, uint64_t *cookie_p,
                              cg__bs_mpi_t **mpi_p);
void cg__bs_mpi_destroy(cg__bs_mpi_t *mpi);
/* Same contract as cg_rdv_collective, over MPI non-blocking collectives
 * tested until done or params.timeout_ns. */
cg_status_t cg__bs_mpi_collective(cg__bs_mpi_t *mpi, cg_rdv_op_t op,
                                  int root, const void *mine, void *out,
                                  size_t len);

/* bootstrap.c: a bootstrap object over an rdv already connected (owned
 * from now on, destroyed with it; NULL for a group of one), with env and
 * cookie as given; the parent's params (allocator, timeout, log). */
cg_status_t cg__bs_wrap(const cg_bootstrap_params_t *params,
                        const cg_bootstrap_env_t *env, uint64_t cookie,
                        cg_rdv_t *rdv, cg_bootstrap_t **bs_p);
const cg_bootstrap_params_t *cg__bs_params(const cg_bootstrap_t *bs);
void cg__bs_set_env(cg_bootstrap_t *bs, const cg_bootstrap_env_t *env);

#endif
