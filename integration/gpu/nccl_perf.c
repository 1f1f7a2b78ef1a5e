/* SPDX-License-Identifier: Apache-2.0 */
/*
 * An NCCL AllReduce driver for the multi-GPU runs (integration/gpu/
 * multigpu.sh): one process per rank, each on GPU rank % GPUs (several
 * ranks may share one, each then with its own NCCL_HOSTID so that NCCL
 * takes them for separate hosts), NCCL's unique id passed through a file
 * in a directory all ranks see. Out-of-place float32 sums from -b to -e
 * bytes (times -f), every element of every size checked; rank 0 prints
 * time, algorithm and bus bandwidth per size (busbw = algbw * 2(n-1)/n, as
 * nccl-tests count it) and the device memory NCCL took on its GPU
 * (cudaMemGetInfo before communicator creation, after it on every rank
 * and before any collective, and after the last size: the channels and
 * buffers NCCL connects lazily at an algorithm's first use included; on a
 * GPU that ranks share, theirs together). -F leaves only that many bytes free
 * on each GPU before NCCL starts (the first rank on a GPU holds the
 * ballast), as activations would.
 *   nccl_perf -r RANK -n NRANKS -u DIR [-b 8] [-e 1G] [-f 2] [-i 20]
 *             [-w 5] [-F bytes]
 * Exit 0: every result right; 1: a wrong result or an NCCL/CUDA error;
 * 77: no CUDA device. Layer: integration (CUDA runtime and NCCL only).
 */
#include <cuda_runtime_api.h>
#include <errno.h>
#include <nccl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MiB (1024.0 * 1024.0)

#define CU(x)                                                                 \
    do {                                                                      \
        cudaError_t e_ = (x);                                                 \
        if (e_ != cudaSuccess) {                                              \
            fprintf(stderr, "rank %d: %s: %s\n", o->rank, #x,                 \
                    cudaGetErrorString(e_));                                  \
            return 1;                                                         \
        }                                                                     \
    } while (0)
#define NC(x)                                                                 \
    do {                                                                      \
        ncclResult_t r_ = (x);                                                \
        if (r_ != ncclSuccess) {                                              \
            fprintf(stderr, "rank %d: %s: %s (%s)\n", o->rank, #x,            \
                    ncclGetErrorString(r_), ncclGetLastError(NULL));          \
            return 1;                                                         \
        }                                                                     \
    } while (0)

typedef struct {
    int rank, nranks, iters, warm;
    const char *dir;
    size_t min_bytes, max_bytes, leave;
    double factor;
} opts_t;

static size_t parse_size(const char *s)
{
    char *end;
    double v = strtod(s, &end);
    switch (*end) {
    case 'G': case 'g': v *= 1024.0; /* fall through */
    case 'M': case 'm': v *= 1024.0; /* fall through */
    case 'K': case 'k': v *= 1024.0; break;
    default: break;
    }
    return (size_t)v;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Waits up to two minutes for DIR/NAME; 0 when it is there. */
static int wait_file(const char *dir, const char *name)
{
    char path[4096];
    double end = now_s() + 120.0;

    snprintf(path, sizeof(path), "%s/%s", dir, name);
    while (access(path, R_OK) != 0) {
        if (now_s() > end) {
            fprintf(stderr, "nccl_perf: no %s after 120 s\n", path);
            return -1;
        }
        usleep(2000);
    }
    return 0;
}

/* Writes DIR/NAME whole (through a rename, so readers never see part). */
static int put_file(const char *dir, const char *name, const void *p,
                    size_t len)
{
    char path[4096], tmp[4200];
    FILE *f;

    snprintf(path, sizeof(path), "%s/%s", dir, name);
    snprintf(tmp, sizeof(tmp), "%s.%d.tmp", path, (int)getpid());
    f = fopen(tmp, "wb");
    if (f == NULL || fwrite(p, 1, len, f) != len || fclose(f) != 0) {
        fprintf(stderr, "nccl_perf: %s: %s\n", tmp, strerror(errno));
        return -1;
    }
    return rename(tmp, path);
}

static int get_file(const char *dir, const char *name, void *p, size_t len)
{
    char path[4096];
    FILE *f;
    size_t got;

    snprintf(path, sizeof(path), "%s/%s", dir, name);
    f = fopen(path, "rb");
    if (f == NULL)
        return -1;
    got = fread(p, 1, len, f);
    fclose(f);
    return got == len ? 0 : -1;
}

/* Every rank at PHASE: each writes DIR/PHASE.RANK, then waits for all. */
static int barrier(const opts_t *o, const char *phase)
{
    char name[64];

    snprintf(name, sizeof(name), "%s.%d", phase, o->rank);
    if (put_file(o->dir, name, "1", 1) != 0)
        return -1;
    for (int r = 0; r < o->nranks; r++) {
        snprintf(name, sizeof(name), "%s.%d", phase, r);
        if (wait_file(o->dir, name) != 0)
            return -1;
    }
    return 0;
}

/* Every rank's send value at element i: small integers, so that the sum
 * over ranks is exact in float32 whatever order NCCL adds in. */
static float send_value(size_t i, int rank)
{
    return (float)((int)(i % 13) + rank);
}

static int usage(const char *argv0)
{
    fprintf(stderr, "usage: %s -r RANK -n NRANKS -u DIR [-b min] [-e max] "
            "[-f factor] [-i iters] [-w warmup] [-F leave_free_bytes]\n",
            argv0);
    return 2;
}

static int parse(int argc, char **argv, opts_t *o)
{
    int c;

    *o = (opts_t){.rank = -1, .nranks = -1, .iters = 20, .warm = 5,
                  .min_bytes = 8, .max_bytes = (size_t)1 << 30,
                  .factor = 2.0};
    while ((c = getopt(argc, argv, "r:n:u:b:e:f:i:w:F:")) != -1) {
        switch (c) {
        case 'r': o->rank = atoi(optarg); break;
        case 'n': o->nranks = atoi(optarg); break;
        case 'u': o->dir = optarg; break;
        case 'b': o->min_bytes = parse_size(optarg); break;
        case 'e': o->max_bytes = parse_size(optarg); break;
        case 'f': o->factor = atof(optarg); break;
        case 'i': o->iters = atoi(optarg); break;
        case 'w': o->warm = atoi(optarg); break;
        case 'F': o->leave = parse_size(optarg); break;
        default: return usage(argv[0]);
        }
    }
    if (o->rank < 0 || o->nranks < 1 || o->rank >= o->nranks ||
        o->dir == NULL || o->min_bytes < 4 || o->max_bytes < o->min_bytes ||
        o->factor <= 1.0 || o->iters < 1 || o->warm < 0)
        return usage(argv[0]);
    return 0;
}

/* One size: warm-up, timed iterations, then every element checked. */
static int one_size(const opts_t *o, ncclComm_t comm, cudaStream_t s,
                    const float *send, float *recv, float *host,
                    size_t bytes, cudaEvent_t e0, cudaEvent_t e1)
{
    size_t count = bytes / sizeof(float), wrong = 0;
    double budget = 2.0 * 1024 * MiB; /* bytes a size may move, about */
    int iters = o->iters, warm = o->warm;
    float ms = 0;

    if ((double)bytes * iters > budget)
        iters = (int)(budget / (double)bytes) < 3 ? 3
                                                  : (int)(budget / (double)bytes);
    if (warm > iters)
        warm = iters;
    for (int i = 0; i < warm; i++)
        NC(ncclAllReduce(send, recv, count, ncclFloat, ncclSum, comm, s));
    /* A small allreduce as a barrier, so the ranks start together. */
    NC(ncclAllReduce(send, recv, 1, ncclFloat, ncclSum, comm, s));
    CU(cudaStreamSynchronize(s));
    CU(cudaEventRecord(e0, s));
    for (int i = 0; i < iters; i++)
        NC(ncclAllReduce(send, recv, count, ncclFloat, ncclSum, comm, s));
    CU(cudaEventRecord(e1, s));
    CU(cudaEventSynchronize(e1));
    CU(cudaEventElapsedTime(&ms, e0, e1));
    CU(cudaMemcpy(host, recv, count * sizeof(float), cudaMemcpyDeviceToHost));
    int n = o->nranks;
    for (size_t i = 0; i < count; i++) {
        float want = (float)(n * (int)(i % 13) + n * (n - 1) / 2);
        wrong += host[i] != want;
    }
    if (o->rank == 0) {
        double us = ms * 1e3 / iters;
        double algbw = (double)bytes / (us * 1e-6) / 1e9;
        double busbw = algbw * 2.0 * (n - 1) / n;
        printf("%12zu %12zu %10.2f %10.3f %10.3f %6zu\n", bytes, count, us,
               algbw, busbw, wrong);
        fflush(stdout);
    }
    if (wrong > 0)
        fprintf(stderr, "rank %d: %zu of %zu elements wrong at %zu bytes\n",
                o->rank, wrong, count, bytes);
    return wrong > 0;
}

static int run(const opts_t *o)
{
    int ndev = 0, dev, ver = 0, bad = 0;
    size_t f_pre, f_init, f_end, total, held = 0;
    void *ballast = NULL;
    float *send, *recv, *host;
    cudaStream_t s;
    cudaEvent_t e0, e1;
    ncclUniqueId id;
    ncclComm_t comm;

    if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
        printf("no CUDA device: skipped\n");
        return 77;
    }
    dev = o->rank % ndev;
    CU(cudaSetDevice(dev));
    CU(cudaFree(NULL)); /* the context first: not NCCL's */
    CU(cudaMalloc((void **)&send, o->max_bytes));
    CU(cudaMalloc((void **)&recv, o->max_bytes));
    host = malloc(o->max_bytes);
    if (host == NULL) {
        fprintf(stderr, "rank %d: no host memory for %zu bytes\n", o->rank,
                o->max_bytes);
        return 1;
    }
    for (size_t i = 0; i < o->max_bytes / sizeof(float); i++)
        host[i] = send_value(i, o->rank);
    CU(cudaMemcpy(send, host, o->max_bytes, cudaMemcpyHostToDevice));
    CU(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    CU(cudaEventCreate(&e0));
    CU(cudaEventCreate(&e1));
    /* Every rank's buffers are in place; then the ballasts, by the first
     * rank of each GPU; then NCCL. */
    if (barrier(o, "ready") != 0)
        return 1;
    if (o->leave > 0 && o->rank < ndev) {
        size_t fr;
        CU(cudaMemGetInfo(&fr, &total));
        if (fr > o->leave) {
            held = fr - o->leave;
            CU(cudaMalloc(&ballast, held));
        }
    }
    if (barrier(o, "ballast") != 0)
        return 1;
    CU(cudaMemGetInfo(&f_pre, &total));
    if (o->rank == 0) {
        NC(ncclGetUniqueId(&id));
        if (put_file(o->dir, "id", &id, sizeof(id)) != 0)
            return 1;
    } else if (wait_file(o->dir, "id") != 0 ||
               get_file(o->dir, "id", &id, sizeof(id)) != 0) {
        return 1;
    }
    NC(ncclCommInitRank(&comm, o->nranks, id, o->rank));
    CU(cudaDeviceSynchronize());
    /* Every rank's communicator made (on a shared GPU the figure is
     * theirs together), before any collective connects a channel. */
    if (barrier(o, "init") != 0)
        return 1;
    CU(cudaMemGetInfo(&f_init, &total));
    NC(ncclAllReduce(send, recv, 1, ncclFloat, ncclSum, comm, s));
    CU(cudaStreamSynchronize(s));
    NC(ncclGetVersion(&ver));
    if (o->rank == 0) {
        printf("# nccl_perf: %d ranks, NCCL %d.%d.%d, %d GPU(s) visible, "
               "rank 0 on GPU %d; free before NCCL %.0f MiB (ballast %.0f "
               "MiB)\n", o->nranks, ver / 10000, ver / 100 % 100, ver % 100,
               ndev, dev, f_pre / MiB, held / MiB);
        printf("%12s %12s %10s %10s %10s %6s\n", "size_B", "count", "time_us",
               "algbw_GBs", "busbw_GBs", "wrong");
    }
    for (size_t b = o->min_bytes; b <= o->max_bytes;) {
        bad |= one_size(o, comm, s, send, recv, host, b, e0, e1);
        size_t next = (size_t)((double)b * o->factor);
        b = next > b ? next & ~(size_t)3 : b + 4;
    }
    CU(cudaDeviceSynchronize());
    CU(cudaMemGetInfo(&f_end, &total));
    if (o->rank == 0)
        printf("# nccl device memory on GPU %d: creation %.1f MiB, after "
               "every size %.1f MiB (%d rank(s) on this GPU)\n"
               "# result: %s\n",
               dev, ((double)f_pre - (double)f_init) / MiB,
               ((double)f_pre - (double)f_end) / MiB,
               (o->nranks - dev + ndev - 1) / ndev, bad ? "WRONG" : "exact");
    NC(ncclCommDestroy(comm));
    cudaFree(ballast);
    cudaFree(send);
    cudaFree(recv);
    free(host);
    return bad;
}

int main(int argc, char **argv)
{
    opts_t o;
    int rc = parse(argc, argv, &o);

    return rc != 0 ? rc : run(&o);
}
