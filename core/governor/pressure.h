/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Pressure levels with hysteresis: OK / WARN / CRITICAL from the share of
 * memory that is free. A level is entered at once when free/total drops
 * below its threshold, and left only after free/total has stayed at or
 * above threshold + hysteresis for the dwell time, so noise around a
 * threshold cannot make the level flap. Pure state machine (time is passed
 * in). Layer: core/governor; calls nothing.
 */
#ifndef CG_CORE_PRESSURE_H
#define CG_CORE_PRESSURE_H

#include <stdbool.h>
#include <stdint.h>

#include "collguard/governor.h"

typedef struct cg_pressure_fsm {
    double warn;          /* free/total below this: WARN */
    double critical;      /* free/total below this: CRITICAL */
    double hysteresis;    /* recovery margin above a threshold */
    uint64_t dwell_ns;    /* how long the margin must hold */
    cg_pressure_t level;
    /* Since when free/total has stayed >= threshold + hysteresis, per
     * threshold; valid only while the matching flag is set. */
    bool warn_clear, crit_clear;
    uint64_t warn_clear_since, crit_clear_since;
} cg_pressure_fsm_t;

void cg_pressure_init(cg_pressure_fsm_t *fsm, double warn, double critical,
                      double hysteresis, uint64_t dwell_ns);

/* Feeds one sample (free_frac = free/total in [0, 1]) taken at now_ns
 * (monotonic, non-decreasing) and returns the level after it. */
cg_pressure_t cg_pressure_update(cg_pressure_fsm_t *fsm, double free_frac,
                                 uint64_t now_ns);

const char *cg_pressure_name(cg_pressure_t level);

#endif
