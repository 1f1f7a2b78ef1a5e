/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The bootstrap object: picks the source bootstrap_env.c detected, connects
 * the ranks (MPI in bootstrap_mpi.c, the TCP rendezvous in rendezvous*.c,
 * or nothing for a single rank), agrees on the job cookie, derives cross
 * rank/size when the launcher does not give them, and checks collective
 * arguments before dispatching. A failed collective breaks the bootstrap.
 * Layer: transport; calls transport/rendezvous, bootstrap_mpi, core/base.
 */
#include "transport/bootstrap.h"

#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "cg_build.h"
#include "core/base/error.h"
#include "transport/rendezvous.h"
#include "transport/bootstrap_impl.h"

struct cg_bootstrap {
    cg_bootstrap_params_t p;
    cg_bootstrap_env_t env;
    uint64_t cookie;
    cg_rdv_t *rdv;          /* TCP sources with size > 1 */
#if CG_HAVE_MPI
    cg__bs_mpi_t *mpi;      /* the MPI source */
#endif
    cg_status_t broken;     /* the failure that ended it, or CG_OK */
};

/* splitmix64 finalizer; never 0. */
static uint64_t cg__bs_mix(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    x ^= x >> 31;
    return (x != 0) ? x : 1;
}

/* Rank 0's cookie: from the launcher's secret, else random. */
static uint64_t cg__bs_new_cookie(const cg_bootstrap_env_t *env)
{
    struct timespec ts;
    uint64_t v = 0;

    if (env->have_secret)
        return cg__bs_mix(env->secret_hash);
    if (getrandom(&v, sizeof(v), GRND_NONBLOCK) == (ssize_t)sizeof(v))
        return cg__bs_mix(v);
    clock_gettime(CLOCK_REALTIME, &ts);
    return cg__bs_mix((uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 20) ^
                      ((uint64_t)getpid() << 40));
}

/* Identifies the job on the rendezvous wire: the secret when there is one,
 * else the address and size all ranks were given. */
static uint64_t cg__bs_job_id(const cg_bootstrap_env_t *env)
{
    uint64_t h = 0xcbf29ce484222325ull;

    if (env->have_secret)
        return env->secret_hash;
    for (const char *s = env->host; *s != '\0'; s++)
        h = (h ^ (uint8_t)*s) * 0x100000001b3ull;
    return cg__bs_mix(h ^ ((uint64_t)env->port << 32) ^ (uint64_t)env->size);
}

static cg_status_t cg__bs_check(const cg_bootstrap_t *bs, cg_rdv_op_t op,
                                int root, size_t len)
{
    size_t total = (op == CG_RDV_OP_ALLGATHER)
                       ? (size_t)bs->env.size * len : len;

    if (bs->broken != CG_OK)
        return cg_error_set(CG_ERR_PEER_RESET,
                            "bootstrap %s: an earlier bootstrap call failed "
                            "(%s); the job cannot continue",
                            cg_rdv_op_name(op), cg_status_name(bs->broken));
    if (op == CG_RDV_OP_BCAST && (root < 0 || root >= bs->env.size))
        return cg_error_set(CG_ERR_INVALID_PARAM,
                            "bootstrap bcast: root %d outside 0..%d", root,
                            bs->env.size - 1);
    if (len > CG_BOOTSTRAP_LEN_MAX || total > CG_BOOTSTRAP_TOTAL_MAX)
        return cg_error_set(CG_ERR_INVALID_PARAM,
                            "bootstrap %s of %zu bytes per rank (%zu in all) "
                            "exceeds the limits of %u per rank and %u in all",
                            cg_rdv_op_name(op), len, total,
                            CG_BOOTSTRAP_LEN_MAX, CG_BOOTSTRAP_TOTAL_MAX);
    return CG_OK;
}

static cg_status_t cg__bs_run(cg_bootstrap_t *bs, cg_rdv_op_t op, int root,
                              const void *mine, void *out, size_t len)
{
    cg_status_t status = cg__bs_check(bs, op, root, len);

    if (status != CG_OK)
        return status;
    if (bs->rdv != NULL)
        status = cg_rdv_collective(bs->rdv, op, root, mine, out, len);
#if CG_HAVE_MPI
    else if (bs->mpi != NULL)
        status = cg__bs_mpi_collective(bs->mpi, op, root, mine, out, len);
#endif
    else if (op != CG_RDV_OP_BARRIER && out != mine && len > 0)
        memmove(out, mine, len);
    if (status != CG_OK) {
        bs->broken = status;
        cg_error(bs->p.log, "bootstrap %s failed: %s", cg_rdv_op_name(op),
                 cg_last_error());
    }
    return status;
}

/* Horovod's cross rank/size from every rank's local rank: the ranks that
 * share my local rank, in rank order, one per host. */
static cg_status_t cg__bs_derive_cross(cg_bootstrap_t *bs)
{
    size_t all_size = (size_t)bs->env.size * sizeof(int32_t);
    int32_t mine = bs->env.local_rank;
    int32_t *all;
    cg_status_t status;
    int cross_rank = 0, cross_size = 0;

    all = cg_mem_alloc(&bs->p.mem, CG_MEM_CAT_CONTROL, all_size);
    if (all == NULL)
        return CG_ERR_NO_MEMORY;
    status = cg__bs_run(bs, CG_RDV_OP_ALLGATHER, 0, &mine, all,
                        sizeof(mine));
    for (int r = 0; r < bs->env.size && status == CG_OK; r++) {
        if (all[r] != mine)
            continue;
        cross_rank += (r < bs->env.rank) ? 1 : 0;
        cross_size++;
    }
    cg_mem_free(&bs->p.mem, CG_MEM_CAT_CONTROL, all, all_size);
    if (status == CG_OK) {
        bs->env.cross_rank = cross_rank;
        bs->env.cross_size = cross_size;
    }
    return status;
}

static cg_status_t cg__bs_connect(cg_bootstrap_t *bs)
{
    cg_bootstrap_env_t *env = &bs->env;
    cg_rdv_params_t rp;

    bs->cookie = cg__bs_new_cookie(env);
#if CG_HAVE_MPI
    if (env->source == CG_BOOTSTRAP_SRC_MPI)
        return cg__bs_mpi_create(&bs->p, env, &bs->cookie, &bs->mpi);
#endif
    if (env->size == 1) {
        env->cross_rank = 0;
        env->cross_size = 1;
        return CG_OK;
    }
    memset(&rp, 0, sizeof(rp));
    rp.rank = env->rank;
    rp.size = env->size;
    rp.host = env->host;
    rp.port = env->port;
    rp.addr_from = env->addr_from;
    rp.job_id = cg__bs_job_id(env);
    rp.cookie = bs->cookie;
    rp.timeout_ns = bs->p.timeout_ns;
    rp.log = bs->p.log;
    rp.mem = bs->p.mem;
    rp.listen_fd = env->listen_fd;
    cg_status_t status = cg_rdv_create(&rp, &bs->rdv);
    if (status != CG_OK)
        return status;
    bs->cookie = cg_rdv_cookie(bs->rdv);
    return (env->cross_rank < 0) ? cg__bs_derive_cross(bs) : CG_OK;
}

cg_status_t cg_bootstrap_create(const cg_bootstrap_params_t *params,
                                cg_bootstrap_t **bs_p)
{
    cg_bootstrap_t *bs;
    cg_status_t status;

    if (params == NULL || bs_p == NULL || params->mem.alloc == NULL ||
        params->timeout_ns == 0)
        return cg_error_set(CG_ERR_INVALID_PARAM,
                            "cg_bootstrap_create: params, bs_p, mem.alloc "
                            "and a timeout are required");
    bs = cg_mem_alloc(&params->mem, CG_MEM_CAT_CONTROL, sizeof(*bs));
    if (bs == NULL)
        return CG_ERR_NO_MEMORY;
    memset(bs, 0, sizeof(*bs));
    bs->p = *params;
    status = cg_bootstrap_detect(params->getenv_fn, params->getenv_arg,
                                 params->mpi, &bs->env);
    if (status != CG_OK)
        goto err_free;
    status = cg__bs_connect(bs);
    if (status != CG_OK)
        goto err_destroy;
    cg_debug(params->log, "bootstrap: %s rank %d of %d, local %d of %d, "
             "cross %d of %d", cg_bootstrap_src_name(bs->env.source),
             bs->env.rank, bs->env.size, bs->env.local_rank,
             bs->env.local_size, bs->env.cross_rank, bs->env.cross_size);
    *bs_p = bs;
    return CG_OK;

err_destroy:
    cg_error(params->log, "bootstrap (%s, rank %d of %d) failed: %s",
             cg_bootstrap_src_name(bs->env.source), bs->env.rank,
             bs->env.size, cg_last_error());
    cg_bootstrap_destroy(bs);
    return status;
err_free:
    cg_mem_free(&params->mem, CG_MEM_CAT_CONTROL, bs, sizeof(*bs));
    return status;
}

void cg_bootstrap_destroy(cg_bootstrap_t *bs)
{
    cg_mem_ops_t mem;

    if (bs == NULL)
        return;
    cg_rdv_destroy(bs->rdv);
#if CG_HAVE_MPI
    cg__bs_mpi_destroy(bs->mpi);
#endif
    mem = bs->p.mem;
    cg_mem_free(&mem, CG_MEM_CAT_CONTROL, bs, sizeof(*bs));
}

cg_status_t cg__bs_wrap(const cg_bootstrap_params_t *params,
                        const cg_bootstrap_env_t *env, uint64_t cookie,
                        cg_rdv_t *rdv, cg_bootstrap_t **bs_p)
{
    cg_bootstrap_t *bs = cg_mem_alloc(&params->mem, CG_MEM_CAT_CONTROL,
                                      sizeof(*bs));

    if (bs == NULL)
        return cg_error_set(CG_ERR_NO_MEMORY, "bootstrap: no memory for a "
                            "group's bootstrap");
    memset(bs, 0, sizeof(*bs));
    bs->p = *params;
    bs->env = *env;
    bs->cookie = cookie;
    bs->rdv = rdv;
    *bs_p = bs;
    return CG_OK;
}

const cg_bootstrap_params_t *cg__bs_params(const cg_bootstrap_t *bs)
{
    return &bs->p;
}

void cg__bs_set_env(cg_bootstrap_t *bs, const cg_bootstrap_env_t *env)
{
    bs->env = *env;
}

const cg_bootstrap_env_t *cg_bootstrap_env(const cg_bootstrap_t *bs)
{
    return &bs->env;
}

int cg_bootstrap_rank(const cg_bootstrap_t *bs)
{
    return bs->env.rank;
}

int cg_bootstrap_size(const cg_bootstrap_t *bs)
{
    return bs->env.size;
}

uint64_t cg_bootstrap_cookie(const cg_bootstrap_t *bs)
{
    return bs->cookie;
}

cg_status_t cg_bootstrap_allgather(cg_bootstrap_t *bs, const void *mine,
                                   void *all_out, size_t len)
{
    return cg__bs_run(bs, CG_RDV_OP_ALLGATHER, 0, mine, all_out, len);
}

cg_status_t cg_bootstrap_bcast(cg_bootstrap_t *bs, void *buf, size_t len,
                               int root)
{
    return cg__bs_run(bs, CG_RDV_OP_BCAST, root, buf, buf, len);
}

cg_status_t cg_bootstrap_barrier(cg_bootstrap_t *bs)
{
    return cg__bs_run(bs, CG_RDV_OP_BARRIER, 0, NULL, NULL, 0);
}
