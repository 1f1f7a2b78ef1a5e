/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The metrics file (CG_METRICS_FILE): the text of metrics_format.h (the
 * governor's decisions, memory accounting and the Horovod shim's counters
 * in Prometheus' text exposition format), as node_exporter's textfile
 * collector reads it, rewritten atomically (a temporary file, then rename)
 * every CG_METRICS_PERIOD. Layer: core/observe; calls the governor, the
 * renderer and core/base, nothing in transport/.
 */
#ifndef CG_CORE_METRICS_H
#define CG_CORE_METRICS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "collguard/governor.h"
#include "collguard/hvd.h"
#include "collguard/status.h"
#include "core/base/log.h"
#include "core/governor/governor.h"
#include "core/observe/metrics_format.h"

typedef struct cg_metrics cg_metrics_t;

typedef struct cg_metrics_params {
    const char *path_template; /* CG_METRICS_FILE: "%r" = rank, "%%" = % */
    int rank;
    uint64_t period_ns;        /* CG_METRICS_PERIOD */
    cg_governor_t *gov;        /* snapshots; allocates the metrics' memory */
    const char *probe_name;    /* the memory watched ("host", "cuda") */
    const cg_log_t *log;       /* may be NULL */
} cg_metrics_params_t;

/* Expands the path (CG_ERR_CONFIG naming CG_METRICS_FILE for a bad "%"
 * sequence or a path too long) and allocates the text buffer; writes
 * nothing yet. */
cg_status_t cg_metrics_create(const cg_metrics_params_t *params,
                              cg_metrics_t **metrics_p);
void cg_metrics_destroy(cg_metrics_t *metrics);

/* The file written (the template with the rank in). */
const char *cg_metrics_path(const cg_metrics_t *metrics);

/* True when CG_METRICS_PERIOD has passed since the last write (or nothing
 * was written yet). now_ns: CLOCK_MONOTONIC. */
bool cg_metrics_due(const cg_metrics_t *metrics, uint64_t now_ns);

/* Takes a governor snapshot (no new probe sample) and rewrites the file
 * atomically with it and stats (NULL: no shim counters). A failed write
 * returns CG_ERR_IO with the path and errno text and is logged as a
 * warning once until a write succeeds again. */
cg_status_t cg_metrics_write(cg_metrics_t *metrics,
                             const cg_hvd_stats_t *stats, uint64_t now_ns);

#endif
