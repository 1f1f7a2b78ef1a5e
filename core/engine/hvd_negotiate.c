/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Negotiation of the Horovod shim's core. Each cycle: requests whose name
 * is in the response cache (hvd_cache.c) wait on its bit, and one
 * bitwise-AND allreduce says which cached names are ready everywhere and
 * whether some rank needs the full round; the full round (a header
 * allreduce: records per rank, stop, fusion offer, cache capacity,
 * staging chunk offer; then a byte allreduce of every rank's records at
 * its own offset) lets every rank build the same table and the same ready
 * list in the same order, validating dtype, shape, op, scales and root
 * across ranks, and agree on the fusion size and the staging chunk.
 * Background thread only. Layer: core/engine; calls core/coll/coll.h, the
 * governor and the GPU data path (hvd_gpu.h).
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "core/base/error.h"
#include "core/base/parse.h"
#include "core/backend/hvd_gpu.h"
#include "core/engine/hvd_core.h"
#include "core/engine/hvd_timeline.h"

static void cg__place_str(int device, char *buf, size_t len)
{
    snprintf(buf, len, "%s", device < 0 ? "host memory" : "CUDA memory");
}

/* snprintf for messages that may be cut at the buffer's end (vsnprintf,
 * so the compiler does not flag the truncation meant here). */
__attribute__((format(printf, 3, 4))) static void
cg__say(char *out, size_t len, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(out, len, fmt, ap);
    va_end(ap);
}

/* The first difference between rank a's announcement and rank b's. */
static bool cg__mismatch(const cg_hvd_entry_t *e, int b,
                         const cg_hvd_wire_t *w, char *out, size_t len)
{
    const cg_hvd_wire_t *f = &e->w;
    const char *what = cg_hvd_type_name(f->type);
    int a = e->first_rank;
    char sa[160], sb[160];
    bool shape_ok = f->ndim == w->ndim;

    if (f->type != w->type) {
        cg__say(out, len, "tensor '%s': mismatched operation: rank %d asked "
                 "%s, rank %d asked %s", f->name, a, what, b,
                 cg_hvd_type_name(w->type));
        return true;
    }
    if (f->group_n != w->group_n || f->group_at != w->group_at ||
        f->group_key != w->group_key) {
        cg__say(out, len, "%s of tensor '%s': mismatched group: rank %d has "
                 "it as member %d of a group of %d, rank %d as member %d of "
                 "a group of %d%s (0 of 0: not grouped)", what, f->name, a,
                 f->group_at + (f->group_n > 0), f->group_n, b,
                 w->group_at + (w->group_n > 0), w->group_n,
                 f->group_n == w->group_n && f->group_at == w->group_at
                     ? ", with other member names" : "");
        return true;
    }
    if (f->device != w->device) {
        cg__place_str(f->device, sa, sizeof(sa));
        cg__place_str(w->device, sb, sizeof(sb));
        cg__say(out, len, "%s of tensor '%s': mismatched placement: rank %d "
                 "has it in %s, rank %d in %s", what, f->name, a, sa, b, sb);
        return true;
    }
    if (f->dtype != w->dtype) {
        cg__say(out, len, "%s of tensor '%s': mismatched dtype: rank %d has "
                 "%s, rank %d has %s", what, f->name, a,
                 cg_dtype_name(f->dtype), b, cg_dtype_name(w->dtype));
        return true;
    }
    bool rows_free = f->type == CG_HVD_ALLGATHER || f->type == CG_HVD_ALLTOALL;
    for (int d = rows_free ? 1 : 0; shape_ok && d < f->ndim; d++)
        shape_ok = f->shape[d] == w->shape[d];
    if (!shape_ok) {
        cg_hvd_shape_str(f, sa, sizeof(sa));
        cg_hvd_shape_str(w, sb, sizeof(sb));
        cg__say(out, len, "%s of tensor '%s': mismatched shape%s: rank %d "
                 "has %s, rank %d has %s", what, f->name,
                 rows_free ? " (dimensions after the first)" : "",
                 a, sa, b, sb);
        return true;
    }
    if (f->op != w->op) {
        cg__say(out, len, "%s of tensor '%s': mismatched op: rank %d has %s, "
                 "rank %d has %s", what, f->name, a, cg_redop_name(f->op), b,
                 cg_redop_name(w->op));
        return true;
    }
    if (f->prescale != w->prescale || f->postscale != w->postscale) {
        cg__say(out, len, "%s of tensor '%s': mismatched %s: rank %d has "
                 "%.17g, rank %d has %.17g", what, f->name,
                 f->prescale != w->prescale ? "prescale" : "postscale", a,
                 f->prescale != w->prescale ? f->prescale : f->postscale, b,
                 f->prescale != w->prescale ? w->prescale : w->postscale);
        return true;
    }
    if (f->root != w->root) {
        cg__say(out, len, "%s of tensor '%s': mismatched root rank: rank %d "
                 "has %d, rank %d has %d", what, f->name, a, f->root, b,
                 w->root);
        return true;
    }
    return false;
}

/* Rank `rank` announced w (req: this rank's own request, else NULL). */
static cg_status_t cg__announce(cg_hvd_core_t *core, int rank,
                                const cg_hvd_wire_t *w, struct cg_hvd_req *req)
{
    uint64_t hash = cg_hvd_name_hash(w->name);
    cg_hvd_entry_t *e = NULL;
    cg_status_t st;

    if (w->type == CG_HVD_WIRE_JOIN) { /* no tensor: hvd_join.c */
        cg_hvd_join_announce(core, rank, req);
        return CG_OK;
    }

    CG_HVD_FOR(it, &core->tab_buckets[CG_HVD_BUCKET(hash)]) {
        cg_hvd_entry_t *x = cg_list_entry(it, cg_hvd_entry_t, bucket_link);
        if (x->hash == hash && strcmp(x->w.name, w->name) == 0) {
            e = x;
            break;
        }
    }
    if (e == NULL) {
        st = cg_hvd_entry_new(core, rank, w, hash, true, &e);
        if (st != CG_OK)
            return st;
    } else if (!e->failed) {
        e->failed = cg__mismatch(e, rank, w, e->err, sizeof(e->err));
    }
    if (e->dim0 != NULL)
        e->dim0[rank] = w->shape[0];
    if (req != NULL)
        e->local = req;
    e->ranks[rank / 64] |= 1ull << (rank % 64);
    cg_hvd_tl_announce(core, e, rank);
    if (++e->count == core->size)
        return cg_hvd_ready_push(core, e);
    return CG_OK;
}

static cg_status_t cg__xbuf_reserve(cg_hvd_core_t *core, size_t len)
{
    void *p;
    cg_status_t st;

    if (len <= core->xbuf_len)
        return CG_OK;
    st = cg_governor_alloc(core->gov, CG_MEM_CAT_CONTROL, len, &p);
    if (st != CG_OK)
        return st;
    cg_governor_free(core->gov, CG_MEM_CAT_CONTROL, core->xbuf,
                     core->xbuf_len);
    core->xbuf = p;
    core->xbuf_len = len;
    return CG_OK;
}

static cg_status_t cg__setup(cg_hvd_core_t *core)
{
    cg_status_t st;

    st = cg_governor_alloc(core->gov, CG_MEM_CAT_CONTROL,
                           (size_t)core->size * CG_HVD_NHDR *
                               sizeof(int64_t),
                           (void **)&core->nhdr);
    if (st != CG_OK)
        return st;
    st = cg_hvd_pool_create(core);
    if (st != CG_OK) {
        cg_governor_free(core->gov, CG_MEM_CAT_CONTROL, core->nhdr,
                         (size_t)core->size * CG_HVD_NHDR * sizeof(int64_t));
        core->nhdr = NULL;
        return st;
    }
    cg_hvd_cache_init(core);
    memset(&core->ann, 0, sizeof(core->ann));
    memset(&core->redo, 0, sizeof(core->redo));
    /* Nothing sent yet (the first cycle runs the full round anyway: the
     * cache capacity is agreed there). */
    core->last_offer = (cg_hvd_offer_t){SIZE_MAX, SIZE_MAX};
    core->stage_chunk = SIZE_MAX;
    core->nego_ready = true;
    return CG_OK;
}

/* This round's records: requests whose cache slot went last cycle, then
 * the new requests that do not wait on a cache bit. */
static cg_status_t cg__collect(cg_hvd_core_t *core, cg_list_t *first,
                               size_t n_new)
{
    cg_hvd_reqv_t t = core->ann;
    cg_list_t *it = first, *ahead = first; /* ahead: 8 on, fetched early */
    cg_status_t st;

    core->ann = core->redo;
    core->redo = t;
    core->redo.len = 0;
    for (size_t i = 0; i < 8 && i < n_new; i++)
        ahead = ahead->next;
    for (size_t i = 0; i < n_new; i++, it = it->next) {
        struct cg_hvd_req *req = cg_list_entry(it, struct cg_hvd_req, link);
        if (i + 8 < n_new) {
            const struct cg_hvd_req *a =
                cg_list_entry(ahead, struct cg_hvd_req, link);
            __builtin_prefetch(&a->hash);
            __builtin_prefetch(a->w.name);
            __builtin_prefetch(&a->w.type);
            ahead = ahead->next;
        }
        if (cg_hvd_cache_lookup(core, req))
            continue;
        st = cg_hvd_reqv_push(core, &core->ann, req);
        if (st != CG_OK)
            return st;
    }
    return CG_OK;
}

/* The first full round agrees on the cache capacity: the minimum. */
static cg_status_t cg__agree_cache(cg_hvd_core_t *core, int64_t cap)
{
    if (cap != core->ctx->cfg.cache_capacity)
        cg_warn(core->log, "response cache: CG_CACHE_CAPACITY "
                "(HOROVOD_CACHE_CAPACITY) is %d here but %lld on another "
                "rank; every rank uses %lld", core->ctx->cfg.cache_capacity,
                (long long)cap, (long long)cap);
    return cg_hvd_cache_setup(core, (uint32_t)cap);
}

/* Every rank's records (their counts first), validated into the table;
 * names ready everywhere go to core->ready and then into the cache. */
static cg_status_t cg__records(cg_hvd_core_t *core, size_t total,
                               size_t mine_at)
{
    const size_t ws = sizeof(cg_hvd_wire_t);
    const int64_t *hdr = core->nhdr;
    size_t first_ready = core->ready_len;
    int joined_before = core->n_joined;
    cg_hvd_wire_t *recs;
    cg_status_t st;

    st = cg__xbuf_reserve(core, total * ws);
    if (st != CG_OK)
        return st;
    recs = core->xbuf;
    memset(recs, 0, total * ws);
    for (size_t i = 0; i < core->ann.len; i++)
        recs[mine_at + i] = core->ann.v[i]->w;
    st = cg_allreduce(core->comm, recs, recs, total * ws, CG_DTYPE_U8,
                      CG_OP_SUM, 1.0, 1.0);
    if (st != CG_OK)
        return st;
    core->n_full++;
    for (int r = 0, k = 0; r < core->size; r++) {
        for (int64_t i = 0; i < hdr[CG_HVD_NHDR * r]; i++, k++) {
            struct cg_hvd_req *req = r == core->rank ? core->ann.v[i] : NULL;
            st = cg_hvd_wire_check(&recs[k], core->size, r);
            if (st == CG_OK)
                st = cg_hvd_cache_evict_name(core, &recs[k]);
            if (st == CG_OK)
                st = cg__announce(core, r, &recs[k], req);
            if (st != CG_OK)
                return st;
        }
    }
    st = cg_hvd_join_round(core, joined_before);
    if (st != CG_OK)
        return st;
    for (size_t i = first_ready; i < core->ready_len; i++) {
        st = cg_hvd_cache_insert(core, core->ready[i]);
        if (st != CG_OK)
            return st;
    }
    return CG_OK;
}

/* The staging chunk of this round: the least offer (INT64_MAX: no rank
 * stages), from the lowest rank that made it; logged once per change. */
static void cg__agree_chunk(cg_hvd_core_t *core, int64_t least, int rank)
{
    size_t chunk = least == INT64_MAX ? SIZE_MAX : (size_t)least;
    char b[2][32];

    cg_hvd_gpu_stage_agree(core->gpu, chunk, rank);
    core->tstats.stage_chunk_bytes = chunk == SIZE_MAX ? 0 : chunk;
    if (chunk == core->stage_chunk)
        return;
    core->stage_chunk = chunk;
    if (chunk == 0)
        cg_warn(core->log, "staging chunk of CUDA tensors: rank %d has no "
                "staging slot; staged CUDA collectives fail on every rank "
                "until it has one", rank);
    else if (chunk != SIZE_MAX)
        cg_info(core->log, "staging chunk of CUDA tensors: %s on every "
                "rank (the least offered, by rank %d; this rank's slots "
                "hold %s)", cg_format_size(chunk, b[0], sizeof(b[0])), rank,
                cg_format_size(cg_hvd_gpu_stage_slot(core->gpu), b[1],
                               sizeof(b[1])));
}

/* The header (records per rank, stop, fusion offer, cache capacity,
 * staging chunk offer), then the records if any rank has some. */
static cg_status_t cg__full_round(cg_hvd_core_t *core, bool stop,
                                  const cg_hvd_offer_t *offer,
                                  int *stop_rank_p)
{
    const int n = CG_HVD_NHDR;
    int64_t *hdr = core->nhdr, *mine = hdr + n * core->rank;
    size_t total = 0, mine_at = 0, cap = SIZE_MAX;
    int64_t cache_cap = INT64_MAX, chunk = INT64_MAX;
    int chunk_rank = -1;
    bool stall = false;
    cg_status_t st;

    memset(hdr, 0, (size_t)core->size * n * sizeof(int64_t));
    mine[0] = (int64_t)core->ann.len;
    mine[1] = stop ? 1 : core->stall_stop ? 2 : 0;
    mine[2] = (int64_t)offer->fusion;
    mine[3] = core->ctx->cfg.cache_capacity;
    mine[4] = offer->chunk >= (size_t)INT64_MAX ? INT64_MAX
                                                 : (int64_t)offer->chunk;
    st = cg_allreduce(core->comm, hdr, hdr, (size_t)core->size * n,
                      CG_DTYPE_I64, CG_OP_SUM, 1.0, 1.0);
    if (st == CG_OK)
        st = cg_hvd_nhdr_check(hdr, core->size);
    if (st != CG_OK)
        return st;
    core->last_offer = *offer;
    for (int r = 0; r < core->size; r++) {
        const int64_t *h = hdr + n * r;
        if (r == core->rank)
            mine_at = total;
        total += (size_t)h[0];
        if (h[1] == 1 && *stop_rank_p < 0)
            *stop_rank_p = r;
        stall = stall || h[1] == 2;
        if ((size_t)h[2] < cap)
            cap = (size_t)h[2];
        if (h[3] < cache_cap)
            cache_cap = h[3];
        if (h[4] < chunk) {
            chunk = h[4];
            chunk_rank = r;
        }
    }
    core->fusion_cap = cap;
    core->tstats.fusion_bytes = cap;
    cg__agree_chunk(core, chunk, chunk_rank);
    if (*stop_rank_p >= 0)
        return CG_OK;
    if (stall)
        return cg_hvd_stall_shutdown(core);
    if (!core->cache_agreed) {
        st = cg__agree_cache(core, cache_cap);
        if (st != CG_OK)
            return st;
        core->cache_agreed = true;
    }
    return total > 0 ? cg__records(core, total, mine_at) : CG_OK;
}

/* Under the lock: the counters of this cycle into the readers' stats. */
static void cg__stats_add(cg_hvd_core_t *core)
{
    if (core->n_hits + core->n_full + core->n_warned == 0)
        return;
    pthread_mutex_lock(&core->lock);
    core->stats.cache_hits += core->n_hits;
    core->stats.full_rounds += core->n_full;
    core->stats.stalls_warned += core->n_warned;
    pthread_mutex_unlock(&core->lock);
    core->n_hits = core->n_full = core->n_warned = 0;
}

void cg_hvd_negotiate_free(cg_hvd_core_t *core)
{
    cg_hvd_table_clear(core);
    if (!core->nego_ready)
        return;
    core->nego_ready = false;
    cg_hvd_pool_destroy(core);
    cg_hvd_cache_cleanup(core);
    cg_hvd_reqv_free(core, &core->ann);
    cg_hvd_reqv_free(core, &core->redo);
    cg_governor_free(core->gov, CG_MEM_CAT_CONTROL, core->nhdr,
                     (size_t)core->size * CG_HVD_NHDR * sizeof(int64_t));
    core->nhdr = NULL;
}

cg_status_t cg_hvd_negotiate(cg_hvd_core_t *core, cg_list_t *first,
                             size_t n_new, bool stop,
                             const cg_hvd_offer_t *offer, int *stop_rank_p)
{
    struct timespec ts;
    bool full = true;
    cg_status_t st;

    *stop_rank_p = -1;
    core->ready_len = 0;
    core->tstats.cycles++;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    core->now_ns = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
    if (!core->nego_ready) {
        st = cg__setup(core);
        if (st != CG_OK)
            return st;
    }
    st = cg__collect(core, first, n_new);
    if (st == CG_OK)
        st = cg_hvd_stall_tick(core);
    if (st == CG_OK && core->cache.capacity > 0)
        st = cg_hvd_cache_exchange(
            core, core->ann.len > 0 || stop || core->stall_stop ||
                      offer->fusion != core->last_offer.fusion ||
                      offer->chunk != core->last_offer.chunk,
            &full);
    if (st == CG_OK && full)
        st = cg__full_round(core, stop, offer, stop_rank_p);
    cg__stats_add(core);
    return st;
}
