/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The test's view of one loaded net plugin version: dlopen a library, dlsym
 * ncclNetPlugin_vN and call it through one set of wrappers, the way NCCL's
 * own per-version shims do, so every scenario runs against every version.
 * Test helper; uses only the frozen ABI headers.
 */
#ifndef CG_TEST_NP_DRV_H
#define CG_TEST_NP_DRV_H

#include <stddef.h>

#include "plugin/nccl/net_v10.h"
#include "plugin/nccl/net_v11.h"
#include "plugin/nccl/net_v8.h"
#include "plugin/nccl/net_v9.h"

typedef struct np_drv {
    void *lib;
    int ver;
    void *table;
    void *ctx;
} np_drv_t;

/* Where the plugin's log lines go (formatted, NCCL's level); NULL: dropped. */
extern void (*np_drv_log_sink)(int level, const char *line);

/* Every line the plugin hands the logger is also kept (the last
 * NP_DRV_LOG_KEEP, thread-safe) with NCCL's level and subsystem flags and
 * the file and line it passed, for the harnesses to assert on. */
#define NP_DRV_LOG_KEEP 512
typedef struct np_drv_line {
    int level;             /* ncclDebugLogLevel */
    unsigned long flags;   /* ncclDebugLogSubSys */
    char file[64];         /* "" when NULL was passed */
    int line;
    char text[1024];
} np_drv_line_t;
/* The logger the driver passes to init (the tuner harness's too). */
void np_drv_logger(ncclDebugLogLevel level, unsigned long flags,
                   const char *file, int line, const char *fmt, ...);
void np_drv_log_clear(void);
/* How many kept lines have level (any when < 0) and contain needle. */
int np_drv_log_count(int level, const char *needle);
/* A copy of kept line i (0 oldest); 0 if there is none. */
int np_drv_log_get(int i, np_drv_line_t *out);
/* How many kept lines break NCCL's logging contract (each printed): a
 * subsystem other than flags, no file or line, or the text starting with
 * collguard's own prefix ("[collguard", which NCCL's prefix would double);
 * -1 when no line was kept. */
int np_drv_log_bad(unsigned long flags);

int np_drv_open(np_drv_t *d, const char *path, int ver);
void np_drv_close(np_drv_t *d);
ncclResult_t np_init(np_drv_t *d);
ncclResult_t np_finalize(np_drv_t *d);
ncclResult_t np_devices(np_drv_t *d, int *n);
/* Fills a v11 view; checks nothing past the version's struct is written
 * (returns ncclInternalError when it was). */
ncclResult_t np_props(np_drv_t *d, int dev, ncclNetProperties_v11_t *p);
ncclResult_t np_listen(np_drv_t *d, int dev, void *h, void **l);
ncclResult_t np_connect(np_drv_t *d, int dev, void *h, void **s);
ncclResult_t np_accept(np_drv_t *d, void *l, void **r);
/* Connects to listener l (its handle h) and accepts that comm, both polled
 * from one thread as NCCL may drive them: ncclSuccess with *s and *r set,
 * the first call's error, or ncclInternalError when they never finished. */
ncclResult_t np_pair(np_drv_t *d, void *h, void *l, void **s, void **r);
ncclResult_t np_reg(np_drv_t *d, void *c, void *p, size_t n, void **mh);
/* regMr with a pointer type (NCCL_PTR_HOST, NCCL_PTR_CUDA, ...). */
ncclResult_t np_reg_type(np_drv_t *d, void *c, void *p, size_t n, int type,
                         void **mh);
ncclResult_t np_dereg(np_drv_t *d, void *c, void *mh);
ncclResult_t np_isend(np_drv_t *d, void *s, void *p, size_t n, int tag,
                      void *mh, void **req);
ncclResult_t np_irecv(np_drv_t *d, void *r, int n, void **p, size_t *sz,
                      int *tags, void **mh, void **req);
ncclResult_t np_test(np_drv_t *d, void *req, int *done, int *sizes);
ncclResult_t np_close_send(np_drv_t *d, void *s);
ncclResult_t np_close_recv(np_drv_t *d, void *r);
ncclResult_t np_close_listen(np_drv_t *d, void *l);

#endif
