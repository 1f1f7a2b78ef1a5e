/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The pressure state machine behind cg_governor's OK/WARN/CRITICAL, in free
 * bytes: entry is immediate, exit needs margin (hysteresis) held for a dwell
 * time, per threshold, so CRITICAL may step to WARN and WARN to OK
 * independently.
 * Pure: no clock, no allocation. Layer: core/governor; calls nothing.
 */
#include "core/governor/pressure.h"

#include "core/base/enum.h"

const char *cg_pressure_name(cg_pressure_t level)
{
    switch (level) {
        CG_PRESSURE_MAP(CG_ENUM_CASE)
    }
    return "unknown";
}

void cg_pressure_init(cg_pressure_fsm_t *fsm, uint64_t warn,
                      uint64_t critical, uint64_t hysteresis,
                      uint64_t dwell_ns)
{
    cg_pressure_set_thresholds(fsm, warn, critical, hysteresis);
    fsm->dwell_ns = dwell_ns;
    fsm->level = CG_PRESSURE_OK;
    fsm->warn_clear = false;
    fsm->crit_clear = false;
    fsm->warn_clear_since = 0;
    fsm->crit_clear_since = 0;
}

void cg_pressure_set_thresholds(cg_pressure_fsm_t *fsm, uint64_t warn,
                                uint64_t critical, uint64_t hysteresis)
{
    fsm->warn = warn;
    fsm->critical = critical;
    fsm->hysteresis = hysteresis;
}

/* Tracks since when free has stayed at or above threshold + hysteresis;
 * returns true once that has held for the dwell time. */
static bool cg__pressure_clear(bool *clear, uint64_t *since, uint64_t free_b,
                               uint64_t threshold, uint64_t hysteresis,
                               uint64_t dwell_ns, uint64_t now_ns)
{
    /* free - hysteresis < threshold, without overflow */
    if (free_b < hysteresis || free_b - hysteresis < threshold) {
        *clear = false;
        return false;
    }
    if (!*clear) {
        *clear = true;
        *since = now_ns;
    }
    return now_ns - *since >= dwell_ns;
}

cg_pressure_t cg_pressure_update(cg_pressure_fsm_t *fsm, uint64_t free_bytes,
                                 uint64_t now_ns)
{
    bool crit_ok = cg__pressure_clear(&fsm->crit_clear,
                                      &fsm->crit_clear_since, free_bytes,
                                      fsm->critical, fsm->hysteresis,
                                      fsm->dwell_ns, now_ns);
    bool warn_ok = cg__pressure_clear(&fsm->warn_clear,
                                      &fsm->warn_clear_since, free_bytes,
                                      fsm->warn, fsm->hysteresis,
                                      fsm->dwell_ns, now_ns);
    cg_pressure_t level;

    if (free_bytes < fsm->critical)
        level = CG_PRESSURE_CRITICAL;
    else if (fsm->level == CG_PRESSURE_CRITICAL && !crit_ok)
        level = CG_PRESSURE_CRITICAL;
    else if (free_bytes < fsm->warn)
        level = CG_PRESSURE_WARN;
    else if (fsm->level != CG_PRESSURE_OK && !warn_ok)
        level = CG_PRESSURE_WARN;
    else
        level = CG_PRESSURE_OK;
    fsm->level = level;
    return level;
}
