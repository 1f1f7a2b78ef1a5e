/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The staged fused allreduce of the Horovod shim's core (host tensors on
 * a backend with allreduce_staged, the engine): the group's tensors are
 * mapped onto the fusion buffer as extents, and the collective copies
 * each piece in just before it first reads it (or reduces straight from
 * the tensors into it) and out once it is final (cg_allreduce_staged).
 * With more than two ranks the layout is segment by segment: ring
 * segment r holds every tensor's r-th part, each tensor
 * cut as the engine would cut it alone, so each tensor's result has the
 * bits of an allreduce of that tensor alone, whatever else is fused with
 * it (fusion buffer size, pressure, timing); a tensor reduced alone runs
 * the ring on the same segments. Background thread only.
 * Layer: core/engine; calls the backend and core/coll/coll.h's segment rule.
 */
#include <string.h>

#include "core/base/error.h"
#include "core/engine/hvd_core.h"
#include "core/engine/hvd_timeline.h"
#include "core/reduce/reduce.h"

/* Room for n extents and, with more than two ranks, the segment counts
 * (kept on the core); false when the governor refuses. */
static bool cg__reserve(cg_hvd_core_t *core, size_t n)
{
    cg_hvd_extent_t *x;

    if (core->size > 2 && core->segs == NULL &&
        cg_governor_alloc(core->gov, CG_MEM_CAT_CONTROL,
                          (size_t)core->size * sizeof(size_t),
                          (void **)&core->segs) != CG_OK)
        return false;
    if (n <= core->xv_cap)
        return true;
    if (cg_governor_alloc(core->gov, CG_MEM_CAT_CONTROL, n * sizeof(*x),
                          (void **)&x) != CG_OK)
        return false;
    cg_governor_free(core->gov, CG_MEM_CAT_CONTROL, core->xv,
                     core->xv_cap * sizeof(*x));
    core->xv = x;
    core->xv_cap = n;
    return true;
}

void cg_hvd_stage_release(cg_hvd_core_t *core)
{
    cg_governor_free(core->gov, CG_MEM_CAT_CONTROL, core->xv,
                     core->xv_cap * sizeof(*core->xv));
    cg_governor_free(core->gov, CG_MEM_CAT_CONTROL, core->segs,
                     core->segs != NULL ? (size_t)core->size * sizeof(size_t)
                                        : 0);
    core->xv = NULL;
    core->xv_cap = 0;
    core->segs = NULL;
}

static void cg__extent(cg_hvd_extent_t *x, size_t foff, size_t len,
                       const cg_hvd_entry_t *e, size_t skip)
{
    x->foff = foff;
    x->len = len;
    x->in = (const char *)e->local->input + skip;
    x->out = (char *)e->local->output + skip;
}

/* The group's extents in buffer order; returns their number and sets
 * core->segs with more than two ranks. */
static size_t cg__layout(cg_hvd_core_t *core, size_t i, int group,
                         size_t dsize)
{
    int n = core->size;
    size_t k = 0, foff = 0, off, cnt;

    if (n <= 2) {
        for (size_t j = i; j < core->ready_len; j++) {
            cg_hvd_ready_prefetch(core, j);
            const cg_hvd_entry_t *e = core->ready[j];
            if (e->group == group)
                cg__extent(&core->xv[k++], e->foff, e->local->count * dsize,
                           e, 0);
        }
        return k;
    }
    for (int r = 0; r < n; r++) {
        core->segs[r] = 0;
        for (size_t j = i; j < core->ready_len; j++) {
            cg_hvd_ready_prefetch(core, j);
            const cg_hvd_entry_t *e = core->ready[j];
            if (e->group != group)
                continue;
            cg_ring_seg(NULL, e->local->count, n, r, &off, &cnt);
            if (cnt > 0)
                cg__extent(&core->xv[k++], foff, cnt * dsize, e,
                           off * dsize);
            foff += cnt * dsize;
            core->segs[r] += cnt;
        }
    }
    return k;
}

/* What the collective's callbacks see. */
typedef struct cg__stage {
    const cg_hvd_extent_t *x;
    size_t n, hint;
    cg_dtype_t dt;
    cg_redop_t op;
} cg__stage_t;

/* The extent holding byte off: the hint or the one after it (pieces
 * mostly follow each other), else a binary search. */
static size_t cg__find(cg__stage_t *st, size_t off)
{
    size_t lo = 0, hi = st->n;

    for (size_t h = st->hint; h < st->n && h <= st->hint + 1; h++)
        if (st->x[h].foff <= off && off < st->x[h].foff + st->x[h].len)
            return h;
    while (hi - lo > 1) {
        size_t mid = lo + (hi - lo) / 2;
        if (st->x[mid].foff <= off)
            lo = mid;
        else
            hi = mid;
    }
    return lo;
}

/* What a walk over the extents does to each run. */
typedef enum { CG__FILL, CG__DRAIN, CG__REDUCE } cg__walk_t;

/* The group's bytes [off, off + len) extent by extent, against mem (the
 * collective's memory for that range): copied in (fill), out (drain), or
 * mem = inputs op piece (reduce: the bits of filling, then reducing, as
 * cg_reduce3 adds in the same order). */
static void cg__walk(cg__stage_t *st, cg__walk_t what, size_t off, size_t len,
                     char *mem, const char *piece)
{
    size_t k = cg__find(st, off), end = off + len, at = off;

    for (; off < end; k++) {
        const cg_hvd_extent_t *x = &st->x[k];
        size_t skip = off - x->foff, n = x->len - skip;
        n = n < end - off ? n : end - off;
        if (what == CG__FILL)
            memcpy(mem + (off - at), x->in + skip, n);
        else if (what == CG__DRAIN)
            memcpy(x->out + skip, mem + (off - at), n);
        else
            cg_reduce3(mem + (off - at), x->in + skip, piece + (off - at),
                       n / cg_dtype_size(st->dt), st->dt, st->op);
        off += n;
        st->hint = k;
    }
}

static void cg__fill(void *arg, size_t off, size_t len, void *dst)
{
    cg__walk(arg, CG__FILL, off, len, dst, NULL);
}

static void cg__drain(void *arg, size_t off, size_t len, const void *src)
{
    cg__walk(arg, CG__DRAIN, off, len, (char *)src, NULL);
}

static void cg__reduce_in(void *arg, size_t off, size_t len,
                          const void *piece, void *dst)
{
    cg__walk(arg, CG__REDUCE, off, len, dst, piece);
}

cg_status_t cg_hvd_fused_staged(cg_hvd_core_t *core, cg_backend_t *be,
                                size_t i, int group, size_t members,
                                char *fbuf, size_t bytes, bool *ran_p)
{
    const cg_hvd_entry_t *head = core->ready[i];
    size_t dsize = cg_dtype_size(head->w.dtype);
    size_t parts = core->size > 2 ? (size_t)core->size : 1;
    cg__stage_t st = {core->xv, 0, 0, head->w.dtype, head->w.op};
    cg_coll_stage_t stage = {cg__fill, cg__drain, &st, NULL, cg__reduce_in};

    *ran_p = false;
    if (members > SIZE_MAX / parts || !cg__reserve(core, members * parts))
        return CG_OK; /* packed instead: needs no extents */
    st.x = core->xv;
    st.n = cg__layout(core, i, group, dsize);
    stage.segs = core->size > 2 ? core->segs : NULL;
    *ran_p = true;
    cg_hvd_tl_fused(core, i, group, CG_HVD_TL_STAGED, cg_hvd_tl_now(core),
                    be->ops->allreduce_activity);
    return be->ops->allreduce_staged(be, fbuf, bytes / dsize, head->w.dtype,
                                     head->w.op, head->w.prescale,
                                     head->w.postscale, &stage);
}

/* A tensor alone: its output is the staging buffer. */
typedef struct cg__single {
    const char *in;
    char *out;
} cg__single_t;

static void cg__single_fill(void *arg, size_t off, size_t len, void *dst)
{
    cg__single_t *s = arg;
    if (s->in + off != dst)
        memcpy(dst, s->in + off, len);
}

static void cg__single_drain(void *arg, size_t off, size_t len,
                             const void *src)
{
    cg__single_t *s = arg;
    if (s->out + off != src) /* in place already when staged in output */
        memcpy(s->out + off, src, len);
}

cg_status_t cg_hvd_single_staged(cg_hvd_core_t *core, cg_backend_t *be,
                                 const cg_hvd_entry_t *e)
{
    const struct cg_hvd_req *req = e->local;
    cg__single_t s = {req->input, req->output};
    cg_coll_stage_t stage = {cg__single_fill, cg__single_drain, &s, NULL,
                             NULL};
    size_t off;

    if (!cg__reserve(core, 0))
        return cg_error_set(CG_ERR_NO_MEMORY, "allreduce of tensor '%s': no "
                            "memory for %d segment counts", e->w.name,
                            core->size);
    for (int r = 0; r < core->size; r++)
        cg_ring_seg(NULL, req->count, core->size, r, &off, &core->segs[r]);
    stage.segs = core->segs;
    return be->ops->allreduce_staged(be, req->output, req->count, e->w.dtype,
                                     e->w.op, e->w.prescale, e->w.postscale,
                                     &stage);
}
