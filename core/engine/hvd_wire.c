/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Checks of what negotiation reads from other ranks: a full round's header
 * (per rank: records, stop, fusion offer, cache capacity, staging chunk
 * offer) and each record
 * (cg_hvd_wire_t), before the table uses them, so a rank of another build
 * or corrupted bytes fail the round with a message instead of reading past
 * a name or a shape. Pure: reads only its arguments.
 * Types, group fields (hvd_group.c) and join records (hvd_join.c) too.
 * Layer: core/engine; calls core/base and core/reduce (dtype sizes).
 */
#include <string.h>

#include "core/base/error.h"
#include "core/engine/hvd_core.h"

cg_status_t cg_hvd_nhdr_check(const int64_t *hdr, int size)
{
    for (int r = 0; r < size; r++) {
        const int64_t *h = hdr + CG_HVD_NHDR * r;

        if (h[0] < 0 || h[0] > CG_HVD_RECORDS_MAX)
            return cg_error_set(CG_ERR_MISMATCH, "negotiation: rank %d "
                                "announced %lld records (0 to %d): ranks "
                                "of different builds?", r, (long long)h[0],
                                CG_HVD_RECORDS_MAX);
        if (h[1] < 0 || h[1] > 2 || h[2] < 0 || h[3] < 0 ||
            h[3] > INT32_MAX || h[4] < 0)
            return cg_error_set(CG_ERR_MISMATCH, "negotiation: rank %d sent "
                                "stop %lld, fusion offer %lld, cache capacity "
                                "%lld, staging chunk offer %lld (expected "
                                "0-2, >= 0, 0 to %d, >= 0): ranks of "
                                "different builds?", r, (long long)h[1],
                                (long long)h[2], (long long)h[3],
                                (long long)h[4], INT32_MAX);
    }
    return CG_OK;
}

/* Operation types every rank knows: a new type extends this range (a
 * join, hvd_join.c, is a record of its own type). */
static bool cg__type_known(int32_t type)
{
    return (type >= CG_HVD_ALLREDUCE && type <= CG_HVD_ALLTOALL) ||
           type == CG_HVD_WIRE_JOIN;
}

/* The group fields (hvd_group.c): none for a lone tensor; else a member's
 * place in a group of 1 to CG_HVD_GROUP_MAX of the grouped kinds. */
static cg_status_t cg__group_check(const cg_hvd_wire_t *w, int from)
{
    bool groupable = w->type == CG_HVD_ALLREDUCE ||
                     w->type == CG_HVD_ALLGATHER ||
                     w->type == CG_HVD_REDUCESCATTER;

    if (w->group_n == 0 && w->group_at == 0 && w->group_key == 0)
        return CG_OK;
    if (!groupable || w->group_n < 1 || w->group_n > CG_HVD_GROUP_MAX ||
        w->group_at < 0 || w->group_at >= w->group_n)
        return cg_error_set(CG_ERR_MISMATCH, "negotiation: rank %d sent "
                            "tensor '%s' (type %d) as member %d of a group "
                            "of %d: out of range (ranks of different "
                            "builds?)", from, w->name, w->type, w->group_at,
                            w->group_n);
    return CG_OK;
}

/* A join carries no tensor: Horovod's name, no elements, no group. */
static cg_status_t cg__join_check(const cg_hvd_wire_t *w, int from)
{
    if (strcmp(w->name, CG_HVD_JOIN_NAME) != 0 || w->ndim != 1 ||
        w->shape[0] != 0 || w->group_n != 0)
        return cg_error_set(CG_ERR_MISMATCH, "negotiation: rank %d sent a "
                            "join record named '%s' with %d dimensions%s "
                            "(expected '%s', one empty dimension, no group): "
                            "ranks of different builds?", from, w->name,
                            w->ndim, w->group_n != 0 ? " in a group" : "",
                            CG_HVD_JOIN_NAME);
    return CG_OK;
}

cg_status_t cg_hvd_wire_check(const cg_hvd_wire_t *w, int size, int from)
{
    const char *end = memchr(w->name, '\0', sizeof(w->name));
    bool dim0 = w->type == CG_HVD_ALLGATHER ||
                w->type == CG_HVD_REDUCESCATTER ||
                w->type == CG_HVD_ALLTOALL;

    if (end == NULL || end == w->name)
        return cg_error_set(CG_ERR_MISMATCH, "negotiation: rank %d sent a "
                            "record whose name is %s", from,
                            end == NULL ? "not terminated" : "empty");
    if (!cg__type_known(w->type) || cg_dtype_size((cg_dtype_t)w->dtype) == 0
        || w->op < 0 || w->op >= CG_OP_COUNT || w->root < 0 ||
        w->root >= size || (w->device != -1 && w->device != 0))
        return cg_error_set(CG_ERR_MISMATCH, "negotiation: rank %d sent "
                            "tensor '%s' with type %d, dtype %d, op %d, root "
                            "%d, device %d: out of range (ranks of different "
                            "builds?)", from, w->name, w->type, w->dtype,
                            w->op, w->root, w->device);
    if (w->ndim < (dim0 ? 1 : 0) || w->ndim > CG_HVD_NDIM_MAX)
        return cg_error_set(CG_ERR_MISMATCH, "negotiation: rank %d sent "
                            "tensor '%s' with %d dimensions (%d to %d)", from,
                            w->name, w->ndim, dim0 ? 1 : 0, CG_HVD_NDIM_MAX);
    for (int d = 0; d < w->ndim; d++) {
        if (w->shape[d] < 0)
            return cg_error_set(CG_ERR_MISMATCH, "negotiation: rank %d sent "
                                "tensor '%s' with dimension %d of %lld", from,
                                w->name, d, (long long)w->shape[d]);
    }
    if (w->type == CG_HVD_WIRE_JOIN)
        return cg__join_check(w, from);
    return cg__group_check(w, from);
}
