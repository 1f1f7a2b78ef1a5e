/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The timeline: a Chrome trace (JSON array of events, Horovod's layout,
 * opens in Perfetto) where each tensor is a "process" with its spans
 * (negotiation, the operation and its activities), plus counters and
 * instants of the memory governor on process 0. Events are appended to a
 * memory buffer; cg_timeline_flush writes them with one pwrite that keeps
 * the file a valid JSON array. Thread-safe: events and flushes may come
 * from any thread, start/stop from user threads. Layer: core/observe; calls
 * core/base only.
 */
#ifndef CG_CORE_TIMELINE_H
#define CG_CORE_TIMELINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "collguard/governor.h"
#include "collguard/status.h"
#include "core/base/log.h"
#include "core/base/mem.h"

typedef struct cg_timeline cg_timeline_t;

typedef struct cg_timeline_params {
    cg_mem_ops_t mem;           /* buffers and the tensor table (CONTROL) */
    const cg_log_t *log;        /* may be NULL; must outlive the timeline */
    uint64_t counter_period_ns; /* cg_timeline_counters_due; 0: always */
} cg_timeline_params_t;

/* What cg_timeline_counters records. */
typedef struct cg_timeline_counters {
    cg_mem_kind_t kind;     /* whose free memory: host or device */
    uint64_t free_bytes;
    uint64_t budget_bytes;
    uint64_t fusion_bytes;  /* fusion buffer in use */
    uint64_t chunk_bytes;
    cg_pressure_t pressure;
} cg_timeline_counters_t;

/* Longest escaped form of n bytes, NUL included. */
#define CG_JSON_ESCAPED_MAX(n) (6 * (n) + 1)

/* Writes src as the inside of a JSON string into dst (NUL-terminated):
 * quote, backslash and control characters escaped, bytes that are not
 * valid UTF-8 replaced by \ufffd. Stops before an escape that would not
 * fit. Returns the length written. */
size_t cg_json_escape(char *dst, size_t dst_len, const char *src);

/* CLOCK_MONOTONIC in ns: the time base of the t_ns arguments below. */
uint64_t cg_timeline_now_ns(void);

/* Creates a stopped timeline (nothing written). */
cg_status_t cg_timeline_create(const cg_timeline_params_t *params,
                               cg_timeline_t **tl_p);
/* Stops (flushing what is buffered) and frees. */
void cg_timeline_destroy(cg_timeline_t *tl);

/* Starts writing to path (truncated). Already writing: the same path
 * only updates mark_cycles; another path closes the current file first.
 * CG_ERR_IO (with the path and errno) when it cannot be created. */
cg_status_t cg_timeline_start(cg_timeline_t *tl, const char *path,
                              bool mark_cycles);
/* Writes what is buffered and closes the file (a valid JSON array). */
void cg_timeline_stop(cg_timeline_t *tl);
bool cg_timeline_running(const cg_timeline_t *tl);

/* Writes the buffered events (one pwrite); a no-op when nothing is
 * buffered. A write error is logged once and stops the timeline. */
void cg_timeline_flush(cg_timeline_t *tl);

/* Tensor events: no-ops unless running. Each keeps the tensor's spans
 * balanced: an event that does not fit the tensor's state (an end without
 * its begin, after a restart) is dropped. op: "ALLREDUCE", "BROADCAST",
 * "ALLGATHER". t_ns: cg_timeline_now_ns() at the event (earlier than the
 * start: the start). */
void cg_timeline_negotiate_start(cg_timeline_t *tl, const char *name,
                                 const char *op, uint64_t t_ns);
void cg_timeline_negotiate_rank(cg_timeline_t *tl, const char *name,
                                int rank, uint64_t t_ns);
void cg_timeline_negotiate_end(cg_timeline_t *tl, const char *name,
                               uint64_t t_ns);
void cg_timeline_op_start(cg_timeline_t *tl, const char *name, const char *op,
                          uint64_t t_ns);
/* Ends an open activity first. */
void cg_timeline_activity_start(cg_timeline_t *tl, const char *name,
                                const char *activity, uint64_t t_ns);
void cg_timeline_activity_end(cg_timeline_t *tl, const char *name,
                              uint64_t t_ns);
/* Ends an open activity, then the operation; dtype and shape (may be
 * NULL) go to the end event's args, as Horovod. */
void cg_timeline_op_end(cg_timeline_t *tl, const char *name,
                        const char *dtype, const char *shape, uint64_t t_ns);

/* A "CYCLE_START" instant when started with mark_cycles. */
void cg_timeline_cycle_start(cg_timeline_t *tl, uint64_t t_ns);
/* True when running and the counter period has passed since the last
 * cg_timeline_counters. */
bool cg_timeline_counters_due(cg_timeline_t *tl, uint64_t t_ns);
void cg_timeline_counters(cg_timeline_t *tl, const cg_timeline_counters_t *c,
                          uint64_t t_ns);
/* A global instant on process 0 (name and args_json are written as
 * given: args_json is the inside of an object, or NULL). */
void cg_timeline_instant(cg_timeline_t *tl, const char *name,
                         const char *args_json, uint64_t t_ns);

#endif
