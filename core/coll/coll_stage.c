/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What every AllReduce algorithm shares about a staged operation
 * (cg_allreduce_staged): the ring's segment rule, which also lays out a
 * fused group segment by segment, and the helpers through which an
 * algorithm fills a range of the operation's memory from the caller's
 * stage (prescaled), reduces an arriving piece straight from the inputs,
 * and hands a final range back. The ring, the shared-memory AllReduce and
 * the whole-buffer algorithms call these; nothing here calls them.
 * Layer: core/coll; calls reduce (scaling).
 */
#include <stdint.h>

#include "core/coll/coll.h"
#include "core/coll/coll_impl.h"
#include "core/reduce/reduce.h"

void cg_ring_seg(const size_t *segs, size_t count, int n, int s,
                 size_t *off, size_t *cnt)
{
    size_t base = count / (size_t)n, rem = count % (size_t)n, us = (size_t)s;

    if (segs != NULL) {
        *off = 0;
        for (int i = 0; i < s; i++)
            *off += segs[i];
        *cnt = segs[s];
        return;
    }
    *off = us * base + (us < rem ? us : rem);
    *cnt = base + (us < rem ? 1 : 0);
}

void cg__coll_fill_to(const cg__coll_staging_t *sg, size_t off, size_t len,
                      void *dst)
{
    sg->stage->fill(sg->stage->arg, off, len, dst);
    if (sg->prescale != 1.0)
        cg_scale(dst, len / cg_dtype_size(sg->dt), sg->dt, sg->prescale);
}

void cg__coll_fill(const cg__coll_staging_t *sg, const void *p, size_t len)
{
    size_t off;

    if (sg == NULL || len == 0)
        return;
    off = (size_t)((const uint8_t *)p - sg->base);
    cg__coll_fill_to(sg, off, len, sg->base + off);
}

bool cg__coll_reduces_in(const cg__coll_staging_t *sg)
{
    return sg != NULL && sg->stage->reduce_in != NULL && sg->prescale == 1.0;
}

void cg__coll_reduce_in(const cg__coll_staging_t *sg, void *p, size_t len,
                        const void *piece)
{
    cg__coll_reduce_in_to(sg, (size_t)((const uint8_t *)p - sg->base), len,
                          piece, p);
}

void cg__coll_drain_from(const cg__coll_staging_t *sg, size_t off, size_t len,
                         const void *src)
{
    if (len > 0)
        sg->stage->drain(sg->stage->arg, off, len, src);
}

void cg__coll_reduce_in_to(const cg__coll_staging_t *sg, size_t off,
                           size_t len, const void *piece, void *dst)
{
    sg->stage->reduce_in(sg->stage->arg, off, len, piece, dst);
}

void cg__coll_drain(const cg__coll_staging_t *sg, const void *p, size_t len)
{
    if (sg != NULL)
        cg__coll_drain_from(sg, (size_t)((const uint8_t *)p - sg->base), len,
                            p);
}
