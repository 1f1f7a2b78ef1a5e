/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The process-set table of the Horovod shim's global core (Horovod's
 * process sets): each set's id, members and the core this rank runs for
 * it, under a lock, since enqueues read it from any thread; the routing
 * every enqueue starts with (an id to the set's core, or the error a
 * non-member or an unknown id gets); and rank translation between the
 * job and a set. Removed sets' stopped cores are kept here until the
 * global core goes (hvd_life.c adds, removes and frees).
 * Layer: core/engine; calls the governor.
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
    pthread_mutex_t lock; /* the table */
    cg__set_t *v;
    int len, cap;
    cg_hvd_core_t **gone; /* removed sets' stopped cores */
    int ngone, capgone;
};

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

cg_hvd_core_t *cg_hvd_sets_pop(cg_hvd_core_t *core, bool *stopped_p)
{
    struct cg_hvd_sets *t = core->sets;
    cg_hvd_core_t *sc = NULL;

    pthread_mutex_lock(&t->lock);
    while (sc == NULL && t->len > 0) {
        cg__set_t *s = &t->v[--t->len];
        sc = s->core;
        *stopped_p = false;
        cg_governor_free(core->gov, CG_MEM_CAT_CONTROL, s->ranks,
                         (size_t)s->n * sizeof(int));
    }
    if (sc == NULL && t->ngone > 0) {
        sc = t->gone[--t->ngone];
        *stopped_p = true;
    }
    pthread_mutex_unlock(&t->lock);
    return sc;
}

void cg_hvd_sets_destroy(cg_hvd_core_t *core)
{
    struct cg_hvd_sets *t = core->sets;

    if (t == NULL)
        return;
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

bool cg_hvd_sets_has(cg_hvd_core_t *core, int32_t id)
{
    bool has;

    pthread_mutex_lock(&core->sets->lock);
    has = cg__find(core->sets, id) != NULL;
    pthread_mutex_unlock(&core->sets->lock);
    return has;
}

/* A doubled array of el-byte elements, len of them kept. */
static cg_status_t cg__grow(cg_hvd_core_t *core, void **v, int len, int *cap,
                            size_t el)
{
    int n = *cap ? 2 * *cap : 8;
    void *p;
    cg_status_t st = cg_governor_alloc(core->gov, CG_MEM_CAT_CONTROL,
                                       (size_t)n * el, &p);

    if (st != CG_OK)
        return st;
    if (len > 0)
        memcpy(p, *v, (size_t)len * el);
    cg_governor_free(core->gov, CG_MEM_CAT_CONTROL, *v, (size_t)*cap * el);
    *v = p;
    *cap = n;
    return CG_OK;
}

cg_status_t cg_hvd_sets_insert(cg_hvd_core_t *core, int32_t id,
                               const int *ranks, int n, cg_hvd_core_t *sc)
{
    struct cg_hvd_sets *t = core->sets;
    cg__set_t s = {id, n, NULL, sc};
    cg_status_t st = cg_governor_alloc(core->gov, CG_MEM_CAT_CONTROL,
                                       (size_t)n * sizeof(int),
                                       (void **)&s.ranks);

    if (st != CG_OK)
        return st;
    memcpy(s.ranks, ranks, (size_t)n * sizeof(int));
    pthread_mutex_lock(&t->lock);
    if (t->len == t->cap)
        st = cg__grow(core, (void **)&t->v, t->len, &t->cap, sizeof(*t->v));
    if (st == CG_OK)
        t->v[t->len++] = s;
    pthread_mutex_unlock(&t->lock);
    if (st != CG_OK)
        cg_governor_free(core->gov, CG_MEM_CAT_CONTROL, s.ranks,
                         (size_t)n * sizeof(int));
    return st;
}

cg_status_t cg_hvd_sets_reserve_gone(cg_hvd_core_t *core)
{
    struct cg_hvd_sets *t = core->sets;
    cg_status_t st = CG_OK;

    pthread_mutex_lock(&t->lock);
    if (t->ngone == t->capgone)
        st = cg__grow(core, (void **)&t->gone, t->ngone, &t->capgone,
                      sizeof(*t->gone));
    pthread_mutex_unlock(&t->lock);
    return st;
}

cg_hvd_core_t *cg_hvd_sets_unlink(cg_hvd_core_t *core, int32_t id)
{
    struct cg_hvd_sets *t = core->sets;
    cg_hvd_core_t *sc = NULL;
    cg__set_t *p;

    pthread_mutex_lock(&t->lock);
    p = cg__find(t, id);
    if (p != NULL) {
        sc = p->core;
        cg_governor_free(core->gov, CG_MEM_CAT_CONTROL, p->ranks,
                         (size_t)p->n * sizeof(int));
        t->len--; /* registration order kept */
        memmove(p, p + 1, (size_t)(t->v + t->len - p) * sizeof(*p));
    }
    pthread_mutex_unlock(&t->lock);
    return sc;
}

void cg_hvd_sets_keep_gone(cg_hvd_core_t *core, cg_hvd_core_t *sc)
{
    struct cg_hvd_sets *t = core->sets;

    pthread_mutex_lock(&t->lock);
    t->gone[t->ngone++] = sc; /* room made by cg_hvd_sets_reserve_gone */
    pthread_mutex_unlock(&t->lock);
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

cg_status_t cg_hvd_route_id(cg_hvd_core_t **core_p, int32_t id,
                            const char *what)
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
                            "not a set's", what, (int)id);
    pthread_mutex_lock(&t->lock);
    s = cg__find(t, id);
    if (s == NULL) {
        st = cg_error_set(CG_ERR_INVALID_PARAM, "%s: process set %d does "
                          "not exist, or has not been registered (or was "
                          "removed)", what, (int)id);
    } else if (s->core == NULL) {
        cg__ranks_str(s->ranks, s->n, list, sizeof(list));
        st = cg_error_set(CG_ERR_INVALID_PARAM, "%s: rank %d is not a "
                          "member of process set %d (ranks %s)", what,
                          core->rank, (int)id, list);
    } else {
        *core_p = s->core;
    }
    pthread_mutex_unlock(&t->lock);
    return st;
}

cg_status_t cg_hvd_route(cg_hvd_core_t **core_p, const cg_hvd_tensor_t *t,
                         const char *what)
{
    int32_t id = 0;

    if (t != NULL && (t->field_mask & CG_HVD_TENSOR_FIELD_PROCESS_SET))
        id = t->process_set;
    return cg_hvd_route_id(core_p, id, what);
}

cg_status_t cg_hvd_process_set_rank(cg_hvd_core_h core, int32_t id,
                                    int *rank_p, int *size_p)
{
    cg_status_t st = cg_hvd_route_id(&core, id, "cg_hvd_process_set_rank");

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
