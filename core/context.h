/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The library context: the one struct that owns a collguard instance's
 * state (configuration, log, probe, governor, bootstrap; later transport,
 * queue). Nothing mutable lives outside it. Layer: core.
 */
#ifndef CG_CORE_CONTEXT_H
#define CG_CORE_CONTEXT_H

#include "collguard/collguard.h"
#include "core/base/log.h"
#include "core/config.h"
#include "core/governor.h"
#include "core/probe.h"
#include "transport/bootstrap.h"

struct cg_ctx {
    cg_config_t cfg;
    cg_log_t log;
    cg_host_probe_t host_probe;
    cg_mem_probe_t probe;
    cg_governor_t *gov;
    cg_bootstrap_t *bs; /* NULL unless CG_CTX_PARAM_BOOTSTRAP asked for it */
};

/* Chooses the probe CG_MEM_PROBE asks for: auto takes the current CUDA
 * device when one is usable, else host memory. */
cg_status_t cg_ctx_pick_probe(const cg_config_t *cfg, cg_host_probe_t *hp,
                              cg_mem_probe_t *probe_p, const cg_log_t *log);

#endif
