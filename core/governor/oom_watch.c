/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Sliding-window least-squares slope of used memory and the time-to-OOM
 * projection behind the governor's early warning, plus its rate limit
 * (once per window while a projection persists). Pure arithmetic over a
 * caller-owned ring. Layer: core/governor; calls nothing.
 */
#include "core/governor/oom_watch.h"

unsigned cg_oom_watch_capacity(uint64_t window_ns, uint64_t interval_ns)
{
    uint64_t n = interval_ns == 0 ? CG_OOM_RING_MAX
                                  : window_ns / interval_ns + 1;
    if (n > CG_OOM_RING_MAX)
        n = CG_OOM_RING_MAX;
    if (n < CG_OOM_MIN_SAMPLES)
        n = CG_OOM_MIN_SAMPLES;
    return (unsigned)n;
}

void cg_oom_watch_init(cg_oom_watch_t *w, cg_oom_sample_t *ring, unsigned cap,
                       uint64_t window_ns)
{
    w->ring = ring;
    w->cap = cap;
    w->head = 0;
    w->count = 0;
    w->window_ns = window_ns;
    w->active = false;
    w->last_warn_ns = 0;
}

static const cg_oom_sample_t *cg__oom_at(const cg_oom_watch_t *w, unsigned i)
{
    return &w->ring[(w->head + i) % w->cap];
}

void cg_oom_watch_add(cg_oom_watch_t *w, uint64_t t_ns, uint64_t used)
{
    while (w->count > 0 && t_ns - cg__oom_at(w, 0)->t_ns > w->window_ns) {
        w->head = (w->head + 1) % w->cap;
        w->count--;
    }
    if (w->count == w->cap) {
        w->head = (w->head + 1) % w->cap;
        w->count--;
    }
    w->ring[(w->head + w->count) % w->cap] =
        (cg_oom_sample_t){.t_ns = t_ns, .used = used};
    w->count++;
}

bool cg_oom_watch_slope(const cg_oom_watch_t *w, double *slope_p)
{
    double mt = 0.0, mu = 0.0, stt = 0.0, stu = 0.0;
    uint64_t t0, u0;
    unsigned i;

    if (w->count < CG_OOM_MIN_SAMPLES)
        return false;
    /* Offsets from the oldest sample keep the sums well conditioned. */
    t0 = cg__oom_at(w, 0)->t_ns;
    u0 = cg__oom_at(w, 0)->used;
    for (i = 0; i < w->count; i++) {
        const cg_oom_sample_t *s = cg__oom_at(w, i);
        mt += (double)(s->t_ns - t0) * 1e-9;
        mu += (double)s->used - (double)u0;
    }
    mt /= w->count;
    mu /= w->count;
    for (i = 0; i < w->count; i++) {
        const cg_oom_sample_t *s = cg__oom_at(w, i);
        double dt = (double)(s->t_ns - t0) * 1e-9 - mt;
        double du = ((double)s->used - (double)u0) - mu;
        stt += dt * dt;
        stu += dt * du;
    }
    if (stt <= 0.0)
        return false;
    *slope_p = stu / stt;
    return true;
}

double cg_oom_watch_eta(const cg_oom_watch_t *w, uint64_t free_bytes)
{
    double slope;

    double mean = 0.0;

    if (!cg_oom_watch_slope(w, &slope) || slope <= 0.0)
        return -1.0;
    /* A window that rose and then fell (memory released) still fits a
     * positive slope; project only while the newest sample is above the
     * window's mean, i.e. while use is still climbing toward now. */
    for (unsigned i = 0; i < w->count; i++)
        mean += (double)cg__oom_at(w, i)->used / w->count;
    if ((double)cg__oom_at(w, w->count - 1)->used < mean)
        return -1.0;
    return (double)free_bytes / slope;
}

bool cg_oom_watch_check(cg_oom_watch_t *w, double eta_s, uint64_t now_ns)
{
    bool inside = eta_s >= 0.0 && eta_s * 1e9 < (double)w->window_ns;
    bool due;

    if (!inside) {
        w->active = false;
        return false;
    }
    due = !w->active || now_ns - w->last_warn_ns >= w->window_ns;
    w->active = true;
    if (due)
        w->last_warn_ns = now_ns;
    return due;
}
