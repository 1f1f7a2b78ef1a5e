/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The metrics endpoint over libmicrohttpd: this file binds the listening
 * socket itself (so a port in use is reported with its errno and the
 * variable to change), hands it to one libmicrohttpd daemon with an
 * internal polling thread, and answers GET /metrics with the renderer's
 * text; 405 for any other method, 404 for any other path, and
 * libmicrohttpd's own 4xx for a request larger than its per-connection
 * memory. Layer: core/observe; calls the governor, the renderer and
 * core/base.
 */
#include "core/observe/metrics_http.h"

#include "cg_build.h"
#include "core/base/error.h"

#if CG_HAVE_MICROHTTPD

#include <arpa/inet.h>
#include <errno.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/observe/metrics_format.h"

/* Bytes libmicrohttpd may use per connection: the request line and
 * headers must fit (a scrape sends about 200). */
#define CG__HTTP_CONN_MEMORY (16u << 10)
#define CG__HTTP_MAX_CONNS 16u
#define CG__HTTP_TIMEOUT_S 10u

struct cg_metrics_http {
    cg_governor_t *gov;
    const cg_log_t *log;
    int rank, port;
    char probe_name[64];
    cg_metrics_stats_fn stats_fn;
    void *stats_arg;
    struct MHD_Daemon *daemon;
    cg_metrics_text_t text;   /* the HTTP thread's alone */
    cg_hvd_stats_t stats;     /* likewise */
};

static const char cg__not_found[] = "only /metrics is served here\n";
static const char cg__not_allowed[] = "only GET is answered here\n";

bool cg_metrics_http_built(void)
{
    return true;
}

static enum MHD_Result cg__reply(struct MHD_Connection *conn,
                                 unsigned int code, const char *body,
                                 size_t len, enum MHD_ResponseMemoryMode mode)
{
    struct MHD_Response *r = MHD_create_response_from_buffer(len, (void *)body,
                                                             mode);
    enum MHD_Result ret;

    if (r == NULL)
        return MHD_NO; /* libmicrohttpd closes the connection */
    if (code == MHD_HTTP_OK)
        (void)MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE,
                                      "text/plain; version=0.0.4; "
                                      "charset=utf-8");
    else
        (void)MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE,
                                      "text/plain; charset=utf-8");
    if (code == MHD_HTTP_METHOD_NOT_ALLOWED)
        (void)MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW, "GET");
    ret = MHD_queue_response(conn, code, r);
    MHD_destroy_response(r);
    return ret;
}

/* libmicrohttpd's request callback, on its thread. Answers at the first
 * call, before any request body is read. */
static enum MHD_Result cg__answer(void *cls, struct MHD_Connection *conn,
                                  const char *url, const char *method,
                                  const char *version, const char *upload,
                                  size_t *upload_len, void **req_cls)
{
    cg_metrics_http_t *h = cls;
    size_t n;

    (void)version;
    (void)upload;
    (void)upload_len;
    (void)req_cls;
    if (strcmp(method, MHD_HTTP_METHOD_GET) != 0)
        return cg__reply(conn, MHD_HTTP_METHOD_NOT_ALLOWED, cg__not_allowed,
                         sizeof(cg__not_allowed) - 1,
                         MHD_RESPMEM_PERSISTENT);
    if (strcmp(url, "/metrics") != 0)
        return cg__reply(conn, MHD_HTTP_NOT_FOUND, cg__not_found,
                         sizeof(cg__not_found) - 1, MHD_RESPMEM_PERSISTENT);
    if (h->stats_fn != NULL)
        h->stats_fn(h->stats_arg, &h->stats);
    if (cg_metrics_text_render(&h->text, h->rank, h->probe_name,
                               h->stats_fn != NULL ? &h->stats : NULL,
                               &n) != CG_OK) {
        cg_warn(h->log, "metrics endpoint: %s", cg_last_error());
        return MHD_NO;
    }
    return cg__reply(conn, MHD_HTTP_OK, h->text.buf, n,
                     MHD_RESPMEM_MUST_COPY);
}

/* The listening socket on addr:port into *fd_p. */
static cg_status_t cg__listen(const char *addr, int port, int base,
                              int local_rank, int *fd_p)
{
    struct sockaddr_in sa;
    int fd, one = 1, err;

    memset(&sa, 0, sizeof(sa));
    sa.sin_family = AF_INET;
    sa.sin_port = htons((uint16_t)port);
    if (inet_pton(AF_INET, addr, &sa.sin_addr) != 1) {
        return cg_error_set(CG_ERR_CONFIG, "CG_METRICS_ADDR '%s' is not "
                            "an IPv4 address (127.0.0.1, 0.0.0.0)", addr);
    }
    fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return cg_error_set(CG_ERR_IO, "CG_METRICS_PORT: socket: %s",
                            strerror(errno));
    (void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 ||
        listen(fd, 16) != 0) {
        err = errno;
        close(fd);
        return cg_error_set(CG_ERR_IO, "CG_METRICS_PORT=%d: cannot listen "
                            "on %s:%d (%d + local rank %d): %s; choose "
                            "another CG_METRICS_PORT", base, addr, port, base,
                            local_rank, strerror(err));
    }
    *fd_p = fd;
    return CG_OK;
}

cg_status_t cg_metrics_http_create(const cg_metrics_http_params_t *params,
                                   cg_metrics_http_t **http_p)
{
    const cg_metrics_http_params_t *p = params;
    cg_metrics_http_t *h;
    cg_status_t st;
    int port, fd = -1;

    if (p == NULL || p->gov == NULL || p->addr == NULL || http_p == NULL)
        return cg_error_set(CG_ERR_INVALID_PARAM, "cg_metrics_http_create: "
                            "NULL params, governor, address or http_p");
    port = p->port_base + p->local_rank;
    if (p->port_base <= 0 || p->local_rank < 0 || port > 65535)
        return cg_error_set(CG_ERR_CONFIG, "CG_METRICS_PORT=%d: local rank "
                            "%d would listen on port %d, outside 1-65535; "
                            "choose a base port at most %d", p->port_base,
                            p->local_rank, port, 65535 - p->local_rank);
    st = cg__listen(p->addr, port, p->port_base, p->local_rank, &fd);
    if (st != CG_OK)
        return st;
    st = cg_governor_alloc(p->gov, CG_MEM_CAT_CONTROL, sizeof(*h),
                           (void **)&h);
    if (st != CG_OK)
        goto err_close;
    memset(h, 0, sizeof(*h));
    h->gov = p->gov;
    h->log = p->log;
    h->rank = p->rank;
    h->port = port;
    h->stats_fn = p->stats_fn;
    h->stats_arg = p->stats_arg;
    snprintf(h->probe_name, sizeof(h->probe_name), "%s",
             p->probe_name != NULL ? p->probe_name : "");
    st = cg_metrics_text_init(&h->text, h->gov);
    if (st != CG_OK)
        goto err_free;
    h->daemon = MHD_start_daemon(
        MHD_USE_AUTO_INTERNAL_THREAD, 0, NULL, NULL, cg__answer, h,
        MHD_OPTION_LISTEN_SOCKET, (MHD_socket)fd,
        MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)CG__HTTP_CONN_MEMORY,
        MHD_OPTION_CONNECTION_LIMIT, CG__HTTP_MAX_CONNS,
        MHD_OPTION_CONNECTION_TIMEOUT, CG__HTTP_TIMEOUT_S,
        MHD_OPTION_END);
    if (h->daemon == NULL) {
        st = cg_error_set(CG_ERR_IO, "CG_METRICS_PORT=%d: libmicrohttpd "
                          "could not start on %s:%d", p->port_base, p->addr,
                          port);
        goto err_text;
    }
    *http_p = h;
    return CG_OK;

err_text:
    cg_metrics_text_cleanup(&h->text);
err_free:
    cg_governor_free(p->gov, CG_MEM_CAT_CONTROL, h, sizeof(*h));
err_close:
    close(fd);
    return st;
}

int cg_metrics_http_port(const cg_metrics_http_t *http)
{
    return http->port;
}

void cg_metrics_http_destroy(cg_metrics_http_t *http)
{
    if (http == NULL)
        return;
    MHD_stop_daemon(http->daemon); /* joins its thread, closes the socket */
    cg_metrics_text_cleanup(&http->text);
    cg_governor_free(http->gov, CG_MEM_CAT_CONTROL, http, sizeof(*http));
}

#else /* !CG_HAVE_MICROHTTPD */

bool cg_metrics_http_built(void)
{
    return false;
}

cg_status_t cg_metrics_http_create(const cg_metrics_http_params_t *params,
                                   cg_metrics_http_t **http_p)
{
    (void)params;
    (void)http_p;
    return cg_error_set(CG_ERR_UNSUPPORTED, "CG_METRICS_PORT is set but "
                        "this collguard was built without libmicrohttpd "
                        "(Debian: libmicrohttpd-dev), so it has no metrics "
                        "endpoint; use CG_METRICS_FILE, or rebuild with "
                        "libmicrohttpd installed");
}

int cg_metrics_http_port(const cg_metrics_http_t *http)
{
    (void)http;
    return 0;
}

void cg_metrics_http_destroy(cg_metrics_http_t *http)
{
    (void)http;
}

#endif
