/* SPDX-License-Identifier: Apache-2.0 */
/*
 * OOM early warning: a fixed ring of (time, used bytes) samples over a
 * sliding window, the least-squares slope of used memory, and the projected
 * time until free memory runs out at that slope. The caller owns the ring's
 * memory (the governor allocates it as CONTROL). Pure: time is passed in.
 * Layer: core/governor; calls nothing.
 */
#ifndef CG_CORE_OOM_WATCH_H
#define CG_CORE_OOM_WATCH_H

#include <stdbool.h>
#include <stdint.h>

/* Most samples the ring keeps, whatever window/interval asks for. */
#define CG_OOM_RING_MAX 256
/* Fewest samples (in the window) before a slope is trusted. */
#define CG_OOM_MIN_SAMPLES 5

typedef struct cg_oom_sample {
    uint64_t t_ns;
    uint64_t used;
} cg_oom_sample_t;

typedef struct cg_oom_watch {
    cg_oom_sample_t *ring;
    unsigned cap, head, count; /* head: index of the oldest sample */
    uint64_t window_ns;
    bool active;               /* projected OOM inside the window now */
    uint64_t last_warn_ns;     /* when the last warning was raised */
} cg_oom_watch_t;

/* Ring slots needed for window_ns sampled every interval_ns, capped at
 * CG_OOM_RING_MAX and at least CG_OOM_MIN_SAMPLES. */
unsigned cg_oom_watch_capacity(uint64_t window_ns, uint64_t interval_ns);

void cg_oom_watch_init(cg_oom_watch_t *w, cg_oom_sample_t *ring, unsigned cap,
                       uint64_t window_ns);

/* Adds a sample (t_ns non-decreasing) and drops samples older than the
 * window (and the oldest one when the ring is full). */
void cg_oom_watch_add(cg_oom_watch_t *w, uint64_t t_ns, uint64_t used);

/* Least-squares slope of used memory in bytes per second over the samples
 * in the window; false when fewer than CG_OOM_MIN_SAMPLES or no time span. */
bool cg_oom_watch_slope(const cg_oom_watch_t *w, double *slope_p);

/* Projected seconds until free_bytes are used up: free / slope when the
 * slope is positive; < 0 when no OOM is projected. */
double cg_oom_watch_eta(const cg_oom_watch_t *w, uint64_t free_bytes);

/* Feeds the eta of this sample into the warning state. Returns true when a
 * warning is due now: the eta is inside the window and either the previous
 * sample was not, or a whole window has passed since the last warning (so
 * a persisting projection warns once per window). */
bool cg_oom_watch_check(cg_oom_watch_t *w, double eta_s, uint64_t now_ns);

#endif
