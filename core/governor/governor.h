/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The memory governor: pure policy over an injected probe, allocator and
 * clock. It turns free memory into a budget and buffer sizes, tracks
 * pressure with hysteresis, projects time to OOM from the slope of used
 * memory, accounts every byte the library allocates by category, and
 * turns allocation failures (real or injected by CG_FAULT_ALLOC) into
 * "shrink and retry" down to a floor. Layer: core/governor; calls core/base only.
 *
 * Threads: sampling (cg_governor_sample/_tick) belongs to one thread (the
 * background thread); alloc/free and snapshot are safe from any thread.
 */
#ifndef CG_CORE_GOVERNOR_H
#define CG_CORE_GOVERNOR_H

#include <stddef.h>
#include <stdint.h>

#include "collguard/governor.h"
#include "core/base/log.h"
#include "core/base/mem.h"
#include "core/config/config.h"
#include "core/governor/memacct.h"
#include "core/governor/pressure.h"
#include "core/governor/probe.h"

typedef struct cg_governor cg_governor_t;

typedef enum {
    CG_GOV_EVENT_PRESSURE = 0,      /* level changed: old -> new */
    CG_GOV_EVENT_EARLY_WARNING = 1, /* projected OOM inside the window */
    CG_GOV_EVENT_ALLOC_RETRY = 2,   /* an allocation failed; shrinking */
    CG_GOV_EVENT_CHUNK = 3          /* chunk size changed */
} cg_gov_event_type_t;

typedef struct cg_gov_event {
    cg_gov_event_type_t type;
    uint64_t t_ns;
    cg_pressure_t old_level, new_level; /* PRESSURE (others: current) */
    double eta_s;        /* EARLY_WARNING: projected seconds to OOM */
    uint64_t free_bytes, total_bytes;   /* from the last sample */
    /* CHUNK: chunk size before/after; ALLOC_RETRY: the size that failed and
     * the size tried next. */
    uint64_t old_size, new_size;
    cg_mem_cat_t cat;    /* ALLOC_RETRY: category of the allocation */
} cg_gov_event_t;

/* Called after the governor's lock is released, on the thread that caused
 * the event; it may call any cg_governor_* function. */

typedef void (*cg_gov_event_cb)(void *arg, const cg_gov_event_t *ev);

typedef struct cg_governor_params {
    const cg_config_t *cfg;        /* policy knobs; copied at create */
    cg_mem_probe_t probe;          /* .read is required */
    cg_mem_backend_t backend;      /* .alloc NULL: cg_mem_backend_host() */
    uint64_t (*now_ns)(void *arg); /* NULL: CLOCK_MONOTONIC */
    void *clock_arg;
    const cg_log_t *log;           /* may be NULL; must outlive gov */
    cg_gov_event_cb event_cb;      /* may be NULL */
    void *event_arg;
} cg_governor_params_t;

/* Validates the policy knobs, allocates the governor (its struct from the
 * backend, its sample ring as CONTROL) and takes a first sample, so sizes
 * are valid on return. A failing probe fails the create. */
cg_status_t cg_governor_create(const cg_governor_params_t *params,
                               cg_governor_t **gov_p);
/* Warns (does not fail) when bytes are still accounted as live. */
void cg_governor_destroy(cg_governor_t *gov);

/* Samples the probe now and updates pressure, slope, and sizes. */
cg_status_t cg_governor_sample(cg_governor_t *gov);
/* Samples only when CG_PROBE_INTERVAL has passed since the last sample. */
cg_status_t cg_governor_tick(cg_governor_t *gov);

uint64_t cg_governor_budget(const cg_governor_t *gov);
uint64_t cg_governor_fusion_size(const cg_governor_t *gov);
uint64_t cg_governor_chunk_size(const cg_governor_t *gov);
uint64_t cg_governor_nccl_buffsize(const cg_governor_t *gov);
cg_pressure_t cg_governor_pressure(const cg_governor_t *gov);
void cg_governor_snapshot(const cg_governor_t *gov,
                          cg_governor_snapshot_t *snap);
/* Peaks of the accounting set to the current bytes (governor_alloc.c). */
void cg_governor_reset_peaks(cg_governor_t *gov);

/* Accounted allocation of exactly size bytes. Buffer categories (all but
 * CONTROL) are subject to CG_FAULT_ALLOC. CG_ERR_NO_MEMORY on failure. */
cg_status_t cg_governor_alloc(cg_governor_t *gov, cg_mem_cat_t cat,
                              size_t size, void **ptr_p);
void cg_governor_free(cg_governor_t *gov, cg_mem_cat_t cat, void *ptr,
                      size_t size);

/* Buffer allocation that degrades instead of failing: tries want bytes,
 * on failure halves (rounded down to a multiple of align; align 0 means 1)
 * down to floor (floor above want: want; floor 0: align), and returns the
 * size obtained in *got_p. Each failure halves the chunk and fusion sizes
 * once (not below their floors; samples regrow them one doubling at a
 * time); each retry emits CG_GOV_EVENT_ALLOC_RETRY.
 * The floor is tried twice, so one transient failure there (or one injected
 * by CG_FAULT_ALLOC >= 2) is survived. Only when the floor fails twice:
 * CG_ERR_NO_MEMORY, and cg_last_error() says needed, free, reserve and
 * budget and which variable to change (floor_var, e.g. "CG_FUSION_MIN";
 * may be NULL). */
cg_status_t cg_governor_alloc_shrink(cg_governor_t *gov, cg_mem_cat_t cat,
                                     size_t want, size_t floor, size_t align,
                                     const char *floor_var, void **ptr_p,
                                     size_t *got_p);

/* cg_governor_alloc_shrink / _free through another raw allocator
 * (cudaMalloc for device fusion buffers, cudaMallocHost for pinned
 * staging): accounted in the same categories, subject to CG_FAULT_ALLOC;
 * backend NULL is the governor's own. Free with the same backend. */
cg_status_t cg_governor_alloc_shrink_on(cg_governor_t *gov,
                                        const cg_mem_backend_t *backend,
                                        cg_mem_cat_t cat, size_t want,
                                        size_t floor, size_t align,
                                        const char *floor_var, void **ptr_p,
                                        size_t *got_p);
void cg_governor_free_on(cg_governor_t *gov, const cg_mem_backend_t *backend,
                         cg_mem_cat_t cat, void *ptr, size_t size);

/* The cg_mem_ops_t view handed to lower layers (transport). */
cg_mem_ops_t cg_governor_mem_ops(cg_governor_t *gov);


#endif
