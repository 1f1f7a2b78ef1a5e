/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The Horovod shim core's timeline (CG_TIMELINE / HOROVOD_TIMELINE, on
 * rank 0 only, as Horovod): made at core create, fed by one-line hooks in
 * negotiation, execution and the cycle. Each hook is an inline test of
 * core->tl, NULL unless this rank writes a timeline, so a core without
 * one pays one branch. Layer: core/engine; calls core/timeline and the governor.
 */
#ifndef CG_CORE_HVD_TIMELINE_H
#define CG_CORE_HVD_TIMELINE_H

#include <stddef.h>
#include <stdint.h>

#include "core/engine/hvd_core.h"
#include "core/observe/timeline.h"

/* Steps of a fused allreduce, each hooked once per group. */
typedef enum {
    CG_HVD_TL_PACKED,  /* after the copies into the fusion buffer */
    CG_HVD_TL_REDUCED, /* after the collective on the buffer */
    CG_HVD_TL_DONE,    /* after the copies out */
    CG_HVD_TL_STAGED   /* instead of PACKED and REDUCED: the copies run
                          inside the collective, piece by piece */
} cg_hvd_tl_phase_t;

/* Core create, before the thread starts: on rank 0 with CG_TIMELINE set,
 * the timeline (started now unless DYNAMIC) and the route of the
 * governor's events to it. Never fails the core: a file that cannot be
 * created, or no memory, is logged and the core runs without. */
void cg_hvd_timeline_init(cg_hvd_core_t *core);
/* Core destroy, after the thread ended (NULL-safe): the file is closed. */
void cg_hvd_timeline_fini(cg_hvd_core_t *core);

/* The hooks' out-of-line halves (call the inline ones below). */
void cg_hvd_tl_announce_write(cg_hvd_core_t *core, const cg_hvd_entry_t *e,
                              int rank);
void cg_hvd_tl_cached_write(cg_hvd_core_t *core, const cg_hvd_entry_t *e);
void cg_hvd_tl_fused_write(cg_hvd_core_t *core, size_t i, int group,
                           cg_hvd_tl_phase_t phase, uint64_t t0,
                           const char *activity);
void cg_hvd_tl_single_write(cg_hvd_core_t *core, const cg_hvd_entry_t *e,
                            uint64_t t0, const char *activity);
void cg_hvd_tl_cycle_start_write(cg_hvd_core_t *core);
void cg_hvd_tl_cycle_end_write(cg_hvd_core_t *core);

/* A start time for the hooks below (0 without a timeline). */
static inline uint64_t cg_hvd_tl_now(const cg_hvd_core_t *core)
{
    return core->tl != NULL ? cg_timeline_now_ns() : 0;
}

/* Negotiation: rank `rank` announced e, before e->count counts it. */
static inline void cg_hvd_tl_announce(cg_hvd_core_t *core,
                                      const cg_hvd_entry_t *e, int rank)
{
    if (core->tl != NULL)
        cg_hvd_tl_announce_write(core, e, rank);
}

/* Negotiation by the response cache: e was ready on every rank at once
 * (a zero-length negotiation with every rank's tick). */
static inline void cg_hvd_tl_cached(cg_hvd_core_t *core,
                                    const cg_hvd_entry_t *e)
{
    if (core->tl != NULL)
        cg_hvd_tl_cached_write(core, e);
}

/* Fused allreduce (or allgather) of the ready entries from i with
 * e->group == group: PACKED opens the op (named by the type, at t0,
 * taken before packing), times the copy in and opens `activity` (the
 * backend's, "COLLGUARD_ALLREDUCE"; "COLLGUARD_ALLGATHER"); REDUCED
 * closes it and opens the copy out; DONE closes the op. STAGED opens the
 * op and `activity` at t0 (no separate copies), DONE closes both. */
static inline void cg_hvd_tl_fused(cg_hvd_core_t *core, size_t i, int group,
                                   cg_hvd_tl_phase_t phase, uint64_t t0,
                                   const char *activity)
{
    if (core->tl != NULL)
        cg_hvd_tl_fused_write(core, i, group, phase, t0, activity);
}

/* One tensor's op with one activity, from t0 to now. */
static inline void cg_hvd_tl_single(cg_hvd_core_t *core,
                                    const cg_hvd_entry_t *e, uint64_t t0,
                                    const char *activity)
{
    if (core->tl != NULL)
        cg_hvd_tl_single_write(core, e, t0, activity);
}

/* Top of a cycle: CYCLE_START when marking cycles. */
static inline void cg_hvd_tl_cycle_start(cg_hvd_core_t *core)
{
    if (core->tl != NULL)
        cg_hvd_tl_cycle_start_write(core);
}

/* End of a cycle: counters when due, then one write of the cycle's
 * events. */
static inline void cg_hvd_tl_cycle_end(cg_hvd_core_t *core)
{
    if (core->tl != NULL)
        cg_hvd_tl_cycle_end_write(core);
}

#endif
