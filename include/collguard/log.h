/* SPDX-License-Identifier: Apache-2.0 */
/* Public logging types: levels and the sink callback a host program (or the
 * NCCL plugins) may install to receive collguard's log lines. */
#ifndef COLLGUARD_LOG_H
#define COLLGUARD_LOG_H

#ifdef __cplusplus
extern "C" {
#endif

/* The levels, 0 (NONE) to 5 (TRACE): X(enumerator, name, tag), the name
 * CG_LOG_LEVEL takes (any case) and the tag log lines carry. */
#define CG_LOG_LEVEL_MAP(X)            \
    X(CG_LOG_NONE, "none", "NONE")     \
    X(CG_LOG_ERROR, "error", "ERROR")  \
    X(CG_LOG_WARN, "warn", "WARN")     \
    X(CG_LOG_INFO, "info", "INFO")     \
    X(CG_LOG_DEBUG, "debug", "DEBUG")  \
    X(CG_LOG_TRACE, "trace", "TRACE")

typedef enum {
#define CG__LOG_LEVEL_ENUM(e, name, tag) e,
    CG_LOG_LEVEL_MAP(CG__LOG_LEVEL_ENUM)
#undef CG__LOG_LEVEL_ENUM
} cg_log_level_t;

/* Receives one complete line (no trailing newline), already prefixed. */
typedef void (*cg_log_sink_fn)(void *arg, cg_log_level_t level,
                               const char *line);

#ifdef __cplusplus
}
#endif
#endif
