/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Leveled logging: cg_error .. cg_trace test the level before formatting, so
 * a disabled level costs one compare. One line per event, prefixed with the
 * rank; the sink is pluggable (stderr by default), or a message sink takes
 * the unprefixed message with file and line (NCCL's logger inside the NCCL
 * plugins, which prefixes lines itself). A cg_log_t lives in the owning
 * context; no globals.
 * Part of core/base; calls nothing.
 */
#ifndef CG_BASE_LOG_H
#define CG_BASE_LOG_H

#include "collguard/log.h"

/* A sink for a host logger that writes its own prefix (NCCL's): the
 * message alone, with the source file's base name and line. */
typedef void (*cg_log_msg_sink_fn)(void *arg, cg_log_level_t level,
                                   const char *file, int line,
                                   const char *msg);

typedef struct cg_log {
    cg_log_level_t level;
    int rank;                 /* -1 until bootstrap knows it */
    cg_log_sink_fn sink;      /* NULL: stderr */
    void *sink_arg;
    cg_log_msg_sink_fn msg_sink; /* when set, takes the place of sink */
    void *msg_sink_arg;
} cg_log_t;

void cg_log_init(cg_log_t *log, cg_log_level_t level, int rank);
void cg_log_set_sink(cg_log_t *log, cg_log_sink_fn sink, void *arg);
void cg_log_set_msg_sink(cg_log_t *log, cg_log_msg_sink_fn sink, void *arg);

void cg_log_write(const cg_log_t *log, cg_log_level_t level, const char *file,
                  int line, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

#define cg_log_enabled(log, lvl) ((log) != NULL && (lvl) <= (log)->level)
#define cg_log_at(log, lvl, ...)                                             \
    do {                                                                     \
        if (cg_log_enabled(log, lvl))                                        \
            cg_log_write(log, lvl, __FILE__, __LINE__, __VA_ARGS__);         \
    } while (0)

#define cg_error(log, ...) cg_log_at(log, CG_LOG_ERROR, __VA_ARGS__)
#define cg_warn(log, ...)  cg_log_at(log, CG_LOG_WARN, __VA_ARGS__)
#define cg_info(log, ...)  cg_log_at(log, CG_LOG_INFO, __VA_ARGS__)
#define cg_debug(log, ...) cg_log_at(log, CG_LOG_DEBUG, __VA_ARGS__)
#define cg_trace(log, ...) cg_log_at(log, CG_LOG_TRACE, __VA_ARGS__)

#endif
