/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The Horovod shim core's metrics file (CG_METRICS_FILE, core/observe/metrics.h):
 * started with the core, rewritten from the background thread every
 * CG_METRICS_PERIOD, written a last time when the core is destroyed.
 * Layer: core/engine.
 */
#ifndef CG_CORE_HVD_METRICS_H
#define CG_CORE_HVD_METRICS_H

#include <stdbool.h>

#include "core/engine/hvd_core.h"

/* Creates core->metrics when CG_METRICS_FILE is set (CG_ERR_CONFIG for a
 * bad template or a directory it cannot write to); nothing otherwise. */
cg_status_t cg_hvd_metrics_start(cg_hvd_core_t *core);
/* Background thread, once per cycle: rewrites the file when due. */
void cg_hvd_metrics_tick(cg_hvd_core_t *core);
/* Background thread: one collective of type (cg_hvd_op_type_t) took ns,
 * into the latency histogram of core->tstats. */
void cg_hvd_metrics_op(cg_hvd_core_t *core, int type, uint64_t ns);
/* After the thread ended: a last write (final_write) and the free. */
void cg_hvd_metrics_stop(cg_hvd_core_t *core, bool final_write);

#endif
