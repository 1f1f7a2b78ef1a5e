/* SPDX-License-Identifier: Apache-2.0 */
/*
 * np_cycles NET_LIB TUNER_LIB N: N cycles of what NCCL does to the plugins
 * over a job's life: dlopen the net plugin, ncclNetPlugin_v11 init, the
 * devices, every 5th cycle a listen/connect/accept and the closes (every
 * 10th with a message each way), finalize, dlclose; then dlopen the tuner,
 * ncclTunerPlugin_v5 init, one getCollInfo, finalize, dlclose. Run under
 * valgrind (tests/valgrind/run.sh): whatever a cycle leaks shows up N
 * times; at the end the process has as many threads as before the first
 * dlopen. Prints "ok N" and exits 0; the first failure, exit 1.
 */
#include <dirent.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "np_drv.h"
#include "plugin/nccl/tuner_v5.h"

#define FAIL(...)                                                            \
    do {                                                                     \
        fprintf(stderr, "np_cycles: " __VA_ARGS__);                          \
        fputc('\n', stderr);                                                 \
        return 1;                                                            \
    } while (0)
#define OK(call)                                                             \
    do {                                                                     \
        ncclResult_t r_ = (call);                                            \
        if (r_ != ncclSuccess)                                               \
            FAIL("line %d: %s returned %d", __LINE__, #call, (int)r_);       \
    } while (0)

/* Polls a request until done. */
static ncclResult_t wait_req(np_drv_t *d, void *req)
{
    int done = 0, size;

    for (long i = 0; i < 100000000L && !done; i++) {
        ncclResult_t r = np_test(d, req, &done, &size);
        if (r != ncclSuccess)
            return r;
    }
    return done ? ncclSuccess : ncclInternalError;
}

/* One message of 4 KiB from s to r, checked. */
static int one_message(np_drv_t *d, void *s, void *r)
{
    char out[4096], in[4096];
    void *smh, *rmh, *sreq = NULL, *rreq = NULL, *p = in;
    size_t sz = sizeof(in);
    int tag = 3;

    memset(out, 0x5a, sizeof(out));
    memset(in, 0, sizeof(in));
    OK(np_reg(d, s, out, sizeof(out), &smh));
    OK(np_reg(d, r, in, sizeof(in), &rmh));
    while (rreq == NULL)
        OK(np_irecv(d, r, 1, &p, &sz, &tag, &rmh, &rreq));
    while (sreq == NULL)
        OK(np_isend(d, s, out, sizeof(out), tag, smh, &sreq));
    OK(wait_req(d, sreq));
    OK(wait_req(d, rreq));
    if (memcmp(in, out, sizeof(in)) != 0)
        FAIL("the message arrived changed");
    OK(np_dereg(d, s, smh));
    OK(np_dereg(d, r, rmh));
    return 0;
}

static int net_cycle(const char *lib, int c)
{
    unsigned char h[NCCL_NET_HANDLE_MAXSIZE];
    void *l = NULL, *s = NULL, *r = NULL;
    np_drv_t d;
    int ndev;

    if (np_drv_open(&d, lib, 11) != 0)
        FAIL("cycle %d: cannot load %s", c, lib);
    OK(np_init(&d));
    OK(np_devices(&d, &ndev));
    if (ndev < 1)
        FAIL("cycle %d: %d devices", c, ndev);
    if (c % 5 == 0) {
        OK(np_listen(&d, 0, h, &l));
        OK(np_pair(&d, h, l, &s, &r));
        if (c % 10 == 0 && (one_message(&d, s, r) || one_message(&d, s, r)))
            return 1;
        OK(np_close_send(&d, s));
        OK(np_close_recv(&d, r));
        OK(np_close_listen(&d, l));
    }
    OK(np_finalize(&d));
    np_drv_close(&d);
    return 0;
}

static void quiet(ncclDebugLogLevel l, unsigned long f, const char *file,
                  int line, const char *fmt, ...)
{
    (void)l; (void)f; (void)file; (void)line; (void)fmt;
}

static int tuner_cycle(const char *path, int c)
{
    ncclTunerConstants_v5_t k;
    ncclNvlDomainInfo_v5_t nvl = {1, 8, 8};
    float cost[NCCL_NUM_ALGORITHMS_V5][NCCL_NUM_PROTOCOLS_V5];
    void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL), *ctx = NULL;
    ncclTuner_v5_t *t = lib ? dlsym(lib, "ncclTunerPlugin_v5") : NULL;
    int nch = 0;

    if (t == NULL)
        FAIL("cycle %d: no ncclTunerPlugin_v5 in %s", c, path);
    memset(&k, 0, sizeof(k));
    for (int a = 0; a < NCCL_NUM_ALGORITHMS_V5; a++)
        for (int p = 0; p < NCCL_NUM_PROTOCOLS_V5; p++)
            cost[a][p] = 1.0f + (float)(a * NCCL_NUM_PROTOCOLS_V5 + p);
    OK(t->init(&ctx, 7, 16, 2, quiet, &nvl, &k));
    /* NCCL passes its flat float[algo][proto] table cast to float **. */
    OK(t->getCollInfo(ctx, ncclFuncAllReduce, 1 << 20, 1, (float **)cost,
                      NCCL_NUM_ALGORITHMS_V5, NCCL_NUM_PROTOCOLS_V5, 0, &nch));
    for (int a = 0; a < NCCL_NUM_ALGORITHMS_V5; a++)
        for (int p = 0; p < NCCL_NUM_PROTOCOLS_V5; p++)
            if (cost[a][p] != 1.0f + (float)(a * NCCL_NUM_PROTOCOLS_V5 + p) &&
                cost[a][p] != NCCL_ALGO_PROTO_IGNORE)
                FAIL("cycle %d: cell %d/%d became %g", c, a, p,
                     (double)cost[a][p]);
    OK(t->finalize(ctx));
    dlclose(lib);
    return 0;
}

/* Threads of this process now (/proc/self/task); -1 if unreadable. */
static int nthreads(void)
{
    DIR *dir = opendir("/proc/self/task");
    struct dirent *e;
    int n = 0;

    if (dir == NULL)
        return -1;
    while ((e = readdir(dir)) != NULL)
        n += e->d_name[0] != '.';
    closedir(dir);
    return n;
}

int main(int argc, char **argv)
{
    int n = argc > 3 ? atoi(argv[3]) : 100, before = nthreads(), after;

    if (argc < 3)
        FAIL("usage: np_cycles NET_LIB TUNER_LIB [N]");
    for (int c = 0; c < n; c++)
        if (net_cycle(argv[1], c) != 0 || tuner_cycle(argv[2], c) != 0)
            return 1;
    /* A transport's own threads (UCX's async thread while a context
     * lives) are gone once every comm is closed and the library closed. */
    after = nthreads();
    if (before < 1 || after != before)
        FAIL("%d threads before the first dlopen, %d after the last "
             "dlclose", before, after);
    printf("ok %d\n", n);
    return 0;
}
