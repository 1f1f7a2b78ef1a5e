/* SPDX-License-Identifier: Apache-2.0 */
/* Public logging types: levels and the sink callback a host program (or the
 * NCCL plugins) may install to receive collguard's log lines. */
#ifndef COLLGUARD_LOG_H
#define COLLGUARD_LOG_H

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    CG_LOG_NONE = 0,
    CG_LOG_ERROR = 1,
    CG_LOG_WARN = 2,
    CG_LOG_INFO = 3,
    CG_LOG_DEBUG = 4,
    CG_LOG_TRACE = 5
} cg_log_level_t;

/* Receives one complete line (no trailing newline), already prefixed. */
typedef void (*cg_log_sink_fn)(void *arg, cg_log_level_t level,
                               const char *line);

#ifdef __cplusplus
}
#endif
#endif
