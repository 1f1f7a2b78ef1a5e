/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The governor's object, shared by governor.c (sampling, sizing, snapshot)
 * and governor_alloc.c (accounted allocation, shrink-and-retry). Private to
 * those two files. Layer: core/governor.
 */
#ifndef CG_CORE_GOVERNOR_IMPL_H
#define CG_CORE_GOVERNOR_IMPL_H

#include <pthread.h>
#include <stdbool.h>

#include "core/governor/governor.h"
#include "core/governor/oom_watch.h"

/* Events gathered under the lock and delivered after it is released. */
#define CG_GOV_EVENTS_MAX 4
typedef struct cg__gov_events {
    cg_gov_event_t ev[CG_GOV_EVENTS_MAX];
    int count;
} cg__gov_events_t;

struct cg_governor {
    /* Set at create, read-only afterwards. */
    cg_config_t cfg;
    cg_mem_probe_t probe;
    uint64_t (*now_ns)(void *arg);
    void *clock_arg;
    const cg_log_t *log;
    cg_gov_event_cb event_cb;
    void *event_arg;
    cg_memacct_t acct;           /* atomics: no lock needed */

    pthread_mutex_t lock;        /* guards every field below */
    cg_pressure_fsm_t fsm;
    cg_oom_watch_t oom;
    cg_oom_sample_t *oom_ring;   /* CONTROL allocation */
    unsigned oom_cap;
    uint64_t last_sample_ns;
    uint64_t free_bytes, total_bytes, reserve, budget;
    uint64_t fusion_target, chunk_target; /* budget-derived caps */
    uint64_t fusion, chunk;      /* current, after degradation */
    uint64_t nccl_buffsize;
    double oom_eta_s;
    uint64_t early_warnings;
    uint64_t last_warning_ns; /* clock of the last early warning */
    uint64_t degrades;        /* samples or failures that shrank a size */
};

/* Halves the current chunk and fusion sizes once, not below their floors
 * (after an allocation failure; samples regrow them one doubling each);
 * appends a CHUNK event if the chunk moved. Caller holds gov->lock. */
void cg__governor_degrade(cg_governor_t *gov, const char *why,
                          cg__gov_events_t *events);

void cg__governor_event(const cg_governor_t *gov, cg__gov_events_t *events,
                        const cg_gov_event_t *ev);
/* Delivers gathered events; caller must not hold gov->lock. */
void cg__governor_emit(const cg_governor_t *gov,
                       const cg__gov_events_t *events);

#endif
