/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The Horovod shim core's timeline (core/engine/hvd_timeline.h): made on rank 0
 * when CG_TIMELINE (HOROVOD_TIMELINE) is set, started at once unless the
 * value is DYNAMIC, started and stopped by cg_hvd_timeline_start/_stop
 * (horovod_start_timeline / horovod_stop_timeline). Turns the core's steps
 * into tensor spans, the governor's events into instants (through the
 * context's governor listener) and its snapshot into counters, and writes
 * once per cycle from the background thread. Layer: core/engine; calls
 * core/timeline, the governor and the context.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "core/base/error.h"
#include "core/engine/hvd_timeline.h"
#include "core/governor/memacct.h"

struct cg_hvd_tl {
    cg_timeline_t *t;
    cg_ctx_gov_listener_t listener; /* the governor's events, to t */
    cg_governor_t *gov;
};

static const char *const cg__op_names[] = {"ALLREDUCE", "BROADCAST",
                                           "ALLGATHER", "REDUCESCATTER",
                                           "ALLTOALL"};

static const char *cg__op_name(const cg_hvd_wire_t *w)
{
    return (w->type >= 0 && w->type <= CG_HVD_ALLTOALL)
               ? cg__op_names[w->type]
               : "UNKNOWN";
}

static void cg__op_end(cg_timeline_t *t, const cg_hvd_entry_t *e,
                       uint64_t now)
{
    char shape[160];

    cg_hvd_shape_str(&e->w, shape, sizeof(shape));
    cg_timeline_op_end(t, e->w.name, cg_dtype_name((cg_dtype_t)e->w.dtype),
                       shape, now);
}

void cg_hvd_tl_announce_write(cg_hvd_core_t *core, const cg_hvd_entry_t *e,
                              int rank)
{
    cg_timeline_t *t = core->tl->t;
    uint64_t now;

    if (!cg_timeline_running(t))
        return;
    now = cg_timeline_now_ns();
    if (e->count == 0)
        cg_timeline_negotiate_start(t, e->w.name, cg__op_name(&e->w), now);
    cg_timeline_negotiate_rank(t, e->w.name, rank, now);
    if (e->count + 1 == core->size)
        cg_timeline_negotiate_end(t, e->w.name, now);
}

void cg_hvd_tl_cached_write(cg_hvd_core_t *core, const cg_hvd_entry_t *e)
{
    cg_timeline_t *t = core->tl->t;
    uint64_t now;

    if (!cg_timeline_running(t))
        return;
    now = cg_timeline_now_ns();
    cg_timeline_negotiate_start(t, e->w.name, cg__op_name(&e->w), now);
    for (int r = 0; r < core->size; r++)
        cg_timeline_negotiate_rank(t, e->w.name, r, now);
    cg_timeline_negotiate_end(t, e->w.name, now);
}

void cg_hvd_tl_fused_write(cg_hvd_core_t *core, size_t i, int group,
                           cg_hvd_tl_phase_t phase, uint64_t t0,
                           const char *activity)
{
    cg_timeline_t *t = core->tl->t;
    uint64_t now;

    if (!cg_timeline_running(t))
        return;
    now = cg_timeline_now_ns();
    for (size_t j = i; j < core->ready_len; j++) {
        const cg_hvd_entry_t *e = core->ready[j];

        if (e->group != group)
            continue;
        switch (phase) {
        case CG_HVD_TL_PACKED:
            cg_timeline_op_start(t, e->w.name, cg__op_name(&e->w), t0);
            cg_timeline_activity_start(t, e->w.name,
                                       "MEMCPY_IN_FUSION_BUFFER", t0);
            cg_timeline_activity_start(t, e->w.name, activity, now);
            break;
        case CG_HVD_TL_REDUCED:
            cg_timeline_activity_start(t, e->w.name,
                                       "MEMCPY_OUT_FUSION_BUFFER", now);
            break;
        case CG_HVD_TL_DONE:
            cg__op_end(t, e, now);
            break;
        case CG_HVD_TL_STAGED:
            cg_timeline_op_start(t, e->w.name, cg__op_name(&e->w), t0);
            cg_timeline_activity_start(t, e->w.name, activity, t0);
            break;
        }
    }
}

void cg_hvd_tl_single_write(cg_hvd_core_t *core, const cg_hvd_entry_t *e,
                            uint64_t t0, const char *activity)
{
    cg_timeline_t *t = core->tl->t;

    if (!cg_timeline_running(t))
        return;
    cg_timeline_op_start(t, e->w.name, cg__op_name(&e->w), t0);
    cg_timeline_activity_start(t, e->w.name, activity, t0);
    cg__op_end(t, e, cg_timeline_now_ns());
}

void cg_hvd_tl_cycle_start_write(cg_hvd_core_t *core)
{
    cg_timeline_cycle_start(core->tl->t, cg_timeline_now_ns());
}

void cg_hvd_tl_cycle_end_write(cg_hvd_core_t *core)
{
    cg_timeline_t *t = core->tl->t;
    uint64_t now = cg_timeline_now_ns();

    if (cg_timeline_counters_due(t, now)) {
        cg_governor_snapshot_t s;
        cg_timeline_counters_t c;

        cg_governor_snapshot(core->gov, &s);
        c.kind = s.kind;
        c.free_bytes = s.free_bytes;
        c.budget_bytes = s.budget_bytes;
        c.fusion_bytes = core->fusion_cap;
        c.chunk_bytes = s.chunk_bytes;
        c.pressure = s.pressure;
        cg_timeline_counters(t, &c, now);
    }
    cg_timeline_flush(t);
}

/* The governor's events as global instants (any thread). */
static void cg__gov_event(void *arg, const cg_gov_event_t *ev)
{
    static const char *const level_names[] = {
        "PRESSURE_OK", "PRESSURE_WARN", "PRESSURE_CRITICAL"};
    struct cg_hvd_tl *h = arg;
    unsigned long long fb = ev->free_bytes, tb = ev->total_bytes;
    const char *name;
    char args[256];

    switch (ev->type) {
    case CG_GOV_EVENT_PRESSURE:
        name = level_names[ev->new_level <= CG_PRESSURE_CRITICAL
                               ? ev->new_level
                               : CG_PRESSURE_CRITICAL];
        snprintf(args, sizeof(args), "\"from\":\"%s\",\"to\":\"%s\","
                 "\"free_bytes\":%llu,\"total_bytes\":%llu",
                 cg_pressure_name(ev->old_level),
                 cg_pressure_name(ev->new_level), fb, tb);
        break;
    case CG_GOV_EVENT_EARLY_WARNING:
        name = "OOM_EARLY_WARNING";
        snprintf(args, sizeof(args), "\"eta_s\":%.3f,\"free_bytes\":%llu,"
                 "\"total_bytes\":%llu", isfinite(ev->eta_s) ? ev->eta_s
                                                             : -1.0,
                 fb, tb);
        break;
    case CG_GOV_EVENT_ALLOC_RETRY:
        name = "ALLOC_RETRY";
        snprintf(args, sizeof(args), "\"category\":\"%s\",\"failed_bytes\":"
                 "%llu,\"next_bytes\":%llu", cg_mem_cat_name(ev->cat),
                 (unsigned long long)ev->old_size,
                 (unsigned long long)ev->new_size);
        break;
    case CG_GOV_EVENT_CHUNK:
        name = "CHUNK_RESIZE";
        snprintf(args, sizeof(args), "\"from\":%llu,\"to\":%llu",
                 (unsigned long long)ev->old_size,
                 (unsigned long long)ev->new_size);
        break;
    default:
        return;
    }
    cg_timeline_instant(h->t, name, args, cg_timeline_now_ns());
}

void cg_hvd_timeline_init(cg_hvd_core_t *core)
{
    const cg_config_t *cfg = &core->ctx->cfg;
    cg_timeline_params_t p = {cg_governor_mem_ops(core->gov), core->log,
                              cfg->timeline_counter_period_ns};
    struct cg_hvd_tl *h;
    cg_status_t st;

    core->tl = NULL;
    if (cfg->timeline[0] == '\0' || core->rank != 0)
        return;
    st = cg_governor_alloc(core->gov, CG_MEM_CAT_CONTROL, sizeof(*h),
                           (void **)&h);
    if (st == CG_OK) {
        h->gov = core->gov;
        st = cg_timeline_create(&p, &h->t);
        if (st != CG_OK)
            cg_governor_free(core->gov, CG_MEM_CAT_CONTROL, h, sizeof(*h));
    }
    if (st != CG_OK) {
        cg_error(core->log, "no timeline (CG_TIMELINE %s): %s", cfg->timeline,
                 cg_last_error());
        return;
    }
    if (strcmp(cfg->timeline, "DYNAMIC") != 0 &&
        cg_timeline_start(h->t, cfg->timeline, cfg->timeline_mark_cycles) !=
            CG_OK)
        cg_error(core->log, "%s (CG_TIMELINE / HOROVOD_TIMELINE); running "
                 "without a timeline", cg_last_error());
    h->listener.cb = cg__gov_event;
    h->listener.arg = h;
    cg_ctx_set_gov_listener(core->ctx, &h->listener);
    core->tl = h;
}

void cg_hvd_timeline_fini(cg_hvd_core_t *core)
{
    struct cg_hvd_tl *h = core->tl;

    if (h == NULL)
        return;
    cg_ctx_set_gov_listener(core->ctx, NULL);
    core->tl = NULL;
    cg_timeline_destroy(h->t);
    cg_governor_free(h->gov, CG_MEM_CAT_CONTROL, h, sizeof(*h));
}

cg_status_t cg_hvd_timeline_start(cg_hvd_core_h core, const char *path,
                                  int mark_cycles)
{
    if (core == NULL)
        return cg_error_set(CG_ERR_INVALID_PARAM, "cg_hvd_timeline_start: "
                            "core is NULL");
    if (core->ctx->cfg.timeline[0] == '\0')
        return cg_error_set(CG_ERR_CONFIG, "cg_hvd_timeline_start: the "
                            "timeline is not enabled; set CG_TIMELINE=DYNAMIC "
                            "(or HOROVOD_TIMELINE=DYNAMIC) before the core is "
                            "created");
    if (path == NULL || path[0] == '\0')
        return cg_error_set(CG_ERR_INVALID_PARAM, "cg_hvd_timeline_start: "
                            "the file name is empty");
    if (core->tl == NULL) /* rank 0 writes the timeline */
        return CG_OK;
    return cg_timeline_start(core->tl->t, path, mark_cycles != 0);
}

cg_status_t cg_hvd_timeline_stop(cg_hvd_core_h core)
{
    if (core == NULL)
        return cg_error_set(CG_ERR_INVALID_PARAM, "cg_hvd_timeline_stop: "
                            "core is NULL");
    if (core->tl != NULL)
        cg_timeline_stop(core->tl->t);
    return CG_OK;
}
