/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The timeline's events (core/observe/timeline.h): each tensor name becomes a
 * trace "process" (pid from 1, announced by process_name/sort_index
 * metadata the first time it appears in a file) whose state (negotiating,
 * operation, activity) keeps its B/E spans balanced; counters and
 * instants go to pid 0. Tensor events, written for every tensor of
 * every cycle, go straight into the buffer without printf; the rare ones
 * (metadata, counters, instants) are formatted on the stack. All under
 * `lock` (see timeline_impl.h). Layer: core/observe; calls core/base only.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "core/base/list.h"
#include "core/observe/timeline.h"
#include "core/observe/timeline_impl.h"

uint64_t cg_timeline_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint64_t cg__hash(const char *s)
{
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (; *s != '\0'; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

/* Under lock: appends one event; a failed allocation drops it (warned
 * once per file). */
static void cg__emit(cg_timeline_t *tl, const char *ev, int n)
{
    if (n > 0 && cg__tl_buf_append(&tl->cur, &tl->mem, ev, (size_t)n))
        return;
    if (!tl->dropping)
        cg_warn(tl->log, "timeline %s: no memory for events (%zu bytes "
                "buffered); dropping events", tl->file.path, tl->cur.len);
    tl->dropping = true;
}

static unsigned long long cg__ts(const cg_timeline_t *tl, uint64_t t_ns)
{
    return t_ns > tl->start_ns ? (t_ns - tl->start_ns) / 1000 : 0;
}

void cg__tl_table_clear(cg_timeline_t *tl)
{
    for (int b = 0; b < CG__TL_BUCKETS; b++) {
        while (!cg_list_empty(&tl->buckets[b])) {
            cg__tl_tensor_t *t = cg_list_entry(tl->buckets[b].next,
                                               cg__tl_tensor_t, link);
            cg_list_del(&t->link);
            cg_mem_free(&tl->mem, CG_MEM_CAT_CONTROL, t, t->size);
        }
    }
}

/* Under lock: the tensor's entry; create: made (with its metadata
 * events) when missing. NULL when missing or out of memory. */
static cg__tl_tensor_t *cg__tensor(cg_timeline_t *tl, const char *name,
                                   bool create)
{
    uint64_t h = cg__hash(name);
    cg_list_t *head = &tl->buckets[h % CG__TL_BUCKETS];
    char cut[256], esc[CG_JSON_ESCAPED_MAX(256)], ev[sizeof(esc) + 256];
    cg__tl_tensor_t *t;
    size_t len = strlen(name), size;
    int n;

    for (cg_list_t *it = head->next; it != head; it = it->next) {
        t = cg_list_entry(it, cg__tl_tensor_t, link);
        if (t->hash == h && strcmp(t->name, name) == 0)
            return t;
    }
    if (!create)
        return NULL;
    size = sizeof(*t) + len + 1;
    t = cg_mem_alloc(&tl->mem, CG_MEM_CAT_CONTROL, size);
    if (t == NULL) {
        cg__emit(tl, NULL, -1);
        return NULL;
    }
    t->hash = h;
    t->size = size;
    t->pid = ++tl->next_pid;
    t->state = CG__TS_NONE;
    t->last_ts = 0;
    t->last_ph = 'E';
    memcpy(t->name, name, len + 1);
    cg_list_push(head, &t->link);
    /* Names longer than 255 bytes are shown cut. */
    snprintf(cut, sizeof(cut), "%s", name);
    cg_json_escape(esc, sizeof(esc), cut);
    n = snprintf(ev, sizeof(ev), ",\n{\"name\":\"process_name\",\"ph\":\"M\","
                 "\"pid\":%d,\"args\":{\"name\":\"%s\"}},\n{\"name\":"
                 "\"process_sort_index\",\"ph\":\"M\",\"pid\":%d,\"args\":"
                 "{\"sort_index\":%d}}", t->pid, esc, t->pid, t->pid);
    cg__emit(tl, ev, n);
    return t;
}

/* Appends s at w (the caller reserved room); returns the new end. */
static char *cg__put(char *w, const char *s, size_t n)
{
    memcpy(w, s, n);
    return w + n;
}

#define CG__PUT(w, lit) cg__put((w), (lit), sizeof(lit) - 1)

static char *cg__put_u64(char *w, unsigned long long v)
{
    char d[20];
    int n = 0;

    do {
        d[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v != 0);
    while (n > 0)
        *w++ = d[--n];
    return w;
}

/* Room for one tensor event: its fixed text, an escaped name of at most
 * CG__NAME_ROOM bytes and args of at most CG__ARGS_ROOM. */
#define CG__NAME_ROOM 200
#define CG__ARGS_ROOM 400
#define CG__EVENT_ROOM (CG__NAME_ROOM + CG__ARGS_ROOM + 160)

/* Perfetto sorts the events of one timestamp E first, then X, then the
 * rest (its trace_sorter), whatever their order in the file. */
static int cg__ph_order(char ph)
{
    return ph == 'E' ? 0 : ph == 'X' ? 1 : 2;
}

/* Under lock: one event of tensor t (ph B, E or X), written straight into
 * the buffer (this runs for every tensor of every cycle: no printf). On
 * each track timestamps never go back, and an event that Perfetto would
 * sort ahead of the one before it in the same microsecond moves one
 * microsecond later: else a cached negotiation (B, rank ticks and E in one
 * microsecond) would have its E close another span and its ticks drawn
 * outside it. */
static void cg__event(cg_timeline_t *tl, cg__tl_tensor_t *t, char ph,
                      const char *what, const char *args, uint64_t t_ns)
{
    unsigned long long ts = cg__ts(tl, t_ns);
    char *w, *start;

    if (ts < t->last_ts)
        ts = t->last_ts;
    if (ts == t->last_ts && cg__ph_order(ph) < cg__ph_order(t->last_ph))
        ts++;
    t->last_ts = ts;
    t->last_ph = ph;
    if (!cg__tl_buf_reserve(&tl->cur, &tl->mem, CG__EVENT_ROOM)) {
        cg__emit(tl, NULL, -1);
        return;
    }
    w = start = tl->cur.p + tl->cur.len;
    w = CG__PUT(w, ",\n{\"ph\":\"");
    *w++ = ph;
    *w++ = '"';
    if (what != NULL) {
        w = CG__PUT(w, ",\"name\":\"");
        w += cg_json_escape(w, CG__NAME_ROOM, what);
        *w++ = '"';
    }
    w = CG__PUT(w, ",\"ts\":");
    w = cg__put_u64(w, ts);
    w = CG__PUT(w, ",\"pid\":");
    w = cg__put_u64(w, (unsigned long long)t->pid);
    w = CG__PUT(w, ",\"tid\":0");
    if (ph == 'X')
        w = CG__PUT(w, ",\"dur\":0");
    if (args != NULL) {
        size_t n = strnlen(args, CG__ARGS_ROOM);
        w = CG__PUT(w, ",\"args\":{");
        w = cg__put(w, args, n);
        *w++ = '}';
    }
    *w++ = '}';
    tl->cur.len += (size_t)(w - start);
}

/* Locks and finds the tensor when running; NULL (unlocked) otherwise. */
static cg__tl_tensor_t *cg__begin(cg_timeline_t *tl, const char *name,
                                  bool create)
{
    cg__tl_tensor_t *t;

    if (!atomic_load_explicit(&tl->running, memory_order_relaxed))
        return NULL;
    pthread_mutex_lock(&tl->lock);
    t = atomic_load_explicit(&tl->running, memory_order_relaxed)
            ? cg__tensor(tl, name, create)
            : NULL;
    if (t == NULL)
        pthread_mutex_unlock(&tl->lock);
    return t;
}

void cg_timeline_negotiate_start(cg_timeline_t *tl, const char *name,
                                 const char *op, uint64_t t_ns)
{
    cg__tl_tensor_t *t = cg__begin(tl, name, true);
    char what[64] = "NEGOTIATE_";
    size_t n = strnlen(op, sizeof(what) - 11);

    if (t == NULL)
        return;
    if (t->state == CG__TS_NONE) {
        memcpy(what + 10, op, n);
        what[10 + n] = '\0';
        cg__event(tl, t, 'B', what, NULL, t_ns);
        t->state = CG__TS_NEGOTIATING;
    }
    pthread_mutex_unlock(&tl->lock);
}

void cg_timeline_negotiate_rank(cg_timeline_t *tl, const char *name,
                                int rank, uint64_t t_ns)
{
    cg__tl_tensor_t *t = cg__begin(tl, name, false);
    char what[24];

    if (t == NULL)
        return;
    if (t->state == CG__TS_NEGOTIATING) {
        *cg__put_u64(what, (unsigned long long)(rank < 0 ? 0 : rank)) = '\0';
        cg__event(tl, t, 'X', what, NULL, t_ns);
    }
    pthread_mutex_unlock(&tl->lock);
}

void cg_timeline_negotiate_end(cg_timeline_t *tl, const char *name,
                               uint64_t t_ns)
{
    cg__tl_tensor_t *t = cg__begin(tl, name, false);

    if (t == NULL)
        return;
    if (t->state == CG__TS_NEGOTIATING) {
        cg__event(tl, t, 'E', NULL, NULL, t_ns);
        t->state = CG__TS_NONE;
    }
    pthread_mutex_unlock(&tl->lock);
}

void cg_timeline_op_start(cg_timeline_t *tl, const char *name, const char *op,
                          uint64_t t_ns)
{
    cg__tl_tensor_t *t = cg__begin(tl, name, true);

    if (t == NULL)
        return;
    if (t->state == CG__TS_NONE) {
        cg__event(tl, t, 'B', op, NULL, t_ns);
        t->state = CG__TS_OP;
    }
    pthread_mutex_unlock(&tl->lock);
}

/* Under lock: ends the tensor's open activity, if any (back to its op). */
static void cg__activity_close(cg_timeline_t *tl, cg__tl_tensor_t *t,
                               uint64_t t_ns)
{
    if (t->state == CG__TS_ACTIVITY) {
        cg__event(tl, t, 'E', NULL, NULL, t_ns);
        t->state = CG__TS_OP;
    }
}

void cg_timeline_activity_start(cg_timeline_t *tl, const char *name,
                                const char *activity, uint64_t t_ns)
{
    cg__tl_tensor_t *t = cg__begin(tl, name, false);

    if (t == NULL)
        return;
    cg__activity_close(tl, t, t_ns);
    if (t->state == CG__TS_OP) {
        cg__event(tl, t, 'B', activity, NULL, t_ns);
        t->state = CG__TS_ACTIVITY;
    }
    pthread_mutex_unlock(&tl->lock);
}

void cg_timeline_activity_end(cg_timeline_t *tl, const char *name,
                              uint64_t t_ns)
{
    cg__tl_tensor_t *t = cg__begin(tl, name, false);

    if (t == NULL)
        return;
    cg__activity_close(tl, t, t_ns);
    pthread_mutex_unlock(&tl->lock);
}

void cg_timeline_op_end(cg_timeline_t *tl, const char *name,
                        const char *dtype, const char *shape, uint64_t t_ns)
{
    cg__tl_tensor_t *t = cg__begin(tl, name, false);
    char args[CG__ARGS_ROOM], *w = args;

    if (t == NULL)
        return;
    cg__activity_close(tl, t, t_ns);
    if (t->state == CG__TS_OP) {
        /* "dtype":"...","shape":"..." (each escaped, cut to fit). */
        w = CG__PUT(w, "\"dtype\":\"");
        w += cg_json_escape(w, 64, dtype != NULL ? dtype : "");
        w = CG__PUT(w, "\",\"shape\":\"");
        w += cg_json_escape(w, 256, shape != NULL ? shape : "");
        *w++ = '"';
        *w = '\0';
        cg__event(tl, t, 'E', NULL, dtype != NULL ? args : NULL, t_ns);
        t->state = CG__TS_NONE;
    }
    pthread_mutex_unlock(&tl->lock);
}

/* Under lock: a global instant on pid 0. */
static void cg__instant(cg_timeline_t *tl, const char *name,
                        const char *args, uint64_t t_ns)
{
    char ev[1024];
    int n = snprintf(ev, sizeof(ev), ",\n{\"name\":\"%s\",\"ph\":\"i\","
                     "\"s\":\"g\",\"ts\":%llu,\"pid\":0,\"tid\":0%s%s%s}",
                     name, cg__ts(tl, t_ns), args != NULL ? ",\"args\":{" : "",
                     args != NULL ? args : "", args != NULL ? "}" : "");
    cg__emit(tl, ev, n < (int)sizeof(ev) ? n : -1);
}

void cg_timeline_instant(cg_timeline_t *tl, const char *name,
                         const char *args_json, uint64_t t_ns)
{
    if (!atomic_load_explicit(&tl->running, memory_order_relaxed))
        return;
    pthread_mutex_lock(&tl->lock);
    if (atomic_load_explicit(&tl->running, memory_order_relaxed))
        cg__instant(tl, name, args_json, t_ns);
    pthread_mutex_unlock(&tl->lock);
}

void cg_timeline_cycle_start(cg_timeline_t *tl, uint64_t t_ns)
{
    if (!atomic_load_explicit(&tl->running, memory_order_relaxed))
        return;
    pthread_mutex_lock(&tl->lock);
    if (atomic_load_explicit(&tl->running, memory_order_relaxed) &&
        tl->mark_cycles)
        cg__instant(tl, "CYCLE_START", NULL, t_ns);
    pthread_mutex_unlock(&tl->lock);
}

bool cg_timeline_counters_due(cg_timeline_t *tl, uint64_t t_ns)
{
    bool due;

    if (!atomic_load_explicit(&tl->running, memory_order_relaxed))
        return false;
    pthread_mutex_lock(&tl->lock);
    due = tl->counters_ns == 0 ||
          t_ns - tl->counters_ns >= tl->counter_period_ns;
    pthread_mutex_unlock(&tl->lock);
    return due;
}

void cg_timeline_counters(cg_timeline_t *tl, const cg_timeline_counters_t *c,
                          uint64_t t_ns)
{
    unsigned long long ts;
    char ev[768];
    int n;

    if (!atomic_load_explicit(&tl->running, memory_order_relaxed))
        return;
    pthread_mutex_lock(&tl->lock);
    if (atomic_load_explicit(&tl->running, memory_order_relaxed)) {
        ts = cg__ts(tl, t_ns);
        n = snprintf(ev, sizeof(ev),
                     ",\n{\"name\":\"free_memory\",\"ph\":\"C\",\"ts\":%llu,"
                     "\"pid\":0,\"tid\":0,\"args\":{\"%s\":%llu}},"
                     "\n{\"name\":\"governor\",\"ph\":\"C\",\"ts\":%llu,"
                     "\"pid\":0,\"tid\":0,\"args\":{\"budget\":%llu,"
                     "\"fusion_buffer\":%llu,\"chunk\":%llu}},"
                     "\n{\"name\":\"pressure\",\"ph\":\"C\",\"ts\":%llu,"
                     "\"pid\":0,\"tid\":0,\"args\":{\"level\":%d}}",
                     ts, c->kind == CG_MEM_KIND_DEVICE ? "device" : "host",
                     (unsigned long long)c->free_bytes, ts,
                     (unsigned long long)c->budget_bytes,
                     (unsigned long long)c->fusion_bytes,
                     (unsigned long long)c->chunk_bytes, ts, (int)c->pressure);
        cg__emit(tl, ev, n < (int)sizeof(ev) ? n : -1);
        tl->counters_ns = t_ns ? t_ns : 1;
    }
    pthread_mutex_unlock(&tl->lock);
}

/* Under lock: ends the spans still open (a stop while an operation
 * runs), so the file is balanced. */
void cg__tl_close_spans(cg_timeline_t *tl, uint64_t t_ns)
{
    for (int b = 0; b < CG__TL_BUCKETS; b++) {
        for (cg_list_t *it = tl->buckets[b].next; it != &tl->buckets[b];
             it = it->next) {
            cg__tl_tensor_t *t = cg_list_entry(it, cg__tl_tensor_t, link);
            int open = t->state == CG__TS_ACTIVITY ? 2
                       : t->state == CG__TS_NONE  ? 0
                                                  : 1;
            for (int k = 0; k < open; k++)
                cg__event(tl, t, 'E', NULL, NULL, t_ns);
            t->state = CG__TS_NONE;
        }
    }
}
