/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Process sets of the Horovod shim's core (Horovod's add_process_set):
 * the global core's table of sets, each with the core its members run
 * (own bootstrap among the members, communicator, backends and thread,
 * made by cg_hvd_core_make), adding and removing (collective over every
 * rank, agreed through the job's bootstrap), and the routing every
 * enqueue starts with. Removed sets' cores are kept, stopped, until the
 * global core goes, so a request or an enqueue racing the removal never
 * touches freed memory. Layer: core/engine; calls transport/bootstrap.h
 * and the governor.
 */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "core/base/error.h"
#include "core/engine/hvd_core.h"

typedef struct cg__set {
    int32_t id;
    int n;
    int *ranks;           /* core ranks, ascending */
    cg_hvd_core_t *core;  /* this rank's core of the set; NULL: not in it */
} cg__set_t;

struct cg_hvd_sets {
    pthread_mutex_t lock; /* the table; enqueues read it from any thread */
    cg__set_t *v;
    int len, cap;
    cg_hvd_core_t **gone; /* removed sets' stopped cores */
    int ngone, capgone;
    uint64_t adds;        /* sets added so far: each set's cookie differs */
};

/* One rank's side of an add or remove, compared across ranks. */
typedef struct cg__set_ask {
    int32_t what;         /* 1 add, 2 remove */
    int32_t valid;
    int32_t id, n;
    uint64_t hash;        /* of the ranks */
} cg__set_ask_t;

cg_status_t cg_hvd_sets_create(cg_hvd_core_t *core)
{
    struct cg_hvd_sets *t;
    cg_status_t st = cg_governor_alloc(core->gov, CG_MEM_CAT_CONTROL,
                                       sizeof(*t), (void **)&t);

    if (st != CG_OK)
        return st;
    memset(t, 0, sizeof(*t));
    pthread_mutex_init(&t->lock, NULL);
    core->sets = t;
    return CG_OK;
}

static void cg__set_free(cg_hvd_core_t *core, cg__set_t *s)
{
    cg_governor_free(core->gov, CG_MEM_CAT_CONTROL, s->ranks,
                     (size_t)s->n * sizeof(int));
    s->ranks = NULL;
}

void cg_hvd_sets_destroy(cg_hvd_core_t *core)
{
    struct cg_hvd_sets *t = core->sets;

    if (t == NULL)
        return;
    for (int i = 0; i < t->len; i++) {
        if (t->v[i].core != NULL) {
            cg_hvd_core_retire(t->v[i].core, "the collective core was shut "
                               "down with this request pending");
            cg_hvd_core_free(t->v[i].core);
        }
        cg__set_free(core, &t->v[i]);
    }
    for (int i = 0; i < t->ngone; i++)
        cg_hvd_core_free(t->gone[i]);
    cg_governor_free(core->gov, CG_MEM_CAT_CONTROL, t->v,
                     (size_t)t->cap * sizeof(*t->v));
    cg_governor_free(core->gov, CG_MEM_CAT_CONTROL, t->gone,
                     (size_t)t->capgone * sizeof(*t->gone));
    pthread_mutex_destroy(&t->lock);
    cg_governor_free(core->gov, CG_MEM_CAT_CONTROL, t, sizeof(*t));
    core->sets = NULL;
}

/* Under the lock. */
static cg__set_t *cg__find(struct cg_hvd_sets *t, int32_t id)
{
    for (int i = 0; i < t->len; i++)
        if (t->v[i].id == id)
            return &t->v[i];
    return NULL;
}

/* "0, 1, 2" (cut to len). */
static void cg__ranks_str(const int *ranks, int n, char *buf, size_t len)
{
    size_t k = 0;

    buf[0] = '\0';
    for (int i = 0; i < n && k + 16 < len; i++)
        k += (size_t)snprintf(buf + k, len - k, "%s%d", i ? ", " : "",
                              ranks[i]);
    if (k + 16 >= len && n > 0)
        snprintf(buf + k, len - k, ", ...");
}

static const char *cg__what(int32_t type)
{
    return type == CG_HVD_WIRE_JOIN ? "join" : cg_hvd_type_name(type);
}

cg_status_t cg_hvd_route_id(cg_hvd_core_t **core_p, int32_t id,
                            int32_t type)
{
    cg_hvd_core_t *core = *core_p;
    struct cg_hvd_sets *t;
    cg__set_t *s;
    char list[160];
    cg_status_t st = CG_OK;

    if (id == 0 || core == NULL) /* core NULL: the enqueue's check says */
        return CG_OK;
    t = core->sets;
    if (t == NULL)
        return cg_error_set(CG_ERR_INVALID_PARAM, "%s on process set %d: "
                            "pass the global core (cg_hvd_core_create's), "
                            "not a set's", cg__what(type), (int)id);
    pthread_mutex_lock(&t->lock);
    s = cg__find(t, id);
    if (s == NULL) {
        st = cg_error_set(CG_ERR_INVALID_PARAM, "%s: process set %d does "
                          "not exist, or has not been registered (or was "
                          "removed)", cg__what(type), (int)id);
    } else if (s->core == NULL) {
        cg__ranks_str(s->ranks, s->n, list, sizeof(list));
        st = cg_error_set(CG_ERR_INVALID_PARAM, "%s: rank %d is not a "
                          "member of process set %d (ranks %s)",
                          cg__what(type), core->rank, (int)id, list);
    } else {
        *core_p = s->core;
    }
    pthread_mutex_unlock(&t->lock);
    return st;
}

cg_status_t cg_hvd_route(cg_hvd_core_t **core_p, const cg_hvd_tensor_t *t,
                         int32_t type)
{
    int32_t id = 0;

    if (t != NULL && (t->field_mask & CG_HVD_TENSOR_FIELD_PROCESS_SET))
        id = t->process_set;
    return cg_hvd_route_id(core_p, id, type);
}

cg_status_t cg_hvd_process_set_rank(cg_hvd_core_h core, int32_t id,
                                    int *rank_p, int *size_p)
{
    cg_status_t st = cg_hvd_route_id(&core, id, CG_HVD_ALLREDUCE);

    if (st == CG_OK && core == NULL)
        st = cg_error_set(CG_ERR_NOT_INITIALIZED, "cg_hvd_process_set_rank: "
                          "core is NULL");
    if (st != CG_OK)
        return st;
    *rank_p = core->rank;
    *size_p = core->size;
    return CG_OK;
}

int cg_hvd_set_rank_of(const cg_hvd_core_t *core, int job_rank)
{
    if (core->set_ranks == NULL)
        return job_rank >= 0 && job_rank < core->size ? job_rank : -1;
    for (int i = 0; i < core->size; i++)
        if (core->set_ranks[i] == job_rank)
            return i;
    return -1;
}

int cg_hvd_job_rank_of(const cg_hvd_core_t *core, int set_rank)
{
    if (set_rank < 0 || core->set_ranks == NULL)
        return set_rank;
    return core->set_ranks[set_rank];
}

static uint64_t cg__hash(const int *ranks, int n)
{
    uint64_t h = 1469598103934665603ull;

    for (int i = 0; i < n; i++)
        h = (h ^ (uint64_t)(uint32_t)ranks[i]) * 1099511628211ull;
    return h;
}

/* Every rank's ask through the job's bootstrap: CG_OK when all asked the
 * same valid thing; else the same verdict on every rank. */
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

/* Whether every rank's step succeeded (one int each): CG_OK, or the first
 * failing rank named on every rank. */
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
    if (core == NULL || core->sets == NULL)
        return "not the global core";
    if (id <= 0)
        return "the id must be above 0 (0 is every rank)";
    if (n < 1 || n > core->size || ranks == NULL)
        return "the set needs 1 to size ranks";
    for (int i = 0; i < n; i++)
        if (ranks[i] < 0 || ranks[i] >= core->size ||
            (i > 0 && ranks[i] <= ranks[i - 1]))
            return "ranks must be ascending, distinct core ranks";
    pthread_mutex_lock(&core->sets->lock);
    bool used = cg__find(core->sets, id) != NULL;
    pthread_mutex_unlock(&core->sets->lock);
    return used ? "the id is in use" : NULL;
}

static cg_status_t cg__insert(cg_hvd_core_t *core, int32_t id,
                              const int *ranks, int n, cg_hvd_core_t *sc)
{
    struct cg_hvd_sets *t = core->sets;
    cg__set_t s = {id, n, NULL, sc};
    cg_status_t st = cg_governor_alloc(core->gov, CG_MEM_CAT_CONTROL,
                                       (size_t)n * sizeof(int),
                                       (void **)&s.ranks);

    if (st == CG_OK && t->len == t->cap) {
        int cap = t->cap ? 2 * t->cap : 8;
        cg__set_t *v;
        st = cg_governor_alloc(core->gov, CG_MEM_CAT_CONTROL,
                               (size_t)cap * sizeof(*v), (void **)&v);
        if (st == CG_OK) {
            pthread_mutex_lock(&t->lock);
            if (t->len > 0)
                memcpy(v, t->v, (size_t)t->len * sizeof(*v));
            cg_governor_free(core->gov, CG_MEM_CAT_CONTROL, t->v,
                             (size_t)t->cap * sizeof(*v));
            t->v = v;
            t->cap = cap;
            pthread_mutex_unlock(&t->lock);
        }
    }
    if (st != CG_OK) {
        cg_governor_free(core->gov, CG_MEM_CAT_CONTROL, s.ranks,
                         (size_t)n * sizeof(int));
        return st;
    }
    memcpy(s.ranks, ranks, (size_t)n * sizeof(int));
    pthread_mutex_lock(&t->lock);
    t->v[t->len++] = s;
    pthread_mutex_unlock(&t->lock);
    return CG_OK;
}

cg_status_t cg_hvd_process_set_add(cg_hvd_core_h core, int32_t id,
                                   const int *ranks, int nranks)
{
    const char *bad = cg__add_invalid(core, id, ranks, nranks);
    cg__set_ask_t ask = {1, bad == NULL, id, nranks,
                         bad == NULL ? cg__hash(ranks, nranks) : 0};
    cg_bootstrap_t *gbs = NULL;
    cg_hvd_core_t *sc = NULL;
    char why[256] = "";
    cg_status_t st;

    if (core == NULL || core->sets == NULL)
        return cg_error_set(CG_ERR_INVALID_PARAM, "cg_hvd_process_set_add: "
                            "%s", core == NULL ? "core is NULL"
                                               : "not the global core");
    st = cg__agree(core, &ask, "cg_hvd_process_set_add", bad);
    if (st != CG_OK)
        return st;
    st = cg_bootstrap_create_group(core->bs, ranks, nranks,
                                   (core->sets->adds << 32) | (uint32_t)id,
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
        st = cg__insert(core, id, ranks, nranks, sc);
    if (st != CG_OK && sc != NULL) {
        cg_hvd_core_retire(sc, "the process set could not be added");
        cg_hvd_core_free(sc);
    }
    if (st == CG_OK) {
        core->sets->adds++;
        cg_info(core->log, "process set %d added: %d ranks%s", (int)id,
                nranks, sc != NULL ? ", this rank a member" : "");
    }
    return st;
}

cg_status_t cg_hvd_process_set_remove(cg_hvd_core_h core, int32_t id)
{
    cg__set_ask_t ask = {2, 0, id, 0, 0};
    struct cg_hvd_sets *t;
    cg_hvd_core_t *sc = NULL;
    char msg[128];
    cg__set_t s;
    cg_status_t st;

    if (core == NULL || core->sets == NULL)
        return cg_error_set(CG_ERR_INVALID_PARAM, "cg_hvd_process_set_remove"
                            ": %s", core == NULL ? "core is NULL"
                                                 : "not the global core");
    t = core->sets;
    pthread_mutex_lock(&t->lock);
    ask.valid = id != 0 && cg__find(t, id) != NULL;
    pthread_mutex_unlock(&t->lock);
    st = cg__agree(core, &ask, "cg_hvd_process_set_remove",
                   id == 0 ? "the global process set (0) cannot be removed"
                           : "no process set has this id");
    if (st == CG_OK && t->ngone == t->capgone) {
        int cap = t->capgone ? 2 * t->capgone : 8;
        cg_hvd_core_t **v;
        st = cg_governor_alloc(core->gov, CG_MEM_CAT_CONTROL,
                               (size_t)cap * sizeof(*v), (void **)&v);
        if (st == CG_OK) {
            if (t->ngone > 0)
                memcpy(v, t->gone, (size_t)t->ngone * sizeof(*v));
            cg_governor_free(core->gov, CG_MEM_CAT_CONTROL, t->gone,
                             (size_t)t->capgone * sizeof(*v));
            t->gone = v;
            t->capgone = cap;
        }
    }
    if (st != CG_OK)
        return st; /* the same on every rank but a failed allocation */
    pthread_mutex_lock(&t->lock);
    cg__set_t *p = cg__find(t, id);
    s = *p;
    t->len--; /* registration order kept */
    memmove(p, p + 1, (size_t)(t->v + t->len - p) * sizeof(*p));
    pthread_mutex_unlock(&t->lock);
    sc = s.core;
    if (sc != NULL) {
        snprintf(msg, sizeof(msg), "process set %d was removed with this "
                 "request pending", (int)id);
        cg_hvd_core_retire(sc, msg);
        t->gone[t->ngone++] = sc;
    }
    cg__set_free(core, &s);
    cg_info(core->log, "process set %d removed", (int)id);
    return CG_OK;
}
