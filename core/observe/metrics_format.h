/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The one renderer of collguard's metrics: the governor's snapshot and the
 * Horovod shim's counters as Prometheus' text exposition format (0.0.4),
 * and a governed text buffer it renders into. Its two sinks are the file
 * (metrics.h, CG_METRICS_FILE) and the HTTP endpoint (metrics_http.h,
 * CG_METRICS_PORT). Layer: core/observe; calls the governor and core/base.
 */
#ifndef CG_CORE_METRICS_FORMAT_H
#define CG_CORE_METRICS_FORMAT_H

#include <stddef.h>

#include "collguard/governor.h"
#include "collguard/hvd.h"
#include "collguard/status.h"
#include "core/governor/governor.h"

/* The exposition text, snprintf-style: writes at most len bytes (NUL
 * included) and returns the length the whole text needs. Pure. Every
 * series carries rank="N"; the memory series carry device="N" too when
 * the governor watches a GPU's memory. stats NULL: no shim series. */
size_t cg_metrics_format(char *buf, size_t len, int rank,
                         const char *probe_name,
                         const cg_governor_snapshot_t *snap,
                         const cg_hvd_stats_t *stats);

/* A text buffer in CONTROL memory of gov, grown as the text needs. */
typedef struct cg_metrics_text {
    cg_governor_t *gov;
    char *buf;
    size_t cap;
} cg_metrics_text_t;

cg_status_t cg_metrics_text_init(cg_metrics_text_t *t, cg_governor_t *gov);
void cg_metrics_text_cleanup(cg_metrics_text_t *t);
/* Takes a governor snapshot (no new probe sample) and renders it with
 * stats into t->buf; *len_p: the text's length (without the NUL). */
cg_status_t cg_metrics_text_render(cg_metrics_text_t *t, int rank,
                                   const char *probe_name,
                                   const cg_hvd_stats_t *stats,
                                   size_t *len_p);

#endif
