/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Internals of the timeline (core/observe/timeline.h) shared by its three
 * files: the object and its tensor table (events: timeline.c; start,
 * stop, flush: timeline_life.c), the growable event buffer and the trace
 * file that stays a valid JSON array after every append
 * (timeline_writer.c). Locks: `lock` guards the event buffer, the tensor
 * table and the fields after it (held for one append); `io_lock` guards
 * the file (start, stop, flush) and is taken before `lock`, so a flush
 * swaps buffers under `lock` and writes without it. Layer: core/observe; calls
 * core/base only.
 */
#ifndef CG_CORE_TIMELINE_IMPL_H
#define CG_CORE_TIMELINE_IMPL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "collguard/status.h"
#include "core/observe/timeline.h"
#include "core/base/list.h"
#include "core/base/log.h"
#include "core/base/mem.h"

/* Bytes of events, allocated through mem (CONTROL). */
typedef struct cg__tl_buf {
    char *p;
    size_t len, cap;
} cg__tl_buf_t;

/* Appends n bytes, growing by doubling; false when the allocation
 * fails (the buffer is unchanged). */
bool cg__tl_buf_append(cg__tl_buf_t *b, const cg_mem_ops_t *mem, const char *s,
                       size_t n);
/* Makes room for n more bytes at p + len (len unchanged); false when the
 * allocation fails. */
bool cg__tl_buf_reserve(cg__tl_buf_t *b, const cg_mem_ops_t *mem, size_t n);
void cg__tl_buf_free(cg__tl_buf_t *b, const cg_mem_ops_t *mem);

/* The trace file: "[" events "\n]", where off is the offset of the
 * closing "\n]" that the next append overwrites. */
typedef struct cg__tl_file {
    int fd; /* -1: closed */
    uint64_t off;
    char path[1024];
} cg__tl_file_t;

/* Creates (truncates) path and writes head, a JSON array's opening and
 * first element(s) without the closing "\n]", followed by "\n]". */
cg_status_t cg__tl_file_open(cg__tl_file_t *f, const char *path,
                             const char *head, size_t head_len);
/* Writes b's events (each starting with ",\n") and "\n]" at off with one
 * pwrite (b must have room for 2 more bytes: cg__tl_buf_append of 2 bytes
 * is done here); empties b. CG_ERR_IO with errno text on failure. */
cg_status_t cg__tl_file_append(cg__tl_file_t *f, cg__tl_buf_t *b,
                               const cg_mem_ops_t *mem);
void cg__tl_file_close(cg__tl_file_t *f);

#define CG__TL_BUCKETS 1024

typedef enum {
    CG__TS_NONE = 0,
    CG__TS_NEGOTIATING,
    CG__TS_OP,
    CG__TS_ACTIVITY
} cg__tl_state_t;

typedef struct cg__tl_tensor {
    cg_list_t link;
    uint64_t hash;
    size_t size; /* of this allocation */
    int pid;
    cg__tl_state_t state;
    /* The last event written on its track (see cg__event): timestamps
     * never go back, and an E never shares one with a B or X before it. */
    unsigned long long last_ts;
    char last_ph;
    char name[];
} cg__tl_tensor_t;

struct cg_timeline {
    cg_mem_ops_t mem;
    const cg_log_t *log;
    uint64_t counter_period_ns;
    atomic_bool running;     /* read without a lock by the fast path */
    pthread_mutex_t io_lock; /* file */
    pthread_mutex_t lock;    /* cur, table, the fields below */
    cg__tl_buf_t cur, out;    /* out: under io_lock, being written */
    cg__tl_file_t file;
    bool mark_cycles;
    bool dropping;           /* an append failed: warned once */
    uint64_t start_ns;
    uint64_t counters_ns;    /* last counters; 0: none yet */
    int next_pid;
    cg_list_t *buckets;      /* CG__TL_BUCKETS heads */
};

/* timeline.c, under lock: frees the tensor table; ends the spans still
 * open (at a stop or a switch of file, so each file is balanced). */
void cg__tl_table_clear(cg_timeline_t *tl);
void cg__tl_close_spans(cg_timeline_t *tl, uint64_t t_ns);

#endif
