/* SPDX-License-Identifier: Apache-2.0 */
/*
 * One rank of the fault-matrix jobs (tests/netns): joins the job through
 * the bootstrap (the harness sets torchrun's variables), runs steps of
 * named allreduces and/or broadcasts through the engine's C API or the
 * Horovod ABI, checks every element, and reports each event as one
 * "CGNT <event> t=<CLOCK_MONOTONIC ns> ..." line on stdout for the harness.
 * Exit: 0 all steps exact, 3 a collective failed (the error was reported
 * and everything torn down), 4 a wrong element, 2 setup or usage.
 */
#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "collguard/collguard.h"
#include "collguard/hvd.h"
#include "plugin/hvd_abi.h"

typedef struct {
    int shim;          /* 1: horovod_init; 0: cg_ctx_create + core_create */
    int ops;           /* bit 0 allreduce, bit 1 broadcast */
    int steps, tensors;
    long elems;        /* per tensor */
    int idle_ms;       /* sleep after each step */
    int late_rank, late_ms;  /* that rank creates its core this late */
    int lag_rank, lag_step, lag_ms; /* that rank enqueues that step late */
} cgnt_opts_t;

typedef struct {
    cg_ctx_h ctx;
    cg_hvd_core_h core;
    int rank, size;
    float **bufs;
    cg_hvd_req_h *reqs;
} cgnt_job_t;

static unsigned long long cgnt_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (unsigned long long)ts.tv_sec * 1000000000ull +
           (unsigned long long)ts.tv_nsec;
}

static void cgnt_sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

/* Entries of a /proc/self directory, "." and ".." excluded. */
static int cgnt_count(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    int n = 0;

    if (d == NULL)
        return -1;
    while ((e = readdir(d)) != NULL)
        n += e->d_name[0] != '.';
    closedir(d);
    return n - (strcmp(dir, "/proc/self/fd") == 0); /* opendir's own fd */
}

#define cgnt_say(fmt, ...)                                                    \
    (printf("CGNT " fmt "\n", __VA_ARGS__), fflush(stdout))

static void cgnt_usage(void)
{
    fprintf(stderr,
            "usage: cgnt_rank [--shim] [--ops allreduce|broadcast|mixed]\n"
            "  [--steps N] [--tensors K] [--elems E] [--idle-ms MS]\n"
            "  [--late RANK:MS] [--lag RANK:STEP:MS]\n");
    exit(2);
}

static void cgnt_parse(int argc, char **argv, cgnt_opts_t *o)
{
    static const struct option longs[] = {
        {"shim", no_argument, NULL, 's'},
        {"ops", required_argument, NULL, 'o'},
        {"steps", required_argument, NULL, 'n'},
        {"tensors", required_argument, NULL, 'k'},
        {"elems", required_argument, NULL, 'e'},
        {"idle-ms", required_argument, NULL, 'i'},
        {"late", required_argument, NULL, 'l'},
        {"lag", required_argument, NULL, 'g'},
        {NULL, 0, NULL, 0}};
    int c;

    *o = (cgnt_opts_t){.ops = 1, .steps = 10, .tensors = 4, .elems = 1024,
                       .late_rank = -1, .lag_rank = -1};
    while ((c = getopt_long(argc, argv, "", longs, NULL)) != -1) {
        switch (c) {
        case 's': o->shim = 1; break;
        case 'o':
            o->ops = !strcmp(optarg, "allreduce") ? 1
                     : !strcmp(optarg, "broadcast") ? 2
                     : !strcmp(optarg, "mixed")     ? 3 : 0;
            if (o->ops == 0)
                cgnt_usage();
            break;
        case 'n': o->steps = atoi(optarg); break;
        case 'k': o->tensors = atoi(optarg); break;
        case 'e': o->elems = atol(optarg); break;
        case 'i': o->idle_ms = atoi(optarg); break;
        case 'l':
            if (sscanf(optarg, "%d:%d", &o->late_rank, &o->late_ms) != 2)
                cgnt_usage();
            break;
        case 'g':
            if (sscanf(optarg, "%d:%d:%d", &o->lag_rank, &o->lag_step,
                       &o->lag_ms) != 3)
                cgnt_usage();
            break;
        default: cgnt_usage();
        }
    }
    if (o->steps < 0 || o->tensors < 1 || o->tensors > 4096 || o->elems < 1)
        cgnt_usage();
}

/* Small integers, so float sums are exact in any order. */
static float cgnt_value(int rank, int step, int t, long j)
{
    return (float)((rank + 1) * (int)((t + j + step) % 7 + 1));
}

static float cgnt_bvalue(int root, int step, int t, long j)
{
    return (float)(root * 100 + (int)((t + j + step) % 13));
}

static int cgnt_start(const cgnt_opts_t *o, cgnt_job_t *job)
{
    char host[256] = "?";
    cg_status_t st;

    if (o->shim) {
        if (!horovod_init(NULL, 0, NULL, NULL, 0)) {
            cgnt_say("setup-failed t=%llu face shim: horovod_init", cgnt_now());
            return 2;
        }
        job->core = cg_hvd_global_core();
    } else {
        cg_ctx_params_t p = {.field_mask = CG_CTX_PARAM_BOOTSTRAP,
                             .bootstrap = 1};
        st = cg_ctx_create(&p, &job->ctx);
        if (st != CG_OK) {
            cgnt_say("setup-failed t=%llu face engine: cg_ctx_create: %s",
                     cgnt_now(), cg_last_error());
            return 2;
        }
        job->rank = atoi(getenv("RANK") ? getenv("RANK") : "0");
        cgnt_say("bootstrapped t=%llu rank %d", cgnt_now(), job->rank);
        if (job->rank == o->late_rank)
            cgnt_sleep_ms(o->late_ms);
        st = cg_hvd_core_create(job->ctx, &job->core);
        if (st != CG_OK) {
            cgnt_say("setup-failed t=%llu face engine: cg_hvd_core_create: "
                     "%s", cgnt_now(), cg_last_error());
            cg_ctx_destroy(job->ctx);
            return 2;
        }
    }
    job->rank = cg_hvd_core_rank(job->core);
    job->size = cg_hvd_core_size(job->core);
    gethostname(host, sizeof(host));
    cgnt_say("ready t=%llu rank %d size %d host %s pid %d", cgnt_now(),
             job->rank, job->size, host, (int)getpid());
    return 0;
}

static void cgnt_stop(const cgnt_opts_t *o, cgnt_job_t *job)
{
    cg_hvd_stats_t s;

    cg_hvd_core_stats(job->core, &s);
    cgnt_say("stats t=%llu cycles %llu stalls_warned %llu", cgnt_now(),
             (unsigned long long)s.cycles,
             (unsigned long long)s.stalls_warned);
    if (o->shim) {
        horovod_shutdown();
    } else {
        cg_hvd_core_destroy(job->core);
        cg_ctx_destroy(job->ctx);
    }
}

/* Enqueues step's tensors (all allreduce or all broadcast) and waits for
 * them: 0 exact, 3 a request failed, 4 a wrong element. */
static int cgnt_step(const cgnt_opts_t *o, cgnt_job_t *job, int step,
                     int bcast)
{
    int root = step % job->size, failed = -1, rc = 0;
    const char *what = bcast ? "broadcast" : "allreduce";
    float sum = (float)(job->size * (job->size + 1) / 2);

    for (int t = 0; t < o->tensors; t++) {
        char name[64];
        cg_hvd_tensor_t tn = {.name = name, .dtype = CG_DTYPE_F32, .ndim = 1,
                              .shape = {o->elems}, .input = job->bufs[t],
                              .output = job->bufs[t],
                              .flags = CG_HVD_IS_LEAF};
        cg_status_t st;

        snprintf(name, sizeof(name), "%s.%d", what, t);
        for (long j = 0; j < o->elems; j++)
            job->bufs[t][j] = bcast ? (job->rank == root
                                           ? cgnt_bvalue(root, step, t, j)
                                           : -1.0f)
                                    : cgnt_value(job->rank, step, t, j);
        st = bcast ? cg_hvd_enqueue_broadcast(job->core, &tn, root,
                                              &job->reqs[t])
                   : cg_hvd_enqueue_allreduce(job->core, &tn, CG_OP_SUM, 1.0,
                                              1.0, &job->reqs[t]);
        if (st != CG_OK) {
            cgnt_say("error t=%llu rank %d step %d op %s enqueue %s: %s",
                     cgnt_now(), job->rank, step, what, cg_status_name(st),
                     cg_last_error());
            for (int u = 0; u < t; u++)
                cg_hvd_wait(job->reqs[u]), cg_hvd_release(job->reqs[u]);
            return 3;
        }
    }
    for (int t = 0; t < o->tensors; t++) {
        cg_status_t st = cg_hvd_wait(job->reqs[t]);
        if (st != CG_OK && failed < 0) {
            failed = t;
            cgnt_say("error t=%llu rank %d step %d op %s tensor %d %s: %s",
                     cgnt_now(), job->rank, step, what, t, cg_status_name(st),
                     cg_hvd_error(job->reqs[t]));
            rc = 3;
        }
        for (long j = 0; st == CG_OK && j < o->elems; j++) {
            float want = bcast ? cgnt_bvalue(root, step, t, j)
                               : sum * (float)((t + j + step) % 7 + 1);
            if (job->bufs[t][j] != want) {
                cgnt_say("wrong t=%llu rank %d step %d op %s tensor %d elem "
                         "%ld got %g want %g", cgnt_now(), job->rank, step,
                         what, t, j, (double)job->bufs[t][j], (double)want);
                rc = 4;
                break;
            }
        }
        cg_hvd_release(job->reqs[t]);
    }
    return rc;
}

static int cgnt_run(const cgnt_opts_t *o, cgnt_job_t *job)
{
    int rc = 0, step;

    for (step = 0; step < o->steps && rc == 0; step++) {
        int bcast = (o->ops == 2) || (o->ops == 3 && (step & 1));
        if (job->rank == o->lag_rank && step == o->lag_step)
            cgnt_sleep_ms(o->lag_ms);
        cgnt_say("step t=%llu rank %d step %d op %s", cgnt_now(), job->rank,
                 step, bcast ? "broadcast" : "allreduce");
        rc = cgnt_step(o, job, step, bcast);
        if (rc == 0 && o->idle_ms > 0) {
            cgnt_say("idle t=%llu rank %d step %d", cgnt_now(), job->rank,
                     step);
            cgnt_sleep_ms(o->idle_ms);
        }
    }
    if (rc == 0)
        cgnt_say("done t=%llu rank %d steps %d exact 1", cgnt_now(),
                 job->rank, step);
    return rc;
}

int main(int argc, char **argv)
{
    cgnt_opts_t o;
    cgnt_job_t job = {0};
    int rc;

    cgnt_parse(argc, argv, &o);
    rc = cgnt_start(&o, &job);
    if (rc != 0)
        return rc;
    job.bufs = calloc((size_t)o.tensors, sizeof(*job.bufs));
    job.reqs = calloc((size_t)o.tensors, sizeof(*job.reqs));
    for (int t = 0; job.bufs != NULL && t < o.tensors; t++)
        job.bufs[t] = malloc((size_t)o.elems * sizeof(float));
    for (int t = 0; job.bufs != NULL && t < o.tensors; t++)
        if (job.bufs[t] == NULL)
            rc = 2;
    if (job.bufs == NULL || job.reqs == NULL || rc != 0) {
        cgnt_say("setup-failed t=%llu no memory for %d x %ld floats",
                 cgnt_now(), o.tensors, o.elems);
        rc = 2;
    } else {
        rc = cgnt_run(&o, &job);
    }
    cgnt_stop(&o, &job);
    for (int t = 0; job.bufs != NULL && t < o.tensors; t++)
        free(job.bufs[t]);
    free(job.bufs);
    free(job.reqs);
    /* After teardown only the main thread and stdio should be left. */
    cgnt_say("exit t=%llu rank %d rc %d threads %d fds %d", cgnt_now(),
             job.rank, rc, cgnt_count("/proc/self/task"),
             cgnt_count("/proc/self/fd"));
    return rc;
}
