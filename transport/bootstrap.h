/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Bootstrap: who am I (rank, size, local and cross rank/size), the per-job
 * cookie, and blocking collectives on small blobs (allgather, broadcast,
 * barrier) used to exchange listen handles and metadata. Sources: MPI under
 * mpirun, else a TCP rendezvous store served by rank 0 (Horovod, torchrun,
 * collguard-run, mpirun without MPI), else a single rank.
 * Layer: transport; calls transport/sock, transport/handshake, core/base.
 *
 * Every call is bounded by params.timeout_ns: a rank that never arrives
 * gives CG_ERR_TIMEOUT naming the missing ranks, a rank that dies a
 * peer-failure status. After any collective fails the bootstrap is broken:
 * later calls fail at once with CG_ERR_PEER_RESET.
 * Threads: one bootstrap is used by one thread at a time.
 */
#ifndef CG_TRANSPORT_BOOTSTRAP_H
#define CG_TRANSPORT_BOOTSTRAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "collguard/status.h"
#include "core/base/log.h"
#include "core/base/mem.h"

/* Looks up one environment variable; NULL if unset. Same shape as core's
 * cg_getenv_fn (transport may not include core/config/config.h). */
typedef const char *(*cg_bootstrap_getenv_fn)(void *arg, const char *name);

/* Largest contribution of one rank to one collective, and of a result. */
#define CG_BOOTSTRAP_LEN_MAX (1u << 20)
#define CG_BOOTSTRAP_TOTAL_MAX (256u << 20)
/* Largest job the bootstrap accepts. */
#define CG_BOOTSTRAP_SIZE_MAX 65536
#define CG_BOOTSTRAP_HOST_MAX 256

typedef enum {
    CG_BOOTSTRAP_SRC_SINGLE = 0,   /* no launcher: rank 0 of 1 */
    CG_BOOTSTRAP_SRC_MPI = 1,      /* mpirun, MPI built in */
    CG_BOOTSTRAP_SRC_OMPI_ENV = 2, /* mpirun's OMPI_COMM_WORLD_* + TCP */
    CG_BOOTSTRAP_SRC_HOROVOD = 3,  /* HOROVOD_* + TCP */
    CG_BOOTSTRAP_SRC_TORCHRUN = 4, /* RANK/WORLD_SIZE/MASTER_* + TCP */
    CG_BOOTSTRAP_SRC_LAUNCHER = 5  /* collguard-run's CG_RUN_* + TCP */
} cg_bootstrap_src_t;

typedef enum {
    CG_BOOTSTRAP_MPI_AUTO = 0, /* MPI when built and under mpirun */
    CG_BOOTSTRAP_MPI_OFF = 1   /* never MPI; mpirun needs CG_RUN_RENDEZVOUS */
} cg_bootstrap_mpi_mode_t;

/* What the environment says, before any communication. */
typedef struct cg_bootstrap_env {
    cg_bootstrap_src_t source;
    int rank, size;
    int local_rank, local_size;
    int cross_rank, cross_size;
    /* TCP sources: the rendezvous rank 0 serves and the others dial. */
    char host[CG_BOOTSTRAP_HOST_MAX];
    int port;
    const char *addr_from; /* variable(s) the address came from */
    /* From CG_RUN_SECRET: the job id on the wire and the cookie. */
    bool have_secret;
    uint64_t secret_hash;
    /* Rank 0 of collguard-run: the rendezvous socket the launcher bound
     * and listens on (CG_RUN_RENDEZVOUS_FD), so no other process can take
     * the port between the launcher's choice and rank 0's bind; -1 none. */
    int listen_fd;
} cg_bootstrap_env_t;

typedef struct cg_bootstrap_params {
    uint64_t timeout_ns;             /* CG_TIMEOUT; every call's bound */
    cg_bootstrap_getenv_fn getenv_fn; /* NULL: the process environment */
    void *getenv_arg;
    cg_bootstrap_mpi_mode_t mpi;
    const cg_log_t *log;             /* may be NULL */
    cg_mem_ops_t mem;                /* all allocations (CONTROL) */
} cg_bootstrap_params_t;

typedef struct cg_bootstrap cg_bootstrap_t;

/* Reads the launcher's variables (see bootstrap_env.c for the order).
 * CG_ERR_CONFIG naming the variable on a malformed or missing value. */
cg_status_t cg_bootstrap_detect(cg_bootstrap_getenv_fn getenv_fn, void *arg,
                                cg_bootstrap_mpi_mode_t mpi,
                                cg_bootstrap_env_t *env_p);
/* "single", "mpi", "ompi-env", "horovod", "torchrun", "collguard-run". */
const char *cg_bootstrap_src_name(cg_bootstrap_src_t source);

/* Detects the environment and connects every rank (blocks until all ranks
 * arrived, at most params->timeout_ns). */
cg_status_t cg_bootstrap_create(const cg_bootstrap_params_t *params,
                                cg_bootstrap_t **bs_p);
void cg_bootstrap_destroy(cg_bootstrap_t *bs);

/* Rank layout as detected (source, ranks, sizes; host/port of TCP). */
const cg_bootstrap_env_t *cg_bootstrap_env(const cg_bootstrap_t *bs);
int cg_bootstrap_rank(const cg_bootstrap_t *bs);
int cg_bootstrap_size(const cg_bootstrap_t *bs);
/* Same value on every rank of the job; never 0. */
uint64_t cg_bootstrap_cookie(const cg_bootstrap_t *bs);

/* Each rank contributes len bytes (the same len everywhere); all_out gets
 * size * len bytes, rank r's at offset r * len. */
cg_status_t cg_bootstrap_allgather(cg_bootstrap_t *bs, const void *mine,
                                   void *all_out, size_t len);
/* buf of len bytes (the same len everywhere) from root to every rank. */
cg_status_t cg_bootstrap_bcast(cg_bootstrap_t *bs, void *buf, size_t len,
                               int root);
cg_status_t cg_bootstrap_barrier(cg_bootstrap_t *bs);

/* A bootstrap over some of parent's ranks (bootstrap_group.c), for a
 * communicator of a process set. Collective over every rank of parent,
 * each passing the same ranks (n ascending parent ranks) and tag (a
 * group id, mixed into the new cookie); only members connect to each
 * other afterwards: the first member serves a TCP rendezvous on the
 * interface ifname picks (NCCL_SOCKET_IFNAME syntax, NULL/"" auto) and
 * its address reaches the others in one bcast of parent. A member gets
 * a bootstrap whose rank is its index in ranks (source as parent's,
 * local and cross rank/size derived among the members); a non-member
 * gets *bs_p NULL. Bounded by parent's timeout; a failure breaks
 * parent's bootstrap only if its bcast failed. */
cg_status_t cg_bootstrap_create_group(cg_bootstrap_t *parent,
                                      const int *ranks, int n, uint64_t tag,
                                      const char *ifname,
                                      cg_bootstrap_t **bs_p);

#endif
