/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The metrics file sink: the text of metrics_format.c (the one renderer)
 * replaces the file atomically (write <path>.tmp.<pid>, then rename) every
 * CG_METRICS_PERIOD. Layer: core/observe; calls the governor, the
 * renderer and core/base.
 */
#include "core/observe/metrics.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "core/base/error.h"

struct cg_metrics {
    cg_governor_t *gov;
    const cg_log_t *log;
    int rank;
    uint64_t period_ns;
    uint64_t last_ns;
    bool written;            /* at least one write attempted */
    bool failing;            /* the last write failed (warned once) */
    char probe_name[64];
    char path[PATH_MAX];
    char tmp[PATH_MAX + 32];  /* <path>.tmp.<pid>: ranks may share a path */
    cg_metrics_text_t text;
};

/* The template with %r replaced by the rank and %% by %. */
static cg_status_t cg__expand(const char *tpl, int rank, char *out,
                              size_t len)
{
    size_t n = 0;

    for (const char *p = tpl; *p != '\0'; p++) {
        int w;
        if (p[0] == '%' && p[1] == 'r')
            w = snprintf(out + n, len - n, "%d", rank);
        else if (p[0] == '%' && p[1] == '%')
            w = snprintf(out + n, len - n, "%%");
        else if (p[0] == '%')
            return cg_error_set(CG_ERR_CONFIG, "CG_METRICS_FILE '%s': "
                                "unknown sequence '%%%.1s'; %%r is the rank, "
                                "%%%% a percent sign", tpl, p + 1);
        else
            w = snprintf(out + n, len - n, "%c", *p);
        if (w < 0 || (size_t)w >= len - n)
            return cg_error_set(CG_ERR_CONFIG, "CG_METRICS_FILE '%s': the "
                                "path is longer than %zu bytes", tpl,
                                len - 1);
        n += (size_t)w;
        p += p[0] == '%';
    }
    if (n == 0)
        return cg_error_set(CG_ERR_CONFIG, "CG_METRICS_FILE is empty");
    return CG_OK;
}

/* A path whose directory is missing or read-only is a configuration
 * error found at start, not a warning every period. */
static cg_status_t cg__check_dir(const cg_metrics_t *m)
{
    FILE *f = fopen(m->tmp, "w");

    if (f == NULL)
        return cg_error_set(CG_ERR_CONFIG, "CG_METRICS_FILE: cannot create "
                            "%s: %s", m->tmp, strerror(errno));
    fclose(f);
    remove(m->tmp);
    return CG_OK;
}

cg_status_t cg_metrics_create(const cg_metrics_params_t *params,
                              cg_metrics_t **metrics_p)
{
    cg_metrics_t *m;
    cg_status_t st;

    if (params == NULL || params->gov == NULL ||
        params->path_template == NULL || metrics_p == NULL)
        return cg_error_set(CG_ERR_INVALID_PARAM, "cg_metrics_create: NULL "
                            "params, governor, path or metrics_p");
    st = cg_governor_alloc(params->gov, CG_MEM_CAT_CONTROL, sizeof(*m),
                           (void **)&m);
    if (st != CG_OK)
        return st;
    memset(m, 0, sizeof(*m));
    m->gov = params->gov;
    m->log = params->log;
    m->rank = params->rank;
    m->period_ns = params->period_ns;
    snprintf(m->probe_name, sizeof(m->probe_name), "%s",
             params->probe_name != NULL ? params->probe_name : "");
    st = cg__expand(params->path_template, m->rank, m->path,
                    sizeof(m->path));
    if (st != CG_OK)
        goto err_free;
    snprintf(m->tmp, sizeof(m->tmp), "%s.tmp.%ld", m->path, (long)getpid());
    st = cg__check_dir(m);
    if (st != CG_OK)
        goto err_free;
    st = cg_metrics_text_init(&m->text, m->gov);
    if (st != CG_OK)
        goto err_free;
    *metrics_p = m;
    return CG_OK;

err_free:
    cg_governor_free(params->gov, CG_MEM_CAT_CONTROL, m, sizeof(*m));
    return st;
}

void cg_metrics_destroy(cg_metrics_t *metrics)
{
    if (metrics == NULL)
        return;
    cg_metrics_text_cleanup(&metrics->text);
    cg_governor_free(metrics->gov, CG_MEM_CAT_CONTROL, metrics,
                     sizeof(*metrics));
}

const char *cg_metrics_path(const cg_metrics_t *metrics)
{
    return metrics->path;
}

bool cg_metrics_due(const cg_metrics_t *metrics, uint64_t now_ns)
{
    return !metrics->written || now_ns - metrics->last_ns >=
                                    metrics->period_ns;
}

/* Writes the text to the temporary file and renames it over the path. */
static cg_status_t cg__replace(cg_metrics_t *m, size_t n)
{
    FILE *f = fopen(m->tmp, "w");
    int ok;

    if (f == NULL)
        return cg_error_set(CG_ERR_IO, "metrics file %s: cannot create %s: "
                            "%s", m->path, m->tmp, strerror(errno));
    ok = fwrite(m->text.buf, 1, n, f) == n;
    ok = (fclose(f) == 0) && ok;
    if (!ok) {
        cg_status_t st = cg_error_set(CG_ERR_IO, "metrics file %s: cannot "
                                      "write %s: %s", m->path, m->tmp,
                                      strerror(errno));
        remove(m->tmp);
        return st;
    }
    if (rename(m->tmp, m->path) != 0) {
        cg_status_t st = cg_error_set(CG_ERR_IO, "metrics file %s: rename "
                                      "from %s failed: %s", m->path, m->tmp,
                                      strerror(errno));
        remove(m->tmp);
        return st;
    }
    return CG_OK;
}

cg_status_t cg_metrics_write(cg_metrics_t *metrics,
                             const cg_hvd_stats_t *stats, uint64_t now_ns)
{
    size_t n;
    cg_status_t st;

    metrics->written = true;
    metrics->last_ns = now_ns;
    st = cg_metrics_text_render(&metrics->text, metrics->rank,
                                metrics->probe_name, stats, &n);
    if (st == CG_OK)
        st = cg__replace(metrics, n);
    if (st != CG_OK && !metrics->failing)
        cg_warn(metrics->log, "%s (CG_METRICS_FILE); retrying every %.3gs",
                cg_last_error(), metrics->period_ns / 1e9);
    else if (st == CG_OK && metrics->failing)
        cg_info(metrics->log, "metrics file %s written again",
                metrics->path);
    metrics->failing = st != CG_OK;
    return st;
}
