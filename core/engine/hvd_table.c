/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The negotiation table of the Horovod shim's core: its entries (one per
 * name announced and not yet run, with the ranks that announced it),
 * allocated from a pool kept between cycles so a steady state runs
 * without malloc/free per name, and the growable vectors of entries
 * (core->ready) and requests that negotiation, the response cache and the
 * stall inspector fill. Background thread only.
 * Layer: core/engine; calls the governor.
 */
#include <stddef.h>
#include <string.h>

#include "core/engine/hvd_core.h"

/* cg_hvd_entry_new clears an entry around its wire. */
_Static_assert(offsetof(cg_hvd_entry_t, first_rank) ==
                   offsetof(cg_hvd_entry_t, w) + sizeof(cg_hvd_wire_t),
               "the wire must be followed by first_rank");

/* Freed entries kept for the next cycles (a steady state with many names
 * then runs without malloc/free per name); about 1 KiB each. */
#define CG__POOL_MAX 1024

static size_t cg__entry_bytes(const cg_hvd_core_t *core)
{
    return sizeof(cg_hvd_entry_t) +
           (size_t)(core->size + 63) / 64 * sizeof(uint64_t);
}

void cg_hvd_entry_free(cg_hvd_core_t *core, cg_hvd_entry_t *e)
{
    cg_list_del(&e->link);
    cg_list_del(&e->bucket_link);
    if (e->dim0 != NULL)
        cg_governor_free(core->gov, CG_MEM_CAT_CONTROL, e->dim0,
                         (size_t)core->size * sizeof(int64_t));
    if (core->entry_pool != NULL && core->pool_len < CG__POOL_MAX) {
        core->entry_pool[core->pool_len++] = e;
        return;
    }
    cg_governor_free(core->gov, CG_MEM_CAT_CONTROL, e, cg__entry_bytes(core));
}

/* A vector of cap elements of el bytes, len of them used, doubled (64
 * elements the first time) in the governor's control memory: *grown_p
 * holds the len elements, old is freed, *cap the new capacity. */
static cg_status_t cg__grow(cg_hvd_core_t *core, void *old, size_t len,
                            size_t *cap, size_t el, void **grown_p)
{
    size_t n = *cap ? *cap * 2 : 64;
    void *v;
    cg_status_t st = cg_governor_alloc(core->gov, CG_MEM_CAT_CONTROL,
                                       n * el, &v);

    if (st != CG_OK)
        return st;
    if (len > 0)
        memcpy(v, old, len * el);
    cg_governor_free(core->gov, CG_MEM_CAT_CONTROL, old, *cap * el);
    *grown_p = v;
    *cap = n;
    return CG_OK;
}

cg_status_t cg_hvd_reqv_push(cg_hvd_core_t *core, cg_hvd_reqv_t *v,
                             struct cg_hvd_req *req)
{
    if (v->len == v->cap) {
        void *grown;
        cg_status_t st = cg__grow(core, v->v, v->len, &v->cap,
                                  sizeof(*v->v), &grown);
        if (st != CG_OK)
            return st;
        v->v = grown;
    }
    v->v[v->len++] = req;
    return CG_OK;
}

void cg_hvd_reqv_free(cg_hvd_core_t *core, cg_hvd_reqv_t *v)
{
    cg_governor_free(core->gov, CG_MEM_CAT_CONTROL, v->v,
                     v->cap * sizeof(*v->v));
    memset(v, 0, sizeof(*v));
}

void cg_hvd_table_clear(cg_hvd_core_t *core)
{
    while (!cg_list_empty(&core->table))
        cg_hvd_entry_free(core, cg_list_entry(core->table.next,
                                              cg_hvd_entry_t, link));
}

cg_status_t cg_hvd_pool_create(cg_hvd_core_t *core)
{
    cg_hvd_entry_t **pool;
    cg_status_t st = cg_governor_alloc(core->gov, CG_MEM_CAT_CONTROL,
                                       CG__POOL_MAX * sizeof(*pool),
                                       (void **)&pool);

    if (st != CG_OK)
        return st;
    core->entry_pool = pool;
    core->pool_len = 0;
    return CG_OK;
}

void cg_hvd_pool_destroy(cg_hvd_core_t *core)
{
    if (core->entry_pool == NULL)
        return;
    while (core->pool_len > 0)
        cg_governor_free(core->gov, CG_MEM_CAT_CONTROL,
                         core->entry_pool[--core->pool_len],
                         cg__entry_bytes(core));
    cg_governor_free(core->gov, CG_MEM_CAT_CONTROL, core->entry_pool,
                     CG__POOL_MAX * sizeof(*core->entry_pool));
    core->entry_pool = NULL;
}

cg_status_t cg_hvd_entry_new(cg_hvd_core_t *core, int rank,
                             const cg_hvd_wire_t *w, uint64_t hash,
                             bool bucket, cg_hvd_entry_t **e_p)
{
    cg_hvd_entry_t *e;
    cg_status_t st;

    if (core->pool_len > 0) {
        e = core->entry_pool[--core->pool_len];
        /* The ones popped next are written soon: fetch them now. */
        if (core->pool_len > 4)
            __builtin_prefetch(core->entry_pool[core->pool_len - 4], 1);
    } else {
        st = cg_governor_alloc(core->gov, CG_MEM_CAT_CONTROL,
                               cg__entry_bytes(core), (void **)&e);
        if (st != CG_OK)
            return st;
    }
    /* All but the wire (copied next) and the message (its first byte
     * only), and the rank bitmap after the struct: a cycle of a thousand
     * cache hits would otherwise clear 300 KB for nothing. */
    memset(e, 0, offsetof(cg_hvd_entry_t, w));
    memset((char *)e + offsetof(cg_hvd_entry_t, first_rank), 0,
           offsetof(cg_hvd_entry_t, err) -
               offsetof(cg_hvd_entry_t, first_rank));
    e->err[0] = '\0';
    memset(e + 1, 0, cg__entry_bytes(core) - sizeof(*e));
    e->hash = hash;
    cg_hvd_wire_copy(&e->w, w);
    e->first_rank = rank;
    e->first_ns = core->now_ns;
    e->ranks = (uint64_t *)(e + 1);
    if (w->type == CG_HVD_ALLGATHER) {
        st = cg_governor_alloc(core->gov, CG_MEM_CAT_CONTROL,
                               (size_t)core->size * sizeof(int64_t),
                               (void **)&e->dim0);
        if (st != CG_OK) {
            cg_governor_free(core->gov, CG_MEM_CAT_CONTROL, e,
                             cg__entry_bytes(core));
            return st;
        }
    }
    cg_list_push(&core->table, &e->link);
    cg_list_init(&e->bucket_link);
    if (bucket)
        cg_list_push(&core->tab_buckets[CG_HVD_BUCKET(hash)],
                     &e->bucket_link);
    *e_p = e;
    return CG_OK;
}

cg_status_t cg_hvd_ready_push(cg_hvd_core_t *core, cg_hvd_entry_t *e)
{
    if (core->ready_len == core->ready_cap) {
        void *grown;
        cg_status_t st = cg__grow(core, core->ready, core->ready_len,
                                  &core->ready_cap, sizeof(*core->ready),
                                  &grown);
        if (st != CG_OK)
            return st;
        core->ready = grown;
    }
    core->ready[core->ready_len++] = e;
    return CG_OK;
}
