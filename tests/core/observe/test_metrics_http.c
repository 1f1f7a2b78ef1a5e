/* SPDX-License-Identifier: Apache-2.0 */
/*
 * core/observe/metrics_http.c: GET /metrics answers the renderer's text
 * byte for byte (one renderer, two sinks); other methods 405 with Allow,
 * other paths 404, an oversize request 4xx, and the endpoint serves on;
 * a port in use, a port out of range and a bad address are errors that
 * name the variable; the HTTP thread is gone once destroy returns.
 */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <dirent.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/observe/metrics_format.h"
#include "core/observe/metrics_http.h"
#include "tests/core/util/gov_fake.h"

TestSuite(metrics_http, .init = gov_fake_init, .fini = gov_fake_fini,
          .timeout = 30);

/* A listening socket on a free loopback port; *port_p gets the port. */
static int listen_free(int *port_p)
{
    struct sockaddr_in sa = {.sin_family = AF_INET};
    socklen_t len = sizeof(sa);
    int fd = socket(AF_INET, SOCK_STREAM, 0);

    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    cr_assert(fd >= 0);
    cr_assert_eq(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    cr_assert_eq(listen(fd, 4), 0);
    cr_assert_eq(getsockname(fd, (struct sockaddr *)&sa, &len), 0);
    *port_p = ntohs(sa.sin_port);
    return fd;
}

/* A port nothing listens on now (found free, then closed). */
static int free_port(void)
{
    int port, fd = listen_free(&port);
    close(fd);
    return port;
}

/* Sends req to 127.0.0.1:port and returns the whole reply (malloc'd). */
static char *http_raw(int port, const char *req, size_t req_len)
{
    struct sockaddr_in sa = {.sin_family = AF_INET,
                             .sin_port = htons((uint16_t)port)};
    size_t cap = 1 << 16, n = 0;
    char *out = malloc(cap);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    ssize_t r;

    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    cr_assert_eq(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0,
                 "connect to port %d", port);
    for (size_t off = 0; off < req_len; off += (size_t)r) {
        r = send(fd, req + off, req_len - off, MSG_NOSIGNAL);
        if (r <= 0)
            break; /* the server may close early on an oversize request */
    }
    while ((r = recv(fd, out + n, cap - n - 1, 0)) > 0) {
        n += (size_t)r;
        if (n + 1 == cap)
            out = realloc(out, cap *= 2);
    }
    out[n] = '\0';
    close(fd);
    return out;
}

static char *http_get(int port, const char *method, const char *path)
{
    char req[512];
    int n = snprintf(req, sizeof(req), "%s %s HTTP/1.1\r\nHost: x\r\n"
                     "Connection: close\r\n\r\n", method, path);
    return http_raw(port, req, (size_t)n);
}

static void fixed_stats(void *arg, cg_hvd_stats_t *st)
{
    memset(st, 0, sizeof(*st));
    st->cycles = 42;
    st->allreduce_bytes = 4096;
    st->op_count[CG_HVD_ALLREDUCE] = 3;
    st->op_ns[CG_HVD_ALLREDUCE] = 3000000;
    st->op_bucket[CG_HVD_ALLREDUCE][4] = 3; /* <= 1 ms */
    (*(int *)arg)++;
}

static cg_metrics_http_t *start(cg_governor_t *gov, int base, int local,
                                int *calls)
{
    cg_metrics_http_params_t p = {.addr = "127.0.0.1", .port_base = base,
                                  .local_rank = local, .rank = 5, .gov = gov,
                                  .probe_name = "fake", .stats_fn = fixed_stats,
                                  .stats_arg = calls};
    cg_metrics_http_t *h = NULL;
    cg_status_t st = cg_metrics_http_create(&p, &h);

    cr_assert_eq(st, CG_OK, "create: %s", cg_last_error());
    return h;
}

static int threads_now(void)
{
    DIR *d = opendir("/proc/self/task");
    int n = 0;

    cr_assert_not_null(d);
    for (struct dirent *e; (e = readdir(d)) != NULL;)
        n += e->d_name[0] != '.';
    closedir(d);
    return n;
}

Test(metrics_http, get_metrics_is_the_renderers_text)
{
    cg_config_t cfg;
    fake_config(&cfg);
    cg_governor_t *gov = fake_governor(&cfg);
    int calls = 0, base = free_port();
    cg_metrics_http_t *h = start(gov, base - 1, 1, &calls);
    cg_governor_snapshot_t snap;
    cg_hvd_stats_t st;
    char want[65536], *reply, *body;
    int dummy = 0;

    cr_assert_eq(cg_metrics_http_port(h), base, "port = base + local rank");
    reply = http_get(base, "GET", "/metrics");
    cr_assert(strncmp(reply, "HTTP/1.1 200 ", 13) == 0, "%.80s", reply);
    cr_assert(strstr(reply, "Content-Type: text/plain; version=0.0.4") !=
              NULL, "%.300s", reply);
    body = strstr(reply, "\r\n\r\n");
    cr_assert_not_null(body);
    fixed_stats(&dummy, &st);
    cg_governor_snapshot(gov, &snap);
    cr_assert_lt(cg_metrics_format(want, sizeof(want), 5, "fake", &snap, &st),
                 sizeof(want));
    cr_assert_str_eq(body + 4, want, "the body is not the renderer's text");
    cr_assert(strstr(want, "collguard_hvd_cycles_total{rank=\"5\"} 42\n"));
    cr_assert_eq(calls, 1, "stats asked %d times for one scrape", calls);
    free(reply);
    cg_metrics_http_destroy(h);
    fake_destroy(gov);
}

Test(metrics_http, other_methods_paths_and_oversize_are_refused)
{
    cg_config_t cfg;
    fake_config(&cfg);
    cg_governor_t *gov = fake_governor(&cfg);
    int calls = 0, port = free_port();
    cg_metrics_http_t *h = start(gov, port, 0, &calls);
    static const char *const refused[][3] = {
        {"POST", "/metrics", "405"}, {"HEAD", "/metrics", "405"},
        {"PUT", "/metrics", "405"},  {"DELETE", "/metrics", "405"},
        {"GET", "/", "404"},         {"GET", "/metricsx", "404"},
        {"GET", "/metrics/", "404"}, {"GET", "/../metrics", "404"}};
    size_t big_len = 64 << 10;
    char *big = malloc(big_len + 128), *reply;
    int n;

    for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++) {
        reply = http_get(port, refused[i][0], refused[i][1]);
        cr_assert(strncmp(reply + 9, refused[i][2], 3) == 0, "%s %s: %.60s",
                  refused[i][0], refused[i][1], reply);
        if (refused[i][2][2] == '5')
            cr_assert(strstr(reply, "Allow: GET\r\n") != NULL, "%.200s",
                      reply);
        cr_assert_null(strstr(reply, "collguard_"), "%s %s served metrics",
                       refused[i][0], refused[i][1]);
        free(reply);
    }
    /* A header larger than the per-connection memory. */
    n = snprintf(big, 64, "GET /metrics HTTP/1.1\r\nHost: x\r\nX-Big: ");
    memset(big + n, 'a', big_len);
    memcpy(big + n + big_len, "\r\n\r\n", 5);
    reply = http_raw(port, big, (size_t)n + big_len + 4);
    cr_assert(strncmp(reply, "HTTP/1.1 4", 10) == 0, "oversize: %.60s",
              reply);
    cr_assert_null(strstr(reply, "collguard_"));
    free(reply);
    cr_assert_eq(calls, 0, "a refused request rendered metrics");
    reply = http_get(port, "GET", "/metrics"); /* still serving */
    cr_assert(strncmp(reply, "HTTP/1.1 200 ", 13) == 0, "%.60s", reply);
    free(reply);
    free(big);
    cg_metrics_http_destroy(h);
    fake_destroy(gov);
}

Test(metrics_http, port_in_use_names_the_variable)
{
    cg_config_t cfg;
    fake_config(&cfg);
    cg_governor_t *gov = fake_governor(&cfg);
    int port, fd = listen_free(&port);
    cg_metrics_http_params_t p = {.addr = "127.0.0.1", .port_base = port,
                                  .gov = gov};
    cg_metrics_http_t *h = NULL;
    char want[64];

    cr_assert_eq(cg_metrics_http_create(&p, &h), CG_ERR_IO);
    cr_assert_null(h);
    snprintf(want, sizeof(want), "CG_METRICS_PORT=%d: cannot listen", port);
    cr_assert(strstr(cg_last_error(), want) != NULL, "%s", cg_last_error());
    cr_assert(strstr(cg_last_error(), "Address already in use") != NULL,
              "%s", cg_last_error());
    close(fd);
    fake_destroy(gov);
}

Test(metrics_http, port_out_of_range_and_bad_address)
{
    cg_config_t cfg;
    fake_config(&cfg);
    cg_governor_t *gov = fake_governor(&cfg);
    cg_metrics_http_params_t p = {.addr = "127.0.0.1", .port_base = 65535,
                                  .local_rank = 1, .gov = gov};
    cg_metrics_http_t *h = NULL;

    cr_assert_eq(cg_metrics_http_create(&p, &h), CG_ERR_CONFIG);
    cr_assert(strstr(cg_last_error(), "CG_METRICS_PORT=65535: local rank 1 "
                     "would listen on port 65536, outside 1-65535") != NULL,
              "%s", cg_last_error());
    p.port_base = 70000;
    p.local_rank = 0;
    cr_assert_eq(cg_metrics_http_create(&p, &h), CG_ERR_CONFIG);
    cr_assert(strstr(cg_last_error(), "CG_METRICS_PORT=70000") != NULL);
    p.port_base = free_port();
    p.addr = "localhost";
    cr_assert_eq(cg_metrics_http_create(&p, &h), CG_ERR_CONFIG);
    cr_assert(strstr(cg_last_error(), "CG_METRICS_ADDR 'localhost' is not "
                     "an IPv4 address") != NULL, "%s", cg_last_error());
    cr_assert_null(h);
    fake_destroy(gov);
}

Test(metrics_http, destroy_joins_the_thread_and_frees_the_port)
{
    cg_config_t cfg;
    fake_config(&cfg);
    cg_governor_t *gov = fake_governor(&cfg);
    int calls = 0, port = free_port(), before = threads_now();
    cg_metrics_http_t *h = start(gov, port, 0, &calls);

    cr_assert_gt(threads_now(), before, "no HTTP thread");
    cg_metrics_http_destroy(h);
    cr_assert_eq(threads_now(), before, "a thread outlived destroy");
    h = start(gov, port, 0, &calls); /* the port is free again */
    cg_metrics_http_destroy(h);
    fake_destroy(gov);
}
