/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The library context: the one struct that owns a collguard instance's
 * state (configuration, log, probe, governor, bootstrap; later transport,
 * queue). Nothing mutable lives outside it. Layer: core.
 */
#ifndef CG_CORE_CONTEXT_H
#define CG_CORE_CONTEXT_H

#include <stdatomic.h>

#include "collguard/collguard.h"
#include "core/base/log.h"
#include "core/config/config.h"
#include "core/governor/governor.h"
#include "core/governor/probe.h"
#include "transport/bootstrap.h"

/* Who hears the governor's events (the hvd core's timeline). */
typedef struct cg_ctx_gov_listener {
    cg_gov_event_cb cb;
    void *arg;
} cg_ctx_gov_listener_t;

struct cg_ctx {
    cg_config_t cfg;
    cg_log_t log;
    cg_host_probe_t host_probe;
    cg_cuda_probe_t *cuda_probe; /* NULL unless the probe is CUDA's */
    cg_mem_probe_t probe;
    /* CG_CTX_PARAM_PROBE: probe wraps base_probe and calls user_probe. */
    cg_mem_probe_t base_probe;
    cg_mem_probe_fn user_probe;
    void *user_probe_arg;
    cg_governor_t *gov;
    cg_bootstrap_t *bs; /* NULL unless CG_CTX_PARAM_BOOTSTRAP asked for it */
    /* The governor's events go to this listener when set. */
    _Atomic(const cg_ctx_gov_listener_t *) gov_listener;
};

/* Routes the governor's events to l (NULL: nowhere). l must stay valid
 * until replaced, and be replaced only while no other thread can cause
 * governor events (before the threads that allocate start, after they
 * end). */
void cg_ctx_set_gov_listener(cg_ctx_h ctx, const cg_ctx_gov_listener_t *l);

/* Chooses the probe CG_MEM_PROBE asks for: auto takes the CUDA probe when
 * a GPU is usable (*cp_p then owns its state), else host memory. */
cg_status_t cg_ctx_pick_probe(const cg_config_t *cfg, cg_host_probe_t *hp,
                              cg_cuda_probe_t **cp_p, cg_mem_probe_t *probe_p,
                              const cg_log_t *log);

#endif
