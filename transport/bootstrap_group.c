/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A group's bootstrap: the bootstrap of some of a job's ranks (a process
 * set), so its communicator is created by the members alone. The first
 * member listens on an ephemeral port, one bcast of the parent bootstrap
 * tells every rank its address, and the members meet in a TCP rendezvous
 * of their own (rendezvous.c) under a cookie derived from the parent's
 * and the group's tag. Layer: transport; calls transport/rendezvous,
 * transport/sock and core/base.
 */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "core/base/error.h"
#include "transport/bootstrap.h"
#include "transport/bootstrap_impl.h"
#include "transport/rendezvous.h"
#include "transport/sock.h"

/* What the first member tells the others: its rendezvous address. */
typedef struct cg__grp_addr {
    uint8_t packed[CG_SOCKADDR_PACKED_SIZE];
    int32_t status; /* CG_OK, or why the first member cannot serve */
    int32_t pad;
} cg__grp_addr_t;

static uint64_t cg__grp_mix(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    x ^= x >> 31;
    return x != 0 ? x : 1;
}

static uint64_t cg__grp_host_hash(void)
{
    char name[256] = "";
    uint64_t h = 0xcbf29ce484222325ull;

    (void)gethostname(name, sizeof(name) - 1);
    for (const char *s = name; *s != '\0'; s++)
        h = (h ^ (uint8_t)*s) * 0x100000001b3ull;
    return h;
}

/* Local rank/size (members on my host) and cross rank/size (members with
 * my local rank, one per host), from every member's host. */
static cg_status_t cg__grp_layout(cg_bootstrap_t *bs, cg_bootstrap_env_t *env)
{
    const cg_bootstrap_params_t *p = cg__bs_params(bs);
    size_t len = (size_t)env->size * sizeof(uint64_t) * 2;
    uint64_t mine[2] = {cg__grp_host_hash(), 0}, *all;
    cg_status_t st;

    all = cg_mem_alloc(&p->mem, CG_MEM_CAT_CONTROL, len);
    if (all == NULL)
        return cg_error_set(CG_ERR_NO_MEMORY, "group bootstrap: no memory");
    st = cg_bootstrap_allgather(bs, mine, all, sizeof(mine));
    env->local_rank = env->local_size = 0;
    for (int r = 0; st == CG_OK && r < env->size; r++) {
        if (all[2 * r] != mine[0])
            continue;
        env->local_rank += r < env->rank;
        env->local_size++;
    }
    if (st == CG_OK) {
        mine[1] = (uint64_t)env->local_rank;
        st = cg_bootstrap_allgather(bs, mine, all, sizeof(mine));
    }
    env->cross_rank = env->cross_size = 0;
    for (int r = 0; st == CG_OK && r < env->size; r++) {
        if (all[2 * r + 1] != mine[1])
            continue;
        env->cross_rank += r < env->rank;
        env->cross_size++;
    }
    cg_mem_free(&p->mem, CG_MEM_CAT_CONTROL, all, len);
    return st;
}

/* The first member: a socket listening on an ephemeral port. */
static void cg__grp_listen(const char *ifname, cg__grp_addr_t *a, int *fd_p)
{
    cg_sockaddr_t addr, bound;

    a->status = cg_sock_pick_addr(ifname, &addr, NULL, 0);
    if (a->status == CG_OK)
        a->status = cg_sock_listen(&addr, 1024, fd_p, &bound);
    if (a->status == CG_OK)
        cg_sockaddr_pack(&bound, a->packed);
}

static cg_status_t cg__grp_meet(cg_bootstrap_t *parent, int n, int me,
                                uint64_t tag,
                                const cg__grp_addr_t *a, int listen_fd,
                                cg_bootstrap_t **bs_p)
{
    const cg_bootstrap_params_t *p = cg__bs_params(parent);
    cg_bootstrap_env_t env = *cg_bootstrap_env(parent);
    char host[CG_SOCKADDR_STRLEN];
    uint64_t cookie = cg__grp_mix(cg_bootstrap_cookie(parent) ^
                                  cg__grp_mix(tag));
    cg_rdv_t *rdv = NULL;
    cg_sockaddr_t addr;
    cg_rdv_params_t rp;
    cg_status_t st;
    char *colon;

    st = cg_sockaddr_unpack(a->packed, &addr);
    if (st != CG_OK)
        return st;
    /* "1.2.3.4:5" or "[::1]:5": the host part alone. */
    cg_sockaddr_str(&addr, host, sizeof(host));
    colon = strrchr(host, ':');
    if (colon != NULL)
        *colon = '\0';
    if (host[0] == '[') {
        memmove(host, host + 1, strlen(host));
        host[strcspn(host, "]")] = '\0';
    }
    env.rank = me;
    env.size = n;
    memset(&rp, 0, sizeof(rp));
    rp.rank = me;
    rp.size = n;
    rp.host = host;
    rp.port = cg_sockaddr_port(&addr);
    rp.addr_from = "the process set's first member";
    rp.job_id = cookie;
    rp.cookie = cookie;
    rp.timeout_ns = p->timeout_ns;
    rp.log = p->log;
    rp.mem = p->mem;
    rp.listen_fd = me == 0 ? listen_fd : -1;
    if (n > 1) {
        st = cg_rdv_create(&rp, &rdv);
        if (st != CG_OK)
            return st;
    }
    snprintf(env.host, sizeof(env.host), "%s", host);
    env.port = rp.port;
    env.listen_fd = -1;
    st = cg__bs_wrap(p, &env, cookie, rdv, bs_p);
    if (st != CG_OK) {
        cg_rdv_destroy(rdv);
        return st;
    }
    st = cg__grp_layout(*bs_p, &env);
    if (st == CG_OK)
        cg__bs_set_env(*bs_p, &env);
    if (st != CG_OK) {
        cg_bootstrap_destroy(*bs_p);
        *bs_p = NULL;
    }
    return st;
}

cg_status_t cg_bootstrap_create_group(cg_bootstrap_t *parent,
                                      const int *ranks, int n, uint64_t tag,
                                      const char *ifname,
                                      cg_bootstrap_t **bs_p)
{
    int prank = cg_bootstrap_rank(parent), me = -1, fd = -1;
    char why[256] = "";
    cg__grp_addr_t a;
    cg_status_t st;

    *bs_p = NULL;
    if (ranks == NULL || n < 1 || n > cg_bootstrap_size(parent))
        return cg_error_set(CG_ERR_INVALID_PARAM, "group bootstrap: %d "
                            "ranks of a job of %d", n,
                            cg_bootstrap_size(parent));
    for (int i = 0; i < n; i++)
        if (ranks[i] == prank)
            me = i;
    memset(&a, 0, sizeof(a));
    if (me == 0) {
        cg__grp_listen(ifname, &a, &fd);
        if (a.status != CG_OK)
            snprintf(why, sizeof(why), ": %s", cg_last_error());
    }
    st = cg_bootstrap_bcast(parent, &a, sizeof(a), ranks[0]);
    if (st == CG_OK && a.status != CG_OK)
        st = cg_error_set((cg_status_t)a.status, "group bootstrap: rank %d, "
                          "the first of the group, cannot listen%s",
                          ranks[0], why);
    if (st == CG_OK && me >= 0)
        st = cg__grp_meet(parent, n, me, tag, &a, fd, bs_p);
    if (fd >= 0)
        cg_sock_close(fd);
    return st;
}
