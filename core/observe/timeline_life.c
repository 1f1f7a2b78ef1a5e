/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The timeline's life (core/observe/timeline.h): create, start (a new file with
 * process 0's metadata, or the same file continued), flush (one append of
 * the buffered events per call, from the background thread once per
 * cycle), stop (open spans closed, the rest written, the file closed) and
 * destroy. Start and stop come from user threads while events and
 * flushes come from others: see the lock order in timeline_impl.h.
 * Layer: core/observe; calls core/base only.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/time.h>

#include "core/base/error.h"
#include "core/observe/timeline.h"
#include "core/observe/timeline_impl.h"

cg_status_t cg_timeline_create(const cg_timeline_params_t *params,
                               cg_timeline_t **tl_p)
{
    cg_timeline_t *tl;

    if (params == NULL || params->mem.alloc == NULL || tl_p == NULL)
        return cg_error_set(CG_ERR_INVALID_PARAM, "cg_timeline_create: "
                            "params with mem ops and tl_p are required");
    tl = cg_mem_alloc(&params->mem, CG_MEM_CAT_CONTROL, sizeof(*tl));
    if (tl == NULL)
        return CG_ERR_NO_MEMORY;
    memset(tl, 0, sizeof(*tl));
    tl->buckets = cg_mem_alloc(&params->mem, CG_MEM_CAT_CONTROL,
                               CG__TL_BUCKETS * sizeof(cg_list_t));
    if (tl->buckets == NULL) {
        cg_mem_free(&params->mem, CG_MEM_CAT_CONTROL, tl, sizeof(*tl));
        return CG_ERR_NO_MEMORY;
    }
    for (int b = 0; b < CG__TL_BUCKETS; b++)
        cg_list_init(&tl->buckets[b]);
    tl->mem = params->mem;
    tl->log = params->log;
    tl->counter_period_ns = params->counter_period_ns;
    tl->file.fd = -1;
    atomic_init(&tl->running, false);
    pthread_mutex_init(&tl->io_lock, NULL);
    pthread_mutex_init(&tl->lock, NULL);
    *tl_p = tl;
    return CG_OK;
}

/* Under io_lock: ends the file (buffered events written first). */
static void cg__stop(cg_timeline_t *tl, const char *why)
{
    cg__tl_buf_t tmp;
    cg_status_t st;

    pthread_mutex_lock(&tl->lock);
    if (!atomic_load_explicit(&tl->running, memory_order_relaxed)) {
        pthread_mutex_unlock(&tl->lock);
        return;
    }
    cg__tl_close_spans(tl, cg_timeline_now_ns());
    atomic_store(&tl->running, false);
    tmp = tl->cur;
    tl->cur = tl->out;
    tl->out = tmp;
    cg__tl_table_clear(tl);
    cg__tl_buf_free(&tl->cur, &tl->mem);
    pthread_mutex_unlock(&tl->lock);
    st = cg__tl_file_append(&tl->file, &tl->out, &tl->mem);
    if (st != CG_OK)
        cg_error(tl->log, "%s", cg_last_error());
    cg__tl_buf_free(&tl->out, &tl->mem);
    cg__tl_file_close(&tl->file);
    cg_info(tl->log, "timeline %s closed (%s)", tl->file.path, why);
}

cg_status_t cg_timeline_start(cg_timeline_t *tl, const char *path,
                              bool mark_cycles)
{
    struct timeval now;
    char head[512];
    cg_status_t st;
    int n;

    if (path == NULL || path[0] == '\0')
        return cg_error_set(CG_ERR_INVALID_PARAM, "timeline: the file name "
                            "is empty");
    pthread_mutex_lock(&tl->io_lock);
    if (atomic_load(&tl->running) && strcmp(tl->file.path, path) == 0) {
        pthread_mutex_lock(&tl->lock);
        tl->mark_cycles = mark_cycles;
        pthread_mutex_unlock(&tl->lock);
        pthread_mutex_unlock(&tl->io_lock);
        return CG_OK;
    }
    cg__stop(tl, "another file was started");
    gettimeofday(&now, NULL);
    n = snprintf(head, sizeof(head), "[\n{\"name\":\"process_name\",\"ph\":"
                 "\"M\",\"pid\":0,\"args\":{\"name\":\"collguard\","
                 "\"start_time_since_epoch_in_micros\":%lld}},\n{\"name\":"
                 "\"process_sort_index\",\"ph\":\"M\",\"pid\":0,\"args\":"
                 "{\"sort_index\":0}}",
                 (long long)now.tv_sec * 1000000ll + now.tv_usec);
    st = cg__tl_file_open(&tl->file, path, head, (size_t)n);
    if (st == CG_OK) {
        pthread_mutex_lock(&tl->lock);
        tl->start_ns = cg_timeline_now_ns();
        tl->counters_ns = 0;
        tl->next_pid = 0;
        tl->dropping = false;
        tl->mark_cycles = mark_cycles;
        atomic_store(&tl->running, true);
        pthread_mutex_unlock(&tl->lock);
        cg_info(tl->log, "timeline %s started%s", path,
                mark_cycles ? ", marking cycles" : "");
    }
    pthread_mutex_unlock(&tl->io_lock);
    return st;
}

void cg_timeline_stop(cg_timeline_t *tl)
{
    pthread_mutex_lock(&tl->io_lock);
    cg__stop(tl, "stopped");
    pthread_mutex_unlock(&tl->io_lock);
}

bool cg_timeline_running(const cg_timeline_t *tl)
{
    return atomic_load(&((cg_timeline_t *)tl)->running);
}

void cg_timeline_flush(cg_timeline_t *tl)
{
    cg__tl_buf_t tmp;
    cg_status_t st;

    if (!atomic_load_explicit(&tl->running, memory_order_relaxed))
        return;
    pthread_mutex_lock(&tl->io_lock);
    pthread_mutex_lock(&tl->lock);
    if (!atomic_load_explicit(&tl->running, memory_order_relaxed) ||
        tl->cur.len == 0) {
        pthread_mutex_unlock(&tl->lock);
        pthread_mutex_unlock(&tl->io_lock);
        return;
    }
    tmp = tl->cur;
    tl->cur = tl->out;
    tl->out = tmp;
    pthread_mutex_unlock(&tl->lock);
    st = cg__tl_file_append(&tl->file, &tl->out, &tl->mem);
    if (st != CG_OK) {
        cg_error(tl->log, "%s; the timeline stops here", cg_last_error());
        cg__stop(tl, "write error");
    }
    pthread_mutex_unlock(&tl->io_lock);
}

void cg_timeline_destroy(cg_timeline_t *tl)
{
    cg_mem_ops_t mem;

    if (tl == NULL)
        return;
    cg_timeline_stop(tl);
    pthread_mutex_destroy(&tl->lock);
    pthread_mutex_destroy(&tl->io_lock);
    mem = tl->mem;
    cg_mem_free(&mem, CG_MEM_CAT_CONTROL, tl->buckets,
                CG__TL_BUCKETS * sizeof(cg_list_t));
    cg_mem_free(&mem, CG_MEM_CAT_CONTROL, tl, sizeof(*tl));
}
