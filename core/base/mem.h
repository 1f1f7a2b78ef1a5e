/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The allocation interface every layer allocates through. The governor
 * (core/governor) provides the implementation that accounts each byte by
 * category and injects faults; layers below core (transport/) receive a
 * cg_mem_ops_t in their create parameters and never call malloc for buffers.
 * Part of core/base; calls nothing.
 */
#ifndef CG_BASE_MEM_H
#define CG_BASE_MEM_H

#include <stddef.h>

#include "collguard/governor.h"

typedef struct cg_mem_ops {
    /* Returns NULL on failure (with cg_last_error() set). */
    void *(*alloc)(void *arg, cg_mem_cat_t cat, size_t size);
    /* size must be the size passed to alloc. NULL ptr is a no-op. */
    void (*free)(void *arg, cg_mem_cat_t cat, void *ptr, size_t size);
    void *arg;
} cg_mem_ops_t;

static inline void *cg_mem_alloc(const cg_mem_ops_t *ops, cg_mem_cat_t cat,
                                 size_t size)
{
    return ops->alloc(ops->arg, cat, size);
}

static inline void cg_mem_free(const cg_mem_ops_t *ops, cg_mem_cat_t cat,
                               void *ptr, size_t size)
{
    if (ptr != NULL)
        ops->free(ops->arg, cat, ptr, size);
}

#endif
