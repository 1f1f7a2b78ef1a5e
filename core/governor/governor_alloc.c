/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The governor's allocation paths: exact accounted allocation, the
 * cg_mem_ops_t view handed to lower layers, and shrink-and-retry that turns
 * failures (backend NULL, or injected by CG_FAULT_ALLOC) into smaller
 * buffers and smaller chunks, failing only below the floor with a message
 * a user can act on. Layer: core/governor; calls core/base and memacct only.
 */
#include "core/governor/governor_impl.h"

#include <stdio.h>

#include "core/base/error.h"
#include "core/base/parse.h"

/* What a category's buffer is called in messages. */
static const char *cg__cat_what(cg_mem_cat_t cat)
{
    static const char *const what[CG_MEM_CAT_COUNT] = {
        [CG_MEM_CAT_FUSION] = "fusion buffer",
        [CG_MEM_CAT_RING] = "ring chunk buffer",
        [CG_MEM_CAT_STAGING] = "staging buffer",
        [CG_MEM_CAT_REGISTRATION] = "registered buffer",
        [CG_MEM_CAT_CONTROL] = "control structure",
    };
    return what[cat];
}

static cg_status_t cg__alloc_args(const cg_governor_t *gov, cg_mem_cat_t cat,
                                  size_t size, void **ptr_p)
{
    if (gov == NULL || ptr_p == NULL)
        return cg_error_set(CG_ERR_INVALID_PARAM,
                            "governor alloc: %s is NULL",
                            gov == NULL ? "gov" : "ptr_p");
    if ((unsigned)cat >= CG_MEM_CAT_COUNT)
        return cg_error_set(CG_ERR_INVALID_PARAM,
                            "governor alloc: unknown category %d", (int)cat);
    if (size == 0)
        return cg_error_set(CG_ERR_INVALID_PARAM,
                            "governor alloc: %s of 0 bytes", cg__cat_what(cat));
    return CG_OK;
}

static const char *cg__fail_cause(const cg_governor_t *gov, int injected,
                                  char *buf, size_t len)
{
    if (!injected)
        return "backend returned no memory";
    snprintf(buf, len, "injected by CG_FAULT_ALLOC=%llu",
             (unsigned long long)gov->cfg.fault_alloc);
    return buf;
}

cg_status_t cg_governor_alloc(cg_governor_t *gov, cg_mem_cat_t cat,
                              size_t size, void **ptr_p)
{
    cg_status_t status = cg__alloc_args(gov, cat, size, ptr_p);
    char b[32], cause[64];
    int injected = 0;
    void *ptr;

    if (status != CG_OK)
        return status;
    ptr = cg_memacct_alloc(&gov->acct, cat, size, &injected);
    if (ptr == NULL)
        return cg_error_set(CG_ERR_NO_MEMORY, "%s: allocation of %s failed "
                            "(%s)", cg__cat_what(cat),
                            cg_format_size(size, b, sizeof(b)),
                            cg__fail_cause(gov, injected, cause,
                                           sizeof(cause)));
    *ptr_p = ptr;
    return CG_OK;
}

void cg_governor_free(cg_governor_t *gov, cg_mem_cat_t cat, void *ptr,
                      size_t size)
{
    if (gov == NULL || ptr == NULL || (unsigned)cat >= CG_MEM_CAT_COUNT)
        return;
    cg_memacct_free(&gov->acct, cat, ptr, size);
}

/* After a failed try of size bytes: degrade the sizes one step and, when
 * next is not 0, report the retry with next bytes. */
static void cg__alloc_failed(cg_governor_t *gov, cg_mem_cat_t cat,
                             size_t size, size_t next, int injected)
{
    cg__gov_events_t events = {.count = 0};
    cg_gov_event_t ev;
    char b[2][32], cause[64];

    pthread_mutex_lock(&gov->lock);
    if (next == 0) {
        cg__governor_degrade(gov, "allocation failure", &events);
        pthread_mutex_unlock(&gov->lock);
        cg__governor_emit(gov, &events);
        return;
    }
    cg_info(gov->log, "%s: allocation of %s failed (%s), retrying with %s",
            cg__cat_what(cat), cg_format_size(size, b[0], sizeof(b[0])),
            cg__fail_cause(gov, injected, cause, sizeof(cause)),
            cg_format_size(next, b[1], sizeof(b[1])));
    ev = (cg_gov_event_t){.type = CG_GOV_EVENT_ALLOC_RETRY,
                          .t_ns = gov->last_sample_ns,
                          .old_level = gov->fsm.level,
                          .new_level = gov->fsm.level,
                          .eta_s = gov->oom_eta_s,
                          .free_bytes = gov->free_bytes,
                          .total_bytes = gov->total_bytes,
                          .old_size = size,
                          .new_size = next,
                          .cat = cat};
    cg__governor_event(gov, &events, &ev);
    cg__governor_degrade(gov, "allocation failure", &events);
    pthread_mutex_unlock(&gov->lock);
    cg__governor_emit(gov, &events);
}

static cg_status_t cg__alloc_floor_error(cg_governor_t *gov, cg_mem_cat_t cat,
                                         size_t floor, const char *floor_var)
{
    char b[4][32];
    bool reserved;

    pthread_mutex_lock(&gov->lock);
    cg_format_size(gov->free_bytes, b[1], sizeof(b[1]));
    cg_format_size(gov->reserve, b[2], sizeof(b[2]));
    cg_format_size(gov->budget, b[3], sizeof(b[3]));
    reserved = gov->reserve > 0;
    pthread_mutex_unlock(&gov->lock);
    cg_format_size(floor, b[0], sizeof(b[0]));
    /* CG_MEM_RESERVE is worth naming only when it holds something back */
    return cg_error_set(CG_ERR_NO_MEMORY, "%s: needed %s (%s), free %s, "
                        "reserve %s, budget %s; lower %s%s",
                        cg__cat_what(cat), b[0],
                        floor_var != NULL ? floor_var : "floor", b[1], b[2],
                        b[3], floor_var != NULL ? floor_var : "the floor",
                        reserved ? " or CG_MEM_RESERVE" : "");
}

cg_status_t cg_governor_alloc_shrink(cg_governor_t *gov, cg_mem_cat_t cat,
                                     size_t want, size_t floor, size_t align,
                                     const char *floor_var, void **ptr_p,
                                     size_t *got_p)
{
    return cg_governor_alloc_shrink_on(gov, NULL, cat, want, floor, align,
                                       floor_var, ptr_p, got_p);
}

void cg_governor_reset_peaks(cg_governor_t *gov)
{
    if (gov != NULL)
        cg_memacct_reset_peaks(&gov->acct);
}

void cg_governor_free_on(cg_governor_t *gov, const cg_mem_backend_t *backend,
                         cg_mem_cat_t cat, void *ptr, size_t size)
{
    if (gov == NULL || ptr == NULL || (unsigned)cat >= CG_MEM_CAT_COUNT)
        return;
    cg_memacct_free_on(&gov->acct, backend, cat, ptr, size);
}

cg_status_t cg_governor_alloc_shrink_on(cg_governor_t *gov,
                                        const cg_mem_backend_t *backend,
                                        cg_mem_cat_t cat, size_t want,
                                        size_t floor, size_t align,
                                        const char *floor_var, void **ptr_p,
                                        size_t *got_p)
{
    cg_status_t status = cg__alloc_args(gov, cat, want, ptr_p);
    size_t size = want, next;
    int floor_tries = 0, injected = 0;
    void *ptr;

    if (status != CG_OK)
        return status;
    if (got_p == NULL)
        return cg_error_set(CG_ERR_INVALID_PARAM,
                            "governor alloc_shrink: got_p is NULL");
    if (align == 0)
        align = 1;
    if (floor == 0)
        floor = align;
    if (floor > want)
        floor = want;
    for (;;) {
        ptr = cg_memacct_alloc_on(&gov->acct, backend, cat, size,
                                  &injected);
        if (ptr != NULL)
            break;
        if (size == floor && ++floor_tries == 2) {
            cg__alloc_failed(gov, cat, size, 0, injected);
            return cg__alloc_floor_error(gov, cat, floor, floor_var);
        }
        next = size / 2 / align * align;
        if (next < floor)
            next = floor;
        cg__alloc_failed(gov, cat, size, next, injected);
        size = next;
    }
    *ptr_p = ptr;
    *got_p = size;
    return CG_OK;
}

static void *cg__mem_ops_alloc(void *arg, cg_mem_cat_t cat, size_t size)
{
    void *ptr = NULL;
    if (cg_governor_alloc(arg, cat, size, &ptr) != CG_OK)
        return NULL;
    return ptr;
}

static void cg__mem_ops_free(void *arg, cg_mem_cat_t cat, void *ptr,
                             size_t size)
{
    cg_governor_free(arg, cat, ptr, size);
}

cg_mem_ops_t cg_governor_mem_ops(cg_governor_t *gov)
{
    cg_mem_ops_t ops = {cg__mem_ops_alloc, cg__mem_ops_free, gov};
    return ops;
}
