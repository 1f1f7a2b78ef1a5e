/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Version dispatch of the net plugin test harness, and the logger it hands
 * the plugin, which keeps every line with its level, flags, file and line
 * (see np_drv.h).
 */
#include "np_drv.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#define V8(d) ((ncclNet_v8_t *)(d)->table)
#define V9(d) ((ncclNet_v9_t *)(d)->table)
#define V10(d) ((ncclNet_v10_t *)(d)->table)
#define V11(d) ((ncclNet_v11_t *)(d)->table)
#define PICK(d, expr11, expr10, expr9, expr8)                              \
    ((d)->ver == 11 ? (expr11) : (d)->ver == 10 ? (expr10)                 \
     : (d)->ver == 9 ? (expr9) : (expr8))

void (*np_drv_log_sink)(int level, const char *line);

static pthread_mutex_t np_drv_logger_lock = PTHREAD_MUTEX_INITIALIZER;
static np_drv_line_t np__lines[NP_DRV_LOG_KEEP];
static int np__nlines; /* ever kept since the last clear */

void np_drv_logger(ncclDebugLogLevel level, unsigned long flags,
                   const char *file, int line, const char *fmt, ...)
{
    char text[1024];
    np_drv_line_t *l;
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(text, sizeof(text), fmt, ap);
    va_end(ap);
    pthread_mutex_lock(&np_drv_logger_lock);
    l = &np__lines[np__nlines++ % NP_DRV_LOG_KEEP];
    l->level = (int)level;
    l->flags = flags;
    snprintf(l->file, sizeof(l->file), "%s", file != NULL ? file : "");
    l->line = line;
    memcpy(l->text, text, sizeof(l->text));
    pthread_mutex_unlock(&np_drv_logger_lock);
    if (np_drv_log_sink != NULL)
        np_drv_log_sink((int)level, text);
}

void np_drv_log_clear(void)
{
    pthread_mutex_lock(&np_drv_logger_lock);
    np__nlines = 0;
    pthread_mutex_unlock(&np_drv_logger_lock);
}

int np_drv_log_get(int i, np_drv_line_t *out)
{
    int n, first, ok = 0;

    pthread_mutex_lock(&np_drv_logger_lock);
    n = np__nlines < NP_DRV_LOG_KEEP ? np__nlines : NP_DRV_LOG_KEEP;
    first = np__nlines - n;
    if (i >= 0 && i < n) {
        *out = np__lines[(first + i) % NP_DRV_LOG_KEEP];
        ok = 1;
    }
    pthread_mutex_unlock(&np_drv_logger_lock);
    return ok;
}

int np_drv_log_bad(unsigned long flags)
{
    np_drv_line_t l;
    int bad = 0, i;

    for (i = 0; np_drv_log_get(i, &l); i++) {
        size_t fl = strlen(l.file);
        if (l.flags != flags || fl < 3 || strcmp(l.file + fl - 2, ".c") != 0 ||
            l.line <= 0 || strncmp(l.text, "[collguard", 10) == 0) {
            fprintf(stderr, "log line breaks NCCL's contract (flags %#lx, "
                    "want %#lx; file '%s' line %d): %s\n", l.flags, flags,
                    l.file, l.line, l.text);
            bad++;
        }
    }
    return i == 0 ? -1 : bad;
}

int np_drv_log_count(int level, const char *needle)
{
    np_drv_line_t l;
    int c = 0;

    for (int i = 0; np_drv_log_get(i, &l); i++)
        if ((level < 0 || l.level == level) && strstr(l.text, needle) != NULL)
            c++;
    return c;
}

int np_drv_open(np_drv_t *d, const char *path, int ver)
{
    char sym[32];

    memset(d, 0, sizeof(*d));
    d->ver = ver;
    d->lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (d->lib == NULL) {
        fprintf(stderr, "dlopen %s: %s\n", path, dlerror());
        return -1;
    }
    snprintf(sym, sizeof(sym), "ncclNetPlugin_v%d", ver);
    d->table = dlsym(d->lib, sym);
    if (d->table == NULL) {
        fprintf(stderr, "no %s in %s\n", sym, path);
        dlclose(d->lib);
        return -1;
    }
    return 0;
}

void np_drv_close(np_drv_t *d)
{
    if (d->lib != NULL)
        dlclose(d->lib);
    d->lib = NULL;
}

ncclResult_t np_init(np_drv_t *d)
{
    ncclNetCommConfig_v11_t cfg = {-1};
    return PICK(d, V11(d)->init(&d->ctx, 42, &cfg, np_drv_logger, NULL),
                V10(d)->init(np_drv_logger, NULL), V9(d)->init(np_drv_logger),
                V8(d)->init(np_drv_logger));
}

ncclResult_t np_finalize(np_drv_t *d)
{
    ncclResult_t r = ncclSuccess;
    if (d->ver == 11)
        r = V11(d)->finalize(d->ctx);
    d->ctx = NULL;
    return r;
}

ncclResult_t np_devices(np_drv_t *d, int *n)
{
    return PICK(d, V11(d)->devices(n), V10(d)->devices(n), V9(d)->devices(n),
                V8(d)->devices(n));
}

ncclResult_t np_props(np_drv_t *d, int dev, ncclNetProperties_v11_t *p)
{
    unsigned char buf[sizeof(ncclNetProperties_v11_t) + 64];
    size_t sz = PICK(d, sizeof(ncclNetProperties_v11_t),
                     sizeof(ncclNetProperties_v10_t),
                     sizeof(ncclNetProperties_v9_t),
                     sizeof(ncclNetProperties_v8_t));
    ncclResult_t r;

    memset(buf, 0xab, sizeof(buf));
    r = PICK(d, V11(d)->getProperties(dev, (void *)buf),
             V10(d)->getProperties(dev, (void *)buf),
             V9(d)->getProperties(dev, (void *)buf),
             V8(d)->getProperties(dev, (void *)buf));
    if (r != ncclSuccess)
        return r;
    for (size_t i = sz; i < sizeof(buf); i++)
        if (buf[i] != 0xab) {
            fprintf(stderr, "getProperties v%d wrote byte %zu past its "
                    "%zu-byte struct\n", d->ver, i, sz);
            return ncclInternalError;
        }
    memset(p, 0, sizeof(*p));
    if (d->ver == 8) {
        ncclNetProperties_v8_t *q = (void *)buf;
        p->name = q->name; p->pciPath = q->pciPath; p->guid = q->guid;
        p->ptrSupport = q->ptrSupport; p->speed = q->speed;
        p->maxComms = q->maxComms; p->maxRecvs = q->maxRecvs;
        p->netDeviceType = q->netDeviceType;
        p->maxP2pBytes = 1u << 30;
        return r;
    }
    /* v9/v10 are v11 without the last field. */
    memcpy(p, buf, sz);
    return r;
}

ncclResult_t np_listen(np_drv_t *d, int dev, void *h, void **l)
{
    return PICK(d, V11(d)->listen(d->ctx, dev, h, l),
                V10(d)->listen(dev, h, l), V9(d)->listen(dev, h, l),
                V8(d)->listen(dev, h, l));
}

ncclResult_t np_connect(np_drv_t *d, int dev, void *h, void **s)
{
    ncclNetCommConfig_v10_t cfg = {-1};
    return PICK(d, V11(d)->connect(d->ctx, dev, h, s, NULL),
                V10(d)->connect(dev, &cfg, h, s, NULL),
                V9(d)->connect(dev, h, s, NULL),
                V8(d)->connect(dev, h, s, NULL));
}

ncclResult_t np_accept(np_drv_t *d, void *l, void **r)
{
    return PICK(d, V11(d)->accept(l, r, NULL), V10(d)->accept(l, r, NULL),
                V9(d)->accept(l, r, NULL), V8(d)->accept(l, r, NULL));
}

ncclResult_t np_pair(np_drv_t *d, void *h, void *l, void **s, void **r)
{
    ncclResult_t res;

    *s = *r = NULL;
    for (long i = 0; i < 100000000L && (*s == NULL || *r == NULL); i++) {
        if (*s == NULL && (res = np_connect(d, 0, h, s)) != ncclSuccess)
            return res;
        if (*r == NULL && (res = np_accept(d, l, r)) != ncclSuccess)
            return res;
    }
    return *s != NULL && *r != NULL ? ncclSuccess : ncclInternalError;
}

ncclResult_t np_reg_type(np_drv_t *d, void *c, void *p, size_t n, int type,
                         void **mh)
{
    return PICK(d, V11(d)->regMr(c, p, n, type, mh),
                V10(d)->regMr(c, p, n, type, mh),
                V9(d)->regMr(c, p, n, type, mh),
                V8(d)->regMr(c, p, n, type, mh));
}

ncclResult_t np_reg(np_drv_t *d, void *c, void *p, size_t n, void **mh)
{
    return np_reg_type(d, c, p, n, NCCL_PTR_HOST, mh);
}

ncclResult_t np_dereg(np_drv_t *d, void *c, void *mh)
{
    return PICK(d, V11(d)->deregMr(c, mh), V10(d)->deregMr(c, mh),
                V9(d)->deregMr(c, mh), V8(d)->deregMr(c, mh));
}

ncclResult_t np_isend(np_drv_t *d, void *s, void *p, size_t n, int tag,
                      void *mh, void **req)
{
    return PICK(d, V11(d)->isend(s, p, n, tag, mh, NULL, req),
                V10(d)->isend(s, p, n, tag, mh, NULL, req),
                V9(d)->isend(s, p, n, tag, mh, req),
                V8(d)->isend(s, p, (int)n, tag, mh, req));
}

ncclResult_t np_irecv(np_drv_t *d, void *r, int n, void **p, size_t *sz,
                      int *tags, void **mh, void **req)
{
    int isz[8];
    for (int i = 0; i < n && i < 8; i++)
        isz[i] = (int)sz[i];
    return PICK(d, V11(d)->irecv(r, n, p, sz, tags, mh, NULL, req),
                V10(d)->irecv(r, n, p, sz, tags, mh, NULL, req),
                V9(d)->irecv(r, n, p, sz, tags, mh, req),
                V8(d)->irecv(r, n, p, isz, tags, mh, req));
}

ncclResult_t np_test(np_drv_t *d, void *req, int *done, int *sizes)
{
    return PICK(d, V11(d)->test(req, done, sizes),
                V10(d)->test(req, done, sizes), V9(d)->test(req, done, sizes),
                V8(d)->test(req, done, sizes));
}

ncclResult_t np_close_send(np_drv_t *d, void *s)
{
    return PICK(d, V11(d)->closeSend(s), V10(d)->closeSend(s),
                V9(d)->closeSend(s), V8(d)->closeSend(s));
}

ncclResult_t np_close_recv(np_drv_t *d, void *r)
{
    return PICK(d, V11(d)->closeRecv(r), V10(d)->closeRecv(r),
                V9(d)->closeRecv(r), V8(d)->closeRecv(r));
}

ncclResult_t np_close_listen(np_drv_t *d, void *l)
{
    return PICK(d, V11(d)->closeListen(l), V10(d)->closeListen(l),
                V9(d)->closeListen(l), V8(d)->closeListen(l));
}
