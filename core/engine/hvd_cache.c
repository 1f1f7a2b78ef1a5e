/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The response cache of the Horovod shim's core (Horovod's
 * HOROVOD_CACHE_CAPACITY): names every rank negotiated and ran keep a slot,
 * identical on every rank because every change happens in an order all
 * ranks share. A request whose name is cached with the same parameters
 * sets the slot's bit; one bitwise-AND allreduce of [flag word][bits] then
 * tells every rank which cached names are ready everywhere, and whether
 * some rank needs the records round. Background thread only.
 * Layer: core/engine; calls core/coll/coll.h and the governor.
 */
#include <stddef.h>
#include <string.h>

#include "core/base/error.h"
#include "core/engine/hvd_core.h"
#include "core/engine/hvd_timeline.h"
#include "core/reduce/reduce.h"

#define CG__CHUNK 64 /* slots per chunk: one word of the bit vector */

/* Flag word bit: "I do not need the records round" (AND: nobody does). */
#define CG__FLAG_QUIET 1ull

cg_hvd_slot_t *cg_hvd_cache_slot(const cg_hvd_cache_t *c, uint32_t s)
{
    return &c->chunks[s / CG__CHUNK][s % CG__CHUNK];
}

struct cg_hvd_req *cg_hvd_cache_unpend(cg_hvd_cache_t *c, cg_hvd_slot_t *s)
{
    struct cg_hvd_req *req = s->pending;

    if (req != NULL) {
        s->pending = NULL;
        cg_list_del(&s->pend_link);
        c->npending--;
    }
    return req;
}

void cg_hvd_cache_init(cg_hvd_core_t *core)
{
    cg_hvd_cache_t *c = &core->cache;

    memset(c, 0, sizeof(*c));
    cg_list_init(&c->lru);
    cg_list_init(&c->free);
    cg_list_init(&c->pend);
    for (int b = 0; b < CG_HVD_BUCKETS; b++)
        cg_list_init(&c->buckets[b]);
}

cg_status_t cg_hvd_cache_setup(cg_hvd_core_t *core, uint32_t capacity)
{
    cg_hvd_cache_t *c = &core->cache;
    size_t nchunks = (capacity + CG__CHUNK - 1) / CG__CHUNK;
    cg_status_t st;

    if (capacity == 0)
        return CG_OK;
    st = cg_governor_alloc(core->gov, CG_MEM_CAT_CONTROL,
                           nchunks * sizeof(*c->chunks), (void **)&c->chunks);
    if (st != CG_OK)
        return st;
    memset(c->chunks, 0, nchunks * sizeof(*c->chunks));
    c->capacity = capacity;
    return CG_OK;
}

void cg_hvd_cache_cleanup(cg_hvd_core_t *core)
{
    cg_hvd_cache_t *c = &core->cache;
    size_t nchunks = (c->capacity + CG__CHUNK - 1) / CG__CHUNK;

    for (size_t i = 0; i < nchunks && c->chunks[i] != NULL; i++)
        cg_governor_free(core->gov, CG_MEM_CAT_CONTROL, c->chunks[i],
                         CG__CHUNK * sizeof(cg_hvd_slot_t));
    if (c->chunks != NULL)
        cg_governor_free(core->gov, CG_MEM_CAT_CONTROL, c->chunks,
                         nchunks * sizeof(*c->chunks));
    cg_governor_free(core->gov, CG_MEM_CAT_CONTROL, c->vec,
                     c->vec_words * sizeof(uint64_t));
    cg_hvd_cache_init(core);
}

static cg_hvd_slot_t *cg__find(cg_hvd_cache_t *c, uint64_t hash,
                               const char *name)
{
    CG_HVD_FOR(it, &c->buckets[CG_HVD_BUCKET(hash)]) {
        cg_hvd_slot_t *s = cg_list_entry(it, cg_hvd_slot_t, bucket_link);
        if (s->hash == hash && strcmp(s->w.name, name) == 0)
            return s;
    }
    return NULL;
}

/* The slot leaves the cache; a request waiting on it is announced in the
 * next cycle's records round. */
static cg_status_t cg__evict(cg_hvd_core_t *core, cg_hvd_slot_t *s)
{
    cg_hvd_cache_t *c = &core->cache;
    cg_status_t st = CG_OK;

    if (s->pending != NULL)
        st = cg_hvd_reqv_push(core, &core->redo, cg_hvd_cache_unpend(c, s));
    cg_list_del(&s->bucket_link);
    cg_list_del(&s->lru_link);
    cg_list_push(&c->free, &s->lru_link);
    s->used = false;
    return st;
}

bool cg_hvd_cache_lookup(cg_hvd_core_t *core, struct cg_hvd_req *req)
{
    cg_hvd_cache_t *c = &core->cache;
    cg_hvd_slot_t *s;

    /* Names whose first dimension differs per rank, grouped ones
     * (hvd_group.c: a group is announced whole in one records round), and,
     * while a rank is joined, every name: it goes through the records
     * round, where joined ranks count as ready (hvd_join.c). */
    if (c->capacity == 0 || req->w.type == CG_HVD_ALLGATHER ||
        req->w.type == CG_HVD_ALLTOALL || req->w.group_n > 0 ||
        core->n_joined > 0)
        return false;
    s = cg__find(c, req->hash, req->w.name);
    /* Different parameters: announced; the record evicts the slot. */
    /* The name matched already: the parameters (before it) decide. */
    if (s == NULL || s->pending != NULL ||
        memcmp(&s->w, &req->w, CG_HVD_WIRE_PARAMS) != 0)
        return false;
    s->pending = req;
    s->since_ns = core->now_ns;
    cg_list_push(&c->pend, &s->pend_link);
    c->npending++;
    return true;
}

cg_status_t cg_hvd_cache_evict_name(cg_hvd_core_t *core,
                                    const cg_hvd_wire_t *w)
{
    cg_hvd_slot_t *s;

    if (core->cache.hw == 0)
        return CG_OK;
    s = cg__find(&core->cache, cg_hvd_name_hash(w->name), w->name);
    return s != NULL ? cg__evict(core, s) : CG_OK;
}

/* A slot for a new name: an evicted one, a fresh one below capacity, or
 * the least recently used one. */
static cg_status_t cg__take(cg_hvd_core_t *core, cg_hvd_slot_t **s_p)
{
    cg_hvd_cache_t *c = &core->cache;
    cg_hvd_slot_t *s;
    cg_status_t st;

    if (!cg_list_empty(&c->free)) {
        s = cg_list_entry(c->free.next, cg_hvd_slot_t, lru_link);
        cg_list_del(&s->lru_link);
    } else if (c->hw < c->capacity) {
        cg_hvd_slot_t **chunk = &c->chunks[c->hw / CG__CHUNK];
        if (*chunk == NULL) {
            st = cg_governor_alloc(core->gov, CG_MEM_CAT_CONTROL,
                                   CG__CHUNK * sizeof(cg_hvd_slot_t),
                                   (void **)chunk);
            if (st != CG_OK)
                return st;
            memset(*chunk, 0, CG__CHUNK * sizeof(cg_hvd_slot_t));
        }
        s = cg_hvd_cache_slot(c, c->hw);
        s->index = c->hw++;
    } else {
        s = cg_list_entry(c->lru.next, cg_hvd_slot_t, lru_link);
        st = cg__evict(core, s);
        if (st != CG_OK)
            return st;
        cg_list_del(&s->lru_link);
    }
    *s_p = s;
    return CG_OK;
}

cg_status_t cg_hvd_cache_insert(cg_hvd_core_t *core, const cg_hvd_entry_t *e)
{
    cg_hvd_cache_t *c = &core->cache;
    cg_hvd_slot_t *s;
    cg_status_t st;

    if (c->capacity == 0 || e->failed || e->w.type == CG_HVD_ALLGATHER ||
        e->w.type == CG_HVD_ALLTOALL || e->w.group_n > 0)
        return CG_OK;
    s = cg__find(c, e->hash, e->w.name);
    if (s != NULL) { /* cannot happen: its record evicted it; stay safe */
        st = cg__evict(core, s);
        if (st != CG_OK)
            return st;
    }
    st = cg__take(core, &s);
    if (st != CG_OK)
        return st;
    s->hash = e->hash;
    cg_hvd_wire_copy(&s->w, &e->w);
    s->used = true;
    s->pending = NULL;
    cg_list_push(&c->lru, &s->lru_link);
    cg_list_push(&c->buckets[CG_HVD_BUCKET(e->hash)], &s->bucket_link);
    return CG_OK;
}

static cg_status_t cg__vec_reserve(cg_hvd_core_t *core, size_t words)
{
    cg_hvd_cache_t *c = &core->cache;
    uint64_t *v;
    cg_status_t st;

    if (words <= c->vec_words)
        return CG_OK;
    st = cg_governor_alloc(core->gov, CG_MEM_CAT_CONTROL,
                           words * sizeof(*v), (void **)&v);
    if (st != CG_OK)
        return st;
    cg_governor_free(core->gov, CG_MEM_CAT_CONTROL, c->vec,
                     c->vec_words * sizeof(*v));
    c->vec = v;
    c->vec_words = words;
    return CG_OK;
}

/* Slot s is ready on every rank: an entry for this rank's request. */
static cg_status_t cg__hit(cg_hvd_core_t *core, uint32_t index)
{
    cg_hvd_cache_t *c = &core->cache;
    cg_hvd_slot_t *s = cg_hvd_cache_slot(c, index);
    cg_hvd_entry_t *e;
    cg_status_t st;

    if (!s->used || s->pending == NULL)
        return cg_error_set(CG_ERR_INTERNAL, "response cache: slot %u is "
                            "ready on every rank but holds no request here "
                            "(caches out of step)", index);
    st = cg_hvd_entry_new(core, core->rank, &s->w, s->hash, false, &e);
    if (st != CG_OK)
        return st;
    e->local = cg_hvd_cache_unpend(c, s);
    e->count = core->size;
    cg_list_del(&s->lru_link); /* most recently used */
    cg_list_push(&c->lru, &s->lru_link);
    core->n_hits++;
    cg_hvd_tl_cached(core, e);
    return cg_hvd_ready_push(core, e);
}

cg_status_t cg_hvd_cache_exchange(cg_hvd_core_t *core, bool need_full,
                                  bool *full_p)
{
    cg_hvd_cache_t *c = &core->cache;
    size_t words = 1 + (c->hw + CG__CHUNK - 1) / CG__CHUNK;
    uint64_t *v;
    cg_status_t st;

    st = cg__vec_reserve(core, words);
    if (st != CG_OK)
        return st;
    v = c->vec;
    memset(v, 0, words * sizeof(*v));
    v[0] = need_full ? 0 : CG__FLAG_QUIET;
    /* The pending slots only: a scan of every slot ever used touched a
     * line per slot each cycle (2-3 us a cycle with a thousand names). */
    for (cg_list_t *l = c->pend.next; l != &c->pend; l = l->next) {
        uint32_t i = cg_list_entry(l, cg_hvd_slot_t, pend_link)->index;
        v[1 + i / CG__CHUNK] |= 1ull << (i % CG__CHUNK);
    }
    st = cg_allreduce(core->comm, v, v, words, CG_DTYPE_U64, CG_OP_BAND, 1.0,
                      1.0);
    if (st != CG_OK)
        return st;
    *full_p = !(v[0] & CG__FLAG_QUIET);
    for (size_t w = 1; w < words; w++) {
        for (uint64_t b = v[w]; b != 0; b &= b - 1) {
            uint32_t i = (uint32_t)((w - 1) * CG__CHUNK +
                                    (size_t)__builtin_ctzll(b));
            /* Hits are mostly runs of slots: fetch the ones ahead. */
            if (i + 8 < c->hw)
                __builtin_prefetch(cg_hvd_cache_slot(c, i + 8));
            st = cg__hit(core, i);
            if (st != CG_OK)
                return st;
        }
    }
    return CG_OK;
}
