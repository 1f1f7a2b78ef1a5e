/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The metrics renderer: one # HELP / # TYPE pair per family, names
 * collguard_* with Prometheus' unit suffixes (_bytes, _seconds, counters
 * ending in _total), a rank label on every series (several ranks' files
 * share node_exporter's textfile directory; several ranks' endpoints share
 * one Prometheus job), a device label on the governor's series when it
 * watches a GPU's memory, no timestamps (the textfile collector rejects
 * them); and the governed buffer both sinks render into.
 * Layer: core/observe; calls the governor and core/base.
 */
#include "core/observe/metrics_format.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "collguard/collguard.h"
#include "core/governor/memacct.h"

#define CG__METRICS_BUF0 32768 /* first text buffer (the text is ~17 KiB with
                                * every series); grows when needed */

/* Text being built: appends while there is room, counts what is needed. */
typedef struct {
    char *buf;
    size_t len, need;
    char labels[160];        /* rank="N" (and device="N"), escaped */
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
    cg__dbl(o, "collguard_governor_early_warning_age_seconds",
            "Seconds since the last out-of-memory early warning; -1 when "
            "none was raised.",
            s->early_warning_age_s < 0 ? -1.0 : s->early_warning_age_s);
    cg__u64(o, "collguard_governor_degrades_total", "counter",
            "Steps that shrank the chunk or fusion size (pressure, early "
            "warning or allocation failure).", s->degrades);
    cg__u64(o, "collguard_governor_alloc_failures_total", "counter",
            "Buffer allocations that failed (real or injected), each "
            "recovered by shrinking or reported.", s->alloc_failures);
    cg__per_cat(o, "collguard_memory_current_bytes",
                "Bytes collguard holds now, by category.", s->current_bytes);
    cg__per_cat(o, "collguard_memory_peak_bytes",
                "Most bytes collguard held at once, by category.",
                s->peak_bytes);
}

static const char *const cg__ops[CG_HVD_OP_TYPES] = {
    "allreduce", "broadcast", "allgather", "reducescatter", "alltoall"};

/* The collective latency histogram, one series set per op: cumulative
 * _bucket{le=...} ending in +Inf (= _count), _sum in seconds. */
static void cg__histogram(cg__out_t *o, const cg_hvd_stats_t *st)
{
    static const double le[CG_HVD_OP_BUCKETS] = CG_HVD_OP_BUCKET_BOUNDS_S;
    const char *name = "collguard_hvd_op_duration_seconds";

    cg__family(o, name, "histogram",
               "Time of one collective (a fused group or a tensor alone), "
               "from its first copy to its completion, by op.");
    for (int op = 0; op < CG_HVD_OP_TYPES; op++) {
        uint64_t cum = 0;
        for (int b = 0; b <= CG_HVD_OP_BUCKETS; b++) {
            cum += st->op_bucket[op][b];
            if (b < CG_HVD_OP_BUCKETS)
                cg__put(o, "%s_bucket{%s,op=\"%s\",le=\"%g\"} %llu\n", name,
                        o->labels, cg__ops[op], le[b],
                        (unsigned long long)cum);
            else
                cg__put(o, "%s_bucket{%s,op=\"%s\",le=\"+Inf\"} %llu\n",
                        name, o->labels, cg__ops[op],
                        (unsigned long long)cum);
        }
        cg__put(o, "%s_sum{%s,op=\"%s\"} %.9f\n", name, o->labels,
                cg__ops[op], (double)st->op_ns[op] / 1e9);
        cg__put(o, "%s_count{%s,op=\"%s\"} %llu\n", name, o->labels,
                cg__ops[op], (unsigned long long)st->op_count[op]);
    }
}

static void cg__op_bytes(cg__out_t *o, const cg_hvd_stats_t *st)
{
    const uint64_t v[CG_HVD_OP_TYPES] = {st->allreduce_bytes,
                                         st->broadcast_bytes,
                                         st->allgather_bytes,
                                         st->reducescatter_bytes,
                                         st->alltoall_bytes};
    const char *name = "collguard_hvd_op_bytes_total";

    cg__family(o, name, "counter",
               "Payload bytes of this rank's tensors by op: reduced, "
               "broadcast, gathered (the whole result), reduce-scattered "
               "and sent by alltoall (the whole input).");
    for (int op = 0; op < CG_HVD_OP_TYPES; op++)
        cg__put(o, "%s{%s,op=\"%s\"} %llu\n", name, o->labels, cg__ops[op],
                (unsigned long long)v[op]);
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
    cg__u64(o, "collguard_hvd_broadcast_calls_total", "counter",
            "Collectives issued for broadcasts.", st->broadcast_calls);
    cg__u64(o, "collguard_hvd_allgather_calls_total", "counter",
            "Collectives issued for allgathers.", st->allgather_calls);
    cg__u64(o, "collguard_hvd_allgather_tensors_total", "counter",
            "Tensors those collectives completed.", st->allgather_tensors);
    cg__u64(o, "collguard_hvd_reducescatter_calls_total", "counter",
            "Collectives issued for reducescatters.",
            st->reducescatter_calls);
    cg__u64(o, "collguard_hvd_reducescatter_tensors_total", "counter",
            "Tensors those collectives completed.",
            st->reducescatter_tensors);
    cg__op_bytes(o, st);
    cg__histogram(o, st);
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
    cg__u64(o, "collguard_hvd_duplicates_refused_total", "counter",
            "Enqueues of a name already in flight refused "
            "(CG_DUPLICATE_POLICY=error, or a different buffer, size or "
            "op).", st->duplicates_refused);
    cg__u64(o, "collguard_hvd_nonleaf_broadcasts_rejected_total", "counter",
            "Broadcasts refused because the tensor requires grad and is "
            "not a leaf.", st->nonleaf_rejected);
    cg__u64(o, "collguard_hvd_mismatches_total", "counter",
            "Names failed by cross-rank validation.", st->mismatches);
    cg__u64(o, "collguard_hvd_fusion_buffer_bytes", "gauge",
            "Fusion buffer the ranks agreed on in the last cycle.",
            st->fusion_bytes);
    cg__u64(o, "collguard_hvd_stage_chunk_bytes", "gauge",
            "Staging chunk of CUDA tensors on a host backend the ranks "
            "agreed on (the least any rank's slots hold; 0: none).",
            st->stage_chunk_bytes);
    cg__u64(o, "collguard_hvd_gpu_backend", "gauge",
            "Backend of CUDA tensors: 0 COLLGUARD, 1 MPI, 2 NCCL, 3 AUTO "
            "not yet chosen (it chooses at the first CUDA collective).",
            st->gpu_backend);
    cg__u64(o, "collguard_hvd_nccl_estimate_bytes", "gauge",
            "AUTO: device memory NCCL's communicator was expected to take "
            "on this rank (CG_NCCL_COST or the estimate).",
            st->nccl_estimate_bytes);
    cg__u64(o, "collguard_hvd_nccl_budget_bytes", "gauge",
            "AUTO: the smallest governor budget of any rank when it chose.",
            st->nccl_budget_bytes);
    cg__u64(o, "collguard_hvd_nccl_create_bytes", "gauge",
            "Device memory NCCL's communicator creation and first use took "
            "on this rank (measured).", st->nccl_create_bytes);
    cg__u64(o, "collguard_hvd_nccl_fallbacks_total", "counter",
            "NCCL communicator creations that failed for memory on some "
            "rank, after which CUDA tensors are staged through COLLGUARD.",
            st->nccl_fallbacks);
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

    if (snap->kind == CG_MEM_KIND_DEVICE && snap->device >= 0)
        snprintf(o.labels, sizeof(o.labels), "rank=\"%d\",device=\"%d\"",
                 rank, snap->device);
    else
        snprintf(o.labels, sizeof(o.labels), "rank=\"%d\"", rank);
    if (len > 0)
        buf[0] = '\0';
    cg__governor_part(&o, probe_name != NULL ? probe_name : "", snap);
    snprintf(o.labels, sizeof(o.labels), "rank=\"%d\"", rank);
    if (stats != NULL)
        cg__hvd_part(&o, stats);
    return o.need + 1;
}

cg_status_t cg_metrics_text_init(cg_metrics_text_t *t, cg_governor_t *gov)
{
    t->gov = gov;
    t->cap = CG__METRICS_BUF0;
    return cg_governor_alloc(gov, CG_MEM_CAT_CONTROL, t->cap,
                             (void **)&t->buf);
}

void cg_metrics_text_cleanup(cg_metrics_text_t *t)
{
    if (t->buf != NULL)
        cg_governor_free(t->gov, CG_MEM_CAT_CONTROL, t->buf, t->cap);
    t->buf = NULL;
    t->cap = 0;
}

/* Makes the buffer hold need bytes (the text grows only with labels). */
static cg_status_t cg__reserve(cg_metrics_text_t *t, size_t need)
{
    size_t cap = t->cap;
    void *p;
    cg_status_t st;

    while (cap < need)
        cap *= 2;
    st = cg_governor_alloc(t->gov, CG_MEM_CAT_CONTROL, cap, &p);
    if (st != CG_OK)
        return st;
    cg_governor_free(t->gov, CG_MEM_CAT_CONTROL, t->buf, t->cap);
    t->buf = p;
    t->cap = cap;
    return CG_OK;
}

cg_status_t cg_metrics_text_render(cg_metrics_text_t *t, int rank,
                                   const char *probe_name,
                                   const cg_hvd_stats_t *stats,
                                   size_t *len_p)
{
    cg_governor_snapshot_t snap;
    size_t need;
    cg_status_t st;

    cg_governor_snapshot(t->gov, &snap);
    need = cg_metrics_format(t->buf, t->cap, rank, probe_name, &snap, stats);
    if (need > t->cap) {
        st = cg__reserve(t, need);
        if (st != CG_OK)
            return st;
        need = cg_metrics_format(t->buf, t->cap, rank, probe_name, &snap,
                                 stats);
    }
    *len_p = need - 1;
    return CG_OK;
}
