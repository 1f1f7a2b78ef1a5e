/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The stall inspector of the Horovod shim's core (Horovod's
 * HOROVOD_STALL_CHECK_TIME_SECONDS, _SHUTDOWN_TIME_SECONDS, _CHECK_DISABLE).
 * Every rank holds the same negotiation table, so every rank knows which
 * ranks announced each pending name and since when. A few times a second
 * at most: requests waiting on a cache bit too long are announced (so the
 * table shows them), rank 0 warns about stalled names naming the missing
 * ranks, and a stall past the shutdown time asks every rank to stop in the
 * same cycle. Background thread only. Layer: core/engine; calls core/base.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "core/base/error.h"
#include "core/engine/hvd_core.h"

#define CG__TICK_NS 1000000000ull /* scan the table at most this often */
#define CG__WARN_TENSORS 4        /* tensors named in a warning */
#define CG__WARN_RANKS 8          /* ranks named per list */

static uint64_t cg__min(uint64_t a, uint64_t b)
{
    return a < b ? a : b;
}

/* Appends to buf at *n, never past len. */
static void cg__add(char *buf, size_t len, size_t *n, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static void cg__add(char *buf, size_t len, size_t *n, const char *fmt, ...)
{
    va_list ap;
    int w;

    if (*n >= len)
        return;
    va_start(ap, fmt);
    w = vsnprintf(buf + *n, len - *n, fmt, ap);
    va_end(ap);
    *n = w < 0 ? len : cg__min(len, *n + (size_t)w);
}

/* "ranks 2, 3" / "rank 2" / "ranks 0, 1, ... and 5 more": the ranks that
 * announced e (announced) or have not (!announced). */
static void cg__ranks(const cg_hvd_core_t *core, const cg_hvd_entry_t *e,
                      bool announced, int max, char *buf, size_t len,
                      size_t *n)
{
    int total = announced ? e->count : core->size - e->count, shown = 0;

    cg__add(buf, len, n, "rank%s", total == 1 ? "" : "s");
    for (int r = 0; r < core->size && shown < max; r++) {
        bool in = (e->ranks[r / 64] >> (r % 64)) & 1;
        if (in == announced)
            cg__add(buf, len, n, "%s %d", shown++ ? "," : "", r);
    }
    if (total > shown)
        cg__add(buf, len, n, " and %d more", total - shown);
}

/* "tensor 'x' (allreduce) is waiting for ranks 2, 3; ranks 0, 1 are
 * ready" for the first `max` pending entries; their count. */
static int cg__describe(const cg_hvd_core_t *core, uint64_t min_age,
                        int max, int max_ranks, char *buf, size_t len,
                        size_t *n)
{
    int found = 0;

    CG_HVD_FOR(it, &core->table) {
        const cg_hvd_entry_t *e = cg_list_entry(it, cg_hvd_entry_t, link);
        if (e->count >= core->size || core->now_ns - e->first_ns < min_age)
            continue;
        if (found++ >= max)
            continue;
        cg__add(buf, len, n, "%stensor '%s' (%s) is waiting for ",
                found > 1 ? "; " : "", e->w.name, cg_hvd_type_name(e->w.type));
        cg__ranks(core, e, false, max_ranks, buf, len, n);
        cg__add(buf, len, n, "; ");
        cg__ranks(core, e, true, max_ranks, buf, len, n);
        cg__add(buf, len, n, " %s ready", e->count == 1 ? "is" : "are");
    }
    if (found > max)
        cg__add(buf, len, n, "; and %d more tensor%s", found - max,
                found - max == 1 ? "" : "s");
    return found;
}

/* Requests waiting on a cache bit for long are announced this round: the
 * record evicts the slot on every rank, so every rank's request for the
 * name shows in the table (as Horovod invalidates stalled cached names). */
static cg_status_t cg__push_cached(cg_hvd_core_t *core, uint64_t after)
{
    cg_hvd_cache_t *c = &core->cache;
    cg_status_t st;

    for (uint32_t i = 0; c->npending > 0 && i < c->hw; i++) {
        cg_hvd_slot_t *s = cg_hvd_cache_slot(c, i);
        if (s->pending == NULL || core->now_ns - s->since_ns < after)
            continue;
        st = cg_hvd_reqv_push(core, &core->ann, s->pending);
        if (st != CG_OK)
            return st;
        (void)cg_hvd_cache_unpend(c, s);
    }
    return CG_OK;
}

static void cg__warn(cg_hvd_core_t *core, uint64_t check)
{
    char buf[900];
    size_t n = 0;
    uint64_t oldest = 0;

    CG_HVD_FOR(it, &core->table) {
        const cg_hvd_entry_t *e = cg_list_entry(it, cg_hvd_entry_t, link);
        if (e->count < core->size && core->now_ns - e->first_ns > oldest)
            oldest = core->now_ns - e->first_ns;
    }
    cg__add(buf, sizeof(buf), &n, "stalled for %.0f s: ", oldest / 1e9);
    cg__describe(core, check, CG__WARN_TENSORS, CG__WARN_RANKS, buf,
                 sizeof(buf), &n);
    cg__add(buf, sizeof(buf), &n, " (the job hangs until every rank "
            "enqueues these names: check that all ranks run the same "
            "collectives; warned every CG_STALL_CHECK_TIME, %.0f s%s)",
            check / 1e9, core->ctx->cfg.stall_shutdown_ns > 0 ? "" :
            "; CG_STALL_SHUTDOWN_TIME stops the job instead");
    cg_warn(core->log, "%s", buf);
    core->stall_warn_ns = core->now_ns;
    core->n_warned++;
}

cg_status_t cg_hvd_stall_tick(cg_hvd_core_t *core)
{
    const cg_config_t *cfg = &core->ctx->cfg;
    uint64_t check = cfg->stall_check_ns, shut = cfg->stall_shutdown_ns;
    uint64_t first = shut > 0 ? cg__min(check, shut) : check, now;
    bool stalled = false;
    cg_status_t st;

    now = core->now_ns;
    if (cfg->stall_check_disable || now < core->stall_next_ns)
        return CG_OK;
    core->stall_next_ns = now + cg__min(CG__TICK_NS, first / 4);
    st = cg__push_cached(core, first / 2);
    if (st != CG_OK)
        return st;
    CG_HVD_FOR(it, &core->table) {
        const cg_hvd_entry_t *e = cg_list_entry(it, cg_hvd_entry_t, link);
        uint64_t age = now - e->first_ns;
        if (e->count >= core->size)
            continue;
        stalled = stalled || age >= check;
        if (shut > 0 && age >= shut)
            core->stall_stop = true;
    }
    if (stalled && core->rank == 0 &&
        (core->stall_warn_ns == 0 || now - core->stall_warn_ns >= check))
        cg__warn(core, check);
    return CG_OK;
}

cg_status_t cg_hvd_stall_shutdown(cg_hvd_core_t *core)
{
    char buf[200];
    size_t n = 0;

    cg__add(buf, sizeof(buf), &n, "stall shutdown (CG_STALL_SHUTDOWN_TIME "
            "%.0f s): ", core->ctx->cfg.stall_shutdown_ns / 1e9);
    if (cg__describe(core, 0, 1, 4, buf, sizeof(buf), &n) == 0)
        cg__add(buf, sizeof(buf), &n, "a rank saw a stalled cached tensor");
    return cg_error_set(CG_ERR_TIMEOUT, "%s", buf);
}
