/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The metrics file: formats the governor's snapshot and the shim's counters
 * as Prometheus text exposition (one # HELP / # TYPE pair per family, names
 * collguard_*, counters ending in _total, a rank label on every series so
 * several ranks' files can share node_exporter's textfile directory, no
 * timestamps, which that collector rejects) and replaces the file
 * atomically (write <path>.tmp.<pid>, then rename). Layer: core/observe; calls the
 * governor and core/base.
 */
#include "core/observe/metrics.h"

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "collguard/collguard.h"
#include "core/base/error.h"
#include "core/governor/memacct.h"

#define CG__METRICS_BUF0 16384 /* first text buffer; grows when needed */

struct cg_metrics {
    cg_governor_t *gov;
    const cg_log_t *log;
    int rank;
    uint64_t period_ns;
    uint64_t last_ns;
    bool written;            /* at least one write attempted */
    bool failing;            /* the last write failed (warned once) */
    char probe_name[64];
    char path[PATH_MAX];
    char tmp[PATH_MAX + 32];  /* <path>.tmp.<pid>: ranks may share a path */
    char *buf;               /* CONTROL memory */
    size_t buf_len;
};

/* Text being built: appends while there is room, counts what is needed. */
typedef struct {
    char *buf;
    size_t len, need;
    char labels[160];        /* rank="N" (and more), escaped */
} cg__out_t;

static void cg__put(cg__out_t *o, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void cg__put(cg__out_t *o, const char *fmt, ...)
{
    size_t room = o->need < o->len ? o->len - o->need : 0;
    va_list ap;
    int n;

    va_start(ap, fmt);
    n = vsnprintf(room ? o->buf + o->need : NULL, room, fmt, ap);
    va_end(ap);
    if (n > 0)
        o->need += (size_t)n;
}

/* A label value with \, " and newline escaped as the format asks. */
static void cg__escape(char *dst, size_t len, const char *src)
{
    size_t n = 0;

    for (; *src != '\0' && n + 3 < len; src++) {
        if (*src == '\\' || *src == '"' || *src == '\n') {
            dst[n++] = '\\';
            dst[n++] = *src == '\n' ? 'n' : *src;
        } else {
            dst[n++] = *src;
        }
    }
    dst[n] = '\0';
}

static void cg__family(cg__out_t *o, const char *name, const char *type,
                       const char *help)
{
    cg__put(o, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void cg__u64(cg__out_t *o, const char *name, const char *type,
                    const char *help, uint64_t v)
{
    cg__family(o, name, type, help);
    cg__put(o, "%s{%s} %llu\n", name, o->labels, (unsigned long long)v);
}

static void cg__dbl(cg__out_t *o, const char *name, const char *help,
                    double v)
{
    cg__family(o, name, "gauge", help);
    cg__put(o, "%s{%s} %.17g\n", name, o->labels, v);
}

/* A counter of seconds from nanoseconds (Prometheus' base unit). */
static void cg__sec(cg__out_t *o, const char *name, const char *help,
                    uint64_t ns)
{
    cg__family(o, name, "counter", help);
    cg__put(o, "%s{%s} %.9f\n", name, o->labels, (double)ns / 1e9);
}

/* One series per accounted category, label category="fusion", ... */
static void cg__per_cat(cg__out_t *o, const char *name, const char *help,
                        const uint64_t *v)
{
    cg__family(o, name, "gauge", help);
    for (int c = 0; c < CG_MEM_CAT_COUNT; c++)
        cg__put(o, "%s{%s,category=\"%s\"} %llu\n", name, o->labels,
                cg_mem_cat_name((cg_mem_cat_t)c), (unsigned long long)v[c]);
}

static void cg__governor_part(cg__out_t *o, const char *probe_name,
                              const cg_governor_snapshot_t *s)
{
    char probe[96];

    cg__escape(probe, sizeof(probe), probe_name);
    cg__family(o, "collguard_info", "gauge",
               "Always 1; the labels say the version and the memory the "
               "governor watches.");
    cg__put(o, "collguard_info{%s,version=\"%s\",memory=\"%s\"} 1\n",
            o->labels, cg_version(), probe);
    cg__u64(o, "collguard_memory_free_bytes", "gauge",
            "Free memory at the governor's last probe sample.", s->free_bytes);
    cg__u64(o, "collguard_memory_total_bytes", "gauge",
            "Total memory the probe reports.", s->total_bytes);
    cg__u64(o, "collguard_memory_reserve_bytes", "gauge",
            "Memory left to the framework (CG_MEM_RESERVE, resolved).",
            s->reserve_bytes);
    cg__u64(o, "collguard_governor_budget_bytes", "gauge",
            "Budget for collguard's buffers: max(0, free - reserve) * "
            "CG_MEM_FRACTION.", s->budget_bytes);
    cg__u64(o, "collguard_governor_fusion_bytes", "gauge",
            "Fusion buffer size the governor allows now.", s->fusion_bytes);
    cg__u64(o, "collguard_governor_chunk_bytes", "gauge",
            "Pipeline chunk size of ring collectives now.", s->chunk_bytes);
    cg__u64(o, "collguard_governor_nccl_buffsize_bytes", "gauge",
            "NCCL_BUFFSIZE the governor would export.", s->nccl_buffsize);
    cg__u64(o, "collguard_governor_pressure_level", "gauge",
            "Memory pressure: 0 ok, 1 warn, 2 critical.",
            (uint64_t)s->pressure);
    cg__dbl(o, "collguard_governor_oom_eta_seconds",
            "Projected seconds to out-of-memory from the slope of used "
            "memory; -1 when none is projected.",
            s->oom_eta_s < 0 ? -1.0 : s->oom_eta_s);
    cg__u64(o, "collguard_governor_early_warnings_total", "counter",
            "Out-of-memory early warnings raised.", s->early_warnings);
    cg__u64(o, "collguard_governor_alloc_failures_total", "counter",
            "Buffer allocations that failed (real or injected), each "
            "recovered by shrinking or reported.", s->alloc_failures);
    cg__per_cat(o, "collguard_memory_current_bytes",
                "Bytes collguard holds now, by category.", s->current_bytes);
    cg__per_cat(o, "collguard_memory_peak_bytes",
                "Most bytes collguard held at once, by category.",
                s->peak_bytes);
}

static void cg__hvd_part(cg__out_t *o, const cg_hvd_stats_t *st)
{
    cg__u64(o, "collguard_hvd_cycles_total", "counter",
            "Negotiation cycles of the Horovod shim's background thread.",
            st->cycles);
    cg__u64(o, "collguard_hvd_allreduce_calls_total", "counter",
            "Collectives issued for allreduces.", st->allreduce_calls);
    cg__u64(o, "collguard_hvd_allreduce_tensors_total", "counter",
            "Tensors those collectives completed.", st->allreduce_tensors);
    cg__u64(o, "collguard_hvd_allgather_calls_total", "counter",
            "Collectives issued for allgathers.", st->allgather_calls);
    cg__u64(o, "collguard_hvd_allgather_tensors_total", "counter",
            "Tensors those collectives completed.", st->allgather_tensors);
    cg__sec(o, "collguard_hvd_negotiate_seconds_total",
            "Background thread time spent agreeing on what is ready.",
            st->negotiate_ns);
    cg__sec(o, "collguard_hvd_execute_seconds_total",
            "Background thread time spent running it (copies, "
            "collectives, completion).", st->execute_ns);
    cg__u64(o, "collguard_hvd_fused_calls_total", "counter",
            "Allreduce collectives that carried more than one tensor.",
            st->fused_calls);
    cg__u64(o, "collguard_hvd_fused_bytes_total", "counter",
            "Bytes those fused collectives carried.", st->fused_bytes);
    cg__u64(o, "collguard_hvd_max_fused_tensors", "gauge",
            "Most tensors one collective carried.", st->max_fused_tensors);
    cg__u64(o, "collguard_hvd_duplicates_total", "counter",
            "Enqueues coalesced onto a name already in flight.",
            st->duplicates);
    cg__u64(o, "collguard_hvd_mismatches_total", "counter",
            "Names failed by cross-rank validation.", st->mismatches);
    cg__u64(o, "collguard_hvd_fusion_buffer_bytes", "gauge",
            "Fusion buffer the ranks agreed on in the last cycle.",
            st->fusion_bytes);
    cg__u64(o, "collguard_hvd_cache_hits_total", "counter",
            "Requests negotiated by a response-cache bit instead of a "
            "record.", st->cache_hits);
    cg__u64(o, "collguard_hvd_full_rounds_total", "counter",
            "Cycles that exchanged full request records.", st->full_rounds);
    cg__u64(o, "collguard_hvd_stalls_warned_total", "counter",
            "Stall warnings: tensors some ranks enqueued and others not.",
            st->stalls_warned);
}

size_t cg_metrics_format(char *buf, size_t len, int rank,
                         const char *probe_name,
                         const cg_governor_snapshot_t *snap,
                         const cg_hvd_stats_t *stats)
{
    cg__out_t o = {.buf = buf, .len = len, .need = 0};

    snprintf(o.labels, sizeof(o.labels), "rank=\"%d\"", rank);
    if (len > 0)
        buf[0] = '\0';
    cg__governor_part(&o, probe_name != NULL ? probe_name : "", snap);
    if (stats != NULL)
        cg__hvd_part(&o, stats);
    return o.need + 1;
}

/* The template with %r replaced by the rank and %% by %. */
static cg_status_t cg__expand(const char *tpl, int rank, char *out,
                              size_t len)
{
    size_t n = 0;

    for (const char *p = tpl; *p != '\0'; p++) {
        int w;
        if (p[0] == '%' && p[1] == 'r')
            w = snprintf(out + n, len - n, "%d", rank);
        else if (p[0] == '%' && p[1] == '%')
            w = snprintf(out + n, len - n, "%%");
        else if (p[0] == '%')
            return cg_error_set(CG_ERR_CONFIG, "CG_METRICS_FILE '%s': "
                                "unknown sequence '%%%.1s'; %%r is the rank, "
                                "%%%% a percent sign", tpl, p + 1);
        else
            w = snprintf(out + n, len - n, "%c", *p);
        if (w < 0 || (size_t)w >= len - n)
            return cg_error_set(CG_ERR_CONFIG, "CG_METRICS_FILE '%s': the "
                                "path is longer than %zu bytes", tpl,
                                len - 1);
        n += (size_t)w;
        p += p[0] == '%';
    }
    if (n == 0)
        return cg_error_set(CG_ERR_CONFIG, "CG_METRICS_FILE is empty");
    return CG_OK;
}

/* A path whose directory is missing or read-only is a configuration
 * error found at start, not a warning every period. */
static cg_status_t cg__check_dir(const cg_metrics_t *m)
{
    FILE *f = fopen(m->tmp, "w");

    if (f == NULL)
        return cg_error_set(CG_ERR_CONFIG, "CG_METRICS_FILE: cannot create "
                            "%s: %s", m->tmp, strerror(errno));
    fclose(f);
    remove(m->tmp);
    return CG_OK;
}

cg_status_t cg_metrics_create(const cg_metrics_params_t *params,
                              cg_metrics_t **metrics_p)
{
    cg_metrics_t *m;
    cg_status_t st;

    if (params == NULL || params->gov == NULL ||
        params->path_template == NULL || metrics_p == NULL)
        return cg_error_set(CG_ERR_INVALID_PARAM, "cg_metrics_create: NULL "
                            "params, governor, path or metrics_p");
    st = cg_governor_alloc(params->gov, CG_MEM_CAT_CONTROL, sizeof(*m),
                           (void **)&m);
    if (st != CG_OK)
        return st;
    memset(m, 0, sizeof(*m));
    m->gov = params->gov;
    m->log = params->log;
    m->rank = params->rank;
    m->period_ns = params->period_ns;
    snprintf(m->probe_name, sizeof(m->probe_name), "%s",
             params->probe_name != NULL ? params->probe_name : "");
    st = cg__expand(params->path_template, m->rank, m->path,
                    sizeof(m->path));
    if (st != CG_OK)
        goto err_free;
    snprintf(m->tmp, sizeof(m->tmp), "%s.tmp.%ld", m->path, (long)getpid());
    st = cg__check_dir(m);
    if (st != CG_OK)
        goto err_free;
    m->buf_len = CG__METRICS_BUF0;
    st = cg_governor_alloc(m->gov, CG_MEM_CAT_CONTROL, m->buf_len,
                           (void **)&m->buf);
    if (st != CG_OK)
        goto err_free;
    *metrics_p = m;
    return CG_OK;

err_free:
    cg_governor_free(params->gov, CG_MEM_CAT_CONTROL, m, sizeof(*m));
    return st;
}

void cg_metrics_destroy(cg_metrics_t *metrics)
{
    if (metrics == NULL)
        return;
    cg_governor_free(metrics->gov, CG_MEM_CAT_CONTROL, metrics->buf,
                     metrics->buf_len);
    cg_governor_free(metrics->gov, CG_MEM_CAT_CONTROL, metrics,
                     sizeof(*metrics));
}

const char *cg_metrics_path(const cg_metrics_t *metrics)
{
    return metrics->path;
}

bool cg_metrics_due(const cg_metrics_t *metrics, uint64_t now_ns)
{
    return !metrics->written || now_ns - metrics->last_ns >=
                                    metrics->period_ns;
}

/* Makes the buffer hold need bytes (the text grows only with labels). */
static cg_status_t cg__reserve(cg_metrics_t *m, size_t need)
{
    size_t len = m->buf_len;
    void *p;
    cg_status_t st;

    while (len < need)
        len *= 2;
    st = cg_governor_alloc(m->gov, CG_MEM_CAT_CONTROL, len, &p);
    if (st != CG_OK)
        return st;
    cg_governor_free(m->gov, CG_MEM_CAT_CONTROL, m->buf, m->buf_len);
    m->buf = p;
    m->buf_len = len;
    return CG_OK;
}

/* Writes the text to the temporary file and renames it over the path. */
static cg_status_t cg__replace(cg_metrics_t *m, size_t n)
{
    FILE *f = fopen(m->tmp, "w");
    int ok;

    if (f == NULL)
        return cg_error_set(CG_ERR_IO, "metrics file %s: cannot create %s: "
                            "%s", m->path, m->tmp, strerror(errno));
    ok = fwrite(m->buf, 1, n, f) == n;
    ok = (fclose(f) == 0) && ok;
    if (!ok) {
        cg_status_t st = cg_error_set(CG_ERR_IO, "metrics file %s: cannot "
                                      "write %s: %s", m->path, m->tmp,
                                      strerror(errno));
        remove(m->tmp);
        return st;
    }
    if (rename(m->tmp, m->path) != 0) {
        cg_status_t st = cg_error_set(CG_ERR_IO, "metrics file %s: rename "
                                      "from %s failed: %s", m->path, m->tmp,
                                      strerror(errno));
        remove(m->tmp);
        return st;
    }
    return CG_OK;
}

cg_status_t cg_metrics_write(cg_metrics_t *metrics,
                             const cg_hvd_stats_t *stats, uint64_t now_ns)
{
    cg_governor_snapshot_t snap;
    size_t need;
    cg_status_t st;

    metrics->written = true;
    metrics->last_ns = now_ns;
    cg_governor_snapshot(metrics->gov, &snap);
    need = cg_metrics_format(metrics->buf, metrics->buf_len, metrics->rank,
                             metrics->probe_name, &snap, stats);
    if (need > metrics->buf_len) {
        st = cg__reserve(metrics, need);
        if (st == CG_OK)
            need = cg_metrics_format(metrics->buf, metrics->buf_len,
                                     metrics->rank, metrics->probe_name,
                                     &snap, stats);
    } else {
        st = CG_OK;
    }
    if (st == CG_OK)
        st = cg__replace(metrics, need - 1);
    if (st != CG_OK && !metrics->failing)
        cg_warn(metrics->log, "%s (CG_METRICS_FILE); retrying every %.3gs",
                cg_last_error(), metrics->period_ns / 1e9);
    else if (st == CG_OK && metrics->failing)
        cg_info(metrics->log, "metrics file %s written again",
                metrics->path);
    metrics->failing = st != CG_OK;
    return st;
}
