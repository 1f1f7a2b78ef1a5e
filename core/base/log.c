/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Log line formatting, the default stderr sink and the message sink. A
 * line is built whole and written with one write(2), so lines from several
 * ranks sharing a terminal do not interleave. Part of core/base; calls nothing.
 */
#include "core/base/log.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define LEVEL_TAG(e, name, tag) tag,
static const char *const level_names[] = {CG_LOG_LEVEL_MAP(LEVEL_TAG)};
#undef LEVEL_TAG

void cg_log_init(cg_log_t *log, cg_log_level_t level, int rank)
{
    log->level = level;
    log->rank = rank;
    log->sink = NULL;
    log->sink_arg = NULL;
    log->msg_sink = NULL;
    log->msg_sink_arg = NULL;
}

void cg_log_set_sink(cg_log_t *log, cg_log_sink_fn sink, void *arg)
{
    log->sink = sink;
    log->sink_arg = arg;
}

void cg_log_set_msg_sink(cg_log_t *log, cg_log_msg_sink_fn sink, void *arg)
{
    log->msg_sink = sink;
    log->msg_sink_arg = arg;
}

void cg_log_write(const cg_log_t *log, cg_log_level_t level, const char *file,
                  int line, const char *fmt, ...)
{
    char buf[1024];
    int saved_errno = errno; /* callers may log "%m" after us */
    const char *base = strrchr(file, '/');
    size_t n;
    va_list ap;

    base = base ? base + 1 : file;
    if (log->msg_sink != NULL) /* the host logger writes its own prefix */
        n = 0;
    else if (log->rank >= 0)
        n = (size_t)snprintf(buf, sizeof(buf), "[collguard %d:%d] %s %s:%d ",
                             log->rank, (int)getpid(), level_names[level],
                             base, line);
    else
        n = (size_t)snprintf(buf, sizeof(buf), "[collguard -:%d] %s %s:%d ",
                             (int)getpid(), level_names[level], base, line);
    if (n >= sizeof(buf))
        n = sizeof(buf) - 1;
    va_start(ap, fmt);
    errno = saved_errno;
    vsnprintf(buf + n, sizeof(buf) - n, fmt, ap);
    va_end(ap);
    errno = saved_errno;

    if (log->msg_sink != NULL) {
        log->msg_sink(log->msg_sink_arg, level, base, line, buf);
        return;
    }
    if (log->sink != NULL) {
        log->sink(log->sink_arg, level, buf);
        return;
    }
    n = strlen(buf);
    if (n > sizeof(buf) - 2)
        n = sizeof(buf) - 2;
    buf[n++] = '\n';
    ssize_t w = write(STDERR_FILENO, buf, n);
    (void)w;
}
