/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The metrics endpoint (CG_METRICS_PORT, CG_METRICS_ADDR): the text of
 * metrics_format.h served over HTTP by libmicrohttpd from its own thread
 * (GET /metrics only; anything else 404 or 405; requests bounded in size).
 * Built only where CMake found libmicrohttpd. Layer: core/observe; calls
 * the governor, the renderer and core/base; the shim's counters come in
 * through a callback, never by a call up.
 */
#ifndef CG_CORE_METRICS_HTTP_H
#define CG_CORE_METRICS_HTTP_H

#include <stdbool.h>

#include "collguard/hvd.h"
#include "collguard/status.h"
#include "core/base/log.h"
#include "core/governor/governor.h"

typedef struct cg_metrics_http cg_metrics_http_t;

/* Fills *stats with the counters to serve (called on the HTTP thread). */
typedef void (*cg_metrics_stats_fn)(void *arg, cg_hvd_stats_t *stats);

typedef struct cg_metrics_http_params {
    const char *addr;         /* CG_METRICS_ADDR: an IPv4 address */
    int port_base;            /* CG_METRICS_PORT (> 0) */
    int local_rank;           /* served on port_base + local_rank */
    int rank;                 /* the rank label */
    cg_governor_t *gov;       /* snapshots; allocates the text buffer */
    const char *probe_name;
    cg_metrics_stats_fn stats_fn; /* NULL: no shim series */
    void *stats_arg;
    const cg_log_t *log;      /* may be NULL */
} cg_metrics_http_params_t;

/* True when this build has the endpoint (libmicrohttpd was found). */
bool cg_metrics_http_built(void);

/* Listens on addr:port_base+local_rank and starts the HTTP thread.
 * CG_ERR_CONFIG naming CG_METRICS_PORT or CG_METRICS_ADDR for a port
 * above 65535 or a bad address, CG_ERR_IO naming CG_METRICS_PORT when
 * the port cannot be bound (in use, privileged), CG_ERR_UNSUPPORTED in a
 * build without libmicrohttpd; nothing runs then. */
cg_status_t cg_metrics_http_create(const cg_metrics_http_params_t *params,
                                   cg_metrics_http_t **http_p);
/* The port listened on. */
int cg_metrics_http_port(const cg_metrics_http_t *http);
/* Stops the HTTP thread (joined before it returns), closes the socket
 * and frees. NULL: no-op. */
void cg_metrics_http_destroy(cg_metrics_http_t *http);

#endif
