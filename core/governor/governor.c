/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The memory governor's policy: budget, buffer sizes, pressure, early
 * warning and the snapshot. Pure policy over an injected probe, clock and
 * backend; calls core/base and its helpers (pressure, oom_watch, memacct),
 * nothing in transport/. Allocation lives in governor_alloc.c.
 *
 * Formulas (cap = what the user asked for, floor = the *_MIN variable;
 * clamp(x) = min(max(x, floor), cap), and cap alone when cap <= floor):
 *   reserve = CG_MEM_RESERVE (bytes, or a share of total)
 *   budget  = max(0, free - reserve) * CG_MEM_FRACTION
 *   fusion  = clamp(pow2floor(budget / 2))   cap CG_FUSION_THRESHOLD (0: off)
 *   chunk   = clamp(pow2floor(budget / 16))  cap CG_CHUNK_SIZE
 *   nccl_buffsize = clamp(pow2floor(budget / 4 / 64)) cap NCCL_BUFFSIZE:
 *             a quarter of the budget for NCCL's buffers, spread over up to
 *             32 channels x 2 directions = 64 buffers of NCCL_BUFFSIZE.
 * Degradation, once per sample: CRITICAL halves chunk and fusion twice,
 * WARN or an active early warning once (never below the floor); OK doubles
 * them back up to the budget-derived sizes above. NCCL_BUFFSIZE is not
 * degraded: NCCL reads it once, at communicator creation.
 */
#include "core/governor/governor_impl.h"

#include <string.h>
#include <time.h>

#include "core/base/error.h"
#include "core/base/parse.h"

static uint64_t cg__now_monotonic(void *arg)
{
    struct timespec ts;
    (void)arg;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint64_t cg__pow2floor(uint64_t x)
{
    return x == 0 ? 0 : 1ull << (63 - __builtin_clzll(x));
}

static uint64_t cg__clamp(uint64_t x, uint64_t floor, uint64_t cap)
{
    if (cap <= floor)
        return cap; /* a request below the floor wins */
    return x < floor ? floor : x > cap ? cap : x;
}

/* One degradation step of a size: halvings > 0 halves that many times (not
 * below floor), 0 doubles back toward target. Never above target. */
static uint64_t cg__step(uint64_t cur, uint64_t target, uint64_t floor,
                         int halvings)
{
    if (floor > target)
        floor = target;
    if (cur > target || cur == 0)
        cur = target;
    if (halvings == 0)
        return cur > target / 2 ? target : cur * 2;
    for (; halvings > 0; halvings--)
        cur = cur / 2 < floor ? floor : cur / 2;
    return cur;
}

void cg__governor_event(const cg_governor_t *gov, cg__gov_events_t *events,
                        const cg_gov_event_t *ev)
{
    if (gov->event_cb == NULL || events->count == CG_GOV_EVENTS_MAX)
        return;
    events->ev[events->count++] = *ev;
}

void cg__governor_emit(const cg_governor_t *gov, const cg__gov_events_t *events)
{
    for (int i = 0; i < events->count; i++)
        gov->event_cb(gov->event_arg, &events->ev[i]);
}

static cg_gov_event_t cg__governor_ev(const cg_governor_t *gov,
                                      cg_gov_event_type_t type)
{
    cg_gov_event_t ev;
    memset(&ev, 0, sizeof(ev));
    ev.type = type;
    ev.t_ns = gov->last_sample_ns;
    ev.old_level = ev.new_level = gov->fsm.level;
    ev.eta_s = gov->oom_eta_s;
    ev.free_bytes = gov->free_bytes;
    ev.total_bytes = gov->total_bytes;
    return ev;
}

/* Moves chunk and fusion one step (halvings as cg__step) and reports a
 * chunk change. Caller holds the lock. */
static void cg__governor_resize(cg_governor_t *gov, int halvings,
                                const char *why, cg__gov_events_t *events)
{
    const cg_config_t *cfg = &gov->cfg;
    uint64_t old_chunk = gov->chunk, old_fusion = gov->fusion;
    char b[4][32];

    gov->chunk = cg__step(gov->chunk, gov->chunk_target, cfg->chunk_min,
                          halvings);
    gov->fusion = gov->fusion_target == 0
                      ? 0
                      : cg__step(gov->fusion, gov->fusion_target,
                                 cfg->fusion_min, halvings);
    if (gov->chunk == old_chunk && gov->fusion == old_fusion)
        return;
    if (gov->chunk < old_chunk || gov->fusion < old_fusion)
        gov->degrades++;
    cg_info(gov->log, "chunk %s -> %s, fusion buffer %s -> %s (%s)",
            cg_format_size(old_chunk, b[0], sizeof(b[0])),
            cg_format_size(gov->chunk, b[1], sizeof(b[1])),
            cg_format_size(old_fusion, b[2], sizeof(b[2])),
            cg_format_size(gov->fusion, b[3], sizeof(b[3])), why);
    if (gov->chunk != old_chunk) {
        cg_gov_event_t ev = cg__governor_ev(gov, CG_GOV_EVENT_CHUNK);
        ev.old_size = old_chunk;
        ev.new_size = gov->chunk;
        cg__governor_event(gov, events, &ev);
    }
}

void cg__governor_degrade(cg_governor_t *gov, const char *why,
                          cg__gov_events_t *events)
{
    cg__governor_resize(gov, 1, why, events);
}

/* Budget and budget-derived sizes from the last free/total. */
static void cg__governor_size(cg_governor_t *gov)
{
    const cg_config_t *cfg = &gov->cfg;
    uint64_t budget = 0;

    gov->reserve = cg_config_resolve_size(&cfg->mem_reserve,
                                          gov->total_bytes);
    if (gov->free_bytes > gov->reserve)
        budget = (uint64_t)((double)(gov->free_bytes - gov->reserve) *
                            cfg->mem_fraction);
    gov->budget = budget;
    gov->fusion_target =
        cfg->fusion_threshold == 0
            ? 0
            : cg__clamp(cg__pow2floor(budget / 2), cfg->fusion_min,
                        cfg->fusion_threshold);
    gov->chunk_target = cg__clamp(cg__pow2floor(budget / 16), cfg->chunk_min,
                                  cfg->chunk_size);
    gov->nccl_buffsize = cg__clamp(cg__pow2floor(budget / 4 / 64),
                                   cfg->nccl_buffsize_min,
                                   cfg->nccl_buffsize);
}

static void cg__governor_pressure(cg_governor_t *gov, uint64_t now,
                                  cg__gov_events_t *events)
{
    cg_pressure_t old = gov->fsm.level, level;
    double frac = gov->total_bytes == 0
                      ? 0.0
                      : (double)gov->free_bytes / (double)gov->total_bytes;
    char b[2][32];
    cg_gov_event_t ev;

    level = cg_pressure_update(&gov->fsm, frac, now);
    if (level == old)
        return;
    cg_format_size(gov->free_bytes, b[0], sizeof(b[0]));
    cg_format_size(gov->total_bytes, b[1], sizeof(b[1]));
    if (level > old)
        cg_warn(gov->log, "memory pressure %s -> %s: free %s of %s (%.1f%%)",
                cg_pressure_name(old), cg_pressure_name(level), b[0], b[1],
                frac * 100.0);
    else
        cg_info(gov->log, "memory pressure %s -> %s: free %s of %s (%.1f%%)",
                cg_pressure_name(old), cg_pressure_name(level), b[0], b[1],
                frac * 100.0);
    ev = cg__governor_ev(gov, CG_GOV_EVENT_PRESSURE);
    ev.old_level = old;
    ev.new_level = level;
    cg__governor_event(gov, events, &ev);
}

static void cg__governor_early_warning(cg_governor_t *gov, uint64_t now,
                                       cg__gov_events_t *events)
{
    uint64_t used = gov->total_bytes - gov->free_bytes;
    char b[32];
    cg_gov_event_t ev;

    cg_oom_watch_add(&gov->oom, now, used);
    gov->oom_eta_s = cg_oom_watch_eta(&gov->oom, gov->free_bytes);
    if (!cg_oom_watch_check(&gov->oom, gov->oom_eta_s, now))
        return;
    gov->early_warnings++;
    gov->last_warning_ns = now;
    cg_warn(gov->log, "out of memory projected in %.1fs (free %s, window "
            "%.1fs); shrinking buffers", gov->oom_eta_s,
            cg_format_size(gov->free_bytes, b, sizeof(b)),
            (double)gov->cfg.oom_window_ns * 1e-9);
    ev = cg__governor_ev(gov, CG_GOV_EVENT_EARLY_WARNING);
    cg__governor_event(gov, events, &ev);
}

/* Everything one probe reading changes. Caller holds the lock. */
static void cg__governor_update(cg_governor_t *gov, uint64_t free_b,
                                uint64_t total_b, uint64_t now, bool first,
                                cg__gov_events_t *events)
{
    static const char *const why[] = {"pressure ok", "pressure warn",
                                      "pressure critical"};
    int halvings;

    gov->free_bytes = free_b < total_b ? free_b : total_b;
    gov->total_bytes = total_b;
    gov->last_sample_ns = now;
    cg__governor_size(gov);
    if (first) {
        gov->chunk = gov->chunk_target;
        gov->fusion = gov->fusion_target;
    }
    cg__governor_pressure(gov, now, events);
    cg__governor_early_warning(gov, now, events);
    if (gov->fsm.level == CG_PRESSURE_CRITICAL)
        halvings = 2;
    else if (gov->fsm.level == CG_PRESSURE_WARN || gov->oom.active)
        halvings = 1;
    else
        halvings = 0;
    cg__governor_resize(gov, halvings,
                        gov->fsm.level == CG_PRESSURE_OK && gov->oom.active
                            ? "early warning"
                            : why[gov->fsm.level],
                        events);
}

static cg_status_t cg__governor_sample(cg_governor_t *gov, bool first)
{
    uint64_t free_b = 0, total_b = 0;
    cg__gov_events_t events = {.count = 0};
    cg_status_t status;

    status = gov->probe.read(gov->probe.arg, &free_b, &total_b);
    if (status != CG_OK)
        return status; /* the probe set cg_last_error() */
    pthread_mutex_lock(&gov->lock);
    cg__governor_update(gov, free_b, total_b, gov->now_ns(gov->clock_arg),
                        first, &events);
    pthread_mutex_unlock(&gov->lock);
    cg__governor_emit(gov, &events);
    return CG_OK;
}

cg_status_t cg_governor_sample(cg_governor_t *gov)
{
    return cg__governor_sample(gov, false);
}

cg_status_t cg_governor_tick(cg_governor_t *gov)
{
    uint64_t now = gov->now_ns(gov->clock_arg), last;

    pthread_mutex_lock(&gov->lock);
    last = gov->last_sample_ns;
    pthread_mutex_unlock(&gov->lock);
    if (now - last < gov->cfg.probe_interval_ns)
        return CG_OK;
    return cg__governor_sample(gov, false);
}

static cg_status_t cg__governor_check_params(const cg_governor_params_t *p)
{
    const cg_config_t *cfg = p->cfg;

    if (cfg == NULL || p->probe.read == NULL)
        return cg_error_set(CG_ERR_INVALID_PARAM,
                            "governor: %s is required",
                            cfg == NULL ? "params.cfg" : "params.probe.read");
    if (!(cfg->mem_fraction >= 0.0 && cfg->mem_fraction <= 1.0))
        return cg_error_set(CG_ERR_CONFIG, "CG_MEM_FRACTION (%g) must lie "
                            "between 0 and 1", cfg->mem_fraction);
    if (!(cfg->pressure_critical <= cfg->pressure_warn))
        return cg_error_set(CG_ERR_CONFIG, "CG_PRESSURE_CRITICAL (%g) must "
                            "not exceed CG_PRESSURE_WARN (%g)",
                            cfg->pressure_critical, cfg->pressure_warn);
    if (cfg->probe_interval_ns == 0 ||
        cfg->oom_window_ns < cfg->probe_interval_ns)
        return cg_error_set(CG_ERR_CONFIG, "CG_PROBE_INTERVAL (%llu ns) must "
                            "be > 0 and at most CG_OOM_WINDOW (%llu ns)",
                            (unsigned long long)cfg->probe_interval_ns,
                            (unsigned long long)cfg->oom_window_ns);
    return CG_OK;
}

cg_status_t cg_governor_create(const cg_governor_params_t *params,
                               cg_governor_t **gov_p)
{
    cg_mem_backend_t backend;
    cg_governor_t *gov;
    cg_status_t status;

    status = cg__governor_check_params(params);
    if (status != CG_OK)
        return status;
    backend = params->backend.alloc != NULL ? params->backend
                                            : cg_mem_backend_host();
    gov = backend.alloc(backend.arg, sizeof(*gov));
    if (gov == NULL)
        return cg_error_set(CG_ERR_NO_MEMORY, "governor: cannot allocate "
                            "%zu bytes for its state", sizeof(*gov));
    memset(gov, 0, sizeof(*gov));
    gov->cfg = *params->cfg;
    gov->probe = params->probe;
    gov->now_ns = params->now_ns != NULL ? params->now_ns : cg__now_monotonic;
    gov->clock_arg = params->clock_arg;
    gov->log = params->log;
    gov->event_cb = params->event_cb;
    gov->event_arg = params->event_arg;
    cg_memacct_init(&gov->acct, &backend, gov->cfg.fault_alloc);
    if (pthread_mutex_init(&gov->lock, NULL) != 0) {
        status = cg_error_set(CG_ERR_INTERNAL, "governor: mutex init failed");
        goto err_free_gov;
    }
    gov->oom_cap = cg_oom_watch_capacity(gov->cfg.oom_window_ns,
                                         gov->cfg.probe_interval_ns);
    gov->oom_ring = cg_memacct_alloc(&gov->acct, CG_MEM_CAT_CONTROL,
                                     gov->oom_cap * sizeof(*gov->oom_ring),
                                     NULL);
    if (gov->oom_ring == NULL) {
        status = cg_error_set(CG_ERR_NO_MEMORY, "governor: cannot allocate "
                              "its %u-sample window", gov->oom_cap);
        goto err_destroy_lock;
    }
    cg_oom_watch_init(&gov->oom, gov->oom_ring, gov->oom_cap,
                      gov->cfg.oom_window_ns);
    cg_pressure_init(&gov->fsm, gov->cfg.pressure_warn,
                     gov->cfg.pressure_critical, gov->cfg.pressure_hysteresis,
                     gov->cfg.pressure_dwell_ns);
    gov->oom_eta_s = -1.0;
    status = cg__governor_sample(gov, true);
    if (status != CG_OK)
        goto err_free_ring;
    *gov_p = gov;
    return CG_OK;

err_free_ring:
    cg_memacct_free(&gov->acct, CG_MEM_CAT_CONTROL, gov->oom_ring,
                    gov->oom_cap * sizeof(*gov->oom_ring));
err_destroy_lock:
    pthread_mutex_destroy(&gov->lock);
err_free_gov:
    backend.free(backend.arg, gov, sizeof(*gov));
    return status;
}

void cg_governor_destroy(cg_governor_t *gov)
{
    cg_mem_backend_t backend;

    if (gov == NULL)
        return;
    backend = gov->acct.backend;
    cg_memacct_free(&gov->acct, CG_MEM_CAT_CONTROL, gov->oom_ring,
                    gov->oom_cap * sizeof(*gov->oom_ring));
    cg_memacct_cleanup(&gov->acct, gov->log);
    pthread_mutex_destroy(&gov->lock);
    backend.free(backend.arg, gov, sizeof(*gov));
}

/* Reads one field under the lock (readers may be on any thread). */
#define CG__GOV_READ(gov, field)                                             \
    do {                                                                     \
        cg_governor_t *g_ = (cg_governor_t *)(gov);                          \
        uint64_t v_;                                                         \
        pthread_mutex_lock(&g_->lock);                                       \
        v_ = g_->field;                                                      \
        pthread_mutex_unlock(&g_->lock);                                     \
        return v_;                                                           \
    } while (0)

uint64_t cg_governor_budget(const cg_governor_t *gov)
{
    CG__GOV_READ(gov, budget);
}

uint64_t cg_governor_fusion_size(const cg_governor_t *gov)
{
    CG__GOV_READ(gov, fusion);
}

uint64_t cg_governor_chunk_size(const cg_governor_t *gov)
{
    CG__GOV_READ(gov, chunk);
}

uint64_t cg_governor_nccl_buffsize(const cg_governor_t *gov)
{
    CG__GOV_READ(gov, nccl_buffsize);
}

cg_pressure_t cg_governor_pressure(const cg_governor_t *gov)
{
    CG__GOV_READ(gov, fsm.level);
}

void cg_governor_snapshot(const cg_governor_t *gov,
                          cg_governor_snapshot_t *snap)
{
    cg_governor_t *g = (cg_governor_t *)gov;

    memset(snap, 0, sizeof(*snap));
    pthread_mutex_lock(&g->lock);
    snap->kind = g->probe.kind;
    snap->free_bytes = g->free_bytes;
    snap->total_bytes = g->total_bytes;
    snap->reserve_bytes = g->reserve;
    snap->budget_bytes = g->budget;
    snap->fusion_bytes = g->fusion;
    snap->chunk_bytes = g->chunk;
    snap->nccl_buffsize = g->nccl_buffsize;
    snap->pressure = g->fsm.level;
    snap->oom_eta_s = g->oom_eta_s;
    snap->early_warnings = g->early_warnings;
    snap->degrades = g->degrades;
    snap->device = g->probe.kind == CG_MEM_KIND_DEVICE &&
                           g->probe.device != NULL
                       ? g->probe.device(g->probe.arg)
                       : -1;
    snap->early_warning_age_s =
        g->early_warnings == 0
            ? -1.0
            : (double)(g->now_ns(g->clock_arg) - g->last_warning_ns) / 1e9;
    pthread_mutex_unlock(&g->lock);
    for (int c = 0; c < CG_MEM_CAT_COUNT; c++) {
        snap->current_bytes[c] = cg_memacct_current(&g->acct, c);
        snap->peak_bytes[c] = cg_memacct_peak(&g->acct, c);
        snap->device_current_bytes[c] =
            cg_memacct_device_current(&g->acct, c);
        snap->device_peak_bytes[c] = cg_memacct_device_peak(&g->acct, c);
    }
    snap->alloc_failures = cg_memacct_failures(&g->acct);
}
