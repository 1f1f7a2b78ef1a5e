/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The memory governor's policy: budget, buffer sizes, pressure, early
 * warning and the snapshot. Pure policy over an injected probe, clock and
 * backend; calls core/base and its helpers (pressure, oom_watch, memacct),
 * nothing in transport/. Allocation lives in governor_alloc.c.
 *
 * Formulas (cap = what the user asked for, floor = the *_MIN variable;
 * clamp(x) = min(max(x, floor), cap), and cap alone when cap <= floor):
 *   reserve = CG_MEM_RESERVE (bytes, or a share of total; default 0)
 *   budget  = max(0, free - reserve) * CG_MEM_FRACTION
 *   fusion  = clamp(pow2floor(budget / 2))   cap CG_FUSION_THRESHOLD (0: off)
 *   chunk   = clamp(pow2floor(budget / 16))  cap CG_CHUNK_SIZE
 *   nccl_buffsize = clamp(pow2floor(budget / 4 / 64)) cap NCCL_BUFFSIZE:
 *             a quarter of the budget for NCCL's buffers, spread over up to
 *             32 channels x 2 directions = 64 buffers of NCCL_BUFFSIZE.
 * Pressure compares free bytes with CG_PRESSURE_WARN / _CRITICAL (sizes, or
 * shares of total resolved at every sample; pressure.c has the rules).
 * Degradation is not cumulative: every sample sets, for chunk and fusion,
 *   level cap = max(target >> h, min(floor, target)),
 *   h = 2 at CRITICAL, 1 at WARN or during an early warning, 0 at OK,
 * where target is the budget-derived size above. A size above its cap drops
 * to it at once; one below doubles toward it, once per sample. An
 * allocation failure halves both sizes once (not below the floor), so they
 * regrow one doubling per sample. NCCL_BUFFSIZE is not degraded: NCCL reads
 * it once, at communicator creation.
 */
#include "core/governor/governor_impl.h"

#include <stdio.h>
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

/* The size a pressure level allows: target halved h times, never below
 * the floor (a target below its floor wins). */
static uint64_t cg__level_cap(uint64_t target, uint64_t floor, int h)
{
    if (floor > target)
        floor = target;
    return target >> h < floor ? floor : target >> h;
}

/* One sample's move of a size toward its level cap: down at once, up by
 * one doubling. */
static uint64_t cg__toward(uint64_t cur, uint64_t cap)
{
    if (cur >= cap || cur == 0)
        return cap;
    return cur > cap / 2 ? cap : cur * 2;
}

/* One halving after an allocation failure, not below the floor. */
static uint64_t cg__halve(uint64_t cur, uint64_t target, uint64_t floor)
{
    if (floor > target)
        floor = target;
    return cur / 2 < floor ? floor : cur / 2;
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

/* Sets chunk and fusion, counts a shrink, logs a change and reports a
 * chunk change. Caller holds the lock. */
static void cg__governor_set_sizes(cg_governor_t *gov, uint64_t chunk,
                                   uint64_t fusion, const char *why,
                                   cg__gov_events_t *events)
{
    uint64_t old_chunk = gov->chunk, old_fusion = gov->fusion;
    char b[4][32];

    if (chunk == old_chunk && fusion == old_fusion)
        return;
    gov->chunk = chunk;
    gov->fusion = fusion;
    if (chunk < old_chunk || fusion < old_fusion)
        gov->degrades++;
    cg_info(gov->log, "chunk %s -> %s, fusion buffer %s -> %s (%s)",
            cg_format_size(old_chunk, b[0], sizeof(b[0])),
            cg_format_size(chunk, b[1], sizeof(b[1])),
            cg_format_size(old_fusion, b[2], sizeof(b[2])),
            cg_format_size(fusion, b[3], sizeof(b[3])), why);
    if (chunk != old_chunk) {
        cg_gov_event_t ev = cg__governor_ev(gov, CG_GOV_EVENT_CHUNK);
        ev.old_size = old_chunk;
        ev.new_size = chunk;
        cg__governor_event(gov, events, &ev);
    }
}

/* A sample's step: chunk and fusion toward the caps of h halvings. */
static void cg__governor_follow(cg_governor_t *gov, int h, const char *why,
                                cg__gov_events_t *events)
{
    const cg_config_t *cfg = &gov->cfg;
    uint64_t chunk_cap = cg__level_cap(gov->chunk_target, cfg->chunk_min, h);
    uint64_t fusion_cap = cg__level_cap(gov->fusion_target, cfg->fusion_min,
                                        h);

    cg__governor_set_sizes(gov, cg__toward(gov->chunk, chunk_cap),
                           gov->fusion_target == 0
                               ? 0
                               : cg__toward(gov->fusion, fusion_cap),
                           why, events);
}

void cg__governor_degrade(cg_governor_t *gov, const char *why,
                          cg__gov_events_t *events)
{
    const cg_config_t *cfg = &gov->cfg;

    cg__governor_set_sizes(
        gov, cg__halve(gov->chunk, gov->chunk_target, cfg->chunk_min),
        cg__halve(gov->fusion, gov->fusion_target, cfg->fusion_min), why,
        events);
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
    const cg_config_t *cfg = &gov->cfg;
    cg_pressure_t old = gov->fsm.level, level;
    uint64_t total = gov->total_bytes;
    double pct = total == 0 ? 0.0
                            : (double)gov->free_bytes / (double)total * 100.0;
    char b[4][32];
    cg_gov_event_t ev;

    cg_pressure_set_thresholds(
        &gov->fsm, cg_config_resolve_size(&cfg->pressure_warn, total),
        cg_config_resolve_size(&cfg->pressure_critical, total),
        cg_config_resolve_size(&cfg->pressure_hysteresis, total));
    level = cg_pressure_update(&gov->fsm, gov->free_bytes, now);
    if (level == old)
        return;
    cg_format_size(gov->free_bytes, b[0], sizeof(b[0]));
    cg_format_size(total, b[1], sizeof(b[1]));
    cg_format_size(gov->fsm.warn, b[2], sizeof(b[2]));
    cg_format_size(gov->fsm.critical, b[3], sizeof(b[3]));
    cg_log_at(gov->log, level > old ? CG_LOG_WARN : CG_LOG_INFO,
              "memory pressure %s -> %s: free %s of %s (%.1f%%; warn below "
              "%s, critical below %s)", cg_pressure_name(old),
              cg_pressure_name(level), b[0], b[1], pct, b[2], b[3]);
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
    int h;

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
        h = 2;
    else if (gov->fsm.level == CG_PRESSURE_WARN || gov->oom.active)
        h = 1;
    else
        h = 0;
    cg__governor_follow(gov, h,
                        gov->fsm.level == CG_PRESSURE_OK && gov->oom.active
                            ? "early warning"
                            : why[gov->fsm.level],
                        events);
}

/* A threshold as given and, for a share, what it comes to of total. */
static const char *cg__threshold_desc(const cg_size_or_frac_t *v,
                                      uint64_t total, char *buf, size_t len)
{
    char given[32], bytes[32], of[32];

    cg_config_format_size(v, given, sizeof(given));
    if (v->fraction < 0.0)
        snprintf(buf, len, "%s", given);
    else
        snprintf(buf, len, "%s = %s of %s", given,
                 cg_format_size(cg_config_resolve_size(v, total), bytes,
                                sizeof(bytes)),
                 cg_format_size(total, of, sizeof(of)));
    return buf;
}

/* CRITICAL must not lie above WARN once both are bytes of this total
 * (checked at the first reading: a size and a share compare only there). */
static cg_status_t cg__governor_check_levels(const cg_config_t *cfg,
                                             uint64_t total)
{
    char c[96], w[96];

    if (cg_config_resolve_size(&cfg->pressure_critical, total) <=
        cg_config_resolve_size(&cfg->pressure_warn, total))
        return CG_OK;
    return cg_error_set(CG_ERR_CONFIG, "CG_PRESSURE_CRITICAL (%s) must not "
                        "exceed CG_PRESSURE_WARN (%s)",
                        cg__threshold_desc(&cfg->pressure_critical, total, c,
                                           sizeof(c)),
                        cg__threshold_desc(&cfg->pressure_warn, total, w,
                                           sizeof(w)));
}

static cg_status_t cg__governor_sample(cg_governor_t *gov, bool first)
{
    uint64_t free_b = 0, total_b = 0;
    cg__gov_events_t events = {.count = 0};
    cg_status_t status;

    status = gov->probe.read(gov->probe.arg, &free_b, &total_b);
    if (status != CG_OK)
        return status; /* the probe set cg_last_error() */
    if (first) {
        status = cg__governor_check_levels(&gov->cfg, total_b);
        if (status != CG_OK)
            return status;
    }
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
    /* thresholds: resolved against the total at every sample */
    cg_pressure_init(&gov->fsm, 0, 0, 0, gov->cfg.pressure_dwell_ns);
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
