/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The public life of the Horovod shim's core and its process sets:
 * cg_hvd_core_create / _destroy (the global core, its set table, and at
 * destroy every set's core), cg_hvd_process_set_add / _remove (collective
 * over every rank: the arguments agreed through the job's bootstrap, the
 * members' own bootstrap made, the set's core created by its members,
 * the outcome agreed again so every rank returns alike). The top of the
 * engine: it drives hvd_cycle.c (a core's parts) and hvd_sets.c (the
 * table); nothing in the engine calls it. Layer: core/engine; calls
 * transport/bootstrap.h and the governor.
 */
#include <stdio.h>
#include <string.h>

#include "core/base/error.h"
#include "core/engine/hvd_core.h"

cg_status_t cg_hvd_core_create(cg_ctx_h ctx, cg_hvd_core_h *core_p)
{
    cg_hvd_core_t *core;
    cg_status_t st;

    if (ctx == NULL || core_p == NULL || ctx->bs == NULL)
        return cg_error_set(CG_ERR_INVALID_PARAM, "cg_hvd_core_create: needs "
                            "a context created with CG_CTX_PARAM_BOOTSTRAP "
                            "and a non-NULL core_p");
    st = cg_hvd_core_make(ctx, ctx->bs, NULL, 0, NULL, &core);
    if (st != CG_OK)
        return st;
    st = cg_hvd_sets_create(core);
    if (st != CG_OK) {
        cg_hvd_core_retire(core, "the collective core could not start");
        cg_hvd_core_free(core);
        return st;
    }
    *core_p = core;
    return CG_OK;
}

void cg_hvd_core_destroy(cg_hvd_core_h core)
{
    cg_hvd_core_t *sc;
    bool stopped;

    if (core == NULL)
        return;
    /* Each member stops its sets alike (in the same order). */
    while ((sc = cg_hvd_sets_pop(core, &stopped)) != NULL) {
        if (!stopped)
            cg_hvd_core_retire(sc, "the collective core was shut down with "
                               "this request pending");
        cg_hvd_core_free(sc);
    }
    cg_hvd_sets_destroy(core);
    cg_hvd_core_retire(core, "the collective core was shut down with this "
                       "request pending");
    cg_hvd_core_free(core);
}

/* One rank's side of an add or remove, compared across ranks. */
typedef struct cg__set_ask {
    int32_t what;         /* 1 add, 2 remove */
    int32_t valid;
    int32_t id, n;
    uint64_t hash;        /* of the ranks */
} cg__set_ask_t;

static uint64_t cg__hash(const int *ranks, int n)
{
    uint64_t h = 1469598103934665603ull;

    for (int i = 0; i < n; i++)
        h = (h ^ (uint64_t)(uint32_t)ranks[i]) * 1099511628211ull;
    return h;
}

/* Every rank's ask through the job's bootstrap: CG_OK when all asked the
 * same valid thing; else the same verdict on every rank (this rank's own
 * reason first). */
static cg_status_t cg__agree(cg_hvd_core_t *core, const cg__set_ask_t *mine,
                             const char *what, const char *why)
{
    size_t len = (size_t)core->size * sizeof(*mine);
    cg__set_ask_t *all;
    cg_status_t st = cg_governor_alloc(core->gov, CG_MEM_CAT_CONTROL, len,
                                       (void **)&all);

    if (st != CG_OK)
        return st;
    st = cg_bootstrap_allgather(core->bs, mine, all, sizeof(*mine));
    if (st == CG_OK && !mine->valid)
        st = cg_error_set(CG_ERR_INVALID_PARAM, "%s: %s", what, why);
    for (int r = 0; st == CG_OK && r < core->size; r++) {
        if (!all[r].valid)
            st = cg_error_set(CG_ERR_MISMATCH, "%s: rank %d passed invalid "
                              "arguments (its error says which)", what, r);
        else if (memcmp(&all[r], &all[0], sizeof(*mine)) != 0)
            st = cg_error_set(CG_ERR_MISMATCH, "%s: rank %d passed other "
                              "arguments (id %d, %d ranks) than rank 0 (id "
                              "%d, %d ranks, or other ranks); every rank must "
                              "pass the same", what, r, (int)all[r].id,
                              (int)all[r].n, (int)all[0].id, (int)all[0].n);
    }
    cg_governor_free(core->gov, CG_MEM_CAT_CONTROL, all, len);
    return st;
}

/* Whether every rank's step succeeded: CG_OK, or the first failing rank
 * named on every rank. */
static cg_status_t cg__all_ok(cg_hvd_core_t *core, cg_status_t mine,
                              int32_t id, const char *why)
{
    size_t len = (size_t)core->size * sizeof(int32_t);
    int32_t me = (int32_t)mine, *all;
    cg_status_t st = cg_governor_alloc(core->gov, CG_MEM_CAT_CONTROL, len,
                                       (void **)&all);

    if (st != CG_OK)
        return st;
    st = cg_bootstrap_allgather(core->bs, &me, all, sizeof(me));
    for (int r = 0; st == CG_OK && r < core->size; r++)
        if (all[r] != CG_OK)
            st = r == core->rank
                     ? cg_error_set((cg_status_t)all[r], "process set %d: %s",
                                    (int)id, why)
                     : cg_error_set((cg_status_t)all[r], "process set %d: "
                                    "rank %d could not set up its "
                                    "communicator (%s; its log says why)",
                                    (int)id, r,
                                    cg_status_name((cg_status_t)all[r]));
    cg_governor_free(core->gov, CG_MEM_CAT_CONTROL, all, len);
    return st;
}

/* Why an add is invalid here, or NULL. */
static const char *cg__add_invalid(cg_hvd_core_t *core, int32_t id,
                                   const int *ranks, int n)
{
    if (id <= 0)
        return "the id must be above 0 (0 is every rank)";
    if (n < 1 || n > core->size || ranks == NULL)
        return "the set needs 1 to size ranks";
    for (int i = 0; i < n; i++)
        if (ranks[i] < 0 || ranks[i] >= core->size ||
            (i > 0 && ranks[i] <= ranks[i - 1]))
            return "ranks must be ascending, distinct core ranks";
    return cg_hvd_sets_has(core, id) ? "the id is in use" : NULL;
}

static cg_status_t cg__global(cg_hvd_core_t *core, const char *what)
{
    if (core == NULL || core->sets == NULL)
        return cg_error_set(CG_ERR_INVALID_PARAM, "%s: %s", what,
                            core == NULL ? "core is NULL"
                                         : "not the global core");
    return CG_OK;
}

cg_status_t cg_hvd_process_set_add(cg_hvd_core_h core, int32_t id,
                                   const int *ranks, int nranks)
{
    const char *bad;
    cg__set_ask_t ask = {1, 0, id, nranks, 0};
    cg_bootstrap_t *gbs = NULL;
    cg_hvd_core_t *sc = NULL;
    char why[256] = "";
    cg_status_t st = cg__global(core, "cg_hvd_process_set_add");

    if (st != CG_OK)
        return st;
    bad = cg__add_invalid(core, id, ranks, nranks);
    ask.valid = bad == NULL;
    ask.hash = bad == NULL ? cg__hash(ranks, nranks) : 0;
    st = cg__agree(core, &ask, "cg_hvd_process_set_add", bad);
    if (st != CG_OK)
        return st;
    st = cg_bootstrap_create_group(core->bs, ranks, nranks,
                                   (core->set_adds << 32) | (uint32_t)id,
                                   core->ctx->cfg.socket_ifname, &gbs);
    if (st == CG_OK && gbs != NULL) {
        st = cg_hvd_core_make(core->ctx, gbs, core, id, ranks, &sc);
        if (st != CG_OK)
            cg_bootstrap_destroy(gbs);
    }
    if (st != CG_OK)
        snprintf(why, sizeof(why), "%s", cg_last_error());
    st = cg__all_ok(core, st, id, why);
    if (st == CG_OK)
        st = cg_hvd_sets_insert(core, id, ranks, nranks, sc);
    if (st != CG_OK && sc != NULL) {
        cg_hvd_core_retire(sc, "the process set could not be added");
        cg_hvd_core_free(sc);
    }
    if (st != CG_OK)
        return st;
    core->set_adds++;
    cg_info(core->log, "process set %d added: %d ranks%s", (int)id, nranks,
            sc != NULL ? ", this rank a member" : "");
    return CG_OK;
}

cg_status_t cg_hvd_process_set_remove(cg_hvd_core_h core, int32_t id)
{
    cg__set_ask_t ask = {2, 0, id, 0, 0};
    cg_hvd_core_t *sc;
    char msg[128];
    cg_status_t st = cg__global(core, "cg_hvd_process_set_remove");

    if (st != CG_OK)
        return st;
    ask.valid = id != 0 && cg_hvd_sets_has(core, id);
    st = cg__agree(core, &ask, "cg_hvd_process_set_remove",
                   id == 0 ? "the global process set (0) cannot be removed"
                           : "no process set has this id");
    if (st == CG_OK)
        st = cg_hvd_sets_reserve_gone(core);
    if (st != CG_OK)
        return st;
    sc = cg_hvd_sets_unlink(core, id);
    if (sc != NULL) {
        snprintf(msg, sizeof(msg), "process set %d was removed with this "
                 "request pending", (int)id);
        cg_hvd_core_retire(sc, msg);
        cg_hvd_sets_keep_gone(core, sc);
    }
    cg_info(core->log, "process set %d removed", (int)id);
    return CG_OK;
}
