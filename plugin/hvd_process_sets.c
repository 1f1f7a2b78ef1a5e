/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The Horovod shim's process-set table, with Horovod's rules: id 0 is the
 * whole world; a set holds ascending Horovod ranks; a set whose ranks
 * equal an existing one's is refused (-6); new ids reuse removed ones
 * first-in first-out, else count up; ids are listed in registration order.
 * Adding and removing are collective and agreed through the bootstrap;
 * with a collective core, each set also gets its core there
 * (cg_hvd_process_set_add), so collectives run on it.
 * Layer: plugin; calls plugin/hvd_agree, collguard/hvd.h and core/base.
 */
#include <stdio.h>
#include <string.h>

#include "collguard/hvd.h"
#include "core/base/error.h"
#include "plugin/hvd_impl.h"

static void cg__hvd_pset_free(cg__hvd_t *h, cg__hvd_pset_t *ps)
{
    cg_mem_free(&h->mem, CG_MEM_CAT_CONTROL, ps->ranks,
                (size_t)ps->size * sizeof(int));
    ps->ranks = NULL;
}

cg_status_t cg__hvd_psets_init(cg__hvd_t *h)
{
    /* Room for every set a world of this size can hold is not needed;
     * grow by doubling from a small start. */
    int cap = 8;
    cg__hvd_psets_t *t = &h->ps;
    int *all;
    int id;

    memset(t, 0, sizeof(*t));
    t->sets = cg_mem_alloc(&h->mem, CG_MEM_CAT_CONTROL,
                           (size_t)cap * sizeof(*t->sets));
    t->free_ids = cg_mem_alloc(&h->mem, CG_MEM_CAT_CONTROL,
                               (size_t)cap * sizeof(int));
    all = cg_mem_alloc(&h->mem, CG_MEM_CAT_CONTROL,
                       (size_t)h->size * sizeof(int));
    if (t->sets == NULL || t->free_ids == NULL || all == NULL)
        goto err_free;
    t->cap = cap;
    for (int r = 0; r < h->size; r++)
        all[r] = r;
    id = cg__hvd_psets_register(h, all, h->size);
    cg_mem_free(&h->mem, CG_MEM_CAT_CONTROL, all,
                (size_t)h->size * sizeof(int));
    if (id != 0)
        goto err_sets;
    return CG_OK;

err_free:
    cg_mem_free(&h->mem, CG_MEM_CAT_CONTROL, all,
                (size_t)h->size * sizeof(int));
err_sets:
    cg_mem_free(&h->mem, CG_MEM_CAT_CONTROL, t->free_ids,
                (size_t)cap * sizeof(int));
    cg_mem_free(&h->mem, CG_MEM_CAT_CONTROL, t->sets,
                (size_t)cap * sizeof(*t->sets));
    memset(t, 0, sizeof(*t));
    return cg_error_set(CG_ERR_NO_MEMORY, "no memory for the process-set "
                        "table of %d ranks", h->size);
}

void cg__hvd_psets_cleanup(cg__hvd_t *h)
{
    cg__hvd_psets_t *t = &h->ps;

    for (int i = 0; i < t->count; i++)
        cg__hvd_pset_free(h, &t->sets[i]);
    cg_mem_free(&h->mem, CG_MEM_CAT_CONTROL, t->free_ids,
                (size_t)t->cap * sizeof(int));
    cg_mem_free(&h->mem, CG_MEM_CAT_CONTROL, t->sets,
                (size_t)t->cap * sizeof(*t->sets));
    memset(t, 0, sizeof(*t));
}

const cg__hvd_pset_t *cg__hvd_psets_find(const cg__hvd_t *h, int id)
{
    for (int i = 0; i < h->ps.count; i++)
        if (h->ps.sets[i].id == id)
            return &h->ps.sets[i];
    return NULL;
}

static bool cg__hvd_pset_equal(const cg__hvd_pset_t *ps, const int *sorted,
                               int n)
{
    return ps->size == n && memcmp(ps->ranks, sorted, n * sizeof(int)) == 0;
}

/* Doubles the set array and the free-id queue together (the queue never
 * holds more ids than there were sets). */
static bool cg__hvd_psets_grow(cg__hvd_t *h)
{
    cg__hvd_psets_t *t = &h->ps;
    int cap = t->cap * 2;
    cg__hvd_pset_t *sets;
    int *free_ids;

    sets = cg_mem_alloc(&h->mem, CG_MEM_CAT_CONTROL,
                        (size_t)cap * sizeof(*sets));
    free_ids = cg_mem_alloc(&h->mem, CG_MEM_CAT_CONTROL,
                            (size_t)cap * sizeof(int));
    if (sets == NULL || free_ids == NULL) {
        cg_mem_free(&h->mem, CG_MEM_CAT_CONTROL, sets,
                    (size_t)cap * sizeof(*sets));
        return false;
    }
    memcpy(sets, t->sets, (size_t)t->count * sizeof(*sets));
    memcpy(free_ids, t->free_ids, (size_t)t->nfree * sizeof(int));
    cg_mem_free(&h->mem, CG_MEM_CAT_CONTROL, t->sets,
                (size_t)t->cap * sizeof(*sets));
    cg_mem_free(&h->mem, CG_MEM_CAT_CONTROL, t->free_ids,
                (size_t)t->cap * sizeof(int));
    t->sets = sets;
    t->free_ids = free_ids;
    t->cap = cap;
    return true;
}

int cg__hvd_psets_register(cg__hvd_t *h, const int *sorted, int n)
{
    cg__hvd_psets_t *t = &h->ps;
    cg__hvd_pset_t *ps;

    for (int i = 0; i < t->count; i++)
        if (cg__hvd_pset_equal(&t->sets[i], sorted, n))
            return CG_HVD_PS_ERR_EXISTING_SET;
    if (t->count == t->cap && !cg__hvd_psets_grow(h))
        goto err_nomem;
    ps = &t->sets[t->count];
    ps->ranks = cg_mem_alloc(&h->mem, CG_MEM_CAT_CONTROL,
                             (size_t)n * sizeof(int));
    if (ps->ranks == NULL)
        goto err_nomem;
    memcpy(ps->ranks, sorted, (size_t)n * sizeof(int));
    ps->size = n;
    ps->rank = -1;
    for (int i = 0; i < n; i++)
        if (sorted[i] == h->rank)
            ps->rank = i;
    if (t->nfree > 0) {
        ps->id = t->free_ids[0];
        memmove(t->free_ids, t->free_ids + 1,
                (size_t)(t->nfree - 1) * sizeof(int));
        t->nfree--;
    } else {
        ps->id = t->next_id++;
    }
    t->count++;
    return ps->id;

err_nomem:
    cg_error(h->log, "cannot register a process set of %d ranks: %s", n,
             cg_last_error());
    return CG_HVD_PS_ERR_SHUTDOWN;
}

int cg__hvd_psets_add(cg__hvd_t *h, const int *ranks, int nranks)
{
    size_t len = (size_t)h->size * sizeof(int);
    char why[CG_HVD_WHY_MAX] = "";
    cg__hvd_req_t req = {CG_HVD_REQ_ADD, 0, 0, false, NULL};
    bool same = false;
    cg_status_t st;
    int *sorted, ret;

    sorted = cg_mem_alloc(&h->mem, CG_MEM_CAT_CONTROL, len);
    if (sorted == NULL) {
        cg_error(h->log, "horovod_add_process_set: %s", cg_last_error());
        return CG_HVD_PS_ERR_SHUTDOWN;
    }
    req.valid = cg__hvd_ranks_sorted(ranks, nranks, h->size, sorted, why,
                                     sizeof(why));
    if (!req.valid)
        cg_error(h->log, "horovod_add_process_set: %s (world of %d ranks)",
                 why, h->size);
    /* No ranks: the whole world, which set 0 already is. */
    req.n = (req.valid && nranks == 0) ? h->size : nranks;
    for (int r = 0; req.valid && nranks == 0 && r < h->size; r++)
        sorted[r] = r;
    req.list = sorted;
    st = cg__hvd_agree(h, &req, &same, why, sizeof(why));
    if (st != CG_OK) {
        cg_error(h->log, "horovod_add_process_set: the job's bootstrap "
                 "failed: %s", cg_last_error());
        ret = CG_HVD_PS_ERR_SHUTDOWN;
    } else if (!same) {
        if (req.valid)
            cg_error(h->log, "horovod_add_process_set: %s", why);
        ret = CG_HVD_PS_ERR_UNKNOWN_SET;
    } else {
        ret = cg__hvd_psets_register(h, sorted, req.n);
        if (ret == CG_HVD_PS_ERR_EXISTING_SET)
            cg_info(h->log, "horovod_add_process_set: a process set with "
                    "these %d ranks exists", req.n);
        if (ret > 0 && h->core != NULL &&
            cg_hvd_process_set_add(h->core, ret, sorted, req.n) != CG_OK) {
            /* The same verdict on every rank: the set is not added. */
            cg_error(h->log, "horovod_add_process_set: %s", cg_last_error());
            cg__hvd_psets_unregister(h, ret);
            ret = CG_HVD_PS_ERR_SHUTDOWN;
        }
    }
    cg_mem_free(&h->mem, CG_MEM_CAT_CONTROL, sorted, len);
    return ret;
}

int cg__hvd_psets_remove(cg__hvd_t *h, int id)
{
    char why[CG_HVD_WHY_MAX] = "";
    cg__hvd_req_t req = {CG_HVD_REQ_REMOVE, id, 0, true, NULL};
    cg__hvd_psets_t *t = &h->ps;
    bool same = false;
    cg_status_t st;
    int i;

    for (i = 0; i < t->count && t->sets[i].id != id; i++)
        ;
    if (id == 0 || i == t->count) {
        req.valid = false;
        cg_warn(h->log, "horovod_remove_process_set(%d): %s", id,
                id == 0 ? "the global process set cannot be removed"
                        : "no process set has this id");
    }
    st = cg__hvd_agree(h, &req, &same, why, sizeof(why));
    if (st != CG_OK) {
        cg_error(h->log, "horovod_remove_process_set: the job's bootstrap "
                 "failed: %s", cg_last_error());
        return CG_HVD_PS_ERR_SHUTDOWN;
    }
    if (!same) {
        if (req.valid)
            cg_error(h->log, "horovod_remove_process_set(%d): %s", id, why);
        return CG_HVD_PS_ERR_UNKNOWN_SET;
    }
    if (h->core != NULL && cg_hvd_process_set_remove(h->core, id) != CG_OK) {
        cg_error(h->log, "horovod_remove_process_set(%d): %s", id,
                 cg_last_error());
        return CG_HVD_PS_ERR_SHUTDOWN;
    }
    cg__hvd_psets_unregister(h, id);
    return id;
}

void cg__hvd_psets_unregister(cg__hvd_t *h, int id)
{
    cg__hvd_psets_t *t = &h->ps;
    int i;

    for (i = 0; i < t->count && t->sets[i].id != id; i++)
        ;
    if (i == t->count)
        return;
    cg__hvd_pset_free(h, &t->sets[i]);
    memmove(&t->sets[i], &t->sets[i + 1],
            (size_t)(t->count - i - 1) * sizeof(*t->sets));
    t->count--;
    t->free_ids[t->nfree++] = id;
}

cg_status_t cg__hvd_psets_start(cg__hvd_t *h)
{
    for (int i = 0; h->core != NULL && i < h->ps.count; i++) {
        const cg__hvd_pset_t *ps = &h->ps.sets[i];
        cg_status_t st;

        if (ps->id == 0)
            continue;
        st = cg_hvd_process_set_add(h->core, ps->id, ps->ranks, ps->size);
        if (st != CG_OK)
            return st;
    }
    return CG_OK;
}
