/* SPDX-License-Identifier: Apache-2.0 */
/*
 * horovod_init's work: a context that joins the launched job (bootstrap),
 * agreement on the arguments, Horovod's world (all launched ranks, or the
 * listed ones in list order) with its local and cross layout, and the
 * process sets given at init, then the collective core (cg_hvd_core_create)
 * when the world is every launched rank in launch order. Every launched
 * rank takes part in every step, so a rank left out of the list still
 * lets the others finish. Layer: plugin; calls core/context, the hvd core,
 * transport/bootstrap, plugin/hvd_*.
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "collguard/hvd.h"
#include "core/base/error.h"
#include "plugin/hvd_impl.h"

/* What each launched rank tells the others about where it runs. */
typedef struct cg__hvd_where {
    uint64_t host;      /* hash of the host name */
    int32_t local_size; /* as the launcher said */
    int32_t pad;
} cg__hvd_where_t;

static uint64_t cg__hvd_host_hash(void)
{
    char name[256] = "";
    uint64_t h = 0xcbf29ce484222325ull;

    if (gethostname(name, sizeof(name) - 1) != 0)
        snprintf(name, sizeof(name), "?");
    for (const char *s = name; *s != '\0'; s++)
        h = (h ^ (uint8_t)*s) * 0x100000001b3ull;
    return h;
}

/* Horovod's world is every launched rank, in launch order: the launcher's
 * layout; homogeneous when every rank saw the same local size. */
static void cg__hvd_layout_job(cg__hvd_t *h, const cg__hvd_where_t *all)
{
    const cg_bootstrap_env_t *e = cg_bootstrap_env(h->bs);

    h->rank = e->rank;
    h->size = e->size;
    h->local_rank = e->local_rank;
    h->local_size = e->local_size;
    h->cross_rank = e->cross_rank;
    h->cross_size = e->cross_size;
    h->homogeneous = true;
    for (int r = 0; r < e->size; r++)
        h->homogeneous &= (all[r].local_size == all[0].local_size);
}

/* Horovod's world is the listed ranks, in list order: local ranks count
 * the members on one host in that order; cross ranks count the members
 * with the same local rank, as Horovod's split by local rank does.
 * lr: room for n ints. Quadratic in n, which is fine at init. */
static void cg__hvd_layout_list(cg__hvd_t *h, const cg__hvd_where_t *all,
                                const int *list, int n, int *lr)
{
    int me = -1, first_on_host = 0;

    for (int i = 0; i < n; i++) {
        lr[i] = 0;
        for (int j = 0; j < i; j++)
            lr[i] += (all[list[j]].host == all[list[i]].host);
        if (list[i] == cg_bootstrap_rank(h->bs))
            me = i;
    }
    h->rank = me;
    h->size = n;
    h->homogeneous = true;
    for (int i = 0; i < n; i++) {
        int on_host = 0, same_lr = 0, before = 0;

        for (int j = 0; j < n; j++) {
            on_host += (all[list[j]].host == all[list[i]].host);
            same_lr += (lr[j] == lr[i]);
            before += (j < i && lr[j] == lr[i]);
        }
        if (i == me) {
            h->local_rank = lr[i];
            h->local_size = on_host;
            h->cross_rank = before;
            h->cross_size = same_lr;
        }
        if (i == 0)
            first_on_host = on_host;
        h->homogeneous &= (on_host == first_on_host);
    }
}

static cg_status_t cg__hvd_layout(cg__hvd_t *h, const int *list, int n)
{
    int nprocs = cg_bootstrap_size(h->bs);
    size_t all_len = (size_t)nprocs * sizeof(cg__hvd_where_t);
    size_t lr_len = (size_t)n * sizeof(int);
    cg__hvd_where_t mine = {cg__hvd_host_hash(),
                            cg_bootstrap_env(h->bs)->local_size, 0};
    cg__hvd_where_t *all;
    cg_status_t st;
    int *lr = NULL;

    all = cg_mem_alloc(&h->mem, CG_MEM_CAT_CONTROL, all_len);
    if (all == NULL)
        return CG_ERR_NO_MEMORY;
    st = cg_bootstrap_allgather(h->bs, &mine, all, sizeof(mine));
    if (st == CG_OK && n > 0) {
        lr = cg_mem_alloc(&h->mem, CG_MEM_CAT_CONTROL, lr_len);
        st = (lr == NULL) ? CG_ERR_NO_MEMORY : CG_OK;
    }
    if (st == CG_OK && n > 0)
        cg__hvd_layout_list(h, all, list, n, lr);
    else if (st == CG_OK)
        cg__hvd_layout_job(h, all);
    cg_mem_free(&h->mem, CG_MEM_CAT_CONTROL, lr, lr_len);
    cg_mem_free(&h->mem, CG_MEM_CAT_CONTROL, all, all_len);
    return st;
}

/* Agrees on the world's rank list and the number of process sets, then
 * lays the world out. */
static cg_status_t cg__hvd_world(cg__hvd_t *h, const int *ranks, int nranks,
                                 const int *ps_sizes, int nps, int *scratch)
{
    int nprocs = cg_bootstrap_size(h->bs);
    char bad[CG_HVD_WHY_MAX] = "", why[CG_HVD_WHY_MAX] = "";
    cg__hvd_req_t req = {CG_HVD_REQ_INIT, nps, nranks, true, ranks};
    cg_status_t st;
    bool same;

    if (nps < 0 || (nps > 0 && ps_sizes == NULL)) {
        snprintf(bad, sizeof(bad), (nps < 0)
                 ? "num_process_sets %d is negative"
                 : "process_set_sizes is NULL but num_process_sets is %d",
                 nps);
        req.valid = false;
    } else if (nranks != 0) {
        req.valid = cg__hvd_ranks_sorted(ranks, nranks, nprocs, scratch, bad,
                                         sizeof(bad));
    }
    st = cg__hvd_agree(h, &req, &same, why, sizeof(why));
    if (st != CG_OK)
        return st;
    if (!req.valid)
        return cg_error_set(CG_ERR_INVALID_PARAM, "horovod_init: %s (%d "
                            "ranks launched)", bad, nprocs);
    if (!same)
        return cg_error_set(CG_ERR_INVALID_PARAM, "horovod_init: %s", why);
    h->whole_job = (nranks == 0 || nranks == nprocs);
    h->launch_order = h->whole_job;
    for (int i = 0; i < nranks && h->launch_order; i++)
        h->launch_order = (ranks[i] == i);
    return cg__hvd_layout(h, ranks, nranks);
}

/* Registers the process sets given to horovod_init, agreeing on each; a
 * duplicate or the whole world is skipped, as Horovod does. */
static cg_status_t cg__hvd_static_sets(cg__hvd_t *h, const int *ps_ranks,
                                       const int *ps_sizes, int nps,
                                       int *sorted)
{
    char bad[CG_HVD_WHY_MAX], why[CG_HVD_WHY_MAX];
    const int *list = ps_ranks;
    cg_status_t st;
    bool same;
    int id;

    for (int i = 0; i < nps; i++) {
        cg__hvd_req_t req = {CG_HVD_REQ_INIT_SET, i, ps_sizes[i], true,
                            sorted};

        req.valid = cg__hvd_ranks_sorted(list, ps_sizes[i], h->size, sorted,
                                         bad, sizeof(bad));
        if (req.valid)
            list += ps_sizes[i];
        for (int r = 0; req.valid && req.n == 0 && r < h->size; r++)
            sorted[r] = r;
        req.n = (req.valid && req.n == 0) ? h->size : req.n;
        st = cg__hvd_agree(h, &req, &same, why, sizeof(why));
        if (st != CG_OK)
            return st;
        if (!req.valid)
            return cg_error_set(CG_ERR_INVALID_PARAM, "horovod_init: "
                                "process set entry %d: %s (world of %d "
                                "ranks)", i, bad, h->size);
        if (!same)
            return cg_error_set(CG_ERR_INVALID_PARAM, "horovod_init: "
                                "process set entry %d: %s", i, why);
        id = cg__hvd_psets_register(h, sorted, req.n);
        if (id == CG_HVD_PS_ERR_EXISTING_SET)
            cg_debug(h->log, "horovod_init: process set %d repeats an "
                     "earlier one; skipped", i);
        else if (id < 0)
            return CG_ERR_NO_MEMORY;
    }
    return CG_OK;
}

/* Creates the state up to the point where the world is known. */
static cg_status_t cg__hvd_alloc(cg__hvd_t **h_p)
{
    cg_ctx_params_t cp;
    cg_mem_ops_t mem;
    cg_status_t st;
    cg_ctx_h ctx;
    cg__hvd_t *h;

    memset(&cp, 0, sizeof(cp));
    cp.field_mask = CG_CTX_PARAM_BOOTSTRAP;
    cp.bootstrap = 1;
    st = cg_ctx_create(&cp, &ctx);
    if (st != CG_OK)
        return st;
    mem = cg_governor_mem_ops(ctx->gov);
    h = cg_mem_alloc(&mem, CG_MEM_CAT_CONTROL, sizeof(*h));
    if (h == NULL) {
        cg_ctx_destroy(ctx);
        return CG_ERR_NO_MEMORY;
    }
    memset(h, 0, sizeof(*h));
    h->ctx = ctx;
    h->log = &ctx->log;
    h->mem = mem;
    h->bs = ctx->bs;
    h->dynamic = (ctx->cfg.dynamic_process_sets != 0);
    *h_p = h;
    return CG_OK;
}

/* The collective core, over every launched rank: only when that is
 * Horovod's world in Horovod's rank order (the core's ranks are the
 * launch ranks). Otherwise the ABI queries and process sets work and
 * collectives are unavailable (cg_hvd_global_core() is NULL); every rank
 * decides alike, since the list was agreed. */
static cg_status_t cg__hvd_core(cg__hvd_t *h)
{
    if (!h->launch_order) {
        cg_warn(h->log, "horovod_init: Horovod's world is %d of the %d "
                "launched ranks%s; the collective core needs every launched "
                "rank in launch order, so this initialization has no "
                "collectives (call horovod_init without ranks for them)",
                h->size, cg_bootstrap_size(h->bs),
                h->whole_job ? ", reordered" : "");
        return CG_OK;
    }
    return cg_hvd_core_create(h->ctx, &h->core);
}

cg_status_t cg__hvd_create(const int *ranks, int nranks, const int *ps_ranks,
                           const int *ps_sizes, int nps, cg__hvd_t **h_p)
{
    size_t scratch_len;
    int *scratch = NULL;
    cg_status_t st;
    cg__hvd_t *h;

    st = cg__hvd_alloc(&h);
    if (st != CG_OK)
        return st;
    /* Room for a sorted list of every launched rank. */
    scratch_len = (size_t)cg_bootstrap_size(h->bs) * sizeof(int);
    scratch = cg_mem_alloc(&h->mem, CG_MEM_CAT_CONTROL, scratch_len);
    if (scratch == NULL) {
        st = CG_ERR_NO_MEMORY;
        goto err_destroy;
    }
    st = cg__hvd_world(h, ranks, nranks, ps_sizes, nps, scratch);
    if (st != CG_OK)
        goto err_destroy;
    st = cg__hvd_psets_init(h);
    if (st != CG_OK)
        goto err_destroy;
    st = cg__hvd_static_sets(h, ps_ranks, ps_sizes, nps, scratch);
    if (st != CG_OK)
        goto err_destroy;
    if (h->rank < 0) {
        st = cg_error_set(CG_ERR_INVALID_PARAM,
                          "horovod_init: job rank %d is not among the %d "
                          "ranks passed in ranks; only those join Horovod",
                          cg_bootstrap_rank(h->bs), nranks);
        goto err_destroy;
    }
    st = cg__hvd_core(h);
    if (st == CG_OK)
        st = cg__hvd_psets_start(h);
    if (st != CG_OK)
        goto err_destroy;
    cg_mem_free(&h->mem, CG_MEM_CAT_CONTROL, scratch, scratch_len);
    cg_info(h->log, "horovod_init: rank %d of %d, local %d of %d, cross %d "
            "of %d, via %s", h->rank, h->size, h->local_rank, h->local_size,
            h->cross_rank, h->cross_size,
            cg_bootstrap_src_name(cg_bootstrap_env(h->bs)->source));
    *h_p = h;
    return CG_OK;

err_destroy:
    cg_error(h->log, "%s", cg_last_error());
    cg_mem_free(&h->mem, CG_MEM_CAT_CONTROL, scratch, scratch_len);
    cg__hvd_destroy(h);
    return st;
}

void cg__hvd_destroy(cg__hvd_t *h)
{
    cg_mem_ops_t mem;
    cg_ctx_h ctx;

    if (h == NULL)
        return;
    cg_hvd_core_destroy(h->core);
    cg__hvd_psets_cleanup(h);
    mem = h->mem;
    ctx = h->ctx;
    cg_mem_free(&mem, CG_MEM_CAT_CONTROL, h, sizeof(*h));
    cg_ctx_destroy(ctx);
}
