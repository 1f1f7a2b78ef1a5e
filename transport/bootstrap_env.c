/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Environment detection for the bootstrap: which launcher started this
 * process, this rank's place in the job, and where the TCP rendezvous is.
 * Reads variables only through the injected getenv, so tests fake any
 * launcher. The first launcher whose rank or size variable is set wins:
 *   mpirun         OMPI_COMM_WORLD_{RANK,SIZE,LOCAL_RANK,LOCAL_SIZE}; MPI
 *                  itself when built in, else CG_RUN_RENDEZVOUS is needed
 *   Horovod        HOROVOD_{RANK,SIZE,LOCAL_*,CROSS_*}; store on
 *                  HOROVOD_GLOO_RENDEZVOUS_ADDR, HOROVOD_GLOO_RENDEZVOUS_PORT+1
 *   torchrun       RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE; store on
 *                  MASTER_ADDR, MASTER_PORT+1 (torch's TCPStore holds the port)
 *   collguard-run  CG_RUN_{RANK,SIZE,LOCAL_*,CROSS_*} and CG_RUN_RENDEZVOUS
 *   none           rank 0 of 1
 * CG_RUN_RENDEZVOUS=host:port overrides the store address of any source;
 * CG_RUN_SECRET, when set, names the job on the wire and seeds the cookie.
 * Cross rank/size missing from the environment are derived after connecting.
 * Layer: transport; calls core/base only.
 */
#include "transport/bootstrap.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cg_build.h"
#include "core/base/error.h"
#include "core/base/parse.h"

/* The variables one launcher sets; NULL where it has none. */
typedef struct cg__bs_vars {
    cg_bootstrap_src_t source;
    const char *rank, *size, *local_rank, *local_size;
    const char *cross_rank, *cross_size;
    const char *addr, *port; /* rendezvous host and port variables */
    int port_offset;         /* our store on port + offset */
    const char *addr_desc;   /* where the address came from, for messages */
} cg__bs_vars_t;

static const cg__bs_vars_t cg__bs_ompi = {
    CG_BOOTSTRAP_SRC_OMPI_ENV, "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
    "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE", NULL, NULL,
    NULL, NULL, 0, NULL};
static const cg__bs_vars_t cg__bs_horovod = {
    CG_BOOTSTRAP_SRC_HOROVOD, "HOROVOD_RANK", "HOROVOD_SIZE",
    "HOROVOD_LOCAL_RANK", "HOROVOD_LOCAL_SIZE", "HOROVOD_CROSS_RANK",
    "HOROVOD_CROSS_SIZE", "HOROVOD_GLOO_RENDEZVOUS_ADDR",
    "HOROVOD_GLOO_RENDEZVOUS_PORT", 1,
    "HOROVOD_GLOO_RENDEZVOUS_ADDR, HOROVOD_GLOO_RENDEZVOUS_PORT + 1"};
static const cg__bs_vars_t cg__bs_torchrun = {
    CG_BOOTSTRAP_SRC_TORCHRUN, "RANK", "WORLD_SIZE", "LOCAL_RANK",
    "LOCAL_WORLD_SIZE", NULL, NULL, "MASTER_ADDR", "MASTER_PORT", 1,
    "MASTER_ADDR, MASTER_PORT + 1"};
static const cg__bs_vars_t cg__bs_launcher = {
    CG_BOOTSTRAP_SRC_LAUNCHER, "CG_RUN_RANK", "CG_RUN_SIZE",
    "CG_RUN_LOCAL_RANK", "CG_RUN_LOCAL_SIZE", "CG_RUN_CROSS_RANK",
    "CG_RUN_CROSS_SIZE", NULL, NULL, 0, NULL};

#define CG__BS_RENDEZVOUS "CG_RUN_RENDEZVOUS"
#define CG__BS_SECRET "CG_RUN_SECRET"
#define CG__BS_LISTEN_FD "CG_RUN_RENDEZVOUS_FD"

typedef struct cg__bs_getenv {
    cg_bootstrap_getenv_fn fn;
    void *arg;
} cg__bs_getenv_t;

static const char *cg__bs_get(const cg__bs_getenv_t *g, const char *name)
{
    const char *v;

    if (name == NULL)
        return NULL;
    v = (g->fn != NULL) ? g->fn(g->arg, name) : getenv(name);
    return (v != NULL && v[0] != '\0') ? v : NULL;
}

const char *cg_bootstrap_src_name(cg_bootstrap_src_t source)
{
    switch (source) {
    case CG_BOOTSTRAP_SRC_SINGLE: return "single";
    case CG_BOOTSTRAP_SRC_MPI: return "mpi";
    case CG_BOOTSTRAP_SRC_OMPI_ENV: return "ompi-env";
    case CG_BOOTSTRAP_SRC_HOROVOD: return "horovod";
    case CG_BOOTSTRAP_SRC_TORCHRUN: return "torchrun";
    case CG_BOOTSTRAP_SRC_LAUNCHER: return "collguard-run";
    }
    return "?";
}

/* A required integer variable within [min, max]. */
static cg_status_t cg__bs_int(const cg__bs_getenv_t *g, const char *name,
                              const char *partner, int64_t min, int64_t max,
                              int *v_p)
{
    const char *s = cg__bs_get(g, name);
    int64_t v;

    if (s == NULL)
        return cg_error_set(CG_ERR_CONFIG,
                            "%s is set but %s is missing: the launcher must "
                            "set both", partner, name);
    if (!cg_parse_int(s, min, max, &v))
        return cg_error_set(CG_ERR_CONFIG,
                            "%s='%s' is not an integer in %lld..%lld", name,
                            s, (long long)min, (long long)max);
    *v_p = (int)v;
    return CG_OK;
}

/* rank_name=rank must lie below size_name=size. */
static cg_status_t cg__bs_below(const char *rank_name, int rank,
                                const char *size_name, int size)
{
    if (rank < size)
        return CG_OK;
    return cg_error_set(CG_ERR_CONFIG, "%s=%d must be below %s=%d",
                        rank_name, rank, size_name, size);
}

/* A pair (index, count) that is either wholly absent or wholly valid. */
static cg_status_t cg__bs_pair(const cg__bs_getenv_t *g, const char *iname,
                               const char *cname, int max, int *i_p,
                               int *c_p)
{
    cg_status_t status;

    *i_p = -1;
    *c_p = -1;
    if (iname == NULL || (cg__bs_get(g, iname) == NULL &&
                          cg__bs_get(g, cname) == NULL))
        return CG_OK;
    status = cg__bs_int(g, cname, iname, 1, max, c_p);
    if (status == CG_OK)
        status = cg__bs_int(g, iname, cname, 0, max - 1, i_p);
    if (status == CG_OK)
        status = cg__bs_below(iname, *i_p, cname, *c_p);
    return status;
}

/* "host:port" or "[v6]:port" into env->host and env->port. */
static cg_status_t cg__bs_parse_hostport(const char *name, const char *s,
                                         cg_bootstrap_env_t *env)
{
    const char *colon = strrchr(s, ':');
    const char *host = s;
    size_t hlen;
    int64_t port;

    if (colon == NULL || !cg_parse_int(colon + 1, 1, 65535, &port))
        goto err_form;
    hlen = (size_t)(colon - s);
    if (hlen >= 2 && s[0] == '[' && s[hlen - 1] == ']') {
        host = s + 1;
        hlen -= 2;
    }
    if (hlen == 0 || hlen >= sizeof(env->host))
        goto err_form;
    memcpy(env->host, host, hlen);
    env->host[hlen] = '\0';
    env->port = (int)port;
    env->addr_from = name;
    return CG_OK;

err_form:
    return cg_error_set(CG_ERR_CONFIG,
                        "%s='%s' is not host:port (e.g. 10.0.0.1:29400 or "
                        "[fe80::1]:29400, port 1..65535)", name, s);
}

/* The rendezvous address: CG_RUN_RENDEZVOUS overrides; otherwise the
 * launcher's host and port variables, our store on port + offset (the
 * launcher's own store holds the port itself). */
static cg_status_t cg__bs_addr(const cg__bs_getenv_t *g,
                               const cg__bs_vars_t *v, cg_bootstrap_env_t *env)
{
    const char *over = cg__bs_get(g, CG__BS_RENDEZVOUS);
    const char *host, *port_s;
    int port;
    cg_status_t status;

    if (over != NULL)
        return cg__bs_parse_hostport(CG__BS_RENDEZVOUS, over, env);
    if (env->size == 1)
        return CG_OK;
    if (v->addr == NULL)
        return cg_error_set(CG_ERR_CONFIG,
                            "%s=%d ranks need a rendezvous: set %s=host:port "
                            "(rank 0's host, a free port) for every rank",
                            v->size, env->size, CG__BS_RENDEZVOUS);
    host = cg__bs_get(g, v->addr);
    port_s = cg__bs_get(g, v->port);
    if (host == NULL || port_s == NULL)
        return cg_error_set(CG_ERR_CONFIG,
                            "%s is missing (and %s is not set): %s and %s "
                            "name rank 0's rendezvous",
                            host == NULL ? v->addr : v->port,
                            CG__BS_RENDEZVOUS, v->addr, v->port);
    status = cg__bs_int(g, v->port, v->addr, 1, 65535 - v->port_offset,
                        &port);
    if (status != CG_OK)
        return status;
    if (strlen(host) >= sizeof(env->host))
        return cg_error_set(CG_ERR_CONFIG, "%s is %zu characters long, the "
                            "limit is %zu", v->addr, strlen(host),
                            sizeof(env->host) - 1);
    snprintf(env->host, sizeof(env->host), "%s", host);
    env->port = port + v->port_offset;
    env->addr_from = v->addr_desc;
    return CG_OK;
}

/* 64-bit FNV-1a, then a finalizer so similar secrets spread; never 0. */
static uint64_t cg__bs_hash(const char *s)
{
    uint64_t h = 0xcbf29ce484222325ull;

    for (; *s != '\0'; s++)
        h = (h ^ (uint8_t)*s) * 0x100000001b3ull;
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 33;
    return (h != 0) ? h : 1;
}

static cg_status_t cg__bs_read(const cg__bs_getenv_t *g,
                               const cg__bs_vars_t *v, bool need_addr,
                               cg_bootstrap_env_t *env)
{
    const char *key = cg__bs_get(g, v->size) ? v->size : v->rank;
    const char *secret;
    cg_status_t status;

    env->source = v->source;
    status = cg__bs_int(g, v->size, key, 1, CG_BOOTSTRAP_SIZE_MAX,
                        &env->size);
    if (status == CG_OK)
        status = cg__bs_int(g, v->rank, key, 0, CG_BOOTSTRAP_SIZE_MAX - 1,
                            &env->rank);
    if (status == CG_OK)
        status = cg__bs_below(v->rank, env->rank, v->size, env->size);
    if (status == CG_OK)
        status = cg__bs_int(g, v->local_size, key, 1, env->size,
                            &env->local_size);
    if (status == CG_OK)
        status = cg__bs_int(g, v->local_rank, key, 0, env->size - 1,
                            &env->local_rank);
    if (status == CG_OK)
        status = cg__bs_below(v->local_rank, env->local_rank, v->local_size,
                              env->local_size);
    if (status == CG_OK)
        status = cg__bs_pair(g, v->cross_rank, v->cross_size, env->size,
                             &env->cross_rank, &env->cross_size);
    if (status != CG_OK)
        return status;
    secret = cg__bs_get(g, CG__BS_SECRET);
    env->have_secret = (secret != NULL);
    env->secret_hash = (secret != NULL) ? cg__bs_hash(secret) : 0;
    if (env->rank == 0 && cg__bs_get(g, CG__BS_LISTEN_FD) != NULL) {
        status = cg__bs_int(g, CG__BS_LISTEN_FD, CG__BS_LISTEN_FD, 3, 1 << 20,
                            &env->listen_fd);
        if (status != CG_OK)
            return status;
    }
    return need_addr ? cg__bs_addr(g, v, env) : CG_OK;
}

cg_status_t cg_bootstrap_detect(cg_bootstrap_getenv_fn getenv_fn, void *arg,
                                cg_bootstrap_mpi_mode_t mpi,
                                cg_bootstrap_env_t *env_p)
{
    const cg__bs_vars_t *const order[] = {&cg__bs_ompi, &cg__bs_horovod,
                                          &cg__bs_torchrun, &cg__bs_launcher};
    cg__bs_getenv_t g = {getenv_fn, arg};
    cg_bootstrap_env_t env;
    cg_status_t status;

    memset(&env, 0, sizeof(env));
    env.listen_fd = -1;
    for (size_t i = 0; i < sizeof(order) / sizeof(order[0]); i++) {
        const cg__bs_vars_t *v = order[i];

        if (cg__bs_get(&g, v->rank) == NULL && cg__bs_get(&g, v->size) == NULL)
            continue;
        /* Under mpirun with MPI built in, MPI itself connects the ranks;
         * the numbers still come from the environment (and are checked
         * against MPI's). */
        bool use_mpi = (v == &cg__bs_ompi && CG_HAVE_MPI &&
                        mpi == CG_BOOTSTRAP_MPI_AUTO);
        status = cg__bs_read(&g, v, !use_mpi, &env);
        if (use_mpi)
            env.source = CG_BOOTSTRAP_SRC_MPI;
        if (status != CG_OK)
            return status;
        *env_p = env;
        return CG_OK;
    }
    env.source = CG_BOOTSTRAP_SRC_SINGLE;
    env.size = env.local_size = env.cross_size = 1;
    *env_p = env;
    return CG_OK;
}
