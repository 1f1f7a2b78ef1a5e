/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Negotiation of the Horovod shim's core: each cycle every rank announces
 * its newly enqueued requests; the announcements of all ranks are gathered
 * on every rank (a count/flags allreduce, then a byte allreduce of the
 * records, each rank's at its own offset), so every rank builds the same
 * table and decides the same ready list in the same order, validating
 * dtype, shape, op, scales and root across ranks. Background thread only.
 * Layer: core; calls the collectives (core/coll.h) and the governor.
 */
#include <stdio.h>
#include <string.h>

#include "core/base/error.h"
#include "core/hvd_core.h"

static const char *const cg__type_names[] = {"allreduce", "broadcast",
                                             "allgather"};

static void cg__shape_str(const cg_hvd_wire_t *w, char *buf, size_t len)
{
    size_t n = (size_t)snprintf(buf, len, "[");
    for (int d = 0; d < w->ndim && n < len; d++)
        n += (size_t)snprintf(buf + n, len - n, "%s%lld", d ? ", " : "",
                              (long long)w->shape[d]);
    if (n < len)
        snprintf(buf + n, len - n, "]");
}

static void cg__place_str(int device, char *buf, size_t len)
{
    if (device < 0)
        snprintf(buf, len, "host memory");
    else
        snprintf(buf, len, "CUDA device %d", device);
}

/* The first difference between rank a's announcement and rank b's. */
static bool cg__mismatch(const cg_hvd_entry_t *e, int b,
                         const cg_hvd_wire_t *w, char *out, size_t len)
{
    const cg_hvd_wire_t *f = &e->w;
    const char *what = cg__type_names[f->type];
    int a = e->first_rank;
    char sa[160], sb[160];
    bool shape_ok = f->ndim == w->ndim;

    if (f->type != w->type) {
        snprintf(out, len, "tensor '%s': mismatched operation: rank %d asked "
                 "%s, rank %d asked %s", f->name, a, what, b,
                 cg__type_names[w->type]);
        return true;
    }
    if (f->device != w->device) {
        cg__place_str(f->device, sa, sizeof(sa));
        cg__place_str(w->device, sb, sizeof(sb));
        snprintf(out, len, "%s of tensor '%s': mismatched placement: rank %d "
                 "has it in %s, rank %d in %s", what, f->name, a, sa, b, sb);
        return true;
    }
    if (f->dtype != w->dtype) {
        snprintf(out, len, "%s of tensor '%s': mismatched dtype: rank %d has "
                 "%s, rank %d has %s", what, f->name, a,
                 cg_dtype_name(f->dtype), b, cg_dtype_name(w->dtype));
        return true;
    }
    for (int d = f->type == CG_HVD_ALLGATHER ? 1 : 0; shape_ok && d < f->ndim;
         d++)
        shape_ok = f->shape[d] == w->shape[d];
    if (!shape_ok) {
        cg__shape_str(f, sa, sizeof(sa));
        cg__shape_str(w, sb, sizeof(sb));
        snprintf(out, len, "%s of tensor '%s': mismatched shape%s: rank %d "
                 "has %s, rank %d has %s", what, f->name,
                 f->type == CG_HVD_ALLGATHER ? " (dimensions after the first)"
                                             : "",
                 a, sa, b, sb);
        return true;
    }
    if (f->op != w->op) {
        snprintf(out, len, "%s of tensor '%s': mismatched op: rank %d has %s, "
                 "rank %d has %s", what, f->name, a, cg_redop_name(f->op), b,
                 cg_redop_name(w->op));
        return true;
    }
    if (f->prescale != w->prescale || f->postscale != w->postscale) {
        snprintf(out, len, "%s of tensor '%s': mismatched %s: rank %d has "
                 "%.17g, rank %d has %.17g", what, f->name,
                 f->prescale != w->prescale ? "prescale" : "postscale", a,
                 f->prescale != w->prescale ? f->prescale : f->postscale, b,
                 f->prescale != w->prescale ? w->prescale : w->postscale);
        return true;
    }
    if (f->root != w->root) {
        snprintf(out, len, "%s of tensor '%s': mismatched root rank: rank %d "
                 "has %d, rank %d has %d", what, f->name, a, f->root, b,
                 w->root);
        return true;
    }
    return false;
}

void cg_hvd_entry_free(cg_hvd_core_t *core, cg_hvd_entry_t *e)
{
    cg_list_del(&e->link);
    cg_list_del(&e->bucket_link);
    if (e->dim0 != NULL)
        cg_governor_free(core->gov, CG_MEM_CAT_CONTROL, e->dim0,
                         (size_t)core->size * sizeof(int64_t));
    cg_governor_free(core->gov, CG_MEM_CAT_CONTROL, e, sizeof(*e));
}

void cg_hvd_table_free(cg_hvd_core_t *core)
{
    while (!cg_list_empty(&core->table))
        cg_hvd_entry_free(core, cg_list_entry(core->table.next,
                                              cg_hvd_entry_t, link));
}

static cg_status_t cg__entry_new(cg_hvd_core_t *core, int rank,
                                 const cg_hvd_wire_t *w, uint64_t hash,
                                 cg_hvd_entry_t **e_p)
{
    cg_hvd_entry_t *e;
    cg_status_t st;

    st = cg_governor_alloc(core->gov, CG_MEM_CAT_CONTROL, sizeof(*e),
                           (void **)&e);
    if (st != CG_OK)
        return st;
    memset(e, 0, sizeof(*e));
    e->hash = hash;
    e->w = *w;
    e->first_rank = rank;
    if (w->type == CG_HVD_ALLGATHER) {
        st = cg_governor_alloc(core->gov, CG_MEM_CAT_CONTROL,
                               (size_t)core->size * sizeof(int64_t),
                               (void **)&e->dim0);
        if (st != CG_OK) {
            cg_governor_free(core->gov, CG_MEM_CAT_CONTROL, e, sizeof(*e));
            return st;
        }
    }
    cg_list_push(&core->table, &e->link);
    cg_list_push(&core->tab_buckets[CG_HVD_BUCKET(hash)], &e->bucket_link);
    *e_p = e;
    return CG_OK;
}

static cg_status_t cg__ready_push(cg_hvd_core_t *core, cg_hvd_entry_t *e)
{
    if (core->ready_len == core->ready_cap) {
        size_t cap = core->ready_cap ? core->ready_cap * 2 : 64;
        cg_hvd_entry_t **r;
        cg_status_t st = cg_governor_alloc(core->gov, CG_MEM_CAT_CONTROL,
                                           cap * sizeof(*r), (void **)&r);
        if (st != CG_OK)
            return st;
        if (core->ready_len > 0)
            memcpy(r, core->ready, core->ready_len * sizeof(*r));
        cg_governor_free(core->gov, CG_MEM_CAT_CONTROL, core->ready,
                         core->ready_cap * sizeof(*r));
        core->ready = r;
        core->ready_cap = cap;
    }
    core->ready[core->ready_len++] = e;
    return CG_OK;
}

/* Rank `rank` announced w (req: this rank's own request, else NULL). */
static cg_status_t cg__announce(cg_hvd_core_t *core, int rank,
                                const cg_hvd_wire_t *w, struct cg_hvd_req *req)
{
    uint64_t hash = cg_hvd_name_hash(w->name);
    cg_hvd_entry_t *e = NULL;
    cg_status_t st;

    CG_HVD_FOR(it, &core->tab_buckets[CG_HVD_BUCKET(hash)]) {
        cg_hvd_entry_t *x = cg_list_entry(it, cg_hvd_entry_t, bucket_link);
        if (x->hash == hash && strcmp(x->w.name, w->name) == 0) {
            e = x;
            break;
        }
    }
    if (e == NULL) {
        st = cg__entry_new(core, rank, w, hash, &e);
        if (st != CG_OK)
            return st;
    } else if (!e->failed) {
        e->failed = cg__mismatch(e, rank, w, e->err, sizeof(e->err));
    }
    if (e->dim0 != NULL)
        e->dim0[rank] = w->shape[0];
    if (req != NULL)
        e->local = req;
    if (++e->count == core->size)
        return cg__ready_push(core, e);
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

cg_status_t cg_hvd_negotiate(cg_hvd_core_t *core, cg_list_t *first,
                             size_t n_new, bool stop, int *stop_rank_p)
{
    const size_t ws = sizeof(cg_hvd_wire_t);
    int64_t *hdr = core->hdr;
    size_t total = 0, mine_at = 0, cap = SIZE_MAX;
    cg_hvd_wire_t *recs;
    cg_list_t *it = first;
    cg_status_t st;

    memset(hdr, 0, (size_t)core->size * 3 * sizeof(int64_t));
    hdr[3 * core->rank] = (int64_t)n_new;
    hdr[3 * core->rank + 1] = stop;
    hdr[3 * core->rank + 2] = (int64_t)cg_hvd_fusion_prepare(core);
    st = cg_allreduce(core->comm, hdr, hdr, (size_t)core->size * 3,
                      CG_DTYPE_I64, CG_OP_SUM, 1.0, 1.0);
    if (st != CG_OK)
        return st;
    *stop_rank_p = -1;
    for (int r = 0; r < core->size; r++) {
        if (r == core->rank)
            mine_at = total;
        total += (size_t)hdr[3 * r];
        if (hdr[3 * r + 1] && *stop_rank_p < 0)
            *stop_rank_p = r;
        if ((size_t)hdr[3 * r + 2] < cap)
            cap = (size_t)hdr[3 * r + 2];
    }
    core->fusion_cap = cap;
    core->tstats.cycles++;
    core->tstats.fusion_bytes = cap;
    core->ready_len = 0;
    if (total == 0)
        return CG_OK;

    st = cg__xbuf_reserve(core, total * ws);
    if (st != CG_OK)
        return st;
    recs = core->xbuf;
    memset(recs, 0, total * ws);
    for (size_t i = 0; i < n_new; i++, it = it->next)
        recs[mine_at + i] = cg_list_entry(it, struct cg_hvd_req, link)->w;
    st = cg_allreduce(core->comm, recs, recs, total * ws, CG_DTYPE_U8,
                      CG_OP_SUM, 1.0, 1.0);
    if (st != CG_OK)
        return st;

    it = first;
    for (int r = 0, k = 0; r < core->size; r++) {
        for (int64_t i = 0; i < hdr[3 * r]; i++, k++) {
            struct cg_hvd_req *req = NULL;
            if (r == core->rank) {
                req = cg_list_entry(it, struct cg_hvd_req, link);
                it = it->next;
            }
            st = cg__announce(core, r, &recs[k], req);
            if (st != CG_OK)
                return st;
        }
    }
    return CG_OK;
}
