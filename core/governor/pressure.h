/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Pressure levels with hysteresis: OK / WARN / CRITICAL from the bytes that
 * are free. A level is entered at once when free drops below its threshold,
 * and left only after free has stayed at or above threshold + hysteresis
 * for the dwell time, so noise around a threshold cannot make the level
 * flap. Thresholds are bytes (the governor resolves shares of total before
 * each sample). Pure state machine (time is passed in). Layer:
 * core/governor; calls nothing.
 */
#ifndef CG_CORE_PRESSURE_H
#define CG_CORE_PRESSURE_H

#include <stdbool.h>
#include <stdint.h>

#include "collguard/governor.h"

typedef struct cg_pressure_fsm {
    uint64_t warn;        /* free bytes below this: WARN */
    uint64_t critical;    /* free bytes below this: CRITICAL */
    uint64_t hysteresis;  /* recovery margin above a threshold, bytes */
    uint64_t dwell_ns;    /* how long the margin must hold */
    cg_pressure_t level;
    /* Since when free has stayed >= threshold + hysteresis, per threshold;
     * valid only while the matching flag is set. */
    bool warn_clear, crit_clear;
    uint64_t warn_clear_since, crit_clear_since;
} cg_pressure_fsm_t;

void cg_pressure_init(cg_pressure_fsm_t *fsm, uint64_t warn,
                      uint64_t critical, uint64_t hysteresis,
                      uint64_t dwell_ns);

/* Replaces the thresholds (bytes), keeping the level and the dwell timers;
 * the governor calls it before each sample when shares of total are
 * resolved against the total just read. */
void cg_pressure_set_thresholds(cg_pressure_fsm_t *fsm, uint64_t warn,
                                uint64_t critical, uint64_t hysteresis);

/* Feeds one sample (free_bytes) taken at now_ns (monotonic,
 * non-decreasing) and returns the level after it. */
cg_pressure_t cg_pressure_update(cg_pressure_fsm_t *fsm, uint64_t free_bytes,
                                 uint64_t now_ns);

const char *cg_pressure_name(cg_pressure_t level);

#endif
